//! Faults on producers and consumers: pause (optionally replaced by a new instance with
//! the same producer identity, which makes the paused one a zombie), crash and restart,
//! and isolation from every broker and the controller.
//!
//! A crashed client's slot stays down for good: messages to it are dropped and its timers do
//! nothing, and each of its history processes records the crash. A restart is a new
//! process at a new address (a new slot, so answers to requests of the dead process can
//! never reach it, as with a new connection): a producer with a new producer id and value
//! prefix (values stay unique), a consumer reading from offset 0. Faults naming the client
//! follow it to its new slot.

use super::{Client, ClientSlot, Ev, World};
use crate::faults::{ClientRef, Fault};
use crate::time::SimTime;
use crate::topic::process_id;
use skein_core::message::Address;
use skein_jepsen::{EventType, Function, Value};

impl World {
    /// The slot index of a client named by a fault (`None` if the workload lacks it;
    /// configuration validation rejects that before a run).
    pub(super) fn client_index(&self, c: ClientRef) -> Option<usize> {
        let (producers, consumers) = (self.cfg.producers as usize, self.cfg.consumers as usize);
        let original = match c {
            ClientRef::Producer(n) if (1..=producers).contains(&(n as usize)) => {
                Some(n as usize - 1)
            }
            ClientRef::Consumer(n) if (1..=consumers).contains(&(n as usize)) => {
                Some(producers + n as usize - 1)
            }
            _ => None,
        }?;
        Some(*self.moved_clients.get(&original).unwrap_or(&original))
    }

    pub(super) fn apply_client_fault(&mut self, now: SimTime, f: Fault) {
        match f {
            Fault::ClientPause {
                client,
                duration,
                replaced_after,
            } => {
                let Some(idx) = self.client_index(client) else {
                    return;
                };
                if self.clients[idx].down {
                    return;
                }
                self.pause_client(idx, now, duration);
                if let Some(r) = replaced_after {
                    self.q
                        .push(now + r, Ev::Fault(Fault::ClientTakeover { client }));
                }
            }
            Fault::ClientCrash {
                client,
                restart_after,
            } => {
                if let Some(idx) = self.client_index(client) {
                    self.crash_client(idx, now);
                    if let Some(d) = restart_after {
                        self.q
                            .push(now + d, Ev::Fault(Fault::ClientRestart { client }));
                    }
                }
            }
            Fault::ClientRestart { client } => {
                if let Some(idx) = self.client_index(client) {
                    self.restart_client(idx, now);
                }
            }
            Fault::ClientTakeover { client } => {
                if let Some(idx) = self.client_index(client) {
                    self.replace_producer(idx, now);
                }
            }
            Fault::ClientIsolate { client, duration } => {
                if let Some(idx) = self.client_index(client) {
                    self.isolate_client(idx, now, duration);
                }
            }
            _ => unreachable!("only client faults are passed here"),
        }
    }

    /// Cuts client `idx` (a producer, consumer or group member) off from every broker and
    /// the controller for `duration`.
    pub(super) fn isolate_client(&mut self, idx: usize, now: SimTime, duration: SimTime) {
        let me = Address::Client(idx as u64 + 1);
        let mut links = std::collections::BTreeSet::new();
        for other in (1..=self.cfg.brokers)
            .map(Address::Node)
            .chain((1..=self.cfg.controllers).map(Address::Controller))
        {
            links.insert((me, other));
            links.insert((other, me));
        }
        // The viewer draws it from the fault's own mark (on the client's lane).
        let id = self.net.block(links);
        self.q
            .push(now + duration, Ev::Fault(Fault::EndPartition { id }));
    }

    /// The client dies: what it had in flight ends with an unknown outcome, and each of
    /// its history processes records the crash.
    pub(super) fn crash_client(&mut self, idx: usize, now: SimTime) {
        if self.clients[idx].down {
            return;
        }
        let partitions = self.cfg.partitions;
        self.with_client(idx, now, |client, ctx| {
            let client = match client {
                Client::Producer(p) => {
                    p.finish(ctx);
                    p.client
                }
                Client::Consumer(c) => {
                    c.finish(ctx);
                    c.client
                }
                Client::Txn(t) => {
                    t.crash(ctx);
                    t.client
                }
                Client::Member(_) | Client::Pipeline(_) => {
                    unreachable!("client faults name producers and consumers")
                }
            };
            for p in 0..partitions {
                ctx.history.push(
                    now,
                    process_id(client, p),
                    EventType::Info,
                    Function::Crash,
                    Value::Null,
                );
            }
            // Nothing it produced in its last moments leaves: it is dead.
            ctx.out.sends.clear();
        });
        let cs = &mut self.clients[idx];
        cs.down = true;
        cs.paused_until = 0;
        cs.timer_gen += 1;
        cs.timer_at = None;
        let seq = self.q.len() as u64;
        self.tracer
            .event(now, seq, "client-down", "", &[idx as u64 + 1], String::new);
    }

    /// The crashed client at `idx` starts again as a new process, in a new slot.
    pub(super) fn restart_client(&mut self, idx: usize, now: SimTime) {
        // Only the client's current slot restarts; a slot it has left stays down.
        if !self.clients[idx].down || self.clients[idx].retired {
            return;
        }
        self.clients[idx].retired = true;
        let new_idx = self.clients.len();
        let id = new_idx as u64 + 1;
        let fresh = match &self.clients[idx].client {
            Client::Producer(_) => Client::Producer(Box::new(self.new_producer(id, now))),
            Client::Consumer(_) => {
                Client::Consumer(Box::new(super::setup::consumer(&self.cfg, id)))
            }
            // The same transactional id: its InitProducerId fences the dead instance and
            // ends the transaction it left open.
            Client::Txn(t) => {
                let txn_id = t.transactional_id().to_string();
                Client::Txn(Box::new(self.new_txn_client(id, txn_id, now)))
            }
            Client::Member(_) | Client::Pipeline(_) => {
                unreachable!("client faults name producers and consumers")
            }
        };
        self.move_names(idx, new_idx);
        self.clients.push(ClientSlot::new(fresh));
        let seq = self.q.len() as u64;
        self.tracer
            .event(now, seq, "client-up", "", &[idx as u64 + 1, id], || {
                format!("client {} restarts as client {id}", idx + 1)
            });
        self.reschedule_client(new_idx, now);
    }

    /// A new producer instance takes over the identity of the (paused) producer at `idx`:
    /// it adopts its producer id at the next epoch, so when the paused one wakes, the
    /// brokers fence it.
    pub(super) fn replace_producer(&mut self, idx: usize, now: SimTime) {
        let down = self.clients[idx].down;
        if let Client::Txn(old) = &mut self.clients[idx].client {
            old.supersede();
            if !down {
                // A new instance of the same transactional id: its InitProducerId fences the
                // paused one, which finds out when it wakes (a zombie).
                let txn_id = old.transactional_id().to_string();
                let new_idx = self.clients.len();
                let t = self.new_txn_client(new_idx as u64 + 1, txn_id, now);
                let seq = self.q.len() as u64;
                self.tracer.event(
                    now,
                    seq,
                    "producer-replaced",
                    "",
                    &[idx as u64 + 1, new_idx as u64 + 1],
                    || {
                        format!(
                            "client {} takes over client {}'s transactional id",
                            new_idx + 1,
                            idx + 1
                        )
                    },
                );
                self.move_names(idx, new_idx);
                self.clients.push(ClientSlot::new(Client::Txn(Box::new(t))));
                self.reschedule_client(new_idx, now);
            }
            return;
        }
        let Client::Producer(old) = &self.clients[idx].client else {
            return;
        };
        if self.clients[idx].down {
            return;
        }
        let id = old.producer_id();
        let new_idx = self.clients.len();
        let mut p = self.new_producer(new_idx as u64 + 1, now);
        if let Some(id) = id {
            p.take_over(id);
        }
        let seq = self.q.len() as u64;
        self.tracer.event(
            now,
            seq,
            "producer-replaced",
            "",
            &[idx as u64 + 1, new_idx as u64 + 1],
            || {
                format!(
                    "client {} takes over client {}'s producer id {id:?}",
                    new_idx + 1,
                    idx + 1
                )
            },
        );
        // Later faults naming this producer strike the instance that now holds its
        // identity: a second takeover must start from the newest epoch, never again from
        // the zombie's (two live instances at one epoch would share sequence numbers, and
        // the leader would answer the second with the first's offsets).
        self.move_names(idx, new_idx);
        self.clients
            .push(ClientSlot::new(Client::Producer(Box::new(p))));
        self.reschedule_client(new_idx, now);
    }

    /// Points every fault name of the client slot `idx` at `new_idx`.
    fn move_names(&mut self, idx: usize, new_idx: usize) {
        let original = self
            .moved_clients
            .iter()
            .find(|&(_, &now_at)| now_at == idx)
            .map_or(idx, |(&o, _)| o);
        self.moved_clients.insert(original, new_idx);
        self.restarted_from.insert(new_idx, original);
    }

    /// Traces a producer's fencing the first time it is seen.
    pub(super) fn note_fenced(&mut self, idx: usize, now: SimTime) {
        let cs = &mut self.clients[idx];
        if let Client::Producer(p) = &cs.client {
            if p.is_fenced() && !cs.fenced_seen {
                cs.fenced_seen = true;
                let seq = self.q.len() as u64;
                self.tracer
                    .event(now, seq, "producer-fenced", "", &[idx as u64 + 1], || {
                        format!(
                            "client {}: InvalidProducerEpoch, producer {:?} is a zombie",
                            idx + 1,
                            p.producer_id()
                        )
                    });
            }
        }
    }
}
