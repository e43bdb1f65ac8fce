//! The produce outcome and retry policy (see the module docs of [`crate::client`]): one
//! classification of errors, one answer to a lost sequence, for every producer.

use crate::controller::ProducerIdAndEpoch;
use crate::log::{EncodeError, EncodedBatch, RecordBatch};
use crate::message::{Acks, ProduceAck, ProduceError, ProduceRequest};
use crate::producer::{Completion, IdempotentProducer, ProduceOutcome, ProducerError};
use crate::types::{Nanos, Offset, TopicPartition};
use std::sync::Arc;

/// Whether sending the same batch again may succeed. A storage error is retriable: the
/// leader's disk refused the append (nothing was written), and leadership moves off a
/// broker whose log went offline.
pub fn retriable(e: &ProduceError) -> bool {
    matches!(
        e,
        ProduceError::NotLeader { .. }
            | ProduceError::UnknownTopicOrPartition
            | ProduceError::NotEnoughReplicas { .. }
            | ProduceError::NotEnoughReplicasAfterAppend { .. }
            | ProduceError::RequestTimedOut
            | ProduceError::Storage(_)
    )
}

/// Whether the error says the leader may be elsewhere (refresh metadata before resending).
pub fn refreshes_metadata(e: &ProduceError) -> bool {
    matches!(
        e,
        ProduceError::NotLeader { .. }
            | ProduceError::UnknownTopicOrPartition
            | ProduceError::Storage(_)
    )
}

/// What the producer does next with a batch after an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProduceStep {
    /// Acknowledged at `base_offset` (`duplicate`: a retry the leader already had).
    Acked {
        base_offset: Offset,
        duplicate: bool,
    },
    /// Send this batch again after a backoff (first refreshing the leader if
    /// `refresh_metadata`).
    Resend {
        batch: RecordBatch,
        refresh_metadata: bool,
    },
    /// A sequence error: ask the controller whether the answering broker leads the
    /// partition, then call [`ProduceClient::on_leader_checked`] with the same answer.
    CheckLeader,
    /// The producer moved to a new epoch: every batch that was in flight, on every
    /// partition, re-stamped; send each again (replacing the old one) at least once.
    EpochBumped {
        resend: Vec<(TopicPartition, RecordBatch)>,
    },
    /// Not written and never will be: give up on the batch.
    Failed(ProduceError),
    /// A newer epoch of this producer exists: it may not write any more.
    Fenced(ProduceError),
}

/// The producer's half of the protocol: stamps batches (when idempotent) and turns every
/// answer into the next [`ProduceStep`].
#[derive(Clone, Debug, Default)]
pub struct ProduceClient {
    idem: Option<IdempotentProducer>,
}

impl ProduceClient {
    /// A plain producer (at-least-once on retries).
    pub fn plain() -> Self {
        Self::default()
    }

    /// An idempotent producer waiting for its id (`init`).
    pub fn idempotent() -> Self {
        Self {
            idem: Some(IdempotentProducer::new()),
        }
    }

    pub fn is_idempotent(&self) -> bool {
        self.idem.is_some()
    }

    /// Adopts an id from InitProducerId.
    pub fn init(&mut self, id: ProducerIdAndEpoch) {
        self.idem
            .get_or_insert_with(IdempotentProducer::new)
            .init(id);
    }

    /// Whether batches can be stamped (a plain producer always can).
    pub fn ready(&self) -> bool {
        self.idem
            .as_ref()
            .is_none_or(|p| p.producer().is_some() && !p.is_fenced())
    }

    pub fn producer(&self) -> Option<ProducerIdAndEpoch> {
        self.idem.as_ref().and_then(IdempotentProducer::producer)
    }

    /// Takes over another instance's producer identity, as a restarted instance with the
    /// same identity does (KIP-360): adopt `id` and move to its next epoch, which fences the
    /// old instance at every partition this one writes to. The new instance has nothing in
    /// flight, so nothing is abandoned.
    pub fn take_over(&mut self, id: ProducerIdAndEpoch) -> Result<(), ProducerError> {
        let p = self.idem.get_or_insert_with(IdempotentProducer::new);
        p.init(id);
        p.bump_epoch().map(|_| ())
    }

    /// A new batch for `tp`, stamped when idempotent; the batch to send.
    pub fn prepare(
        &mut self,
        tp: &TopicPartition,
        batch: RecordBatch,
    ) -> Result<RecordBatch, ProducerError> {
        match self.idem.as_mut() {
            Some(p) => p.stamp(tp, batch),
            None => Ok(batch),
        }
    }

    /// [`Self::prepare`], the batch shared with the copy an idempotent producer keeps for
    /// retries (a host that keeps the batch it sends need not copy it).
    pub fn prepare_shared(
        &mut self,
        tp: &TopicPartition,
        batch: RecordBatch,
    ) -> Result<Arc<RecordBatch>, ProducerError> {
        match self.idem.as_mut() {
            Some(p) => p.stamp_shared(tp, batch),
            None => Ok(Arc::new(batch)),
        }
    }

    /// `batch` goes again without an answer (a timeout, a lost connection): the same
    /// sequence, counted as another send.
    pub fn resend(
        &mut self,
        tp: &TopicPartition,
        batch: &RecordBatch,
    ) -> Result<RecordBatch, ProducerError> {
        match (self.idem.as_mut(), batch.producer) {
            (Some(p), Some(info)) => p.retry(tp, info.base_sequence),
            _ => Ok(batch.clone()),
        }
    }

    /// The request that sends `batch` (as [`Self::prepare`] or a resend stamped it) to
    /// `tp`'s leader, encoded once here: the leader's log writes these bytes as they are,
    /// so every producer (simulated or real) builds its request this one way.
    pub fn request(
        correlation: u64,
        tp: TopicPartition,
        acks: Acks,
        timeout: Nanos,
        batch: &RecordBatch,
    ) -> Result<ProduceRequest, EncodeError> {
        Ok(ProduceRequest {
            correlation,
            tp,
            acks,
            timeout,
            batch: EncodedBatch::encode(batch)?,
            transactional_id: None,
        })
    }

    /// An acks=0 batch was handed to the network: its outcome will never be known, so it
    /// leaves the idempotent window as if acknowledged.
    pub fn forget(&mut self, tp: &TopicPartition, batch: &RecordBatch) {
        if let (Some(p), Some(info)) = (self.idem.as_mut(), batch.producer) {
            let acked = ProduceOutcome::Appended { base_offset: 0 };
            let _ = p.on_response(tp, info.base_sequence, acked);
        }
    }

    /// The leader's answer to `batch`. Sequence errors of an idempotent producer first need
    /// the controller's word ([`ProduceStep::CheckLeader`]).
    pub fn on_answer(
        &mut self,
        tp: &TopicPartition,
        batch: &RecordBatch,
        result: &Result<ProduceAck, ProduceError>,
    ) -> Result<ProduceStep, ProducerError> {
        let sequence_error = matches!(
            result,
            Err(ProduceError::OutOfOrderSequence(_) | ProduceError::UnknownProducerId(_))
        );
        if sequence_error && self.idem.is_some() {
            return Ok(ProduceStep::CheckLeader);
        }
        self.decide(tp, batch, result, true)
    }

    /// After [`ProduceStep::CheckLeader`]: `answered_by_leader` says whether the controller
    /// names the broker that answered as `tp`'s leader.
    pub fn on_leader_checked(
        &mut self,
        tp: &TopicPartition,
        batch: &RecordBatch,
        result: &Result<ProduceAck, ProduceError>,
        answered_by_leader: bool,
    ) -> Result<ProduceStep, ProducerError> {
        self.decide(tp, batch, result, answered_by_leader)
    }

    fn decide(
        &mut self,
        tp: &TopicPartition,
        batch: &RecordBatch,
        result: &Result<ProduceAck, ProduceError>,
        trusted: bool,
    ) -> Result<ProduceStep, ProducerError> {
        let outcome = match result {
            Ok(ack) if ack.duplicate => ProduceOutcome::Duplicate {
                base_offset: ack.base_offset,
            },
            Ok(ack) => ProduceOutcome::Appended {
                base_offset: ack.base_offset,
            },
            Err(ProduceError::OutOfOrderSequence(_)) => ProduceOutcome::OutOfOrderSequence,
            Err(ProduceError::UnknownProducerId(_)) => ProduceOutcome::UnknownProducerId,
            Err(ProduceError::InvalidProducerEpoch(_)) => ProduceOutcome::InvalidProducerEpoch,
            Err(e) if retriable(e) => ProduceOutcome::Retriable,
            Err(e) => return Ok(ProduceStep::Failed(e.clone())),
        };
        let refresh_metadata = result.as_ref().err().is_some_and(refreshes_metadata);
        let (Some(p), Some(info)) = (self.idem.as_mut(), batch.producer) else {
            // A plain producer: no sequence, no epoch; what is not acked or retriable is final.
            return Ok(match (outcome, result) {
                (
                    ProduceOutcome::Appended { base_offset }
                    | ProduceOutcome::Duplicate { base_offset },
                    _,
                ) => ProduceStep::Acked {
                    base_offset,
                    duplicate: false,
                },
                (ProduceOutcome::Retriable, _) => ProduceStep::Resend {
                    batch: batch.clone(),
                    refresh_metadata,
                },
                (_, Err(e)) => ProduceStep::Failed(e.clone()),
                (_, Ok(_)) => unreachable!("an Ok answer is Appended or Duplicate"),
            });
        };
        let seq = info.base_sequence;
        Ok(match p.on_response(tp, seq, outcome)? {
            Completion::Acked {
                base_offset,
                duplicate,
            } => ProduceStep::Acked {
                base_offset,
                duplicate,
            },
            Completion::Retry(batch) => ProduceStep::Resend {
                batch,
                refresh_metadata,
            },
            // Not (provably) the leader: the same batch, same sequence, again, once the
            // leader is found.
            Completion::NeedsEpochBump if !trusted => ProduceStep::Resend {
                batch: p.retry(tp, seq)?,
                refresh_metadata: true,
            },
            // The leader lost this producer's sequence state: a new epoch, and every batch
            // in flight (whose fate is unknown) goes again, re-stamped, at least once.
            Completion::NeedsEpochBump => {
                let abandoned = p.bump_epoch()?;
                let mut resend = Vec::with_capacity(abandoned.len());
                for (tp, b) in abandoned {
                    let stamped = p.stamp(&tp, b)?;
                    resend.push((tp, stamped));
                }
                ProduceStep::EpochBumped { resend }
            }
            Completion::Fenced => ProduceStep::Fenced(match result {
                Err(e) => e.clone(),
                Ok(_) => ProduceError::InvalidProducerEpoch("fenced".into()),
            }),
        })
    }
}
