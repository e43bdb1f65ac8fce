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

    // Written out and read back, the scenario reproduces the shrunk run exactly.
    let text = scenario_toml(&shrunk.config, "shrunk", "test", first);
    let sc = Scenario::parse("shrunk.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut replay = SimConfig::default();
    replay.apply_scenario(&sc);
    replay.seed = cfg.seed;
    replay.bugs = cfg.bugs.clone();
    let r = common::run(&replay);
    assert_eq!(r.trace_hash, shrunk.report.trace_hash, "{text}");
    assert!(skein_sim::scenario::Expect::met(sc.expect.as_ref(), &r));
    // And without the bug the same scenario passes: the failure is the bug's.
    replay.bugs.clear();
    let clean = common::run(&replay);
    assert!(clean.passed(), "{clean}");
    assert!(shrunk.config.consumers >= 1 && shrunk.config.producers >= 1);
}
