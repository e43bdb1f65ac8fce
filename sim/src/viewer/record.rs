//! The recorder: what the viewer keeps of a run, fed by the [`Tracer`](crate::trace::Tracer)
//! with each event's [`Fields`], in compact columns (one value per message per column),
//! so a 60 s run's hundreds of thousands of events fit in a few megabytes.

use crate::config::SimConfig;
use crate::faults::{ClientRef, Fault};
use crate::fields::{Arrival, Fields};
use crate::invariants::Violation;
use crate::time::SimTime;
use skein_core::broker::BrokerEvent;
use skein_core::message::{Address, ConsumerFetchResponse, FetchResult, Message, ProduceResponse};
use skein_core::replica::{ReplicaRole, ReplicaView};
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
        let (from, to) = (self.lane(from), self.lane(to));
        let kind = self.kind(msg.name());
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
            flushed: clip(v.flushed_offset),
            isr: mask(&v.isr),
            max_isr: mask(&v.maximal_isr),
        };
        let states = self.replicas.entry((tp, node)).or_default();
        if states.last().map(|l| l.1) != Some(s) {
            states.push((at, s));
        }
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
