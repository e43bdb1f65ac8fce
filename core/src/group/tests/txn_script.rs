//! TxnOffsetCommit (KIP-447) at the coordinator: offsets pending until their transaction's
//! marker, settled in memory and on load, fenced by generation and producer epoch.

use super::harness::*;
use crate::group::*;
use crate::txn::TxnResult;
use crate::types::{Offset, TopicPartition};
use std::collections::BTreeMap;

fn txn_commit(
    member: Option<(&str, u32)>,
    producer_id: u64,
    producer_epoch: u16,
    offsets: &[(u32, Offset)],
) -> GroupRequest {
    GroupRequest::TxnOffsetCommit(TxnOffsetCommitRequest {
        group_id: GROUP.into(),
        transactional_id: format!("tx-{producer_id}"),
        producer_id,
        producer_epoch,
        generation: member.map(|(_, g)| g),
        member_id: member.map(|(m, _)| m.to_string()),
        group_instance_id: None,
        offsets: offsets
            .iter()
            .map(|(p, o)| (TopicPartition::new("t", *p), OffsetAndMetadata::new(*o)))
            .collect(),
    })
}

const OK: GroupResponse = GroupResponse::TxnOffsetCommit(Ok(()));

/// OffsetFetch without require_stable: committed offsets only.
fn committed(h: &mut Harness) -> BTreeMap<u32, Offset> {
    let c = h.send(
        9,
        GroupRequest::OffsetFetch(OffsetFetchRequest {
            group_id: GROUP.into(),
            partitions: None,
            require_stable: false,
        }),
    );
    h.ack_all();
    offsets_of(h.take(c).expect("answered"))
}

/// OffsetFetch with require_stable.
fn stable(h: &mut Harness) -> GroupResponse {
    h.fetch(9)
}

const UNSTABLE: GroupResponse = GroupResponse::OffsetFetch(Err(GroupError::UnstableOffsetCommit));

#[test]
fn transactional_offsets_are_pending_until_the_commit_marker() {
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    let before = h.log_end();
    assert_eq!(
        h.call(1, txn_commit(Some((&ids[0], 1)), 7, 0, &[(0, 5)])),
        OK
    );
    // Written as a transactional batch of the producer.
    let b = h.log.last().expect("written");
    assert_eq!(b.base_offset, before);
    assert!(b.is_transactional() && !b.is_control());
    let p = b.producer.expect("the producer's batch");
    assert_eq!((p.producer_id, p.producer_epoch), (7, 0));
    // Not visible, and unstable for a reader that asks.
    assert_eq!(committed(&mut h).get(&0), None);
    assert_eq!(stable(&mut h), UNSTABLE);
    let changes = h.coord.changes();
    h.marker(7, 1, TxnResult::Commit);
    assert!(h.coord.changes() > changes);
    assert_eq!(committed(&mut h)[&0], 5);
    assert_eq!(offsets_of(stable(&mut h))[&0], 5);
    // A marker of another producer changes nothing.
    let changes = h.coord.changes();
    h.marker(8, 0, TxnResult::Commit);
    assert_eq!(h.coord.changes(), changes);
}

#[test]
fn the_abort_marker_drops_transactional_offsets() {
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    assert_eq!(
        h.call(1, commit(&ids[0], 1, &[(0, 3)])),
        GroupResponse::OffsetCommit(Ok(()))
    );
    assert_eq!(
        h.call(1, txn_commit(Some((&ids[0], 1)), 7, 0, &[(0, 9)])),
        OK
    );
    assert_eq!(stable(&mut h), UNSTABLE);
    h.marker(7, 1, TxnResult::Abort);
    assert_eq!(offsets_of(stable(&mut h))[&0], 3, "the plain commit stands");
    assert!(h
        .coord
        .group_state(GROUP)
        .expect("group")
        .txn_offsets
        .is_empty());
}

#[test]
fn a_plain_commit_after_the_transactional_one_wins_at_the_marker() {
    // Kafka allows an OffsetCommit while transactional offsets are pending; the partition's
    // latest record in the log wins, in memory as on load.
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    assert_eq!(
        h.call(1, txn_commit(Some((&ids[0], 1)), 7, 0, &[(0, 9), (1, 4)])),
        OK
    );
    assert_eq!(
        h.call(1, commit(&ids[0], 1, &[(0, 6)])),
        GroupResponse::OffsetCommit(Ok(()))
    );
    h.marker(7, 1, TxnResult::Commit);
    let c = committed(&mut h);
    assert_eq!((c[&0], c[&1]), (6, 4));
    h.failover();
    let c = committed(&mut h);
    assert_eq!((c[&0], c[&1]), (6, 4));
}

#[test]
fn the_load_settles_transactional_offsets_by_the_markers_that_follow() {
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    let m = Some((ids[0].as_str(), 1));
    assert_eq!(h.call(1, txn_commit(m, 7, 0, &[(0, 10)])), OK);
    assert_eq!(h.call(1, txn_commit(m, 8, 0, &[(1, 20)])), OK);
    assert_eq!(h.call(1, txn_commit(m, 9, 0, &[(2, 30)])), OK);
    // Markers are written to the log only (the coordinator about to fail over never hears).
    for (pid, result) in [(7, TxnResult::Commit), (8, TxnResult::Abort)] {
        let base = h.log_end();
        let marker = crate::log::TxnMarker {
            producer_id: pid,
            producer_epoch: 1,
            result,
            coordinator_epoch: 1,
        };
        h.log
            .push(crate::log::RecordBatch::txn_marker(marker, 0).at(base));
    }
    let summary = h.failover();
    assert_eq!(summary.skipped_unknown, 0);
    let c = committed(&mut h);
    assert_eq!(c.get(&0), Some(&10), "commit marker: applied");
    assert_eq!(c.get(&1), None, "abort marker: dropped");
    assert_eq!(c.get(&2), None, "no marker yet: pending");
    assert_eq!(stable(&mut h), UNSTABLE);
    // The pending producer keeps its epoch: an older one is fenced.
    assert_eq!(
        h.call(1, txn_commit(None, 9, 0, &[])),
        OK,
        "the same epoch may commit more"
    );
    h.marker(9, 1, TxnResult::Commit);
    assert_eq!(committed(&mut h).get(&2), Some(&30));
    assert_eq!(offsets_of(stable(&mut h)).len(), 2);
}

#[test]
fn a_marker_before_the_offsets_append_completes_settles_it_on_completion() {
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    h.auto_ack = false;
    let c = h.send(1, txn_commit(Some((&ids[0], 1)), 7, 0, &[(0, 5)]));
    assert_eq!(h.take(c), None, "answered once durable");
    h.coord.complete_txn(7, TxnResult::Commit);
    h.pump();
    h.auto_ack = true;
    h.ack_all();
    assert_eq!(h.take(c), Some(OK));
    assert_eq!(committed(&mut h)[&0], 5);
    assert!(h
        .coord
        .group_state(GROUP)
        .expect("group")
        .txn_offsets
        .is_empty());
}

#[test]
fn txn_offset_commits_are_fenced_by_generation_member_and_epoch() {
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    let log_len = h.log_end();
    assert_eq!(
        h.call(1, txn_commit(Some((&ids[0], 0)), 7, 0, &[(0, 1)])),
        GroupResponse::TxnOffsetCommit(Err(GroupError::IllegalGeneration))
    );
    assert_eq!(
        h.call(1, txn_commit(Some(("nobody", 1)), 7, 0, &[(0, 1)])),
        GroupResponse::TxnOffsetCommit(Err(GroupError::UnknownMemberId))
    );
    assert_eq!(h.log_end(), log_len, "nothing written for a refused commit");
    // A producer outside the group (no member, no generation) is not checked.
    assert_eq!(h.call(1, txn_commit(None, 7, 1, &[(0, 1)])), OK);
    // A zombie instance of the producer (older epoch) is fenced.
    assert_eq!(
        h.call(1, txn_commit(None, 7, 0, &[(0, 2)])),
        GroupResponse::TxnOffsetCommit(Err(GroupError::InvalidProducerEpoch(
            "producer 7: epoch 0 is older than 1".into()
        )))
    );
    // Unlike an OffsetCommit, a rebalance in progress does not refuse it.
    let _ = join_new(&mut h, 4);
    assert_eq!(h.view().state, GroupState::PreparingRebalance);
    assert_eq!(
        h.call(1, txn_commit(Some((&ids[1], 1)), 8, 0, &[(1, 1)])),
        OK
    );
    // A member of a group that does not exist has no generation.
    let mut other = txn_commit(Some(("m", 1)), 7, 1, &[(0, 1)]);
    if let GroupRequest::TxnOffsetCommit(r) = &mut other {
        r.group_id = "nope".into();
    }
    assert_eq!(
        h.call(1, other),
        GroupResponse::TxnOffsetCommit(Err(GroupError::IllegalGeneration))
    );
}

#[test]
fn the_visible_early_bug_commits_transactional_offsets_at_once() {
    let mut h = Harness::with_config(GroupConfig {
        txn_offsets_visible_early: true,
        ..config()
    });
    let ids = three_members(&mut h);
    assert_eq!(
        h.call(1, txn_commit(Some((&ids[0], 1)), 7, 0, &[(0, 5)])),
        OK
    );
    // Visible before any marker, and an abort does not take it back.
    assert_eq!(offsets_of(stable(&mut h))[&0], 5);
    h.marker(7, 1, TxnResult::Abort);
    assert_eq!(committed(&mut h)[&0], 5);
    h.failover();
    assert_eq!(committed(&mut h)[&0], 5);
}

#[test]
fn a_txn_offsets_batch_refused_by_the_partition_is_answered_fenced_and_forgotten() {
    // The partition's producer state fences the batch (a newer epoch wrote there).
    let mut h = Harness::new();
    let _ = three_members(&mut h);
    h.auto_ack = false;
    let c = h.send(1, txn_commit(None, 7, 0, &[(0, 5)]));
    h.fail_appends(AppendError::InvalidProducerEpoch("epoch 0 < 1".into()));
    assert_eq!(
        h.take(c),
        Some(GroupResponse::TxnOffsetCommit(Err(
            GroupError::InvalidProducerEpoch("epoch 0 < 1".into())
        )))
    );
    h.auto_ack = true;
    assert!(h
        .coord
        .group_state(GROUP)
        .expect("group")
        .txn_offsets
        .is_empty());
    assert_eq!(
        offsets_of(stable(&mut h)).get(&0),
        None,
        "stable, nothing committed"
    );
}

#[test]
fn deleting_the_group_leaves_pending_transactional_offsets_to_their_marker() {
    // Memory and a reload agree: the transactional record precedes the tombstones, so the
    // commit marker still applies it either way.
    let mut h = Harness::new();
    assert_eq!(h.call(1, txn_commit(None, 7, 0, &[(0, 5)])), OK);
    assert_eq!(
        h.call(
            1,
            GroupRequest::DeleteGroup {
                group_id: GROUP.into()
            }
        ),
        GroupResponse::DeleteGroup(Ok(()))
    );
    assert_eq!(stable(&mut h), UNSTABLE);
    h.marker(7, 1, TxnResult::Commit);
    assert_eq!(committed(&mut h).get(&0), Some(&5));
    h.failover();
    assert_eq!(committed(&mut h).get(&0), Some(&5));
}
