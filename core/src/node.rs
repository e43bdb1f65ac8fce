//! The node driver: one broker or controller process behind network addresses.
//!
//! Every state machine in core speaks one vocabulary, in the manner of quinn-proto's
//! `Endpoint`/`Connection` and raft-rs's `RawNode`: an input arrived (`step(now, from,
//! input)`), time passed (`handle_timeout(now)`), when to wake next (`poll_timeout()`), and
//! what it produced (`poll_outputs()` / `poll_outputs_into(&mut out)`). They differ only in
//! whom they hear from: a broker hears [`Address`]es and emits [`NodeOutput`]s, a controller
//! hears [`Requester`]s and emits [`ControllerOutput`]s, a quorum controller node also hears
//! Raft messages from other controller ids. A driver that moves bytes (the simulator's
//! world, the tokio runtime, core's test harness) wants addresses only: [`Machine`] is that
//! seam, and this module is the one place that maps addresses to requesters and back and
//! wraps controller replies and Raft messages as [`Message`]s.
//!
//! Data flow: the driver hands each arriving `(from, message)` to `step`, calls
//! `handle_timeout` when `poll_timeout` falls due, and after every step or timeout sends
//! each [`NodeOutput::Send`] and observes the events. Storage stays synchronous: a state
//! machine writes through its [`Storage`] during the step, so nothing here is an effect
//! the driver must perform before the outputs are valid. One exception is a runtime's own
//! choice: a driver that defers fsyncs to a group commit holds back every output that
//! depends on them until the flush ran, by [`NodeOutput::waits_for_flush`] ([`FlushGate`]).

use crate::broker::{Broker, BrokerEvent};
use crate::controller::{
    Controller, ControllerEvent, ControllerOutput, ControllerRequest, MetadataImage,
    QuorumController, QuorumInput, QuorumOutput, Requester,
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

impl NodeOutput {
    /// Whether this output must wait for the fsync of what its step wrote, in a runtime
    /// that defers fsyncs to one group commit per burst of inputs ([`FlushGate`]). Only
    /// replication traffic between brokers may leave first: a follower may take records
    /// its leader has not fsynced yet, since the leader's high watermark counts only its
    /// own flushed offset (nothing is acknowledged on the strength of them), and a
    /// follower's fetch reports only what it has fsynced already (it flushes before
    /// fetching). Every reply to a client (acks=1 included), every request to the
    /// controller and every event waits.
    pub fn waits_for_flush(&self) -> bool {
        !matches!(
            self,
            NodeOutput::Send {
                to: Address::Node(_),
                msg: Message::Fetch(_) | Message::FetchResponse(_),
            }
        )
    }
}

/// The outputs held back until a group-commit flush has run: a runtime passes a burst's
/// outputs through [`FlushGate::before_flush`], sends what is left, runs the flush (the
/// machine's `handle_timeout`), and passes the next outputs through
/// [`FlushGate::after_flush`]. What may leave early is decided by
/// [`NodeOutput::waits_for_flush`] alone, so every runtime applies the same rule.
#[derive(Debug, Default)]
pub struct FlushGate {
    held: Vec<NodeOutput>,
}

impl FlushGate {
    /// Before the flush: leaves in `outputs`, in order, those that may go now, and holds
    /// the others, in order, behind any it holds already.
    pub fn before_flush(&mut self, outputs: &mut Vec<NodeOutput>) {
        if !outputs.iter().any(NodeOutput::waits_for_flush) {
            return;
        }
        for o in std::mem::take(outputs) {
            if o.waits_for_flush() {
                self.held.push(o);
            } else {
                outputs.push(o);
            }
        }
    }

    /// After the flush: puts everything held in front of `outputs` (they were produced
    /// first), so every output that waited leaves in the order produced.
    pub fn after_flush(&mut self, outputs: &mut Vec<NodeOutput>) {
        if self.held.is_empty() {
            return;
        }
        self.held.append(outputs);
        std::mem::swap(&mut self.held, outputs);
    }

    /// How many outputs wait for the flush.
    pub fn held(&self) -> usize {
        self.held.len()
    }
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

/// The broker's inherent methods are these (it emits [`NodeOutput`]s itself), so a driver
/// that holds a [`Broker`] needs no trait in scope.
impl<S: Storage + Clone> Machine for Broker<S> {
    fn step(&mut self, now: Nanos, from: Address, msg: Message) -> bool {
        Broker::step(self, now, from, msg);
        true
    }

    fn handle_timeout(&mut self, now: Nanos) {
        Broker::handle_timeout(self, now);
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        Broker::poll_timeout(self)
    }

    fn poll_outputs_into(&mut self, out: &mut Vec<NodeOutput>) {
        Broker::poll_outputs_into(self, out);
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
            ControllerNode::Single(c) => c.step(now, from, request),
            ControllerNode::Quorum(q) => q.step(now, QuorumInput::Request { from, request }),
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
                q.step(
                    now,
                    QuorumInput::Peer {
                        from: peer,
                        message: m,
                    },
                )
            }
            _ => return false,
        }
        true
    }

    fn handle_timeout(&mut self, now: Nanos) {
        match self {
            ControllerNode::Single(c) => c.handle_timeout(now),
            ControllerNode::Quorum(q) => q.handle_timeout(now),
        }
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        match self {
            ControllerNode::Single(c) => c.poll_timeout(),
            ControllerNode::Quorum(q) => q.poll_timeout(),
        }
    }

    /// A quorum node's role changes come first, then its Raft messages, then its replies
    /// and events (each in the order produced): the order the simulator has always sent
    /// them in, which its pinned trace hashes depend on.
    fn poll_outputs_into(&mut self, out: &mut Vec<NodeOutput>) {
        let q = match self {
            ControllerNode::Single(c) => {
                out.extend(c.poll_outputs().into_iter().map(NodeOutput::from));
                return;
            }
            ControllerNode::Quorum(q) => q,
        };
        let (mut roles, mut peers, mut rest) = (Vec::new(), Vec::new(), Vec::new());
        for o in q.poll_outputs() {
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
            Node::Broker(b) => Machine::step(&mut **b, now, from, msg),
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
        let sizes = [std::mem::size_of::<NodeOutput>()];
        assert!(sizes.iter().all(|&s| s <= 128), "{sizes:?}");
    }

    fn fetch_response(to: Address) -> NodeOutput {
        NodeOutput::Send {
            to,
            msg: Message::FetchResponse(crate::message::FetchResponse {
                correlation: 1,
                tp: crate::types::TopicPartition::new("t", 0),
                leader_epoch: 1,
                result: crate::message::FetchResult::Error(crate::message::FetchError::NotLeader),
            }),
        }
    }

    fn produce_ack(to: Address, base_offset: u64) -> NodeOutput {
        NodeOutput::Send {
            to,
            msg: Message::ProduceResponse(crate::message::ProduceResponse {
                correlation: base_offset,
                tp: crate::types::TopicPartition::new("t", 0),
                result: Ok(crate::message::ProduceAck {
                    base_offset,
                    leader_epoch: 1,
                    duplicate: false,
                }),
            }),
        }
    }

    fn event() -> NodeOutput {
        NodeOutput::Broker(BrokerEvent::MetadataApplied { offset: 3 })
    }

    /// The rule itself: replication between brokers may leave before the flush; the same
    /// message to a client, acknowledgements, controller traffic and events may not.
    #[test]
    fn only_replication_between_brokers_leaves_before_the_flush() {
        assert!(!fetch_response(Address::Node(2)).waits_for_flush());
        assert!(fetch_response(Address::Client(2)).waits_for_flush());
        assert!(fetch_response(Address::Controller(2)).waits_for_flush());
        assert!(produce_ack(Address::Client(1), 0).waits_for_flush());
        assert!(event().waits_for_flush());
        let raft = NodeOutput::Send {
            to: Address::Controller(2),
            msg: Message::Raft(crate::raft::Message::VoteResponse {
                term: 1,
                granted: true,
            }),
        };
        assert!(raft.waits_for_flush());
    }

    /// The gate lets the early ones go in order, then, after the flush, everything it
    /// held ahead of what came since, each in the order produced.
    #[test]
    fn the_gate_holds_what_waits_until_after_the_flush_in_order() {
        let mut gate = FlushGate::default();
        let mut out = vec![
            produce_ack(Address::Client(1), 10),
            fetch_response(Address::Node(2)),
            event(),
            fetch_response(Address::Node(3)),
            produce_ack(Address::Client(1), 11),
        ];
        gate.before_flush(&mut out);
        assert_eq!(
            out,
            vec![
                fetch_response(Address::Node(2)),
                fetch_response(Address::Node(3))
            ]
        );
        assert_eq!(gate.held(), 3);
        let mut after = vec![produce_ack(Address::Client(1), 12)];
        gate.after_flush(&mut after);
        assert_eq!(
            after,
            vec![
                produce_ack(Address::Client(1), 10),
                event(),
                produce_ack(Address::Client(1), 11),
                produce_ack(Address::Client(1), 12),
            ]
        );
        assert_eq!(gate.held(), 0);
        // Nothing held: outputs pass untouched.
        let mut again = vec![event()];
        gate.after_flush(&mut again);
        assert_eq!(again, vec![event()]);
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
