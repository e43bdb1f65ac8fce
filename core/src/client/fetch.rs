//! The fetch cursor: what one fetch answer hands a reader at `position`, and where its next
//! fetch starts.
//!
//! A broker returns whole batches, so the first may start before the position; it may
//! include leader-epoch markers (control batches), which are no application data; and
//! nothing at or above the high watermark is readable even if a broker sent it. The next
//! position is past the last record taken and past everything the broker read
//! (`ConsumerRecords::next_offset`, never beyond the HW), so a marker at the end of the
//! committed log never holds a reader back.
//!
//! [`FetchCursor`] keeps a reader's place in one partition between fetches: its position
//! and the epoch of the last batch it moved past, which each fetch carries so the leader can
//! tell whether its log still holds what the reader read (KIP-320 for consumers). After an
//! unclean election truncated the log below the reader's position, the leader answers
//! `DivergingEpoch`; the cursor then resets to the divergence point and reports the
//! truncation (Kafka's default on log truncation: reset and tell), instead of waiting until
//! the log grows past its old position and silently skipping every record written at the
//! truncated offsets.

use crate::log::{Record, RecordBatch};
use crate::message::{ConsumerFetchError, ConsumerFetchRequest, ConsumerRecords};
use crate::types::{LeaderEpoch, Offset, TopicPartition};
use std::fmt;

/// Records taken from one fetch answer.
#[derive(Debug)]
pub struct Taken<'a> {
    /// (offset, batch, record) in offset order, every one at or above the position and
    /// below the HW, control records excluded.
    pub records: Vec<(Offset, &'a RecordBatch, &'a Record)>,
    /// Where the next fetch starts.
    pub next_offset: Offset,
}

/// Takes the records of `batches` a reader at `position` has not read yet. `next_offset` is
/// the broker's `ConsumerRecords::next_offset` (or `position` if unknown).
pub fn take_records(
    position: Offset,
    batches: &[RecordBatch],
    high_watermark: Offset,
    next_offset: Offset,
) -> Taken<'_> {
    let mut records = Vec::new();
    let mut next = position;
    for b in batches {
        for (o, r) in b.data_records() {
            if o < next || o >= high_watermark {
                continue;
            }
            records.push((o, b, r));
            next = o + 1;
        }
    }
    // Every record returned was taken, so skipping what the broker read past them
    // (leader-epoch markers) loses nothing.
    let next_offset = next.max(next_offset.min(high_watermark));
    Taken {
        records,
        next_offset,
    }
}

/// A truncation the cursor detected: the log under the reader was cut below its position,
/// so the records it read in `[to, from)` are gone (others may be written there now, and
/// the reader reads them next).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truncation {
    /// The reader's position before.
    pub from: Offset,
    /// Where it reads next: the end of its last epoch on the leader.
    pub to: Offset,
    /// That epoch, as the leader named it (None: the leader knows no epoch that old).
    pub epoch: Option<LeaderEpoch>,
}

impl fmt::Display for Truncation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "truncation detected: position {} -> {}, epoch ",
            self.from, self.to
        )?;
        match self.epoch {
            Some(e) => write!(f, "{e}"),
            None => write!(f, "none"),
        }
    }
}

/// A reader's place in one partition: the position its next fetch starts at and the epoch
/// of the last batch it moved past (markers included), which every fetch carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchCursor {
    position: Offset,
    last_fetched_epoch: Option<LeaderEpoch>,
    /// The bug zoo's `consumer-ignores-truncation`: a diverging answer is dropped.
    ignore_truncation: bool,
}

impl FetchCursor {
    /// A cursor at `position` with no epoch known (the first fetch is not checked).
    pub fn new(position: Offset) -> Self {
        Self {
            position,
            last_fetched_epoch: None,
            ignore_truncation: false,
        }
    }

    /// The bug zoo's `consumer-ignores-truncation` (pre-KIP-320 readers): a diverging
    /// answer is ignored, the epoch forgotten and the same position fetched again
    /// unchecked, so the reader waits for the log to grow past it and skips what was written
    /// at the truncated offsets.
    pub fn ignoring_truncation(mut self, ignore: bool) -> Self {
        self.ignore_truncation = ignore;
        self
    }

    /// Where the next fetch starts.
    pub fn position(&self) -> Offset {
        self.position
    }

    /// The epoch of the last batch read, the next fetch's `last_fetched_epoch`.
    pub fn last_fetched_epoch(&self) -> Option<LeaderEpoch> {
        self.last_fetched_epoch
    }

    /// The fetch for the current position.
    pub fn request(
        &self,
        correlation: u64,
        tp: TopicPartition,
        max_bytes: usize,
    ) -> ConsumerFetchRequest {
        ConsumerFetchRequest {
            correlation,
            tp,
            offset: self.position,
            max_bytes,
            current_leader_epoch: None,
            last_fetched_epoch: self.last_fetched_epoch,
        }
    }

    /// Takes the unread records of a fetch answer and moves past them (and past the
    /// markers the broker read), remembering the epoch of the last batch moved past.
    pub fn take<'a>(&mut self, recs: &'a ConsumerRecords) -> Taken<'a> {
        let taken = take_records(
            self.position,
            &recs.batches,
            recs.high_watermark,
            recs.next_offset,
        );
        if taken.next_offset > self.position {
            let last_record = taken.records.last();
            self.last_fetched_epoch = match (recs.last_epoch, last_record) {
                // The broker read up to next_offset: its last batch (a marker, perhaps).
                (Some(e), _) if taken.next_offset == recs.next_offset => Some(e),
                (_, Some((o, b, _))) if o + 1 == taken.next_offset => {
                    Some(b.partition_leader_epoch)
                }
                _ => self.last_fetched_epoch,
            };
            self.position = taken.next_offset;
        }
        taken
    }

    /// A failed fetch: a diverging answer below the position is a truncation, which the
    /// cursor follows (position to the divergence point) and returns for the host to report.
    /// Below the log start (retention deleted the records) it moves to the log start. Every
    /// other error leaves it where it is (the host retries, refreshing the leader).
    pub fn on_error(&mut self, e: &ConsumerFetchError) -> Option<Truncation> {
        match *e {
            ConsumerFetchError::DivergingEpoch { .. } if self.ignore_truncation => {
                self.last_fetched_epoch = None;
                None
            }
            ConsumerFetchError::DivergingEpoch { epoch, end_offset }
                if end_offset < self.position =>
            {
                let t = Truncation {
                    from: self.position,
                    to: end_offset,
                    epoch,
                };
                self.position = end_offset;
                self.last_fetched_epoch = epoch;
                Some(t)
            }
            // The reader's last epoch is unknown to the leader but its log still reaches the
            // position: nothing below it was cut. Check against the leader's epoch from now.
            ConsumerFetchError::DivergingEpoch { epoch, .. } => {
                self.last_fetched_epoch = epoch;
                None
            }
            ConsumerFetchError::OffsetOutOfRange {
                offset,
                log_start_offset,
                ..
            } if offset == self.position && offset < log_start_offset => {
                self.position = log_start_offset;
                self.last_fetched_epoch = None;
                None
            }
            _ => None,
        }
    }
}
