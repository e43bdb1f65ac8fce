//! The workload's compression option (`--compression`, scenario `[workload] compression`):
//! producers store some batches compressed (a codec per batch drawn from the seed), and
//! every invariant still holds through crashes, recovery, replication and consumer reads.
//! Off (the default), no batch is compressed and the run is the uncompressed one.

mod common;

use common::{run, short};
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
fn compressed_workloads_pass_every_invariant() {
    for seed in 1..=4 {
        let c = SimConfig {
            compression: true,
            ..short(seed)
        };
        let r = run(&c);
        assert!(
            r.passed(),
            "seed {seed}: {:?}\n{r}\nreplay: skein sim replay --seed {seed} --compression",
            r.failed_invariants()
        );
        assert!(
            hits(&r, "log.decompressed") > 0,
            "seed {seed}: nothing compressed"
        );
        assert_eq!(
            run(&c).trace_hash,
            r.trace_hash,
            "seed {seed}: deterministic"
        );
    }
    // Bit flips too: a flipped bit in a compressed batch is caught by its CRC like any.
    let c = SimConfig {
        compression: true,
        rates: SimConfig::default().with_fault_rate(2.0).rates,
        ..short(12)
    };
    let r = run(&c);
    assert!(r.passed(), "{:?}\n{r}", r.failed_invariants());
}

#[test]
fn compression_off_changes_nothing() {
    assert!(!SimConfig::default().compression, "off by default");
    for seed in [1, 2] {
        let off = run(&short(seed));
        assert_eq!(
            hits(&off, "log.decompressed"),
            0,
            "seed {seed}: compressed a batch"
        );
        let on = run(&SimConfig {
            compression: true,
            ..short(seed)
        });
        // The option is what moves the run: on, the batches' bytes (and so the trace)
        // differ; off, the run is the uncompressed one (the bench run's pinned hash in
        // tests/bench_guard.rs and the README's default hash check the same).
        assert_ne!(on.trace_hash, off.trace_hash, "seed {seed}");
        assert_eq!(run(&short(seed)).trace_hash, off.trace_hash);
    }
}

#[test]
fn the_scenario_key_and_the_flag_switch_it_on() {
    let text = "[workload]\nproducers = 1\ncompression = true\n";
    let sc = skein_sim::scenario::Scenario::parse("c.toml", text).unwrap();
    let mut c = SimConfig::default();
    c.apply_scenario(&sc);
    assert!(c.compression);
    let bad = "[workload]\ncompression = \"gzip\"\n";
    assert!(skein_sim::scenario::Scenario::parse("c.toml", bad).is_err());
}
