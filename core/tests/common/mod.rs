//! Helpers the log integration tests share (each test file is its own crate and uses a
//! subset, hence the `dead_code` allowance).
#![allow(dead_code)]

use skein_core::log::*;
use skein_core::testing::MemStorage;

/// Batch `i` of `n` records with keys `j` and values `value-i-j`.
pub fn batch(i: u32, n: usize) -> RecordBatch {
    let records = (0..n).map(|j| {
        (
            Some(vec![j as u8]),
            Some(format!("value-{i}-{j}").into_bytes()),
        )
    });
    RecordBatch::new(i as i64, records)
}

/// Reads everything; returns the batches read before any error and the error.
pub fn read_all(log: &mut PartitionLog<MemStorage>) -> (Vec<RecordBatch>, Option<LogError>) {
    let mut out = Vec::new();
    let mut at = log.log_start_offset();
    while at < log.log_end_offset() {
        match log.read(at, 250) {
            Ok(bs) => {
                for b in bs {
                    at = b.next_offset();
                    out.push(b);
                }
            }
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}

/// Proptest case count: modest by default (cargo test stays fast);
/// `SKEIN_PROPTEST_CASES=N` for a soak.
pub fn cases(default: u32) -> u32 {
    std::env::var("SKEIN_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Crashes `mem` keeping, per file, what `mode` says of its unsynced tail: 0 nothing,
/// 1 a length drawn from `seed` (xorshift), anything else all of it.
pub fn crash_with_mode(mem: &MemStorage, seed: u64, mode: u8) {
    let mut rng = seed | 1;
    mem.crash(|f| match mode {
        0 => f.synced_len,
        1 => {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            f.synced_len + rng % (f.len - f.synced_len + 1)
        }
        _ => f.len,
    });
}
