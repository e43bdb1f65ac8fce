//! Property test: one idempotent producer against one partition leader over a network that
//! loses, duplicates (by retry) and reorders requests and responses, with leader failovers
//! that truncate the uncommitted suffix and rebuild the producer state from the log.
//! Checked: no batch is written twice, sequences in the log are gap-free, every
//! acknowledged batch is committed at the acknowledged offset, and in the end every batch
//! is in the log exactly once.

use super::*;
use crate::controller::ProducerIdAndEpoch;
use crate::log::RecordBatch;
use crate::types::{Offset, TopicPartition};
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
enum Op {
    Send { records: u8 },
    DeliverRequest(u8),
    LoseRequest(u8),
    Commit,
    DeliverResponse(u8),
    LoseResponse(u8),
    RetryOldest,
    Failover { truncate: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1u8..4).prop_map(|records| Op::Send { records }),
        4 => any::<u8>().prop_map(Op::DeliverRequest),
        1 => any::<u8>().prop_map(Op::LoseRequest),
        2 => Just(Op::Commit),
        3 => any::<u8>().prop_map(Op::DeliverResponse),
        1 => any::<u8>().prop_map(Op::LoseResponse),
        2 => Just(Op::RetryOldest),
        1 => (0u8..4).prop_map(|truncate| Op::Failover { truncate }),
    ]
}

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

/// Payload id of a batch (every record carries it).
fn payload(b: &RecordBatch) -> u64 {
    u64::from_le_bytes(
        b.records[0].value.as_ref().unwrap()[..8]
            .try_into()
            .unwrap(),
    )
}

#[derive(Default)]
struct Model {
    producer: IdempotentProducer,
    log: Vec<RecordBatch>,
    /// Batches below this index are committed (can never be truncated).
    committed: usize,
    table: ProducerStateTable,
    requests: Vec<RecordBatch>,
    /// Answers waiting for their batch to commit: (base sequence, base offset).
    pending: Vec<(u32, Offset)>,
    responses: Vec<(u32, ProduceOutcome)>,
    next_payload: u64,
    acked: BTreeMap<u64, Offset>,
}

impl Model {
    fn new() -> Self {
        let mut m = Self::default();
        m.producer.init(ProducerIdAndEpoch {
            producer_id: 42,
            producer_epoch: 0,
        });
        m
    }

    fn end(&self) -> Offset {
        self.log.last().map_or(0, |b| b.next_offset())
    }

    fn committed_end(&self) -> Offset {
        self.log[..self.committed]
            .last()
            .map_or(0, |b| b.next_offset())
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::Send { records } => {
                let id = self.next_payload;
                let batch =
                    RecordBatch::from_values(0, (0..records).map(|_| id.to_le_bytes().to_vec()));
                match self.producer.stamp(&tp(), batch) {
                    Ok(b) => {
                        self.next_payload += 1;
                        self.requests.push(b);
                    }
                    Err(ProducerError::TooManyInFlight { .. }) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            Op::DeliverRequest(i) if !self.requests.is_empty() => {
                let mut b = self.requests.remove(i as usize % self.requests.len());
                let info = b.producer.unwrap();
                let outcome = match self.table.check(&info, b.record_count()) {
                    SequenceCheck::Append => {
                        b.base_offset = self.end();
                        self.table
                            .record_append(&info, b.record_count(), b.base_offset, false);
                        self.pending.push((info.base_sequence, b.base_offset));
                        self.log.push(b);
                        None
                    }
                    SequenceCheck::Duplicate { base_offset, .. } => {
                        if base_offset < self.committed_end() {
                            Some(ProduceOutcome::Duplicate { base_offset })
                        } else {
                            self.pending.push((info.base_sequence, base_offset));
                            None
                        }
                    }
                    SequenceCheck::OutOfOrderSequence { .. } => {
                        Some(ProduceOutcome::OutOfOrderSequence)
                    }
                    SequenceCheck::InvalidProducerEpoch { .. } => {
                        Some(ProduceOutcome::InvalidProducerEpoch)
                    }
                    SequenceCheck::UnknownProducerId { .. } => {
                        Some(ProduceOutcome::UnknownProducerId)
                    }
                };
                if let Some(o) = outcome {
                    self.responses.push((info.base_sequence, o));
                }
            }
            Op::LoseRequest(i) if !self.requests.is_empty() => {
                self.requests.remove(i as usize % self.requests.len());
            }
            Op::Commit => {
                self.committed = self.log.len();
                for (seq, base_offset) in std::mem::take(&mut self.pending) {
                    let first_copy = self.log.iter().any(|b| {
                        b.base_offset == base_offset && b.producer.unwrap().base_sequence == seq
                    });
                    assert!(first_copy);
                    self.responses
                        .push((seq, ProduceOutcome::Appended { base_offset }));
                }
            }
            Op::DeliverResponse(i) if !self.responses.is_empty() => {
                let (seq, outcome) = self.responses.remove(i as usize % self.responses.len());
                match self.producer.on_response(&tp(), seq, outcome) {
                    Ok(Completion::Acked { base_offset, .. }) => {
                        let b = self
                            .log
                            .iter()
                            .find(|b| b.base_offset == base_offset)
                            .expect("acknowledged offset is in the log");
                        assert!(
                            base_offset < self.committed_end(),
                            "acknowledged before commit"
                        );
                        assert_eq!(b.producer.unwrap().base_sequence, seq);
                        assert!(self.acked.insert(payload(b), base_offset).is_none());
                    }
                    Ok(Completion::Retry(b)) => self.requests.push(b),
                    Ok(other) => panic!("no state was lost, yet {other:?}"),
                    // A second answer for a batch already acknowledged.
                    Err(ProducerError::UnknownBatch { .. }) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            Op::LoseResponse(i) if !self.responses.is_empty() => {
                self.responses.remove(i as usize % self.responses.len());
            }
            Op::RetryOldest => {
                let oldest = self
                    .producer
                    .in_flight(&tp())
                    .next()
                    .map(|b| b.base_sequence());
                if let Some(seq) = oldest {
                    let b = self.producer.retry(&tp(), seq).unwrap();
                    self.requests.push(b);
                }
            }
            Op::Failover { truncate } => {
                // The new leader lacks some uncommitted batches; their pending answers die
                // with the old leader.
                let keep =
                    self.log.len() - (truncate as usize).min(self.log.len() - self.committed);
                self.log.truncate(keep);
                let end = self.end();
                self.pending.retain(|&(_, off)| off < end);
                self.table = ProducerStateTable::rebuild(&self.log);
            }
            _ => {}
        }
        self.check();
    }

    fn check(&self) {
        let mut payloads = std::collections::BTreeSet::new();
        let mut expected_seq = 0u32;
        for b in &self.log {
            assert!(
                payloads.insert(payload(b)),
                "batch {} written twice",
                payload(b)
            );
            let info = b.producer.unwrap();
            assert_eq!(info.base_sequence, expected_seq, "sequence gap in the log");
            expected_seq = info.base_sequence + b.record_count();
        }
        for (p, &off) in &self.acked {
            let b = self
                .log
                .iter()
                .find(|b| b.base_offset == off)
                .expect("acked batch kept");
            assert_eq!(payload(b), *p);
        }
    }

    /// Heal the network and let the producer finish.
    fn drain(&mut self) {
        for _ in 0..200 {
            if self.producer.in_flight(&tp()).next().is_none() {
                break;
            }
            self.step(&Op::RetryOldest);
            while !self.requests.is_empty() {
                self.step(&Op::DeliverRequest(0));
            }
            self.step(&Op::Commit);
            while !self.responses.is_empty() {
                self.step(&Op::DeliverResponse(0));
            }
        }
        assert_eq!(
            self.producer.in_flight(&tp()).count(),
            0,
            "producer finished"
        );
        assert_eq!(
            self.acked.len() as u64,
            self.next_payload,
            "every batch acknowledged"
        );
        assert_eq!(
            self.log.len() as u64,
            self.next_payload,
            "every batch written once"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn idempotent_producer_writes_each_batch_exactly_once(ops in prop::collection::vec(op(), 1..80)) {
        let mut m = Model::new();
        for op in &ops {
            m.step(op);
        }
        m.drain();
    }
}
