//! The recorder: what the viewer keeps of a run, fed by the [`Tracer`](crate::trace::Tracer)
//! with each event's [`Fields`], in compact columns (one value per message per column),
//! so a 60 s run's hundreds of thousands of events fit in a few megabytes.

use crate::config::SimConfig;
use crate::faults::{ClientRef, Fault};
use crate::fields::{Arrival, Fields};
use crate::invariants::Violation;
use crate::time::SimTime;
use skein_core::broker::BrokerEvent;
use skein_core::group::{GroupRequest, GroupResponse};
use skein_core::message::{Address, ConsumerFetchResponse, FetchResult, Message, ProduceResponse};
use skein_core::replica::{AppendedMarker, MarkerJournal, ReplicaRole, ReplicaView};
use skein_core::txn::{
    TxnCoordinators, TxnPhase, TxnRequest, TxnResponse, TxnResult, TxnState, WriteTxnMarkerRequest,
};
use skein_core::{NodeId, TopicPartition};
use skein_jepsen::{EventType, Function, Value};
use std::collections::BTreeMap;

/// Message flags (the `flags` column): how its journey ended.
pub const LOST: u8 = 1;
pub const PARTITIONED: u8 = 2;
pub const CUT_IN_FLIGHT: u8 = 4;
pub const DEAD: u8 = 8;
pub const DUPLICATE: u8 = 16;
pub const ERROR: u8 = 32;
/// An EndTxn or WriteTxnMarkers that arrived while its transactional id was in a later
/// transaction than the one it was sent in (`Msgs::late` says which).
pub const LATE_TXN: u8 = 64;

/// "No value" in the numeric columns.
pub const NONE: u32 = u32::MAX;

/// One lane of the space-time diagram.
#[derive(Clone, Debug)]
pub struct Lane {
    pub name: String,
    /// "controller", "broker", "producer", "consumer", "member", "admin".
    pub role: &'static str,
}

/// Messages, one entry per column per message (sent or dropped), in recording order.
#[derive(Default)]
pub struct Msgs {
    pub sent: Vec<SimTime>,
    /// Arrival time; the send time for dropped messages.
    pub recv: Vec<SimTime>,
    pub from: Vec<u8>,
    pub to: Vec<u8>,
    pub kind: Vec<u8>,
    pub flags: Vec<u8>,
    /// Index into `Recorder::tps`, or `u16::MAX`.
    pub tp: Vec<u16>,
    /// Kind-specific numbers (see `viewer.js`, `MSG_FIELDS`).
    pub a: Vec<u32>,
    pub b: Vec<u32>,
    pub c: Vec<u32>,
    /// Text for kinds without numeric fields, and for errors: (message index, text).
    pub text: Vec<(u32, String)>,
    /// Messages flagged `LATE_TXN`: (message index, transaction number it was sent in,
    /// number when it arrived).
    pub late: Vec<(u32, u32, u32)>,
}

/// One replica state, kept when anything in it changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaState {
    /// 0 follower, 1 leader, 2 offline (log failed), 3 process down.
    pub role: u8,
    /// The leader a follower follows (0: none).
    pub leader: u8,
    pub epoch: u32,
    pub leo: u32,
    pub hw: u32,
    /// The last stable offset (the HW unless a transaction is open or undecided).
    pub lso: u32,
    pub flushed: u32,
    /// Bit n set: broker n in the confirmed ISR (leaders only).
    pub isr: u32,
    /// Confirmed ISR united with a pending proposal.
    pub max_isr: u32,
}

/// A fault as it fired.
pub struct FaultMark {
    pub at: SimTime,
    pub name: &'static str,
    pub lanes: Vec<u8>,
    /// When the fault ends by itself (None: instant, or ends at a heal or restart).
    pub end: Option<SimTime>,
    pub text: String,
    /// The fault itself, targets resolved (for the reports' fault lanes).
    pub fault: Fault,
}

/// A note on a lane: a broker or controller event.
pub struct Note {
    pub at: SimTime,
    pub lane: u8,
    pub what: &'static str,
    pub text: String,
}

/// One client history event, flattened.
pub struct Hist {
    pub at: SimTime,
    pub lane: u8,
    /// The history process (an operation's invoke and completion share it).
    pub process: u32,
    /// 0 invoke, 1 ok, 2 fail, 3 info.
    pub kind: u8,
    pub f: &'static str,
    pub partition: u32,
    /// send: the offset; poll: the first offset read.
    pub a: u32,
    /// poll: the last offset read.
    pub b: u32,
    pub text: String,
}

/// A transactional id's durable state at its coordinator (`TxnState` names, in
/// [`TXN_STATES`] order).
pub const TXN_STATES: [&str; 8] = [
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "PrepareEpochFence",
    "Dead",
];

fn txn_state_code(s: TxnState) -> u8 {
    match s {
        TxnState::Empty => 0,
        TxnState::Ongoing => 1,
        TxnState::PrepareCommit => 2,
        TxnState::PrepareAbort => 3,
        TxnState::CompleteCommit => 4,
        TxnState::CompleteAbort => 5,
        TxnState::PrepareEpochFence => 6,
        TxnState::Dead => 7,
    }
}

/// One durable state of a transactional id, from when its coordinator adopted it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnMark {
    pub at: SimTime,
    /// Index into `Recorder::txn_ids`.
    pub id: u16,
    /// Index into [`TXN_STATES`].
    pub state: u8,
    pub producer_id: u64,
    pub epoch: u16,
    /// The broker hosting the coordinator, and its coordinator epoch.
    pub node: NodeId,
    pub coordinator_epoch: u32,
    /// Which transaction of the id this is (1, 2, …: counted at each start of an
    /// `Ongoing`); 0 before the first.
    pub number: u32,
    pub partitions: String,
}

/// How a marker relates to the transactions of its producer (see [`MarkerMark`]).
pub const MARKER_OWN: u8 = 0;
/// Its transaction was already over at the coordinator, and it closed nothing.
pub const MARKER_LATE: u8 = 1;
/// Its transaction was over and it closed a later one's records (KAFKA-17754).
pub const MARKER_WRONG_TXN: u8 = 2;
/// No coordinator state known for its producer id.
pub const MARKER_UNKNOWN: u8 = 3;

/// A transaction marker as a partition leader appended it, and what it closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerMark {
    pub at: SimTime,
    pub tp: u16,
    pub node: NodeId,
    pub offset: u64,
    pub commit: bool,
    pub producer_id: u64,
    /// The marker's producer epoch, and the producer's epoch at the partition before it.
    pub epoch: u16,
    pub partition_epoch: Option<u16>,
    pub coordinator_epoch: u32,
    /// First offset of the open transaction it closed (None: it closed nothing).
    pub closed_from: Option<u64>,
    /// When its WriteTxnMarker was sent (None: handed over inside the broker).
    pub sent: Option<SimTime>,
    pub id: Option<u16>,
    /// The number of the transaction the coordinator was completing when it sent the
    /// marker, and of the id's current one when the marker landed (0: unknown).
    pub own: u32,
    pub current: u32,
    /// `MARKER_OWN`, `MARKER_LATE`, `MARKER_WRONG_TXN` or `MARKER_UNKNOWN`.
    pub verdict: u8,
}

/// What the recorder follows of the transactions between observations.
#[derive(Default)]
struct TxnTracker {
    ids: BTreeMap<String, u16>,
    /// Per id: index of its latest mark in `Recorder::txn_states`.
    last: BTreeMap<u16, usize>,
    /// Per id: every mark index, in time order (to find the state at a past moment).
    marks: BTreeMap<u16, Vec<usize>>,
    by_producer: BTreeMap<u64, u16>,
    /// Per (partition, broker): the journal sequence already recorded.
    markers_seen: BTreeMap<(u16, NodeId), u64>,
    /// Per broker: the last WriteTxnMarker delivered to it (its send time and request).
    delivered: BTreeMap<NodeId, (SimTime, TopicPartition, u64, u16, TxnResult)>,
}

/// Everything the viewer shows of one run.
pub struct Recorder {
    pub lanes: Vec<Lane>,
    lane_of: BTreeMap<(u8, u64), u8>,
    pub tps: Vec<TopicPartition>,
    tp_index: BTreeMap<TopicPartition, u16>,
    pub kinds: Vec<&'static str>,
    pub msgs: Msgs,
    /// Per (tp index, broker): state changes in time order.
    pub replicas: BTreeMap<(u16, NodeId), Vec<(SimTime, ReplicaState)>>,
    pub faults: Vec<FaultMark>,
    /// (time, lane, up): process starts and deaths.
    pub procs: Vec<(SimTime, u8, bool)>,
    /// (start, lane, duration): client pauses.
    pub pauses: Vec<(SimTime, u8, SimTime)>,
    /// (time, lanes of one side, blocked (a, b) lane pairs).
    pub partitions: Vec<(SimTime, Vec<(u8, u8)>)>,
    pub notes: Vec<Note>,
    pub history: Vec<Hist>,
    pub violations: Vec<Violation>,
    pub final_heal: Option<SimTime>,
    pub end: SimTime,
    /// Transactional ids, in order of first sight.
    pub txn_ids: Vec<String>,
    /// Every durable state change of every transactional id, in time order.
    pub txn_states: Vec<TxnMark>,
    /// Every marker a partition leader appended, in time order.
    pub markers: Vec<MarkerMark>,
    txn: TxnTracker,
}

fn addr_key(a: Address) -> (u8, u64) {
    match a {
        Address::Controller(n) => (0, n as u64),
        Address::Node(n) => (1, n as u64),
        Address::Client(c) => (2, c),
    }
}

fn mask(ids: &[NodeId]) -> u32 {
    ids.iter().filter(|&&n| n < 32).fold(0, |m, &n| m | 1 << n)
}

fn clip(v: u64) -> u32 {
    v.min(NONE as u64 - 1) as u32
}

fn text_of(v: &impl std::fmt::Debug, max: usize) -> String {
    let mut s = format!("{v:?}");
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

impl Recorder {
    /// Lanes for the config's cluster: the controller, each broker, each client (in the
    /// simulator's client numbering: producers, consumers, group members), the admin.
    pub fn new(cfg: &SimConfig) -> Self {
        let mut r = Recorder {
            lanes: Vec::new(),
            lane_of: BTreeMap::new(),
            tps: Vec::new(),
            tp_index: BTreeMap::new(),
            kinds: Vec::new(),
            msgs: Msgs::default(),
            replicas: BTreeMap::new(),
            faults: Vec::new(),
            procs: Vec::new(),
            pauses: Vec::new(),
            partitions: Vec::new(),
            notes: Vec::new(),
            history: Vec::new(),
            violations: Vec::new(),
            final_heal: None,
            end: cfg.duration,
            txn_ids: Vec::new(),
            txn_states: Vec::new(),
            markers: Vec::new(),
            txn: TxnTracker::default(),
        };
        if cfg.controllers <= 1 {
            r.add_lane(Address::Controller(1), "controller".into(), "controller");
        } else {
            for k in 1..=cfg.controllers {
                r.add_lane(
                    Address::Controller(k),
                    format!("controller {k}"),
                    "controller",
                );
            }
        }
        for b in 1..=cfg.brokers {
            r.add_lane(Address::Node(b), format!("broker {b}"), "broker");
        }
        let mut id = 1;
        for (n, role) in [
            (cfg.producers, "producer"),
            (cfg.consumers, "consumer"),
            (cfg.group_members, "member"),
        ] {
            for i in 1..=n {
                r.add_lane(Address::Client(id), format!("{role} {i}"), role);
                id += 1;
            }
        }
        r.add_lane(Address::Client(0), "admin".into(), "admin");
        r
    }

    fn add_lane(&mut self, a: Address, name: String, role: &'static str) {
        self.lane_of.insert(addr_key(a), self.lanes.len() as u8);
        self.lanes.push(Lane { name, role });
    }

    fn lane(&mut self, a: Address) -> u8 {
        if let Some(&l) = self.lane_of.get(&addr_key(a)) {
            return l;
        }
        self.add_lane(a, a.to_string(), "client");
        self.lanes.len() as u8 - 1
    }

    fn tp(&mut self, tp: &TopicPartition) -> u16 {
        if let Some(&i) = self.tp_index.get(tp) {
            return i;
        }
        let i = self.tps.len() as u16;
        self.tps.push(tp.clone());
        self.tp_index.insert(tp.clone(), i);
        i
    }

    fn kind(&mut self, name: &'static str) -> u8 {
        match self.kinds.iter().position(|&k| k == name) {
            Some(i) => i as u8,
            None => {
                self.kinds.push(name);
                self.kinds.len() as u8 - 1
            }
        }
    }

    pub fn record(&mut self, at: SimTime, fields: &Fields<'_>) {
        self.end = self.end.max(at);
        match *fields {
            Fields::Deliver {
                from,
                to,
                sent,
                duplicate,
                arrival,
                msg,
            } => {
                let mut flags = if duplicate { DUPLICATE } else { 0 };
                flags |= match arrival {
                    Arrival::Handled => 0,
                    Arrival::Partitioned => CUT_IN_FLIGHT,
                    Arrival::Dead => DEAD,
                };
                self.message(sent, at, from, to, flags, msg);
            }
            Fields::Dropped {
                from,
                to,
                partitioned,
                msg,
            } => {
                let flags = if partitioned { PARTITIONED } else { LOST };
                self.message(at, at, from, to, flags, msg);
            }
            Fields::Fault(f) => self.fault(at, f),
            Fields::Blocked(links) => {
                let pairs = links
                    .iter()
                    .map(|&(a, b)| (self.lane(a), self.lane(b)))
                    .collect();
                self.partitions.push((at, pairs));
            }
            Fields::Process { node, up } => {
                let lane = self.lane(node);
                self.procs.push((at, lane, up));
                if let (Address::Node(n), false) = (node, up) {
                    // A restarted broker's replicas journal from 1 again.
                    self.txn.markers_seen.retain(|(_, b), _| *b != n);
                    for ((_, b), states) in self.replicas.iter_mut() {
                        if *b == n {
                            let last = states.last().map(|s| s.1);
                            if let Some(s) = last.filter(|s| s.role != 3) {
                                states.push((at, ReplicaState { role: 3, ..s }));
                            }
                        }
                    }
                }
            }
            Fields::ClientPaused { client, duration } => {
                let lane = self.lane(Address::Client(client));
                self.pauses.push((at, lane, duration));
            }
            Fields::Replicas { node, views } => {
                for v in views {
                    self.replica(at, node, v);
                }
            }
            Fields::BrokerEvent { node, event } => {
                let lane = self.lane(Address::Node(node));
                let what = broker_event_name(event);
                if what == "HighWatermark" {
                    return; // the replica states carry every HW
                }
                self.notes.push(Note {
                    at,
                    lane,
                    what,
                    text: text_of(event, 400),
                });
            }
            Fields::ControllerEvent(e) => {
                let text = text_of(e, 400);
                let what = controller_event_name(&text);
                self.notes.push(Note {
                    at,
                    lane: 0,
                    what,
                    text,
                });
            }
            Fields::Txns {
                node,
                coordinators,
                markers,
            } => {
                if let Some(c) = coordinators {
                    self.txn_coordinators(at, node, c);
                }
                for (tp, journal) in markers {
                    self.marker_journal(at, node, tp, journal);
                }
                // A WriteTxnMarker handed to this broker was appended in that step or not
                // at all.
                self.txn.delivered.remove(&node);
            }
            Fields::History(e) => self.history_event(e),
            Fields::Violation(v) => self.violations.push(v.clone()),
            Fields::FinalHeal => self.final_heal = Some(at),
        }
    }

    fn message(
        &mut self,
        sent: SimTime,
        recv: SimTime,
        from: Address,
        to: Address,
        mut flags: u8,
        msg: &Message,
    ) {
        let index = self.msgs.sent.len() as u32;
        let to_addr = to;
        let (from, to) = (self.lane(from), self.lane(to));
        let kind = self.kind(kind_name(msg));
        let (mut tp, mut a, mut b, mut c) = (u16::MAX, NONE, NONE, NONE);
        let mut text = None;
        match msg {
            Message::Fetch(r) => {
                tp = self.tp(&r.tp);
                (a, b, c) = (
                    clip(r.fetch_offset),
                    r.current_leader_epoch,
                    clip(r.high_watermark),
                );
            }
            Message::FetchResponse(r) => {
                tp = self.tp(&r.tp);
                b = r.leader_epoch;
                match &r.result {
                    FetchResult::Records {
                        records,
                        high_watermark,
                        log_end_offset,
                        ..
                    } => {
                        a = clip(*log_end_offset);
                        c = clip(*high_watermark);
                        if let Some((first, next)) = records.offsets() {
                            text = Some(format!("records {first}..{}", next.saturating_sub(1)));
                        }
                    }
                    other => {
                        flags |= ERROR;
                        text = Some(text_of(other, 200));
                    }
                }
            }
            Message::Produce(r) => {
                tp = self.tp(&r.tp);
                (a, b) = (r.batch.record_count(), clip(r.correlation));
            }
            Message::ProduceResponse(ProduceResponse {
                tp: t,
                correlation,
                result,
            }) => {
                tp = self.tp(t);
                c = clip(*correlation);
                match result {
                    Ok(ack) => (a, b) = (clip(ack.base_offset), ack.leader_epoch),
                    Err(e) => {
                        flags |= ERROR;
                        text = Some(text_of(e, 200));
                    }
                }
            }
            Message::ConsumerFetch(r) => {
                tp = self.tp(&r.tp);
                (a, b) = (clip(r.offset), clip(r.correlation));
                c = r.current_leader_epoch.unwrap_or(NONE);
            }
            Message::ConsumerFetchResponse(r) => {
                let ConsumerFetchResponse {
                    tp: t,
                    correlation,
                    result,
                } = &**r;
                tp = self.tp(t);
                c = clip(*correlation);
                match result {
                    Ok(recs) => {
                        let n: u64 = recs.batches.iter().map(|b| b.record_count() as u64).sum();
                        (a, b) = (clip(n), clip(recs.high_watermark));
                    }
                    Err(e) => {
                        flags |= ERROR;
                        text = Some(text_of(e, 200));
                    }
                }
            }
            Message::Txn { .. }
            | Message::TxnResponse { .. }
            | Message::WriteTxnMarker(_)
            | Message::WriteTxnMarkerResponse(_) => {
                (tp, a, b, c, text) =
                    self.txn_message(index, (sent, recv), to_addr, &mut flags, msg);
            }
            other => text = Some(text_of(other, 300)),
        }
        let m = &mut self.msgs;
        m.sent.push(sent);
        m.recv.push(recv);
        m.from.push(from);
        m.to.push(to);
        m.kind.push(kind);
        m.flags.push(flags);
        m.tp.push(tp);
        m.a.push(a);
        m.b.push(b);
        m.c.push(c);
        if let Some(t) = text {
            m.text.push((index, t));
        }
    }

    fn node_lane(&mut self, n: &crate::faults::NodeRef) -> Option<u8> {
        match n {
            crate::faults::NodeRef::Broker(b) => Some(self.lane(Address::Node(*b))),
            crate::faults::NodeRef::Controller(c) => {
                Some(self.lane(Address::Controller(c.0.max(1))))
            }
            crate::faults::NodeRef::LeaderOf(_) => None,
        }
    }

    fn member_lane(&self, member: u32) -> Option<u8> {
        self.lanes
            .iter()
            .position(|l| l.role == "member" && l.name == format!("member {member}"))
            .map(|i| i as u8)
    }

    fn fault(&mut self, at: SimTime, f: &Fault) {
        let mut lanes = Vec::new();
        let mut end = None;
        let _ = f.clone().map_nodes(|n| {
            lanes.extend(self.node_lane(&n));
            Some(n)
        });
        match f {
            Fault::Pause { duration, .. }
            | Fault::ClockStall { duration, .. }
            | Fault::Clog { duration, .. }
            | Fault::ReadErrors { duration, .. }
            | Fault::DiskFull { duration, .. }
            | Fault::SlowDisk { duration, .. }
            | Fault::MemberPause { duration, .. }
            | Fault::MemberIsolate { duration, .. }
            | Fault::ClientPause { duration, .. }
            | Fault::ClientIsolate { duration, .. } => end = Some(at + duration),
            Fault::Partition { duration, .. } => end = duration.map(|d| at + d),
            _ => {}
        }
        match f {
            Fault::MemberCrash { member, .. }
            | Fault::MemberRestart { member }
            | Fault::MemberPause { member, .. }
            | Fault::MemberIsolate { member, .. } => lanes.extend(self.member_lane(*member)),
            Fault::ClientPause { client, .. }
            | Fault::ClientCrash { client, .. }
            | Fault::ClientRestart { client }
            | Fault::ClientIsolate { client, .. }
            | Fault::ClientTakeover { client }
            // A message fault on a client's messages: marked on that client's lane.
            | Fault::Message {
                from: crate::faults::MessageSender::Client(client),
                ..
            } => {
                let name = match client {
                    ClientRef::Producer(n) => format!("producer {n}"),
                    ClientRef::Consumer(n) => format!("consumer {n}"),
                };
                lanes.extend(
                    self.lanes
                        .iter()
                        .position(|l| l.name == name)
                        .map(|i| i as u8),
                );
            }
            // The member pause strikes when the member next processes a batch (a
            // `ClientPaused` field): the fault itself only arms it.
            _ => {}
        }
        if matches!(f, Fault::MemberPause { .. }) {
            end = None;
        }
        self.faults.push(FaultMark {
            at,
            name: f.name(),
            lanes,
            end,
            text: format!("{f:?}"),
            fault: f.clone(),
        });
    }

    fn replica(&mut self, at: SimTime, node: NodeId, v: &ReplicaView) {
        let tp = self.tp(&v.tp);
        let (role, leader) = match v.role {
            ReplicaRole::Leader => (1, node as u8),
            ReplicaRole::Follower { leader } => (0, leader as u8),
            ReplicaRole::Offline => (2, 0),
        };
        let s = ReplicaState {
            role,
            leader,
            epoch: v.leader_epoch,
            leo: clip(v.log_end_offset),
            hw: clip(v.high_watermark),
            lso: clip(v.last_stable_offset),
            flushed: clip(v.flushed_offset),
            isr: mask(&v.isr),
            max_isr: mask(&v.maximal_isr),
        };
        let states = self.replicas.entry((tp, node)).or_default();
        if states.last().map(|l| l.1) != Some(s) {
            states.push((at, s));
        }
    }

    /// The numbers and text of a transaction protocol message (see [`Self::message`]);
    /// flags it `ERROR` or `LATE_TXN`, and notes a delivered marker for [`Self::marker`].
    fn txn_message(
        &mut self,
        index: u32,
        (sent, recv): (SimTime, SimTime),
        to: Address,
        flags: &mut u8,
        msg: &Message,
    ) -> (u16, u32, u32, u32, Option<String>) {
        let delivered = *flags & !DUPLICATE == 0;
        match msg {
            Message::WriteTxnMarker(r) => {
                if delivered {
                    self.marker_delivered(sent, to, r);
                    let id = self.txn.by_producer.get(&r.producer_id).copied();
                    *flags |= self.late_flag(index, id, sent, recv);
                }
                let (pid, epoch) = (clip(r.producer_id), r.producer_epoch as u32);
                let text = Some(format!("{:?}", r.result));
                (self.tp(&r.tp), pid, epoch, r.coordinator_epoch, text)
            }
            Message::WriteTxnMarkerResponse(r) => {
                let text = r.result.as_ref().err().map(|e| {
                    *flags |= ERROR;
                    text_of(e, 200)
                });
                (self.tp(&r.tp), NONE, NONE, NONE, text)
            }
            Message::TxnResponse { response, .. } if response.error().is_some() => {
                *flags |= ERROR;
                (u16::MAX, NONE, NONE, NONE, Some(text_of(response, 300)))
            }
            Message::Txn { request, .. } => {
                if let (TxnRequest::EndTxn(r), true) = (&**request, delivered) {
                    let id = self.txn.ids.get(&r.transactional_id).copied();
                    *flags |= self.late_flag(index, id, sent, recv);
                }
                (u16::MAX, NONE, NONE, NONE, Some(text_of(msg, 300)))
            }
            other => (u16::MAX, NONE, NONE, NONE, Some(text_of(other, 300))),
        }
    }

    /// A WriteTxnMarker handed to a broker: the marker its step may append (see
    /// [`Self::marker`]).
    fn marker_delivered(&mut self, sent: SimTime, to: Address, r: &WriteTxnMarkerRequest) {
        if let Address::Node(n) = to {
            let m = (
                sent,
                r.tp.clone(),
                r.producer_id,
                r.producer_epoch,
                r.result,
            );
            self.txn.delivered.insert(n, m);
        }
    }

    /// `LATE_TXN` if transactional id `id` began a later transaction between the send
    /// (`sent`) and the arrival (`recv`) of message `index` (recorded in `Msgs::late`).
    fn late_flag(&mut self, index: u32, id: Option<u16>, sent: SimTime, recv: SimTime) -> u8 {
        let Some(id) = id else { return 0 };
        let at = |t| self.txn_state_at(id, t).map(|m| (m.state, m.number));
        match late_arrival(at(sent), at(recv)) {
            Some((own, current)) => {
                self.msgs.late.push((index, own, current));
                LATE_TXN
            }
            None => 0,
        }
    }

    fn txn_id(&mut self, id: &str) -> u16 {
        if let Some(&i) = self.txn.ids.get(id) {
            return i;
        }
        let i = self.txn_ids.len() as u16;
        self.txn_ids.push(id.to_string());
        self.txn.ids.insert(id.to_string(), i);
        i
    }

    /// The durable state of every transactional id an active coordinator on `node` holds:
    /// a mark when it differs from the id's last one. A deposed coordinator that has not
    /// noticed yet (an older coordinator epoch) does not overwrite a newer one's.
    fn txn_coordinators(&mut self, at: SimTime, node: NodeId, cs: &TxnCoordinators) {
        for c in cs.hosted() {
            let TxnPhase::Active { epoch } = *c.phase() else {
                continue;
            };
            for (name, meta) in c.txns() {
                let id = self.txn_id(name);
                let state = txn_state_code(meta.state);
                let last = self.txn.last.get(&id).map(|&i| &self.txn_states[i]);
                if let Some(l) = last {
                    // The same state at a newer coordinator epoch is a new mark: the
                    // coordinator moved (a failover), which the page shows.
                    if l.coordinator_epoch > epoch
                        || (l.state, l.producer_id, l.epoch, l.coordinator_epoch)
                            == (state, meta.producer_id, meta.producer_epoch, epoch)
                    {
                        continue;
                    }
                }
                let prev_number = last.map_or(0, |l| l.number);
                let was_ongoing = last.is_some_and(|l| l.state == 1);
                let number = if state == 1 && !was_ongoing {
                    prev_number + 1
                } else {
                    prev_number
                };
                let partitions = meta
                    .partitions
                    .iter()
                    .map(|tp| tp.to_string())
                    .collect::<Vec<_>>()
                    .join(" ");
                self.txn.by_producer.insert(meta.producer_id, id);
                let index = self.txn_states.len();
                self.txn_states.push(TxnMark {
                    at,
                    id,
                    state,
                    producer_id: meta.producer_id,
                    epoch: meta.producer_epoch,
                    node,
                    coordinator_epoch: epoch,
                    number,
                    partitions,
                });
                self.txn.last.insert(id, index);
                self.txn.marks.entry(id).or_default().push(index);
            }
        }
    }

    /// The state mark of `id` in effect at `t`.
    fn txn_state_at(&self, id: u16, t: SimTime) -> Option<&TxnMark> {
        let marks = self.txn.marks.get(&id)?;
        let n = marks.partition_point(|&i| self.txn_states[i].at <= t);
        n.checked_sub(1).map(|k| &self.txn_states[marks[k]])
    }

    /// The markers `node`'s replica of `tp` appended since the last look.
    fn marker_journal(
        &mut self,
        at: SimTime,
        node: NodeId,
        tp: &TopicPartition,
        journal: &MarkerJournal,
    ) {
        let tpi = self.tp(tp);
        let seen = self
            .txn
            .markers_seen
            .get(&(tpi, node))
            .copied()
            .unwrap_or(0);
        // A replica made anew (a partition removed and re-created) journals from 1 again.
        let seen = if journal.appended() < seen { 0 } else { seen };
        if journal.appended() == seen {
            return;
        }
        let new: Vec<AppendedMarker> = journal.since(seen).copied().collect();
        self.txn
            .markers_seen
            .insert((tpi, node), journal.appended());
        for m in new {
            self.marker(at, node, tp, tpi, &m);
        }
    }

    /// One appended marker, judged against its producer's transactions: the one the
    /// coordinator was completing when it sent the marker (its own) and the one current
    /// when it landed. A marker landing after its own transaction ended that closes open
    /// records closed a later transaction's (KAFKA-17754's shape).
    fn marker(
        &mut self,
        at: SimTime,
        node: NodeId,
        tp: &TopicPartition,
        tpi: u16,
        m: &AppendedMarker,
    ) {
        let mk = &m.marker;
        // The WriteTxnMarker this broker was just handed, if it is this marker's (else the
        // coordinator on this broker handed it over directly, in this step).
        let sent = match self.txn.delivered.get(&node) {
            Some((sent, t, pid, epoch, result))
                if t == tp
                    && (*pid, *epoch, *result)
                        == (mk.producer_id, mk.producer_epoch, mk.result) =>
            {
                Some(*sent)
            }
            _ => None,
        };
        let id = self.txn.by_producer.get(&mk.producer_id).copied();
        let prepare = match mk.result {
            TxnResult::Commit => 2,
            TxnResult::Abort => 3,
        };
        let (own, current, verdict) = match id {
            Some(id) => judge_marker(
                self.txn_state_at(id, sent.unwrap_or(at))
                    .map(|d| (d.state, d.number)),
                self.txn_state_at(id, at).map(|n| (n.state, n.number)),
                prepare,
                m.closed_from.is_some(),
            ),
            None => (0, 0, MARKER_UNKNOWN),
        };
        self.markers.push(MarkerMark {
            at,
            tp: tpi,
            node,
            offset: m.offset,
            commit: mk.result == TxnResult::Commit,
            producer_id: mk.producer_id,
            epoch: mk.producer_epoch,
            partition_epoch: m.partition_epoch,
            coordinator_epoch: mk.coordinator_epoch,
            closed_from: m.closed_from,
            sent,
            id,
            own,
            current,
            verdict,
        });
    }

    fn history_event(&mut self, e: &skein_jepsen::Event) {
        let lane = self.lane(Address::Client(crate::topic::client_of_process(e.process)));
        let kind = match e.kind {
            EventType::Invoke => 0,
            EventType::Ok => 1,
            EventType::Fail => 2,
            EventType::Info => 3,
        };
        let f = match e.f {
            Function::Send => "send",
            Function::Poll => "poll",
            Function::Assign => "assign",
            Function::Subscribe => "subscribe",
            Function::Commit => "commit",
            Function::Crash => "crash",
            Function::Txn => "txn",
        };
        let (mut partition, mut a, mut b, mut text) = (NONE, NONE, NONE, String::new());
        match &e.value {
            Value::Null => {}
            Value::Send(s) => {
                partition = s.partition;
                a = s.offset.map_or(NONE, clip);
                text = s.value.to_string();
            }
            Value::Poll(p) => {
                if let (Some(first), Some(last)) = (p.records.first(), p.records.last()) {
                    partition = first.partition;
                    (a, b) = (clip(first.offset), clip(last.offset));
                }
                // Per partition: the offset range read.
                let mut ranges: BTreeMap<u32, (u64, u64, usize)> = BTreeMap::new();
                for r in &p.records {
                    let e = ranges.entry(r.partition).or_insert((r.offset, r.offset, 0));
                    e.0 = e.0.min(r.offset);
                    e.1 = e.1.max(r.offset);
                    e.2 += 1;
                }
                text = ranges
                    .iter()
                    .map(|(p, (lo, hi, n))| format!("p{p}:{lo}..{hi} ({n})"))
                    .collect::<Vec<_>>()
                    .join(" ");
            }
            Value::Commit(c) => {
                text = c
                    .offsets
                    .iter()
                    .map(|o| format!("p{}->{}", o.partition, o.offset))
                    .collect::<Vec<_>>()
                    .join(" ");
            }
            Value::Assign(v) => {
                text = v
                    .partitions
                    .iter()
                    .map(|(_, p)| format!("p{p}"))
                    .collect::<Vec<_>>()
                    .join(" ");
            }
            Value::Subscribe(s) => text = format!("group {}", s.group),
            Value::Txn(t) => text = format!("{} micro-ops", t.ops.len()),
        }
        self.history.push(Hist {
            at: e.time,
            lane,
            process: clip(e.process),
            kind,
            f,
            partition,
            a,
            b,
            text,
        });
    }
}

/// Whose transaction a marker closed: `sent` is its id's (state, transaction number) when
/// the coordinator sent it, `landed` when the partition appended it; `prepare` the state
/// that sends it (PrepareCommit or PrepareAbort). Returns (own number, current number,
/// verdict). Sent by a transaction the coordinator was completing; if the id has started
/// a later one by the time it lands, it is late, and if it closed open records there it
/// closed the later transaction's (KAFKA-17754: nothing at the partition tells the two
/// apart when they share a producer epoch).
fn judge_marker(
    sent: Option<(u8, u32)>,
    landed: Option<(u8, u32)>,
    prepare: u8,
    closed: bool,
) -> (u32, u32, u8) {
    let (Some((sent_state, own)), Some((_, current))) = (sent, landed) else {
        return (0, 0, MARKER_UNKNOWN);
    };
    let verdict = if sent_state != prepare {
        MARKER_UNKNOWN // no sending transaction seen (its coordinator's state was missed)
    } else if current <= own {
        MARKER_OWN
    } else if closed {
        MARKER_WRONG_TXN
    } else {
        MARKER_LATE
    };
    (own, current, verdict)
}

/// Whether a request about a transaction (an EndTxn, a marker) arrives in a later one than
/// it was sent in: `sent` and `arrived` are its id's (state, transaction number) then. It
/// does when the id has begun another transaction since, which is open or being decided
/// (a retried copy arriving once its own transaction is complete is not late). Returns
/// (the number it was sent in, the number it arrived in).
fn late_arrival(sent: Option<(u8, u32)>, arrived: Option<(u8, u32)>) -> Option<(u32, u32)> {
    let ((_, own), (state, current)) = (sent?, arrived?);
    // Ongoing, PrepareCommit, PrepareAbort (TXN_STATES order).
    (current > own && (1..=3).contains(&state)).then_some((own, current))
}

/// A message's kind as the page names it: the transaction protocol's requests by their
/// Kafka names (one `Txn` message carries five), the rest by their variant.
fn kind_name(msg: &Message) -> &'static str {
    match msg {
        Message::Txn { request, .. } => match &**request {
            TxnRequest::FindCoordinator { .. } => "FindCoordinator(txn)",
            TxnRequest::InitProducerId(_) => "InitProducerId",
            TxnRequest::AddPartitionsToTxn(r) if r.verify_only => "AddPartitionsToTxn(verify)",
            TxnRequest::AddPartitionsToTxn(_) => "AddPartitionsToTxn",
            TxnRequest::AddOffsetsToTxn(_) => "AddOffsetsToTxn",
            TxnRequest::EndTxn(_) => "EndTxn",
        },
        Message::TxnResponse { response, .. } => match &**response {
            TxnResponse::FindCoordinator(_) => "FindCoordinator(txn)Response",
            TxnResponse::InitProducerId(_) => "InitProducerIdResponse",
            TxnResponse::AddPartitionsToTxn(_) => "AddPartitionsToTxnResponse",
            TxnResponse::AddOffsetsToTxn(_) => "AddOffsetsToTxnResponse",
            TxnResponse::EndTxn(_) => "EndTxnResponse",
        },
        Message::WriteTxnMarker(_) => "WriteTxnMarkers",
        Message::WriteTxnMarkerResponse(_) => "WriteTxnMarkersResponse",
        Message::Group { request, .. } if matches!(**request, GroupRequest::TxnOffsetCommit(_)) => {
            "TxnOffsetCommit"
        }
        Message::GroupResponse { response, .. }
            if matches!(**response, GroupResponse::TxnOffsetCommit(_)) =>
        {
            "TxnOffsetCommitResponse"
        }
        other => other.name(),
    }
}

fn broker_event_name(e: &BrokerEvent) -> &'static str {
    use skein_core::replica::Event as R;
    match e {
        BrokerEvent::Replica(r) => match r {
            R::BecameLeader { .. } => "BecameLeader",
            R::BecameFollower { .. } => "BecameFollower",
            R::Truncated { .. } => "Truncated",
            R::HighWatermark { .. } => "HighWatermark",
            R::IsrProposed { .. } => "IsrProposed",
            R::IsrConfirmed { .. } => "IsrConfirmed",
            R::LogError { .. } => "LogError",
            R::LogFailed { .. } => "LogFailed",
            R::LogRecovered { .. } => "LogRecovered",
            R::BatchRepaired { .. } => "BatchRepaired",
            R::LogReset { .. } => "LogReset",
            R::TruncatedBelowHighWatermark { .. } => "TruncatedBelowHW",
        },
        BrokerEvent::Registered { .. } => "Registered",
        BrokerEvent::MetadataApplied { .. } => "MetadataApplied",
        BrokerEvent::MetadataError { .. } => "MetadataError",
        BrokerEvent::LogOpened { .. } => "LogOpened",
        BrokerEvent::LogOpenFailed { .. } => "LogOpenFailed",
        BrokerEvent::PartitionRemoved { .. } => "PartitionRemoved",
        BrokerEvent::PartitionRepaired { .. } => "PartitionRepaired",
        BrokerEvent::ReadyToStop { .. } => "ReadyToStop",
        BrokerEvent::OffsetsCommitted { .. } => "OffsetsCommitted",
    }
}

/// The variant name at the front of a controller event's Debug text.
fn controller_event_name(text: &str) -> &'static str {
    const NAMES: &[&str] = &[
        "BrokerRegistered",
        "BrokerFenced",
        "BrokerUnfenced",
        "LeaderChanged",
        "UncleanLeaderElection",
        "StorageFailed",
        "ControlledShutdown",
    ];
    NAMES
        .iter()
        .find(|n| text.starts_with(*n))
        .copied()
        .unwrap_or("ControllerEvent")
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONGOING: u8 = 1;
    const PREPARE_COMMIT: u8 = 2;
    const COMPLETE_COMMIT: u8 = 4;

    #[test]
    fn a_request_arriving_in_a_later_transaction_is_late() {
        // EndTxn of T#3 sent while it was open, arriving while T#4 is open or deciding.
        assert_eq!(
            late_arrival(Some((ONGOING, 3)), Some((ONGOING, 4))),
            Some((3, 4))
        );
        assert_eq!(
            late_arrival(Some((ONGOING, 3)), Some((PREPARE_COMMIT, 4))),
            Some((3, 4))
        );
        // Arriving in its own transaction, or once the next one is over: not late.
        assert_eq!(
            late_arrival(Some((ONGOING, 3)), Some((PREPARE_COMMIT, 3))),
            None
        );
        assert_eq!(
            late_arrival(Some((ONGOING, 3)), Some((COMPLETE_COMMIT, 4))),
            None
        );
        assert_eq!(late_arrival(None, Some((ONGOING, 4))), None);
    }

    #[test]
    fn a_marker_is_judged_by_the_transaction_that_sent_it() {
        // Sent and appended while T#3 prepares its commit: its own.
        let own = judge_marker(
            Some((PREPARE_COMMIT, 3)),
            Some((PREPARE_COMMIT, 3)),
            PREPARE_COMMIT,
            true,
        );
        assert_eq!(own, (3, 3, MARKER_OWN));
        // A retried copy landing after T#3 completed, before T#4 began: still T#3's.
        let retried = judge_marker(
            Some((PREPARE_COMMIT, 3)),
            Some((COMPLETE_COMMIT, 3)),
            PREPARE_COMMIT,
            false,
        );
        assert_eq!(retried, (3, 3, MARKER_OWN));
        // KAFKA-17754: T#3's delayed marker lands while T#4 is open and closes its records.
        let wrong = judge_marker(
            Some((PREPARE_COMMIT, 3)),
            Some((ONGOING, 4)),
            PREPARE_COMMIT,
            true,
        );
        assert_eq!(wrong, (3, 4, MARKER_WRONG_TXN));
        // Even while T#4 prepares the same outcome at the same epoch (nothing in the
        // marker tells them apart): the send time does.
        let same_shape = judge_marker(
            Some((PREPARE_COMMIT, 3)),
            Some((PREPARE_COMMIT, 4)),
            PREPARE_COMMIT,
            true,
        );
        assert_eq!(same_shape.2, MARKER_WRONG_TXN);
        // The same late copy finding nothing open: late, harmless.
        let late = judge_marker(
            Some((PREPARE_COMMIT, 3)),
            Some((ONGOING, 4)),
            PREPARE_COMMIT,
            false,
        );
        assert_eq!(late, (3, 4, MARKER_LATE));
        // No coordinator state seen, or none preparing when it was sent: unknown.
        assert_eq!(
            judge_marker(None, Some((ONGOING, 1)), PREPARE_COMMIT, true).2,
            MARKER_UNKNOWN
        );
        assert_eq!(
            judge_marker(Some((ONGOING, 1)), Some((ONGOING, 1)), PREPARE_COMMIT, true).2,
            MARKER_UNKNOWN
        );
    }
}
