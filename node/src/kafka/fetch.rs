//! Fetch: each partition becomes a Skein consumer fetch from the local broker (committed
//! records only, below the high watermark), re-encoded as Kafka record batches v2. Skein's
//! consumer fetch answers at once, so the long poll (`max_wait_ms` until `min_bytes`) is
//! done here by asking again every POLL until something arrives or the wait is over.
//! No fetch sessions (KIP-227): session id 0, every fetch is a full one.

use super::errors;
use super::records::encode_batches;
use super::session::Session;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse};
use skein_core::message::{self, ConsumerFetchError, Message};
use skein_core::types::TopicPartition;
use std::time::Duration;

const POLL: Duration = Duration::from_millis(10);
/// The longest long poll honoured (clients ask for 500 ms by default).
const MAX_WAIT: Duration = Duration::from_secs(5);
const TIMEOUT: Duration = Duration::from_secs(5);

pub async fn handle(s: &mut Session, req: FetchRequest) -> FetchResponse {
    let wait = Duration::from_millis(u64::try_from(req.max_wait_ms).unwrap_or(0)).min(MAX_WAIT);
    let min_bytes = usize::try_from(req.min_bytes).unwrap_or(0).max(1);
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let (resp, bytes) = fetch_once(s, &req).await;
        if bytes >= min_bytes || tokio::time::Instant::now() + POLL >= deadline {
            return resp;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// One round of Skein fetches for every partition; also returns the record bytes read.
async fn fetch_once(s: &mut Session, req: &FetchRequest) -> (FetchResponse, usize) {
    let mut requests = Vec::new();
    let mut order = Vec::new();
    for topic in &req.topics {
        for p in &topic.partitions {
            let correlation = s.correlation();
            let tp = TopicPartition::new(topic.topic.0.to_string(), p.partition.max(0) as u32);
            order.push(correlation);
            requests.push(Message::ConsumerFetch(message::ConsumerFetchRequest {
                correlation,
                tp,
                offset: p.fetch_offset.max(0) as u64,
                max_bytes: usize::try_from(p.partition_max_bytes).unwrap_or(0),
                current_leader_epoch: u32::try_from(p.current_leader_epoch).ok(),
                // Kafka's LastFetchedEpoch is a v12+ (flexible) field, not served here, so
                // the leader does no divergence check for Kafka clients (docs/kafka.md).
                last_fetched_epoch: None,
            }));
        }
    }
    let answers = s.call_all(requests, TIMEOUT).await;
    let mut total = 0;
    let mut correlations = order.into_iter();
    let mut resp = FetchResponse::default();
    for topic in &req.topics {
        let mut out = FetchableTopicResponse::default().with_topic(topic.topic.clone());
        for p in &topic.partitions {
            let c = correlations.next().expect("one correlation per partition");
            let data = match answers.get(&c) {
                Some(Message::ConsumerFetchResponse(r)) => partition(p.partition, &r.result),
                _ => failed(p.partition, errors::timed_out()),
            };
            total += data.records.as_ref().map_or(0, |r| r.len());
            out.partitions.push(data);
        }
        resp.responses.push(out);
    }
    (resp, total)
}

fn partition(
    index: i32,
    result: &Result<message::ConsumerRecords, ConsumerFetchError>,
) -> PartitionData {
    match result {
        Ok(r) => match encode_batches(&r.batches) {
            Ok(records) => PartitionData::default()
                .with_partition_index(index)
                .with_high_watermark(r.high_watermark as i64)
                // No transactions: everything committed is stable.
                .with_last_stable_offset(r.high_watermark as i64)
                .with_log_start_offset(r.log_start_offset as i64)
                .with_aborted_transactions(Some(Vec::new()))
                .with_preferred_read_replica(BrokerId(-1))
                .with_records(Some(records)),
            Err(e) => {
                tracing::error!(error = %e, "kafka: cannot encode fetched batches");
                failed(
                    index,
                    kafka_protocol::ResponseError::UnknownServerError.code(),
                )
            }
        },
        Err(e) => {
            let mut data = failed(index, errors::fetch(e));
            if let ConsumerFetchError::OffsetOutOfRange {
                log_start_offset,
                high_watermark,
                ..
            } = e
            {
                data.high_watermark = *high_watermark as i64;
                data.last_stable_offset = *high_watermark as i64;
                data.log_start_offset = *log_start_offset as i64;
            }
            data
        }
    }
}

fn failed(index: i32, code: i16) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(code)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_aborted_transactions(Some(Vec::new()))
        .with_preferred_read_replica(BrokerId(-1))
        .with_records(Some(bytes::Bytes::new()))
}
