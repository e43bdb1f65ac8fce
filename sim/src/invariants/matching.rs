//! log-matching: Raft's Log Matching property (and the TLA+ Kafka specification's replica
//! log consistency) at the one moment a Kafka follower acts on it. A leader's
//! `DivergingEpoch` answer (KIP-279/320) says "my epoch e ends at T"; a follower whose log
//! holds epoch e concludes that the two logs agree below min(T, the end of its own epoch
//! e), truncates there and fetches on from it. Whatever it keeps below that point it
//! believes is the leader's log, and it must be: a record at (offset, epoch) was written by
//! epoch e's one leader, and every replica fetched what precedes it with a validated
//! position. Unclean election does not exempt it: the unclean leader's log is still built
//! that way, and so is everything a follower keeps after truncating to it.

use super::{part, records_in, Checker, LOG_MATCHING};
use crate::time::SimTime;
use skein_core::log::RecordBatch;
use skein_core::{NodeId, Offset, TopicPartition};
use std::collections::BTreeMap;

/// One replica's log over a range, as the check reads it.
pub struct LogSlice<'a> {
    pub broker: NodeId,
    pub batches: &'a [RecordBatch],
}

impl Checker {
    /// The offset from which log-matching must read two replicas' logs: below both
    /// replicas' verified prefixes (`verified`, replica-divergence's progress) each log was
    /// already found equal to the committed log, hence to the other. A prefix that went
    /// stale (truncated and refetched between audits) only makes the check start later.
    pub fn matching_from(
        &self,
        tp: &TopicPartition,
        follower: NodeId,
        leader: NodeId,
        below: Offset,
    ) -> Offset {
        let v = |b: NodeId| self.verified(b, tp);
        v(follower).min(v(leader)).min(below)
    }

    /// A follower just acted on `leader`'s `DivergingEpoch` answer naming an epoch its own
    /// log still holds: its log below its end (`below`) must be the leader's. `from` is
    /// [`Checker::matching_from`] (raised to both log starts); the slices are both logs read
    /// over `[from, below)`.
    pub fn log_matching(
        &mut self,
        now: SimTime,
        tp: &TopicPartition,
        (from, below): (Offset, Offset),
        follower: LogSlice<'_>,
        leader: LogSlice<'_>,
    ) {
        let digests = |s: &LogSlice<'_>| -> BTreeMap<Offset, u64> {
            records_in(s.batches, from, below)
                .into_iter()
                .map(|(o, d, _)| (o, d))
                .collect()
        };
        let (f, l) = (digests(&follower), digests(&leader));
        let bad: Vec<Offset> = f
            .iter()
            .filter(|(o, d)| l.get(o) != Some(d))
            .map(|(o, _)| *o)
            .collect();
        if let Some(o) = bad.first() {
            let d = format!(
                "partition {}: follower {} truncated on leader {}'s diverging-epoch answer to {below}, believing its log below matches the leader's, but offset {o} differs ({} offsets of {from}..{below})",
                part(tp),
                follower.broker,
                leader.broker,
                bad.len()
            );
            self.violate(LOG_MATCHING, now, d);
        }
    }
}
