//! The quorum controller under a seeded, faulty world: 3 or 5 controller nodes, scripted
//! brokers and an admin client, a network that loses, duplicates and delays (so reorders)
//! messages, partitions, and crashes with power loss (torn unsynced tails). The network and
//! fault model follow `raft::cluster`; here the nodes are whole [`QuorumController`]s in
//! core's shared harness ([`MemCluster`]: node driver, cut links, crashes), its sends passed
//! through the faulty network on their way, and the traffic includes brokers (played here,
//! as is the client). Checked after every step:
//! - at most one active controller per term;
//! - committed metadata is never lost or reordered: every node's committed records are a
//!   prefix of one history;
//! - no request is answered with success before its records are committed (registration,
//!   topic creation, ISR change: the record the answer names is in that history);
//! - every broker sees metadata in order (each pulled delta is the history's slice and
//!   applies without a gap);
//! - at the end (faults off, network healed): an active controller exists, every node holds
//!   the whole history, and every broker is registered, unfenced and caught up.
//!
//! `SKEIN_QUORUM_SEEDS=N` soaks N seeds per size; a failure prints the replay command.

use super::*;
use crate::message::{Address, Message};
use crate::raft::{self, RaftConfig, Term};
use crate::testing::faulty::{env_u64, power_loss, Earliest, FaultyNet, Links};
use crate::testing::MemStorage;
use crate::testing::{Delivery as _, MemCluster};
use crate::types::{Nanos, NodeId, Offset, TopicPartition};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};

const MS: Nanos = 1_000_000;
/// Brokers of the scripted cluster.
const BROKERS: [NodeId; 3] = [101, 102, 103];
const CLIENT: u64 = 1;
/// How long a broker or the client waits for a reply before trying another controller.
const CONTROLLER_REPLY_TIMEOUT: Nanos = 150 * MS;

#[derive(Clone, Debug)]
struct Options {
    nodes: u32,
    faults: bool,
    faulty_for: Nanos,
    settle_for: Nanos,
    loss: Option<f64>,
}

impl Options {
    fn new(nodes: u32) -> Self {
        Self {
            nodes,
            faults: true,
            faulty_for: 5_000 * MS,
            settle_for: 3_000 * MS,
            loss: None,
        }
    }

    /// No faults at all (the unit tests script their own).
    fn calm(nodes: u32) -> Self {
        Self {
            faults: false,
            loss: Some(0.0),
            ..Self::new(nodes)
        }
    }
}

/// A scripted broker: registers, heartbeats (pulling metadata), and, while it leads a
/// partition, now and then shrinks or expands its ISR.
struct Broker {
    id: NodeId,
    incarnation: u64,
    epoch: Option<Offset>,
    image: MetadataImage,
    target: NodeId,
    in_flight: Option<Nanos>,
    next_at: Nanos,
}

struct Client {
    target: NodeId,
    in_flight: Option<(Nanos, ControllerRequest)>,
    next_at: Nanos,
    topics: u32,
}

#[derive(Debug, Default)]
struct Stats {
    actives: usize,
    crashes: u64,
    history: usize,
    topics_created: u32,
    isr_changes: u32,
    not_controller: u32,
    /// Restarts that restored the image from a Raft snapshot.
    restored_from_snapshot: u64,
    /// `InstallSnapshot`s sent to laggards.
    snapshots_sent: u64,
}

struct World {
    seed: u64,
    opts: Options,
    rng: ChaCha8Rng,
    /// The controller nodes, their disks, the clock and the cut links.
    cluster: MemCluster,
    /// When each crashed node comes back.
    restart_at: BTreeMap<NodeId, Nanos>,
    brokers: BTreeMap<NodeId, Broker>,
    client: Client,
    /// What the cluster sends waits here (lost, duplicated, delayed) until it is due.
    net: FaultyNet<Address, Message>,
    /// Partitions between controller nodes (an isolated node is also cut from brokers),
    /// made into the cluster's cut links.
    links: Links,
    isolated: BTreeSet<NodeId>,
    heal_at: Option<Nanos>,
    next_fault: Nanos,
    // checker state
    active_in: BTreeMap<Term, NodeId>,
    /// The one history every node's committed records must be a prefix of.
    history: Vec<MetadataRecord>,
    /// Replies a test wants to see (unit tests), by recipient.
    replies: Vec<(Address, ControllerResponse)>,
    stats: Stats,
}

impl World {
    fn new(seed: u64, opts: Options) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let loss = opts.loss.unwrap_or_else(|| rng.gen_range(0.0..0.1));
        let dup = if opts.faults {
            rng.gen_range(0.0..0.05)
        } else {
            0.0
        };
        let next_fault = rng.gen_range(300 * MS..800 * MS);
        let mut w = Self {
            seed,
            rng,
            cluster: MemCluster::new(),
            restart_at: BTreeMap::new(),
            brokers: BTreeMap::new(),
            client: Client {
                target: 1,
                in_flight: None,
                next_at: 200 * MS,
                topics: 0,
            },
            net: FaultyNet::new(loss, dup, MS..10 * MS),
            links: Links::default(),
            isolated: BTreeSet::new(),
            heal_at: None,
            next_fault,
            active_in: BTreeMap::new(),
            history: Vec::new(),
            replies: Vec::new(),
            stats: Stats::default(),
            opts,
        };
        for id in w.ids() {
            let config = w.config(id);
            w.cluster.open_quorum_controller(id, config).expect("opens");
        }
        for (i, &b) in BROKERS.iter().enumerate() {
            w.brokers.insert(
                b,
                Broker {
                    id: b,
                    incarnation: 1,
                    epoch: None,
                    image: MetadataImage::new(),
                    target: 1 + i as NodeId % w.opts.nodes,
                    in_flight: None,
                    next_at: 50 * MS,
                },
            );
        }
        w
    }

    fn config(&self, id: NodeId) -> QuorumConfig {
        QuorumConfig {
            controller: ControllerConfig {
                session_timeout: 400 * MS,
                restart_grace: 400 * MS,
                ..ControllerConfig::default()
            },
            raft: RaftConfig {
                election_timeout: 100 * MS,
                heartbeat_interval: 20 * MS,
                seed: self.seed.wrapping_mul(31).wrapping_add(u64::from(id)),
                ..RaftConfig::new(id, (1..=self.opts.nodes).collect())
            },
            snapshot_every: 16,
        }
    }

    fn fail(&self, what: String) -> String {
        format!(
            "seed {} at {} ms: {what} (replay: SKEIN_QUORUM_SEED={} SKEIN_QUORUM_NODES={} cargo test -p skein-core controller::quorum_tests::replay -- --nocapture)",
            self.seed,
            self.cluster.now / MS,
            self.seed,
            self.opts.nodes
        )
    }

    fn ids(&self) -> Vec<NodeId> {
        (1..=self.opts.nodes).collect()
    }

    fn ctl(&self, id: NodeId) -> Option<&QuorumController<MemStorage>> {
        self.cluster.quorum_controller(id)
    }

    fn active(&self) -> Option<NodeId> {
        self.ids()
            .into_iter()
            .filter(|&id| self.ctl(id).is_some_and(|c| c.is_active()))
            .max_by_key(|&id| self.ctl(id).map(|c| c.raft().term()))
    }

    fn run(mut self) -> Result<Stats, String> {
        let faulty_end = self.opts.faulty_for;
        let end = faulty_end + self.opts.settle_for;
        while self.cluster.now < end {
            let faulty = self.opts.faults && self.cluster.now < faulty_end;
            if !faulty && self.heal_at.is_some() {
                self.heal();
            }
            self.step(faulty, end)?;
        }
        self.final_checks()?;
        self.stats.history = self.history.len();
        Ok(self.stats)
    }

    fn heal(&mut self) {
        self.links.heal();
        self.isolated.clear();
        self.heal_at = None;
        self.set_cuts();
    }

    /// The cluster's cut links: those between controllers a partition fault cut, and an
    /// isolated controller's links to the brokers and the client too.
    fn set_cuts(&mut self) {
        let ctl = Address::Controller;
        let net = &mut self.cluster.net;
        net.cut = self
            .links
            .blocked
            .iter()
            .map(|&(a, b)| (ctl(a), ctl(b)))
            .collect();
        let outside = BROKERS.map(Address::Node);
        for &v in &self.isolated {
            net.isolate(ctl(v), outside.into_iter().chain([Address::Client(CLIENT)]));
        }
    }

    /// Runs until `until` without faults (unit tests).
    fn run_until(&mut self, until: Nanos) -> Result<(), String> {
        while self.cluster.now < until {
            self.step(false, until)?;
        }
        Ok(())
    }

    fn step(&mut self, faulty: bool, end: Nanos) -> Result<(), String> {
        #[derive(Debug)]
        enum Ev {
            Deliver,
            Tick(NodeId),
            Restart(NodeId),
            Broker(NodeId),
            Client,
            Fault,
            Heal,
            End,
        }
        let mut next = Earliest::new(end, Ev::End);
        if let Some(t) = self.net.next_due() {
            next.consider(t, Ev::Deliver);
        }
        for id in self.ids() {
            match (self.ctl(id), self.restart_at.get(&id)) {
                (Some(c), _) => {
                    if let Some(t) = c.poll_timeout() {
                        next.consider(t, Ev::Tick(id));
                    }
                }
                (None, Some(&t)) => next.consider(t, Ev::Restart(id)),
                (None, None) => {}
            }
        }
        for (&id, b) in &self.brokers {
            next.consider(b.next_at, Ev::Broker(id));
        }
        if self.opts.faults {
            next.consider(self.client.next_at, Ev::Client);
        }
        if faulty {
            next.consider(self.next_fault, Ev::Fault);
            if let Some(t) = self.heal_at {
                next.consider(t, Ev::Heal);
            }
        }
        let (t, ev) = next.pick();
        self.cluster.now = self.cluster.now.max(t);
        if self.cluster.now >= end {
            return Ok(());
        }
        let touched = match ev {
            Ev::Deliver => self.deliver(faulty)?,
            Ev::Tick(id) => {
                self.cluster.tick_node(Address::Controller(id));
                self.after(id)?;
                Some(id)
            }
            Ev::Restart(id) => {
                self.restart(id)?;
                Some(id)
            }
            Ev::Broker(id) => {
                self.broker_step(id);
                None
            }
            Ev::Client => {
                self.client_step();
                None
            }
            Ev::Fault => {
                self.fault();
                self.next_fault = self.cluster.now + self.rng.gen_range(100 * MS..600 * MS);
                None
            }
            Ev::Heal => {
                self.heal();
                None
            }
            Ev::End => None,
        };
        self.check(touched)
    }

    /// Delivers the next due message over the cluster (which drops it on a cut link): to a
    /// controller node (its disk failing syncs now and then while faulty), or a reply to a
    /// broker or the client played here.
    fn deliver(&mut self, faulty: bool) -> Result<Option<NodeId>, String> {
        let (from, to, msg) = self.net.pop().expect("due message");
        if let Address::Controller(id) = to {
            if self.ctl(id).is_none() {
                return Ok(None);
            }
            let torn = faulty && self.rng.gen_bool(0.002);
            let disk = self.cluster.controller_disks[&id].clone();
            disk.set_fail_syncs(torn);
            self.cluster.deliver(from, to, msg);
            disk.set_fail_syncs(false);
            self.after(id)?;
            return Ok(Some(id));
        }
        self.cluster.deliver(from, to, msg);
        let to_brokers = std::mem::take(&mut self.cluster.unrouted);
        let to_client = std::mem::take(&mut self.cluster.inbox);
        let to_client = to_client.into_iter().map(|(c, m)| (Address::Client(c), m));
        let delivered = to_brokers.into_iter().map(|(_, to, m)| (to, m));
        for (to, m) in delivered.chain(to_client) {
            match (to, m) {
                (Address::Node(b), Message::ControllerResponse(r)) => {
                    self.broker_reply(b, from, *r)?
                }
                (Address::Client(_), Message::ControllerResponse(r)) => self.client_reply(from, *r),
                (to, m) => return Err(self.fail(format!("misrouted {m:?} to {to:?}"))),
            }
        }
        Ok(None)
    }

    /// Passes what node `id` sent into the faulty network: Raft messages, and replies
    /// checked against the committed history first.
    fn after(&mut self, id: NodeId) -> Result<(), String> {
        let Some(ctl) = self.ctl(id) else {
            return Ok(());
        };
        let failed = ctl.failed().is_some();
        self.observe(id)?;
        for (node, active, term) in std::mem::take(&mut self.cluster.roles) {
            if !active {
                continue;
            }
            if let Some(&other) = self.active_in.get(&term) {
                if other != node {
                    return Err(self.fail(format!(
                        "two active controllers in term {term}: {other} and {node}"
                    )));
                }
            }
            self.active_in.insert(term, node);
            self.stats.actives = self.active_in.len();
        }
        for (from, to, msg) in std::mem::take(&mut self.cluster.net.queue) {
            match &msg {
                Message::Raft(raft::Message::InstallSnapshot { .. }) => {
                    self.stats.snapshots_sent += 1;
                }
                Message::ControllerResponse(response) => {
                    self.check_reply(id, response)?;
                    self.replies.push((to, (**response).clone()));
                }
                _ => {}
            }
            self.enqueue(from, to, msg);
        }
        if failed {
            self.crash(id);
        }
        Ok(())
    }

    /// Folds node `id`'s committed records into the history, checking they extend it.
    fn observe(&mut self, id: NodeId) -> Result<(), String> {
        let Some(ctl) = self.ctl(id) else {
            return Ok(());
        };
        let records = ctl.records();
        let common = records.len().min(self.history.len());
        if let Some(i) = (0..common).find(|&i| records[i] != self.history[i]) {
            return Err(self.fail(format!(
                "node {id} committed {:?} at offset {i}, the history has {:?}",
                records[i], self.history[i]
            )));
        }
        if records.len() > self.history.len() {
            let more = records[self.history.len()..].to_vec();
            self.history.extend(more);
        }
        Ok(())
    }

    /// A success reply must name only committed records.
    fn check_reply(&self, id: NodeId, response: &ControllerResponse) -> Result<(), String> {
        let committed = |pred: &dyn Fn(&MetadataRecord) -> bool| self.history.iter().any(pred);
        let bad = match response {
            ControllerResponse::RegisterBroker(Ok(r)) => !matches!(
                self.history.get(r.broker_epoch as usize),
                Some(MetadataRecord::BrokerRegistered { broker, .. }) if *broker == r.broker
            ),
            ControllerResponse::CreateTopic {
                name,
                result: Ok(topic_id),
            } => !committed(&|r| {
                matches!(r, MetadataRecord::TopicCreated { name: n, topic_id: t, .. }
                    if n == name && t == topic_id)
            }),
            ControllerResponse::AlterPartition { tp, result: Ok(s) } => !committed(&|r| {
                matches!(r, MetadataRecord::PartitionChanged { tp: t, isr, partition_epoch, .. }
                    if t == tp && *isr == s.isr && *partition_epoch == s.partition_epoch)
            }),
            ControllerResponse::BrokerHeartbeat(Ok(h)) => {
                h.metadata.end_offset as usize > self.history.len()
            }
            ControllerResponse::Metadata(d) => d.end_offset as usize > self.history.len(),
            _ => false,
        };
        if bad {
            return Err(self.fail(format!(
                "node {id} answered {response:?} before its records committed"
            )));
        }
        Ok(())
    }

    fn enqueue(&mut self, from: Address, to: Address, msg: Message) {
        let now = self.cluster.now;
        let faulty = self.opts.faults && now < self.opts.faulty_for;
        self.net.send(&mut self.rng, now, faulty, (from, to), msg);
    }

    fn send_request(&mut self, from: Address, to: NodeId, request: ControllerRequest) {
        let msg = Message::ControllerRequest(request);
        self.enqueue(from, Address::Controller(to), msg);
    }

    fn other_controller(&mut self, not: NodeId) -> NodeId {
        let n = self.opts.nodes;
        let skip = self.rng.gen_range(1..n);
        (not - 1 + skip) % n + 1
    }

    // ---- brokers ----

    fn broker_step(&mut self, id: NodeId) {
        let now = self.cluster.now;
        let b = self.brokers.get_mut(&id).expect("broker");
        b.next_at = now + 40 * MS;
        if let Some(sent) = b.in_flight {
            if now < sent + CONTROLLER_REPLY_TIMEOUT {
                return;
            }
            // No answer: try another controller.
            let t = b.target;
            let other = self.other_controller(t);
            self.brokers.get_mut(&id).expect("broker").target = other;
        }
        let b = self.brokers.get_mut(&id).expect("broker");
        b.in_flight = Some(now);
        let request = match b.epoch {
            None => crate::testing::register_request(id, b.incarnation),
            Some(epoch) => {
                // Now and then, as a partition leader, change the ISR instead.
                let led: Vec<(TopicPartition, PartitionState)> = b
                    .image
                    .partitions()
                    .filter(|(_, s)| s.leader == Some(id))
                    .map(|(tp, s)| (tp, s.clone()))
                    .collect();
                let pick = self.rng.gen_range(0..4 * led.len().max(1));
                let b = self.brokers.get(&id).expect("broker");
                match led.get(pick) {
                    Some((tp, s)) if self.opts.faults => {
                        let new_isr = if s.isr.len() > 1 {
                            vec![id]
                        } else {
                            s.replicas
                                .iter()
                                .copied()
                                .filter(|&r| b.image.is_unfenced(r))
                                .collect()
                        };
                        ControllerRequest::AlterPartition {
                            tp: tp.clone(),
                            leader: id,
                            leader_epoch: s.leader_epoch,
                            partition_epoch: s.partition_epoch,
                            new_isr,
                        }
                    }
                    _ => crate::testing::heartbeat_request(id, epoch, b.image.next_offset),
                }
            }
        };
        let target = self.brokers[&id].target;
        self.send_request(Address::Node(id), target, request);
    }

    fn broker_reply(
        &mut self,
        id: NodeId,
        from: Address,
        response: ControllerResponse,
    ) -> Result<(), String> {
        let Address::Controller(from) = from else {
            return Err(self.fail(format!("broker {id} got a reply from {from:?}")));
        };
        let redirect = |e: &ControllerError| match e {
            ControllerError::NotController { leader } => Some(*leader),
            _ => None,
        };
        let mut target = None;
        let b = self.brokers.get_mut(&id).expect("broker");
        b.in_flight = None;
        match response {
            ControllerResponse::RegisterBroker(Ok(r)) => b.epoch = Some(r.broker_epoch),
            ControllerResponse::BrokerHeartbeat(Ok(h)) => {
                let from_offset = h.metadata.from as usize;
                let end = from_offset + h.metadata.records.len();
                if self.history.get(from_offset..end) != Some(&h.metadata.records[..]) {
                    return Err(self.fail(format!(
                        "broker {id} pulled records {from_offset}..{end} that are not the history's"
                    )));
                }
                if let Err(e) = b.image.apply_delta(&h.metadata) {
                    return Err(self.fail(format!("broker {id}: metadata out of order: {e}")));
                }
            }
            ControllerResponse::BrokerHeartbeat(Err(
                ControllerError::StaleBrokerEpoch { .. } | ControllerError::UnknownBroker { .. },
            )) => b.epoch = None,
            ControllerResponse::AlterPartition { result: Ok(_), .. } => {
                self.stats.isr_changes += 1;
            }
            ControllerResponse::RegisterBroker(Err(e))
            | ControllerResponse::BrokerHeartbeat(Err(e))
            | ControllerResponse::AlterPartition { result: Err(e), .. } => {
                if let Some(leader) = redirect(&e) {
                    self.stats.not_controller += 1;
                    target = Some(leader);
                }
            }
            other => return Err(self.fail(format!("broker {id} got {other:?}"))),
        }
        if let Some(leader) = target {
            let next = leader.unwrap_or_else(|| self.other_controller(from));
            self.brokers.get_mut(&id).expect("broker").target = next;
        }
        Ok(())
    }

    // ---- the admin client ----

    fn client_step(&mut self) {
        let now = self.cluster.now;
        self.client.next_at = now + 100 * MS;
        let request = match &self.client.in_flight {
            Some((sent, r)) if now >= sent + CONTROLLER_REPLY_TIMEOUT => {
                let r = r.clone();
                self.client.target = self.other_controller(self.client.target);
                r
            }
            Some(_) => return,
            None if self.client.topics < 12 => ControllerRequest::CreateTopic {
                name: format!("t{}", self.client.topics),
                config: TopicConfig {
                    partitions: 1,
                    replication_factor: 2,
                    min_insync_replicas: 1,
                    ..TopicConfig::default()
                },
                assignment: None,
            },
            None => return,
        };
        self.client.in_flight = Some((now, request.clone()));
        let target = self.client.target;
        self.send_request(Address::Client(CLIENT), target, request);
    }

    fn client_reply(&mut self, from: Address, response: ControllerResponse) {
        let Address::Controller(from) = from else {
            return;
        };
        let ControllerResponse::CreateTopic { name, result } = response else {
            return;
        };
        let current = matches!(&self.client.in_flight,
            Some((_, ControllerRequest::CreateTopic { name: n, .. })) if *n == name);
        if !current {
            return; // a duplicate's reply
        }
        match result {
            // A retry of a creation that did commit is answered "already exists".
            Ok(_) | Err(ControllerError::TopicAlreadyExists { .. }) => {
                self.stats.topics_created += 1;
                self.client.topics += 1;
                self.client.in_flight = None;
            }
            Err(ControllerError::NotController { leader }) => {
                self.stats.not_controller += 1;
                self.client.target = leader.unwrap_or_else(|| self.other_controller(from));
                self.client.in_flight = None;
            }
            // Not enough live brokers yet: try again later.
            Err(_) => self.client.in_flight = None,
        }
    }

    // ---- faults ----

    fn crash(&mut self, id: NodeId) {
        self.stats.crashes += 1;
        let down_for = self.rng.gen_range(10 * MS..600 * MS);
        let rng = &mut self.rng;
        self.cluster
            .crash_controller_with(id, |disk| power_loss(disk, rng));
        self.restart_at.insert(id, self.cluster.now + down_for);
    }

    fn restart(&mut self, id: NodeId) -> Result<(), String> {
        let config = self.config(id);
        self.restart_at.remove(&id);
        if let Err(e) = self.cluster.open_quorum_controller(id, config) {
            return Err(self.fail(format!("node {id} does not reopen: {e}")));
        }
        if self
            .ctl(id)
            .is_some_and(|c| c.raft().snapshot().last_index > 0)
        {
            self.stats.restored_from_snapshot += 1;
        }
        self.after(id)
    }

    fn fault(&mut self) {
        let ids = self.ids();
        let active = self.active();
        let pick = |rng: &mut ChaCha8Rng| ids[rng.gen_range(0..ids.len())];
        match self.rng.gen_range(0..10) {
            // Isolate the active controller (or a random node), from brokers too.
            0..=2 => {
                let victim = match active {
                    Some(l) if self.rng.gen_bool(0.7) => l,
                    _ => pick(&mut self.rng),
                };
                self.isolated = BTreeSet::from([victim]);
                self.links.isolate(victim, &ids);
                self.set_cuts();
                self.heal_at = Some(self.cluster.now + self.rng.gen_range(100 * MS..1_200 * MS));
            }
            // Split the controllers into two random groups.
            3 => {
                self.isolated.clear();
                self.links.split(&ids, &mut self.rng);
                self.set_cuts();
                self.heal_at = Some(self.cluster.now + self.rng.gen_range(100 * MS..1_200 * MS));
            }
            // Crash a controller (often the active one).
            4..=6 => {
                let victim = match active {
                    Some(l) if self.rng.gen_bool(0.6) => l,
                    _ => pick(&mut self.rng),
                };
                if self.ctl(victim).is_some() {
                    self.crash(victim);
                }
            }
            // Restart a broker process (a new incarnation re-registers).
            7 => {
                let b = BROKERS[self.rng.gen_range(0..BROKERS.len())];
                let broker = self.brokers.get_mut(&b).expect("broker");
                broker.incarnation += 1;
                broker.epoch = None;
            }
            _ => self.heal(),
        }
    }

    // ---- checks ----

    fn check(&mut self, touched: Option<NodeId>) -> Result<(), String> {
        if let Some(id) = touched {
            self.observe(id)?;
        }
        // At most one active controller per term, also among nodes that did not just act.
        let mut by_term: BTreeMap<Term, NodeId> = BTreeMap::new();
        for id in self.ids() {
            let Some(c) = self.ctl(id) else { continue };
            if c.is_active() {
                if let Some(other) = by_term.insert(c.raft().term(), id) {
                    return Err(self.fail(format!(
                        "nodes {other} and {id} both active in term {}",
                        c.raft().term()
                    )));
                }
            }
        }
        Ok(())
    }

    fn final_checks(&mut self) -> Result<(), String> {
        for id in self.ids() {
            if self.ctl(id).is_none() {
                self.restart(id)?;
            }
        }
        self.heal();
        // Settle: an active controller, every broker registered, unfenced and caught up,
        // every node holding the whole history.
        let deadline = self.cluster.now + 3_000 * MS;
        loop {
            let settled = self.active().is_some_and(|a| {
                let image = self.ctl(a).expect("live").committed_image();
                let end = self.history.len() as Offset;
                BROKERS
                    .iter()
                    .all(|&b| image.is_unfenced(b) && self.brokers[&b].image.next_offset == end)
                    && self.ids().into_iter().all(|id| {
                        self.ctl(id)
                            .is_some_and(|c| c.records().len() as Offset == end)
                    })
            });
            if settled {
                // Every node's committed image (restored from snapshots, then applied) is
                // the image of its records.
                for id in self.ids() {
                    let c = self.ctl(id).expect("live");
                    let replayed = MetadataImage::from_records(c.records())
                        .map_err(|e| self.fail(format!("node {id}: records replay: {e}")))?;
                    if &replayed != c.committed_image() {
                        return Err(self.fail(format!(
                            "node {id}: committed image differs from its records' image"
                        )));
                    }
                }
                return Ok(());
            }
            if self.cluster.now > deadline {
                let nodes: Vec<(NodeId, bool, usize)> = self
                    .ids()
                    .into_iter()
                    .filter_map(|id| self.ctl(id).map(|c| (id, c.is_active(), c.records().len())))
                    .collect();
                let brokers: Vec<(NodeId, Offset)> = self
                    .brokers
                    .values()
                    .map(|b| (b.id, b.image.next_offset))
                    .collect();
                return Err(self.fail(format!(
                    "liveness: not settled 3 s after healing (history {}, nodes (id, active, records) {nodes:?}, brokers {brokers:?})",
                    self.history.len()
                )));
            }
            let until = self.cluster.now + 10 * MS;
            self.run_until(until)?;
        }
    }
}

#[test]
fn random_quorums_of_3_and_5_keep_metadata_safe() {
    let seeds = env_u64("SKEIN_QUORUM_SEEDS").unwrap_or(8);
    let mut progress = Stats::default();
    for nodes in [3, 5] {
        for seed in 0..seeds {
            let stats = World::new(seed, Options::new(nodes))
                .run()
                .unwrap_or_else(|e| panic!("{e}"));
            progress.actives += stats.actives;
            progress.crashes += stats.crashes;
            progress.history += stats.history;
            progress.topics_created += stats.topics_created;
            progress.isr_changes += stats.isr_changes;
            progress.not_controller += stats.not_controller;
            progress.restored_from_snapshot += stats.restored_from_snapshot;
            progress.snapshots_sent += stats.snapshots_sent;
        }
    }
    println!("quorum sweep, {seeds} seeds per size: {progress:?}");
    // The sweep must exercise what it claims to: failovers, crashes, redirects, writes.
    assert!(progress.actives as u64 > 2 * seeds, "{progress:?}");
    assert!(progress.crashes > seeds, "{progress:?}");
    assert!(progress.not_controller > 0, "{progress:?}");
    assert!(progress.topics_created as u64 >= 10 * seeds, "{progress:?}");
    assert!(progress.isr_changes > 0, "{progress:?}");
    assert!(progress.restored_from_snapshot > 0, "{progress:?}");
    assert!(progress.snapshots_sent > 0, "{progress:?}");
}

#[test]
fn replay() {
    let Some(seed) = env_u64("SKEIN_QUORUM_SEED") else {
        return;
    };
    let nodes = env_u64("SKEIN_QUORUM_NODES").unwrap_or(3) as u32;
    let stats = World::new(seed, Options::new(nodes))
        .run()
        .unwrap_or_else(|e| panic!("{e}"));
    println!("seed {seed}: {stats:?}");
}

// ---- scripted unit tests ----

/// A calm 3-node quorum with an active controller; brokers are left alone (their timers
/// are pushed out) unless a test drives them.
fn calm_quorum() -> (World, NodeId) {
    let mut w = World::new(7, Options::calm(3));
    for b in w.brokers.values_mut() {
        b.next_at = Nanos::MAX;
    }
    w.run_until(600 * MS).unwrap();
    let active = w.active().expect("an active controller after 600 ms");
    (w, active)
}

/// Sends `request` from the client to node `to` and runs for `for_`; the client's replies.
fn ask(
    w: &mut World,
    to: NodeId,
    request: ControllerRequest,
    for_: Nanos,
) -> Vec<ControllerResponse> {
    w.replies.clear();
    w.send_request(Address::Client(CLIENT), to, request);
    let until = w.cluster.now + for_;
    w.run_until(until).unwrap();
    w.replies
        .drain(..)
        .filter(|(to, _)| *to == Address::Client(CLIENT))
        .map(|(_, r)| r)
        .collect()
}

fn create(name: &str) -> ControllerRequest {
    ControllerRequest::CreateTopic {
        name: name.into(),
        config: TopicConfig {
            partitions: 1,
            replication_factor: 1,
            ..TopicConfig::default()
        },
        assignment: None,
    }
}

fn register(w: &mut World, to: NodeId, b: NodeId) {
    w.replies.clear();
    w.send_request(Address::Node(b), to, crate::testing::register_request(b, 1));
    let until = w.cluster.now + 50 * MS;
    w.run_until(until).unwrap();
    assert!(
        w.replies.iter().any(|(to, r)| *to == Address::Node(b)
            && matches!(r, ControllerResponse::RegisterBroker(Ok(_)))),
        "{:?}",
        w.replies
    );
}

#[test]
fn a_follower_answers_not_controller_with_the_leader_hint() {
    let (mut w, active) = calm_quorum();
    let follower = (1..=3).find(|&n| n != active).unwrap();
    let replies = ask(&mut w, follower, create("t"), 50 * MS);
    assert_eq!(
        replies,
        vec![ControllerResponse::CreateTopic {
            name: "t".into(),
            result: Err(ControllerError::NotController {
                leader: Some(active)
            }),
        }]
    );
    assert!(ControllerError::NotController { leader: None }.is_retriable());
    // Reads are served by every node, from committed records.
    let replies = ask(
        &mut w,
        follower,
        ControllerRequest::FetchMetadata { from_offset: 0 },
        50 * MS,
    );
    assert!(matches!(replies[..], [ControllerResponse::Metadata(_)]));
    // The active controller does the write, and answers once it is committed everywhere
    // it needs to be: then a follower's read returns it.
    register(&mut w, active, 101);
    let replies = ask(&mut w, active, create("t"), 50 * MS);
    assert!(
        matches!(
            &replies[..],
            [ControllerResponse::CreateTopic { result: Ok(_), .. }]
        ),
        "{replies:?}"
    );
    let replies = ask(
        &mut w,
        follower,
        ControllerRequest::FetchMetadata { from_offset: 0 },
        50 * MS,
    );
    let [ControllerResponse::Metadata(d)] = &replies[..] else {
        panic!("{replies:?}")
    };
    assert!(d
        .records
        .iter()
        .any(|r| matches!(r, MetadataRecord::TopicCreated { name, .. } if name == "t")));
}

#[test]
fn a_leader_that_loses_its_quorum_fails_its_pending_requests() {
    let (mut w, active) = calm_quorum();
    register(&mut w, active, 101);
    // Cut the active controller from its peers (not from the client): its proposal can
    // never commit.
    let ctl = Address::Controller;
    w.cluster.net.isolate(ctl(active), [1, 2, 3].map(ctl));
    w.replies.clear();
    w.send_request(Address::Client(CLIENT), active, create("t"));
    let until = w.cluster.now + 50 * MS;
    w.run_until(until).unwrap();
    assert!(
        w.replies
            .iter()
            .all(|(to, _)| *to != Address::Client(CLIENT)),
        "answered before commit: {:?}",
        w.replies
    );
    assert!(w.ctl(active).unwrap().is_active());
    // Check-quorum (one election timeout) makes it step down: the waiting request fails
    // with the retriable NotController, and the uncommitted topic is gone from its image.
    let until = w.cluster.now + 300 * MS;
    w.run_until(until).unwrap();
    let client: Vec<&ControllerResponse> = w
        .replies
        .iter()
        .filter(|(to, _)| *to == Address::Client(CLIENT))
        .map(|(_, r)| r)
        .collect();
    assert!(
        matches!(
            client[..],
            [ControllerResponse::CreateTopic {
                result: Err(ControllerError::NotController { .. }),
                ..
            }]
        ),
        "{client:?}"
    );
    let old = w.ctl(active).unwrap();
    assert!(!old.is_active());
    assert!(old.controller().image().topic("t").is_none());
    assert!(!w
        .history
        .iter()
        .any(|r| matches!(r, MetadataRecord::TopicCreated { .. })));
    // The majority elected a new active controller meanwhile.
    let new = w
        .active()
        .expect("the majority elects a new active controller");
    assert_ne!(new, active);
}

#[test]
fn a_new_active_controller_fences_a_silent_broker_only_after_the_grace_period() {
    let (mut w, active) = calm_quorum();
    register(&mut w, active, 101);
    // The broker goes silent, and so does the active controller: a new one takes over.
    let silent_from = w.cluster.now;
    w.crash(active);
    w.restart_at.insert(active, Nanos::MAX);
    let mut took_over = None;
    while took_over.is_none() {
        let until = w.cluster.now + MS;
        w.run_until(until).unwrap();
        took_over = w.active().map(|a| (a, w.cluster.now));
        assert!(
            w.cluster.now < silent_from + 2_000 * MS,
            "no new active controller"
        );
    }
    let (new, at) = took_over.unwrap();
    assert_ne!(new, active);
    let grace = 400 * MS;
    let fenced = |w: &World| {
        w.history
            .iter()
            .any(|r| matches!(r, MetadataRecord::BrokerFenced { broker: 101, .. }))
    };
    // The session timeout (400 ms from the last contact) passes during the grace period:
    // the broker is still unfenced, since the new controller never heard from it.
    w.run_until(at + grace - 5 * MS).unwrap();
    assert!(silent_from + 400 * MS < w.cluster.now);
    assert!(!fenced(&w), "fenced before the grace period ended");
    w.run_until(at + grace + 100 * MS).unwrap();
    assert!(
        fenced(&w),
        "a silent broker must be fenced after the grace period"
    );
}

/// One mechanism: a 1-node quorum decides exactly what the single controller decides,
/// request for request (same replies, same records), since both run `ControllerState`.
#[test]
fn a_one_node_quorum_decides_what_the_single_controller_decides() {
    let mut single = MemCluster::new();
    single.start_controller(ControllerConfig::default());
    let mut quorum = MemCluster::new();
    let config = QuorumConfig::new(1, vec![1]);
    quorum.open_quorum_controller(1, config).unwrap();
    while !quorum.quorum_controller(1).unwrap().is_active() {
        quorum.now = quorum.next_timeout().expect("a timer");
        quorum.tick_all();
        assert!(
            quorum.now < 10_000 * MS,
            "a 1-node quorum activates on its own"
        );
    }
    let mut requests: Vec<(Requester, ControllerRequest)> = Vec::new();
    for &b in &BROKERS {
        requests.push((Requester::Broker(b), crate::testing::register_request(b, 1)));
    }
    requests.push((Requester::Client(CLIENT), create("a")));
    requests.push((Requester::Client(CLIENT), create("a")));
    requests.push((
        Requester::Broker(101),
        crate::testing::heartbeat_request(101, 0, 0),
    ));
    requests.push((Requester::Client(CLIENT), ControllerRequest::InitProducerId));
    requests.push((
        Requester::Client(CLIENT),
        ControllerRequest::ElectPreferredLeaders { partitions: None },
    ));
    for (from, request) in requests {
        for c in [&mut single, &mut quorum] {
            c.now += 10 * MS;
        }
        let (want, _) = single.ask_controller(from, request.clone());
        let (got, _) = quorum.ask_controller(from, request);
        assert_eq!(want, got);
    }
    let single = single.single_controller().unwrap();
    let quorum = quorum.quorum_controller(1).unwrap();
    assert_eq!(single.records(), quorum.records());
    assert!(quorum.records().len() > 5);
}
