//! What the log offers its cleaner ([`crate::log::cleaner`]): which segments may be
//! cleaned, the clean point and its checkpoint, and the crash-safe swap of a cleaned
//! segment. The swap, as Kafka's: the cleaned copy is written as `<base>.log.cleaned`
//! (appends, many cleaner steps), synced, then committed by writing the marker
//! `<base>.log.swap`; only then is `<base>.log` replaced (atomically) and its indexes
//! rewritten, and the two temporary files removed, marker last. Recovery on open finishes
//! a committed swap from the cleaned copy and discards an uncommitted one, so a
//! half-written cleaned segment is never read.

use super::*;
use crate::log::compaction::CLEANER_CHECKPOINT;
use crate::log::crc::crc32;
use crate::log::segment::log_name;

const CLEANED_SUFFIX: &str = ".cleaned";
const SWAP_SUFFIX: &str = ".swap";

fn cleaned_path(dir: &str, base: Offset) -> String {
    join(dir, &format!("{}{CLEANED_SUFFIX}", log_name(base)))
}

fn swap_path(dir: &str, base: Offset) -> String {
    join(dir, &format!("{}{SWAP_SUFFIX}", log_name(base)))
}

/// The swap marker: the cleaned copy's length and CRC, so recovery only ever copies a
/// complete cleaned segment.
fn marker(data: &[u8]) -> Vec<u8> {
    format!("{} {}\n", data.len(), crc32(data)).into_bytes()
}

/// Recovery's first step: every committed swap (a marker whose cleaned copy checks out)
/// is finished, its old index files removed so that recovery validates the segment and
/// rebuilds them; every other temporary file of the cleaner is removed.
pub(super) fn finish_swaps<S: Storage>(storage: &mut S, dir: &str) -> Result<(), LogError> {
    let names = storage.list(dir)?;
    for n in &names {
        let Some(log) = n.strip_suffix(SWAP_SUFFIX) else {
            continue;
        };
        let Some(base) = crate::log::segment::parse_log_name(log) else {
            continue;
        };
        let (swap, cleaned) = (swap_path(dir, base), cleaned_path(dir, base));
        let want = storage.read_all(&swap)?;
        let data = if storage.exists(&cleaned) {
            storage.read_all(&cleaned)?
        } else {
            Vec::new()
        };
        if storage.exists(&cleaned) && marker(&data) == want {
            tracing::info!(
                dir,
                base,
                "finishing a committed segment swap of the cleaner"
            );
            storage.write_atomic(&join(dir, log), &data)?;
            let seg = Segment::new(dir, base);
            storage.remove(seg.index_path())?;
            storage.remove(seg.time_index_path())?;
        } else {
            // The marker is written after the copy is synced: a mismatch is damage to the
            // temporary files, and the old segment is still whole.
            tracing::warn!(
                dir,
                base,
                "discarding a swap marker whose cleaned copy does not match"
            );
        }
        storage.remove(&cleaned)?;
        storage.remove(&swap)?;
    }
    for n in storage.list(dir)? {
        if n.ends_with(CLEANED_SUFFIX) {
            storage.remove(&join(dir, &n))?;
        }
    }
    Ok(())
}

/// The cleaner checkpoint (default when absent: nothing cleaned, the log dense).
pub(super) fn read_clean_state<S: Storage>(
    storage: &mut S,
    dir: &str,
) -> Result<CleanState, LogError> {
    let path = join(dir, CLEANER_CHECKPOINT);
    if !storage.exists(&path) {
        return Ok(CleanState::default());
    }
    let bytes = storage.read_all(&path)?;
    CleanState::decode(&bytes).map_err(|e| corrupt(&path, 0, 0, format!("cleaner checkpoint: {e}")))
}

/// A segment the cleaner may rewrite: `[base, end)`, `size` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CleanableSegment {
    pub base: Offset,
    pub end: Offset,
    pub size: u64,
}

impl<S: Storage> PartitionLog<S> {
    /// The cleaner checkpoint's state.
    pub fn clean_state(&self) -> &CleanState {
        &self.clean
    }

    /// Changes whenever segments are cut or removed (a cleaning in progress restarts).
    pub fn layout_version(&self) -> u64 {
        self.layout_version
    }

    /// The segments the cleaner may rewrite now, oldest first: never the active one, none
    /// holding an offset at or past `below` (the high watermark or last stable offset),
    /// none holding a record younger than `min_compaction_lag_ms`. They run from the log
    /// start without a hole; the first segment that fails a rule ends the list.
    pub fn cleanable_segments(
        &self,
        now_ms: TimestampMs,
        below: Offset,
        min_compaction_lag_ms: i64,
    ) -> Vec<CleanableSegment> {
        let active = self.segments.len() - 1;
        self.segments[..active]
            .iter()
            .take_while(|s| {
                let old = s
                    .max_timestamp
                    .is_none_or(|m| m <= now_ms.saturating_sub(min_compaction_lag_ms));
                s.next_offset <= below && old
            })
            .map(|s| CleanableSegment {
                base: s.base,
                end: s.next_offset,
                size: s.size,
            })
            .collect()
    }

    /// The uncleaned share of the cleanable bytes, in thousandths (Kafka's dirty ratio):
    /// a segment counts as dirty when it ends past the clean point. None: nothing dirty.
    pub fn dirty_ratio_permille(&self, cleanable: &[CleanableSegment]) -> Option<u16> {
        let total: u64 = cleanable.iter().map(|s| s.size).sum();
        let dirty: u64 = cleanable
            .iter()
            .filter(|s| s.end > self.clean.clean_point)
            .map(|s| s.size)
            .sum();
        (dirty > 0).then(|| (dirty * 1000 / total.max(1)) as u16)
    }

    /// Records, durably, that everything below `end` has been through the cleaner, as a
    /// cleaning at `now_ms` (whose tombstones' `delete.retention.ms` starts now). Done
    /// before the first swap of the cleaning: from then on gaps below `end` are legal.
    pub fn begin_cleaning(&mut self, end: Offset, now_ms: TimestampMs) -> Result<(), LogError> {
        self.check_usable()?;
        let retention = self.config.compaction.map_or(0, |c| c.delete_retention_ms);
        let mut next = self.clean.clone();
        next.cleaned(end, now_ms, now_ms.saturating_sub(retention));
        self.write_clean_state(next)
    }

    /// Appends one cleaned batch (already encoded) to segment `base`'s cleaned copy;
    /// `first` starts the copy afresh.
    pub fn write_cleaned(
        &mut self,
        base: Offset,
        bytes: &[u8],
        first: bool,
    ) -> Result<(), LogError> {
        self.check_usable()?;
        let path = cleaned_path(&self.dir, base);
        if first && self.storage.exists(&path) {
            self.storage.truncate(&path, 0)?;
        }
        self.storage.append(&path, bytes)?;
        Ok(())
    }

    /// Removes every cleaned copy not yet committed (a cleaning given up).
    pub fn discard_cleaned(&mut self) -> Result<(), LogError> {
        for n in self.storage.list(&self.dir)? {
            if n.ends_with(CLEANED_SUFFIX) {
                let p = join(&self.dir, &n);
                self.storage.remove(&p)?;
            }
        }
        Ok(())
    }

    /// Replaces segment `base` with its cleaned copy: sync the copy, commit it (the swap
    /// marker), replace the segment file atomically, rewrite its indexes, remove the
    /// temporary files. A storage failure after the commit leaves the log failed: the
    /// reopen finishes the swap. The segment keeps its base and end offsets.
    pub fn commit_cleaned(&mut self, base: Offset) -> Result<(), LogError> {
        self.check_usable()?;
        let idx = self
            .segments
            .iter()
            .position(|s| s.base == base)
            .filter(|&i| i + 1 < self.segments.len())
            .ok_or_else(|| LogError::InvalidConfig(format!("no inactive segment at {base}")))?;
        let (cleaned, swap) = (cleaned_path(&self.dir, base), swap_path(&self.dir, base));
        let data = if self.storage.exists(&cleaned) {
            self.storage.sync(&cleaned)?;
            self.storage.read_all(&cleaned)?
        } else {
            Vec::new()
        };
        let end = self.segments[idx].next_offset;
        let seg = self.index_cleaned(base, end, &data)?;
        self.storage.write_atomic(&swap, &marker(&data))?;
        let r = (|| {
            if !self.storage.exists(&cleaned) {
                // An empty copy (every record compacted away) was never appended to.
                self.storage.append(&cleaned, &[])?;
                self.storage.sync(&cleaned)?;
            }
            self.storage.write_atomic(seg.log_path(), &data)?;
            self.storage
                .write_atomic(seg.index_path(), &seg.encode_index())?;
            self.storage
                .write_atomic(seg.time_index_path(), &seg.encode_time_index())?;
            self.storage.remove(&cleaned)?;
            self.storage.remove(&swap)
        })();
        if let Err(e) = r {
            self.failed = Some(format!("segment swap at {base} failed midway: {e}"));
            return Err(e.into());
        }
        self.segments[idx] = seg;
        self.debug_check();
        Ok(())
    }

    /// The in-memory segment for a cleaned copy of `[base, end)`: its batches walked
    /// (checked: they were written by this process, but a copy must never be trusted
    /// unread), its indexes built, its end kept at `end`.
    fn index_cleaned(
        &mut self,
        base: Offset,
        end: Offset,
        data: &[u8],
    ) -> Result<Segment, LogError> {
        let mut seg = Segment::new(&self.dir, base);
        let mut pos = 0usize;
        let clean_point = self.clean.clean_point;
        while pos < data.len() {
            let h = verify_crc(&data[pos..])
                .map_err(|e| corrupt(seg.log_path(), pos as u64, seg.next_offset, e.to_string()))?;
            let ok = offset_follows(seg.next_offset, h.base_offset, clean_point)
                && h.next_offset() <= end
                && h.record_count > 0;
            if !ok {
                return Err(corrupt(
                    seg.log_path(),
                    pos as u64,
                    seg.next_offset,
                    "cleaned batch out of place",
                ));
            }
            seg.push_batch(pos as u64, &h, self.config.index_interval_bytes);
            pos += h.total_len();
        }
        if let Some(t) = seg.final_time_entry() {
            seg.time_index.push(t);
        }
        if !offset_follows(seg.next_offset, end, clean_point) {
            return Err(corrupt(
                seg.log_path(),
                pos as u64,
                seg.next_offset,
                "cleaned segment ends in a gap above the clean point",
            ));
        }
        seg.next_offset = end;
        Ok(seg)
    }

    /// Lowers the clean point to `to` (a truncation), durably before the cut.
    pub(super) fn lower_clean_point(&mut self, to: Offset) -> Result<(), LogError> {
        if self.clean.clean_point <= to {
            return Ok(());
        }
        let mut next = self.clean.clone();
        next.lower(to);
        self.write_clean_state(next)
    }

    /// Raises the clean point to `to` (a follower copying past a gap), durably.
    pub(super) fn raise_clean_point(&mut self, to: Offset) -> Result<(), LogError> {
        if self.clean.clean_point >= to {
            return Ok(());
        }
        // The copied range was never cleaned here: its tombstones' clock starts with the
        // next cleaning that covers it.
        let mut next = self.clean.clone();
        next.clean_point = to;
        self.write_clean_state(next)
    }

    fn write_clean_state(&mut self, next: CleanState) -> Result<(), LogError> {
        let path = join(&self.dir, CLEANER_CHECKPOINT);
        self.storage.write_atomic(&path, &next.encode())?;
        self.clean = next;
        Ok(())
    }
}
