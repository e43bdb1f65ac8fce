//! Fetch: each partition becomes a Skein consumer fetch from the local broker (committed
//! records only, below the high watermark), re-encoded as Kafka record batches v2. Skein's
//! consumer fetch answers at once, so the long poll (`max_wait_ms` until `min_bytes`) is
//! done here by asking again every POLL until something arrives or the wait is over.
//! No fetch sessions (KIP-227): session id 0, every fetch is a full one.
//!
//! Isolation (KIP-98): a read_committed fetch reads below the last stable offset and
//! answers the aborted transactions overlapping it; the abort markers go out as Kafka
//! control batches of their producer, which is where a client ends an aborted range.
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
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ProducerId};
use skein_core::log::RecordBatch;
use skein_core::log::TxnMarker;
use skein_core::message::{self, ConsumerFetchError, Message};
use skein_core::txn::{AbortedTxn, IsolationLevel, TxnResult};
use skein_core::types::{LeaderEpoch, TimestampMs, TopicPartition};
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
    let isolation = isolation(req.isolation_level);
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
                isolation,
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

/// Kafka's isolation level byte: 1 is read_committed, anything else read_uncommitted (as
/// Kafka's brokers read it).
pub(super) fn isolation(level: i8) -> IsolationLevel {
    if level == 1 {
        IsolationLevel::ReadCommitted
    } else {
        IsolationLevel::ReadUncommitted
    }
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
/// batch read, of epoch `last_epoch`. Transaction markers are left out the same way; the
/// ones a read_committed answer lists as aborted transactions' ends (`AbortedTxn::
/// last_offset`) go back in as ABORT markers of their producer; the rest (commit markers)
/// as epoch markers, which every client steps over as it does a COMMIT marker.
fn with_markers(from: u64, r: &message::ConsumerRecords) -> Vec<Cow<'_, RecordBatch>> {
    let mut out = Vec::with_capacity(r.batches.len() + 1);
    let mut at = from;
    for b in &r.batches {
        while at < b.base_offset {
            out.push(Cow::Owned(gap(
                r,
                at,
                b.partition_leader_epoch,
                b.first_timestamp,
            )));
            at += 1;
        }
        out.push(Cow::Borrowed(b));
        at = at.max(b.next_offset());
    }
    let epoch = r.last_epoch.unwrap_or(r.leader_epoch);
    let ts = r.batches.last().map_or(0, |b| b.max_timestamp);
    while at < r.next_offset {
        out.push(Cow::Owned(gap(r, at, epoch, ts)));
        at += 1;
    }
    out
}

/// The marker at `offset`, which no returned batch holds.
fn gap(
    r: &message::ConsumerRecords,
    offset: u64,
    epoch: LeaderEpoch,
    ts: TimestampMs,
) -> RecordBatch {
    match abort_at(&r.aborted, offset) {
        Some(a) => {
            let marker = TxnMarker {
                producer_id: a.producer_id,
                producer_epoch: producer_epoch(r, a),
                result: TxnResult::Abort,
                // Not known here; no client reads it.
                coordinator_epoch: 0,
            };
            RecordBatch::txn_marker(marker, ts)
                .at(offset)
                .in_epoch(epoch)
        }
        None => RecordBatch::epoch_marker(offset, epoch, ts),
    }
}

fn abort_at(aborted: &[AbortedTxn], offset: u64) -> Option<&AbortedTxn> {
    aborted.iter().find(|a| a.last_offset == offset)
}

/// The epoch of the aborted transaction's own batches (its producer's last one before the
/// marker), if any were returned: clients do not check a marker's epoch, but the marker
/// stays truthful where it can.
fn producer_epoch(r: &message::ConsumerRecords, a: &AbortedTxn) -> u16 {
    r.batches
        .iter()
        .filter(|b| b.base_offset < a.last_offset)
        .filter_map(|b| b.producer.filter(|p| p.producer_id == a.producer_id))
        .map(|p| p.producer_epoch)
        .next_back()
        .unwrap_or(0)
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
                .with_last_stable_offset(r.last_stable_offset as i64)
                .with_log_start_offset(r.log_start_offset as i64)
                .with_aborted_transactions(Some(aborted_transactions(&r.aborted)))
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

/// Kafka's list: producer and first offset (the reader finds the end at the ABORT marker).
fn aborted_transactions(aborted: &[AbortedTxn]) -> Vec<AbortedTransaction> {
    aborted
        .iter()
        .map(|a| {
            AbortedTransaction::default()
                .with_producer_id(ProducerId(a.producer_id as i64))
                .with_first_offset(a.first_offset as i64)
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use skein_core::log::ProducerInfo;

    fn records(
        batches: Vec<RecordBatch>,
        next: u64,
        aborted: Vec<AbortedTxn>,
    ) -> message::ConsumerRecords {
        message::ConsumerRecords {
            batches,
            high_watermark: next,
            log_start_offset: 0,
            leader_epoch: 2,
            next_offset: next,
            last_epoch: Some(2),
            last_stable_offset: next,
            aborted,
        }
    }

    fn txn_batch(base: u64, producer_id: u64) -> RecordBatch {
        RecordBatch::from_values(1, [b"x".to_vec()])
            .with_producer(Some(ProducerInfo {
                producer_id,
                producer_epoch: 3,
                base_sequence: 0,
            }))
            .transactional()
            .at(base)
            .in_epoch(2)
    }

    /// Offsets 0 (epoch marker), 1 (data of producer 7), 2 (its abort marker), 3 (data of
    /// producer 8), 4 (its commit marker): the abort goes out as producer 7's ABORT, the
    /// other gaps as epoch markers; the read_committed list names producer 7 from 1.
    #[test]
    fn an_aborted_transactions_marker_goes_back_in_as_its_abort() {
        let aborted = vec![AbortedTxn {
            producer_id: 7,
            first_offset: 1,
            last_offset: 2,
        }];
        let r = records(vec![txn_batch(1, 7), txn_batch(3, 8)], 5, aborted);
        let out = with_markers(0, &r);
        let offsets: Vec<u64> = out.iter().map(|b| b.base_offset).collect();
        assert_eq!(offsets, vec![0, 1, 2, 3, 4]);
        assert!(out[0].is_control() && out[0].as_txn_marker().is_none());
        let abort = out[2].as_txn_marker().expect("an abort marker");
        assert_eq!(
            (abort.producer_id, abort.producer_epoch, abort.result),
            (7, 3, TxnResult::Abort)
        );
        assert!(out[4].is_control() && out[4].as_txn_marker().is_none());
        let list = aborted_transactions(&r.aborted);
        assert_eq!((list[0].producer_id.0, list[0].first_offset), (7, 1));
        // And on the wire: a transactional control batch of producer 7.
        let mut budget = Budget {
            left: usize::MAX,
            first: true,
        };
        let bytes = encode_within(&out, &mut budget).unwrap();
        let infos =
            kafka_protocol::records::RecordBatchDecoder::decode_batch_info(&mut bytes.clone())
                .unwrap();
        assert!(infos[2].control && infos[2].transactional);
        assert_eq!(infos[2].producer_id, 7);
        assert!(infos[1].transactional && !infos[1].control);
    }

    #[test]
    fn the_isolation_byte_is_kafkas() {
        assert_eq!(isolation(1), IsolationLevel::ReadCommitted);
        assert_eq!(isolation(0), IsolationLevel::ReadUncommitted);
        assert_eq!(isolation(-3), IsolationLevel::ReadUncommitted);
    }
}
