//! The node driver: one broker or controller process behind network addresses.
//!
//! Core's state machines each speak their own dialect: a broker takes messages from an
//! [`Address`] and emits [`Output`]s, a controller takes [`ControllerRequest`]s from a
//! [`Requester`] and emits [`ControllerOutput`]s, a quorum controller node adds Raft
//! messages between controller ids. A driver that moves bytes (the simulator's world, the
//! tokio runtime, core's test harness) wants one vocabulary: a message arrived from an
//! address ([`Machine::step`]), time passed ([`Machine::handle_timeout`]), when to wake
//! next ([`Machine::poll_timeout`]), and what to send where ([`Machine::poll_outputs`]),
//! in the manner of quinn-proto's `Endpoint`/`Connection` and raft-rs's `RawNode`. This
//! module is that vocabulary, and the one place that maps addresses to requesters and back
//! and wraps controller replies and Raft messages as [`Message`]s.
//!
//! Data flow: the driver hands each arriving `(from, message)` to `step`, calls
//! `handle_timeout` when `poll_timeout` falls due, and after every step or timeout sends
//! each [`NodeOutput::Send`] and observes the events. Storage stays synchronous: a state
//! machine writes through its [`Storage`] during the step, so nothing here is an effect
//! the driver must perform before the outputs are valid.

use crate::broker::{Broker, BrokerEvent, Output};
use crate::controller::{
    Controller, ControllerEvent, ControllerOutput, ControllerRequest, MetadataImage,
    QuorumController, QuorumOutput, Requester,
};
use crate::log::Storage;
use crate::message::{Address, Message};
use crate::raft::{Raft, Term};
use crate::types::{Nanos, NodeId};

/// What a node asks its driver to do or observe, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeOutput {
    /// Deliver `msg` to `to`.
    Send { to: Address, msg: Message },
    /// Something a broker did (for logs, traces and invariant checks).
    Broker(BrokerEvent),
    /// Something a controller decided.
    Controller(ControllerEvent),
    /// A quorum controller node became, or stopped being, the active controller (or its
    /// term or known leader changed).
    RoleChanged {
        active: bool,
        term: Term,
        leader: Option<NodeId>,
    },
}

/// A state machine behind addresses. Implemented by [`Broker`], [`ControllerNode`] and
/// [`Node`] (either), so a driver that knows which it runs keeps the concrete type.
pub trait Machine {
    /// Hands it a message from `from`. Returns false, changing nothing, when this kind of
    /// node takes no such message from such a sender (a broker request sent to a
    /// controller, a Raft message to a single controller): the driver may log it.
    fn step(&mut self, now: Nanos, from: Address, msg: Message) -> bool;
    /// Time is now `now` (at or after [`Machine::poll_timeout`]).
    fn handle_timeout(&mut self, now: Nanos);
    /// When it next wants [`Machine::handle_timeout`], in its own clock.
    fn poll_timeout(&self) -> Option<Nanos>;
    /// Moves what it produced since the last call, in order, to the end of `out`. A driver
    /// that keeps `out` between steps allocates nothing per step for outputs (the
    /// simulator steps a machine some 100,000 times a simulated minute).
    fn poll_outputs_into(&mut self, out: &mut Vec<NodeOutput>);
    /// Takes what it produced since the last call, in order.
    fn poll_outputs(&mut self) -> Vec<NodeOutput> {
        let mut out = Vec::new();
        self.poll_outputs_into(&mut out);
        out
    }
}

impl From<Requester> for Address {
    fn from(r: Requester) -> Self {
        match r {
            Requester::Broker(n) => Address::Node(n),
            Requester::Client(c) => Address::Client(c),
        }
    }
}

impl Requester {
    /// Who a request from `from` is from, as the controller sees it; `None` for another
    /// controller node (they talk Raft, not requests).
    pub fn from_address(from: Address) -> Option<Requester> {
        match from {
            Address::Node(n) => Some(Requester::Broker(n)),
            Address::Client(c) => Some(Requester::Client(c)),
            Address::Controller(_) => None,
        }
    }
}

impl From<Output> for NodeOutput {
    fn from(o: Output) -> Self {
        match o {
            Output::Send { to, msg } => NodeOutput::Send { to, msg },
            Output::Event(e) => NodeOutput::Broker(e),
        }
    }
}

impl From<ControllerOutput> for NodeOutput {
    fn from(o: ControllerOutput) -> Self {
        match o {
            ControllerOutput::Send { to, response } => NodeOutput::Send {
                to: to.into(),
                msg: response.into(),
            },
            ControllerOutput::Event(e) => NodeOutput::Controller(e),
        }
    }
}

impl<S: Storage + Clone> Machine for Broker<S> {
    fn step(&mut self, now: Nanos, from: Address, msg: Message) -> bool {
        self.handle(now, from, msg);
        true
    }

    fn handle_timeout(&mut self, now: Nanos) {
        self.tick(now);
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        self.next_timeout()
    }

    fn poll_outputs_into(&mut self, out: &mut Vec<NodeOutput>) {
        out.extend(self.drain_outputs_iter().map(NodeOutput::from));
    }
}

/// A controller process: the single controller over its own metadata log, or one node of
/// a Raft quorum (whose peers are `Address::Controller`s).
pub enum ControllerNode<S: Storage> {
    Single(Box<Controller<S>>),
    Quorum(Box<QuorumController<S>>),
}

impl<S: Storage> ControllerNode<S> {
    /// The image of the committed metadata records.
    pub fn image(&self) -> &MetadataImage {
        match self {
            ControllerNode::Single(c) => c.image(),
            ControllerNode::Quorum(q) => q.committed_image(),
        }
    }

    /// Whether this node decides (a single controller always does).
    pub fn is_active(&self) -> bool {
        match self {
            ControllerNode::Single(_) => true,
            ControllerNode::Quorum(q) => q.is_active(),
        }
    }

    /// The Raft node of a quorum member.
    pub fn raft(&self) -> Option<&Raft<S>> {
        match self {
            ControllerNode::Single(_) => None,
            ControllerNode::Quorum(q) => Some(q.raft()),
        }
    }

    fn request(&mut self, now: Nanos, from: Requester, request: ControllerRequest) {
        match self {
            ControllerNode::Single(c) => c.handle(now, from, request),
            ControllerNode::Quorum(q) => q.handle(now, from, request),
        }
    }
}

impl<S: Storage> Machine for ControllerNode<S> {
    fn step(&mut self, now: Nanos, from: Address, msg: Message) -> bool {
        match (self, Requester::from_address(from), msg) {
            (node, Some(requester), Message::ControllerRequest(req)) => {
                node.request(now, requester, req)
            }
            (ControllerNode::Quorum(q), None, Message::Raft(m)) => {
                let Address::Controller(peer) = from else {
                    unreachable!("only a controller address has no requester")
                };
                q.handle_peer(now, peer, m)
            }
            _ => return false,
        }
        true
    }

    fn handle_timeout(&mut self, now: Nanos) {
        match self {
            ControllerNode::Single(c) => c.tick(now),
            ControllerNode::Quorum(q) => q.tick(now),
        }
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        match self {
            ControllerNode::Single(c) => c.next_timeout(),
            ControllerNode::Quorum(q) => q.next_timeout(),
        }
    }

    /// A quorum node's role changes come first, then its Raft messages, then its replies
    /// and events (each in the order produced): the order the simulator has always sent
    /// them in, which its pinned trace hashes depend on.
    fn poll_outputs_into(&mut self, out: &mut Vec<NodeOutput>) {
        let q = match self {
            ControllerNode::Single(c) => {
                out.extend(c.drain_outputs().into_iter().map(NodeOutput::from));
                return;
            }
            ControllerNode::Quorum(q) => q,
        };
        let (mut roles, mut peers, mut rest) = (Vec::new(), Vec::new(), Vec::new());
        for o in q.drain_outputs() {
            match o {
                QuorumOutput::RoleChanged {
                    active,
                    term,
                    leader,
                } => roles.push(NodeOutput::RoleChanged {
                    active,
                    term,
                    leader,
                }),
                QuorumOutput::Peer { to, message } => peers.push(NodeOutput::Send {
                    to: Address::Controller(to),
                    msg: Message::Raft(message),
                }),
                QuorumOutput::Controller(c) => rest.push(c.into()),
            }
        }
        out.append(&mut roles);
        out.append(&mut peers);
        out.append(&mut rest);
    }
}

/// One node process: a broker or a controller.
pub enum Node<S: Storage + Clone> {
    Broker(Box<Broker<S>>),
    Controller(ControllerNode<S>),
}

impl<S: Storage + Clone> Node<S> {
    /// Its address on the network.
    pub fn address(&self) -> Address {
        match self {
            Node::Broker(b) => Address::Node(b.id()),
            Node::Controller(ControllerNode::Single(_)) => Address::Controller(1),
            Node::Controller(ControllerNode::Quorum(q)) => Address::Controller(q.id()),
        }
    }

    pub fn broker(&self) -> Option<&Broker<S>> {
        match self {
            Node::Broker(b) => Some(b),
            Node::Controller(_) => None,
        }
    }

    pub fn broker_mut(&mut self) -> Option<&mut Broker<S>> {
        match self {
            Node::Broker(b) => Some(b),
            Node::Controller(_) => None,
        }
    }

    pub fn controller(&self) -> Option<&ControllerNode<S>> {
        match self {
            Node::Broker(_) => None,
            Node::Controller(c) => Some(c),
        }
    }
}

impl<S: Storage + Clone> Machine for Node<S> {
    fn step(&mut self, now: Nanos, from: Address, msg: Message) -> bool {
        match self {
            Node::Broker(b) => b.step(now, from, msg),
            Node::Controller(c) => c.step(now, from, msg),
        }
    }

    fn handle_timeout(&mut self, now: Nanos) {
        match self {
            Node::Broker(b) => b.handle_timeout(now),
            Node::Controller(c) => c.handle_timeout(now),
        }
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        match self {
            Node::Broker(b) => b.poll_timeout(),
            Node::Controller(c) => c.poll_timeout(),
        }
    }

    fn poll_outputs_into(&mut self, out: &mut Vec<NodeOutput>) {
        match self {
            Node::Broker(b) => b.poll_outputs_into(out),
            Node::Controller(c) => c.poll_outputs_into(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::{ControllerConfig, ControllerResponse};
    use crate::testing::MemStorage;

    fn controller() -> ControllerNode<MemStorage> {
        let c = Controller::open(MemStorage::new(), ControllerConfig::default(), 0)
            .expect("a fresh controller opens");
        ControllerNode::Single(Box::new(c))
    }

    /// Every message a broker sends travels as an output (pushed, converted, drained),
    /// and LLVM copies values up to 128 bytes inline but calls memcpy above that: a large
    /// event payload belongs in a box (as `BrokerEvent::LogOpened`'s summary is).
    #[test]
    fn outputs_stay_small() {
        let sizes = [
            std::mem::size_of::<NodeOutput>(),
            std::mem::size_of::<crate::broker::Output>(),
        ];
        assert!(sizes.iter().all(|&s| s <= 128), "{sizes:?}");
    }

    #[test]
    fn controller_reply_goes_back_to_the_sender_address() {
        let mut c = controller();
        let asked = c.step(
            0,
            Address::Client(7),
            Message::ControllerRequest(ControllerRequest::FetchMetadata { from_offset: 0 }),
        );
        assert!(asked);
        let outs = c.poll_outputs();
        let reply = outs.iter().find_map(|o| match o {
            NodeOutput::Send { to, msg } => Some((*to, msg)),
            _ => None,
        });
        let Some((to, Message::ControllerResponse(r))) = reply else {
            panic!("expected a metadata reply, got {outs:?}");
        };
        assert!(matches!(**r, ControllerResponse::Metadata(_)), "{r:?}");
        assert_eq!(to, Address::Client(7));
    }

    #[test]
    fn a_single_controller_takes_no_raft_and_no_broker_messages() {
        let mut c = controller();
        let raft = Message::Raft(crate::raft::Message::VoteResponse {
            term: 1,
            granted: false,
        });
        assert!(!c.step(0, Address::Controller(2), raft));
        let from_ctl =
            Message::ControllerRequest(ControllerRequest::FetchMetadata { from_offset: 0 });
        assert!(!c.step(0, Address::Controller(2), from_ctl));
        assert!(c.poll_outputs().is_empty());
    }

    #[test]
    fn a_node_is_addressed_as_what_it_runs() {
        let config = crate::broker::BrokerConfig::default();
        let (b, _) = Broker::open(4, config, MemStorage::new(), 0).expect("a fresh broker opens");
        let mut broker = Node::Broker(Box::new(b));
        assert_eq!(broker.address(), Address::Node(4));
        assert!(broker.broker().is_some() && broker.controller().is_none());
        // A fresh broker registers with the controller at once.
        let to_controller = broker.poll_outputs().iter().any(|o| {
            matches!(
                o,
                NodeOutput::Send {
                    to: Address::Controller(1),
                    msg: Message::ControllerRequest(_)
                }
            )
        });
        assert!(to_controller);
        let controller = Node::Controller(controller());
        assert_eq!(controller.address(), Address::Controller(1));
        assert!(controller.controller().is_some_and(|c| c.is_active()));
    }

    #[test]
    fn requester_and_address_map_both_ways() {
        for r in [Requester::Broker(3), Requester::Client(9)] {
            assert_eq!(Requester::from_address(r.into()), Some(r));
        }
        assert_eq!(Requester::from_address(Address::Controller(1)), None);
    }
}
