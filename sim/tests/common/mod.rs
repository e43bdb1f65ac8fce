//! Helpers the simulator's integration tests share: the scenario files of `scenarios/`
//! and the run configurations they describe. Each test file uses some of them.
#![allow(dead_code)]

use skein_sim::config::SimConfig;
use skein_sim::scenario::Scenario;
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
