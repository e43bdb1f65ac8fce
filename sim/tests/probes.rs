//! Coverage probes (`skein_core::probe`) as a run reports them: they record what the run
//! did, deterministically, without changing it.

mod common;

use skein_sim::config::SimConfig;
use skein_sim::report::SimReport;

fn hits(r: &SimReport, probe: &str) -> u64 {
    r.probes
        .iter()
        .find(|(p, _)| *p == probe)
        .unwrap_or_else(|| panic!("no probe {probe}"))
        .1
}

#[test]
fn the_double_failover_scenario_hits_the_truncation_probe_and_a_quiet_run_does_not() {
    let r = common::run_scenario("kip279-double-failover.toml", 1);
    assert_eq!(r.probes.len(), skein_core::probe::Probe::ALL.len());
    assert!(hits(&r, "replica.truncate-divergent") > 0, "{:?}", r.probes);
    let quiet = SimConfig {
        seed: 3,
        duration: 5_000_000_000,
        liveness: 2_000_000_000,
        produce_rate: 50.0,
        ..SimConfig::default().with_fault_rate(0.0)
    };
    let r = common::run(&quiet);
    for p in [
        "replica.truncate-divergent",
        "replica.offline",
        "log.crc-mismatch",
        "replica.isr-shrink",
    ] {
        assert_eq!(hits(&r, p), 0, "{p} in a fault-free run");
    }
    assert!(hits(&r, "group.coordinator-loaded") > 0, "{:?}", r.probes);
}

#[test]
fn probe_counts_are_deterministic_and_leave_the_trace_hash_alone() {
    let c = SimConfig {
        seed: 11,
        duration: 8_000_000_000,
        liveness: 3_000_000_000,
        ..SimConfig::default().with_fault_rate(2.0)
    };
    let a = common::run(&c);
    let b = common::run(&c);
    assert_eq!(a.probes, b.probes);
    assert_eq!(a.trace_hash, b.trace_hash);
    assert!(a.probes.iter().any(|(_, n)| *n > 0));
    // Every counted fault has exactly one place in the atlas.
    let struck: u64 = a.atlas.iter().map(|(_, n)| n).sum();
    assert_eq!(struck, a.faults.values().sum::<u64>(), "{:?}", a.atlas);
    assert!(struck > 0);
    assert_eq!(a.atlas, b.atlas);
}

/// The sometimes-assertions of issue 47 fire where their scenarios put the cluster in the
/// state they name, and not in a fault-free run.
#[test]
fn the_new_sometimes_assertions_fire_in_their_scenarios() {
    let cases = [
        ("raft-figure-8.toml", 1, "raft.leader-inherits-uncommitted"),
        ("raft-figure-8.toml", 1, "raft.follower-truncated"),
        (
            "isr-shrink-to-one.toml",
            1,
            "controller.isr-below-min-insync",
        ),
        (
            "unclean-recovery-balanced.toml",
            161,
            "controller.unclean-recovery",
        ),
    ];
    for (file, seed, probe) in cases {
        let r = common::run_scenario(file, seed);
        assert!(hits(&r, probe) > 0, "{file} seed {seed}: {probe} not hit");
    }
    let quiet = SimConfig {
        seed: 3,
        duration: 5_000_000_000,
        liveness: 2_000_000_000,
        produce_rate: 50.0,
        ..SimConfig::default().with_fault_rate(0.0)
    };
    let r = common::run(&quiet);
    for (_, _, probe) in cases {
        assert_eq!(hits(&r, probe), 0, "{probe} in a fault-free run");
    }
}
