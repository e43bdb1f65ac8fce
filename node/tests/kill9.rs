#![cfg(not(madsim))] // real sockets and processes; the madsim flavour runs tests/ instead
//! kill -9 end to end, with real processes on loopback: `skein cluster up` (controller + 3
//! brokers), a topic with RF 3 and min.insync.replicas 2, 10,000 records through one
//! `skein produce` process (acks=all, idempotent), `kill -9` of the partition's leader while
//! it produces, `skein cluster restart` of that broker (same config and data dir), and
//! `skein consume` of everything: no acknowledged record missing, none duplicated, offsets in
//! order (skipping only the leaders' epoch markers), and the restarted broker back in the ISR.

mod common;

use common::procs::*;
use std::time::{Duration, Instant};

const RECORDS: usize = 10_000;
/// Lines written before the kill, and by the restart.
const BEFORE_KILL: usize = 3_000;
const BEFORE_RESTART: usize = 6_000;

#[test]
fn kill9_leader_while_producing_loses_and_duplicates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let d = dir.to_str().unwrap().to_string();
    let limit = Duration::from_secs(60);
    let mut cleanup = Cleanup::new(&dir);
    let cf = cluster_up(&mut cleanup, &["--brokers", "3"], limit);
    create_topic(&cf, "t", limit);

    // One producer process for the whole run: acks=all is idempotent by default, so its
    // retries across the failover are answered as duplicates, never written twice.
    let mut producer = Producer::spawn(&cf, &mut cleanup);
    producer.produce_until(BEFORE_KILL, limit);

    // kill -9 the leader, then keep producing: the controller fences it after its session
    // times out and elects another ISR member; the producer retries meanwhile.
    let (victim, name, pid) = kill9_leader(&cf, &dir);
    producer.produce_until(BEFORE_RESTART, limit);
    assert_new_leader(&cf, victim);

    // Restart it from its own config and data dir: it recovers its log and rejoins.
    let restart = run(&["cluster", "restart", &name, "--dir", &d], limit);
    cleanup.note_pids();
    assert!(restart.status.success(), "{}", text(&restart.stderr));
    assert_ne!(pids(&dir)[&name], pid, "the pid file names the new process");
    producer.produce_until(RECORDS, limit);
    producer.finish(&mut cleanup);

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
    assert_consumed_exactly(&cf, &producer.acked, 10);

    // The restarted broker logged its recovery; nobody logged an error.
    let log = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap();
    assert!(
        log.contains("recovered partition log"),
        "{name}.log:\n{log}"
    );
    drop(cleanup);
    assert!(pids(&dir).is_empty(), "cluster down removed the pid file");
}
