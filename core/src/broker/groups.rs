//! Hosting the group coordinators (`crate::group::GroupCoordinators`) inside a broker.
//!
//! The broker is the coordinators' only link to the world:
//! * **Placement.** `FindCoordinator` is answered by any broker from its metadata image. If
//!   `__consumer_offsets` does not exist yet, the broker asks the controller to create it
//!   (partitions, replication factor and min.insync from [`super::BrokerConfig`]) and
//!   answers `CoordinatorNotAvailable`; the client retries. Kafka does the same (auto-creation
//!   on the first FindCoordinator); it keeps bootstrapping deterministic, since only a
//!   request creates it, and a racing second CreateTopic is refused as already existing.
//! * **Leadership.** When the local replica of `__consumer_offsets`-p leads epoch `e`, the
//!   coordinator of p begins loading at `e` (requests get `CoordinatorLoadInProgress`).
//!   It is *loaded* once the HW reaches the log end: the log end then is the epoch marker's
//!   end (nothing else can be written to the partition before the coordinator is active:
//!   clients may not produce to it), so everything up to it — every record committed in
//!   an earlier epoch — is committed and nothing later exists. The broker reads the log
//!   from its start to that end (control batches left out, transaction markers kept for
//!   KIP-447's pending offsets), feeds it to `load_batches` and calls `complete_load`. Losing the leadership, or a new epoch, unloads (`resign`).
//! * **Appends.** `Append` effects go through the replica's own produce path with
//!   acks=all, as a client whose address is the broker itself; the produce answers (HW
//!   passed, NotLeader, NotEnoughReplicas, timeout) come back as replica effects addressed
//!   to this broker, are intercepted and reported with `append_completed`, per partition in
//!   the order the appends were issued (= log order).
//! * **The log decides.** An append that reached the leader's log stays there for as long as
//!   this broker leads the epoch, and every later load replays it once it is committed. So its
//!   outcome is read from the log, not from the produce answer: it completes `Ok` once the HW
//!   passes it — also after a produce timeout, and also when the ISR had shrunk below
//!   min.insync by then (`NotEnoughReplicasAfterAppend`: it is below the HW all the same) —
//!   and it stays pending (its partitions unstable for `require_stable` fetches) until then or
//!   until the leadership is lost, which unloads the coordinator. Reporting a timed-out append
//!   as failed let the coordinator's memory disagree with the log: a member then fetched an
//!   offset older than the one the log (and a retry) held, and committed below it (seed 124,
//!   `group-offset-regression`).

use super::{Broker, BrokerEvent};
use crate::group::{
    find_coordinator, AppendError, AppendId, CoordinatorOutput, GroupCoordinators, GroupRequest,
    GroupResponse, CONSUMER_OFFSETS_TOPIC,
};
use crate::log::{EncodedBatch, Record, RecordBatch, Storage};
use crate::message::*;
use crate::node::NodeOutput;
use crate::replica::{ProduceOrigin, ReplicaRole};
use crate::types::{LeaderEpoch, Nanos, Offset, TopicPartition};
use std::collections::BTreeMap;

/// The coordinator state of one `__consumer_offsets` partition this broker leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Leading {
    epoch: LeaderEpoch,
    loaded: bool,
}

/// One append issued to the replica and not yet reported.
#[derive(Debug)]
struct InFlight {
    correlation: u64,
    id: AppendId,
    /// Where the batch landed in the leader's log, `[base, end)`; `None` if it was refused
    /// before reaching the log.
    landed: Option<(Offset, Offset)>,
    result: Option<Result<Offset, AppendError>>,
}

/// What the broker keeps to host coordinators.
#[derive(Default)]
pub(super) struct GroupHost {
    /// Created once `__consumer_offsets` is in the image, with its partition count.
    coordinators: Option<GroupCoordinators>,
    leading: BTreeMap<u32, Leading>,
    /// Per partition, in issue (= log) order.
    in_flight: BTreeMap<u32, Vec<InFlight>>,
    /// Produce correlation -> partition, for appends still in flight.
    by_correlation: BTreeMap<u64, u32>,
    next_correlation: u64,
    /// Produce answers addressed to this broker, not yet processed.
    pub(super) acks: Vec<ProduceResponse>,
    /// When this broker last asked the controller to create `__consumer_offsets`.
    create_requested_at: Option<Nanos>,
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

    fn forget_partition(&mut self, p: u32) {
        forget(
            &mut self.leading,
            &mut self.in_flight,
            &mut self.by_correlation,
            p,
        );
    }
}

fn forget(
    leading: &mut BTreeMap<u32, Leading>,
    in_flight: &mut BTreeMap<u32, Vec<InFlight>>,
    by_correlation: &mut BTreeMap<u64, u32>,
    p: u32,
) {
    leading.remove(&p);
    for f in in_flight.remove(&p).unwrap_or_default() {
        by_correlation.remove(&f.correlation);
    }
}

/// What [`Broker::sync_group_leadership`] reads of a local `__consumer_offsets` leader.
#[derive(Clone, Copy)]
struct LeaderView {
    leader_epoch: LeaderEpoch,
    high_watermark: Offset,
    log_start_offset: Offset,
    log_end_offset: Offset,
}

fn offsets_tp(p: u32) -> TopicPartition {
    TopicPartition::new(CONSUMER_OFFSETS_TOPIC, p)
}

fn append_error(e: ProduceError) -> AppendError {
    match e {
        ProduceError::NotLeader { .. } | ProduceError::UnknownTopicOrPartition => {
            AppendError::NotLeader
        }
        ProduceError::NotEnoughReplicas { .. }
        | ProduceError::NotEnoughReplicasAfterAppend { .. } => AppendError::NotEnoughReplicas,
        ProduceError::RequestTimedOut => AppendError::Timeout,
        ProduceError::Storage(s) => AppendError::Storage(s),
        // A TxnOffsetCommit's batch of a fenced producer epoch (KIP-447).
        ProduceError::InvalidProducerEpoch(m) => AppendError::InvalidProducerEpoch(m),
        other => AppendError::Storage(other.to_string()),
    }
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
        let due = self
            .groups
            .create_requested_at
            .is_none_or(|t| now >= t + self.config.controller_timeout);
        if !due {
            return;
        }
        self.groups.create_requested_at = Some(now);
        let config = crate::controller::TopicConfig {
            partitions: self.config.offsets_topic_partitions,
            replication_factor: self.config.offsets_topic_replication_factor,
            min_insync_replicas: self.config.offsets_topic_min_insync_replicas,
            ..Default::default()
        };
        self.send_controller(crate::controller::ControllerRequest::CreateTopic {
            name: CONSUMER_OFFSETS_TOPIC.into(),
            config,
            assignment: None,
        });
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
            && self.groups.acks.is_empty()
            && self.groups.in_flight.is_empty()
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
            progressed |= self.process_group_acks(now);
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
                    } => self.group_append(now, partition, id, leader_epoch, records, producer),
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
                for p in self.groups.leading.keys().copied().collect::<Vec<_>>() {
                    old.resign(p);
                    self.groups.forget_partition(p);
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
        if views.iter().all(Option::is_none) && more.is_empty() && self.groups.leading.is_empty() {
            return changed; // nothing led here before or now
        }
        for p in 0..n {
            let leads = match views.get(p as usize) {
                Some(v) => *v,
                None => more.iter().find(|(q, _)| *q == p).map(|(_, v)| *v),
            };
            let was = self.groups.leading.get(&p).copied();
            let g = &mut self.groups;
            let coord = g.coordinators.as_mut().expect("checked");
            match (leads, was) {
                (None, None) => {}
                (None, Some(_)) => {
                    coord.resign(p);
                    forget(&mut g.leading, &mut g.in_flight, &mut g.by_correlation, p);
                    changed = true;
                }
                (Some(v), was) => {
                    if was.map(|w| w.epoch) != Some(v.leader_epoch) {
                        if was.is_some() {
                            coord.resign(p);
                            forget(&mut g.leading, &mut g.in_flight, &mut g.by_correlation, p);
                        }
                        coord.become_leader(p, v.leader_epoch);
                        g.leading.insert(
                            p,
                            Leading {
                                epoch: v.leader_epoch,
                                loaded: false,
                            },
                        );
                        changed = true;
                    }
                    let loaded = self.groups.leading[&p].loaded;
                    if !loaded && v.high_watermark >= v.log_end_offset {
                        changed |=
                            self.load_coordinator(now, p, v.log_start_offset, v.log_end_offset);
                    }
                }
            }
        }
        changed
    }

    /// Whether the load happened. A read error takes the replica's log offline, as any
    /// failed read does (KIP-112): the replica stops leading, the next heartbeat reports the
    /// partition offline and the controller elects another ISR member, whose coordinator
    /// loads instead. Retrying the read here instead left a coordinator Loading for the
    /// rest of a run when a bit flip had corrupted its log (seed 361).
    fn load_coordinator(&mut self, now: Nanos, p: u32, from: Offset, to: Offset) -> bool {
        let tp = offsets_tp(p);
        let batches: Vec<RecordBatch> = match self.read_log(&tp, from, to) {
            // Transaction markers settle transactional offsets (KIP-447): kept.
            Some(Ok(b)) => b
                .into_iter()
                .filter(|b| !b.is_control() || b.as_txn_marker().is_some())
                .collect(),
            Some(Err(e)) => {
                tracing::error!(%tp, error = %e.0, "cannot read __consumer_offsets to load");
                crate::probe!(CoordinatorLoadFailed);
                if let Some(r) = self.replicas.get_mut(&tp) {
                    r.fail_log("load the group coordinator", e);
                }
                return true;
            }
            None => return false,
        };
        let coord = self.groups.coordinators.as_mut().expect("hosted");
        if let Err(e) = coord.load_batches(p, &batches) {
            // The coordinator is LoadFailed and answers CoordinatorNotAvailable.
            tracing::error!(%tp, error = %e, "cannot load __consumer_offsets");
        }
        let summary = coord.complete_load(now, p);
        tracing::info!(%tp, ?summary, "group coordinator loaded");
        if let Some(l) = self.groups.leading.get_mut(&p) {
            l.loaded = true;
        }
        true
    }

    fn group_append(
        &mut self,
        now: Nanos,
        p: u32,
        id: AppendId,
        leader_epoch: LeaderEpoch,
        records: Vec<Record>,
        producer: Option<crate::controller::ProducerIdAndEpoch>,
    ) {
        let tp = offsets_tp(p);
        self.groups.next_correlation += 1;
        let correlation = self.groups.next_correlation;
        let leads = self
            .replicas
            .get(&tp)
            .is_some_and(|r| r.role() == ReplicaRole::Leader && r.leader_epoch() == leader_epoch);
        let queue = self.groups.in_flight.entry(p).or_default();
        let batch = if !leads || !self.groups.leading.contains_key(&p) {
            Err(AppendError::NotLeader)
        } else {
            // Encoded here, as a producer encodes: the leader's log places these bytes.
            // Failure is mapped as the leader's refusals are (`append_error`).
            let ts = (now / 1_000_000) as i64;
            let batch = RecordBatch::of_records(ts, records);
            // A TxnOffsetCommit: a transactional batch of the producer (KIP-447).
            let batch = match producer {
                Some(p) => batch
                    .with_producer(Some(crate::log::ProducerInfo {
                        producer_id: p.producer_id,
                        producer_epoch: p.producer_epoch,
                        base_sequence: crate::group::TXN_OFFSETS_SEQUENCE,
                    }))
                    .transactional(),
                None => batch,
            };
            EncodedBatch::encode(&batch)
                .map_err(|e| AppendError::Storage(format!("cannot encode the batch: {e}")))
        };
        let batch = match batch {
            Ok(b) => b,
            Err(e) => {
                queue.push(InFlight {
                    correlation,
                    id,
                    landed: None,
                    result: Some(Err(e)),
                });
                return;
            }
        };
        queue.push(InFlight {
            correlation,
            id,
            landed: None,
            result: None,
        });
        self.groups.by_correlation.insert(correlation, p);
        let req = ProduceRequest {
            correlation,
            tp: tp.clone(),
            acks: Acks::All,
            timeout: self.config.group_append_timeout,
            batch,
            transactional_id: None,
        };
        if let Some(r) = self.replicas.get_mut(&tp) {
            let before = r.log().log_end_offset();
            // Answered as a LocalProduceAnswer effect (collect_replica_effects).
            r.handle_produce(now, ProduceOrigin::Local, req);
            let after = r.log().log_end_offset();
            if after > before {
                if let Some(f) = self
                    .groups
                    .in_flight
                    .get_mut(&p)
                    .and_then(|q| q.iter_mut().find(|f| f.correlation == correlation))
                {
                    f.landed = Some((before, after));
                }
            }
        }
    }

    /// Match produce answers to appends; report completed appends in issue order.
    fn process_group_acks(&mut self, now: Nanos) -> bool {
        if self.groups.acks.is_empty() && self.groups.in_flight.is_empty() {
            return false; // nothing to match or complete
        }
        let acks = std::mem::take(&mut self.groups.acks);
        for resp in acks {
            let Some(p) = self.groups.by_correlation.remove(&resp.correlation) else {
                continue; // an append of a partition since unloaded
            };
            debug_assert_eq!(resp.tp, offsets_tp(p));
            if let Some(f) = self
                .groups
                .in_flight
                .get_mut(&p)
                .and_then(|q| q.iter_mut().find(|f| f.correlation == resp.correlation))
            {
                f.result = match (resp.result, f.landed) {
                    (Ok(a), _) => Some(Ok(a.base_offset)),
                    // In the log and below the HW: committed, whatever the ISR size now.
                    (Err(ProduceError::NotEnoughReplicasAfterAppend { .. }), Some((base, _))) => {
                        Some(Ok(base))
                    }
                    // In the log, fate unknown: the HW (below) or an unload decides.
                    (Err(ProduceError::RequestTimedOut), Some(_)) => None,
                    (Err(e), _) => Some(Err(append_error(e))),
                };
            }
        }
        // Appends whose produce wait timed out complete once the HW passes them.
        for (&p, queue) in self.groups.in_flight.iter_mut() {
            let hw = self
                .replicas
                .get_in(CONSUMER_OFFSETS_TOPIC, p)
                .map_or(0, |r| r.high_watermark());
            for f in queue.iter_mut().filter(|f| f.result.is_none()) {
                if let Some((base, end)) = f.landed {
                    if end <= hw {
                        f.result = Some(Ok(base));
                    }
                }
            }
        }
        let mut progressed = false;
        let Some(coord) = self.groups.coordinators.as_mut() else {
            return false;
        };
        for (&p, queue) in self.groups.in_flight.iter_mut() {
            let ready = queue.iter().take_while(|f| f.result.is_some()).count();
            for f in queue.drain(..ready) {
                let result = f.result.expect("ready");
                coord.append_completed(now, p, f.id, result);
                progressed = true;
            }
        }
        self.groups.in_flight.retain(|_, q| !q.is_empty());
        progressed
    }
}
