//! Scripted sequences with real consumers in the small world.

use super::harness::S;
use super::world::*;
use crate::client::*;
use crate::group::*;
use crate::types::TopicPartition;
use std::collections::BTreeSet;

fn tp(p: u32) -> TopicPartition {
    TopicPartition::new(TOPIC, p)
}

fn world_of(n: usize, assignor: AssignorKind, mode: AppMode) -> World {
    let mut w = World::new(6, 20);
    for _ in 0..n {
        let c = w.consumer_config(assignor, mode);
        w.add(c, mode);
    }
    w
}

fn assert_covering(w: &World, live: &[usize]) {
    let mut all = BTreeSet::new();
    for &i in live {
        assert_eq!(w.consumer(i).phase(), &MemberPhase::Stable, "consumer {i}");
        for t in w.consumer(i).assignment() {
            assert!(all.insert(t));
        }
    }
    assert_eq!(all, (0..6).map(tp).collect());
}

fn count(w: &World, i: usize, f: impl Fn(&ConsumerEvent) -> bool) -> usize {
    w.events.iter().filter(|(j, e)| *j == i && f(e)).count()
}

#[test]
fn three_consumers_share_the_topic_and_commit() {
    let mut w = world_of(3, AssignorKind::Range, AppMode::Auto);
    w.run(20 * S);
    assert_covering(&w, &[0, 1, 2]);
    let generation = w.consumer(0).generation();
    assert!((0..3).all(|i| w.consumer(i).generation() == generation));
    assert_eq!(
        w.stable_generation(),
        generation,
        "one generation thanks to the initial delay"
    );
    assert!(w.all_processed());
    assert!(
        w.committed().values().all(|o| *o == 20),
        "{:?}",
        w.committed()
    );
}

#[test]
fn a_closing_consumer_hands_over_cleanly() {
    let mut w = world_of(3, AssignorKind::RoundRobin, AppMode::CommitAfterProcess);
    w.run(5 * S);
    let had = w.consumer(2).assignment();
    assert!(!had.is_empty());
    w.close(2);
    assert_eq!(w.consumer(2).phase(), &MemberPhase::Closed);
    assert!(w.consumer(2).assignment().is_empty());
    assert_eq!(
        count(&w, 2, |e| matches!(
            e,
            ConsumerEvent::PartitionsRevoked { .. }
        )),
        1
    );
    w.run(10 * S);
    assert_covering(&w, &[0, 1]);
    assert_eq!(
        w.coord.group(super::harness::GROUP).unwrap().members.len(),
        2
    );
    assert!(w.all_processed());
    assert!(w.committed().values().all(|o| *o == 20));
}

#[test]
fn a_cut_off_consumer_stops_before_its_partitions_move_and_rejoins_later() {
    let mut w = world_of(3, AssignorKind::Range, AppMode::Auto);
    w.run(5 * S);
    let before = w.stable_generation().unwrap();
    w.cut(1, true);
    // `World::check` asserts after every step that no partition has two owners.
    w.run(15 * S);
    assert_eq!(
        count(&w, 1, |e| matches!(e, ConsumerEvent::PartitionsLost { .. })),
        1
    );
    assert!(w.consumer(1).assignment().is_empty());
    assert_covering(&w, &[0, 2]);
    assert!(w.stable_generation().unwrap() > before);
    w.cut(1, false);
    w.run(15 * S);
    assert_covering(&w, &[0, 1, 2]);
    assert!(w.all_processed());
}

#[test]
fn cooperative_rebalance_moves_only_what_it_must() {
    let mut w = world_of(2, AssignorKind::CooperativeSticky, AppMode::Auto);
    w.run(10 * S);
    assert_covering(&w, &[0, 1]);
    let kept: Vec<Vec<TopicPartition>> = (0..2).map(|i| w.consumer(i).assignment()).collect();
    w.events.clear();
    let c = w.consumer_config(AssignorKind::CooperativeSticky, AppMode::Auto);
    w.add(c, AppMode::Auto);
    w.run(15 * S);
    assert_covering(&w, &[0, 1, 2]);
    let newcomer: BTreeSet<TopicPartition> = w.consumer(2).assignment().into_iter().collect();
    assert_eq!(newcomer.len(), 2);
    let mut revoked = BTreeSet::new();
    for (i, e) in &w.events {
        match e {
            ConsumerEvent::PartitionsRevoked { partitions } => {
                revoked.extend(partitions.iter().cloned().map(|p| (*i, p)))
            }
            ConsumerEvent::PartitionsLost { .. } => panic!("consumer {i} lost partitions"),
            _ => {}
        }
    }
    // Exactly the newcomer's partitions were revoked, each by its previous owner, and
    // everything else kept working through the rebalance.
    let moved: BTreeSet<TopicPartition> = revoked.iter().map(|(_, p)| p.clone()).collect();
    assert_eq!(moved, newcomer);
    for (i, p) in &revoked {
        assert!(kept[*i].contains(p));
    }
    for (i, k) in kept.iter().enumerate() {
        for p in k {
            if !newcomer.contains(p) {
                assert!(w.consumer(i).assignment().contains(p));
            }
        }
    }
    assert!(w.all_processed());
}

#[test]
fn coordinator_failover_keeps_committed_offsets_and_the_group_recovers() {
    let mut w = world_of(3, AssignorKind::Range, AppMode::CommitAfterProcess);
    w.hw.values_mut().for_each(|h| *h = 200);
    w.run(3 * S);
    let committed = w.committed();
    assert!(!committed.is_empty());
    let before = w.stable_generation().unwrap();
    w.failover(0);
    // `World::check` compares against every acknowledged commit as the run goes on.
    for (t, o) in &committed {
        assert!(w.committed()[t] >= *o);
    }
    w.run(30 * S);
    assert!(w.stable_generation().unwrap() >= before);
    assert_covering(&w, &[0, 1, 2]);
    assert!(w.all_processed());
    assert!(w.committed().values().all(|o| *o == 200));
}

#[test]
fn reset_policy_and_seek() {
    let mut w = World::new(1, 10);
    let mut c = w.consumer_config(AssignorKind::Range, AppMode::CommitAfterProcess);
    c.reset = OffsetReset::Latest;
    w.add(c, AppMode::CommitAfterProcess);
    w.run(5 * S);
    // No committed offset, reset=latest: starts at the HW, processes nothing.
    assert_eq!(w.consumer(0).position(&tp(0)), Some(10));
    assert!(w.processed.is_empty());
    let now = w.now;
    assert!(w.consumers[0].as_mut().unwrap().seek(now, &tp(0), 4));
    w.run(2 * S);
    assert_eq!(w.processed[&tp(0)], (4..10).collect());
    // With reset=none a partition without offset is reported, not guessed.
    let mut w = World::new(1, 10);
    let mut c = w.consumer_config(AssignorKind::Range, AppMode::CommitAfterProcess);
    c.reset = OffsetReset::None;
    w.add(c, AppMode::CommitAfterProcess);
    w.run(5 * S);
    assert_eq!(
        count(&w, 0, |e| matches!(e, ConsumerEvent::NoOffset { .. })),
        1
    );
    assert_eq!(w.consumer(0).position(&tp(0)), None);
}

#[test]
fn commit_outside_a_stable_generation_is_refused_locally() {
    let mut w = World::new(2, 10);
    let c = w.consumer_config(AssignorKind::Range, AppMode::CommitAfterProcess);
    w.add(c, AppMode::CommitAfterProcess);
    let now = w.now;
    let id = w.consumers[0].as_mut().unwrap().commit_sync(now);
    let out = w.consumers[0].as_mut().unwrap().poll_outputs();
    assert!(
        out.contains(&ConsumerOutput::Event(ConsumerEvent::CommitCompleted {
            id,
            result: Err(CommitError::RebalanceInProgress)
        }))
    );
    w.run(5 * S);
    let now = w.now;
    let c = w.consumers[0].as_mut().unwrap();
    let id = c.commit_offsets(now, [(TopicPartition::new("other", 0), 1)].into(), true);
    assert!(c
        .poll_outputs()
        .contains(&ConsumerOutput::Event(ConsumerEvent::CommitCompleted {
            id,
            result: Err(CommitError::NotOwned(TopicPartition::new("other", 0)))
        })));
}

fn static_config(w: &World, instance: &str) -> ConsumerConfig {
    let mut c = w.consumer_config(AssignorKind::Range, AppMode::Auto);
    c.instance_id = Some(instance.into());
    c
}

#[test]
fn a_restarted_static_member_gets_its_partitions_back_without_a_rebalance() {
    let mut w = World::new(6, 20);
    for i in ["a", "b", "c"] {
        let c = static_config(&w, i);
        w.add(c, AppMode::Auto);
    }
    w.run(10 * S);
    assert_covering(&w, &[0, 1, 2]);
    let generation = w.stable_generation().unwrap();
    let had = w.consumer(1).assignment();
    // Crash b and start a new process with the same instance id well within the session.
    w.crash(1);
    w.run(2 * S);
    let c = static_config(&w, "b");
    let b2 = w.add(c, AppMode::Auto);
    w.run(5 * S);
    assert_eq!(w.stable_generation(), Some(generation), "no rebalance");
    assert_eq!(w.consumer(b2).assignment(), had);
    assert_covering(&w, &[0, 2, b2]);
    assert!(w.all_processed());
}

#[test]
fn a_replaced_static_zombie_is_fenced_and_stops() {
    let mut w = World::new(6, 20);
    for i in ["a", "b"] {
        let c = static_config(&w, i);
        w.add(c, AppMode::Auto);
    }
    w.run(10 * S);
    // The operator restarts b elsewhere while the old b is merely cut off: static membership
    // trusts the instance id, so for a moment both think they own b's partitions.
    w.check_ownership = false;
    w.cut(1, true);
    let c = static_config(&w, "b");
    let b2 = w.add(c, AppMode::Auto);
    w.run(2 * S);
    w.cut(1, false);
    w.run(8 * S);
    assert!(w
        .events
        .iter()
        .any(|(i, e)| *i == 1 && *e == ConsumerEvent::Fatal(GroupError::FencedInstanceId)));
    assert!(w.consumer(1).assignment().is_empty());
    w.check_ownership = true;
    w.run(5 * S);
    assert_covering(&w, &[0, b2]);
}

#[test]
fn unusable_configs_are_refused_by_name() {
    let mut c = ConsumerConfig::new("g");
    c.assignors.clear();
    assert_eq!(
        GroupConsumer::new(c).err(),
        Some(ConsumerConfigError::NoAssignors)
    );
    let mut c = ConsumerConfig::new("g");
    c.heartbeat_interval = c.session_timeout;
    assert_eq!(
        GroupConsumer::new(c).err(),
        Some(ConsumerConfigError::HeartbeatNotBelowSession)
    );
    assert_eq!(
        GroupConsumer::new(ConsumerConfig::new("")).err(),
        Some(ConsumerConfigError::EmptyGroupId)
    );
}

#[test]
fn next_timeout_alone_drives_membership_without_spurious_rebalances() {
    let mut w = World::new(6, 0);
    for _ in 0..3 {
        let c = w.consumer_config(AssignorKind::CooperativeSticky, AppMode::Auto);
        w.add(c, AppMode::Auto);
    }
    let wakeups = w.run_by_timeouts(10 * S);
    assert_covering(&w, &[0, 1, 2]);
    let generation = w.stable_generation().unwrap();
    // A minute of heartbeats on timer wake-ups only: the group stays put.
    let more = w.run_by_timeouts(60 * S);
    assert_eq!(w.stable_generation(), Some(generation));
    assert_covering(&w, &[0, 1, 2]);
    // Heartbeats every second per consumer, give or take fetch back-offs: bounded, not a spin.
    assert!(wakeups + more < 10_000, "{wakeups} + {more} wake-ups");
}

#[test]
fn added_partitions_are_picked_up_by_a_rebalance() {
    let mut w = World::new(4, 10);
    for _ in 0..2 {
        let c = w.consumer_config(AssignorKind::RoundRobin, AppMode::Auto);
        w.add(c, AppMode::Auto);
    }
    w.run(10 * S);
    let before = w.stable_generation().unwrap();
    for p in 4..6 {
        w.hw.insert(tp(p), 10);
    }
    w.run(10 * S);
    assert!(w.stable_generation().unwrap() > before);
    assert_covering(&w, &[0, 1]);
    assert!(w.all_processed());
}

/// One consumer driven by hand: every request it sends, answered by the test.
struct Driven {
    c: GroupConsumer,
    now: crate::types::Nanos,
}

impl Driven {
    fn sends(&mut self) -> Vec<(Destination, CorrelationId, ConsumerRequest)> {
        self.c
            .poll_outputs()
            .into_iter()
            .filter_map(|o| match o {
                ConsumerOutput::Send {
                    to,
                    correlation,
                    request,
                } => Some((to, correlation, request)),
                ConsumerOutput::Event(_) => None,
            })
            .collect()
    }

    /// Answers the one request `pick` selects among those sent, and returns it.
    fn answer(
        &mut self,
        pick: impl Fn(&ConsumerRequest) -> bool,
        resp: ConsumerResponse,
    ) -> (Destination, ConsumerRequest) {
        let (to, corr, req) = self
            .sends()
            .into_iter()
            .find(|(_, _, r)| pick(r))
            .expect("the consumer sent the request");
        self.now += 1_000;
        self.c.step(self.now, corr, resp);
        (to, req)
    }
}

/// A leader alone in its group, joined through coordinator node 2 and assigned partition 0
/// of topic "t" (committed offset 5); returns it with its first fetch not yet answered, and
/// where its metadata lookup went.
fn lone_leader() -> (Driven, Destination) {
    lone_leader_with(ConsumerConfig::new("g"))
}

/// [`lone_leader`] with the consumer configured by `cfg`.
fn lone_leader_with(cfg: ConsumerConfig) -> (Driven, Destination) {
    let mut d = Driven {
        c: GroupConsumer::new(cfg).unwrap(),
        now: 0,
    };
    d.c.subscribe(0, &["t"]);
    d.answer(
        |r| {
            matches!(
                r,
                ConsumerRequest::Group(GroupRequest::FindCoordinator { .. })
            )
        },
        ConsumerResponse::Group(GroupResponse::FindCoordinator(Ok(CoordinatorInfo {
            node: 2,
            partition: 0,
        }))),
    );
    let sub = Subscription {
        topics: vec!["t".into()],
        owned: vec![],
        generation: None,
    };
    d.answer(
        |r| matches!(r, ConsumerRequest::Group(GroupRequest::JoinGroup(_))),
        ConsumerResponse::Group(GroupResponse::JoinGroup(Ok(JoinGroupResponse {
            generation: 1,
            protocol: "range".into(),
            leader: "m".into(),
            member_id: "m".into(),
            members: vec![JoinedMember {
                member_id: "m".into(),
                group_instance_id: None,
                subscription: sub,
            }],
            skip_assignment: false,
        }))),
    );
    let (meta_to, _) = d.answer(
        |r| matches!(r, ConsumerRequest::Metadata { .. }),
        ConsumerResponse::Metadata {
            topics: [("t".to_string(), 1)].into(),
        },
    );
    let t0 = TopicPartition::new("t", 0);
    d.answer(
        |r| matches!(r, ConsumerRequest::Group(GroupRequest::SyncGroup(_))),
        ConsumerResponse::Group(GroupResponse::SyncGroup(Ok(MemberAssignment {
            partitions: vec![t0.clone()],
        }))),
    );
    d.answer(
        |r| matches!(r, ConsumerRequest::Group(GroupRequest::OffsetFetch(_))),
        ConsumerResponse::Group(GroupResponse::OffsetFetch(Ok([(
            t0,
            OffsetAndMetadata::new(5),
        )]
        .into()))),
    );
    (d, meta_to)
}

/// Seed 7177 of the default sweep: the leader asked a random broker for partition counts and
/// hit one that was alive but stalled three times in a row, each a request timeout and a new
/// generation, leaving the group without owners 3.42 s after the heal. It asks the
/// coordinator, which has just answered its join.
#[test]
fn the_leader_asks_its_coordinator_for_partition_counts() {
    let (d, meta_to) = lone_leader();
    assert_eq!(meta_to, Destination::Node(2));
    assert_eq!(d.c.phase(), &MemberPhase::Stable);
}

/// KIP-320 for group members: partition fetches go through core's `FetchCursor`, so they
/// carry the epoch last read and a truncation below the position is detected and reported,
/// with the position and buffer moved back, instead of skipped silently.
#[test]
fn a_group_member_detects_a_truncation_below_its_position() {
    use crate::client::Truncation;
    use crate::log::RecordBatch;
    use crate::message::{ConsumerFetchError, ConsumerRecords};
    let (mut d, _) = lone_leader();
    let t0 = TopicPartition::new("t", 0);
    let is_fetch = |r: &ConsumerRequest| matches!(r, ConsumerRequest::Fetch { .. });
    let batch = RecordBatch::from_values(0, (0..3u8).map(|i| vec![i]))
        .at(5)
        .in_epoch(1);
    let (_, first) = d.answer(
        is_fetch,
        ConsumerResponse::Fetch(Ok(ConsumerRecords {
            batches: vec![batch],
            high_watermark: 8,
            log_start_offset: 0,
            leader_epoch: 1,
            next_offset: 8,
            last_epoch: Some(1),
            last_stable_offset: 0,
            aborted: Vec::new(),
        })),
    );
    assert!(matches!(
        first,
        ConsumerRequest::Fetch {
            offset: 5,
            last_fetched_epoch: None,
            ..
        }
    ));
    let now = d.now;
    assert_eq!(d.c.poll(now).len(), 3);
    assert_eq!(d.c.position(&t0), Some(8));
    // An unclean election cut the log at 6: the leader's epoch 1 ends there.
    let (_, second) = d.answer(
        is_fetch,
        ConsumerResponse::Fetch(Err(ConsumerFetchError::DivergingEpoch {
            epoch: Some(1),
            end_offset: 6,
        })),
    );
    assert!(matches!(
        second,
        ConsumerRequest::Fetch {
            offset: 8,
            last_fetched_epoch: Some(1),
            ..
        }
    ));
    let events: Vec<ConsumerEvent> =
        d.c.poll_outputs()
            .into_iter()
            .filter_map(|o| match o {
                ConsumerOutput::Event(e) => Some(e),
                _ => None,
            })
            .collect();
    assert!(events.contains(&ConsumerEvent::Truncated {
        tp: t0.clone(),
        truncation: Truncation {
            from: 8,
            to: 6,
            epoch: Some(1)
        }
    }));
    assert_eq!(d.c.position(&t0), Some(6));
    assert_eq!(d.c.fetch_position(&t0), Some(6));
}

/// A read_committed member (a read-process-write application's input) fetches and lists
/// offsets at that isolation level, and drops the records of an aborted transaction the
/// answer lists; the default member still reads uncommitted.
#[test]
fn a_read_committed_member_fetches_committed_records_only() {
    use crate::log::{ProducerInfo, RecordBatch};
    use crate::message::ConsumerRecords;
    use crate::txn::{AbortedTxn, IsolationLevel};
    let is_fetch = |r: &ConsumerRequest| matches!(r, ConsumerRequest::Fetch { .. });
    let (mut plain, _) = lone_leader();
    let sent = plain.sends();
    assert!(sent.iter().any(|(_, _, r)| matches!(
        r,
        ConsumerRequest::Fetch {
            isolation: IsolationLevel::ReadUncommitted,
            ..
        }
    )));
    let mut cfg = ConsumerConfig::new("g");
    cfg.isolation = IsolationLevel::ReadCommitted;
    let (mut d, _) = lone_leader_with(cfg);
    let t0 = TopicPartition::new("t", 0);
    let txn = |pid: u64, base: u64, values: std::ops::Range<u8>| {
        RecordBatch::from_values(0, values.map(|i| vec![i]))
            .at(base)
            .in_epoch(1)
            .with_producer(Some(ProducerInfo {
                producer_id: pid,
                producer_epoch: 0,
                base_sequence: 0,
            }))
            .transactional()
    };
    // Offsets 5-6 of producer 7 (aborted), 7-8 of producer 9 (committed; markers left out).
    let (_, req) = d.answer(
        is_fetch,
        ConsumerResponse::Fetch(Ok(ConsumerRecords {
            batches: vec![txn(7, 5, 0..2), txn(9, 7, 2..4)],
            high_watermark: 9,
            log_start_offset: 0,
            leader_epoch: 1,
            next_offset: 9,
            last_epoch: Some(1),
            last_stable_offset: 9,
            aborted: vec![AbortedTxn {
                producer_id: 7,
                first_offset: 5,
                last_offset: 10,
            }],
        })),
    );
    assert!(matches!(
        req,
        ConsumerRequest::Fetch {
            offset: 5,
            isolation: IsolationLevel::ReadCommitted,
            ..
        }
    ));
    let now = d.now;
    let got: Vec<(u64, Option<Vec<u8>>)> =
        d.c.poll(now)
            .into_iter()
            .map(|r| (r.offset, r.value))
            .collect();
    assert_eq!(got, vec![(7, Some(vec![2])), (8, Some(vec![3]))]);
    assert_eq!(d.c.position(&t0), Some(9));
    // A reset lists the last stable offset, not the high watermark.
    assert!(d.c.seek_to(now, &t0, OffsetSpec::Latest));
    assert!(d.sends().iter().any(|(_, _, r)| matches!(
        r,
        ConsumerRequest::ListOffsets {
            isolation: IsolationLevel::ReadCommitted,
            ..
        }
    )));
}

/// After an aborted transaction, a read-process-write application rewinds to the group's
/// committed offsets: the member forgets its position, asks the coordinator again (stable
/// offsets only), and an answer to a lookup sent before the rewind does not move it.
#[test]
fn rewind_to_committed_looks_the_offsets_up_again() {
    let (mut d, _) = lone_leader();
    let t0 = TopicPartition::new("t", 0);
    assert_eq!(d.c.position(&t0), Some(5));
    assert!(d.c.seek(d.now, &t0, 9));
    let now = d.now;
    d.c.rewind_to_committed(now);
    assert_eq!(d.c.position(&t0), None);
    let fetches: Vec<_> = d
        .sends()
        .into_iter()
        .filter(|(_, _, r)| matches!(r, ConsumerRequest::Group(GroupRequest::OffsetFetch(_))))
        .collect();
    assert_eq!(fetches.len(), 1, "one lookup of the committed offsets");
    let (_, first, req) = fetches[0].clone();
    assert!(matches!(
        req,
        ConsumerRequest::Group(GroupRequest::OffsetFetch(OffsetFetchRequest {
            require_stable: true,
            ..
        }))
    ));
    // A second rewind before the answer: the first lookup's answer is stale.
    d.c.rewind_to_committed(now);
    let (_, second, _) = d
        .sends()
        .into_iter()
        .find(|(_, _, r)| matches!(r, ConsumerRequest::Group(GroupRequest::OffsetFetch(_))))
        .expect("a new lookup");
    let answer = |o: u64| {
        ConsumerResponse::Group(GroupResponse::OffsetFetch(Ok([(
            TopicPartition::new("t", 0),
            OffsetAndMetadata::new(o),
        )]
        .into())))
    };
    d.c.step(now + 1, first, answer(3));
    assert_eq!(d.c.position(&t0), None, "a stale answer is ignored");
    d.c.step(now + 2, second, answer(7));
    assert_eq!(d.c.position(&t0), Some(7));
}
