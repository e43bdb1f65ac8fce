//! Fetch: each partition becomes a Skein consumer fetch from the local broker (committed
//! records only, below the high watermark), re-encoded as Kafka record batches v2. Skein's
//! consumer fetch answers at once, so the long poll (`max_wait_ms` until `min_bytes`) is
//! done here by asking again every POLL until something arrives or the wait is over.
//! No fetch sessions (KIP-227): session id 0, every fetch is a full one.
//!
//! Byte limits follow KIP-74: the leader stops each partition's read at
//! `partition_max_bytes` but always returns its first batch whole (`read_below` in core),
//! and the request's `max_bytes` caps the whole answer the same way: batches past it are
//! left out, except the first batch of the answer, which goes out whole however large, so
//! a consumer always makes progress.

use super::errors;
use super::records::encode_batch;
use super::session::Session;
use bytes::BytesMut;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse};
use skein_core::log::RecordBatch;
use skein_core::message::{self, ConsumerFetchError, Message};
use skein_core::types::TopicPartition;
use std::borrow::Cow;
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
                isolation: Default::default(),
            }));
        }
    }
    let answers = s.call_all(requests, TIMEOUT).await;
    let mut total = 0;
    let mut budget = Budget {
        left: usize::try_from(req.max_bytes).unwrap_or(0),
        first: true,
    };
    let mut correlations = order.into_iter();
    let mut resp = FetchResponse::default();
    for topic in &req.topics {
        let mut out = FetchableTopicResponse::default().with_topic(topic.topic.clone());
        for p in &topic.partitions {
            let c = correlations.next().expect("one correlation per partition");
            let data = match answers.get(&c) {
                Some(Message::ConsumerFetchResponse(r)) => partition(
                    p.partition,
                    p.fetch_offset.max(0) as u64,
                    &r.result,
                    &mut budget,
                ),
                _ => failed(p.partition, errors::timed_out()),
            };
            total += data.records.as_ref().map_or(0, |r| r.len());
            out.partitions.push(data);
        }
        resp.responses.push(out);
    }
    (resp, total)
}

/// What is left of the request's `max_bytes` (KIP-74's response limit).
struct Budget {
    left: usize,
    /// Nothing is in the answer yet: the next batch goes out whatever its size.
    first: bool,
}

/// The leader leaves its epoch markers out of a consumer read, but says where the read
/// ended (`next_offset`); every offset of `[from, next_offset)` no data batch holds is a
/// marker (a leader's log holds data batches and one-record markers only). Each goes back
/// in as a marker batch, which the encoder sends as a Kafka control batch, so a Kafka
/// client steps over it: without it, a read that found only a marker (the next data batch
/// beyond the byte limit) came back empty, and the client asked at the marker for ever.
/// A marker before a data batch starts that batch's epoch; one at the end is the last
/// batch read, of epoch `last_epoch`.
fn with_markers(from: u64, r: &message::ConsumerRecords) -> Vec<Cow<'_, RecordBatch>> {
    let mut out = Vec::with_capacity(r.batches.len() + 1);
    let mut at = from;
    for b in &r.batches {
        while at < b.base_offset {
            let marker = RecordBatch::epoch_marker(at, b.partition_leader_epoch, b.first_timestamp);
            out.push(Cow::Owned(marker));
            at += 1;
        }
        out.push(Cow::Borrowed(b));
        at = at.max(b.next_offset());
    }
    let epoch = r.last_epoch.unwrap_or(r.leader_epoch);
    let ts = r.batches.last().map_or(0, |b| b.max_timestamp);
    while at < r.next_offset {
        out.push(Cow::Owned(RecordBatch::epoch_marker(at, epoch, ts)));
        at += 1;
    }
    out
}

/// `batches` as Kafka batches, as many as `budget` allows (the answer's first batch always).
fn encode_within(
    batches: &[Cow<'_, RecordBatch>],
    budget: &mut Budget,
) -> anyhow::Result<bytes::Bytes> {
    let mut buf = BytesMut::new();
    for b in batches {
        let before = buf.len();
        encode_batch(&mut buf, b)?;
        let len = buf.len() - before;
        if !budget.first && len > budget.left {
            buf.truncate(before);
            budget.left = 0;
            break;
        }
        budget.first = false;
        budget.left = budget.left.saturating_sub(len);
    }
    Ok(buf.freeze())
}

fn partition(
    index: i32,
    from: u64,
    result: &Result<message::ConsumerRecords, ConsumerFetchError>,
    budget: &mut Budget,
) -> PartitionData {
    match result {
        Ok(r) => match encode_within(&with_markers(from, r), budget) {
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
