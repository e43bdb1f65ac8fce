//! Seeded simulations with faults on: a few hundred short runs must pass every invariant,
//! and runs must be exactly reproducible from their seed.

use skein_sim::config::SimConfig;
use skein_sim::report::SimReport;
use skein_sim::time::SECS;

/// A short faulty run, small enough that hundreds fit in `cargo test`.
fn short(seed: u64) -> SimConfig {
    SimConfig {
        duration: 8 * SECS,
        liveness: 3 * SECS,
        partitions: 3,
        produce_rate: 40.0,
        ..SimConfig::short(seed)
    }
}

fn run(c: &SimConfig) -> SimReport {
    skein_sim::run(c, None, None).expect("the run starts")
}

fn sweep(seeds: std::ops::Range<u64>) {
    let mut failures = Vec::new();
    let mut faults = 0;
    let mut acked = 0;
    for seed in seeds.clone() {
        let r = run(&short(seed));
        faults += r.faults.values().sum::<u64>();
        acked += r.acked;
        if !r.passed() {
            failures.push(format!("seed {seed}: {:?}\n{r}", r.failed_invariants()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failing seeds:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    // The runs did inject faults and did acknowledge writes (the test is not vacuous).
    let n = seeds.end - seeds.start;
    assert!(faults >= n, "only {faults} faults over {n} seeds");
    assert!(acked >= 50 * n, "only {acked} acked records over {n} seeds");
}

#[test]
fn seeds_000_to_060_pass() {
    sweep(0..60);
}

#[test]
fn seeds_060_to_120_pass() {
    sweep(60..120);
}

#[test]
fn seeds_120_to_180_pass() {
    sweep(120..180);
}

#[test]
fn seeds_180_to_240_pass() {
    sweep(180..240);
}

#[test]
fn same_seed_same_trace_and_different_seeds_differ() {
    let mut hashes = std::collections::BTreeSet::new();
    for seed in 1000..1020 {
        let c = SimConfig {
            duration: 3 * SECS,
            liveness: SECS,
            ..short(seed)
        };
        let a = run(&c);
        let b = run(&c);
        assert_eq!(
            a.trace_hash, b.trace_hash,
            "seed {seed} is not reproducible"
        );
        assert_eq!(a.events, b.events);
        assert_eq!(a.acked, b.acked);
        hashes.insert(a.trace_hash);
    }
    assert_eq!(hashes.len(), 20, "different seeds gave the same trace");
}

#[test]
fn the_trace_file_has_one_json_line_per_event() {
    struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);
    impl std::io::Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let c = SimConfig {
        duration: 2 * SECS,
        liveness: SECS / 2,
        ..short(5)
    };
    let traced = skein_sim::run(&c, Some(Box::new(Shared(buf.clone()))), None).unwrap();
    let plain = run(&c);
    assert_eq!(
        traced.trace_hash, plain.trace_hash,
        "tracing must not change the run"
    );
    let text = String::from_utf8(buf.borrow().clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len() as u64, traced.events);
    for l in lines.iter().take(50) {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(v["time"].is_u64() && v["kind"].is_string());
    }
}

#[test]
fn a_fault_free_run_acknowledges_and_reads_everything() {
    let c = SimConfig {
        duration: 6 * SECS,
        liveness: 2 * SECS,
        ..SimConfig::short(3).with_fault_rate(0.0)
    };
    let r = run(&c);
    assert!(r.passed(), "{r}");
    assert!(r.faults.is_empty());
    assert_eq!(r.net.lost + r.net.duplicated + r.net.reordered, 0);
    assert!(r.acked > 100, "{r}");
    assert_eq!(r.acked, r.read, "{r}");
    assert_eq!(r.lost, 0);
}

#[test]
fn a_scenario_isolating_a_broker_passes() {
    let text = r#"
name = "isolate-broker-1"
[cluster]
brokers = 3
partitions = 3
[workload]
produce_rate = 40
[run]
duration = "10s"
liveness = "4s"
[[fault]]
at = "2s"
kind = "partition"
shape = "isolate"
node = 1
duration = "3s"
[[fault]]
at = "3s"
kind = "crash"
node = "controller"
restart_after = "1s"
[expect]
verdict = "pass"
"#;
    let sc = skein_sim::scenario::Scenario::parse("isolate.toml", text).unwrap();
    let mut c = SimConfig::default();
    c.apply_scenario(&sc);
    let r = run(&c);
    assert!(r.passed(), "{r}");
    assert_eq!(r.faults.get("partition"), Some(&1));
    assert_eq!(r.faults.get("crash"), Some(&1));
    assert!(
        r.leader_changes >= 1,
        "isolating a broker moves its leaderships: {r}"
    );
}
