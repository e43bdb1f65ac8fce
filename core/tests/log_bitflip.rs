//! Bit flips anywhere in segment, index or checkpoint files are never served as data: reads
//! return exactly what was appended or a typed Corrupt error, and reopening either fails
//! with Corrupt or yields a batch-aligned prefix (flagged when flushed data was lost).

use proptest::prelude::*;
use skein_core::log::*;
use skein_core::testing::MemStorage;
mod common;
use common::{batch, cases, read_all};

fn cfg(truncate: bool) -> LogConfig {
    LogConfig {
        segment_bytes: 600,
        index_interval_bytes: 120,
        retention_ms: None,
        segment_ms: None,
        truncate_on_corruption: truncate,
        ..LogConfig::default()
    }
}

fn assert_prefix(got: &[RecordBatch], want: &[RecordBatch]) {
    assert!(got.len() <= want.len());
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g, w, "served data differs from what was appended");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(128), ..ProptestConfig::default() })]

    #[test]
    fn flips_are_never_served(
        sizes in proptest::collection::vec(1usize..5, 1..25),
        flush_at in any::<proptest::sample::Index>(),
        file in any::<proptest::sample::Index>(),
        pos in any::<proptest::sample::Index>(),
        bit in 0u8..8,
        truncate in any::<bool>(),
    ) {
        let mem = MemStorage::new();
        let (mut log, _) = PartitionLog::open(mem.clone(), "p", cfg(truncate)).unwrap();
        let flush_at = flush_at.index(sizes.len() + 1);
        for (i, &n) in sizes.iter().enumerate() {
            if i == flush_at {
                log.flush().unwrap();
            }
            log.append_as_leader(batch(i as u32, n), 1 + i as u32 / 4, 0).unwrap();
        }
        let (want, err) = read_all(&mut log);
        prop_assert!(err.is_none());
        let flushed = log.flushed_offset();

        let files: Vec<_> = mem
            .files()
            .into_iter()
            .filter(|(_, len, _)| *len > 0)
            .collect();
        let (path, len, _) = &files[file.index(files.len())];
        let at = pos.index(*len as usize) as u64;
        prop_assert!(mem.flip_bit(path, at, bit));

        // The open log (indexes in memory) never serves the damaged bytes.
        let (got, err) = read_all(&mut log);
        assert_prefix(&got, &want);
        if let Some(e) = &err {
            prop_assert!(matches!(e, LogError::Corrupt { .. }), "{e:?}");
        }
        // Truncating at the reported offset removes the damage.
        if let Some(LogError::Corrupt { offset, .. }) = &err {
            log.truncate_to(*offset).unwrap();
            let (got, err) = read_all(&mut log);
            prop_assert!(err.is_none(), "{err:?}");
            prop_assert!(log.log_end_offset() <= *offset);
            assert_prefix(&got, &want);
        }
        let flushed = flushed.min(log.flushed_offset());
        drop(log);

        match PartitionLog::open(mem.clone(), "p", cfg(truncate)) {
            Err(e) => {
                prop_assert!(matches!(e, LogError::Corrupt { .. }), "{e:?}");
            }
            Ok((mut log, sum)) => {
                let (got, err) = read_all(&mut log);
                assert_prefix(&got, &want);
                if let Some(e) = &err {
                    // Flushed segments are not revalidated on open; reads still catch it.
                    prop_assert!(matches!(e, LogError::Corrupt { .. }), "{e:?}");
                } else if log.log_end_offset() < flushed {
                    prop_assert!(sum.corruption.is_some(), "flushed data cut silently: {sum:?}");
                }
                if sum.corruption.is_some() {
                    prop_assert!(truncate);
                }
            }
        }
    }
}
