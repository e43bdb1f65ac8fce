//! The group tooling APIs (ListGroups, DescribeGroups, DeleteGroups, OffsetDelete): what
//! lag monitors and `kafka-consumer-groups`-style tools send. Each is one Skein group
//! request ([`skein_core::group`]) to the local broker: ListGroups is answered by the
//! broker from every coordinator it hosts (Kafka's is per broker too; tools ask every
//! broker), the others by the group's coordinator (NOT_COORDINATOR elsewhere; tools find
//! the coordinator first).

use super::errors;
use super::groups::{assignment_bytes, call, known_partitions, str_bytes, subscription_bytes};
use super::groups::{text, TIMEOUT};
use super::session::Session;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    GroupId, ListGroupsResponse, OffsetDeleteRequest, OffsetDeleteResponse,
};
use kafka_protocol::ResponseError as E;
use skein_core::group::{self as g, GroupError, GroupRequest, GroupResponse};
use skein_core::types::TopicPartition;

pub async fn list_groups(s: &mut Session) -> ListGroupsResponse {
    let resp = ListGroupsResponse::default();
    match call(s, GroupRequest::ListGroups, TIMEOUT).await {
        Some(GroupResponse::ListGroups(Ok(groups))) => resp.with_groups(
            groups
                .into_iter()
                .map(|l| {
                    ListedGroup::default()
                        .with_group_id(GroupId(str_bytes(l.group_id)))
                        .with_protocol_type(str_bytes(l.protocol_type))
                })
                .collect(),
        ),
        Some(GroupResponse::ListGroups(Err(e))) => resp.with_error_code(errors::group(&e)),
        _ => resp.with_error_code(errors::timed_out()),
    }
}

pub async fn describe_groups(
    s: &mut Session,
    req: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let mut resp = DescribeGroupsResponse::default();
    for id in req.groups {
        let request = GroupRequest::DescribeGroup {
            group_id: text(&id.0),
        };
        let described = match call(s, request, TIMEOUT).await {
            Some(GroupResponse::DescribeGroup(Ok(d))) => described(d),
            Some(GroupResponse::DescribeGroup(Err(e))) => {
                DescribedGroup::default().with_error_code(errors::group(&e))
            }
            _ => DescribedGroup::default().with_error_code(errors::timed_out()),
        };
        resp.groups.push(described.with_group_id(id));
    }
    resp
}

/// A Skein group description in Kafka's form: the members' ConsumerProtocol subscription
/// (their topics; owned = assigned partitions) and assignment bytes, as a Kafka
/// coordinator stores them. Skein does not keep client ids or hosts: those are empty.
fn described(d: g::GroupDescription) -> DescribedGroup {
    let consumer = d.protocol.is_some() || !d.members.is_empty();
    let members = d
        .members
        .into_iter()
        .map(|m| {
            let sub = g::Subscription {
                topics: m.subscription,
                owned: m.assignment.clone(),
                generation: None,
            };
            let assignment = g::MemberAssignment {
                partitions: m.assignment,
            };
            DescribedGroupMember::default()
                .with_member_id(str_bytes(m.member_id))
                .with_group_instance_id(m.group_instance_id.map(str_bytes))
                .with_member_metadata(subscription_bytes(&sub))
                .with_member_assignment(assignment_bytes(&assignment))
        })
        .collect();
    DescribedGroup::default()
        .with_group_state(str_bytes(d.state))
        .with_protocol_type(str_bytes(if consumer { "consumer" } else { "" }))
        .with_protocol_data(str_bytes(d.protocol.unwrap_or_default()))
        .with_members(members)
}

pub async fn delete_groups(s: &mut Session, req: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let mut resp = DeleteGroupsResponse::default();
    for id in req.groups_names {
        let group_id = text(&id.0);
        let request = GroupRequest::DeleteGroup {
            group_id: group_id.clone(),
        };
        let code = match call(s, request, TIMEOUT).await {
            Some(GroupResponse::DeleteGroup(Ok(()))) => errors::NONE,
            // (For a commit the same refusal is UNKNOWN_MEMBER_ID; here it is Kafka's own.)
            Some(GroupResponse::DeleteGroup(Err(GroupError::NonEmptyGroup))) => {
                E::NonEmptyGroup.code()
            }
            Some(GroupResponse::DeleteGroup(Err(e))) => errors::group(&e),
            _ => errors::timed_out(),
        };
        if code != errors::NONE {
            tracing::info!(group = %group_id, code, "kafka: DeleteGroups refused");
        }
        resp.results.push(
            DeletableGroupResult::default()
                .with_group_id(id)
                .with_error_code(code),
        );
    }
    resp
}

pub async fn offset_delete(s: &mut Session, req: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let group_id = text(&req.group_id.0);
    let topics = req.topics.iter().map(|t| t.name.0.to_string()).collect();
    let known = known_partitions(s, topics).await;
    let mut partitions = Vec::new();
    for t in &req.topics {
        for p in &t.partitions {
            if let Ok(q) = u32::try_from(p.partition_index) {
                partitions.push(TopicPartition::new(t.name.0.to_string(), q));
            }
        }
    }
    let is_known = |tp: &TopicPartition| known.as_ref().is_none_or(|k| k.contains(tp));
    let request = GroupRequest::OffsetDelete(g::OffsetDeleteRequest {
        group_id: group_id.clone(),
        partitions: partitions
            .iter()
            .filter(|tp| is_known(tp))
            .cloned()
            .collect(),
        committer: None,
    });
    let refused = match call(s, request, TIMEOUT).await {
        Some(GroupResponse::OffsetDelete(Ok(refused))) => refused,
        Some(GroupResponse::OffsetDelete(Err(e))) => {
            tracing::info!(group = %group_id, error = %e, "kafka: OffsetDelete refused");
            return OffsetDeleteResponse::default().with_error_code(errors::group(&e));
        }
        _ => return OffsetDeleteResponse::default().with_error_code(errors::timed_out()),
    };
    let mut resp = OffsetDeleteResponse::default();
    for t in &req.topics {
        let name = t.name.0.to_string();
        let partitions = t
            .partitions
            .iter()
            .map(|p| {
                let tp = u32::try_from(p.partition_index)
                    .ok()
                    .map(|q| TopicPartition::new(name.clone(), q));
                let code = match tp {
                    Some(tp) if refused.contains(&tp) => E::GroupSubscribedToTopic.code(),
                    Some(tp) if is_known(&tp) => errors::NONE,
                    _ => errors::unknown_topic(),
                };
                OffsetDeleteResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
            })
            .collect();
        resp.topics.push(
            OffsetDeleteResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions),
        );
    }
    resp
}
