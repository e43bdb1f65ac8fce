//! The structured side of a traced event: what the tracer passes to the viewer's recorder
//! besides the hashed fields (see [`crate::trace`]). Below both the tracer and the viewer,
//! so neither imports the other's floor.

use crate::faults::Fault;
use crate::time::SimTime;
use crate::violation::Violation;
use skein_core::broker::BrokerEvent;
use skein_core::controller::ControllerEvent;
use skein_core::message::{Address, Message};
use skein_core::replica::{MarkerJournal, ReplicaView};
use skein_core::txn::TxnCoordinators;
use skein_core::NodeId;
use skein_core::TopicPartition;

/// What happened to a delivered message at its destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Handed to the destination's state machine.
    Handled,
    /// Cut by a partition that started while it was in flight.
    Partitioned,
    /// Its destination crashed (or restarted) since it was sent, or is down.
    Dead,
}

/// The structured side of a traced event, for the viewer (not hashed; see the module doc).
pub enum Fields<'a> {
    /// A message arrived (`duplicate`: the network's second copy).
    Deliver {
        from: Address,
        to: Address,
        sent: SimTime,
        duplicate: bool,
        arrival: Arrival,
        msg: &'a Message,
    },
    /// The network dropped a message when it was sent (`partitioned`: a cut link, else lost).
    Dropped {
        from: Address,
        to: Address,
        partitioned: bool,
        msg: &'a Message,
    },
    /// A fault fired (targets resolved).
    Fault(&'a Fault),
    /// The links a partition fault cut, both directions listed.
    Blocked(&'a [(Address, Address)]),
    /// A node's process started (`up`) or died.
    Process {
        node: Address,
        up: bool,
    },
    /// A client's process was paused for `duration`.
    ClientPaused {
        client: u64,
        duration: SimTime,
    },
    /// Every replica a broker holds, after one of its steps.
    Replicas {
        node: NodeId,
        views: &'a [ReplicaView],
    },
    /// A broker's transaction side, after one of its steps (txn runs): the coordinators
    /// it hosts (their durable state per transactional id) and the journal of markers
    /// each replica it holds appended as leader.
    Txns {
        node: NodeId,
        coordinators: Option<&'a TxnCoordinators>,
        markers: &'a [(&'a TopicPartition, &'a MarkerJournal)],
    },
    BrokerEvent {
        node: NodeId,
        event: &'a BrokerEvent,
    },
    ControllerEvent(&'a ControllerEvent),
    /// One client history event (docs/history.md).
    History(&'a skein_jepsen::Event),
    Violation(&'a Violation),
    /// Everything heals (the end of the fault window).
    FinalHeal,
}
