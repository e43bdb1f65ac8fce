use super::*;
use proptest::prelude::*;
use skein_core::controller::{ControllerRequest, TopicConfig};
use skein_core::log::{EncodedBatch, EncodedBatches, RecordBatch};
use skein_core::message::*;
use skein_core::types::TopicPartition;

const MAX: u32 = 1 << 20;

fn batch(values: Vec<Vec<u8>>) -> RecordBatch {
    RecordBatch::from_values(1, values)
}

/// A leader's answer to a replica fetch carrying `batches` as its log stores them.
fn records_answer(topic: String, correlation: u64, batches: &[RecordBatch]) -> FetchResponse {
    let mut bytes = Vec::new();
    for b in batches {
        b.encode_into(&mut bytes).unwrap();
    }
    FetchResponse {
        correlation,
        tp: TopicPartition::new(topic, 0),
        leader_epoch: 3,
        result: FetchResult::Records {
            records: EncodedBatches::new(bytes),
            high_watermark: 5,
            log_start_offset: 0,
            log_end_offset: 7,
        },
    }
}

fn arb_frame() -> impl Strategy<Value = Frame> {
    let topic = "[a-z]{1,8}";
    prop_oneof![
        any::<u32>().prop_map(|n| Frame::Hello(Hello {
            from: Peer::Node(n)
        })),
        Just(Frame::Hello(Hello { from: Peer::Client })),
        Just(Frame::StatsRequest),
        ".{0,40}".prop_map(|reason| Frame::Goodbye(Goodbye { reason })),
        (
            topic,
            any::<u32>(),
            any::<u64>(),
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 1..8)
        )
            .prop_map(|(t, p, c, vals)| Frame::Msg(Message::from(ProduceRequest {
                correlation: c,
                tp: TopicPartition::new(t, p),
                acks: Acks::All,
                timeout: 5,
                batch: EncodedBatch::encode(&batch(vals)).unwrap(),
                transactional_id: None,
            }))),
        (topic, any::<u64>(), any::<u64>(), any::<Option<u32>>()).prop_map(|(t, c, off, e)| {
            Frame::Msg(Message::Fetch(FetchRequest {
                correlation: c,
                tp: TopicPartition::new(t, 0),
                replica_id: 2,
                current_leader_epoch: 3,
                fetch_offset: off,
                last_fetched_epoch: e,
                max_bytes: 1000,
                high_watermark: off / 2,
                max_wait: 500_000_000,
            }))
        }),
        (
            topic,
            any::<u64>(),
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 1..8)
        )
            .prop_map(
                |(t, c, vals)| Frame::Msg(Message::FetchResponse(records_answer(
                    t,
                    c,
                    &[batch(vals.clone()), batch(vals).at(100)]
                )))
            ),
        (
            any::<u64>(),
            prop::option::of(prop::collection::vec(topic, 0..3))
        )
            .prop_map(|(c, topics)| Frame::Msg(Message::Metadata(MetadataRequest {
                correlation: c,
                topics
            }))),
        (topic, 1u32..10).prop_map(|(name, partitions)| Frame::Msg(Message::ControllerRequest(
            ControllerRequest::CreateTopic {
                name,
                config: TopicConfig {
                    partitions,
                    ..TopicConfig::default()
                },
                assignment: None,
            }
        ))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn round_trip(frame in arb_frame()) {
        let bytes = encode(&frame, MAX).unwrap();
        let (back, used) = decode(&bytes, MAX).unwrap();
        prop_assert_eq!(used, bytes.len());
        prop_assert_eq!(back, frame);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode(&bytes, MAX);
    }

    /// The stream reader on arbitrary bytes (optionally after valid frames) never panics
    /// and never reads past the end: frames, then a clean end or one typed error.
    #[test]
    fn stream_reader_never_panics(good in prop::collection::vec(arb_frame(), 0..3), junk in prop::collection::vec(any::<u8>(), 0..128)) {
        let mut bytes = Vec::new();
        for f in &good {
            bytes.extend(encode(f, MAX).unwrap());
        }
        bytes.extend(&junk);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let read = rt.block_on(async {
            let mut r: &[u8] = &bytes;
            let mut frames = Vec::new();
            loop {
                match read_frame(&mut r, MAX).await {
                    Ok(Some(f)) => frames.push(f),
                    Ok(None) => return (frames, None),
                    Err(e) => return (frames, Some(e)),
                }
            }
        });
        prop_assert!(read.0.len() >= good.len());
        prop_assert_eq!(&read.0[..good.len()], &good[..]);
        if junk.is_empty() {
            prop_assert!(read.1.is_none());
        }
    }

    /// Valid header and CRC around arbitrary payloads and kinds: exercises the payload
    /// decoders with garbage.
    #[test]
    fn arbitrary_payloads_never_panic(kind in any::<u8>(), payload in prop::collection::vec(any::<u8>(), 0..256)) {
        match decode(&raw_frame(kind, &payload), MAX) {
            Ok(_) => {}
            Err(FrameError::UnknownKind { kind: k }) => prop_assert_eq!(k, kind),
            Err(FrameError::Undecodable { kind: k, .. }) => prop_assert_eq!(k, kind),
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }

    /// Any single corrupted byte of a frame is refused (magic, version, flags, length or CRC).
    #[test]
    fn corruption_is_detected(frame in arb_frame(), pos in any::<prop::sample::Index>(), x in 1u8..=255) {
        let mut bytes = encode(&frame, MAX).unwrap();
        let i = pos.index(bytes.len());
        bytes[i] ^= x;
        prop_assert!(decode(&bytes, MAX).is_err(), "corruption at byte {} accepted", i);
    }

    /// Every proper prefix of a frame is `Truncated`.
    #[test]
    fn prefixes_are_truncated(frame in arb_frame(), cut in any::<prop::sample::Index>()) {
        let bytes = encode(&frame, MAX).unwrap();
        let n = cut.index(bytes.len());
        let is_truncated = matches!(decode(&bytes[..n], MAX), Err(FrameError::Truncated { .. }));
        prop_assert!(is_truncated);
    }
}

#[test]
fn typed_errors() {
    let good = encode(&Frame::Hello(Hello { from: Peer::Client }), MAX).unwrap();

    let mut b = good.clone();
    b[0] = b'X';
    assert!(matches!(decode(&b, MAX), Err(FrameError::BadMagic { .. })));

    let mut b = good.clone();
    b[4] = 9;
    assert_eq!(
        decode(&b, MAX).unwrap_err(),
        FrameError::UnsupportedVersion { found: 9 }
    );

    // Version-1 and version-2 nodes encoded replica fetch answers (1) and produce requests
    // (1, 2) differently: refused, not misread.
    for old in [1, 2] {
        let mut b = good.clone();
        b[4] = old;
        assert_eq!(
            decode(&b, MAX).unwrap_err(),
            FrameError::UnsupportedVersion { found: old }
        );
    }

    let mut b = good.clone();
    b[7] = 1;
    assert_eq!(
        decode(&b, MAX).unwrap_err(),
        FrameError::UnsupportedFlags { flags: 1 }
    );

    let mut b = good.clone();
    b[8..12].copy_from_slice(&(MAX + 1).to_be_bytes());
    assert_eq!(
        decode(&b, MAX).unwrap_err(),
        FrameError::Oversized {
            len: MAX + 1,
            max: MAX
        }
    );

    let mut b = good.clone();
    *b.last_mut().unwrap() ^= 0xff;
    assert!(matches!(
        decode(&b, MAX),
        Err(FrameError::CrcMismatch { .. })
    ));

    assert_eq!(
        decode(&raw_frame(200, b"hi"), MAX).unwrap_err(),
        FrameError::UnknownKind { kind: 200 }
    );
    assert!(matches!(
        decode(&raw_frame(kind::PRODUCE, b"\xff\xff"), MAX),
        Err(FrameError::Undecodable {
            kind: kind::PRODUCE,
            ..
        })
    ));
}

#[test]
fn encode_refuses_oversized() {
    let frame = Frame::Goodbye(Goodbye {
        reason: "x".repeat(200),
    });
    assert!(matches!(
        encode(&frame, 100),
        Err(EncodeError::Oversized { .. })
    ));
}

#[test]
fn stream_reads_and_truncation() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let a = encode(&Frame::Hello(Hello { from: Peer::Client }), MAX).unwrap();
        let b = encode(
            &Frame::Goodbye(Goodbye {
                reason: "bye".into(),
            }),
            MAX,
        )
        .unwrap();
        let mut both: &[u8] = &[a.clone(), b].concat();
        assert!(matches!(
            read_frame(&mut both, MAX).await,
            Ok(Some(Frame::Hello(_)))
        ));
        assert!(matches!(
            read_frame(&mut both, MAX).await,
            Ok(Some(Frame::Goodbye(_)))
        ));
        assert_eq!(read_frame(&mut both, MAX).await, Ok(None));
        let mut cut: &[u8] = &a[..a.len() - 1];
        assert!(matches!(
            read_frame(&mut cut, MAX).await,
            Err(FrameError::Truncated { .. })
        ));
    });
}

/// The example in docs/protocol.md.
#[test]
fn documented_hello_bytes() {
    let bytes = encode(&Frame::Hello(Hello { from: Peer::Client }), MAX).unwrap();
    assert_eq!(&bytes[..12], b"SKNF\x03\x00\x00\x00\x00\x00\x00\x01");
    assert_eq!(&bytes[16..], [2u8]);
    let crc = crc32fast::hash(&[3, 0, 0, 0, 0, 0, 0, 1, 2]);
    assert_eq!(bytes[12..16], crc.to_be_bytes());
}

/// A replica fetch answer's batches travel as the leader's log holds them: its frame's
/// payload holds the encoded batches byte for byte, in one piece.
#[test]
fn fetch_response_carries_the_encoded_batches_verbatim() {
    // 0xff: bincode would write such a byte in 3 bytes were the batches a sequence of u8s.
    let batches = [
        batch(vec![b"a".to_vec(), vec![0xff; 4]]),
        batch(vec![b"d".to_vec()]).at(2),
    ];
    let resp = records_answer("t".into(), 9, &batches);
    let FetchResult::Records { records, .. } = &resp.result else {
        unreachable!()
    };
    let logged = records.as_bytes().to_vec();
    let bytes = encode(&Frame::Msg(Message::FetchResponse(resp.clone())), MAX).unwrap();
    let payload = &bytes[HEADER_LEN..];
    assert!(
        payload
            .windows(logged.len())
            .any(|w| w == logged.as_slice()),
        "the batches' bytes in the payload"
    );
    assert!(
        payload.len() < logged.len() + 16,
        "{} bytes around {}",
        payload.len(),
        logged.len()
    );
    let (back, _) = decode(&bytes, MAX).unwrap();
    assert_eq!(back, Frame::Msg(Message::FetchResponse(resp)));
}

/// A produce request's batch travels as the producer encoded it, in the log's format: the
/// frame's payload holds those bytes in one piece, and they read back as the same batch.
#[test]
fn produce_request_carries_the_encoded_batch_verbatim() {
    // 0xff: bincode would write such a byte in 3 bytes were the batch a sequence of u8s.
    let b = batch(vec![b"a".to_vec(), vec![0xff; 4]]);
    let encoded = EncodedBatch::encode(&b).unwrap();
    let req = ProduceRequest {
        correlation: 4,
        tp: TopicPartition::new("t", 0),
        acks: Acks::All,
        timeout: 5,
        batch: encoded.clone(),
        transactional_id: None,
    };
    let bytes = encode(&Frame::Msg(Message::from(req.clone())), MAX).unwrap();
    let payload = &bytes[HEADER_LEN..];
    let sent = encoded.as_bytes();
    assert!(
        payload.windows(sent.len()).any(|w| w == sent),
        "the batch's bytes in the payload"
    );
    assert!(payload.len() < sent.len() + 16, "{} bytes", payload.len());
    let (back, _) = decode(&bytes, MAX).unwrap();
    let Frame::Msg(Message::Produce(back)) = back else {
        panic!("not a produce request: {back:?}")
    };
    assert_eq!(*back, req);
    assert_eq!(back.batch.decode().unwrap(), b);
    // A version-2 node sent a decoded RecordBatch here: such a frame is refused, not misread.
    let mut old = bytes.clone();
    old[4] = 2;
    assert_eq!(
        decode(&old, MAX).unwrap_err(),
        FrameError::UnsupportedVersion { found: 2 }
    );
}
