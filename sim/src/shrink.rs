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
use crate::faults::{ClientRef, Fault, Scheduled};
use crate::report::SimReport;
use crate::time::{SimTime, MILLIS, SECS};
use crate::world::{realised_schedule, run, SimError};

pub(crate) mod scenario_file;

pub use scenario_file::scenario_toml;

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
                | Fault::MemberPause { member, .. }
                | Fault::MemberIsolate { member, .. } => *member <= members,
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
    // The realised schedule as explicit faults, random faults off: the same run. The
    // leader nemesis' faults were drawn during the run; they join the schedule too.
    let mut schedule = realised_schedule(cfg);
    schedule.extend(original.nemesis_faults.iter().cloned());
    schedule.sort_by_key(|s| s.at);
    let captured = SimConfig {
        schedule,
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
