use super::*;
use crate::controller::ProducerIdAndEpoch;
use crate::log::{RecordBatch, CONTROL_BATCH_BIT};
use crate::message::{MetadataResponse, PartitionMetadata, ProduceAck, ProduceError};
use crate::types::TopicPartition;

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

fn values(n: u8) -> RecordBatch {
    RecordBatch::from_values(0, (0..n).map(|i| vec![i]))
}

#[test]
fn take_records_skips_markers_old_records_and_the_uncommitted_tail() {
    let first = RecordBatch {
        base_offset: 10,
        ..values(3)
    };
    let marker = RecordBatch::epoch_marker(13, 2, 0);
    assert_eq!(marker.attributes, CONTROL_BATCH_BIT);
    let last = RecordBatch {
        base_offset: 14,
        ..values(3)
    };
    let batches = [first, marker, last];
    let taken = take_records(11, &batches, 16, 16);
    let offsets: Vec<_> = taken.records.iter().map(|(o, _, _)| *o).collect();
    assert_eq!(offsets, vec![11, 12, 14, 15]);
    assert_eq!(taken.next_offset, 16);
    // A marker at the end of the committed log does not hold the reader.
    let taken = take_records(13, &batches[1..2], 14, 14);
    assert!(taken.records.is_empty());
    assert_eq!(taken.next_offset, 14);
}

fn metadata(correlation: u64, leader: Option<u32>, epoch: u32) -> MetadataResponse {
    MetadataResponse {
        correlation,
        partitions: vec![PartitionMetadata {
            tp: tp(),
            leader,
            leader_epoch: epoch,
            partition_epoch: epoch,
            replicas: vec![1, 2, 3],
            isr: vec![1, 2, 3],
            elr: Vec::new(),
        }],
        brokers: vec![1, 2, 3],
        unknown_topics: Vec::new(),
    }
}

#[test]
fn leader_cache_never_steps_back_and_refreshes_when_stale() {
    let mut c = LeaderCache::new(500, 50);
    let topics = vec!["t".to_string()];
    let req = c
        .poll_refresh(0, 1, &topics, true)
        .expect("missing leader: refresh");
    assert_eq!(req.correlation, 1);
    assert!(
        c.poll_refresh(10, 2, &topics, true).is_none(),
        "one in flight"
    );
    c.learn(&metadata(1, Some(2), 5));
    assert_eq!(c.leader(&tp()), Some(2));
    c.learn(&metadata(7, Some(1), 4));
    assert_eq!(
        c.leader(&tp()),
        Some(2),
        "a lagging broker's older view is ignored"
    );
    c.not_leader(&tp(), Some(2), Some(3));
    assert_eq!(
        c.leader(&tp()),
        Some(3),
        "the refusing broker's hint is taken"
    );
    assert!(
        c.poll_refresh(20, 3, &topics, false).is_none(),
        "min interval"
    );
    assert_eq!(c.next_refresh(false), Some(50));
    assert!(c.poll_refresh(50, 3, &topics, false).is_some());
}

fn ack(base_offset: u64) -> Result<ProduceAck, ProduceError> {
    Ok(ProduceAck {
        base_offset,
        leader_epoch: 1,
        duplicate: false,
    })
}

#[test]
fn storage_errors_are_retried_after_a_refresh_and_invalid_batches_fail() {
    assert!(retriable(&ProduceError::Storage("disk full".into())));
    assert!(refreshes_metadata(&ProduceError::Storage(
        "disk full".into()
    )));
    assert!(!retriable(&ProduceError::InvalidRecord("bad".into())));
    let mut p = ProduceClient::plain();
    let b = p.prepare(&tp(), values(2)).unwrap();
    let step = p
        .on_answer(&tp(), &b, &Err(ProduceError::Storage("eio".into())))
        .unwrap();
    assert!(matches!(
        step,
        ProduceStep::Resend {
            refresh_metadata: true,
            ..
        }
    ));
    let step = p
        .on_answer(&tp(), &b, &Err(ProduceError::InvalidRecord("x".into())))
        .unwrap();
    assert!(matches!(step, ProduceStep::Failed(_)));
    assert_eq!(
        p.on_answer(&tp(), &b, &ack(7)).unwrap(),
        ProduceStep::Acked {
            base_offset: 7,
            duplicate: false
        }
    );
}

#[test]
fn a_lost_sequence_bumps_the_epoch_and_resends_only_on_the_leaders_word() {
    let mut p = ProduceClient::idempotent();
    assert!(!p.ready());
    p.init(ProducerIdAndEpoch {
        producer_id: 9,
        producer_epoch: 0,
    });
    let other = TopicPartition::new("t", 1);
    let b = p.prepare(&tp(), values(2)).unwrap();
    let c = p.prepare(&other, values(1)).unwrap();
    let lost = Err(ProduceError::OutOfOrderSequence("gap".into()));
    assert_eq!(
        p.on_answer(&tp(), &b, &lost).unwrap(),
        ProduceStep::CheckLeader
    );
    // A deposed broker's word: the same batch again.
    match p.on_leader_checked(&tp(), &b, &lost, false).unwrap() {
        ProduceStep::Resend { batch, .. } => assert_eq!(batch, b),
        other => panic!("expected a resend, got {other:?}"),
    }
    // The leader's: a new epoch, and both batches in flight re-stamped, none dropped.
    match p.on_leader_checked(&tp(), &b, &lost, true).unwrap() {
        ProduceStep::EpochBumped { resend } => {
            assert_eq!(resend.len(), 2);
            for (t, batch) in &resend {
                let info = batch.producer.unwrap();
                assert_eq!(info.producer_epoch, 1);
                assert_eq!(info.base_sequence, 0);
                let old = if *t == tp() { &b } else { &c };
                assert_eq!(batch.records, old.records);
            }
        }
        other => panic!("expected an epoch bump, got {other:?}"),
    }
    assert_eq!(p.producer().unwrap().producer_epoch, 1);
}
