//! One segment of a partition log: the `<base offset>.log` file of back-to-back batches,
//! its sparse offset index and time index (kept in memory, mirrored to files), and a
//! buffered sequential reader used by reads, truncation and recovery.

use super::batch::{BatchHeader, DecodeError, BATCH_HEADER_LEN, CRC_START};
use super::crc::crc32;
use super::storage::{join, Storage, StorageError};
use crate::types::{Offset, TimestampMs};

/// Hard cap on one batch's encoded size, whatever the config says: a length field above
/// it is treated as corruption instead of being trusted for a huge read.
pub const MAX_BATCH_LEN_ON_DISK: usize = 64 << 20;

/// Offset index entry: the batch starting at `base + rel` begins at byte `pos`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IndexEntry {
    pub rel: u32,
    pub pos: u32,
}

/// Time index entry: the largest timestamp of all batches up to and including the batch
/// starting at `base + rel` is `ts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TimeEntry {
    pub ts: TimestampMs,
    pub rel: u32,
}

pub(crate) const INDEX_ENTRY_LEN: usize = 8;
pub(crate) const TIME_ENTRY_LEN: usize = 12;

impl IndexEntry {
    /// From exactly INDEX_ENTRY_LEN bytes.
    pub fn decode(c: &[u8]) -> Self {
        Self {
            rel: u32::from_be_bytes([c[0], c[1], c[2], c[3]]),
            pos: u32::from_be_bytes([c[4], c[5], c[6], c[7]]),
        }
    }
    pub fn encode(&self) -> [u8; INDEX_ENTRY_LEN] {
        let mut b = [0u8; INDEX_ENTRY_LEN];
        b[..4].copy_from_slice(&self.rel.to_be_bytes());
        b[4..].copy_from_slice(&self.pos.to_be_bytes());
        b
    }
}

impl TimeEntry {
    /// From exactly TIME_ENTRY_LEN bytes.
    pub fn decode(c: &[u8]) -> Self {
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&c[..8]);
        Self {
            ts: i64::from_be_bytes(ts),
            rel: u32::from_be_bytes([c[8], c[9], c[10], c[11]]),
        }
    }
    pub fn encode(&self) -> [u8; TIME_ENTRY_LEN] {
        let mut b = [0u8; TIME_ENTRY_LEN];
        b[..8].copy_from_slice(&self.ts.to_be_bytes());
        b[8..].copy_from_slice(&self.rel.to_be_bytes());
        b
    }
}

pub(crate) fn log_name(base: Offset) -> String {
    format!("{base:020}.log")
}

/// Parses a segment file name `<20-digit base offset>.log`.
pub(crate) fn parse_log_name(name: &str) -> Option<Offset> {
    let digits = name.strip_suffix(".log")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// In-memory state of one segment.
#[derive(Clone, Debug)]
pub(crate) struct Segment {
    pub base: Offset,
    pub next_offset: Offset,
    /// Bytes of valid batches in the file.
    pub size: u64,
    pub index: Vec<IndexEntry>,
    pub time_index: Vec<TimeEntry>,
    pub bytes_since_index: u64,
    /// Largest batch max_timestamp in the segment (exact).
    pub max_timestamp: Option<TimestampMs>,
    /// Base offset of the last batch (for the final time-index entry on roll).
    pub last_batch_base: Option<Offset>,
    /// `now_ms` of the first append since open, for rolling by age.
    pub first_append_ms: Option<TimestampMs>,
    /// Appended bytes not yet synced.
    pub dirty: bool,
    /// Index entries appended and not yet synced.
    pub index_dirty: bool,
    /// The segment's three file paths, formatted once: every append, read and flush
    /// names them, and formatting them per call was an eighth of a simulation's time.
    paths: SegPaths,
    /// Every batch of the file, when this process wrote all of them itself (the segment
    /// was created empty here): valid while the file's [`Storage::generation`] is the one
    /// recorded, i.e. while no byte of it can have changed since it was written.
    pub verified: Option<Verified>,
}

/// The batches of a segment known intact: nothing but this log's appends touched the file
/// since generation `gen` began, so each batch would pass every check a read makes (its
/// header, offsets, CRC) exactly as when it was encoded. A read uses it to start at the
/// batch holding the offset asked for instead of checking each batch from the sparse index
/// entry before it: the same answer and the same errors (none), fewer instructions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Verified {
    pub gen: u64,
    /// (base offset, byte position) of each batch, in file order.
    pub starts: Vec<(Offset, u64)>,
}

impl Verified {
    /// The batch holding `offset` (or the first batch, if it is below them all).
    pub fn lookup(&self, offset: Offset) -> Option<(Offset, u64)> {
        // Most reads ask for one of the last few batches (followers and consumers near
        // the log end): search back from the end in doubling steps, then bisect the last
        // step, instead of bisecting the whole segment from its middle.
        let s = &self.starts;
        let (mut lo, mut hi, mut step) = (0, s.len(), 1);
        while step <= hi {
            let i = hi - step;
            if s[i].0 <= offset {
                lo = i + 1;
                break;
            }
            hi = i;
            step *= 2;
        }
        let i = lo + s[lo..hi].partition_point(|(o, _)| *o <= offset);
        debug_assert_eq!(i, s.partition_point(|(o, _)| *o <= offset));
        s.get(i.saturating_sub(1)).copied()
    }
}

#[derive(Clone, Debug)]
struct SegPaths {
    log: String,
    index: String,
    time_index: String,
}

impl Segment {
    /// A new, empty segment at `base` whose files live in `dir`.
    pub fn new(dir: &str, base: Offset) -> Self {
        let paths = SegPaths {
            log: join(dir, &log_name(base)),
            index: join(dir, &format!("{base:020}.index")),
            time_index: join(dir, &format!("{base:020}.timeindex")),
        };
        Self {
            paths,
            base,
            next_offset: base,
            size: 0,
            index: Vec::new(),
            time_index: Vec::new(),
            bytes_since_index: 0,
            max_timestamp: None,
            last_batch_base: None,
            first_append_ms: None,
            dirty: false,
            index_dirty: false,
            verified: None,
        }
    }

    /// Whether [`Self::verified`] still holds, given the file's current generation.
    pub fn verified_at(&self, gen: Option<u64>) -> Option<&Verified> {
        self.verified.as_ref().filter(|v| Some(v.gen) == gen)
    }

    pub fn log_path(&self) -> &str {
        &self.paths.log
    }
    pub fn index_path(&self) -> &str {
        &self.paths.index
    }
    pub fn time_index_path(&self) -> &str {
        &self.paths.time_index
    }

    pub fn is_empty(&self) -> bool {
        self.next_offset == self.base
    }

    /// Records a batch written at `pos`; returns index entries to persist.
    pub fn push_batch(
        &mut self,
        pos: u64,
        h: &BatchHeader,
        interval: u64,
    ) -> (Option<IndexEntry>, Option<TimeEntry>) {
        // Past a gap only in a compacted log (the callers check the clean point).
        debug_assert!(h.base_offset >= self.next_offset);
        debug_assert_eq!(pos, self.size);
        let len = h.total_len() as u64;
        let rel = (h.base_offset - self.base) as u32;
        let max = self
            .max_timestamp
            .map_or(h.max_timestamp, |m| m.max(h.max_timestamp));
        self.max_timestamp = Some(max);
        self.bytes_since_index += len;
        let mut out = (None, None);
        if self.bytes_since_index >= interval {
            let e = IndexEntry {
                rel,
                pos: pos as u32,
            };
            self.index.push(e);
            out.0 = Some(e);
            if self.time_index.last().is_none_or(|t| max > t.ts) {
                let t = TimeEntry { ts: max, rel };
                self.time_index.push(t);
                out.1 = Some(t);
            }
            self.bytes_since_index = 0;
        }
        self.size = pos + len;
        self.next_offset = h.next_offset();
        self.last_batch_base = Some(h.base_offset);
        if let Some(v) = self.verified.as_mut() {
            v.starts.push((h.base_offset, pos));
        }
        out
    }

    /// The time-index entry that makes the last one exact when the segment goes inactive.
    pub fn final_time_entry(&self) -> Option<TimeEntry> {
        let (max, last) = (self.max_timestamp?, self.last_batch_base?);
        self.time_index
            .last()
            .is_none_or(|t| max > t.ts)
            .then_some(TimeEntry {
                ts: max,
                rel: (last - self.base) as u32,
            })
    }

    /// Largest indexed batch start `<= offset`: (its offset, its byte position).
    pub fn lookup(&self, offset: Offset) -> (Offset, u64) {
        let i = self
            .index
            .partition_point(|e| self.base + e.rel as u64 <= offset);
        if i == 0 {
            (self.base, 0)
        } else {
            let e = self.index[i - 1];
            (self.base + e.rel as u64, e.pos as u64)
        }
    }

    /// Where to start scanning for the first batch with a timestamp >= ts.
    pub fn time_lookup(&self, ts: TimestampMs) -> (Offset, u64) {
        let i = self.time_index.partition_point(|t| t.ts < ts);
        if i == 0 {
            (self.base, 0)
        } else {
            self.lookup(self.base + self.time_index[i - 1].rel as u64)
        }
    }

    pub fn encode_index(&self) -> Vec<u8> {
        self.index.iter().flat_map(|e| e.encode()).collect()
    }
    pub fn encode_time_index(&self) -> Vec<u8> {
        self.time_index.iter().flat_map(|e| e.encode()).collect()
    }

    /// Loads index files written for this segment, checking they are consistent with a
    /// segment of `size` bytes ending at `end`. Returns false if they are unusable.
    pub fn load_indexes(&mut self, idx: &[u8], tidx: &[u8], size: u64, end: Offset) -> bool {
        if !idx.len().is_multiple_of(INDEX_ENTRY_LEN) || !tidx.len().is_multiple_of(TIME_ENTRY_LEN)
        {
            return false;
        }
        let span = end - self.base;
        let mut index = Vec::with_capacity(idx.len() / INDEX_ENTRY_LEN);
        for c in idx.chunks_exact(INDEX_ENTRY_LEN) {
            let e = IndexEntry::decode(c);
            let ordered = index
                .last()
                .is_none_or(|p: &IndexEntry| e.rel > p.rel && e.pos > p.pos);
            if !ordered || e.rel as u64 >= span || e.pos as u64 >= size {
                return false;
            }
            index.push(e);
        }
        let mut time_index = Vec::with_capacity(tidx.len() / TIME_ENTRY_LEN);
        for c in tidx.chunks_exact(TIME_ENTRY_LEN) {
            let e = TimeEntry::decode(c);
            let ordered = time_index
                .last()
                .is_none_or(|p: &TimeEntry| e.ts > p.ts && e.rel >= p.rel);
            if !ordered || e.rel as u64 >= span {
                return false;
            }
            time_index.push(e);
        }
        // An inactive non-empty segment always ends with an exact time entry.
        if size > 0 && time_index.is_empty() {
            return false;
        }
        self.index = index;
        self.max_timestamp = time_index.last().map(|t| t.ts);
        self.time_index = time_index;
        self.size = size;
        self.next_offset = end;
        true
    }
}

/// The check [`super::batch::verify_crc`] makes, for a batch whose header `h` a
/// [`SegReader`] parsed from these very `bytes` (exactly the batch): a scan walks every
/// batch from the sparse index entry on, and parsing each header a second time cost
/// about as much as the CRC itself.
pub(crate) fn check_crc(bytes: &[u8], h: &BatchHeader) -> Result<(), DecodeError> {
    debug_assert_eq!(bytes.len(), h.total_len());
    let computed = crc32(&bytes[CRC_START..]);
    if computed != h.crc {
        return Err(DecodeError::CrcMismatch {
            stored: h.crc,
            computed,
        });
    }
    Ok(())
}

/// One step of a sequential scan over a segment file.
pub(crate) enum Step {
    End,
    Batch {
        pos: u64,
        header: BatchHeader,
        len: usize,
    },
    /// The bytes at `pos` are not a plausible batch (the reason says why).
    Fault {
        pos: u64,
        reason: String,
    },
}

/// Why [`SegReader::next`] found no batch, for [`fault`] to word.
enum Fault {
    ShortHeader { avail: u64 },
    Header(DecodeError),
    OverCap { len: usize },
    PastEnd { len: usize, avail: u64 },
}

#[cold]
#[inline(never)]
fn fault(pos: u64, f: Fault) -> Step {
    let reason = match f {
        Fault::ShortHeader { avail } => {
            format!("truncated batch header: {avail} bytes left in file")
        }
        Fault::Header(e) => e.to_string(),
        Fault::OverCap { len } => {
            format!("batch length {len} exceeds the {MAX_BATCH_LEN_ON_DISK}-byte cap")
        }
        Fault::PastEnd { len, avail } => {
            format!("batch length {len} runs past end of file ({avail} bytes left)")
        }
    };
    Step::Fault { pos, reason }
}

/// Buffered sequential reader of batches in `[pos, end)` of one file.
pub(crate) struct SegReader<'p> {
    path: &'p str,
    pub pos: u64,
    end: u64,
    /// `buf[..filled]` holds the file's bytes from `buf_pos`; past `filled` are stale bytes
    /// of earlier reads, kept so a read needs not zero the buffer before filling it.
    buf: Vec<u8>,
    filled: usize,
    buf_pos: u64,
    chunk: usize,
}

impl<'p> SegReader<'p> {
    pub fn new(path: &'p str, pos: u64, end: u64, chunk: usize) -> Self {
        Self::with_buf(path, pos, end, chunk, Vec::new())
    }

    /// [`Self::new`], buffering in `buf`'s allocation (its bytes are ignored): a reader
    /// per read allocated its buffer afresh each time.
    pub fn with_buf(path: &'p str, pos: u64, end: u64, chunk: usize, buf: Vec<u8>) -> Self {
        Self {
            path,
            pos,
            end,
            buf,
            filled: 0,
            buf_pos: 0,
            chunk: chunk.max(BATCH_HEADER_LEN),
        }
    }

    /// The buffer, for another reader ([`Self::with_buf`]).
    pub fn into_buf(self) -> Vec<u8> {
        self.buf
    }

    pub fn path(&self) -> &'p str {
        self.path
    }

    /// Makes `[pos, pos + len)` buffered: most calls find it already is, so that check is
    /// inlined and the read is not.
    #[inline]
    fn ensure<S: Storage>(&mut self, s: &mut S, pos: u64, len: usize) -> Result<(), StorageError> {
        let have = pos >= self.buf_pos && pos + len as u64 <= self.buf_pos + self.filled as u64;
        if have {
            return Ok(());
        }
        self.fill(s, pos, len)
    }

    #[inline(never)]
    fn fill<S: Storage>(&mut self, s: &mut S, pos: u64, len: usize) -> Result<(), StorageError> {
        let n = (len.max(self.chunk) as u64).min(self.end - pos) as usize;
        // Grown (zeroed) only past what earlier reads initialised: the read overwrites
        // `..n` anyway, and zeroing it each time cost as much as the read's copy.
        if self.buf.len() < n {
            self.buf.resize(n, 0);
        }
        self.filled = 0;
        self.buf_pos = pos;
        s.read_exact_at(self.path, pos, &mut self.buf[..n])?;
        self.filled = n;
        Ok(())
    }

    /// The next batch's header, or why there is none. The faults' messages are built out
    /// of line ([`fault`]) and the header parse is inlined here: a read steps through every
    /// batch it returns, and the parse's call and the copies of the header it returned were
    /// a sizeable part of a short read. Inlined into its callers too (fat LTO kept it a
    /// call under a plain `#[inline]`), for the same reason.
    #[inline(always)]
    pub fn next<S: Storage>(&mut self, s: &mut S) -> Result<Step, StorageError> {
        let pos = self.pos;
        if pos >= self.end {
            return Ok(Step::End);
        }
        let avail = self.end - pos;
        if avail < BATCH_HEADER_LEN as u64 {
            return Ok(fault(pos, Fault::ShortHeader { avail }));
        }
        self.ensure(s, pos, BATCH_HEADER_LEN)?;
        let header = match BatchHeader::parse(self.bytes(pos, BATCH_HEADER_LEN)) {
            Ok(h) => h,
            Err(e) => return Ok(fault(pos, Fault::Header(e))),
        };
        let len = header.total_len();
        if len > MAX_BATCH_LEN_ON_DISK {
            return Ok(fault(pos, Fault::OverCap { len }));
        }
        if len as u64 > avail {
            return Ok(fault(pos, Fault::PastEnd { len, avail }));
        }
        self.ensure(s, pos, len)?;
        self.pos = pos + len as u64;
        Ok(Step::Batch { pos, header, len })
    }

    /// Bytes of a batch returned by the last `next` (always buffered).
    #[inline]
    pub fn bytes(&self, pos: u64, len: usize) -> &[u8] {
        let start = (pos - self.buf_pos) as usize;
        &self.buf[..self.filled][start..start + len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The search back from the end finds what bisecting the whole list finds, for every
    /// length up to 70 and offsets below, between, on and past the batches' bases.
    #[test]
    fn verified_lookup_matches_a_plain_bisection() {
        for n in 0..70u64 {
            let starts: Vec<(Offset, u64)> = (0..n).map(|i| (10 + 3 * i, 100 * i)).collect();
            let v = Verified { gen: 1, starts };
            for offset in 0..(14 + 3 * n) {
                let i = v.starts.partition_point(|(o, _)| *o <= offset);
                let want = v.starts.get(i.saturating_sub(1)).copied();
                assert_eq!(v.lookup(offset), want, "{n} batches, offset {offset}");
            }
            assert_eq!(v.lookup(Offset::MAX), v.starts.last().copied());
        }
    }
}
