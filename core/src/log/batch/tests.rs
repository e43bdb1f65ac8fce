use super::checked::CRC_SHIFT_MIN;
use super::decode::decode_fast;
use super::encode::record_len;
use super::header::NO_PRODUCER;
use super::*;
use crate::log::codec::{Codec, CodecError, CODEC_MASK};
use crate::log::crc::crc32;
use crate::types::{LeaderEpoch, Offset};
use proptest::prelude::*;

fn sample() -> RecordBatch {
    RecordBatch {
        base_offset: 42,
        partition_leader_epoch: 7,
        attributes: 0,
        producer: Some(ProducerInfo {
            producer_id: 9,
            producer_epoch: 2,
            base_sequence: 100,
        }),
        first_timestamp: 1_700_000_000_000,
        max_timestamp: 1_700_000_000_005,
        records: vec![
            Record {
                offset_delta: 0,
                timestamp_delta: 0,
                key: Some(b"k".to_vec()),
                value: Some(b"hello".to_vec()),
                headers: vec![Header {
                    key: "h".into(),
                    value: b"v".to_vec(),
                }],
            },
            Record {
                offset_delta: 1,
                timestamp_delta: 5,
                key: None,
                value: None,
                headers: vec![],
            },
        ],
    }
}

#[test]
fn builders_place_stamp_and_time_a_batch() {
    let s = sample();
    let built = RecordBatch::of_records(0, s.records.clone())
        .at(42)
        .in_epoch(7)
        .with_producer(s.producer)
        .with_timestamps(1_700_000_000_000, 1_700_000_000_005);
    assert_eq!(built, s);
    let marker = RecordBatch::epoch_marker(5, 3, 0);
    assert!(marker.is_control());
    assert_eq!((marker.base_offset, marker.partition_leader_epoch), (5, 3));
    assert_eq!(
        marker.iter_offsets().map(|(o, _)| o).collect::<Vec<_>>(),
        [5]
    );
    assert_eq!(marker.data_records().count(), 0, "a marker holds no data");
    let placed: Vec<_> = s.offsets_at(1_000).map(|(o, r)| (o, r.clone())).collect();
    let moved = s.clone().at(1_000);
    let want: Vec<_> = moved.iter_offsets().map(|(o, r)| (o, r.clone())).collect();
    assert_eq!(placed, want);
    assert_eq!(placed[1].0, 1_001);
}

#[test]
fn roundtrip_and_length() {
    let b = sample();
    let enc = b.encode().unwrap();
    assert_eq!(enc.len(), b.encoded_len());
    let (dec, n) = RecordBatch::decode(&enc).unwrap();
    assert_eq!((dec, n), (b.clone(), enc.len()));
    let mut two = enc.clone();
    two.extend_from_slice(&enc);
    assert_eq!(RecordBatch::decode_all(&two).unwrap(), vec![b.clone(), b]);
    let h = BatchHeader::parse(&enc).unwrap();
    assert_eq!(
        (h.base_offset, h.record_count, h.next_offset()),
        (42, 2, 44)
    );
}

#[test]
fn zero_length_input() {
    assert!(matches!(
        RecordBatch::decode(&[]),
        Err(DecodeError::Truncated {
            what: "base_offset",
            ..
        })
    ));
    assert_eq!(RecordBatch::decode_all(&[]).unwrap(), vec![]);
}

#[test]
fn truncated_header() {
    let enc = sample().encode().unwrap();
    for cut in 0..BATCH_HEADER_LEN {
        assert!(
            matches!(
                RecordBatch::decode(&enc[..cut]),
                Err(DecodeError::Truncated { .. })
            ),
            "cut at {cut}"
        );
    }
}

#[test]
fn length_past_end() {
    let enc = sample().encode().unwrap();
    for cut in BATCH_HEADER_LEN..enc.len() {
        assert!(matches!(
            RecordBatch::decode(&enc[..cut]),
            Err(DecodeError::Truncated {
                what: "batch body",
                ..
            })
        ));
    }
    let mut big = enc.clone();
    big[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
    assert!(matches!(
        RecordBatch::decode(&big),
        Err(DecodeError::Truncated { .. })
    ));
}

#[test]
fn length_too_small() {
    let mut enc = sample().encode().unwrap();
    enc[8..12].copy_from_slice(&3u32.to_be_bytes());
    assert_eq!(
        RecordBatch::decode(&enc),
        Err(DecodeError::LengthTooSmall(3))
    );
}

#[test]
fn wrong_crc() {
    let mut enc = sample().encode().unwrap();
    enc[CRC_POS] ^= 0xff;
    assert!(matches!(
        RecordBatch::decode(&enc),
        Err(DecodeError::CrcMismatch { .. })
    ));
}

#[test]
fn unsupported_version() {
    let mut enc = sample().encode().unwrap();
    enc[12] = 9;
    assert_eq!(
        RecordBatch::decode(&enc),
        Err(DecodeError::UnsupportedVersion(9))
    );
}

#[test]
fn every_bit_flip_is_caught_or_harmless() {
    // Flips after the CRC field fail the CRC; flips before it fail the length/version
    // checks, except in the base offset, which the log checks against its position.
    let b = sample();
    let enc = b.encode().unwrap();
    for pos in 0..enc.len() {
        for bit in 0..8 {
            let mut bad = enc.clone();
            bad[pos] ^= 1 << bit;
            if let Ok((d, _)) = RecordBatch::decode(&bad) {
                assert!(pos < 8, "undetected flip at byte {pos}");
                assert_ne!(d.base_offset, b.base_offset);
            }
        }
    }
}

#[test]
fn crc_valid_but_malformed_records() {
    // Hand-build a batch whose record length lies, with a correct CRC.
    let mut enc = sample().encode().unwrap();
    let rec0 = BATCH_HEADER_LEN;
    enc[rec0..rec0 + 4].copy_from_slice(&1000u32.to_be_bytes());
    let crc = crc32(&enc[CRC_START..]);
    enc[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
    assert!(matches!(
        RecordBatch::decode(&enc),
        Err(DecodeError::Malformed(_))
    ));
    // A record count the bytes cannot hold.
    let mut enc = sample().encode().unwrap();
    enc[53..57].copy_from_slice(&u32::MAX.to_be_bytes());
    let crc = crc32(&enc[CRC_START..]);
    enc[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
    assert!(matches!(
        RecordBatch::decode(&enc),
        Err(DecodeError::Malformed(_))
    ));
}

/// `decode_verified`'s fast path against the full walk on `enc` (header parsed from
/// it, then with a lying record count): the same batch or the same error.
fn fast_decode_agrees(enc: &[u8]) {
    let Ok(h) = BatchHeader::parse(enc) else {
        return;
    };
    let counts = [h.record_count, h.record_count.wrapping_add(1), 0];
    // Codec bits off: the walk reads the records section as it is stored.
    let attributes = h.attributes & !CODEC_MASK;
    for h in counts.map(|record_count| BatchHeader {
        record_count,
        attributes,
        ..h
    }) {
        assert_eq!(
            RecordBatch::decode_verified(enc, &h),
            RecordBatch::decode_walked(enc, &h),
            "bytes {enc:?}"
        );
    }
}

#[test]
fn fast_decode_takes_intact_batches_and_agrees_on_every_damaged_byte() {
    let mut b = sample();
    b.records[1].headers = vec![
        Header {
            key: String::new(),
            value: vec![],
        },
        Header {
            key: "é".into(),
            value: b"xyz".to_vec(),
        },
    ];
    let enc = b.encode().unwrap();
    let h = BatchHeader::parse(&enc).unwrap();
    assert_eq!(decode_fast(&enc, &h), Some(b.records.clone()));
    let mut two = enc.clone();
    two.extend_from_slice(&enc);
    assert_eq!(
        decode_fast(&two, &h),
        Some(b.records.clone()),
        "a next batch"
    );
    let empty = RecordBatch::of_records(0, vec![]).encode().unwrap();
    let eh = BatchHeader::parse(&empty).unwrap();
    assert_eq!(decode_fast(&empty, &eh), Some(vec![]));
    fast_decode_agrees(&empty);
    // Every byte set to values that make lengths, counts and UTF-8 lie.
    for i in 0..enc.len() {
        for v in [
            0x00,
            0x01,
            0x7f,
            0x80,
            0xfe,
            0xff,
            enc[i] ^ 0x01,
            enc[i] ^ 0x20,
        ] {
            let mut bad = enc.clone();
            bad[i] = v;
            fast_decode_agrees(&bad);
        }
    }
    // Cut short, and followed by other bytes.
    for n in 0..enc.len() {
        fast_decode_agrees(&enc[..n]);
    }
    fast_decode_agrees(&two);
}

#[test]
fn reserved_producer_id_refused() {
    let mut b = sample();
    b.producer = Some(ProducerInfo {
        producer_id: u64::MAX,
        producer_epoch: 0,
        base_sequence: 0,
    });
    assert!(matches!(
        b.encode(),
        Err(EncodeError::ReservedProducerId(_))
    ));
}

#[test]
fn encoded_batches_split_travel_as_one_byte_string_and_stop_at_damage() {
    let a = sample().encode().unwrap();
    let b = placed(sample(), 44, 8).encode().unwrap();
    let both = EncodedBatches::new([a.clone(), b.clone()].concat());
    let split: Vec<_> = both.iter().map(|r| r.unwrap()).collect();
    assert_eq!(split.len(), 2);
    assert_eq!((split[0].0.base_offset, split[0].1), (42, &a[..]));
    assert_eq!((split[1].0.base_offset, split[1].1), (44, &b[..]));
    assert_eq!(both.offsets(), Some((42, 46)));
    assert_eq!(
        format!("{both:?}"),
        format!(
            "EncodedBatches({} bytes, offsets 42..46)",
            a.len() + b.len()
        )
    );
    // bincode: a u64 length, then the bytes as they are (not one element per byte).
    let wire = bincode::serialize(&both).unwrap();
    assert_eq!(wire.len(), 8 + a.len() + b.len());
    assert_eq!(&wire[8..], both.as_bytes());
    assert_eq!(bincode::deserialize::<EncodedBatches>(&wire).unwrap(), both);
    // A format without byte strings (JSON) writes numbers; they read back the same.
    let json = serde_json::to_string(&both).unwrap();
    assert_eq!(serde_json::from_str::<EncodedBatches>(&json).unwrap(), both);
    // A cut second batch: the first still splits, then the walk ends with the error.
    let cut = EncodedBatches::new(both.as_bytes()[..a.len() + b.len() - 1].to_vec());
    let mut it = cut.iter();
    assert_eq!(it.next().unwrap().unwrap().1, &a[..]);
    assert!(matches!(
        it.next(),
        Some(Err(DecodeError::Truncated { .. }))
    ));
    assert!(it.next().is_none());
    assert_eq!(cut.offsets(), None);
    assert_eq!(EncodedBatches::default().offsets(), None);
    assert!(EncodedBatches::default().iter().next().is_none());
}

/// What a leader's log makes of `b`: placed at `base` in `epoch`, deltas dense, the
/// max timestamp the largest record timestamp.
fn placed(mut b: RecordBatch, base: Offset, epoch: LeaderEpoch) -> RecordBatch {
    b.base_offset = base;
    b.partition_leader_epoch = epoch;
    let first = b.first_timestamp;
    b.max_timestamp = first;
    for (i, r) in b.records.iter_mut().enumerate() {
        r.offset_delta = i as u32;
        b.max_timestamp = b.max_timestamp.max(first.saturating_add(r.timestamp_delta));
    }
    b
}

#[test]
fn place_encoded_gives_the_placed_encoding() {
    let b = sample();
    let mut enc = b.encode().unwrap();
    let h = place_encoded(&mut enc, 1000, 9).unwrap();
    let want = placed(b, 1000, 9);
    assert_eq!(enc, want.encode().unwrap());
    assert_eq!(h, BatchHeader::parse(&enc).unwrap());
    assert_eq!((h.base_offset, h.partition_leader_epoch), (1000, 9));
    assert_eq!(h.max_timestamp, 1_700_000_000_005);
    assert_eq!(check_encoded(&enc).unwrap(), (h, true));
}

/// Both ways of finding the placed CRC (hashing the records again, shifting the old CRC)
/// give the placed encoding, at the sizes around where one takes over from the other.
#[test]
fn place_encoded_either_side_of_the_crc_shift_threshold() {
    for extra in [0, 1, 100] {
        for size in [CRC_SHIFT_MIN - 200, CRC_SHIFT_MIN, CRC_SHIFT_MIN + 3000] {
            let mut b = sample();
            b.records[1].value = Some(vec![7; size + extra]);
            let records_len = b.encode().unwrap().len() - BATCH_HEADER_LEN;
            assert!(records_len.abs_diff(size) < 200, "{records_len} vs {size}");
            let mut enc = b.encode().unwrap();
            let h = place_encoded(&mut enc, 77, 3).unwrap();
            assert_eq!(enc, placed(b, 77, 3).encode().unwrap(), "size {size}");
            assert_eq!(h, BatchHeader::parse(&enc).unwrap());
        }
    }
}

/// `check_parsed` with the header parsed from the same bytes is `check`: the same
/// batch for intact bytes, the same error for every single damaged byte whose header
/// still parses (the leader's replica parses first and checks with what it parsed).
#[test]
fn check_parsed_is_check() {
    let enc = sample().encode().unwrap();
    let good = CheckedBatch::check(&enc[..]).unwrap();
    let parsed = CheckedBatch::check_parsed(&enc[..], BatchHeader::parse(&enc).unwrap());
    let parsed = parsed.unwrap();
    assert_eq!(
        (parsed.header(), parsed.is_dense()),
        (good.header(), good.is_dense())
    );
    for i in 0..enc.len() {
        let mut bad = enc.clone();
        bad[i] ^= 0x10;
        let Ok(h) = BatchHeader::parse(&bad) else {
            continue;
        };
        let want = CheckedBatch::check(&bad[..]).map(|c| *c.header());
        let got = CheckedBatch::check_parsed(&bad[..], h).map(|c| *c.header());
        assert_eq!(got, want, "byte {i}");
        assert!(
            got.is_err() || i < CRC_START,
            "byte {i}: damage under the CRC is caught"
        );
    }
}

#[test]
fn encoded_checks_refuse_what_decoding_refuses() {
    let enc = sample().encode().unwrap();
    let mut bad = enc.clone();
    bad[BATCH_HEADER_LEN + 10] ^= 1;
    let before = bad.clone();
    assert!(matches!(
        place_encoded(&mut bad, 5, 1),
        Err(DecodeError::CrcMismatch { .. })
    ));
    assert_eq!(bad, before, "a refused batch is left as it was");
    assert!(matches!(
        check_encoded(&bad),
        Err(DecodeError::CrcMismatch { .. })
    ));
    let mut long = enc.clone();
    long.push(0);
    assert!(matches!(
        check_encoded(&long),
        Err(DecodeError::Malformed(_))
    ));
    assert!(matches!(
        place_encoded(&mut long, 0, 0),
        Err(DecodeError::Malformed(_))
    ));
    let mut short = enc[..enc.len() - 1].to_vec();
    assert!(matches!(
        place_encoded(&mut short, 0, 0),
        Err(DecodeError::Truncated { .. })
    ));
    // A record whose length lies, under a correct CRC.
    let mut lying = enc.clone();
    lying[BATCH_HEADER_LEN..BATCH_HEADER_LEN + 4].copy_from_slice(&1000u32.to_be_bytes());
    let crc = crc32(&lying[CRC_START..]);
    lying[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
    assert!(matches!(
        check_encoded(&lying),
        Err(DecodeError::Malformed(_))
    ));
    assert!(matches!(
        place_encoded(&mut lying, 0, 0),
        Err(DecodeError::Malformed(_))
    ));
    // Sparse deltas: a follower's log must refuse them, a leader's renumbers them.
    let mut sparse = sample();
    sparse.records[1].offset_delta = 7;
    let mut enc = sparse.encode().unwrap();
    assert!(!check_encoded(&enc).unwrap().1);
    place_encoded(&mut enc, 3, 2).unwrap();
    assert_eq!(enc, placed(sparse, 3, 2).encode().unwrap());
    assert!(check_encoded(&enc).unwrap().1);
}

/// The encoding, byte for byte, against the format written out field by field
/// (docs/format.md): with and without a producer, keys, values and headers.
#[test]
fn encode_writes_the_documented_layout() {
    fn be(out: &mut Vec<u8>, b: &[u8]) {
        out.extend_from_slice(b);
    }
    for b in [sample(), sample().with_producer(None)] {
        let mut want = Vec::new();
        be(&mut want, &b.base_offset.to_be_bytes());
        be(
            &mut want,
            &((b.encoded_len() - LOG_OVERHEAD) as u32).to_be_bytes(),
        );
        want.push(BATCH_MAGIC);
        be(&mut want, &[0; 4]);
        be(&mut want, &b.partition_leader_epoch.to_be_bytes());
        be(&mut want, &b.attributes.to_be_bytes());
        be(&mut want, &b.first_timestamp.to_be_bytes());
        be(&mut want, &b.max_timestamp.to_be_bytes());
        let p = b.producer.unwrap_or(ProducerInfo {
            producer_id: NO_PRODUCER,
            producer_epoch: u16::MAX,
            base_sequence: u32::MAX,
        });
        be(&mut want, &p.producer_id.to_be_bytes());
        be(&mut want, &p.producer_epoch.to_be_bytes());
        be(&mut want, &p.base_sequence.to_be_bytes());
        be(&mut want, &(b.records.len() as u32).to_be_bytes());
        for r in &b.records {
            be(&mut want, &((record_len(r) - 4) as u32).to_be_bytes());
            be(&mut want, &r.offset_delta.to_be_bytes());
            be(&mut want, &r.timestamp_delta.to_be_bytes());
            for f in [&r.key, &r.value] {
                match f {
                    None => be(&mut want, &(-1i32).to_be_bytes()),
                    Some(v) => {
                        be(&mut want, &(v.len() as i32).to_be_bytes());
                        be(&mut want, v);
                    }
                }
            }
            be(&mut want, &(r.headers.len() as u32).to_be_bytes());
            for h in &r.headers {
                be(&mut want, &(h.key.len() as u32).to_be_bytes());
                be(&mut want, h.key.as_bytes());
                be(&mut want, &(h.value.len() as u32).to_be_bytes());
                be(&mut want, &h.value);
            }
        }
        let crc = crc32(&want[CRC_START..]);
        want[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(b.encode().unwrap(), want);
        // Appended after other bytes, too.
        let mut out = b"xyz".to_vec();
        b.encode_into(&mut out).unwrap();
        assert_eq!((&out[..3], &out[3..]), (&b"xyz"[..], &want[..]));
    }
}

#[test]
fn encoded_batch_is_the_log_format_as_one_byte_string() {
    let b = sample();
    let e = EncodedBatch::encode(&b).unwrap();
    assert_eq!(e.as_bytes(), &b.encode().unwrap()[..]);
    assert_eq!(
        e.header().unwrap(),
        BatchHeader::parse(e.as_bytes()).unwrap()
    );
    assert_eq!((e.record_count(), e.len()), (2, b.encoded_len()));
    assert_eq!(e.decode().unwrap(), b);
    assert_eq!(
        format!("{e:?}"),
        format!(
            "EncodedBatch({} bytes, 2 records, producer 9 epoch 2 sequence 100)",
            e.len()
        )
    );
    let plain = EncodedBatch::encode(&b.clone().with_producer(None)).unwrap();
    assert_eq!(
        format!("{plain:?}"),
        format!("EncodedBatch({} bytes, 2 records)", plain.len())
    );
    let junk = EncodedBatch::from_bytes(b"junk".to_vec());
    assert_eq!(format!("{junk:?}"), "EncodedBatch(4 bytes, unparsable)");
    assert_eq!(junk.record_count(), 0);
    assert!(matches!(junk.decode(), Err(DecodeError::Truncated { .. })));
    // One batch exactly: trailing bytes are refused.
    let mut long = e.clone().into_bytes();
    long.push(0);
    let long = EncodedBatch::from_bytes(long);
    assert!(matches!(long.decode(), Err(DecodeError::Malformed(_))));
    // bincode: a u64 length, then the bytes as they are.
    let wire = bincode::serialize(&e).unwrap();
    assert_eq!(wire.len(), 8 + e.len());
    assert_eq!(&wire[8..], e.as_bytes());
    assert_eq!(bincode::deserialize::<EncodedBatch>(&wire).unwrap(), e);
    let json = serde_json::to_string(&e).unwrap();
    assert_eq!(serde_json::from_str::<EncodedBatch>(&json).unwrap(), e);
    assert!(matches!(
        EncodedBatch::encode(&b.with_producer(Some(ProducerInfo {
            producer_id: u64::MAX,
            producer_epoch: 0,
            base_sequence: 0,
        }))),
        Err(EncodeError::ReservedProducerId(_))
    ));
}

fn arb_record() -> impl Strategy<Value = Record> {
    (
        any::<u32>(),
        any::<i64>(),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
        proptest::collection::vec(
            ("[a-z]{0,5}", proptest::collection::vec(any::<u8>(), 0..5)),
            0..3,
        ),
    )
        .prop_map(|(offset_delta, timestamp_delta, key, value, hs)| Record {
            offset_delta,
            timestamp_delta,
            key,
            value,
            headers: hs
                .into_iter()
                .map(|(key, value)| Header { key, value })
                .collect(),
        })
}

fn arb_batch() -> impl Strategy<Value = RecordBatch> {
    (
        0u64..u64::MAX / 2,
        any::<u32>(),
        any::<u16>(),
        proptest::option::of((0u64..u64::MAX - 1, any::<u16>(), any::<u32>())),
        any::<i64>(),
        any::<i64>(),
        proptest::collection::vec(arb_record(), 0..6),
    )
        .prop_map(
            |(base_offset, epoch, attributes, p, ft, mt, records)| RecordBatch {
                base_offset,
                partition_leader_epoch: epoch,
                // Uncompressed: `prop_compressed_*` cover the codecs.
                attributes: attributes & !CODEC_MASK,
                producer: p.map(
                    |(producer_id, producer_epoch, base_sequence)| ProducerInfo {
                        producer_id,
                        producer_epoch,
                        base_sequence,
                    },
                ),
                first_timestamp: ft,
                max_timestamp: mt,
                records,
            },
        )
}

/// A compressed batch: the header as the uncompressed encoding's (length and CRC
/// aside), the records section the codec's compression of the uncompressed one.
#[test]
fn compressed_batches_store_the_records_section_compressed() {
    let mut b = sample();
    b.records[0].value = Some(b"hello hello hello hello hello hello".repeat(20));
    for codec in Codec::ALL.into_iter().skip(1) {
        let cb = b.clone().with_codec(codec);
        assert_eq!(cb.codec(), Ok(codec));
        let plain = cb.encode_plain_for_test();
        let enc = cb.encode().unwrap();
        let z = codec.compress(&plain[BATCH_HEADER_LEN..]);
        assert_eq!(&enc[BATCH_HEADER_LEN..], &z[..], "{codec}");
        assert!(enc.len() < plain.len(), "{codec} made it smaller");
        assert_eq!(enc[21..23], cb.attributes.to_be_bytes());
        assert_eq!(
            (&enc[..8], &enc[12..CRC_POS]),
            (&plain[..8], &plain[12..CRC_POS])
        );
        assert_eq!(
            &enc[CRC_START..BATCH_HEADER_LEN],
            &plain[CRC_START..BATCH_HEADER_LEN]
        );
        let h = BatchHeader::parse(&enc).unwrap();
        assert_eq!(h.total_len(), enc.len());
        assert_eq!(h.crc, crc32(&enc[CRC_START..]));
        let (d, n) = RecordBatch::decode(&enc).unwrap();
        assert_eq!((d, n), (cb.clone(), enc.len()));
        assert_eq!(check_encoded(&enc).unwrap(), (h, true));
        // Placed by a leader: header fields set, the compressed records untouched.
        let mut placed_enc = enc.clone();
        let ph = place_encoded(&mut placed_enc, 500, 3).unwrap();
        assert_eq!(&placed_enc[BATCH_HEADER_LEN..], &enc[BATCH_HEADER_LEN..]);
        assert_eq!(placed_enc, placed(cb.clone(), 500, 3).encode().unwrap());
        assert_eq!(ph, BatchHeader::parse(&placed_enc).unwrap());
    }
}

#[test]
fn a_compressed_payload_that_does_not_decompress_is_refused_everywhere() {
    let cb = sample().with_codec(Codec::Lz4);
    let mut enc = cb.encode().unwrap();
    // Garbage records under a valid CRC: what only a bad writer (or bit rot before
    // the CRC was computed) makes.
    for byte in &mut enc[BATCH_HEADER_LEN..] {
        *byte = 0xa5;
    }
    let crc = crc32(&enc[CRC_START..]);
    enc[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
    let codec_err = |r: Result<_, DecodeError>| matches!(r, Err(DecodeError::Codec(_)));
    assert!(codec_err(RecordBatch::decode(&enc).map(|_| ())));
    assert!(codec_err(check_encoded(&enc).map(|_| ())));
    let before = enc.clone();
    assert!(codec_err(place_encoded(&mut enc, 1, 1).map(|_| ())));
    assert_eq!(enc, before, "a refused batch is left as it was");
    // Unknown codec bits (5-7): refused when encoding and decoding.
    let mut unknown = sample();
    unknown.attributes = 6;
    assert_eq!(
        unknown.encode(),
        Err(EncodeError::Codec(CodecError::Unknown(6)))
    );
    let mut enc = sample().encode().unwrap();
    enc[22] |= 7;
    let crc = crc32(&enc[CRC_START..]);
    enc[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(
        RecordBatch::decode(&enc),
        Err(DecodeError::Codec(CodecError::Unknown(7)))
    );
    // Sparse deltas cannot be renumbered inside compressed bytes: refused.
    let mut sparse = sample().with_codec(Codec::Gzip);
    sparse.records[1].offset_delta = 9;
    let mut enc = sparse.encode().unwrap();
    assert!(!check_encoded(&enc).unwrap().1);
    assert!(matches!(
        place_encoded(&mut enc, 0, 0),
        Err(DecodeError::Malformed(_))
    ));
}

impl RecordBatch {
    fn encode_plain_for_test(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_plain_into(&mut out).unwrap();
        out
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn prop_compressed_roundtrip(b in arb_batch(), codec in 1u8..=4) {
        let b = b.with_codec(Codec::from_id(codec).unwrap());
        let enc = b.encode().unwrap();
        let (d, n) = RecordBatch::decode(&enc).unwrap();
        prop_assert_eq!(n, enc.len());
        prop_assert_eq!(d, b);
    }

    #[test]
    fn prop_compressed_damage_never_panics(b in arb_batch(), codec in 1u8..=4, edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4)) {
        let mut enc = b.with_codec(Codec::from_id(codec).unwrap()).encode().unwrap();
        for (i, v) in edits {
            let i = BATCH_HEADER_LEN + i % (enc.len() - BATCH_HEADER_LEN).max(1);
            if let Some(byte) = enc.get_mut(i) {
                *byte = v;
            }
        }
        let crc = crc32(&enc[CRC_START..]);
        enc[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
        let decoded = RecordBatch::decode(&enc).ok().filter(|(_, n)| *n == enc.len());
        prop_assert_eq!(check_encoded(&enc).is_ok(), decoded.is_some());
    }

    #[test]
    fn prop_roundtrip(b in arb_batch()) {
        let enc = b.encode().unwrap();
        prop_assert_eq!(enc.len(), b.encoded_len());
        let (d, n) = RecordBatch::decode(&enc).unwrap();
        prop_assert_eq!(n, enc.len());
        prop_assert_eq!(d, b);
    }

    #[test]
    fn prop_place_encoded_matches_encoding_the_placed_batch(b in arb_batch(), base in 0u64..u64::MAX / 4, epoch in any::<u32>()) {
        let mut enc = b.encode().unwrap();
        let h = place_encoded(&mut enc, base, epoch).unwrap();
        prop_assert_eq!(&enc, &placed(b, base, epoch).encode().unwrap());
        prop_assert_eq!(h, BatchHeader::parse(&enc).unwrap());
    }

    #[test]
    fn prop_encoded_checks_agree_with_decode(b in arb_batch(), edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4), fix_crc in any::<bool>()) {
        let mut enc = b.encode().unwrap();
        for (i, v) in edits {
            let i = i % enc.len();
            enc[i] = v;
        }
        if fix_crc {
            let crc = crc32(&enc[CRC_START..]);
            enc[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
        }
        // Exactly one batch: what a decode of the whole buffer accepts.
        let decoded = RecordBatch::decode(&enc).ok().filter(|(_, n)| *n == enc.len());
        let checked = check_encoded(&enc);
        prop_assert_eq!(checked.is_ok(), decoded.is_some());
        let mut placed_bytes = enc.clone();
        let place = place_encoded(&mut placed_bytes, 1, 1);
        prop_assert_eq!(place.is_ok(), decoded.is_some());
        if place.is_err() {
            prop_assert_eq!(&placed_bytes, &enc, "refused: unchanged");
        }
        if let (Ok((h, dense)), Some((d, _))) = (checked, decoded) {
            prop_assert_eq!(h.record_count as usize, d.records.len());
            let want = d.records.iter().enumerate().all(|(i, r)| r.offset_delta == i as u32);
            prop_assert_eq!(dense, want);
        }
    }

    #[test]
    fn prop_fast_decode_is_the_walk(b in arb_batch(), edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4), tail in proptest::collection::vec(any::<u8>(), 0..3)) {
        let mut enc = b.encode().unwrap();
        let h = BatchHeader::parse(&enc).unwrap();
        prop_assert_eq!(decode_fast(&enc, &h), Some(b.records.clone()));
        // Edits past the fixed header, where they reach the records more often.
        for (i, v) in edits {
            let i = BATCH_HEADER_LEN + i % (enc.len() - BATCH_HEADER_LEN + 1);
            if let Some(byte) = enc.get_mut(i) {
                *byte = v;
            }
        }
        enc.extend(tail);
        fast_decode_agrees(&enc);
    }

    #[test]
    fn prop_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = RecordBatch::decode(&bytes);
        fast_decode_agrees(&bytes);
        let _ = RecordBatch::decode_all(&bytes);
        let _ = BatchHeader::parse(&bytes);
        // What a follower does with a fetch answer's bytes before appending them.
        let _ = split_batches(&bytes).count();
        let _ = EncodedBatches::new(bytes).offsets();
    }

    #[test]
    fn prop_mutated_batch_never_panics(b in arb_batch(), edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4), fix_crc in any::<bool>()) {
        let mut enc = b.encode().unwrap();
        for (i, v) in edits {
            let i = i % enc.len();
            enc[i] = v;
        }
        if fix_crc && enc.len() >= CRC_START {
            let crc = crc32(&enc[CRC_START..]);
            enc[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
        }
        let _ = RecordBatch::decode(&enc);
        fast_decode_agrees(&enc);
    }
}
