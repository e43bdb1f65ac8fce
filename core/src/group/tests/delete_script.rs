//! Deleting committed offsets and groups: Kafka's DeleteGroups and OffsetDelete, and a
//! member's commit of "no position" (a Kafka client committing -1 to reset). Each writes
//! tombstones, so a reload agrees with what was answered.

use super::harness::*;
use crate::group::*;
use crate::types::TopicPartition;

fn tp(p: u32) -> TopicPartition {
    TopicPartition::new("t", p)
}

fn delete_group(g: &str) -> GroupRequest {
    GroupRequest::DeleteGroup { group_id: g.into() }
}

fn offset_delete(committer: Option<Committer>, parts: &[u32], topic: &str) -> GroupRequest {
    GroupRequest::OffsetDelete(OffsetDeleteRequest {
        group_id: GROUP.into(),
        partitions: parts
            .iter()
            .map(|p| TopicPartition::new(topic, *p))
            .collect(),
        committer,
    })
}

fn member(id: &str, generation: u32) -> Committer {
    Committer::Member {
        member_id: id.into(),
        generation,
        group_instance_id: None,
        sequence: u64::MAX / 2,
    }
}

/// Three members with commits on partitions 0 and 1, then everyone leaves.
fn emptied(h: &mut Harness) {
    let ids = three_members(h);
    assert_eq!(
        h.call(1, commit(&ids[0], 1, &[(0, 5), (1, 7)])),
        GroupResponse::OffsetCommit(Ok(()))
    );
    for (i, id) in ids.iter().enumerate() {
        h.call(i as u64 + 1, leave(id));
    }
    h.advance(MS);
    assert_eq!(h.view().state, GroupState::Empty);
}

#[test]
fn delete_group_refuses_unknown_and_non_empty_groups_and_survives_a_reload() {
    let mut h = Harness::new();
    assert_eq!(
        h.call(9, delete_group("nobody")),
        GroupResponse::DeleteGroup(Err(GroupError::GroupIdNotFound))
    );
    let ids = three_members(&mut h);
    h.call(1, commit(&ids[0], 1, &[(0, 5)]));
    assert_eq!(
        h.call(9, delete_group(GROUP)),
        GroupResponse::DeleteGroup(Err(GroupError::NonEmptyGroup))
    );
    for (i, id) in ids.iter().enumerate() {
        h.call(i as u64 + 1, leave(id));
    }
    h.advance(MS);
    assert_eq!(
        h.call(9, delete_group(GROUP)),
        GroupResponse::DeleteGroup(Ok(()))
    );
    assert_eq!(h.coord.group(GROUP), None, "gone");
    assert_eq!(offsets_of(h.call(1, fetch_all())), [].into());
    assert_eq!(
        h.call(9, delete_group(GROUP)),
        GroupResponse::DeleteGroup(Err(GroupError::GroupIdNotFound))
    );
    // The tombstones are the latest records: a reload finds nothing either.
    h.failover();
    assert_eq!(h.coord.group(GROUP), None);
    assert!(h.coord.list_groups().is_empty());
    // The id can be used afresh, from generation 1.
    let ids = three_members(&mut h);
    assert_eq!(h.view().generation, 1, "{ids:?}");
}

#[test]
fn offset_delete_refuses_subscribed_topics_while_members_remain() {
    let mut h = Harness::new();
    assert_eq!(
        h.call(9, offset_delete(None, &[0], "t")),
        GroupResponse::OffsetDelete(Err(GroupError::GroupIdNotFound))
    );
    let ids = three_members(&mut h);
    h.call(1, commit(&ids[0], 1, &[(0, 5), (1, 7)]));
    // The members subscribe to t: refused per partition; another topic goes through.
    assert_eq!(
        h.call(9, offset_delete(None, &[0, 1], "t")),
        GroupResponse::OffsetDelete(Ok(vec![tp(0), tp(1)]))
    );
    assert_eq!(
        h.call(9, offset_delete(None, &[0], "other")),
        GroupResponse::OffsetDelete(Ok(vec![]))
    );
    assert_eq!(offsets_of(h.call(1, fetch_all())).len(), 2);
    for (i, id) in ids.iter().enumerate() {
        h.call(i as u64 + 1, leave(id));
    }
    h.advance(MS);
    assert_eq!(
        h.call(9, offset_delete(None, &[0], "t")),
        GroupResponse::OffsetDelete(Ok(vec![]))
    );
    assert_eq!(offsets_of(h.call(1, fetch_all())), [(1, 7)].into());
    h.failover();
    assert_eq!(offsets_of(h.call(1, fetch_all())), [(1, 7)].into());
}

/// A Kafka client resets a position by committing -1: the commit is deleted, fenced as
/// the member's commits are.
#[test]
fn a_commit_of_no_position_deletes_the_commit_and_is_fenced() {
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    h.call(1, commit(&ids[0], 1, &[(0, 5), (1, 7)]));
    assert_eq!(
        h.call(1, offset_delete(Some(member(&ids[0], 0)), &[0], "t")),
        GroupResponse::OffsetCommit(Err(GroupError::IllegalGeneration))
    );
    assert_eq!(
        h.call(1, offset_delete(Some(member("nobody", 1)), &[0], "t")),
        GroupResponse::OffsetCommit(Err(GroupError::UnknownMemberId))
    );
    assert_eq!(
        h.call(9, offset_delete(Some(Committer::Admin), &[0], "t")),
        GroupResponse::OffsetCommit(Err(GroupError::NonEmptyGroup))
    );
    assert_eq!(offsets_of(h.call(1, fetch_all())).len(), 2);
    assert_eq!(
        h.call(1, offset_delete(Some(member(&ids[0], 1)), &[0], "t")),
        GroupResponse::OffsetCommit(Ok(()))
    );
    assert_eq!(offsets_of(h.call(1, fetch_all())), [(1, 7)].into());
    // A later commit of the partition stands again.
    h.call(1, commit(&ids[0], 1, &[(0, 9)]));
    assert_eq!(offsets_of(h.call(1, fetch_all())), [(0, 9), (1, 7)].into());
    h.failover();
    assert_eq!(offsets_of(h.call(1, fetch_all())), [(0, 9), (1, 7)].into());
}

#[test]
fn list_groups_names_each_group_with_its_state() {
    let mut h = Harness::new();
    emptied(&mut h);
    let l = h.coord.list_groups();
    assert_eq!(l.len(), 1);
    assert_eq!(
        (l[0].group_id.as_str(), l[0].state.as_str()),
        (GROUP, "Empty")
    );
    assert_eq!(l[0].protocol_type, CONSUMER_PROTOCOL_TYPE);
    // Offsets only (an admin commit to a group nobody joined): no protocol type.
    let admin = GroupRequest::OffsetCommit(OffsetCommitRequest {
        group_id: "offsets-only".into(),
        committer: Committer::Admin,
        offsets: [(tp(0), OffsetAndMetadata::new(3))].into(),
    });
    assert!(matches!(
        h.call(9, admin),
        GroupResponse::OffsetCommit(Ok(()))
    ));
    let l = h.coord.list_groups();
    assert_eq!(l.len(), 2, "{l:?}");
    assert!(l
        .iter()
        .any(|g| g.group_id == "offsets-only" && g.protocol_type.is_empty()));
}
