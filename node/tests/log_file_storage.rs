//! The same log on real files: a seeded random walk of appends, rolls, truncations,
//! retention, flushes and reopens on FileStorage in a temp dir, checked against a model
//! (exercises the handle cache across truncate/remove/write_atomic and reopen).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skein_core::log::*;
use skein_node::file_storage::FileStorage;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1500,
        index_interval_bytes: 150,
        retention_bytes: Some(4000),
        retention_ms: Some(5000),
        segment_ms: Some(900),
        ..LogConfig::default()
    }
}

#[test]
fn random_walk_on_real_files() {
    random_walk(7, false);
}

#[test]
fn random_walk_on_real_files_direct_io() {
    random_walk(8, true);
}

fn random_walk(seed: u64, direct: bool) {
    {
        let dir = tempfile::tempdir().unwrap();
        let fs = if direct {
            FileStorage::with_direct_io(dir.path()).unwrap()
        } else {
            FileStorage::new(dir.path()).unwrap()
        };
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (mut log, _) = PartitionLog::open(fs.clone(), "t/0", config()).unwrap();
        // Model: (base, values, epoch, ts)
        let mut model: Vec<(u64, Vec<Vec<u8>>, u32, i64)> = Vec::new();
        let mut start = 0u64;
        let (mut epoch, mut now, mut counter) = (1u32, 0i64, 0u32);
        for _ in 0..200 {
            now += rng.gen_range(0..60);
            let leo = model.last().map_or(start, |b| b.0 + b.1.len() as u64);
            match rng.gen_range(0..100) {
                0..=59 => {
                    if rng.gen_bool(0.05) {
                        epoch += 1;
                    }
                    let n = rng.gen_range(1..5);
                    let values: Vec<Vec<u8>> = (0..n)
                        .map(|_| {
                            counter += 1;
                            format!("rec-{counter}-{}", "x".repeat(rng.gen_range(0..50)))
                                .into_bytes()
                        })
                        .collect();
                    let keyed = values
                        .iter()
                        .map(|v| (Some(b"k".to_vec()), Some(v.clone())));
                    let b = RecordBatch::new(now, keyed);
                    let info = log.append_as_leader(b, epoch, now).unwrap();
                    assert_eq!(info.base_offset, leo);
                    model.push((leo, values, epoch, now));
                }
                60..=67 => log.flush().unwrap(),
                68..=71 => log.roll().unwrap(),
                72..=77 => {
                    let x = rng.gen_range(start..=leo);
                    log.truncate_to(x).unwrap();
                    if x <= start {
                        model.clear();
                        start = x;
                    } else {
                        model.retain(|b| b.0 + b.1.len() as u64 <= x);
                    }
                }
                78..=85 => {
                    log.apply_retention(now).unwrap();
                    start = log.log_start_offset();
                    model.retain(|b| b.0 >= start);
                }
                86..=91 => {
                    drop(log);
                    let (l, sum) = PartitionLog::open(fs.clone(), "t/0", config()).unwrap();
                    assert_eq!(sum.bytes_truncated, 0, "{sum:?}");
                    log = l;
                }
                _ => {
                    let q = rng.gen_range(0..=now);
                    let want = model.iter().find(|b| b.3 >= q).map(|b| b.0);
                    assert_eq!(log.offset_for_timestamp(q).unwrap(), want);
                }
            }
            let leo = model.last().map_or(start, |b| b.0 + b.1.len() as u64);
            assert_eq!((log.log_start_offset(), log.log_end_offset()), (start, leo));
            let mut at = start;
            let mut i = 0;
            while at < leo {
                for b in log.read(at, rng.gen_range(1..2000)).unwrap() {
                    let m = &model[i];
                    assert_eq!((b.base_offset, b.partition_leader_epoch), (m.0, m.2));
                    let vals: Vec<_> = b.records.iter().map(|r| r.value.clone().unwrap()).collect();
                    assert_eq!(vals, m.1);
                    at = b.next_offset();
                    i += 1;
                }
            }
            assert_eq!(i, model.len());
        }
        // Files on disk are exactly the segments, their indexes and the checkpoints.
        let mut names: Vec<String> = std::fs::read_dir(dir.path().join("t/0"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        let segs = log.segment_bases();
        assert_eq!(
            names.iter().filter(|n| n.ends_with(".log")).count(),
            segs.len()
        );
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }
}

/// log_basic's small segments (the case below came from there with FileStorage).
fn small() -> LogConfig {
    LogConfig {
        segment_bytes: 400,
        index_interval_bytes: 100,
        retention_ms: None,
        segment_ms: None,
        ..LogConfig::default()
    }
}

fn tagged_batch(n: usize, ts: i64, tag: u8) -> RecordBatch {
    RecordBatch::from_values(ts, (0..n).map(|i| vec![tag, i as u8, 7, 7, 7]))
}

/// log_recovery's configuration (the case below came from there with FileStorage).
fn recovery_cfg() -> LogConfig {
    LogConfig {
        retention_ms: None,
        segment_ms: None,
        index_interval_bytes: 64,
        ..LogConfig::default()
    }
}

fn numbered_batch(i: u32, n: usize) -> RecordBatch {
    let values = (0..n).map(|j| format!("v{i}.{j}").into_bytes());
    RecordBatch::from_values(100 + i as i64, values)
}

#[test]
fn file_storage_roundtrip_and_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FileStorage::new(dir.path()).unwrap();
    let (mut log, _) = PartitionLog::open(fs.clone(), "topic-0", small()).unwrap();
    for i in 0..30u8 {
        log.append_as_leader(tagged_batch(2, i as i64, i), 3, 0)
            .unwrap();
    }
    log.flush().unwrap();
    drop(log);
    // Tear the active segment by hand.
    let mut names: Vec<_> = std::fs::read_dir(dir.path().join("topic-0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    let last = dir.path().join("topic-0").join(names.last().unwrap());
    let f = std::fs::OpenOptions::new()
        .append(true)
        .open(&last)
        .unwrap();
    std::io::Write::write_all(&mut &f, &[1, 2, 3, 4, 5, 6, 7]).unwrap();
    drop(f);
    let (mut log, sum) = PartitionLog::open(fs.clone(), "topic-0", small()).unwrap();
    assert_eq!(sum.bytes_truncated, 7);
    assert_eq!(log.log_end_offset(), 60);
    assert_eq!(log.read(0, usize::MAX).unwrap().len(), 30);
    assert_eq!(log.offset_for_timestamp(17).unwrap(), Some(34));
}

#[test]
fn file_storage_crash_like_tail_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FileStorage::new(dir.path()).unwrap();
    let config = LogConfig {
        segment_bytes: 500,
        ..recovery_cfg()
    };
    let (mut log, sum) = PartitionLog::open(fs.clone(), "p", config.clone()).unwrap();
    assert_eq!(sum, RecoverySummary { ..sum.clone() });
    for i in 0..40 {
        log.append_as_leader(numbered_batch(i, 3), 1 + i / 10, 0)
            .unwrap();
    }
    log.flush().unwrap();
    log.truncate_to(100).unwrap();
    assert_eq!(log.log_end_offset(), 99);
    log.apply_retention(0).unwrap();
    drop(log);
    // Flip a bit in a flushed batch on the real file: caught on read.
    let path = dir.path().join("p").join("00000000000000000000.log");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[70] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let (mut log, _) = PartitionLog::open(fs.clone(), "p", config.clone()).unwrap();
    assert!(matches!(log.read(0, 1000), Err(LogError::Corrupt { .. })));
    assert_eq!(log.read(30, usize::MAX).unwrap().len(), 23);
    assert_eq!(log.epoch_cache().end_offset_for_epoch(2, 99), Some((2, 60)));
}
