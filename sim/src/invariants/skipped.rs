//! consumer-skipped-records: a partition consumer never passes over a record silently.
//!
//! A consumer's position only moves forward past what it read, or back when its cursor
//! reports a truncation (KIP-320 for consumers: the leader answered `DivergingEpoch`). At the
//! end of the run every record of the final committed log that a consumer's position passed
//! must have been read by it there (the same value at the same offset), or lie in a range a
//! truncation it reported gave up. A consumer that never detects the truncation an unclean
//! election made (the bug zoo's `consumer-ignores-truncation`) waits until the log grows past
//! its old position and skips what was written at the truncated offsets: those records are in
//! the final log, at offsets it passed, and it read other values there or nothing.
//!
//! Judged only for consumers alive at the end whose last answered fetch came from the final
//! leader at its epoch: that leader checked their position against its log (a consumer cut
//! off, paused or crashed has not been told yet, which is not a skip).

use super::offset_map::OffsetMap;
use super::{Checker, SKIPPED_RECORDS};
use crate::time::SimTime;
use skein_core::client::Truncation;
use skein_core::log::RecordBatch;
use skein_core::{LeaderEpoch, Offset};
use skein_jepsen::Text;
use std::collections::BTreeSet;

/// What one consumer did in one partition.
#[derive(Default)]
pub(super) struct ConsumerTrack {
    /// Where its current stint began (0 for a partition consumer; a group member's
    /// assigned, reset or sought position): offsets below were another reader's to read.
    start: Offset,
    position: Offset,
    /// The leader epoch of the last fetch answer.
    served_epoch: Option<LeaderEpoch>,
    /// The last value read at each offset (looked up only). Reads come in offset order
    /// from the stint's start, so dense by offset: a hashed map of them was rehashed as it
    /// grew, ~0.5% of a simulation.
    read: OffsetMap<Text>,
    /// `[to, from)` of every truncation the consumer reported.
    truncated: Vec<(Offset, Offset)>,
}

/// The final leader's committed log of one partition, as the end-of-run judgement needs it.
pub struct FinalLog<'a> {
    pub partition: u32,
    pub leader_epoch: LeaderEpoch,
    pub high_watermark: Offset,
    /// Its batches below the high watermark.
    pub batches: &'a [RecordBatch],
}

impl Checker {
    /// A fetch answered by a leader at `epoch` moved consumer `client` in partition `p` to
    /// `to`, reading `records` on the way.
    pub fn on_consumer_poll(
        &mut self,
        client: u64,
        p: u32,
        to: Offset,
        records: impl IntoIterator<Item = (Offset, Text)>,
        epoch: LeaderEpoch,
    ) {
        let t = self.consumers.entry((client, p)).or_default();
        t.position = to;
        t.served_epoch = Some(epoch);
        for (o, v) in records {
            t.read.insert(o, v);
        }
    }

    /// Group member `client` starts reading `p` at `at` (a new assignment, a reset or a
    /// seek): only what it passes from there on is its own.
    pub fn on_consumer_start(&mut self, client: u64, p: u32, at: Offset) {
        self.consumers.insert(
            (client, p),
            ConsumerTrack {
                start: at,
                position: at,
                ..ConsumerTrack::default()
            },
        );
    }

    /// Group member `client` gave `p` up: it is judged there no more.
    pub fn on_consumer_stop(&mut self, client: u64, p: u32) {
        self.consumers.remove(&(client, p));
    }

    /// Consumer `client` reported a truncation in partition `p`. The first reads at the
    /// offsets given up and above (any reader's) are no longer the first reads there: what
    /// is read next at them is the new log's record, which record-changed must not call a
    /// change.
    pub fn on_consumer_truncation(&mut self, client: u64, p: u32, t: &Truncation) {
        let track = self.consumers.entry((client, p)).or_default();
        track.position = t.to;
        track.start = track.start.min(t.to);
        track.truncated.push((t.to, t.from));
        // The leader's answer says its log departs from what this consumer read at `t.to`:
        // every first read at or above it, whoever made it, may be of a record the
        // election discarded, so none of them may call the new log's record a change.
        self.forget_reads_from(p, t.to);
    }

    /// Drops the first reads of partition `p` at offsets `from` and above.
    pub(crate) fn forget_reads_from(&mut self, p: u32, from: Offset) {
        self.reads.truncate(p, from);
    }

    /// End of run, for one partition: every consumer in `live` judged against `log`.
    pub fn finish_skipped(&mut self, now: SimTime, live: &BTreeSet<u64>, log: &FinalLog<'_>) {
        let p = log.partition;
        let mut found = Vec::new();
        for ((client, _), t) in self.consumers.iter().filter(|((_, q), _)| *q == p) {
            if !live.contains(client) || t.served_epoch != Some(log.leader_epoch) {
                continue;
            }
            let below = t.position.min(log.high_watermark);
            let mut skipped: Vec<(Offset, Text)> = Vec::new();
            for b in log.batches {
                for (o, r) in b
                    .data_records()
                    .filter(|(o, _)| (t.start..below).contains(o))
                {
                    let bytes = r.value.as_deref().unwrap_or_default();
                    let read = t.read.get(o);
                    // Text whose bytes are the value's is the text the value makes: read
                    // there, so not skipped (nearly every record; no text built for it).
                    if read.is_some_and(|x| x.as_bytes() == bytes) {
                        continue;
                    }
                    let value = crate::topic::value_of(bytes);
                    let covered = t.truncated.iter().any(|(lo, hi)| (*lo..*hi).contains(&o));
                    if read != Some(&value) && !covered {
                        skipped.push((o, value));
                    }
                }
            }
            if let Some((o, v)) = skipped.first() {
                let seen = match t.read.get(*o) {
                    Some(x) => format!("it read {x:?} there"),
                    None => "it read nothing there".into(),
                };
                found.push(format!("partition {p}: consumer client-{client} passed offset {o} ({v:?}) of the final log without reading it ({seen}) and reported no truncation covering it ({} records skipped, position {})", skipped.len(), t.position));
            }
        }
        for d in found {
            self.violate(SKIPPED_RECORDS, now, d);
        }
    }
}
