//! Unit tests of the invariant checks, on hand-made replica views and logs.

use super::*;
use skein_core::TopicPartition;

fn batch(base: Offset, epoch: LeaderEpoch, values: &[&str]) -> RecordBatch {
    RecordBatch::from_values(0, values.iter().map(|v| v.as_bytes().to_vec()))
        .at(base)
        .in_epoch(epoch)
}

fn view(role: ReplicaRole, epoch: LeaderEpoch, hw: Offset, leo: Offset) -> ReplicaView {
    ReplicaView {
        tp: TopicPartition::new("sim", 0),
        role,
        leader_epoch: epoch,
        partition_epoch: epoch,
        high_watermark: hw,
        last_stable_offset: hw,
        log_start_offset: 0,
        log_end_offset: leo,
        flushed_offset: leo,
        latest_log_epoch: Some(epoch),
        isr: vec![1, 2, 3],
        maximal_isr: vec![1, 2, 3],
        replicas: vec![1, 2, 3],
        log_corrupt: false,
    }
}

fn reader(log: Vec<RecordBatch>) -> impl FnMut(Offset, Offset) -> Result<Vec<RecordBatch>, String> {
    move |from, below| {
        Ok(log
            .iter()
            .filter(|b| b.next_offset() > from && b.base_offset < below)
            .cloned()
            .collect())
    }
}

#[test]
fn divergence_below_hw_is_caught() {
    let mut c = Checker::new();
    let mut r1 = reader(vec![batch(0, 1, &["a", "b", "c"])]);
    c.audit(1, 1, &view(ReplicaRole::Leader, 1, 3, 3), &mut r1);
    let mut r2 = reader(vec![batch(0, 1, &["a", "x", "c"])]);
    c.audit(
        2,
        2,
        &view(ReplicaRole::Follower { leader: 1 }, 1, 3, 3),
        &mut r2,
    );
    assert_eq!(c.count(REPLICA_DIVERGENCE), 1);
    // Above the HW, difference is allowed.
    let mut c = Checker::new();
    c.audit(
        1,
        1,
        &view(ReplicaRole::Leader, 1, 1, 3),
        &mut reader(vec![batch(0, 1, &["a", "b", "c"])]),
    );
    c.audit(
        2,
        2,
        &view(ReplicaRole::Follower { leader: 1 }, 1, 1, 3),
        &mut reader(vec![batch(0, 1, &["a", "x", "c"])]),
    );
    assert_eq!(c.count(REPLICA_DIVERGENCE), 0);
}

#[test]
fn new_leader_missing_acked_record_is_a_loss() {
    let mut c = Checker::new();
    c.on_client_ack(5, 0, 1, "b".into(), 1);
    c.audit(
        6,
        2,
        &view(ReplicaRole::Leader, 2, 1, 1),
        &mut reader(vec![batch(0, 1, &["a"])]),
    );
    assert_eq!(c.count(ACKED_WRITE_LOST), 1);
    // A deposed leader (older epoch) is not required to have it.
    let mut c = Checker::new();
    c.on_client_ack(5, 0, 1, "b".into(), 3);
    c.audit(
        6,
        2,
        &view(ReplicaRole::Leader, 2, 1, 1),
        &mut reader(vec![batch(0, 1, &["a"])]),
    );
    assert_eq!(c.count(ACKED_WRITE_LOST), 0);
    // Holding it at the right offset passes.
    c.audit(
        7,
        1,
        &view(ReplicaRole::Leader, 3, 2, 2),
        &mut reader(vec![batch(0, 1, &["a", "b"])]),
    );
    assert_eq!(c.count(ACKED_WRITE_LOST), 0);
    assert_eq!(c.count(REPLICA_DIVERGENCE), 0);
}

#[test]
fn reads_acks_and_hw_rules() {
    let mut c = Checker::new();
    c.on_client_ack(1, 0, 4, "v".into(), 1);
    c.on_read(2, 0, 4, "v".into(), 1);
    assert_eq!(c.read_acked_count(), 1);
    c.on_read(3, 0, 4, "w".into(), 2);
    assert_eq!(c.count(RECORD_CHANGED), 1);
    assert_eq!(c.count(ACKED_WRITE_LOST), 1);
    c.on_served(4, 1, 0, &[batch(3, 1, &["x", "y"])], 4);
    assert_eq!(c.count(DIRTY_READ), 1);
    let tp = TopicPartition::new("sim", 0);
    c.on_leader_hw(5, 1, &tp, 1, 10);
    c.on_leader_hw(6, 1, &tp, 1, 9);
    assert_eq!(c.count(HW_REGRESSION), 1);
    c.on_leader_hw(7, 1, &tp, 2, 3);
    assert_eq!(c.count(HW_REGRESSION), 1, "a new epoch may start lower");
    c.on_broker_ack(8, 1, 0, 2, 5);
    c.on_broker_ack(9, 2, 0, 2, 6);
    assert_eq!(c.count(SPLIT_BRAIN), 1, "two brokers at one epoch");
    c.on_became_leader(&TopicPartition::new("sim", 0), 3, 10);
    c.on_broker_ack(10, 1, 0, 2, 9);
    assert_eq!(
        c.count(SPLIT_BRAIN),
        1,
        "a late answer for records the successor holds"
    );
    c.on_broker_ack(10, 1, 0, 2, 10);
    assert_eq!(c.count(SPLIT_BRAIN), 2, "an offset of the newer epoch");
    let none = std::collections::BTreeSet::new();
    c.finish_liveness(11, &[], &none, 0);
    assert_eq!(c.count(LIVENESS), 0);
    c.on_client_ack(12, 1, 0, "z".into(), 1);
    // Every copy of partition 1's record destroyed by faults: not judged there.
    let destroyed: std::collections::BTreeSet<u32> = [1].into();
    c.finish_liveness(12, &[1], &destroyed, 0);
    assert_eq!(c.count(LIVENESS), 0);
    c.finish_liveness(13, &[2], &none, 0);
    assert_eq!(c.count(LIVENESS), 2);
}

#[test]
fn a_late_first_violation_is_never_hidden() {
    use crate::report::{SimReport, Verdict};
    let mut c = Checker::new();
    // 100 record-changed violations (more than any cap) ...
    for o in 0..100 {
        c.on_read(o, 0, o, "a".into(), 1);
        c.on_read(o, 0, o, "b".into(), 2);
    }
    // ... and only then the first of another invariant.
    let tp = TopicPartition::new("sim", 0);
    c.on_leader_hw(200, 1, &tp, 1, 10);
    c.on_leader_hw(201, 1, &tp, 1, 9);
    let kept = c.violations();
    assert!(kept.len() <= 2 * MAX_KEPT, "examples stay bounded");
    assert_eq!(c.count(RECORD_CHANGED), 100);
    let verdicts = SimReport::verdicts_from(c.counts(), &kept, &BTreeMap::new());
    let get = |n: &str| {
        verdicts
            .iter()
            .find(|(m, _)| *m == n)
            .map(|(_, v)| v.clone())
    };
    match get(HW_REGRESSION) {
        Some(Verdict::Fail { count, at, .. }) => assert_eq!((count, at), (1, 201)),
        other => panic!("hw-regression must fail, got {other:?}"),
    }
    match get(RECORD_CHANGED) {
        Some(Verdict::Fail { count, at, .. }) => assert_eq!((count, at), (100, 0)),
        other => panic!("record-changed must fail x100, got {other:?}"),
    }
    assert_eq!(get(DIRTY_READ), Some(Verdict::Pass));
    // A violation under a name the report does not list still fails the run.
    c.violation("made-up", 300, "x".into());
    let kept = c.violations();
    let verdicts = SimReport::verdicts_from(c.counts(), &kept, &BTreeMap::new());
    assert!(matches!(
        verdicts.last(),
        Some(("made-up", Verdict::Fail { count: 1, .. }))
    ));
}

#[test]
fn unclean_leader_with_a_deposed_tail_below_its_marker_is_not_divergence() {
    let tp = TopicPartition::new("sim", 0);
    let mut c = Checker::new();
    // Epoch 1's leader (broker 2) committed "m" at offset 2.
    let epoch1 = vec![batch(0, 0, &["a", "b"]), batch(2, 1, &["m"])];
    c.audit(
        1,
        2,
        &view(ReplicaRole::Leader, 1, 3, 3),
        &mut reader(epoch1),
    );
    // Broker 1, deposed at epoch 0 with an unacknowledged tail x, y at 2..4, is
    // elected uncleanly at epoch 2: its marker lands at 4.
    c.on_unclean_election(&tp, 2);
    c.on_became_leader(&tp, 2, 5);
    let unclean = vec![
        batch(0, 0, &["a", "b"]),
        batch(2, 0, &["x", "y"]),
        batch(4, 2, &["marker"]),
    ];
    // Not yet truncated, broker 2 is compared only below the departure point.
    c.audit(
        2,
        2,
        &view(ReplicaRole::Follower { leader: 1 }, 1, 3, 3),
        &mut reader(vec![batch(0, 0, &["a", "b"]), batch(2, 1, &["m"])]),
    );
    c.audit(
        3,
        1,
        &view(ReplicaRole::Leader, 2, 5, 5),
        &mut reader(unclean.clone()),
    );
    c.audit(
        4,
        2,
        &view(ReplicaRole::Follower { leader: 1 }, 1, 3, 3),
        &mut reader(vec![batch(0, 0, &["a", "b"]), batch(2, 1, &["m"])]),
    );
    assert_eq!(c.count(REPLICA_DIVERGENCE), 0, "{:?}", c.violations());
    // Converged on the unclean leader's log: still no divergence.
    c.audit(
        5,
        2,
        &view(ReplicaRole::Follower { leader: 1 }, 2, 5, 5),
        &mut reader(unclean),
    );
    assert_eq!(c.count(REPLICA_DIVERGENCE), 0, "{:?}", c.violations());
    // But a replica following the new leader with a different record is divergence.
    let bad = vec![
        batch(0, 0, &["a", "b"]),
        batch(2, 0, &["x", "z"]),
        batch(4, 2, &["marker"]),
    ];
    c.audit(
        6,
        3,
        &view(ReplicaRole::Follower { leader: 1 }, 2, 5, 5),
        &mut reader(bad),
    );
    assert_eq!(c.count(REPLICA_DIVERGENCE), 1);
}

#[test]
fn strong_isr_and_hw_range() {
    let tp = TopicPartition::new("sim", 0);
    let mut c = Checker::new();
    c.begin_audit();
    let log = vec![batch(0, 1, &["a", "b", "c"])];
    c.audit(
        1,
        1,
        &view(ReplicaRole::Leader, 1, 3, 3),
        &mut reader(log.clone()),
    );
    // An ISR member with the records (its own HW lagging) passes.
    let f = view(ReplicaRole::Follower { leader: 1 }, 1, 1, 3);
    c.audit(1, 2, &f, &mut reader(log.clone()));
    c.strong_isr(1, 2, &f, &mut reader(log));
    assert_eq!(c.count(STRONG_ISR), 0);
    // One that lacks a record below the leader's HW fails; one that ends short too.
    let g = view(ReplicaRole::Follower { leader: 1 }, 1, 1, 3);
    c.strong_isr(1, 3, &g, &mut reader(vec![batch(0, 1, &["a", "x", "c"])]));
    assert_eq!(c.count(STRONG_ISR), 1);
    let short = view(ReplicaRole::Follower { leader: 1 }, 1, 1, 2);
    c.strong_isr(1, 3, &short, &mut reader(vec![batch(0, 1, &["a", "b"])]));
    assert_eq!(c.count(STRONG_ISR), 2);
    // The same short copy offline with a corrupt batch (seed 2010) takes no role and is
    // repaired only once out of the ISR: not a violation.
    let damaged = ReplicaView {
        role: ReplicaRole::Offline,
        log_corrupt: true,
        ..short
    };
    c.strong_isr(1, 3, &damaged, &mut reader(vec![batch(0, 1, &["a", "b"])]));
    assert_eq!(c.count(STRONG_ISR), 2);
    // valid-high-watermark and leader-in-isr.
    c.audit(
        2,
        3,
        &view(ReplicaRole::Follower { leader: 1 }, 1, 4, 3),
        &mut reader(vec![]),
    );
    assert_eq!(c.count(VALID_HW), 1);
    let mut lonely = view(ReplicaRole::Leader, 1, 3, 3);
    lonely.isr = vec![2, 3];
    c.audit(
        3,
        1,
        &lonely,
        &mut reader(vec![batch(0, 1, &["a", "b", "c"])]),
    );
    c.leader_in_isr(3, &tp, Some(1), &[2, 3]);
    c.leader_in_isr(3, &tp, Some(2), &[2, 3]);
    c.leader_in_isr(3, &tp, None, &[2]);
    assert_eq!(c.count(LEADER_IN_ISR), 2);
}

#[test]
fn a_consumer_that_skips_records_silently_is_caught_and_a_reported_truncation_is_not() {
    use skein_core::client::Truncation;
    let s = |v: &str| skein_jepsen::Text::from(v);
    // Both consumers read a, b, c at 0..3 from the epoch-1 leader.
    let mut c = Checker::new();
    let old = [(0, s("a")), (1, s("b")), (2, s("c"))];
    for client in [1, 2] {
        c.on_consumer_poll(client, 0, 3, old.clone(), 1);
        for (o, v) in &old {
            c.on_read(1, 0, *o, v.clone(), 1);
        }
    }
    // An unclean leader at epoch 2 kept only offset 0 and wrote x, y, z at 1..4.
    let final_log = [batch(0, 1, &["a"]), batch(1, 2, &["x", "y", "z"])];
    // Consumer 1 detects the truncation and reads x, y, z: its re-reads are not changes.
    let t = Truncation {
        from: 3,
        to: 1,
        epoch: Some(1),
    };
    c.on_consumer_truncation(1, 0, &t);
    let new = [(1, s("x")), (2, s("y")), (3, s("z"))];
    c.on_consumer_poll(1, 0, 4, new.clone(), 2);
    for (o, v) in &new {
        c.on_read(2, 0, *o, v.clone(), 3);
    }
    assert_eq!(c.count(RECORD_CHANGED), 0);
    // Consumer 2 ignores it, waits past 3 and reads only z.
    c.on_consumer_poll(2, 0, 4, [(3, s("z"))], 2);
    let log = FinalLog {
        partition: 0,
        leader_epoch: 2,
        high_watermark: 4,
        batches: &final_log,
    };
    let live = [1, 2].into_iter().collect();
    c.finish_skipped(5, &live, &log);
    assert_eq!(c.count(SKIPPED_RECORDS), 1);
    let v = c.violations();
    assert!(
        v[0].detail
            .contains("consumer client-2 passed offset 1 (\"x\")"),
        "{v:?}"
    );
    assert!(v[0].detail.contains("2 records skipped"), "{v:?}");
    // Not judged: a consumer that is gone, or was last answered by another epoch's leader.
    let mut c2 = Checker::new();
    c2.on_consumer_poll(2, 0, 4, [(3, s("z"))], 1);
    c2.finish_skipped(5, &live, &log);
    c2.finish_skipped(5, &BTreeSet::new(), &log);
    assert_eq!(c2.count(SKIPPED_RECORDS), 0);
}

#[test]
fn skipped_records_compare_values_as_the_text_a_consumer_reads() {
    // A value that is not UTF-8 is read as its lossy text: the same record, not a skip;
    // an empty value and a missing one both read as "".
    let raw = |base: Offset, v: Vec<u8>| RecordBatch::from_values(0, [v]).at(base).in_epoch(1);
    let mut empty = RecordBatch::from_values(0, [Vec::new()]).at(3).in_epoch(1);
    empty.records[0].value = None;
    let final_log = [
        raw(0, b"p1-\xff".to_vec()),
        raw(1, b"p1-2".to_vec()),
        raw(2, Vec::new()),
        empty,
    ];
    let read = [
        (0, crate::topic::value_of(b"p1-\xff")),
        (1, "p1-2".into()),
        (2, "".into()),
        (3, "".into()),
    ];
    let mut c = Checker::new();
    c.on_consumer_poll(1, 0, 4, read.clone(), 1);
    // Consumer 2 read another text at 0.
    c.on_consumer_poll(
        2,
        0,
        4,
        [(0, "p1-?".into())]
            .into_iter()
            .chain(read[1..].iter().cloned()),
        1,
    );
    let log = FinalLog {
        partition: 0,
        leader_epoch: 1,
        high_watermark: 4,
        batches: &final_log,
    };
    c.finish_skipped(5, &[1, 2].into_iter().collect(), &log);
    let v = c.violations();
    assert_eq!(c.count(SKIPPED_RECORDS), 1, "{v:?}");
    assert!(v[0].detail.contains("client-2 passed offset 0"), "{v:?}");
    assert!(v[0].detail.contains("1 records skipped"), "{v:?}");
}

#[test]
fn an_unclean_leader_that_never_took_office_hands_its_exemption_to_the_next() {
    // Seed 7 of the unclean zoo shape: broker 1 is elected uncleanly at epoch 3 while it
    // is down, and cleanly at epoch 5 from the ISR that election left ([1]). Meanwhile
    // broker 2, deposed at epoch 2 but cut off, still presumes leadership with its HW.
    let tp = TopicPartition::new("sim", 0);
    let mut c = Checker::new();
    let committed = vec![batch(0, 1, &["a", "b"]), batch(2, 2, &["m", "n"])];
    c.audit(
        1,
        2,
        &view(ReplicaRole::Leader, 2, 4, 4),
        &mut reader(committed.clone()),
    );
    c.on_unclean_election(&tp, 3);
    let lagging = vec![batch(0, 1, &["a", "b"])];
    // Before the unclean side takes office, the zombie's HW does not bound strong-isr.
    c.begin_audit();
    c.audit(
        2,
        2,
        &view(ReplicaRole::Leader, 2, 4, 4),
        &mut reader(committed.clone()),
    );
    let isr_member = view(ReplicaRole::Follower { leader: 2 }, 1, 2, 2);
    c.audit(2, 1, &isr_member, &mut reader(lagging.clone()));
    c.strong_isr(2, 1, &isr_member, &mut reader(lagging.clone()));
    assert_eq!(c.count(STRONG_ISR), 0, "{:?}", c.violations());
    // Broker 1 takes office at epoch 5 (marker at 2): its log is the truth from there.
    c.on_became_leader(&tp, 5, 3);
    let unclean = vec![batch(0, 1, &["a", "b"]), batch(2, 5, &["marker"])];
    c.begin_audit();
    c.audit(
        3,
        1,
        &view(ReplicaRole::Leader, 5, 3, 3),
        &mut reader(unclean.clone()),
    );
    c.audit(
        3,
        2,
        &view(ReplicaRole::Follower { leader: 1 }, 5, 3, 3),
        &mut reader(unclean),
    );
    assert_eq!(c.count(REPLICA_DIVERGENCE), 0, "{:?}", c.violations());
    assert_eq!(c.count(STRONG_ISR), 0, "{:?}", c.violations());
    // Without the unclean election the same leader is divergence.
    let mut clean = Checker::new();
    clean.audit(
        1,
        2,
        &view(ReplicaRole::Leader, 2, 4, 4),
        &mut reader(committed),
    );
    clean.on_became_leader(&tp, 5, 3);
    clean.audit(
        3,
        1,
        &view(ReplicaRole::Leader, 5, 3, 3),
        &mut reader(vec![batch(0, 1, &["a", "b"]), batch(2, 5, &["marker"])]),
    );
    assert_eq!(clean.count(REPLICA_DIVERGENCE), 1);
}

#[test]
fn log_matching_flags_a_kept_suffix_the_leader_does_not_hold() {
    let tp = TopicPartition::new("sim", 0);
    let leader = vec![batch(0, 1, &["a", "b"]), batch(2, 3, &["c", "d"])];
    // The follower kept epoch-2 records at 2..4 (KIP-279's bug told it epoch 2 ends at 4).
    let kept = vec![batch(0, 1, &["a", "b"]), batch(2, 2, &["x", "y"])];
    let mut c = Checker::new();
    let from = c.matching_from(&tp, 2, 1, 4);
    assert_eq!(from, 0, "nothing verified yet: read from the start");
    let slice = |broker, batches| LogSlice { broker, batches };
    c.log_matching(1, &tp, (from, 4), slice(2, &kept), slice(1, &leader));
    assert_eq!(c.count(LOG_MATCHING), 1);
    assert!(c.violations()[0]
        .detail
        .contains("offset 2 differs (2 offsets"));
    // A prefix of the leader's log passes; so does an empty range.
    c.log_matching(2, &tp, (0, 2), slice(2, &kept), slice(1, &leader));
    c.log_matching(2, &tp, (0, 3), slice(2, &leader), slice(1, &leader));
    assert_eq!(c.count(LOG_MATCHING), 1);
    // Offsets past the leader's log end differ too.
    c.log_matching(3, &tp, (0, 4), slice(2, &leader), slice(1, &leader[..1]));
    assert_eq!(c.count(LOG_MATCHING), 2);
}

#[test]
fn a_replica_behind_two_unclean_elections_is_compared_below_the_first_departure() {
    // Seed 98 of the unclean zoo shape with --bug no-elr: two unclean elections in a row,
    // and a replica that followed neither.
    let tp = TopicPartition::new("sim", 0);
    let mut c = Checker::new();
    let old = vec![batch(0, 1, &["a", "b", "c"])];
    c.audit(
        1,
        1,
        &view(ReplicaRole::Leader, 1, 3, 3),
        &mut reader(old.clone()),
    );
    // Broker 2, elected uncleanly at epoch 2, departs at 1 (it lacks b).
    c.on_unclean_election(&tp, 2);
    c.on_became_leader(&tp, 2, 2);
    let two = vec![batch(0, 1, &["a"]), batch(1, 2, &["m2"])];
    c.audit(2, 2, &view(ReplicaRole::Leader, 2, 2, 2), &mut reader(two));
    // Broker 3 follows it, then is elected uncleanly at epoch 3: departs at 2.
    c.on_unclean_election(&tp, 3);
    c.on_became_leader(&tp, 3, 3);
    let three = vec![
        batch(0, 1, &["a"]),
        batch(1, 2, &["m2"]),
        batch(2, 3, &["m3"]),
    ];
    c.audit(
        3,
        3,
        &view(ReplicaRole::Leader, 3, 3, 3),
        &mut reader(three),
    );
    // Broker 1 still holds a, b, c: b at 1 is not divergence (the first election forfeited
    // it), though the second election's departure point alone would put it in range.
    let mut behind = view(ReplicaRole::Follower { leader: 3 }, 3, 3, 3);
    behind.latest_log_epoch = Some(1);
    c.audit(4, 1, &behind, &mut reader(old));
    assert_eq!(c.count(REPLICA_DIVERGENCE), 0, "{:?}", c.violations());
}

/// Committed metadata records 0..3 (broker 1..=3 registered).
fn committed_metadata(c: &mut Checker) -> Vec<skein_core::controller::MetadataRecord> {
    let records: Vec<_> = (1..=3)
        .map(
            |b| skein_core::controller::MetadataRecord::BrokerRegistered {
                broker: b,
                incarnation: 0,
            },
        )
        .collect();
    c.on_metadata_committed(&records);
    records
}

fn delta(
    from: Offset,
    records: &[skein_core::controller::MetadataRecord],
) -> skein_core::controller::MetadataDelta {
    skein_core::controller::MetadataDelta {
        from,
        records: records.to_vec(),
        end_offset: 3,
    }
}

#[test]
fn metadata_applied_in_order_passes_and_a_restart_replays_from_zero() {
    let mut c = Checker::new();
    let r = committed_metadata(&mut c);
    c.on_broker_metadata(0, 7, 0, 2, Some(&delta(0, &r[..2])));
    c.on_broker_metadata(1, 7, 0, 2, None);
    c.on_broker_metadata(2, 7, 0, 3, Some(&delta(1, &r[1..])));
    // A new incarnation starts from an empty image.
    c.on_broker_metadata(3, 7, 1, 0, None);
    c.on_broker_metadata(4, 7, 1, 3, Some(&delta(0, &r)));
    assert_eq!(c.count(METADATA_IN_ORDER), 0, "{:?}", c.violations());
}

/// The world skips its second look after a delivered step when the first judged nothing:
/// then a second look must indeed judge nothing, and one after a judged step is still taken
/// (an image past the committed log is reported by each look, as before).
#[test]
fn metadata_check_says_when_a_second_look_could_judge() {
    let mut c = Checker::new();
    let r = committed_metadata(&mut c);
    assert!(c.on_broker_metadata(0, 7, 0, 2, Some(&delta(0, &r[..2]))));
    assert!(!c.on_broker_metadata(1, 7, 0, 2, None), "nothing applied");
    assert!(!c.on_broker_metadata(1, 7, 0, 2, None));
    assert_eq!(c.count(METADATA_IN_ORDER), 0, "{:?}", c.violations());
    assert!(c.on_broker_metadata(2, 7, 0, 4, Some(&delta(0, &r))));
    assert!(c.on_broker_metadata(2, 7, 0, 4, None), "still past the log");
    assert_eq!(c.count(METADATA_IN_ORDER), 2, "{:?}", c.violations());
}

/// One broker step: (incarnation, image offset after it, the delta delivered in it).
type BrokerStep = (u64, Offset, Option<skein_core::controller::MetadataDelta>);

#[test]
fn metadata_reordered_skipped_backwards_or_uncommitted_fires() {
    let r = {
        let mut c = Checker::new();
        committed_metadata(&mut c)
    };
    let reordered = [r[1].clone(), r[0].clone()];
    let cases: Vec<(&str, Vec<BrokerStep>)> = vec![
        ("reordered", vec![(0, 2, Some(delta(0, &reordered)))]),
        ("skipped", vec![(0, 2, Some(delta(1, &r[1..2])))]),
        ("no delta", vec![(0, 1, None)]),
        (
            "backwards",
            vec![(0, 2, Some(delta(0, &r[..2]))), (0, 1, None)],
        ),
        ("uncommitted", vec![(0, 4, Some(delta(0, &r)))]),
    ];
    for (name, steps) in cases {
        let mut c = Checker::new();
        committed_metadata(&mut c);
        for (k, (incarnation, offset, d)) in steps.iter().enumerate() {
            c.on_broker_metadata(k as SimTime, 7, *incarnation, *offset, d.as_ref());
        }
        assert_eq!(
            c.count(METADATA_IN_ORDER),
            1,
            "{name}: {:?}",
            c.violations()
        );
    }
}

/// The record digest is FNV-1a over (batch epoch, attributes, key, value) as it always
/// was: hashing the batch's fields once per batch (`batch_digest`) changed nothing.
#[test]
fn record_digest_is_fnv_over_epoch_attributes_key_and_value() {
    let mut b = batch(7, 3, &["a", "value two", ""]);
    b.attributes = 0x20;
    b.records[1].key = Some(b"k".to_vec());
    b.records[2].value = None;
    for r in &b.records {
        let mut h = Fnv1a::default();
        h.u64(3);
        h.u64(0x20);
        for f in [&r.key, &r.value] {
            match f {
                Some(x) => {
                    h.u64(x.len() as u64 + 1);
                    h.bytes(x);
                }
                None => h.u64(0),
            }
        }
        assert_eq!(record_digest(&b, r), h.finish());
        assert_eq!(record_digest_from(batch_digest(&b), r), h.finish());
    }
}

/// `ByOffset` answers as a map collected from the same pairs in the same order: sorted or
/// not, and with the last of several pairs at one offset winning.
#[test]
fn by_offset_answers_as_a_collected_map() {
    let cases: &[&[(Offset, u64)]] = &[
        &[],
        &[(3, 1), (4, 2), (5, 3)],
        &[(5, 1), (3, 2), (4, 3), (3, 4)],
        &[(2, 1), (2, 2), (9, 3), (2, 5)],
    ];
    for pairs in cases {
        let model: BTreeMap<Offset, u64> = pairs.iter().copied().collect();
        let by = ByOffset::new(pairs.to_vec());
        for o in 0..12 {
            assert_eq!(by.get(o), model.get(&o).copied(), "{pairs:?} at {o}");
        }
    }
}

/// A reader of `log` that adds to `read` the number of offsets each read asked for.
fn counting_reader<'a>(
    log: &'a [RecordBatch],
    read: &'a std::cell::Cell<u64>,
) -> impl FnMut(Offset, Offset) -> Result<Vec<RecordBatch>, String> + 'a {
    move |from, below| {
        read.set(read.get() + below.saturating_sub(from));
        Ok(log
            .iter()
            .filter(|b| b.next_offset() > from && b.base_offset < below)
            .cloned()
            .collect())
    }
}

/// Two brokers both presuming leadership (the deposed one not told yet) used to restart
/// each other's acknowledged-record check from the first record at every alternation: a
/// read of the whole log per audit, for as long as the deposed one lasted. Each leader is
/// now checked once per (process, epoch), and a record one of them lacks is still found.
#[test]
fn alternating_presumed_leaders_are_each_checked_once() {
    let values: Vec<String> = (0..100).map(|i| format!("v{i}")).collect();
    let all: Vec<&str> = values.iter().map(String::as_str).collect();
    let full = vec![batch(0, 1, &all)];
    let mut lacking = all.clone();
    lacking[40] = "other";
    let short = vec![batch(0, 1, &lacking)];
    let mut c = Checker::new();
    for (o, v) in values.iter().enumerate() {
        c.on_client_ack(1, 0, o as Offset, v.as_str().into(), 1);
    }
    let read = std::cell::Cell::new(0);
    for round in 0..10 {
        let now = 10 + round;
        c.audit(
            now,
            1,
            &view(ReplicaRole::Leader, 2, 100, 100),
            &mut counting_reader(&full, &read),
        );
        c.audit(
            now,
            2,
            &view(ReplicaRole::Leader, 1, 100, 100),
            &mut counting_reader(&short, &read),
        );
    }
    assert_eq!(c.count(ACKED_WRITE_LOST), 1, "broker 2's loss, found once");
    // Each broker's log read once by divergence and once by the acked check (the first
    // audit reuses divergence's read), not once per alternation.
    assert!(read.get() <= 4 * 100, "{} offsets read", read.get());
}

/// A restarted broker is a new process whose log is what its disk kept: as a leader at the
/// same epoch it is checked for every acknowledged record again.
#[test]
fn a_restarted_leader_is_checked_again() {
    let mut c = Checker::new();
    c.on_client_ack(1, 0, 0, "a".into(), 1);
    c.on_client_ack(1, 0, 1, "b".into(), 1);
    let whole = vec![batch(0, 1, &["a", "b"])];
    c.audit(
        2,
        1,
        &view(ReplicaRole::Leader, 1, 2, 2),
        &mut reader(whole),
    );
    assert_eq!(c.count(ACKED_WRITE_LOST), 0);
    // The same broker, epoch and log end, but "b" is gone: not looked at again...
    let lost = vec![batch(0, 1, &["a", "x"])];
    c.audit(
        3,
        1,
        &view(ReplicaRole::Leader, 1, 2, 2),
        &mut reader(lost.clone()),
    );
    assert_eq!(c.count(ACKED_WRITE_LOST), 0);
    // ...until the broker restarts.
    c.on_broker_restart(1);
    c.audit(4, 1, &view(ReplicaRole::Leader, 1, 2, 2), &mut reader(lost));
    assert_eq!(c.count(ACKED_WRITE_LOST), 1);
}

fn view_from(
    role: ReplicaRole,
    epoch: LeaderEpoch,
    start: Offset,
    hw: Offset,
    leo: Offset,
) -> ReplicaView {
    ReplicaView {
        log_start_offset: start,
        ..view(role, epoch, hw, leo)
    }
}

/// Retention: an acknowledged record below a leader's log start is not required of it, one
/// at or above is (and its loss found), and records are pruned only below the log start of
/// every replica, so a replica that still holds older records (or was never seen) is still
/// checked for them when it leads.
#[test]
fn acked_records_below_every_log_start_are_pruned_and_no_loss_above_is_hidden() {
    let values: Vec<String> = (0..20).map(|i| format!("v{i}")).collect();
    let all: Vec<&str> = values.iter().map(String::as_str).collect();
    let retained = |from: usize, lose: Option<usize>| {
        let mut v: Vec<&str> = all[from..].to_vec();
        if let Some(l) = lose {
            v[l - from] = "other";
        }
        vec![batch(from as Offset, 1, &v)]
    };
    let mut c = Checker::new();
    for (o, v) in values.iter().enumerate() {
        c.on_client_ack(1, 0, o as Offset, v.as_str().into(), 1);
    }
    // Brokers 1 and 2 trimmed to 10; broker 3 not seen yet: nothing may be pruned.
    let f = |l| ReplicaRole::Follower { leader: l };
    c.audit(
        2,
        2,
        &view_from(f(1), 1, 10, 20, 20),
        &mut reader(retained(10, None)),
    );
    c.audit(
        2,
        1,
        &view_from(ReplicaRole::Leader, 1, 10, 20, 20),
        &mut reader(retained(10, None)),
    );
    assert_eq!(
        c.count(ACKED_WRITE_LOST),
        0,
        "below its log start nothing is required"
    );
    assert_eq!(c.acked[&0].first_kept(), 0, "broker 3 was never seen");
    // Broker 3 still holds everything and leads at epoch 2, lacking record 5: found.
    c.audit(
        3,
        3,
        &view(ReplicaRole::Leader, 2, 20, 20),
        &mut reader(retained(0, Some(5))),
    );
    assert_eq!(c.count(ACKED_WRITE_LOST), 1);
    // Once every replica starts at 10, records below go; a loss at 15 is still found.
    c.audit(
        4,
        3,
        &view_from(f(2), 2, 10, 20, 20),
        &mut reader(retained(10, None)),
    );
    c.audit(
        5,
        2,
        &view_from(ReplicaRole::Leader, 3, 10, 20, 20),
        &mut reader(retained(10, Some(15))),
    );
    assert_eq!(c.acked[&0].first_kept(), 10, "pruned below every log start");
    assert_eq!(
        c.count(ACKED_WRITE_LOST),
        2,
        "the loss at 15 is found after pruning"
    );
}

// The transaction invariants (invariants/txn.rs), on crafted client steps and final logs.
mod txn {
    use super::*;
    use crate::client_step::TxnObs;
    use skein_core::controller::ProducerIdAndEpoch;
    use skein_core::log::{ProducerInfo, TxnMarker};
    use skein_core::message::ConsumerRecords;
    use skein_core::txn::TxnResult;

    fn data(base: Offset, pid: u64, epoch: u16, values: &[&str]) -> RecordBatch {
        batch(base, 1, values)
            .with_producer(Some(ProducerInfo {
                producer_id: pid,
                producer_epoch: epoch,
                base_sequence: 0,
            }))
            .transactional()
    }

    fn marker(base: Offset, pid: u64, epoch: u16, result: TxnResult) -> RecordBatch {
        let m = TxnMarker {
            producer_id: pid,
            producer_epoch: epoch,
            result,
            coordinator_epoch: 1,
        };
        RecordBatch::txn_marker(m, 0).at(base).in_epoch(1)
    }

    fn id(pid: u64, epoch: u16) -> ProducerIdAndEpoch {
        ProducerIdAndEpoch {
            producer_id: pid,
            producer_epoch: epoch,
        }
    }

    fn checker() -> Checker {
        let mut c = Checker::new();
        c.enable_txn();
        c
    }

    fn begin(c: &mut Checker, index: u32, seq: u64, values: &[&str]) {
        let obs = TxnObs::Begin {
            index,
            id: "txn-1".into(),
            seq,
            values: values.iter().map(|v| Text::new(v)).collect(),
        };
        c.on_txn_obs(0, obs);
    }

    fn ended(c: &mut Checker, index: u32, seq: u64, result: TxnResult, epoch: u16) {
        let obs = TxnObs::Ended {
            index,
            seq,
            result,
            producer: id(7, epoch),
        };
        c.on_txn_obs(0, obs);
    }

    fn served(
        batches: Vec<RecordBatch>,
        hw: Offset,
        lso: Offset,
        epoch: LeaderEpoch,
    ) -> ConsumerRecords {
        ConsumerRecords {
            batches,
            high_watermark: hw,
            log_start_offset: 0,
            leader_epoch: epoch,
            next_offset: hw,
            last_epoch: None,
            last_stable_offset: lso,
            aborted: Vec::new(),
        }
    }

    /// Transaction 1 ("a", "b") aborted, transaction 2 ("c") committed, on partition 0.
    fn log() -> Vec<RecordBatch> {
        vec![
            data(0, 7, 0, &["a", "b"]),
            marker(2, 7, 1, TxnResult::Abort),
            data(3, 7, 1, &["c"]),
            marker(4, 7, 2, TxnResult::Commit),
        ]
    }

    #[test]
    fn an_aborted_read_is_caught_and_a_committed_read_passes() {
        let mut c = checker();
        begin(&mut c, 1, 1, &["a", "b"]);
        ended(&mut c, 1, 1, TxnResult::Abort, 1);
        begin(&mut c, 1, 2, &["c"]);
        ended(&mut c, 1, 2, TxnResult::Commit, 2);
        c.on_read(1, 0, 3, Text::new("c"), 1);
        c.finish_txn_log(0, &log(), 5);
        c.finish_txn(2);
        assert_eq!(c.count(TXN_ABORTED_READ), 0, "{:?}", c.violations());
        assert!(c.violations().is_empty(), "{:?}", c.violations());

        let mut c = checker();
        begin(&mut c, 1, 1, &["a", "b"]);
        c.on_read(1, 0, 1, Text::new("b"), 1);
        c.finish_txn_log(0, &log(), 5);
        c.finish_txn(2);
        assert_eq!(c.count(TXN_ABORTED_READ), 1, "{:?}", c.violations());
        let d = &c.violations()[0].detail;
        assert!(
            d.contains("partition 0 offset 1") && d.contains("offset 2"),
            "{d}"
        );
    }

    #[test]
    fn an_lso_past_an_open_transaction_or_going_back_is_caught() {
        // Served "a" with the HW at 2: its abort marker (offset 2) was not committed.
        let mut c = checker();
        c.on_txn_served(1, 1, 0, &served(vec![data(0, 7, 0, &["a", "b"])], 2, 2, 1));
        c.finish_txn_log(0, &log(), 5);
        c.finish_txn(2);
        assert_eq!(c.count(TXN_LSO), 1, "{:?}", c.violations());
        // The twin: served once the marker was below the HW.
        let mut c = checker();
        c.on_txn_served(1, 1, 0, &served(vec![data(0, 7, 0, &["a", "b"])], 3, 3, 1));
        c.finish_txn_log(0, &log(), 5);
        c.finish_txn(2);
        assert_eq!(c.count(TXN_LSO), 0, "{:?}", c.violations());
        // Going back within an epoch fails; a new epoch (or a restarted broker) may start
        // lower.
        let mut c = checker();
        c.on_txn_served(1, 1, 0, &served(Vec::new(), 5, 4, 1));
        c.on_txn_served(2, 1, 0, &served(Vec::new(), 5, 3, 1));
        assert_eq!(c.count(TXN_LSO), 1, "{:?}", c.violations());
        c.on_txn_served(3, 1, 0, &served(Vec::new(), 5, 2, 2));
        c.on_broker_restart(1);
        c.on_txn_served(4, 1, 0, &served(Vec::new(), 5, 1, 2));
        assert_eq!(c.count(TXN_LSO), 1, "{:?}", c.violations());
        // Past the HW.
        c.on_txn_served(5, 1, 0, &served(Vec::new(), 5, 6, 2));
        assert_eq!(c.count(TXN_LSO), 2, "{:?}", c.violations());
    }

    #[test]
    fn a_transaction_decided_both_ways_is_torn() {
        // One transaction wrote "a" to partition 0 and "x" to partition 1: committed on 0,
        // aborted on 1.
        let mut c = checker();
        begin(&mut c, 1, 1, &["a", "x"]);
        c.finish_txn_log(
            0,
            &[data(0, 7, 0, &["a"]), marker(1, 7, 1, TxnResult::Commit)],
            2,
        );
        c.finish_txn_log(
            1,
            &[data(0, 7, 0, &["x"]), marker(1, 7, 1, TxnResult::Abort)],
            2,
        );
        c.finish_txn(2);
        assert_eq!(c.count(TXN_TORN), 1, "{:?}", c.violations());
        let d = &c.violations()[0].detail;
        assert!(
            d.contains("partition 0 offset 0 (a)") && d.contains("partition 1 offset 0 (x)"),
            "{d}"
        );
        // The twin: committed on both.
        let mut c = checker();
        begin(&mut c, 1, 1, &["a", "x"]);
        c.finish_txn_log(
            0,
            &[data(0, 7, 0, &["a"]), marker(1, 7, 1, TxnResult::Commit)],
            2,
        );
        c.finish_txn_log(
            1,
            &[data(0, 7, 0, &["x"]), marker(1, 7, 1, TxnResult::Commit)],
            2,
        );
        c.finish_txn(2);
        assert!(c.violations().is_empty(), "{:?}", c.violations());
    }

    #[test]
    fn a_marker_of_another_transaction_is_caught() {
        // KAFKA-17754's shape: transaction 1's late COMMIT marker closes transaction 2's
        // record "c" (and 2's own ABORT marker closes nothing), so the marker spans one
        // transaction told it aborted.
        let late = vec![
            data(0, 7, 0, &["a"]),
            marker(1, 7, 0, TxnResult::Commit),
            data(2, 7, 0, &["c"]),
            marker(3, 7, 0, TxnResult::Commit),
            marker(4, 7, 0, TxnResult::Abort),
        ];
        let mut c = checker();
        begin(&mut c, 1, 1, &["a"]);
        ended(&mut c, 1, 1, TxnResult::Commit, 0);
        begin(&mut c, 1, 2, &["c"]);
        ended(&mut c, 1, 2, TxnResult::Abort, 0);
        c.finish_txn_log(0, &late, 5);
        c.finish_txn(2);
        assert_eq!(c.count(TXN_MARKER_MISAPPLIED), 1, "{:?}", c.violations());
        assert!(c.violations()[0].detail.contains("offset 3"));
        // A marker closing two client transactions' records at once.
        let mut c = checker();
        begin(&mut c, 1, 1, &["a"]);
        begin(&mut c, 1, 2, &["c"]);
        let both = vec![
            data(0, 7, 0, &["a"]),
            data(1, 7, 0, &["c"]),
            marker(2, 7, 0, TxnResult::Commit),
        ];
        c.finish_txn_log(0, &both, 3);
        c.finish_txn(2);
        assert_eq!(c.count(TXN_MARKER_MISAPPLIED), 1, "{:?}", c.violations());
        // The twin: each marker closes its own transaction, as told.
        let mut c = checker();
        begin(&mut c, 1, 1, &["a", "b"]);
        ended(&mut c, 1, 1, TxnResult::Abort, 1);
        begin(&mut c, 1, 2, &["c"]);
        ended(&mut c, 1, 2, TxnResult::Commit, 2);
        c.finish_txn_log(0, &log(), 5);
        c.finish_txn(2);
        assert!(c.violations().is_empty(), "{:?}", c.violations());
    }

    #[test]
    fn an_unfenced_older_instance_writing_is_caught() {
        let init = |c: &mut Checker, at, index, epoch| {
            let obs = TxnObs::Initialized {
                index,
                id: "txn-1".into(),
                producer: id(7, epoch),
            };
            c.on_txn_obs(at, obs);
        };
        let write = |c: &mut Checker, at, index| {
            let obs = TxnObs::Written {
                index,
                p: 0,
                base_offset: 9,
            };
            c.on_txn_obs(at, obs);
        };
        let begin_at = |c: &mut Checker, at, index, seq| {
            let obs = TxnObs::Begin {
                index,
                id: "txn-1".into(),
                seq,
                values: Vec::new(),
            };
            c.on_txn_obs(at, obs);
        };
        // Instance 1 at epoch 3; instance 2 takes over at epoch 3 (not fenced). The late
        // answer to a write of 1's transaction begun before is no finding; a write and a
        // commit of one begun after are.
        let mut c = checker();
        init(&mut c, 1, 1, 3);
        begin_at(&mut c, 2, 1, 1);
        write(&mut c, 2, 1);
        init(&mut c, 3, 2, 3);
        begin_at(&mut c, 4, 2, 1);
        write(&mut c, 4, 2);
        write(&mut c, 5, 1);
        assert_eq!(c.count(TXN_FENCED_WRITE), 0, "{:?}", c.violations());
        begin_at(&mut c, 6, 1, 2);
        write(&mut c, 6, 1);
        assert_eq!(c.count(TXN_FENCED_WRITE), 1, "{:?}", c.violations());
        ended(&mut c, 1, 2, TxnResult::Commit, 3);
        assert_eq!(c.count(TXN_FENCED_WRITE), 2, "{:?}", c.violations());
        // A commit counts even for a transaction begun before the takeover: the zombie
        // committed at the identity the newer instance holds.
        let mut c = checker();
        init(&mut c, 1, 1, 3);
        begin_at(&mut c, 2, 1, 1);
        init(&mut c, 3, 2, 3);
        ended(&mut c, 1, 1, TxnResult::Commit, 3);
        assert_eq!(c.count(TXN_FENCED_WRITE), 1, "{:?}", c.violations());
        // The twin: the takeover bumped the epoch; the older instance's writes and commit
        // after it are at an older identity (refused in a real run; no finding here).
        let mut c = checker();
        init(&mut c, 1, 1, 3);
        init(&mut c, 3, 2, 4);
        begin_at(&mut c, 5, 1, 1);
        write(&mut c, 5, 1);
        ended(&mut c, 1, 1, TxnResult::Commit, 3);
        assert!(c.violations().is_empty(), "{:?}", c.violations());
    }

    #[test]
    fn a_read_of_a_transaction_never_decided_fails_txn_lso() {
        let mut c = checker();
        c.on_read(1, 0, 0, Text::new("a"), 1);
        c.finish_txn_log(0, &[data(0, 7, 0, &["a"])], 1);
        c.finish_txn(2);
        assert_eq!(c.count(TXN_LSO), 1, "{:?}", c.violations());
    }

    #[test]
    fn txn_invariants_cost_nothing_unless_enabled() {
        let mut c = Checker::new();
        c.on_txn_obs(
            0,
            TxnObs::Written {
                index: 1,
                p: 0,
                base_offset: 0,
            },
        );
        c.on_read(1, 0, 1, Text::new("b"), 1);
        c.finish_txn_log(0, &log(), 5);
        c.finish_txn(2);
        assert!(!c.txn_enabled() && c.violations().is_empty());
    }
}
