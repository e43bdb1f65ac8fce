//! The partition log: an ordered list of segments plus the leader-epoch cache and the
//! recovery point. Appends go to the last (active) segment; reads locate a segment by
//! base offset, then a byte position through its sparse index; recovery on open validates
//! everything after the last flushed point. File layout and guarantees: docs/format.md.

use super::batch::{verify_crc, BatchHeader, CheckedBatch, DecodeError, EncodeError, RecordBatch};
use super::checkpoint;
use super::codec::CODEC_MASK;
use super::compaction::{CleanState, CompactionConfig};
use super::epoch_cache::EpochCache;
use super::segment::{check_crc, SegReader, Segment, Step, Verified, MAX_BATCH_LEN_ON_DISK};
use super::storage::{join, Storage, StorageError};
use crate::types::{LeaderEpoch, Offset, TimestampMs};
use thiserror::Error;

mod compact;
mod recovery;
mod repair;

pub use compact::CleanableSegment;

const EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";
const RECOVERY_CHECKPOINT: &str = "recovery-point-checkpoint";
/// Read-ahead for scans.
const SCAN_CHUNK: usize = 64 << 10;

/// Log tuning. All sizes in bytes, all times in milliseconds of the caller's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
    /// Roll to a new segment before the active one would exceed this size.
    pub segment_bytes: u64,
    /// Roll when the active segment's first append (since open) is this old.
    pub segment_ms: Option<i64>,
    /// Delete oldest segments while the rest still hold at least this many bytes.
    pub retention_bytes: Option<u64>,
    /// Delete segments whose newest record timestamp is older than this.
    pub retention_ms: Option<i64>,
    /// Bytes between sparse index entries.
    pub index_interval_bytes: u64,
    /// Largest encoded batch accepted by append.
    pub max_batch_bytes: usize,
    /// On open, cut the log at corruption found in flushed data or in the middle of a
    /// segment (reporting it in [`RecoverySummary::corruption`]) instead of failing with
    /// [`LogError::Corrupt`]. Torn unflushed tails are always cut.
    pub truncate_on_corruption: bool,
    /// Compaction (Kafka's `cleanup.policy` holding `compact`): None, the default, for a
    /// log that is never compacted. Set, it makes the leader refuse keyless records and
    /// lets a [`super::cleaner::Cleaner`] run on the log.
    pub compaction: Option<CompactionConfig>,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 1 << 30,
            segment_ms: Some(7 * 24 * 3600 * 1000),
            retention_bytes: None,
            retention_ms: Some(7 * 24 * 3600 * 1000),
            index_interval_bytes: 4096,
            max_batch_bytes: 1 << 20,
            truncate_on_corruption: false,
            compaction: None,
        }
    }
}

impl LogConfig {
    fn validate(&self) -> Result<(), LogError> {
        let bad = |m: &str| Err(LogError::InvalidConfig(m.to_string()));
        if self.segment_bytes == 0 || self.segment_bytes > u32::MAX as u64 {
            return bad("segment_bytes must be in 1..=u32::MAX");
        }
        if self.max_batch_bytes == 0 || self.max_batch_bytes > MAX_BATCH_LEN_ON_DISK {
            return bad("max_batch_bytes must be in 1..=64 MiB");
        }
        if self.index_interval_bytes == 0 {
            return bad("index_interval_bytes must be positive");
        }
        if self.segment_ms.is_some_and(|m| m <= 0) || self.retention_ms.is_some_and(|m| m < 0) {
            return bad("segment_ms must be positive and retention_ms non-negative");
        }
        Ok(())
    }
}

/// Errors of the partition log, each naming the problem.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LogError {
    #[error("offset {offset} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        offset: Offset,
        log_start: Offset,
        log_end: Offset,
    },
    #[error("corrupt log data in {path} at byte {pos} (expected offset {offset}): {reason}")]
    Corrupt {
        path: String,
        pos: u64,
        offset: Offset,
        reason: String,
    },
    #[error("cannot append an empty batch")]
    EmptyBatch,
    #[error("batch of {size} bytes exceeds max_batch_bytes {max}")]
    BatchTooLarge { size: usize, max: usize },
    #[error("follower batch starts at offset {got}, but the log ends at {expected}")]
    NonContiguousAppend { expected: Offset, got: Offset },
    #[error("leader epoch {epoch} is older than the log's latest epoch {latest}")]
    EpochRegression {
        epoch: LeaderEpoch,
        latest: LeaderEpoch,
    },
    #[error("invalid batch: {0}")]
    InvalidBatch(String),
    #[error("invalid log config: {0}")]
    InvalidConfig(String),
    #[error("log is unusable after an earlier storage failure ({0}); reopen it")]
    Failed(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl LogError {
    pub fn is_disk_full(&self) -> bool {
        matches!(self, LogError::Storage(StorageError::DiskFull { .. }))
    }
}

impl From<EncodeError> for LogError {
    fn from(e: EncodeError) -> Self {
        LogError::InvalidBatch(e.to_string())
    }
}

impl From<DecodeError> for LogError {
    fn from(e: DecodeError) -> Self {
        LogError::InvalidBatch(e.to_string())
    }
}

/// What an append did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: Offset,
    pub last_offset: Offset,
    pub max_timestamp: TimestampMs,
    pub leader_epoch: LeaderEpoch,
    /// Encoded size of the batch.
    pub bytes: usize,
    /// A new segment was started for this batch.
    pub rolled: bool,
}

/// Corruption found (and cut, under `truncate_on_corruption`) during recovery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorruptionReport {
    pub path: String,
    pub pos: u64,
    pub offset: Offset,
    pub reason: String,
}

/// What recovery on open found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoverySummary {
    /// Recovery point read from the checkpoint (None: absent or unreadable).
    pub recovery_point: Option<Offset>,
    pub segments: usize,
    /// Segments validated batch by batch (those holding offsets >= the recovery point,
    /// and any whose index files were unusable).
    pub segments_validated: usize,
    pub batches_validated: u64,
    pub bytes_validated: u64,
    /// Bytes and batches cut off the end (torn or corrupt tail, orphaned segments).
    pub bytes_truncated: u64,
    pub batches_truncated: u64,
    pub segments_deleted: usize,
    /// Why the cut was made, if one was.
    pub truncation_reason: Option<String>,
    /// Set when the cut removed corruption rather than a torn unflushed tail.
    pub corruption: Option<CorruptionReport>,
    /// The epoch checkpoint was absent or unreadable and was rebuilt from the batches.
    pub epoch_cache_rebuilt: bool,
    pub log_start_offset: Offset,
    pub log_end_offset: Offset,
}

/// What retention deleted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetentionSummary {
    pub segments_deleted: usize,
    pub bytes_deleted: u64,
    pub log_start_offset: Offset,
}

/// A partition's log on some [`Storage`].
#[derive(Debug)]
pub struct PartitionLog<S: Storage> {
    storage: S,
    dir: String,
    config: LogConfig,
    /// Sorted by base offset, contiguous, never empty; the last is the active segment.
    segments: Vec<Segment>,
    epochs: EpochCache,
    /// Every offset below it is synced.
    recovery_point: Offset,
    /// Value last written to the recovery-point checkpoint.
    persisted_recovery_point: Option<Offset>,
    /// Set after a storage failure that leaves memory and disk possibly out of step.
    failed: Option<String>,
    /// The recovery-point checkpoint's path, joined once: it is written on every flush.
    recovery_path: String,
    /// Lines this process has written to the recovery-point journal since it last
    /// rewrote it whole (0: not yet, the next write rewrites it).
    rp_journal_lines: usize,
    /// Where `append_as_leader`/`append_as_follower` encode a batch: reused, so an append
    /// allocates nothing once it has grown to the largest batch.
    scratch: Vec<u8>,
    /// The buffer of the last read's [`SegReader`], for the next (see [`keep_scratch`]).
    read_buf: Vec<u8>,
    /// Where `read`, `read_below` and `read_until` gather batches (see [`batch_result`]).
    batch_scratch: Vec<RecordBatch>,
    /// Where `read_raw` gathers bytes (see [`exact_result`]).
    raw_scratch: Vec<u8>,
    /// The cleaner checkpoint: below its clean point offsets may be missing (compacted
    /// away or skipped by a follower copying a compacted leader); above it the log is
    /// dense. Default (clean point 0) for a log never compacted.
    clean: CleanState,
    /// Bumped whenever segments are removed or cut (truncation, retention, repair), so a
    /// cleaning in progress knows the segments it read may be gone.
    layout_version: u64,
}

/// Scratch that grew past this many batches is not kept (most reads return a few).
const KEEP_SCRATCH_BATCHES: usize = 64;

/// The least room a fresh batch scratch has ([`batch_result`]).
const MIN_SCRATCH_BATCHES: usize = 8;

/// What a batch read gathered in `buf`, the log's scratch: handed out as it is, `slot`
/// getting a fresh scratch with room for a read like this one. One allocation per read,
/// as [`exact_result`] makes, without its copy of every batch. A failed or empty read
/// keeps `buf` as the scratch.
fn batch_result(
    slot: &mut Vec<RecordBatch>,
    mut buf: Vec<RecordBatch>,
    scanned: Result<(), LogError>,
) -> Result<Vec<RecordBatch>, LogError> {
    if scanned.is_err() || buf.is_empty() {
        buf.clear();
        keep_scratch(slot, buf, KEEP_SCRATCH_BATCHES);
        return scanned.map(|()| Vec::new());
    }
    *slot = Vec::with_capacity(buf.len().clamp(MIN_SCRATCH_BATCHES, KEEP_SCRATCH_BATCHES));
    Ok(buf)
}

/// What a read gathered in `buf`, a reused scratch, moved into a `Vec` of exactly its
/// size: one allocation per read, where pushing into a fresh `Vec` reallocated (and
/// copied) as it grew. `buf` goes back to `slot`, empty, unless it grew past `keep` items.
fn exact_result<T>(
    slot: &mut Vec<T>,
    mut buf: Vec<T>,
    keep: usize,
    scanned: Result<(), LogError>,
) -> Result<Vec<T>, LogError> {
    let out = scanned.map(|()| {
        let mut out = Vec::with_capacity(buf.len());
        out.append(&mut buf);
        out
    });
    buf.clear();
    keep_scratch(slot, buf, keep);
    out
}

/// Puts a read's scratch back in `slot` for the next read unless it grew past `keep`
/// items: most reads are short (the tail of the log), and a log should not hold on to
/// what one large read needed.
fn keep_scratch<T>(slot: &mut Vec<T>, buf: Vec<T>, keep: usize) {
    if buf.capacity() <= keep {
        *slot = buf;
    }
}

/// The recovery-point journal is rewritten whole once it holds this many lines (~100 KB).
const RP_JOURNAL_MAX_LINES: usize = 4096;

/// Appends an index entry; a failure marks the log failed (a free function so the caller
/// can keep the segment, whose path it passes, borrowed).
fn append_index<S: Storage>(
    storage: &mut S,
    failed: &mut Option<String>,
    path: &str,
    data: &[u8],
) -> Result<(), LogError> {
    storage.append(path, data).map_err(|e| {
        // Memory has the entry, the file may not: only a reopen can reconcile.
        *failed = Some(e.to_string());
        LogError::from(e)
    })
}

/// Whether data (a batch, or a segment's end) at offset `next` may follow data ending at
/// `expected`: right there, or past a gap that lies below the clean point (compacted).
fn offset_follows(expected: Offset, next: Offset, clean_point: Offset) -> bool {
    next == expected || (next > expected && next <= clean_point)
}

fn corrupt(path: &str, pos: u64, offset: Offset, reason: impl Into<String>) -> LogError {
    LogError::Corrupt {
        path: path.to_string(),
        pos,
        offset,
        reason: reason.into(),
    }
}

impl<S: Storage> PartitionLog<S> {
    pub fn log_start_offset(&self) -> Offset {
        self.segments[0].base
    }

    pub fn log_end_offset(&self) -> Offset {
        self.active().next_offset
    }

    /// Every offset below this one is synced to storage.
    pub fn flushed_offset(&self) -> Offset {
        self.recovery_point
    }

    pub fn epoch_cache(&self) -> &EpochCache {
        &self.epochs
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Turns compaction on or off (a topic's `cleanup.policy` changed, or became known
    /// after the log was opened).
    pub fn set_compaction(&mut self, compaction: Option<CompactionConfig>) {
        self.config.compaction = compaction;
    }

    /// Number of segments (for tests and metrics).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Base offsets of the segments, oldest first.
    pub fn segment_bases(&self) -> Vec<Offset> {
        self.segments.iter().map(|s| s.base).collect()
    }

    /// Total bytes of segment data.
    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.size).sum()
    }

    /// The storage handle (e.g. to inspect files in tests).
    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// Flushes and closes the log, returning its storage.
    pub fn close(mut self) -> Result<S, LogError> {
        self.flush()?;
        Ok(self.storage)
    }

    /// Consumes the log, returning its storage (close without flushing).
    pub fn into_storage(self) -> S {
        self.storage
    }

    /// Appends a batch as the partition leader: assigns `base_offset = LEO`, the leader
    /// epoch, dense offset deltas and the max timestamp.
    pub fn append_as_leader(
        &mut self,
        mut batch: RecordBatch,
        epoch: LeaderEpoch,
        now_ms: TimestampMs,
    ) -> Result<AppendInfo, LogError> {
        self.check_usable()?;
        if batch.records.is_empty() {
            return Err(LogError::EmptyBatch);
        }
        batch.base_offset = self.log_end_offset();
        batch.partition_leader_epoch = epoch;
        let mut max_ts = batch.first_timestamp;
        for (i, r) in batch.records.iter_mut().enumerate() {
            r.offset_delta = i as u32;
            max_ts = max_ts.max(batch.first_timestamp.saturating_add(r.timestamp_delta));
        }
        batch.max_timestamp = max_ts;
        self.append_decoded(&batch, now_ms)
    }

    /// [`Self::append_as_leader`] for a batch still encoded, as a producer sent it and its
    /// leader's replica checked it ([`CheckedBatch`]): the base offset, epoch, offset
    /// deltas and max timestamp are set in place in its bytes (the caller may reuse the
    /// buffer), giving the bytes `append_as_leader` would write for the decoded batch
    /// ([`CheckedBatch::place`]). No record is decoded or checked again, and the bytes are
    /// copied once, into storage. A refused batch is left as it was, unless storage
    /// failed the append.
    pub fn append_encoded_as_leader(
        &mut self,
        batch: CheckedBatch<&mut [u8]>,
        epoch: LeaderEpoch,
        now_ms: TimestampMs,
    ) -> Result<AppendInfo, LogError> {
        self.check_usable()?;
        if batch.header().record_count == 0 {
            return Err(LogError::EmptyBatch);
        }
        self.check_epoch(epoch)?;
        self.check_size(batch.bytes().len())?;
        let leo = self.log_end_offset();
        let placed = batch.place(leo, epoch).map_err(LogError::from)?;
        debug_assert_eq!(placed.header().base_offset, leo);
        debug_assert_eq!(placed.header().partition_leader_epoch, epoch);
        self.append_bytes(placed.bytes(), placed.header(), now_ms)
    }

    /// Appends a batch copied from the leader, verbatim: its base offset must be the LEO
    /// and its offset deltas dense.
    pub fn append_as_follower(
        &mut self,
        batch: RecordBatch,
        now_ms: TimestampMs,
    ) -> Result<AppendInfo, LogError> {
        self.check_usable()?;
        if batch.records.is_empty() {
            return Err(LogError::EmptyBatch);
        }
        self.check_contiguous(batch.base_offset)?;
        if let Some((i, r)) = batch
            .records
            .iter()
            .enumerate()
            .find(|(i, r)| r.offset_delta != *i as u32)
        {
            return Err(LogError::InvalidBatch(format!(
                "record {i} has offset delta {}, expected {i}",
                r.offset_delta
            )));
        }
        self.append_decoded(&batch, now_ms)
    }

    /// [`Self::append_as_follower`] for a batch still encoded, as the leader's log holds
    /// it (exactly one batch): its CRC and records are checked once and the bytes written
    /// as they are.
    pub fn append_encoded_as_follower(
        &mut self,
        batch: &[u8],
        now_ms: TimestampMs,
    ) -> Result<AppendInfo, LogError> {
        self.check_usable()?;
        // Bytes from a peer are checked where they enter the log.
        let batch = CheckedBatch::check(batch).map_err(LogError::from)?;
        let header = batch.header();
        if header.record_count == 0 {
            return Err(LogError::EmptyBatch);
        }
        self.check_contiguous(header.base_offset)?;
        if !batch.is_dense() {
            return Err(LogError::InvalidBatch(
                "offset deltas are not 0, 1, 2, ...".to_string(),
            ));
        }
        self.check_epoch(header.partition_leader_epoch)?;
        self.check_size(batch.bytes().len())?;
        self.append_bytes(batch.bytes(), header, now_ms)
    }

    fn check_epoch(&self, epoch: LeaderEpoch) -> Result<(), LogError> {
        match self.epochs.latest_epoch() {
            Some(latest) if epoch < latest => Err(LogError::EpochRegression { epoch, latest }),
            _ => Ok(()),
        }
    }

    fn check_size(&self, size: usize) -> Result<(), LogError> {
        let max = self.config.max_batch_bytes;
        if size > max {
            return Err(LogError::BatchTooLarge { size, max });
        }
        Ok(())
    }

    fn check_contiguous(&mut self, base: Offset) -> Result<(), LogError> {
        let leo = self.log_end_offset();
        if base > leo && self.config.compaction.is_some() {
            // A compacted leader's log has gaps where records were compacted away: the
            // follower copies them as gaps, made legal (durably) before the batch lands.
            self.raise_clean_point(base)?;
            return Ok(());
        }
        if base != leo {
            return Err(LogError::NonContiguousAppend {
                expected: leo,
                got: base,
            });
        }
        Ok(())
    }

    /// Encodes `batch` into the log's scratch buffer (no allocation once it has grown to
    /// the largest batch) and appends it.
    fn append_decoded(
        &mut self,
        batch: &RecordBatch,
        now_ms: TimestampMs,
    ) -> Result<AppendInfo, LogError> {
        self.check_epoch(batch.partition_leader_epoch)?;
        let max = self.config.max_batch_bytes;
        // A compressed batch's size is known once compressed: checked after encoding.
        let compressed = batch.attributes & CODEC_MASK != 0;
        let size = batch.encoded_len();
        if size > max && !compressed {
            return Err(LogError::BatchTooLarge { size, max });
        }
        let mut bytes = std::mem::take(&mut self.scratch);
        bytes.clear();
        let r = batch
            .encode_into(&mut bytes)
            .map_err(LogError::from)
            .and_then(|()| {
                if compressed && bytes.len() > max {
                    let size = bytes.len();
                    return Err(LogError::BatchTooLarge { size, max });
                }
                BatchHeader::parse(&bytes).map_err(LogError::from)
            })
            .and_then(|header| self.append_bytes(&bytes, &header, now_ms));
        bytes.clear(); // keeps the capacity; a printed log does not show the last batch
        self.scratch = bytes;
        r
    }

    /// Writes one encoded batch, whose header is `header`, at the LEO. Every append comes
    /// here once its batch is checked (or encoded by this log) and found acceptable: the
    /// preconditions below are what those checks established.
    fn append_bytes(
        &mut self,
        bytes: &[u8],
        header: &BatchHeader,
        now_ms: TimestampMs,
    ) -> Result<AppendInfo, LogError> {
        let epoch = header.partition_leader_epoch;
        debug_assert!(self.failed.is_none(), "appends go to a usable log");
        debug_assert!(
            offset_follows(
                self.log_end_offset(),
                header.base_offset,
                self.clean.clean_point
            ),
            "placed at the LEO (or past a gap below the clean point)"
        );
        debug_assert_eq!(header.total_len(), bytes.len(), "exactly one batch");
        debug_assert!(header.record_count > 0, "never an empty batch");
        debug_assert!(bytes.len() <= self.config.max_batch_bytes, "size checked");
        debug_assert!(
            self.epochs.latest_epoch().is_none_or(|l| l <= epoch),
            "epochs never go back along the log"
        );
        let rolled = self.maybe_roll(bytes.len() as u64, header.record_count, now_ms)?;
        let base = header.base_offset;
        // The epoch entry is made durable before the batch, so the cache never lacks an
        // epoch present in the log; recovery drops entries past the end.
        if self.epochs.assign(epoch, base) {
            if let Err(e) = self.write_epoch_checkpoint() {
                self.epochs.truncate_from_end(base);
                return Err(e);
            }
        }
        let seg = self.segments.last().expect("never empty");
        let pos = seg.size;
        if let Err(e) = self.storage.append(seg.log_path(), bytes) {
            // Undo a partial write so the file matches memory again.
            if self.storage.truncate(seg.log_path(), pos).is_err() {
                self.failed = Some(e.to_string());
            }
            if self.epochs.truncate_from_end(base) {
                let _ = self.write_epoch_checkpoint();
            }
            return Err(e.into());
        }
        let seg = self.segments.last_mut().expect("never empty");
        if seg.first_append_ms.is_none() {
            seg.first_append_ms = Some(now_ms);
        }
        seg.dirty = true;
        let (ie, te) = seg.push_batch(pos, header, self.config.index_interval_bytes);
        if ie.is_some() || te.is_some() {
            seg.index_dirty = true;
        }
        let seg = self.segments.last().expect("never empty");
        if let Some(ie) = ie {
            append_index(
                &mut self.storage,
                &mut self.failed,
                seg.index_path(),
                &ie.encode(),
            )?;
        }
        if let Some(te) = te {
            let path = seg.time_index_path();
            append_index(&mut self.storage, &mut self.failed, path, &te.encode())?;
        }
        debug_assert_eq!(self.log_end_offset(), header.next_offset());
        debug_assert_eq!(self.epochs.latest_epoch(), Some(epoch));
        debug_assert_eq!(self.active().last_batch_base, Some(base));
        self.debug_check();
        Ok(AppendInfo {
            base_offset: base,
            last_offset: header.next_offset() - 1,
            max_timestamp: header.max_timestamp,
            leader_epoch: epoch,
            bytes: bytes.len(),
            rolled,
        })
    }

    fn maybe_roll(&mut self, len: u64, count: u32, now_ms: TimestampMs) -> Result<bool, LogError> {
        let seg = self.active();
        if seg.is_empty() {
            return Ok(false);
        }
        let too_big = seg.size + len > self.config.segment_bytes;
        let too_old = match (self.config.segment_ms, seg.first_append_ms) {
            (Some(ms), Some(first)) => now_ms.saturating_sub(first) >= ms,
            _ => false,
        };
        let offsets_full = seg.next_offset - seg.base + count as u64 > u32::MAX as u64;
        if too_big || too_old || offsets_full {
            self.roll()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Starts a new active segment at the LEO (no-op if the active one is empty).
    pub fn roll(&mut self) -> Result<(), LogError> {
        self.check_usable()?;
        if self.active().is_empty() {
            return Ok(());
        }
        let seg = self.segments.last_mut().expect("never empty");
        if let Some(t) = seg.final_time_entry() {
            seg.time_index.push(t);
            seg.index_dirty = true;
            let path = seg.time_index_path();
            append_index(&mut self.storage, &mut self.failed, path, &t.encode())?;
        }
        let leo = self.log_end_offset();
        self.create_segment(leo)
    }

    fn create_segment(&mut self, base: Offset) -> Result<(), LogError> {
        let mut seg = Segment::new(&self.dir, base);
        let path = seg.log_path();
        if self.storage.exists(path) {
            self.storage.truncate(path, 0)?;
        } else {
            self.storage.append(path, &[])?;
        }
        // Index files exist from the start (empty), so a reopen never mistakes a segment
        // that simply had no index entries for one whose index was lost.
        for p in [seg.index_path(), seg.time_index_path()] {
            self.storage.write_atomic(p, &[])?;
        }
        // Empty, and only this log appends to it from now on.
        seg.verified = self.storage.generation(seg.log_path()).map(|gen| Verified {
            gen,
            starts: Vec::new(),
        });
        self.segments.push(seg);
        Ok(())
    }

    /// Reads whole batches covering offsets `>= from`, stopping before `max_bytes` would
    /// be exceeded (at least one batch if `from < LEO`). Every batch is CRC-checked.
    pub fn read(&mut self, from: Offset, max_bytes: usize) -> Result<Vec<RecordBatch>, LogError> {
        let mut out = std::mem::take(&mut self.batch_scratch);
        let scanned = self.scan_batches(from, max_bytes, |path, pos, offset, bytes, h, _| {
            let (b, _) = RecordBatch::decode_verified(bytes, h)
                .map_err(|e| corrupt(path, pos, offset, e.to_string()))?;
            out.push(b);
            Ok(true)
        });
        batch_result(&mut self.batch_scratch, out, scanned)
    }

    /// The one batch starting at `from`, read without looking at what follows it: a peer
    /// asking for a single batch (peer repair) must get it even when a later batch is
    /// damaged, which [`Self::read`] meets when it parses the next header (seed 200034 of
    /// `--fault-rate 4 --max-down 2`: two copies damaged at 38 and 54 each answered the
    /// other "unreadable", and the partition stayed leaderless). `None`: no batch starts
    /// at `from`.
    pub fn read_batch(&mut self, from: Offset) -> Result<Option<RecordBatch>, LogError> {
        let mut found = None;
        self.scan_batches(from, usize::MAX, |path, pos, offset, bytes, h, _| {
            if h.base_offset == from {
                let (b, _) = RecordBatch::decode_verified(bytes, h)
                    .map_err(|e| corrupt(path, pos, offset, e.to_string()))?;
                found = Some(b);
            }
            Ok(false)
        })?;
        Ok(found)
    }

    /// [`Self::read`] cut at `below`: its batches holding offsets below `below`, the last
    /// one's records at or past `below` dropped (an observer's or a consumer's view up to
    /// the high watermark). Fails exactly when `read` would: the batches past `below` that
    /// `read` returns are still checked and decoded, unless they are known intact
    /// ([`Segment::verified`]), when the scan stops at the first of them.
    pub fn read_below(
        &mut self,
        from: Offset,
        below: Offset,
        max_bytes: usize,
    ) -> Result<Vec<RecordBatch>, LogError> {
        let mut out = std::mem::take(&mut self.batch_scratch);
        let scanned = self.scan_batches(from, max_bytes, |path, pos, offset, bytes, h, intact| {
            if h.base_offset >= below && intact {
                return Ok(false);
            }
            let (mut b, _) = RecordBatch::decode_verified(bytes, h)
                .map_err(|e| corrupt(path, pos, offset, e.to_string()))?;
            if b.base_offset < below {
                if b.next_offset() > below {
                    b.records.truncate((below - b.base_offset) as usize);
                }
                out.push(b);
            }
            Ok(true)
        });
        batch_result(&mut self.batch_scratch, out, scanned)
    }

    /// Like [`Self::read`] but only batches wholly below `end` (e.g. the high watermark,
    /// for consumer fetches): a batch with `next_offset() > end` is not returned.
    pub fn read_until(
        &mut self,
        from: Offset,
        max_bytes: usize,
        end: Offset,
    ) -> Result<Vec<RecordBatch>, LogError> {
        if from >= end {
            // Still validate the range so a bad offset is reported.
            self.check_range(from)?;
            return Ok(Vec::new());
        }
        let mut out = std::mem::take(&mut self.batch_scratch);
        let scanned = self.scan_batches(from, max_bytes, |path, pos, offset, bytes, h, _| {
            if h.next_offset() > end {
                return Ok(false);
            }
            let (b, _) = RecordBatch::decode_verified(bytes, h)
                .map_err(|e| corrupt(path, pos, offset, e.to_string()))?;
            out.push(b);
            Ok(true)
        });
        batch_result(&mut self.batch_scratch, out, scanned)
    }

    /// Like [`Self::read`] but returns the encoded batches back to back (CRC-checked, not
    /// decoded): what a fetch response carries.
    pub fn read_raw(&mut self, from: Offset, max_bytes: usize) -> Result<Vec<u8>, LogError> {
        let mut out = std::mem::take(&mut self.raw_scratch);
        let scanned = self.scan_batches(from, max_bytes, |_, _, _, bytes, _, _| {
            out.extend_from_slice(bytes);
            Ok(true)
        });
        exact_result(&mut self.raw_scratch, out, SCAN_CHUNK, scanned)
    }

    /// The first offset whose record timestamp is `>= ts`, or None if there is none.
    pub fn offset_for_timestamp(&mut self, ts: TimestampMs) -> Result<Option<Offset>, LogError> {
        let Some(i) = self
            .segments
            .iter()
            .position(|s| s.max_timestamp.is_some_and(|m| m >= ts))
        else {
            return Ok(None);
        };
        let (from, _) = self.segments[i].time_lookup(ts);
        let mut found = None;
        self.scan_batches(from, usize::MAX, |path, pos, offset, bytes, h, _| {
            if h.max_timestamp < ts {
                return Ok(true);
            }
            let (b, _) = RecordBatch::decode_verified(bytes, h)
                .map_err(|e| corrupt(path, pos, offset, e.to_string()))?;
            found = b
                .iter_offsets()
                .find(|(_, r)| b.first_timestamp.saturating_add(r.timestamp_delta) >= ts)
                .map(|(o, _)| o);
            Ok(found.is_none())
        })?;
        Ok(found)
    }

    /// Walks CRC-checked batches from the one holding `from`; `f(path, pos, base, bytes,
    /// header, intact)` returns false to stop. `intact`: this batch and every later one
    /// are known intact ([`Segment::verified`]), so a caller that has what it needs may
    /// stop without changing which errors the scan could report.
    ///
    /// A segment known intact is entered at the batch holding `from` (else at the sparse
    /// index entry before it, every batch from there checked), and its batches' CRCs are
    /// not computed again: both give the same batches and the same errors (none) as the
    /// full checks.
    fn scan_batches(
        &mut self,
        from: Offset,
        max_bytes: usize,
        mut f: impl FnMut(&str, u64, Offset, &[u8], &BatchHeader, bool) -> Result<bool, LogError>,
    ) -> Result<(), LogError> {
        self.check_usable()?;
        self.check_range(from)?;
        let mut idx = self
            .segments
            .partition_point(|s| s.base <= from)
            .saturating_sub(1);
        // Segments from `intact_from` on are all known intact.
        let intact_from = (idx..self.segments.len())
            .rev()
            .find(|&i| {
                let s = &self.segments[i];
                s.verified_at(self.storage.generation(s.log_path()))
                    .is_none()
            })
            .map_or(idx, |i| i + 1);
        let mut total = 0usize;
        let mut first = true;
        let chunk = max_bytes.clamp(SCAN_CHUNK, 16 << 20);
        let clean_point = self.clean.clean_point;
        while idx < self.segments.len() {
            let seg = &self.segments[idx];
            if seg.next_offset <= from {
                idx += 1;
                continue;
            }
            let seg_intact = idx >= intact_from;
            let verified = seg.verified.as_ref().filter(|_| seg_intact);
            let (mut expected, pos) = match (first, verified.and_then(|v| v.lookup(from))) {
                (true, Some(start)) => start,
                (true, None) => seg.lookup(from),
                (false, _) => (seg.base, 0),
            };
            let seg_end = seg.next_offset;
            let buf = std::mem::take(&mut self.read_buf);
            let mut r = SegReader::with_buf(seg.log_path(), pos, seg.size, chunk, buf);
            loop {
                match r.next(&mut self.storage)? {
                    Step::End => break,
                    Step::Fault { pos, reason } => {
                        return Err(corrupt(r.path(), pos, expected, reason))
                    }
                    Step::Batch { pos, header, len } => {
                        if !offset_follows(expected, header.base_offset, clean_point) {
                            return Err(corrupt(
                                r.path(),
                                pos,
                                expected,
                                format!(
                                    "batch has base offset {}, expected {expected}",
                                    header.base_offset
                                ),
                            ));
                        }
                        let bytes = r.bytes(pos, len);
                        if !seg_intact {
                            check_crc(bytes, &header)
                                .map_err(|e| corrupt(r.path(), pos, expected, e.to_string()))?;
                        }
                        if header.record_count == 0 {
                            return Err(corrupt(r.path(), pos, expected, "batch has no records"));
                        }
                        let base = header.base_offset;
                        expected = header.next_offset();
                        if expected <= from {
                            continue;
                        }
                        // The first batch is returned whatever its size, so a reader
                        // always makes progress.
                        if total > 0 && total.saturating_add(len) > max_bytes {
                            keep_scratch(&mut self.read_buf, r.into_buf(), SCAN_CHUNK);
                            return Ok(());
                        }
                        total += len;
                        if !f(r.path(), pos, base, bytes, &header, seg_intact)? {
                            keep_scratch(&mut self.read_buf, r.into_buf(), SCAN_CHUNK);
                            return Ok(());
                        }
                    }
                }
            }
            if !offset_follows(expected, seg_end, clean_point) {
                return Err(corrupt(
                    r.path(),
                    r.pos,
                    expected,
                    format!("segment data ends at offset {expected}, expected {seg_end}"),
                ));
            }
            keep_scratch(&mut self.read_buf, r.into_buf(), SCAN_CHUNK);
            first = false;
            idx += 1;
        }
        Ok(())
    }

    /// Drops every batch holding an offset `>= offset` (whole batches: the new LEO is the
    /// base of the first dropped batch, `<= offset`). Below the log start, the log is
    /// emptied and restarted at `offset`. The epoch cache is truncated alike. A damaged
    /// batch met while locating the cut becomes the cut, so after a read fails with
    /// `Corrupt { offset, .. }`, `truncate_to(offset)` removes the damage.
    pub fn truncate_to(&mut self, offset: Offset) -> Result<(), LogError> {
        self.check_usable()?;
        if offset >= self.log_end_offset() {
            return Ok(());
        }
        if offset <= self.log_start_offset() {
            return self.truncate_fully(offset);
        }
        let start = self.log_start_offset();
        let clean_point = self.clean.clean_point;
        let idx = self.segments.partition_point(|s| s.base <= offset) - 1;
        // Find the cut position: the first batch whose end is past `offset`.
        let seg = &self.segments[idx];
        let (mut expected, pos0) = seg.lookup(offset);
        let kept_ti = seg
            .time_index
            .partition_point(|t| seg.base + (t.rel as u64) <= expected);
        let mut max_ts = kept_ti.checked_sub(1).map(|i| seg.time_index[i].ts);
        let mut last_base = None;
        let mut r = SegReader::new(seg.log_path(), pos0, seg.size, SCAN_CHUNK);
        // Damage met on the way (a bad header, CRC or offset) becomes the cut point: the
        // caller is dropping this region anyway, and this is how a log is repaired after
        // a read reported corruption.
        let (cut_pos, cut_off) = loop {
            match r.next(&mut self.storage)? {
                Step::End => break (r.pos, expected),
                Step::Fault { pos, reason } => {
                    tracing::warn!(path = %r.path(), pos, offset = expected, %reason, "truncation cut at damaged batch");
                    break (pos, expected);
                }
                Step::Batch { pos, header, len } => {
                    let valid = offset_follows(expected, header.base_offset, clean_point)
                        && header.record_count > 0
                        && verify_crc(r.bytes(pos, len)).is_ok();
                    if !valid {
                        tracing::warn!(path = %r.path(), pos, offset = expected, "truncation cut at damaged batch");
                        break (pos, expected);
                    }
                    if header.next_offset() > offset {
                        break (pos, expected);
                    }
                    max_ts =
                        Some(max_ts.map_or(header.max_timestamp, |m| m.max(header.max_timestamp)));
                    last_base = Some(header.base_offset);
                    expected = header.next_offset();
                }
            }
        };
        // Whole batches only: the cut is at a batch boundary at or below `offset`, inside
        // the segment located for it.
        debug_assert!(cut_off <= offset && cut_off >= self.segments[idx].base);
        debug_assert!(cut_pos <= self.segments[idx].size);
        self.layout_version += 1;
        self.lower_recovery_point(cut_off)?;
        self.lower_clean_point(cut_off)?;
        if self.epochs.truncate_from_end(cut_off) {
            self.write_epoch_checkpoint()?;
        }
        while self.segments.len() > idx + 1 {
            let s = self.segments.pop().expect("len checked");
            self.remove_segment_files(&s)?;
        }
        let seg = &mut self.segments[idx];
        let was_intact = seg
            .verified_at(self.storage.generation(seg.log_path()))
            .is_some();
        self.storage.truncate(seg.log_path(), cut_pos)?;
        // The cut left the bytes below it as they were: still intact, at the new generation.
        match (was_intact, self.storage.generation(seg.log_path())) {
            (true, Some(gen)) => {
                let v = seg.verified.as_mut().expect("was intact");
                v.gen = gen;
                v.starts.retain(|(_, p)| *p < cut_pos);
            }
            _ => seg.verified = None,
        }
        let rel_end = cut_off - seg.base;
        seg.index.retain(|e| (e.rel as u64) < rel_end);
        seg.time_index.retain(|t| (t.rel as u64) < rel_end);
        seg.size = cut_pos;
        seg.next_offset = cut_off;
        seg.max_timestamp = max_ts;
        seg.last_batch_base =
            last_base.or_else(|| seg.index.last().map(|e| seg.base + e.rel as u64));
        seg.bytes_since_index = cut_pos - seg.index.last().map_or(0, |e| e.pos as u64);
        if seg.is_empty() {
            seg.first_append_ms = None;
            seg.max_timestamp = None;
            seg.last_batch_base = None;
        }
        let (n_i, n_t) = (seg.index.len(), seg.time_index.len());
        let (ip, tp) = (seg.index_path(), seg.time_index_path());
        for (p, len) in [(ip, n_i * 8), (tp, n_t * 12)] {
            if self.storage.exists(p) {
                self.storage.truncate(p, len as u64)?;
            }
        }
        debug_assert_eq!(self.log_end_offset(), cut_off);
        debug_assert!(self.log_end_offset() <= offset);
        debug_assert_eq!(self.log_start_offset(), start, "the log start stays");
        debug_assert!(self.recovery_point <= cut_off);
        debug_assert!(self.latest_epoch_start().is_none_or(|o| o < cut_off));
        self.debug_check();
        Ok(())
    }

    /// Empties the log and restarts it at `offset`, which may lie past the log end (Kafka's
    /// `truncateFullyAndStartAt`): a follower whose log end fell below the leader's log
    /// start (retention overtook it) can only continue from the leader's log start. The
    /// epoch cache is cleared: none of its entries describe the new log.
    pub fn truncate_fully_and_start_at(&mut self, offset: Offset) -> Result<(), LogError> {
        self.check_usable()?;
        self.truncate_fully(offset)
    }

    fn truncate_fully(&mut self, offset: Offset) -> Result<(), LogError> {
        self.layout_version += 1;
        self.lower_recovery_point(offset)?;
        self.lower_clean_point(offset)?;
        let below_start = offset < self.log_start_offset() || offset >= self.log_end_offset();
        let changed = if below_start {
            let had = !self.epochs.entries().is_empty();
            self.epochs.clear();
            had
        } else {
            self.epochs.truncate_from_end(offset)
        };
        if changed {
            self.write_epoch_checkpoint()?;
        }
        // Never leave the directory without a segment (after a crash that would look like
        // lost files): below the start or past the end, the new empty segment is created
        // first (recovery cuts the gap next to it if we crash midway); at the start, the
        // first segment is emptied in place. Old segments go newest first.
        let old = std::mem::take(&mut self.segments);
        let result = (|| {
            if offset != old[0].base {
                self.create_segment(offset)?;
            }
            for s in old.iter().rev().filter(|s| s.base != offset) {
                self.remove_segment_files(s)?;
            }
            if offset == old[0].base {
                self.create_segment(offset)?;
            }
            Ok(())
        })();
        if let Err(e) = result {
            self.failed = Some(format!("truncation to {offset} failed midway: {e}"));
            self.segments = vec![Segment::new(&self.dir, offset)];
            return Err(e);
        }
        self.recovery_point = offset;
        // One empty segment at `offset`, and no epoch entry (none names a batch).
        debug_assert_eq!(self.segments.len(), 1);
        debug_assert_eq!(
            (self.log_start_offset(), self.log_end_offset()),
            (offset, offset)
        );
        debug_assert!(self.epochs.entries().is_empty());
        self.debug_check();
        Ok(())
    }

    /// Syncs all unsynced data, and the index entries of every segment but the active one,
    /// then records the new recovery point. The active segment's index files are not
    /// synced here: recovery validates the segment holding the recovery point from its
    /// last index entry below it, falling back to the segment start when that entry is
    /// missing or does not check out, and rebuilds its indexes, so an unsynced index entry
    /// costs a longer scan after a crash, never data. With `fsync = always` this takes a
    /// group commit from five syncs (segment, two indexes, checkpoint file and directory)
    /// to three (issue 22). A rolled segment's indexes are synced by the next flush, before
    /// a recovery point past it can be written, as `load_trusted` relies on them.
    pub fn flush(&mut self) -> Result<(), LogError> {
        self.check_usable()?;
        let active = self.segments.len() - 1;
        for i in 0..self.segments.len() {
            let seg = &self.segments[i];
            let (dirty, idirty) = (seg.dirty, seg.index_dirty && i < active);
            let paths = [seg.log_path(), seg.index_path(), seg.time_index_path()];
            let mut r = Ok(());
            if dirty {
                r = self.storage.sync(paths[0]);
            }
            if idirty && r.is_ok() {
                for p in &paths[1..] {
                    if self.storage.exists(p) {
                        r = r.and(self.storage.sync(p));
                    }
                }
            }
            if let Err(e) = r {
                // After a failed fsync the page cache state is unknown (fsyncgate).
                self.failed = Some(e.to_string());
                return Err(e.into());
            }
            let seg = &mut self.segments[i];
            seg.dirty = false;
            seg.index_dirty &= !idirty;
        }
        let leo = self.log_end_offset();
        if self.persisted_recovery_point != Some(leo) {
            self.write_recovery_point(leo)?;
        }
        self.recovery_point = leo;
        debug_assert!(self.segments.iter().all(|s| !s.dirty), "all data synced");
        debug_assert_eq!(self.persisted_recovery_point, Some(leo));
        Ok(())
    }

    /// Deletes whole segments past the retention limits (by total size, then by age of
    /// their newest record), advancing the log start offset. The active segment is rolled
    /// first when it has itself expired, so the log may become empty (start == LEO).
    pub fn apply_retention(&mut self, now_ms: TimestampMs) -> Result<RetentionSummary, LogError> {
        self.check_usable()?;
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        let mut n = 0usize;
        if let Some(limit) = self.config.retention_bytes {
            let mut total = self.size_bytes();
            while n + 1 < self.segments.len() && total - self.segments[n].size >= limit {
                total -= self.segments[n].size;
                n += 1;
            }
        }
        if let Some(ms) = self.config.retention_ms {
            let expired = |s: &Segment| {
                s.max_timestamp
                    .is_some_and(|m| now_ms.saturating_sub(m) > ms)
            };
            while n < self.segments.len() && expired(&self.segments[n]) {
                n += 1;
            }
            if n == self.segments.len() {
                self.roll()?;
            }
        }
        let mut summary = RetentionSummary::default();
        if n == 0 {
            summary.log_start_offset = self.log_start_offset();
            return Ok(summary);
        }
        // The active segment always stays (after a roll, an empty one).
        debug_assert!(n < self.segments.len());
        let new_start = self.segments[n].base;
        debug_assert!(start <= new_start && new_start <= end);
        self.layout_version += 1;
        for s in self.segments.drain(..n).collect::<Vec<_>>() {
            summary.segments_deleted += 1;
            summary.bytes_deleted += s.size;
            self.remove_segment_files(&s)?;
        }
        // Segments first, then the cache: a crash in between leaves entries below the log
        // start, which recovery clamps. An emptied log keeps no entries (each names a batch).
        let leo = self.log_end_offset();
        let a = self.epochs.truncate_from_start(new_start);
        let b = self.epochs.truncate_from_end(leo);
        if a || b {
            self.write_epoch_checkpoint()?;
        }
        if self.recovery_point < new_start {
            self.recovery_point = new_start;
        }
        summary.log_start_offset = new_start;
        // Retention only moves the log start: the log end and what is durable stay.
        debug_assert_eq!(self.log_end_offset(), end);
        debug_assert_eq!(self.log_start_offset(), new_start);
        debug_assert!(self.recovery_point >= new_start);
        self.debug_check();
        Ok(summary)
    }

    // ----- helpers -------------------------------------------------------------------

    fn active(&self) -> &Segment {
        self.segments.last().expect("a log always has a segment")
    }

    fn check_range(&self, from: Offset) -> Result<(), LogError> {
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if from < start || from > end {
            return Err(LogError::OffsetOutOfRange {
                offset: from,
                log_start: start,
                log_end: end,
            });
        }
        Ok(())
    }

    /// Start offset of the latest epoch-cache entry (for the assertions).
    fn latest_epoch_start(&self) -> Option<Offset> {
        self.epochs.entries().last().map(|e| e.start_offset)
    }

    /// Structural invariants, checked after every mutation in debug builds.
    fn debug_check(&self) {
        if !cfg!(debug_assertions) || self.failed.is_some() {
            return;
        }
        debug_assert!(!self.segments.is_empty());
        for w in self.segments.windows(2) {
            debug_assert_eq!(w[0].next_offset, w[1].base, "segments not contiguous");
        }
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        debug_assert!(self.recovery_point <= end);
        for e in self.epochs.entries() {
            debug_assert!(
                e.start_offset >= start && e.start_offset < end,
                "epoch entry {e:?} outside [{start}, {end})"
            );
        }
    }

    /// True after a storage failure: every call but the accessors fails until reopened.
    pub fn is_failed(&self) -> bool {
        self.failed.is_some()
    }

    fn check_usable(&self) -> Result<(), LogError> {
        match &self.failed {
            Some(e) => Err(LogError::Failed(e.clone())),
            None => Ok(()),
        }
    }

    fn write_epoch_checkpoint(&mut self) -> Result<(), LogError> {
        let data = self.epochs.encode();
        self.storage
            .write_atomic(&join(&self.dir, EPOCH_CHECKPOINT), &data)?;
        Ok(())
    }

    /// Records `rp` durably. A rising recovery point is one line appended to the journal
    /// and synced (one `fdatasync`, issue 22: it was a temporary file's `fsync`, a rename
    /// and a directory `fsync` on every flush). The journal is rewritten whole, atomically,
    /// when it is new to this process (it may be a v1 file or end in a torn line), when it
    /// has grown to `RP_JOURNAL_MAX_LINES`, and when the point goes down: a lowered point
    /// must never sit above a line that a torn append could make the last valid one.
    fn write_recovery_point(&mut self, rp: Offset) -> Result<(), LogError> {
        let rising = self.persisted_recovery_point.is_some_and(|p| p <= rp);
        if rising && (1..RP_JOURNAL_MAX_LINES).contains(&self.rp_journal_lines) {
            let line = checkpoint::encode_rp_line(rp);
            let r = self
                .storage
                .append(&self.recovery_path, &line)
                .and_then(|()| self.storage.sync(&self.recovery_path));
            if let Err(e) = r {
                // The journal may now end in a partial line: rewrite it whole next time.
                self.rp_journal_lines = 0;
                return Err(e.into());
            }
            self.rp_journal_lines += 1;
        } else {
            let data = checkpoint::encode_rp_journal(rp);
            self.storage.write_atomic(&self.recovery_path, &data)?;
            self.rp_journal_lines = 1;
        }
        self.persisted_recovery_point = Some(rp);
        Ok(())
    }

    /// Before data below the recovery point is removed, the checkpoint must stop claiming
    /// it, or a crash could let recovery trust a tail that was rewritten.
    fn lower_recovery_point(&mut self, to: Offset) -> Result<(), LogError> {
        if self.persisted_recovery_point.is_none_or(|rp| rp > to) {
            self.write_recovery_point(to)?;
        }
        self.recovery_point = self.recovery_point.min(to);
        Ok(())
    }

    fn remove_segment_files(&mut self, s: &Segment) -> Result<(), LogError> {
        // The .log goes first: index files without it are cleaned up on open.
        self.storage.remove(s.log_path())?;
        self.storage.remove(s.index_path())?;
        self.storage.remove(s.time_index_path())?;
        Ok(())
    }

    fn rewrite_indexes(&mut self, idx: usize) -> Result<(), LogError> {
        let seg = &self.segments[idx];
        let (ip, tp) = (seg.index_path(), seg.time_index_path());
        let (id, td) = (seg.encode_index(), seg.encode_time_index());
        self.storage.write_atomic(ip, &id)?;
        self.storage.write_atomic(tp, &td)?;
        Ok(())
    }
}
