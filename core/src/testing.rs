//! The one test harness: a whole cluster of real brokers and controllers over
//! [`MemStorage`], in one deterministic world driven through core's node driver
//! ([`crate::node`]). Messages wait in one FIFO queue and are delivered in order; a test
//! advances time itself, cuts links, and crashes nodes (which lose every unsynced byte and
//! every message in flight to them). Built for core's own tests, and for other crates'
//! tests behind the `testing` feature.
//!
//! It judges nothing: the tests that use it (and core's `debug_check`s) do.

use crate::broker::{Broker, BrokerConfig, BrokerEvent};
use crate::controller::{
    Controller, ControllerConfig, ControllerEvent, ControllerOutput, ControllerRequest,
    ControllerResponse, Requester,
};
use crate::log::MemStorage;
use crate::message::{Address, Message};
use crate::node::{ControllerNode, Machine, NodeOutput};
use crate::types::{Nanos, NodeId, Offset};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

#[cfg(test)]
pub(crate) mod faulty;

/// The cluster: every node by id, their disks (which survive crashes), the network queue.
#[derive(Default)]
pub struct Cluster {
    pub now: Nanos,
    /// Running brokers (a crashed one is absent).
    pub brokers: BTreeMap<NodeId, Broker<MemStorage>>,
    /// Running controller nodes by controller id (a single controller is 1).
    pub controllers: BTreeMap<NodeId, ControllerNode<MemStorage>>,
    /// The brokers' disks.
    pub disks: BTreeMap<NodeId, MemStorage>,
    /// The controllers' disks.
    pub controller_disks: BTreeMap<NodeId, MemStorage>,
    /// Messages sent and not yet delivered: (from, to, message).
    pub queue: VecDeque<(Address, Address, Message)>,
    /// Messages delivered to clients: (client id, message).
    pub inbox: Vec<(u64, Message)>,
    /// Directed links that drop everything.
    pub cut: BTreeSet<(Address, Address)>,
    /// What the brokers reported, in order.
    pub events: Vec<(NodeId, BrokerEvent)>,
    /// What the controllers decided, in order.
    pub controller_events: Vec<(NodeId, ControllerEvent)>,
}

impl Cluster {
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
        let disk = self.controller_disks.entry(1).or_default().clone();
        let c = Controller::open(disk, config, self.now).expect("controller opens");
        self.controllers
            .insert(1, ControllerNode::Single(Box::new(c)));
        self.collect();
    }

    /// The single controller, while up.
    pub fn single_controller(&self) -> Option<&Controller<MemStorage>> {
        match self.controllers.get(&1) {
            Some(ControllerNode::Single(c)) => Some(c),
            _ => None,
        }
    }

    /// Crashes a broker: it loses every unsynced byte and every message in flight to it.
    pub fn crash_broker(&mut self, id: NodeId) {
        self.brokers.remove(&id);
        if let Some(d) = self.disks.get(&id) {
            d.crash_lose_unsynced();
        }
        self.queue.retain(|(_, to, _)| *to != Address::Node(id));
    }

    /// Crashes controller `id` likewise.
    pub fn crash_controller(&mut self, id: NodeId) {
        self.controllers.remove(&id);
        if let Some(d) = self.controller_disks.get(&id) {
            d.crash_lose_unsynced();
        }
        self.queue
            .retain(|(_, to, _)| *to != Address::Controller(id));
    }

    /// Every node's address, brokers first.
    pub fn addresses(&self) -> Vec<Address> {
        let brokers = self.brokers.keys().map(|&n| Address::Node(n));
        let controllers = self.controllers.keys().map(|&n| Address::Controller(n));
        brokers.chain(controllers).collect()
    }

    /// Cuts (both directions) every link between `a` and any node.
    pub fn isolate(&mut self, a: Address) {
        for b in self.addresses() {
            if b != a {
                self.cut.insert((a, b));
                self.cut.insert((b, a));
            }
        }
    }

    /// Queues what every node produced (brokers first, then controllers) and records
    /// their events.
    pub fn collect(&mut self) {
        for (&id, b) in self.brokers.iter_mut() {
            for o in b.poll_outputs() {
                match o {
                    NodeOutput::Send { to, msg } => {
                        self.queue.push_back((Address::Node(id), to, msg))
                    }
                    NodeOutput::Broker(e) => self.events.push((id, e)),
                    _ => {}
                }
            }
        }
        for (&id, c) in self.controllers.iter_mut() {
            for o in c.poll_outputs() {
                match o {
                    NodeOutput::Send { to, msg } => {
                        self.queue.push_back((Address::Controller(id), to, msg))
                    }
                    NodeOutput::Controller(e) => self.controller_events.push((id, e)),
                    _ => {}
                }
            }
        }
    }

    /// Delivers one message now (dropped on a cut link or to a node that is down).
    pub fn deliver(&mut self, from: Address, to: Address, msg: Message) {
        if self.cut.contains(&(from, to)) {
            return;
        }
        let now = self.now;
        match to {
            Address::Node(n) => {
                if let Some(b) = self.brokers.get_mut(&n) {
                    b.step(now, from, msg);
                }
            }
            Address::Controller(n) => {
                if let Some(c) = self.controllers.get_mut(&n) {
                    c.step(now, from, msg);
                }
            }
            Address::Client(c) => self.inbox.push((c, msg)),
        }
        self.collect();
    }

    /// Delivers until the queue is empty (what the deliveries send is delivered too).
    pub fn deliver_all(&mut self) {
        let mut n = 0;
        while let Some((from, to, msg)) = self.queue.pop_front() {
            self.deliver(from, to, msg);
            n += 1;
            assert!(n < 100_000, "message storm");
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

    /// The earliest time any node wants to be woken.
    pub fn next_timeout(&self) -> Option<Nanos> {
        let brokers = self.brokers.values().filter_map(|b| b.poll_timeout());
        let controllers = self.controllers.values().filter_map(|c| c.poll_timeout());
        brokers.chain(controllers).min()
    }

    /// Sends a message from a client (or anyone) into the queue.
    pub fn send(&mut self, from: Address, to: Address, msg: Message) {
        self.queue.push_back((from, to, msg));
    }
}

/// One request to a bare controller (no cluster around it) and what it caused: its single
/// reply, asserted to go back to `from`, and the controller's events. The controller's own
/// scripted tests and its proptest ask through this.
pub fn ask_controller(
    c: &mut Controller<MemStorage>,
    now: Nanos,
    from: Requester,
    req: ControllerRequest,
) -> (ControllerResponse, Vec<ControllerEvent>) {
    c.handle(now, from, req);
    let mut replies = Vec::new();
    let mut events = Vec::new();
    for o in c.drain_outputs() {
        match o {
            ControllerOutput::Send { to, response } => {
                assert_eq!(to, from, "a reply goes back to who asked");
                replies.push(response);
            }
            ControllerOutput::Event(e) => events.push(e),
        }
    }
    assert_eq!(
        replies.len(),
        1,
        "exactly one reply per request: {replies:?}"
    );
    (replies.pop().expect("one reply"), events)
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
    }
}
