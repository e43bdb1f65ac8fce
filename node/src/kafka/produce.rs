//! Produce: each partition's record batches (decoded, CRC-32C checked) become Skein
//! produce requests to the local broker, one per batch re-encoded in Skein's batch format,
//! with the same acks. acks = 0 gets
//! no response at all, as in Kafka.

use super::errors;
use super::records::{decode_batches, RecordsError};
use super::session::Session;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::ResponseError;
use skein_core::log::{EncodeError, EncodedBatch, RecordBatch};
use skein_core::message::{self, Acks, Message};
use skein_core::types::TopicPartition;
use std::time::Duration;

/// Added to the client's timeout before this connection stops waiting for the broker's
/// own RequestTimedOut.
const GRACE: Duration = Duration::from_secs(2);

/// One partition's answer being assembled: its Skein requests' correlations, or an error
/// found before anything was sent.
struct Pending {
    topic: usize,
    index: i32,
    correlations: Vec<u64>,
    error: Option<i16>,
}

/// None: acks = 0, nothing to answer.
pub async fn handle(s: &mut Session, req: ProduceRequest) -> Option<ProduceResponse> {
    let acks = match req.acks {
        0 => Acks::None,
        1 => Acks::Leader,
        -1 => Acks::All,
        _ => return Some(refuse_all(&req, ResponseError::InvalidRequiredAcks.code())),
    };
    let timeout_ms = u64::try_from(req.timeout_ms).unwrap_or(0);
    // Named to the leader so it can verify a transactional batch with the coordinator
    // (KIP-890 part 1); None for everything else, as before.
    let transactional_id = req
        .transactional_id
        .as_ref()
        .map(|t| t.0.to_string())
        .filter(|t| !t.is_empty());
    let mut requests = Vec::new();
    let mut pending = Vec::new();
    for (ti, topic) in req.topic_data.iter().enumerate() {
        for part in &topic.partition_data {
            let mut p = Pending {
                topic: ti,
                index: part.index,
                correlations: Vec::new(),
                error: None,
            };
            let batches = match (&part.records, u32::try_from(part.index)) {
                (_, Err(_)) => Err(errors::unknown_topic()),
                (None, _) => Ok(Vec::new()),
                (Some(r), _) => decode_batches(r.clone())
                    .map_err(|e| refused(&topic.name.0, part.index, &e))
                    .and_then(|batches| encode_all(&batches)),
            };
            match batches {
                Err(code) => p.error = Some(code),
                Ok(batches) => {
                    let tp = TopicPartition::new(topic.name.0.to_string(), part.index as u32);
                    for batch in batches {
                        let correlation = s.correlation();
                        p.correlations.push(correlation);
                        requests.push(Message::from(message::ProduceRequest {
                            correlation,
                            tp: tp.clone(),
                            acks,
                            timeout: timeout_ms * 1_000_000,
                            batch,
                            transactional_id: transactional_id.clone(),
                        }));
                    }
                }
            }
            pending.push(p);
        }
    }
    if acks == Acks::None {
        s.send_all(requests).await;
        return None;
    }
    let wait = Duration::from_millis(timeout_ms) + GRACE;
    let answers = s.call_all(requests, wait).await;
    let mut resp = ProduceResponse::default();
    resp.responses = req
        .topic_data
        .iter()
        .map(|t| TopicProduceResponse::default().with_name(t.name.clone()))
        .collect();
    for p in pending {
        let mut out = PartitionProduceResponse::default()
            .with_index(p.index)
            .with_base_offset(-1)
            .with_log_append_time_ms(-1)
            .with_log_start_offset(-1);
        let mut error = p.error;
        for c in &p.correlations {
            match answers.get(c) {
                Some(Message::ProduceResponse(r)) => match &r.result {
                    Ok(ack) if out.base_offset < 0 => out.base_offset = ack.base_offset as i64,
                    Ok(_) => {}
                    Err(e) => {
                        error.get_or_insert(errors::produce(e));
                    }
                },
                _ => {
                    error.get_or_insert(errors::timed_out());
                }
            }
        }
        if let Some(code) = error {
            out.error_code = code;
            out.base_offset = -1;
        }
        resp.responses[p.topic].partition_responses.push(out);
    }
    Some(resp)
}

/// The code for a produce whose records were refused: UNSUPPORTED_COMPRESSION_TYPE for a
/// codec Kafka does not have (logged where an operator looks: the client only sees the
/// code), CORRUPT_MESSAGE otherwise.
fn refused(topic: &str, partition: i32, e: &RecordsError) -> i16 {
    match e {
        RecordsError::UnsupportedCompression { .. } => {
            tracing::warn!(topic, partition, error = %e, "kafka: produce refused: unsupported compression codec");
            errors::unsupported_compression()
        }
        _ => {
            tracing::debug!(topic, partition, error = %e, "kafka: produce refused");
            errors::corrupt_message()
        }
    }
}

/// Skein's batches in the log's format, as a Skein producer sends them (the leader's log
/// writes these bytes, compressed with the batch's codec); all or none, so a partition's
/// batches are refused together.
fn encode_all(batches: &[RecordBatch]) -> Result<Vec<EncodedBatch>, i16> {
    batches
        .iter()
        .map(|b| {
            EncodedBatch::encode(b).map_err(|e| {
                tracing::debug!(error = %e, "kafka: produce refused");
                match e {
                    EncodeError::TooLarge(_) => errors::message_too_large(),
                    EncodeError::ReservedProducerId(_) => errors::corrupt_message(),
                    EncodeError::Codec(_) => errors::unsupported_compression(),
                }
            })
        })
        .collect()
}

fn refuse_all(req: &ProduceRequest, code: i16) -> ProduceResponse {
    let mut resp = ProduceResponse::default();
    for t in &req.topic_data {
        let parts = t
            .partition_data
            .iter()
            .map(|p| {
                PartitionProduceResponse::default()
                    .with_index(p.index)
                    .with_error_code(code)
                    .with_base_offset(-1)
            })
            .collect();
        resp.responses.push(
            TopicProduceResponse::default()
                .with_name(t.name.clone())
                .with_partition_responses(parts),
        );
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::records::encode_batches;
    use skein_core::log::{Codec, ProducerInfo};

    /// A codec Kafka does not have is UNSUPPORTED_COMPRESSION_TYPE (76), which a client
    /// reports, not CORRUPT_MESSAGE (2), which it retries as a CRC error.
    #[test]
    fn an_unknown_codec_is_answered_76_and_damage_2() {
        let mut bytes = encode_batches(&[RecordBatch::from_values(5, [b"a".to_vec()])])
            .unwrap()
            .to_vec();
        let good = bytes.clone();
        bytes[22] |= 6;
        let e = decode_batches(bytes.into()).unwrap_err();
        assert_eq!(refused("t", 0, &e), 76);
        let mut flipped = good;
        *flipped.last_mut().unwrap() ^= 1;
        let e = decode_batches(flipped.into()).unwrap_err();
        assert_eq!(refused("t", 0, &e), 2);
    }

    /// A Kafka producer's batches reach the leader in Skein's batch format, one encoded
    /// batch per Kafka batch, each reading back as the batch the listener decoded.
    #[test]
    fn kafka_batches_are_sent_in_skeins_format() {
        let idem = ProducerInfo {
            producer_id: 7,
            producer_epoch: 1,
            base_sequence: 40,
        };
        let batches = vec![
            RecordBatch::from_values(5, [b"a".to_vec(), b"b".to_vec()]),
            RecordBatch::from_values(6, [b"c".to_vec()]).with_producer(Some(idem)),
        ];
        let decoded = decode_batches(encode_batches(&batches).unwrap()).unwrap();
        let encoded = encode_all(&decoded).unwrap();
        assert_eq!(encoded.len(), 2);
        for (e, b) in encoded.iter().zip(&decoded) {
            assert_eq!(e.as_bytes(), b.encode().unwrap());
            assert_eq!(&e.decode().unwrap(), b);
        }
        // A compressed Kafka batch is sent compressed with its codec, in Skein's format.
        let values = (0..50).map(|i| format!("value {i} of a compressible batch").into_bytes());
        let zstd = [RecordBatch::from_values(7, values).with_codec(Codec::Zstd)];
        let decoded = decode_batches(encode_batches(&zstd).unwrap()).unwrap();
        let encoded = encode_all(&decoded).unwrap();
        assert_eq!(encoded[0].decode().unwrap(), zstd[0]);
        assert!(
            encoded[0].len() < zstd[0].encoded_len() / 2,
            "stored compressed"
        );
        // A batch Skein cannot encode is refused as corrupt, not sent.
        let reserved = ProducerInfo {
            producer_id: u64::MAX,
            ..idem
        };
        let bad = [RecordBatch::from_values(6, [b"c".to_vec()]).with_producer(Some(reserved))];
        assert_eq!(encode_all(&bad), Err(errors::corrupt_message()));
    }
}
