#![cfg(not(madsim))] // real sockets and processes; the madsim flavour runs tests/ instead
//! kill -9 end to end, with real processes on loopback: `skein cluster up` (controller + 3
//! brokers), a topic with RF 3 and min.insync.replicas 2, 10,000 records through one
//! `skein produce` process (acks=all, idempotent), `kill -9` of the partition's leader while
//! it produces, `skein cluster restart` of that broker (same config and data dir), and
//! `skein consume` of everything: no acknowledged record missing, none duplicated, offsets in
//! order (skipping only the leaders' epoch markers), and the restarted broker back in the ISR.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const RECORDS: usize = 10_000;
/// Lines written before the kill, and by the restart.
const BEFORE_KILL: usize = 3_000;
const BEFORE_RESTART: usize = 6_000;

fn skein() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_skein"));
    c.env("RUST_LOG", "warn");
    c
}

/// Runs `skein args` to completion, killed after `limit`.
fn run(args: &[&str], limit: Duration) -> Output {
    let mut cmd = skein();
    if args.first() == Some(&"cluster") {
        // The nodes `cluster up|restart` start inherit this: their log files at info.
        cmd.env("RUST_LOG", "info");
    }
    let child = cmd
        .args(args)
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
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            kill9(pid);
            panic!("skein {args:?} did not finish within {limit:?}");
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn kill9(pid: u32) {
    let _ = Command::new("kill")
        .arg("-9")
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// `name -> pid` from the pid file `cluster up` writes (one `name pid` line per node).
fn pids(dir: &Path) -> BTreeMap<String, u32> {
    std::fs::read_to_string(dir.join("cluster.pid"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (name, pid) = l.split_once(' ')?;
            Some((name.to_string(), pid.trim().parse().ok()?))
        })
        .collect()
}

fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(") ")
            .is_some_and(|(_, r)| !r.starts_with('Z'))
    })
}

/// Always stops the cluster (and a still-running producer), even when an assertion fails:
/// `cluster down`, then SIGKILL for every pid ever recorded that still runs.
struct Cleanup {
    dir: PathBuf,
    seen: Vec<u32>,
    producer: Option<Child>,
}

impl Cleanup {
    fn note_pids(&mut self) {
        self.seen.extend(pids(&self.dir).into_values());
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(mut p) = self.producer.take() {
            let _ = p.kill();
            let _ = p.wait();
        }
        self.note_pids();
        let dir = self.dir.to_str().unwrap().to_string();
        if self.dir.join("cluster.pid").exists() {
            // Bounded by `down` itself (10 s per node, then SIGKILL); never panics here.
            let _ = skein()
                .args(["cluster", "down", "--dir", &dir])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        for pid in &self.seen {
            if running(*pid) {
                kill9(*pid);
            }
        }
    }
}

/// `(leader, isr)` of `t-0` from `skein topic describe t`.
fn describe(cf: &str) -> (Option<u32>, Vec<u32>) {
    let out = run(
        &["topic", "describe", "t", "--cluster", cf],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("t-0\t"))
        .unwrap_or_else(|| panic!("no t-0 line in {stdout}"));
    let field = |name: &str| {
        line.split('\t')
            .find_map(|f| f.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {line}"))
            .to_string()
    };
    let leader = field("leader=").parse().ok();
    let isr = field("isr=")
        .trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    (leader, isr)
}

/// Writes lines `from..to` (`v<i>`) to the producer's stdin.
fn feed(stdin: &mut ChildStdin, from: usize, to: usize) {
    let lines: String = (from..to).map(|i| format!("v{i}\n")).collect();
    stdin.write_all(lines.as_bytes()).unwrap();
    stdin.flush().unwrap();
}

/// Collects acknowledgement lines (`t-0@OFFSET`, one per record, in stdin order) until
/// `acked` holds `n`.
fn await_acks(acks: &mpsc::Receiver<String>, acked: &mut Vec<u64>, n: usize, limit: Duration) {
    let deadline = Instant::now() + limit;
    while acked.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        match acks.recv_timeout(left) {
            Ok(line) => acked.push(
                line.strip_prefix("t-0@")
                    .unwrap_or_else(|| panic!("unexpected producer output {line:?}"))
                    .parse()
                    .unwrap(),
            ),
            Err(e) => panic!(
                "only {} of {n} records acknowledged within {limit:?} ({e})",
                acked.len()
            ),
        }
    }
}

#[test]
#[allow(clippy::too_many_lines)] // split pending: predates the lint
fn kill9_leader_while_producing_loses_and_duplicates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let d = dir.to_str().unwrap().to_string();
    let limit = Duration::from_secs(60);
    let mut cleanup = Cleanup {
        dir: dir.clone(),
        seen: vec![],
        producer: None,
    };

    let up = run(&["cluster", "up", "--brokers", "3", "--dir", &d], limit);
    cleanup.note_pids();
    assert!(up.status.success(), "cluster up: {}", text(&up.stderr));
    let cf = dir.join("cluster.toml").to_str().unwrap().to_string();
    let create = run(
        &[
            "topic",
            "create",
            "t",
            "-r",
            "3",
            "--min-insync-replicas",
            "2",
            "--cluster",
            &cf,
        ],
        limit,
    );
    assert!(create.status.success(), "{}", text(&create.stderr));

    // One producer process for the whole run: acks=all is idempotent by default, so its
    // retries across the failover are answered as duplicates, never written twice.
    let mut producer = skein()
        .args([
            "produce",
            "--topic",
            "t",
            "--acks",
            "all",
            "--batch",
            "100",
            "--cluster",
            &cf,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = producer.stdin.take().unwrap();
    let stdout = producer.stdout.take().unwrap();
    let stderr = producer.stderr.take().unwrap();
    cleanup.producer = Some(producer);
    // Drained on a thread so a chatty producer never blocks on a full pipe.
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut s);
        s
    });
    let (tx, acks) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut acked = Vec::with_capacity(RECORDS);

    feed(&mut stdin, 0, BEFORE_KILL);
    await_acks(&acks, &mut acked, BEFORE_KILL, limit);

    // kill -9 the leader, then keep producing: the controller fences it after its session
    // times out and elects another ISR member; the producer retries meanwhile.
    let (leader, isr) = describe(&cf);
    let victim = leader.expect("t-0 has a leader");
    assert_eq!(
        isr.len(),
        3,
        "all replicas in sync before the kill: {isr:?}"
    );
    let name = format!("broker-{victim}");
    let pid = pids(&dir)[&name];
    kill9(pid);
    let t = Instant::now();
    while running(pid) {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{name} survived kill -9"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    feed(&mut stdin, BEFORE_KILL, BEFORE_RESTART);
    await_acks(&acks, &mut acked, BEFORE_RESTART, limit);
    let (leader, _) = describe(&cf);
    assert!(
        leader.is_some_and(|l| l != victim),
        "a new leader took over from {victim}: {leader:?}"
    );

    // Restart it from its own config and data dir: it recovers its log and rejoins.
    let restart = run(&["cluster", "restart", &name, "--dir", &d], limit);
    cleanup.note_pids();
    assert!(restart.status.success(), "{}", text(&restart.stderr));
    assert_ne!(pids(&dir)[&name], pid, "the pid file names the new process");
    feed(&mut stdin, BEFORE_RESTART, RECORDS);
    drop(stdin);
    await_acks(&acks, &mut acked, RECORDS, limit);
    let status = cleanup.producer.take().unwrap().wait().unwrap();
    let err = stderr.join().unwrap();
    assert!(status.success(), "producer failed: {err}");

    // The restarted broker catches up and is back in the ISR.
    let t = Instant::now();
    loop {
        let (_, isr) = describe(&cf);
        if isr.contains(&victim) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{name} did not rejoin the ISR: {isr:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // Every acknowledged record, once, at its acknowledged offset.
    let consume = run(
        &[
            "consume",
            "--topic",
            "t",
            "--from-beginning",
            "--print-offsets",
            "--idle-exit-ms",
            "3000",
            "--cluster",
            &cf,
        ],
        limit,
    );
    assert!(consume.status.success(), "{}", text(&consume.stderr));
    let consumed: Vec<(u64, String)> = text(&consume.stdout)
        .lines()
        .map(|l| {
            let (at, value) = l.split_once('\t').expect("t-0@OFFSET<TAB>value");
            let offset = at
                .strip_prefix("t-0@")
                .expect("t-0@OFFSET")
                .parse()
                .unwrap();
            (offset, value.to_string())
        })
        .collect();
    let offsets: Vec<u64> = consumed.iter().map(|(o, _)| *o).collect();
    // Increasing; the only offsets skipped are the leaders' epoch markers (one control
    // batch per leader election, which consumers do not see).
    if let Some(i) = offsets.windows(2).position(|w| w[1] <= w[0]) {
        let around = &consumed[i.saturating_sub(3)..(i + 4).min(consumed.len())];
        panic!("offsets out of order at position {i}: {around:?}");
    }
    let skipped = offsets.last().map_or(0, |l| l + 1) - offsets.len() as u64;
    assert!(
        (1..=10).contains(&skipped),
        "{skipped} offsets skipped: expected one epoch marker per election"
    );
    let mut by_value: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for (o, v) in &consumed {
        by_value.entry(v.as_str()).or_default().push(*o);
    }
    let duplicated: Vec<_> = by_value.iter().filter(|(_, os)| os.len() > 1).collect();
    assert!(duplicated.is_empty(), "duplicated records: {duplicated:?}");
    let missing: Vec<String> = (0..RECORDS)
        .filter(|i| by_value.get(format!("v{i}").as_str()) != Some(&vec![acked[*i]]))
        .map(|i| format!("v{i}@{}", acked[i]))
        .take(10)
        .collect();
    assert!(
        missing.is_empty(),
        "acknowledged records missing or elsewhere: {missing:?}"
    );
    assert_eq!(
        consumed.len(),
        RECORDS,
        "nothing beyond what was acknowledged"
    );

    // The restarted broker logged its recovery; nobody logged an error.
    let log = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap();
    assert!(
        log.contains("recovered partition log"),
        "{name}.log:\n{log}"
    );
    drop(cleanup);
    assert!(pids(&dir).is_empty(), "cluster down removed the pid file");
}
