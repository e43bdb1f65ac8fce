//! The `skein sim` command line's arguments and what is deterministic about it: the clap
//! argument structs of every subcommand, the mapping from flags (over a scenario file, over
//! the defaults) to a [`SimConfig`], the replay command that repeats the flags, and the
//! text of reports. The `skein` binary (node/src/cli/sim.rs) parses these and dispatches;
//! what needs threads or a wall clock (the parallel sweep runner, progress bars, `sim
//! bench`'s timing) stays there, because this crate has neither.

use crate::config::SimConfig;
use crate::report::SimReport;
use crate::scenario::{Scenario, ScenarioError};
use crate::shrink::Shrunk;
use crate::sweep::SeedResult;
use crate::time::{format_duration, parse_duration, Human, SimTime};
use clap::{Args, Subcommand};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Why the flags do not make a run configuration.
#[derive(Debug, thiserror::Error)]
pub enum FlagError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error("{0}")]
    Flag(String),
}

#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(subcommand)]
    pub command: Box<SimCommand>,
}

#[derive(Subcommand, Debug)]
pub enum SimCommand {
    /// Run one seeded simulation and judge it.
    Run(RunArgs),
    /// Run many seeds in parallel and list the failing ones with their replay commands.
    Sweep(SweepArgs),
    /// Run one seed again, exactly (the same as `run`; use --trace to see every event).
    Replay(RunArgs),
    /// Measure simulated events per wall second and simulated seconds per wall second.
    Bench(BenchArgs),
    /// Shrink a failing seed to a small scenario file that fails the same invariant.
    Shrink(ShrinkArgs),
    /// Bug zoo: for each `--bug`, how many seeds a random sweep needs to find it.
    Zoo(ZooArgs),
    /// Merge the `--json` results of a sweep's shards into one report (exit 0 all pass,
    /// 1 a seed failed, 2 seeds missing).
    Merge(MergeArgs),
}

pub fn duration_arg(s: &str) -> Result<SimTime, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// Cluster, workload and fault flags shared by every subcommand. Unset flags take the
/// scenario's value, then the default.
#[derive(Args, Debug, Clone, Default)]
pub struct SimOpts {
    /// A scenario file (TOML): cluster shape, workload, faults, expected verdict.
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    /// Simulated duration of the run [default: 60s].
    #[arg(long, value_parser = duration_arg, value_name = "DURATION")]
    pub duration: Option<SimTime>,
    /// Liveness bound: after the last fault heals, everything must recover within this [default: 20s].
    #[arg(long, value_parser = duration_arg, value_name = "DURATION")]
    pub liveness: Option<SimTime>,
    /// Number of brokers [default: 3].
    #[arg(long)]
    pub brokers: Option<u32>,
    /// Controller nodes: 1, or a Raft quorum of 3 or 5 [default: 3].
    #[arg(long)]
    pub controllers: Option<u32>,
    /// Most entries in one Raft `Append` between quorum controllers [default: 64].
    #[arg(long)]
    pub raft_max_entries_per_append: Option<usize>,
    /// Partitions of the test topic [default: 6].
    #[arg(long)]
    pub partitions: Option<u32>,
    /// Replication factor [default: 3].
    #[arg(long)]
    pub replication_factor: Option<u32>,
    /// min.insync.replicas [default: 2].
    #[arg(long)]
    pub min_insync_replicas: Option<u32>,
    /// KIP-966's unclean.recovery.strategy of the test topic: none, balanced or
    /// aggressive [default: balanced].
    #[arg(long, value_name = "STRATEGY")]
    pub unclean_recovery_strategy: Option<skein_core::controller::UncleanRecoveryStrategy>,
    /// Simulated producers [default: 2].
    #[arg(long)]
    pub producers: Option<u32>,
    /// Simulated consumers [default: 2].
    #[arg(long)]
    pub consumers: Option<u32>,
    /// Members of a consumer group reading the topic, commit-after-process [default: 2;
    /// scenarios: none unless they set `group_members`].
    #[arg(long)]
    pub group_members: Option<u32>,
    /// How group members commit: `sync` (commit_sync after processing, the default),
    /// `async` (commit_async) or `auto` (the consumer's auto-commit from poll).
    #[arg(long, value_name = "MODE", value_parser = parse_commit_mode)]
    pub group_commit: Option<crate::modes::CommitMode>,
    /// Produce requests per simulated second, all producers together [default: 200].
    #[arg(long)]
    pub produce_rate: Option<f64>,
    /// `plain` (the default) or `txn`: transactional producers (begin, send to 1-2
    /// partitions, commit or abort on purpose) and read_committed consumers.
    #[arg(long, value_name = "KIND", value_parser = parse_workload)]
    pub workload: Option<crate::modes::Workload>,
    /// Fault intensity: 0 = no faults and a perfect network, 1 = default, 2 = twice as many.
    #[arg(long)]
    pub fault_rate: Option<f64>,
    /// Relative weights of fault kinds in random schedules, e.g. `crash=0,partition=5`
    /// (kinds: crash power-loss controller-crash pause clock partition clog bit-flip
    /// read-errors disk-full slow-disk controller-bridge member-crash member-pause
    /// member-isolate client-crash client-pause client-isolate message; `message`, 0 by
    /// default, is the txn workload's random message faults).
    #[arg(long, value_name = "KIND=N,...")]
    pub fault_weights: Option<String>,
    /// At most this many brokers crashed or paused at once in random schedules [default: 1].
    #[arg(long)]
    pub max_down: Option<u32>,
    /// Producers store some batches compressed (gzip, snappy, lz4 or zstd, a codec per
    /// batch drawn from the seed; some stay uncompressed).
    #[arg(long)]
    pub compression: bool,
    /// Do not run the history checker at the end.
    #[arg(long)]
    pub no_history_check: bool,
    /// Size-based retention of the data logs, per partition: `auto` (1 MiB in runs longer
    /// than 5 minutes, none otherwise), `off`, or a size (`4MiB`) [default: auto].
    #[arg(long, value_name = "auto|off|SIZE", value_parser = crate::config::Retention::parse)]
    pub retention: Option<crate::config::Retention>,
    /// Leave bit flips out of random fault schedules (see "known findings" in
    /// docs/simulation.md: a flipped bit in the last in-sync copy of a partition leaves it leaderless).
    #[arg(long)]
    pub no_bit_flips: bool,
    /// Switch a historical bug back on in the core (bug zoo; see docs/simulation.md).
    #[arg(long, value_name = "NAME")]
    pub bug: Vec<String>,
    /// Swarm testing: each seed draws its own fault mix from the seed (kinds on and off,
    /// weights, rate, message delays, max-down, fault lengths; docs/search.md), printed
    /// with its verdict. `--fault-weights`, `--max-down` and `--no-bit-flips` still pin
    /// what they name.
    #[arg(long)]
    pub swarm: bool,
}

impl SimOpts {
    /// The run configuration: defaults, then the scenario, then the seed's swarm mix
    /// (`--swarm`), then flags.
    pub fn config(&self, seed: u64) -> Result<SimConfig, FlagError> {
        self.config_from(self.base()?, seed)
    }

    /// The defaults, `--fault-rate` and the scenario: what does not depend on the seed
    /// (read once per sweep; [`SimOpts::config_from`] finishes each seed's).
    pub fn base(&self) -> Result<SimConfig, FlagError> {
        let mut c = SimConfig::default();
        if let Some(rate) = self.fault_rate {
            if !(rate.is_finite() && rate >= 0.0) {
                return Err(FlagError::Flag("--fault-rate must be a number >= 0".into()));
            }
            if self.swarm {
                return Err(FlagError::Flag(
                    "--swarm draws each seed's fault rate: drop --fault-rate (pin fault kinds with --fault-weights)".into(),
                ));
            }
            c = c.with_fault_rate(rate);
        }
        if let Some(path) = &self.scenario {
            let sc = Scenario::load(path)?;
            c.apply_scenario(&sc);
        }
        Ok(c)
    }

    /// The seed's swarm mix, with `--swarm`.
    pub fn swarm_mix(&self, seed: u64) -> Option<crate::swarm::SwarmMix> {
        self.swarm.then(|| crate::swarm::SwarmMix::draw(seed))
    }

    /// `seed`'s run configuration from [`SimOpts::base`]'s: the swarm mix, then flags.
    pub fn config_from(&self, mut c: SimConfig, seed: u64) -> Result<SimConfig, FlagError> {
        c.seed = seed;
        if let Some(mix) = self.swarm_mix(seed) {
            mix.apply(&mut c);
        }
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = self.$f { c.$f = v; } )* };
        }
        set!(
            duration,
            liveness,
            brokers,
            controllers,
            raft_max_entries_per_append,
            partitions,
            replication_factor,
            min_insync_replicas,
            producers,
            consumers,
            group_members,
            produce_rate
        );
        if self.duration.is_some() && self.liveness.is_none() {
            // Keep the default liveness window proportionate for short runs.
            c.liveness = c.liveness.min(c.duration / 3);
        }
        if let Some(m) = self.group_commit {
            c.group_commit = m;
        }
        if let Some(w) = self.workload {
            c.workload = w;
            // No group members in the txn workload (yet): unless asked for, none.
            if w == crate::modes::Workload::Txn && self.group_members.is_none() {
                c.group_members = 0;
            }
        }
        if let Some(s) = self.unclean_recovery_strategy {
            c.unclean_recovery_strategy = s;
        }
        if self.no_history_check {
            c.check_history = false;
        }
        if self.compression {
            c.compression = true;
        }
        if let Some(r) = self.retention {
            c.retention = r;
        }
        if self.no_bit_flips {
            c.rates.bit_flip = 0;
        }
        if let Some(w) = &self.fault_weights {
            c.rates
                .set_weights(w)
                .map_err(|e| FlagError::Flag(format!("--fault-weights: {e}")))?;
        }
        if let Some(m) = self.max_down {
            c.rates.max_down = m;
        }
        c.bugs = self.bug.clone();
        c.validate().map_err(FlagError::Flag)?;
        Ok(c)
    }

    /// The flags as they would be typed, for replay commands.
    pub fn flags(&self) -> String {
        let mut s = String::new();
        if let Some(p) = &self.scenario {
            s += &format!(" --scenario {}", p.display());
        }
        if let Some(d) = self.duration {
            s += &format!(" --duration {}", format_duration(d));
        }
        if let Some(d) = self.liveness {
            s += &format!(" --liveness {}", format_duration(d));
        }
        macro_rules! flag {
            ($($f:ident => $name:literal),*) => { $( if let Some(v) = self.$f { s += &format!(concat!(" --", $name, " {}"), v); } )* };
        }
        flag!(
            brokers => "brokers",
            controllers => "controllers",
            raft_max_entries_per_append => "raft-max-entries-per-append",
            partitions => "partitions",
            replication_factor => "replication-factor",
            min_insync_replicas => "min-insync-replicas",
            producers => "producers",
            consumers => "consumers",
            group_members => "group-members",
            produce_rate => "produce-rate",
            fault_rate => "fault-rate"
        );
        if let Some(m) = self.group_commit {
            s += &format!(" --group-commit {}", m.name());
        }
        if let Some(w) = self.workload {
            s += &format!(" --workload {}", w.name());
        }
        if self.compression {
            s += " --compression";
        }
        if let Some(u) = self.unclean_recovery_strategy {
            s += &format!(
                " --unclean-recovery-strategy {}",
                u.name().to_ascii_lowercase()
            );
        }
        if self.no_history_check {
            s += " --no-history-check";
        }
        if let Some(r) = self.retention {
            s += &format!(" --retention {}", r.name());
        }
        if self.no_bit_flips {
            s += " --no-bit-flips";
        }
        if let Some(w) = &self.fault_weights {
            s += &format!(" --fault-weights {w}");
        }
        if let Some(m) = self.max_down {
            s += &format!(" --max-down {m}");
        }
        for b in &self.bug {
            s += &format!(" --bug {b}");
        }
        if self.swarm {
            s += " --swarm";
        }
        s
    }

    /// The command that replays `seed` with these flags.
    pub fn replay_command(&self, seed: u64) -> String {
        format!("skein sim replay --seed {seed}{}", self.flags())
    }
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The seed: it decides every random choice of the run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub opts: SimOpts,
    /// Write every event of the run as JSON lines to FILE.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Write the client history (JSON lines, docs/history.md) to FILE.
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    /// Write the run's viewer to FILE: one self-contained HTML page (a space-time diagram
    /// of nodes, clients, messages, faults, replica states and violations; docs/teaching.md).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the run's report directory to DIR (created): the history, latency, quantiles,
    /// rate, unseen and lag plots with the faults in lanes, the timeline and index.html, in
    /// simulated seconds (docs/jepsen.md, "Reading the reports"). The run is the same.
    #[arg(long, value_name = "DIR")]
    pub plots: Option<PathBuf>,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Seeds to run, as START..END (END excluded).
    #[arg(long, default_value = "0..100", value_parser = parse_seeds)]
    pub seeds: SeedRange,
    /// Worker threads [default: the number of cores].
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Run only shard K of M (1-based): seeds whose position in the range is K-1 modulo M.
    #[arg(long, value_parser = parse_shard, value_name = "K/M")]
    pub shard: Option<(u64, u64)>,
    #[command(flatten)]
    pub opts: SimOpts,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Also print every seed's trace hash.
    #[arg(long)]
    pub hashes: bool,
    /// Write every seed's result to FILE (JSON Lines: a header, then one line per seed:
    /// verdict, failed invariants, trace hash, events, sim and wall time), for `sim merge`.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Results files written by `sim sweep --json` (the shards of one sweep, any order).
    #[arg(required = true, value_name = "FILES")]
    pub files: Vec<PathBuf>,
    /// Also write the merged results to FILE (the same format).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ShrinkArgs {
    /// The failing seed.
    #[arg(long)]
    pub seed: u64,
    #[command(flatten)]
    pub opts: SimOpts,
    /// The invariant that must keep failing [default: the first to fail].
    #[arg(long)]
    pub invariant: Option<String>,
    /// At most this many simulations while searching.
    #[arg(long, default_value_t = 300)]
    pub max_runs: usize,
    /// Where to write the scenario [default: shrunk-seed-N.toml].
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Also write the viewer of the shrunk run to FILE (see `sim run --html`).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// No progress output.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Args, Debug)]
pub struct ZooArgs {
    /// Seeds to sweep, as START..END, split into `--windows` disjoint windows.
    #[arg(long, default_value = "0..200", value_parser = parse_seeds)]
    pub seeds: SeedRange,
    /// Disjoint seed windows to measure seeds-to-first-finding in.
    #[arg(long, default_value_t = 5)]
    pub windows: u64,
    /// Worker threads [default: the number of cores].
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Cluster, workload and fault flags (`--duration` defaults to 20s here); `--bug`
    /// picks the bugs to measure [default: every bug in the zoo].
    #[command(flatten)]
    pub opts: SimOpts,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Time to bug: per bug, `--windows` independent attempts, each running seeds one
    /// after another (attempt K from START + K x `--cap-seeds`; END is not used) until
    /// the first safety finding or a cap; prints seeds and CPU-seconds to the finding
    /// (docs/search.md).
    #[arg(long)]
    pub time_to_bug: bool,
    /// With `--time-to-bug`: at most this many seeds per attempt.
    #[arg(long, default_value_t = 300, value_name = "N")]
    pub cap_seeds: u64,
    /// With `--time-to-bug`: at most this much CPU time per attempt (runs of the bug
    /// only; the correct-core check of a finding is not counted).
    #[arg(long, default_value = "120s", value_parser = duration_arg, value_name = "DURATION")]
    pub cap_cpu: SimTime,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Seeds to run (each one whole simulation).
    #[arg(long, default_value_t = 3)]
    pub seeds: u64,
    /// Simulated duration of each run.
    #[arg(long, default_value = "60s", value_parser = duration_arg)]
    pub duration: SimTime,
    /// Produce requests per simulated second.
    #[arg(long, default_value_t = 1000.0)]
    pub produce_rate: f64,
    /// Fault intensity (0 = steady state, the figure in docs/PERFORMANCE.md).
    #[arg(long, default_value_t = 0.0)]
    pub fault_rate: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedRange {
    pub start: u64,
    pub end: u64,
}

pub fn parse_seeds(s: &str) -> Result<SeedRange, String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("expected START..END, found {s:?}"))?;
    let start = a
        .trim()
        .parse()
        .map_err(|_| format!("bad start seed {a:?}"))?;
    let end = b
        .trim()
        .parse()
        .map_err(|_| format!("bad end seed {b:?}"))?;
    if end <= start {
        return Err(format!("empty seed range {s:?}"));
    }
    Ok(SeedRange { start, end })
}

pub fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let (k, m) = s
        .split_once('/')
        .ok_or_else(|| format!("expected K/M, found {s:?}"))?;
    let k: u64 = k.trim().parse().map_err(|_| format!("bad shard {k:?}"))?;
    let m: u64 = m
        .trim()
        .parse()
        .map_err(|_| format!("bad shard count {m:?}"))?;
    if m == 0 || k == 0 || k > m {
        return Err(format!("shard {s:?}: need 1 <= K <= M"));
    }
    Ok((k, m))
}

/// One row of `skein sim zoo`'s table: a bug (`None`: the correct core) and, per seed
/// window, how many seeds it took to find a safety violation.
#[derive(Clone, Debug)]
pub struct ZooRow {
    pub bug: Option<String>,
    /// Per window: the position (1-based) of the first seed failing safety, if any.
    pub to_find: Vec<Option<usize>>,
    /// Per window that found one: the sim time of that first violation.
    pub times: Vec<SimTime>,
    /// How many windows each invariant caught first.
    pub caught: BTreeMap<String, usize>,
    /// Seeds failing safety, over all windows.
    pub found_seeds: usize,
}

impl ZooRow {
    /// The row of `bug` from its sweep's `results` (sorted by seed), cut into `windows`
    /// windows of `per` seeds.
    pub fn new(bug: Option<String>, results: &[SeedResult], windows: usize, per: usize) -> Self {
        let mut to_find: Vec<Option<usize>> = Vec::new();
        let mut times: Vec<SimTime> = Vec::new();
        let mut caught: BTreeMap<String, usize> = BTreeMap::new();
        for w in 0..windows {
            let window = &results[w * per..(w + 1) * per];
            let first = window.iter().position(|o| o.first_safety.is_some());
            to_find.push(first.map(|i| i + 1));
            if let Some(i) = first {
                let s = window[i].first_safety.as_ref().expect("found");
                times.push(s.at);
                *caught.entry(s.invariant.clone()).or_default() += 1;
            }
        }
        let found_seeds = results.iter().filter(|o| o.first_safety.is_some()).count();
        Self {
            bug,
            to_find,
            times,
            caught,
            found_seeds,
        }
    }
}

/// `skein sim zoo`'s table (Markdown) of `rows`, windows of `per` seeds out of `seeds`;
/// and whether some bug was missed in some window.
pub fn zoo_table(rows: Vec<ZooRow>, per: usize, seeds: usize) -> (String, bool) {
    let mut o = String::new();
    let per_label = format!("> {per}");
    let median = |v: &mut Vec<usize>| -> Option<usize> {
        v.sort_unstable();
        v.get(v.len() / 2).copied()
    };
    let _ = writeln!(o, "| bug | caught by (first safety violation) | seeds to find: median | worst | sim time to first violation: median (range) | seeds failing safety |");
    let _ = writeln!(o, "| --- | --- | --- | --- | --- | --- |");
    let mut missing = false;
    for row in rows {
        let ZooRow {
            bug,
            to_find,
            mut times,
            caught,
            found_seeds,
        } = row;
        let mut found: Vec<usize> = to_find.iter().flatten().copied().collect();
        let all_found = found.len() == to_find.len();
        let med = if found.len() * 2 > to_find.len() {
            median(&mut found).map_or(per_label.clone(), |m| m.to_string())
        } else {
            per_label.clone()
        };
        let worst = if all_found {
            found
                .iter()
                .max()
                .map_or(per_label.clone(), |m| m.to_string())
        } else {
            per_label.clone()
        };
        times.sort_unstable();
        let time = match (times.first(), times.last()) {
            (Some(lo), Some(hi)) => format!(
                "{} ({}-{})",
                Human(times[times.len() / 2]),
                Human(*lo),
                Human(*hi)
            ),
            _ => "-".into(),
        };
        let by: Vec<String> = caught.iter().map(|(k, n)| format!("{k} ({n})")).collect();
        let label = bug
            .clone()
            .unwrap_or_else(|| "(none: the correct core)".into());
        if bug.is_some() && !all_found {
            missing = true;
        }
        let _ = writeln!(
            o,
            "| {label} | {} | {med} | {worst} | {time} | {found_seeds}/{} |",
            if by.is_empty() {
                "-".into()
            } else {
                by.join(", ")
            },
            seeds
        );
    }
    (o, missing)
}

/// `skein sim bench`'s lines for one seed's run, which took `wall` seconds.
pub fn bench_lines(seed: u64, report: &SimReport, wall: f64) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "seed {seed}: {} events in {:.3}s wall for {:.1}s simulated: {:.0} events/s, {:.1} sim-s per wall-s ({})",
        report.events,
        wall,
        report.sim_time as f64 / 1e9,
        report.events as f64 / wall,
        report.sim_time as f64 / 1e9 / wall,
        if report.passed() { "pass" } else { "FAIL" }
    );
    // Deterministic work counters (same seed and binary, same numbers, whatever the
    // machine's load): what docs/PERFORMANCE.md records per commit to catch a
    // regression that wall time on a shared machine would hide.
    let sim_s = report.sim_time as f64 / 1e9;
    let per_event = |n: u64| n as f64 / report.events.max(1) as f64;
    let _ = writeln!(
        o,
        "  work: {:.0} events per sim-s, {:.3} messages/event, {:.3} disk reads/event, {:.0} bytes read/event, {:.3} disk appends/event (trace hash {:016x})",
        report.events as f64 / sim_s.max(1e-9),
        per_event(report.net.sent),
        per_event(report.work.disk_reads),
        per_event(report.work.disk_read_bytes),
        per_event(report.work.disk_appends),
        report.trace_hash
    );
    o
}

/// The description a shrunk scenario file carries: where it came from and what it is.
pub fn shrink_description(opts: &SimOpts, seed: u64, shrunk: &Shrunk) -> String {
    format!(
        "Shrunk by `skein sim shrink` from `{}` ({} faults over {}) to {} faults over {}, {} producers, {} consumers, {} requests/s; fails {} ({} runs).",
        opts.replay_command(seed),
        shrunk.original_faults,
        format_duration(shrunk.original_duration),
        shrunk.config.schedule.len(),
        format_duration(shrunk.config.duration),
        shrunk.config.producers,
        shrunk.config.consumers,
        shrunk.config.produce_rate,
        shrunk.invariant,
        shrunk.runs
    )
}

/// The command that runs a shrunk scenario file `out` of `seed` again (with the bugs and
/// history checking of `config`, which the file does not carry).
pub fn shrunk_replay_command(out: &Path, seed: u64, config: &SimConfig) -> String {
    let mut cmd = format!("skein sim run --scenario {} --seed {}", out.display(), seed);
    for b in &config.bugs {
        cmd += &format!(" --bug {b}");
    }
    if !config.check_history {
        cmd += " --no-history-check";
    }
    cmd
}

fn parse_commit_mode(s: &str) -> Result<crate::modes::CommitMode, String> {
    crate::modes::CommitMode::from_name(s)
        .ok_or_else(|| format!("expected sync, async or auto, found {s:?}"))
}

fn parse_workload(s: &str) -> Result<crate::modes::Workload, String> {
    crate::modes::Workload::from_name(s)
        .ok_or_else(|| format!("expected plain or txn, found {s:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_flag_sets_the_txn_workload_without_group_members() {
        let opts = SimOpts {
            workload: Some(crate::modes::Workload::Txn),
            ..SimOpts::default()
        };
        let c = opts.config(7).unwrap();
        assert_eq!(c.workload, crate::modes::Workload::Txn);
        assert_eq!(c.group_members, 0);
        assert_eq!(opts.flags(), " --workload txn");
        assert_eq!(
            SimOpts::default().config(7).unwrap().workload,
            Default::default()
        );
        assert!(parse_workload("batch").is_err());
        // Asked for explicitly, group members are refused (not silently dropped).
        let opts = SimOpts {
            group_members: Some(2),
            ..opts
        };
        assert!(opts.config(7).is_err());
    }

    #[test]
    fn parses_seed_ranges_and_shards() {
        assert_eq!(
            parse_seeds("0..1000"),
            Ok(SeedRange {
                start: 0,
                end: 1000
            })
        );
        assert!(parse_seeds("5..5").is_err());
        assert!(parse_seeds("x..5").is_err());
        assert_eq!(parse_shard("2/4"), Ok((2, 4)));
        assert!(parse_shard("0/4").is_err());
        assert!(parse_shard("5/4").is_err());
    }

    #[test]
    fn replay_command_repeats_the_flags() {
        let opts = SimOpts {
            duration: Some(10_000_000_000),
            brokers: Some(5),
            fault_rate: Some(2.0),
            bug: vec!["truncate-to-hw".into()],
            ..SimOpts::default()
        };
        assert_eq!(
            opts.replay_command(7),
            "skein sim replay --seed 7 --duration 10s --brokers 5 --fault-rate 2 --bug truncate-to-hw"
        );
    }
}
