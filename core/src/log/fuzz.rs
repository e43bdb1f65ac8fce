//! Fuzz harness of the batch decoders and of recovery on open (docs/fuzzing.md): the
//! cargo-fuzz target `segment_recovery` (tests/fuzz) and the smoke test that runs its
//! corpus in CI (node/tests/fuzz_smoke.rs) both call [`segment_recovery`], so the
//! properties checked are the same. Each failed property is a panic with what broke.

use super::batch::{check_encoded, split_batches, RecordBatch};
use super::partition_log::{LogConfig, LogError, PartitionLog};
use super::storage::join;
use crate::testing::MemStorage;
use crate::types::Offset;

const DIR: &str = "fuzz-0";

/// One segment file planted for recovery: its base offset and bytes.
struct Planted<'a> {
    base: Offset,
    bytes: &'a [u8],
}

/// Reads `data` as: a flags byte (bit 0: truncate on corruption; bit 1: two segments,
/// then a u16 split position and a u16 base for the second), then the segment bytes.
/// Checks every batch's decoders on those bytes, then recovers a log from them.
pub fn segment_recovery(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let truncate = flags & 1 != 0;
    let files = plant(flags, rest);
    for f in &files {
        check_batches(f.bytes);
    }
    recover(&files, truncate);
}

fn plant(flags: u8, rest: &[u8]) -> Vec<Planted<'_>> {
    if flags & 2 == 0 || rest.len() < 4 {
        return vec![Planted {
            base: 0,
            bytes: rest,
        }];
    }
    let split = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
    let base = u64::from(u16::from_be_bytes([rest[2], rest[3]])) + 1;
    let body = &rest[4..];
    let (a, b) = body.split_at(split.min(body.len()));
    vec![Planted { base: 0, bytes: a }, Planted { base, bytes: b }]
}

/// Every batch `split_batches` finds: `decode` and `check_encoded` agree on it, and one
/// that decodes re-encodes to the same bytes (the format has one encoding per batch,
/// except the producer fields of a batch without a producer, which decode ignores).
fn check_batches(buf: &[u8]) {
    for item in split_batches(buf) {
        let Ok((h, bytes)) = item else { break };
        let decoded = RecordBatch::decode(bytes);
        let checked = check_encoded(bytes);
        assert_eq!(
            decoded.is_ok(),
            checked.is_ok(),
            "decode {decoded:?} vs check_encoded {checked:?}"
        );
        let Ok((b, used)) = decoded else { continue };
        assert_eq!(used, bytes.len(), "decode used a different length");
        assert_eq!(b.base_offset, h.base_offset);
        assert_eq!(b.record_count(), h.record_count);
        let again = b.encode().expect("a decoded batch encodes");
        let (b2, _) = RecordBatch::decode(&again).expect("a re-encoded batch decodes");
        assert_eq!(b2, b, "decode(encode(b)) != b");
        let canonical = h.producer.is_some() || bytes[39..53].iter().all(|&x| x == 0xff);
        if canonical {
            assert_eq!(again, bytes, "a decoded batch re-encodes to other bytes");
        }
    }
}

fn config(truncate: bool) -> LogConfig {
    LogConfig {
        // Small, so the planted bytes get several index entries.
        index_interval_bytes: 128,
        truncate_on_corruption: truncate,
        ..LogConfig::default()
    }
}

/// Opens a log over the planted segments. It must either refuse them as corrupt (only
/// when not told to truncate on corruption) or keep a prefix of each file whose batches
/// read back contiguously to the log end, and a second open must find nothing to cut.
fn recover(files: &[Planted], truncate: bool) {
    let storage = MemStorage::new();
    let path = |base: Offset| join(DIR, &format!("{base:020}.log"));
    for f in files {
        storage.put_raw(&path(f.base), f.bytes);
    }
    let (mut log, summary) = match PartitionLog::open(storage.clone(), DIR, config(truncate)) {
        Ok(opened) => opened,
        Err(LogError::Corrupt { .. }) if !truncate => return,
        Err(e) => panic!("recovery failed (truncate_on_corruption = {truncate}): {e}"),
    };
    for f in files {
        if let Some(kept) = storage.contents(&path(f.base)) {
            assert!(
                f.bytes.starts_with(&kept),
                "segment {} is not a prefix of what was planted",
                f.base
            );
        }
    }
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    assert_eq!(summary.log_end_offset, end);
    let mut next = start;
    // Room for every planted byte: one read returns the whole log.
    let room = files.iter().map(|f| f.bytes.len()).sum::<usize>() + 1;
    for b in log.read(start, room).expect("a recovered log reads") {
        assert_eq!(b.base_offset, next, "recovered batches are not contiguous");
        assert!(!b.records.is_empty(), "recovery kept an empty batch");
        next = b.next_offset();
    }
    assert_eq!(next, end, "batches end at {next}, the log at {end}");
    let storage = log.close().expect("a recovered log closes");
    let (again, summary) =
        PartitionLog::open(storage, DIR, config(false)).expect("a recovered log reopens");
    assert_eq!(again.log_end_offset(), end);
    assert_eq!(summary.bytes_truncated, 0, "a second open cut again");
}
