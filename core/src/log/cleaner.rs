//! The log cleaner: compaction of one partition log as a sans-I/O state machine that does
//! a bounded amount of work per [`Cleaner::step`] (one batch read, or one batch written,
//! or one segment swapped), so a simulator can crash it between any two steps, and a
//! storage failure can stop it inside one (the swap is crash-safe: see
//! `partition_log/compact.rs`). Its state is memory only: after a crash it starts again.
//!
//! A cleaning (a "pass"), as Kafka's:
//! 1. choose: the log is compacted, its cleanable segments ([`PartitionLog::cleanable_segments`]:
//!    never the active one, none at or past the high watermark / last stable offset, none
//!    younger than `min.compaction.lag.ms`) are dirty enough (`min.cleanable.dirty.ratio`);
//! 2. map: read every batch of those segments, building key -> latest offset (records of
//!    transactional and control batches stay out of it: an aborted record must never hide
//!    a committed one), and note the last batch of each producer id;
//! 3. record the new clean point durably (from here gaps below it are legal);
//! 4. rewrite each segment: a record survives if it is the latest of its key, unless it is
//!    a tombstone first cleaned at least `delete.retention.ms` ago; keyless records,
//!    transactional and control batches, the last batch of each producer (idempotence
//!    needs its sequence) and the first batch of each leader epoch (the epoch cache names
//!    it) are kept whole. Offsets never change; a batch that lost records in its middle
//!    becomes one batch per run of survivors, each dense; then swap the segment.

use super::compaction::CleanState;
use super::partition_log::CleanableSegment;
use super::{LogError, PartitionLog, RecordBatch, Storage, NO_SEQUENCE};
use crate::types::{Offset, TimestampMs};
use std::collections::{BTreeMap, BTreeSet};

/// What the cleaner is told each step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CleanerInput {
    pub now_ms: TimestampMs,
    /// Nothing at or past this offset is cleaned: the high watermark (or the last stable
    /// offset, when lower).
    pub cleanable_below: Offset,
}

/// What a step did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CleanerStep {
    /// Nothing to clean (not compacted, or not dirty enough).
    Idle,
    /// A cleaning is under way: call again.
    Working,
    /// A cleaning finished: every segment it chose was swapped.
    Finished,
    /// A cleaning was given up (segments it read were cut or removed meanwhile); its
    /// uncommitted copies are removed. The next step may start another.
    Abandoned(String),
}

/// Counters for metrics and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanerStats {
    pub passes_started: u64,
    pub passes_finished: u64,
    pub passes_abandoned: u64,
    pub segments_swapped: u64,
    pub records_dropped: u64,
    pub tombstones_dropped: u64,
}

/// One cleaning in progress.
#[derive(Clone, Debug)]
struct Pass {
    /// The log's layout version when it began: a change means segments were cut.
    layout: u64,
    now_ms: TimestampMs,
    delete_retention_ms: i64,
    segments: Vec<CleanableSegment>,
    end: Offset,
    /// Next offset to read.
    next: Offset,
    /// The segment being rewritten (index into `segments`).
    seg: usize,
    /// key -> offset of its latest record in `[start, end)`.
    map: BTreeMap<Vec<u8>, Offset>,
    /// producer id -> base offset of its last data batch in `[start, end)`.
    last_of_producer: BTreeMap<u64, Offset>,
    /// Base offsets of batches kept whole.
    protected: BTreeSet<Offset>,
    /// The cleaner checkpoint before this cleaning: when each record was first cleaned.
    before: CleanState,
}

#[derive(Clone, Debug, Default)]
enum Phase {
    #[default]
    Idle,
    Mapping(Box<Pass>),
    Writing(Box<Pass>),
}

/// The cleaner of one log (a broker runs one per compacted partition it hosts, or moves
/// one between them: it holds no reference to the log between steps).
#[derive(Clone, Debug, Default)]
pub struct Cleaner {
    phase: Phase,
    stats: CleanerStats,
}

impl Cleaner {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn stats(&self) -> &CleanerStats {
        &self.stats
    }

    /// Whether a cleaning is under way.
    pub fn busy(&self) -> bool {
        !matches!(self.phase, Phase::Idle)
    }

    /// One bounded step of work on `log`. A storage error gives the cleaning up (its
    /// uncommitted copies are removed when possible) and is returned.
    pub fn step<S: Storage>(
        &mut self,
        log: &mut PartitionLog<S>,
        input: CleanerInput,
    ) -> Result<CleanerStep, LogError> {
        let r = match std::mem::take(&mut self.phase) {
            Phase::Idle => Ok(self.choose(log, input)),
            Phase::Mapping(pass) => self.map_step(log, pass),
            Phase::Writing(pass) => self.write_step(log, pass),
        };
        match r {
            Ok(CleanerStep::Abandoned(why)) => {
                self.abandon(log);
                Ok(CleanerStep::Abandoned(why))
            }
            Err(e) => {
                self.abandon(log);
                Err(e)
            }
            ok => ok,
        }
    }

    fn abandon<S: Storage>(&mut self, log: &mut PartitionLog<S>) {
        self.phase = Phase::Idle;
        self.stats.passes_abandoned += 1;
        if !log.is_failed() {
            // Best effort: recovery on open removes them too.
            let _ = log.discard_cleaned();
        }
    }

    /// Starts a cleaning if the log is compacted and dirty enough.
    fn choose<S: Storage>(&mut self, log: &PartitionLog<S>, input: CleanerInput) -> CleanerStep {
        let Some(cfg) = log.config().compaction else {
            return CleanerStep::Idle;
        };
        if log.is_failed() {
            return CleanerStep::Idle;
        }
        let segments = log.cleanable_segments(
            input.now_ms,
            input.cleanable_below,
            cfg.min_compaction_lag_ms,
        );
        let Some(ratio) = log.dirty_ratio_permille(&segments) else {
            return CleanerStep::Idle;
        };
        if ratio < cfg.min_cleanable_dirty_ratio_permille {
            return CleanerStep::Idle;
        }
        let (start, end) = (segments[0].base, segments[segments.len() - 1].end);
        // The epoch cache names the first batch of each epoch: those stay whole.
        let protected = log
            .epoch_cache()
            .entries()
            .iter()
            .map(|e| e.start_offset)
            .filter(|o| (start..end).contains(o))
            .collect();
        self.stats.passes_started += 1;
        self.phase = Phase::Mapping(Box::new(Pass {
            layout: log.layout_version(),
            now_ms: input.now_ms,
            delete_retention_ms: cfg.delete_retention_ms,
            segments,
            end,
            next: start,
            seg: 0,
            map: BTreeMap::new(),
            last_of_producer: BTreeMap::new(),
            protected,
            before: log.clean_state().clone(),
        }));
        CleanerStep::Working
    }

    /// Reads one batch into the offset map, or (all read) records the clean point.
    fn map_step<S: Storage>(
        &mut self,
        log: &mut PartitionLog<S>,
        mut pass: Box<Pass>,
    ) -> Result<CleanerStep, LogError> {
        if pass.layout != log.layout_version() {
            return Ok(CleanerStep::Abandoned(
                "segments changed while mapping".into(),
            ));
        }
        if pass.next >= pass.end {
            let last = pass.last_of_producer.values().copied();
            pass.protected.extend(last);
            log.begin_cleaning(pass.end, pass.now_ms)?;
            pass.next = pass.segments[0].base;
            log.write_cleaned(pass.segments[0].base, &[], true)?;
            self.phase = Phase::Writing(pass);
            return Ok(CleanerStep::Working);
        }
        match first_batch(log, pass.next)? {
            Some(b) if b.base_offset < pass.end => {
                if !b.is_control() && !b.is_transactional() {
                    for (off, r) in b.iter_offsets() {
                        if let Some(k) = &r.key {
                            pass.map.insert(k.clone(), off);
                        }
                    }
                    if let Some(p) = b.producer {
                        pass.last_of_producer.insert(p.producer_id, b.base_offset);
                    }
                }
                pass.next = b.next_offset();
            }
            _ => pass.next = pass.end,
        }
        self.phase = Phase::Mapping(pass);
        Ok(CleanerStep::Working)
    }

    /// Copies one batch's survivors to the cleaned copy of the current segment, or (the
    /// segment all read) swaps it in.
    fn write_step<S: Storage>(
        &mut self,
        log: &mut PartitionLog<S>,
        mut pass: Box<Pass>,
    ) -> Result<CleanerStep, LogError> {
        if pass.layout != log.layout_version() {
            return Ok(CleanerStep::Abandoned(
                "segments changed while cleaning".into(),
            ));
        }
        let seg = pass.segments[pass.seg];
        if pass.next >= seg.end {
            log.commit_cleaned(seg.base)?;
            self.stats.segments_swapped += 1;
            pass.seg += 1;
            if pass.seg == pass.segments.len() {
                self.stats.passes_finished += 1;
                return Ok(CleanerStep::Finished);
            }
            let next = pass.segments[pass.seg].base;
            pass.next = next;
            log.write_cleaned(next, &[], true)?;
            self.phase = Phase::Writing(pass);
            return Ok(CleanerStep::Working);
        }
        match first_batch(log, pass.next)? {
            Some(b) if b.base_offset < seg.end => {
                let (kept, dropped, tombstones) = clean_batch(&b, &pass);
                self.stats.records_dropped += dropped;
                self.stats.tombstones_dropped += tombstones;
                for k in &kept {
                    let bytes = k.encode()?;
                    log.write_cleaned(seg.base, &bytes, false)?;
                }
                pass.next = b.next_offset();
            }
            _ => pass.next = seg.end,
        }
        self.phase = Phase::Writing(pass);
        Ok(CleanerStep::Working)
    }

    /// Steps until the cleaning ends (for tests and callers without a budget); at most
    /// `max_steps`. Returns the last step's outcome.
    pub fn run<S: Storage>(
        &mut self,
        log: &mut PartitionLog<S>,
        input: CleanerInput,
        max_steps: usize,
    ) -> Result<CleanerStep, LogError> {
        let mut last = CleanerStep::Idle;
        for _ in 0..max_steps {
            last = self.step(log, input)?;
            if last != CleanerStep::Working {
                break;
            }
        }
        Ok(last)
    }
}

/// The first batch holding an offset `>= from`, if any.
fn first_batch<S: Storage>(
    log: &mut PartitionLog<S>,
    from: Offset,
) -> Result<Option<RecordBatch>, LogError> {
    if from >= log.log_end_offset() {
        return Ok(None);
    }
    Ok(log
        .read(from.max(log.log_start_offset()), 1)?
        .into_iter()
        .next())
}

/// Whether a record survives this cleaning.
fn keeps(pass: &Pass, offset: Offset, key: Option<&Vec<u8>>, tombstone: bool) -> bool {
    let Some(k) = key else {
        // Written before the topic was compacted: Kafka's cleaner would refuse the log;
        // keeping it is always safe.
        return true;
    };
    if pass.map.get(k) != Some(&offset) {
        return false;
    }
    // A tombstone's `delete.retention.ms` runs from the cleaning that first saw it.
    !(tombstone
        && pass
            .before
            .first_cleaned(offset)
            .is_some_and(|t| pass.now_ms >= t.saturating_add(pass.delete_retention_ms)))
}

/// The batches `b` becomes: itself when kept whole, else one dense batch per run of
/// surviving records (same epoch, attributes, producer; the sequence moved along with the
/// first record). Also the number of records and tombstones dropped.
fn clean_batch(b: &RecordBatch, pass: &Pass) -> (Vec<RecordBatch>, u64, u64) {
    if b.is_control() || b.is_transactional() || pass.protected.contains(&b.base_offset) {
        return (vec![b.clone()], 0, 0);
    }
    let keep: Vec<bool> = b
        .iter_offsets()
        .map(|(o, r)| keeps(pass, o, r.key.as_ref(), r.value.is_none()))
        .collect();
    let dropped = keep.iter().filter(|k| !**k).count() as u64;
    let tombstones = b
        .records
        .iter()
        .zip(&keep)
        .filter(|(r, k)| {
            !**k && r.value.is_none()
                && pass
                    .map
                    .get(r.key.as_ref().expect("dropped records have keys"))
                    == Some(&(b.base_offset + u64::from(r.offset_delta)))
        })
        .count() as u64;
    if dropped == 0 {
        return (vec![b.clone()], 0, 0);
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < keep.len() {
        if !keep[i] {
            i += 1;
            continue;
        }
        let j = (i..keep.len()).find(|&j| !keep[j]).unwrap_or(keep.len());
        out.push(run_batch(b, i, j));
        i = j;
    }
    (out, dropped, tombstones)
}

/// Records `[i, j)` of `b` as a batch of their own, at their own offsets.
fn run_batch(b: &RecordBatch, i: usize, j: usize) -> RecordBatch {
    let records: Vec<_> = b.records[i..j]
        .iter()
        .enumerate()
        .map(|(n, r)| super::Record {
            offset_delta: n as u32,
            ..r.clone()
        })
        .collect();
    let max_timestamp = records
        .iter()
        .map(|r| b.first_timestamp.saturating_add(r.timestamp_delta))
        .max()
        .unwrap_or(b.first_timestamp);
    let producer = b.producer.map(|mut p| {
        if p.base_sequence != NO_SEQUENCE {
            p.base_sequence = p.base_sequence.wrapping_add(i as u32);
        }
        p
    });
    RecordBatch {
        base_offset: b.base_offset + i as u64,
        partition_leader_epoch: b.partition_leader_epoch,
        attributes: b.attributes,
        producer,
        first_timestamp: b.first_timestamp,
        max_timestamp,
        records,
    }
}

#[cfg(test)]
mod tests;
