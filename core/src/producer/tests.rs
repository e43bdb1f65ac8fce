//! Scripted idempotence tests: the client allocator against the broker table, with a toy
//! "log" standing in for the partition (offsets assigned densely on append).

use super::*;
use crate::controller::ProducerIdAndEpoch;
use crate::log::{ProducerInfo, RecordBatch};
use crate::types::{Offset, TopicPartition};

fn batch(n: u32) -> RecordBatch {
    RecordBatch::from_values(0, (0..n).map(|i| vec![i as u8]))
}

/// A leader's log plus its producer state table.
#[derive(Default)]
struct Leader {
    log: Vec<RecordBatch>,
    table: ProducerStateTable,
}

impl Leader {
    fn end(&self) -> Offset {
        self.log.last().map_or(0, |b| b.next_offset())
    }

    /// What a partition leader does with a produce request.
    fn produce(&mut self, mut b: RecordBatch) -> ProduceOutcome {
        let info = b.producer.expect("idempotent");
        match self.table.check(&info, b.record_count()) {
            SequenceCheck::Append => {
                b.base_offset = self.end();
                self.table
                    .record_append(&info, b.record_count(), b.base_offset, false);
                let base_offset = b.base_offset;
                self.log.push(b);
                ProduceOutcome::Appended { base_offset }
            }
            SequenceCheck::Duplicate { base_offset, .. } => {
                ProduceOutcome::Duplicate { base_offset }
            }
            SequenceCheck::OutOfOrderSequence { .. } => ProduceOutcome::OutOfOrderSequence,
            SequenceCheck::InvalidProducerEpoch { .. } => ProduceOutcome::InvalidProducerEpoch,
            SequenceCheck::UnknownProducerId { .. } => ProduceOutcome::UnknownProducerId,
        }
    }
}

fn producer(id: u64) -> IdempotentProducer {
    let mut p = IdempotentProducer::new();
    p.init(ProducerIdAndEpoch {
        producer_id: id,
        producer_epoch: 0,
    });
    p
}

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

fn seq(b: &RecordBatch) -> u32 {
    b.producer.unwrap().base_sequence
}

#[test]
fn retry_after_lost_response_is_a_duplicate_with_the_original_offset() {
    let mut leader = Leader::default();
    let mut p = producer(7);
    let b0 = p.stamp(&tp(), batch(3)).unwrap();
    assert_eq!(
        leader.produce(b0.clone()),
        ProduceOutcome::Appended { base_offset: 0 }
    );
    let b1 = p.stamp(&tp(), batch(2)).unwrap();
    assert_eq!(seq(&b1), 3);
    // The response to b1 is lost; the producer retries the very same batch.
    let first = leader.produce(b1.clone());
    assert_eq!(first, ProduceOutcome::Appended { base_offset: 3 });
    let again = p.retry(&tp(), 3).unwrap();
    assert_eq!(again, b1);
    let outcome = leader.produce(again);
    assert_eq!(outcome, ProduceOutcome::Duplicate { base_offset: 3 });
    assert_eq!(leader.log.len(), 2, "not written twice");
    assert_eq!(
        p.on_response(&tp(), 3, outcome),
        Ok(Completion::Acked {
            base_offset: 3,
            duplicate: true
        })
    );
    // The first batch's answer arrives late too.
    assert_eq!(
        p.on_response(&tp(), 0, ProduceOutcome::Appended { base_offset: 0 }),
        Ok(Completion::Acked {
            base_offset: 0,
            duplicate: false
        })
    );
    assert_eq!(p.in_flight(&tp()).count(), 0);
    // A response for something no longer in flight is a typed error.
    assert!(matches!(
        p.on_response(&tp(), 0, ProduceOutcome::Appended { base_offset: 0 }),
        Err(ProducerError::UnknownBatch { .. })
    ));
}

#[test]
fn sequence_gap_is_out_of_order() {
    let mut leader = Leader::default();
    let mut p = producer(1);
    let b0 = p.stamp(&tp(), batch(2)).unwrap();
    let b1 = p.stamp(&tp(), batch(2)).unwrap();
    let b2 = p.stamp(&tp(), batch(2)).unwrap();
    leader.produce(b0);
    // b1 is lost; b2 arrives: a gap.
    assert_eq!(
        leader.table.check(&b2.producer.unwrap(), 2),
        SequenceCheck::OutOfOrderSequence {
            expected: 2,
            received: 4
        }
    );
    let outcome = leader.produce(b2.clone());
    assert_eq!(outcome, ProduceOutcome::OutOfOrderSequence);
    assert_eq!(leader.log.len(), 1);
    // The producer holds b2 back: an earlier batch (b1) is still in flight.
    p.on_response(&tp(), 0, ProduceOutcome::Appended { base_offset: 0 })
        .unwrap();
    assert_eq!(
        p.on_response(&tp(), 4, outcome),
        Ok(Completion::Retry(b2.clone()))
    );
    // Retrying in order fills the gap.
    let b1 = p.retry(&tp(), seq(&b1)).unwrap();
    assert_eq!(
        leader.produce(b1),
        ProduceOutcome::Appended { base_offset: 2 }
    );
    assert_eq!(
        leader.produce(b2),
        ProduceOutcome::Appended { base_offset: 4 }
    );
    // b3 was sent before b1 and b2 were acknowledged, so an out-of-order answer to it may
    // be stale: it is retried.
    let b3 = p.stamp(&tp(), batch(1)).unwrap();
    p.on_response(&tp(), 2, ProduceOutcome::Appended { base_offset: 2 })
        .unwrap();
    p.on_response(&tp(), 4, ProduceOutcome::Appended { base_offset: 4 })
        .unwrap();
    assert_eq!(
        p.on_response(&tp(), seq(&b3), ProduceOutcome::OutOfOrderSequence),
        Ok(Completion::Retry(b3.clone()))
    );
    // Sent again with nothing ahead of it and still out of order: the broker lost track.
    assert_eq!(
        p.on_response(&tp(), seq(&b3), ProduceOutcome::OutOfOrderSequence),
        Ok(Completion::NeedsEpochBump)
    );
}

#[test]
fn stale_epoch_is_fenced_and_new_epoch_starts_at_zero() {
    let mut leader = Leader::default();
    let mut old = producer(9);
    let b = old.stamp(&tp(), batch(1)).unwrap();
    let outcome = leader.produce(b);
    old.on_response(&tp(), 0, outcome).unwrap();
    let zombie_batch = old.stamp(&tp(), batch(1)).unwrap();
    // A new instance bumps the epoch (KIP-360): sequences restart at 0.
    let mut new = old.clone();
    let abandoned = new.bump_epoch().unwrap();
    assert_eq!(abandoned, vec![(tp(), zombie_batch.clone())]);
    assert_eq!(new.producer().unwrap().producer_epoch, 1);
    let nb = new.stamp(&tp(), batch(1)).unwrap();
    assert_eq!(seq(&nb), 0);
    assert_eq!(
        leader.produce(nb),
        ProduceOutcome::Appended { base_offset: 1 }
    );
    // The zombie's batch (old epoch) is fenced, and the zombie stops.
    assert_eq!(
        leader.table.check(&zombie_batch.producer.unwrap(), 1),
        SequenceCheck::InvalidProducerEpoch {
            current: 1,
            received: 0
        }
    );
    let outcome = leader.produce(zombie_batch);
    assert_eq!(old.on_response(&tp(), 1, outcome), Ok(Completion::Fenced));
    assert!(matches!(
        old.stamp(&tp(), batch(1)),
        Err(ProducerError::Fenced { .. })
    ));
    // A new epoch must start at sequence 0.
    let info = ProducerInfo {
        producer_id: 9,
        producer_epoch: 2,
        base_sequence: 5,
    };
    assert_eq!(
        leader.table.check(&info, 1),
        SequenceCheck::OutOfOrderSequence {
            expected: 0,
            received: 5
        }
    );
    // An unknown producer must start at 0 too.
    let info = ProducerInfo {
        producer_id: 10,
        producer_epoch: 0,
        base_sequence: 3,
    };
    assert_eq!(
        leader.table.check(&info, 1),
        SequenceCheck::UnknownProducerId { received: 3 }
    );
}

#[test]
fn only_the_last_five_batches_are_recognised_as_duplicates() {
    let mut leader = Leader::default();
    let mut p = producer(3);
    let mut sent = Vec::new();
    for _ in 0..7 {
        let b = p.stamp(&tp(), batch(1)).unwrap();
        let ProduceOutcome::Appended { base_offset } = leader.produce(b.clone()) else {
            panic!()
        };
        p.on_response(&tp(), seq(&b), ProduceOutcome::Appended { base_offset })
            .unwrap();
        sent.push(b);
    }
    assert_eq!(
        leader.table.entry(3).unwrap().batches.len(),
        MAX_CACHED_BATCHES
    );
    for (i, b) in sent.iter().enumerate() {
        let got = leader.table.check(&b.producer.unwrap(), 1);
        if i >= 2 {
            assert_eq!(
                got,
                SequenceCheck::Duplicate {
                    base_offset: i as u64,
                    last_offset: i as u64
                }
            );
        } else {
            assert!(matches!(got, SequenceCheck::OutOfOrderSequence { .. }));
        }
    }
}

#[test]
fn rebuild_from_log_matches_live_table_and_follows_truncation() {
    let mut leader = Leader::default();
    let mut producers = [producer(1), producer(2)];
    for round in 0..8 {
        let p = &mut producers[round % 2];
        let b = p.stamp(&tp(), batch(1 + round as u32 % 3)).unwrap();
        let ProduceOutcome::Appended { base_offset } = leader.produce(b.clone()) else {
            panic!()
        };
        p.on_response(&tp(), seq(&b), ProduceOutcome::Appended { base_offset })
            .unwrap();
    }
    let plain = batch(2).at(leader.end());
    leader.log.push(plain);
    assert_eq!(ProducerStateTable::rebuild(&leader.log), leader.table);
    // A new leader whose log lacks the last two batches: retries of those are appended
    // again (they are not in its log), the one before is a duplicate.
    let truncated = &leader.log[..leader.log.len() - 3];
    let table = ProducerStateTable::rebuild(truncated);
    let last_kept = truncated.last().unwrap();
    let info = last_kept.producer.unwrap();
    assert_eq!(
        table.check(&info, last_kept.record_count()),
        SequenceCheck::Duplicate {
            base_offset: last_kept.base_offset,
            last_offset: last_kept.last_offset()
        }
    );
    let dropped = &leader.log[leader.log.len() - 3];
    assert_eq!(
        table.check(&dropped.producer.unwrap(), dropped.record_count()),
        SequenceCheck::Append
    );
}

#[test]
fn client_limits_and_errors() {
    let mut p = IdempotentProducer::new();
    assert_eq!(p.stamp(&tp(), batch(1)), Err(ProducerError::NoProducerId));
    p.init(ProducerIdAndEpoch {
        producer_id: 1,
        producer_epoch: u16::MAX,
    });
    assert!(matches!(
        p.stamp(&tp(), batch(0)),
        Err(ProducerError::EmptyBatch { .. })
    ));
    for _ in 0..MAX_IN_FLIGHT {
        p.stamp(&tp(), batch(1)).unwrap();
    }
    assert!(matches!(
        p.stamp(&tp(), batch(1)),
        Err(ProducerError::TooManyInFlight { .. })
    ));
    // Other partitions have their own sequences.
    let other = TopicPartition::new("t", 1);
    assert_eq!(seq(&p.stamp(&other, batch(1)).unwrap()), 0);
    assert_eq!(p.next_sequence(&tp()), MAX_IN_FLIGHT as u32);
    assert!(matches!(
        p.on_response(&tp(), 0, ProduceOutcome::Retriable),
        Ok(Completion::Retry(_))
    ));
    assert_eq!(p.in_flight(&tp()).next().unwrap().attempts, 2);
    assert_eq!(
        p.bump_epoch(),
        Err(ProducerError::EpochExhausted { producer_id: 1 })
    );
}

#[test]
fn rebuild_from_a_partition_log() {
    use crate::log::{LogConfig, PartitionLog};
    use crate::testing::MemStorage;
    let (mut log, _) = PartitionLog::open(MemStorage::new(), "t-0", LogConfig::default()).unwrap();
    let mut table = ProducerStateTable::new();
    let mut producers = [producer(1), producer(2), producer(3)];
    for i in 0..20usize {
        let p = &mut producers[i % 3];
        let b = p.stamp(&tp(), batch(1 + (i % 4) as u32)).unwrap();
        let info = b.producer.unwrap();
        assert_eq!(table.check(&info, b.record_count()), SequenceCheck::Append);
        let appended = log.append_as_leader(b, 0, 0).unwrap();
        let count = (appended.last_offset + 1 - appended.base_offset) as u32;
        table.record_append(&info, count, appended.base_offset, false);
        p.on_response(
            &tp(),
            info.base_sequence,
            ProduceOutcome::Appended {
                base_offset: appended.base_offset,
            },
        )
        .unwrap();
        // Plain batches in between are ignored.
        log.append_as_leader(batch(1), 0, 0).unwrap();
    }
    // A small chunk size forces many reads.
    assert_eq!(
        ProducerStateTable::rebuild_from_log(&mut log, 64).unwrap(),
        table
    );
    assert_eq!(table.len(), 3);
}

/// A shared stamp is the batch `stamp` returns, the very one kept for retries (not a
/// copy), and a retry or an epoch bump hands out its contents as before.
#[test]
fn a_shared_stamp_is_the_kept_batch() {
    let (mut a, mut b) = (producer(7), producer(7));
    let plain = a.stamp(&tp(), batch(2)).unwrap();
    let shared = b.stamp_shared(&tp(), batch(2)).unwrap();
    assert_eq!(*shared, plain);
    let kept = b.in_flight(&tp()).next().unwrap();
    assert!(std::sync::Arc::ptr_eq(&kept.batch, &shared));
    assert_eq!(b.retry(&tp(), 0).unwrap(), plain);
    let abandoned = b.bump_epoch().unwrap();
    assert_eq!(abandoned, vec![(tp(), plain)]);
}
