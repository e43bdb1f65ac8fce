//! Shrinking a failing run to a small scenario that still fails the same way.
//!
//! A failing seed's fault schedule is captured as concrete scheduled faults (the random
//! schedule is a pure function of the seed and config, [`crate::world::realised_schedule`]),
//! random faults are switched off, and the schedule is then cut down by delta debugging
//! (ddmin over the fault list), followed by a shorter duration and a lighter workload
//! (fewer partitions, producers and consumers, a lower produce rate). A candidate is kept
//! only if a real run of it, with the same seed, still fails the *same* invariant. The
//! result is a [`SimConfig`] with an explicit schedule that [`scenario_toml`] writes as a
//! scenario file; the caller re-runs that file to prove it reproduces (same trace hash).

use crate::config::SimConfig;
use crate::faults::{ClientRef, Fault, NodeRef, Scheduled, Unsynced};
use crate::net::Partition;
use crate::report::SimReport;
use crate::time::{format_duration, SimTime, MILLIS, SECS};
use crate::world::{realised_schedule, run, SimError};
use std::fmt::Write as _;

/// Why a shrink could not start.
#[derive(Debug, thiserror::Error)]
pub enum ShrinkError {
    #[error(transparent)]
    Sim(#[from] SimError),
    #[error("seed {seed} does not fail {what}: nothing to shrink")]
    Passes { seed: u64, what: String },
    #[error("the captured schedule does not reproduce the failure of {invariant} (failed: {failed:?}); the fault schedule is not the whole story of this run")]
    CaptureDiverged {
        invariant: String,
        failed: Vec<&'static str>,
    },
}

/// Where a shrink is, for progress output.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Runs so far (including the two that start the shrink).
    pub runs: usize,
    pub phase: &'static str,
    /// Faults in the smallest failing schedule so far.
    pub faults: usize,
    pub duration: SimTime,
}

/// The outcome: the smallest failing configuration found and its report.
#[derive(Clone, Debug)]
pub struct Shrunk {
    pub invariant: &'static str,
    pub original_faults: usize,
    pub original_duration: SimTime,
    /// Random faults off, the schedule explicit.
    pub config: SimConfig,
    pub report: SimReport,
    pub runs: usize,
}

struct Search<'a> {
    target: &'static str,
    runs: usize,
    max_runs: usize,
    best: SimConfig,
    best_report: SimReport,
    progress: &'a mut dyn FnMut(&Progress),
    phase: &'static str,
}

impl Search<'_> {
    fn budget_left(&self) -> bool {
        self.runs < self.max_runs
    }

    /// Runs `cfg`; keeps it as the best if it fails the target.
    fn try_config(&mut self, cfg: SimConfig) -> bool {
        if !self.budget_left() {
            return false;
        }
        self.runs += 1;
        let ok = match run(&cfg, None, None) {
            Ok(r) if r.failed_invariants().contains(&self.target) => {
                self.best = cfg;
                self.best_report = r;
                true
            }
            _ => false,
        };
        (self.progress)(&Progress {
            runs: self.runs,
            phase: self.phase,
            faults: self.best.schedule.len(),
            duration: self.best.duration,
        });
        ok
    }

    fn with_schedule(&self, schedule: Vec<Scheduled>) -> SimConfig {
        SimConfig {
            schedule,
            ..self.best.clone()
        }
    }

    /// Delta debugging (ddmin) over the fault list of the best config.
    fn ddmin(&mut self) {
        self.phase = "faults";
        if self.best.schedule.is_empty() {
            return;
        }
        if self.try_config(self.with_schedule(Vec::new())) {
            return;
        }
        let mut n = 2usize;
        while self.best.schedule.len() >= 2 && self.budget_left() {
            let items = self.best.schedule.clone();
            let len = items.len();
            let chunk = len.div_ceil(n);
            let parts: Vec<(usize, usize)> = (0..len)
                .step_by(chunk)
                .map(|s| (s, (s + chunk).min(len)))
                .collect();
            let mut reduced = false;
            for &(a, b) in &parts {
                if self.try_config(self.with_schedule(items[a..b].to_vec())) {
                    n = 2;
                    reduced = true;
                    break;
                }
            }
            if !reduced && parts.len() > 2 {
                for &(a, b) in &parts {
                    let mut rest = items[..a].to_vec();
                    rest.extend_from_slice(&items[b..]);
                    if self.try_config(self.with_schedule(rest)) {
                        n = (n - 1).max(2);
                        reduced = true;
                        break;
                    }
                }
            }
            if !reduced {
                if n >= len {
                    break;
                }
                n = (2 * n).min(len);
            }
        }
        // Last pass: drop single faults (ddmin's end state is 1-minimal only if n reached len).
        let mut i = 0;
        while i < self.best.schedule.len() && self.best.schedule.len() > 1 && self.budget_left() {
            let mut rest = self.best.schedule.clone();
            rest.remove(i);
            if !self.try_config(self.with_schedule(rest)) {
                i += 1;
            }
        }
    }

    /// A shorter run: just past the first violation, or a fraction of the current length.
    fn shorten(&mut self) {
        self.phase = "duration";
        let d = self.best.duration;
        let first = self
            .best_report
            .violations
            .iter()
            .find(|v| v.invariant == self.target)
            .map_or(d, |v| v.at);
        let round = |t: SimTime| t.div_ceil(100 * MILLIS) * 100 * MILLIS;
        let mut candidates: Vec<SimTime> = [first + 500 * MILLIS, d / 4, d / 2, d * 3 / 4]
            .into_iter()
            .map(round)
            .filter(|&c| c > first && c >= 2 * SECS && c < d)
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        for c in candidates {
            let mut cfg = self.best.clone();
            cfg.duration = c;
            cfg.liveness = cfg.liveness.min(c / 3);
            if cfg.validate().is_ok() && self.try_config(cfg) {
                break;
            }
        }
    }

    /// A lighter workload: one partition, fewer clients (at least one of each), a lower rate.
    fn lighten(&mut self) {
        self.phase = "workload";
        if self.best.partitions > 1 {
            let cfg = SimConfig {
                partitions: 1,
                ..self.best.clone()
            };
            self.try_config(cfg);
        }
        for producers in 1..self.best.producers {
            let mut cfg = SimConfig {
                producers,
                ..self.best.clone()
            };
            cfg.schedule
                .retain(|s| client_kept(&s.fault, producers, cfg.consumers));
            if self.try_config(cfg) {
                break;
            }
        }
        // At least one consumer: without readers every acknowledged record counts as
        // unread and the shrunk scenario would fail liveness on a correct core.
        for consumers in 1..self.best.consumers {
            let mut cfg = SimConfig {
                consumers,
                ..self.best.clone()
            };
            cfg.schedule
                .retain(|s| client_kept(&s.fault, cfg.producers, consumers));
            if self.try_config(cfg) {
                break;
            }
        }
        // Fewer group members (none if the invariant is not a group one); their faults go
        // with them.
        for members in 0..self.best.group_members {
            let mut cfg = SimConfig {
                group_members: members,
                ..self.best.clone()
            };
            cfg.schedule.retain(|s| match &s.fault {
                Fault::MemberCrash { member, .. }
                | Fault::MemberRestart { member }
                | Fault::MemberPause { member, .. } => *member <= members,
                Fault::CoordinatorCrash { .. } => members > 0,
                _ => true,
            });
            if cfg.validate().is_ok() && self.try_config(cfg) {
                break;
            }
        }
        for div in [8.0, 4.0, 2.0] {
            let rate = (self.best.produce_rate / div).round();
            if rate < 1.0 || rate >= self.best.produce_rate {
                continue;
            }
            let cfg = SimConfig {
                produce_rate: rate,
                ..self.best.clone()
            };
            if self.try_config(cfg) {
                break;
            }
        }
    }
}

/// Whether `f` still applies with this many producers and consumers (a client fault
/// naming a client the lighter workload lacks goes with it).
fn client_kept(f: &Fault, producers: u32, consumers: u32) -> bool {
    match f {
        Fault::ClientPause { client, .. }
        | Fault::ClientCrash { client, .. }
        | Fault::ClientRestart { client }
        | Fault::ClientIsolate { client, .. }
        | Fault::ClientTakeover { client } => match client {
            ClientRef::Producer(n) => *n <= producers,
            ClientRef::Consumer(n) => *n <= consumers,
        },
        _ => true,
    }
}

/// Shrinks the failing run `cfg`. `invariant`: the one that must keep failing (default:
/// the first to fail, by time). At most `max_runs` simulations are run.
pub fn shrink(
    cfg: &SimConfig,
    invariant: Option<&str>,
    max_runs: usize,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Shrunk, ShrinkError> {
    let original = run(cfg, None, None)?;
    let target: &'static str = match invariant {
        Some(name) => crate::invariants::NAMES
            .iter()
            .copied()
            .find(|n| *n == name)
            .filter(|n| original.failed_invariants().contains(n))
            .ok_or_else(|| ShrinkError::Passes {
                seed: cfg.seed,
                what: name.to_string(),
            })?,
        None => original
            .violations
            .first()
            .map(|v| v.invariant)
            .or_else(|| original.failed_invariants().first().copied())
            .ok_or_else(|| ShrinkError::Passes {
                seed: cfg.seed,
                what: "any invariant".into(),
            })?,
    };
    // The realised schedule as explicit faults, random faults off: the same run.
    let captured = SimConfig {
        schedule: realised_schedule(cfg),
        random_faults: false,
        expect: None,
        ..cfg.clone()
    };
    let original_faults = captured.schedule.len();
    let report = run(&captured, None, None)?;
    if !report.failed_invariants().contains(&target) {
        return Err(ShrinkError::CaptureDiverged {
            invariant: target.to_string(),
            failed: report.failed_invariants(),
        });
    }
    let mut s = Search {
        target,
        runs: 2,
        max_runs: max_runs.max(2),
        best: captured,
        best_report: report,
        progress,
        phase: "capture",
    };
    s.ddmin();
    s.shorten();
    s.lighten();
    // A lighter workload can make more faults unnecessary.
    s.ddmin();
    Ok(Shrunk {
        invariant: target,
        original_faults,
        original_duration: cfg.duration,
        config: s.best,
        report: s.best_report,
        runs: s.runs,
    })
}

fn node(n: &NodeRef) -> String {
    match n {
        NodeRef::Broker(id) => id.to_string(),
        NodeRef::Controller(_) => "\"controller\"".into(),
        NodeRef::LeaderOf(l) => format!("\"{l}\""),
    }
}

fn nodes(v: &[NodeRef]) -> String {
    let parts: Vec<String> = v.iter().map(node).collect();
    format!("[{}]", parts.join(", "))
}

fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One `[[fault]]` entry; `None` for internal faults no file can name.
fn fault_toml(s: &Scheduled) -> Option<String> {
    let mut o = format!("[[fault]]\nat = \"{}\"\n", format_duration(s.at));
    let d = |t: &SimTime| format!("\"{}\"", format_duration(*t));
    let kind = |o: &mut String, k: &str| {
        let _ = writeln!(o, "kind = \"{k}\"");
    };
    match &s.fault {
        Fault::Crash {
            node: n,
            power_loss,
            unsynced,
            restart_after,
        } => {
            kind(&mut o, "crash");
            let _ = writeln!(o, "node = {}", node(n));
            if *power_loss {
                o.push_str("power_loss = true\n");
                if *unsynced != Unsynced::Random {
                    let _ = writeln!(o, "unsynced = \"{}\"", unsynced.name());
                }
            }
            if let Some(r) = restart_after {
                let _ = writeln!(o, "restart_after = {}", d(r));
            }
        }
        Fault::Restart { node: n } => {
            kind(&mut o, "restart");
            let _ = writeln!(o, "node = {}", node(n));
        }
        Fault::Pause { node: n, duration } => {
            kind(&mut o, "pause");
            let _ = writeln!(o, "node = {}\nduration = {}", node(n), d(duration));
        }
        Fault::ClockJump { node: n, forward } => {
            kind(&mut o, "clock-jump");
            let _ = writeln!(o, "node = {}\nforward = {}", node(n), d(forward));
        }
        Fault::ClockStall { node: n, duration } => {
            kind(&mut o, "clock-stall");
            let _ = writeln!(o, "node = {}\nduration = {}", node(n), d(duration));
        }
        Fault::ClockSkew { node: n, ppm } => {
            kind(&mut o, "clock-skew");
            let _ = writeln!(o, "node = {}\nppm = {ppm}", node(n));
        }
        Fault::Partition { shape, duration } => {
            kind(&mut o, "partition");
            match shape {
                Partition::RandomHalves => o.push_str("shape = \"halves\"\n"),
                Partition::Split { a, b } => {
                    let _ = writeln!(o, "shape = \"split\"\na = {}\nb = {}", nodes(a), nodes(b));
                }
                Partition::Isolate { node: n } => {
                    let _ = writeln!(o, "shape = \"isolate\"\nnode = {}", node(n));
                }
                Partition::Bridge { node: n } => {
                    let _ = writeln!(o, "shape = \"bridge\"\nnode = {}", node(n));
                }
                Partition::OneWay { from } => {
                    let _ = writeln!(o, "shape = \"one-way\"\nfrom = {}", node(from));
                }
            }
            if let Some(t) = duration {
                let _ = writeln!(o, "duration = {}", d(t));
            }
        }
        Fault::Heal => kind(&mut o, "heal"),
        Fault::Clog { from, to, duration } => {
            kind(&mut o, "clog");
            let _ = writeln!(
                o,
                "from = {}\nto = {}\nduration = {}",
                node(from),
                node(to),
                d(duration)
            );
        }
        Fault::BitFlip { node: n } => {
            kind(&mut o, "bit-flip");
            let _ = writeln!(o, "node = {}", node(n));
        }
        Fault::ReadErrors { node: n, duration } => {
            kind(&mut o, "read-errors");
            let _ = writeln!(o, "node = {}\nduration = {}", node(n), d(duration));
        }
        Fault::DiskFull { node: n, duration } => {
            kind(&mut o, "disk-full");
            let _ = writeln!(o, "node = {}\nduration = {}", node(n), d(duration));
        }
        Fault::SlowDisk {
            node: n,
            latency,
            duration,
        } => {
            kind(&mut o, "slow-disk");
            let _ = writeln!(
                o,
                "node = {}\nlatency = {}\nduration = {}",
                node(n),
                d(latency),
                d(duration)
            );
        }
        Fault::MemberCrash {
            member,
            restart_after,
        } => {
            kind(&mut o, "member-crash");
            let _ = writeln!(o, "member = {member}");
            if let Some(r) = restart_after {
                let _ = writeln!(o, "restart_after = {}", d(r));
            }
        }
        Fault::MemberRestart { member } => {
            kind(&mut o, "member-restart");
            let _ = writeln!(o, "member = {member}");
        }
        Fault::MemberPause { member, duration } => {
            kind(&mut o, "member-pause");
            let _ = writeln!(o, "member = {member}\nduration = {}", d(duration));
        }
        Fault::CoordinatorCrash {
            power_loss,
            unsynced,
            restart_after,
        } => {
            kind(&mut o, "coordinator-crash");
            if *power_loss {
                o.push_str("power_loss = true\n");
                if *unsynced != Unsynced::Random {
                    let _ = writeln!(o, "unsynced = \"{}\"", unsynced.name());
                }
            }
            if let Some(r) = restart_after {
                let _ = writeln!(o, "restart_after = {}", d(r));
            }
        }
        Fault::ClientPause {
            client,
            duration,
            replaced_after,
        } => {
            kind(&mut o, "client-pause");
            let _ = writeln!(o, "client = \"{client}\"\nduration = {}", d(duration));
            if let Some(r) = replaced_after {
                let _ = writeln!(o, "replaced_after = {}", d(r));
            }
        }
        Fault::ClientCrash {
            client,
            restart_after,
        } => {
            kind(&mut o, "client-crash");
            let _ = writeln!(o, "client = \"{client}\"");
            if let Some(r) = restart_after {
                let _ = writeln!(o, "restart_after = {}", d(r));
            }
        }
        Fault::ClientRestart { client } => {
            kind(&mut o, "client-restart");
            let _ = writeln!(o, "client = \"{client}\"");
        }
        Fault::ClientIsolate { client, duration } => {
            kind(&mut o, "client-isolate");
            let _ = writeln!(o, "client = \"{client}\"\nduration = {}", d(duration));
        }
        Fault::EndDiskFault { .. } | Fault::EndPartition { .. } | Fault::ClientTakeover { .. } => {
            return None
        }
    }
    Some(o)
}

/// `cfg` as a scenario file: every setting the run depends on, written out (random faults
/// off, the exact schedule), expecting `invariant` to fail. The disk model and history
/// checking are not part of the format: they must be left at their defaults.
pub fn scenario_toml(cfg: &SimConfig, name: &str, description: &str, invariant: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "version = 1\nname = {}", quote(name));
    let _ = writeln!(o, "description = {}", quote(description));
    let _ = writeln!(o, "seed = {}", cfg.seed);
    let _ = writeln!(
        o,
        "\n[cluster]\nbrokers = {}\npartitions = {}\nreplication_factor = {}\nmin_insync_replicas = {}\nunclean_leader_election = {}",
        cfg.brokers,
        cfg.partitions,
        cfg.replication_factor,
        cfg.min_insync_replicas,
        cfg.unclean_leader_election
    );
    let acks = match cfg.acks {
        crate::scenario::Acks::None => "0",
        crate::scenario::Acks::Leader => "1",
        crate::scenario::Acks::All => "\"all\"",
    };
    let _ = writeln!(
        o,
        "\n[workload]\nproducers = {}\nconsumers = {}\nproduce_rate = {}\nacks = {acks}\nidempotent = {}",
        cfg.producers, cfg.consumers, cfg.produce_rate, cfg.idempotent
    );
    if cfg.group_members > 0 {
        let commit = match cfg.group_commit {
            crate::group_client::CommitMode::Sync => "sync",
            crate::group_client::CommitMode::Async => "async",
        };
        let _ = writeln!(
            o,
            "group_members = {}\ngroup_id = {}\ngroup_commit = \"{commit}\"\ngroup_assignor = \"{}\"\ngroup_static = {}",
            cfg.group_members,
            quote(&cfg.group_id),
            cfg.group_assignor.name(),
            cfg.group_static
        );
    }
    let _ = writeln!(
        o,
        "\n[run]\nduration = \"{}\"\nliveness = \"{}\"",
        format_duration(cfg.duration),
        format_duration(cfg.liveness)
    );
    let n = &cfg.network;
    let _ = writeln!(
        o,
        "\n[network]\nlatency_min = \"{}\"\nlatency_mean_extra = \"{}\"\nlatency_max = \"{}\"\ndrop = {}\nduplicate = {}\nreorder = {}",
        format_duration(n.latency_min),
        format_duration(n.latency_mean_extra),
        format_duration(n.latency_max),
        n.drop,
        n.duplicate,
        n.reorder
    );
    o.push_str("\n[faults]\nper_second = 0\n");
    for s in &cfg.schedule {
        if let Some(f) = fault_toml(s) {
            o.push('\n');
            o.push_str(&f);
        }
    }
    let _ = writeln!(
        o,
        "\n[expect]\nverdict = \"fail\"\ninvariant = {}",
        quote(invariant)
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::{LeaderOf as Leader, NodeRef::*};
    use crate::scenario::Scenario;

    #[test]
    fn every_fault_kind_survives_writing_and_reading_back() {
        let c = NodeRef::CONTROLLER;
        let faults = vec![
            Fault::Crash {
                node: Broker(1),
                power_loss: true,
                unsynced: Unsynced::Random,
                restart_after: Some(1_500 * MILLIS),
            },
            Fault::Crash {
                node: Broker(2),
                power_loss: true,
                unsynced: Unsynced::Torn,
                restart_after: None,
            },
            Fault::Crash {
                node: LeaderOf(Leader(2)),
                power_loss: false,
                unsynced: Unsynced::Random,
                restart_after: None,
            },
            Fault::Restart { node: c },
            Fault::Pause {
                node: Broker(2),
                duration: 123_456_789,
            },
            Fault::ClockJump {
                node: Broker(3),
                forward: SECS,
            },
            Fault::ClockStall {
                node: Broker(3),
                duration: 7 * MILLIS,
            },
            Fault::ClockSkew {
                node: Broker(1),
                ppm: -150_000,
            },
            Fault::Partition {
                shape: Partition::RandomHalves,
                duration: Some(SECS),
            },
            Fault::Partition {
                shape: Partition::Split {
                    a: vec![Broker(1), c],
                    b: vec![Broker(2), Broker(3)],
                },
                duration: None,
            },
            Fault::Partition {
                shape: Partition::Isolate { node: Broker(2) },
                duration: Some(2 * SECS),
            },
            Fault::Partition {
                shape: Partition::Bridge { node: Broker(1) },
                duration: Some(SECS),
            },
            Fault::Partition {
                shape: Partition::OneWay { from: Broker(3) },
                duration: Some(SECS),
            },
            Fault::Heal,
            Fault::Clog {
                from: Broker(1),
                to: c,
                duration: SECS,
            },
            Fault::BitFlip { node: Broker(2) },
            Fault::ReadErrors {
                node: Broker(1),
                duration: SECS,
            },
            Fault::DiskFull {
                node: Broker(3),
                duration: SECS,
            },
            Fault::SlowDisk {
                node: Broker(1),
                latency: 40 * MILLIS,
                duration: 4 * SECS,
            },
            Fault::MemberCrash {
                member: 1,
                restart_after: Some(SECS),
            },
            Fault::MemberRestart { member: 2 },
            Fault::MemberPause {
                member: 3,
                duration: 2 * SECS,
            },
            Fault::CoordinatorCrash {
                power_loss: true,
                unsynced: Unsynced::LoseAll,
                restart_after: None,
            },
            Fault::ClientPause {
                client: ClientRef::Producer(1),
                duration: 2 * SECS,
                replaced_after: Some(SECS),
            },
            Fault::ClientCrash {
                client: ClientRef::Consumer(1),
                restart_after: Some(SECS),
            },
            Fault::ClientRestart {
                client: ClientRef::Producer(1),
            },
            Fault::ClientIsolate {
                client: ClientRef::Consumer(2),
                duration: SECS,
            },
        ];
        let cfg = SimConfig {
            seed: 42,
            duration: 15 * SECS,
            liveness: 4 * SECS,
            partitions: 3,
            producers: 1,
            consumers: 3,
            produce_rate: 12.5,
            unclean_leader_election: true,
            group_members: 3,
            group_id: "g \"1\"".into(),
            group_commit: crate::group_client::CommitMode::Async,
            group_assignor: skein_core::group::AssignorKind::CooperativeSticky,
            group_static: true,
            random_faults: false,
            schedule: faults
                .into_iter()
                .enumerate()
                .map(|(i, fault)| Scheduled {
                    at: SECS + i as u64 * 100 * MILLIS + 7,
                    fault,
                })
                .collect(),
            ..SimConfig::default()
        };
        let text = scenario_toml(&cfg, "all \"kinds\"", "every fault\nkind", "liveness");
        let sc = Scenario::parse("written.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let mut back = SimConfig {
            seed: 42,
            ..SimConfig::default()
        };
        back.apply_scenario(&sc);
        assert_eq!(back.schedule, cfg.schedule);
        assert!(!back.random_faults);
        assert_eq!(
            (
                back.duration,
                back.liveness,
                back.partitions,
                back.producers,
                back.consumers
            ),
            (
                cfg.duration,
                cfg.liveness,
                cfg.partitions,
                cfg.producers,
                cfg.consumers
            )
        );
        assert_eq!(back.produce_rate, cfg.produce_rate);
        assert_eq!(back.network, cfg.network);
        assert!(back.unclean_leader_election);
        assert_eq!(
            (
                back.group_members,
                &back.group_id,
                back.group_commit,
                back.group_assignor,
                back.group_static
            ),
            (
                cfg.group_members,
                &cfg.group_id,
                cfg.group_commit,
                cfg.group_assignor,
                cfg.group_static
            )
        );
        assert_eq!(sc.name.as_deref(), Some("all \"kinds\""));
        assert_eq!(
            sc.expect,
            Some(crate::scenario::Expect::Fail {
                invariant: "liveness".into()
            })
        );
    }
}
