//! The world: the event loop that runs a whole cluster of real `skein-core` state machines
//! (brokers, the controller) and simulated clients, through the network, disk, clock and
//! process fault models, checking invariants as it goes.
//!
//! Each node is a slot holding its state machine (absent while crashed), its disk (which
//! survives crashes), its clock, an incarnation number (bumped by each crash, so messages
//! in flight to a dead process are dropped), its timer, and the times until which it is
//! busy with disk I/O or paused. Events for a busy or paused node wait until it is free.
//!
//! This file holds the `World`'s state and the main loop that pops events and hands
//! each to its handler; the handlers live in the submodules, by what they hold:
//! `setup` (building the cluster and the schedule), `delivery` (messages, node timers and
//! routing nodes' outputs), `workload` (the clients), `node_faults` and `client_faults`
//! (applying faults), `observe` (feeding the invariants, the atlas and the viewer) and
//! `report` (the end-of-run verdicts and report).

use crate::client::{Consumer, Producer};
use crate::client_step::ClientOut;
use crate::clock::NodeClock;
use crate::config::SimConfig;
use crate::disk::SimDisk;
use crate::faults::Fault;
use crate::fields::Fields;
use crate::group_client::GroupMember;
use crate::group_invariants::GroupChecker;
use crate::history::History;
use crate::invariants::Checker;
use crate::net::Network;
use crate::queue::{EventQueue, Slab};
use crate::report::SimReport;
use crate::time::{SimTime, MILLIS};
use crate::trace::Tracer;
use crate::txn_client::TxnClient;
use rand_chacha::ChaCha8Rng;
use skein_core::broker::{Broker, BrokerConfig};
use skein_core::controller::ControllerConfig;
use skein_core::message::{Address, Message};
use skein_core::NodeId;
use std::collections::BTreeMap;
use std::io::Write;

/// The tracer's slots of precomputed kind-and-node hashes for the events traced most
/// (`Tracer::event_named`): one per call site, and one per message kind for deliveries.
mod name_slots {
    use crate::trace::NameSlot;
    pub const TICK: NameSlot = NameSlot(0);
    pub const CLIENT_TIMER: NameSlot = NameSlot(1);
    pub const BROKER_EVENT: NameSlot = NameSlot(2);
    /// A delivery's slot: this plus the message's code (1..=17, `msg_code`).
    pub const DELIVER_BASE: usize = 8;
}

mod client_faults;
mod controllers;
mod copies;
mod delivery;
mod exactly_once;
mod leader_nemesis;
mod message_faults;
mod node_faults;
mod observe;
mod report;
mod setup;
mod workload;

pub use setup::realised_schedule;

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

/// The historical bugs `--bug` can switch back on (core owns the names).
pub use skein_core::bugs::BUG_NAMES;

enum Ev {
    Deliver {
        from: Address,
        to: Address,
        incarnation: u64,
        /// The message's handle in `World::in_flight`: a `Message` is ~100 bytes, and every
        /// event (timers too) would be copied at that size into and out of the queue's slots.
        msg: u32,
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

    /// The process dies: its machine goes (`true` if it was up), messages and timers
    /// addressed to this incarnation become stale, a pause ends. Its disk stays.
    fn stop(&mut self) -> bool {
        let up = self.machine.take().is_some();
        self.incarnation += 1;
        self.timer_gen += 1;
        self.timer_at = None;
        self.paused_until = 0;
        up
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
    Producer(Box<Producer>),
    Consumer(Box<Consumer>),
    Member(Box<GroupMember>),
    /// A transactional producer (the txn workload's, in the producers' slots).
    Txn(Box<TxnClient>),
    /// A read-process-write pipeline (the txn workload's, after the group members).
    Pipeline(Box<crate::txn_pipeline::Pipeline>),
}

impl Client {
    fn next_wake(&self) -> Option<SimTime> {
        match self {
            Client::Producer(p) => p.next_wake(),
            Client::Consumer(c) => c.next_wake(),
            Client::Member(m) => m.next_wake(),
            Client::Txn(t) => t.next_wake(),
            Client::Pipeline(x) => x.next_wake(),
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
    if let Some(out) = history {
        world.history.write_to(out);
    }
    world.run_loop();
    let mut report = world.finish()?;
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
    if let Some(out) = history {
        world.history.write_to(out);
    }
    world.run_loop();
    let mut report = world.finish_ref()?;
    report.set_probes(probes.finish());
    let rec = world
        .tracer
        .take_recorder()
        .expect("the recorder was attached");
    Ok((report, rec))
}

/// The brokers' slots, by id (ids are small: `1..=brokers`). Looked up several times per
/// event; a `BTreeMap` search cost more than the rest of some of those steps.
type BrokerSlots = crate::slots::PartitionSlots<Slot<Broker<SimDisk>>>;

struct World {
    cfg: SimConfig,
    broker_config: BrokerConfig,
    controller_config: ControllerConfig,
    q: EventQueue<Ev>,
    /// The messages of the queue's `Ev::Deliver` events.
    in_flight: Slab<Message>,
    net: Network<Address>,
    net_rng: ChaCha8Rng,
    disk_rng: ChaCha8Rng,
    work_rng: ChaCha8Rng,
    tracer: Tracer,
    brokers: BrokerSlots,
    /// The controller nodes by controller id (1..=N).
    controllers: BTreeMap<NodeId, Slot<controllers::CtlMachine>>,
    /// Brokers whose clock a fault has struck: their session lease is only as good as
    /// their clock, so `fenced-broker-ack` does not judge them.
    clock_faulted: std::collections::BTreeSet<NodeId>,
    /// Which controller the admin client asks, and the one it asked last until it answers.
    /// Isolates new Raft leaders (`[faults] new_leader_isolate`); `None`: off.
    leader_nemesis: Option<leader_nemesis::LeaderNemesis>,
    admin_router: skein_core::client::ControllerRouter,
    admin_asked: Option<NodeId>,
    /// The highest Raft commit index any quorum node was seen at (a committed entry may be
    /// applied nowhere alive yet: its leader knew it committed, then crashed).
    raft_commit_seen: u64,
    clients: Vec<ClientSlot>,
    checker: Checker,
    history: History,
    /// Every topic of the workload exists ([`World::admin_topics`]).
    topic_created: bool,
    /// The admin client creates the workload's topics one after the other: this one now.
    admin_topic: usize,
    admin_sent: Option<SimTime>,
    fault_counts: BTreeMap<&'static str, u64>,
    /// Which fault kinds struck which roles at which moments (observation only).
    atlas: crate::atlas::Atlas,
    /// When the last fault healed (the start of the liveness window).
    healed_at: SimTime,
    /// Whether scenario faults continue past the final heal (liveness then not judged).
    faults_after_heal: bool,
    /// The end of run's "all copies destroyed" findings (`copies.rs`), for the report.
    copies_destroyed: Vec<String>,
    out: ClientOut,
    /// A broker's outputs of one step, kept between steps so taking them allocates nothing.
    node_out: Vec<skein_core::node::NodeOutput>,
    /// Records per produce request, by (client, correlation), for the acknowledgement checks.
    /// (Looked up per acknowledgement, never iterated: hashed.)
    produce_sizes: crate::fasthash::FastMap<(u64, u64), u32>,
    /// The group invariants, when the workload has group members.
    group: Option<GroupChecker>,
    /// The group's `__consumer_offsets` partition, for the partition count it was computed
    /// for (observe_coordinator runs after every broker step).
    coordinator_partition: Option<(u32, u32)>,
    /// Client index of each group member (member n at `members[n - 1]`).
    members: Vec<usize>,
    /// The value prefix ("pN-") of the next producer instance a restart or a takeover
    /// creates, so values stay unique.
    next_producer_index: u32,
    /// Where a restarted client lives now: its original slot -> its current slot.
    moved_clients: BTreeMap<usize, usize>,
    /// Each restarted client's slot -> the slot it first had (for reports).
    restarted_from: BTreeMap<usize, usize>,
    /// Message faults armed by a scenario and not yet spent, in arming order (empty in
    /// every other run: `send` only looks when there is one).
    armed_messages: Vec<message_faults::Armed>,
}

impl World {
    fn run_loop(&mut self) {
        loop {
            // A message for a busy or paused process waits until it is free (FIFO kept: it
            // is queued again in arrival order). About a quarter of the events popped on
            // the bench; moved in place, as popping and pushing it again would.
            if let Some((at, Ev::Deliver { to, .. })) = self.q.peek() {
                let free_at = self.free_at(*to);
                if free_at > at {
                    self.q.requeue_first(free_at);
                    continue;
                }
            }
            let Some((now, seq, ev)) = self.q.pop() else {
                break;
            };
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
                Ev::ClientTimer { client, gen } => self.client_timer(now, seq, client, gen),
                Ev::Fault(f) => self.strike(now, seq, f),
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
}
