//! Partition-log throughput on real files (FileStorage in a temp dir):
//! - append: 100-byte records in ~16 KiB batches, fsync (flush) every 64 MiB, through the
//!   page cache and with O_DIRECT (`FileStorage::with_direct_io`);
//! - read: sequential reads of 1 MiB from a flushed log (page cache warm), decoded
//!   (`read`) and raw (`read_raw`, CRC-checked only: what a fetch carries);
//! - batch encode/decode alone, and placing an encoded batch (`place_encoded`);
//! - append of already-encoded batches (`append_encoded_as_leader`), O_DIRECT.
//!
//! Run: `cargo bench -p skein-core`. Results and disk baseline: docs/PERFORMANCE.md.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use skein_core::log::*;
use skein_node::file_storage::FileStorage;
use std::time::{Duration, Instant};

const RECORD_VALUE: usize = 100;
const BATCH_TARGET: usize = 16 * 1024;
const FSYNC_EVERY: u64 = 64 << 20;

fn batch_16k() -> RecordBatch {
    let per_record = MIN_RECORD_LEN + RECORD_VALUE;
    let n = (BATCH_TARGET - BATCH_HEADER_LEN) / per_record;
    let values = (0..n).map(|i| vec![(i % 251) as u8; RECORD_VALUE]);
    RecordBatch::from_values(1_700_000_000_000, values)
}

fn bench_config() -> LogConfig {
    LogConfig {
        segment_bytes: 256 << 20,
        segment_ms: None,
        retention_bytes: Some(1 << 30),
        retention_ms: None,
        ..LogConfig::default()
    }
}

fn append(c: &mut Criterion) {
    append_with(c, "append_16KiB_batches_fsync_64MiB", false, false);
    append_with(c, "append_16KiB_batches_fsync_64MiB_direct_io", true, false);
    append_with(c, "append_16KiB_encoded_fsync_64MiB_direct_io", true, true);
}

/// `encoded`: the batch arrives encoded, as a producer or the leader sends it, and is
/// appended with `append_encoded_as_leader` (checked and placed in place, not decoded).
fn append_with(c: &mut Criterion, name: &str, direct: bool, encoded: bool) {
    let dir = tempfile::tempdir_in(std::env::var("SKEIN_BENCH_DIR").unwrap_or("/tmp".into()))
        .expect("temp dir");
    let storage = if direct {
        FileStorage::with_direct_io(dir.path()).unwrap()
    } else {
        FileStorage::new(dir.path()).unwrap()
    };
    let (mut log, _) = PartitionLog::open(storage, "bench-0", bench_config()).unwrap();
    let batch = batch_16k();
    let len = batch.encoded_len() as u64;
    // The producer's bytes: placed again in place by every append.
    let mut wire = batch.encode().unwrap();
    let mut unsynced = 0u64;
    let mut g = c.benchmark_group("log");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(12))
        .throughput(Throughput::Bytes(len));
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                // Not timed: the producer's buffer.
                let input = (!encoded).then(|| batch.clone());
                let t = Instant::now();
                match input {
                    Some(input) => log.append_as_leader(input, 1, 0).unwrap(),
                    None => log
                        .append_encoded_as_leader(CheckedBatch::check(&mut wire[..]).unwrap(), 1, 0)
                        .unwrap(),
                };
                unsynced += len;
                if unsynced >= FSYNC_EVERY {
                    log.flush().unwrap();
                    unsynced = 0;
                    // Keep the disk footprint bounded; deleting files is part of the cost.
                    log.apply_retention(0).unwrap();
                }
                spent += t.elapsed();
            }
            spent
        })
    });
    g.finish();
}

/// A flushed 512 MiB log of 16 KiB batches (built only when a read benchmark runs, so a
/// profile of the append benchmarks does not include it).
fn filled_log() -> (tempfile::TempDir, PartitionLog<FileStorage>) {
    let dir = tempfile::tempdir_in(std::env::var("SKEIN_BENCH_DIR").unwrap_or("/tmp".into()))
        .expect("temp dir");
    let storage = FileStorage::new(dir.path()).unwrap();
    let (mut log, _) = PartitionLog::open(storage, "bench-0", bench_config()).unwrap();
    let batch = batch_16k();
    let total: u64 = 512 << 20;
    while log.size_bytes() < total {
        log.append_as_leader(batch.clone(), 1, 0).unwrap();
    }
    log.flush().unwrap();
    (dir, log)
}

fn read(c: &mut Criterion) {
    let batch = batch_16k();
    let len = batch.encoded_len();
    let per_read = 64 * len;
    let per_read_records = 64 * batch.records.len() as u64;
    let mut filled = None;
    let mut g = c.benchmark_group("log");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(8))
        .throughput(Throughput::Bytes(per_read as u64));
    let mut at = 0;
    g.bench_function("read_1MiB_decoded", |b| {
        let (_, log) = filled.get_or_insert_with(filled_log);
        let leo = log.log_end_offset();
        b.iter(|| {
            if at + per_read_records > leo {
                at = 0;
            }
            let bs = log.read(at, per_read).unwrap();
            at = bs.last().unwrap().next_offset();
            bs
        })
    });
    let mut at = 0;
    g.bench_function("read_1MiB_raw_crc_checked", |b| {
        let (_, log) = filled.get_or_insert_with(filled_log);
        let leo = log.log_end_offset();
        b.iter(|| {
            if at + per_read_records > leo {
                at = 0;
            }
            let raw = log.read_raw(at, per_read).unwrap();
            at += per_read_records;
            raw
        })
    });
    g.finish();
}

fn codec(c: &mut Criterion) {
    let batch = batch_16k();
    let enc = batch.encode().unwrap();
    let mut g = c.benchmark_group("batch");
    g.sample_size(20)
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Bytes(enc.len() as u64));
    g.bench_function("encode_16KiB", |b| {
        b.iter_batched(
            || batch.clone(),
            |b| b.encode().unwrap(),
            BatchSize::SmallInput,
        )
    });
    g.bench_function("decode_16KiB", |b| {
        b.iter(|| RecordBatch::decode(&enc).unwrap())
    });
    // What a leader does to a producer's encoded batch: check CRC and records, place it.
    let mut wire = enc.clone();
    let mut base = 0;
    g.bench_function("place_encoded_16KiB", |b| {
        b.iter(|| {
            base += 1;
            place_encoded(&mut wire, base, 1).unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, append, read, codec);
criterion_main!(benches);
