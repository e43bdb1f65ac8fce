//! The consumer-group APIs (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! OffsetCommit, OffsetFetch), each one Skein group request ([`skein_core::group`]) to the
//! local broker, which answers FindCoordinator from its metadata image and hands the rest
//! to the coordinator it hosts (or answers NOT_COORDINATOR; the client then looks again).
//!
//! Kafka's coordinator treats the members' subscription and assignment bytes as opaque;
//! Skein's reads them (its assignors and the assignment check need topics and
//! partitions), so Kafka's ConsumerProtocol bytes are translated both ways: a
//! subscription's topics and owned partitions (user data and rack id are dropped), an
//! assignment's partitions (user data dropped). librdkafka's range, roundrobin and
//! cooperative-sticky assignors need nothing else.

use super::errors;
use super::guard;
use super::session::Session;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTp;
use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedTp;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, ConsumerProtocolAssignment, ConsumerProtocolSubscription, FindCoordinatorRequest,
    FindCoordinatorResponse, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest,
    JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest,
    SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use skein_core::group::{self as g, GroupError, GroupRequest, GroupResponse};
use skein_core::message::Message;
use skein_core::types::TopicPartition;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub(super) const TIMEOUT: Duration = Duration::from_secs(5);
const MS: u64 = 1_000_000;

/// One group request to the local broker; its answer, or None after `timeout`.
pub(super) async fn call(
    s: &mut Session,
    request: GroupRequest,
    timeout: Duration,
) -> Option<GroupResponse> {
    let correlation = s.correlation();
    match s.call(Message::group(correlation, request), timeout).await {
        Some(Message::GroupResponse { response, .. }) => Some(*response),
        _ => None,
    }
}

pub(super) fn text(s: &StrBytes) -> String {
    s.to_string()
}

fn opt_text(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(text).filter(|s| !s.is_empty())
}

pub(super) fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

pub async fn find_coordinator(
    s: &mut Session,
    req: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let resp = FindCoordinatorResponse::default().with_node_id(BrokerId(-1));
    match req.key_type {
        0 => {}
        // A transactional id's coordinator.
        1 => return super::txn::find_coordinator(s, &req).await,
        _ => return resp.with_error_code(errors::invalid_request()),
    }
    let request = GroupRequest::FindCoordinator {
        group_id: text(&req.key),
    };
    match call(s, request, TIMEOUT).await {
        Some(GroupResponse::FindCoordinator(Ok(info))) => {
            match s.ctx.cluster.kafka_listener(info.node) {
                Some(addr) => resp
                    .with_node_id(BrokerId(info.node as i32))
                    .with_host(str_bytes(addr.ip().to_string()))
                    .with_port(i32::from(addr.port())),
                // The coordinator serves no Kafka: as good as none.
                None => resp.with_error_code(errors::group(&GroupError::CoordinatorNotAvailable)),
            }
        }
        Some(GroupResponse::FindCoordinator(Err(e))) => resp.with_error_code(errors::group(&e)),
        _ => resp.with_error_code(errors::group(&GroupError::CoordinatorNotAvailable)),
    }
}

/// A ConsumerProtocol subscription (version prefix, then the body) as Skein's.
pub(super) fn subscription(bytes: &Bytes) -> Option<g::Subscription> {
    let version = guard::check_subscription(bytes).ok()?;
    let mut buf = bytes.slice(2..);
    // A newer version only appends fields (Kafka's ConsumerProtocol rule): read ours.
    let sub = ConsumerProtocolSubscription::decode(&mut buf, version.min(3)).ok()?;
    let mut owned = Vec::new();
    for t in &sub.owned_partitions {
        for p in &t.partitions {
            owned.push(TopicPartition::new(
                t.topic.0.to_string(),
                u32::try_from(*p).ok()?,
            ));
        }
    }
    Some(g::Subscription {
        topics: sub.topics.iter().map(text).collect(),
        owned,
        generation: (version >= 2 && sub.generation_id >= 0).then_some(sub.generation_id as u32),
    })
}

/// Topic-partitions grouped by topic, Kafka's (topic, [partition]) form.
fn by_topic(tps: &[TopicPartition]) -> BTreeMap<String, Vec<i32>> {
    let mut m: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for tp in tps {
        m.entry(tp.topic.clone())
            .or_default()
            .push(tp.partition as i32);
    }
    m
}

fn versioned(version: i16, body: &impl Encodable) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    // Encoding our own well-formed values does not fail.
    if body.encode(&mut buf, version).is_err() {
        return Bytes::new();
    }
    buf.freeze()
}

/// Skein's subscription as ConsumerProtocol v1 bytes (topics, owned partitions), which
/// every librdkafka 1.6+ reads.
pub(super) fn subscription_bytes(sub: &g::Subscription) -> Bytes {
    let owned = by_topic(&sub.owned)
        .into_iter()
        .map(|(t, ps)| {
            OwnedTp::default()
                .with_topic(TopicName(str_bytes(t)))
                .with_partitions(ps)
        })
        .collect();
    let body = ConsumerProtocolSubscription::default()
        .with_topics(sub.topics.iter().cloned().map(str_bytes).collect())
        .with_owned_partitions(owned);
    versioned(1, &body)
}

pub(super) fn assignment(bytes: &Bytes) -> Option<g::MemberAssignment> {
    if bytes.is_empty() {
        return Some(g::MemberAssignment::default());
    }
    let version = guard::check_assignment(bytes).ok()?;
    let mut buf = bytes.slice(2..);
    let a = ConsumerProtocolAssignment::decode(&mut buf, version.min(3)).ok()?;
    let mut partitions = Vec::new();
    for t in &a.assigned_partitions {
        for p in &t.partitions {
            partitions.push(TopicPartition::new(
                t.topic.0.to_string(),
                u32::try_from(*p).ok()?,
            ));
        }
    }
    Some(g::MemberAssignment { partitions })
}

pub(super) fn assignment_bytes(a: &g::MemberAssignment) -> Bytes {
    let parts = by_topic(&a.partitions)
        .into_iter()
        .map(|(t, ps)| {
            AssignedTp::default()
                .with_topic(TopicName(str_bytes(t)))
                .with_partitions(ps)
        })
        .collect();
    versioned(
        0,
        &ConsumerProtocolAssignment::default().with_assigned_partitions(parts),
    )
}

fn ms(v: i32) -> u64 {
    u64::try_from(v).unwrap_or(0) * MS
}

pub async fn join_group(s: &mut Session, req: JoinGroupRequest, version: i16) -> JoinGroupResponse {
    let resp = JoinGroupResponse::default().with_generation_id(-1);
    let mut protocols = Vec::new();
    for p in &req.protocols {
        let Some(subscription) = subscription(&p.metadata) else {
            return resp.with_error_code(errors::group(&GroupError::InconsistentGroupProtocol));
        };
        protocols.push(g::ProtocolMetadata {
            name: text(&p.name),
            subscription,
        });
    }
    // v0 has no rebalance timeout: it is the session timeout.
    let rebalance = if version >= 1 {
        req.rebalance_timeout_ms
    } else {
        req.session_timeout_ms
    };
    let mut join = g::JoinGroupRequest {
        group_id: req.group_id.0.to_string(),
        member_id: Some(text(&req.member_id)).filter(|m| !m.is_empty()),
        group_instance_id: opt_text(&req.group_instance_id),
        session_timeout: ms(req.session_timeout_ms),
        rebalance_timeout: ms(rebalance),
        protocol_type: text(&req.protocol_type),
        protocols,
    };
    // The join completes when the rebalance does, up to the rebalance timeout.
    let wait = Duration::from_nanos(join.rebalance_timeout) + TIMEOUT;
    let mut answer = call(s, GroupRequest::JoinGroup(join.clone()), wait).await;
    // KIP-394: a new member is given an id and must rejoin with it. Clients before
    // JoinGroup v4 cannot, so the listener rejoins for them straight away.
    if let Some(GroupResponse::JoinGroup(Err(GroupError::MemberIdRequired(id)))) = &answer {
        join.member_id = Some(id.clone());
        answer = call(s, GroupRequest::JoinGroup(join), wait).await;
    }
    match answer {
        Some(GroupResponse::JoinGroup(Ok(j))) => {
            let members = j
                .members
                .iter()
                .map(|m| {
                    JoinGroupResponseMember::default()
                        .with_member_id(str_bytes(m.member_id.clone()))
                        .with_group_instance_id(
                            m.group_instance_id
                                .clone()
                                .filter(|_| version >= 5)
                                .map(str_bytes),
                        )
                        .with_metadata(subscription_bytes(&m.subscription))
                })
                .collect();
            resp.with_generation_id(j.generation as i32)
                .with_protocol_name(Some(str_bytes(j.protocol)))
                .with_leader(str_bytes(j.leader))
                .with_member_id(str_bytes(j.member_id))
                .with_members(members)
        }
        Some(GroupResponse::JoinGroup(Err(e))) => resp.with_error_code(errors::group(&e)),
        _ => resp.with_error_code(errors::timed_out()),
    }
}

pub async fn sync_group(s: &mut Session, req: SyncGroupRequest) -> SyncGroupResponse {
    let resp = SyncGroupResponse::default();
    let mut assignments = BTreeMap::new();
    for a in &req.assignments {
        let Some(ma) = assignment(&a.assignment) else {
            return resp.with_error_code(errors::group(&GroupError::InconsistentGroupProtocol));
        };
        assignments.insert(text(&a.member_id), ma);
    }
    let request = GroupRequest::SyncGroup(g::SyncGroupRequest {
        group_id: req.group_id.0.to_string(),
        generation: u32::try_from(req.generation_id).unwrap_or(u32::MAX),
        member_id: text(&req.member_id),
        group_instance_id: opt_text(&req.group_instance_id),
        assignments,
    });
    // A follower's sync waits for the leader's (bounded by the session timeout).
    match call(s, request, Duration::from_secs(60)).await {
        Some(GroupResponse::SyncGroup(Ok(a))) => resp.with_assignment(assignment_bytes(&a)),
        Some(GroupResponse::SyncGroup(Err(e))) => resp.with_error_code(errors::group(&e)),
        _ => resp.with_error_code(errors::timed_out()),
    }
}

pub async fn heartbeat(s: &mut Session, req: HeartbeatRequest) -> HeartbeatResponse {
    let request = GroupRequest::Heartbeat(g::HeartbeatRequest {
        group_id: req.group_id.0.to_string(),
        generation: u32::try_from(req.generation_id).unwrap_or(u32::MAX),
        member_id: text(&req.member_id),
        group_instance_id: opt_text(&req.group_instance_id),
    });
    let code = match call(s, request, TIMEOUT).await {
        Some(GroupResponse::Heartbeat(Ok(()))) => errors::NONE,
        Some(GroupResponse::Heartbeat(Err(e))) => errors::group(&e),
        _ => errors::timed_out(),
    };
    HeartbeatResponse::default().with_error_code(code)
}

pub async fn leave_group(
    s: &mut Session,
    req: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    // v3+ leaves a batch of members (KIP-345); before, one member id.
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        req.members
            .iter()
            .map(|m| (text(&m.member_id), opt_text(&m.group_instance_id)))
            .collect()
    } else {
        vec![(text(&req.member_id), None)]
    };
    let mut resp = LeaveGroupResponse::default();
    for (member_id, group_instance_id) in members {
        let request = GroupRequest::LeaveGroup(g::LeaveGroupRequest {
            group_id: req.group_id.0.to_string(),
            member_id: member_id.clone(),
            group_instance_id: group_instance_id.clone(),
        });
        let code = match call(s, request, TIMEOUT).await {
            Some(GroupResponse::LeaveGroup(Ok(()))) => errors::NONE,
            Some(GroupResponse::LeaveGroup(Err(e))) => errors::group(&e),
            _ => errors::timed_out(),
        };
        if version >= 3 {
            resp.members.push(
                MemberResponse::default()
                    .with_member_id(str_bytes(member_id))
                    .with_group_instance_id(group_instance_id.map(str_bytes))
                    .with_error_code(code),
            );
        } else {
            resp.error_code = code;
        }
    }
    resp
}

/// Orders one member's commits for the coordinator's stale-commit check, which Kafka's
/// protocol has no field for: wall-clock microseconds, never repeating on this broker, so
/// a later commit carries a larger number also when it comes through another connection
/// or another broker (after the coordinator moved).
fn commit_sequence() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    let prev = LAST.fetch_max(now, Ordering::SeqCst);
    if prev >= now {
        LAST.fetch_add(1, Ordering::SeqCst) + 1
    } else {
        now
    }
}

pub async fn offset_commit(s: &mut Session, req: OffsetCommitRequest) -> OffsetCommitResponse {
    let group_id = req.group_id.0.to_string();
    // Generation -1 is a simple consumer's or a tool's commit (Kafka ignores the member
    // id then): Skein's Admin commit, accepted while the group has no members.
    let committer = if req.generation_id_or_member_epoch < 0 {
        g::Committer::Admin
    } else {
        g::Committer::Member {
            member_id: text(&req.member_id),
            generation: u32::try_from(req.generation_id_or_member_epoch).unwrap_or(u32::MAX),
            group_instance_id: opt_text(&req.group_instance_id),
            sequence: commit_sequence(),
        }
    };
    let topics = req.topics.iter().map(|t| t.name.0.to_string()).collect();
    let known = known_partitions(s, topics).await;
    let mut refused: BTreeMap<(String, i32), i16> = BTreeMap::new();
    let mut offsets = BTreeMap::new();
    let mut clear = Vec::new();
    for t in &req.topics {
        for p in &t.partitions {
            let name = t.name.0.to_string();
            let tp = u32::try_from(p.partition_index)
                .ok()
                .map(|q| TopicPartition::new(name.clone(), q))
                .filter(|tp| known.as_ref().is_none_or(|k| k.contains(tp)));
            let Some(tp) = tp else {
                tracing::warn!(group = %group_id, topic = %name, partition = p.partition_index,
                    "kafka: OffsetCommit for an unknown topic or partition refused");
                refused.insert((name, p.partition_index), errors::unknown_topic());
                continue;
            };
            // A negative offset (-1, -2: clients reset a position so) means "no
            // committed position": Kafka stores it and OffsetFetch then reads -1 (or
            // -2); Skein deletes the commit, so OffsetFetch reads -1 for both.
            if p.committed_offset < 0 {
                clear.push(tp);
                continue;
            }
            let value = g::OffsetAndMetadata {
                offset: p.committed_offset as u64,
                leader_epoch: u32::try_from(p.committed_leader_epoch).ok(),
                metadata: p.committed_metadata.as_ref().map(text).unwrap_or_default(),
            };
            offsets.insert(tp, value);
        }
    }
    // All or nothing per kind: one code for every partition committed (an empty commit
    // still checks the committer), then one for every partition cleared.
    let mut code = errors::NONE;
    if !offsets.is_empty() || clear.is_empty() {
        let request = GroupRequest::OffsetCommit(g::OffsetCommitRequest {
            group_id: group_id.clone(),
            committer: committer.clone(),
            offsets,
        });
        code = commit_code(call(s, request, TIMEOUT).await);
    }
    if code == errors::NONE && !clear.is_empty() {
        let request = GroupRequest::OffsetDelete(g::OffsetDeleteRequest {
            group_id,
            partitions: clear,
            committer: Some(committer),
        });
        code = commit_code(call(s, request, TIMEOUT).await);
    }
    let mut resp = OffsetCommitResponse::default();
    for t in &req.topics {
        let partitions = t
            .partitions
            .iter()
            .map(|p| {
                let key = (t.name.0.to_string(), p.partition_index);
                OffsetCommitResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(refused.get(&key).copied().unwrap_or(code))
            })
            .collect();
        resp.topics.push(
            OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions),
        );
    }
    resp
}

fn commit_code(answer: Option<GroupResponse>) -> i16 {
    match answer {
        Some(GroupResponse::OffsetCommit(Ok(()))) => errors::NONE,
        Some(GroupResponse::OffsetCommit(Err(e))) => errors::group(&e),
        _ => errors::timed_out(),
    }
}

/// The partitions of `topics` in the local broker's metadata image (Kafka refuses a
/// commit or an OffsetDelete for a partition it does not know); None when the broker
/// does not answer in time (then nothing is refused for it).
pub(super) async fn known_partitions(
    s: &mut Session,
    topics: Vec<String>,
) -> Option<std::collections::BTreeSet<TopicPartition>> {
    let correlation = s.correlation();
    let request = Message::Metadata(skein_core::message::MetadataRequest {
        correlation,
        topics: Some(topics),
    });
    match s.call(request, TIMEOUT).await {
        Some(Message::MetadataResponse(m)) => {
            Some(m.partitions.into_iter().map(|p| p.tp).collect())
        }
        _ => None,
    }
}

pub async fn offset_fetch(
    s: &mut Session,
    req: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let wanted: Option<Vec<TopicPartition>> = req.topics.as_ref().map(|ts| {
        ts.iter()
            .flat_map(|t| {
                t.partition_indexes
                    .iter()
                    .filter_map(|p| u32::try_from(*p).ok())
                    .map(|p| TopicPartition::new(t.name.0.to_string(), p))
            })
            .collect()
    });
    let request = GroupRequest::OffsetFetch(g::OffsetFetchRequest {
        group_id: req.group_id.0.to_string(),
        partitions: wanted,
        // Kafka before OffsetFetch v7 does not wait for commits in flight either.
        require_stable: false,
    });
    let answer = match call(s, request, TIMEOUT).await {
        Some(GroupResponse::OffsetFetch(r)) => r.map_err(|e| errors::group(&e)),
        _ => Err(errors::timed_out()),
    };
    let mut resp = OffsetFetchResponse::default();
    let found = match answer {
        Ok(found) => found,
        Err(code) => {
            // The group-level code exists from v2; v1 carries it in every partition.
            if version >= 2 {
                resp.error_code = code;
            }
            for t in req.topics.iter().flatten() {
                let partitions = t
                    .partition_indexes
                    .iter()
                    .map(|p| fetched(*p, None).with_error_code(code))
                    .collect();
                resp.topics.push(
                    OffsetFetchResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(partitions),
                );
            }
            return resp;
        }
    };
    match &req.topics {
        Some(ts) => {
            for t in ts {
                let partitions = t
                    .partition_indexes
                    .iter()
                    .map(|p| {
                        let tp = u32::try_from(*p)
                            .ok()
                            .map(|q| TopicPartition::new(t.name.0.to_string(), q));
                        fetched(*p, tp.and_then(|tp| found.get(&tp)))
                    })
                    .collect();
                resp.topics.push(
                    OffsetFetchResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(partitions),
                );
            }
        }
        None => {
            let mut topics: BTreeMap<String, Vec<OffsetFetchResponsePartition>> = BTreeMap::new();
            for (tp, o) in &found {
                topics
                    .entry(tp.topic.clone())
                    .or_default()
                    .push(fetched(tp.partition as i32, Some(o)));
            }
            for (name, partitions) in topics {
                resp.topics.push(
                    OffsetFetchResponseTopic::default()
                        .with_name(TopicName(str_bytes(name)))
                        .with_partitions(partitions),
                );
            }
        }
    }
    resp
}

/// One partition's committed offset; -1 and empty metadata when there is none.
fn fetched(partition: i32, o: Option<&g::OffsetAndMetadata>) -> OffsetFetchResponsePartition {
    let base = OffsetFetchResponsePartition::default()
        .with_partition_index(partition)
        .with_committed_leader_epoch(-1)
        .with_committed_offset(-1)
        .with_metadata(Some(StrBytes::from_static_str("")));
    match o {
        Some(o) => base
            .with_committed_offset(o.offset as i64)
            .with_committed_leader_epoch(o.leader_epoch.map_or(-1, |e| e as i32))
            .with_metadata(Some(str_bytes(o.metadata.clone()))),
        None => base,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_protocol_bytes_round_trip() {
        let sub = g::Subscription {
            topics: vec!["a".into(), "b".into()],
            owned: vec![
                TopicPartition::new("a".to_string(), 1),
                TopicPartition::new("a".to_string(), 0),
            ],
            generation: None,
        };
        let back = subscription(&subscription_bytes(&sub)).unwrap();
        assert_eq!(back.topics, sub.topics);
        assert_eq!(back.owned.len(), 2);
        let a = g::MemberAssignment {
            partitions: vec![
                TopicPartition::new("a".to_string(), 2),
                TopicPartition::new("b".to_string(), 0),
            ],
        };
        assert_eq!(assignment(&assignment_bytes(&a)), Some(a));
        assert_eq!(
            assignment(&Bytes::new()),
            Some(g::MemberAssignment::default())
        );
        // A count larger than the bytes is refused before the decoder sees it.
        let mut bad = BytesMut::new();
        bad.put_i16(0);
        bad.put_i32(i32::MAX);
        assert_eq!(subscription(&bad.freeze()), None);
    }

    proptest::proptest! {
        /// Subscription and assignment bytes come from clients: any bytes translate to
        /// something or to nothing, never a panic or a huge allocation.
        #[test]
        fn any_consumer_protocol_bytes_are_safe(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
        ) {
            let b = Bytes::from(bytes);
            let _ = subscription(&b);
            let _ = assignment(&b);
        }
    }

    #[test]
    fn commit_sequences_increase() {
        let a = commit_sequence();
        let b = commit_sequence();
        assert!(b > a);
    }
}
