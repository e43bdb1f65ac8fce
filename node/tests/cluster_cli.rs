#![cfg(not(madsim))] // real sockets and processes; the madsim flavour runs tests/ instead
//! The `skein` binary end to end: `cluster up` (separate processes), topic admin, produce
//! and consume through stdin/stdout, config errors, `cluster down`.

mod common;

use common::procs::{running, text};
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

#[test]
#[allow(clippy::too_many_lines)] // split pending: predates the lint
fn cluster_up_topic_produce_consume_down() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let d = dir.to_str().unwrap();
    let limit = Duration::from_secs(60);

    let up = run(&["cluster", "up", "--brokers", "3", "--dir", d], "", limit);
    let _down = Down(dir.clone());
    assert!(
        up.status.success(),
        "cluster up failed: {}",
        text(&up.stderr)
    );
    assert!(
        text(&up.stdout).contains("broker 3"),
        "{}",
        text(&up.stdout)
    );
    let started = pids(&dir);
    assert_eq!(started.len(), 4, "controller + 3 brokers recorded");
    assert!(started.iter().all(|p| running(*p)));

    let cf = dir.join("cluster.toml");
    let cf = cf.to_str().unwrap();

    let again = run(&["cluster", "up", "--brokers", "3", "--dir", d], "", limit);
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("already running"),
        "{}",
        text(&again.stderr)
    );

    let too_many = run(
        &["topic", "create", "t", "-r", "4", "--cluster", cf],
        "",
        limit,
    );
    assert!(!too_many.status.success());
    assert!(
        text(&too_many.stderr).contains("replication factor 4 is above the broker count 3"),
        "{}",
        text(&too_many.stderr)
    );

    common::procs::create_topic(cf, "t", limit);
    let dup = run(&["topic", "create", "t", "--cluster", cf], "", limit);
    assert!(
        text(&dup.stderr).contains("already exists"),
        "{}",
        text(&dup.stderr)
    );

    let list = run(&["topic", "list", "--cluster", cf], "", limit);
    assert!(text(&list.stdout).starts_with("t\tpartitions=1\treplication_factor=3"));
    let describe = run(&["topic", "describe", "t", "--cluster", cf], "", limit);
    assert!(
        text(&describe.stdout).contains("replicas=[1, 2, 3]"),
        "{}",
        text(&describe.stdout)
    );

    let lines: String = (0..200).map(|i| format!("line-{i}\n")).collect();
    let produce = run(
        &[
            "produce",
            "--topic",
            "t",
            "--acks",
            "all",
            "--batch",
            "50",
            // Full batches even on a loaded machine (stdin closes after line 200).
            "--linger-ms",
            "2000",
            "--cluster",
            cf,
        ],
        &lines,
        limit,
    );
    assert!(produce.status.success(), "{}", text(&produce.stderr));
    let offsets: Vec<u64> = text(&produce.stdout)
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

    let consume = run(
        &[
            "consume",
            "--topic",
            "t",
            "--from-beginning",
            "--max",
            "200",
            "--cluster",
            cf,
        ],
        "",
        limit,
    );
    assert!(consume.status.success(), "{}", text(&consume.stderr));
    assert_eq!(text(&consume.stdout), lines);

    // A consumer group: the first member prints 120 records and commits them; the next
    // one resumes at the committed position.
    let group = |max: &str, extra: &[&str]| {
        let mut args = vec!["consume", "--topic", "t", "--group", "g", "--max", max];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--cluster", cf]);
        run(&args, "", limit)
    };
    let first = group("120", &["--from-beginning"]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert!(
        text(&first.stderr).contains("assigned t-0"),
        "{}",
        text(&first.stderr)
    );
    let second = group("80", &[]);
    assert!(second.status.success(), "{}", text(&second.stderr));
    assert_eq!(
        format!("{}{}", text(&first.stdout), text(&second.stdout)),
        lines,
        "together, once each, in order"
    );
    let refused = group("1", &["--partition", "0"]);
    assert!(!refused.status.success());
    assert!(text(&refused.stderr).contains("--partition and --group"));

    let describe = run(&["group", "describe", "g", "--cluster", cf], "", limit);
    assert!(describe.status.success(), "{}", text(&describe.stderr));
    let out = text(&describe.stdout);
    assert!(out.contains("state Empty"), "{out}");
    let row: Vec<&str> = out
        .lines()
        .find(|l| l.starts_with("t-0 "))
        .unwrap_or_else(|| panic!("no t-0 row: {out}"))
        .split_whitespace()
        .collect();
    let end = (offsets[199] + 1).to_string();
    assert_eq!(&row[1..4], &[end.as_str(), end.as_str(), "0"], "{out}");
    let nobody = run(&["group", "describe", "nobody", "--cluster", cf], "", limit);
    assert!(text(&nobody.stdout).contains("state Dead"));

    let stats = run(&["admin", "stats", "--cluster", cf], "", limit);
    assert!(stats.status.success(), "{}", text(&stats.stderr));
    let out = text(&stats.stdout);
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
    let json = run(&["admin", "stats", "--json", "--cluster", cf], "", limit);
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
    let ctl = run(&["admin", "stats", "--broker", &controller], "", limit);
    assert!(ctl.status.success(), "{}", text(&ctl.stderr));
    let out = text(&ctl.stdout);
    assert!(out.starts_with("== controller at"), "{out}");
    assert!(out.contains("ControllerRequest"), "{out}");
    let nowhere = run(&["admin", "stats", "--broker", "127.0.0.1:1"], "", limit);
    assert!(!nowhere.status.success());
    assert!(
        text(&nowhere.stderr).contains("cannot connect to 127.0.0.1:1"),
        "{}",
        text(&nowhere.stderr)
    );

    // One key, one partition (of three), in order.
    let create = run(
        &["topic", "create", "k", "--partitions", "3", "--cluster", cf],
        "",
        limit,
    );
    assert!(create.status.success(), "{}", text(&create.stderr));
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
        limit,
    );
    assert!(keyed.status.success(), "{}", text(&keyed.stderr));
    let parts: std::collections::BTreeSet<String> = text(&keyed.stdout)
        .lines()
        .map(|l| l.split('@').next().unwrap().to_string())
        .collect();
    assert_eq!(parts.len(), 1, "one key stays on one partition: {parts:?}");
    let part = parts.into_iter().next().unwrap();
    let p = part.rsplit('-').next().unwrap();
    let consumed = run(
        &[
            "consume",
            "--topic",
            "k",
            "--partition",
            p,
            "--from-beginning",
            "--max",
            "30",
            "--cluster",
            cf,
        ],
        "",
        limit,
    );
    assert_eq!(text(&consumed.stdout), keyed_lines);

    let unknown = run(
        &["consume", "--topic", "nope", "--max", "1", "--cluster", cf],
        "",
        limit,
    );
    assert!(!unknown.status.success());
    assert!(
        text(&unknown.stderr).contains("unknown topic \"nope\""),
        "{}",
        text(&unknown.stderr)
    );

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
        limit,
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("node_id 9 is not in the peer list"),
        "{}",
        text(&bad.stderr)
    );

    let down = run(&["cluster", "down", "--dir", d], "", limit);
    assert!(down.status.success(), "{}", text(&down.stderr));
    assert!(started.iter().all(|p| !running(*p)), "every node stopped");
    // Restart on the same directory (new ports): the data is recovered.
    let up2 = run(&["cluster", "up", "--brokers", "3", "--dir", d], "", limit);
    assert!(
        up2.status.success(),
        "second cluster up failed: {}",
        text(&up2.stderr)
    );
    let again = run(
        &[
            "consume",
            "--topic",
            "t",
            "--from-beginning",
            "--max",
            "200",
            "--cluster",
            cf,
        ],
        "",
        limit,
    );
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(text(&again.stdout), lines, "records survive a restart");
    let more = run(
        &["produce", "--topic", "t", "--quiet", "--cluster", cf],
        "after-restart\n",
        limit,
    );
    assert!(more.status.success(), "{}", text(&more.stderr));
    let restarted = pids(&dir);
    let del = run(&["topic", "delete", "t", "--cluster", cf], "", limit);
    assert!(del.status.success(), "{}", text(&del.stderr));
    let list = run(&["topic", "list", "--cluster", cf], "", limit);
    assert!(
        !text(&list.stdout).contains("t\tpartitions"),
        "t is gone: {}",
        text(&list.stdout)
    );
    assert!(
        text(&list.stdout).lines().any(|l| l.starts_with("k\t")),
        "k is still there"
    );
    let del = run(&["topic", "delete", "t", "--cluster", cf], "", limit);
    assert!(
        text(&del.stderr).contains("unknown topic"),
        "{}",
        text(&del.stderr)
    );
    let down = run(&["cluster", "down", "--dir", d], "", limit);
    assert!(down.status.success(), "{}", text(&down.stderr));
    assert!(restarted.iter().all(|p| !running(*p)), "every node stopped");

    // With the cluster gone, clients say what is wrong.
    let gone = run(&["topic", "list", "--cluster", cf], "", limit);
    assert_eq!(gone.status.code(), Some(2));
    assert!(
        text(&gone.stderr).contains("cannot connect to"),
        "{}",
        text(&gone.stderr)
    );
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
    // Brokers stop through a controlled shutdown that completes (cluster down stops the
    // brokers before the controller, so the controller answers).
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
