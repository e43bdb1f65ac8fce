//! `skein sim run|sweep|replay|bench`: seeded, deterministic fault simulations.
//!
//! Everything simulated lives in `skein-sim` and is single-threaded, and so do the
//! subcommands' arguments, the mapping from flags to a run configuration and the reports'
//! text (`skein_sim::cli`). This module dispatches and adds what needs the machine: files,
//! progress bars, worker threads for sweeps (each thread runs whole, independent seeds, so
//! results do not depend on `--jobs`), and wall-clock timing for `bench`.

use anyhow::Context;
pub use skein_sim::cli::SimArgs;
use skein_sim::cli::{
    BenchArgs, MergeArgs, RunArgs, ShrinkArgs, SimCommand, SimOpts, SweepArgs, ZooArgs, ZooRow,
};
use skein_sim::config::SimConfig;
use skein_sim::report::SimReport;
use skein_sim::scenario::{Expect, Scenario};
use skein_sim::sweep::{SeedResult, SweepHeader, SweepResults};
use skein_sim::time::format_duration;
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

pub fn run(args: SimArgs) -> anyhow::Result<ExitCode> {
    crate::memory::no_huge_pages_for_simulation();
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
    // --plots reads the history back: it goes to --history, else into the directory.
    let history_path = a
        .history
        .clone()
        .or_else(|| a.plots.as_ref().map(|d| d.join("history.jsonl")));
    if let Some(dir) = &a.plots {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create --plots {}", dir.display()))?;
    }
    let history = history_path.as_ref().map(create).transpose()?;
    let title = format!("skein sim run --seed {}{}", a.seed, a.opts.flags());
    let report = if a.html.is_none() && a.plots.is_none() {
        skein_sim::run(&config, trace, history)?
    } else {
        // The recorder watches the trace; the run (and its hash) is the same.
        let (report, recorder) = skein_sim::run_recorded(&config, trace, history)?;
        if let Some(path) = &a.html {
            let mut out = create(path)?;
            skein_sim::viewer::write_html(&recorder, &report, &title, &mut out)
                .and_then(|()| out.flush())
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("wrote {} (open it in a browser)", path.display());
        }
        if let (Some(dir), Some(history)) = (&a.plots, &history_path) {
            write_plots(dir, history, &title, &config, &report, &recorder)?;
        }
        report
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        if let Some(mix) = a.opts.swarm_mix(a.seed) {
            println!("swarm mix    {mix}");
        }
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

/// `--plots DIR`: the run's report directory, from the history written to `history`.
fn write_plots(
    dir: &std::path::Path,
    history: &std::path::Path,
    title: &str,
    config: &SimConfig,
    report: &SimReport,
    recorder: &skein_sim::viewer::Recorder,
) -> anyhow::Result<()> {
    let file = std::fs::File::open(history)
        .with_context(|| format!("cannot read the history back from {}", history.display()))?;
    let events = skein_jepsen::read_history(std::io::BufReader::new(file))
        .with_context(|| format!("bad history {}", history.display()))?;
    let rel = |p: &std::path::Path| {
        p.strip_prefix(dir)
            .map(|r| r.display().to_string())
            .unwrap_or_else(|_| {
                std::fs::canonicalize(p)
                    .map(|c| format!("file://{}", c.display()))
                    .unwrap_or_else(|_| p.display().to_string())
            })
    };
    let files = vec![(rel(history), "the client history (docs/history.md)".into())];
    let written =
        skein_sim::plots::write_report(dir, &events, title, config, report, recorder, files)
            .with_context(|| format!("cannot write the plots into --plots {}", dir.display()))?;
    eprintln!(
        "wrote {} files into {} (open index.html)",
        written.len(),
        dir.display()
    );
    Ok(())
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

/// Runs one seed's configuration (begun at `started`) into its result.
fn run_seed(config: &SimConfig, started: Instant) -> SeedResult {
    let run = skein_sim::run(config, None, None);
    let wall_ms = started.elapsed().as_secs_f64() * 1e3;
    match run {
        Ok(r) => SeedResult::from_report(&r, meets_expectation(&r, &config.expect), wall_ms),
        Err(e) => SeedResult::from_error(config.seed, e.to_string(), wall_ms),
    }
}

/// Runs `seeds` on `jobs` threads; the result is sorted by seed and independent of `jobs`.
pub fn run_seeds(
    opts: &SimOpts,
    seeds: &[u64],
    jobs: usize,
    on_done: &mut dyn FnMut(&SeedResult),
) -> anyhow::Result<Vec<SeedResult>> {
    // Validate the flags once, up front, so a bad scenario is one error, not one per seed.
    let template = opts.base()?;
    opts.config_from(template.clone(), seeds.first().copied().unwrap_or(0))?;
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
                let started = Instant::now();
                let mut outcome = match opts.config_from(template.clone(), seed) {
                    Ok(config) => run_seed(&config, started),
                    Err(e) => SeedResult::from_error(seed, e.to_string(), 0.0),
                };
                outcome.swarm = opts.swarm_mix(seed);
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
    if let (Some(out), Some(path)) = (json.as_mut(), &a.json) {
        skein_sim::sweep::write_results(&results.header, &results.seeds, out)
            .and_then(|()| skein_sim::sweep::write_sometimes(&results, out))
            .and_then(|()| out.flush())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
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
            .and_then(|()| skein_sim::sweep::write_sometimes(&merged, &mut out))
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
    let description = skein_sim::cli::shrink_description(&a.opts, a.seed, &shrunk);
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
    let cmd = skein_sim::cli::shrunk_replay_command(&out, a.seed, &config);
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
    if a.time_to_bug {
        return super::time_to_bug::run(&a, &bugs, &base, jobs);
    }
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
        rows.push(ZooRow::new(bug.clone(), &results, windows, per));
    }
    bar.finish_and_clear();
    println!(
        "`skein sim zoo --seeds {}..{} --windows {windows}{}`: {} seeds per bug in {windows} windows of {per}, no scenario; {:.0}s wall on {jobs} jobs.\n",
        a.seeds.start,
        a.seeds.end,
        base.flags(),
        seeds.len(),
        started.elapsed().as_secs_f64()
    );
    let (table, missing) = skein_sim::cli::zoo_table(rows, per, seeds.len());
    print!("{table}");
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
        print!("{}", skein_sim::cli::bench_lines(seed, &report, wall));
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

    /// A `--swarm` sweep keeps each seed's mix, and `skein sim run --seed S --swarm`
    /// (`SimOpts::config`) replays the sweep's run of S: the same trace hash.
    #[test]
    fn a_swarm_sweep_seed_replays_with_run_swarm() {
        let opts = SimOpts {
            duration: Some(3_000_000_000),
            liveness: Some(1_000_000_000),
            produce_rate: Some(20.0),
            no_history_check: true,
            swarm: true,
            ..SimOpts::default()
        };
        let seeds: Vec<u64> = (3..7).collect();
        let swarm = run_seeds(&opts, &seeds, 2, &mut |_| {}).unwrap();
        for r in &swarm {
            assert_eq!(r.swarm, Some(skein_sim::swarm::SwarmMix::draw(r.seed)));
            let replay = skein_sim::run(&opts.config(r.seed).unwrap(), None, None).unwrap();
            assert_eq!(format!("{:016x}", replay.trace_hash), r.trace_hash);
        }
        let plain = SimOpts {
            swarm: false,
            ..opts
        };
        let plain = run_seeds(&plain, &seeds, 1, &mut |_| {}).unwrap();
        for (p, s) in plain.iter().zip(&swarm) {
            assert_eq!(p.swarm, None);
            assert_ne!(
                p.trace_hash, s.trace_hash,
                "seed {}: the mix moved the run",
                p.seed
            );
        }
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
