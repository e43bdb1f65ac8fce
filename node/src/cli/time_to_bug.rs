//! `skein sim zoo --time-to-bug`: per bug, seeds and CPU-seconds to the first safety
//! finding, over independent attempts (skein_sim::search holds the results and table).
//!
//! Attempts run on `--jobs` threads, each attempt on one thread whose CPU clock
//! (`CLOCK_THREAD_CPUTIME_ID`) times its runs, so the figures count the simulator's own
//! work whatever else shares the machine; which seeds an attempt runs and what they find
//! do not depend on `--jobs` (only where a CPU cap cuts an attempt short can).

use skein_sim::cli::{SimOpts, ZooArgs};
use skein_sim::config::SimConfig;
use skein_sim::search::{Attempt, Caps, Finding, TimeToBug};
use skein_sim::sweep::SeedResult;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// CPU seconds this thread has used.
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid, exclusive pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    debug_assert_eq!(rc, 0, "CLOCK_THREAD_CPUTIME_ID is supported on Linux");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The first safety violation of a run, if any (a run that could not be made: none).
fn safety(config: &SimConfig) -> Option<Finding> {
    let report = skein_sim::run(config, None, None).ok()?;
    let r = SeedResult::from_report(&report, report.passed(), 0.0);
    r.first_safety.map(|s| Finding {
        seed: config.seed,
        invariant: s.invariant,
        at: s.at,
    })
}

/// One attempt of `opts` (with its bug) from `first`: seeds in order until a finding the
/// correct core does not share, or a cap.
fn attempt(opts: &SimOpts, template: &SimConfig, first: u64, caps: Caps) -> Attempt {
    let mut a = Attempt {
        first_seed: first,
        seeds: 0,
        cpu_s: 0.0,
        found: None,
        correct_core_fails: Vec::new(),
    };
    while a.seeds < caps.seeds && a.cpu_s < caps.cpu_s {
        let seed = first + a.seeds;
        a.seeds += 1;
        let Ok(config) = opts.config_from(template.clone(), seed) else {
            continue;
        };
        let started = thread_cpu_s();
        let found = safety(&config);
        a.cpu_s += thread_cpu_s() - started;
        let Some(found) = found else { continue };
        // A failure the correct core has on the same seed is not this bug's.
        let correct = SimConfig {
            bugs: Vec::new(),
            ..config
        };
        if safety(&correct).is_some() {
            a.correct_core_fails.push(seed);
            continue;
        }
        a.found = Some(found);
        break;
    }
    a
}

/// Runs the measurement for `bugs` (`base` without bugs) and prints its table.
pub fn run(a: &ZooArgs, bugs: &[String], base: &SimOpts, jobs: usize) -> anyhow::Result<ExitCode> {
    let caps = Caps {
        seeds: a.cap_seeds.max(1),
        cpu_s: a.cap_cpu as f64 / 1e9,
    };
    let attempts = a.windows.max(1);
    let template = base.base()?;
    // Validate the flags once, up front (a bad --bug is one error, not one per seed).
    for bug in bugs {
        let opts = SimOpts {
            bug: vec![bug.clone()],
            ..base.clone()
        };
        opts.config_from(template.clone(), a.seeds.start)?;
    }
    let tasks: Vec<(usize, u64)> = (0..bugs.len())
        .flat_map(|b| (0..attempts).map(move |k| (b, k)))
        .collect();
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::<(usize, u64, Attempt)>::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(b, k)) = tasks.get(i) else { break };
                let opts = SimOpts {
                    bug: vec![bugs[b].clone()],
                    ..base.clone()
                };
                let first = a.seeds.start + k * caps.seeds;
                let got = attempt(&opts, &template, first, caps);
                if !a.quiet {
                    eprintln!(
                        "{} attempt {k}: {} after {} seeds, {:.1} CPU-s",
                        bugs[b],
                        got.found.as_ref().map_or("capped".to_string(), |f| format!(
                            "{} on seed {}",
                            f.invariant, f.seed
                        )),
                        got.seeds,
                        got.cpu_s
                    );
                }
                done.lock().expect("no worker panics").push((b, k, got));
            });
        }
    });
    let mut done = done.into_inner().expect("no worker panics");
    done.sort_by_key(|(b, k, _)| (*b, *k));
    let rows: Vec<TimeToBug> = bugs
        .iter()
        .enumerate()
        .map(|(b, bug)| TimeToBug {
            bug: bug.clone(),
            attempts: done
                .iter()
                .filter(|(db, _, _)| *db == b)
                .map(|(_, _, at)| at.clone())
                .collect(),
        })
        .collect();
    println!(
        "`skein sim zoo --time-to-bug --seeds {}..{} --windows {attempts} --cap-seeds {} --cap-cpu {}{}`: {} search, {attempts} attempts per bug (attempt K from seed {} + K x {}), caps {} seeds or {:.0} CPU-s per attempt, {jobs} jobs.\n",
        a.seeds.start,
        a.seeds.end,
        caps.seeds,
        skein_sim::time::format_duration(a.cap_cpu),
        base.flags(),
        if base.swarm { "swarm" } else { "plain random" },
        a.seeds.start,
        caps.seeds,
        caps.seeds,
        caps.cpu_s,
    );
    print!("{}", skein_sim::search::table(&rows, caps));
    Ok(if rows.iter().all(|r| r.found() == r.attempts.len()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
