#![cfg(not(madsim))] // real sockets and processes; the madsim flavour runs tests/ instead
//! `skein jepsen run` end to end: a short run with every nemesis on a real local cluster
//! passes the checker, its history holds acknowledged sends and reads, its nemesis log the
//! faults that struck (one of each kind), and the plots and timeline are written with the
//! faults shaded. Every node process it started is gone afterwards.

use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[test]
fn short_run_with_every_nemesis_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let started = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_skein"))
        .args(["jepsen", "run", "--time", "16s", "--interval", "4s"])
        .args(["--nemesis", "kill,pause,partition", "--rate", "20"])
        // 16 s in 4 s slots: three faults, one of each kind (a round of the schedule).
        .args(["--seed", "3", "--dir"])
        .arg(&dir)
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

    // The faults, one of each kind, each healed.
    let nemesis = std::fs::read_to_string(dir.join("nemesis.jsonl")).unwrap();
    let faults: Vec<serde_json::Value> = nemesis
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for kind in ["kill", "pause", "partition"] {
        assert!(
            faults.iter().any(|f| f["kind"] == kind),
            "no {kind} fault in {nemesis}"
        );
    }
    assert!(faults
        .iter()
        .all(|f| f["end"].as_u64() > f["start"].as_u64()));

    // Outputs: plots with one shaded window per fault, a timeline, node logs.
    let latency = std::fs::read_to_string(dir.join("latency.svg")).unwrap();
    assert_eq!(
        latency.matches(r#"class="fault""#).count(),
        faults.len(),
        "one shaded window per fault"
    );
    assert!(latency.matches("<circle").count() > 50);
    let rate = std::fs::read_to_string(dir.join("rate.svg")).unwrap();
    assert!(rate.contains("<polyline"));
    let timeline = std::fs::read_to_string(dir.join("timeline.html")).unwrap();
    assert!(timeline.contains(r#"class="op""#));
    for node in ["controller", "broker-1", "broker-2", "broker-3"] {
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
