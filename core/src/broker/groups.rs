//! Hosting the group coordinators (`crate::group::GroupCoordinators`) inside a broker.
//!
//! The broker is the coordinators' only link to the world:
//! * **Placement.** `FindCoordinator` is answered by any broker from its metadata image. If
//!   `__consumer_offsets` does not exist yet, the broker asks the controller to create it
//!   (partitions, replication factor and min.insync from [`super::BrokerConfig`]) and
//!   answers `CoordinatorNotAvailable`; the client retries. Kafka does the same (auto-creation
//!   on the first FindCoordinator); it keeps bootstrapping deterministic, since only a
//!   request creates it, and a racing second CreateTopic is refused as already existing.
//! * **Leadership, loading, appends and their outcome** are the shared hosting mechanism
//!   of [`super::coordinator_host`] (`HostKind::Groups`): load when leading once the HW
//!   reaches the log end, acks=all appends through the replica's produce path, "the log
//!   decides" an append's outcome, unload on losing the leadership. The load keeps
//!   transaction markers (other control batches are left out): they settle KIP-447's
//!   pending transactional offsets.

use super::coordinator_host::{CoordinatorHost, HostKind, HostedCoordinators, LeaderView};
use super::{Broker, BrokerEvent};
use crate::group::{
    find_coordinator, AppendError, AppendId, CoordinatorOutput, GroupCoordinators, GroupRequest,
    GroupResponse, CONSUMER_OFFSETS_TOPIC,
};
use crate::log::{RecordBatch, Storage};
use crate::message::*;
use crate::node::NodeOutput;
use crate::replica::ReplicaRole;
use crate::types::{LeaderEpoch, Nanos, Offset, TopicPartition};

/// What the broker keeps to host coordinators.
#[derive(Default)]
pub(super) struct GroupHost {
    /// Created once `__consumer_offsets` is in the image, with its partition count.
    coordinators: Option<GroupCoordinators>,
    /// Leadership, appends in flight, produce answers (the shared mechanism).
    pub(super) host: CoordinatorHost,
    /// `__consumer_offsets`' partition count in the image as of the image's `next_offset`
    /// (the image changes only by applying records, each of which moves that offset): the
    /// pump asks on every round, and a lookup by topic name compares strings.
    offsets_partitions: Option<(Offset, Option<u32>)>,
    /// The image offset and [`super::replica_set::ReplicaSet::offsets_generation`] when
    /// the last leadership sync ended: while both stand, nothing it reads has changed and
    /// another sync would change nothing (it leaves every partition as its replica says).
    synced_at: Option<(Offset, u64)>,
    /// [`GroupCoordinators::changes_floor`] of the last host dropped: the next one starts
    /// there, so a coordinator's change count never repeats on this broker.
    changes_floor: u64,
}

impl GroupHost {
    pub(super) fn coordinators(&self) -> Option<&GroupCoordinators> {
        self.coordinators.as_ref()
    }

    pub(super) fn coordinators_mut(&mut self) -> Option<&mut GroupCoordinators> {
        self.coordinators.as_mut()
    }

    /// Inlined: the broker asks after every step, and the answer is mostly cached.
    #[inline]
    pub(super) fn poll_timeout(&self) -> Option<Nanos> {
        self.coordinators.as_ref().and_then(|c| c.poll_timeout())
    }
}

fn offsets_tp(p: u32) -> TopicPartition {
    TopicPartition::new(CONSUMER_OFFSETS_TOPIC, p)
}

impl<S: Storage + Clone> Broker<S> {
    /// The group coordinators hosted here (None until `__consumer_offsets` exists).
    pub fn group_coordinators(&self) -> Option<&GroupCoordinators> {
        self.groups.coordinators()
    }

    /// A group request from client `client`.
    pub(super) fn handle_group(
        &mut self,
        now: Nanos,
        client: u64,
        correlation: u64,
        request: GroupRequest,
    ) {
        if let GroupRequest::FindCoordinator { group_id } = &request {
            let response = GroupResponse::FindCoordinator(self.find_coordinator(now, group_id));
            self.send_group_response(client, correlation, response);
            return;
        }
        if let GroupRequest::ListGroups = &request {
            // Every coordinator this broker hosts; none before __consumer_offsets exists.
            let groups = self.groups.coordinators.as_ref();
            let r = groups.map_or(Ok(Vec::new()), |c| c.list_groups());
            self.send_group_response(client, correlation, GroupResponse::ListGroups(r));
            return;
        }
        match &mut self.groups.coordinators {
            Some(c) => c.step(now, client, correlation, request),
            None => {
                let response =
                    GroupResponse::error_for(&request, crate::group::GroupError::NotCoordinator);
                self.send_group_response(client, correlation, response);
            }
        }
    }

    fn find_coordinator(
        &mut self,
        now: Nanos,
        group_id: &str,
    ) -> Result<crate::group::CoordinatorInfo, crate::group::GroupError> {
        if group_id.is_empty() {
            return Err(crate::group::GroupError::InvalidGroupId);
        }
        let Some(topic) = self.image.topic(CONSUMER_OFFSETS_TOPIC) else {
            self.request_offsets_topic(now);
            return Err(crate::group::GroupError::CoordinatorNotAvailable);
        };
        let n = topic.config.partitions;
        let image = &self.image;
        find_coordinator(group_id, n, |p| {
            image.partition(&offsets_tp(p)).and_then(|s| s.leader)
        })
    }

    fn request_offsets_topic(&mut self, now: Nanos) {
        let config = crate::controller::TopicConfig {
            partitions: self.config.offsets_topic_partitions,
            replication_factor: self.config.offsets_topic_replication_factor,
            min_insync_replicas: self.config.offsets_topic_min_insync_replicas,
            ..Default::default()
        };
        self.request_internal_topic(now, HostKind::Groups, config);
    }

    fn send_group_response(&mut self, client: u64, correlation: u64, response: GroupResponse) {
        self.outputs.push(NodeOutput::Send {
            to: Address::Client(client),
            msg: Message::group_response(correlation, response),
        });
    }

    /// Run the coordinators' side to a fixpoint: follow leadership changes, report append
    /// completions, carry out their effects (which may complete more appends at once).
    /// Runs after every step; most steps leave nothing for it (see [`Self::groups_settled`]),
    /// so that case is a few tests here and the rounds stay out of line.
    #[inline]
    pub(super) fn pump_groups(&mut self, now: Nanos) {
        if !self.groups_settled() {
            self.pump_groups_rounds(now);
        }
    }

    /// True when a pump's first round would change nothing and end it: the leadership
    /// sync would skip (its key stands), no replica may have effects, no produce answer
    /// or append waits, and the coordinators have no outputs.
    #[inline]
    fn groups_settled(&self) -> bool {
        !self.replicas.maybe_effects()
            && self.groups.host.acks.is_empty()
            && self.groups.host.in_flight.is_empty()
            && self.groups.synced_at
                == Some((self.image.next_offset, self.replicas.offsets_generation()))
            && self
                .groups
                .coordinators
                .as_ref()
                .is_none_or(|c| !c.has_outputs())
    }

    #[inline(never)]
    fn pump_groups_rounds(&mut self, now: Nanos) {
        for _ in 0..1000 {
            let mut progressed = self.sync_group_leadership(now);
            self.collect_replica_effects();
            progressed |= self.process_hosted_acks(now, HostKind::Groups);
            let outputs = self
                .groups
                .coordinators
                .as_mut()
                .map(|c| c.poll_outputs())
                .unwrap_or_default();
            progressed |= !outputs.is_empty();
            for o in outputs {
                match o {
                    CoordinatorOutput::Respond {
                        to,
                        correlation,
                        response,
                    } => self.send_group_response(to, correlation, response),
                    CoordinatorOutput::Append {
                        id,
                        partition,
                        leader_epoch,
                        records,
                        producer,
                    } => self.hosted_append(
                        now,
                        HostKind::Groups,
                        partition,
                        id,
                        leader_epoch,
                        records,
                        producer,
                    ),
                    CoordinatorOutput::Committed {
                        group,
                        epoch,
                        offsets,
                    } => self
                        .outputs
                        .push(NodeOutput::Broker(BrokerEvent::OffsetsCommitted {
                            group,
                            coordinator_epoch: epoch,
                            offsets,
                        })),
                }
            }
            if !progressed {
                return;
            }
        }
        debug_assert!(false, "group pump did not settle");
    }

    /// Make the hosted coordinators follow the local `__consumer_offsets` replicas.
    fn sync_group_leadership(&mut self, now: Nanos) -> bool {
        let key = (self.image.next_offset, self.replicas.offsets_generation());
        if self.groups.synced_at == Some(key) {
            return false;
        }
        let changed = self.sync_group_leadership_now(now);
        // After the sync's own changes (a load reads the log, a failed one fails it).
        self.groups.synced_at = Some((self.image.next_offset, self.replicas.offsets_generation()));
        changed
    }

    fn sync_group_leadership_now(&mut self, now: Nanos) -> bool {
        let mut changed = false;
        let at = self.image.next_offset;
        let n = match self.groups.offsets_partitions {
            Some((cached_at, n)) if cached_at == at => n,
            _ => {
                let n = self
                    .image
                    .topic(CONSUMER_OFFSETS_TOPIC)
                    .map(|t| t.config.partitions);
                self.groups.offsets_partitions = Some((at, n));
                n
            }
        };
        let current = self
            .groups
            .coordinators
            .as_ref()
            .map(|c| c.num_partitions());
        if n != current {
            // Topic created, deleted or re-created with another size: start over.
            if let Some(mut old) = self.groups.coordinators.take() {
                for p in self.groups.host.leading.keys().copied().collect::<Vec<_>>() {
                    old.resign(p);
                    self.groups.host.forget(p);
                }
                self.groups.changes_floor = old.changes_floor();
                for o in old.poll_outputs() {
                    if let CoordinatorOutput::Respond {
                        to,
                        correlation,
                        response,
                    } = o
                    {
                        self.send_group_response(to, correlation, response);
                    }
                }
            }
            let group_config = crate::group::GroupConfig {
                no_generation_fencing: self.config.group.no_generation_fencing
                    || self.config.bugs.no_generation_fencing,
                // The zoo switch lives with the transaction bugs; the coordinator reads it
                // from its own config (it was never handed over before: issue 52).
                txn_offsets_visible_early: self.config.group.txn_offsets_visible_early
                    || self.config.bugs.txn.txn_offsets_visible_early,
                ..self.config.group.clone()
            };
            let floor = self.groups.changes_floor;
            self.groups.coordinators = n.filter(|&n| n > 0).map(|n| {
                let mut c = GroupCoordinators::new(self.id, n, group_config.clone());
                c.start_changes_at(floor);
                c
            });
            changed = true;
        }
        let Some(n) = self
            .groups
            .coordinators
            .as_ref()
            .map(|c| c.num_partitions())
        else {
            return changed;
        };
        // The local leaders among partitions `0..n`, in partition order: the few fields
        // needed, not a whole `view()` (which clones the ISR sets), and no `TopicPartition`
        // built: this runs on every pump, several times per step.
        let mut views = [None; 8];
        let mut more: Vec<(u32, LeaderView)> = Vec::new();
        for (p, r) in self.replicas.in_topic(CONSUMER_OFFSETS_TOPIC) {
            if p >= n || r.role() != ReplicaRole::Leader {
                continue;
            }
            let v = LeaderView {
                leader_epoch: r.leader_epoch(),
                high_watermark: r.high_watermark(),
                log_start_offset: r.log().log_start_offset(),
                log_end_offset: r.log().log_end_offset(),
            };
            match views.get_mut(p as usize) {
                Some(slot) => *slot = Some(v),
                None => more.push((p, v)),
            }
        }
        if views.iter().all(Option::is_none)
            && more.is_empty()
            && self.groups.host.leading.is_empty()
        {
            return changed; // nothing led here before or now
        }
        for p in 0..n {
            let leads = match views.get(p as usize) {
                Some(v) => *v,
                None => more.iter().find(|(q, _)| *q == p).map(|(_, v)| *v),
            };
            changed |= self.follow_leadership(now, HostKind::Groups, p, leads);
        }
        changed
    }
}

impl HostedCoordinators for GroupCoordinators {
    fn become_leader(&mut self, p: u32, epoch: LeaderEpoch) {
        GroupCoordinators::become_leader(self, p, epoch);
    }

    fn resign(&mut self, p: u32) {
        GroupCoordinators::resign(self, p);
    }

    fn load(&mut self, now: Nanos, p: u32, batches: &[RecordBatch]) {
        let tp = offsets_tp(p);
        if let Err(e) = self.load_batches(p, batches) {
            // The coordinator is LoadFailed and answers CoordinatorNotAvailable.
            tracing::error!(%tp, error = %e, "cannot load __consumer_offsets");
        }
        let summary = self.complete_load(now, p);
        tracing::info!(%tp, ?summary, "group coordinator loaded");
    }

    fn append_completed(
        &mut self,
        now: Nanos,
        p: u32,
        id: AppendId,
        result: Result<Offset, AppendError>,
    ) {
        GroupCoordinators::append_completed(self, now, p, id, result);
    }
}
