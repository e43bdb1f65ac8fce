//! Compressed batches through the log (docs/format.md, "Compressed batches"): stored as
//! the producer compressed them, copied verbatim by a follower, validated (decompressed)
//! by recovery, and read back by a consumer with their codec; a payload that does not
//! decompress is cut at recovery like a CRC failure.

use skein_core::log::*;
use skein_core::testing::MemStorage;

const SEG0: &str = "p/00000000000000000000.log";

fn cfg() -> LogConfig {
    LogConfig {
        retention_ms: None,
        segment_ms: None,
        index_interval_bytes: 64,
        ..LogConfig::default()
    }
}

/// Batch `i`: repetitive values (they compress), with a codec chosen by `i`.
fn batch(i: usize) -> RecordBatch {
    let codec = Codec::ALL[i % Codec::ALL.len()];
    let values = (0..20).map(|j| format!("value {i}.{j} {}", "x".repeat(40)).into_bytes());
    RecordBatch::from_values(1_000 + i as i64, values).with_codec(codec)
}

/// What a consumer should read: `b` placed at `base` in epoch 1.
fn placed(b: RecordBatch, base: u64) -> RecordBatch {
    b.at(base).in_epoch(1)
}

#[test]
fn compressed_batches_survive_disk_recovery_replication_and_fetch() {
    let leader_disk = MemStorage::new();
    let (mut leader, _) = PartitionLog::open(leader_disk.clone(), "p", cfg()).unwrap();
    let mut want = Vec::new();
    let mut plain_bytes = 0;
    for i in 0..10 {
        let b = batch(i);
        plain_bytes += b.encoded_len();
        // As a producer sends it: encoded (compressed) once, placed by the leader in place.
        let mut wire = EncodedBatch::encode(&b).unwrap().into_bytes();
        let info = leader
            .append_encoded_as_leader(CheckedBatch::check(&mut wire[..]).unwrap(), 1, 0)
            .unwrap();
        want.push(placed(b, info.base_offset));
    }
    let on_disk = leader_disk.contents(SEG0).unwrap();
    assert!(
        on_disk.len() < plain_bytes * 3 / 4,
        "stored compressed: {} of {plain_bytes} bytes",
        on_disk.len()
    );
    // Every stored batch names its codec in its attributes.
    let raw = leader.read_raw(0, usize::MAX).unwrap();
    let codecs: Vec<Codec> = split_batches(&raw)
        .map(|r| Codec::of_attributes(r.unwrap().0.attributes).unwrap())
        .collect();
    let expected: Vec<Codec> = want.iter().map(|b| b.codec().unwrap()).collect();
    assert_eq!(codecs, expected);

    // Replication: the follower appends the leader's bytes as they are.
    let follower_disk = MemStorage::new();
    let (mut follower, _) = PartitionLog::open(follower_disk.clone(), "p", cfg()).unwrap();
    for r in split_batches(&raw) {
        let (_, bytes) = r.unwrap();
        follower.append_encoded_as_follower(bytes, 0).unwrap();
    }
    assert_eq!(
        follower_disk.contents(SEG0).unwrap(),
        on_disk,
        "verbatim copy"
    );
    drop(follower);

    // A crash keeping every (unsynced) byte: recovery validates, and so decompresses,
    // every batch, and keeps them all.
    follower_disk.crash(|f| f.len);
    let (mut follower, sum) = PartitionLog::open(follower_disk.clone(), "p", cfg()).unwrap();
    assert_eq!(sum.batches_validated, 10, "{sum:?}");
    assert_eq!((sum.bytes_truncated, sum.corruption.is_none()), (0, true));
    assert_eq!(follower.log_end_offset(), 200);

    // A consumer's read decodes them, codec and all.
    assert_eq!(follower.read_below(0, 200, usize::MAX).unwrap(), want);
    assert_eq!(leader.read(0, usize::MAX).unwrap(), want);
    assert_eq!(follower.offset_for_timestamp(1_004).unwrap(), Some(80));
}

/// The log of `n` batches (unflushed), and where each ends in the segment.
fn build(mem: &MemStorage, n: usize) -> Vec<u64> {
    let (mut log, _) = PartitionLog::open(mem.clone(), "p", cfg()).unwrap();
    let mut ends = Vec::new();
    for i in 0..n {
        log.append_as_leader(batch(i), 1, 0).unwrap();
        ends.push(mem.contents(SEG0).unwrap().len() as u64);
    }
    ends
}

/// Overwrites the records section of the batch at `start..end` of the segment with
/// garbage and sets a CRC that matches it: only decompression can tell.
fn garble_payload(mem: &MemStorage, start: u64, end: u64) {
    let mut seg = mem.contents(SEG0).unwrap();
    let (start, end) = (start as usize, end as usize);
    for b in &mut seg[start + BATCH_HEADER_LEN..end] {
        *b = 0xa5;
    }
    let crc = crc32fast::hash(&seg[start + CRC_START..end]);
    seg[start + CRC_POS..start + CRC_START].copy_from_slice(&crc.to_be_bytes());
    mem.put_raw(SEG0, &seg);
}

#[test]
fn a_compressed_payload_that_does_not_decompress_is_cut_at_recovery() {
    // Batches 0..5: none, gzip, snappy, lz4, zstd. The last one's payload is garbled:
    // an unflushed tail that does not decompress is cut, as a CRC failure would be.
    let mem = MemStorage::new();
    let ends = build(&mem, 5);
    garble_payload(&mem, ends[3], ends[4]);
    let (mut log, sum) = PartitionLog::open(mem.clone(), "p", cfg()).unwrap();
    assert_eq!(log.log_end_offset(), 80);
    assert_eq!(sum.bytes_truncated, ends[4] - ends[3]);
    let reason = sum.truncation_reason.unwrap();
    assert!(
        reason.contains("zstd payload does not decompress"),
        "{reason}"
    );
    assert!(sum.corruption.is_none());
    assert_eq!(log.read(0, usize::MAX).unwrap().len(), 4);

    // Each codec's garbled payload, with valid batches after it: corruption, not a torn
    // write (the open fails, or with truncate_on_corruption cuts and reports it).
    for victim in 1..5 {
        let mem = MemStorage::new();
        let ends = build(&mem, 6);
        garble_payload(&mem, ends[victim - 1], ends[victim]);
        match PartitionLog::open(mem.clone(), "p", cfg()) {
            Err(LogError::Corrupt { offset, reason, .. }) => {
                assert_eq!(offset, victim as u64 * 20);
                assert!(reason.contains("does not decompress"), "{reason}");
            }
            other => panic!("batch {victim}: expected Corrupt, got {other:?}"),
        }
        let lenient = LogConfig {
            truncate_on_corruption: true,
            ..cfg()
        };
        let (log, sum) = PartitionLog::open(mem.clone(), "p", lenient).unwrap();
        assert_eq!(log.log_end_offset(), victim as u64 * 20);
        assert!(sum.corruption.is_some());
    }
}
