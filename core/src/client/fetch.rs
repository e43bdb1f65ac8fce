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
//!
//! A read_committed cursor ([`FetchCursor::with_isolation`]) asks for records below the
//! last stable offset only, and drops the records of the aborted transactions the answer
//! lists ([`AbortedTxn::covers`]) while moving past them, as Kafka's consumer does.

use crate::log::{Record, RecordBatch};
use crate::message::{ConsumerFetchError, ConsumerFetchRequest, ConsumerRecords};
use crate::txn::{AbortedTxn, IsolationLevel};
use crate::types::{LeaderEpoch, Offset, TopicPartition};
use std::collections::BTreeMap;
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
/// the broker's `ConsumerRecords::next_offset` (or `position` if unknown). Records of the
/// `aborted` transactions (a read_committed answer's list; empty otherwise) are passed
/// over, not taken.
pub fn take_records<'a>(
    position: Offset,
    batches: &'a [RecordBatch],
    high_watermark: Offset,
    next_offset: Offset,
    aborted: &[AbortedTxn],
) -> Taken<'a> {
    // Sized for every record of the batches up front (most are taken): grown push by
    // push it reallocated several times per fetch.
    let mut records = Vec::with_capacity(batches.iter().map(|b| b.records.len()).sum());
    let next_offset = scan(
        position,
        batches,
        high_watermark,
        next_offset,
        aborted,
        |o, _, b, r| records.push((o, b, r)),
    );
    Taken {
        records,
        next_offset,
    }
}

/// The one walk behind [`take_records`] and the cursor's takes: calls `each` with the
/// offset, the batch index, the batch and the record of every record taken, in offset order,
/// and returns where the next fetch starts.
fn scan<'a>(
    position: Offset,
    batches: &'a [RecordBatch],
    high_watermark: Offset,
    next_offset: Offset,
    aborted: &[AbortedTxn],
    mut each: impl FnMut(Offset, (usize, usize), &'a RecordBatch, &'a Record),
) -> Offset {
    let mut next = position;
    for (bi, b) in batches.iter().enumerate() {
        // A batch of an aborted transaction: its records are moved past, not taken.
        let aborted_by = match (b.is_transactional(), &b.producer) {
            (true, Some(p)) if !aborted.is_empty() => Some(p.producer_id),
            _ => None,
        };
        for (ri, (o, r)) in b.data_records().enumerate() {
            if o < next || o >= high_watermark {
                continue;
            }
            let dropped = aborted_by.is_some_and(|pid| aborted.iter().any(|a| a.covers(pid, o)));
            if !dropped {
                each(o, (bi, ri), b, r);
            }
            next = o + 1;
        }
    }
    // Every record returned was taken, so skipping what the broker read past them
    // (leader-epoch markers) loses nothing.
    next.max(next_offset.min(high_watermark))
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

/// Most epoch starts a cursor remembers; older ones are forgotten, which only makes it
/// move back further (and read again) if the leader names an epoch that old.
const MAX_EPOCHS: usize = 64;

/// A reader's place in one partition: the position its next fetch starts at, the epoch of
/// the last batch it moved past (markers included), which every fetch carries, and where
/// each epoch it read began (its own small epoch cache, like a follower's log has).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchCursor {
    position: Offset,
    last_fetched_epoch: Option<LeaderEpoch>,
    /// Epoch -> an offset at or below the first one the reader read in it (the offset after
    /// the last record of the epoch before, as far as the reader saw): where, in the
    /// reader's view, the previous epoch ended.
    epoch_starts: BTreeMap<LeaderEpoch, Offset>,
    /// The bug zoo's `consumer-ignores-truncation`: a diverging answer is dropped.
    ignore_truncation: bool,
    /// read_committed: fetch below the LSO, drop aborted transactions' records.
    isolation: IsolationLevel,
}

impl FetchCursor {
    /// A cursor at `position` with no epoch known (the first fetch is not checked).
    pub fn new(position: Offset) -> Self {
        Self {
            position,
            last_fetched_epoch: None,
            epoch_starts: BTreeMap::new(),
            ignore_truncation: false,
            isolation: IsolationLevel::ReadUncommitted,
        }
    }

    /// This cursor reading at `isolation` (read_uncommitted unless told).
    pub fn with_isolation(mut self, isolation: IsolationLevel) -> Self {
        self.isolation = isolation;
        self
    }

    pub fn isolation(&self) -> IsolationLevel {
        self.isolation
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
            isolation: self.isolation,
        }
    }

    /// The reader moves into `epoch` no later than `from`.
    fn enter_epoch(&mut self, epoch: LeaderEpoch, from: Offset) {
        if self.last_fetched_epoch != Some(epoch) {
            self.last_fetched_epoch = Some(epoch);
            self.epoch_starts.insert(epoch, from);
            while self.epoch_starts.len() > MAX_EPOCHS {
                self.epoch_starts.pop_first();
            }
        }
    }

    /// Takes the unread records of a fetch answer and moves past them (and past the
    /// markers the broker read), remembering the epoch of each batch moved past.
    pub fn take<'a>(&mut self, recs: &'a ConsumerRecords) -> Taken<'a> {
        let mut records = Vec::with_capacity(recs.batches.iter().map(|b| b.records.len()).sum());
        let next_offset = self.advance(recs, |o, _, b, r| records.push((o, b, r)));
        Taken {
            records,
            next_offset,
        }
    }

    /// [`take`](Self::take), giving where each record taken lies instead: `(offset, (batch
    /// index, record index))` in `recs.batches`, into `out` (cleared first), for a host
    /// that moves the records out of the answer rather than copying them. Returns where the
    /// next fetch starts.
    pub fn take_indexes(
        &mut self,
        recs: &ConsumerRecords,
        out: &mut Vec<(Offset, (usize, usize))>,
    ) -> Offset {
        out.clear();
        self.advance(recs, |o, at, _, _| out.push((o, at)))
    }

    /// Moves past the unread records of `recs` (handed to `each`) and the markers the
    /// broker read, remembering the epoch of each batch moved past.
    fn advance<'a>(
        &mut self,
        recs: &'a ConsumerRecords,
        mut each: impl FnMut(Offset, (usize, usize), &'a RecordBatch, &'a Record),
    ) -> Offset {
        let start = self.position;
        // Where the reader's view of the current epoch ends so far.
        let mut seen_end = start;
        let next_offset = scan(
            start,
            &recs.batches,
            recs.high_watermark,
            recs.next_offset,
            &recs.aborted,
            |o, at, b, r| {
                self.enter_epoch(b.partition_leader_epoch, seen_end);
                seen_end = o + 1;
                each(o, at, b, r);
            },
        );
        if let Some(e) = recs.last_epoch {
            // The broker read up to next_offset: its last batch (a marker, perhaps).
            if next_offset == recs.next_offset && next_offset > start {
                self.enter_epoch(e, seen_end);
            }
        }
        self.position = start.max(next_offset);
        next_offset
    }

    /// Where the reader's view of `epoch` ends: the start of the first later epoch it read
    /// (its position if none). `None` (the leader knows no epoch that old): nothing is
    /// known to match.
    fn end_of(&self, epoch: Option<LeaderEpoch>) -> Offset {
        let later = match epoch {
            Some(e) => self.epoch_starts.range(e + 1..).next(),
            None => self.epoch_starts.iter().next(),
        };
        later
            .map_or(self.position, |(_, start)| *start)
            .min(self.position)
    }

    /// A failed fetch. On a diverging answer the reader's log and the leader's agree up to
    /// the smaller of the leader's end of `epoch` and the reader's own (as a follower
    /// truncates, KIP-279): below the position, that is a truncation, which the cursor
    /// follows (position to the divergence point) and returns for the host to report. Below
    /// the log start (retention deleted the records) it moves to the log start. Every other
    /// error leaves it where it is (the host retries, refreshing the leader).
    pub fn on_error(&mut self, e: &ConsumerFetchError) -> Option<Truncation> {
        match *e {
            ConsumerFetchError::DivergingEpoch { .. } if self.ignore_truncation => {
                self.last_fetched_epoch = None;
                None
            }
            ConsumerFetchError::DivergingEpoch { epoch, end_offset } => {
                let to = end_offset.min(self.end_of(epoch));
                // The reader's epochs past the leader's are gone. The next fetch names the
                // reader's own latest epoch left (KIP-279's next round, as a follower asks
                // again with its own older epoch), or the leader's if it remembers none.
                match epoch {
                    Some(e) => drop(self.epoch_starts.split_off(&(e + 1))),
                    None => self.epoch_starts.clear(),
                }
                self.last_fetched_epoch = match self.epoch_starts.last_key_value() {
                    Some((e, _)) => Some(*e),
                    None => epoch,
                };
                if to >= self.position {
                    return None;
                }
                let t = Truncation {
                    from: self.position,
                    to,
                    epoch,
                };
                self.position = to;
                Some(t)
            }
            ConsumerFetchError::OffsetOutOfRange {
                offset,
                log_start_offset,
                ..
            } if offset == self.position && offset < log_start_offset => {
                self.position = log_start_offset;
                self.last_fetched_epoch = None;
                self.epoch_starts.clear();
                None
            }
            _ => None,
        }
    }
}
