#![cfg(not(madsim))] // real sockets and processes; the madsim flavour runs tests/ instead
//! `skein jepsen run` end to end: a short run with every nemesis on a real local cluster
//! (3 controllers, the default, and 3 brokers; a 2-partition topic) passes the checker, its
//! history holds acknowledged sends and reads in both partitions and the group members'
//! assignments and commits, its nemesis log the
//! faults that struck (one of each kind, the active controller killed and paused), and the
//! plots and timeline are written with the faults shaded. Every node process it started is
//! gone afterwards.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Runs `skein jepsen run` into `dir`, killed if it outlives 180 s; asserts it passed.
fn run_passing(dir: &Path) {
    let started = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_skein"))
        .args(["jepsen", "run", "--time", "32s", "--interval", "4s"])
        .args(["--nemesis", "all", "--rate", "20", "--partitions", "2"])
        // 32 s in 4 s slots: seven faults, one of each kind (a round of the schedule). Seed
        // 15 pauses the active controller, then kills the (then) active controller, and
        // cuts the link between a partition leader and a controller.
        .args(["--seed", "15", "--dir"])
        .arg(dir)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(Duration::from_secs(180)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg(pid.to_string())
                .status();
            panic!("skein jepsen run did not finish within 180 s");
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("jepsen run took {:?}", started.elapsed());
    assert!(
        out.status.success(),
        "jepsen run failed ({:?}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("jepsen: PASS"), "{stdout}");
}

/// The history: acknowledged acks=all sends and non-empty reads in both partitions; the
/// group members' subscriptions, assignments and commits.
fn assert_history(dir: &Path) {
    // The history: acknowledged acks=all sends and non-empty reads.
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let events: Vec<serde_json::Value> = history
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ok_sends = events
        .iter()
        .filter(|e| e["f"] == "send" && e["type"] == "ok")
        .count();
    assert!(ok_sends > 50, "only {ok_sends} acknowledged sends");
    assert!(events
        .iter()
        .filter(|e| e["f"] == "send")
        .all(|e| e["value"]["acks"] == "all"));
    let read = events
        .iter()
        .filter(|e| e["f"] == "poll" && e["type"] == "ok")
        .map(|e| e["value"]["records"].as_array().unwrap().len())
        .sum::<usize>();
    assert!(
        read >= ok_sends,
        "read {read} records, {ok_sends} acknowledged"
    );
    // Two group members (the default) joined, were assigned partitions and committed in
    // a generation; the report judged the commits.
    let count = |f: &str, t: &str| {
        events
            .iter()
            .filter(|e| e["f"] == f && e["type"] == t)
            .count()
    };
    // Each member slot's incarnations live 8-16 s: at least one leave or crash each in
    // 32 s, so a rebalance (an `assign` of nothing) comes before the workload's end.
    assert!(
        count("subscribe", "ok") >= 4,
        "{}",
        count("subscribe", "ok")
    );
    let last_send = events.iter().rposition(|e| e["f"] == "send").unwrap();
    assert!(events[..last_send].iter().any(|e| e["f"] == "assign"
        && e["value"]["partitions"]
            .as_array()
            .is_some_and(|a| a.is_empty())));
    assert!(events.iter().any(|e| e["f"] == "assign"
        && e["value"]["partitions"]
            .as_array()
            .is_some_and(|a| !a.is_empty())));
    assert!(
        count("commit", "ok") > 10,
        "{} commits",
        count("commit", "ok")
    );
    assert!(events
        .iter()
        .any(|e| e["f"] == "commit" && e["type"] == "ok" && e["value"]["generation"].is_u64()));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["commit-regression"]["count"], 0, "{report}");
    for p in 0..2 {
        assert!(
            events
                .iter()
                .any(|e| e["f"] == "send" && e["type"] == "ok" && e["value"]["partition"] == p),
            "no acknowledged send to partition {p}"
        );
    }
}

/// The faults, one of each kind, each healed; returns them.
fn assert_faults(dir: &Path) -> Vec<serde_json::Value> {
    // The faults, one of each kind, each healed.
    let nemesis = std::fs::read_to_string(dir.join("nemesis.jsonl")).unwrap();
    let faults: Vec<serde_json::Value> = nemesis
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for kind in [
        "kill",
        "pause",
        "partition",
        "link",
        "halves",
        "slow",
        "lossy",
    ] {
        assert!(
            faults.iter().any(|f| f["kind"] == kind),
            "no {kind} fault in {nemesis}"
        );
    }
    // The active controller is struck (resolved to a controller when the fault starts).
    for kind in ["kill", "pause"] {
        assert!(
            faults.iter().any(|f| f["kind"] == kind
                && f["target"] == "active controller"
                && f["node"].as_str().unwrap().starts_with("controller-")),
            "no {kind} of the active controller in {nemesis}"
        );
    }
    // A link fault cuts exactly one pair; a partition isolates one node from all five.
    let link = faults.iter().find(|f| f["kind"] == "link").unwrap();
    assert_eq!(link["links"].as_array().unwrap().len(), 1, "{link}");
    let partition = faults.iter().find(|f| f["kind"] == "partition").unwrap();
    assert_eq!(
        partition["links"].as_array().unwrap().len(),
        5,
        "{partition}"
    );
    assert!(faults
        .iter()
        .all(|f| f["end"].as_u64() > f["start"].as_u64()));

    faults
}

#[test]
fn short_run_with_every_nemesis_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    run_passing(&dir);
    assert_history(&dir);
    let faults = assert_faults(&dir);

    // Outputs: plots with one span per fault in its kind's lane, a timeline, an index
    // linking them and the node logs.
    let latency = std::fs::read_to_string(dir.join("latency.svg")).unwrap();
    assert_eq!(
        latency.matches(r#"class="fault-span""#).count(),
        faults.len(),
        "one span per fault"
    );
    assert!(
        latency.matches("</use>").count() > 50,
        "a mark per operation"
    );
    for plot in ["latency-quantiles.svg", "rate.svg", "unseen.svg", "lag.svg"] {
        let svg = std::fs::read_to_string(dir.join(plot)).unwrap();
        assert!(svg.contains("<polyline"), "{plot} draws lines");
        assert_eq!(svg.matches(r#"class="fault-span""#).count(), faults.len());
    }
    let timeline = std::fs::read_to_string(dir.join("timeline.html")).unwrap();
    assert!(timeline.contains(r#""name":"producer 1""#));
    let index = std::fs::read_to_string(dir.join("index.html")).unwrap();
    for link in ["timeline.html", "lag.svg", "broker-1.log", "history.jsonl"] {
        assert!(
            index.contains(&format!(r#"href="{link}""#)),
            "index links {link}"
        );
    }
    for node in [
        "controller-1",
        "controller-2",
        "controller-3",
        "broker-1",
        "broker-2",
        "broker-3",
    ] {
        assert!(dir.join(format!("{node}.log")).exists(), "{node}.log");
    }

    // No node of this run survives it.
    let dir_str = dir.to_string_lossy().into_owned();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline);
        assert!(
            !(cmdline.contains("node") && cmdline.contains(&dir_str)),
            "a node of the run is still alive: {cmdline}"
        );
    }
}

/// The harness must catch a historical bug switched back on in the real binary: with
/// `--bug ack-before-isr` every node's leaders acknowledge acks=all writes before the ISR
/// has them, and a partition of the leader longer than the session timeout (seed 2: the
/// leader is cut off 12.5-16.8 s, the controller fences it after 3 s and elects a follower)
/// loses what the isolated leader acknowledged alone. The same run without the bug passes
/// (measured: seeds 2 and 4 both pass clean and fail with the bug). One controller: the
/// schedule and timing were measured with it (with one controller a seed draws the same
/// faults as before quorums existed).
#[test]
fn ack_before_isr_in_the_real_binary_is_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let out = Command::new(env!("CARGO_BIN_EXE_skein"))
        .args(["jepsen", "run", "--time", "20s", "--interval", "10s"])
        .args(["--nemesis", "partition", "--rate", "20", "--seed", "2"])
        .args(["--controllers", "1", "--bug", "ack-before-isr", "--dir"])
        .arg(&dir)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "expected the checker to fail:\n{stdout}"
    );
    assert!(stdout.contains("jepsen: FAIL"), "{stdout}");
    assert!(
        stdout.contains("--bug ack-before-isr"),
        "the replay command must repeat the bug:\n{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    // An acknowledged write is gone: never read (unseen), or read and later replaced.
    let lost = ["lost-write", "unseen", "inconsistent-offsets"]
        .iter()
        .map(|k| report[k]["count"].as_u64().unwrap_or(0))
        .sum::<u64>();
    assert!(lost > 0, "no acknowledged write was lost:\n{stdout}");
}

#[test]
fn an_unknown_bug_is_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    // `skein jepsen run ARGS --dir run` fails naming every one of `needles`, and nothing
    // starts.
    let refused = |args: &[&str], needles: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_skein"))
            .args(["jepsen", "run"])
            .args(args)
            .arg("--dir")
            .arg(tmp.path().join("run"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(needles.iter().all(|n| stderr.contains(n)), "{stderr}");
        assert!(!tmp.path().join("run").exists(), "nothing may start");
    };
    refused(
        &["--bug", "no-such-bug"],
        &["no-such-bug", "ack-before-isr"],
    );
    // So is a quorum that survives no more failures than a smaller one.
    refused(
        &["--controllers", "2"],
        &["--controllers must be 1, 3 or 5"],
    );
}

/// `--workload txn`: transactional producers and read_committed readers under kills
/// (of partition leaders, so of transaction coordinators too), pauses and partitions. The
/// run passes, and its report shows transactions of all three outcomes judged by the
/// transactional checker: committed ones read back, aborted ones never read.
#[test]
fn txn_workload_under_faults_passes_the_transactional_checker() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let out = Command::new(env!("CARGO_BIN_EXE_skein"))
        .args(["jepsen", "run", "--workload", "txn", "--time", "20s"])
        .args(["--interval", "4s", "--nemesis", "kill,pause,partition"])
        .args(["--rate", "20", "--partitions", "2", "--seed", "1", "--dir"])
        .arg(&dir)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("jepsen: PASS"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let txn = &report["txn"];
    assert_eq!(txn["valid"], true, "{txn}");
    let stats = &txn["stats"];
    let n = |k: &str| stats[k].as_u64().unwrap_or(0);
    assert!(n("committed") > 50, "{stats}");
    assert!(n("aborted") > 0, "{stats}");
    assert!(n("records-read") > 0, "{stats}");
    for class in ["G1a", "G1b", "lost-write", "duplicate", "torn-transaction"] {
        assert_eq!(txn[class]["count"], 0, "{class}: {txn}");
    }
}
