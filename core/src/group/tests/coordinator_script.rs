//! Scripted coordinator sequences with raw requests.

use super::harness::*;
use crate::group::records;
use crate::group::*;
use crate::log::RecordBatch;
use std::collections::BTreeMap;

#[test]
fn join_of_three_forms_one_generation() {
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    let v = h.view();
    assert_eq!(v.state, GroupState::Stable);
    assert_eq!(v.generation, 1);
    assert_eq!(v.members.len(), 3);
    assert!(ids.iter().all(|m| v.members.contains_key(m)));
    for m in &ids {
        assert_eq!(h.call(1, heartbeat(m, 1)), GroupResponse::Heartbeat(Ok(())));
    }
    // The generation's assignment is durable: the log's last group record says so.
    let last = h.log.last().unwrap().records.last().unwrap().clone();
    match records::decode_record(&last).unwrap() {
        Some(records::GroupRecord::Group { value: Some(g), .. }) => {
            assert_eq!(g.generation, 1);
            assert_eq!(
                g.members.iter().map(|m| m.assignment.len()).sum::<usize>(),
                6
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_and_stale_requests_are_refused() {
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    assert_eq!(
        h.call(1, heartbeat("nobody", 1)),
        GroupResponse::Heartbeat(Err(GroupError::UnknownMemberId))
    );
    assert_eq!(
        h.call(1, heartbeat(&ids[0], 7)),
        GroupResponse::Heartbeat(Err(GroupError::IllegalGeneration))
    );
    assert_eq!(
        h.call(1, join(Some("made-up"), None)),
        GroupResponse::JoinGroup(Err(GroupError::UnknownMemberId))
    );
    assert_eq!(
        h.call(1, sync(&ids[0], 0, BTreeMap::new())),
        GroupResponse::SyncGroup(Err(GroupError::IllegalGeneration))
    );
}

#[test]
fn member_leaving_rebalances_the_rest() {
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    assert_eq!(h.call(3, leave(&ids[2])), GroupResponse::LeaveGroup(Ok(())));
    assert_eq!(h.view().state, GroupState::PreparingRebalance);
    assert_eq!(
        h.call(1, heartbeat(&ids[0], 1)),
        GroupResponse::Heartbeat(Err(GroupError::RebalanceInProgress))
    );
    // Still generation 1 until the join completes: A may commit what it processed.
    assert_eq!(
        h.call(1, commit(&ids[0], 1, &[(0, 5)])),
        GroupResponse::OffsetCommit(Ok(()))
    );
    let ca = h.send(1, join(Some(&ids[0]), None));
    assert!(h.take(ca).is_none(), "waits for B");
    let cb = h.send(2, join(Some(&ids[1]), None));
    let (generation, assigned) = complete_round(&mut h, &[(1, ca), (2, cb)]);
    assert_eq!(generation, 2);
    assert_eq!(assigned.values().map(|v| v.len()).sum::<usize>(), 6);
    assert_eq!(h.view().members.len(), 2);
    assert_eq!(offsets_of(h.call(1, fetch_all())), [(0, 5)].into());
}

#[test]
fn silent_member_times_out() {
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    // A and B heartbeat every 3 s, C is silent.
    for _ in 0..3 {
        h.advance(3 * S);
        for m in &ids[..2] {
            assert_eq!(h.call(1, heartbeat(m, 1)), GroupResponse::Heartbeat(Ok(())));
        }
    }
    h.advance(1500 * MS); // 10.5 s after C's last sign of life
    assert_eq!(h.view().state, GroupState::PreparingRebalance);
    assert!(!h.view().members.contains_key(&ids[2]));
    assert_eq!(
        h.call(3, heartbeat(&ids[2], 1)),
        GroupResponse::Heartbeat(Err(GroupError::UnknownMemberId))
    );
    let ca = h.send(1, join(Some(&ids[0]), None));
    let cb = h.send(2, join(Some(&ids[1]), None));
    let (generation, _) = complete_round(&mut h, &[(1, ca), (2, cb)]);
    assert_eq!(generation, 2);
}

#[test]
fn zombie_cannot_commit() {
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    let (a, b, c) = (&ids[0], &ids[1], &ids[2]);
    assert_eq!(
        h.call(3, commit(c, 1, &[(4, 10)])),
        GroupResponse::OffsetCommit(Ok(()))
    );
    // C goes silent; its session expires; A and B form generation 2.
    h.advance(5 * S);
    h.call(1, heartbeat(a, 1));
    h.call(2, heartbeat(b, 1));
    h.advance(5 * S);
    let ca = h.send(1, join(Some(a), None));
    let cb = h.send(2, join(Some(b), None));
    let (generation, _) = complete_round(&mut h, &[(1, ca), (2, cb)]);
    assert_eq!(generation, 2);
    assert_eq!(
        h.call(1, commit(a, 2, &[(4, 12)])),
        GroupResponse::OffsetCommit(Ok(()))
    );
    let log_len = h.log_end();
    // The zombie wakes up and commits its stale, lower position: refused, nothing written.
    assert_eq!(
        h.call(3, commit(c, 1, &[(4, 11)])),
        GroupResponse::OffsetCommit(Err(GroupError::UnknownMemberId))
    );
    // A member of the old generation is refused too.
    assert_eq!(
        h.call(1, commit(a, 1, &[(4, 3)])),
        GroupResponse::OffsetCommit(Err(GroupError::IllegalGeneration))
    );
    // So is an operator while the group has members.
    let admin = GroupRequest::OffsetCommit(OffsetCommitRequest {
        group_id: GROUP.into(),
        committer: Committer::Admin,
        offsets: [(
            crate::types::TopicPartition::new("t", 4),
            OffsetAndMetadata::new(0),
        )]
        .into(),
    });
    assert_eq!(
        h.call(9, admin.clone()),
        GroupResponse::OffsetCommit(Err(GroupError::NonEmptyGroup))
    );
    assert_eq!(h.log_end(), log_len);
    assert_eq!(offsets_of(h.call(1, fetch_all()))[&4], 12);
    // Once everyone has left, the explicit reset is accepted.
    h.call(1, leave(a));
    h.call(2, leave(b));
    h.advance(MS);
    assert_eq!(h.view().state, GroupState::Empty);
    assert_eq!(h.call(9, admin), GroupResponse::OffsetCommit(Ok(())));
    assert_eq!(offsets_of(h.call(1, fetch_all()))[&4], 0);
}

#[test]
fn the_no_generation_fencing_bug_lets_the_zombie_overwrite() {
    // The bug zoo's `no-generation-fencing`: the same zombie as above is now believed.
    let mut h = Harness::with_config(GroupConfig {
        no_generation_fencing: true,
        ..config()
    });
    let ids = three_members(&mut h);
    let (a, b, c) = (&ids[0], &ids[1], &ids[2]);
    h.advance(5 * S);
    h.call(1, heartbeat(a, 1));
    h.call(2, heartbeat(b, 1));
    h.advance(5 * S);
    let ca = h.send(1, join(Some(a), None));
    let cb = h.send(2, join(Some(b), None));
    let (generation, _) = complete_round(&mut h, &[(1, ca), (2, cb)]);
    assert_eq!(generation, 2);
    assert_eq!(
        h.call(1, commit(a, 2, &[(4, 12)])),
        GroupResponse::OffsetCommit(Ok(()))
    );
    assert_eq!(
        h.call(3, commit(c, 1, &[(4, 11)])),
        GroupResponse::OffsetCommit(Ok(()))
    );
    assert_eq!(
        offsets_of(h.call(1, fetch_all()))[&4],
        11,
        "the committed offset went backwards"
    );
    assert_eq!(h.call(3, heartbeat(c, 1)), GroupResponse::Heartbeat(Ok(())));
}

#[test]
fn commit_is_acknowledged_only_once_durable() {
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    h.auto_ack = false;
    let c = h.send(1, commit(&ids[0], 1, &[(0, 7)]));
    assert!(
        h.take(c).is_none(),
        "no ack before the append is below the HW"
    );
    assert_eq!(
        h.call(2, fetch_all()),
        GroupResponse::OffsetFetch(Err(GroupError::UnstableOffsetCommit))
    );
    h.ack_all();
    assert_eq!(h.take(c), Some(GroupResponse::OffsetCommit(Ok(()))));
    // A failed append is not acknowledged and not visible.
    let c = h.send(1, commit(&ids[0], 1, &[(0, 9)]));
    h.fail_appends(AppendError::NotLeader);
    assert_eq!(
        h.take(c),
        Some(GroupResponse::OffsetCommit(Err(GroupError::NotCoordinator)))
    );
    assert_eq!(offsets_of(h.fetch(2)), [(0, 7)].into());
}

#[test]
fn offset_fetch_is_answered_only_once_its_read_barrier_is_durable() {
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    let c = h.send(1, commit(&ids[0], 1, &[(0, 7)]));
    assert_eq!(h.take(c), Some(GroupResponse::OffsetCommit(Ok(()))));
    h.auto_ack = false;
    // A deposed leader that does not know it yet: its barrier never commits, so it never
    // answers with what may be stale offsets.
    let f = h.send(2, fetch_all());
    assert!(
        h.take(f).is_none(),
        "no answer before the barrier is below the HW"
    );
    h.fail_appends(AppendError::Timeout);
    assert_eq!(
        h.take(f),
        Some(GroupResponse::OffsetFetch(Err(
            GroupError::CoordinatorNotAvailable
        )))
    );
    // The barrier leaves nothing for a load to find.
    let before = h.coord.group(GROUP).expect("group").offsets;
    let f = h.send(2, fetch_all());
    h.ack_all();
    assert_eq!(offsets_of(h.take(f).expect("answered")), [(0, 7)].into());
    h.failover();
    assert_eq!(h.coord.group(GROUP).expect("group").offsets, before);
}

#[test]
fn sync_waits_for_the_generation_to_be_durable_and_failure_rebalances() {
    let mut h = Harness::new();
    let (a, ca) = join_new(&mut h, 1);
    h.advance(3 * S);
    let j = join_ok(h.take(ca));
    h.auto_ack = false;
    let cs = h.send(1, sync(&a, j.generation, leader_assignment(&j)));
    assert!(h.take(cs).is_none());
    h.fail_appends(AppendError::Timeout);
    assert_eq!(
        h.take(cs),
        Some(GroupResponse::SyncGroup(Err(
            GroupError::CoordinatorNotAvailable
        )))
    );
    assert_eq!(h.view().state, GroupState::PreparingRebalance);
}

#[test]
fn leader_that_never_syncs_is_dropped() {
    let mut h = Harness::new();
    let (_a, ca) = join_new(&mut h, 1);
    let (b, cb) = join_new(&mut h, 2);
    h.advance(3 * S);
    let ja = join_ok(h.take(ca));
    let jb = join_ok(h.take(cb));
    let (leader, follower) = if ja.is_leader() { (ja, jb) } else { (jb, ja) };
    let fc = if follower.member_id == b { 2 } else { 1 };
    let cs = h.send(fc, sync(&follower.member_id, 1, BTreeMap::new()));
    h.advance(REBALANCE);
    assert_eq!(
        h.take(cs),
        Some(GroupResponse::SyncGroup(Err(
            GroupError::RebalanceInProgress
        )))
    );
    let v = h.view();
    assert!(!v.members.contains_key(&leader.member_id));
    assert!(v.members.contains_key(&follower.member_id));
}

#[test]
fn static_member_rejoins_without_rebalance() {
    let mut h = Harness::new();
    let j1 = h.send(1, join(None, Some("inst-a")));
    let (b, j2) = join_new(&mut h, 2);
    h.advance(3 * S);
    let (generation, before) = complete_round(&mut h, &[(1, j1), (2, j2)]);
    let old_a = h
        .view()
        .members
        .iter()
        .find(|(_, (i, _))| i.is_some())
        .map(|(m, _)| m.clone())
        .unwrap();
    // A restarts and rejoins with its instance id only.
    let r = h.call(1, join(None, Some("inst-a")));
    let GroupResponse::JoinGroup(Ok(j)) = r else {
        panic!("{r:?}")
    };
    assert_eq!(j.generation, generation);
    assert!(j.skip_assignment);
    assert_ne!(j.member_id, old_a);
    let v = h.view();
    assert_eq!((v.state, v.generation), (GroupState::Stable, generation));
    // Same partitions, no rebalance; B is undisturbed.
    assert_eq!(
        sync_ok(Some(
            h.call(1, sync(&j.member_id, generation, BTreeMap::new()))
        )),
        before[&old_a]
    );
    assert_eq!(
        h.call(2, heartbeat(&b, generation)),
        GroupResponse::Heartbeat(Ok(()))
    );
    // The previous incarnation is fenced.
    let hb = GroupRequest::Heartbeat(HeartbeatRequest {
        group_id: GROUP.into(),
        generation,
        member_id: old_a.clone(),
        group_instance_id: Some("inst-a".into()),
    });
    assert_eq!(
        h.call(3, hb),
        GroupResponse::Heartbeat(Err(GroupError::FencedInstanceId))
    );
}

#[test]
fn coordinator_fails_over_during_a_rebalance() {
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    let (a, b, c) = (&ids[0], &ids[1], &ids[2]);
    h.call(1, commit(a, 1, &[(0, 3), (1, 4)]));
    h.call(2, commit(b, 1, &[(2, 5), (3, 6)]));
    h.call(3, commit(c, 1, &[(4, 7), (5, 8)]));
    // A rebalance starts (C leaves) and A's join is parked when the coordinator moves.
    h.call(3, leave(c));
    let ca = h.send(1, join(Some(a), None));
    h.auto_ack = false;
    let pending = h.send(2, commit(b, 1, &[(2, 9)]));
    let stale_append = h.unacked.front().copied();
    h.coord.unload();
    h.pump();
    assert_eq!(
        h.take(ca),
        Some(GroupResponse::JoinGroup(Err(GroupError::NotCoordinator)))
    );
    assert_eq!(
        h.take(pending),
        Some(GroupResponse::OffsetCommit(Err(GroupError::NotCoordinator)))
    );
    assert_eq!(
        h.call(1, heartbeat(a, 1)),
        GroupResponse::Heartbeat(Err(GroupError::NotCoordinator))
    );
    // The new leader's log has the unacknowledged commit too (it was replicated in time).
    h.auto_ack = true;
    h.unacked.clear();
    h.node += 1;
    h.epoch += 1;
    h.coord = GroupCoordinator::new(h.node, 0, 1, config());
    h.coord.begin_load(h.epoch);
    assert_eq!(
        h.call(1, heartbeat(a, 1)),
        GroupResponse::Heartbeat(Err(GroupError::CoordinatorLoadInProgress))
    );
    let (first, rest) = h.log.split_at(1);
    h.coord.load_batches(first).unwrap();
    h.coord.load_batches(rest).unwrap();
    let summary = h.coord.complete_load(h.now);
    assert_eq!(summary.groups, 1);
    // A completion for the old instance's append means nothing here.
    if let Some((id, base)) = stale_append {
        h.coord.append_completed(h.now, id, Ok(base));
    }
    // Committed offsets intact; the group is back at generation 1 with its persisted members
    // (C's leave was never persisted, so C is evicted by its session or the join deadline).
    assert_eq!(
        offsets_of(h.call(1, fetch_all())),
        [(0, 3), (1, 4), (2, 9), (3, 6), (4, 7), (5, 8)].into()
    );
    let v = h.view();
    assert_eq!(
        (v.state, v.generation, v.members.len()),
        (GroupState::Stable, 1, 3)
    );
    assert_eq!(h.call(2, heartbeat(b, 1)), GroupResponse::Heartbeat(Ok(())));
    let ca = h.send(1, join(Some(a), None));
    let cb = h.send(2, join(Some(b), None));
    h.advance(REBALANCE);
    let (generation, assigned) = complete_round(&mut h, &[(1, ca), (2, cb)]);
    assert_eq!(generation, 2);
    assert_eq!(assigned.values().map(|v| v.len()).sum::<usize>(), 6);
    assert_eq!(
        h.call(3, commit(c, 1, &[(4, 0)])),
        GroupResponse::OffsetCommit(Err(GroupError::UnknownMemberId))
    );
    // Member ids minted by the new coordinator cannot collide with the old one's.
    let (d, _) = join_new(&mut h, 4);
    assert!(!ids.contains(&d));
}

#[test]
fn requests_for_other_partitions_and_unloaded_coordinators() {
    let mut c = GroupCoordinator::new(1, 0, 2, config());
    c.step(0, 1, 1, heartbeat("m", 1));
    let out = c.poll_outputs();
    assert!(matches!(
        &out[..],
        [CoordinatorOutput::Respond {
            response: GroupResponse::Heartbeat(Err(GroupError::NotCoordinator)),
            ..
        }]
    ));
    c.load(0, 1, &[]).unwrap();
    let elsewhere = (0..100)
        .map(|i| format!("g{i}"))
        .find(|g| coordinator_partition(g, 2) == 1)
        .unwrap();
    let req = GroupRequest::OffsetFetch(OffsetFetchRequest {
        group_id: elsewhere,
        partitions: None,
        require_stable: false,
    });
    c.step(0, 1, 2, req);
    let out = c.poll_outputs();
    assert!(matches!(
        &out[..],
        [CoordinatorOutput::Respond {
            response: GroupResponse::OffsetFetch(Err(GroupError::NotCoordinator)),
            ..
        }]
    ));
}

#[test]
fn corrupt_records_fail_the_load_with_their_offset() {
    let mut h = Harness::new();
    three_members(&mut h);
    let mut log = h.log.clone();
    let last = log.len() - 1;
    log[last].records[0].value = Some(vec![0, 1, 2]);
    let mut c = GroupCoordinator::new(2, 0, 1, config());
    let err = c.load(0, 2, &log).unwrap_err();
    assert_eq!(err.offset, log[last].base_offset);
    assert!(matches!(
        c.phase(),
        CoordinatorPhase::LoadFailed { epoch: 2, .. }
    ));
    c.step(0, 1, 1, heartbeat("m", 1));
    assert!(matches!(
        &c.poll_outputs()[..],
        [CoordinatorOutput::Respond {
            response: GroupResponse::Heartbeat(Err(GroupError::CoordinatorNotAvailable)),
            ..
        }]
    ));
    assert!(err.to_string().contains("__consumer_offsets-0"));
}

#[test]
fn compacted_log_loads_to_the_same_state() {
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    for i in 0..5 {
        h.call(1, commit(&ids[0], 1, &[(0, i), (1, 10 + i)]));
    }
    let full = h.view();
    let compacted: Vec<RecordBatch> =
        records::batches_from_records(records::latest_per_key(&h.log).unwrap());
    assert!(compacted.len() < h.log.len());
    let mut c = GroupCoordinator::new(2, 0, 1, config());
    c.load(h.now, 2, &compacted).unwrap();
    assert_eq!(c.group(GROUP).unwrap(), full);
}

#[test]
fn plain_failover_keeps_generation_members_and_offsets() {
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    h.call(1, commit(&ids[0], 1, &[(0, 11)]));
    let before = h.view();
    let summary = h.failover();
    assert_eq!((summary.groups, summary.offsets), (1, 1));
    assert_eq!(h.view(), before);
    // Live members carry on in their generation: no rebalance just because the coordinator moved.
    for m in &ids {
        assert_eq!(h.call(1, heartbeat(m, 1)), GroupResponse::Heartbeat(Ok(())));
    }
    // A member that does not come back is evicted by its session, from the load time.
    h.advance(SESSION - MS);
    for m in &ids[..2] {
        h.call(1, heartbeat(m, 1));
    }
    h.advance(2 * MS);
    assert_eq!(h.view().state, GroupState::PreparingRebalance);
    assert!(!h.view().members.contains_key(&ids[2]));
}

#[test]
fn refused_first_join_leaves_no_group() {
    let mut h = Harness::new();
    let mut bad = join(None, None);
    if let GroupRequest::JoinGroup(j) = &mut bad {
        j.session_timeout = 1;
    }
    assert_eq!(
        h.call(1, bad),
        GroupResponse::JoinGroup(Err(GroupError::InvalidSessionTimeout))
    );
    assert!(h.coord.group(GROUP).is_none());
    assert!(h.log.is_empty());
}

#[test]
fn a_commit_overtaken_by_a_newer_one_is_refused_also_after_failover() {
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    let with_seq = |seq: u64, offset: u64| {
        let mut r = commit(&ids[0], 1, &[(0, offset)]);
        if let GroupRequest::OffsetCommit(c) = &mut r {
            if let Committer::Member { sequence, .. } = &mut c.committer {
                *sequence = seq;
            }
        }
        r
    };
    assert_eq!(
        h.call(1, with_seq(10, 50)),
        GroupResponse::OffsetCommit(Ok(()))
    );
    // The network delivers an older commit of the same member late.
    assert_eq!(
        h.call(1, with_seq(9, 40)),
        GroupResponse::OffsetCommit(Err(GroupError::StaleCommit))
    );
    // A retry of the same commit is fine.
    assert_eq!(
        h.call(1, with_seq(10, 50)),
        GroupResponse::OffsetCommit(Ok(()))
    );
    h.failover();
    assert_eq!(
        h.call(1, with_seq(8, 30)),
        GroupResponse::OffsetCommit(Err(GroupError::StaleCommit))
    );
    assert_eq!(offsets_of(h.call(1, fetch_all())), [(0, 50)].into());
    assert_eq!(
        h.call(1, with_seq(11, 60)),
        GroupResponse::OffsetCommit(Ok(()))
    );
    // Another member's commits are ordered by generation fencing, not by A's sequence.
    assert_eq!(
        h.call(2, commit(&ids[1], 1, &[(0, 70)])),
        GroupResponse::OffsetCommit(Ok(()))
    );
}

#[test]
fn describe_group_reports_members_assignment_and_offsets() {
    let mut h = Harness::new();
    let describe = |g: &str| GroupRequest::DescribeGroup { group_id: g.into() };
    let d = match h.call(1, describe("nobody-here")) {
        GroupResponse::DescribeGroup(Ok(d)) => d,
        other => panic!("{other:?}"),
    };
    assert_eq!((d.state.as_str(), d.generation), ("Dead", 0));
    assert!(d.members.is_empty() && d.offsets.is_empty());

    let ids = three_members(&mut h);
    assert_eq!(
        h.call(1, commit(&ids[0], 1, &[(0, 5)])),
        GroupResponse::OffsetCommit(Ok(()))
    );
    let d = match h.call(9, describe(GROUP)) {
        GroupResponse::DescribeGroup(Ok(d)) => d,
        other => panic!("{other:?}"),
    };
    let v = h.view();
    assert_eq!(d.group_id, GROUP);
    assert_eq!(d.state, "Stable");
    assert_eq!(d.generation, 1);
    assert_eq!(d.leader, v.leader);
    assert_eq!(d.protocol, v.protocol);
    assert_eq!(d.members.len(), 3);
    for m in &d.members {
        assert_eq!(m.assignment, v.members[&m.member_id].1, "{}", m.member_id);
    }
    let assigned: usize = d.members.iter().map(|m| m.assignment.len()).sum();
    assert_eq!(assigned, 6);
    assert_eq!(d.offsets.len(), 1);
    assert_eq!(d.offsets.values().next().unwrap().offset, 5);
    // Describing changes nothing.
    assert_eq!(h.view(), v);
}

/// `changes` moves when what an observer reads (the phase, committed offsets) changes and
/// stands still for requests that change neither: the simulator's checks skip re-reading a
/// coordinator whose count stood still, so a change that did not move it would go unseen.
#[test]
fn changes_move_on_commit_and_phase_not_on_a_no_op() {
    let mut h = Harness::new();
    let ids = three_members(&mut h);
    let before = h.coord.changes();
    assert_eq!(
        h.call(1, heartbeat(&ids[0], 1)),
        GroupResponse::Heartbeat(Ok(()))
    );
    assert!(offsets_of(h.fetch(1)).is_empty());
    assert_eq!(
        h.call(1, commit(&ids[0], 7, &[(0, 5)])),
        GroupResponse::OffsetCommit(Err(GroupError::IllegalGeneration))
    );
    assert_eq!(h.coord.changes(), before, "no-ops moved the count");
    // A commit changes the offsets when its append completes, not before.
    h.auto_ack = false;
    let c = h.send(1, commit(&ids[0], 1, &[(0, 5)]));
    assert_eq!(h.coord.changes(), before);
    h.ack_all();
    assert_eq!(h.take(c), Some(GroupResponse::OffsetCommit(Ok(()))));
    let committed = h.coord.changes();
    assert!(committed > before, "a commit did not move the count");
    // A failed append materialises nothing.
    let c = h.send(1, commit(&ids[0], 1, &[(0, 9)]));
    h.fail_appends(AppendError::NotEnoughReplicas);
    assert!(matches!(
        h.take(c),
        Some(GroupResponse::OffsetCommit(Err(_)))
    ));
    assert_eq!(h.coord.changes(), committed);
    h.coord.unload();
    assert!(
        h.coord.changes() > committed,
        "unload did not move the count"
    );
}
