#![cfg(not(madsim))] // real sockets and processes; the madsim flavour runs tests/ instead
//! The `skein` binary end to end: `cluster up` (separate processes), topic admin, produce
//! and consume through stdin/stdout, config errors, `cluster down`.

mod common;

use common::procs::{ok, running, says, text};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

/// Runs `skein args` with `stdin`, killed after `limit`.
fn run(args: &[&str], stdin: &str, limit: Duration) -> Output {
    common::procs::run_input(args, stdin, limit)
}

/// Stops the cluster even when an assertion fails.
struct Down(PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        let dir = self.0.to_str().unwrap().to_string();
        let _ = run(
            &["cluster", "down", "--dir", &dir],
            "",
            Duration::from_secs(60),
        );
    }
}

/// The pids of the nodes `cluster up` started.
fn pids(dir: &Path) -> Vec<u32> {
    common::procs::pids(dir).into_values().collect()
}

const LIMIT: Duration = Duration::from_secs(60);

/// `skein ARGS --cluster CF` with no input.
fn at(cf: &str, args: &[&str]) -> Output {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--cluster", cf]);
    run(&all, "", LIMIT)
}

/// `skein consume --topic TOPIC --from-beginning --max MAX EXTRA`, which must succeed;
/// returns what it printed.
fn consume(cf: &str, topic: &str, max: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "consume",
        "--topic",
        topic,
        "--from-beginning",
        "--max",
        max,
    ];
    args.extend_from_slice(extra);
    ok(&at(cf, &args))
}

#[test]
fn cluster_up_topic_produce_consume_down() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let d = dir.to_str().unwrap();

    // One controller: this test reads the single controller's address from cluster.toml.
    let up = run(
        &[
            "cluster",
            "up",
            "--brokers",
            "3",
            "--controllers",
            "1",
            "--dir",
            d,
        ],
        "",
        LIMIT,
    );
    let _down = Down(dir.clone());
    assert!(ok(&up).contains("broker 3"), "{}", text(&up.stdout));
    let started = pids(&dir);
    assert_eq!(started.len(), 4, "controller + 3 brokers recorded");
    assert!(started.iter().all(|p| running(*p)));

    let cf = dir.join("cluster.toml");
    let cf = cf.to_str().unwrap();

    let again = run(
        &[
            "cluster",
            "up",
            "--brokers",
            "3",
            "--controllers",
            "1",
            "--dir",
            d,
        ],
        "",
        LIMIT,
    );
    assert!(!again.status.success());
    says(&again, "already running");

    topic_admin(cf);
    let (lines, offsets) = produce_and_consume(cf);
    consumer_group(cf, &lines, offsets[199]);
    admin_stats(cf, &dir);
    keyed_and_refused(cf, &dir);

    ok(&run(&["cluster", "down", "--dir", d], "", LIMIT));
    assert!(started.iter().all(|p| !running(*p)), "every node stopped");
    restart_and_delete(cf, d, &lines);
    // With the cluster gone, clients say what is wrong.
    let gone = at(cf, &["topic", "list"]);
    assert_eq!(gone.status.code(), Some(2));
    says(&gone, "cannot connect to");
    node_logs(&dir);
}

/// Topic create (refused above the broker count, refused twice), list and describe.
fn topic_admin(cf: &str) {
    let too_many = at(cf, &["topic", "create", "t", "-r", "4"]);
    assert!(!too_many.status.success());
    says(
        &too_many,
        "replication factor 4 is above the broker count 3",
    );

    common::procs::create_topic(cf, "t", LIMIT);
    says(&at(cf, &["topic", "create", "t"]), "already exists");

    let list = at(cf, &["topic", "list"]);
    assert!(text(&list.stdout).starts_with("t\tpartitions=1\treplication_factor=3"));
    let describe = ok(&at(cf, &["topic", "describe", "t"]));
    assert!(describe.contains("replicas=[1, 2, 3]"), "{describe}");
}

/// 200 lines through `skein produce` (4 batches of 50) and back through `skein consume`;
/// returns the lines and their offsets.
fn produce_and_consume(cf: &str) -> (String, Vec<u64>) {
    let lines: String = (0..200).map(|i| format!("line-{i}\n")).collect();
    let mut args = common::procs::produce_args(cf, "50");
    // Full batches even on a loaded machine (stdin closes after line 200).
    args.extend(["--linger-ms", "2000"]);
    let produce = run(&args, &lines, LIMIT);
    let offsets: Vec<u64> = ok(&produce)
        .lines()
        .map(|l| l.strip_prefix("t-0@").expect("t-0@OFFSET").parse().unwrap())
        .collect();
    assert_eq!(offsets.len(), 200);
    assert!(
        offsets.windows(2).all(|w| w[1] > w[0]),
        "increasing offsets"
    );
    assert!(
        offsets.chunks(50).all(|c| c[49] - c[0] == 49),
        "contiguous within each batch of 50"
    );
    assert_eq!(consume(cf, "t", "200", &[]), lines);
    (lines, offsets)
}

/// A consumer group: the first member prints 120 records and commits them; the next one
/// resumes at the committed position; `group describe` shows the commit at `last + 1`.
fn consumer_group(cf: &str, lines: &str, last: u64) {
    let group = |max: &str, extra: &[&str]| {
        let mut args = vec!["consume", "--topic", "t", "--group", "g", "--max", max];
        args.extend_from_slice(extra);
        at(cf, &args)
    };
    let first = group("120", &["--from-beginning"]);
    let first_out = ok(&first);
    says(&first, "assigned t-0");
    let second = ok(&group("80", &[]));
    assert_eq!(
        format!("{first_out}{second}"),
        lines,
        "together, once each, in order"
    );
    let refused = group("1", &["--partition", "0"]);
    assert!(!refused.status.success());
    says(&refused, "--partition and --group");

    let out = ok(&at(cf, &["group", "describe", "g"]));
    assert!(out.contains("state Empty"), "{out}");
    let row: Vec<&str> = out
        .lines()
        .find(|l| l.starts_with("t-0 "))
        .unwrap_or_else(|| panic!("no t-0 row: {out}"))
        .split_whitespace()
        .collect();
    let end = (last + 1).to_string();
    assert_eq!(&row[1..4], &[end.as_str(), end.as_str(), "0"], "{out}");
    let nobody = at(cf, &["group", "describe", "nobody"]);
    assert!(text(&nobody.stdout).contains("state Dead"));
}

/// `admin stats` of the brokers (text and JSON) and of the controller; a broker address
/// nobody listens on is an error.
fn admin_stats(cf: &str, dir: &Path) {
    let out = ok(&at(cf, &["admin", "stats"]));
    for want in [
        "== broker 1",
        "== broker 3",
        "t-0",
        "leader",
        "Produce",
        "Fetch",
    ] {
        assert!(out.contains(want), "{want} missing in: {out}");
    }
    let json = at(cf, &["admin", "stats", "--json"]);
    let snaps: Vec<serde_json::Value> = text(&json.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(snaps.len(), 3);
    let produced: u64 = snaps
        .iter()
        .flat_map(|s| s["requests"].as_array().unwrap().iter())
        .filter(|r| r["kind"] == "Produce")
        .map(|r| r["count"].as_u64().unwrap())
        .sum();
    assert!(produced >= 4, "4 batches of 50 were produced: {produced}");
    // The controller answers too (no partitions; it counts broker heartbeats).
    let cluster_file = std::fs::read_to_string(dir.join("cluster.toml")).unwrap();
    let controller = cluster_file
        .lines()
        .find_map(|l| l.strip_prefix("controller = "))
        .map(|v| v.trim().trim_matches('"').to_string())
        .expect("controller address in cluster.toml");
    let out = ok(&run(
        &["admin", "stats", "--broker", &controller],
        "",
        LIMIT,
    ));
    assert!(out.starts_with("== controller at"), "{out}");
    assert!(out.contains("ControllerRequest"), "{out}");
    let nowhere = run(&["admin", "stats", "--broker", "127.0.0.1:1"], "", LIMIT);
    assert!(!nowhere.status.success());
    says(&nowhere, "cannot connect to 127.0.0.1:1");
}

/// One key stays on one partition (of three), in order; an unknown topic and a node id
/// outside the peer list are refused.
fn keyed_and_refused(cf: &str, dir: &Path) {
    let made = ok(&at(cf, &["topic", "create", "k", "--partitions", "3"]));
    // It returns once every broker serves the topic, not only the controller.
    assert!(
        made.contains("served with leaders by broker(s) 1,2,3"),
        "{made}"
    );
    let keyed_lines: String = (0..30).map(|i| format!("k{i}\n")).collect();
    let keyed = run(
        &[
            "produce",
            "--topic",
            "k",
            "--key",
            "user-7",
            "--batch",
            "7",
            "--cluster",
            cf,
        ],
        &keyed_lines,
        LIMIT,
    );
    let parts: std::collections::BTreeSet<String> = ok(&keyed)
        .lines()
        .map(|l| l.split('@').next().unwrap().to_string())
        .collect();
    assert_eq!(parts.len(), 1, "one key stays on one partition: {parts:?}");
    let part = parts.into_iter().next().unwrap();
    let p = part.rsplit('-').next().unwrap();
    assert_eq!(consume(cf, "k", "30", &["--partition", p]), keyed_lines);

    let unknown = at(cf, &["consume", "--topic", "nope", "--max", "1"]);
    assert!(!unknown.status.success());
    says(&unknown, "unknown topic \"nope\"");

    // A node config naming a broker id outside the peer list is refused at start.
    let bad = run(
        &[
            "node",
            "--config",
            dir.join("broker-1.toml").to_str().unwrap(),
            "--node-id",
            "9",
        ],
        "",
        LIMIT,
    );
    assert_eq!(bad.status.code(), Some(2));
    says(&bad, "node_id 9 is not in the peer list");
}

/// Restart on the same directory (new ports): the data is recovered; then topic delete
/// (twice: the second is refused) and `cluster down`.
fn restart_and_delete(cf: &str, d: &str, lines: &str) {
    let up2 = run(
        &[
            "cluster",
            "up",
            "--brokers",
            "3",
            "--controllers",
            "1",
            "--dir",
            d,
        ],
        "",
        LIMIT,
    );
    assert!(
        up2.status.success(),
        "second cluster up failed: {}",
        text(&up2.stderr)
    );
    assert_eq!(
        consume(cf, "t", "200", &[]),
        lines,
        "records survive a restart"
    );
    let more = run(
        &["produce", "--topic", "t", "--quiet", "--cluster", cf],
        "after-restart\n",
        LIMIT,
    );
    ok(&more);
    let restarted = pids(Path::new(d));
    ok(&at(cf, &["topic", "delete", "t"]));
    let list = text(&at(cf, &["topic", "list"]).stdout);
    assert!(!list.contains("t\tpartitions"), "t is gone: {list}");
    assert!(
        list.lines().any(|l| l.starts_with("k\t")),
        "k is still there"
    );
    says(&at(cf, &["topic", "delete", "t"]), "unknown topic");
    ok(&run(&["cluster", "down", "--dir", d], "", LIMIT));
    assert!(restarted.iter().all(|p| !running(*p)), "every node stopped");
}

/// Both runs stopped gracefully: no errors, SIGTERM handled, controlled shutdowns that
/// completed (cluster down stops the brokers before the controller, so it answers).
fn node_logs(dir: &Path) {
    for name in ["controller", "broker-1"] {
        let log = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap();
        assert!(!log.contains("ERROR"), "{name}.log has errors:\n{log}");
        // SIGTERM took the graceful path (twice: two runs).
        assert_eq!(
            log.matches("shutdown signal received").count(),
            2,
            "{name}.log:\n{log}"
        );
        assert_eq!(
            log.matches("state machine stopped").count(),
            2,
            "{name}.log:\n{log}"
        );
    }
    for id in 1..=3 {
        let log = std::fs::read_to_string(dir.join(format!("broker-{id}.log"))).unwrap();
        assert_eq!(
            log.matches("controlled shutdown: leaderships handed over")
                .count(),
            2,
            "broker-{id}.log:\n{log}"
        );
    }
}
