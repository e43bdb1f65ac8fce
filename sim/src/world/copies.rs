//! End of run, for a partition left without a serving leader: did the injected faults
//! destroy every copy of some acknowledged record? Then no protocol can bring the
//! partition back whole, and the report says so ("all copies of committed records
//! destroyed by injected faults", naming the offsets) instead of failing `liveness`.
//! Otherwise some replica still holds each acknowledged record intact and the partition
//! being leaderless is the protocol's failure to recover: `liveness` fails.
//!
//! A copy counts when some broker's disk holds the record's batch intact (its CRC checks
//! and the value is the acknowledged one), read straight from the segment files, whatever
//! the broker made of its log (a log that refused to open still holds its intact batches).
//! Batches are framed by their length fields; a damaged length ends the scan of that
//! segment, so a copy behind it is not counted (the verdict then errs towards
//! "destroyed" only where the framing itself was destroyed).

use super::World;
use crate::topic::{value_of, TOPIC};
use skein_core::log::{RecordBatch, LOG_OVERHEAD};
use skein_core::Offset;
use std::collections::{BTreeMap, BTreeSet};

impl World {
    /// For each partition of `leaderless`: the acknowledged offsets no broker's disk holds
    /// intact (empty when every acknowledged record has a copy).
    pub(super) fn destroyed_copies(&self, leaderless: &[u32]) -> BTreeMap<u32, Vec<Offset>> {
        let mut out = BTreeMap::new();
        for &p in leaderless {
            let acked = self.checker.acked_records(p);
            if acked.is_empty() {
                continue;
            }
            let mut held: BTreeSet<(Offset, skein_jepsen::Text)> = BTreeSet::new();
            let prefix = format!("{TOPIC}-{p}.");
            for slot in self.brokers.values() {
                let mem = slot.disk.mem();
                for (path, _, _) in mem.files() {
                    if !(path.starts_with(&prefix) && path.ends_with(".log")) {
                        continue;
                    }
                    if let Some(bytes) = mem.contents(&path) {
                        intact_records(&bytes, &mut held);
                    }
                }
            }
            let gone: Vec<Offset> = acked
                .into_iter()
                .filter(|(o, v)| !held.contains(&(*o, v.clone())))
                .map(|(o, _)| o)
                .collect();
            if !gone.is_empty() {
                out.insert(p, gone);
            }
        }
        out
    }
}

/// Every record of every intact batch of one segment file, as (offset, value).
fn intact_records(bytes: &[u8], held: &mut BTreeSet<(Offset, skein_jepsen::Text)>) {
    let mut pos = 0usize;
    while pos + LOG_OVERHEAD <= bytes.len() {
        let len = u32::from_be_bytes(bytes[pos + 8..pos + 12].try_into().expect("4 bytes"));
        let end = pos + LOG_OVERHEAD + len as usize;
        if len == 0 || end > bytes.len() {
            break; // the framing is gone (or a torn tail): nothing further can be found
        }
        if let Ok((batch, _)) = RecordBatch::decode(&bytes[pos..end]) {
            for (offset, record) in batch.data_records() {
                if let Some(v) = &record.value {
                    held.insert((offset, value_of(v)));
                }
            }
        }
        pos = end;
    }
}
