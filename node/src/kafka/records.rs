//! Kafka record batch v2 (CRC-32C, decoded and encoded by `kafka_protocol::records`) to
//! Skein's [`RecordBatch`] and back. One Kafka batch is one Skein batch: the leader
//! assigns offsets and the epoch to the whole batch, and an idempotent producer's sequence
//! numbers are per batch, as in Kafka. A compressed Kafka batch becomes a Skein batch
//! with the same codec (stored compressed), and a Skein batch goes out compressed with its
//! own codec; both ways the records go through core's codecs (`skein_core::log::Codec`,
//! Kafka's framings), handed to kafka-protocol through its custom-compression hooks.

use super::guard::check_records;
use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record as KRecord, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
};
use skein_core::log::codec::MAX_DECOMPRESSED_LEN;
use skein_core::log::{Codec, Header, ProducerInfo, Record, RecordBatch};
use std::cell::Cell;

/// Size of a Kafka v2 batch's fixed header; its records section follows.
const KAFKA_HEADER_LEN: usize = 61;
/// Byte position of a Kafka v2 batch's attributes (i16).
const KAFKA_ATTRIBUTES_POS: usize = 21;

/// Why a produced record set was refused (answered CORRUPT_MESSAGE / INVALID_RECORD, or
/// UNSUPPORTED_COMPRESSION_TYPE for `UnsupportedCompression`).
#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    #[error("cannot decode the record batches: {0}")]
    Decode(String),
    #[error(
        "record batch at byte {pos} names compression codec {codec}, not one of Kafka's \
         (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)"
    )]
    UnsupportedCompression { pos: usize, codec: u8 },
    /// Control batches are written by the transaction coordinator, never produced.
    #[error("a producer cannot write control batches")]
    Control,
    #[error("{0}")]
    Invalid(&'static str),
}

/// Decodes a produce request's `records` into Skein batches (CRC-32C checked by the
/// decoder; empty batches dropped). A compressed batch is decompressed by core's codec
/// and its records checked like an uncompressed batch's ([`check_records`]: counts that
/// the bytes can hold) before the decoder reads them, and gives a batch with its codec.
pub fn decode_batches(mut records: Bytes) -> Result<Vec<RecordBatch>, RecordsError> {
    let mut out = Vec::new();
    let total = records.len();
    while !records.is_empty() {
        let pos = total - records.len();
        let codec = batch_codec(&records, pos)?;
        // The records decompressed ahead, for the decoder's hook to hand over.
        let plain = Cell::new(match codec {
            Codec::None => None,
            codec => decompress_checked(&records, codec)?,
        });
        let hook = |compressed: &mut Bytes, _: Compression| -> anyhow::Result<Bytes> {
            Ok(plain.take().unwrap_or_else(|| compressed.clone()))
        };
        let set = RecordBatchDecoder::decode_with_custom_compression(&mut records, Some(hook))
            .map_err(|e| RecordsError::Decode(format!("{e:#}")))?;
        if let Some(batch) = to_skein(&set.records)? {
            out.push(batch.with_codec(codec));
        }
    }
    Ok(out)
}

/// The codec of the Kafka batch at the start of `records` (found at byte `pos` of the
/// request's records). `None` when the header is cut short: the decoder names that.
fn batch_codec(records: &[u8], pos: usize) -> Result<Codec, RecordsError> {
    let Some(a) = records.get(KAFKA_ATTRIBUTES_POS..KAFKA_ATTRIBUTES_POS + 2) else {
        return Ok(Codec::None);
    };
    let id = (u16::from_be_bytes([a[0], a[1]]) & 0x7) as u8;
    Codec::from_id(id).map_err(|_| RecordsError::UnsupportedCompression { pos, codec: id })
}

/// The records section of the compressed Kafka batch at the start of `records`,
/// decompressed, once the batch it makes uncompressed passes [`check_records`] (record
/// and header counts the bytes can hold, so the decoder never reserves for a lie).
/// `None` when the batch is cut short: the decoder names that.
fn decompress_checked(records: &[u8], codec: Codec) -> Result<Option<Bytes>, RecordsError> {
    let Some(len) = records.get(8..12) else {
        return Ok(None);
    };
    let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
    let batch = usize::try_from(len)
        .ok()
        .and_then(|len| records.get(..12 + len))
        .filter(|b| b.len() >= KAFKA_HEADER_LEN);
    let Some(batch) = batch else {
        return Ok(None);
    };
    let mut plain = batch[..KAFKA_HEADER_LEN].to_vec();
    codec
        .decompress_into(&batch[KAFKA_HEADER_LEN..], &mut plain, MAX_DECOMPRESSED_LEN)
        .map_err(|e| RecordsError::Decode(e.to_string()))?;
    let plain_len = i32::try_from(plain.len() - 12)
        .map_err(|_| RecordsError::Invalid("decompressed batch too large"))?;
    plain[8..12].copy_from_slice(&plain_len.to_be_bytes());
    plain[KAFKA_ATTRIBUTES_POS + 1] &= !0x7;
    check_records(&plain).map_err(|e| RecordsError::Decode(format!("{codec} records: {e}")))?;
    Ok(Some(Bytes::from(plain).slice(KAFKA_HEADER_LEN..)))
}

/// Kafka's name for a codec (the same numbering).
fn kafka_compression(codec: Codec) -> Compression {
    match codec {
        Codec::None => Compression::None,
        Codec::Gzip => Compression::Gzip,
        Codec::Snappy => Compression::Snappy,
        Codec::Lz4 => Compression::Lz4,
        Codec::Zstd => Compression::Zstd,
    }
}

fn to_skein(records: &[KRecord]) -> Result<Option<RecordBatch>, RecordsError> {
    let Some(first) = records.first() else {
        return Ok(None);
    };
    if records.iter().any(|r| r.control) {
        return Err(RecordsError::Control);
    }
    // One batch, one attributes field: its first record says whether it is transactional.
    let transactional = first.transactional;
    let base = records.iter().map(|r| r.offset).min().unwrap_or(0);
    let first_ts = records.iter().map(|r| r.timestamp).min().unwrap_or(0);
    let max_ts = records.iter().map(|r| r.timestamp).max().unwrap_or(0);
    let producer = if first.producer_id >= 0 {
        let delta = first.offset - base;
        let base_sequence = i64::from(first.sequence) - delta;
        Some(ProducerInfo {
            producer_id: first.producer_id as u64,
            producer_epoch: u16::try_from(first.producer_epoch)
                .map_err(|_| RecordsError::Invalid("negative producer epoch"))?,
            base_sequence: u32::try_from(base_sequence)
                .map_err(|_| RecordsError::Invalid("negative base sequence"))?,
        })
    } else {
        None
    };
    let mut out = Vec::with_capacity(records.len());
    for r in records {
        let offset_delta = u32::try_from(r.offset - base)
            .map_err(|_| RecordsError::Invalid("offset delta out of range"))?;
        out.push(Record {
            offset_delta,
            timestamp_delta: r.timestamp - first_ts,
            key: r.key.as_ref().map(|k| k.to_vec()),
            value: r.value.as_ref().map(|v| v.to_vec()),
            headers: r
                .headers
                .iter()
                .map(|(k, v)| Header {
                    key: k.to_string(),
                    value: v.as_ref().map(|v| v.to_vec()).unwrap_or_default(),
                })
                .collect(),
        });
    }
    let batch = RecordBatch::of_records(first_ts, out)
        .with_producer(producer)
        .with_timestamps(first_ts, max_ts);
    Ok(Some(if transactional {
        batch.transactional()
    } else {
        batch
    }))
}

/// The control record type a leader-epoch marker goes out as: Kafka's COMMIT marker (1).
/// Every client skips a control batch and moves its position past it; COMMIT is the one
/// type all of them ignore outright (librdkafka "always ignore", the Java consumer and
/// kafkajs look only for ABORT, and only in transactional batches; this one has producer
/// id -1, so it ends no transaction). LEADER_CHANGE (2) would say more, but it is KRaft's
/// metadata-log record: librdkafka logs it as unsupported and a reader may try to parse
/// its value as a LeaderChangeMessage.
pub const MARKER_CONTROL_TYPE: i16 = 1;

/// A control record's key (version 0, then the type) and a COMMIT marker's value
/// (EndTxnMarker: version 0, coordinator epoch 0).
fn control_key_value() -> (Bytes, Bytes) {
    let mut key = BytesMut::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&MARKER_CONTROL_TYPE.to_be_bytes());
    let mut value = BytesMut::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&0i32.to_be_bytes());
    (key.freeze(), value.freeze())
}

/// Encodes Skein batches as concatenated Kafka record batches v2, one per Skein batch,
/// each compressed with the Skein batch's codec (as it is stored).
pub fn encode_batches(batches: &[RecordBatch]) -> anyhow::Result<Bytes> {
    let mut buf = BytesMut::new();
    for batch in batches {
        encode_batch(&mut buf, batch)?;
    }
    Ok(buf.freeze())
}

/// Appends one Skein batch to `buf` as one Kafka record batch v2. A control batch (the
/// leader-epoch marker) goes out as a Kafka control batch, so a client steps over it.
pub fn encode_batch(buf: &mut BytesMut, batch: &RecordBatch) -> anyhow::Result<()> {
    let compress = |plain: &mut BytesMut, out: &mut BytesMut, c: Compression| {
        let mut z = Vec::new();
        codec_of(c).compress_into(plain, &mut z);
        out.extend_from_slice(&z);
        anyhow::Ok(())
    };
    let options = RecordEncodeOptions {
        version: 2,
        compression: kafka_compression(batch.codec()?),
    };
    let records = if batch.is_control() {
        control_records(batch)
    } else {
        to_kafka(batch)
    };
    RecordBatchEncoder::encode_with_custom_compression(
        buf,
        records.iter(),
        &options,
        Some(compress),
    )?;
    Ok(())
}

/// A marker batch as one Kafka control record per Skein record (a marker has one). A
/// transaction marker goes out as itself (its producer, its COMMIT/ABORT key): a
/// read_committed client ends an aborted transaction's range at its ABORT marker.
fn control_records(batch: &RecordBatch) -> Vec<KRecord> {
    if batch.as_txn_marker().is_some() {
        return to_kafka(batch);
    }
    let (key, value) = control_key_value();
    batch
        .iter_offsets()
        .map(|(offset, r)| KRecord {
            transactional: false,
            control: true,
            delete_horizon: false,
            partition_leader_epoch: batch.partition_leader_epoch as i32,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            timestamp_type: TimestampType::Creation,
            offset: offset as i64,
            sequence: -1,
            timestamp: batch.first_timestamp + r.timestamp_delta,
            key: Some(key.clone()),
            value: Some(value.clone()),
            headers: Default::default(),
        })
        .collect()
}

/// The codec kafka-protocol names (the same numbering).
fn codec_of(c: Compression) -> Codec {
    match c {
        Compression::None => Codec::None,
        Compression::Gzip => Codec::Gzip,
        Compression::Snappy => Codec::Snappy,
        Compression::Lz4 => Codec::Lz4,
        Compression::Zstd => Codec::Zstd,
    }
}

fn to_kafka(batch: &RecordBatch) -> Vec<KRecord> {
    let (producer_id, producer_epoch, base_sequence) = match batch.producer {
        Some(p) => (
            p.producer_id as i64,
            p.producer_epoch as i16,
            p.base_sequence as i32,
        ),
        // The encoder keeps records in one batch only while offset - sequence stays
        // constant, and writes base sequence = first sequence - first delta. Sequences
        // -1, 0, 1, ... keep the batch whole and give base sequence -1 (= none).
        None => (NO_PRODUCER_ID, NO_PRODUCER_EPOCH, -1),
    };
    batch
        .iter_offsets()
        .map(|(offset, r)| KRecord {
            transactional: batch.is_transactional(),
            control: batch.is_control(),
            delete_horizon: false,
            partition_leader_epoch: batch.partition_leader_epoch as i32,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: offset as i64,
            sequence: base_sequence.wrapping_add(r.offset_delta as i32),
            timestamp: batch.first_timestamp + r.timestamp_delta,
            key: r.key.clone().map(Bytes::from),
            value: r.value.clone().map(Bytes::from),
            headers: r
                .headers
                .iter()
                .map(|h| {
                    let key = StrBytes::from_string(h.key.clone());
                    (key, Some(Bytes::from(h.value.clone())))
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: u64, producer: Option<ProducerInfo>, n: u32) -> RecordBatch {
        let first = 1_700_000_000_000;
        let records = (0..n)
            .map(|i| Record {
                offset_delta: i,
                timestamp_delta: i64::from(i),
                key: (i % 2 == 0).then(|| format!("k{i}").into_bytes()),
                value: Some(format!("v{i}").into_bytes()),
                headers: vec![Header {
                    key: "h".into(),
                    value: vec![i as u8],
                }],
            })
            .collect();
        RecordBatch::of_records(first, records)
            .at(base)
            .in_epoch(4)
            .with_producer(producer)
            .with_timestamps(first, first + i64::from(n) - 1)
    }

    #[test]
    fn batches_round_trip_one_kafka_batch_per_skein_batch() {
        let idem = ProducerInfo {
            producer_id: 7,
            producer_epoch: 1,
            base_sequence: 40,
        };
        let batches = vec![batch(10, None, 5), batch(15, Some(idem), 3)];
        let bytes = encode_batches(&batches).unwrap();
        let infos = RecordBatchDecoder::decode_batch_info(&mut bytes.clone()).unwrap();
        assert_eq!(infos.len(), 2);
        assert_eq!((infos[0].min_offset, infos[0].base_sequence), (10, -1));
        assert_eq!((infos[1].producer_id, infos[1].base_sequence), (7, 40));
        assert_eq!(infos[0].partition_leader_epoch, 4);
        let back = decode_batches(bytes).unwrap();
        // Offsets and epochs are the leader's to assign; the rest survives.
        let want: Vec<RecordBatch> = batches
            .iter()
            .map(|b| b.clone().at(0).in_epoch(0))
            .collect();
        assert_eq!(back, want);
    }

    /// Each codec: a Skein batch goes out as a Kafka batch compressed with its codec, and
    /// a compressed Kafka batch comes in as a Skein batch carrying that codec.
    #[test]
    fn compressed_batches_cross_with_their_codec() {
        for codec in Codec::ALL {
            let b = batch(10, None, 50).with_codec(codec);
            let bytes = encode_batches(std::slice::from_ref(&b)).unwrap();
            let infos = RecordBatchDecoder::decode_batch_info(&mut bytes.clone()).unwrap();
            assert_eq!(codec_of(infos[0].compression), codec);
            let plain = encode_batches(&[batch(10, None, 50)]).unwrap();
            if codec != Codec::None {
                assert!(bytes.len() < plain.len(), "{codec}: {} bytes", bytes.len());
            }
            let back = decode_batches(bytes).unwrap();
            assert_eq!(back, vec![b.clone().at(0).in_epoch(0)], "{codec}");
            assert_eq!(back[0].codec(), Ok(codec));
        }
    }

    /// librdkafka writes raw snappy (no xerial framing); it is read too.
    #[test]
    fn raw_snappy_from_librdkafka_is_read() {
        let b = batch(0, None, 20).with_codec(Codec::Snappy);
        let raw = |plain: &mut BytesMut, out: &mut BytesMut, _: Compression| {
            out.extend_from_slice(&snap::raw::Encoder::new().compress_vec(plain)?);
            anyhow::Ok(())
        };
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::Snappy,
        };
        let records = to_kafka(&b);
        RecordBatchEncoder::encode_with_custom_compression(
            &mut buf,
            records.iter(),
            &options,
            Some(raw),
        )
        .unwrap();
        let back = decode_batches(buf.freeze()).unwrap();
        assert_eq!(back, vec![b.at(0).in_epoch(0)]);
    }

    #[test]
    fn an_unknown_codec_is_named_not_called_corrupt() {
        let first = encode_batches(&[batch(0, None, 3)]).unwrap();
        for id in 5..=7u8 {
            let mut bytes = first.to_vec();
            bytes.extend_from_slice(&first);
            bytes[first.len() + KAFKA_ATTRIBUTES_POS + 1] |= id;
            let e = decode_batches(Bytes::from(bytes)).unwrap_err();
            assert!(
                matches!(e, RecordsError::UnsupportedCompression { pos, codec } if pos == first.len() && codec == id),
                "{e}"
            );
            assert!(e.to_string().contains(&format!("codec {id}")), "{e}");
        }
    }

    /// A compressed batch's records are checked before the decoder reads them: a record
    /// count the decompressed bytes cannot hold is an error, not a huge reservation; a
    /// payload that does not decompress names its codec.
    #[test]
    fn compressed_records_are_checked_before_decoding() {
        for codec in Codec::ALL.into_iter().skip(1) {
            let good = encode_batches(&[batch(0, None, 3).with_codec(codec)]).unwrap();
            let mut lying = good.to_vec();
            lying[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
            let e = decode_batches(Bytes::from(lying)).unwrap_err();
            assert!(e.to_string().contains("record count"), "{codec}: {e}");
            let mut garbled = good.to_vec();
            for b in &mut garbled[KAFKA_HEADER_LEN..] {
                *b = 0x5a;
            }
            let e = decode_batches(Bytes::from(garbled)).unwrap_err();
            assert!(e.to_string().contains(codec.name()), "{codec}: {e}");
        }
    }

    #[test]
    fn an_epoch_marker_goes_out_as_a_kafka_control_batch() {
        let marker = RecordBatch::epoch_marker(0, 3, 1_700_000_000_000);
        let bytes = encode_batches(&[marker, batch(1, None, 2)]).unwrap();
        let infos = RecordBatchDecoder::decode_batch_info(&mut bytes.clone()).unwrap();
        assert_eq!(infos.len(), 2);
        assert!(infos[0].control && !infos[0].transactional);
        assert_eq!((infos[0].min_offset, infos[0].record_count), (0, 1));
        assert_eq!(infos[0].partition_leader_epoch, 3);
        assert_eq!(infos[0].producer_id, NO_PRODUCER_ID);
        assert!(!infos[1].control);
        let sets = RecordBatchDecoder::decode_all(&mut bytes.clone()).unwrap();
        let control = &sets[0].records[0];
        // Key: version 0, type COMMIT; value: EndTxnMarker v0.
        assert_eq!(control.key.as_deref(), Some(&[0u8, 0, 0, 1][..]));
        assert_eq!(control.value.as_deref(), Some(&[0u8; 6][..]));
        // A producer may not send one.
        assert!(matches!(decode_batches(bytes), Err(RecordsError::Control)));
    }

    #[test]
    fn a_transactional_batch_keeps_its_bit_both_ways() {
        let producer = ProducerInfo {
            producer_id: 9,
            producer_epoch: 2,
            base_sequence: 0,
        };
        let txn = batch(0, Some(producer), 2).transactional();
        let bytes = encode_batches(&[txn, batch(2, Some(producer), 1)]).unwrap();
        let infos = RecordBatchDecoder::decode_batch_info(&mut bytes.clone()).unwrap();
        assert!(infos[0].transactional && !infos[0].control);
        assert!(!infos[1].transactional);
        let back = decode_batches(bytes).unwrap();
        assert!(back[0].is_transactional() && !back[1].is_transactional());
        assert_eq!(back[0].producer, Some(producer));
    }

    #[test]
    fn a_transaction_marker_goes_out_as_itself() {
        let marker = skein_core::log::TxnMarker {
            producer_id: 9,
            producer_epoch: 2,
            result: skein_core::txn::TxnResult::Abort,
            coordinator_epoch: 5,
        };
        let b = RecordBatch::txn_marker(marker, 1_700_000_000_000).at(7);
        let bytes = encode_batches(&[b]).unwrap();
        let infos = RecordBatchDecoder::decode_batch_info(&mut bytes.clone()).unwrap();
        assert!(infos[0].control && infos[0].transactional);
        assert_eq!((infos[0].producer_id, infos[0].producer_epoch), (9, 2));
        assert_eq!(infos[0].min_offset, 7);
        let sets = RecordBatchDecoder::decode_all(&mut bytes.clone()).unwrap();
        let r = &sets[0].records[0];
        // Key: version 0, type ABORT (0); value: version 0, coordinator epoch 5.
        assert_eq!(r.key.as_deref(), Some(&[0u8, 0, 0, 0][..]));
        assert_eq!(r.value.as_deref(), Some(&[0u8, 0, 0, 0, 0, 5][..]));
        assert_eq!(r.sequence, -1);
    }

    #[test]
    fn a_flipped_bit_fails_the_crc() {
        let bytes = encode_batches(&[batch(0, None, 3)]).unwrap();
        let mut bad = bytes.to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        let e = decode_batches(Bytes::from(bad)).unwrap_err();
        assert!(e.to_string().contains("Cyclic redundancy"), "{e}");
    }
}
