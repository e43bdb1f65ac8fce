//! Recovery on open, one bad-input case per test: zero-length and garbage files,
//! truncated headers, wrong CRCs, lengths past the end, corruption mid-segment, damaged
//! checkpoints and indexes, orphaned and missing files. Runs on MemStorage (the FileStorage
//! case: skein-node's tests/log_file_storage.rs).

use skein_core::log::*;
use skein_core::testing::MemStorage;

const SEG0: &str = "p/00000000000000000000.log";

fn batch(i: u32, n: usize) -> RecordBatch {
    let values = (0..n).map(|j| format!("v{i}.{j}").into_bytes());
    RecordBatch::from_values(100 + i as i64, values)
}

fn cfg() -> LogConfig {
    LogConfig {
        retention_ms: None,
        segment_ms: None,
        index_interval_bytes: 64,
        ..LogConfig::default()
    }
}

/// A log with `n` two-record batches (epochs 1,1,2,2,...), optionally flushed.
fn build(mem: &MemStorage, n: u32, flush: bool, config: LogConfig) -> Vec<u64> {
    let (mut log, _) = PartitionLog::open(mem.clone(), "p", config).unwrap();
    let mut ends = Vec::new();
    for i in 0..n {
        log.append_as_leader(batch(i, 2), 1 + i / 2, 0).unwrap();
        ends.push(mem.contents(SEG0).map_or(0, |c| c.len() as u64));
    }
    if flush {
        log.flush().unwrap();
    }
    ends
}

fn open(mem: &MemStorage) -> Result<(PartitionLog<MemStorage>, RecoverySummary), LogError> {
    PartitionLog::open(mem.clone(), "p", cfg())
}

#[test]
fn zero_length_segment_file() {
    let mem = MemStorage::new();
    mem.put_raw(SEG0, &[]);
    let (log, sum) = open(&mem).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
    assert_eq!(sum.bytes_truncated, 0);
    // A zero-length segment not at 0 starts the log there.
    let mem = MemStorage::new();
    mem.put_raw("p/00000000000000000500.log", &[]);
    let (log, _) = open(&mem).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (500, 500));
}

#[test]
fn garbage_unflushed_file_is_cut_and_reported() {
    let mem = MemStorage::new();
    let garbage: Vec<u8> = (0..1000u32).map(|i| (i * 7919 % 251) as u8).collect();
    mem.put_raw(SEG0, &garbage);
    let (mut log, sum) = open(&mem).unwrap();
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(sum.bytes_truncated, 1000);
    assert!(sum.batches_truncated >= 1);
    assert!(sum.truncation_reason.is_some());
    assert!(log.read(0, 100).unwrap().is_empty());
    assert_eq!(mem.contents(SEG0).unwrap().len(), 0);
}

#[test]
fn garbage_below_recovery_point_is_corruption() {
    let mem = MemStorage::new();
    build(&mem, 4, true, cfg());
    let garbage: Vec<u8> = (0..1000u32).map(|i| (i * 31 % 256) as u8).collect();
    mem.put_raw(SEG0, &garbage);
    match open(&mem) {
        Err(LogError::Corrupt {
            path,
            pos,
            offset,
            reason,
        }) => {
            assert_eq!((path.as_str(), pos, offset), (SEG0, 0, 0));
            assert!(reason.contains("below the recovery point"), "{reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn truncated_header_at_tail() {
    let mem = MemStorage::new();
    let ends = build(&mem, 3, true, cfg());
    let mut data = mem.contents(SEG0).unwrap();
    data.extend_from_slice(&batch(9, 1).encode().unwrap()[..20]);
    mem.put_raw(SEG0, &data);
    let (log, sum) = open(&mem).unwrap();
    assert_eq!(log.log_end_offset(), 6);
    assert_eq!((sum.bytes_truncated, sum.batches_truncated), (20, 1));
    assert!(sum.corruption.is_none());
    assert!(sum
        .truncation_reason
        .unwrap()
        .contains("truncated batch header"));
    assert_eq!(mem.contents(SEG0).unwrap().len() as u64, ends[2]);
}

#[test]
fn length_past_end_at_tail() {
    let mem = MemStorage::new();
    build(&mem, 2, true, cfg());
    let (mut log, _) = open(&mem).unwrap();
    log.append_as_leader(batch(5, 3), 3, 0).unwrap();
    drop(log);
    let full = mem.contents(SEG0).unwrap();
    mem.crash(|f| if f.path == SEG0 { f.len - 1 } else { f.len });
    let (log, sum) = open(&mem).unwrap();
    assert_eq!(log.log_end_offset(), 4);
    assert_eq!(sum.batches_truncated, 1);
    assert!(sum
        .truncation_reason
        .unwrap()
        .contains("runs past end of file"));
    assert!(mem.contents(SEG0).unwrap().len() < full.len());
    // The epoch of the lost batch is gone from the cache too.
    assert_eq!(log.epoch_cache().latest_epoch(), Some(1));
}

#[test]
fn wrong_crc_at_unflushed_tail_is_cut() {
    let mem = MemStorage::new();
    let ends = build(&mem, 4, false, cfg());
    assert!(mem.flip_bit(SEG0, ends[2] + 40, 3));
    let (log, sum) = open(&mem).unwrap();
    assert_eq!(log.log_end_offset(), 6);
    assert!(sum.truncation_reason.unwrap().contains("CRC mismatch"));
    assert!(sum.corruption.is_none());
}

#[test]
fn corrupt_batch_mid_segment_followed_by_valid_data() {
    let mem = MemStorage::new();
    let ends = build(&mem, 5, false, cfg());
    // Unflushed, but valid batches follow the damaged one: that is not a torn write.
    assert!(mem.flip_bit(SEG0, ends[1] + 30, 0));
    let snapshot = mem.contents(SEG0).unwrap();
    match open(&mem) {
        Err(LogError::Corrupt {
            offset,
            pos,
            reason,
            ..
        }) => {
            assert_eq!((offset, pos), (4, ends[1]));
            assert!(reason.contains("valid data follows"), "{reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert_eq!(
        mem.contents(SEG0).unwrap(),
        snapshot,
        "failed open must not cut"
    );
    let lenient = LogConfig {
        truncate_on_corruption: true,
        ..cfg()
    };
    let (log, sum) = PartitionLog::open(mem.clone(), "p", lenient).unwrap();
    assert_eq!(log.log_end_offset(), 4);
    let c = sum.corruption.expect("flagged");
    assert_eq!((c.offset, c.pos), (4, ends[1]));
    assert_eq!(sum.batches_truncated, 3);
}

#[test]
fn base_offset_mismatch_is_detected() {
    let mem = MemStorage::new();
    let (mut log, _) = open(&mem).unwrap();
    for i in 0..3 {
        log.append_as_leader(batch(i, 2), 1, 0).unwrap();
    }
    log.flush().unwrap();
    let first_len = batch(0, 2).encoded_len() as u64;
    // The base offset is not under the CRC; the log checks it against the position.
    assert!(mem.flip_bit(SEG0, first_len + 7, 1));
    match log.read(2, 10) {
        Err(LogError::Corrupt { reason, offset, .. }) => {
            assert_eq!(offset, 2);
            assert!(reason.contains("base offset"), "{reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    drop(log);
    // Flushed data is not revalidated on open (recovery resumes at the recovery point),
    // so the open succeeds and reads still refuse the batch...
    let (mut log, _) = open(&mem).unwrap();
    assert!(matches!(log.read(2, 10), Err(LogError::Corrupt { .. })));
    drop(log);
    // ...while a full-validation open (recovery point unreadable) reports it.
    mem.put_raw("p/recovery-point-checkpoint", b"junk");
    assert!(matches!(open(&mem), Err(LogError::Corrupt { .. })));
}

#[test]
fn clean_reopen_resumes_at_the_recovery_point() {
    let mem = MemStorage::new();
    build(&mem, 40, true, cfg());
    let (mut log, _) = open(&mem).unwrap();
    log.append_as_leader(batch(40, 2), 30, 0).unwrap();
    drop(log);
    let seg_len = mem.contents(SEG0).unwrap().len() as u64;
    let (mut log, sum) = open(&mem).unwrap();
    assert_eq!(sum.segments_validated, 1);
    assert!(sum.bytes_validated < seg_len / 4, "{sum:?} of {seg_len}");
    assert_eq!(log.log_end_offset(), 82);
    assert_eq!(log.read(0, usize::MAX).unwrap().len(), 41);
    assert_eq!(log.offset_for_timestamp(120).unwrap(), Some(40));
}

#[test]
fn misleading_index_falls_back_to_full_validation() {
    let mem = MemStorage::new();
    build(&mem, 10, true, cfg());
    let idx = "p/00000000000000000000.index";
    let mut bytes = mem.contents(idx).unwrap();
    let n = bytes.len();
    assert!(n >= 16);
    // Point the last entry a few bytes off its batch (still increasing, inside the file).
    let pos = u32::from_be_bytes(bytes[n - 4..].try_into().unwrap()) + 3;
    bytes[n - 4..].copy_from_slice(&pos.to_be_bytes());
    mem.put_raw(idx, &bytes);
    let (mut log, sum) = open(&mem).unwrap();
    assert!(
        sum.corruption.is_none() && sum.bytes_truncated == 0,
        "{sum:?}"
    );
    assert_eq!(log.read(0, usize::MAX).unwrap().len(), 10);
    assert_eq!(log.log_end_offset(), 20);
}

#[test]
fn damaged_checkpoints_are_rebuilt() {
    let mem = MemStorage::new();
    let config = LogConfig {
        segment_bytes: 200,
        ..cfg()
    };
    build(&mem, 8, true, config.clone());
    let (log, _) = PartitionLog::open(mem.clone(), "p", config.clone()).unwrap();
    let epochs = log.epoch_cache().clone();
    let segs = log.segment_count();
    assert!(segs > 2);
    drop(log);
    assert!(mem.flip_bit("p/leader-epoch-checkpoint", 3, 0));
    mem.put_raw("p/recovery-point-checkpoint", b"\xff\xfe");
    let (log, sum) = PartitionLog::open(mem.clone(), "p", config.clone()).unwrap();
    assert!(sum.epoch_cache_rebuilt);
    assert_eq!(sum.recovery_point, None);
    assert_eq!(sum.segments_validated, segs);
    assert_eq!(log.epoch_cache(), &epochs);
    assert_eq!(log.log_end_offset(), 16);
}

#[test]
fn damaged_index_is_rebuilt() {
    let mem = MemStorage::new();
    let config = LogConfig {
        segment_bytes: 200,
        ..cfg()
    };
    build(&mem, 8, true, config.clone());
    let idx = "p/00000000000000000000.index";
    let mut bytes = mem.contents(idx).unwrap();
    assert!(!bytes.is_empty());
    bytes.push(1); // not a whole entry
    mem.put_raw(idx, &bytes);
    let (mut log, sum) = PartitionLog::open(mem.clone(), "p", config.clone()).unwrap();
    assert!(sum.segments_validated >= 2, "{sum:?}");
    assert_eq!(log.read(0, usize::MAX).unwrap().len(), 8);
    assert_eq!(mem.contents(idx).unwrap().len() % 8, 0);
    // Missing index files are rebuilt too.
    drop(log);
    mem.put_raw(idx, &[]);
    let mut s = mem.clone();
    Storage::remove(&mut s, "p/00000000000000000000.timeindex").unwrap();
    let (mut log, sum) = PartitionLog::open(mem.clone(), "p", config).unwrap();
    assert!(sum.segments_validated >= 2);
    assert_eq!(log.offset_for_timestamp(101).unwrap(), Some(2));
}

#[test]
fn orphan_index_files_are_removed() {
    let mem = MemStorage::new();
    build(&mem, 3, true, cfg());
    mem.put_raw("p/00000000000000009999.index", &[0; 8]);
    mem.put_raw("p/00000000000000009999.timeindex", &[0; 12]);
    let (log, _) = open(&mem).unwrap();
    assert_eq!(log.log_end_offset(), 6);
    assert!(!mem.files().iter().any(|(p, _, _)| p.contains("9999")));
}

fn segment_bases(mem: &MemStorage) -> Vec<String> {
    mem.files()
        .into_iter()
        .map(|(p, _, _)| p)
        .filter(|p| p.ends_with(".log"))
        .collect()
}

#[test]
fn unflushed_gap_cuts_the_rest() {
    let mem = MemStorage::new();
    let config = LogConfig {
        segment_bytes: 200,
        ..cfg()
    };
    build(&mem, 8, false, config.clone());
    let segs = segment_bases(&mem);
    assert!(segs.len() >= 3);
    let mut s = mem.clone();
    Storage::remove(&mut s, &segs[1]).unwrap();
    let (log, sum) = PartitionLog::open(mem.clone(), "p", config).unwrap();
    assert_eq!(log.segment_count(), 1);
    assert_eq!(sum.segments_deleted, segs.len() - 2);
    assert!(sum
        .truncation_reason
        .unwrap()
        .contains("next segment starts"));
    assert!(sum.corruption.is_none());
}

#[test]
fn flushed_gap_is_corruption() {
    let mem = MemStorage::new();
    let config = LogConfig {
        segment_bytes: 200,
        ..cfg()
    };
    build(&mem, 8, true, config.clone());
    let segs = segment_bases(&mem);
    let mut s = mem.clone();
    Storage::remove(&mut s, &segs[1]).unwrap();
    match PartitionLog::open(mem.clone(), "p", config) {
        Err(LogError::Corrupt { reason, .. }) => {
            assert!(reason.contains("next segment starts"), "{reason}")
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn missing_segments_with_checkpoint_is_an_error() {
    let mem = MemStorage::new();
    build(&mem, 3, true, cfg());
    let mut s = mem.clone();
    Storage::remove(&mut s, SEG0).unwrap();
    assert!(matches!(open(&mem), Err(LogError::Corrupt { .. })));
}

#[test]
fn read_errors_are_typed_not_corruption() {
    let mem = MemStorage::new();
    build(&mem, 3, true, cfg());
    let (mut log, _) = open(&mem).unwrap();
    mem.set_read_error(Some(SEG0), true);
    assert!(matches!(
        log.read(0, 100),
        Err(LogError::Storage(StorageError::InjectedReadError { .. }))
    ));
    mem.set_read_error(None, false);
    assert_eq!(log.read(0, usize::MAX).unwrap().len(), 3);
}

#[test]
fn append_errors_are_typed() {
    let mem = MemStorage::new();
    let (mut log, _) = open(&mem).unwrap();
    assert_eq!(
        log.append_as_leader(batch(0, 0), 1, 0),
        Err(LogError::EmptyBatch)
    );
    log.append_as_leader(batch(0, 2), 5, 0).unwrap();
    assert!(matches!(
        log.append_as_leader(batch(1, 1), 4, 0),
        Err(LogError::EpochRegression {
            epoch: 4,
            latest: 5
        })
    ));
    let mut b = batch(1, 2);
    b.base_offset = 7;
    assert!(matches!(
        log.append_as_follower(b.clone(), 0),
        Err(LogError::NonContiguousAppend {
            expected: 2,
            got: 7
        })
    ));
    b.base_offset = 2;
    b.partition_leader_epoch = 6;
    // A follower takes a batch verbatim: one whose offset deltas are not 0, 1, .. is refused.
    b.records[1].offset_delta = 0;
    assert!(matches!(
        log.append_as_follower(b.clone(), 0),
        Err(LogError::InvalidBatch(_))
    ));
    b.records[1].offset_delta = 1;
    log.append_as_follower(b, 0).unwrap();
    assert_eq!(log.epoch_cache().latest_epoch(), Some(6));
    mem.set_capacity(Some(mem.used_bytes() + 10));
    let err = log.append_as_leader(batch(2, 2), 6, 0).unwrap_err();
    assert!(err.is_disk_full(), "{err:?}");
    mem.set_capacity(None);
    assert_eq!(log.log_end_offset(), 4);
    log.append_as_leader(batch(2, 2), 6, 0).unwrap();
    assert_eq!(log.read(4, 10).unwrap()[0].base_offset, 4);
    let big = LogConfig {
        max_batch_bytes: 100,
        ..cfg()
    };
    let (mut small, _) = PartitionLog::open(MemStorage::new(), "q", big).unwrap();
    assert!(matches!(
        small.append_as_leader(batch(0, 10), 1, 0),
        Err(LogError::BatchTooLarge { .. })
    ));
    assert!(matches!(
        small.read(3, 10),
        Err(LogError::OffsetOutOfRange { offset: 3, .. })
    ));
}

#[test]
fn rolling_by_age_and_retention() {
    let mem = MemStorage::new();
    let config = LogConfig {
        segment_ms: Some(100),
        retention_ms: Some(1000),
        ..cfg()
    };
    let (mut log, _) = PartitionLog::open(mem.clone(), "p", config).unwrap();
    let mut now = 0;
    for i in 0..10u32 {
        let mut b = batch(i, 1);
        b.first_timestamp = now;
        let info = log.append_as_leader(b, 1, now).unwrap();
        assert_eq!(info.rolled, i > 0 && i % 2 == 0, "batch {i}");
        now += 60;
    }
    assert_eq!(log.segment_count(), 5);
    // Segments whose newest record is more than 1000 ms old go.
    let sum = log.apply_retention(1300).unwrap();
    assert_eq!(sum.segments_deleted, 2); // newest records at 60 and 180
    assert_eq!(log.log_start_offset(), 4);
    assert_eq!(log.epoch_cache().entries()[0].start_offset, 4);
    assert!(matches!(
        log.read(3, 10),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    // Everything expired: the active segment is rolled and deleted too.
    let sum = log.apply_retention(10_000).unwrap();
    assert_eq!(sum.log_start_offset, 10);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (10, 10));
    assert!(log.epoch_cache().entries().is_empty());
    let info = log.append_as_leader(batch(11, 1), 2, 10_000).unwrap();
    assert_eq!(info.base_offset, 10);
    drop(log);
    let (log, _) = open(&mem).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (10, 11));
}

#[test]
fn retention_by_size() {
    let mem = MemStorage::new();
    let config = LogConfig {
        segment_bytes: 300,
        retention_bytes: Some(600),
        ..cfg()
    };
    let (mut log, _) = PartitionLog::open(mem.clone(), "p", config).unwrap();
    for i in 0..30 {
        log.append_as_leader(batch(i, 2), 1, 0).unwrap();
    }
    let before = log.size_bytes();
    let sum = log.apply_retention(0).unwrap();
    assert!(sum.segments_deleted > 0);
    assert_eq!(log.size_bytes(), before - sum.bytes_deleted);
    assert!(log.size_bytes() >= 600);
    assert!(log.size_bytes() < 600 + 300);
    assert_eq!(
        log.read(log.log_start_offset(), 1).unwrap()[0].base_offset,
        log.log_start_offset()
    );
}

#[test]
fn failed_fsync_poisons_until_reopen() {
    let mem = MemStorage::new();
    build(&mem, 3, true, cfg());
    let (mut log, _) = open(&mem).unwrap();
    log.append_as_leader(batch(3, 2), 2, 0).unwrap();
    mem.set_fail_syncs(true);
    assert!(matches!(
        log.flush(),
        Err(LogError::Storage(StorageError::Io { .. }))
    ));
    assert!(matches!(
        log.append_as_leader(batch(4, 1), 2, 0),
        Err(LogError::Failed(_))
    ));
    assert_eq!(log.flushed_offset(), 6);
    mem.set_fail_syncs(false);
    drop(log);
    mem.crash_lose_unsynced();
    let (log, _) = open(&mem).unwrap();
    assert_eq!(log.log_end_offset(), 6);
}

#[test]
fn flushed_inactive_segments_are_trusted_on_reopen() {
    let mem = MemStorage::new();
    let config = LogConfig {
        segment_bytes: 200,
        ..cfg()
    };
    let (mut log, _) = PartitionLog::open(mem.clone(), "p", config.clone()).unwrap();
    for i in 0..12 {
        // Constant timestamps: the time index gets few entries.
        let mut b = batch(i, 2);
        b.first_timestamp = 5;
        log.append_as_leader(b, 1, 0).unwrap();
    }
    log.flush().unwrap();
    let segs = log.segment_count();
    assert!(segs >= 4);
    drop(log);
    let (_, sum) = PartitionLog::open(mem.clone(), "p", config).unwrap();
    assert_eq!(
        sum.segments_validated, 1,
        "only the active segment: {sum:?}"
    );
}

#[test]
fn lowered_time_index_entry_is_not_trusted() {
    let mem = MemStorage::new();
    let config = LogConfig {
        segment_bytes: 200,
        retention_ms: Some(1000),
        ..cfg()
    };
    build(&mem, 8, true, config.clone());
    // Lower the first segment's max timestamp in its time index (a flipped high bit).
    let tpath = "p/00000000000000000000.timeindex";
    let mut t = mem.contents(tpath).unwrap();
    let n = t.len();
    t[n - 12] ^= 0x80; // sign bit: hugely negative timestamp
    mem.put_raw(tpath, &t);
    let (mut log, sum) = PartitionLog::open(mem.clone(), "p", config).unwrap();
    assert!(sum.segments_validated >= 2, "{sum:?}");
    // Retention must not treat the segment as ancient.
    assert_eq!(log.apply_retention(500).unwrap().segments_deleted, 0);
}

#[test]
fn zero_padding_after_the_end_is_a_torn_tail() {
    // What a crash can leave with FileStorage::with_direct_io: the padded last block was
    // written but the file not yet cut back to its logical length.
    let mem = MemStorage::new();
    build(&mem, 3, true, cfg());
    let mut data = mem.contents(SEG0).unwrap();
    let len = data.len();
    data.resize(len.div_ceil(4096) * 4096 + 4096, 0);
    mem.put_raw(SEG0, &data);
    let (log, sum) = open(&mem).unwrap();
    assert_eq!(log.log_end_offset(), 6);
    assert!(sum.corruption.is_none());
    assert_eq!(sum.bytes_truncated as usize, data.len() - len);
    assert!(sum
        .truncation_reason
        .unwrap()
        .contains("unsupported batch format version 0"));
}
