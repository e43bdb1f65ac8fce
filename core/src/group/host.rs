//! `GroupCoordinators`: what a broker embeds to host the coordinators of the
//! `__consumer_offsets` partitions it leads. It routes each request to the partition its group
//! hashes to, answers NotCoordinator for partitions it does not lead, and merges outputs.
//!
//! Broker wiring (the seam the replication branch plugs into):
//! * leader of `__consumer_offsets`-p at epoch e: `become_leader(p, e)`, then
//!   `load_batches(p, ..)` with the partition's batches from log start to its end offset
//!   (in as many calls as convenient), then `complete_load(now, p)`;
//! * follower of / no longer replica for p: `resign(p)`;
//! * client group request: `step(now, client, correlation, request)`; a FindCoordinator is
//!   answered with [`crate::group::find_coordinator`] from the metadata image instead;
//! * `CoordinatorOutput::Append { partition, leader_epoch, records, id, producer }`: append one
//!   batch as leader of that epoch with acks=all (with `producer`, as that producer's
//!   transactional batch, sequence `TXN_OFFSETS_SEQUENCE`); report
//!   `append_completed(now, partition, id, ..)` when it is below the HW (or failed), in log
//!   order;
//! * a transaction marker committed on a `__consumer_offsets` partition:
//!   `complete_txn(now, partition, producer_id, result)`; the load keeps markers
//!   (`RecordBatch::as_txn_marker`) among the batches it feeds;
//! * `handle_timeout(now)` at `poll_timeout()`, and send the `Respond` outputs to clients.

use crate::group::coordinator::*;
use crate::group::protocol::*;
use crate::log::RecordBatch;
use crate::types::{LeaderEpoch, Nanos, NodeId, Offset};
use std::cell::Cell;
use std::collections::BTreeMap;

pub struct GroupCoordinators {
    node: NodeId,
    num_partitions: u32,
    config: GroupConfig,
    /// Reached mutably only through [`GroupCoordinators::hosted_mut`], which forgets
    /// `timeout`.
    hosted: BTreeMap<u32, GroupCoordinator>,
    outputs: Vec<CoordinatorOutput>,
    /// [`GroupCoordinators::poll_timeout`], cached (`None`: not known): a broker asks after
    /// every step, and most steps do not reach a coordinator.
    timeout: Cell<Option<Option<Nanos>>>,
    /// At least every [`GroupCoordinator::changes`] of a coordinator this host dropped: a
    /// new one starts there, so a partition's count never repeats on this host.
    changes_floor: u64,
}

impl GroupCoordinators {
    pub fn new(node: NodeId, num_partitions: u32, config: GroupConfig) -> Self {
        assert!(num_partitions > 0, "__consumer_offsets needs partitions");
        Self {
            node,
            num_partitions,
            config,
            hosted: BTreeMap::new(),
            outputs: Vec::new(),
            timeout: Cell::new(None),
            changes_floor: 0,
        }
    }

    /// The coordinators, mutably (their cached timer forgotten), and the outputs.
    fn hosted_mut(
        &mut self,
    ) -> (
        &mut BTreeMap<u32, GroupCoordinator>,
        &mut Vec<CoordinatorOutput>,
    ) {
        self.timeout.set(None);
        (&mut self.hosted, &mut self.outputs)
    }

    /// At least every [`GroupCoordinator::changes`] any coordinator here has shown: a
    /// host that replaces this one starts there ([`Self::start_changes_at`]).
    pub(crate) fn changes_floor(&self) -> u64 {
        self.hosted
            .values()
            .map(|c| c.changes())
            .fold(self.changes_floor, u64::max)
    }

    /// Coordinators made from now on count from past `floor` (a replacement host).
    pub(crate) fn start_changes_at(&mut self, floor: u64) {
        self.changes_floor = self.changes_floor.max(floor);
    }

    pub fn num_partitions(&self) -> u32 {
        self.num_partitions
    }

    /// The coordinator of partition `p`, if this broker hosts it (any phase).
    pub fn coordinator(&self, p: u32) -> Option<&GroupCoordinator> {
        self.hosted.get(&p)
    }

    pub fn become_leader(&mut self, partition: u32, epoch: LeaderEpoch) {
        let (node, n, cfg) = (self.node, self.num_partitions, self.config.clone());
        let floor = self.changes_floor;
        let (hosted, outputs) = self.hosted_mut();
        let c = hosted.entry(partition).or_insert_with(|| {
            let mut c = GroupCoordinator::new(node, partition, n, cfg);
            c.start_changes_at(floor);
            c
        });
        c.begin_load(epoch);
        outputs.extend(c.poll_outputs());
    }

    pub fn load_batches(
        &mut self,
        partition: u32,
        batches: &[RecordBatch],
    ) -> Result<(), LoadError> {
        match self.hosted_mut().0.get_mut(&partition) {
            Some(c) => c.load_batches(batches),
            None => Ok(()),
        }
    }

    pub fn complete_load(&mut self, now: Nanos, partition: u32) -> Option<LoadSummary> {
        self.hosted_mut()
            .0
            .get_mut(&partition)
            .map(|c| c.complete_load(now))
    }

    pub fn resign(&mut self, partition: u32) {
        if let Some(mut c) = self.hosted_mut().0.remove(&partition) {
            c.unload();
            self.changes_floor = self.changes_floor.max(c.changes());
            self.outputs.extend(c.poll_outputs());
        }
    }

    pub fn step(
        &mut self,
        now: Nanos,
        from: ClientId,
        correlation: CorrelationId,
        request: GroupRequest,
    ) {
        let p = coordinator_partition(request.group_id(), self.num_partitions);
        let (hosted, outputs) = self.hosted_mut();
        match hosted.get_mut(&p) {
            Some(c) => {
                c.step(now, from, correlation, request);
                outputs.extend(c.poll_outputs());
            }
            None => outputs.push(CoordinatorOutput::Respond {
                to: from,
                correlation,
                response: GroupResponse::error_for(&request, GroupError::NotCoordinator),
            }),
        }
    }

    /// ListGroups: the groups of every coordinator hosted here; CoordinatorLoadInProgress
    /// while one is loading (its groups are not known yet), as Kafka answers.
    pub fn list_groups(&self) -> Result<Vec<GroupListing>, GroupError> {
        let mut out = Vec::new();
        for c in self.hosted.values() {
            if matches!(c.phase(), CoordinatorPhase::Loading { .. }) {
                return Err(GroupError::CoordinatorLoadInProgress);
            }
            out.extend(c.list_groups());
        }
        Ok(out)
    }

    pub fn append_completed(
        &mut self,
        now: Nanos,
        partition: u32,
        id: AppendId,
        result: Result<Offset, AppendError>,
    ) {
        let (hosted, outputs) = self.hosted_mut();
        if let Some(c) = hosted.get_mut(&partition) {
            c.append_completed(now, id, result);
            outputs.extend(c.poll_outputs());
        }
    }

    /// A transaction marker on `__consumer_offsets-{partition}` is committed (below the
    /// HW): the transactional offsets `producer_id` committed there (TxnOffsetCommit,
    /// KIP-447) take effect on `Commit` and are dropped on `Abort`. A partition this broker
    /// does not host (or still loads) ignores it: its load settles them from the log.
    pub fn complete_txn(
        &mut self,
        _now: Nanos,
        partition: u32,
        producer_id: u64,
        result: crate::txn::TxnResult,
    ) {
        let (hosted, outputs) = self.hosted_mut();
        if let Some(c) = hosted.get_mut(&partition) {
            c.complete_txn(producer_id, result);
            outputs.extend(c.poll_outputs());
        }
    }

    pub fn handle_timeout(&mut self, now: Nanos) {
        let (hosted, outputs) = self.hosted_mut();
        for c in hosted.values_mut() {
            c.handle_timeout(now);
            outputs.extend(c.poll_outputs());
        }
    }

    /// Inlined: a broker asks after every step, and the answer is mostly cached.
    #[inline]
    pub fn poll_timeout(&self) -> Option<Nanos> {
        let compute = || self.hosted.values().filter_map(|c| c.poll_timeout()).min();
        match self.timeout.get() {
            Some(t) => {
                debug_assert_eq!(t, compute(), "stale coordinator timer cache");
                t
            }
            None => {
                let t = compute();
                self.timeout.set(Some(t));
                t
            }
        }
    }

    pub fn poll_outputs(&mut self) -> Vec<CoordinatorOutput> {
        std::mem::take(&mut self.outputs)
    }

    /// Whether [`Self::poll_outputs`] would give anything.
    pub fn has_outputs(&self) -> bool {
        !self.outputs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetch(group: &str) -> GroupRequest {
        GroupRequest::OffsetFetch(OffsetFetchRequest {
            group_id: group.into(),
            partitions: None,
            require_stable: false,
        })
    }

    #[test]
    fn routes_by_partition_and_gates_on_load() {
        let mut h = GroupCoordinators::new(7, 4, GroupConfig::default());
        let g = "orders";
        let p = coordinator_partition(g, 4);
        let resp = |h: &mut GroupCoordinators| match h.poll_outputs().pop() {
            Some(CoordinatorOutput::Respond { response, .. }) => response,
            other => panic!("{other:?}"),
        };
        h.step(0, 1, 1, fetch(g));
        assert_eq!(
            resp(&mut h),
            GroupResponse::OffsetFetch(Err(GroupError::NotCoordinator))
        );
        h.become_leader(p, 3);
        h.step(0, 1, 2, fetch(g));
        assert_eq!(
            resp(&mut h),
            GroupResponse::OffsetFetch(Err(GroupError::CoordinatorLoadInProgress))
        );
        h.load_batches(p, &[]).unwrap();
        assert_eq!(h.complete_load(0, p).map(|s| s.groups), Some(0));
        h.step(0, 1, 3, fetch(g));
        // Answered once its read barrier is durable.
        match h.poll_outputs().pop() {
            Some(CoordinatorOutput::Append { id, partition, .. }) => {
                assert_eq!(partition, p);
                h.append_completed(0, p, id, Ok(0));
            }
            other => panic!("expected the read barrier, got {other:?}"),
        }
        assert_eq!(
            resp(&mut h),
            GroupResponse::OffsetFetch(Ok(Default::default()))
        );
        h.step(
            0,
            1,
            4,
            GroupRequest::FindCoordinator { group_id: g.into() },
        );
        assert_eq!(
            resp(&mut h),
            GroupResponse::FindCoordinator(Ok(CoordinatorInfo {
                node: 7,
                partition: p
            }))
        );
        h.resign(p);
        h.step(0, 1, 5, fetch(g));
        assert_eq!(
            resp(&mut h),
            GroupResponse::OffsetFetch(Err(GroupError::NotCoordinator))
        );
    }

    /// A partition's new coordinator (after a resignation) counts on from the old one's
    /// [`GroupCoordinator::changes`], so an observer comparing counts cannot mistake it
    /// for the coordinator it replaced.
    #[test]
    fn a_new_coordinator_counts_past_the_dropped_one() {
        let mut h = GroupCoordinators::new(7, 4, GroupConfig::default());
        let p = coordinator_partition("orders", 4);
        h.become_leader(p, 3);
        h.complete_load(0, p);
        let old = h.coordinator(p).expect("hosted").changes();
        h.resign(p);
        assert!(h.coordinator(p).is_none());
        h.become_leader(p, 4);
        assert!(h.coordinator(p).expect("hosted").changes() > old);
        h.complete_load(0, p);
        let old = h.coordinator(p).expect("hosted").changes();
        assert!(h.changes_floor() >= old);
        // A host replacing this one (the broker's, when the partition count changes).
        let mut next = GroupCoordinators::new(7, 4, GroupConfig::default());
        next.start_changes_at(h.changes_floor());
        next.become_leader(p, 5);
        assert!(next.coordinator(p).expect("hosted").changes() > old);
    }
}
