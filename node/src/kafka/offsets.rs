//! ListOffsets: earliest (-2), latest (-1, the high watermark) or by timestamp, each a
//! Skein list-offsets request to the local broker. Max-timestamp (-3) is not supported.

use super::errors;
use super::session::Session;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use skein_core::message::{self, Message, OffsetSpec};
use skein_core::types::TopicPartition;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(5);

pub async fn handle(s: &mut Session, req: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
    let mut requests = Vec::new();
    let mut order = Vec::new();
    for topic in &req.topics {
        for p in &topic.partitions {
            let spec = match p.timestamp {
                -2 => Some(OffsetSpec::Earliest),
                -1 => Some(OffsetSpec::Latest),
                ts if ts >= 0 => Some(OffsetSpec::Timestamp(ts)),
                _ => None,
            };
            let Some(spec) = spec else {
                order.push(None);
                continue;
            };
            let correlation = s.correlation();
            let tp = TopicPartition::new(topic.name.0.to_string(), p.partition_index.max(0) as u32);
            order.push(Some(correlation));
            requests.push(Message::ListOffsets(message::ListOffsetsRequest {
                correlation,
                tp,
                spec,
                // v2+ (v1's field reads 0: read_uncommitted). read_committed's Latest is
                // the last stable offset.
                isolation: super::fetch::isolation(req.isolation_level),
            }));
        }
    }
    let answers = s.call_all(requests, TIMEOUT).await;
    let mut order = order.into_iter();
    let mut resp = ListOffsetsResponse::default();
    for topic in &req.topics {
        let mut out = ListOffsetsTopicResponse::default().with_name(topic.name.clone());
        for p in &topic.partitions {
            let base = ListOffsetsPartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_timestamp(-1)
                .with_offset(-1)
                .with_leader_epoch(-1);
            let answer = order
                .next()
                .flatten()
                .map(|c| answers.get(&c))
                .map(|a| match a {
                    Some(Message::ListOffsetsResponse(r)) => {
                        r.result.clone().map_err(|e| errors::fetch(&e))
                    }
                    _ => Err(errors::timed_out()),
                })
                .unwrap_or(Err(errors::invalid_request()));
            out.partitions.push(match answer {
                // The leader epoch field exists from v4 (the crate refuses it set below).
                Ok(Some(l)) if version >= 4 => base
                    .with_offset(l.offset as i64)
                    .with_leader_epoch(l.leader_epoch as i32),
                Ok(Some(l)) => base.with_offset(l.offset as i64),
                Ok(None) => base,
                Err(code) => base.with_error_code(code),
            });
        }
        resp.topics.push(out);
    }
    resp
}
