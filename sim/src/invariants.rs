//! The invariants the simulator checks while a run goes, and their violations.

use crate::time::SimTime;
use serde::Serialize;

/// No acknowledged acks=all write is lost: once acked at offset o, every later leader
/// holds it at o and consumers read it there.
pub const ACKED_WRITE_LOST: &str = "acked-write-lost";
/// Replicas agree on every offset below their high watermark.
pub const REPLICA_DIVERGENCE: &str = "replica-divergence";
/// A leader's high watermark never moves backwards within its epoch.
pub const HW_REGRESSION: &str = "hw-regression";
/// At most one broker acknowledges writes for a partition at any moment.
pub const SPLIT_BRAIN: &str = "concurrent-acking-leaders";
/// Consumers never read at or above the high watermark of the broker serving them.
pub const DIRTY_READ: &str = "dirty-read";
/// A consumer never sees the record at an offset change.
pub const RECORD_CHANGED: &str = "record-changed";
/// After the last fault heals, every partition has a leader and every acked record is
/// readable, within the liveness bound.
pub const LIVENESS: &str = "liveness";
/// The client history passes skein-jepsen's checker.
pub const HISTORY: &str = "history";
/// After the last fault heals, every follower that is up and whose log reads is back in
/// its leader's ISR within the liveness bound (a follower stuck on a divergent suffix it
/// cannot get rid of never is).
pub const UNDER_REPLICATED: &str = "under-replicated";

/// Every invariant, in report order.
pub const NAMES: &[&str] = &[
    ACKED_WRITE_LOST,
    REPLICA_DIVERGENCE,
    HW_REGRESSION,
    SPLIT_BRAIN,
    DIRTY_READ,
    RECORD_CHANGED,
    LIVENESS,
    HISTORY,
    UNDER_REPLICATED,
    crate::group_invariants::GROUP_SINGLE_OWNER,
    crate::group_invariants::GROUP_UNOWNED,
    crate::group_invariants::GROUP_OFFSET_REGRESSION,
    crate::group_invariants::GROUP_ACKED_COMMIT_LOST,
    crate::group_invariants::GROUP_UNPROCESSED,
];

/// Whether an invariant is a safety property (everything but liveness). A correct core
/// may fail liveness under faults it cannot recover from by design (a corrupt last ISR
/// copy stays offline); a safety failure is always a finding.
pub fn is_safety(name: &str) -> bool {
    name != LIVENESS
}

/// One violation: which invariant, when, and what was seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub invariant: &'static str,
    pub at: SimTime,
    pub detail: String,
}

use crate::trace::Fnv1a;
use skein_core::log::RecordBatch;
use skein_core::replica::{ReplicaView, Role};
use skein_core::{LeaderEpoch, NodeId, Offset};
use std::collections::{BTreeMap, BTreeSet};

/// Most violations kept in detail (the count is always exact).
const MAX_KEPT: usize = 64;

/// Identity of the record at an offset, as replicas must agree on it: the batch's leader
/// epoch and attributes, and the record's key and value.
pub fn record_digest(batch: &RecordBatch, record: &skein_core::log::Record) -> u64 {
    let mut h = Fnv1a::default();
    h.u64(batch.partition_leader_epoch as u64);
    h.u64(batch.attributes as u64);
    match &record.key {
        Some(k) => {
            h.u64(k.len() as u64 + 1);
            h.bytes(k);
        }
        None => h.u64(0),
    }
    match &record.value {
        Some(v) => {
            h.u64(v.len() as u64 + 1);
            h.bytes(v);
        }
        None => h.u64(0),
    }
    h.finish()
}

/// Every record of `batches` at offsets in `[from, below)`, with its value bytes.
fn records_in(
    batches: &[RecordBatch],
    from: Offset,
    below: Offset,
) -> Vec<(Offset, u64, Option<&[u8]>)> {
    let mut out = Vec::new();
    for b in batches {
        for (o, r) in b.iter_offsets() {
            if o >= from && o < below {
                out.push((o, record_digest(b, r), r.value.as_deref()));
            }
        }
    }
    out
}

struct Acked {
    offset: Offset,
    value: String,
    epoch: LeaderEpoch,
}

/// Reads a broker's local log: `(from, below) -> batches`, for audits.
pub type LogReader<'a> = &'a mut dyn FnMut(Offset, Offset) -> Result<Vec<RecordBatch>, String>;

/// The running invariant checks of one simulation.
#[derive(Default)]
pub struct Checker {
    violations: Vec<Violation>,
    counts: BTreeMap<&'static str, u64>,
    /// Acknowledged acks=all records per partition, in acknowledgement order.
    acked: BTreeMap<u32, Vec<Acked>>,
    acked_at: BTreeMap<(u32, Offset), String>,
    /// The committed log as first seen below some replica's HW: offset -> record digest.
    committed: BTreeMap<u32, BTreeMap<Offset, u64>>,
    /// Per (broker, partition): offsets below this were checked against `committed`.
    verified: BTreeMap<(NodeId, u32), Offset>,
    /// Per (broker, partition): the last HW announced as leader, with its epoch.
    leader_hw: BTreeMap<(NodeId, u32), (LeaderEpoch, Offset)>,
    /// Per partition: the leader last checked for acked records, and how many it holds.
    leader_checked: BTreeMap<u32, (NodeId, LeaderEpoch, usize)>,
    /// Per (partition, epoch): the broker that acknowledged writes at that epoch.
    acking: BTreeMap<(u32, LeaderEpoch), NodeId>,
    /// Per (partition, epoch): the offset the epoch's leader started at.
    epoch_start: BTreeMap<(u32, LeaderEpoch), Offset>,
    /// First value read at each offset.
    reads: BTreeMap<(u32, Offset), String>,
    /// Acknowledged records read back at their offset.
    read_acked: BTreeSet<(u32, Offset)>,
    /// Highest leader epoch seen per partition, to count leader changes.
    epochs: BTreeMap<u32, LeaderEpoch>,
    /// (partition, epoch) of leaders the controller elected from outside the ISR.
    unclean: BTreeSet<(u32, LeaderEpoch)>,
    /// Per partition: the last unclean leader's epoch and log end when it took over.
    /// Committed records from there on may be replaced; replicas that have not yet
    /// followed that leader are compared only below that offset.
    unclean_floor: BTreeMap<u32, (LeaderEpoch, Offset)>,
    /// Unclean elections seen (their losses are expected, and reported).
    pub unclean_elections: u64,
    pub leader_changes: u64,
}

impl Checker {
    pub fn new() -> Self {
        Self::default()
    }

    fn violate(&mut self, invariant: &'static str, at: SimTime, detail: String) {
        *self.counts.entry(invariant).or_default() += 1;
        if self.violations.len() < MAX_KEPT {
            tracing::warn!(invariant, at, %detail, "invariant violated");
            self.violations.push(Violation {
                invariant,
                at,
                detail,
            });
        }
    }

    /// Records a violation found by another checker (the group checks).
    pub fn violation(&mut self, invariant: &'static str, at: SimTime, detail: String) {
        self.violate(invariant, at, detail);
    }

    /// Violations kept (the first ones), in time order.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Exact count of violations of one invariant.
    pub fn count(&self, invariant: &str) -> u64 {
        self.counts.get(invariant).copied().unwrap_or(0)
    }

    pub fn acked_count(&self) -> u64 {
        self.acked_at.len() as u64
    }

    pub fn read_acked_count(&self) -> u64 {
        self.read_acked.len() as u64
    }

    /// A producer received an acks=all acknowledgement.
    pub fn on_client_ack(
        &mut self,
        now: SimTime,
        p: u32,
        offset: Offset,
        value: String,
        epoch: LeaderEpoch,
    ) {
        if let Some(prev) = self.acked_at.get(&(p, offset)) {
            if *prev != value {
                let d = format!("partition {p} offset {offset}: acknowledged twice, as {prev:?} and as {value:?}");
                self.violate(ACKED_WRITE_LOST, now, d);
            }
            return;
        }
        if let Some(read) = self.reads.get(&(p, offset)) {
            if *read != value {
                let d = format!("partition {p} offset {offset}: acknowledged {value:?} but a consumer read {read:?} there");
                self.violate(ACKED_WRITE_LOST, now, d);
            } else {
                self.read_acked.insert((p, offset));
            }
        }
        self.acked_at.insert((p, offset), value.clone());
        self.acked.entry(p).or_default().push(Acked {
            offset,
            value,
            epoch,
        });
    }

    /// A broker became leader of partition `p` at `epoch` with its log ending at `start`:
    /// offsets from `start` on belong to that epoch.
    pub fn on_became_leader(&mut self, p: u32, epoch: LeaderEpoch, start: Offset) {
        self.note_epoch(p, epoch);
        self.epoch_start.entry((p, epoch)).or_insert(start);
        if self.unclean.remove(&(p, epoch)) {
            // The unclean leader's log is the truth from here on: forget what was
            // committed past its end, and re-verify every replica from there. `start` is
            // the log end after the leader's epoch marker: the marker itself is new too.
            let start = start.saturating_sub(1);
            if let Some(c) = self.committed.get_mut(&p) {
                c.split_off(&start);
            }
            for ((_, q), v) in self.verified.iter_mut() {
                if *q == p {
                    *v = (*v).min(start);
                }
            }
            self.unclean_floor.insert(p, (epoch, start));
        }
    }

    /// The controller elected a leader from outside the ISR (unclean election enabled):
    /// acknowledged records may be lost (acked-write-lost reports them), but replicas must
    /// still converge on the new leader's log.
    pub fn on_unclean_election(&mut self, p: u32, epoch: LeaderEpoch) {
        self.unclean.insert((p, epoch));
        self.unclean_elections += 1;
    }

    /// A broker sent a successful produce response for offsets `base..=last` at `epoch`.
    ///
    /// A deposed leader may still answer, late, for records its successor already holds
    /// (they were replicated before the successor was elected). What must never happen is
    /// two brokers acknowledging the same offsets: an acknowledgement at epoch e for an
    /// offset at or past the start of a newer epoch, or two brokers acknowledging at one
    /// epoch.
    pub fn on_broker_ack(
        &mut self,
        now: SimTime,
        broker: NodeId,
        p: u32,
        epoch: LeaderEpoch,
        last: Offset,
    ) {
        if let Some(((_, newer), start)) = self
            .epoch_start
            .range((p, epoch + 1)..(p + 1, 0))
            .find(|(_, &s)| s <= last)
        {
            let d = format!("partition {p}: broker {broker} acknowledged offset {last} at epoch {epoch}, but epoch {newer} began at offset {start}: two leaders acknowledged the same offsets");
            self.violate(SPLIT_BRAIN, now, d);
        }
        match self.acking.get(&(p, epoch)).copied() {
            Some(b) if b != broker => {
                let d = format!("partition {p}: brokers {b} and {broker} both acknowledged writes at epoch {epoch}");
                self.violate(SPLIT_BRAIN, now, d);
            }
            Some(_) => {}
            None => {
                self.acking.insert((p, epoch), broker);
            }
        }
    }

    /// A leader announced a high watermark.
    pub fn on_leader_hw(
        &mut self,
        now: SimTime,
        broker: NodeId,
        p: u32,
        epoch: LeaderEpoch,
        hw: Offset,
    ) {
        self.note_epoch(p, epoch);
        let key = (broker, p);
        match self.leader_hw.get(&key).copied() {
            Some((e, prev)) if e == epoch && hw < prev => {
                let d = format!("partition {p}: leader {broker} moved its HW back from {prev} to {hw} within epoch {epoch}");
                self.violate(HW_REGRESSION, now, d);
            }
            Some((e, prev)) if e == epoch && hw <= prev => {}
            Some((e, _)) if e > epoch => {}
            _ => {
                self.leader_hw.insert(key, (epoch, hw));
            }
        }
    }

    fn note_epoch(&mut self, p: u32, epoch: LeaderEpoch) {
        let e = self.epochs.entry(p).or_insert(0);
        if epoch > *e {
            self.leader_changes += (epoch - *e) as u64;
            *e = epoch;
        }
    }

    /// A broker served records to a consumer while its HW was `hw`.
    pub fn on_served(
        &mut self,
        now: SimTime,
        broker: NodeId,
        p: u32,
        batches: &[RecordBatch],
        hw: Offset,
    ) {
        for b in batches {
            if b.next_offset() > hw && !b.records.is_empty() {
                let d = format!("partition {p}: broker {broker} served offsets {}..{} to a consumer with its HW at {hw}", b.base_offset, b.next_offset());
                self.violate(DIRTY_READ, now, d);
            }
        }
    }

    /// A consumer received the record `value` at `offset`.
    pub fn on_read(&mut self, now: SimTime, p: u32, offset: Offset, value: &str, from: NodeId) {
        match self.reads.get(&(p, offset)) {
            Some(prev) if prev != value => {
                let d = format!("partition {p} offset {offset}: read {prev:?} earlier, now {value:?} from broker {from}");
                self.violate(RECORD_CHANGED, now, d);
            }
            Some(_) => {}
            None => {
                self.reads.insert((p, offset), value.to_string());
            }
        }
        if let Some(acked) = self.acked_at.get(&(p, offset)) {
            if acked == value {
                self.read_acked.insert((p, offset));
            } else {
                let d = format!("partition {p} offset {offset}: acknowledged {acked:?} but broker {from} served {value:?}");
                self.violate(ACKED_WRITE_LOST, now, d);
            }
        }
    }

    /// Checks one replica: its log below its HW against the committed log; if it leads,
    /// that it holds every acknowledged record (of its epoch or older) at its offset.
    pub fn audit(&mut self, now: SimTime, broker: NodeId, view: &ReplicaView, read: LogReader<'_>) {
        let p = view.tp.partition;
        let key = (broker, p);
        let mut from = self
            .verified
            .get(&key)
            .copied()
            .unwrap_or(0)
            .max(view.log_start_offset);
        if view.log_end_offset < from {
            from = view.log_end_offset; // truncated: re-verify what comes back
        }
        let mut hw = view.high_watermark.min(view.log_end_offset);
        if let Some(&(e, floor)) = self.unclean_floor.get(&p) {
            if view.latest_log_epoch.is_none_or(|l| l < e) {
                hw = hw.min(floor); // not yet truncated to the unclean leader's log
            }
        }
        if hw > from {
            if let Ok(batches) = read(from, hw) {
                let recs = records_in(&batches, from, hw);
                let mut upto = from;
                let committed = self.committed.entry(p).or_default();
                let mut bad = Vec::new();
                for (o, d, _) in &recs {
                    match committed.get(o) {
                        Some(c) if c != d => bad.push(*o),
                        Some(_) => {}
                        None => {
                            committed.insert(*o, *d);
                        }
                    }
                    upto = upto.max(o + 1);
                }
                if let Some(o) = bad.first() {
                    let d = format!("partition {p}: broker {broker} holds a different record at offset {o} below its HW {hw} ({} offsets differ)", bad.len());
                    self.violate(REPLICA_DIVERGENCE, now, d);
                }
                from = if recs.is_empty() { from } else { upto };
            }
        }
        self.verified.insert(key, from);

        if view.role != Role::Leader {
            return;
        }
        self.note_epoch(p, view.leader_epoch);
        self.on_leader_hw(now, broker, p, view.leader_epoch, view.high_watermark);
        let (b, e, mut n) =
            self.leader_checked
                .get(&p)
                .copied()
                .unwrap_or((broker, view.leader_epoch, 0));
        if (b, e) != (broker, view.leader_epoch) {
            n = 0;
        }
        let Some(acked) = self.acked.get(&p) else {
            self.leader_checked
                .insert(p, (broker, view.leader_epoch, n));
            return;
        };
        // The acknowledged records this leader must hold and has not been checked for: up
        // to the first one acknowledged by a newer epoch (a deposed leader need not have
        // what its successors acknowledged).
        let pending: Vec<&Acked> = acked[n..]
            .iter()
            .take_while(|a| a.epoch <= view.leader_epoch)
            .collect();
        let mut missing: Vec<String> = Vec::new();
        if !pending.is_empty() {
            // One read for all of them: a log read costs the length of the range.
            let lo = pending.iter().map(|a| a.offset).min().unwrap_or(0);
            let hi = pending
                .iter()
                .map(|a| a.offset + 1)
                .max()
                .unwrap_or(0)
                .min(view.log_end_offset);
            let held: BTreeMap<Offset, Option<Vec<u8>>> = if hi > lo {
                match read(lo, hi) {
                    Ok(batches) => records_in(&batches, lo, hi)
                        .into_iter()
                        .map(|(o, _, v)| (o, v.map(<[u8]>::to_vec)))
                        .collect(),
                    // Unreadable now (an injected read error): try again at the next audit.
                    Err(_) => return,
                }
            } else {
                BTreeMap::new()
            };
            for a in &pending {
                if a.offset >= view.log_end_offset {
                    missing.push(format!(
                        "offset {} ({:?}) is past its log end {}",
                        a.offset, a.value, view.log_end_offset
                    ));
                    continue;
                }
                match held.get(&a.offset) {
                    Some(Some(v)) if v.as_slice() == a.value.as_bytes() => {}
                    Some(v) => missing.push(format!(
                        "offset {} holds {:?}, not {:?}",
                        a.offset,
                        v.as_deref().map(String::from_utf8_lossy),
                        a.value
                    )),
                    None => missing.push(format!(
                        "offset {} ({:?}) is not in its log",
                        a.offset, a.value
                    )),
                }
            }
            n += pending.len();
        }
        self.leader_checked
            .insert(p, (broker, view.leader_epoch, n));
        if let Some(first) = missing.first() {
            let d = format!("partition {p}: leader {broker} at epoch {}: acknowledged record lost: {first} ({} lost)", view.leader_epoch, missing.len());
            self.violate(ACKED_WRITE_LOST, now, d);
        }
    }

    /// End of run: liveness. `leaderless` lists partitions without a serving leader.
    pub fn finish_liveness(&mut self, now: SimTime, leaderless: &[u32], bound: SimTime) {
        if !leaderless.is_empty() {
            let d = format!(
                "partitions {leaderless:?} have no serving leader {} after the last fault healed",
                crate::time::Human(bound)
            );
            self.violate(LIVENESS, now, d);
        }
        let unread: Vec<(u32, Offset)> = self
            .acked_at
            .keys()
            .filter(|k| !self.read_acked.contains(k))
            .copied()
            .collect();
        if let Some((p, o)) = unread.first() {
            let d = format!(
                "{} acknowledged records not read back {} after the last fault healed (first: partition {p} offset {o} {:?})",
                unread.len(),
                crate::time::Human(bound),
                self.acked_at[&(*p, *o)]
            );
            self.violate(LIVENESS, now, d);
        }
    }

    /// End of run: `stuck` lists (partition, follower, leader) for followers that are up,
    /// online and following a serving leader, but not in its ISR.
    pub fn finish_replication(
        &mut self,
        now: SimTime,
        stuck: &[(u32, NodeId, NodeId)],
        bound: SimTime,
    ) {
        if let Some((p, f, l)) = stuck.first() {
            let d = format!(
                "partition {p}: follower {f} is not back in leader {l}'s ISR {} after the last fault healed ({} such replicas)",
                crate::time::Human(bound),
                stuck.len()
            );
            self.violate(UNDER_REPLICATED, now, d);
        }
    }

    /// Acknowledged records never read back at their offset.
    pub fn unread(&self) -> u64 {
        self.acked_at.len() as u64 - self.read_acked.len() as u64
    }

    /// Records the checker result of the client history.
    pub fn history_failed(&mut self, now: SimTime, detail: String) {
        self.violate(HISTORY, now, detail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skein_core::TopicPartition;

    fn batch(base: Offset, epoch: LeaderEpoch, values: &[&str]) -> RecordBatch {
        RecordBatch {
            base_offset: base,
            partition_leader_epoch: epoch,
            ..RecordBatch::from_values(0, values.iter().map(|v| v.as_bytes().to_vec()))
        }
    }

    fn view(role: Role, epoch: LeaderEpoch, hw: Offset, leo: Offset) -> ReplicaView {
        ReplicaView {
            tp: TopicPartition::new("sim", 0),
            role,
            leader_epoch: epoch,
            partition_epoch: epoch,
            high_watermark: hw,
            log_start_offset: 0,
            log_end_offset: leo,
            flushed_offset: leo,
            latest_log_epoch: Some(epoch),
            isr: vec![1, 2, 3],
            maximal_isr: vec![1, 2, 3],
            replicas: vec![1, 2, 3],
        }
    }

    fn reader(
        log: Vec<RecordBatch>,
    ) -> impl FnMut(Offset, Offset) -> Result<Vec<RecordBatch>, String> {
        move |from, below| {
            Ok(log
                .iter()
                .filter(|b| b.next_offset() > from && b.base_offset < below)
                .cloned()
                .collect())
        }
    }

    #[test]
    fn divergence_below_hw_is_caught() {
        let mut c = Checker::new();
        let mut r1 = reader(vec![batch(0, 1, &["a", "b", "c"])]);
        c.audit(1, 1, &view(Role::Leader, 1, 3, 3), &mut r1);
        let mut r2 = reader(vec![batch(0, 1, &["a", "x", "c"])]);
        c.audit(2, 2, &view(Role::Follower { leader: 1 }, 1, 3, 3), &mut r2);
        assert_eq!(c.count(REPLICA_DIVERGENCE), 1);
        // Above the HW, difference is allowed.
        let mut c = Checker::new();
        c.audit(
            1,
            1,
            &view(Role::Leader, 1, 1, 3),
            &mut reader(vec![batch(0, 1, &["a", "b", "c"])]),
        );
        c.audit(
            2,
            2,
            &view(Role::Follower { leader: 1 }, 1, 1, 3),
            &mut reader(vec![batch(0, 1, &["a", "x", "c"])]),
        );
        assert_eq!(c.count(REPLICA_DIVERGENCE), 0);
    }

    #[test]
    fn new_leader_missing_acked_record_is_a_loss() {
        let mut c = Checker::new();
        c.on_client_ack(5, 0, 1, "b".into(), 1);
        c.audit(
            6,
            2,
            &view(Role::Leader, 2, 1, 1),
            &mut reader(vec![batch(0, 1, &["a"])]),
        );
        assert_eq!(c.count(ACKED_WRITE_LOST), 1);
        // A deposed leader (older epoch) is not required to have it.
        let mut c = Checker::new();
        c.on_client_ack(5, 0, 1, "b".into(), 3);
        c.audit(
            6,
            2,
            &view(Role::Leader, 2, 1, 1),
            &mut reader(vec![batch(0, 1, &["a"])]),
        );
        assert_eq!(c.count(ACKED_WRITE_LOST), 0);
        // Holding it at the right offset passes.
        c.audit(
            7,
            1,
            &view(Role::Leader, 3, 2, 2),
            &mut reader(vec![batch(0, 1, &["a", "b"])]),
        );
        assert_eq!(c.count(ACKED_WRITE_LOST), 0);
        assert_eq!(c.count(REPLICA_DIVERGENCE), 0);
    }

    #[test]
    fn reads_acks_and_hw_rules() {
        let mut c = Checker::new();
        c.on_client_ack(1, 0, 4, "v".into(), 1);
        c.on_read(2, 0, 4, "v", 1);
        assert_eq!(c.read_acked_count(), 1);
        c.on_read(3, 0, 4, "w", 2);
        assert_eq!(c.count(RECORD_CHANGED), 1);
        assert_eq!(c.count(ACKED_WRITE_LOST), 1);
        c.on_served(4, 1, 0, &[batch(3, 1, &["x", "y"])], 4);
        assert_eq!(c.count(DIRTY_READ), 1);
        c.on_leader_hw(5, 1, 0, 1, 10);
        c.on_leader_hw(6, 1, 0, 1, 9);
        assert_eq!(c.count(HW_REGRESSION), 1);
        c.on_leader_hw(7, 1, 0, 2, 3);
        assert_eq!(c.count(HW_REGRESSION), 1, "a new epoch may start lower");
        c.on_broker_ack(8, 1, 0, 2, 5);
        c.on_broker_ack(9, 2, 0, 2, 6);
        assert_eq!(c.count(SPLIT_BRAIN), 1, "two brokers at one epoch");
        c.on_became_leader(0, 3, 10);
        c.on_broker_ack(10, 1, 0, 2, 9);
        assert_eq!(
            c.count(SPLIT_BRAIN),
            1,
            "a late answer for records the successor holds"
        );
        c.on_broker_ack(10, 1, 0, 2, 10);
        assert_eq!(c.count(SPLIT_BRAIN), 2, "an offset of the newer epoch");
        c.finish_liveness(11, &[], 0);
        assert_eq!(c.count(LIVENESS), 0);
        c.on_client_ack(12, 1, 0, "z".into(), 1);
        c.finish_liveness(13, &[2], 0);
        assert_eq!(c.count(LIVENESS), 2);
    }
}
