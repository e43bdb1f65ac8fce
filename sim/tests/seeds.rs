//! Seeded simulations with faults on: a few hundred short runs must pass every invariant,
//! and runs must be exactly reproducible from their seed.

mod common;

use common::{default_seed_passes, run, short};

use skein_sim::config::SimConfig;
use skein_sim::time::SECS;

/// [`short`] with bit flips in the schedule.
fn short_with_bit_flips(seed: u64) -> SimConfig {
    SimConfig {
        rates: SimConfig::default().with_fault_rate(2.0).rates,
        ..short(seed)
    }
}

#[test]
fn bit_flip_findings_stay_fixed() {
    // Seeds where a bit flip in a leader's log used to cost the partition its leader
    // for good (it answered every fetch with a CRC error); now the leader goes offline,
    // the controller moves the leadership and the copy is repaired: every invariant holds.
    // 10 and 45: the last ISR copy corrupt; an eligible leader replica takes over (ELR).
    for seed in [12, 128, 217, 355, 10, 45] {
        let r = run(&short_with_bit_flips(seed));
        assert!(
            r.passed(),
            "seed {seed}: {:?}\n{r}\nreplay: skein sim replay --seed {seed} {}",
            r.failed_invariants(),
            REPLAY_FLAGS.trim_end_matches(" --no-bit-flips")
        );
    }
    // Default-length runs: a flipped leader (342) and logs failing to open on restart
    // (296, 326; the broker used to stay in the ISR and be elected for them).
    for seed in [342, 296, 326] {
        default_seed_passes(seed);
    }
}

#[test]
fn a_producer_settling_several_leader_checks_at_once_stays_up() {
    // Default seed 181: one controller answer settles the leader checks of two partitions;
    // the first ends in an epoch bump that re-stamps and resends every batch in flight, so
    // the second's check is moot. The simulated producer (core's client since issue 19)
    // used to panic there; a sweep of 0..300 found it.
    default_seed_passes(181);
}

#[test]
fn a_log_closed_by_a_full_disk_is_reopened_not_deleted() {
    // Default seed 3867 of the 10,000-seed sweep: the leader's log of sim-3 was closed as
    // unusable on a full disk; once another replica led, the broker counted every log that
    // was not open as damaged and deleted it, though it was whole and held the only intact
    // copy of a batch a bit flip had damaged on the new leader. The partition was leaderless
    // to the end. Only a log whose opening met a corrupt batch is dropped now.
    default_seed_passes(3867);
}

const REPLAY_FLAGS: &str =
    "--duration 8s --liveness 3s --partitions 3 --produce-rate 40 --fault-rate 2 --no-bit-flips";

fn sweep(seeds: std::ops::Range<u64>) {
    let mut failures = Vec::new();
    let mut faults = 0;
    let mut acked = 0;
    for seed in seeds.clone() {
        let r = run(&short(seed));
        faults += r.faults.values().sum::<u64>();
        acked += r.acked;
        if r.work.history_events > r.work.history_reserved {
            failures.push(format!(
                "seed {seed}: the history outgrew its reserved room ({} events, {} reserved; \
                 History::for_run's estimate is low)",
                r.work.history_events, r.work.history_reserved
            ));
        }
        if !r.passed() {
            failures.push(format!(
                "seed {seed}: {:?}\n{r}\nreplay: skein sim replay --seed {seed} {REPLAY_FLAGS}",
                r.failed_invariants()
            ));
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
fn seeds_000_to_080_pass() {
    sweep(0..80);
}

#[test]
fn seeds_080_to_160_pass() {
    sweep(80..160);
}

#[test]
fn seeds_160_to_240_pass() {
    sweep(160..240);
}

#[test]
fn seeds_240_to_320_pass() {
    sweep(240..320);
}

#[test]
fn seeds_320_to_400_pass() {
    sweep(320..400);
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
    let buf = skein_sim::trace::MemorySink::default();
    let c = SimConfig {
        duration: 2 * SECS,
        liveness: SECS / 2,
        ..short(5)
    };
    let traced = skein_sim::run(&c, Some(Box::new(buf.clone())), None).unwrap();
    let plain = run(&c);
    assert_eq!(
        traced.trace_hash, plain.trace_hash,
        "tracing must not change the run"
    );
    let text = buf.text();
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
        ..short(3).with_fault_rate(0.0)
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

#[test]
fn bit_flips_are_caught_never_served() {
    // Flip bits in every broker's log, repeatedly: CRCs must catch every one, so no
    // consumer ever sees a changed or unacknowledged value and no acked write is lost.
    let mut faults = String::new();
    for (i, at) in ["2s", "2.5s", "3s", "3.5s"].iter().enumerate() {
        for node in 1..=3 {
            faults +=
                &format!("[[fault]]\nat = \"{at}\"\nkind = \"bit-flip\"\nnode = {node}\n# {i}\n");
        }
    }
    let text = format!("[cluster]\npartitions = 3\n[workload]\nproduce_rate = 40\n[run]\nduration = \"8s\"\nliveness = \"3s\"\n{faults}");
    let sc = skein_sim::scenario::Scenario::parse("bitflips.toml", &text).unwrap();
    for seed in 0..10 {
        let mut c = SimConfig::default();
        c.apply_scenario(&sc);
        c.seed = seed;
        let r = run(&c);
        assert_eq!(r.faults.get("bit-flip"), Some(&12));
        for inv in r.failed_invariants() {
            assert_eq!(inv, skein_sim::invariants::LIVENESS, "seed {seed}: {r}");
        }
    }
}

#[test]
fn the_checks_catch_a_real_bug_in_the_core() {
    // `ack-before-isr` (acks=all answered before the ISR has the write) switched back on in
    // the real replica code: crashes must turn some acknowledgements into lost writes.
    let mut caught = Vec::new();
    for seed in 0..20 {
        let c = SimConfig {
            bugs: vec!["ack-before-isr".into()],
            ..short(seed)
        };
        let r = run(&c);
        if r.failed_invariants()
            .contains(&skein_sim::invariants::ACKED_WRITE_LOST)
        {
            caught.push(seed);
        }
    }
    assert!(
        caught.len() >= 2,
        "ack-before-isr lost acknowledged writes only in seeds {caught:?}"
    );
}

#[test]
fn an_unknown_bug_name_is_an_error_naming_the_known_ones() {
    let c = SimConfig {
        bugs: vec!["no-such-bug".into()],
        ..short(1)
    };
    let e = match skein_sim::run(&c, None, None) {
        Ok(_) => panic!("an unknown bug name was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("no-such-bug") && e.contains("truncate-to-hw"),
        "{e}"
    );
}

#[test]
fn an_unclean_recovery_never_cuts_below_the_end_it_was_chosen_for() {
    // Seeds 200330 and 200584 of `--fault-rate 4 --max-down 2` (issue 54's sweep of that
    // shape): Balanced recovery elected a copy that read whole when it answered (log end
    // 171 and 764); rebuilding its producer state as leader then met a flipped batch (at 34
    // and at 8), and the broker cut there at once (at 19 and at 1: the cut took the first
    // batch of the read, not the damaged one), losing 131 and 760 acknowledged records.
    // Now such damage, below the end the manager chose it for, is refilled from a peer
    // first, and a cut lands on the damaged batch itself.
    for seed in [200330, 200584] {
        let mut c = SimConfig {
            seed,
            ..SimConfig::default().with_fault_rate(4.0)
        };
        c.rates.max_down = 2;
        let r = run(&c);
        assert!(
            r.unclean_elections >= 1,
            "seed {seed}: not the case any more:\n{r}"
        );
        assert!(
            r.passed(),
            "seed {seed}: {:?}\n{r}\nreplay: skein sim replay --seed {seed} --fault-rate 4 --max-down 2",
            r.failed_invariants()
        );
    }
}
