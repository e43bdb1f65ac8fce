//! Hosting coordinators on an internal topic inside a broker: what the group coordinators
//! (`__consumer_offsets`, `groups.rs`) and the transaction coordinators
//! (`__transaction_state`, `txns.rs`) share.
//!
//! * **Leadership.** When the local replica of partition p leads epoch `e`, the coordinator
//!   of p begins loading at `e` (requests get `CoordinatorLoadInProgress`). It is *loaded*
//!   once the HW reaches the log end: the log end then is the epoch marker's end (nothing
//!   else can be written to the partition before the coordinator is active: clients may not
//!   produce to it), so everything up to it — every record committed in an earlier epoch —
//!   is committed and nothing later exists. The broker reads the log from its start to that
//!   end (control batches left out) and loads it. Losing the leadership, or a new epoch,
//!   unloads (`resign`).
//! * **Appends.** A coordinator's appends go through the replica's own produce path with
//!   acks=all, as a client whose address is the broker itself; the produce answers (HW
//!   passed, NotLeader, NotEnoughReplicas, timeout) come back as replica effects addressed
//!   to this broker, are intercepted (by topic) and reported with `append_completed`, per
//!   partition in the order the appends were issued (= log order).
//! * **The log decides.** An append that reached the leader's log stays there for as long as
//!   this broker leads the epoch, and every later load replays it once it is committed. So its
//!   outcome is read from the log, not from the produce answer: it completes `Ok` once the HW
//!   passes it — also after a produce timeout, and also when the ISR had shrunk below
//!   min.insync by then (`NotEnoughReplicasAfterAppend`: it is below the HW all the same) —
//!   and it stays pending until then or until the leadership is lost, which unloads the
//!   coordinator. Reporting a timed-out append as failed let the coordinator's memory
//!   disagree with the log: a member then fetched an offset older than the one the log (and
//!   a retry) held, and committed below it (seed 124, `group-offset-regression`).

use super::Broker;
use crate::group::{AppendError, AppendId, CONSUMER_OFFSETS_TOPIC};
use crate::log::{EncodedBatch, Record, RecordBatch, Storage};
use crate::message::*;
use crate::replica::{ProduceOrigin, ReplicaRole};
use crate::txn::TRANSACTION_STATE_TOPIC;
use crate::types::{LeaderEpoch, Nanos, Offset, TopicPartition};
use std::collections::BTreeMap;

/// What the hosting needs of a set of coordinators (one per led partition).
pub(super) trait HostedCoordinators {
    fn become_leader(&mut self, p: u32, epoch: LeaderEpoch);
    fn resign(&mut self, p: u32);
    /// Load the partition's records (control batches left out) and start serving.
    fn load(&mut self, now: Nanos, p: u32, batches: &[RecordBatch]);
    fn append_completed(
        &mut self,
        now: Nanos,
        p: u32,
        id: AppendId,
        result: Result<Offset, AppendError>,
    );
}

/// Which coordinators: selects the internal topic and the broker's host of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HostKind {
    Groups,
    Txns,
}

impl HostKind {
    pub(super) fn topic(self) -> &'static str {
        match self {
            HostKind::Groups => CONSUMER_OFFSETS_TOPIC,
            HostKind::Txns => TRANSACTION_STATE_TOPIC,
        }
    }

    fn what(self) -> &'static str {
        match self {
            HostKind::Groups => "load the group coordinator",
            HostKind::Txns => "load the transaction coordinator",
        }
    }
}

/// The coordinator state of one partition this broker leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Leading {
    pub(super) epoch: LeaderEpoch,
    pub(super) loaded: bool,
}

/// One append issued to the replica and not yet reported.
#[derive(Debug)]
pub(super) struct InFlight {
    correlation: u64,
    id: AppendId,
    /// Where the batch landed in the leader's log, `[base, end)`; `None` if it was refused
    /// before reaching the log.
    landed: Option<(Offset, Offset)>,
    result: Option<Result<Offset, AppendError>>,
}

/// The hosting mechanism's state, per internal topic.
#[derive(Default)]
pub(super) struct CoordinatorHost {
    pub(super) leading: BTreeMap<u32, Leading>,
    /// Per partition, in issue (= log) order.
    pub(super) in_flight: BTreeMap<u32, Vec<InFlight>>,
    /// Produce correlation -> partition, for appends still in flight.
    by_correlation: BTreeMap<u64, u32>,
    next_correlation: u64,
    /// Produce answers addressed to this broker, not yet processed.
    pub(super) acks: Vec<ProduceResponse>,
    /// When this broker last asked the controller to create the topic.
    pub(super) create_requested_at: Option<Nanos>,
}

impl CoordinatorHost {
    /// Forget partition `p`'s leadership and appends (its coordinator resigned).
    pub(super) fn forget(&mut self, p: u32) {
        self.leading.remove(&p);
        for f in self.in_flight.remove(&p).unwrap_or_default() {
            self.by_correlation.remove(&f.correlation);
        }
    }
}

/// What the leadership sync reads of a local leader of an internal partition.
#[derive(Clone, Copy)]
pub(super) struct LeaderView {
    pub(super) leader_epoch: LeaderEpoch,
    pub(super) high_watermark: Offset,
    pub(super) log_start_offset: Offset,
    pub(super) log_end_offset: Offset,
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
    pub(super) fn host_mut(&mut self, k: HostKind) -> &mut CoordinatorHost {
        match k {
            HostKind::Groups => &mut self.groups.host,
            HostKind::Txns => &mut self.txns.host,
        }
    }

    fn hosted_mut(&mut self, k: HostKind) -> Option<&mut dyn HostedCoordinators> {
        match k {
            HostKind::Groups => self
                .groups
                .coordinators_mut()
                .map(|c| c as &mut dyn HostedCoordinators),
            HostKind::Txns => self
                .txns
                .coordinators
                .as_mut()
                .map(|c| c as &mut dyn HostedCoordinators),
        }
    }

    /// Make partition `p`'s coordinator follow its local replica (`leads`: the view of it
    /// if it leads). Whether anything changed.
    pub(super) fn follow_leadership(
        &mut self,
        now: Nanos,
        k: HostKind,
        p: u32,
        leads: Option<LeaderView>,
    ) -> bool {
        let was = self.host_mut(k).leading.get(&p).copied();
        match (leads, was) {
            (None, None) => false,
            (None, Some(_)) => {
                if let Some(c) = self.hosted_mut(k) {
                    c.resign(p);
                }
                self.host_mut(k).forget(p);
                true
            }
            (Some(v), was) => {
                let mut changed = false;
                if was.map(|w| w.epoch) != Some(v.leader_epoch) {
                    if was.is_some() {
                        if let Some(c) = self.hosted_mut(k) {
                            c.resign(p);
                        }
                        self.host_mut(k).forget(p);
                    }
                    if let Some(c) = self.hosted_mut(k) {
                        c.become_leader(p, v.leader_epoch);
                    }
                    self.host_mut(k).leading.insert(
                        p,
                        Leading {
                            epoch: v.leader_epoch,
                            loaded: false,
                        },
                    );
                    changed = true;
                }
                let loaded = self.host_mut(k).leading[&p].loaded;
                if !loaded && v.high_watermark >= v.log_end_offset {
                    changed |= self.load_hosted(now, k, p, v.log_start_offset, v.log_end_offset);
                }
                changed
            }
        }
    }

    /// Whether the load happened. A read error takes the replica's log offline, as any
    /// failed read does (KIP-112): the replica stops leading, the next heartbeat reports the
    /// partition offline and the controller elects another ISR member, whose coordinator
    /// loads instead. Retrying the read here instead left a coordinator Loading for the
    /// rest of a run when a bit flip had corrupted its log (seed 361).
    fn load_hosted(&mut self, now: Nanos, k: HostKind, p: u32, from: Offset, to: Offset) -> bool {
        let tp = TopicPartition::new(k.topic(), p);
        let batches: Vec<RecordBatch> = match self.read_log(&tp, from, to) {
            // Transaction markers settle transactional offsets (KIP-447): kept.
            Some(Ok(b)) => b
                .into_iter()
                .filter(|b| !b.is_control() || b.as_txn_marker().is_some())
                .collect(),
            Some(Err(e)) => {
                tracing::error!(%tp, error = %e.0, "cannot read the log to load its coordinator");
                crate::probe!(CoordinatorLoadFailed);
                if let Some(r) = self.replicas.get_mut(&tp) {
                    r.fail_log(k.what(), e);
                }
                return true;
            }
            None => return false,
        };
        if let Some(c) = self.hosted_mut(k) {
            c.load(now, p, &batches);
        }
        if let Some(l) = self.host_mut(k).leading.get_mut(&p) {
            l.loaded = true;
        }
        true
    }

    /// Append `records` as one batch to partition `p` of `k`'s topic, acks=all, as leader of
    /// `leader_epoch`; reported by [`Self::process_hosted_acks`]. With `producer` (a
    /// TxnOffsetCommit, KIP-447) the batch is a transactional batch of that producer without
    /// a sequence, settled by the transaction's marker.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn hosted_append(
        &mut self,
        now: Nanos,
        k: HostKind,
        p: u32,
        id: AppendId,
        leader_epoch: LeaderEpoch,
        records: Vec<Record>,
        producer: Option<crate::controller::ProducerIdAndEpoch>,
    ) {
        let tp = TopicPartition::new(k.topic(), p);
        let timeout = self.config.group_append_timeout;
        let leads = self
            .replicas
            .get(&tp)
            .is_some_and(|r| r.role() == ReplicaRole::Leader && r.leader_epoch() == leader_epoch);
        let host = self.host_mut(k);
        host.next_correlation += 1;
        let correlation = host.next_correlation;
        let batch = if !leads || !host.leading.contains_key(&p) {
            Err(AppendError::NotLeader)
        } else {
            // Encoded here, as a producer encodes: the leader's log places these bytes.
            // Failure is mapped as the leader's refusals are (`append_error`).
            let ts = (now / 1_000_000) as i64;
            let batch = RecordBatch::of_records(ts, records);
            let batch = match producer {
                Some(p) => batch
                    .with_producer(Some(crate::log::ProducerInfo {
                        producer_id: p.producer_id,
                        producer_epoch: p.producer_epoch,
                        base_sequence: crate::log::NO_SEQUENCE,
                    }))
                    .transactional(),
                None => batch,
            };
            EncodedBatch::encode(&batch)
                .map_err(|e| AppendError::Storage(format!("cannot encode the batch: {e}")))
        };
        let queue = host.in_flight.entry(p).or_default();
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
        host.by_correlation.insert(correlation, p);
        let req = ProduceRequest {
            correlation,
            tp: tp.clone(),
            acks: Acks::All,
            timeout,
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
                    .host_mut(k)
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
    pub(super) fn process_hosted_acks(&mut self, now: Nanos, k: HostKind) -> bool {
        let host = self.host_mut(k);
        if host.acks.is_empty() && host.in_flight.is_empty() {
            return false; // nothing to match or complete
        }
        let acks = std::mem::take(&mut host.acks);
        for resp in acks {
            let Some(p) = host.by_correlation.remove(&resp.correlation) else {
                continue; // an append of a partition since unloaded
            };
            debug_assert_eq!(resp.tp, TopicPartition::new(k.topic(), p));
            if let Some(f) = host
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
        let replicas = &self.replicas;
        let host = match k {
            HostKind::Groups => &mut self.groups.host,
            HostKind::Txns => &mut self.txns.host,
        };
        for (&p, queue) in host.in_flight.iter_mut() {
            let hw = replicas
                .get_in(k.topic(), p)
                .map_or(0, |r| r.high_watermark());
            for f in queue.iter_mut().filter(|f| f.result.is_none()) {
                if let Some((base, end)) = f.landed {
                    if end <= hw {
                        f.result = Some(Ok(base));
                    }
                }
            }
        }
        if self.hosted_mut(k).is_none() {
            return false;
        }
        let host = self.host_mut(k);
        let mut ready_all = Vec::new();
        for (&p, queue) in host.in_flight.iter_mut() {
            let ready = queue.iter().take_while(|f| f.result.is_some()).count();
            for f in queue.drain(..ready) {
                ready_all.push((p, f.id, f.result.expect("ready")));
            }
        }
        host.in_flight.retain(|_, q| !q.is_empty());
        let progressed = !ready_all.is_empty();
        let coords = self.hosted_mut(k).expect("checked");
        for (p, id, result) in ready_all {
            coords.append_completed(now, p, id, result);
        }
        progressed
    }

    /// Ask the controller to create `k`'s topic (at most once per controller timeout).
    pub(super) fn request_internal_topic(
        &mut self,
        now: Nanos,
        k: HostKind,
        config: crate::controller::TopicConfig,
    ) {
        let retry = self.config.controller_timeout;
        let host = self.host_mut(k);
        let due = host.create_requested_at.is_none_or(|t| now >= t + retry);
        if !due {
            return;
        }
        host.create_requested_at = Some(now);
        self.send_controller(crate::controller::ControllerRequest::CreateTopic {
            name: k.topic().into(),
            config,
            assignment: None,
        });
    }
}
