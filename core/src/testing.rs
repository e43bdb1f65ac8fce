//! The one test harness: a whole cluster of real brokers and controllers over
//! [`MemStorage`], in one deterministic world driven through core's node driver
//! ([`crate::node`]). Messages wait in one FIFO queue and are delivered in order; a test
//! advances time itself, cuts links, and crashes nodes (which lose every unsynced byte and
//! every message in flight to them). Built for core's own tests, and for other crates'
//! tests behind the `testing` feature.
//!
//! Its network, [`Net`], and the delivery loop, [`Delivery`], are generic: a test of one
//! lower-level machine (Raft nodes, partition replicas) runs its own nodes on the same
//! queue, cut links and delivery (in order, one picked message, or only what a filter
//! lets through) instead of a router of its own.
//!
//! It judges nothing: the tests that use it (and core's `debug_check`s) do.

use crate::broker::{Broker, BrokerConfig, BrokerEvent};
use crate::controller::{
    Controller, ControllerConfig, ControllerEvent, ControllerOpenError, ControllerRequest,
    ControllerResponse, QuorumConfig, QuorumController, QuorumOpenError, Requester,
};
use crate::message::{Address, Message};
use crate::node::{ControllerNode, Machine, NodeOutput};
use crate::raft::Term;
use crate::types::{Nanos, NodeId, Offset};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

#[cfg(test)]
pub(crate) mod faulty;
mod mem_storage;

pub use mem_storage::{CrashFile, MemStorage};

/// The network every harness world shares: messages in flight in send order and the
/// directed links that drop everything. Generic over the address and message types, so a
/// world of bare state machines that speak their own dialect (Raft nodes, replicas) runs on
/// the same queue and cut links as the whole [`MemCluster`].
#[derive(Debug)]
pub struct Net<A, M> {
    /// Messages sent and not yet delivered: (from, to, message).
    pub queue: VecDeque<(A, A, M)>,
    /// Directed links that drop everything.
    pub cut: BTreeSet<(A, A)>,
}

impl<A, M> Default for Net<A, M> {
    fn default() -> Self {
        Self {
            queue: VecDeque::new(),
            cut: BTreeSet::new(),
        }
    }
}

impl<A: Copy + Ord, M> Net<A, M> {
    /// Queues `msg` behind everything already in flight.
    pub fn send(&mut self, from: A, to: A, msg: M) {
        self.queue.push_back((from, to, msg));
    }

    /// Takes the first message in flight that `pred` picks (the rest keep their order): a
    /// test that reorders or drops one message says which.
    pub fn take_where(&mut self, mut pred: impl FnMut(A, A, &M) -> bool) -> Option<(A, A, M)> {
        let i = self.queue.iter().position(|(f, t, m)| pred(*f, *t, m))?;
        self.queue.remove(i)
    }

    /// Cuts (both directions) every link between `a` and each of `others`.
    pub fn isolate(&mut self, a: A, others: impl IntoIterator<Item = A>) {
        for b in others {
            if b != a {
                self.cut.insert((a, b));
                self.cut.insert((b, a));
            }
        }
    }

    /// A crash of `a`: every message in flight to it is lost.
    pub fn lose_to(&mut self, a: A) {
        self.queue.retain(|(_, to, _)| *to != a);
    }

    /// What `a` sent and is not delivered yet is lost too (a crash that takes its unsent
    /// buffers with it).
    pub fn lose_from(&mut self, a: A) {
        self.queue.retain(|(from, _, _)| *from != a);
    }
}

/// A world of machines behind one [`Net`]: it says how a message reaches its recipient;
/// the queue, the cut links and the delivery order are the net's. Delivering to a node that
/// is down is the world's business (it drops the message).
pub trait Delivery {
    type Addr: Copy + Ord;
    type Msg;

    fn net(&mut self) -> &mut Net<Self::Addr, Self::Msg>;

    /// Hands `msg` to `to` now and queues what that sent (the link is known not cut).
    fn step(&mut self, from: Self::Addr, to: Self::Addr, msg: Self::Msg);

    /// Delivers `msg` now, unless its link is cut.
    fn deliver(&mut self, from: Self::Addr, to: Self::Addr, msg: Self::Msg) {
        if !self.net().cut.contains(&(from, to)) {
            self.step(from, to, msg);
        }
    }

    /// Delivers the first message in flight that `pred` picks; false if there is none.
    fn deliver_where(
        &mut self,
        pred: impl FnMut(Self::Addr, Self::Addr, &Self::Msg) -> bool,
    ) -> bool {
        let Some((from, to, msg)) = self.net().take_where(pred) else {
            return false;
        };
        self.deliver(from, to, msg);
        true
    }

    /// Delivers the next message in flight; false if there is none.
    fn deliver_next(&mut self) -> bool {
        self.deliver_where(|_, _, _| true)
    }

    /// Delivers until the queue is empty (what the deliveries send is delivered too).
    fn deliver_all(&mut self) {
        self.deliver_only(|_, _, _| true);
    }

    /// Delivers in order until the queue is empty, losing every message `ok` refuses.
    fn deliver_only(&mut self, mut ok: impl FnMut(Self::Addr, Self::Addr, &Self::Msg) -> bool) {
        let mut n = 0;
        while let Some((from, to, msg)) = self.net().queue.pop_front() {
            if ok(from, to, &msg) {
                self.deliver(from, to, msg);
            }
            n += 1;
            assert!(n < 100_000, "message storm");
        }
    }
}

/// The cluster: every node by id, their disks (which survive crashes), the network queue.
#[derive(Default)]
pub struct MemCluster {
    pub now: Nanos,
    /// Running brokers (a crashed one is absent).
    pub brokers: BTreeMap<NodeId, Broker<MemStorage>>,
    /// Running controller nodes by controller id (a single controller is 1).
    pub controllers: BTreeMap<NodeId, ControllerNode<MemStorage>>,
    /// The brokers' disks.
    pub disks: BTreeMap<NodeId, MemStorage>,
    /// The controllers' disks.
    pub controller_disks: BTreeMap<NodeId, MemStorage>,
    /// Messages in flight and cut links.
    pub net: Net<Address, Message>,
    /// Messages delivered to clients: (client id, message).
    pub inbox: Vec<(u64, Message)>,
    /// Messages delivered to a broker address no broker runs at: (from, to, message). A
    /// test that plays a broker itself reads its replies here. (Mail to a controller that
    /// is down is lost.)
    pub unrouted: Vec<(Address, Address, Message)>,
    /// What the brokers reported, in order.
    pub events: Vec<(NodeId, BrokerEvent)>,
    /// What the controllers decided, in order.
    pub controller_events: Vec<(NodeId, ControllerEvent)>,
    /// Quorum controller nodes' role changes, in order: (node, active, term).
    pub roles: Vec<(NodeId, bool, Term)>,
}

impl MemCluster {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts (or restarts, on its disk) broker `id`.
    pub fn start_broker(&mut self, id: NodeId, config: BrokerConfig) {
        let disk = self.disks.entry(id).or_default().clone();
        let (b, _reports) = Broker::open(id, config, disk, self.now).expect("broker opens");
        self.brokers.insert(id, b);
        self.collect();
    }

    /// Starts (or restarts, on its disk) the single controller, controller 1.
    pub fn start_controller(&mut self, config: ControllerConfig) {
        self.open_controller(config).expect("controller opens");
    }

    /// As [`MemCluster::start_controller`], for a test of what opening does with its disk.
    pub fn open_controller(&mut self, config: ControllerConfig) -> Result<(), ControllerOpenError> {
        let disk = self.controller_disks.entry(1).or_default().clone();
        let c = Controller::open(disk, config, self.now)?;
        self.controllers
            .insert(1, ControllerNode::Single(Box::new(c)));
        self.collect();
        Ok(())
    }

    /// Starts (or restarts, on its disk) quorum controller node `id`.
    pub fn open_quorum_controller(
        &mut self,
        id: NodeId,
        config: QuorumConfig,
    ) -> Result<(), QuorumOpenError> {
        let disk = self.controller_disks.entry(id).or_default().clone();
        let q = QuorumController::open(disk, config, self.now)?;
        self.controllers
            .insert(id, ControllerNode::Quorum(Box::new(q)));
        self.collect();
        Ok(())
    }

    /// Quorum controller node `id`, while up.
    pub fn quorum_controller(&self, id: NodeId) -> Option<&QuorumController<MemStorage>> {
        match self.controllers.get(&id) {
            Some(ControllerNode::Quorum(q)) => Some(q),
            _ => None,
        }
    }

    /// The single controller, while up.
    pub fn single_controller(&self) -> Option<&Controller<MemStorage>> {
        match self.controllers.get(&1) {
            Some(ControllerNode::Single(c)) => Some(c),
            _ => None,
        }
    }

    /// Sends `msg` from `from` (a client, or a broker the test plays itself) to `to`,
    /// delivers everything, and takes the replies that reached `from`.
    pub fn ask(&mut self, from: Address, to: Address, msg: Message) -> Vec<Message> {
        self.net.send(from, to, msg);
        self.deliver_all();
        match from {
            Address::Client(c) => take(&mut self.inbox, |(to, _)| *to == c)
                .into_iter()
                .map(|(_, m)| m)
                .collect(),
            _ => take(&mut self.unrouted, |(_, to, _)| *to == from)
                .into_iter()
                .map(|(_, _, m)| m)
                .collect(),
        }
    }

    /// Crashes a broker: it loses every unsynced byte and every message in flight to it.
    pub fn crash_broker(&mut self, id: NodeId) {
        self.brokers.remove(&id);
        if let Some(d) = self.disks.get(&id) {
            d.crash_lose_unsynced();
        }
        self.net.lose_to(Address::Node(id));
    }

    /// Crashes controller `id` likewise.
    pub fn crash_controller(&mut self, id: NodeId) {
        self.crash_controller_with(id, MemStorage::crash_lose_unsynced);
    }

    /// Crashes controller `id`, its disk keeping what `power_loss` leaves of it (a torn
    /// unsynced tail, say).
    pub fn crash_controller_with(&mut self, id: NodeId, power_loss: impl FnOnce(&MemStorage)) {
        self.controllers.remove(&id);
        if let Some(d) = self.controller_disks.get(&id) {
            power_loss(d);
        }
        self.net.lose_to(Address::Controller(id));
    }

    /// Every node's address, brokers first.
    pub fn addresses(&self) -> Vec<Address> {
        let brokers = self.brokers.keys().map(|&n| Address::Node(n));
        let controllers = self.controllers.keys().map(|&n| Address::Controller(n));
        brokers.chain(controllers).collect()
    }

    /// Cuts (both directions) every link between `a` and any node.
    pub fn isolate(&mut self, a: Address) {
        let all = self.addresses();
        self.net.isolate(a, all);
    }

    /// Queues what every node produced (brokers first, then controllers) and records
    /// their events.
    pub fn collect(&mut self) {
        for (&id, b) in self.brokers.iter_mut() {
            for o in b.poll_outputs() {
                match o {
                    NodeOutput::Send { to, msg } => self.net.send(Address::Node(id), to, msg),
                    NodeOutput::Broker(e) => self.events.push((id, e)),
                    _ => {}
                }
            }
        }
        for (&id, c) in self.controllers.iter_mut() {
            for o in c.poll_outputs() {
                match o {
                    NodeOutput::Send { to, msg } => self.net.send(Address::Controller(id), to, msg),
                    NodeOutput::Controller(e) => self.controller_events.push((id, e)),
                    NodeOutput::RoleChanged { active, term, .. } => {
                        self.roles.push((id, active, term))
                    }
                    NodeOutput::Broker(_) => {}
                }
            }
        }
    }

    /// Every node sees the time `now`.
    pub fn tick_all(&mut self) {
        let now = self.now;
        for b in self.brokers.values_mut() {
            b.handle_timeout(now);
        }
        for c in self.controllers.values_mut() {
            c.handle_timeout(now);
        }
        self.collect();
    }

    /// Node `at` alone sees the time `now` (a world that wakes each node when it is due).
    pub fn tick_node(&mut self, at: Address) {
        let now = self.now;
        match at {
            Address::Node(n) => {
                if let Some(b) = self.brokers.get_mut(&n) {
                    b.handle_timeout(now);
                }
            }
            Address::Controller(n) => {
                if let Some(c) = self.controllers.get_mut(&n) {
                    c.handle_timeout(now);
                }
            }
            Address::Client(_) => {}
        }
        self.collect();
    }

    /// The earliest time any node wants to be woken.
    pub fn next_timeout(&self) -> Option<Nanos> {
        let brokers = self.brokers.values().filter_map(|b| b.poll_timeout());
        let controllers = self.controllers.values().filter_map(|c| c.poll_timeout());
        brokers.chain(controllers).min()
    }

    /// One request to the single controller from `from` (a client, or a broker the test
    /// plays itself) and what it caused: its one reply, asserted to come back to `from`,
    /// and the controller's events.
    pub fn ask_controller(
        &mut self,
        from: Requester,
        req: ControllerRequest,
    ) -> (ControllerResponse, Vec<ControllerEvent>) {
        let seen = self.controller_events.len();
        let msg = Message::ControllerRequest(req);
        let mut replies = self.ask(from.into(), Address::Controller(1), msg);
        assert_eq!(
            replies.len(),
            1,
            "exactly one reply per request, back to who asked: {replies:?}"
        );
        let Some(Message::ControllerResponse(reply)) = replies.pop() else {
            panic!("a controller reply, got {replies:?}")
        };
        let events = self.controller_events[seen..].iter();
        (*reply, events.map(|(_, e)| e.clone()).collect())
    }
}

impl Delivery for MemCluster {
    type Addr = Address;
    type Msg = Message;

    fn net(&mut self) -> &mut Net<Address, Message> {
        &mut self.net
    }

    /// A message to a client lands in its inbox; one to an address no node runs at (a
    /// crashed node, a broker the test plays) in `unrouted`.
    fn step(&mut self, from: Address, to: Address, msg: Message) {
        let now = self.now;
        match to {
            Address::Node(n) if self.brokers.contains_key(&n) => {
                self.brokers.get_mut(&n).expect("up").step(now, from, msg);
            }
            Address::Controller(n) if self.controllers.contains_key(&n) => {
                self.controllers
                    .get_mut(&n)
                    .expect("up")
                    .step(now, from, msg);
            }
            Address::Client(c) => self.inbox.push((c, msg)),
            Address::Node(_) => self.unrouted.push((from, to, msg)),
            Address::Controller(_) => {}
        }
        self.collect();
    }
}

/// Takes the items `pick` picks out of `from`, in order.
fn take<T>(from: &mut Vec<T>, mut pick: impl FnMut(&T) -> bool) -> Vec<T> {
    let (taken, kept) = std::mem::take(from).into_iter().partition(|t| pick(t));
    *from = kept;
    taken
}

/// A healthy broker's registration (no offline or corrupt partitions to report).
pub fn register_request(broker: NodeId, incarnation: u64) -> ControllerRequest {
    ControllerRequest::RegisterBroker {
        broker,
        incarnation,
        offline_partitions: Vec::new(),
        corrupt_partitions: Vec::new(),
    }
}

/// A healthy broker's heartbeat at `metadata_offset` (nothing offline or corrupt).
pub fn heartbeat_request(
    broker: NodeId,
    broker_epoch: Offset,
    metadata_offset: Offset,
) -> ControllerRequest {
    ControllerRequest::BrokerHeartbeat {
        broker,
        broker_epoch,
        metadata_offset,
        offline_partitions: Vec::new(),
        corrupt_partitions: Vec::new(),
        log_info: Vec::new(),
    }
}
