#![cfg(not(madsim))] // real sockets and processes; the madsim flavour runs tests/ instead
//! `skein check` end to end: exit codes 0 (valid), 1 (anomalies), 2 (bad input).

use std::path::Path;
use std::process::{Command, Output};

const SEND_A: &str = r#"{"index":0,"time":1,"process":1,"type":"invoke","f":"send","value":{"topic":"t","partition":0,"value":"a"}}
{"index":1,"time":2,"process":1,"type":"ok","f":"send","value":{"topic":"t","partition":0,"value":"a","offset":0}}
{"index":2,"time":3,"process":1,"type":"invoke","f":"send","value":{"topic":"t","partition":0,"value":"b"}}
{"index":3,"time":4,"process":1,"type":"ok","f":"send","value":{"topic":"t","partition":0,"value":"b","offset":1}}
"#;

fn skein(dir: &Path, history: &str, flags: &[&str]) -> Output {
    let path = dir.join("history.jsonl");
    std::fs::write(&path, history).unwrap();
    Command::new(env!("CARGO_BIN_EXE_skein"))
        .arg("check")
        .arg(&path)
        .args(flags)
        .output()
        .unwrap()
}

fn poll(index: u64, records: &str) -> String {
    format!(
        "{{\"index\":{index},\"time\":9,\"process\":2,\"type\":\"ok\",\"f\":\"poll\",\"value\":{{\"records\":[{records}]}}}}\n"
    )
}

#[test]
fn valid_history_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let history = format!(
        "{SEND_A}{}",
        poll(
            4,
            r#"{"topic":"t","partition":0,"offset":0,"value":"a"},{"topic":"t","partition":0,"offset":1,"value":"b"}"#
        )
    );
    let out = skein(dir.path(), &history, &["--final-reads"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.starts_with("VALID"), "{stdout}");
}

#[test]
fn anomalies_exit_1_with_summary_or_json() {
    let dir = tempfile::tempdir().unwrap();
    let history = format!(
        "{SEND_A}{}",
        poll(4, r#"{"topic":"t","partition":0,"offset":1,"value":"b"}"#)
    );
    let out = skein(dir.path(), &history, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("lost-write"), "{stdout}");

    let out = skein(dir.path(), &history, &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["valid"], false);
    assert_eq!(json["lost-write"]["count"], 1);
    assert_eq!(json["lost-write"]["examples"][0]["send-index"], 1);
    assert_eq!(json["lost-write"]["examples"][0]["value"], "a");
}

#[test]
fn unseen_needs_final_reads() {
    let dir = tempfile::tempdir().unwrap();
    let history = format!(
        "{SEND_A}{}",
        poll(4, r#"{"topic":"t","partition":0,"offset":0,"value":"a"}"#)
    );
    assert_eq!(skein(dir.path(), &history, &[]).status.code(), Some(0));
    assert_eq!(
        skein(dir.path(), &history, &["--final-reads"])
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn bad_input_exits_2_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let history = format!("{SEND_A}{{\"index\":4,\"time\":5,\"type\":\"ok\"\n");
    let out = skein(dir.path(), &history, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("line 5"), "{stderr}");
    assert!(stderr.contains("history.jsonl"), "{stderr}");
}

#[test]
fn missing_file_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_skein"))
        .arg("check")
        .arg(dir.path().join("nope.jsonl"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope.jsonl"));
}

#[test]
fn reads_standard_input_with_dash() {
    use std::io::Write;
    use std::process::Stdio;
    let history = format!(
        "{SEND_A}{}",
        poll(
            4,
            r#"{"topic":"t","partition":0,"offset":1,"value":"b"},{"topic":"t","partition":0,"offset":0,"value":"a"}"#
        )
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_skein"))
        .args(["check", "-", "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(history.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["int-nonmonotonic-poll"]["count"], 1);
    assert_eq!(json["lost-write"]["count"], 0);
}

/// An aborted transaction writes "a"; a read_committed transaction (`isolation`) reads it.
fn aborted_read(isolation: &str) -> String {
    let write = r#"{"ops":[{"f":"send","topic":"t","partition":0,"value":"a","offset":0}]}"#;
    let read = format!(
        r#"{{"isolation":"{isolation}","ops":[{{"f":"poll","reads":[{{"topic":"t","partition":0,"records":[[0,"a"]]}}]}}]}}"#
    );
    [
        (1, "invoke", write.to_string()),
        (1, "fail", write.to_string()),
        (2, "invoke", r#"{"isolation":"read_committed","ops":[{"f":"poll"}]}"#.to_string()),
        (2, "ok", read),
    ]
    .iter()
    .enumerate()
    .map(|(i, (p, kind, value))| {
        format!("{{\"index\":{i},\"time\":{i},\"process\":{p},\"type\":\"{kind}\",\"f\":\"txn\",\"value\":{value}}}\n")
    })
    .collect()
}

#[test]
fn transactions_aborted_read_exits_1_and_its_twin_0() {
    let dir = tempfile::tempdir().unwrap();
    let out = skein(dir.path(), &aborted_read("read_committed"), &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.starts_with("INVALID: txn G1a"), "{stdout}");
    assert!(
        stdout.contains(r#"T1 (process 1, aborted) wrote "a" at t-0@0, which T3 (process 2) read"#),
        "{stdout}"
    );
    let out = skein(dir.path(), &aborted_read("read_committed"), &["--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["txn"]["G1a"]["count"], 1);
    assert_eq!(json["txn"]["G1a"]["examples"][0]["writer"]["index"], 1);

    let out = skein(dir.path(), &aborted_read("read_uncommitted"), &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("transactions: VALID"), "{stdout}");
}

#[test]
fn transactions_write_skew_fails_only_when_serializable() {
    // T1 reads x up to its end 0 and writes y; T3 reads y up to its end 0 and writes x.
    let t1 = r#"{"isolation":"read_committed","ops":[{"f":"poll","reads":[{"topic":"x","partition":0,"end":0}]},{"f":"send","topic":"y","partition":0,"value":"b","offset":0}]}"#;
    let t3 = r#"{"isolation":"read_committed","ops":[{"f":"poll","reads":[{"topic":"y","partition":0,"end":0}]},{"f":"send","topic":"x","partition":0,"value":"a","offset":0}]}"#;
    let history: String = [(1, "invoke", t1), (1, "ok", t1), (2, "invoke", t3), (2, "ok", t3)]
        .iter()
        .enumerate()
        .map(|(i, (p, kind, value))| {
            format!("{{\"index\":{i},\"time\":{i},\"process\":{p},\"type\":\"{kind}\",\"f\":\"txn\",\"value\":{value}}}\n")
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let out = skein(dir.path(), &history, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("(not an anomaly without --serializable)"),
        "{stdout}"
    );
    let out = skein(dir.path(), &history, &["--serializable"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("txn G2"), "{stdout}");
    assert!(
        stdout.contains(r#"T1 (process 1) read x-0 up to its end 0 and did not see T3 (process 2) write "a" at x-0@0 (rw)"#),
        "{stdout}"
    );
}

#[test]
fn transactions_bad_txn_exits_2_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let history = format!(
        "{SEND_A}{}\n",
        r#"{"index":4,"time":5,"process":3,"type":"ok","f":"txn","value":{"ops":[{"f":"send","topic":"t","partition":0,"value":"c"}]}}"#
    );
    let out = skein(dir.path(), &history, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("line 5") && stderr.contains("needs its offset"),
        "{stderr}"
    );
}

#[test]
fn plots_draw_the_history_with_its_faults_and_mark_the_anomaly() {
    let dir = tempfile::tempdir().unwrap();
    let history = format!(
        "{SEND_A}{}",
        poll(4, r#"{"topic":"t","partition":0,"offset":1,"value":"b"}"#)
    );
    let faults = dir.path().join("nemesis.jsonl");
    std::fs::write(
        &faults,
        r#"{"kind":"kill","node":"broker-2","start":1,"end":3,"label":"kill broker-2"}"#,
    )
    .unwrap();
    let plots = dir.path().join("plots");
    let flags = [
        "--plots",
        plots.to_str().unwrap(),
        "--faults",
        faults.to_str().unwrap(),
    ];
    let out = skein(dir.path(), &history, &flags);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the lost write still fails the check"
    );
    for file in skein_jepsen::plot::PLOTS.iter().map(|p| p.0) {
        let svg = std::fs::read_to_string(plots.join(file)).unwrap();
        assert!(
            svg.contains(r#"data-kind="kill""#),
            "{file}: the kill's lane"
        );
        assert!(svg.contains(">broker-2</text>"), "{file}: its target");
    }
    let timeline = std::fs::read_to_string(plots.join("timeline.html")).unwrap();
    assert!(
        timeline.contains(r#""label":"lost-write #1""#),
        "the anomaly is marked"
    );
    let index = std::fs::read_to_string(plots.join("index.html")).unwrap();
    assert!(index.contains("INVALID: lost-write"));
    assert!(index.contains("timeline.html#sel=violation"));

    // A missing faults file names the flag.
    let missing = dir.path().join("none.jsonl");
    let flags = [
        "--plots",
        plots.to_str().unwrap(),
        "--faults",
        missing.to_str().unwrap(),
    ];
    let out = skein(dir.path(), &history, &flags);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--faults"), "{stderr}");
}
