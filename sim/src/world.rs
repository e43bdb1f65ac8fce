//! The world: the event loop that runs a whole cluster of real `skein-core` state machines
//! (brokers, the controller) and simulated clients, through the network, disk, clock and
//! process fault models, checking invariants as it goes.
//!
//! Each node is a slot holding its state machine (absent while crashed), its disk (which
//! survives crashes), its clock, an incarnation number (bumped by each crash, so messages
//! in flight to a dead process are dropped), its timer, and the times until which it is
//! busy with disk I/O or paused. Events for a busy or paused node wait until it is free.

use crate::client::{ClientOut, Consumer, Ctx, Producer, TOPIC};
use crate::clock::NodeClock;
use crate::config::SimConfig;
use crate::disk::SimDisk;
use crate::faults::{
    random_client_schedule, random_member_schedule, random_schedule, DiskFaultKind, Fault,
    LeaderOf, NodeRef, Scheduled,
};
use crate::group_client::{GroupMember, SETTLE_BOUND};
use crate::group_invariants::{self, GroupChecker};
use crate::history::History;
use crate::invariants::{self, Checker};
use crate::net::{Fate, Network};
use crate::queue::EventQueue;
use crate::report::SimReport;
use crate::rng::{between, stream, substream, Subsystem};
use crate::time::{SimTime, MICROS, MILLIS, SECS};
use crate::trace::{Arrival, Fields, Tracer};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use skein_core::broker::{Broker, BrokerConfig, BrokerEvent, Bugs, Output};
use skein_core::controller::{
    Controller, ControllerConfig, ControllerError, ControllerEvent, ControllerOutput,
    ControllerRequest, ControllerResponse, Requester, TopicConfig,
};
use skein_core::group::{
    coordinator_partition, CoordinatorPhase, GroupConfig, CONSUMER_OFFSETS_TOPIC,
};
use skein_core::message::{Acks as CoreAcks, Address, Message};
use skein_core::replica::{Event as ReplicaEvent, ReplicaView, Role};
use skein_core::{NodeId, Offset, TopicPartition};
use std::collections::BTreeMap;
use std::io::Write;

mod client_faults;

/// Why a run could not be carried out at all (not a verdict: invariant violations are in
/// the report).
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("unknown --bug {name:?}; known: {known}")]
    UnknownBug { name: String, known: String },
    #[error("the controller could not start: {0}")]
    ControllerStart(String),
    #[error("cannot write the trace or history: {0}")]
    Io(#[from] std::io::Error),
}

/// The historical bugs `--bug` can switch back on.
pub const BUG_NAMES: &[&str] = &[
    "truncate-to-hw",
    "next-epoch-start",
    "unfenced-fetch",
    "ack-before-isr",
    "fsync-after-ack",
    "no-generation-fencing",
    "elect-out-of-isr",
    "no-elr",
    "stale-producer-epoch",
];

fn bugs_from(names: &[String]) -> Result<Bugs, SimError> {
    let mut b = Bugs::default();
    for n in names {
        match n.as_str() {
            "truncate-to-hw" => b.truncate_to_hw = true,
            "next-epoch-start" => b.next_epoch_start = true,
            "unfenced-fetch" => b.unfenced_fetch = true,
            "ack-before-isr" => b.ack_before_isr = true,
            "fsync-after-ack" => b.fsync_after_ack = true,
            "no-generation-fencing" => b.no_generation_fencing = true,
            "elect-out-of-isr" => b.elect_out_of_isr = true,
            "no-elr" => b.no_elr = true,
            "stale-producer-epoch" => b.stale_producer_epoch = true,
            other => {
                return Err(SimError::UnknownBug {
                    name: other.to_string(),
                    known: BUG_NAMES.join(", "),
                })
            }
        }
    }
    Ok(b)
}

enum Ev {
    Deliver {
        from: Address,
        to: Address,
        incarnation: u64,
        msg: Message,
        /// When it was sent, and whether it is the network's second copy (for the viewer).
        sent: SimTime,
        duplicate: bool,
    },
    NodeTimer {
        node: Address,
        gen: u64,
    },
    ClientTimer {
        client: usize,
        gen: u64,
    },
    Fault(Fault),
    FinalHeal,
    Audit,
    Admin,
    End,
}

struct Slot<M> {
    machine: Option<M>,
    disk: SimDisk,
    clock: NodeClock,
    incarnation: u64,
    timer_gen: u64,
    timer_at: Option<SimTime>,
    busy_until: SimTime,
    paused_until: SimTime,
    start_failures: u64,
}

impl<M> Slot<M> {
    fn new(disk: SimDisk) -> Self {
        Self {
            machine: None,
            disk,
            clock: NodeClock::default(),
            incarnation: 0,
            timer_gen: 0,
            timer_at: None,
            busy_until: 0,
            paused_until: 0,
            start_failures: 0,
        }
    }

    fn free_at(&self) -> SimTime {
        self.busy_until.max(self.paused_until)
    }

    /// What a timer of generation `gen` firing at `now` should do: nothing if a newer timer
    /// replaced it, wait until the node is free if it is busy or paused, else tick now.
    fn timer_due(&mut self, now: SimTime, gen: u64) -> TimerDue {
        if self.timer_gen != gen {
            return TimerDue::Stale;
        }
        if self.free_at() > now {
            let t = self.free_at();
            self.timer_at = Some(t);
            return TimerDue::Deferred(t);
        }
        self.timer_at = None;
        TimerDue::Now
    }
}

enum TimerDue {
    Stale,
    Deferred(SimTime),
    Now,
}

enum Client {
    Producer(Producer),
    Consumer(Consumer),
    Member(Box<GroupMember>),
}

impl Client {
    fn next_wake(&self) -> Option<SimTime> {
        match self {
            Client::Producer(p) => p.next_wake(),
            Client::Consumer(c) => c.next_wake(),
            Client::Member(m) => m.next_wake(),
        }
    }
}

struct ClientSlot {
    client: Client,
    timer_gen: u64,
    timer_at: Option<SimTime>,
    /// A paused client handles nothing until then.
    paused_until: SimTime,
    /// Crashed (a client fault): handles nothing, ever again; a restart is a new process
    /// at a new address (see `client_faults`).
    down: bool,
    /// Down and restarted elsewhere: never restarts again.
    retired: bool,
    /// Whether its fencing has been traced.
    fenced_seen: bool,
}

impl ClientSlot {
    fn new(client: Client) -> Self {
        Self {
            client,
            timer_gen: 0,
            timer_at: None,
            paused_until: 0,
            down: false,
            retired: false,
            fenced_seen: false,
        }
    }
}

const ADMIN: u64 = 0;
const AUDIT_INTERVAL: SimTime = 100 * MILLIS;

/// The faults a run injects: random ones drawn from the seed's fault stream, plus the
/// config's exact schedule, in time order. A pure function of the config, so a failing
/// run's schedule can be written out as explicit faults (see `shrink`).
pub fn realised_schedule(cfg: &SimConfig) -> Vec<Scheduled> {
    let mut schedule: Vec<Scheduled> = Vec::new();
    if cfg.random_faults {
        let mut frng = stream(cfg.seed, Subsystem::Faults);
        schedule = random_schedule(
            &cfg.rates,
            cfg.brokers,
            cfg.faults_start(),
            cfg.faults_end(),
            &mut frng,
        );
        // Member faults from their own stream: the broker schedule above is unchanged.
        let mut mrng = substream(cfg.seed, Subsystem::Faults, 1);
        schedule.extend(random_member_schedule(
            &cfg.rates,
            cfg.group_members,
            cfg.faults_start(),
            cfg.faults_end(),
            &mut mrng,
        ));
        // Producer and consumer faults from a third stream, likewise.
        let mut crng = substream(cfg.seed, Subsystem::Faults, 2);
        schedule.extend(random_client_schedule(
            &cfg.rates,
            cfg.producers,
            cfg.consumers,
            cfg.faults_start(),
            cfg.faults_end(),
            &mut crng,
        ));
    }
    schedule.extend(cfg.schedule.iter().cloned());
    schedule.sort_by_key(|s| s.at);
    schedule
}

/// Runs one simulation. `trace` receives every event as JSON lines; `history` the client
/// history (docs/history.md).
pub fn run(
    config: &SimConfig,
    trace: Option<Box<dyn Write>>,
    history: Option<Box<dyn Write>>,
) -> Result<SimReport, SimError> {
    config.validate().map_err(SimError::Config)?;
    let probes = skein_core::probe::record();
    let mut world = World::new(config, trace, None)?;
    world.run_loop();
    let mut report = world.finish(history)?;
    report.set_probes(probes.finish());
    Ok(report)
}

/// [`run`], with the viewer's [`Recorder`](crate::viewer::Recorder) watching the trace.
pub fn run_recorded(
    config: &SimConfig,
    trace: Option<Box<dyn Write>>,
    history: Option<Box<dyn Write>>,
) -> Result<(SimReport, crate::viewer::Recorder), SimError> {
    config.validate().map_err(SimError::Config)?;
    let probes = skein_core::probe::record();
    let rec = crate::viewer::Recorder::new(config);
    let mut world = World::new(config, trace, Some(rec))?;
    world.run_loop();
    let mut report = world.finish_ref(history)?;
    report.set_probes(probes.finish());
    let rec = world
        .tracer
        .take_recorder()
        .expect("the recorder was attached");
    Ok((report, rec))
}

struct World {
    cfg: SimConfig,
    broker_config: BrokerConfig,
    controller_config: ControllerConfig,
    q: EventQueue<Ev>,
    net: Network<Address>,
    net_rng: ChaCha8Rng,
    disk_rng: ChaCha8Rng,
    work_rng: ChaCha8Rng,
    tracer: Tracer,
    brokers: BTreeMap<NodeId, Slot<Broker<SimDisk>>>,
    controller: Slot<Controller<SimDisk>>,
    clients: Vec<ClientSlot>,
    checker: Checker,
    history: History,
    topic_created: bool,
    admin_sent: Option<SimTime>,
    fault_counts: BTreeMap<&'static str, u64>,
    /// Which fault kinds struck which roles at which moments (observation only).
    atlas: crate::atlas::Atlas,
    /// When the last fault healed (the start of the liveness window).
    healed_at: SimTime,
    /// Whether scenario faults continue past the final heal (liveness then not judged).
    faults_after_heal: bool,
    out: ClientOut,
    /// Records per produce request, by (client, correlation), for the acknowledgement checks.
    produce_sizes: BTreeMap<(u64, u64), u32>,
    /// The group invariants, when the workload has group members.
    group: Option<GroupChecker>,
    /// Client index of each group member (member n at `members[n - 1]`).
    members: Vec<usize>,
    /// History events already passed to the tracer's recorder.
    history_seen: usize,
    /// The value prefix ("pN-") of the next producer instance a restart or a takeover
    /// creates, so values stay unique.
    next_producer_index: u32,
    /// Where a restarted client lives now: its original slot -> its current slot.
    moved_clients: BTreeMap<usize, usize>,
}

/// A producer of the workload: client `client`, writing values "p{index}-N" from `start_at`
/// at its share of the produce rate, until the run's quiet tail.
fn producer(cfg: &SimConfig, client: u64, index: u32, start_at: SimTime) -> Producer {
    // After the final heal: new values for a third of the window, new batches for half
    // of it; the rest lets retries finish and consumers catch up for the liveness check.
    let heal = cfg.faults_end();
    let stop_producing = heal + (cfg.duration - heal) / 3;
    let stop_dispatch = heal + (cfg.duration - heal) / 2;
    let acks = match cfg.acks {
        crate::scenario::Acks::None => CoreAcks::None,
        crate::scenario::Acks::Leader => CoreAcks::Leader,
        crate::scenario::Acks::All => CoreAcks::All,
    };
    Producer::new(
        client,
        index,
        cfg.partitions,
        acks,
        cfg.idempotent,
        cfg.produce_rate / cfg.producers.max(1) as f64,
        start_at,
        stop_producing,
        stop_dispatch,
    )
}

fn node_addr(n: NodeRef) -> Address {
    match n {
        NodeRef::Broker(id) => Address::Node(id),
        NodeRef::Controller(_) => Address::Controller,
        NodeRef::LeaderOf(_) => unreachable!("fault targets are resolved before they apply"),
    }
}

fn addr_code(a: Address) -> u64 {
    match a {
        Address::Node(n) => 1 << 32 | n as u64,
        Address::Controller => 2 << 32,
        Address::Client(c) => 3 << 32 | c,
    }
}

fn msg_code(m: &Message) -> (u64, &'static str) {
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
    };
    (code, m.name())
}

impl World {
    fn new(
        cfg: &SimConfig,
        trace: Option<Box<dyn Write>>,
        recorder: Option<crate::viewer::Recorder>,
    ) -> Result<Self, SimError> {
        let seed = cfg.seed;
        let bugs = bugs_from(&cfg.bugs)?;
        // Timeouts scaled down from Kafka's defaults so that short runs see failovers.
        let broker_config = BrokerConfig {
            replica_lag_time_max: 2 * SECS,
            fetch_timeout: 300 * MILLIS,
            alter_partition_retry: 300 * MILLIS,
            heartbeat_interval: 150 * MILLIS,
            controller_timeout: 400 * MILLIS,
            // Leaders fsync a little after appending (the HW counts only flushed data), so a
            // power loss can find unsynced data to lose or tear.
            flush_interval: 5 * MILLIS,
            bugs,
            // Groups: a small __consumer_offsets (created on the first FindCoordinator, so
            // runs without group members never have it), session timeouts scaled down.
            offsets_topic_partitions: 2,
            group_append_timeout: 400 * MILLIS,
            group: GroupConfig {
                min_session_timeout: 100 * MILLIS,
                initial_rebalance_delay: 300 * MILLIS,
                ..GroupConfig::default()
            },
            ..BrokerConfig::default()
        };
        let controller_config = ControllerConfig {
            session_timeout: 1_200 * MILLIS,
            restart_grace: 1_200 * MILLIS,
            bugs,
            ..ControllerConfig::default()
        };
        let mut clock_rng = stream(seed, Subsystem::Clock);
        let mut brokers = BTreeMap::new();
        for id in 1..=cfg.brokers {
            let mut slot = Slot::new(SimDisk::new(
                cfg.disk.clone(),
                substream(seed, Subsystem::Disk, id as u64),
            ));
            // Clocks start at different, arbitrary local times.
            slot.clock = NodeClock::new(between(&mut clock_rng, 0, 1_000 * SECS));
            brokers.insert(id, slot);
        }
        let mut controller = Slot::new(SimDisk::new(
            cfg.disk.clone(),
            substream(seed, Subsystem::Disk, 0),
        ));
        controller.clock = NodeClock::new(between(&mut clock_rng, 0, 1_000 * SECS));

        let mut clients = Vec::new();
        let mut id = 1u64;
        for i in 0..cfg.producers {
            clients.push(ClientSlot::new(Client::Producer(producer(
                cfg,
                id,
                i + 1,
                500 * MILLIS,
            ))));
            id += 1;
        }
        for _ in 0..cfg.consumers {
            clients.push(ClientSlot::new(Client::Consumer(Consumer::new(
                id,
                cfg.partitions,
            ))));
            id += 1;
        }
        let mut members = Vec::new();
        for i in 0..cfg.group_members {
            members.push(clients.len());
            clients.push(ClientSlot::new(Client::Member(Box::new(GroupMember::new(
                id,
                i + 1,
                cfg.group_id.clone(),
                cfg.partitions,
                cfg.group_commit,
                cfg.group_assignor,
                cfg.group_static,
                substream(seed, Subsystem::Workload, 1000 + i as u64),
            )))));
            id += 1;
        }
        let mut w = Self {
            cfg: cfg.clone(),
            broker_config,
            controller_config,
            q: EventQueue::new(),
            net: Network::new(cfg.network.clone()),
            net_rng: stream(seed, Subsystem::Network),
            disk_rng: stream(seed, Subsystem::Disk),
            work_rng: stream(seed, Subsystem::Workload),
            tracer: Tracer::new(trace).with_recorder(recorder),
            history_seen: 0,
            brokers,
            controller,
            clients,
            checker: Checker::new(),
            history: History::default(),
            topic_created: false,
            admin_sent: None,
            fault_counts: BTreeMap::new(),
            atlas: crate::atlas::Atlas::default(),
            healed_at: 0,
            faults_after_heal: false,
            out: ClientOut::default(),
            produce_sizes: BTreeMap::new(),
            group: (cfg.group_members > 0).then(|| GroupChecker::new(cfg.partitions)),
            members,
            next_producer_index: cfg.producers + 1,
            moved_clients: BTreeMap::new(),
        };
        w.start_controller(0).map_err(SimError::ControllerStart)?;
        for id in 1..=cfg.brokers {
            w.start_broker(id, 0);
        }
        let schedule = realised_schedule(cfg);
        let mut heal_at = cfg.final_heal_at();
        for s in &schedule {
            if s.at >= heal_at {
                w.faults_after_heal = true;
                heal_at = heal_at.max(s.at);
            }
            w.q.push(s.at, Ev::Fault(s.fault.clone()));
        }
        w.q.push(heal_at, Ev::FinalHeal);
        w.healed_at = heal_at;
        w.q.push(100 * MILLIS, Ev::Admin);
        w.q.push(AUDIT_INTERVAL, Ev::Audit);
        w.q.push(cfg.duration, Ev::End);
        for i in 0..w.clients.len() {
            w.reschedule_client(i, 0);
        }
        Ok(w)
    }

    fn start_controller(&mut self, now: SimTime) -> Result<(), String> {
        let local = self.controller.clock.local(now);
        match Controller::open(
            self.controller.disk.clone(),
            self.controller_config.clone(),
            local,
        ) {
            Ok(c) => {
                self.controller.machine = Some(c);
                self.tracer.fields(
                    now,
                    Fields::Process {
                        node: Address::Controller,
                        up: true,
                    },
                );
                self.after_controller_step(now);
                Ok(())
            }
            Err(e) => {
                self.controller.start_failures += 1;
                Err(e.to_string())
            }
        }
    }

    fn start_broker(&mut self, id: NodeId, now: SimTime) {
        let slot = self.brokers.get_mut(&id).expect("broker slot");
        let local = slot.clock.local(now);
        match Broker::open(id, self.broker_config.clone(), slot.disk.clone(), local) {
            Ok((b, _reports)) => {
                slot.machine = Some(b);
                self.tracer.fields(
                    now,
                    Fields::Process {
                        node: Address::Node(id),
                        up: true,
                    },
                );
                self.after_broker_step(id, now);
            }
            Err(e) => {
                slot.start_failures += 1;
                let seq = self.q.len() as u64;
                self.tracer.event(
                    now,
                    seq,
                    "start-failed",
                    &format!("node-{id}"),
                    &[id as u64],
                    || e.to_string(),
                );
            }
        }
    }

    fn run_loop(&mut self) {
        while let Some((now, seq, ev)) = self.q.pop() {
            match ev {
                Ev::End => {
                    self.tracer.event(now, seq, "end", "", &[], String::new);
                    break;
                }
                Ev::Deliver {
                    from,
                    to,
                    incarnation,
                    msg,
                    sent,
                    duplicate,
                } => self.deliver(now, seq, (from, to, incarnation), msg, (sent, duplicate)),
                Ev::NodeTimer { node, gen } => self.node_timer(now, seq, node, gen),
                Ev::ClientTimer { client, gen } => {
                    let cs = &mut self.clients[client];
                    if cs.timer_gen != gen || cs.down {
                        continue;
                    }
                    if cs.paused_until > now {
                        let t = cs.paused_until;
                        cs.timer_at = Some(t);
                        self.q.push(t, Ev::ClientTimer { client, gen });
                        continue;
                    }
                    self.tracer
                        .event(now, seq, "client-timer", "", &[client as u64], String::new);
                    self.clients[client].timer_at = None;
                    self.client_step(client, now, None);
                }
                Ev::Fault(f) => {
                    let Some(f) = self.resolve_targets(f) else {
                        self.tracer.event(now, seq, "fault-skipped", "", &[], || {
                            "its partition has no leader".to_string()
                        });
                        continue;
                    };
                    let name = f.name();
                    self.tracer
                        .event(now, seq, "fault", name, &[], || format!("{f:?}"));
                    self.tracer.fields(now, Fields::Fault(&f));
                    if !matches!(
                        f,
                        Fault::EndDiskFault { .. }
                            | Fault::Heal
                            | Fault::EndPartition { .. }
                            | Fault::Restart { .. }
                            | Fault::MemberRestart { .. }
                            | Fault::ClientRestart { .. }
                            | Fault::ClientTakeover { .. }
                    ) {
                        *self.fault_counts.entry(name).or_default() += 1;
                        let (role, moment) = self.atlas_moment(&f);
                        self.atlas.strike(name, role, moment);
                    }
                    self.apply_fault(now, f);
                }
                Ev::FinalHeal => {
                    self.tracer
                        .event(now, seq, "final-heal", "", &[], String::new);
                    self.tracer.fields(now, Fields::FinalHeal);
                    self.final_heal(now);
                }
                Ev::Audit => {
                    self.audit(now);
                    self.q.push(now + AUDIT_INTERVAL, Ev::Audit);
                }
                Ev::Admin => self.admin(now, None),
            }
        }
    }

    // ---- message delivery ----

    fn send(&mut self, at: SimTime, from: Address, to: Address, msg: Message) {
        let incarnation = match to {
            Address::Node(n) => self.brokers.get(&n).map_or(0, |s| s.incarnation),
            Address::Controller => self.controller.incarnation,
            Address::Client(_) => 0,
        };
        match self.net.send(at, from, to, &mut self.net_rng) {
            Fate::Dropped(why) => self.tracer.fields(
                at,
                Fields::Dropped {
                    from,
                    to,
                    partitioned: why == crate::net::DropReason::Partitioned,
                    msg: &msg,
                },
            ),
            Fate::Deliver { at: t, duplicate } => {
                if let Some(d) = duplicate {
                    self.q.push(
                        d,
                        Ev::Deliver {
                            from,
                            to,
                            incarnation,
                            msg: msg.clone(),
                            sent: at,
                            duplicate: true,
                        },
                    );
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

    fn deliver(
        &mut self,
        now: SimTime,
        seq: u64,
        (from, to, incarnation): (Address, Address, u64),
        msg: Message,
        (sent, duplicate): (SimTime, bool),
    ) {
        // A busy or paused node takes the message when it is free (FIFO kept by re-queueing
        // in arrival order).
        let free_at = match to {
            Address::Node(n) => self.brokers.get(&n).map_or(0, |s| s.free_at()),
            Address::Controller => self.controller.free_at(),
            Address::Client(c) => c
                .checked_sub(1)
                .and_then(|i| self.clients.get(i as usize))
                .map_or(0, |s| s.paused_until),
        };
        if free_at > now {
            self.q.push(
                free_at,
                Ev::Deliver {
                    from,
                    to,
                    incarnation,
                    msg,
                    sent,
                    duplicate,
                },
            );
            return;
        }
        let (code, name) = msg_code(&msg);
        let verbose = self.tracer.verbose();
        self.tracer.event(
            now,
            seq,
            "deliver",
            name,
            &[addr_code(from), addr_code(to), code],
            || {
                if verbose {
                    let mut s = format!("{from} -> {to}: {msg:?}");
                    s.truncate(600);
                    s
                } else {
                    String::new()
                }
            },
        );
        if self.tracer.recording() {
            let arrival = if !self.net.can_deliver(from, to) {
                Arrival::Partitioned
            } else {
                let alive = match to {
                    Address::Node(n) => self
                        .brokers
                        .get(&n)
                        .is_some_and(|s| s.incarnation == incarnation && s.machine.is_some()),
                    Address::Controller => {
                        self.controller.incarnation == incarnation
                            && self.controller.machine.is_some()
                    }
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
                    msg: &msg,
                },
            );
        }
        if !self.net.can_deliver(from, to) {
            return; // cut by a partition while in flight
        }
        match to {
            Address::Node(n) => {
                let Some(slot) = self.brokers.get_mut(&n) else {
                    return;
                };
                if slot.incarnation != incarnation {
                    return;
                }
                let local = slot.clock.local(now);
                let Some(b) = slot.machine.as_mut() else {
                    return;
                };
                b.handle(local, from, msg);
                self.after_broker_step(n, now);
            }
            Address::Controller => {
                if self.controller.incarnation != incarnation {
                    return;
                }
                let local = self.controller.clock.local(now);
                let Some(c) = self.controller.machine.as_mut() else {
                    return;
                };
                let requester = match from {
                    Address::Node(n) => Requester::Broker(n),
                    Address::Client(c) => Requester::Client(c),
                    Address::Controller => return,
                };
                if let Message::ControllerRequest(req) = msg {
                    c.handle(local, requester, req);
                    self.after_controller_step(now);
                }
            }
            Address::Client(c) => {
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

    fn node_timer(&mut self, now: SimTime, seq: u64, node: Address, gen: u64) {
        let due = match node {
            Address::Node(n) => match self.brokers.get_mut(&n) {
                Some(slot) => slot.timer_due(now, gen),
                None => return,
            },
            Address::Controller => self.controller.timer_due(now, gen),
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
        self.tracer
            .event(now, seq, "tick", "", &[addr_code(node)], String::new);
        match node {
            Address::Node(n) => {
                let Some(slot) = self.brokers.get_mut(&n) else {
                    return;
                };
                let local = slot.clock.local(now);
                let Some(b) = slot.machine.as_mut() else {
                    return;
                };
                b.tick(local);
                self.after_broker_step(n, now);
            }
            Address::Controller => {
                let slot = &mut self.controller;
                let local = slot.clock.local(now);
                let Some(c) = slot.machine.as_mut() else {
                    return;
                };
                c.tick(local);
                self.after_controller_step(now);
            }
            Address::Client(_) => {}
        }
    }

    /// After a broker handled something: charge its disk time, route its outputs, feed
    /// the invariant checks, and set its timer.
    fn after_broker_step(&mut self, id: NodeId, now: SimTime) {
        let slot = self.brokers.get_mut(&id).expect("slot");
        let latency = slot.disk.take_latency();
        let send_at = now + latency;
        slot.busy_until = slot.busy_until.max(send_at);
        let Some(b) = slot.machine.as_mut() else {
            return;
        };
        let outputs = b.drain_outputs();
        let next = b.next_timeout();
        if self.tracer.recording() {
            let views = b.views();
            self.tracer.fields(
                now,
                Fields::Replicas {
                    node: id,
                    views: &views,
                },
            );
        }
        let from = Address::Node(id);
        for o in outputs {
            if let Output::Event(e) = &o {
                let seq = self.q.len() as u64;
                self.tracer
                    .event(now, seq, "broker-event", "", &[id as u64], || {
                        format!("node-{id}: {e:?}")
                    });
                self.tracer
                    .fields(now, Fields::BrokerEvent { node: id, event: e });
            }
            match o {
                Output::Send { to, msg } => {
                    if let Address::Client(c) = to {
                        self.check_client_response(id, c, now, &msg);
                    }
                    self.send(send_at, from, to, msg);
                }
                // The replication invariants watch every topic (the simulator's and
                // __consumer_offsets); the client-facing ones only the simulator's.
                Output::Event(BrokerEvent::Replica(ReplicaEvent::HighWatermark {
                    tp,
                    leader_epoch,
                    high_watermark,
                })) => {
                    self.checker
                        .on_leader_hw(now, id, &tp, leader_epoch, high_watermark);
                }
                Output::Event(BrokerEvent::Replica(ReplicaEvent::BecameLeader {
                    tp,
                    epoch,
                    log_end_offset,
                })) => {
                    self.checker.on_became_leader(&tp, epoch, log_end_offset);
                }
                Output::Event(BrokerEvent::OffsetsCommitted {
                    group,
                    coordinator_epoch,
                    offsets,
                }) if group == self.cfg.group_id => {
                    if let Some(gc) = self.group.as_mut() {
                        let offsets: Vec<(u32, Offset)> = offsets
                            .into_iter()
                            .filter(|(tp, _)| tp.topic == TOPIC)
                            .map(|(tp, o)| (tp.partition, o))
                            .collect();
                        gc.on_committed(&mut self.checker, now, id, coordinator_epoch, &offsets);
                    }
                }
                Output::Event(_) => {}
            }
        }
        self.set_node_timer(Address::Node(id), now, next);
        self.observe_coordinator(id, now);
    }

    /// Feeds the group checks with what the group's coordinator on broker `id` holds.
    fn observe_coordinator(&mut self, id: NodeId, now: SimTime) {
        let Some(gc) = self.group.as_mut() else {
            return;
        };
        let gid = &self.cfg.group_id;
        let state = self
            .brokers
            .get(&id)
            .and_then(|s| s.machine.as_ref())
            .and_then(|b| b.group_coordinators())
            .and_then(|cs| cs.coordinator(coordinator_partition(gid, cs.num_partitions())))
            .and_then(|c| match c.phase() {
                CoordinatorPhase::Active { epoch } => {
                    let offsets = c
                        .committed_offsets(gid)
                        .map(|it| {
                            it.filter(|(tp, _)| tp.topic == TOPIC)
                                .map(|(tp, o)| (tp.partition, o))
                                .collect()
                        })
                        .unwrap_or_default();
                    Some((*epoch, offsets))
                }
                _ => None,
            });
        gc.on_coordinator(&mut self.checker, now, id, state);
    }

    /// Checks a broker's answer to a client as it leaves the broker.
    fn check_client_response(&mut self, id: NodeId, client: u64, now: SimTime, msg: &Message) {
        match msg {
            Message::ProduceResponse(r) => {
                if let (Ok(ack), true) = (&r.result, r.tp.topic == TOPIC) {
                    let records = self
                        .produce_sizes
                        .get(&(client, r.correlation))
                        .copied()
                        .unwrap_or(1);
                    let last = ack.base_offset + records.saturating_sub(1) as u64;
                    self.checker
                        .on_broker_ack(now, id, r.tp.partition, ack.leader_epoch, last);
                }
            }
            Message::ConsumerFetchResponse(r) => {
                if let Ok(recs) = &r.result {
                    let hw = self
                        .brokers
                        .get(&id)
                        .and_then(|s| s.machine.as_ref())
                        .and_then(|b| b.replica_view(&r.tp))
                        .map_or(0, |v| v.high_watermark);
                    self.checker
                        .on_served(now, id, r.tp.partition, &recs.batches, hw);
                }
            }
            _ => {}
        }
    }

    fn after_controller_step(&mut self, now: SimTime) {
        let slot = &mut self.controller;
        let latency = slot.disk.take_latency();
        let send_at = now + latency;
        slot.busy_until = slot.busy_until.max(send_at);
        let Some(c) = slot.machine.as_mut() else {
            return;
        };
        let outputs = c.drain_outputs();
        let next = c.next_timeout();
        for o in outputs {
            if let ControllerOutput::Event(e) = &o {
                let seq = self.q.len() as u64;
                self.tracer
                    .event(now, seq, "controller-event", "", &[], || format!("{e:?}"));
                self.tracer.fields(now, Fields::ControllerEvent(e));
                if let ControllerEvent::UncleanLeaderElection {
                    tp, leader_epoch, ..
                } = e
                {
                    self.checker.on_unclean_election(tp, *leader_epoch);
                }
            }
            if let ControllerOutput::Send { to, response } = o {
                let to = match to {
                    Requester::Broker(n) => Address::Node(n),
                    Requester::Client(c) => Address::Client(c),
                };
                self.send(
                    send_at,
                    Address::Controller,
                    to,
                    Message::ControllerResponse(response),
                );
            }
        }
        self.set_node_timer(Address::Controller, now, next);
    }

    fn set_node_timer(&mut self, node: Address, now: SimTime, next_local: Option<u64>) {
        let slot_clock;
        let (gen, at) = {
            let (clock, timer_gen, timer_at) = match node {
                Address::Node(n) => {
                    let s = self.brokers.get_mut(&n).expect("slot");
                    (&s.clock, &mut s.timer_gen, &mut s.timer_at)
                }
                Address::Controller => {
                    let s = &mut self.controller;
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

    // ---- clients ----

    fn client_step(&mut self, idx: usize, now: SimTime, msg: Option<(Address, Message)>) {
        let mut out = std::mem::take(&mut self.out);
        {
            let mut ctx = Ctx {
                now,
                history: &mut self.history,
                rng: &mut self.work_rng,
                out: &mut out,
                brokers: self.cfg.brokers,
            };
            match (&mut self.clients[idx].client, msg) {
                (Client::Producer(p), Some((_, m))) => p.handle(m, &mut ctx),
                (Client::Producer(p), None) => p.tick(&mut ctx),
                (Client::Consumer(c), Some((from, m))) => c.handle(from, m, &mut ctx),
                (Client::Consumer(c), None) => c.tick(&mut ctx),
                (Client::Member(m), Some((from, msg))) => m.handle(from, msg, &mut ctx),
                (Client::Member(m), None) => m.tick(&mut ctx),
            }
        }
        self.absorb_client_out(idx, now, &mut out);
        self.out = out;
        self.note_fenced(idx, now);
        self.reschedule_client(idx, now);
    }

    /// A new producer instance at client `client` (a restart or a takeover), starting now.
    fn new_producer(&mut self, client: u64, now: SimTime) -> Producer {
        let index = self.next_producer_index;
        self.next_producer_index += 1;
        producer(&self.cfg, client, index, now)
    }

    /// Routes what a client step produced: acknowledgements and reads to the checks, group
    /// observations to the group checks, a pause to the client's slot, messages out.
    fn absorb_client_out(&mut self, idx: usize, now: SimTime, out: &mut ClientOut) {
        let from = Address::Client(idx as u64 + 1);
        self.history_to_tracer();
        for (p, o, v, e) in out.acked.drain(..) {
            if let Some(g) = self.group.as_mut() {
                g.on_known(p, o);
            }
            self.checker.on_client_ack(now, p, o, v, e);
        }
        for (p, o, v, b) in out.read.drain(..) {
            if let Some(g) = self.group.as_mut() {
                g.on_known(p, o);
            }
            self.checker.on_read(now, p, o, &v, b);
        }
        for obs in out.group.drain(..) {
            if let Some(g) = self.group.as_mut() {
                g.on_obs(&mut self.checker, now, obs);
            }
        }
        if let Some(d) = out.pause.take() {
            self.pause_client(idx, now, d);
        }
        for (to, m) in out.sends.drain(..) {
            if let Message::Produce(r) = &m {
                self.produce_sizes
                    .insert((idx as u64 + 1, r.correlation), r.batch.record_count());
            }
            self.send(now, from, to, m);
        }
    }

    fn pause_client(&mut self, idx: usize, now: SimTime, d: SimTime) {
        let seq = self.q.len() as u64;
        self.tracer
            .event(now, seq, "member-paused", "", &[idx as u64, d], || {
                format!("client {}: paused for {}", idx + 1, crate::time::Human(d))
            });
        self.tracer.fields(
            now,
            Fields::ClientPaused {
                client: idx as u64 + 1,
                duration: d,
            },
        );
        let cs = &mut self.clients[idx];
        cs.paused_until = cs.paused_until.max(now + d);
    }

    /// Passes the history events recorded since the last call to the tracer's recorder.
    fn history_to_tracer(&mut self) {
        if self.tracer.recording() {
            for e in &self.history.events()[self.history_seen..] {
                self.tracer.fields(e.time, Fields::History(e));
            }
        }
        self.history_seen = self.history.len();
    }

    /// Runs `f` on group member `member` (1-based) with a client context, then routes what
    /// it produced and re-arms its timer.
    fn with_member(
        &mut self,
        member: u32,
        now: SimTime,
        f: impl FnOnce(&mut GroupMember, &mut Ctx<'_>),
    ) {
        let Some(&idx) = member
            .checked_sub(1)
            .and_then(|i| self.members.get(i as usize))
        else {
            return;
        };
        let mut out = std::mem::take(&mut self.out);
        {
            let mut ctx = Ctx {
                now,
                history: &mut self.history,
                rng: &mut self.work_rng,
                out: &mut out,
                brokers: self.cfg.brokers,
            };
            if let Client::Member(m) = &mut self.clients[idx].client {
                f(m, &mut ctx);
            }
        }
        self.absorb_client_out(idx, now, &mut out);
        self.out = out;
        self.reschedule_client(idx, now);
    }

    /// The broker currently leading the group's `__consumer_offsets` partition, as the
    /// controller knows it.
    fn group_coordinator_broker(&self) -> Option<NodeId> {
        let image = self.controller.machine.as_ref()?.image();
        let n = image.topic(CONSUMER_OFFSETS_TOPIC)?.config.partitions;
        let tp = TopicPartition::new(
            CONSUMER_OFFSETS_TOPIC,
            coordinator_partition(&self.cfg.group_id, n),
        );
        image.partition(&tp)?.leader
    }

    fn reschedule_client(&mut self, idx: usize, now: SimTime) {
        let cs = &mut self.clients[idx];
        let Some(t) = cs.client.next_wake().filter(|_| !cs.down) else {
            cs.timer_gen += 1;
            cs.timer_at = None;
            return;
        };
        let at = t.max(now + MICROS);
        if cs.timer_at == Some(at) {
            return;
        }
        cs.timer_gen += 1;
        cs.timer_at = Some(at);
        let gen = cs.timer_gen;
        self.q.push(at, Ev::ClientTimer { client: idx, gen });
    }

    /// The admin client: creates the topic (retrying until the controller says it exists).
    fn admin(&mut self, now: SimTime, msg: Option<Message>) {
        if self.topic_created {
            return;
        }
        if let Some(Message::ControllerResponse(ControllerResponse::CreateTopic {
            result, ..
        })) = msg
        {
            match result {
                Ok(_) | Err(ControllerError::TopicAlreadyExists { .. }) => {
                    self.topic_created = true;
                    return;
                }
                Err(_) => {
                    self.admin_sent = None;
                    self.q.push(now + 200 * MILLIS, Ev::Admin);
                    return;
                }
            }
        }
        if msg.is_some() {
            return;
        }
        if self.admin_sent.is_some_and(|t| now < t + 500 * MILLIS) {
            return;
        }
        self.admin_sent = Some(now);
        let config = TopicConfig {
            partitions: self.cfg.partitions,
            replication_factor: self.cfg.replication_factor as u16,
            min_insync_replicas: self.cfg.min_insync_replicas as u16,
            unclean_leader_election: self.cfg.unclean_leader_election,
            ..TopicConfig::default()
        };
        self.send(
            now,
            Address::Client(ADMIN),
            Address::Controller,
            Message::ControllerRequest(ControllerRequest::CreateTopic {
                name: TOPIC.to_string(),
                config,
                assignment: None,
            }),
        );
        self.q.push(now + 500 * MILLIS, Ev::Admin);
    }

    // ---- faults ----

    fn apply_fault(&mut self, now: SimTime, f: Fault) {
        match f {
            Fault::Crash {
                node,
                power_loss,
                unsynced,
                restart_after,
            } => {
                self.crash(now, node, power_loss.then_some(unsynced));
                if let Some(d) = restart_after {
                    self.q.push(now + d, Ev::Fault(Fault::Restart { node }));
                }
            }
            Fault::Restart { node } => self.restart(now, node),
            Fault::MemberCrash {
                member,
                restart_after,
            } => {
                // A dead process is not paused any more; it restarts unpaused.
                if let Some(&idx) = member
                    .checked_sub(1)
                    .and_then(|i| self.members.get(i as usize))
                {
                    self.clients[idx].paused_until = self.clients[idx].paused_until.min(now);
                }
                self.with_member(member, now, |m, ctx| m.crash(ctx));
                if let Some(d) = restart_after {
                    self.q
                        .push(now + d, Ev::Fault(Fault::MemberRestart { member }));
                }
            }
            Fault::MemberRestart { member } => {
                self.with_member(member, now, |m, _| m.restart());
            }
            Fault::MemberPause { member, duration } => {
                let mut strike = None;
                self.with_member(member, now, |m, _| strike = m.arm_pause(duration));
                if let (Some(d), Some(&idx)) = (
                    strike,
                    member
                        .checked_sub(1)
                        .and_then(|i| self.members.get(i as usize)),
                ) {
                    self.pause_client(idx, now, d);
                }
            }
            Fault::CoordinatorCrash {
                power_loss,
                unsynced,
                restart_after,
            } => {
                let target = self.group_coordinator_broker();
                let seq = self.q.len() as u64;
                self.tracer.event(
                    now,
                    seq,
                    "coordinator-crash",
                    "",
                    &[target.unwrap_or(0) as u64],
                    || format!("the group coordinator is {target:?}"),
                );
                if let Some(id) = target {
                    let node = NodeRef::Broker(id);
                    self.crash(now, node, power_loss.then_some(unsynced));
                    if let Some(d) = restart_after {
                        self.q.push(now + d, Ev::Fault(Fault::Restart { node }));
                    }
                }
            }
            f @ (Fault::ClientPause { .. }
            | Fault::ClientCrash { .. }
            | Fault::ClientRestart { .. }
            | Fault::ClientIsolate { .. }
            | Fault::ClientTakeover { .. }) => self.apply_client_fault(now, f),
            Fault::Pause { node, duration } => {
                self.with_slot(node, |s| {
                    s.paused_until = s.paused_until.max(now + duration)
                });
            }
            Fault::ClockJump { node, forward } => {
                self.with_slot(node, |s| s.clock.jump_forward(now, forward));
                self.refresh_timer(now, node);
            }
            Fault::ClockStall { node, duration } => {
                self.with_slot(node, |s| s.clock.stall(now, duration));
                self.refresh_timer(now, node);
            }
            Fault::ClockSkew { node, ppm } => {
                self.with_slot(node, |s| s.clock.set_skew(now, ppm));
                self.refresh_timer(now, node);
            }
            Fault::Partition { shape, duration } => {
                let nodes: Vec<NodeRef> = (1..=self.cfg.brokers)
                    .map(NodeRef::Broker)
                    .chain([NodeRef::CONTROLLER])
                    .collect();
                let links: Vec<(Address, Address)> = shape
                    .blocked_links(&nodes, &mut self.net_rng)
                    .into_iter()
                    .map(|(a, b)| (node_addr(a), node_addr(b)))
                    .collect();
                self.tracer.fields(now, Fields::Blocked(&links));
                let id = self.net.block(links.into_iter().collect());
                // A timed partition ends on its own; others stay in force.
                if let Some(d) = duration {
                    self.q.push(now + d, Ev::Fault(Fault::EndPartition { id }));
                }
            }
            Fault::Heal => self.net.heal(),
            Fault::EndPartition { id } => self.net.unblock(id),
            Fault::Clog { from, to, duration } => {
                self.net
                    .clog(node_addr(from), node_addr(to), now + duration)
            }
            Fault::BitFlip { node } => {
                let disk = self.disk_of(node).clone();
                let files: Vec<(String, u64, u64)> = disk
                    .mem()
                    .files()
                    .into_iter()
                    .filter(|(p, len, _)| p.ends_with(".log") && *len > 0)
                    .collect();
                if !files.is_empty() {
                    let (path, len, _) = &files[self.disk_rng.gen_range(0..files.len())];
                    let pos = self.disk_rng.gen_range(0..*len);
                    let bit = self.disk_rng.gen_range(0..8u8);
                    disk.mem().flip_bit(path, pos, bit);
                }
            }
            Fault::ReadErrors { node, duration } => {
                self.disk_of(node).mem().set_read_error(None, true);
                self.q.push(
                    now + duration,
                    Ev::Fault(Fault::EndDiskFault {
                        node,
                        what: DiskFaultKind::ReadErrors,
                    }),
                );
            }
            Fault::DiskFull { node, duration } => {
                // A few KiB of room are left, so the write that fills the disk is torn.
                let room = self.disk_rng.gen_range(0..=4096);
                let d = self.disk_of(node);
                d.mem().set_capacity(Some(d.mem().used_bytes() + room));
                self.q.push(
                    now + duration,
                    Ev::Fault(Fault::EndDiskFault {
                        node,
                        what: DiskFaultKind::Full,
                    }),
                );
            }
            Fault::SlowDisk {
                node,
                latency,
                duration,
            } => {
                self.disk_of(node).set_slow(latency);
                self.q.push(
                    now + duration,
                    Ev::Fault(Fault::EndDiskFault {
                        node,
                        what: DiskFaultKind::Slow,
                    }),
                );
            }
            Fault::EndDiskFault { node, what } => {
                let d = self.disk_of(node);
                match what {
                    DiskFaultKind::ReadErrors => d.mem().set_read_error(None, false),
                    DiskFaultKind::Full => d.mem().set_capacity(None),
                    DiskFaultKind::Slow => d.set_slow(0),
                }
            }
        }
    }

    fn disk_of(&self, node: NodeRef) -> &SimDisk {
        match node {
            NodeRef::Broker(id) => {
                &self
                    .brokers
                    .get(&id)
                    .expect("fault names a broker that exists")
                    .disk
            }
            NodeRef::Controller(_) => &self.controller.disk,
            NodeRef::LeaderOf(_) => unreachable!("fault targets are resolved before they apply"),
        }
    }

    /// The broker leading partition `p` now: the one acting as leader at the highest epoch.
    fn leader_of(&self, p: u32) -> Option<NodeId> {
        let tp = TopicPartition::new(TOPIC, p);
        self.brokers
            .iter()
            .filter_map(|(id, s)| {
                let v = s.machine.as_ref()?.replica_view(&tp)?;
                (v.role == Role::Leader).then_some((v.leader_epoch, *id))
            })
            .max()
            .map(|(_, id)| id)
    }

    /// Replaces "the leader of partition p" in a fault by that broker; `None` if the
    /// partition has no leader now (the fault is skipped).
    fn resolve_targets(&self, f: Fault) -> Option<Fault> {
        if !f.names_a_leader() {
            return Some(f);
        }
        f.map_nodes(|n| match n {
            NodeRef::LeaderOf(LeaderOf(p)) => self.leader_of(p).map(NodeRef::Broker),
            n => Some(n),
        })
    }

    fn with_slot(&mut self, node: NodeRef, f: impl FnOnce(&mut Slot<()>)) {
        // Apply the same closure to either slot type through their shared fields.
        let mut tmp: Slot<()> = Slot::new(self.disk_of(node).clone());
        let copy_in = |tmp: &mut Slot<()>, clock: &NodeClock, paused: SimTime| {
            tmp.clock = clock.clone();
            tmp.paused_until = paused;
        };
        match node {
            NodeRef::LeaderOf(_) => {} // resolved before faults apply
            NodeRef::Broker(id) => {
                let Some(s) = self.brokers.get_mut(&id) else {
                    return;
                };
                copy_in(&mut tmp, &s.clock, s.paused_until);
                f(&mut tmp);
                s.clock = tmp.clock;
                s.paused_until = tmp.paused_until;
            }
            NodeRef::Controller(_) => {
                let s = &mut self.controller;
                copy_in(&mut tmp, &s.clock, s.paused_until);
                f(&mut tmp);
                s.clock = tmp.clock;
                s.paused_until = tmp.paused_until;
            }
        }
    }

    /// Re-derives a node's timer after its clock changed.
    fn refresh_timer(&mut self, now: SimTime, node: NodeRef) {
        match node {
            NodeRef::LeaderOf(_) => {} // resolved before faults apply
            NodeRef::Broker(id) => {
                let next = self
                    .brokers
                    .get(&id)
                    .and_then(|s| s.machine.as_ref())
                    .and_then(|b| b.next_timeout());
                if next.is_some() {
                    self.set_node_timer(Address::Node(id), now, next);
                }
            }
            NodeRef::Controller(_) => {
                let next = self
                    .controller
                    .machine
                    .as_ref()
                    .and_then(|c| c.next_timeout());
                if next.is_some() {
                    self.set_node_timer(Address::Controller, now, next);
                }
            }
        }
    }

    /// Crashes a node; with `power_loss`, its disk's unsynced data goes as it says.
    fn crash(&mut self, now: SimTime, node: NodeRef, power_loss: Option<crate::faults::Unsynced>) {
        let rng = &mut self.disk_rng;
        let (disk, was_up) = match node {
            NodeRef::LeaderOf(_) => return, // resolved before faults apply
            NodeRef::Broker(id) => {
                let Some(s) = self.brokers.get_mut(&id) else {
                    return;
                };
                let up = s.machine.take().is_some();
                s.incarnation += 1;
                s.timer_gen += 1;
                s.timer_at = None;
                s.paused_until = 0;
                if let Some(g) = self.group.as_mut() {
                    g.on_broker_down(id);
                }
                (s.disk.clone(), up)
            }
            NodeRef::Controller(_) => {
                let s = &mut self.controller;
                let up = s.machine.take().is_some();
                s.incarnation += 1;
                s.timer_gen += 1;
                s.timer_at = None;
                s.paused_until = 0;
                (s.disk.clone(), up)
            }
        };
        if was_up {
            self.tracer.fields(
                now,
                Fields::Process {
                    node: node_addr(node),
                    up: false,
                },
            );
        }
        if let (true, Some(unsynced)) = (was_up, power_loss) {
            // Each file keeps its synced prefix and, of what follows, what `unsynced` says:
            // nothing, a torn part, all of it (page cache flushed in time), or per file one
            // of the three at random.
            let mut lost = 0u64;
            disk.mem().crash(|f| {
                let keep = unsynced.keep(f.synced_len, f.len, &mut *rng);
                lost += f.len - keep;
                keep
            });
            let seq = self.q.len() as u64;
            self.tracer
                .event(now, seq, "disk-lost", &node.to_string(), &[lost], || {
                    format!("{node}: power loss dropped {lost} unsynced bytes")
                });
        }
        let _ = disk.take_latency();
    }

    fn restart(&mut self, now: SimTime, node: NodeRef) {
        match node {
            NodeRef::LeaderOf(_) => {} // resolved before faults apply
            NodeRef::Broker(id) => {
                if self.brokers.get(&id).is_some_and(|s| s.machine.is_none()) {
                    self.start_broker(id, now);
                }
            }
            NodeRef::Controller(_) => {
                if self.controller.machine.is_none() {
                    if let Err(e) = self.start_controller(now) {
                        let seq = self.q.len() as u64;
                        self.tracer
                            .event(now, seq, "start-failed", "controller", &[], || e);
                    }
                }
            }
        }
    }

    /// Everything heals: the network, paused nodes, disk faults; crashed nodes restart.
    fn final_heal(&mut self, now: SimTime) {
        self.net.heal();
        // Message loss, duplication and reordering are faults too: they end here.
        self.net.config.drop = 0.0;
        self.net.config.duplicate = 0.0;
        self.net.config.reorder = 0.0;
        let mut nodes: Vec<NodeRef> = (1..=self.cfg.brokers).map(NodeRef::Broker).collect();
        nodes.push(NodeRef::CONTROLLER);
        for n in nodes {
            self.with_slot(n, |s| s.paused_until = s.paused_until.min(now));
            let d = self.disk_of(n).clone();
            d.mem().set_read_error(None, false);
            d.mem().set_capacity(None);
            d.set_slow(0);
            self.restart(now, n);
        }
        for i in 0..self.clients.len() {
            let cs = &mut self.clients[i];
            cs.paused_until = cs.paused_until.min(now);
            if cs.down {
                self.restart_client(i, now);
            }
        }
        for member in 1..=self.members.len() as u32 {
            self.with_member(member, now, |m, _| {
                m.disarm_pause();
                m.restart();
            });
        }
        self.healed_at = self.healed_at.max(now);
    }

    // ---- invariants ----

    /// Audits every replica of every topic on every live broker (replicas presuming
    /// leadership first: their HWs bound strong-isr), checks the controller's partition
    /// states (leader-in-isr), then the members of the controller's ISRs (strong-isr). A
    /// crashed controller or broker is skipped: nothing of it can be observed.
    fn audit(&mut self, now: SimTime) {
        self.checker.begin_audit();
        let quorum: Vec<(TopicPartition, Vec<NodeId>)> = match self.controller.machine.as_ref() {
            Some(c) => c
                .image()
                .partitions()
                .map(|(tp, st)| {
                    self.checker.leader_in_isr(now, &tp, st.leader, &st.isr);
                    (tp, st.isr.clone())
                })
                .collect(),
            None => Vec::new(),
        };
        let mut views: Vec<(NodeId, ReplicaView)> = Vec::new();
        for (&id, slot) in &self.brokers {
            if let Some(b) = slot.machine.as_ref() {
                views.extend(b.views().into_iter().map(|v| (id, v)));
            }
        }
        views.sort_by_key(|(_, v)| v.role != Role::Leader); // stable: leaders first
        for (id, view) in &views {
            self.with_reader(*id, &view.tp, |checker, read| {
                checker.audit(now, *id, view, read)
            });
        }
        for (tp, isr) in &quorum {
            for id in isr {
                let Some((_, view)) = views.iter().find(|(b, v)| b == id && v.tp == *tp) else {
                    continue;
                };
                self.with_reader(*id, tp, |checker, read| {
                    checker.strong_isr(now, *id, view, read)
                });
            }
        }
    }

    /// Runs `f` with the checker and a reader of `tp`'s log on broker `id` (if it is up).
    fn with_reader(
        &mut self,
        id: NodeId,
        tp: &TopicPartition,
        f: impl FnOnce(&mut invariants::Checker, invariants::LogReader<'_>),
    ) {
        let Some(slot) = self.brokers.get_mut(&id) else {
            return;
        };
        let Some(b) = slot.machine.as_mut() else {
            return;
        };
        let mut read = |from, below| b.read_records(tp, from, below).map_err(|e| e.to_string());
        f(&mut self.checker, &mut read);
        // Reads for audits are not the node's I/O: charge nothing.
        let _ = slot.disk.take_latency();
    }

    /// The fault atlas's view of a striking fault: its target's role, the cluster's moment.
    fn atlas_moment(&self, f: &Fault) -> (crate::atlas::Role, crate::atlas::Moment) {
        use crate::atlas::{Moment, Role};
        let role = match (f, crate::atlas::target(f)) {
            (Fault::CoordinatorCrash { .. }, _) => Role::Coordinator,
            (Fault::MemberCrash { .. } | Fault::MemberPause { .. }, _) => Role::Member,
            (_, Some(NodeRef::Controller(_))) => Role::Controller,
            (_, Some(NodeRef::Broker(b))) => {
                if (0..self.cfg.partitions).any(|p| self.leader_of(p) == Some(b)) {
                    Role::Leader
                } else {
                    Role::Follower
                }
            }
            _ => Role::Network,
        };
        let moment = if !self.leaderless().is_empty() {
            Moment::Electing
        } else {
            let shrunk = self.controller.machine.as_ref().is_some_and(|c| {
                let image = c.image();
                (0..self.cfg.partitions).any(|p| {
                    image
                        .partition(&TopicPartition::new(TOPIC, p))
                        .is_some_and(|s| s.isr.len() < s.replicas.len())
                })
            });
            if shrunk {
                Moment::UnderReplicated
            } else {
                Moment::Steady
            }
        };
        (role, moment)
    }

    /// Partitions without a leader that serves (the controller's leader, which agrees).
    fn leaderless(&self) -> Vec<u32> {
        let Some(c) = self.controller.machine.as_ref() else {
            return (0..self.cfg.partitions).collect();
        };
        let image = c.image();
        (0..self.cfg.partitions)
            .filter(|&p| {
                let tp = TopicPartition::new(TOPIC, p);
                let Some(state) = image.partition(&tp) else {
                    return true;
                };
                let Some(l) = state.leader else { return true };
                let serving = self
                    .brokers
                    .get(&l)
                    .and_then(|s| s.machine.as_ref())
                    .and_then(|b| b.replica_view(&tp))
                    .is_some_and(|v| {
                        v.role == Role::Leader && v.leader_epoch == state.leader_epoch
                    });
                !serving
            })
            .collect()
    }

    /// (partition, follower, leader): followers that are up, online and following the
    /// serving leader of a partition, but not in that leader's ISR.
    fn stuck_followers(&self) -> Vec<(u32, NodeId, NodeId)> {
        let mut out = Vec::new();
        for p in 0..self.cfg.partitions {
            let Some(l) = self.leader_of(p) else { continue };
            let tp = TopicPartition::new(TOPIC, p);
            let Some(lv) = self.brokers[&l]
                .machine
                .as_ref()
                .and_then(|b| b.replica_view(&tp))
            else {
                continue;
            };
            for (&id, slot) in &self.brokers {
                let Some(v) = slot.machine.as_ref().and_then(|b| b.replica_view(&tp)) else {
                    continue;
                };
                if v.role == (Role::Follower { leader: l })
                    && v.leader_epoch == lv.leader_epoch
                    && !lv.isr.contains(&id)
                {
                    out.push((p, id, l));
                }
            }
        }
        out
    }

    fn finish(mut self, history_out: Option<Box<dyn Write>>) -> Result<SimReport, SimError> {
        self.finish_ref(history_out)
    }

    fn finish_ref(&mut self, history_out: Option<Box<dyn Write>>) -> Result<SimReport, SimError> {
        let now = self.q.now();
        self.audit(now);
        let mut skipped: BTreeMap<&'static str, String> = BTreeMap::new();
        let liveness_window = now.saturating_sub(self.healed_at);
        let judge_liveness = !self.faults_after_heal
            && liveness_window >= self.cfg.liveness.min(self.cfg.duration / 4);
        if judge_liveness {
            let leaderless = self.leaderless();
            self.checker
                .finish_liveness(now, &leaderless, liveness_window);
            let stuck = self.stuck_followers();
            self.checker
                .finish_replication(now, &stuck, liveness_window);
        } else {
            for inv in [invariants::LIVENESS, invariants::UNDER_REPLICATED] {
                skipped.insert(inv, "faults continue until the end of the run".into());
            }
        }
        let mut sends = 0;
        let mut polled = 0;
        let mut processed = 0;
        let mut member_crashes = 0;
        let mut out = std::mem::take(&mut self.out);
        for cs in self.clients.iter_mut() {
            let mut ctx = Ctx {
                now,
                history: &mut self.history,
                rng: &mut self.work_rng,
                out: &mut out,
                brokers: self.cfg.brokers,
            };
            match &mut cs.client {
                Client::Producer(p) => {
                    sends += p.sends;
                    p.finish(&mut ctx);
                }
                Client::Consumer(c) => {
                    polled += c.records;
                    c.finish(&mut ctx);
                }
                Client::Member(m) => {
                    processed += m.records;
                    member_crashes += m.crashes;
                    m.finish(&mut ctx);
                }
            }
        }
        match self.group.as_mut() {
            Some(g) => {
                // Liveness of ownership is judged like the cluster's: only when the run
                // ends with a long enough quiet window.
                let bound = SETTLE_BOUND;
                let settled = (judge_liveness && liveness_window > bound).then_some(self.healed_at);
                if settled.is_none() {
                    skipped.insert(
                        group_invariants::GROUP_UNOWNED,
                        "no quiet window longer than the rebalance bound at the end".into(),
                    );
                }
                g.finish(&mut self.checker, now, settled, bound);
            }
            None => {
                for name in group_invariants::NAMES {
                    skipped.insert(name, "no group members".into());
                }
            }
        }
        let mut history_summary = None;
        if self.cfg.check_history {
            let final_reads = judge_liveness && self.checker.count(invariants::LIVENESS) == 0;
            let report = skein_jepsen::check(
                self.history.events(),
                &skein_jepsen::CheckOptions::default().final_reads(final_reads),
            );
            if !report.valid {
                let found: Vec<String> = report
                    .found()
                    .iter()
                    .map(|k| format!("{k} x{}", report.count(*k)))
                    .collect();
                self.checker
                    .history_failed(now, format!("skein-jepsen found {}", found.join(", ")));
                history_summary = Some(report.to_string());
            }
        } else {
            skipped.insert(invariants::HISTORY, "--no-history-check".into());
        }
        if let Some(h) = history_out {
            self.history.write_to(h)?;
        }
        self.history_to_tracer();
        self.tracer.finish()?;
        let violations = self.checker.violations();
        for v in &violations {
            self.tracer.fields(v.at, Fields::Violation(v));
        }
        let verdicts = SimReport::verdicts_from(self.checker.counts(), &violations, &skipped);
        let acked = self.checker.acked_count();
        let read = self.checker.read_acked_count();
        let lost = self.checker.count(invariants::ACKED_WRITE_LOST);
        let (mut failed, mut indeterminate) = (0, 0);
        for e in self.history.events() {
            if e.f == skein_jepsen::Function::Send {
                match e.kind {
                    skein_jepsen::EventType::Fail => failed += 1,
                    skein_jepsen::EventType::Info => indeterminate += 1,
                    _ => {}
                }
            }
        }
        Ok(SimReport {
            seed: self.cfg.seed,
            scenario: self.cfg.scenario_name.clone(),
            sim_time: now,
            events: self.tracer.events(),
            trace_hash: self.tracer.hash(),
            sends,
            acked,
            read,
            lost,
            failed,
            indeterminate,
            records_polled: polled,
            group: self.group.as_ref().map(|g| crate::report::GroupStats {
                members: self.cfg.group_members,
                processed,
                commits: g.commits_acked,
                coordinator_loads: g.loads,
                member_crashes,
            }),
            faults: self.fault_counts.clone(),
            atlas: self.atlas.entries(),
            net: self.net.stats.clone(),
            work: self.work_stats(),
            leader_changes: self.checker.leader_changes,
            unclean_elections: self.checker.unclean_elections,
            verdicts,
            violations,
            history_summary,
            probes: Vec::new(),
        })
    }

    /// Disk work summed over the controller and every broker (their disks outlive restarts).
    fn work_stats(&self) -> crate::report::WorkStats {
        let mut w = crate::report::WorkStats::default();
        let disks = self.brokers.values().map(|s| &s.disk);
        for d in disks.chain(std::iter::once(&self.controller.disk)) {
            let ((appends, syncs), (reads, bytes)) = (d.op_counts(), d.read_counts());
            w.disk_appends += appends;
            w.disk_syncs += syncs;
            w.disk_reads += reads;
            w.disk_read_bytes += bytes;
        }
        w
    }
}
