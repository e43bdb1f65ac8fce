//! Helpers the simulator's integration tests share: the scenario files of `scenarios/`
//! and the run configurations they describe. Each test file uses some of them.
#![allow(dead_code)]

use skein_sim::config::SimConfig;
use skein_sim::report::SimReport;
use skein_sim::scenario::Scenario;
use skein_sim::time::SECS;
use std::path::{Path, PathBuf};

/// The repository's `scenarios/` directory.
pub fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios")
}

/// A scenario file of `scenarios/`, parsed (a parse error fails the test with its message).
pub fn scenario(file: &str) -> Scenario {
    Scenario::load(&scenarios_dir().join(file)).unwrap_or_else(|e| panic!("{e}"))
}

/// The run `file` describes at `seed`: the defaults, then the scenario's settings.
pub fn scenario_config(file: &str, seed: u64) -> SimConfig {
    let mut c = SimConfig::default();
    c.apply_scenario(&scenario(file));
    c.seed = seed;
    c
}

/// Runs `c` with no trace sink and no history; the run must start.
pub fn run(c: &SimConfig) -> SimReport {
    skein_sim::run(c, None, None).expect("the run starts")
}

/// Runs the scenario `file` at `seed`.
pub fn run_scenario(file: &str, seed: u64) -> SimReport {
    run(&scenario_config(file, seed))
}

/// A short faulty run, small enough that hundreds fit in `cargo test`. The same run as
/// `skein sim replay --seed N` with the flags of `REPLAY_FLAGS` in tests/seeds.rs.
pub fn short(seed: u64) -> SimConfig {
    let mut c = SimConfig {
        seed,
        duration: 8 * SECS,
        liveness: 3 * SECS,
        partitions: 3,
        produce_rate: 40.0,
        ..SimConfig::default().with_fault_rate(2.0)
    };
    // Bit flips are off here: since the offline-partition fix they cost no safety and a
    // flipped leader or follower recovers (see `bit_flip_findings_stay_fixed` in
    // tests/seeds.rs). A flip in the log of a partition's *last* ISR member used to leave
    // it leaderless (seeds 10, 45 of its 400); with eligible leader replicas (KIP-966)
    // both pass and are pinned there. Turning flips on for all 400 seeds is left for a run
    // that re-measures them.
    c.rates.bit_flip = 0;
    c
}

/// The default run at `seed` passes every check (a pinned finding of a default sweep).
pub fn default_seed_passes(seed: u64) {
    let r = run(&SimConfig {
        seed,
        ..SimConfig::default()
    });
    assert!(
        r.passed(),
        "seed {seed}: {:?}\n{r}\nreplay: skein sim replay --seed {seed}",
        r.failed_invariants()
    );
}
