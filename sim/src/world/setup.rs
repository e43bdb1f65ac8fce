//! Building the world: the nodes' configurations (timeouts scaled down, `--bug`s), their
//! slots (disks and clocks drawn from the seed), the workload's clients, the realised
//! fault schedule, and starting every node at time 0. Also starting a node again after a
//! crash (`start_broker`, `start_controller`). A run has one controller (core's
//! `Controller`) or a Raft quorum of 3 or 5 (`QuorumController`s, ids 1..=N).

use super::controllers::CtlMachine;
use super::workload::{producer, txn_client};
use super::{
    BrokerSlots, Client, ClientSlot, Ev, SimError, Slot, World, AUDIT_INTERVAL, BUG_NAMES,
};
use crate::client::Consumer;
use crate::client_step::ClientOut;
use crate::clock::NodeClock;
use crate::config::{SimConfig, Workload};
use crate::disk::SimDisk;
use crate::faults::{
    random_client_schedule, random_member_schedule, random_message_schedule, random_schedule,
    Scheduled,
};
use crate::fields::Fields;
use crate::group_client::GroupMember;
use crate::group_invariants::GroupChecker;
use crate::history::History;
use crate::invariants::Checker;
use crate::net::Network;
use crate::queue::{EventQueue, Slab};
use crate::rng::{between, stream, substream, Subsystem};
use crate::time::{SimTime, MILLIS, SECS};
use crate::trace::Tracer;
use skein_core::broker::{Broker, BrokerConfig};
use skein_core::bugs::Bugs;
use skein_core::controller::{Controller, ControllerConfig, QuorumConfig, QuorumController};
use skein_core::group::GroupConfig;
use skein_core::message::Address;
use skein_core::raft::RaftConfig;
use skein_core::NodeId;
use std::collections::BTreeMap;
use std::io::Write;

pub(super) fn bugs_from(names: &[String]) -> Result<Bugs, SimError> {
    Bugs::from_names(names).map_err(|e| SimError::UnknownBug {
        name: e.name,
        known: BUG_NAMES.join(", "),
    })
}

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
            cfg.controllers,
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
        // Message faults from a fifth stream (the leader nemesis has the fourth), and only
        // for transactional producers: their kinds are the transaction protocol's.
        let mut msg_rng = substream(cfg.seed, Subsystem::Faults, 4);
        let txn_producers = match cfg.workload {
            Workload::Txn => cfg.producers,
            Workload::Plain => 0,
        };
        schedule.extend(random_message_schedule(
            &cfg.rates,
            txn_producers,
            cfg.faults_start(),
            cfg.faults_end(),
            &mut msg_rng,
        ));
    }
    schedule.extend(cfg.schedule.iter().cloned());
    schedule.sort_by_key(|s| s.at);
    schedule
}

/// The brokers' session lease with a controller quorum: two thirds of the controllers'
/// session timeout, so a broker whose clock runs up to a fifth slow still stops
/// acknowledging before the active controller fences it.
pub(super) const BROKER_SESSION_LEASE: SimTime = 800 * MILLIS;

/// A quorum controller's Raft election timeout (its heartbeats go ten times as often).
pub(super) const RAFT_ELECTION_TIMEOUT: SimTime = 500 * MILLIS;

/// The brokers' and the controller's configurations: timeouts scaled down from Kafka's
/// defaults so that short runs see failovers, and the `--bug`s switched back on. With a
/// controller quorum, brokers know its voters and hold a session lease; a single controller
/// keeps the brokers as they were (no lease), so the pinned single-controller runs stay.
fn node_configs(
    bugs: Bugs,
    controllers: u32,
    retention: Option<u64>,
) -> (BrokerConfig, ControllerConfig) {
    let mut log = skein_core::log::LogConfig::default();
    if let Some(bytes) = retention {
        // Retention deletes whole segments: four of them hold the limit.
        log.segment_bytes = (bytes / 4).max(4 << 10);
        log.retention_bytes = Some(bytes);
    }
    let broker_config = BrokerConfig {
        log,
        controllers: (1..=controllers).collect(),
        session_timeout: (controllers > 1).then_some(BROKER_SESSION_LEASE),
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
        // Transactions (the txn workload only; other runs never create the topic): a small
        // `__transaction_state`, markers resent at the clients' request timeout.
        transaction_state_topic_partitions: 2,
        txn: skein_core::txn::TxnConfig {
            marker_request_timeout: SECS,
            offsets_topic_partitions: 2,
            ..skein_core::txn::TxnConfig::default()
        },
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
        // Scaled down like the other timeouts (KIP-966: 5 min).
        unclean_recovery_timeout: 3_000 * MILLIS,
        bugs,
        ..ControllerConfig::default()
    };
    (broker_config, controller_config)
}

/// The brokers' and the controller's slots, not started yet: each with its disk (its own
/// disk stream) and a clock starting at an arbitrary local time.
fn node_slots(cfg: &SimConfig) -> (BrokerSlots, BTreeMap<NodeId, Slot<CtlMachine>>) {
    let seed = cfg.seed;
    let mut clock_rng = stream(seed, Subsystem::Clock);
    let mut brokers = BrokerSlots::default();
    for id in 1..=cfg.brokers {
        let mut slot = Slot::new(SimDisk::new(
            cfg.disk.clone(),
            substream(seed, Subsystem::Disk, id as u64),
        ));
        // Clocks start at different, arbitrary local times.
        slot.clock = NodeClock::new(between(&mut clock_rng, 0, 1_000 * SECS));
        brokers.insert(id, slot);
    }
    // Controller 1's disk stream is 0 (the single controller's, as before); the others'
    // are past every broker's.
    let mut controllers = BTreeMap::new();
    for id in 1..=cfg.controllers {
        let entity = if id == 1 { 0 } else { 1 << 20 | id as u64 };
        let mut slot = Slot::new(SimDisk::new(
            cfg.disk.clone(),
            substream(seed, Subsystem::Disk, entity),
        ));
        slot.clock = NodeClock::new(between(&mut clock_rng, 0, 1_000 * SECS));
        controllers.insert(id, slot);
    }
    (brokers, controllers)
}

/// A partition consumer at client `id` (the bug zoo's `consumer-ignores-truncation` is
/// read here: it lives in core's client, not in a broker).
pub(super) fn consumer(cfg: &SimConfig, id: u64) -> Consumer {
    let ignore = bugs_from(&cfg.bugs).is_ok_and(|b| b.consumer_ignores_truncation);
    let c = Consumer::new(id, cfg.partitions, ignore);
    match cfg.workload {
        Workload::Plain => c,
        Workload::Txn => c.read_committed(),
    }
}

/// The workload's clients in slot order (producers, consumers, group members; client id
/// = slot index + 1), and the slot index of each group member.
fn workload_clients(cfg: &SimConfig) -> (Vec<ClientSlot>, Vec<usize>) {
    let mut clients = Vec::new();
    let mut id = 1u64;
    for i in 0..cfg.producers {
        let client = match cfg.workload {
            Workload::Plain => Client::Producer(Box::new(producer(cfg, id, i + 1, 500 * MILLIS))),
            // Transactional id per producer slot: restarts and takeovers keep it.
            Workload::Txn => Client::Txn(Box::new(txn_client(
                cfg,
                id,
                i + 1,
                format!("txn-{}", i + 1),
                500 * MILLIS,
            ))),
        };
        clients.push(ClientSlot::new(client));
        id += 1;
    }
    for _ in 0..cfg.consumers {
        clients.push(ClientSlot::new(Client::Consumer(Box::new(consumer(
            cfg, id,
        )))));
        id += 1;
    }
    let mut members = Vec::new();
    let ignore = bugs_from(&cfg.bugs).is_ok_and(|b| b.consumer_ignores_truncation);
    for i in 0..cfg.group_members {
        members.push(clients.len());
        clients.push(ClientSlot::new(Client::Member(Box::new(
            GroupMember::new(
                id,
                i + 1,
                cfg.group_id.clone(),
                cfg.partitions,
                cfg.group_commit,
                cfg.group_assignor,
                cfg.group_static,
                substream(cfg.seed, Subsystem::Workload, 1000 + i as u64),
            )
            .ignoring_truncation(ignore),
        ))));
        id += 1;
    }
    // Read-process-write pipelines after every other client, so the slots (and client ids)
    // of producers, consumers and members are those of a run without them.
    if cfg.workload == Workload::Txn {
        for i in 0..cfg.pipelines {
            clients.push(ClientSlot::new(Client::Pipeline(Box::new(
                super::workload::pipeline(cfg, id, i + 1, 500 * MILLIS),
            ))));
            id += 1;
        }
    }
    (clients, members)
}

impl World {
    pub(super) fn new(
        cfg: &SimConfig,
        trace: Option<Box<dyn Write>>,
        recorder: Option<crate::viewer::Recorder>,
    ) -> Result<Self, SimError> {
        let seed = cfg.seed;
        let mut bugs = bugs_from(&cfg.bugs)?;
        if cfg.txn_bugs.any() {
            bugs.txn = cfg.txn_bugs;
        }
        let (broker_config, controller_config) =
            node_configs(bugs, cfg.controllers, cfg.retention_bytes());
        let (brokers, controllers) = node_slots(cfg);
        let (clients, members) = workload_clients(cfg);
        let recording = recorder.is_some();
        let mut w = Self {
            cfg: cfg.clone(),
            broker_config,
            controller_config,
            q: EventQueue::new(),
            in_flight: Slab::default(),
            node_out: Vec::new(),
            net: Network::new(cfg.network.clone()),
            net_rng: stream(seed, Subsystem::Network),
            disk_rng: stream(seed, Subsystem::Disk),
            work_rng: stream(seed, Subsystem::Workload),
            tracer: Tracer::new(trace).with_recorder(recorder),
            brokers,
            controllers,
            clock_faulted: Default::default(),
            leader_nemesis: super::leader_nemesis::LeaderNemesis::new(cfg),
            admin_router: skein_core::client::ControllerRouter::new(cfg.controllers),
            admin_asked: None,
            raft_commit_seen: 0,
            clients,
            checker: {
                let mut c = Checker::new();
                if cfg.workload == crate::config::Workload::Txn {
                    c.enable_txn();
                }
                c
            },
            history: History::for_run(cfg, recording),
            topic_created: false,
            admin_topic: 0,
            admin_sent: None,
            fault_counts: BTreeMap::new(),
            atlas: crate::atlas::Atlas::default(),
            healed_at: 0,
            faults_after_heal: false,
            copies_destroyed: Vec::new(),
            out: ClientOut::default(),
            produce_sizes: Default::default(),
            group: (cfg.group_members > 0).then(|| GroupChecker::new(cfg.partitions)),
            members,
            coordinator_partition: None,
            next_producer_index: cfg.producers + 1,
            moved_clients: BTreeMap::new(),
            restarted_from: BTreeMap::new(),
            armed_messages: Vec::new(),
        };
        w.boot()?;
        Ok(w)
    }

    /// Starts every node at time 0 and queues the fault schedule, the final heal, the
    /// admin client, the first audit, the end of the run and every client's first wake.
    fn boot(&mut self) -> Result<(), SimError> {
        for id in 1..=self.cfg.controllers {
            self.start_controller(id, 0)
                .map_err(SimError::ControllerStart)?;
        }
        for id in 1..=self.cfg.brokers {
            self.start_broker(id, 0);
        }
        let schedule = realised_schedule(&self.cfg);
        let mut heal_at = self.cfg.final_heal_at();
        for s in &schedule {
            if s.at >= heal_at {
                self.faults_after_heal = true;
                heal_at = heal_at.max(s.at);
            }
            self.q.push(s.at, Ev::Fault(s.fault.clone()));
        }
        self.q.push(heal_at, Ev::FinalHeal);
        self.healed_at = heal_at;
        self.q.push(100 * MILLIS, Ev::Admin);
        self.q.push(AUDIT_INTERVAL, Ev::Audit);
        self.q.push(self.cfg.duration, Ev::End);
        for i in 0..self.clients.len() {
            self.reschedule_client(i, 0);
        }
        Ok(())
    }

    pub(super) fn start_controller(&mut self, id: NodeId, now: SimTime) -> Result<(), String> {
        let voters: Vec<NodeId> = (1..=self.cfg.controllers).collect();
        let config = self.controller_config.clone();
        let seed = self.cfg.seed;
        let slot = self.controllers.get_mut(&id).expect("controller slot");
        let local = slot.clock.local(now);
        let disk = slot.disk.clone();
        let opened = if voters.len() == 1 {
            Controller::open(disk, config, local)
                .map(|c| CtlMachine::Single(Box::new(c)))
                .map_err(|e| e.to_string())
        } else {
            let raft = RaftConfig {
                election_timeout: RAFT_ELECTION_TIMEOUT,
                heartbeat_interval: RAFT_ELECTION_TIMEOUT / 10,
                // Election jitter differs per node and per seed.
                seed: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ id as u64,
                max_entries_per_append: self.cfg.raft_max_entries_per_append,
                bugs: config.bugs.raft,
                ..RaftConfig::new(id, voters)
            }
            .retrying_votes();
            let config = QuorumConfig {
                controller: config,
                raft,
                snapshot_every: 64,
            };
            QuorumController::open(disk, config, local)
                .map(|c| CtlMachine::Quorum(Box::new(c)))
                .map_err(|e| e.to_string())
        };
        match opened {
            Ok(c) => {
                slot.machine = Some(c);
                self.tracer.fields(
                    now,
                    Fields::Process {
                        node: Address::Controller(id),
                        up: true,
                    },
                );
                self.after_controller_step(id, now);
                Ok(())
            }
            Err(e) => {
                slot.start_failures += 1;
                Err(e)
            }
        }
    }

    pub(super) fn start_broker(&mut self, id: NodeId, now: SimTime) {
        let slot = self.brokers.get_mut(id).expect("broker slot");
        let local = slot.clock.local(now);
        match Broker::open(id, self.broker_config.clone(), slot.disk.clone(), local) {
            Ok((b, _reports)) => {
                slot.machine = Some(b);
                self.checker.on_broker_restart(id);
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
}
