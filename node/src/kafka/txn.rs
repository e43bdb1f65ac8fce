//! The transaction APIs (KIP-98, KIP-447): FindCoordinator for a transactional id,
//! InitProducerId with one, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn, each one Skein
//! transaction request ([`skein_core::txn`]) to the local broker, which answers
//! FindCoordinator from its image and hands the rest to the transaction coordinator it
//! hosts (or answers NOT_COORDINATOR: the client looks again); and TxnOffsetCommit, a
//! group request to the group coordinator. Errors are the core's, as Kafka codes
//! ([`TxnError::kafka_code`], [`errors::group`]).
//!
//! Only the non-flexible versions are served (v0-2), whose EndTxn answer carries no
//! producer epoch: the client cannot learn a KIP-890 part-2 bump, so its EndTxn asks the
//! coordinator to keep the epoch ([`EndTxnRequest::keep_epoch`]), as Kafka does for such
//! clients.

use super::errors;
use super::groups::{str_bytes, text};
use super::session::Session;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, BrokerId, EndTxnRequest, EndTxnResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, InitProducerIdRequest, InitProducerIdResponse, ProducerId,
    TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use kafka_protocol::ResponseError as E;
use skein_core::group::{self as g, GroupError, GroupRequest, GroupResponse};
use skein_core::message::Message;
use skein_core::txn::{self as t, TxnError, TxnRequest, TxnResponse, TxnResult};
use skein_core::types::TopicPartition;
use std::collections::BTreeMap;
use std::time::Duration;

/// Long enough for a coordinator write (replicated to `__transaction_state`), and for
/// InitProducerId or EndTxn to finish an earlier transaction's markers.
const TIMEOUT: Duration = Duration::from_secs(10);

/// One transaction request to the local broker; its answer, or None after the timeout.
async fn call(s: &mut Session, request: TxnRequest) -> Option<TxnResponse> {
    let correlation = s.correlation();
    match s.call(Message::txn(correlation, request), TIMEOUT).await {
        Some(Message::TxnResponse { response, .. }) => Some(*response),
        _ => None,
    }
}

/// No answer: the client finds the coordinator again and retries.
fn unanswered() -> i16 {
    TxnError::CoordinatorNotAvailable.kafka_code()
}

/// The producer id and epoch a request names, or the code for a malformed one: Kafka's
/// coordinator has no producer with a negative id (INVALID_PRODUCER_ID_MAPPING) and
/// fences a negative epoch (INVALID_PRODUCER_EPOCH).
fn identity(producer_id: ProducerId, epoch: i16) -> Result<(u64, u16), i16> {
    let pid = u64::try_from(producer_id.0)
        .map_err(|_| TxnError::InvalidProducerIdMapping(String::new()).kafka_code())?;
    let epoch = u16::try_from(epoch).map_err(|_| E::InvalidProducerEpoch.code())?;
    Ok((pid, epoch))
}

/// FindCoordinator with key type 1: the broker leading the id's `__transaction_state`
/// partition.
pub async fn find_coordinator(
    s: &mut Session,
    req: &FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let resp = FindCoordinatorResponse::default().with_node_id(BrokerId(-1));
    let request = TxnRequest::FindCoordinator {
        transactional_id: text(&req.key),
    };
    match call(s, request).await {
        Some(TxnResponse::FindCoordinator(Ok(info))) => {
            match s.ctx.cluster.kafka_listener(info.node) {
                Some(addr) => resp
                    .with_node_id(BrokerId(info.node as i32))
                    .with_host(str_bytes(addr.ip().to_string()))
                    .with_port(i32::from(addr.port())),
                None => resp.with_error_code(unanswered()),
            }
        }
        Some(TxnResponse::FindCoordinator(Err(e))) => resp
            .with_error_code(e.kafka_code())
            .with_error_message(Some(str_bytes(e.to_string()))),
        _ => resp.with_error_code(unanswered()),
    }
}

/// InitProducerId with a transactional id: the coordinator's identity for it (a new epoch,
/// fencing older instances, after ending any open transaction).
pub async fn init_producer_id(
    s: &mut Session,
    transactional_id: String,
    req: &InitProducerIdRequest,
) -> InitProducerIdResponse {
    let resp = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let Ok(timeout_ms) = u32::try_from(req.transaction_timeout_ms) else {
        let e = TxnError::InvalidTransactionTimeout(0);
        return resp.with_error_code(e.kafka_code());
    };
    let request = TxnRequest::InitProducerId(t::InitProducerIdRequest {
        transactional_id,
        transaction_timeout_ms: timeout_ms,
        // KIP-360's current identity is a v3+ field, not served here.
        current: None,
    });
    match call(s, request).await {
        Some(TxnResponse::InitProducerId(Ok(id))) => match (
            i64::try_from(id.producer_id),
            i16::try_from(id.producer_epoch),
        ) {
            (Ok(pid), Ok(epoch)) => resp
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch),
            _ => resp.with_error_code(E::UnknownServerError.code()),
        },
        Some(TxnResponse::InitProducerId(Err(e))) => resp.with_error_code(e.kafka_code()),
        _ => resp.with_error_code(unanswered()),
    }
}

pub async fn add_partitions(
    s: &mut Session,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let topics = &req.v3_and_below_topics;
    let mut partitions = Vec::new();
    let mut invalid = None;
    for topic in topics {
        for p in &topic.partitions {
            match u32::try_from(*p) {
                Ok(p) => partitions.push(TopicPartition::new(topic.name.0.to_string(), p)),
                Err(_) => invalid = Some((topic.name.0.to_string(), *p)),
            }
        }
    }
    let result = match (
        invalid,
        identity(
            req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch,
        ),
    ) {
        (Some((topic, p)), _) => Err(Refusal::Partition(
            topic,
            p,
            E::UnknownTopicOrPartition.code(),
        )),
        (None, Err(code)) => Err(Refusal::All(code)),
        (None, Ok((producer_id, producer_epoch))) => {
            let request = TxnRequest::AddPartitionsToTxn(t::AddPartitionsToTxnRequest {
                transactional_id: text(&req.v3_and_below_transactional_id),
                producer_id,
                producer_epoch,
                partitions,
                verify_only: false,
            });
            match call(s, request).await {
                Some(TxnResponse::AddPartitionsToTxn(Ok(()))) => Ok(()),
                Some(TxnResponse::AddPartitionsToTxn(Err(TxnError::UnknownTopicOrPartition(
                    tp,
                )))) => Err(Refusal::Partition(
                    tp.topic,
                    tp.partition as i32,
                    E::UnknownTopicOrPartition.code(),
                )),
                Some(TxnResponse::AddPartitionsToTxn(Err(e))) => Err(Refusal::All(e.kafka_code())),
                _ => Err(Refusal::All(unanswered())),
            }
        }
    };
    let code = |topic: &str, p: i32| match &result {
        Ok(()) => errors::NONE,
        Err(Refusal::All(code)) => *code,
        Err(Refusal::Partition(t, q, code)) if t == topic && *q == p => *code,
        // Kafka's answer for the partitions of a request refused for another one.
        Err(Refusal::Partition(..)) => E::OperationNotAttempted.code(),
    };
    let results = topics
        .iter()
        .map(|topic| {
            let name = topic.name.0.to_string();
            AddPartitionsToTxnTopicResult::default()
                .with_name(topic.name.clone())
                .with_results_by_partition(
                    topic
                        .partitions
                        .iter()
                        .map(|p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(*p)
                                .with_partition_error_code(code(&name, *p))
                        })
                        .collect(),
                )
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results)
}

/// Why an AddPartitionsToTxn failed: every partition, or one (the rest not attempted).
enum Refusal {
    All(i16),
    Partition(String, i32, i16),
}

pub async fn add_offsets(s: &mut Session, req: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse {
    let resp = AddOffsetsToTxnResponse::default();
    let (producer_id, producer_epoch) = match identity(req.producer_id, req.producer_epoch) {
        Ok(id) => id,
        Err(code) => return resp.with_error_code(code),
    };
    let request = TxnRequest::AddOffsetsToTxn(t::AddOffsetsToTxnRequest {
        transactional_id: req.transactional_id.0.to_string(),
        producer_id,
        producer_epoch,
        group_id: req.group_id.0.to_string(),
    });
    match call(s, request).await {
        Some(TxnResponse::AddOffsetsToTxn(Ok(()))) => resp,
        Some(TxnResponse::AddOffsetsToTxn(Err(e))) => resp.with_error_code(e.kafka_code()),
        _ => resp.with_error_code(unanswered()),
    }
}

pub async fn end_txn(s: &mut Session, req: EndTxnRequest) -> EndTxnResponse {
    let resp = EndTxnResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let (producer_id, producer_epoch) = match identity(req.producer_id, req.producer_epoch) {
        Ok(id) => id,
        Err(code) => return resp.with_error_code(code),
    };
    let request = TxnRequest::EndTxn(t::EndTxnRequest {
        transactional_id: req.transactional_id.0.to_string(),
        producer_id,
        producer_epoch,
        result: if req.committed {
            TxnResult::Commit
        } else {
            TxnResult::Abort
        },
        // v0-2 answers carry no epoch (see the module comment).
        keep_epoch: true,
    });
    match call(s, request).await {
        Some(TxnResponse::EndTxn(Ok(_))) => resp,
        Some(TxnResponse::EndTxn(Err(e))) => resp.with_error_code(e.kafka_code()),
        _ => resp.with_error_code(unanswered()),
    }
}

/// TxnOffsetCommit (KIP-447) to the group coordinator: the offsets are written pending
/// until the transaction's marker. All or nothing, so every partition gets the one code.
pub async fn txn_offset_commit(
    s: &mut Session,
    req: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let mut offsets = BTreeMap::new();
    let mut code = None;
    for topic in &req.topics {
        for p in &topic.partitions {
            match (
                u32::try_from(p.partition_index),
                u64::try_from(p.committed_offset),
            ) {
                (Ok(index), Ok(offset)) => {
                    let tp = TopicPartition::new(topic.name.0.to_string(), index);
                    let om = g::OffsetAndMetadata {
                        offset,
                        leader_epoch: u32::try_from(p.committed_leader_epoch).ok(),
                        metadata: p.committed_metadata.as_ref().map(text).unwrap_or_default(),
                    };
                    offsets.insert(tp, om);
                }
                (Err(_), _) => code = Some(E::UnknownTopicOrPartition.code()),
                // Kafka's clients never commit a negative offset in a transaction.
                (_, Err(_)) => code = Some(E::InvalidRequest.code()),
            }
        }
    }
    let code = match (code, identity(req.producer_id, req.producer_epoch)) {
        (Some(code), _) | (None, Err(code)) => code,
        (None, Ok((producer_id, producer_epoch))) => {
            let request = GroupRequest::TxnOffsetCommit(g::TxnOffsetCommitRequest {
                group_id: req.group_id.0.to_string(),
                transactional_id: req.transactional_id.0.to_string(),
                producer_id,
                producer_epoch,
                // v3+ fields (KIP-447's member fencing), not served here: unchecked.
                generation: None,
                member_id: None,
                group_instance_id: None,
                offsets,
            });
            match super::groups::call(s, request, TIMEOUT).await {
                Some(GroupResponse::TxnOffsetCommit(Ok(()))) => errors::NONE,
                Some(GroupResponse::TxnOffsetCommit(Err(e))) => errors::group(&e),
                _ => errors::group(&GroupError::CoordinatorNotAvailable),
            }
        }
    };
    let topics = req
        .topics
        .iter()
        .map(|topic| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .map(|p| {
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}
