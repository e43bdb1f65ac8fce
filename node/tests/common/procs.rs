//! Helpers for the tests that run `skein` processes (`cluster up`, `produce`, `consume`,
//! `kill -9`) on loopback.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub fn skein() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_skein"));
    c.env("RUST_LOG", "warn");
    c
}

/// Runs `skein args` to completion, killed after `limit`.
pub fn run(args: &[&str], limit: Duration) -> Output {
    run_input(args, "", limit)
}

/// Runs `skein args` with `stdin` as its input, to completion, killed after `limit`.
pub fn run_input(args: &[&str], stdin: &str, limit: Duration) -> Output {
    let mut cmd = skein();
    if args.first() == Some(&"cluster") {
        // The nodes `cluster up|restart` start inherit this: their log files at info.
        cmd.env("RUST_LOG", "info");
    }
    cmd.args(args);
    super::run_with_stdin(cmd, stdin.as_bytes(), limit)
}

/// `skein topic create NAME -r 3 --min-insync-replicas 2`: the durable topic shape of the
/// process tests (acks=all needs two fsynced copies), which must succeed.
pub fn create_topic(cf: &str, name: &str, limit: Duration) {
    let args = [
        "topic",
        "create",
        name,
        "-r",
        "3",
        "--min-insync-replicas",
        "2",
        "--cluster",
        cf,
    ];
    let out = run(&args, limit);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts that `out` exited successfully; returns its stdout.
pub fn ok(out: &Output) -> String {
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// Asserts that `out`'s stderr contains `needle`.
pub fn says(out: &Output, needle: &str) {
    let err = text(&out.stderr);
    assert!(err.contains(needle), "{needle:?} missing in: {err}");
}

pub fn kill9(pid: u32) {
    let _ = Command::new("kill")
        .arg("-9")
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// `name -> pid` from the pid file `cluster up` writes (one `name pid` line per node).
pub fn pids(dir: &Path) -> BTreeMap<String, u32> {
    std::fs::read_to_string(dir.join("cluster.pid"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (name, pid) = l.split_once(' ')?;
            Some((name.to_string(), pid.trim().parse().ok()?))
        })
        .collect()
}

pub fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(") ")
            .is_some_and(|(_, r)| !r.starts_with('Z'))
    })
}

/// Always stops the cluster (and a still-running producer), even when an assertion fails:
/// `cluster down`, then SIGKILL for every pid ever recorded that still runs.
pub struct Cleanup {
    pub dir: PathBuf,
    pub seen: Vec<u32>,
    pub producer: Option<Child>,
}

impl Cleanup {
    /// Nothing recorded yet for the cluster in `dir`.
    pub fn new(dir: &Path) -> Self {
        Cleanup {
            dir: dir.to_path_buf(),
            seen: vec![],
            producer: None,
        }
    }

    pub fn note_pids(&mut self) {
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

/// `skein cluster up ARGS --dir DIR`, which must succeed; notes the pids it started and
/// returns the path of the cluster file it wrote.
pub fn cluster_up(cleanup: &mut Cleanup, args: &[&str], limit: Duration) -> String {
    let d = cleanup.dir.to_str().unwrap().to_string();
    let mut all = vec!["cluster", "up"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--dir", &d]);
    let up = run(&all, limit);
    cleanup.note_pids();
    assert!(up.status.success(), "cluster up: {}", text(&up.stderr));
    cleanup
        .dir
        .join("cluster.toml")
        .to_str()
        .unwrap()
        .to_string()
}

/// `kill -9 pid` (node `name`), then waits up to 5 s for it to be gone.
pub fn kill9_and_wait(name: &str, pid: u32) {
    kill9(pid);
    let t = Instant::now();
    while running(pid) {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{name} survived kill -9"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `kill -9` of `t-0`'s leader while all three replicas are in sync; returns its id, its
/// node name and the pid it had.
pub fn kill9_leader(cf: &str, dir: &Path) -> (u32, String, u32) {
    let (leader, isr) = describe(cf);
    let victim = leader.expect("t-0 has a leader");
    assert_eq!(
        isr.len(),
        3,
        "all replicas in sync before the kill: {isr:?}"
    );
    let name = format!("broker-{victim}");
    let pid = pids(dir)[&name];
    kill9_and_wait(&name, pid);
    (victim, name, pid)
}

/// `t-0` gets a leader other than `victim` within 30 s. Polled: the controller moves the
/// leadership only once the victim's session times out (about 5.5 s), and `describe` may be
/// answered by a controller that has not applied the latest records yet. Asked once, this
/// failed about one run in three on 2026-12-07 (those runs' producer finished ~3.5 s
/// sooner than in passing ones, not yet explained; the final exactly-once check still
/// judges every acknowledged record).
pub fn assert_new_leader(cf: &str, victim: u32) {
    let t = Instant::now();
    loop {
        let (leader, _) = describe(cf);
        if leader.is_some_and(|l| l != victim) {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no new leader took over from {victim} in 30 s: {leader:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `(leader, isr)` of `t-0` from `skein topic describe t`.
pub fn describe(cf: &str) -> (Option<u32>, Vec<u32>) {
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

/// Consumes all of `t-0` and checks it against `acked` (the acknowledged offset of `v<i>`,
/// for every `i`): every acknowledged record once, at its acknowledged offset, nothing
/// else, offsets increasing and skipping only the leaders' epoch markers (between 1 and
/// `max_skipped`: one per election).
pub fn assert_consumed_exactly(cf: &str, acked: &[u64], max_skipped: u64) {
    let limit = Duration::from_secs(60);
    let records = acked.len();
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
            cf,
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
        (1..=max_skipped).contains(&skipped),
        "{skipped} offsets skipped: expected one epoch marker per election"
    );
    let mut by_value: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for (o, v) in &consumed {
        by_value.entry(v.as_str()).or_default().push(*o);
    }
    let duplicated: Vec<_> = by_value.iter().filter(|(_, os)| os.len() > 1).collect();
    assert!(duplicated.is_empty(), "duplicated records: {duplicated:?}");
    let missing: Vec<String> = (0..records)
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
        records,
        "nothing beyond what was acknowledged"
    );
}

/// `skein produce --topic t --acks all --batch BATCH --cluster CF`: the process tests'
/// durable producer.
pub fn produce_args<'a>(cf: &'a str, batch: &'a str) -> Vec<&'a str> {
    vec![
        "produce",
        "--topic",
        "t",
        "--acks",
        "all",
        "--batch",
        batch,
        "--cluster",
        cf,
    ]
}

/// One `skein produce --acks all --batch 100` process for topic `t` (idempotent by
/// default, so its retries across a failover are answered as duplicates, never written
/// twice), fed lines `v<i>`, with the offsets acknowledged so far.
pub struct Producer {
    stdin: Option<ChildStdin>,
    acks: mpsc::Receiver<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
    /// The acknowledged offset of `v<i>`, for every `i` fed and acknowledged.
    pub acked: Vec<u64>,
    fed: usize,
}

impl Producer {
    /// Starts the process; `cleanup` kills it if the test fails first.
    pub fn spawn(cf: &str, cleanup: &mut Cleanup) -> Self {
        let mut producer = skein()
            .args(produce_args(cf, "100"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = producer.stdin.take().unwrap();
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
        Producer {
            stdin: Some(stdin),
            acks,
            stderr: Some(stderr),
            acked: Vec::new(),
            fed: 0,
        }
    }

    /// Feeds lines up to `v<to - 1>` and waits until all of them are acknowledged.
    pub fn produce_until(&mut self, to: usize, limit: Duration) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        feed(stdin, self.fed, to);
        self.fed = to;
        await_acks(&self.acks, &mut self.acked, to, limit);
    }

    /// Closes stdin and checks that the process exits successfully.
    pub fn finish(&mut self, cleanup: &mut Cleanup) {
        drop(self.stdin.take());
        let status = cleanup.producer.take().unwrap().wait().unwrap();
        let err = self.stderr.take().expect("finished once").join().unwrap();
        assert!(status.success(), "producer failed: {err}");
    }
}
