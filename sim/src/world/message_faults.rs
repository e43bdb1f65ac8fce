//! Message faults armed by a scenario (`message-delay`, `message-duplicate`,
//! `message-drop`): the next message of a kind from a sender is held back, duplicated or
//! lost. Armed faults wait in `World::armed_messages`; `send` hands each message to
//! [`World::message_fault`] while one is armed, and the first match spends it.
//!
//! A held message is queued for delivery straight away, `delay` after it was sent: nothing
//! about its sender can take it back. The sender may time out, retry, be fenced or crash and
//! restart meanwhile; the message still arrives (only a partition at arrival, or an
//! addressee that has died or restarted since, cuts it off, as a TCP connection's would).

use super::delivery::{addr_code, msg_code};
use super::node_faults::node_addr;
use super::{Ev, World};
use crate::faults::{ClientRef, MessageAction, MessageKind, MessageSender};
use crate::time::SimTime;
use skein_core::message::Address;
use skein_core::txn::{txn_partition, TRANSACTION_STATE_TOPIC};
use skein_core::{NodeId, TopicPartition};

/// An armed message fault.
pub(super) struct Armed {
    action: MessageAction,
    kind: MessageKind,
    from: Sender,
    delay: SimTime,
}

/// A message fault's sender: an address resolved when it was armed, or a client followed to
/// its current slot (a restart or a takeover moves it).
enum Sender {
    Addr(Address),
    Client(ClientRef),
}

impl World {
    /// Arms a message fault (a node sender was resolved by `strike`; a coordinator is
    /// resolved now, and without one the fault is skipped).
    pub(super) fn arm_message_fault(
        &mut self,
        now: SimTime,
        (action, kind, from, delay): (MessageAction, MessageKind, MessageSender, SimTime),
    ) {
        let from = match from {
            MessageSender::Node(n) => Sender::Addr(node_addr(n)),
            MessageSender::Client(c) => Sender::Client(c),
            MessageSender::TxnCoordinator(id) => match self.txn_coordinator_broker(&id) {
                Some(b) => Sender::Addr(Address::Node(b)),
                None => {
                    let seq = self.q.len() as u64;
                    self.tracer.event(now, seq, "fault-skipped", "", &[], || {
                        format!("{id:?} has no transaction coordinator now")
                    });
                    return;
                }
            },
        };
        self.armed_messages.push(Armed {
            action,
            kind,
            from,
            delay,
        });
    }

    /// Whether `from` is the armed fault's sender.
    fn sent_by(&self, sender: &Sender, from: Address) -> bool {
        match sender {
            Sender::Addr(a) => *a == from,
            Sender::Client(c) => self
                .client_index(*c)
                .is_some_and(|i| Address::Client(i as u64 + 1) == from),
        }
    }

    /// A message (parked under `msg`) is being sent while message faults are armed: the
    /// first armed fault it matches strikes. `true` if the fault took the message over
    /// (held or dropped); `false` if it goes on through the network (a duplicate's
    /// original, or no match).
    #[cold]
    #[inline(never)]
    pub(super) fn message_fault(
        &mut self,
        at: SimTime,
        from: Address,
        to: Address,
        msg: u32,
    ) -> bool {
        let m = self.in_flight.get(msg);
        let Some(i) = (self.armed_messages.iter())
            .position(|a| a.kind.matches(m) && self.sent_by(&a.from, from))
        else {
            return false;
        };
        let a = self.armed_messages.remove(i);
        let (code, name) = msg_code(m);
        let seq = self.q.len() as u64;
        let until = at + a.delay;
        let verbose = self.tracer.verbose();
        self.tracer.event(
            at,
            seq,
            "message-fault",
            a.action.kind(),
            &[addr_code(from), addr_code(to), code, a.delay],
            || {
                let what = match a.action {
                    MessageAction::Delay => format!("held until {}", crate::time::Human(until)),
                    MessageAction::Duplicate => {
                        format!("a copy delivered at {}", crate::time::Human(until))
                    }
                    MessageAction::Drop => "dropped".to_string(),
                };
                let mut s = format!("{} {from} -> {to} {name}: {what}", a.kind.name());
                if verbose {
                    s.push_str(&format!(": {m:?}"));
                    s.truncate(600);
                }
                s
            },
        );
        let incarnation = self.incarnation(to);
        match a.action {
            MessageAction::Delay => {
                self.q.push(
                    until,
                    Ev::Deliver {
                        from,
                        to,
                        incarnation,
                        msg,
                        sent: at,
                        duplicate: false,
                    },
                );
                true
            }
            MessageAction::Duplicate => {
                self.send_duplicate(until, (from, to, incarnation), at, msg);
                false
            }
            MessageAction::Drop => {
                self.trace_dropped(at, (from, to), crate::net::DropReason::Lost, msg);
                true
            }
        }
    }

    /// The broker leading `transactional_id`'s `__transaction_state` partition now (the
    /// highest leader epoch among the replicas that think they lead it), if any.
    pub(super) fn txn_coordinator_broker(&self, transactional_id: &str) -> Option<NodeId> {
        let n = self.broker_config.transaction_state_topic_partitions;
        let tp = TopicPartition::new(TRANSACTION_STATE_TOPIC, txn_partition(transactional_id, n));
        self.brokers
            .iter()
            .filter_map(|(id, s)| {
                let v = s.machine.as_ref()?.replica_view(&tp)?;
                (v.role == skein_core::replica::ReplicaRole::Leader).then_some((v.leader_epoch, id))
            })
            .max()
            .map(|(_, id)| id)
    }
}
