//! Peer repair: replacing one damaged batch with another replica's intact copy of it.
//!
//! A bit flip in a flushed batch makes the whole log unreadable from that batch on. Cutting
//! the log there (what a follower out of the ISR does) throws away every good batch after
//! it, and when the damaged copy is one the controller still counts on (an ISR or ELR
//! member), the cut would lose committed records. But the other replicas hold the same
//! batch: by log matching, a batch with the same base offset and the same leader epoch is
//! the same batch on every replica (a leader writes each offset once per epoch, followers
//! copy it byte for byte). So the damaged slot can be refilled with a peer's copy, and the
//! log is whole again, without losing a record. Two copies damaged at different offsets
//! (each holding what the other lacks) then repair each other.
//!
//! The rules, checked here before a byte is written:
//! - the peer's batch starts where the damaged one does (`offset`, the offset the scan
//!   expected at the damaged position) and carries the epoch this log's epoch cache gives
//!   that offset;
//! - it fills the slot exactly: the bytes right after it begin the next batch of this log
//!   (base offset = its next offset), or the segment ends right after it and the segment's
//!   next offset is its next offset. A damaged length field cannot mislead: the slot's size
//!   comes from the peer's copy, and the fit is checked against what follows;
//! - the segment file is rewritten whole with `write_atomic`, so a crash leaves either the
//!   damaged or the repaired file, never a torn one.

use super::*;

impl<S: Storage> PartitionLog<S> {
    /// Replaces the damaged batch starting at `batch.base_offset` with `batch`, another
    /// replica's intact copy (see the module docs for the checks). Fails, changing nothing,
    /// if the copy does not fit; fails with `Corrupt` if a batch before it in its segment is
    /// damaged too (repair that one first: it is the one a scan reports).
    pub fn replace_damaged(&mut self, batch: &RecordBatch) -> Result<(), LogError> {
        self.check_usable()?;
        let offset = batch.base_offset;
        let idx = self
            .segments
            .iter()
            .position(|s| s.base <= offset && offset < s.next_offset)
            .ok_or(LogError::OffsetOutOfRange {
                offset,
                log_start: self.log_start_offset(),
                log_end: self.log_end_offset(),
            })?;
        let want_epoch = self.epochs.epoch_at(offset);
        if want_epoch != Some(batch.partition_leader_epoch) {
            return Err(LogError::InvalidBatch(format!(
                "repair copy of offset {offset} has leader epoch {}, this log's epoch there is {want_epoch:?}",
                batch.partition_leader_epoch
            )));
        }
        let bytes = batch
            .encode()
            .map_err(|e| LogError::InvalidBatch(e.to_string()))?;
        let pos = self.damaged_position(idx, offset)?;
        let seg = &self.segments[idx];
        let path = seg.log_path().to_string();
        let end = pos + bytes.len() as u64;
        let fits = if end == seg.size {
            batch.next_offset() == seg.next_offset
        } else if end < seg.size {
            let mut r = SegReader::new(&path, end, seg.size, SCAN_CHUNK);
            matches!(r.next(&mut self.storage)?,
                Step::Batch { header, .. } if header.base_offset == batch.next_offset())
        } else {
            false
        };
        if !fits {
            return Err(LogError::InvalidBatch(format!(
                "repair copy of offset {offset} ({} bytes, next offset {}) does not fill the damaged slot at byte {pos} of {path}",
                bytes.len(),
                batch.next_offset()
            )));
        }
        let mut content = self.storage.read_all(&path)?;
        content.truncate(seg.size as usize);
        if content.len() < end as usize {
            return Err(corrupt(
                &path,
                pos,
                offset,
                "segment file shorter than its size",
            ));
        }
        content[pos as usize..end as usize].copy_from_slice(&bytes);
        self.storage.write_atomic(&path, &content)?;
        // The file changed under any record of verified batches.
        self.segments[idx].verified = None;
        Ok(())
    }

    /// The byte position where the batch at `offset` must start in segment `idx`: found by
    /// walking the intact batches from the nearest index entry before it.
    fn damaged_position(&mut self, idx: usize, offset: Offset) -> Result<u64, LogError> {
        let seg = &self.segments[idx];
        let (mut expected, pos) = seg.lookup(offset);
        let mut r = SegReader::new(seg.log_path(), pos, seg.size, SCAN_CHUNK);
        loop {
            if expected == offset {
                return Ok(r.pos);
            }
            if expected > offset {
                return Err(LogError::InvalidBatch(format!(
                    "no batch starts at offset {offset} in {}",
                    r.path()
                )));
            }
            let at = r.pos;
            match r.next(&mut self.storage)? {
                Step::Batch { pos, header, len } if header.base_offset == expected => {
                    check_crc(r.bytes(pos, len), &header)
                        .map_err(|e| corrupt(r.path(), pos, expected, e.to_string()))?;
                    expected = header.next_offset();
                }
                Step::Batch { pos, header, .. } => {
                    return Err(corrupt(
                        r.path(),
                        pos,
                        expected,
                        format!("batch has base offset {}", header.base_offset),
                    ))
                }
                Step::Fault { pos, reason } => {
                    return Err(corrupt(r.path(), pos, expected, reason))
                }
                Step::End => {
                    return Err(corrupt(
                        r.path(),
                        at,
                        expected,
                        "segment ends before the offset",
                    ))
                }
            }
        }
    }
}
