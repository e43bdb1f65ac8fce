//! A small deterministic world: real `GroupConsumer`s, one hosted `GroupCoordinator` (which
//! can fail over to a fresh instance loading the `__consumer_offsets` log), and a data topic
//! whose partitions hold records `0..hw`. Messages go over core's shared harness network
//! ([`testing::Net`]) in FIFO order; a cut consumer's traffic is dropped both ways.
//! Invariants are checked after every step.

use super::harness::{config, MS, S};
use crate::client::*;
use crate::group::records;
use crate::group::*;
use crate::log::RecordBatch;
use crate::testing::{self, Delivery};
use crate::types::{Nanos, Offset, TopicPartition};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

pub const TOPIC: &str = "t";
pub const STEP: Nanos = 50 * MS;

/// Who is on the network: a consumer (by index; 998 and 999 are the zombie and the admin),
/// or the brokers (the coordinator and the data topic's leaders).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Peer {
    Consumer(usize),
    Brokers,
}

pub enum Msg {
    Request {
        corr: CorrelationId,
        to: Destination,
        req: ConsumerRequest,
    },
    Response {
        corr: CorrelationId,
        resp: ConsumerResponse,
    },
}

/// How the application drives its consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppMode {
    /// Rely on auto-commit.
    Auto,
    /// commit_sync after processing each poll's records.
    CommitAfterProcess,
}

pub struct World {
    pub now: Nanos,
    pub epoch: u32,
    pub coord_node: u32,
    pub coord: GroupCoordinator,
    pub log: Vec<RecordBatch>,
    /// Batches of `log` below the HW (acknowledged).
    pub acked: usize,
    unacked: VecDeque<(AppendId, usize)>,
    /// Append completion latency in steps (0 = at once).
    pub ack_delay_steps: u32,
    ack_wait: u32,
    pub consumers: Vec<Option<GroupConsumer>>,
    pub modes: Vec<AppMode>,
    /// `close` was called (the consumer may still be committing on its way out).
    pub closing: Vec<bool>,
    instances: Vec<Option<InstanceId>>,
    pub hw: BTreeMap<TopicPartition, Offset>,
    pub net: testing::Net<Peer, Msg>,
    pub events: Vec<(usize, ConsumerEvent)>,
    pub processed: BTreeMap<TopicPartition, BTreeSet<Offset>>,
    /// Highest committed offset seen per partition, and the explicit resets performed.
    pub high_commit: BTreeMap<TopicPartition, Offset>,
    /// Highest offset acknowledged to some consumer per partition.
    pub acked_commit: BTreeMap<TopicPartition, Offset>,
    /// Every (partition, offset) whose commit record is below the HW.
    acked_values: BTreeSet<(TopicPartition, Offset)>,
    /// Off only where a test deliberately creates two owners (static takeover of a zombie).
    pub check_ownership: bool,
    /// Network faults for consumers' traffic: (rng, percent delayed by up to
    /// `max_delay_steps` steps — which also reorders —, per-mille lost).
    pub faults: Option<(rand_chacha::ChaCha8Rng, u32, u32)>,
    pub max_delay_steps: u64,
    delayed: Vec<(Nanos, (Peer, Peer, Msg))>,
    pub resets: u32,
    /// Target of the last explicit reset per partition: records below it may be skipped.
    pub reset_to: BTreeMap<TopicPartition, Offset>,
    /// Every (member id, generation) a consumer has held: the identities a zombie may replay.
    pub identities: BTreeSet<(MemberId, GenerationId)>,
}

impl World {
    pub fn new(partitions: u32, records: Offset) -> Self {
        let mut coord = GroupCoordinator::new(1, 0, 1, config());
        coord.load(0, 1, &[]).unwrap();
        Self {
            now: 0,
            epoch: 1,
            coord_node: 1,
            coord,
            log: Vec::new(),
            acked: 0,
            unacked: VecDeque::new(),
            ack_delay_steps: 0,
            ack_wait: 0,
            consumers: Vec::new(),
            modes: Vec::new(),
            closing: Vec::new(),
            instances: Vec::new(),
            hw: (0..partitions)
                .map(|p| (TopicPartition::new(TOPIC, p), records))
                .collect(),
            net: testing::Net::default(),
            events: Vec::new(),
            processed: BTreeMap::new(),
            high_commit: BTreeMap::new(),
            acked_commit: BTreeMap::new(),
            acked_values: BTreeSet::new(),
            check_ownership: true,
            faults: None,
            max_delay_steps: 20,
            delayed: Vec::new(),
            resets: 0,
            reset_to: BTreeMap::new(),
            identities: BTreeSet::new(),
        }
    }

    pub fn consumer_config(&self, assignor: AssignorKind, mode: AppMode) -> ConsumerConfig {
        let mut c = ConsumerConfig::new(super::harness::GROUP);
        c.session_timeout = 6 * S;
        c.rebalance_timeout = 10 * S;
        c.heartbeat_interval = S;
        c.assignors = vec![assignor];
        c.reset = OffsetReset::Earliest;
        c.auto_commit_interval = (mode == AppMode::Auto).then_some(S);
        c.request_timeout = 5 * S;
        c.max_poll_records = 7;
        c.metadata_max_age = 2 * S;
        c
    }

    pub fn add(&mut self, config: ConsumerConfig, mode: AppMode) -> usize {
        self.instances.push(config.instance_id.clone());
        let mut c = GroupConsumer::new(config).expect("valid config");
        c.subscribe(self.now, &[TOPIC]);
        self.consumers.push(Some(c));
        self.modes.push(mode);
        self.closing.push(false);
        let i = self.consumers.len() - 1;
        self.collect(i);
        self.flush();
        i
    }

    pub fn instance_of(&self, i: usize) -> Option<&str> {
        self.instances[i].as_deref()
    }

    pub fn consumer(&self, i: usize) -> &GroupConsumer {
        self.consumers[i].as_ref().expect("alive")
    }

    /// Cuts (or heals) consumer `i` off from the brokers, both ways.
    pub fn cut(&mut self, i: usize, cut: bool) {
        let (c, b) = (Peer::Consumer(i), Peer::Brokers);
        for link in [(c, b), (b, c)] {
            if cut {
                self.net.cut.insert(link);
            } else {
                self.net.cut.remove(&link);
            }
        }
    }

    /// Crash: the process is gone, nothing is sent on its behalf.
    pub fn crash(&mut self, i: usize) {
        self.consumers[i] = None;
    }

    pub fn close(&mut self, i: usize) {
        self.closing[i] = true;
        if let Some(c) = self.consumers[i].as_mut() {
            c.close(self.now);
        }
        self.collect(i);
        self.flush();
    }

    fn collect(&mut self, i: usize) {
        let Some(c) = self.consumers[i].as_mut() else {
            return;
        };
        for o in c.poll_outputs() {
            match o {
                ConsumerOutput::Send {
                    to,
                    correlation,
                    request,
                } => {
                    let msg = Msg::Request {
                        corr: correlation,
                        to,
                        req: request,
                    };
                    self.net.send(Peer::Consumer(i), Peer::Brokers, msg);
                }
                ConsumerOutput::Event(e) => {
                    if let ConsumerEvent::CommitCompleted { result: Ok(m), .. } = &e {
                        for (tp, o) in m {
                            assert!(
                                self.acked_values.contains(&(tp.clone(), *o)),
                                "commit {tp}@{o} acknowledged before it was durable"
                            );
                        }
                    }
                    self.events.push((i, e))
                }
            }
        }
    }

    fn coordinator_outputs(&mut self) {
        for o in self.coord.poll_outputs() {
            match o {
                CoordinatorOutput::Respond {
                    to,
                    correlation,
                    response,
                } => self.net.send(
                    Peer::Brokers,
                    Peer::Consumer(to as usize),
                    Msg::Response {
                        corr: correlation,
                        resp: ConsumerResponse::Group(response),
                    },
                ),
                CoordinatorOutput::Committed { .. } => {}
                CoordinatorOutput::Append {
                    id,
                    leader_epoch,
                    records,
                    ..
                } => {
                    assert_eq!(leader_epoch, self.epoch);
                    let base = self.log.last().map(|b| b.next_offset()).unwrap_or(0);
                    self.log.push(
                        RecordBatch::of_records(0, records)
                            .at(base)
                            .in_epoch(leader_epoch),
                    );
                    self.unacked.push_back((id, self.log.len() - 1));
                }
            }
        }
    }

    /// Batches `log[from..to]` are now below the HW: note the commits they hold.
    fn note_acked(&mut self, from: usize, to: usize) {
        for b in &self.log[from..to] {
            for r in &b.records {
                if let Some(records::GroupRecord::Offset { tp, value, .. }) =
                    records::decode_record(r).unwrap()
                {
                    match value {
                        Some(v) => {
                            self.acked_values.insert((tp.clone(), v.offset));
                            self.acked_commit.insert(tp, v.offset);
                        }
                        None => {
                            self.acked_commit.remove(&tp);
                        }
                    }
                }
            }
        }
    }

    fn ack_appends(&mut self) {
        while let Some((id, idx)) = self.unacked.pop_front() {
            self.note_acked(self.acked, idx + 1);
            self.acked = idx + 1;
            let base = self.log[idx].base_offset;
            self.coord.append_completed(self.now, id, Ok(base));
            self.coordinator_outputs();
        }
    }

    fn broker(
        &mut self,
        client: usize,
        corr: CorrelationId,
        to: Destination,
        req: ConsumerRequest,
    ) {
        let reply = |w: &mut World, resp| {
            let msg = Msg::Response { corr, resp };
            w.net.send(Peer::Brokers, Peer::Consumer(client), msg);
        };
        match req {
            ConsumerRequest::Group(GroupRequest::FindCoordinator { group_id }) => {
                let up = matches!(self.coord.phase(), CoordinatorPhase::Active { .. });
                let node = self.coord_node;
                let r = find_coordinator(&group_id, 1, |_| up.then_some(node));
                reply(
                    self,
                    ConsumerResponse::Group(GroupResponse::FindCoordinator(r)),
                );
            }
            ConsumerRequest::Group(g) => {
                if to != Destination::Node(self.coord_node) {
                    let r = GroupResponse::error_for(&g, GroupError::NotCoordinator);
                    reply(self, ConsumerResponse::Group(r));
                } else {
                    self.coord.step(self.now, client as ClientId, corr, g);
                    self.coordinator_outputs();
                    if self.ack_delay_steps == 0 {
                        self.ack_appends();
                    }
                }
            }
            ConsumerRequest::Metadata { topics } => {
                let n = self.hw.len() as u32;
                let known = topics
                    .into_iter()
                    .filter(|t| t == TOPIC)
                    .map(|t| (t, n))
                    .collect();
                reply(self, ConsumerResponse::Metadata { topics: known });
            }
            ConsumerRequest::ListOffsets { tp, spec, .. } => {
                let r = match (self.hw.get(&tp), spec) {
                    (None, _) => Err(FetchError::UnknownTopicOrPartition),
                    (Some(_), OffsetSpec::Earliest) => Ok(Some(0)),
                    (Some(hw), OffsetSpec::Latest) => Ok(Some(*hw)),
                    (Some(_), OffsetSpec::Timestamp(_)) => Ok(None),
                };
                reply(self, ConsumerResponse::ListOffsets(r));
            }
            ConsumerRequest::Fetch { tp, offset, .. } => {
                let r = match self.hw.get(&tp) {
                    None => Err(FetchError::UnknownTopicOrPartition),
                    Some(hw) if offset > *hw => Err(FetchError::OffsetOutOfRange {
                        offset,
                        log_start_offset: 0,
                        high_watermark: *hw,
                    }),
                    Some(hw) => {
                        // Batches start a little before the fetch offset, like whole batches do,
                        // and one record past the HW is included to check the consumer's filter.
                        let from = offset.saturating_sub(1);
                        let to = (offset + 5).min(*hw + 1);
                        let values = (from..to).map(|o| format!("{tp}@{o}").into_bytes());
                        Ok(FetchedData {
                            high_watermark: *hw,
                            log_start_offset: 0,
                            leader_epoch: 1,
                            batches: vec![RecordBatch::from_values(0, values).at(from).in_epoch(1)],
                            next_offset: to,
                            last_epoch: Some(1),
                            last_stable_offset: *hw,
                            aborted: Vec::new(),
                        })
                    }
                };
                reply(self, ConsumerResponse::Fetch(r));
            }
        }
    }

    /// Deliver queued messages until the network is quiet; while faults are on, a
    /// consumer's message may be lost or delayed (which reorders) first.
    pub fn flush(&mut self) {
        for _ in 0..100_000 {
            let Some((from, to, m)) = self.net.queue.pop_front() else {
                self.check();
                return;
            };
            if let Some((rng, delay_pct, loss_permille)) = self.faults.as_mut() {
                use rand::Rng;
                if rng.gen_range(0..1000) < *loss_permille {
                    continue;
                }
                if rng.gen_range(0..100) < *delay_pct {
                    let steps = rng.gen_range(1..=self.max_delay_steps);
                    self.delayed.push((self.now + steps * STEP, (from, to, m)));
                    continue;
                }
            }
            self.deliver(from, to, m);
        }
        panic!("network never went quiet");
    }

    fn app(&mut self, i: usize) {
        let now = self.now;
        let Some(c) = self.consumers[i].as_mut() else {
            return;
        };
        let records = c.poll(now);
        let owned: BTreeSet<TopicPartition> = c.assignment().into_iter().collect();
        for r in &records {
            assert!(
                owned.contains(&r.tp),
                "record of an unowned partition handed out"
            );
            assert!(
                r.offset < self.hw[&r.tp],
                "record at or above the HW handed out"
            );
            assert_eq!(
                r.value.as_deref(),
                Some(format!("{}@{}", r.tp, r.offset).as_bytes())
            );
            self.processed
                .entry(r.tp.clone())
                .or_default()
                .insert(r.offset);
        }
        if !records.is_empty() && self.modes[i] == AppMode::CommitAfterProcess {
            c.commit_sync(now);
        }
        self.collect(i);
    }

    /// One time step: every consumer's timers and application loop, the coordinator's timers,
    /// append completions.
    pub fn step(&mut self) {
        self.now += STEP;
        // Delayed messages that are due re-enter the network (already past the fault dice).
        let now = self.now;
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.delayed)
            .into_iter()
            .partition(|(t, _)| *t <= now);
        self.delayed = later;
        let faults = self.faults.take();
        for (_, (from, to, m)) in due {
            self.net.send(from, to, m);
        }
        self.flush();
        self.faults = faults;
        for i in 0..self.consumers.len() {
            if let Some(c) = self.consumers[i].as_mut() {
                c.handle_timeout(self.now);
            }
            self.collect(i);
        }
        self.flush();
        self.coord.handle_timeout(self.now);
        self.coordinator_outputs();
        self.ack_wait += 1;
        if self.ack_wait >= self.ack_delay_steps {
            self.ack_wait = 0;
            self.ack_appends();
        }
        self.flush();
        for i in 0..self.consumers.len() {
            self.app(i);
        }
        self.flush();
        for c in self.consumers.iter().flatten() {
            if let (Some(m), Some(g)) = (c.member_id(), c.generation()) {
                self.identities.insert((m.clone(), g));
            }
        }
        // Drivers sleep until `next_timeout`: it must never name a moment already handled.
        for c in self.consumers.iter().flatten() {
            assert!(
                c.poll_timeout().is_none_or(|t| t > self.now),
                "consumer timeout in the past"
            );
        }
        assert!(
            self.coord.poll_timeout().is_none_or(|t| t > self.now),
            "coordinator timeout in the past: {:?} at {}: {:?}",
            self.coord.poll_timeout(),
            self.now,
            self.coord.group(super::harness::GROUP)
        );
    }

    /// A zombie replays an identity it once held and commits offset 0 for `tp`. Accepted only
    /// if that identity is still the current generation's (then it is a legitimate rewind by a
    /// live member, counted as a reset); otherwise it must be refused.
    pub fn zombie_commit(&mut self, pick: usize, tp: &TopicPartition) {
        let Some((member_id, generation)) = self
            .identities
            .iter()
            .nth(pick % self.identities.len().max(1))
            .cloned()
        else {
            return;
        };
        let current = self.coord.group(super::harness::GROUP).is_some_and(|g| {
            g.generation == generation
                && g.members.contains_key(&member_id)
                && g.state != GroupState::CompletingRebalance
        });
        let req = GroupRequest::OffsetCommit(OffsetCommitRequest {
            group_id: super::harness::GROUP.into(),
            committer: Committer::Member {
                member_id,
                generation,
                group_instance_id: None,
                // Replayed bytes of an old request: the lowest sequence there is.
                sequence: 0,
            },
            offsets: [(tp.clone(), OffsetAndMetadata::new(0))].into(),
        });
        self.coord.step(self.now, 998, 1, req);
        self.coordinator_outputs();
        self.ack_appends();
        let accepted = self.net.queue.iter().any(|(_, to, m)| {
            *to == Peer::Consumer(998)
                && matches!(
                    m,
                    Msg::Response {
                        resp: ConsumerResponse::Group(GroupResponse::OffsetCommit(Ok(()))),
                        ..
                    }
                )
        });
        self.net.lose_to(Peer::Consumer(998));
        let active = matches!(self.coord.phase(), CoordinatorPhase::Active { .. });
        // A live identity may still be refused, as StaleCommit, when it committed since.
        assert!(
            !accepted || (current && active),
            "stale identity's commit accepted"
        );
        if accepted {
            // A rewind by a live identity: committed may go back, but nothing is skipped
            // (`reset_to` stays), the owner carries on from its position.
            self.resets += 1;
            self.high_commit.insert(tp.clone(), 0);
        }
    }

    /// Like a real driver: sleep until the earliest `next_timeout`, tick everyone, deliver.
    /// No application polls, so only the membership protocol runs. Returns the wake-ups.
    pub fn run_by_timeouts(&mut self, d: Nanos) -> usize {
        let end = self.now + d;
        let mut wakeups = 0;
        loop {
            let next = self
                .consumers
                .iter()
                .flatten()
                .filter_map(|c| c.poll_timeout())
                .chain(self.coord.poll_timeout())
                .min();
            match next {
                Some(t) if t <= end => {
                    assert!(t > self.now);
                    self.now = t;
                }
                _ => break,
            }
            wakeups += 1;
            for i in 0..self.consumers.len() {
                if let Some(c) = self.consumers[i].as_mut() {
                    c.handle_timeout(self.now);
                }
                self.collect(i);
            }
            self.coord.handle_timeout(self.now);
            self.coordinator_outputs();
            self.ack_appends();
            self.flush();
        }
        self.now = end;
        wakeups
    }

    pub fn run(&mut self, d: Nanos) {
        let end = self.now + d;
        while self.now < end {
            self.step();
        }
    }

    /// The coordinator's broker dies; another broker becomes leader of `__consumer_offsets`-0
    /// with `keep_unacked` of the not-yet-acknowledged batches in its log, and loads it.
    pub fn failover(&mut self, keep_unacked: usize) {
        self.coord.unload();
        self.coordinator_outputs();
        self.unacked.clear();
        let keep = (self.acked + keep_unacked).min(self.log.len());
        self.log.truncate(keep);
        self.note_acked(self.acked, keep);
        self.acked = keep;
        self.epoch += 1;
        self.coord_node += 1;
        self.coord = GroupCoordinator::new(self.coord_node, 0, 1, config());
        self.coord
            .load(self.now, self.epoch, &self.log)
            .expect("log loads");
        self.flush();
    }

    pub fn admin_reset(&mut self, tp: &TopicPartition, offset: Offset) -> bool {
        let req = GroupRequest::OffsetCommit(OffsetCommitRequest {
            group_id: super::harness::GROUP.into(),
            committer: Committer::Admin,
            offsets: [(tp.clone(), OffsetAndMetadata::new(offset))].into(),
        });
        self.coord.step(self.now, 999, 1, req);
        self.coordinator_outputs();
        self.ack_appends();
        let ok = self.net.queue.iter().any(|(_, to, m)| {
            *to == Peer::Consumer(999)
                && matches!(
                    m,
                    Msg::Response {
                        resp: ConsumerResponse::Group(GroupResponse::OffsetCommit(Ok(()))),
                        ..
                    }
                )
        });
        self.net.lose_to(Peer::Consumer(999));
        if ok {
            self.resets += 1;
            self.reset_to.insert(tp.clone(), offset);
            self.high_commit.insert(tp.clone(), offset);
        }
        ok
    }

    pub fn committed(&self) -> BTreeMap<TopicPartition, Offset> {
        self.coord
            .group(super::harness::GROUP)
            .map(|g| {
                g.offsets
                    .into_iter()
                    .map(|(tp, o)| (tp, o.offset))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Invariants: no partition owned by two live consumers at once; committed offsets never
    /// go backwards (explicit resets aside); every acknowledged commit is visible.
    pub fn check(&mut self) {
        let mut owner: BTreeMap<TopicPartition, usize> = BTreeMap::new();
        for (i, c) in self.consumers.iter().enumerate() {
            let Some(c) = c else { continue };
            for tp in c.assignment() {
                if let Some(j) = owner.insert(tp.clone(), i).filter(|_| self.check_ownership) {
                    panic!("{tp} owned by consumers {j} and {i} at {}", self.now);
                }
            }
        }
        if !matches!(self.coord.phase(), CoordinatorPhase::Active { .. }) {
            return;
        }
        let committed = self.committed();
        for (tp, o) in &committed {
            let o = *o;
            let h = self.high_commit.entry(tp.clone()).or_default();
            assert!(
                o >= *h,
                "{tp}: committed went back from {h} to {o} at {}",
                self.now
            );
            *h = o;
        }
        // The coordinator's committed offsets are exactly the latest durable commit per key:
        // nothing acknowledged is lost, nothing unacknowledged is shown.
        assert_eq!(
            committed, self.acked_commit,
            "committed offsets differ from the durable log at {}",
            self.now
        );
    }

    pub fn stable_generation(&self) -> Option<u32> {
        let g = self.coord.group(super::harness::GROUP)?;
        (g.state == GroupState::Stable).then_some(g.generation)
    }

    pub fn all_processed(&self) -> bool {
        self.hw.iter().all(|(tp, hw)| {
            let from = self.reset_to.get(tp).copied().unwrap_or(0);
            let done = self.processed.get(tp);
            (from..*hw).all(|o| done.is_some_and(|s| s.contains(&o)))
        })
    }
}

impl Delivery for World {
    type Addr = Peer;
    type Msg = Msg;

    fn net(&mut self) -> &mut testing::Net<Peer, Msg> {
        &mut self.net
    }

    /// A request reaches the brokers played here; a response, its consumer unless that
    /// one crashed. The invariants are checked after each.
    fn step(&mut self, from: Peer, to: Peer, msg: Msg) {
        match (from, to, msg) {
            (Peer::Consumer(client), Peer::Brokers, Msg::Request { corr, to, req }) => {
                self.broker(client, corr, to, req)
            }
            (Peer::Brokers, Peer::Consumer(client), Msg::Response { corr, resp }) => {
                if let Some(c) = self.consumers.get_mut(client).and_then(Option::as_mut) {
                    c.step(self.now, corr, resp);
                    self.collect(client);
                }
            }
            (from, to, _) => panic!("misrouted from {from:?} to {to:?}"),
        }
        self.check();
    }
}
