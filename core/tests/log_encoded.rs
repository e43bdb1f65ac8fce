//! Appending batches still encoded (`append_encoded_as_leader` / `_as_follower`, what a
//! broker does with a producer's or the leader's bytes) leaves exactly the files that
//! appending the decoded batches leaves, and refuses what decoding would refuse.

use proptest::prelude::*;
use skein_core::log::*;
use skein_core::testing::MemStorage;
mod common;
use common::cases;

const DIR: &str = "t-0";

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 600,
        index_interval_bytes: 150,
        retention_ms: None,
        segment_ms: None,
        ..LogConfig::default()
    }
}

fn open(mem: &MemStorage) -> PartitionLog<MemStorage> {
    PartitionLog::open(mem.clone(), DIR, config()).unwrap().0
}

/// Every file of the log directory with its content.
fn files(mem: &MemStorage) -> Vec<(String, Vec<u8>)> {
    let mut m = mem.clone();
    let names = m.list(DIR).unwrap();
    names
        .into_iter()
        .map(|n| {
            let data = m.read_all(&format!("{DIR}/{n}")).unwrap();
            (n, data)
        })
        .collect()
}

fn arb_batch() -> impl Strategy<Value = RecordBatch> {
    let record = (
        0u32..4,
        -5i64..50,
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8)),
        proptest::collection::vec(any::<u8>(), 0..60),
        proptest::collection::vec(
            ("[a-z]{0,3}", proptest::collection::vec(any::<u8>(), 0..3)),
            0..2,
        ),
    )
        .prop_map(|(delta, ts, key, value, hs)| Record {
            offset_delta: delta,
            timestamp_delta: ts,
            key,
            value: Some(value),
            headers: hs
                .into_iter()
                .map(|(key, value)| Header { key, value })
                .collect(),
        });
    (
        0i64..1000,
        proptest::option::of((0u64..10, any::<u16>(), any::<u32>())),
        proptest::collection::vec(record, 1..6),
    )
        .prop_map(|(ts, p, records)| {
            RecordBatch::of_records(ts, records).with_producer(p.map(
                |(producer_id, producer_epoch, base_sequence)| ProducerInfo {
                    producer_id,
                    producer_epoch,
                    base_sequence,
                },
            ))
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(64), ..ProptestConfig::default() })]

    /// Leader: decoded and encoded appends give the same answers and the same files
    /// (segments, indexes, checkpoints), rolls included. Follower: copying the leader's
    /// batches byte for byte gives the same files again.
    #[test]
    fn encoded_appends_write_what_decoded_appends_write(
        batches in proptest::collection::vec((arb_batch(), 0u32..2), 1..25),
    ) {
        let (decoded_mem, encoded_mem, follower_mem) =
            (MemStorage::new(), MemStorage::new(), MemStorage::new());
        let (mut decoded, mut encoded, mut follower) =
            (open(&decoded_mem), open(&encoded_mem), open(&follower_mem));
        let mut epoch = 1;
        for (i, (b, bump)) in batches.into_iter().enumerate() {
            epoch += bump;
            let mut wire = b.encode().unwrap();
            let a = decoded.append_as_leader(b, epoch, i as i64).unwrap();
            let e = encoded.append_encoded_as_leader(checked(&mut wire), epoch, i as i64).unwrap();
            prop_assert_eq!(&a, &e);
            prop_assert_eq!(&wire, &decoded.read_raw(a.base_offset, 1).unwrap());
            let f = follower.append_encoded_as_follower(&wire, i as i64).unwrap();
            prop_assert_eq!(&a, &f);
        }
        for log in [&mut decoded, &mut encoded, &mut follower] {
            log.flush().unwrap();
        }
        let want = files(&decoded_mem);
        prop_assert_eq!(&files(&encoded_mem), &want);
        prop_assert_eq!(&files(&follower_mem), &want);
    }
}

/// `bytes` as a leader's replica hands them to its log: checked.
fn checked(bytes: &mut [u8]) -> CheckedBatch<&mut [u8]> {
    CheckedBatch::check(bytes).expect("an intact batch")
}

#[test]
fn encoded_appends_refuse_bad_batches_and_leave_the_log_alone() {
    let mem = MemStorage::new();
    let mut log = open(&mem);
    let b = common::batch(1, 3);
    let good = b.encode().unwrap();
    log.append_encoded_as_leader(checked(&mut good.clone()), 2, 0)
        .unwrap();
    let before = files(&mem);

    let mut flipped = good.clone();
    flipped[70] ^= 4;
    // Damaged bytes never become a batch the log takes.
    let e = CheckedBatch::check(&mut flipped[..]);
    assert!(matches!(e, Err(DecodeError::CrcMismatch { .. })));
    let mut two = good.clone();
    two.extend_from_slice(&good);
    assert!(matches!(
        CheckedBatch::check(&mut two[..]),
        Err(DecodeError::Malformed(_))
    ));
    let mut empty = RecordBatch::from_values(0, Vec::<Vec<u8>>::new())
        .encode()
        .unwrap();
    assert_eq!(
        log.append_encoded_as_leader(checked(&mut empty), 2, 0),
        Err(LogError::EmptyBatch)
    );
    let mut stale = good.clone();
    assert!(matches!(
        log.append_encoded_as_leader(checked(&mut stale), 1, 0),
        Err(LogError::EpochRegression {
            epoch: 1,
            latest: 2
        })
    ));
    assert_eq!(stale, good, "a refused batch is left as it was");
    let big = RecordBatch::from_values(0, [vec![0u8; 2 << 20]]);
    assert!(matches!(
        log.append_encoded_as_leader(checked(&mut big.encode().unwrap()), 2, 0),
        Err(LogError::BatchTooLarge { .. })
    ));

    // The follower: only the batch at the log end, dense, intact.
    let at_3 = b.clone().at(3).in_epoch(2).encode().unwrap();
    assert_eq!(
        log.append_encoded_as_follower(&b.clone().at(4).in_epoch(2).encode().unwrap(), 0),
        Err(LogError::NonContiguousAppend {
            expected: 3,
            got: 4
        })
    );
    let mut sparse = b.clone().at(3).in_epoch(2);
    sparse.records[2].offset_delta = 9;
    assert!(matches!(
        log.append_encoded_as_follower(&sparse.encode().unwrap(), 0),
        Err(LogError::InvalidBatch(_))
    ));
    let mut torn = at_3.clone();
    torn.pop();
    assert!(matches!(
        log.append_encoded_as_follower(&torn, 0),
        Err(LogError::InvalidBatch(_))
    ));
    assert_eq!(files(&mem), before, "refused appends change no file");
    assert_eq!(log.log_end_offset(), 3);

    let info = log.append_encoded_as_follower(&at_3, 0).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (3, 5));
    assert_eq!(log.read(3, 1).unwrap(), vec![b.at(3).in_epoch(2)]);
}
