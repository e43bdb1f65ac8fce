//! `skein sim shrink`'s search: a seed that a bug makes fail shrinks to a scenario with no
//! more faults than the original, which, written out and read back, fails the same invariant
//! with the same trace.

mod common;

use skein_sim::config::SimConfig;
use skein_sim::invariants::is_safety;
use skein_sim::scenario::Scenario;
use skein_sim::shrink::{scenario_toml, shrink};
use skein_sim::time::SECS;

#[test]
fn a_bug_found_by_a_random_seed_shrinks_to_a_scenario_that_reproduces_it() {
    let base = |seed| SimConfig {
        seed,
        duration: 12 * SECS,
        liveness: 4 * SECS,
        produce_rate: 60.0,
        bugs: vec!["ack-before-isr".into()],
        ..SimConfig::default()
    };
    let (cfg, original) = (0..10)
        .map(|seed| {
            let c = base(seed);
            let r = common::run(&c);
            (c, r)
        })
        .find(|(_, r)| r.failed_invariants().into_iter().any(is_safety))
        .expect("ack-before-isr fails some seed of 0..10");
    let first = original.violations[0].invariant;
    let mut steps = 0;
    let shrunk = shrink(&cfg, None, 60, &mut |_| steps += 1).expect("shrinks");
    assert_eq!(
        shrunk.invariant, first,
        "the same invariant as the original run"
    );
    assert!(steps > 0 && shrunk.runs <= 60);
    assert_eq!(
        shrunk.original_faults,
        skein_sim::realised_schedule(&cfg).len()
    );
    assert!(
        shrunk.config.schedule.len() <= shrunk.original_faults,
        "{} faults, was {}",
        shrunk.config.schedule.len(),
        shrunk.original_faults
    );
    assert!(shrunk.config.duration <= cfg.duration);
    assert!(!shrunk.config.random_faults);
    assert!(shrunk.report.failed_invariants().contains(&first));

    let (sc, mut replay, r) = written_and_replayed(&shrunk, &cfg);
    assert!(skein_sim::scenario::Expect::met(sc.expect.as_ref(), &r));
    // And without the bug the same scenario passes: the failure is the bug's.
    replay.bugs.clear();
    let clean = common::run(&replay);
    assert!(clean.passed(), "{clean}");
    assert!(shrunk.config.consumers >= 1 && shrunk.config.producers >= 1);
}

/// The leader nemesis (`[faults] new_leader_isolate`) strikes as elections happen, outside
/// the schedule drawn before the run: shrinking captures its faults too (and writes quorum
/// members as `controller:K`), so a figure-8 finding of the bug zoo's shape shrinks to a
/// scenario file that replays it.
#[test]
fn a_leader_nemesis_finding_shrinks_to_a_scenario_that_reproduces_it() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/shapes/raft-figure-8.toml");
    let shape = Scenario::load(&path).expect("the shape file loads");
    let mut cfg = SimConfig {
        seed: 2,
        ..SimConfig::default()
    };
    cfg.apply_scenario(&shape);
    // Seed 2 fails metadata-commit-lost at 62 s (docs/scenarios.md, the bug zoo); 80 s keeps
    // the test short and the finding the same.
    cfg.duration = 80 * SECS;
    cfg.bugs = vec!["commit-previous-term".into()];
    let shrunk = shrink(&cfg, Some("metadata-commit-lost"), 3, &mut |_| {})
        .expect("the captured schedule, nemesis faults included, replays the finding");
    assert!(
        shrunk.original_faults > skein_sim::realised_schedule(&cfg).len(),
        "the capture holds the nemesis' faults besides the drawn ones"
    );
    let (_, _, r) = written_and_replayed(&shrunk, &cfg);
    assert!(r.failed_invariants().contains(&"metadata-commit-lost"));
}

/// Writes the shrunk run as a scenario file, reads it back and runs it with `cfg`'s seed
/// and bugs: it must reproduce the shrunk run's trace exactly.
fn written_and_replayed(
    shrunk: &skein_sim::shrink::Shrunk,
    cfg: &SimConfig,
) -> (Scenario, SimConfig, skein_sim::report::SimReport) {
    let text = scenario_toml(&shrunk.config, "shrunk", "test", shrunk.invariant);
    let sc = Scenario::parse("shrunk.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut replay = SimConfig::default();
    replay.apply_scenario(&sc);
    replay.seed = cfg.seed;
    replay.bugs = cfg.bugs.clone();
    let r = common::run(&replay);
    assert_eq!(r.trace_hash, shrunk.report.trace_hash, "{text}");
    (sc, replay, r)
}
