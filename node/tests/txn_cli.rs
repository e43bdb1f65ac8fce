#![cfg(not(madsim))] // real sockets and processes; the madsim flavour runs tests/ instead
//! `skein produce --transactional-id` and `skein consume --isolation` with real processes
//! on loopback: a committed transaction's records are read by both isolation levels, an
//! aborted one's only by `read_uncommitted`; a transaction left open by a killed producer
//! holds `read_committed` readers at its first offset until a new producer with the same
//! transactional id fences it (aborting it); `skein bench produce --transactional`
//! commits what it counts; and bad arguments are refused with a clear error.

mod common;

use common::procs::*;
use std::io::Write;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// `skein consume` of everything in topic `t` under `isolation`, stopping when idle.
fn consume(cf: &str, isolation: &str) -> Vec<String> {
    let out = run(
        &[
            "consume",
            "--topic",
            "t",
            "--from-beginning",
            "--idle-exit-ms",
            "1500",
            "--isolation",
            isolation,
            "--cluster",
            cf,
        ],
        Duration::from_secs(60),
    );
    ok(&out).lines().map(str::to_string).collect()
}

fn produce_txn(cf: &str, id: &str, lines: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "produce",
        "--topic",
        "t",
        "--transactional-id",
        id,
        "--cluster",
        cf,
    ];
    args.extend_from_slice(extra);
    let out = run_input(&args, lines, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "produce {extra:?}: {}",
        text(&out.stderr)
    );
    text(&out.stderr)
}

#[test]
fn transactional_produce_and_read_committed_consume() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let limit = Duration::from_secs(60);
    let mut cleanup = Cleanup::new(&dir);
    let cf = cluster_up(&mut cleanup, &["--brokers", "3"], limit);
    create_topic(&cf, "t", limit);

    // Two committed transactions of two lines, one aborted transaction.
    let said = produce_txn(
        &cf,
        "app-1",
        "c1\nc2\nc3\nc4\n",
        &["--transaction-size", "2"],
    );
    assert!(
        said.contains("2 transaction(s) committed (4 record(s))"),
        "{said}"
    );
    let said = produce_txn(&cf, "app-1", "a1\na2\n", &["--abort"]);
    assert!(said.contains("0 transaction(s) committed"), "{said}");
    assert!(said.contains("1 aborted"), "{said}");

    let mut committed = consume(&cf, "read_committed");
    committed.sort();
    assert_eq!(committed, ["c1", "c2", "c3", "c4"]);
    let mut all = consume(&cf, "read_uncommitted");
    all.sort();
    assert_eq!(all, ["a1", "a2", "c1", "c2", "c3", "c4"]);
    // A group member reads at the same isolation.
    let group = run(
        &[
            "consume",
            "--topic",
            "t",
            "--group",
            "g",
            "--from-beginning",
            "--max",
            "5",
            "--idle-exit-ms",
            "5000",
            "--isolation",
            "read_committed",
            "--cluster",
            &cf,
        ],
        limit,
    );
    let mut got: Vec<String> = ok(&group).lines().map(str::to_string).collect();
    got.sort();
    assert_eq!(got, ["c1", "c2", "c3", "c4"]);

    open_transaction_fenced(&cf);
    bench_commits_what_it_counts(&cf);
    bad_arguments(&cf);
}

/// A producer killed inside a transaction: its records are in the log but the transaction
/// is open, so read_committed stops before them (the LSO) while read_uncommitted reads
/// them, until a new instance of the transactional id fences it.
fn open_transaction_fenced(cf: &str) {
    let limit = Duration::from_secs(60);
    let mut zombie: Child = skein()
        .args([
            "produce",
            "--topic",
            "t",
            "--partition",
            "0",
            "--transactional-id",
            "app-2",
            "--cluster",
            cf,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    {
        // Whole-input transaction: lines go out as they come, the commit waits for EOF.
        let stdin = zombie.stdin.as_mut().unwrap();
        writeln!(stdin, "open1").unwrap();
        stdin.flush().unwrap();
    }
    let t = Instant::now();
    while !consume(cf, "read_uncommitted").contains(&"open1".to_string()) {
        assert!(
            t.elapsed() < limit,
            "the open transaction's record never appeared"
        );
    }
    let _ = zombie.kill();
    let _ = zombie.wait();
    let after = consume(cf, "read_committed");
    assert!(!after.contains(&"open1".to_string()), "{after:?}");
    produce_txn(cf, "app-2", "new1\n", &["--partition", "0"]);
    // init_transactions of the new instance aborted the open transaction; its own commit
    // is readable, the zombie's record never is.
    let after = consume(cf, "read_committed");
    assert!(after.contains(&"new1".to_string()), "{after:?}");
    assert!(!after.contains(&"open1".to_string()), "{after:?}");
}

fn bench_commits_what_it_counts(cf: &str) {
    let limit = Duration::from_secs(60);
    // The transactional benchmark: every record it reports is committed, so a
    // read_committed reader of its topic reads exactly that many.
    let bench = run(
        &[
            "bench",
            "produce",
            "--topic",
            "tb",
            "--records",
            "2000",
            "--batch",
            "100",
            "--producers",
            "2",
            "--transactional",
            "--commit-interval-ms",
            "20",
            "--cluster",
            cf,
        ],
        limit,
    );
    let said = ok(&bench);
    assert!(said.contains("produce: 2000 records"), "{said}");
    assert!(said.contains("commit latency ("), "{said}");
    let read = run(
        &[
            "consume",
            "--topic",
            "tb",
            "--from-beginning",
            "--idle-exit-ms",
            "1500",
            "--isolation",
            "read_committed",
            "--cluster",
            cf,
        ],
        limit,
    );
    assert_eq!(ok(&read).lines().count(), 2000);
}

fn bad_arguments(cf: &str) {
    let limit = Duration::from_secs(60);
    // Bad arguments: a clear error, no hang.
    let bad = run_input(
        &[
            "produce",
            "--topic",
            "t",
            "--transactional-id",
            "x",
            "--acks",
            "1",
            "--cluster",
            cf,
        ],
        "v\n",
        limit,
    );
    assert!(!bad.status.success());
    says(&bad, "--acks all");
    let bad = run(
        &[
            "consume",
            "--topic",
            "t",
            "--isolation",
            "serializable",
            "--cluster",
            cf,
        ],
        limit,
    );
    assert!(!bad.status.success());
    says(&bad, "read_committed");
    let bad = run_input(
        &["produce", "--topic", "t", "--abort", "--cluster", cf],
        "v\n",
        limit,
    );
    assert!(!bad.status.success());
    says(&bad, "--transactional-id");
}
