//! The cleaner hosted by brokers: a compacted topic on three brokers, every copy cleaned
//! on its own, and a follower that copies a compacted leader across its gaps.

use super::tests::{broker_config, tp, World, MS};
use super::*;
use crate::controller::{CleanupPolicy, TopicConfig};

type Written = BTreeMap<Offset, (Vec<u8>, Option<Vec<u8>>)>;

fn compacted_world() -> World {
    let mut config = broker_config();
    config.log.segment_bytes = 400;
    config.cleaner_interval = 5 * MS;
    let mut w = World::new(&[1, 2, 3], config);
    let topic = TopicConfig {
        partitions: 1,
        replication_factor: 3,
        min_insync_replicas: 1,
        cleanup_policy: CleanupPolicy::Compact,
        min_cleanable_dirty_ratio_permille: 0,
        ..TopicConfig::default()
    };
    w.admin(ControllerRequest::CreateTopic {
        name: "t".into(),
        config: topic,
        assignment: None,
    });
    let ok = w.run_until(2000 * MS, |w| {
        w.leader().is_some() && w.isr_of_leader().len() == 3
    });
    assert!(ok, "no leader with a full ISR");
    w
}

/// Writes `value` (None: a tombstone) under key `key`, acks=all; records it at its offset.
fn put(w: &mut World, written: &mut Written, key: u8, value: Option<Vec<u8>>) {
    let leader = w.leader().expect("a leader");
    let k = vec![b'k', key];
    let b = RecordBatch::new(0, [(Some(k.clone()), value.clone())]);
    let c = w.send_produce(leader, Acks::All, b);
    assert!(w.run_until(2000 * MS, |w| w.produce_response(c).is_some()));
    let ack = w.produce_response(c).expect("answered").expect("acked");
    written.insert(ack.base_offset, (k, value));
}

/// A broker's records: (offset, key, value).
fn records(w: &mut World, id: NodeId) -> Vec<(Offset, Vec<u8>, Option<Vec<u8>>)> {
    let b = w.brokers.get_mut(&id).expect("up");
    let v = b.replica_view(&tp()).expect("hosted");
    b.read_records(&tp(), v.log_start_offset, v.log_end_offset)
        .expect("read")
        .iter()
        .flat_map(|b| {
            b.data_records()
                .map(|(o, r)| (o, r.key.clone().expect("keyed"), r.value.clone()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// What compaction allows of a copy: every record it holds was written at that very
/// offset, in order, and the latest record of every key is there.
fn check_copy(w: &mut World, id: NodeId, written: &Written) -> usize {
    let got = records(w, id);
    for (o, k, v) in &got {
        assert_eq!(
            written.get(o),
            Some(&(k.clone(), v.clone())),
            "broker {id} offset {o}"
        );
    }
    assert!(
        got.windows(2).all(|p| p[0].0 < p[1].0),
        "broker {id}: in offset order"
    );
    let mut latest: BTreeMap<&Vec<u8>, Offset> = BTreeMap::new();
    for (o, (k, _)) in written {
        latest.insert(k, *o);
    }
    for (k, o) in latest {
        assert!(
            got.iter().any(|r| r.0 == o),
            "broker {id} lost the latest record of key {k:?} (offset {o})"
        );
    }
    got.len()
}

fn write_many(w: &mut World, written: &mut Written, n: u8) {
    for i in 0..n {
        let value = (i % 7 != 6).then(|| format!("value-{i}").into_bytes());
        put(w, written, i % 4, value);
    }
}

#[test]
fn every_copy_of_a_compacted_topic_is_cleaned_and_keeps_the_latest_per_key() {
    let mut w = compacted_world();
    let mut written = Written::new();
    write_many(&mut w, &mut written, 60);
    w.run(300 * MS);
    for id in [1, 2, 3] {
        let kept = check_copy(&mut w, id, &written);
        assert!(kept < written.len(), "broker {id} compacted nothing");
        let stats = w.brokers[&id].cleaner(&tp()).expect("a cleaner").stats();
        assert!(stats.segments_swapped > 0, "broker {id}: {stats:?}");
    }
}

#[test]
fn a_follower_copies_a_compacted_leader_across_its_gaps() {
    let mut w = compacted_world();
    let leader = w.leader().expect("a leader");
    let lagging = [1, 2, 3]
        .into_iter()
        .find(|&b| b != leader)
        .expect("a follower");
    w.isolate(Address::Node(lagging));
    let mut written = Written::new();
    write_many(&mut w, &mut written, 60);
    w.run(300 * MS);
    let on_leader = check_copy(&mut w, leader, &written);
    assert!(on_leader < written.len(), "the leader compacted");
    w.net.cut.clear();
    let leo = w.view(leader).log_end_offset;
    assert!(w.run_until(3000 * MS, |w| w.view(lagging).log_end_offset == leo));
    let copied = check_copy(&mut w, lagging, &written);
    assert!(copied < written.len(), "the copy has the leader's gaps");
    // The copy survives a crash: its gaps are below its clean point.
    w.crash(lagging);
    w.start(lagging);
    w.run(500 * MS);
    check_copy(&mut w, lagging, &written);
}

/// One step of the random cluster history below.
#[derive(Clone, Debug)]
enum Action {
    /// Write key `0..4` (a tombstone when `tombstone`).
    Put {
        key: u8,
        tombstone: bool,
    },
    /// Crash broker `1..=3` (losing what it had not synced) and restart it `ms` later.
    Bounce {
        broker: NodeId,
        ms: u64,
    },
    /// Cut a broker off for `ms`.
    Isolate {
        broker: NodeId,
        ms: u64,
    },
    /// Fill a broker's disk (every write fails) for `ms`.
    DiskFull {
        broker: NodeId,
        ms: u64,
    },
    Run {
        ms: u64,
    },
}

fn action() -> impl proptest::strategy::Strategy<Value = Action> {
    use proptest::prelude::*;
    prop_oneof![
        8 => (0u8..4, proptest::bool::weighted(0.15))
            .prop_map(|(key, tombstone)| Action::Put { key, tombstone }),
        1 => (1u32..=3, 0u64..300).prop_map(|(broker, ms)| Action::Bounce { broker, ms }),
        1 => (1u32..=3, 0u64..500).prop_map(|(broker, ms)| Action::Isolate { broker, ms }),
        1 => (1u32..=3, 0u64..300).prop_map(|(broker, ms)| Action::DiskFull { broker, ms }),
        2 => (0u64..100).prop_map(|ms| Action::Run { ms }),
    ]
}

/// A write that may or may not have reached the log: its key and unique value.
type Attempt = (Vec<u8>, Option<Vec<u8>>);

/// Plays `actions`, then heals everything and lets every copy catch up and be cleaned.
/// Returns what was attempted and what was acknowledged (offset -> attempt).
fn play(w: &mut World, actions: &[Action]) -> (Vec<Attempt>, BTreeMap<Offset, Attempt>) {
    let (mut attempts, mut acked) = (Vec::new(), BTreeMap::new());
    for (i, a) in actions.iter().enumerate() {
        match *a {
            Action::Put { key, tombstone } => {
                let Some(leader) = w.leader() else {
                    w.run(10 * MS);
                    continue;
                };
                let k = vec![b'k', key];
                let v = (!tombstone).then(|| format!("v{i}").into_bytes());
                attempts.push((k.clone(), v.clone()));
                let b = RecordBatch::new(0, [(Some(k.clone()), v.clone())]);
                let c = w.send_produce(leader, Acks::All, b);
                w.run_until(600 * MS, |w| w.produce_response(c).is_some());
                if let Some(Ok(ack)) = w.produce_response(c) {
                    acked.insert(ack.base_offset, (k, v));
                }
            }
            Action::Bounce { broker, ms } => {
                w.crash(broker);
                w.run(ms * MS);
                w.start(broker);
            }
            Action::Isolate { broker, ms } => {
                w.isolate(Address::Node(broker));
                w.run(ms * MS);
                w.net.cut.clear();
            }
            Action::DiskFull { broker, ms } => {
                let disk = w.disks[&broker].clone();
                disk.set_capacity(Some(disk.used_bytes()));
                w.run(ms * MS);
                disk.set_capacity(None);
            }
            Action::Run { ms } => w.run(ms * MS),
        }
    }
    w.net.cut.clear();
    let caught_up = w.run_until(5000 * MS, |w| {
        let Some(l) = w.leader() else { return false };
        let leo = w.view(l).log_end_offset;
        w.isr_of_leader().len() == 3 && [1, 2, 3].iter().all(|&b| w.view(b).log_end_offset == leo)
    });
    assert!(caught_up, "the cluster did not heal");
    w.run(200 * MS);
    (attempts, acked)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: std::env::var("SKEIN_PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(12),
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Keyed writes to a compacted topic while brokers crash (losing unsynced bytes,
    /// mid-cleaning or not), are cut off and find their disk full; every copy cleans on
    /// its own. At the end, on every broker: every record is one that was written,
    /// acknowledged ones at their acknowledged offset; the copies agree wherever they both
    /// hold an offset; and the newest record of each key is at least as new as its last
    /// acknowledged write.
    #[test]
    fn compacted_copies_keep_offsets_and_latest_values_under_crashes(
        actions in proptest::collection::vec(action(), 1..120)
    ) {
        let mut w = compacted_world();
        let (attempts, acked) = play(&mut w, &actions);
        let copies: Vec<_> = [1, 2, 3].iter().map(|&b| (b, records(&mut w, b))).collect();
        // With this many writes some segment was rolled below the HW: the leader cleaned.
        let leader = w.leader().expect("a leader");
        let cleaned = w.brokers[&leader].clean_state(&tp()).expect("hosted").clean_point;
        proptest::prop_assert!(acked.len() < 16 || cleaned > 0, "{} acked, nothing cleaned", acked.len());
        for (b, recs) in &copies {
            for (o, k, v) in recs {
                let rec = (k.clone(), v.clone());
                proptest::prop_assert!(attempts.contains(&rec), "broker {b} offset {o}: never written");
                if let Some(a) = acked.get(o) {
                    proptest::prop_assert_eq!(a, &rec, "broker {} offset {} moved", b, o);
                }
            }
            let mut newest: BTreeMap<&Vec<u8>, Offset> = BTreeMap::new();
            for (o, k, _) in recs {
                newest.insert(k, *o);
            }
            let mut last_acked: BTreeMap<&Vec<u8>, Offset> = BTreeMap::new();
            for (o, (k, _)) in &acked {
                last_acked.insert(k, *o);
            }
            for (k, o) in last_acked {
                proptest::prop_assert!(
                    newest.get(k).is_some_and(|n| *n >= o),
                    "broker {b}: key {k:?} acknowledged at {o}, newest kept {:?}", newest.get(k)
                );
            }
        }
        for (i, (a, ra)) in copies.iter().enumerate() {
            for (b, rb) in &copies[i + 1..] {
                let mb: BTreeMap<_, _> = rb.iter().map(|(o, k, v)| (*o, (k, v))).collect();
                for (o, k, v) in ra {
                    if let Some(other) = mb.get(o) {
                        proptest::prop_assert_eq!(*other, (k, v), "brokers {} and {} differ at {}", a, b, o);
                    }
                }
            }
        }
    }
}

#[test]
fn time_retention_reads_record_timestamps_on_the_wall_clock() {
    // A real node's `now` counts from its start while records carry wall-clock
    // timestamps; retention must compare like with like (it never deleted on a node).
    const WALL: i64 = 1_700_000_000_000;
    let mut config = broker_config();
    config.log.segment_bytes = 400;
    config.retention_check_interval = 50 * MS;
    config.wall_clock_at_zero_ms = WALL;
    // The broker's log config (a topic's own retention.ms does not reach its logs yet).
    config.log.retention_ms = Some(60_000);
    let mut w = World::new(&[1, 2, 3], config);
    let topic = TopicConfig {
        partitions: 1,
        replication_factor: 3,
        min_insync_replicas: 1,
        ..TopicConfig::default()
    };
    w.admin(ControllerRequest::CreateTopic {
        name: "t".into(),
        config: topic,
        assignment: None,
    });
    assert!(w.run_until(2000 * MS, |w| {
        w.leader().is_some() && w.isr_of_leader().len() == 3
    }));
    let leader = w.leader().expect("a leader");
    // An hour old on the wall clock: past retention.ms, in several segments.
    for i in 0..30u8 {
        let b = RecordBatch::new(WALL - 3_600_000, [(Some(vec![i]), Some(vec![i; 40]))]);
        let c = w.send_produce(leader, Acks::All, b);
        assert!(w.run_until(2000 * MS, |w| w.produce_response(c).is_some()));
    }
    let trimmed = w.run_until(2000 * MS, |w| {
        let b = w.brokers.get_mut(&leader).expect("up");
        b.replica_view(&tp()).expect("hosted").log_start_offset > 0
    });
    assert!(trimmed, "old segments past retention.ms were never deleted");
}
