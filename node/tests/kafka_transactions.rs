#![cfg(not(madsim))] // real sockets and processes; the madsim flavour runs tests/ instead
//! Kafka transactions through the listener (issue 52, docs/kafka.md), against
//! `skein cluster up` (3 brokers):
//! - a hand-made `kafka-protocol` client: FindCoordinator for a transactional id, then
//!   bad input answered with Kafka's codes (an unknown transactional id, EndTxn with no
//!   transaction, a negative producer id, a fenced epoch), never a hang or a panic;
//! - confluent-kafka's transactional producer (`node/tests/kafka/confluent_transactions.py`):
//!   a committed, an aborted and a committed transaction with `send_offsets_to_transaction`;
//!   a read_committed consumer reads exactly the committed records, a read_uncommitted one
//!   all of them. Skipped without the module unless SKEIN_REQUIRE_CONFLUENT=1.

mod common;

use common::kafka::{exchange, listeners};
use common::procs::{cluster_up, run, text, Cleanup};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn create_topic(cf: &str, topic: &str, partitions: &str) {
    let args = [
        "topic",
        "create",
        topic,
        "--partitions",
        partitions,
        "-r",
        "3",
        "--cluster",
        cf,
    ];
    let out = run(&args, Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// The Kafka address of `id`'s transaction coordinator (FindCoordinator key type 1), asked
/// until one answers.
fn txn_coordinator(listeners: &BTreeMap<i32, String>, id: &str) -> String {
    let req = FindCoordinatorRequest::default()
        .with_key(s(id))
        .with_key_type(1);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for addr in listeners.values() {
            let r: Option<FindCoordinatorResponse> =
                exchange(addr, ApiKey::FindCoordinator, 2, &req);
            if let Some(r) = r.filter(|r| r.error_code == 0) {
                return format!("{}:{}", r.host, r.port);
            }
        }
        assert!(
            Instant::now() < deadline,
            "no transaction coordinator for {id}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// InitProducerId v1 for `id` at its coordinator, retried while it is loading or busy.
fn init(addr: &str, id: &str) -> InitProducerIdResponse {
    let req = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s(id))))
        .with_transaction_timeout_ms(60_000);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r: InitProducerIdResponse = exchange(addr, ApiKey::InitProducerId, 1, &req).unwrap();
        // COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS.
        if ![14, 15, 51].contains(&r.error_code) || Instant::now() > deadline {
            return r;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn add_partitions(addr: &str, id: &str, pid: i64, epoch: i16, topic: &str) -> Vec<i16> {
    let t = AddPartitionsToTxnTopic::default()
        .with_name(TopicName(s(topic)))
        .with_partitions(vec![0, 1]);
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s(id)))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![t]);
    retried(|| {
        let r: AddPartitionsToTxnResponse =
            exchange(addr, ApiKey::AddPartitionsToTxn, 2, &req).unwrap();
        r.results_by_topic_v3_and_below
            .iter()
            .flat_map(|t| &t.results_by_partition)
            .map(|p| p.partition_error_code)
            .collect()
    })
}

/// `call`'s codes once no partition answers COORDINATOR_LOAD_IN_PROGRESS (14) or
/// CONCURRENT_TRANSACTIONS (51, markers of the last transaction still being written),
/// which clients retry.
fn retried(call: impl Fn() -> Vec<i16>) -> Vec<i16> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let codes = call();
        if !codes.iter().any(|c| [14, 51].contains(c)) || Instant::now() > deadline {
            return codes;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn end_txn(addr: &str, id: &str, pid: i64, epoch: i16, commit: bool) -> i16 {
    let req = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(s(id)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    retried(|| {
        let r: EndTxnResponse = exchange(addr, ApiKey::EndTxn, 2, &req).unwrap();
        vec![r.error_code]
    })[0]
}

#[test]
fn transaction_requests_answer_kafka_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cleanup = Cleanup::new(&tmp.path().join("data"));
    let cf = cluster_up(&mut cleanup, &["--brokers", "3"], Duration::from_secs(60));
    create_topic(&cf, "tt", "2");
    let ls = listeners(&cf);
    let coord = txn_coordinator(&ls, "tx-a");

    // An id nobody initialised: INVALID_PRODUCER_ID_MAPPING (49).
    let codes = add_partitions(&coord, "tx-a", 1234, 0, "tt");
    assert_eq!(codes, vec![49, 49]);
    // A negative producer id is refused before the coordinator: 49 too.
    assert_eq!(end_txn(&coord, "tx-a", -1, 0, true), 49);

    let id = init(&coord, "tx-a");
    assert_eq!(id.error_code, 0, "{id:?}");
    let (pid, epoch) = (id.producer_id.0, id.producer_epoch);
    assert!(pid >= 0 && epoch >= 0);
    // EndTxn with no transaction open: INVALID_TXN_STATE (48).
    assert_eq!(end_txn(&coord, "tx-a", pid, epoch, true), 48);
    // The transaction: partitions, then commit; a retry of the commit is answered as it.
    assert_eq!(add_partitions(&coord, "tx-a", pid, epoch, "tt"), vec![0, 0]);
    assert_eq!(end_txn(&coord, "tx-a", pid, epoch, true), 0);
    // Its retry is answered as the original; the other outcome is refused.
    assert_eq!(end_txn(&coord, "tx-a", pid, epoch, true), 0);
    assert_eq!(end_txn(&coord, "tx-a", pid, epoch, false), 48);
    // A v0-2 client learns no new epoch: it goes on at its own.
    assert_eq!(add_partitions(&coord, "tx-a", pid, epoch, "tt"), vec![0, 0]);
    // A second InitProducerId fences the first instance: PRODUCER_FENCED (90).
    let again = init(&coord, "tx-a");
    assert_eq!(again.error_code, 0, "{again:?}");
    assert!(again.producer_epoch > epoch);
    assert_eq!(
        add_partitions(&coord, "tx-a", pid, epoch, "tt"),
        vec![90, 90]
    );
    // Unknown partitions (a topic that does not exist) are named.
    let codes = add_partitions(&coord, "tx-a", pid, again.producer_epoch, "nope");
    assert!(codes.iter().all(|c| [3, 55].contains(c)), "{codes:?}");
    // Asking a broker that is not the coordinator: NOT_COORDINATOR (16).
    if let Some(other) = ls.values().find(|a| **a != coord) {
        assert_eq!(end_txn(other, "tx-a", pid, epoch, true), 16);
    }
}

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/kafka/confluent_transactions.py"
);

#[test]
fn confluent_kafka_transactions_commit_abort_and_read_committed() {
    if !common::up::require_confluent() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut cleanup = Cleanup::new(&tmp.path().join("data"));
    let cf = cluster_up(&mut cleanup, &["--brokers", "3"], Duration::from_secs(60));
    create_topic(&cf, "tx", "2");
    let bootstrap: Vec<String> = listeners(&cf).into_values().collect();
    let mut cmd = Command::new("python3");
    cmd.args([SCRIPT, &bootstrap.join(","), "tx", "txg"]);
    let out = common::run_with_stdin(cmd, b"", Duration::from_secs(240));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    check_run(stdout.trim());
}

/// kill -9 of the transaction coordinator's broker while a transaction is open (its
/// records delivered, not committed): the commit goes to the new coordinator, which
/// loaded the transaction from `__transaction_state`, and the outcome is as without the
/// kill.
#[test]
fn confluent_kafka_transaction_survives_coordinator_kill9() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    if !common::up::require_confluent() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut cleanup = Cleanup::new(&tmp.path().join("data"));
    let dir = tmp.path().join("data");
    let cf = cluster_up(&mut cleanup, &["--brokers", "3"], Duration::from_secs(60));
    create_topic(&cf, "tx", "2");
    let ls = listeners(&cf);
    let bootstrap: Vec<String> = ls.values().cloned().collect();
    let mut child = Command::new("python3")
        .args([SCRIPT, &bootstrap.join(","), "tx", "txg", "pause"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap_or_default());
        }
    });
    let half = rx.recv_timeout(Duration::from_secs(120));
    assert_eq!(
        half.as_deref(),
        Ok("HALF"),
        "the open transaction not delivered"
    );
    let coord = txn_coordinator(&ls, "skein-tx-1");
    let (&victim, _) = ls
        .iter()
        .find(|(_, a)| **a == coord)
        .unwrap_or_else(|| panic!("{coord} is none of {ls:?}"));
    let name = format!("broker-{victim}");
    let pid = common::procs::pids(&dir)[&name];
    common::procs::kill9_and_wait(&name, pid);
    stdin.write_all(b"go\n").unwrap();
    stdin.flush().unwrap();
    let result = rx.recv_timeout(Duration::from_secs(240));
    let _ = child.kill();
    let _ = child.wait();
    let result = result.expect("no result from the producer and consumers");
    check_run(&result);
    let moved = txn_coordinator(&ls, "skein-tx-1");
    assert_ne!(moved, coord, "the coordinator moved off the killed broker");
}

/// The script's JSON line: no error, exactly the committed records read_committed, every
/// record read_uncommitted, the transaction's group offset committed.
fn check_run(line: &str) {
    let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(v["errors"], serde_json::json!([]), "{v}");
    assert_eq!(v["second_committed"], true, "{v}");
    // ListOffsets with isolation: the open transaction holds read_committed's latest.
    let latest = |i: usize| {
        v["open_latest"][i]
            .as_i64()
            .unwrap_or_else(|| panic!("{v}"))
    };
    assert!(latest(0) < latest(1), "{v}");
    let mut committed: Vec<String> = (0..14).map(|i| format!("c{i}")).collect();
    committed.sort();
    assert_eq!(v["read_committed"], serde_json::json!(committed), "{v}");
    let mut all: Vec<String> = committed.clone();
    all.extend((0..10).map(|i| format!("a{i}")));
    all.sort();
    assert_eq!(v["read_uncommitted"], serde_json::json!(all), "{v}");
    assert_eq!(v["group_offsets"], serde_json::json!([[0, 3]]), "{v}");
}
