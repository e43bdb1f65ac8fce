//! Recovery on open: which segments to trust, validating the rest batch by batch, cutting
//! a torn tail, telling it apart from corruption, and rebuilding indexes and the epoch
//! cache. The rules and guarantees are in docs/format.md ("Recovery on open").

use super::*;
use crate::log::batch::{verify_crc, BatchHeader, RecordBatch, BATCH_HEADER_LEN};
use crate::log::checkpoint;
use crate::log::epoch_cache::EpochCache;
use crate::log::segment::{
    log_name, parse_log_name, IndexEntry, SegReader, Segment, Step, TimeEntry, INDEX_ENTRY_LEN,
    TIME_ENTRY_LEN,
};
use crate::log::storage::{join, Storage, StorageError};
use crate::types::{LeaderEpoch, Offset, TimestampMs};

/// Result of validating one segment during recovery.
struct Validated {
    seg: Segment,
    /// Bytes actually scanned.
    bytes: u64,
    batches: u64,
    epochs: Vec<(LeaderEpoch, Offset)>,
    /// First invalid byte (the cut point) and why, if the file did not end cleanly.
    fault: Option<(u64, String)>,
    file_len: u64,
}

/// What [`PartitionLog::open`] found in the segments it loaded or validated.
#[derive(Default)]
struct Recovered {
    /// Leader epochs and their start offsets, in log order.
    epochs: Vec<(LeaderEpoch, Offset)>,
    /// (segment index, end offset) of the segment cut at a fault; later ones go.
    cut: Option<(usize, Offset)>,
    /// Indexes of the segments validated (their indexes are rebuilt).
    validated: Vec<usize>,
}

/// Index files whose segment is gone (a crash during deletion) are removed.
fn remove_orphan_indexes<S: Storage>(
    storage: &mut S,
    dir: &str,
    names: &[String],
    bases: &[Offset],
) -> Result<(), LogError> {
    for n in names {
        let base = n
            .strip_suffix(".index")
            .or_else(|| n.strip_suffix(".timeindex"))
            .and_then(|d| parse_log_name(&format!("{d}.log")));
        if let Some(b) = base {
            if !bases.contains(&b) {
                storage.remove(&join(dir, n))?;
            }
        }
    }
    Ok(())
}

/// The recovery point checkpoint, if there is a readable one.
fn read_recovery_checkpoint<S: Storage>(
    storage: &mut S,
    dir: &str,
    rp_path: &str,
) -> Result<Option<Offset>, LogError> {
    if !storage.exists(rp_path) {
        return Ok(None);
    }
    let bytes = storage.read_all(rp_path)?;
    match checkpoint::decode_recovery_point(&bytes) {
        Ok(rp) => Ok(Some(rp)),
        Err(e) => {
            tracing::warn!(dir = %dir, error = %e, "unreadable recovery-point checkpoint; validating the whole log");
            Ok(None)
        }
    }
}

/// The leader-epoch checkpoint, if there is a readable one (else the cache is rebuilt).
fn read_epoch_checkpoint<S: Storage>(
    storage: &mut S,
    dir: &str,
) -> Result<Option<EpochCache>, LogError> {
    let ep_path = join(dir, EPOCH_CHECKPOINT);
    if !storage.exists(&ep_path) {
        return Ok(None);
    }
    match EpochCache::decode(&storage.read_all(&ep_path)?) {
        Ok(c) => Ok(Some(c)),
        Err(e) => {
            tracing::warn!(dir = %dir, error = %e, "unreadable leader-epoch checkpoint; rebuilding it");
            Ok(None)
        }
    }
}

/// A validated segment's fault (cut point, reason, file length): where it stopped being
/// valid, or its end when it does not end where the next segment begins.
fn segment_fault(v: &Validated, expected_end: Option<Offset>) -> Option<(u64, String, u64)> {
    if let Some((pos, reason)) = &v.fault {
        return Some((*pos, reason.clone(), v.file_len));
    }
    let next = expected_end?;
    (v.seg.next_offset != next).then(|| {
        let reason = format!(
            "segment ends at offset {} but the next segment starts at {next}",
            v.seg.next_offset
        );
        (v.seg.size, reason, v.file_len)
    })
}

/// Logs what recovery did: a warning when it cut the tail, else a debug line.
fn trace_summary(dir: &str, summary: &RecoverySummary) {
    let leo = summary.log_end_offset;
    if summary.bytes_truncated > 0 || summary.corruption.is_some() {
        tracing::warn!(
            dir = %dir,
            bytes_truncated = summary.bytes_truncated,
            batches_truncated = summary.batches_truncated,
            segments_deleted = summary.segments_deleted,
            corruption = summary.corruption.is_some(),
            reason = summary.truncation_reason.as_deref().unwrap_or(""),
            log_end_offset = leo,
            "log recovery cut the log tail"
        );
    } else {
        tracing::debug!(
            dir = %dir,
            batches_validated = summary.batches_validated,
            log_end_offset = leo,
            "log recovered cleanly"
        );
    }
}

impl<S: Storage> PartitionLog<S> {
    /// Opens (or creates) the log in `dir`, recovering from any crash. See docs/format.md.
    pub fn open(
        mut storage: S,
        dir: &str,
        config: LogConfig,
    ) -> Result<(Self, RecoverySummary), LogError> {
        config.validate()?;
        let dir = dir.trim_end_matches('/').to_string();
        compact::finish_swaps(&mut storage, &dir)?;
        let clean = compact::read_clean_state(&mut storage, &dir)?;
        let names = storage.list(&dir)?;
        let bases: Vec<Offset> = names.iter().filter_map(|n| parse_log_name(n)).collect();
        remove_orphan_indexes(&mut storage, &dir, &names, &bases)?;
        let mut summary = RecoverySummary::default();
        let rp_path = join(&dir, RECOVERY_CHECKPOINT);
        let ck_rp = read_recovery_checkpoint(&mut storage, &dir, &rp_path)?;
        summary.recovery_point = ck_rp;
        let epochs = read_epoch_checkpoint(&mut storage, &dir)?;

        let mut log = PartitionLog {
            storage,
            dir,
            config,
            segments: Vec::new(),
            epochs: EpochCache::default(),
            recovery_point: 0,
            persisted_recovery_point: ck_rp,
            failed: None,
            recovery_path: rp_path.clone(),
            rp_journal_lines: 0,
            scratch: Vec::new(),
            read_buf: Vec::new(),
            batch_scratch: Vec::new(),
            raw_scratch: Vec::new(),
            clean,
            layout_version: 0,
        };

        if bases.is_empty() {
            log.open_empty(ck_rp, epochs.is_some())?;
            return Ok((log, summary));
        }

        let first = bases[0];
        let rp = ck_rp.unwrap_or(first).max(first);
        let rebuild_epochs = epochs.is_none();
        summary.epoch_cache_rebuilt = rebuild_epochs;
        let found = log.recover_segments(&bases, rp, rebuild_epochs, &mut summary)?;
        if let Some((i, _)) = found.cut {
            log.delete_segments(&bases[i + 1..], &mut summary)?;
        }
        // Persist rebuilt indexes of validated segments.
        for idx in found.validated {
            log.rewrite_indexes(idx)?;
            log.segments[idx].dirty = true;
        }

        let leo = log.log_end_offset();
        if summary.corruption.is_none() && found.cut.is_none() {
            log.check_end_reaches(rp, leo, &mut summary)?;
        }
        let mut cache = epochs.unwrap_or_default();
        for (e, o) in found.epochs {
            cache.assign(e, o);
        }
        cache.truncate_from_start(log.log_start_offset());
        cache.truncate_from_end(leo);
        log.epochs = cache;
        log.write_epoch_checkpoint()?;
        log.recovery_point = rp.min(leo);
        log.flush()?;
        log.debug_check();
        // What recovery promises: everything kept is durable, and the epoch cache names
        // only batches in the log.
        debug_assert_eq!(log.flushed_offset(), leo, "recovered and flushed");
        debug_assert!(log.latest_epoch_start().is_none_or(|o| o < leo));
        summary.segments = log.segments.len();
        summary.log_start_offset = log.log_start_offset();
        summary.log_end_offset = leo;
        trace_summary(&log.dir, &summary);
        Ok((log, summary))
    }

    /// A log with no segment files yet: its first segment (an epoch checkpoint that was
    /// there is written back). A recovery point above 0 means the segments were lost.
    fn open_empty(&mut self, ck_rp: Option<Offset>, had_epochs: bool) -> Result<(), LogError> {
        if ck_rp.is_some_and(|rp| rp > 0) {
            return Err(corrupt(
                &self.dir,
                0,
                ck_rp.unwrap_or(0),
                "recovery point checkpoint present but no segment files",
            ));
        }
        self.create_segment(0)?;
        if had_epochs {
            self.write_epoch_checkpoint()?;
        }
        self.flush()
    }

    /// Loads or validates the segments in order: those wholly below the recovery point
    /// are trusted (their indexes are loaded); the one holding it and all later ones are
    /// validated batch by batch, up to the first fault, which is cut there.
    fn recover_segments(
        &mut self,
        bases: &[Offset],
        rp: Offset,
        rebuild_epochs: bool,
        summary: &mut RecoverySummary,
    ) -> Result<Recovered, LogError> {
        let k = bases.partition_point(|&b| b <= rp).saturating_sub(1);
        let mut found = Recovered::default();
        for (i, &base) in bases.iter().enumerate() {
            let expected_end = bases.get(i + 1).copied();
            let mut trusted = None;
            if i < k {
                trusted = self.load_trusted(base, expected_end.unwrap_or(base))?;
            }
            let (seg, fault) = match trusted {
                Some(seg) => {
                    if rebuild_epochs {
                        found.epochs.extend(self.scan_epochs(&seg)?);
                    }
                    (seg, None)
                }
                None => {
                    // The segment holding the recovery point resumes from it (when the
                    // epoch checkpoint is sound, so no epochs below it need finding).
                    let resume = (i == k && !rebuild_epochs && rp > base).then_some(rp);
                    let v = self.validate_segment(base, resume)?;
                    found.validated.push(i);
                    summary.segments_validated += 1;
                    summary.batches_validated += v.batches;
                    summary.bytes_validated += v.bytes;
                    found.epochs.extend(v.epochs.iter().copied());
                    let mut v = v;
                    if v.fault.is_none() {
                        // A cleaned segment may end in a gap (its last records compacted).
                        if let Some(end) = expected_end.filter(|&e| {
                            offset_follows(v.seg.next_offset, e, self.clean.clean_point)
                        }) {
                            v.seg.next_offset = end;
                        }
                    }
                    let fault = segment_fault(&v, expected_end);
                    (v.seg, fault)
                }
            };
            let path = seg.log_path().to_owned();
            let end = seg.next_offset;
            self.segments.push(seg);
            if let Some((pos, reason, file_len)) = fault {
                self.cut_at_fault(&path, (pos, reason, file_len), end, rp, summary)?;
                found.cut = Some((i, end));
                break;
            }
        }
        Ok(found)
    }

    /// Cuts segment `path` (ending at offset `end`) at its fault: a torn tail, or, if
    /// flushed data is bad or valid data follows, corruption (an error unless the config
    /// truncates on corruption).
    fn cut_at_fault(
        &mut self,
        path: &str,
        (pos, reason, file_len): (u64, String, u64),
        end: Offset,
        rp: Offset,
        summary: &mut RecoverySummary,
    ) -> Result<(), LogError> {
        let follows = self.valid_batch_follows(path, pos, file_len)?;
        let is_corruption = end < rp || follows;
        let why = if end < rp {
            format!("{reason} (below the recovery point {rp})")
        } else if follows {
            format!("{reason} (valid data follows)")
        } else {
            reason.clone()
        };
        if is_corruption {
            if !self.config.truncate_on_corruption {
                tracing::error!(path = %path, pos, offset = end, reason = %why, "corrupt log segment");
                return Err(corrupt(path, pos, end, why));
            }
            summary.corruption = Some(CorruptionReport {
                path: path.to_owned(),
                pos,
                offset: end,
                reason: why.clone(),
            });
        }
        crate::probe!(LogRecoveryTruncated);
        summary.truncation_reason = Some(why);
        summary.bytes_truncated += file_len.saturating_sub(pos);
        summary.batches_truncated += self.count_batches(path, pos, file_len)?;
        if file_len > pos {
            self.storage.truncate(path, pos)?;
        }
        Ok(())
    }

    /// Deletes the segments after a cut, counting what they held as truncated.
    fn delete_segments(
        &mut self,
        bases: &[Offset],
        summary: &mut RecoverySummary,
    ) -> Result<(), LogError> {
        for &b in bases {
            let path = join(&self.dir, &log_name(b));
            let len = self.storage.len(&path)?;
            summary.bytes_truncated += len;
            summary.batches_truncated += self.count_batches(&path, 0, len)?;
            summary.segments_deleted += 1;
            self.remove_segment_files(&Segment::new(&self.dir, b))?;
        }
        Ok(())
    }

    /// A log that recovered cleanly must reach its recovery point: ending below it is
    /// corruption.
    fn check_end_reaches(
        &self,
        rp: Offset,
        leo: Offset,
        summary: &mut RecoverySummary,
    ) -> Result<(), LogError> {
        if leo >= rp {
            return Ok(());
        }
        let why = format!("recovered log ends at {leo}, below the recovery point {rp}");
        let path = self
            .segments
            .last()
            .map(|s| s.log_path().to_owned())
            .unwrap_or_default();
        if !self.config.truncate_on_corruption {
            return Err(corrupt(&path, 0, leo, why));
        }
        summary.corruption = Some(CorruptionReport {
            path,
            pos: 0,
            offset: leo,
            reason: why,
        });
        Ok(())
    }

    /// Loads a segment wholly below the recovery point from its index files, or None if
    /// they are unusable (then it gets validated instead).
    fn load_trusted(&mut self, base: Offset, end: Offset) -> Result<Option<Segment>, LogError> {
        let mut seg = Segment::new(&self.dir, base);
        let size = self.storage.len(seg.log_path())?;
        let read = |s: &mut S, p: &str| -> Result<Option<Vec<u8>>, StorageError> {
            if s.exists(p) {
                s.read_all(p).map(Some)
            } else {
                Ok(None)
            }
        };
        let idx = read(&mut self.storage, seg.index_path())?;
        let tidx = read(&mut self.storage, seg.time_index_path())?;
        let (Some(idx), Some(tidx)) = (idx, tidx) else {
            return Ok(None);
        };
        if end <= base || !seg.load_indexes(&idx, &tidx, size, end) {
            return Ok(None);
        }
        // Cheap end check: walk the batches after the last index entry (at most about
        // index_interval_bytes) and require them to end exactly at the file end and at
        // the next segment's base. Anything else gets the segment fully validated.
        let (mut expected, pos) = seg.lookup(Offset::MAX);
        let path = seg.log_path().to_owned();
        let mut r = SegReader::new(&path, pos, size, SCAN_CHUNK);
        let mut tail_max = TimestampMs::MIN;
        loop {
            match r.next(&mut self.storage)? {
                Step::End => break,
                Step::Fault { .. } => return Ok(None),
                Step::Batch { pos, header, len } => {
                    let ok = offset_follows(expected, header.base_offset, self.clean.clean_point)
                        && header.record_count > 0
                        && verify_crc(r.bytes(pos, len)).is_ok();
                    if !ok {
                        return Ok(None);
                    }
                    tail_max = tail_max.max(header.max_timestamp);
                    seg.last_batch_base = Some(header.base_offset);
                    expected = header.next_offset();
                }
            }
        }
        // The last time entry is taken as the segment's maximum (retention trusts it), so
        // it must at least cover the tail's timestamps.
        let time_ok = seg.time_index.last().is_some_and(|t| t.ts >= tail_max);
        if !offset_follows(expected, end, self.clean.clean_point) || !time_ok {
            return Ok(None);
        }
        Ok(Some(seg))
    }

    /// Validates the batches of segment `base` (length, CRC, structure, offsets),
    /// rebuilding its indexes. With `resume = Some(rp)` it starts at the last synced index
    /// entry below the recovery point `rp` instead of the segment start, so a clean
    /// restart does not re-read a whole large segment; if that start looks wrong (damage
    /// below `rp` right where the index pointed), it falls back to the segment start.
    fn validate_segment(
        &mut self,
        base: Offset,
        resume: Option<Offset>,
    ) -> Result<Validated, LogError> {
        let mut seg = Segment::new(&self.dir, base);
        let path = seg.log_path().to_owned();
        let file_len = self.storage.len(&path)?;
        let start = match resume {
            Some(rp) => self.resume_point(&mut seg, rp, file_len)?,
            None => 0,
        };
        let mut r = SegReader::new(&path, start, file_len, SCAN_CHUNK);
        let mut v_epochs = Vec::new();
        let mut batches = 0;
        let fault = loop {
            let expected = seg.next_offset;
            match r.next(&mut self.storage)? {
                Step::End => break None,
                Step::Fault { pos, reason } => break Some((pos, reason)),
                Step::Batch { pos, header, len } => {
                    if !offset_follows(expected, header.base_offset, self.clean.clean_point) {
                        break Some((
                            pos,
                            format!(
                                "batch has base offset {}, expected {expected}",
                                header.base_offset
                            ),
                        ));
                    }
                    let bytes = r.bytes(pos, len);
                    let b = match RecordBatch::decode(bytes) {
                        Ok((b, _)) => b,
                        Err(e) => break Some((pos, e.to_string())),
                    };
                    if let Some(reason) = structural_problem(&b) {
                        break Some((pos, reason));
                    }
                    if seg.next_offset - seg.base + b.records.len() as u64 > u32::MAX as u64 {
                        break Some((pos, "relative offset overflows the segment".into()));
                    }
                    v_epochs.push((header.partition_leader_epoch, header.base_offset));
                    seg.push_batch(pos, &header, self.config.index_interval_bytes);
                    batches += 1;
                }
            }
        };
        if let (Some(rp), Some((pos, reason))) = (resume, &fault) {
            if start > 0 && seg.next_offset < rp {
                tracing::debug!(path = %path, pos, %reason, "resumed validation failed below the recovery point; validating the whole segment");
                return self.validate_segment(base, None);
            }
        }
        if fault.is_none() {
            // Not the active segment if more follow; make its time index exact either way.
            if let Some(t) = seg.final_time_entry() {
                seg.time_index.push(t);
            }
        }
        Ok(Validated {
            bytes: seg.size - start,
            seg,
            batches,
            epochs: v_epochs,
            fault,
            file_len,
        })
    }

    /// Sets `seg` up as if it had been scanned up to its last index entry below `rp`
    /// (entries that far were synced by the flush that recorded `rp`) and returns that
    /// entry's byte position, or 0 (scan everything) if the index files give none.
    fn resume_point(
        &mut self,
        seg: &mut Segment,
        rp: Offset,
        file_len: u64,
    ) -> Result<u64, LogError> {
        let (ip, tp) = (seg.index_path(), seg.time_index_path());
        if !self.storage.exists(ip) || !self.storage.exists(tp) {
            return Ok(0);
        }
        let (idx, tidx) = (self.storage.read_all(ip)?, self.storage.read_all(tp)?);
        let base = seg.base;
        let mut index: Vec<IndexEntry> = Vec::new();
        for c in idx.chunks_exact(INDEX_ENTRY_LEN) {
            let e = IndexEntry::decode(c);
            let ok = index.last().is_none_or(|p| e.rel > p.rel && e.pos > p.pos)
                && (e.pos as u64) < file_len
                // Strictly below: the batch at `rp` itself came after that flush.
                && base + (e.rel as u64) < rp;
            if !ok {
                break;
            }
            index.push(e);
        }
        let Some(last) = index.pop() else {
            return Ok(0);
        };
        let mut time_index: Vec<TimeEntry> = Vec::new();
        for c in tidx.chunks_exact(TIME_ENTRY_LEN) {
            let t = TimeEntry::decode(c);
            let ok = time_index
                .last()
                .is_none_or(|p| t.ts > p.ts && t.rel >= p.rel)
                && t.rel <= last.rel;
            if !ok {
                break;
            }
            time_index.push(t);
        }
        // The running maximum through the batch at `last` is its time entry, if any, or
        // the previous one (entries are written at index points when the maximum grows).
        seg.max_timestamp = time_index.last().map(|t| t.ts);
        seg.index = index;
        seg.time_index = time_index;
        seg.size = last.pos as u64;
        seg.next_offset = base + last.rel as u64;
        // Re-index the batch at `last` when it is scanned again.
        seg.bytes_since_index = self.config.index_interval_bytes;
        Ok(last.pos as u64)
    }

    /// Epochs of a trusted segment's batches (when the epoch checkpoint must be rebuilt).
    fn scan_epochs(&mut self, seg: &Segment) -> Result<Vec<(LeaderEpoch, Offset)>, LogError> {
        let mut r = SegReader::new(seg.log_path(), 0, seg.size, SCAN_CHUNK);
        let mut out: Vec<(LeaderEpoch, Offset)> = Vec::new();
        loop {
            match r.next(&mut self.storage)? {
                Step::End => return Ok(out),
                Step::Fault { pos, reason } => {
                    return Err(corrupt(r.path(), pos, seg.base, reason))
                }
                Step::Batch { header, .. } => {
                    if out
                        .last()
                        .is_none_or(|&(e, _)| header.partition_leader_epoch > e)
                    {
                        out.push((header.partition_leader_epoch, header.base_offset));
                    }
                }
            }
        }
    }

    /// Whether a CRC-valid batch starts right after the (bad) batch at `pos`: a torn write
    /// only ever loses a suffix, so valid data after bad data means corruption.
    fn valid_batch_follows(
        &mut self,
        path: &str,
        pos: u64,
        file_len: u64,
    ) -> Result<bool, LogError> {
        if pos + (BATCH_HEADER_LEN as u64) > file_len {
            return Ok(false);
        }
        let mut hdr = vec![0u8; BATCH_HEADER_LEN];
        self.storage.read_exact_at(path, pos, &mut hdr)?;
        let Ok(h) = BatchHeader::parse(&hdr) else {
            return Ok(false);
        };
        let next = pos + h.total_len() as u64;
        if next >= file_len {
            return Ok(false);
        }
        let mut r = SegReader::new(path, next, file_len, SCAN_CHUNK);
        match r.next(&mut self.storage)? {
            Step::Batch { pos, len, .. } => Ok(RecordBatch::decode(r.bytes(pos, len)).is_ok()),
            _ => Ok(false),
        }
    }

    /// Best-effort count of batches in a cut region (a partial one counts).
    fn count_batches(&mut self, path: &str, pos: u64, file_len: u64) -> Result<u64, LogError> {
        if pos >= file_len {
            return Ok(0);
        }
        let mut r = SegReader::new(path, pos, file_len, SCAN_CHUNK);
        let mut n = 0;
        loop {
            match r.next(&mut self.storage)? {
                Step::End => return Ok(n),
                Step::Fault { .. } => return Ok(n + 1),
                Step::Batch { .. } => n += 1,
            }
        }
    }
}

/// Problems a CRC-valid batch can still have that the log refuses.
fn structural_problem(b: &RecordBatch) -> Option<String> {
    if b.records.is_empty() {
        return Some("batch has no records".into());
    }
    b.records
        .iter()
        .enumerate()
        .find(|(i, r)| r.offset_delta != *i as u32)
        .map(|(i, r)| format!("record {i} has offset delta {}", r.offset_delta))
}
