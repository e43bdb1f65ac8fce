//! Message delivery and node timers: sending through the network model (which may drop,
//! delay or duplicate), delivering to a node when it is free (busy with disk I/O or
//! paused: the message waits), dropping messages to a dead incarnation, ticking nodes, and
//! routing what a broker or a controller produced after each step (core's node driver,
//! `skein_core::node`, speaks addresses for both).

use super::{name_slots, Ev, TimerDue, World, ADMIN};
use crate::fields::{Arrival, Fields};
use crate::net::Fate;
use crate::time::{SimTime, MICROS};
use crate::topic::TOPIC;
use crate::trace::NameSlot;
use skein_core::broker::BrokerEvent;
use skein_core::controller::{ControllerResponse, MetadataDelta};
use skein_core::message::{Address, FetchResult, Message};
use skein_core::node::{Machine, NodeOutput};
use skein_core::replica::Event as ReplicaEvent;
use skein_core::{LeaderEpoch, NodeId, Offset, TopicPartition};

pub(super) fn addr_code(a: Address) -> u64 {
    match a {
        Address::Node(n) => 1 << 32 | n as u64,
        // Controller 1 codes as the single controller always did (pinned hashes).
        Address::Controller(n) => 2 << 32 | n.saturating_sub(1) as u64,
        Address::Client(c) => 3 << 32 | c,
    }
}

/// A leader's `DivergingEpoch` answer naming an epoch, as log-matching checks it: (leader,
/// partition, the leader's epoch, the epoch it named and where it said that epoch ends).
pub(super) struct DivergingAnswer {
    pub leader: NodeId,
    pub tp: TopicPartition,
    pub leader_epoch: LeaderEpoch,
    pub named: LeaderEpoch,
    pub end_offset: Offset,
}

/// The metadata a message to a broker carries (a heartbeat reply's or a pulled delta),
/// for `metadata-in-order`.
fn metadata_delta(msg: &Message) -> Option<MetadataDelta> {
    let Message::ControllerResponse(resp) = msg else {
        return None;
    };
    match &**resp {
        ControllerResponse::BrokerHeartbeat(Ok(r)) => Some(r.metadata.clone()),
        ControllerResponse::Metadata(d) => Some(d.clone()),
        _ => None,
    }
}

fn diverging_answer(from: Address, msg: &Message) -> Option<DivergingAnswer> {
    let (Address::Node(leader), Message::FetchResponse(r)) = (from, msg) else {
        return None;
    };
    let FetchResult::Diverging {
        epoch: Some(named),
        end_offset,
        ..
    } = r.result
    else {
        return None;
    };
    Some(DivergingAnswer {
        leader,
        tp: r.tp.clone(),
        leader_epoch: r.leader_epoch,
        named,
        end_offset,
    })
}

pub(super) fn msg_code(m: &Message) -> (u64, &'static str) {
    // The numbers feed the trace hash: never renumber a variant, only add new ones.
    let code = match m {
        Message::Fetch(_) => 1,
        Message::FetchResponse(_) => 2,
        Message::Produce(_) => 3,
        Message::ProduceResponse(_) => 4,
        Message::ConsumerFetch(_) => 5,
        Message::ConsumerFetchResponse(_) => 6,
        Message::Metadata(_) => 7,
        Message::MetadataResponse(_) => 8,
        Message::ListOffsets(_) => 9,
        Message::ListOffsetsResponse(_) => 10,
        Message::ControllerRequest(_) => 11,
        Message::ControllerResponse(_) => 12,
        Message::Group { .. } => 13,
        Message::GroupResponse { .. } => 14,
        Message::Raft(_) => 15,
        Message::RepairFetch(_) => 16,
        Message::RepairFetchResponse(_) => 17,
        Message::Txn { .. } => 18,
        Message::TxnResponse { .. } => 19,
        Message::WriteTxnMarker(_) => 20,
        Message::WriteTxnMarkerResponse(_) => 21,
    };
    (code, m.name())
}

impl World {
    /// Sends `msg` through the network model. Inlined, the message moves once, from the
    /// caller straight into the in-flight slab (passed on by value, it was copied several
    /// times on the way); its fate is decided out of line, and a dropped one is taken back
    /// (a handle is never observed, only the message it holds).
    #[inline]
    pub(super) fn send(&mut self, at: SimTime, from: Address, to: Address, msg: Message) {
        let msg = self.in_flight.insert(msg);
        if !self.armed_messages.is_empty() && self.message_fault(at, from, to, msg) {
            return;
        }
        self.send_parked(at, from, to, msg);
    }

    /// [`Self::send`] of the message parked in the in-flight slab under `msg`.
    #[inline(never)]
    pub(super) fn send_parked(&mut self, at: SimTime, from: Address, to: Address, msg: u32) {
        let incarnation = self.incarnation(to);
        match self.net.send(at, from, to, &mut self.net_rng) {
            Fate::Dropped(why) => self.trace_dropped(at, (from, to), why, msg),
            Fate::Deliver { at: t, duplicate } => {
                // The copy is queued first (its sequence number orders it).
                if let Some(d) = duplicate {
                    self.send_duplicate(d, (from, to, incarnation), at, msg);
                }
                self.q.push(
                    t,
                    Ev::Deliver {
                        from,
                        to,
                        incarnation,
                        msg,
                        sent: at,
                        duplicate: false,
                    },
                );
            }
        }
    }

    /// The incarnation of the process at `to` a message sent now is for (one to a process
    /// that restarts before it arrives is dropped, as a connection's would be).
    #[inline]
    pub(super) fn incarnation(&self, to: Address) -> u64 {
        match to {
            Address::Node(n) => self.brokers.get(n).map_or(0, |s| s.incarnation),
            Address::Controller(n) => self.controllers.get(&n).map_or(0, |s| s.incarnation),
            Address::Client(_) => 0,
        }
    }

    /// [`Self::send_parked`]'s rare arms, out of line: the message's deep clone inlined
    /// made it several times the size of its common path.
    #[cold]
    #[inline(never)]
    pub(super) fn send_duplicate(
        &mut self,
        d: SimTime,
        (from, to, incarnation): (Address, Address, u64),
        sent: SimTime,
        msg: u32,
    ) {
        let copy = self.in_flight.get(msg).clone();
        self.q.push(
            d,
            Ev::Deliver {
                from,
                to,
                incarnation,
                msg: self.in_flight.insert(copy),
                sent,
                duplicate: true,
            },
        );
    }

    /// A dropped message: traced, and taken back from the slab.
    #[cold]
    #[inline(never)]
    pub(super) fn trace_dropped(
        &mut self,
        at: SimTime,
        (from, to): (Address, Address),
        why: crate::net::DropReason,
        msg: u32,
    ) {
        let msg = self.in_flight.take(msg);
        self.tracer.fields(
            at,
            Fields::Dropped {
                from,
                to,
                partitioned: why == crate::net::DropReason::Partitioned,
                msg: &msg,
            },
        );
    }

    /// Out of line: inlined into the run loop, it made the loop's hot code too big for
    /// the instruction cache (on the 10 s bench seed, 6.7% more L1i misses for 0.6%
    /// fewer instructions).
    #[inline(never)]
    pub(super) fn deliver(
        &mut self,
        now: SimTime,
        seq: u64,
        (from, to, incarnation): (Address, Address, u64),
        msg: u32,
        (sent, duplicate): (SimTime, bool),
    ) {
        // (A busy or paused addressee's messages were queued again by the run loop.)
        debug_assert!(self.free_at(to) <= now, "delivered to a busy process");
        // The message stays parked until its addressee takes it (`hand_over`): moved out
        // here, it was copied on the stack at each step of the way.
        let m = self.in_flight.get(msg);
        let (code, name) = msg_code(m);
        let verbose = self.tracer.verbose();
        self.tracer.event_named(
            NameSlot(name_slots::DELIVER_BASE + code as usize),
            now,
            seq,
            ("deliver", name),
            &[addr_code(from), addr_code(to), code],
            || {
                if verbose {
                    let mut s = format!("{from} -> {to}: {m:?}");
                    s.truncate(600);
                    s
                } else {
                    String::new()
                }
            },
        );
        if self.tracer.recording() {
            self.record_delivery(now, (from, to, incarnation), msg, (sent, duplicate));
        }
        if !self.net.can_deliver(from, to) {
            self.in_flight.take(msg);
            return; // cut by a partition while in flight
        }
        self.hand_over(now, (from, to, incarnation), msg);
    }

    /// When the process at `to` can next take a message: after its disk I/O and any
    /// pause (0 for one that does not exist).
    #[inline]
    pub(super) fn free_at(&self, to: Address) -> SimTime {
        match to {
            Address::Node(n) => self.brokers.get(n).map_or(0, |s| s.free_at()),
            Address::Controller(n) => self.controllers.get(&n).map_or(0, |s| s.free_at()),
            Address::Client(c) => c
                .checked_sub(1)
                .and_then(|i| self.clients.get(i as usize))
                .map_or(0, |s| s.paused_until),
        }
    }

    /// Tells the viewer's recorder about a delivery (the message parked under `msg`) and
    /// how it arrives: cut by a partition, to a dead process, or handled.
    fn record_delivery(
        &mut self,
        now: SimTime,
        (from, to, incarnation): (Address, Address, u64),
        msg: u32,
        (sent, duplicate): (SimTime, bool),
    ) {
        let msg = self.in_flight.get(msg);
        let arrival = if !self.net.can_deliver(from, to) {
            Arrival::Partitioned
        } else {
            let alive = match to {
                Address::Node(n) => self
                    .brokers
                    .get(n)
                    .is_some_and(|s| s.incarnation == incarnation && s.machine.is_some()),
                Address::Controller(n) => self
                    .controllers
                    .get(&n)
                    .is_some_and(|s| s.incarnation == incarnation && s.machine.is_some()),
                Address::Client(_) => true,
            };
            if alive {
                Arrival::Handled
            } else {
                Arrival::Dead
            }
        };
        self.tracer.fields(
            now,
            Fields::Deliver {
                from,
                to,
                sent,
                duplicate,
                arrival,
                msg,
            },
        );
    }

    /// Hands a delivered message (parked under `msg`) to its addressee, if the process it
    /// was sent to (the same incarnation) is still up; else drops it.
    fn hand_over(
        &mut self,
        now: SimTime,
        (from, to, incarnation): (Address, Address, u64),
        msg: u32,
    ) {
        match to {
            Address::Node(n) => {
                let up = self
                    .brokers
                    .get_mut(n)
                    .filter(|s| s.incarnation == incarnation)
                    .and_then(|s| Some((s.clock.local(now), s.machine.as_mut()?)));
                let Some((local, b)) = up else {
                    self.in_flight.take(msg);
                    return;
                };
                let m = self.in_flight.get(msg);
                let diverging = diverging_answer(from, m);
                let delta = metadata_delta(m);
                Machine::step(b, local, from, self.in_flight.take(msg));
                // The delivered delta is judged right after the step; the look that
                // `after_broker_step` takes again can only find something if this one did.
                let judged = self.observe_broker_metadata(now, n, delta.as_ref());
                self.route_broker_step(n, now, judged);
                if let Some(answer) = diverging {
                    self.check_log_matching(now, n, answer);
                }
            }
            Address::Controller(id) => {
                let up = self
                    .controllers
                    .get_mut(&id)
                    .filter(|s| s.incarnation == incarnation)
                    .and_then(|s| Some((s.clock.local(now), s.machine.as_mut()?)));
                let Some((local, c)) = up else {
                    self.in_flight.take(msg);
                    return;
                };
                if !c.step(local, from, self.in_flight.take(msg)) {
                    return;
                }
                self.after_controller_step(id, now);
            }
            Address::Client(c) => {
                let msg = self.in_flight.take(msg);
                if c == ADMIN {
                    self.admin(now, Some(msg));
                    return;
                }
                let idx = (c - 1) as usize;
                if self.clients.get(idx).is_some_and(|s| !s.down) {
                    self.client_step(idx, now, Some((from, msg)));
                }
            }
        }
    }

    pub(super) fn node_timer(&mut self, now: SimTime, seq: u64, node: Address, gen: u64) {
        let due = match node {
            Address::Node(n) => match self.brokers.get_mut(n) {
                Some(slot) => slot.timer_due(now, gen),
                None => return,
            },
            Address::Controller(n) => match self.controllers.get_mut(&n) {
                Some(slot) => slot.timer_due(now, gen),
                None => return,
            },
            Address::Client(_) => return,
        };
        match due {
            TimerDue::Stale => return,
            TimerDue::Deferred(t) => {
                self.q.push(t, Ev::NodeTimer { node, gen });
                return;
            }
            TimerDue::Now => {}
        }
        self.tracer.event_named(
            name_slots::TICK,
            now,
            seq,
            ("tick", ""),
            &[addr_code(node)],
            String::new,
        );
        match node {
            Address::Node(n) => {
                let Some(slot) = self.brokers.get_mut(n) else {
                    return;
                };
                let local = slot.clock.local(now);
                let Some(b) = slot.machine.as_mut() else {
                    return;
                };
                Machine::handle_timeout(b, local);
                self.after_broker_step(n, now);
            }
            Address::Controller(id) => {
                let Some(slot) = self.controllers.get_mut(&id) else {
                    return;
                };
                let local = slot.clock.local(now);
                let Some(c) = slot.machine.as_mut() else {
                    return;
                };
                c.handle_timeout(local);
                self.after_controller_step(id, now);
            }
            Address::Client(_) => {}
        }
    }

    /// After a broker handled something: charge its disk time, route its outputs, feed
    /// the invariant checks, and set its timer.
    pub(super) fn after_broker_step(&mut self, id: NodeId, now: SimTime) {
        self.route_broker_step(id, now, true);
    }

    /// [`Self::after_broker_step`]; `observe_metadata`: whether to show the checker the
    /// broker's metadata offset (false when a delivery's look just now judged nothing:
    /// this one would not either).
    fn route_broker_step(&mut self, id: NodeId, now: SimTime, observe_metadata: bool) {
        let slot = self.brokers.get_mut(id).expect("slot");
        let latency = slot.disk.take_latency();
        let send_at = now + latency;
        slot.busy_until = slot.busy_until.max(send_at);
        let Some(b) = slot.machine.as_mut() else {
            return;
        };
        let mut outputs = std::mem::take(&mut self.node_out);
        // Through the seam the node runtime uses (a broker emits `NodeOutput`s itself, so
        // they are taken by swapping buffers, not moved one by one).
        Machine::poll_outputs_into(b, &mut outputs);
        let next = Machine::poll_timeout(b);
        if self.tracer.recording() {
            let views = b.views();
            self.tracer.fields(
                now,
                Fields::Replicas {
                    node: id,
                    views: &views,
                },
            );
            // Runs without transactions host no coordinator and journal no marker.
            let coordinators = b.txn_coordinators();
            let markers: Vec<_> = b.marker_journals().collect();
            if coordinators.is_some() || !markers.is_empty() {
                self.tracer.fields(
                    now,
                    Fields::Txns {
                        node: id,
                        coordinators,
                        markers: &markers,
                    },
                );
            }
        }
        let from = Address::Node(id);
        for o in outputs.drain(..) {
            match o {
                NodeOutput::Send { to, msg } => {
                    if let Address::Client(c) = to {
                        self.check_client_response(id, c, now, &msg);
                    }
                    self.send(send_at, from, to, msg);
                }
                NodeOutput::Broker(e) => self.on_broker_event(id, now, e),
                // A controller's outputs: a broker has none.
                NodeOutput::Controller(_) | NodeOutput::RoleChanged { .. } => {}
            }
        }
        self.node_out = outputs;
        self.set_node_timer(Address::Node(id), now, next);
        self.observe_coordinator(id, now);
        // A delivered delta was judged right after its step; this sees every other step.
        if observe_metadata {
            self.observe_broker_metadata(now, id, None);
        }
    }

    /// A broker's event (about one output in ten): traced, and fed to the checks. Kept out
    /// of line, so the loop over a step's outputs (mostly sends) stays small.
    #[inline(never)]
    fn on_broker_event(&mut self, id: NodeId, now: SimTime, e: BrokerEvent) {
        let seq = self.q.len() as u64;
        self.tracer.event_named(
            name_slots::BROKER_EVENT,
            now,
            seq,
            ("broker-event", ""),
            &[id as u64],
            || format!("node-{id}: {e:?}"),
        );
        self.tracer.fields(
            now,
            Fields::BrokerEvent {
                node: id,
                event: &e,
            },
        );
        match e {
            // The replication invariants watch every topic (the simulator's and
            // __consumer_offsets); the client-facing ones only the simulator's.
            BrokerEvent::Replica(ReplicaEvent::HighWatermark {
                tp,
                leader_epoch,
                high_watermark,
            }) => {
                self.checker
                    .on_leader_hw(now, id, &tp, leader_epoch, high_watermark);
            }
            BrokerEvent::Replica(ReplicaEvent::BecameLeader {
                tp,
                epoch,
                log_end_offset,
            }) => {
                self.checker.on_became_leader(&tp, epoch, log_end_offset);
            }
            BrokerEvent::OffsetsCommitted {
                group,
                coordinator_epoch,
                offsets,
            } if group == self.cfg.group_id => {
                if let Some(gc) = self.group.as_mut() {
                    let offsets: Vec<(u32, Offset)> = offsets
                        .into_iter()
                        .filter(|(tp, _)| tp.topic == TOPIC)
                        .map(|(tp, o)| (tp.partition, o))
                        .collect();
                    gc.on_committed(&mut self.checker, now, id, coordinator_epoch, &offsets);
                }
            }
            _ => {}
        }
    }

    pub(super) fn after_controller_step(&mut self, id: NodeId, now: SimTime) {
        let slot = self.controllers.get_mut(&id).expect("controller slot");
        let latency = slot.disk.take_latency();
        let send_at = now + latency;
        slot.busy_until = slot.busy_until.max(send_at);
        let Some(c) = slot.machine.as_mut() else {
            return;
        };
        let outs = c.poll_outputs();
        let next = c.poll_timeout();
        let me = Address::Controller(id);
        for o in outs {
            match o {
                NodeOutput::RoleChanged {
                    active,
                    term,
                    leader,
                } => {
                    let seq = self.q.len() as u64;
                    let words = [id as u64, active as u64, term, leader.unwrap_or(0) as u64];
                    self.tracer
                        .event(now, seq, "controller-role", "", &words, || {
                            format!(
                                "controller-{id}: active {active}, term {term}, leader {leader:?}"
                            )
                        });
                }
                NodeOutput::Send { to, msg } => self.send(send_at, me, to, msg),
                NodeOutput::Controller(e) => {
                    let seq = self.q.len() as u64;
                    self.tracer
                        .event(now, seq, "controller-event", "", &[], || format!("{e:?}"));
                    // (An unclean election reaches the checker from the committed
                    // records: `Checker::on_metadata_committed`.)
                    self.tracer.fields(now, Fields::ControllerEvent(&e));
                }
                NodeOutput::Broker(_) => {}
            }
        }
        self.set_node_timer(me, now, next);
        self.observe_committed_metadata(id);
        if self.cfg.controllers > 1 {
            self.observe_raft(now, id);
            self.observe_fencing(now);
        }
    }

    pub(super) fn set_node_timer(&mut self, node: Address, now: SimTime, next_local: Option<u64>) {
        let slot_clock;
        let (gen, at) = {
            let (clock, timer_gen, timer_at) = match node {
                Address::Node(n) => {
                    let s = self.brokers.get_mut(n).expect("slot");
                    (&s.clock, &mut s.timer_gen, &mut s.timer_at)
                }
                Address::Controller(n) => {
                    let s = self.controllers.get_mut(&n).expect("slot");
                    (&s.clock, &mut s.timer_gen, &mut s.timer_at)
                }
                Address::Client(_) => return,
            };
            slot_clock = clock.clone();
            let Some(local) = next_local else {
                *timer_gen += 1;
                *timer_at = None;
                return;
            };
            // At least 1us ahead: a timer that keeps asking for "now" must not spin.
            let at = slot_clock.sim_time_of(now, local).max(now + MICROS);
            if *timer_at == Some(at) {
                return;
            }
            *timer_gen += 1;
            *timer_at = Some(at);
            (*timer_gen, at)
        };
        self.q.push(at, Ev::NodeTimer { node, gen });
    }
}
