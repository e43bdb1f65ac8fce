//! The configuration of one simulated run: cluster shape, workload, faults, bounds.
//!
//! Built from command-line flags, optionally overlaid by a [`Scenario`]. A run is a pure
//! function of its `SimConfig`: the seed is part of it.

use crate::expect::Expect;
use crate::faults::{FaultRates, Scheduled};
use crate::modes::Acks;
use crate::modes::CommitMode;
pub use crate::modes::Workload;
use crate::net::NetConfig;
use crate::time::{SimTime, MILLIS, SECS};
use skein_core::controller::UncleanRecoveryStrategy;
use skein_core::group::AssignorKind;
use skein_core::raft::RaftConfig;

/// Simulated disk speed. Latencies are charged to the node doing the I/O: its outputs leave
/// only after its writes and fsyncs complete, and it handles nothing else meanwhile.
#[derive(Clone, Debug, PartialEq)]
pub struct DiskConfig {
    /// Fixed cost of one append.
    pub write_latency: SimTime,
    /// Extra cost per KiB appended.
    pub write_latency_per_kib: SimTime,
    /// Range of one fsync's latency (drawn from the disk stream).
    pub fsync_min: SimTime,
    pub fsync_max: SimTime,
}

impl Default for DiskConfig {
    fn default() -> Self {
        Self {
            write_latency: 2_000,
            write_latency_per_kib: 1_000,
            fsync_min: 50_000,
            fsync_max: 500_000,
        }
    }
}

/// Runs longer than this keep their data logs bounded by default (`--retention auto`):
/// five minutes, well past the default 60 s run (whose logs, and so trace hash, it leaves
/// as they were), and short enough that an hour-long soak does not hold its whole log.
pub const LONG_RUN: SimTime = 300 * SECS;

/// The per-partition byte limit `--retention auto` sets on long runs: at the default
/// workload (~1.6 KB a second per partition) about ten minutes of records, far more than
/// any consumer or follower of the default shape falls behind (a crash or pause lasts
/// seconds), so retention deletes only what everyone has read.
pub const LONG_RUN_RETENTION_BYTES: u64 = 1 << 20;

/// Size-based retention of the brokers' data logs (`--retention`). Retention deletes
/// whole segments, so a limit also sets the segment size (a quarter of it).
/// `__consumer_offsets` is never trimmed by size (core keeps internal topics whole, as
/// Kafka compacts rather than deletes them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Retention {
    /// [`LONG_RUN_RETENTION_BYTES`] when the run is longer than [`LONG_RUN`], else none.
    #[default]
    Auto,
    /// Keep every record.
    Off,
    /// Keep at least this many bytes per partition; delete older whole segments.
    Bytes(u64),
}

impl Retention {
    /// Parses `auto`, `off` or a byte count (`1048576`, `512KiB`, `4MiB`).
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = s.trim();
        match t {
            "auto" => return Ok(Self::Auto),
            "off" => return Ok(Self::Off),
            _ => {}
        }
        let (num, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
            Some(i) => t.split_at(i),
            None => (t, ""),
        };
        let scale: u64 = match unit {
            "" | "B" => 1,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            _ => {
                return Err(format!(
                "--retention {s:?}: expected auto, off or a size such as 1048576, 512KiB or 4MiB"
            ))
            }
        };
        let n: u64 = num
            .parse()
            .map_err(|_| format!("--retention {s:?}: {num:?} is not a whole number"))?;
        match n.checked_mul(scale) {
            Some(b) if b >= MIN_RETENTION_BYTES => Ok(Self::Bytes(b)),
            _ => Err(format!(
                "--retention {s:?}: at least {MIN_RETENTION_BYTES} bytes (four segments of 4 KiB), at most 2^64 - 1"
            )),
        }
    }

    /// As the flag would be typed.
    pub fn name(self) -> String {
        match self {
            Self::Auto => "auto".into(),
            Self::Off => "off".into(),
            Self::Bytes(b) => b.to_string(),
        }
    }
}

/// The smallest `--retention` limit: four of the smallest segments.
pub const MIN_RETENTION_BYTES: u64 = 16 << 10;

/// Everything that determines a run.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    pub seed: u64,
    /// Total simulated time.
    pub duration: SimTime,
    /// The liveness bound: after the last fault heals, every partition must have a leader
    /// and every acknowledged record must be readable within this long. Random faults stop
    /// this long (plus a margin) before the end of the run.
    pub liveness: SimTime,
    pub brokers: u32,
    /// Controller nodes: 1 (a single controller, the default) or a Raft quorum of 3 or 5
    /// (controller ids 1..=N).
    pub controllers: u32,
    /// Most entries in one Raft `Append` between quorum controllers
    /// (`RaftConfig::max_entries_per_append`, 64 by default). 1 makes a leader that probes
    /// a lagging follower send an older term's entries one at a time before its own no-op:
    /// the shape in which the `commit-previous-term` bug (Raft's figure 8) can commit one.
    pub raft_max_entries_per_append: usize,
    pub partitions: u32,
    pub replication_factor: u32,
    pub min_insync_replicas: u32,
    pub unclean_leader_election: bool,
    /// The topic's KIP-966 `unclean.recovery.strategy` (Balanced by default, as in
    /// Kafka): what the controller does for a partition none of whose ISR and ELR members
    /// can lead.
    pub unclean_recovery_strategy: UncleanRecoveryStrategy,
    pub producers: u32,
    pub consumers: u32,
    /// Members of one consumer group (`group_id`) reading the topic, commit-after-process.
    pub group_members: u32,
    pub group_id: String,
    /// How members commit after processing a batch.
    pub group_commit: CommitMode,
    pub group_assignor: AssignorKind,
    /// Members use static membership (a stable instance id each).
    pub group_static: bool,
    /// Produce requests per simulated second, over all producers.
    pub produce_rate: f64,
    pub acks: Acks,
    pub idempotent: bool,
    /// Producers store some batches compressed, each with a codec chosen from the seed
    /// (`--compression`, scenario `[workload] compression`). Off by default: the default
    /// run's trace is that of uncompressed batches.
    pub compression: bool,
    /// What the producers and consumers do ([`Workload`]); `Plain` by default, whose
    /// runs are exactly those before transactions existed.
    pub workload: Workload,
    /// Transaction-protocol bugs switched on programmatically (the zoo names come once the
    /// txn workload finds each within a tested bound); all off by default.
    pub txn_bugs: skein_core::txn::TxnBugs,
    /// Read-process-write pipelines of the txn workload (group `group_id`, input the
    /// workload's topic, outputs `txn_pipeline::OUTPUT_TOPICS`); ignored by other workloads.
    pub pipelines: u32,
    /// The txn workload's producers are old clients (EndTxn before v5,
    /// `TxnProducerConfig::keep_epoch`): their transactions end without KIP-890 part 2's
    /// epoch bump, as Kafka clients through the Kafka listener do. Off by default.
    pub txn_keep_epoch: bool,
    /// The txn workload's applications abort a transaction they chose to abort as soon as
    /// its writes have left, not once they are acknowledged (as an application does on a
    /// processing error): a write still in flight, or held by the network, may then land
    /// after the abort (the hanging transaction KIP-890 part 1 closes). Off by default.
    pub txn_abort_in_flight: bool,
    pub network: NetConfig,
    pub disk: DiskConfig,
    /// Random fault rates (used unless `random_faults` is false).
    pub rates: FaultRates,
    pub random_faults: bool,
    /// Exact faults (from a scenario), applied in addition to random ones.
    pub schedule: Vec<Scheduled>,
    /// Run skein-jepsen's checker on the client history at the end.
    pub check_history: bool,
    /// Historical bugs switched back on (see issue 8's bug zoo); empty in normal runs.
    pub bugs: Vec<String>,
    pub scenario_name: Option<String>,
    pub expect: Option<Expect>,
    /// Size-based retention of the data logs (`--retention`; on by default in long runs).
    pub retention: Retention,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            seed: 1,
            duration: 60 * SECS,
            liveness: 20 * SECS,
            brokers: 3,
            controllers: 3,
            // Raft's own default.
            raft_max_entries_per_append: RaftConfig::new(1, vec![1]).max_entries_per_append,
            partitions: 6,
            replication_factor: 3,
            min_insync_replicas: 2,
            unclean_leader_election: false,
            unclean_recovery_strategy: UncleanRecoveryStrategy::default(),
            producers: 2,
            consumers: 2,
            group_members: 2,
            group_id: "sim-group".into(),
            group_commit: CommitMode::Sync,
            group_assignor: AssignorKind::Range,
            group_static: false,
            produce_rate: 200.0,
            acks: Acks::All,
            idempotent: true,
            compression: false,
            workload: Workload::Plain,
            txn_bugs: skein_core::txn::TxnBugs::default(),
            pipelines: 2,
            txn_keep_epoch: false,
            txn_abort_in_flight: false,
            network: NetConfig::lossy(1.0),
            disk: DiskConfig::default(),
            rates: FaultRates::default(),
            random_faults: true,
            schedule: Vec::new(),
            check_history: true,
            bugs: Vec::new(),
            scenario_name: None,
            expect: None,
            retention: Retention::Auto,
        }
    }
}

impl SimConfig {
    /// Sets the fault intensity (`--fault-rate`): 0 = a fault-free, lossless run.
    pub fn with_fault_rate(mut self, factor: f64) -> Self {
        self.rates = FaultRates::scaled(factor);
        self.network = NetConfig::lossy(factor);
        self.random_faults = factor > 0.0;
        self
    }

    /// The run `skein sim bench` times (and sim/tests/bench_guard.rs counts): the default
    /// cluster and workload at `produce_rate` requests per simulated second for
    /// `duration`, no history check (it is measured on its own).
    pub fn bench(seed: u64, duration: SimTime, produce_rate: f64, fault_rate: f64) -> Self {
        Self {
            seed,
            duration,
            liveness: (duration / 3).min(Self::default().liveness),
            produce_rate,
            check_history: false,
            ..Self::default().with_fault_rate(fault_rate)
        }
    }

    /// A short faulty run, as used by the seed tests.
    pub fn short(seed: u64) -> Self {
        Self {
            seed,
            duration: 12 * SECS,
            liveness: 5 * SECS,
            produce_rate: 60.0,
            rates: FaultRates {
                per_second: 1.0,
                ..FaultRates::default()
            },
            ..Self::default()
        }
    }

    /// The per-partition byte limit of the data logs, if any ([`Retention`]).
    pub fn retention_bytes(&self) -> Option<u64> {
        match self.retention {
            Retention::Auto => (self.duration > LONG_RUN).then_some(LONG_RUN_RETENTION_BYTES),
            Retention::Off => None,
            Retention::Bytes(b) => Some(b),
        }
    }

    /// When random faults stop: the liveness window plus a margin before the end.
    pub fn faults_end(&self) -> SimTime {
        self.duration
            .saturating_sub(self.liveness + self.liveness / 4)
    }

    /// When everything heals: when random faults stop, or at the last scheduled fault if
    /// that comes later (liveness is then not judged).
    pub fn final_heal_at(&self) -> SimTime {
        self.schedule
            .iter()
            .map(|s| s.at)
            .fold(self.faults_end(), SimTime::max)
    }

    /// When random faults may start (after the cluster has formed).
    pub fn faults_start(&self) -> SimTime {
        (2 * SECS).min(self.duration / 4).max(100 * MILLIS)
    }

    /// Checks that every scheduled fault names brokers, partitions and clients that exist,
    /// fires within the run, and ends (restart, duration) by the final heal, which would
    /// otherwise cut it short without a word. The message names the fault and the times.
    fn validate_schedule(&self) -> Result<(), String> {
        self.schedule
            .iter()
            .try_for_each(|s| self.check_scheduled(s))
    }

    /// [`SimConfig::validate_schedule`] for one fault.
    pub fn check_scheduled(&self, s: &Scheduled) -> Result<(), String> {
        use crate::faults::{ClientRef, Fault, LeaderOf, NodeRef};
        use crate::time::Human;
        let heal = self.final_heal_at();
        {
            let what = || format!("the {} fault at {}", s.fault.name(), Human(s.at));
            if s.at >= self.duration {
                return Err(format!(
                    "{} comes after the run ends ({}): it would never fire",
                    what(),
                    Human(self.duration)
                ));
            }
            let mut bad = None;
            let _ = s.fault.clone().map_nodes(|n| {
                match n {
                    NodeRef::Broker(id) if id == 0 || id > self.brokers => {
                        bad = Some(format!(
                            "broker {id} does not exist (the cluster has brokers 1..={})",
                            self.brokers
                        ))
                    }
                    NodeRef::LeaderOf(LeaderOf(p)) if p >= self.partitions => {
                        bad = Some(format!(
                            "partition {p} does not exist (the topic has {})",
                            self.partitions
                        ))
                    }
                    _ => {}
                }
                Some(n)
            });
            if let Fault::ClientPause { client, .. }
            | Fault::ClientCrash { client, .. }
            | Fault::ClientRestart { client }
            | Fault::ClientIsolate { client, .. }
            | Fault::Message {
                from: crate::faults::MessageSender::Client(client),
                ..
            } = &s.fault
            {
                match client {
                    ClientRef::Producer(n) if *n == 0 || *n > self.producers => {
                        bad = Some(format!(
                            "{client} does not exist (the workload has {} producers)",
                            self.producers
                        ))
                    }
                    ClientRef::Consumer(n) if *n == 0 || *n > self.consumers => {
                        bad = Some(format!(
                            "{client} does not exist (the workload has {} consumers)",
                            self.consumers
                        ))
                    }
                    _ => {}
                }
            }
            if let Some(bad) = bad {
                return Err(format!("{}: {bad}", what()));
            }
            // The part of the fault that must be over by the final heal.
            let (field, length) = match &s.fault {
                Fault::Crash {
                    restart_after: Some(d),
                    ..
                }
                | Fault::CoordinatorCrash {
                    restart_after: Some(d),
                    ..
                }
                | Fault::TxnCoordinatorCrash {
                    restart_after: Some(d),
                    ..
                }
                | Fault::MemberCrash {
                    restart_after: Some(d),
                    ..
                }
                | Fault::ClientCrash {
                    restart_after: Some(d),
                    ..
                } => ("restart_after", *d),
                Fault::Pause { duration, .. }
                | Fault::Partition {
                    duration: Some(duration),
                    ..
                }
                | Fault::Clog { duration, .. }
                | Fault::ReadErrors { duration, .. }
                | Fault::DiskFull { duration, .. }
                | Fault::SlowDisk { duration, .. }
                | Fault::MemberPause { duration, .. }
                | Fault::MemberIsolate { duration, .. }
                | Fault::ClientPause { duration, .. }
                | Fault::ClientIsolate { duration, .. } => ("duration", *duration),
                _ => return Ok(()),
            };
            let end = s.at.saturating_add(length);
            if end > heal {
                return Err(format!(
                    "{}: {field} {} ends it at {}, after the final heal at {} (which would cut it short); the final heal comes {} before the end of the run (liveness {} plus a quarter), or at the last scheduled fault if that is later: shorten the fault, or lengthen the run",
                    what(),
                    Human(length),
                    Human(end),
                    Human(heal),
                    Human(self.duration - self.faults_end()),
                    Human(self.liveness),
                ));
            }
        }
        Ok(())
    }

    /// Checks the shape is runnable; the message names the offending setting.
    pub fn validate(&self) -> Result<(), String> {
        if self.workload == Workload::Txn && self.group_members > 0 {
            return Err("--workload txn has no group members yet: --group-members 0".into());
        }
        if self.brokers == 0 {
            return Err("--brokers must be at least 1".into());
        }
        if ![1, 3, 5].contains(&self.controllers) {
            return Err(format!(
                "--controllers must be 1, 3 or 5 (a Raft quorum of an odd size), not {}",
                self.controllers
            ));
        }
        if self.raft_max_entries_per_append == 0 {
            return Err("--raft-max-entries-per-append must be at least 1".into());
        }
        if self.replication_factor == 0 || self.replication_factor > self.brokers {
            return Err(format!(
                "replication factor {} must be within 1..={} (the number of brokers)",
                self.replication_factor, self.brokers
            ));
        }
        if self.min_insync_replicas == 0 || self.min_insync_replicas > self.replication_factor {
            return Err(format!(
                "min.insync.replicas {} must be within 1..={} (the replication factor)",
                self.min_insync_replicas, self.replication_factor
            ));
        }
        if self.partitions == 0 {
            return Err("--partitions must be at least 1".into());
        }
        if self.duration < SECS {
            return Err("--duration must be at least 1s".into());
        }
        if self.liveness >= self.duration {
            return Err("--liveness must be shorter than --duration".into());
        }
        self.validate_schedule()?;
        for f in &self.schedule {
            use crate::faults::Fault;
            if let Fault::MemberCrash { member, .. }
            | Fault::MemberRestart { member }
            | Fault::MemberPause { member, .. }
            | Fault::MemberIsolate { member, .. } = &f.fault
            {
                if *member == 0 || *member > self.group_members {
                    return Err(format!(
                        "a {} fault names group member {member}, but the workload has {} (numbered from 1)",
                        f.fault.name(),
                        self.group_members
                    ));
                }
            }
        }
        if self.group_members > 0 && self.group_id.is_empty() {
            return Err("the group id must not be empty".into());
        }
        if !(self.produce_rate.is_finite() && self.produce_rate >= 0.0) {
            return Err("--produce-rate must be a number >= 0".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_parses_sizes_and_refuses_nonsense_by_name() {
        assert_eq!(Retention::parse("auto"), Ok(Retention::Auto));
        assert_eq!(Retention::parse("off"), Ok(Retention::Off));
        assert_eq!(Retention::parse("4MiB"), Ok(Retention::Bytes(4 << 20)));
        assert_eq!(Retention::parse("512KiB"), Ok(Retention::Bytes(512 << 10)));
        assert_eq!(Retention::parse("65536"), Ok(Retention::Bytes(65536)));
        for bad in ["", "4MB", "-1", "1KiB", "lots", "99999999999GiB"] {
            let e = Retention::parse(bad).unwrap_err();
            assert!(e.contains("--retention"), "{bad}: {e}");
        }
    }

    #[test]
    fn retention_is_on_by_default_only_past_the_long_run_threshold() {
        let short = SimConfig::default();
        assert_eq!(
            short.retention_bytes(),
            None,
            "the default 60 s run keeps its logs"
        );
        let long = SimConfig {
            duration: LONG_RUN + SECS,
            ..SimConfig::default()
        };
        assert_eq!(long.retention_bytes(), Some(LONG_RUN_RETENTION_BYTES));
        let off = SimConfig {
            retention: Retention::Off,
            ..long.clone()
        };
        assert_eq!(off.retention_bytes(), None);
        let set = SimConfig {
            retention: Retention::Bytes(1 << 16),
            ..short
        };
        assert_eq!(set.retention_bytes(), Some(1 << 16));
    }
}
