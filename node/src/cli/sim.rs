//! `skein sim run|sweep|replay|bench`: seeded, deterministic fault simulations.
//!
//! Everything simulated lives in `skein-sim` and is single-threaded; this module adds what a
//! command line needs around it: flags, files, a progress bar, worker threads for sweeps
//! (each thread runs whole, independent seeds, so results do not depend on `--jobs`), and
//! wall-clock timing for `bench`.

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use skein_sim::config::SimConfig;
use skein_sim::report::SimReport;
use skein_sim::scenario::{Expect, Scenario};
use skein_sim::sweep::{SeedResult, SweepHeader, SweepResults};
use skein_sim::time::{format_duration, parse_duration, SimTime};
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(subcommand)]
    command: Box<SimCommand>,
}

#[derive(Subcommand, Debug)]
enum SimCommand {
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

fn duration_arg(s: &str) -> Result<SimTime, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// Cluster, workload and fault flags shared by every subcommand. Unset flags take the
/// scenario's value, then the default.
#[derive(Args, Debug, Clone, Default)]
pub struct SimOpts {
    /// A scenario file (TOML): cluster shape, workload, faults, expected verdict.
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
    /// Simulated duration of the run [default: 60s].
    #[arg(long, value_parser = duration_arg, value_name = "DURATION")]
    duration: Option<SimTime>,
    /// Liveness bound: after the last fault heals, everything must recover within this [default: 20s].
    #[arg(long, value_parser = duration_arg, value_name = "DURATION")]
    liveness: Option<SimTime>,
    /// Number of brokers [default: 3].
    #[arg(long)]
    brokers: Option<u32>,
    /// Partitions of the test topic [default: 6].
    #[arg(long)]
    partitions: Option<u32>,
    /// Replication factor [default: 3].
    #[arg(long)]
    replication_factor: Option<u32>,
    /// min.insync.replicas [default: 2].
    #[arg(long)]
    min_insync_replicas: Option<u32>,
    /// Simulated producers [default: 2].
    #[arg(long)]
    producers: Option<u32>,
    /// Simulated consumers [default: 2].
    #[arg(long)]
    consumers: Option<u32>,
    /// Members of a consumer group reading the topic, commit-after-process [default: 2;
    /// scenarios: none unless they set `group_members`].
    #[arg(long)]
    group_members: Option<u32>,
    /// Produce requests per simulated second, all producers together [default: 200].
    #[arg(long)]
    produce_rate: Option<f64>,
    /// Fault intensity: 0 = no faults and a perfect network, 1 = default, 2 = twice as many.
    #[arg(long)]
    fault_rate: Option<f64>,
    /// Relative weights of fault kinds in random schedules, e.g. `crash=0,partition=5`
    /// (kinds: crash power-loss controller-crash pause clock partition clog bit-flip
    /// read-errors disk-full slow-disk member-crash member-pause client-crash client-pause
    /// client-isolate).
    #[arg(long, value_name = "KIND=N,...")]
    fault_weights: Option<String>,
    /// At most this many brokers crashed or paused at once in random schedules [default: 1].
    #[arg(long)]
    max_down: Option<u32>,
    /// Do not run the history checker at the end.
    #[arg(long)]
    no_history_check: bool,
    /// Leave bit flips out of random fault schedules (see "known findings" in
    /// docs/simulation.md: a flipped bit in the last in-sync copy of a partition leaves it leaderless).
    #[arg(long)]
    no_bit_flips: bool,
    /// Switch a historical bug back on in the core (bug zoo; see docs/simulation.md).
    #[arg(long, value_name = "NAME")]
    bug: Vec<String>,
}

impl SimOpts {
    /// The run configuration: defaults, then the scenario, then flags.
    fn config(&self, seed: u64) -> anyhow::Result<SimConfig> {
        let mut c = SimConfig::default();
        if let Some(rate) = self.fault_rate {
            if !(rate.is_finite() && rate >= 0.0) {
                bail!("--fault-rate must be a number >= 0");
            }
            c = c.with_fault_rate(rate);
        }
        if let Some(path) = &self.scenario {
            let sc = Scenario::load(path)?;
            c.apply_scenario(&sc);
        }
        c.seed = seed;
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = self.$f { c.$f = v; } )* };
        }
        set!(
            duration,
            liveness,
            brokers,
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
        if self.no_history_check {
            c.check_history = false;
        }
        if self.no_bit_flips {
            c.rates.bit_flip = 0;
        }
        if let Some(w) = &self.fault_weights {
            c.rates
                .set_weights(w)
                .map_err(|e| anyhow::anyhow!("--fault-weights: {e}"))?;
        }
        if let Some(m) = self.max_down {
            c.rates.max_down = m;
        }
        c.bugs = self.bug.clone();
        c.validate().map_err(anyhow::Error::msg)?;
        Ok(c)
    }

    /// The flags as they would be typed, for replay commands.
    fn flags(&self) -> String {
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
            partitions => "partitions",
            replication_factor => "replication-factor",
            min_insync_replicas => "min-insync-replicas",
            producers => "producers",
            consumers => "consumers",
            group_members => "group-members",
            produce_rate => "produce-rate",
            fault_rate => "fault-rate"
        );
        if self.no_history_check {
            s += " --no-history-check";
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
        s
    }

    fn replay_command(&self, seed: u64) -> String {
        format!("skein sim replay --seed {seed}{}", self.flags())
    }
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The seed: it decides every random choice of the run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    opts: SimOpts,
    /// Write every event of the run as JSON lines to FILE.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Write the client history (JSON lines, docs/history.md) to FILE.
    #[arg(long, value_name = "FILE")]
    history: Option<PathBuf>,
    /// Write the run's viewer to FILE: one self-contained HTML page (a space-time diagram
    /// of nodes, clients, messages, faults, replica states and violations; docs/teaching.md).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Seeds to run, as START..END (END excluded).
    #[arg(long, default_value = "0..100", value_parser = parse_seeds)]
    seeds: SeedRange,
    /// Worker threads [default: the number of cores].
    #[arg(long)]
    jobs: Option<usize>,
    /// Run only shard K of M (1-based): seeds whose position in the range is K-1 modulo M.
    #[arg(long, value_parser = parse_shard, value_name = "K/M")]
    shard: Option<(u64, u64)>,
    #[command(flatten)]
    opts: SimOpts,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Also print every seed's trace hash.
    #[arg(long)]
    hashes: bool,
    /// Write every seed's result to FILE (JSON Lines: a header, then one line per seed:
    /// verdict, failed invariants, trace hash, events, sim and wall time), for `sim merge`.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Results files written by `sim sweep --json` (the shards of one sweep, any order).
    #[arg(required = true, value_name = "FILES")]
    files: Vec<PathBuf>,
    /// Also write the merged results to FILE (the same format).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ShrinkArgs {
    /// The failing seed.
    #[arg(long)]
    seed: u64,
    #[command(flatten)]
    opts: SimOpts,
    /// The invariant that must keep failing [default: the first to fail].
    #[arg(long)]
    invariant: Option<String>,
    /// At most this many simulations while searching.
    #[arg(long, default_value_t = 300)]
    max_runs: usize,
    /// Where to write the scenario [default: shrunk-seed-N.toml].
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Also write the viewer of the shrunk run to FILE (see `sim run --html`).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// No progress output.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args, Debug)]
pub struct ZooArgs {
    /// Seeds to sweep, as START..END, split into `--windows` disjoint windows.
    #[arg(long, default_value = "0..200", value_parser = parse_seeds)]
    seeds: SeedRange,
    /// Disjoint seed windows to measure seeds-to-first-finding in.
    #[arg(long, default_value_t = 5)]
    windows: u64,
    /// Worker threads [default: the number of cores].
    #[arg(long)]
    jobs: Option<usize>,
    /// Cluster, workload and fault flags (`--duration` defaults to 20s here); `--bug`
    /// picks the bugs to measure [default: every bug in the zoo].
    #[command(flatten)]
    opts: SimOpts,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Seeds to run (each one whole simulation).
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// Simulated duration of each run.
    #[arg(long, default_value = "60s", value_parser = duration_arg)]
    duration: SimTime,
    /// Produce requests per simulated second.
    #[arg(long, default_value_t = 1000.0)]
    produce_rate: f64,
    /// Fault intensity (0 = steady state, the figure in docs/PERFORMANCE.md).
    #[arg(long, default_value_t = 0.0)]
    fault_rate: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedRange {
    start: u64,
    end: u64,
}

fn parse_seeds(s: &str) -> Result<SeedRange, String> {
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

fn parse_shard(s: &str) -> Result<(u64, u64), String> {
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

pub fn run(args: SimArgs) -> anyhow::Result<ExitCode> {
    match *args.command {
        SimCommand::Run(a) | SimCommand::Replay(a) => run_one(a),
        SimCommand::Sweep(a) => sweep(a),
        SimCommand::Bench(a) => bench(a),
        SimCommand::Shrink(a) => shrink(a),
        SimCommand::Zoo(a) => zoo(a),
        SimCommand::Merge(a) => merge(a),
    }
}

/// Whether the report meets the expectation (a scenario's `[expect]`, else "pass").
fn meets_expectation(report: &SimReport, expect: &Option<Expect>) -> bool {
    Expect::met(expect.as_ref(), report)
}

fn create(path: &PathBuf) -> anyhow::Result<Box<dyn Write>> {
    let f =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    Ok(Box::new(BufWriter::new(f)))
}

fn run_one(a: RunArgs) -> anyhow::Result<ExitCode> {
    let config = a.opts.config(a.seed)?;
    let trace = a.trace.as_ref().map(create).transpose()?;
    let history = a.history.as_ref().map(create).transpose()?;
    let report = match &a.html {
        None => skein_sim::run(&config, trace, history)?,
        Some(path) => {
            let title = format!("skein sim run --seed {}{}", a.seed, a.opts.flags());
            let report = write_viewer(&config, trace, history, &title, path)?;
            eprintln!("wrote {} (open it in a browser)", path.display());
            report
        }
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{report}");
        if let Some(h) = &report.history_summary {
            println!("history check:\n{h}");
        }
    }
    let ok = meets_expectation(&report, &config.expect);
    if let Some(e) = &config.expect {
        println!(
            "expected     {} -> {}",
            e,
            if ok { "met" } else { "NOT met" }
        );
    }
    if ok {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("replay with: {}", a.opts.replay_command(a.seed));
        Ok(ExitCode::from(1))
    }
}

/// Runs `config` with the viewer's recorder attached and writes its page to `path`.
fn write_viewer(
    config: &SimConfig,
    trace: Option<Box<dyn Write>>,
    history: Option<Box<dyn Write>>,
    title: &str,
    path: &PathBuf,
) -> anyhow::Result<SimReport> {
    let (report, recorder) = skein_sim::run_recorded(config, trace, history)?;
    let mut out = create(path)?;
    skein_sim::viewer::write_html(&recorder, &report, title, &mut out)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(report)
}

/// Runs `seeds` on `jobs` threads; the result is sorted by seed and independent of `jobs`.
pub fn run_seeds(
    opts: &SimOpts,
    seeds: &[u64],
    jobs: usize,
    on_done: &mut dyn FnMut(&SeedResult),
) -> anyhow::Result<Vec<SeedResult>> {
    // Validate the flags once, up front, so a bad scenario is one error, not one per seed.
    let template = opts.config(seeds.first().copied().unwrap_or(0))?;
    let next = Arc::new(AtomicUsize::new(0));
    let seeds: Arc<Vec<u64>> = Arc::new(seeds.to_vec());
    let (tx, rx) = mpsc::channel::<SeedResult>();
    let mut results = BTreeMap::new();
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            let (next, seeds, tx, template) =
                (next.clone(), seeds.clone(), tx.clone(), template.clone());
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&seed) = seeds.get(i) else { break };
                let config = SimConfig {
                    seed,
                    ..template.clone()
                };
                let started = Instant::now();
                let run = skein_sim::run(&config, None, None);
                let wall_ms = started.elapsed().as_secs_f64() * 1e3;
                let outcome = match run {
                    Ok(r) => {
                        SeedResult::from_report(&r, meets_expectation(&r, &config.expect), wall_ms)
                    }
                    Err(e) => SeedResult::from_error(seed, e.to_string(), wall_ms),
                };
                if tx.send(outcome).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        for outcome in rx {
            on_done(&outcome);
            results.insert(outcome.seed, outcome);
        }
    });
    Ok(results.into_values().collect())
}

fn sweep(a: SweepArgs) -> anyhow::Result<ExitCode> {
    let (k, m) = a.shard.unwrap_or((1, 1));
    let header = SweepHeader {
        format: skein_sim::sweep::FORMAT_VERSION,
        start: a.seeds.start,
        end: a.seeds.end,
        shard_k: k,
        shard_m: m,
        flags: a.opts.flags(),
    };
    let seeds = header.seeds();
    // Open the results file before running anything: a typo should not cost a sweep.
    let mut json = a.json.as_ref().map(create).transpose()?;
    let jobs = a.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let bar = if a.quiet {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(seeds.len() as u64)
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} seeds, {per_sec}, {msg}",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    let started = Instant::now();
    let mut failures = 0u64;
    let results = run_seeds(&a.opts, &seeds, jobs, &mut |o| {
        if !o.ok() {
            failures += 1;
        }
        bar.set_message(format!("{failures} failing"));
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    let wall = started.elapsed().as_secs_f64();
    if let (Some(out), Some(path)) = (json.as_mut(), &a.json) {
        skein_sim::sweep::write_results(&header, &results, out)
            .and_then(|()| out.flush())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if a.hashes {
        for o in &results {
            println!("seed {} hash {}", o.seed, o.trace_hash);
        }
    }
    let results = SweepResults {
        header,
        seeds: results,
        missing: Vec::new(),
    };
    print!("{}", results.summary());
    println!(
        "{:.1}s wall, {:.1} seeds/s, {} jobs",
        wall,
        results.seeds.len() as f64 / wall.max(1e-9),
        jobs
    );
    Ok(if results.failing().next().is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `skein sim merge`: the shards of one sweep, from any machines, as one report.
fn merge(a: MergeArgs) -> anyhow::Result<ExitCode> {
    let mut files = Vec::new();
    for path in &a.files {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        files.push((path.display().to_string(), text));
    }
    let merged = skein_sim::sweep::merge(&files).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(path) = &a.json {
        let mut out = create(path)?;
        skein_sim::sweep::write_results(&merged.header, &merged.seeds, &mut out)
            .and_then(|()| out.flush())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    print!("{}", merged.summary());
    println!(
        "{} files merged; the runs took {:.1}s of wall time in all",
        a.files.len(),
        merged.wall_ms() / 1e3
    );
    Ok(if !merged.missing.is_empty() {
        ExitCode::from(2)
    } else if merged.failing().next().is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn shrink(a: ShrinkArgs) -> anyhow::Result<ExitCode> {
    let config = a.opts.config(a.seed)?;
    let bar = if a.quiet {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new_spinner()
    };
    bar.set_draw_target(if a.quiet {
        indicatif::ProgressDrawTarget::hidden()
    } else {
        indicatif::ProgressDrawTarget::stderr()
    });
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
            .expect("static template"),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar.set_message(format!("running seed {}", a.seed));
    let shrunk = skein_sim::shrink::shrink(&config, a.invariant.as_deref(), a.max_runs, &mut |p| {
        bar.set_message(format!(
            "{} runs, shrinking {}: {} faults, {}",
            p.runs,
            p.phase,
            p.faults,
            format_duration(p.duration)
        ))
    });
    bar.finish_and_clear();
    let shrunk = shrunk?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("shrunk-seed-{}.toml", a.seed)));
    let name = format!("shrunk-seed-{}", a.seed);
    let description = format!(
        "Shrunk by `skein sim shrink` from `{}` ({} faults over {}) to {} faults over {}, {} producers, {} consumers, {} requests/s; fails {} ({} runs).",
        a.opts.replay_command(a.seed),
        shrunk.original_faults,
        format_duration(shrunk.original_duration),
        shrunk.config.schedule.len(),
        format_duration(shrunk.config.duration),
        shrunk.config.producers,
        shrunk.config.consumers,
        shrunk.config.produce_rate,
        shrunk.invariant,
        shrunk.runs
    );
    let text =
        skein_sim::shrink::scenario_toml(&shrunk.config, &name, &description, shrunk.invariant);
    // Prove the file reproduces the run: parse it back, run it, compare trace hashes.
    let sc = Scenario::parse(&out.display().to_string(), &text)
        .context("the written scenario does not parse (a bug in the writer)")?;
    let mut replay = SimConfig::default();
    replay.apply_scenario(&sc);
    replay.seed = a.seed;
    replay.bugs = config.bugs.clone();
    replay.check_history = config.check_history;
    let r = skein_sim::run(&replay, None, None)?;
    let reproduced = r.trace_hash == shrunk.report.trace_hash
        && r.failed_invariants().contains(&shrunk.invariant);
    println!(
        "seed {}: {} fails; shrunk from {} faults over {} to {} faults over {} in {} runs",
        a.seed,
        shrunk.invariant,
        shrunk.original_faults,
        format_duration(shrunk.original_duration),
        shrunk.config.schedule.len(),
        format_duration(shrunk.config.duration),
        shrunk.runs
    );
    if !reproduced {
        eprintln!(
            "the scenario file does NOT reproduce the shrunk run (trace {:016x}, expected {:016x}; failed {:?}); not written",
            r.trace_hash,
            shrunk.report.trace_hash,
            r.failed_invariants()
        );
        return Ok(ExitCode::from(2));
    }
    std::fs::write(&out, &text).with_context(|| format!("cannot write {}", out.display()))?;
    let mut cmd = format!(
        "skein sim run --scenario {} --seed {}",
        out.display(),
        a.seed
    );
    for b in &config.bugs {
        cmd += &format!(" --bug {b}");
    }
    if !config.check_history {
        cmd += " --no-history-check";
    }
    println!(
        "wrote {} (re-run: same trace hash {:016x})",
        out.display(),
        r.trace_hash
    );
    println!("replay: {cmd}");
    if let Some(path) = &a.html {
        write_viewer(&replay, None, None, &cmd, path)?;
        println!("wrote {} (the shrunk run's viewer)", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Per bug: seeds to the first safety finding in each window, and when it showed.
fn zoo(a: ZooArgs) -> anyhow::Result<ExitCode> {
    let bugs: Vec<String> = if a.opts.bug.is_empty() {
        skein_sim::BUG_NAMES.iter().map(|s| s.to_string()).collect()
    } else {
        a.opts.bug.clone()
    };
    let mut base = a.opts.clone();
    base.bug.clear();
    if base.duration.is_none() {
        base.duration = Some(20 * skein_sim::time::SECS);
    }
    let jobs = a.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let seeds: Vec<u64> = (a.seeds.start..a.seeds.end).collect();
    let windows = a.windows.clamp(1, seeds.len() as u64) as usize;
    let per = seeds.len() / windows;
    let bar = if a.quiet {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new((seeds.len() * (bugs.len() + 1)) as u64)
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} runs {msg}",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    let started = Instant::now();
    let mut rows = Vec::new();
    // The correct core first: a finding there would make every row meaningless.
    let mut all: Vec<Option<String>> = vec![None];
    all.extend(bugs.iter().cloned().map(Some));
    for bug in &all {
        bar.set_message(bug.clone().unwrap_or_else(|| "no bug".into()));
        let opts = SimOpts {
            bug: bug.iter().cloned().collect(),
            ..base.clone()
        };
        let results = run_seeds(&opts, &seeds, jobs, &mut |_| bar.inc(1))?;
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
        rows.push((bug.clone(), to_find, times, caught, found_seeds));
    }
    bar.finish_and_clear();
    let per_label = format!("> {per}");
    let median = |v: &mut Vec<usize>| -> Option<usize> {
        v.sort_unstable();
        v.get(v.len() / 2).copied()
    };
    println!(
        "`skein sim zoo --seeds {}..{} --windows {windows}{}`: {} seeds per bug in {windows} windows of {per}, no scenario; {:.0}s wall on {jobs} jobs.\n",
        a.seeds.start,
        a.seeds.end,
        base.flags(),
        seeds.len(),
        started.elapsed().as_secs_f64()
    );
    println!("| bug | caught by (first safety violation) | seeds to find: median | worst | sim time to first violation: median (range) | seeds failing safety |");
    println!("| --- | --- | --- | --- | --- | --- |");
    let mut missing = false;
    for (bug, to_find, mut times, caught, found_seeds) in rows {
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
                skein_sim::time::Human(times[times.len() / 2]),
                skein_sim::time::Human(*lo),
                skein_sim::time::Human(*hi)
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
        println!(
            "| {label} | {} | {med} | {worst} | {time} | {found_seeds}/{} |",
            if by.is_empty() {
                "-".into()
            } else {
                by.join(", ")
            },
            seeds.len()
        );
    }
    Ok(if missing {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn bench(a: BenchArgs) -> anyhow::Result<ExitCode> {
    let mut total_events = 0u64;
    let mut total_sim = 0u64;
    let mut total_wall = 0f64;
    for seed in 0..a.seeds {
        let config = SimConfig::bench(seed, a.duration, a.produce_rate, a.fault_rate);
        config.validate().map_err(anyhow::Error::msg)?;
        let started = Instant::now();
        let report = skein_sim::run(&config, None, None)?;
        let wall = started.elapsed().as_secs_f64();
        println!(
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
        println!(
            "  work: {:.0} events per sim-s, {:.3} messages/event, {:.3} disk reads/event, {:.0} bytes read/event, {:.3} disk appends/event (trace hash {:016x})",
            report.events as f64 / sim_s.max(1e-9),
            per_event(report.net.sent),
            per_event(report.work.disk_reads),
            per_event(report.work.disk_read_bytes),
            per_event(report.work.disk_appends),
            report.trace_hash
        );
        total_events += report.events;
        total_sim += report.sim_time;
        total_wall += wall;
    }
    println!(
        "total: {:.0} events/s, {:.1} simulated seconds per wall second ({} brokers, {} produce req/s, fault rate {}, one core)",
        total_events as f64 / total_wall,
        total_sim as f64 / 1e9 / total_wall,
        SimConfig::default().brokers,
        a.produce_rate,
        a.fault_rate
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn sweep_results_do_not_depend_on_jobs() {
        let opts = SimOpts {
            duration: Some(3_000_000_000),
            liveness: Some(1_000_000_000),
            produce_rate: Some(20.0),
            no_history_check: true,
            ..SimOpts::default()
        };
        let seeds: Vec<u64> = (0..6).collect();
        let one = run_seeds(&opts, &seeds, 1, &mut |_| {}).unwrap();
        let two = run_seeds(&opts, &seeds, 2, &mut |_| {}).unwrap();
        assert_eq!(one, two);
        assert_eq!(one.iter().map(|o| o.seed).collect::<Vec<_>>(), seeds);
    }

    #[test]
    fn four_merged_shards_equal_the_unsharded_sweep() {
        let opts = SimOpts {
            duration: Some(3_000_000_000),
            liveness: Some(1_000_000_000),
            produce_rate: Some(20.0),
            fault_rate: Some(3.0),
            no_history_check: true,
            ..SimOpts::default()
        };
        let file = |k: u64, m: u64| {
            let header = SweepHeader {
                format: skein_sim::sweep::FORMAT_VERSION,
                start: 5,
                end: 17,
                shard_k: k,
                shard_m: m,
                flags: opts.flags(),
            };
            let results = run_seeds(&opts, &header.seeds(), 1, &mut |_| {}).unwrap();
            let mut out = Vec::new();
            skein_sim::sweep::write_results(&header, &results, &mut out).unwrap();
            (format!("shard-{k}-of-{m}"), String::from_utf8(out).unwrap())
        };
        let whole = skein_sim::sweep::merge(&[file(1, 1)]).unwrap();
        let shards: Vec<(String, String)> = (1..=4).rev().map(|k| file(k, 4)).collect();
        let merged = skein_sim::sweep::merge(&shards).unwrap();
        assert_eq!(merged.seeds.len(), 12);
        assert!(merged.missing.is_empty());
        assert_eq!(merged, whole);
        assert_eq!(merged.summary().to_string(), whole.summary().to_string());
    }
}
