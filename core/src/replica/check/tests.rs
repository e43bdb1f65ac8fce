//! Each replica invariant, broken on purpose: the check names it. And a correct replica
//! driven through a produce, a replication round and a failover passes every check.

use super::super::leader::{PendingIsr, WaitingProduce};
use super::*;
use crate::log::{EncodedBatch, LogConfig, PartitionLog, RecordBatch};
use crate::message::{Acks, Address, ProduceRequest};
use crate::replica::{ReplicaConfig, ReplicaEffect};
use crate::testing::MemStorage;

type Log = PartitionLog<MemStorage>;

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

fn fresh(me: NodeId, config: ReplicaConfig) -> Replica<Log> {
    let log = PartitionLog::open(MemStorage::new(), "t-0", LogConfig::default())
        .expect("open")
        .0;
    Replica::new(tp(), me, log, config)
}

/// Node 1 leading epoch 1 of replicas [1, 2, 3] with ISR `isr`.
fn leader(isr: &[NodeId], config: ReplicaConfig) -> Replica<Log> {
    let mut r = fresh(1, config);
    r.apply_partition_state(0, Some(1), 1, 1, isr, &[1, 2, 3]);
    r.poll_outputs();
    assert!(matches!(r.role, RoleState::Leader(_)));
    r
}

/// Appends `n` one-record batches to the leader's log at `epoch`, fsynced.
fn append(r: &mut Replica<Log>, n: usize, epoch: LeaderEpoch) {
    for _ in 0..n {
        let b = RecordBatch::from_values(0, [b"v".to_vec()]);
        r.log.append_as_leader(b, epoch, 0).expect("append");
    }
    r.log.flush().expect("flush");
}

fn leader_state(r: &mut Replica<Log>) -> &mut super::super::leader::LeaderState {
    match &mut r.role {
        RoleState::Leader(l) => l,
        _ => panic!("not leading"),
    }
}

#[test]
fn a_correct_replica_passes_through_produce_replication_and_failover() {
    let mut r = leader(&[1, 2], ReplicaConfig::default());
    let req = ProduceRequest {
        correlation: 1,
        tp: tp(),
        acks: Acks::All,
        timeout: 1_000_000_000,
        batch: EncodedBatch::encode(&RecordBatch::from_values(0, [b"a".to_vec(), b"b".to_vec()]))
            .unwrap(),
        transactional_id: None,
    };
    r.handle_produce(0, Address::Node(9), req);
    assert_eq!(r.check(), Ok(()));
    assert_eq!(
        leader_state(&mut r).waiting.len(),
        1,
        "waits for follower 2"
    );
    let cp = r.checkpoint();
    r.become_follower(10, Some(2), 2, 2);
    r.poll_outputs(); // debug builds: debug_check runs here and must not panic
    assert_eq!(r.check(), Ok(()));
    assert_eq!(r.check_since(&cp), Ok(()));
}

#[test]
fn high_watermark_past_the_log_end_is_caught() {
    let mut r = leader(&[1], ReplicaConfig::default());
    let leo = r.log.log_end_offset();
    r.high_watermark = leo + 5;
    assert_eq!(
        r.check(),
        Err(CheckError::HighWatermarkPastLogEnd {
            tp: tp(),
            hw: leo + 5,
            leo
        })
    );
}

#[test]
fn leader_high_watermark_over_unflushed_data_is_caught() {
    let mut r = leader(&[1], ReplicaConfig::default());
    let b = RecordBatch::from_values(0, [b"v".to_vec(), b"w".to_vec()]);
    r.log.append_as_leader(b, 1, 0).expect("append"); // not flushed
    let (flushed, leo) = (r.log.flushed_offset(), r.log.log_end_offset());
    assert!(flushed < leo);
    r.high_watermark = leo;
    assert_eq!(
        r.check(),
        Err(CheckError::HighWatermarkPastFlushed {
            tp: tp(),
            hw: leo,
            flushed
        })
    );
    // An HW inherited from following (not past the epoch start) may be ahead of the
    // flushed offset.
    r.high_watermark = leader_state(&mut r).epoch_start_offset;
    assert_eq!(r.check(), Ok(()));
}

#[test]
fn leader_high_watermark_past_an_isr_follower_is_caught() {
    let mut r = leader(&[1, 2], ReplicaConfig::default());
    append(&mut r, 3, 1);
    let start = leader_state(&mut r).epoch_start_offset;
    leader_state(&mut r).isr.force_log_end(2, Some(start + 1));
    let cp = r.checkpoint();
    let leo = r.log.log_end_offset();
    r.high_watermark = leo;
    assert_eq!(
        r.check_since(&cp),
        Err(CheckError::HighWatermarkPastFollower {
            tp: tp(),
            hw: leo,
            follower: 2,
            log_end: start + 1
        })
    );
    r.high_watermark = start + 1;
    assert_eq!(r.check_since(&cp), Ok(()));
    // Once set, the HW may stay ahead of a follower that fetches lower (the controller
    // took it out of the ISR; the leader has not heard yet).
    r.high_watermark = leo;
    let cp = r.checkpoint();
    assert_eq!(r.check_since(&cp), Ok(()));
}

#[test]
fn isr_membership_rules_are_caught() {
    let mut r = leader(&[1, 2], ReplicaConfig::default());
    leader_state(&mut r).isr.confirm(&[2]);
    assert!(matches!(
        r.check(),
        Err(CheckError::LeaderNotInIsr { leader: 1, .. })
    ));

    let mut r = leader(&[1, 2], ReplicaConfig::default());
    leader_state(&mut r)
        .isr
        .propose(&[1, 2, 7].into_iter().collect());
    assert!(matches!(
        r.check(),
        Err(CheckError::IsrNotAReplica { member: 7, .. })
    ));

    let mut r = leader(&[1, 2], ReplicaConfig::default());
    leader_state(&mut r).pending = Some(PendingIsr {
        isr: [1, 2, 3].into_iter().collect(),
        sent_at: 0,
    });
    assert_eq!(
        r.check(),
        Err(CheckError::PendingOutsideMaximalIsr {
            tp: tp(),
            pending: vec![1, 2, 3],
            maximal: vec![1, 2]
        })
    );
}

#[test]
fn a_log_epoch_ahead_of_the_leader_is_caught() {
    let mut r = leader(&[1], ReplicaConfig::default());
    append(&mut r, 1, 5);
    assert_eq!(
        r.check(),
        Err(CheckError::LogEpochAheadOfLeader {
            tp: tp(),
            log_epoch: 5,
            epoch: 1
        })
    );
}

fn waiting(base_offset: Offset, required: Offset, duplicate: bool) -> WaitingProduce {
    WaitingProduce {
        client: Address::Node(9).into(),
        correlation: 1,
        base_offset,
        required,
        deadline: u64::MAX,
        duplicate,
    }
}

#[test]
fn waiting_produces_out_of_order_or_already_committed_are_caught() {
    let mut r = leader(&[1, 2], ReplicaConfig::default());
    append(&mut r, 4, 1); // offsets 1..=4 after the marker at 0
    let leo = r.log.log_end_offset();
    let l = leader_state(&mut r);
    // A duplicate points back at its first copy: allowed anywhere.
    l.waiting = vec![
        waiting(2, 3, false),
        waiting(1, 2, true),
        waiting(3, 4, false),
    ];
    assert_eq!(r.check(), Ok(()));

    leader_state(&mut r).waiting = vec![waiting(3, 4, false), waiting(2, 3, false)];
    assert_eq!(
        r.check(),
        Err(CheckError::WaitingOutOfOrder {
            tp: tp(),
            before: 3,
            after: 2
        })
    );

    leader_state(&mut r).waiting = vec![waiting(2, leo + 1, false)];
    assert_eq!(
        r.check(),
        Err(CheckError::WaitingPastLogEnd {
            tp: tp(),
            required: leo + 1,
            leo
        })
    );

    leader_state(&mut r).waiting = vec![waiting(0, 1, false)];
    r.high_watermark = 1;
    assert_eq!(
        r.check(),
        Err(CheckError::WaitingAlreadyCommitted {
            tp: tp(),
            required: 1,
            hw: 1
        })
    );
}

#[test]
fn high_watermark_regression_within_an_epoch_is_caught() {
    let mut r = leader(&[1], ReplicaConfig::default());
    append(&mut r, 3, 1);
    r.high_watermark = 3;
    let cp = r.checkpoint();
    r.high_watermark = 2;
    assert_eq!(
        r.check_since(&cp),
        Err(CheckError::HighWatermarkRegressed {
            tp: tp(),
            epoch: 1,
            from: 3,
            to: 2
        })
    );
    // In another leader epoch the HW is another leader's: not compared.
    r.leader_epoch = 2;
    assert_eq!(r.check_since(&cp), Ok(()));
}

#[test]
fn last_stable_offset_regression_within_an_epoch_is_caught() {
    let mut r = leader(&[1], ReplicaConfig::default());
    append(&mut r, 3, 1);
    r.high_watermark = 3;
    let cp = r.checkpoint();
    assert_eq!(r.check_since(&cp), Ok(()));
    // A transaction that appears open below the LSO already given out (made up: the
    // producer table only ever opens one at the log end).
    let open = RecordBatch::from_values(0, [b"t".to_vec()])
        .transactional()
        .with_producer(Some(crate::log::ProducerInfo {
            producer_id: 7,
            producer_epoch: 0,
            base_sequence: 0,
        }))
        .at(2);
    r.producers.load_batch(&open);
    assert_eq!(
        r.check_since(&cp),
        Err(CheckError::LastStableOffsetRegressed {
            tp: tp(),
            epoch: 1,
            from: 3,
            to: 2
        })
    );
}

#[test]
fn a_follower_may_lower_its_high_watermark_only_under_unclean_election() {
    let mut r = fresh(2, ReplicaConfig::default());
    r.log
        .append_as_leader(RecordBatch::epoch_marker(0, 1, 0), 1, 0)
        .expect("append");
    append(&mut r, 3, 1);
    r.apply_partition_state(0, Some(1), 1, 1, &[1, 2], &[1, 2, 3]);
    r.poll_outputs();
    r.high_watermark = 3;
    let cp = r.checkpoint();
    r.high_watermark = 1;
    assert!(matches!(
        r.check_since(&cp),
        Err(CheckError::HighWatermarkRegressed { from: 3, to: 1, .. })
    ));
    r.config.unclean_leader_election = true;
    assert_eq!(r.check_since(&cp), Ok(()));
}

#[test]
fn a_log_epoch_going_back_without_truncation_is_caught() {
    let mut r = leader(&[1], ReplicaConfig::default());
    append(&mut r, 2, 1);
    let leo = r.log.log_end_offset();
    // As if epoch 3 had been the last batch's before (the log itself refuses to append an
    // older epoch, so the earlier state is made up).
    let cp = Checkpoint {
        latest_log_epoch: Some(3),
        log_end: leo - 1,
        ..r.checkpoint()
    };
    assert_eq!(
        r.check_since(&cp),
        Err(CheckError::LogEpochRegressed {
            tp: tp(),
            from: 3,
            to: 1,
            leo_before: leo - 1,
            leo
        })
    );
    // A truncation (a shorter log) may drop the newer epoch.
    let cp = Checkpoint {
        log_end: leo + 1,
        ..cp
    };
    assert_eq!(r.check_since(&cp), Ok(()));
}

#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "replica invariant broken")]
fn debug_builds_panic_on_a_violation_at_drain() {
    let mut r = leader(&[1], ReplicaConfig::default());
    r.high_watermark = r.log.log_end_offset() + 1;
    r.poll_outputs();
}

#[cfg(debug_assertions)]
#[test]
fn debug_builds_leave_bug_zoo_replicas_to_the_simulator() {
    let config = ReplicaConfig {
        bugs: crate::bugs::Bugs {
            ack_before_isr: true,
            ..Default::default()
        },
        ..ReplicaConfig::default()
    };
    let mut r = leader(&[1], config);
    r.high_watermark = r.log.log_end_offset() + 1;
    let effects: Vec<ReplicaEffect> = r.poll_outputs(); // no panic
    assert!(effects.is_empty());
    assert!(r.check().is_err(), "the check itself still reports it");
}

/// The finding behind the follower half of the HW check: a truncation that meets a damaged
/// batch below the HW is cut there by the log. The follower now goes offline (reported,
/// taken out of the ISR) instead of staying in the ISR with committed records missing.
#[test]
fn a_truncation_cut_below_the_high_watermark_by_damage_takes_the_follower_offline() {
    let mut r = fresh(2, ReplicaConfig::default());
    r.log
        .append_as_leader(RecordBatch::epoch_marker(0, 1, 0), 1, 0)
        .expect("append");
    append(&mut r, 3, 1); // log end 4
    r.apply_partition_state(0, Some(1), 1, 1, &[1, 2], &[1, 2, 3]);
    r.high_watermark = 3;
    let correlation = r
        .poll_outputs()
        .into_iter()
        .find_map(|e| match e {
            ReplicaEffect::Send {
                msg: crate::message::Message::Fetch(f),
                ..
            } => Some(f.correlation),
            _ => None,
        })
        .expect("a fetch");
    // Rot the first batch (the epoch marker at offset 0).
    assert!(r
        .log
        .storage()
        .flip_bit("t-0/00000000000000000000.log", 20, 2));
    // The leader's log ends at 3 in epoch 1: drop offset 3, which truncate_to cuts at 0.
    let resp = crate::message::FetchResponse {
        correlation,
        tp: tp(),
        leader_epoch: 1,
        result: crate::message::FetchResult::Diverging {
            epoch: Some(1),
            end_offset: 3,
            high_watermark: 3,
        },
    };
    r.handle_fetch_response(1, 1, resp);
    assert_eq!(r.log.log_end_offset(), 0, "cut at the damage");
    assert_eq!(r.role(), crate::replica::ReplicaRole::Offline);
    assert!(
        r.log_corrupt(),
        "reported as damaged, so its broker repairs it"
    );
    let effects = r.poll_outputs(); // debug builds: the checks hold
    assert!(effects.iter().any(|e| matches!(
        e,
        ReplicaEffect::Event(crate::replica::Event::LogFailed { .. })
    )));
}
