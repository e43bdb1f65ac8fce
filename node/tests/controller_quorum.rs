#![cfg(not(madsim))] // real sockets and processes; the madsim flavour runs tests/ instead
//! kill -9 of the active controller of a 3-controller Raft quorum, with real processes on
//! loopback: `skein cluster up --controllers 3 --brokers 3`, a topic with RF 3 and
//! min.insync.replicas 2, acks=all records through one `skein produce` process; while it
//! produces, `kill -9` of the active controller (another controller takes over, in a higher
//! term), then `kill -9` of the partition's leader (the new active controller fences it and
//! elects another ISR member); then `skein consume` of everything: every acknowledged
//! record once, at its acknowledged offset.

mod common;

use common::procs::*;
use std::path::Path;
use std::time::{Duration, Instant};

const RECORDS: usize = 6_000;
/// Lines written before the controller kill, and before the partition leader's kill.
const BEFORE_CONTROLLER_KILL: usize = 2_000;
const BEFORE_LEADER_KILL: usize = 4_000;

/// `(term, id)` of the latest "became active" line in the controllers' logs (the runtime
/// logs every quorum role change; the highest term's active controller is the current one).
fn active_controller(dir: &Path) -> Option<(u64, u32)> {
    (1..=3u32)
        .filter_map(|id| {
            let log = std::fs::read_to_string(dir.join(format!("controller-{id}.log"))).ok()?;
            log.lines()
                .filter(|l| {
                    l.contains("controller quorum role changed") && l.contains("active=true")
                })
                .filter_map(|l| {
                    let term = l.split("term=").nth(1)?.split_whitespace().next()?;
                    Some((term.parse().ok()?, id))
                })
                .max()
        })
        .max()
}

/// Waits up to 30 s for an active controller in a term above `after`.
fn await_active_controller(dir: &Path, after: u64) -> (u64, u32) {
    let t = Instant::now();
    loop {
        if let Some(active) = active_controller(dir).filter(|(term, _)| *term > after) {
            return active;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no controller became active after term {after}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn kill9_active_controller_and_leader_while_producing_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let limit = Duration::from_secs(60);
    let mut cleanup = Cleanup::new(&dir);
    let cf = cluster_up(
        &mut cleanup,
        &["--controllers", "3", "--brokers", "3"],
        limit,
    );
    let names: Vec<String> = pids(&dir).into_keys().collect();
    assert_eq!(
        names,
        [
            "broker-1",
            "broker-2",
            "broker-3",
            "controller-1",
            "controller-2",
            "controller-3"
        ]
    );
    create_topic(&cf, "t", limit);

    let mut producer = Producer::spawn(&cf, &mut cleanup);
    producer.produce_until(BEFORE_CONTROLLER_KILL, limit);

    // kill -9 the active controller: the other two elect one of themselves (Raft), which
    // takes over with every committed metadata record; brokers and clients follow it.
    let (term, active) = await_active_controller(&dir, 0);
    let name = format!("controller-{active}");
    kill9_and_wait(&name, pids(&dir)[&name]);
    producer.produce_until(BEFORE_LEADER_KILL, limit);
    let (new_term, new_active) = await_active_controller(&dir, term);
    assert_ne!(
        new_active, active,
        "the killed controller is not active in term {new_term}"
    );

    // Now kill -9 the partition's leader: only the new active controller can fence it and
    // elect another ISR member; the producer retries meanwhile.
    let (victim, _, _) = kill9_leader(&cf, &dir);
    producer.produce_until(RECORDS, limit);
    producer.finish(&mut cleanup);
    assert_new_leader(&cf, victim);

    // Every acknowledged record, once, at its acknowledged offset.
    assert_consumed_exactly(&cf, &producer.acked, 10);
    drop(cleanup);
    assert!(pids(&dir).is_empty(), "cluster down removed the pid file");
}
