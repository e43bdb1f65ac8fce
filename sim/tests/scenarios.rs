//! Every scenario file in `scenarios/` is loaded and run with a few seeds; its `[expect]` must
//! be met.

mod common;

use std::path::PathBuf;

use common::{scenario, scenario_config, scenarios_dir};
use skein_sim::config::SimConfig;
use skein_sim::report::SimReport;
use skein_sim::scenario::{Expect, Scenario};
use skein_sim::trace::MemorySink;

const SEEDS: [u64; 5] = [1, 2, 3, 4, 5];

fn scenario_files() -> Vec<PathBuf> {
    let dir = scenarios_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

/// The same judgement as `skein sim run --scenario`.
fn met(r: &SimReport, expect: &Option<Expect>) -> bool {
    Expect::met(expect.as_ref(), r)
}

#[test]
fn every_scenario_meets_its_expectation() {
    let files = scenario_files();
    assert!(files.len() >= 8, "only {} scenario files", files.len());
    let mut failures = Vec::new();
    for path in &files {
        let sc = Scenario::load(path).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            sc.name.is_some() && sc.description.is_some() && sc.expect.is_some(),
            "{}: every scenario has a name, a description and an [expect]",
            path.display()
        );
        assert_eq!(
            sc.version,
            Some(skein_sim::scenario::FORMAT_VERSION),
            "{}: every scenario states its format version",
            path.display()
        );
        assert!(
            !sc.schedule.is_empty(),
            "{}: a named scenario has an exact fault schedule",
            path.display()
        );
        for seed in SEEDS {
            let mut c = SimConfig::default();
            c.apply_scenario(&sc);
            c.seed = seed;
            let r = common::run(&c);
            // Not vacuous: the scheduled faults happened and writes were acknowledged.
            assert!(
                r.faults.values().sum::<u64>() >= sc.schedule.len() as u64,
                "{} seed {seed}: faults not injected: {r}",
                path.display()
            );
            // Progress: acknowledged records, or in a txn workload committed transactions
            // (its writes are counted there, not as acks).
            let progress = r.txn.as_ref().map_or(r.acked, |t| t.committed * 2);
            assert!(progress > 50, "{} seed {seed}: {r}", path.display());
            if !met(&r, &sc.expect) {
                failures.push(format!(
                    "{} seed {seed}: expected {:?}, failed {:?}\n{r}\nreplay: skein sim run --scenario {} --seed {seed}",
                    path.display(),
                    sc.expect,
                    r.failed_invariants(),
                    path.display()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Bugs of the bug zoo that a scenario is known to catch: (file, `--bug`, seed, invariant).
const CATCHES: &[(&str, &str, u64, &str)] = &[
    ("txn-read-committed-below-lso.toml", "no-lso", 1, "txn-lso"),
    (
        "txn-offsets-at-the-marker.toml",
        "txn-offsets-visible-early",
        2,
        "txn-exactly-once",
    ),
    (
        "txn-zombie-producer-fenced.toml",
        "no-txn-fencing",
        8,
        "txn-fenced-write",
    ),
    (
        "kip101-new-follower-truncates-then-leader-dies.toml",
        "truncate-to-hw",
        1,
        "acked-write-lost",
    ),
    (
        "zombie-leader-partition.toml",
        "unfenced-fetch",
        1,
        "replica-divergence",
    ),
    (
        "zombie-leader-partition.toml",
        "ack-before-isr",
        1,
        "acked-write-lost",
    ),
    (
        "kip966-last-replica-unflushed.toml",
        "fsync-after-ack",
        24,
        "acked-write-lost",
    ),
    (
        "kip279-double-failover.toml",
        "next-epoch-start",
        1,
        "under-replicated",
    ),
    (
        "kip320-stale-epoch-rejoin.toml",
        "unfenced-fetch",
        4,
        "replica-divergence",
    ),
    (
        "zombie-consumer-commit.toml",
        "no-generation-fencing",
        1,
        "group-offset-regression",
    ),
    (
        "kip320-consumer-detects-truncation.toml",
        "consumer-ignores-truncation",
        1,
        "consumer-skipped-records",
    ),
    (
        "raft-vote-forgotten.toml",
        "vote-not-persisted",
        3,
        "raft-two-leaders",
    ),
    (
        "raft-figure-8.toml",
        "commit-previous-term",
        8,
        "metadata-commit-lost",
    ),
];

#[test]
fn scenarios_catch_their_bugs() {
    for (file, bug, seed, invariant) in CATCHES {
        let mut c = scenario_config(file, *seed);
        c.bugs = vec![bug.to_string()];
        let r = common::run(&c);
        assert!(
            r.failed_invariants().contains(invariant),
            "{file} --bug {bug} --seed {seed}: expected {invariant} to fail, failed {:?}\n{r}",
            r.failed_invariants()
        );
    }
}

#[test]
fn isr_of_one_refuses_acks_all_writes() {
    // `[expect]` cannot say "writes were refused", so check the trace: the ISR did shrink
    // to the leader alone, the leader answered NotEnoughReplicas, and nothing acked was lost.
    let c = scenario_config("isr-shrink-to-one.toml", 1);
    let sink = MemorySink::default();
    let r = skein_sim::run(&c, Some(Box::new(sink.clone())), None).expect("the run starts");
    assert!(r.passed(), "{r}");
    let trace = sink.text();
    assert!(
        trace.contains("isr: [1], partition_epoch"),
        "the ISR never shrank to {{1}}"
    );
    let refused = trace.matches("NotEnoughReplicas").count();
    assert!(
        refused > 0,
        "no acks=all write was refused with an ISR of one"
    );
    assert_eq!(r.lost, 0, "{r}");
}

#[test]
fn consumers_detect_and_report_an_unclean_truncation() {
    // kip320-consumer-detects-truncation, seed 1: broker 3 is elected uncleanly with its log
    // ending at offset 67, below both consumers' positions. Each consumer's next fetch
    // carries its last epoch; broker 3 answers DivergingEpoch and the consumer moves back to
    // 67 and reports it. With the bug the answer is ignored: nothing is reported and the
    // records written at 67.. are skipped.
    let file = "kip320-consumer-detects-truncation.toml";
    let (sc, mut c) = (scenario(file), scenario_config(file, 1));
    let sink = MemorySink::default();
    let r = skein_sim::run(&c, Some(Box::new(sink.clone())), None).expect("the run starts");
    assert!(met(&r, &sc.expect), "{r}");
    let trace = sink.text();
    let reported: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains("\"kind\":\"truncation-detected\""))
        .collect();
    assert_eq!(reported.len(), 2, "{reported:#?}");
    assert!(reported[0]
        .contains("client 3 partition 0: truncation detected: position 221 -> 67, epoch 0"));
    assert!(reported[1]
        .contains("client 4 partition 0: truncation detected: position 249 -> 67, epoch 0"));
    let failed = r.failed_invariants();
    for inv in ["consumer-skipped-records", "record-changed"] {
        assert!(!failed.contains(&inv), "{inv} failed: {r}");
    }

    c.bugs = vec!["consumer-ignores-truncation".into()];
    let sink = MemorySink::default();
    let r = skein_sim::run(&c, Some(Box::new(sink.clone())), None).expect("the run starts");
    let trace = sink.text();
    assert!(
        !trace.contains("truncation-detected"),
        "the bug reports nothing"
    );
    assert!(
        r.failed_invariants().contains(&"consumer-skipped-records"),
        "{r}"
    );
}
