//! Observing the cluster for the checks and the viewer, without changing it: the group
//! coordinator's state, brokers' answers to clients, the periodic audit of every replica
//! and the controller's ISRs, who leads what, and the fault atlas's view of a fault.

use super::delivery::DivergingAnswer;
use super::World;
use crate::faults::{Fault, NodeRef};
use crate::fields::Fields;
use crate::invariants;
use crate::time::SimTime;
use crate::topic::TOPIC;
use skein_core::group::{coordinator_partition, CoordinatorPhase};
use skein_core::message::{Message, ProduceResponse};
use skein_core::replica::{ReplicaRole, ReplicaView};
use skein_core::{NodeId, Offset, TopicPartition};

impl World {
    /// Feeds the group checks with what the group's coordinator on broker `id` holds. Runs
    /// after every broker step, so it first asks the checks whether that state is the one
    /// they last saw there with nothing changed since, and builds it only if not.
    pub(super) fn observe_coordinator(&mut self, id: NodeId, now: SimTime) {
        let Some(gc) = self.group.as_mut() else {
            return;
        };
        let gid = &self.cfg.group_id;
        let cache = &mut self.coordinator_partition;
        let slot = self.brokers.get(id);
        let incarnation = slot.map_or(0, |s| s.incarnation);
        let coordinator = slot
            .and_then(|s| s.machine.as_ref())
            .and_then(|b| b.group_coordinators())
            .and_then(|cs| {
                let n = cs.num_partitions();
                // The group's partition is a hash of its id: computed once per count.
                let p = match *cache {
                    Some((m, p)) if m == n => p,
                    _ => {
                        let p = coordinator_partition(gid, n);
                        *cache = Some((n, p));
                        p
                    }
                };
                cs.coordinator(p).map(|c| (n, c))
            });
        let stamp = coordinator.map(|(n, c)| (incarnation, n, c.changes()));
        let coordinator = coordinator.and_then(|(_, c)| match c.phase() {
            CoordinatorPhase::Active { epoch } => Some((*epoch, c)),
            _ => None,
        });
        fn offsets<'a>(
            c: &'a skein_core::group::GroupCoordinator,
            gid: &'a str,
        ) -> impl Iterator<Item = (u32, Offset)> + 'a {
            c.committed_offsets(gid)
                .into_iter()
                .flatten()
                .filter_map(|(tp, o)| (tp.topic == TOPIC).then_some((tp.partition, o)))
        }
        let unchanged =
            gc.coordinator_unchanged(id, stamp, || coordinator.map(|(e, c)| (e, offsets(c, gid))));
        if unchanged {
            return;
        }
        let state = coordinator.map(|(e, c)| (e, offsets(c, gid).collect()));
        gc.on_coordinator(&mut self.checker, now, id, stamp, state);
    }

    /// fenced-broker-ack: an acknowledgement must not come from a broker the committed
    /// metadata fenced. Judged where brokers hold a session lease (a controller quorum),
    /// and not for a broker whose clock a fault struck (its lease runs on that clock).
    fn check_fenced_ack(&mut self, id: NodeId, now: SimTime, r: &ProduceResponse) {
        if self.cfg.controllers == 1 || r.result.is_err() || self.clock_faulted.contains(&id) {
            return;
        }
        let epoch = self
            .brokers
            .get(id)
            .and_then(|s| s.machine.as_ref())
            .and_then(|b| b.broker_epoch());
        if let Some(epoch) = epoch {
            self.checker.on_fenced_check(now, id, epoch);
        }
    }

    /// Checks a broker's answer to a client as it leaves the broker.
    pub(super) fn check_client_response(
        &mut self,
        id: NodeId,
        client: u64,
        now: SimTime,
        msg: &Message,
    ) {
        match msg {
            Message::ProduceResponse(r) => {
                if let (Ok(ack), true) = (&r.result, r.tp.topic == TOPIC) {
                    let records = self
                        .produce_sizes
                        .get(&(client, r.correlation))
                        .copied()
                        .unwrap_or(1);
                    let last = ack.base_offset + records.saturating_sub(1) as u64;
                    self.checker
                        .on_broker_ack(now, id, r.tp.partition, ack.leader_epoch, last);
                }
                self.check_fenced_ack(id, now, r);
            }
            Message::ConsumerFetchResponse(r) => {
                if let Ok(recs) = &r.result {
                    let hw = self
                        .brokers
                        .get(id)
                        .and_then(|s| s.machine.as_ref())
                        .and_then(|b| b.high_watermark(&r.tp))
                        .unwrap_or(0);
                    self.checker
                        .on_served(now, id, r.tp.partition, &recs.batches, hw);
                    if self.checker.txn_enabled() && r.tp.topic == TOPIC {
                        self.checker.on_txn_served(now, id, r.tp.partition, recs);
                    }
                }
            }
            _ => {}
        }
    }

    /// Passes the history events recorded since the last call to the tracer's recorder.
    pub(super) fn history_to_tracer(&mut self) {
        for e in self.history.take_pending() {
            self.tracer.fields(e.time, Fields::History(&e));
        }
    }

    /// Audits every replica of every topic on every live broker (replicas presuming
    /// leadership first: their HWs bound strong-isr), checks the controller's partition
    /// states (leader-in-isr), then the members of the controller's ISRs (strong-isr). A
    /// crashed controller or broker is skipped: nothing of it can be observed.
    pub(super) fn audit(&mut self, now: SimTime) {
        self.checker.begin_audit();
        let quorum: Vec<(TopicPartition, Vec<NodeId>)> =
            match super::controllers::audit_image(&self.controllers, self.raft_commit_seen) {
                Some(image) => image
                    .partitions()
                    .map(|(tp, st)| {
                        self.checker.leader_in_isr(now, &tp, st.leader, &st.isr);
                        (tp, st.isr.clone())
                    })
                    .collect(),
                None => Vec::new(),
            };
        let mut views: Vec<(NodeId, ReplicaView)> = Vec::new();
        for (id, slot) in self.brokers.iter() {
            if let Some(b) = slot.machine.as_ref() {
                views.extend(b.views().into_iter().map(|v| (id, v)));
            }
        }
        // Leaders first, each group in the order built (two passes rather than a stable sort
        // of the views).
        let leaders = views.iter().filter(|(_, v)| v.role == ReplicaRole::Leader);
        let others = views.iter().filter(|(_, v)| v.role != ReplicaRole::Leader);
        for (id, view) in leaders.chain(others) {
            self.with_reader(*id, &view.tp, |checker, read| {
                checker.audit(now, *id, view, read)
            });
        }
        for (tp, isr) in &quorum {
            for id in isr {
                let Some((_, view)) = views.iter().find(|(b, v)| b == id && v.tp == *tp) else {
                    continue;
                };
                self.with_reader(*id, tp, |checker, read| {
                    checker.strong_isr(now, *id, view, read)
                });
            }
        }
    }

    /// log-matching, after follower `id` handled `answer`: if it still follows that leader
    /// at that epoch, its log still holds the epoch the leader named (it concluded the logs
    /// agree below its new end; an older epoch means it truncated further and asks again)
    /// and ends at or below where the leader said that epoch ends (a follower that dropped
    /// the answer as stale, a retried fetch's, may still be above it), its log below its end
    /// must be the leader's. Answers from a leader that has since moved on are not judged:
    /// its log may no longer be the one it answered from.
    pub(super) fn check_log_matching(&mut self, now: SimTime, id: NodeId, answer: DivergingAnswer) {
        let DivergingAnswer {
            leader,
            tp,
            leader_epoch,
            named,
            end_offset,
        } = answer;
        let view = |b: NodeId| {
            self.brokers
                .get(b)
                .and_then(|s| s.machine.as_ref())
                .and_then(|m| m.replica_view(&tp))
        };
        let (Some(f), Some(l)) = (view(id), view(leader)) else {
            return;
        };
        if f.role != (ReplicaRole::Follower { leader })
            || f.leader_epoch != leader_epoch
            || f.latest_log_epoch != Some(named)
            || f.log_end_offset > end_offset
            || l.role != ReplicaRole::Leader
            || l.leader_epoch != leader_epoch
        {
            return;
        }
        let below = f.log_end_offset;
        let from = self
            .checker
            .matching_from(&tp, id, leader, below)
            .max(f.log_start_offset)
            .max(l.log_start_offset);
        if from >= below {
            return;
        }
        // The follower's offsets past the leader's log end differ by definition.
        let leader_below = below.min(l.log_end_offset).max(from);
        let mut read = |b: NodeId, below: Offset| {
            let mut out = None;
            self.with_reader(b, &tp, |_, read| out = read(from, below).ok());
            out
        };
        // Unreadable (an injected read error, a corrupt segment): nothing to judge.
        let (Some(fb), Some(lb)) = (read(id, below), read(leader, leader_below)) else {
            return;
        };
        self.checker.log_matching(
            now,
            &tp,
            (from, below),
            invariants::LogSlice {
                broker: id,
                batches: &fb,
            },
            invariants::LogSlice {
                broker: leader,
                batches: &lb,
            },
        );
    }

    /// Runs `f` with the checker and a reader of `tp`'s log on broker `id` (if it is up).
    pub(super) fn with_reader(
        &mut self,
        id: NodeId,
        tp: &TopicPartition,
        f: impl FnOnce(&mut invariants::Checker, invariants::LogReader<'_>),
    ) {
        let Some(slot) = self.brokers.get_mut(id) else {
            return;
        };
        let Some(b) = slot.machine.as_mut() else {
            return;
        };
        let mut read = |from, below| b.read_records(tp, from, below).map_err(|e| e.to_string());
        f(&mut self.checker, &mut read);
        // Reads for audits are not the node's I/O: charge nothing.
        let _ = slot.disk.take_latency();
    }

    /// The broker leading partition `p` now: the one acting as leader at the highest epoch.
    pub(super) fn leader_of(&self, p: u32) -> Option<NodeId> {
        let tp = TopicPartition::new(TOPIC, p);
        self.brokers
            .iter()
            .filter_map(|(id, s)| {
                let v = s.machine.as_ref()?.replica_view(&tp)?;
                (v.role == ReplicaRole::Leader).then_some((v.leader_epoch, id))
            })
            .max()
            .map(|(_, id)| id)
    }

    /// The fault atlas's view of a striking fault: its target's role, the cluster's moment.
    pub(super) fn atlas_moment(
        &self,
        f: &Fault,
    ) -> (crate::atlas::TargetRole, crate::atlas::Moment) {
        use crate::atlas::{Moment, TargetRole};
        let role = match (f, crate::atlas::target(f)) {
            (Fault::CoordinatorCrash { .. } | Fault::TxnCoordinatorCrash { .. }, _) => {
                TargetRole::Coordinator
            }
            (
                Fault::MemberCrash { .. } | Fault::MemberPause { .. } | Fault::MemberIsolate { .. },
                _,
            ) => TargetRole::Member,
            (_, Some(NodeRef::Controller(_))) => TargetRole::Controller,
            (_, Some(NodeRef::Broker(b))) => {
                if (0..self.cfg.partitions).any(|p| self.leader_of(p) == Some(b)) {
                    TargetRole::Leader
                } else {
                    TargetRole::Follower
                }
            }
            _ => TargetRole::Network,
        };
        let moment = if !self.leaderless().is_empty() {
            Moment::Electing
        } else {
            let shrunk = self.metadata_view().is_some_and(|image| {
                (0..self.cfg.partitions).any(|p| {
                    image
                        .partition(&TopicPartition::new(TOPIC, p))
                        .is_some_and(|s| s.isr.len() < s.replicas.len())
                })
            });
            if shrunk {
                Moment::UnderReplicated
            } else {
                Moment::Steady
            }
        };
        (role, moment)
    }

    /// Partitions without a leader that serves (the controller's leader, which agrees).
    pub(super) fn leaderless(&self) -> Vec<u32> {
        let Some(image) = self.metadata_view() else {
            return (0..self.cfg.partitions).collect();
        };
        (0..self.cfg.partitions)
            .filter(|&p| {
                let tp = TopicPartition::new(TOPIC, p);
                let Some(state) = image.partition(&tp) else {
                    return true;
                };
                let Some(l) = state.leader else { return true };
                let serving = self
                    .brokers
                    .get(l)
                    .and_then(|s| s.machine.as_ref())
                    .and_then(|b| b.replica_view(&tp))
                    .is_some_and(|v| {
                        v.role == ReplicaRole::Leader && v.leader_epoch == state.leader_epoch
                    });
                !serving
            })
            .collect()
    }

    /// (partition, follower, leader): followers that are up, online and following the
    /// serving leader of a partition, but not in that leader's ISR.
    pub(super) fn stuck_followers(&self) -> Vec<(u32, NodeId, NodeId)> {
        let mut out = Vec::new();
        for p in 0..self.cfg.partitions {
            let Some(l) = self.leader_of(p) else { continue };
            let tp = TopicPartition::new(TOPIC, p);
            let Some(lv) = self
                .brokers
                .get(l)
                .and_then(|s| s.machine.as_ref())
                .and_then(|b| b.replica_view(&tp))
            else {
                continue;
            };
            for (id, slot) in self.brokers.iter() {
                let Some(v) = slot.machine.as_ref().and_then(|b| b.replica_view(&tp)) else {
                    continue;
                };
                if v.role == (ReplicaRole::Follower { leader: l })
                    && v.leader_epoch == lv.leader_epoch
                    && !lv.isr.contains(&id)
                {
                    out.push((p, id, l));
                }
            }
        }
        out
    }
}
