#![cfg(not(madsim))] // real sockets and processes; the madsim flavour runs tests/ instead
//! kafkajs, the pure JavaScript Kafka client (npm; none of librdkafka's or the Java
//! client's code), against `skein cluster up`: `node/tests/kafkajs/clients.js` runs the
//! cases and reports them as JSON, judged here (docs/kafka.md, "Tests"):
//! - a consumer with `maxBytesPerPartition`/`maxBytes` 8192 reads every record of a
//!   partition whose batches are ~15 KB, from offset 0 (the epoch marker) and, after a
//!   `kill -9` of the partition's leader, past the new leader's marker;
//! - a seek past the end: kafkajs resets by committing offset -1, which must be taken
//!   (it treats INVALID_REQUEST as fatal and crashes), and reads from the beginning;
//! - a gzip produce reads back;
//! - a group of two shares 4 partitions, rebalances when one leaves, and a third member
//!   resumes from the commits.
//!
//! kafkajs is installed by `npm ci` in node/tests/kafkajs (package-lock.json pins it);
//! `.ci/run` does that and sets SKEIN_REQUIRE_KAFKAJS=1, which turns a missing node or
//! kafkajs into a failure instead of a skip.

mod common;

use common::procs::{cluster_up, create_topic, kill9_leader, run, text, Cleanup};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

fn dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafkajs"))
}

/// Whether node and the installed kafkajs are there; else skip with a message, unless
/// SKEIN_REQUIRE_KAFKAJS=1.
fn kafkajs_or_skip() -> bool {
    let ok = Command::new("node")
        .args(["-e", "require('kafkajs')"])
        .current_dir(dir())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var("SKEIN_REQUIRE_KAFKAJS").as_deref() != Ok("1"),
            "SKEIN_REQUIRE_KAFKAJS=1 but node cannot load kafkajs (cd node/tests/kafkajs && npm ci)"
        );
        eprintln!("kafkajs test skipped: no node or kafkajs (cd node/tests/kafkajs && npm ci)");
    }
    ok
}

/// The Kafka bootstrap list `skein cluster up` wrote into the cluster file.
fn bootstrap(cf: &str) -> String {
    let toml = std::fs::read_to_string(cf).unwrap();
    let addrs: Vec<&str> = toml
        .lines()
        .filter_map(|l| l.trim().strip_prefix("kafka_listener = "))
        .map(|a| a.trim_matches('"'))
        .collect();
    assert_eq!(addrs.len(), 3, "{toml}");
    addrs.join(",")
}

fn topic(cf: &str, name: &str, partitions: &str) {
    let args = [
        "topic",
        "create",
        name,
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

fn values(tags: &[&str]) -> Vec<String> {
    tags.iter()
        .flat_map(|t| (0..5).map(move |i| format!("{t}-{i}")))
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn kafkajs_small_fetches_out_of_range_reset_groups_and_a_leader_kill() {
    if !kafkajs_or_skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut cleanup = Cleanup::new(&tmp.path().join("data"));
    let cf = cluster_up(&mut cleanup, &["--brokers", "3"], Duration::from_secs(60));
    create_topic(&cf, "t", Duration::from_secs(60));
    topic(&cf, "tg", "4");
    topic(&cf, "tz", "1");
    let mut child = Command::new("node")
        .arg("clients.js")
        .arg(bootstrap(&cf))
        .current_dir(dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap_or_default());
        }
    });
    let ready = rx.recv_timeout(Duration::from_secs(300));
    if ready.as_deref() != Ok("READY") {
        let _ = child.kill();
        panic!("kafkajs steps did not finish: {ready:?}");
    }
    kill9_leader(&cf, &cleanup.dir);
    stdin.write_all(b"go\n").unwrap();
    stdin.flush().unwrap();
    let result = rx.recv_timeout(Duration::from_secs(120));
    let _ = child.kill();
    let _ = child.wait();
    let result = result.expect("no result from the kafkajs script");
    let v: Value = serde_json::from_str(&result).unwrap_or_else(|e| panic!("{e}: {result}"));
    assert!(v.get("fatal").is_none(), "{v}");

    // 1. From offset 0 with an 8 KB limit: every record, the first at offset 1.
    assert_eq!(
        strings(&v["limit"]["read"]),
        values(&["a", "b", "c", "d"]),
        "{v}"
    );
    assert_eq!(v["limit"]["first_offset"], 1, "offset 0 is the marker: {v}");
    // 2. The out-of-range reset: no crash, t read again from the beginning.
    assert_eq!(v["out_of_range"]["crashes"], Value::Array(vec![]), "{v}");
    assert!(
        v["out_of_range"]["read_after_seek"].as_u64() >= Some(20),
        "{v}"
    );
    // 3. gzip (kafkajs's one built-in codec) produced and read back.
    assert_eq!(v["gzip"]["produce_error"], Value::Null, "{v}");
    assert_eq!(strings(&v["gzip"]["read"]), values(&["z"]), "{v}");
    // 4. The group: both held partitions, B all four after A left, every record read,
    //    and the third member resumed at the commits (nothing old read again).
    let g = &v["group"];
    assert!(g["both_held"][0].as_u64() >= Some(1) && g["both_held"][1].as_u64() >= Some(1));
    assert_eq!(g["b_held_all"], 4, "{v}");
    assert_eq!(g["read_by_two"], 400, "{v}");
    assert!(
        g["read_by_a"].as_u64() >= Some(1),
        "A read some before leaving: {v}"
    );
    assert_eq!(g["resumed_new"], 100, "{v}");
    assert_eq!(g["resumed_old"], 0, "resumed from the commits: {v}");
    assert_eq!(g["crashes"], Value::Array(vec![]), "{v}");
    // 5. Past the new leader's marker.
    assert_eq!(strings(&v["leader_change"]["read"]), values(&["e"]), "{v}");
    assert_eq!(v["leader_change"]["crashes"], Value::Array(vec![]), "{v}");
}
