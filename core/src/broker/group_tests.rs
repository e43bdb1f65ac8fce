//! Consumer groups over real brokers: coordinators hosted by the leaders of
//! `__consumer_offsets`, their records replicated like any other, the real controller
//! moving leadership. Same in-test router as `tests.rs`.

use super::tests::{broker_config, flip_bit_in_batch, World, MS};
use super::*;
use crate::group::*;
use crate::testing::Delivery as _;

const GROUP: &str = "orders";
const TOPIC_PARTITIONS: u32 = 6;
const SESSION: Nanos = 400 * MS;

fn config() -> BrokerConfig {
    BrokerConfig {
        offsets_topic_partitions: 2,
        offsets_topic_replication_factor: 3,
        offsets_topic_min_insync_replicas: 2,
        group_append_timeout: 500 * MS,
        group: GroupConfig {
            min_session_timeout: 10 * MS,
            initial_rebalance_delay: 20 * MS,
            ..GroupConfig::default()
        },
        ..broker_config()
    }
}

fn cluster() -> World {
    let mut w = World::new(&[1, 2, 3], config());
    w.run(100 * MS);
    w
}

/// One consumer's identity as the test drives it by hand.
#[derive(Clone, Debug)]
struct Member {
    client: u64,
    id: MemberId,
    generation: GenerationId,
    sequence: u64,
}

impl World {
    fn send_group(&mut self, client: u64, to: NodeId, request: GroupRequest) -> u64 {
        self.correlation += 1;
        let msg = Message::group(self.correlation, request);
        self.net
            .queue
            .push_back((Address::Client(client), Address::Node(to), msg));
        self.correlation
    }

    fn group_response(&self, correlation: u64) -> Option<GroupResponse> {
        self.inbox.iter().find_map(|(_, m)| match m {
            Message::GroupResponse {
                correlation: c,
                response,
            } if *c == correlation => Some((**response).clone()),
            _ => None,
        })
    }

    fn wait_group(&mut self, correlation: u64, limit: Nanos) -> GroupResponse {
        self.run_until(limit, |w| w.group_response(correlation).is_some());
        self.group_response(correlation)
            .unwrap_or_else(|| panic!("no answer to group request {correlation}"))
    }

    /// Ask brokers (round robin) until one names a coordinator.
    fn find_coordinator(&mut self) -> NodeId {
        for attempt in 0..200u64 {
            let ids: Vec<NodeId> = self.brokers.keys().copied().collect();
            let to = ids[attempt as usize % ids.len()];
            let c = self.send_group(
                9,
                to,
                GroupRequest::FindCoordinator {
                    group_id: GROUP.into(),
                },
            );
            match self.wait_group(c, 100 * MS) {
                GroupResponse::FindCoordinator(Ok(info)) => {
                    assert_eq!(info.partition, coordinator_partition(GROUP, 2));
                    return info.node;
                }
                GroupResponse::FindCoordinator(Err(GroupError::CoordinatorNotAvailable)) => {
                    self.run(10 * MS)
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        panic!("no coordinator found");
    }

    /// Send to the coordinator; retry while it is moving or loading.
    fn group_call(&mut self, client: u64, request: GroupRequest) -> GroupResponse {
        for _ in 0..100 {
            let to = self.find_coordinator();
            let c = self.send_group(client, to, request.clone());
            let resp = self.wait_group(c, 1500 * MS);
            match resp.error() {
                Some(e) if e.is_retriable() => self.run(10 * MS),
                _ => return resp,
            }
        }
        panic!("coordinator never answered {request:?}");
    }

    fn coordinator_view(&self, node: NodeId) -> Option<GroupView> {
        let p = coordinator_partition(GROUP, 2);
        self.brokers[&node]
            .group_coordinators()?
            .coordinator(p)?
            .group(GROUP)
    }

    /// Three (or `n`) consumers join, the leader assigns with `range`, everyone syncs.
    fn form_group(
        &mut self,
        clients: &[u64],
    ) -> (Vec<Member>, BTreeMap<MemberId, Vec<TopicPartition>>) {
        let coordinator = self.find_coordinator();
        // First join without id: MemberIdRequired (KIP-394).
        let mut ids = BTreeMap::new();
        for &client in clients {
            match self.group_call(client, join(None)) {
                GroupResponse::JoinGroup(Err(GroupError::MemberIdRequired(id))) => {
                    ids.insert(client, id);
                }
                other => panic!("first join: {other:?}"),
            }
        }
        // Rejoin with the ids, all at once: the join phase completes with all three.
        let pending: Vec<(u64, u64)> = clients
            .iter()
            .map(|&c| {
                (
                    c,
                    self.send_group(c, coordinator, join(Some(ids[&c].clone()))),
                )
            })
            .collect();
        let mut joined = Vec::new();
        for (client, corr) in pending {
            match self.wait_group(corr, 1000 * MS) {
                GroupResponse::JoinGroup(Ok(r)) => joined.push((client, r)),
                other => panic!("join: {other:?}"),
            }
        }
        let generation = joined[0].1.generation;
        assert!(joined.iter().all(|(_, r)| r.generation == generation));
        let leaders: Vec<_> = joined.iter().filter(|(_, r)| r.is_leader()).collect();
        assert_eq!(leaders.len(), 1, "exactly one leader");
        let leader = leaders[0].1.clone();
        assert_eq!(leader.members.len(), clients.len());
        assert_eq!(leader.protocol, "range");
        let members: BTreeMap<MemberId, AssignorMember> = leader
            .members
            .iter()
            .map(|m| (m.member_id.clone(), AssignorMember::from(&m.subscription)))
            .collect();
        let topics = BTreeMap::from([("t".to_string(), TOPIC_PARTITIONS)]);
        let assignments: BTreeMap<MemberId, MemberAssignment> = range(&members, &topics)
            .into_iter()
            .map(|(m, ps)| {
                let partitions = ps.into_iter().collect();
                (m, MemberAssignment { partitions })
            })
            .collect();
        // Followers sync first (parked until the leader's assignment is durable).
        let mut syncs = Vec::new();
        for (client, r) in &joined {
            let a = if r.is_leader() {
                assignments.clone()
            } else {
                BTreeMap::new()
            };
            let req = GroupRequest::SyncGroup(SyncGroupRequest {
                group_id: GROUP.into(),
                generation,
                member_id: r.member_id.clone(),
                group_instance_id: None,
                assignments: a,
            });
            syncs.push((
                *client,
                r.member_id.clone(),
                self.send_group(*client, coordinator, req),
            ));
        }
        let mut got = BTreeMap::new();
        let mut out = Vec::new();
        for (client, id, corr) in syncs {
            match self.wait_group(corr, 1000 * MS) {
                GroupResponse::SyncGroup(Ok(a)) => {
                    got.insert(id.clone(), a.partitions);
                }
                other => panic!("sync: {other:?}"),
            }
            out.push(Member {
                client,
                id,
                generation,
                sequence: 0,
            });
        }
        (out, got)
    }

    fn commit(&mut self, m: &mut Member, offset: Offset) -> GroupResponse {
        m.sequence += 1;
        self.group_call(m.client, commit_request(m, offset))
    }

    fn fetch_offsets(&mut self) -> BTreeMap<TopicPartition, OffsetAndMetadata> {
        let req = GroupRequest::OffsetFetch(OffsetFetchRequest {
            group_id: GROUP.into(),
            partitions: None,
            require_stable: true,
        });
        match self.group_call(9, req) {
            GroupResponse::OffsetFetch(Ok(o)) => o,
            other => panic!("offset fetch: {other:?}"),
        }
    }

    fn heartbeat(&mut self, m: &Member) -> GroupResponse {
        let req = GroupRequest::Heartbeat(HeartbeatRequest {
            group_id: GROUP.into(),
            generation: m.generation,
            member_id: m.id.clone(),
            group_instance_id: None,
        });
        self.group_call(m.client, req)
    }

    /// Leader of the group's `__consumer_offsets` partition, by its own view.
    fn offsets_leader(&self) -> Option<NodeId> {
        let tp = TopicPartition::new(CONSUMER_OFFSETS_TOPIC, coordinator_partition(GROUP, 2));
        self.brokers
            .iter()
            .filter_map(|(&id, b)| b.replica_view(&tp).map(|v| (id, v)))
            .filter(|(_, v)| v.role == ReplicaRole::Leader)
            .max_by_key(|(_, v)| v.leader_epoch)
            .map(|(id, _)| id)
    }
}

fn join(member_id: Option<MemberId>) -> GroupRequest {
    GroupRequest::JoinGroup(JoinGroupRequest {
        group_id: GROUP.into(),
        member_id,
        group_instance_id: None,
        session_timeout: SESSION,
        rebalance_timeout: SESSION,
        protocol_type: CONSUMER_PROTOCOL_TYPE.into(),
        protocols: vec![ProtocolMetadata {
            name: "range".into(),
            subscription: Subscription {
                topics: vec!["t".into()],
                ..Subscription::default()
            },
        }],
    })
}

fn commit_request(m: &Member, offset: Offset) -> GroupRequest {
    GroupRequest::OffsetCommit(OffsetCommitRequest {
        group_id: GROUP.into(),
        committer: Committer::Member {
            member_id: m.id.clone(),
            generation: m.generation,
            group_instance_id: None,
            sequence: m.sequence,
        },
        offsets: BTreeMap::from([(TopicPartition::new("t", 0), OffsetAndMetadata::new(offset))]),
    })
}

#[test]
fn three_consumers_join_through_brokers_and_get_a_full_assignment() {
    let mut w = cluster();
    let c = w.send_group(
        9,
        1,
        GroupRequest::FindCoordinator {
            group_id: String::new(),
        },
    );
    assert_eq!(
        w.wait_group(c, 10 * MS),
        GroupResponse::FindCoordinator(Err(GroupError::InvalidGroupId))
    );
    assert!(
        w.brokers[&1].group_coordinators().is_none(),
        "nothing created yet"
    );
    // The first FindCoordinator created __consumer_offsets through the controller.
    let coordinator = w.find_coordinator();
    let md = w.brokers[&1].metadata_image();
    let topic = md.topic(CONSUMER_OFFSETS_TOPIC).expect("created");
    assert_eq!(topic.config.partitions, 2);
    assert_eq!(topic.config.replication_factor, 3);
    assert_eq!(Some(coordinator), w.offsets_leader());
    let (members, assigned) = w.form_group(&[11, 12, 13]);
    assert_eq!(members.len(), 3);
    let mut all: Vec<TopicPartition> = assigned.values().flatten().cloned().collect();
    all.sort();
    let expected: Vec<TopicPartition> = (0..TOPIC_PARTITIONS)
        .map(|p| TopicPartition::new("t", p))
        .collect();
    assert_eq!(all, expected, "every partition exactly once");
    assert!(assigned.values().all(|ps| ps.len() == 2), "{assigned:?}");
    // The coordinator's own view agrees, and the group metadata record is replicated.
    let view = w.coordinator_view(coordinator).expect("group hosted");
    assert_eq!(view.state, GroupState::Stable);
    assert_eq!(view.members.len(), 3);
    for m in &members {
        assert_eq!(w.heartbeat(m), GroupResponse::Heartbeat(Ok(())));
    }
    // A non-coordinator broker refuses group requests with NotCoordinator.
    let other = [1, 2, 3].into_iter().find(|&n| n != coordinator).unwrap();
    let c = w.send_group(11, other, commit_request(&members[0], 1));
    assert_eq!(
        w.wait_group(c, 100 * MS),
        GroupResponse::OffsetCommit(Err(GroupError::NotCoordinator))
    );
    // Clients may not write the internal topic.
    w.correlation += 1;
    let req = ProduceRequest {
        correlation: w.correlation,
        tp: TopicPartition::new(CONSUMER_OFFSETS_TOPIC, 0),
        acks: Acks::All,
        timeout: 100 * MS,
        batch: crate::log::EncodedBatch::encode(&super::tests::batch("x")).unwrap(),
        transactional_id: None,
    };
    let corr = w.correlation;
    w.net
        .queue
        .push_back((Address::Client(1), Address::Node(coordinator), req.into()));
    w.deliver_all();
    assert!(matches!(
        w.produce_response(corr),
        Some(Err(ProduceError::InvalidRecord(_)))
    ));
}

#[test]
fn commits_are_acknowledged_after_replication_and_survive_coordinator_failover() {
    let mut w = cluster();
    let (mut members, _) = w.form_group(&[11, 12, 13]);
    let coordinator = w.find_coordinator();
    // Cut the followers off the coordinator: the commit is appended but not acknowledged.
    let node = Address::Node;
    w.net.isolate(node(coordinator), [1, 2, 3].map(node));
    members[0].sequence += 1;
    let c = w.send_group(11, coordinator, commit_request(&members[0], 42));
    w.run(50 * MS);
    assert_eq!(w.group_response(c), None, "acknowledged before replication");
    w.net.cut.clear();
    assert_eq!(
        w.wait_group(c, 1000 * MS),
        GroupResponse::OffsetCommit(Ok(()))
    );
    // Acknowledged means below the HW: every ISR replica has it.
    let tp = TopicPartition::new(CONSUMER_OFFSETS_TOPIC, coordinator_partition(GROUP, 2));
    let leader_view = w.brokers[&coordinator].replica_view(&tp).unwrap();
    assert_eq!(leader_view.isr.len(), 3, "{leader_view:?}");
    // A second commit from another member goes straight through.
    assert_eq!(
        w.commit(&mut members[1], 7),
        GroupResponse::OffsetCommit(Ok(()))
    );
    let before = w.fetch_offsets();
    assert_eq!(before[&TopicPartition::new("t", 0)].offset, 7);

    // Fail the coordinator's partition leader over.
    w.crash(coordinator);
    assert!(w.run_until(2000 * MS, |w| w
        .offsets_leader()
        .is_some_and(|l| l != coordinator)));
    let new = w.find_coordinator();
    assert_ne!(new, coordinator);
    // The new coordinator loaded the commits (and the group) from its log.
    assert_eq!(w.fetch_offsets(), before);
    let view = w.coordinator_view(new).expect("group loaded");
    assert_eq!(view.generation, members[0].generation);
    assert_eq!(view.members.len(), 3);
    // Members of the current generation keep committing against the new coordinator.
    assert_eq!(w.heartbeat(&members[2]), GroupResponse::Heartbeat(Ok(())));
    assert_eq!(
        w.commit(&mut members[2], 99),
        GroupResponse::OffsetCommit(Ok(()))
    );
    assert_eq!(w.fetch_offsets()[&TopicPartition::new("t", 0)].offset, 99);
}

#[test]
fn a_new_coordinator_whose_offsets_log_is_damaged_is_repaired_from_a_peer() {
    let mut w = cluster();
    let (mut members, _) = w.form_group(&[11, 12, 13]);
    for (i, offset) in [7, 8].into_iter().enumerate() {
        assert_eq!(
            w.commit(&mut members[i], offset),
            GroupResponse::OffsetCommit(Ok(()))
        );
    }
    w.run(100 * MS);
    let before = w.fetch_offsets();
    let coordinator = w.find_coordinator();
    let tp = TopicPartition::new(CONSUMER_OFFSETS_TOPIC, coordinator_partition(GROUP, 2));
    let view = w.brokers[&coordinator].replica_view(&tp).unwrap();
    let follower = *view
        .replicas
        .iter()
        .find(|&&n| n != coordinator)
        .expect("a second replica");
    let last = w
        .brokers
        .get_mut(&coordinator)
        .unwrap()
        .read_records(&tp, view.log_start_offset, view.log_end_offset)
        .expect("read")
        .pop()
        .expect("a batch");
    // The coordinator goes down and the follower's copy of the last commit is damaged:
    // taking over, the follower meets the damage when it reads its log through (rebuilding
    // producer state, or loading the groups).
    w.crash(coordinator);
    flip_bit_in_batch(
        &w,
        follower,
        &format!("{}-{}.", tp.topic, tp.partition),
        last.base_offset,
    );
    let failed_load = |w: &mut World| {
        w.events.iter().any(|(n, e)| {
            *n == follower
                && matches!(e, BrokerEvent::Replica(crate::replica::Event::LogFailed { tp: t, .. })
                    if *t == tp)
        })
    };
    assert!(
        w.run_until(3000 * MS, failed_load),
        "the follower did not meet its damage taking over"
    );
    // Offline, not retried forever; once the old coordinator is back, its copy refills the
    // damaged batch, and the commits are all there.
    w.start(coordinator);
    let repaired = w.run_until(3000 * MS, |w| {
        w.events.iter().any(|(n, e)| {
            *n == follower
                && matches!(e, BrokerEvent::Replica(crate::replica::Event::BatchRepaired { tp: t, .. }) if *t == tp)
        })
    });
    assert!(
        repaired,
        "the damaged offsets batch was not refilled from a peer"
    );
    assert_eq!(w.fetch_offsets(), before);
}

#[test]
fn zombie_commit_from_an_old_generation_is_refused_after_failover() {
    let mut w = cluster();
    let (members, _) = w.form_group(&[11, 12]);
    let zombie = members.iter().find(|m| m.client == 11).unwrap().clone();
    let mut live = members.iter().find(|m| m.client == 12).unwrap().clone();
    let old_generation = live.generation;
    // The zombie goes silent; the live member keeps heartbeating until it is told to
    // rejoin (the zombie's session expired), then forms a generation alone.
    let mut rejoin = false;
    for _ in 0..40 {
        w.run(50 * MS);
        match w.heartbeat(&live) {
            GroupResponse::Heartbeat(Ok(())) => {}
            GroupResponse::Heartbeat(Err(GroupError::RebalanceInProgress)) => {
                rejoin = true;
                break;
            }
            other => panic!("heartbeat: {other:?}"),
        }
    }
    assert!(rejoin, "the zombie's session never expired");
    let joined = match w.group_call(live.client, join(Some(live.id.clone()))) {
        GroupResponse::JoinGroup(Ok(r)) => r,
        other => panic!("rejoin: {other:?}"),
    };
    assert!(joined.generation > old_generation);
    assert!(joined.is_leader());
    assert_eq!(joined.members.len(), 1, "the zombie was evicted");
    live.generation = joined.generation;
    let assignments = BTreeMap::from([(
        live.id.clone(),
        MemberAssignment {
            partitions: (0..TOPIC_PARTITIONS)
                .map(|p| TopicPartition::new("t", p))
                .collect(),
        },
    )]);
    let sync = GroupRequest::SyncGroup(SyncGroupRequest {
        group_id: GROUP.into(),
        generation: live.generation,
        member_id: live.id.clone(),
        group_instance_id: None,
        assignments,
    });
    assert!(matches!(
        w.group_call(live.client, sync),
        GroupResponse::SyncGroup(Ok(_))
    ));
    assert_eq!(w.commit(&mut live, 10), GroupResponse::OffsetCommit(Ok(())));

    // Coordinator failover.
    let coordinator = w.find_coordinator();
    w.crash(coordinator);
    assert!(w.run_until(2000 * MS, |w| w
        .offsets_leader()
        .is_some_and(|l| l != coordinator)));
    // The zombie wakes up and commits with its old generation: refused by the new
    // coordinator, which rebuilt the current generation from the log.
    let mut zombie = zombie;
    match w.commit(&mut zombie, 1) {
        GroupResponse::OffsetCommit(Err(
            GroupError::UnknownMemberId | GroupError::IllegalGeneration,
        )) => {}
        other => panic!("zombie commit: {other:?}"),
    }
    assert_ne!(w.find_coordinator(), coordinator);
    assert_eq!(w.fetch_offsets()[&TopicPartition::new("t", 0)].offset, 10);
    assert_eq!(w.heartbeat(&live), GroupResponse::Heartbeat(Ok(())));
}

#[test]
fn the_no_generation_fencing_bug_reaches_the_hosted_coordinators() {
    // The bug zoo flag travels from BrokerConfig::bugs into every hosted coordinator: a
    // commit from a member id the group never had, at a generation it never had, is written.
    let mut config = config();
    config.bugs.no_generation_fencing = true;
    let mut w = World::new(&[1, 2, 3], config);
    w.run(100 * MS);
    let (members, _) = w.form_group(&[11, 12]);
    let mut live = members[0].clone();
    assert_eq!(w.commit(&mut live, 10), GroupResponse::OffsetCommit(Ok(())));
    let mut stranger = Member {
        client: 13,
        id: "nobody".into(),
        generation: live.generation + 7,
        sequence: 0,
    };
    assert_eq!(
        w.commit(&mut stranger, 3),
        GroupResponse::OffsetCommit(Ok(()))
    );
    assert_eq!(w.fetch_offsets()[&TopicPartition::new("t", 0)].offset, 3);
    // Without the flag the same commit is refused (the normal path).
    let mut w = cluster();
    w.form_group(&[11, 12]);
    assert_eq!(
        w.commit(&mut stranger, 3),
        GroupResponse::OffsetCommit(Err(GroupError::UnknownMemberId))
    );
}

#[test]
fn new_coordinator_loads_only_once_its_hw_reaches_its_log_end() {
    let mut w = cluster();
    let (mut members, _) = w.form_group(&[11]);
    assert_eq!(
        w.commit(&mut members[0], 5),
        GroupResponse::OffsetCommit(Ok(()))
    );
    let coordinator = w.find_coordinator();
    let others: Vec<NodeId> = [1, 2, 3]
        .into_iter()
        .filter(|&n| n != coordinator)
        .collect();
    // Whichever survivor is elected cannot replicate its epoch marker to the other one.
    w.net
        .isolate(Address::Node(others[0]), [Address::Node(others[1])]);
    w.crash(coordinator);
    assert!(w.run_until(2000 * MS, |w| w
        .offsets_leader()
        .is_some_and(|l| l != coordinator)));
    let new = w.offsets_leader().unwrap();
    let tp = TopicPartition::new(CONSUMER_OFFSETS_TOPIC, coordinator_partition(GROUP, 2));
    let v = w.brokers[&new].replica_view(&tp).unwrap();
    assert!(v.high_watermark < v.log_end_offset, "{v:?}");
    let p = coordinator_partition(GROUP, 2);
    let phase = w.brokers[&new]
        .group_coordinators()
        .and_then(|c| c.coordinator(p))
        .map(|c| c.phase().clone());
    assert!(
        matches!(phase, Some(CoordinatorPhase::Loading { epoch }) if epoch == v.leader_epoch),
        "{phase:?}"
    );
    let fetch = GroupRequest::OffsetFetch(OffsetFetchRequest {
        group_id: GROUP.into(),
        partitions: None,
        require_stable: false,
    });
    let c = w.send_group(9, new, fetch.clone());
    assert_eq!(
        w.wait_group(c, 10 * MS),
        GroupResponse::OffsetFetch(Err(GroupError::CoordinatorLoadInProgress))
    );
    // Once the lagging follower leaves the ISR, the ISR (the new leader alone) is below
    // min.insync.replicas, so the HW stays put (KIP-966's strict min ISR): no load yet.
    assert!(!w.run_until(1000 * MS, |w| {
        let v = w.brokers[&new].replica_view(&tp).unwrap();
        v.high_watermark >= v.log_end_offset
    }));
    // The link heals: the follower catches up and rejoins, the HW reaches the marker and
    // the coordinator loads.
    w.net
        .cut
        .remove(&(Address::Node(others[0]), Address::Node(others[1])));
    w.net
        .cut
        .remove(&(Address::Node(others[1]), Address::Node(others[0])));
    assert!(w.run_until(3000 * MS, |w| {
        let v = w.brokers[&new].replica_view(&tp).unwrap();
        v.high_watermark >= v.log_end_offset
    }));
    w.run(5 * MS);
    let view = w.coordinator_view(new).expect("loaded");
    assert_eq!(view.offsets[&TopicPartition::new("t", 0)].offset, 5);
    // Once the ISR is back above min.insync it answers reads too.
    w.net.cut.clear();
    assert!(w.run_until(3000 * MS, |w| w.brokers[&new]
        .replica_view(&tp)
        .is_some_and(|v| v.isr.len() >= 2)));
    let c = w.send_group(9, new, fetch);
    match w.wait_group(c, 100 * MS) {
        GroupResponse::OffsetFetch(Ok(o)) => {
            assert_eq!(o[&TopicPartition::new("t", 0)].offset, 5)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn commit_fails_typed_when_the_offsets_partition_is_below_min_insync() {
    let mut w = cluster();
    let (mut members, _) = w.form_group(&[11]);
    let coordinator = w.find_coordinator();
    for f in [1, 2, 3] {
        if f != coordinator {
            w.crash(f);
        }
    }
    let tp = TopicPartition::new(CONSUMER_OFFSETS_TOPIC, coordinator_partition(GROUP, 2));
    // The leader shrinks the ISR to itself (the controller cannot elect anyone else).
    assert!(w.run_until(1000 * MS, |w| w.brokers[&coordinator]
        .replica_view(&tp)
        .is_some_and(|v| v.isr == vec![coordinator])));
    members[0].sequence += 1;
    let c = w.send_group(11, coordinator, commit_request(&members[0], 3));
    assert_eq!(
        w.wait_group(c, 600 * MS),
        GroupResponse::OffsetCommit(Err(GroupError::CoordinatorNotAvailable))
    );
    // Nothing was committed.
    let view = w.coordinator_view(coordinator).expect("group loaded");
    assert_eq!(view.offsets, BTreeMap::new());
    // Reads need the ISR too (their barrier is an acks=all append): refused, typed.
    let c = w.send_group(9, coordinator, fetch_request());
    assert_eq!(
        w.wait_group(c, 10 * MS),
        GroupResponse::OffsetFetch(Err(GroupError::CoordinatorNotAvailable))
    );
}

fn fetch_request() -> GroupRequest {
    GroupRequest::OffsetFetch(OffsetFetchRequest {
        group_id: GROUP.into(),
        partitions: None,
        require_stable: false,
    })
}

#[test]
fn cut_off_coordinator_cannot_acknowledge_and_resigns_when_it_learns_it_was_deposed() {
    let mut w = cluster();
    let (mut members, _) = w.form_group(&[11]);
    assert_eq!(
        w.commit(&mut members[0], 5),
        GroupResponse::OffsetCommit(Ok(()))
    );
    let old = w.find_coordinator();
    w.isolate(Address::Node(old));
    members[0].sequence += 1;
    let c = w.send_group(11, old, commit_request(&members[0], 6));
    // Its append cannot reach the ISR: the commit is not acknowledged, and it stays pending
    // (the log, not the produce timeout, decides its fate).
    w.run(1000 * MS);
    assert_eq!(w.group_response(c), None);
    // Nor does the cut-off coordinator answer reads: its read barrier cannot commit.
    let f = w.send_group(9, old, fetch_request());
    w.run(1000 * MS);
    assert_eq!(w.group_response(f), None);
    let tp = TopicPartition::new(CONSUMER_OFFSETS_TOPIC, coordinator_partition(GROUP, 2));
    assert!(w.run_until(2000 * MS, |w| w.offsets_leader().is_some_and(|l| l != old)));
    w.net.cut.clear();
    // The old leader learns the new epoch, follows, and unloads its coordinator.
    assert!(w.run_until(2000 * MS, |w| w.brokers[&old]
        .replica_view(&tp)
        .is_some_and(|v| matches!(v.role, ReplicaRole::Follower { .. }))));
    let p = coordinator_partition(GROUP, 2);
    assert!(w.brokers[&old]
        .group_coordinators()
        .and_then(|c| c.coordinator(p))
        .is_none());
    assert_eq!(
        w.group_response(c),
        Some(GroupResponse::OffsetCommit(Err(GroupError::NotCoordinator)))
    );
    assert_eq!(
        w.group_response(f),
        Some(GroupResponse::OffsetFetch(Err(GroupError::NotCoordinator)))
    );
    assert_ne!(w.find_coordinator(), old);
    // The unacknowledged commit is gone with the zombie's log suffix.
    assert_eq!(w.fetch_offsets()[&TopicPartition::new("t", 0)].offset, 5);
}

#[test]
fn committed_offsets_survive_every_broker_crashing() {
    let mut w = cluster();
    let (mut members, _) = w.form_group(&[11, 12]);
    assert_eq!(
        w.commit(&mut members[0], 21),
        GroupResponse::OffsetCommit(Ok(()))
    );
    let before = w.fetch_offsets();
    for id in [1, 2, 3] {
        w.crash(id);
    }
    w.run(50 * MS);
    for id in [1, 2, 3] {
        w.start(id);
    }
    // The restarted leader reloads group and offsets from its recovered log.
    assert_eq!(w.fetch_offsets(), before);
    let coordinator = w.find_coordinator();
    let view = w.coordinator_view(coordinator).expect("group loaded");
    assert_eq!(view.generation, members[0].generation);
    assert_eq!(view.members.len(), 2);
}

#[test]
fn appends_in_flight_together_complete_in_log_order() {
    let mut w = cluster();
    let (mut members, _) = w.form_group(&[11, 12]);
    let coordinator = w.find_coordinator();
    for f in [1, 2, 3] {
        if f != coordinator {
            w.net
                .cut
                .insert((Address::Node(f), Address::Node(coordinator)));
        }
    }
    members[0].sequence += 1;
    members[1].sequence += 1;
    let first = w.send_group(11, coordinator, commit_request(&members[0], 100));
    let second = w.send_group(12, coordinator, commit_request(&members[1], 200));
    w.run(20 * MS);
    assert_eq!(w.group_response(first), None);
    assert_eq!(w.group_response(second), None);
    // Unstable while replicating: a stable fetch is refused rather than answered stale.
    let c = w.send_group(
        9,
        coordinator,
        GroupRequest::OffsetFetch(OffsetFetchRequest {
            group_id: GROUP.into(),
            partitions: None,
            require_stable: true,
        }),
    );
    assert_eq!(
        w.wait_group(c, 10 * MS),
        GroupResponse::OffsetFetch(Err(GroupError::UnstableOffsetCommit))
    );
    w.net.cut.clear();
    w.wait_group(second, 1000 * MS);
    let position = |w: &World, corr: u64| {
        w.inbox
            .iter()
            .position(|(_, m)| matches!(m, Message::GroupResponse { correlation, .. } if *correlation == corr))
            .unwrap()
    };
    assert_eq!(
        w.group_response(first),
        Some(GroupResponse::OffsetCommit(Ok(())))
    );
    assert_eq!(
        w.group_response(second),
        Some(GroupResponse::OffsetCommit(Ok(())))
    );
    assert!(position(&w, first) < position(&w, second));
    assert_eq!(w.fetch_offsets()[&TopicPartition::new("t", 0)].offset, 200);
}

#[test]
fn too_few_brokers_for_the_offsets_topic_is_coordinator_not_available() {
    let mut w = World::new(&[1, 2], config());
    w.run(100 * MS);
    for _ in 0..3 {
        let c = w.send_group(
            9,
            1,
            GroupRequest::FindCoordinator {
                group_id: GROUP.into(),
            },
        );
        assert_eq!(
            w.wait_group(c, 100 * MS),
            GroupResponse::FindCoordinator(Err(GroupError::CoordinatorNotAvailable))
        );
        w.run(60 * MS);
    }
    // The controller refused RF 3 on two brokers; nothing half-created.
    assert!(w.brokers[&1]
        .metadata_image()
        .topic(CONSUMER_OFFSETS_TOPIC)
        .is_none());
    // Group requests before the topic exists are NotCoordinator, not a panic.
    let c = w.send_group(11, 1, join(None));
    assert_eq!(
        w.wait_group(c, 10 * MS),
        GroupResponse::JoinGroup(Err(GroupError::NotCoordinator))
    );
}

/// Seed 124 (`group-offset-regression`): a commit whose acks=all wait timed out is still in
/// the leader's log and commits once the followers catch up. The coordinator must follow
/// the log: no failure reported, the partition unstable meanwhile, the offset in effect
/// afterwards. (It used to report the timeout, fetches showed the older offset while the log
/// held the newer one, and a member that started from it committed below it.)
#[test]
fn a_commit_whose_produce_wait_times_out_takes_effect_when_the_log_commits_it() {
    let mut w = World::new(
        &[1, 2, 3],
        BrokerConfig {
            group_append_timeout: 30 * MS,
            ..config()
        },
    );
    w.run(100 * MS);
    let (mut members, _) = w.form_group(&[11]);
    assert_eq!(
        w.commit(&mut members[0], 5),
        GroupResponse::OffsetCommit(Ok(()))
    );
    let coordinator = w.find_coordinator();
    // Followers stall for less than replica.lag.time.max: the ISR stays, the HW waits.
    let node = Address::Node;
    w.net.isolate(node(coordinator), [1, 2, 3].map(node));
    members[0].sequence += 1;
    let c = w.send_group(11, coordinator, commit_request(&members[0], 6));
    w.run(100 * MS);
    assert_eq!(w.group_response(c), None, "fate unknown: no answer yet");
    let stable = GroupRequest::OffsetFetch(OffsetFetchRequest {
        group_id: GROUP.into(),
        partitions: None,
        require_stable: true,
    });
    let f = w.send_group(9, coordinator, stable);
    assert_eq!(
        w.wait_group(f, 10 * MS),
        GroupResponse::OffsetFetch(Err(GroupError::UnstableOffsetCommit))
    );
    w.net.cut.clear();
    assert_eq!(
        w.wait_group(c, 500 * MS),
        GroupResponse::OffsetCommit(Ok(()))
    );
    assert_eq!(w.fetch_offsets()[&TopicPartition::new("t", 0)].offset, 6);
}
