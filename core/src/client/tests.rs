use super::*;
use crate::controller::ProducerIdAndEpoch;
use crate::log::{RecordBatch, CONTROL_BATCH_BIT};
use crate::message::{
    ConsumerFetchError, ConsumerRecords, MetadataResponse, PartitionMetadata, ProduceAck,
    ProduceError,
};
use crate::types::{Offset, TopicPartition};

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

fn values(n: u8) -> RecordBatch {
    RecordBatch::from_values(0, (0..n).map(|i| vec![i]))
}

#[test]
fn take_records_skips_markers_old_records_and_the_uncommitted_tail() {
    let first = values(3).at(10);
    let marker = RecordBatch::epoch_marker(13, 2, 0);
    assert_eq!(marker.attributes, CONTROL_BATCH_BIT);
    let last = values(3).at(14);
    let batches = [first, marker, last];
    let taken = take_records(11, &batches, 16, 16, &[]);
    let offsets: Vec<_> = taken.records.iter().map(|(o, _, _)| *o).collect();
    assert_eq!(offsets, vec![11, 12, 14, 15]);
    assert_eq!(taken.next_offset, 16);
    // A marker at the end of the committed log does not hold the reader.
    let taken = take_records(13, &batches[1..2], 14, 14, &[]);
    assert!(taken.records.is_empty());
    assert_eq!(taken.next_offset, 14);
}

fn answer(
    batches: Vec<RecordBatch>,
    hw: Offset,
    next: Offset,
    last: Option<u32>,
) -> ConsumerRecords {
    ConsumerRecords {
        batches,
        high_watermark: hw,
        log_start_offset: 0,
        leader_epoch: 3,
        next_offset: next,
        last_epoch: last,
        last_stable_offset: 0,
        aborted: Vec::new(),
    }
}

#[test]
fn the_cursor_tracks_the_epoch_of_the_last_batch_it_moves_past() {
    let mut c = FetchCursor::new(10);
    assert_eq!(
        c.request(7, tp(), 100).last_fetched_epoch,
        None,
        "first fetch unchecked"
    );
    let data = values(3).at(10).in_epoch(1);
    // The broker read a marker of epoch 2 after the data (left out of the answer).
    let recs = answer(vec![data.clone()], 14, 14, Some(2));
    assert_eq!(c.take(&recs).records.len(), 3);
    assert_eq!((c.position(), c.last_fetched_epoch()), (14, Some(2)));
    let req = c.request(8, tp(), 100);
    assert_eq!((req.offset, req.last_fetched_epoch), (14, Some(2)));
    // Nothing new: the epoch stays.
    c.take(&answer(Vec::new(), 14, 14, None));
    assert_eq!((c.position(), c.last_fetched_epoch()), (14, Some(2)));
    // An answer without `last_epoch` (older broker): the last record's batch epoch.
    let mut c = FetchCursor::new(10);
    c.take(&answer(vec![data], 13, 13, None));
    assert_eq!((c.position(), c.last_fetched_epoch()), (13, Some(1)));
}

#[test]
fn the_cursor_resets_to_a_divergence_below_it_and_reports_it() {
    let mut c = FetchCursor::new(0);
    let old = values(10).in_epoch(2);
    let new = values(10).at(10).in_epoch(4);
    c.take(&answer(vec![old, new], 20, 20, Some(4)));
    assert_eq!((c.position(), c.last_fetched_epoch()), (20, Some(4)));
    // The leader's epoch 4 ends at 12: the log was truncated under the reader.
    let e = ConsumerFetchError::DivergingEpoch {
        epoch: Some(4),
        end_offset: 12,
    };
    let t = c.on_error(&e).expect("a truncation");
    assert_eq!((t.from, t.to, t.epoch), (20, 12, Some(4)));
    assert_eq!((c.position(), c.last_fetched_epoch()), (12, Some(4)));
    // The leader never had epoch 4 (its largest below is 3, to 15): the reader's epoch-4
    // records from 10 on are not the leader's, although its log reaches the position. The
    // reader goes back to where its own epoch 4 began and asks next with its own older
    // epoch (KIP-279's next round).
    let e = ConsumerFetchError::DivergingEpoch {
        epoch: Some(3),
        end_offset: 15,
    };
    let t = c.on_error(&e).expect("a truncation");
    assert_eq!((t.from, t.to), (12, 10));
    assert_eq!((c.position(), c.last_fetched_epoch()), (10, Some(2)));
    // Diverging at or past the position: nothing read is gone; the epoch is kept.
    let e = ConsumerFetchError::DivergingEpoch {
        epoch: Some(2),
        end_offset: 10,
    };
    assert_eq!(c.on_error(&e), None);
    assert_eq!((c.position(), c.last_fetched_epoch()), (10, Some(2)));
    // The leader knows no epoch that old: back to its log start, unchecked.
    let e = ConsumerFetchError::DivergingEpoch {
        epoch: None,
        end_offset: 5,
    };
    assert_eq!(c.on_error(&e).map(|t| (t.from, t.to)), Some((10, 0)));
    assert_eq!((c.position(), c.last_fetched_epoch()), (0, None));
    c.take(&answer(Vec::new(), 5, 5, Some(1)));
    assert_eq!((c.position(), c.last_fetched_epoch()), (5, Some(1)));
    // Retention deleted the records below the log start: move there, silently.
    let e = ConsumerFetchError::OffsetOutOfRange {
        offset: 5,
        log_start_offset: 8,
        high_watermark: 30,
    };
    assert_eq!(c.on_error(&e), None);
    assert_eq!(c.position(), 8);
    // Past the end of a stale leader's log: stay (the host refreshes the leader).
    let e = ConsumerFetchError::OffsetOutOfRange {
        offset: 8,
        log_start_offset: 0,
        high_watermark: 4,
    };
    assert_eq!(c.on_error(&e), None);
    assert_eq!(c.position(), 8);
}

#[test]
fn a_cursor_ignoring_truncation_keeps_its_position_and_drops_its_epoch() {
    let mut c = FetchCursor::new(0).ignoring_truncation(true);
    c.take(&answer(vec![values(20)], 20, 20, Some(4)));
    let e = ConsumerFetchError::DivergingEpoch {
        epoch: Some(4),
        end_offset: 12,
    };
    assert_eq!(c.on_error(&e), None, "nothing reported");
    assert_eq!((c.position(), c.last_fetched_epoch()), (20, None));
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
    let v = c.version();
    c.learn(&metadata(1, Some(2), 5));
    assert_eq!(c.leader(&tp()), Some(2));
    assert_ne!(
        c.version(),
        v,
        "learning a leader moves the version mirrors follow"
    );
    c.learn(&metadata(7, Some(1), 4));
    assert_eq!(
        c.leader(&tp()),
        Some(2),
        "a lagging broker's older view is ignored"
    );
    let v = c.version();
    let _ = c.leader(&tp());
    c.invalidate();
    assert_eq!(
        c.version(),
        v,
        "looking up or asking for a refresh changes no leader"
    );
    c.not_leader(&tp(), Some(2), Some(3));
    assert_ne!(c.version(), v, "a refusal changes a leader");
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
    // KIP-890 part 1: a write the coordinator did not verify is not sent again as it is.
    assert!(!retriable(&ProduceError::InvalidTxnState(
        "unverified".into()
    )));
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

#[test]
fn a_request_carries_the_stamped_batch_encoded() {
    let mut p = ProduceClient::idempotent();
    p.init(ProducerIdAndEpoch {
        producer_id: 4,
        producer_epoch: 2,
    });
    let b = p.prepare(&tp(), values(3)).unwrap();
    let req = ProduceClient::request(7, tp(), crate::message::Acks::All, 1_000, &b).unwrap();
    assert_eq!((req.correlation, req.tp, req.timeout), (7, tp(), 1_000));
    assert_eq!(req.acks, crate::message::Acks::All);
    // The leader reads the producer's stamp from the header, and the records are the
    // batch's own.
    let h = req.batch.header().unwrap();
    let stamp = h.producer.expect("an idempotent batch");
    assert_eq!((stamp.producer_id, stamp.producer_epoch), (4, 2));
    assert_eq!(req.batch.decode().unwrap(), b);
}
