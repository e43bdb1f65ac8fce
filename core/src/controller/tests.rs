//! Scripted tests of the controller and a proptest of its invariants.

use super::*;
use crate::types::{Nanos, NodeId, Offset, TopicPartition};

use crate::testing::MemStorage;
use crate::testing::{Delivery as _, MemCluster};

const SEC: Nanos = 1_000_000_000;

/// The single controller in core's shared harness (no brokers run: the tests play them,
/// and the client), with shorthands for the usual requests.
struct Harness {
    cluster: MemCluster,
    /// Broker epochs from registration replies.
    epochs: std::collections::BTreeMap<NodeId, Offset>,
}

impl Harness {
    fn new() -> Self {
        Self::with_config(ControllerConfig::default())
    }

    fn with_config(config: ControllerConfig) -> Self {
        let mut cluster = MemCluster::new();
        cluster.start_controller(config);
        Self {
            cluster,
            epochs: Default::default(),
        }
    }

    /// The controller (up).
    fn c(&self) -> &Controller<MemStorage> {
        self.cluster
            .single_controller()
            .expect("the controller is up")
    }

    fn request(&mut self, from: Requester, req: ControllerRequest) -> ControllerResponse {
        self.request_with_events(from, req).0
    }

    fn request_with_events(
        &mut self,
        from: Requester,
        req: ControllerRequest,
    ) -> (ControllerResponse, Vec<ControllerEvent>) {
        self.cluster.ask_controller(from, req)
    }

    fn register(&mut self, b: NodeId) -> Offset {
        self.register_incarnation(b, 1)
    }

    fn register_incarnation(&mut self, b: NodeId, incarnation: u64) -> Offset {
        match self.request(
            Requester::Broker(b),
            crate::testing::register_request(b, incarnation),
        ) {
            ControllerResponse::RegisterBroker(Ok(r)) => {
                assert_eq!(r.broker, b);
                self.epochs.insert(b, r.broker_epoch);
                r.broker_epoch
            }
            other => panic!("register {b}: {other:?}"),
        }
    }

    fn heartbeat_from(
        &mut self,
        b: NodeId,
        metadata_offset: Offset,
    ) -> Result<HeartbeatReply, ControllerError> {
        let broker_epoch = self.epochs[&b];
        match self.request(
            Requester::Broker(b),
            crate::testing::heartbeat_request(b, broker_epoch, metadata_offset),
        ) {
            ControllerResponse::BrokerHeartbeat(r) => r,
            other => panic!("heartbeat reply {other:?}"),
        }
    }

    /// A heartbeat from a broker that is up to date with metadata.
    fn heartbeat(&mut self, b: NodeId) -> HeartbeatReply {
        let end = self.c().metadata_end_offset();
        self.heartbeat_from(b, end).expect("heartbeat")
    }

    fn create(&mut self, name: &str, partitions: u32, rf: u16, unclean: bool) -> u64 {
        let config = TopicConfig {
            partitions,
            replication_factor: rf,
            min_insync_replicas: 1,
            unclean_leader_election: unclean,
            ..TopicConfig::default()
        };
        match self.request(
            Requester::Client(0),
            ControllerRequest::CreateTopic {
                name: name.into(),
                config,
                assignment: None,
            },
        ) {
            ControllerResponse::CreateTopic { result: Ok(id), .. } => id,
            other => panic!("create {name}: {other:?}"),
        }
    }

    fn alter(
        &mut self,
        tp: &TopicPartition,
        leader: NodeId,
        leader_epoch: u32,
        partition_epoch: u32,
        new_isr: Vec<NodeId>,
    ) -> Result<PartitionState, ControllerError> {
        match self.request(
            Requester::Broker(leader),
            ControllerRequest::AlterPartition {
                tp: tp.clone(),
                leader,
                leader_epoch,
                partition_epoch,
                new_isr,
            },
        ) {
            ControllerResponse::AlterPartition { tp: t, result } => {
                assert_eq!(&t, tp);
                result
            }
            other => panic!("alter reply {other:?}"),
        }
    }

    /// Advances time by `dt`, with `alive` heartbeating every second on the way; the events
    /// the controller's ticks caused.
    fn run(&mut self, dt: Nanos, alive: &[NodeId]) -> Vec<ControllerEvent> {
        let mut events = Vec::new();
        let end = self.cluster.now + dt;
        while self.cluster.now < end {
            self.cluster.now = (self.cluster.now + SEC).min(end);
            for &b in alive {
                self.heartbeat(b);
            }
            let seen = self.cluster.controller_events.len();
            self.cluster.tick_all();
            self.cluster.deliver_all();
            let ticked = self.cluster.controller_events.drain(seen..);
            events.extend(ticked.map(|(_, e)| e));
        }
        events
    }

    fn part(&self, tp: &TopicPartition) -> PartitionState {
        self.c().image().partition(tp).expect("partition").clone()
    }

    fn assert_replays(&self) {
        let replayed = MetadataImage::from_records(self.c().records()).expect("replays");
        assert_eq!(&replayed, self.c().image());
    }
}

fn tp(topic: &str, p: u32) -> TopicPartition {
    TopicPartition::new(topic, p)
}

#[test]
fn create_topic_spreads_replicas_over_live_brokers() {
    let mut h = Harness::new();
    for b in 1..=3 {
        h.register(b);
    }
    h.create("t", 6, 3, false);
    let topic = h.c().image().topic("t").unwrap().clone();
    assert_eq!(topic.partitions.len(), 6);
    let mut leaders = std::collections::BTreeSet::new();
    for state in topic.partitions.values() {
        assert_eq!(state.isr, state.replicas);
        assert_eq!(state.leader, Some(state.replicas[0]));
        assert_eq!((state.leader_epoch, state.partition_epoch), (0, 0));
        leaders.insert(state.leader.unwrap());
    }
    assert_eq!(leaders.len(), 3);
    h.assert_replays();
}

#[test]
fn create_topic_rejects_bad_input() {
    let mut h = Harness::new();
    h.register(1);
    let create = |name: &str, config: TopicConfig, assignment| ControllerRequest::CreateTopic {
        name: name.into(),
        config,
        assignment,
    };
    let rf2 = TopicConfig {
        replication_factor: 2,
        ..TopicConfig::default()
    };
    let cases = vec![
        (create("", TopicConfig::default(), None), "InvalidTopicName"),
        (
            create("a/b", TopicConfig::default(), None),
            "InvalidTopicName",
        ),
        (create("t", rf2.clone(), None), "InsufficientBrokers"),
        (
            create(
                "t",
                TopicConfig {
                    partitions: 0,
                    ..TopicConfig::default()
                },
                None,
            ),
            "InvalidConfig",
        ),
        (
            create(
                "t",
                TopicConfig {
                    min_insync_replicas: 2,
                    ..TopicConfig::default()
                },
                None,
            ),
            "InvalidConfig",
        ),
        (
            create("t", rf2.clone(), Some(vec![vec![1, 9]])),
            "InvalidAssignment",
        ),
        (
            create("t", rf2.clone(), Some(vec![vec![1, 1]])),
            "InvalidAssignment",
        ),
        (
            create("t", rf2.clone(), Some(vec![vec![1, 2], vec![2, 1]])),
            "InvalidAssignment",
        ),
    ];
    for (req, want) in cases {
        match h.request(Requester::Client(1), req.clone()) {
            ControllerResponse::CreateTopic { result: Err(e), .. } => {
                assert!(format!("{e:?}").starts_with(want), "{req:?}: {e:?}")
            }
            other => panic!("{req:?}: {other:?}"),
        }
    }
    assert!(h.c().image().topics.is_empty());
    // Brokers 2 and 3 exist but are fenced. A manual assignment may name fenced brokers as
    // long as one replica is live (only the live ones start in the ISR), as in Kafka.
    for b in [2, 3] {
        h.register(b);
    }
    h.run(h.c().config().session_timeout + SEC, &[1]);
    assert!(!h.c().image().is_unfenced(2) && !h.c().image().is_unfenced(3));
    match h.request(
        Requester::Client(1),
        create("m", rf2.clone(), Some(vec![vec![2, 3]])),
    ) {
        ControllerResponse::CreateTopic {
            result: Err(ControllerError::InvalidAssignment { .. }),
            ..
        } => {}
        other => panic!("{other:?}"),
    }
    let r = h.request(
        Requester::Client(1),
        create("m", rf2, Some(vec![vec![2, 1]])),
    );
    assert!(matches!(
        r,
        ControllerResponse::CreateTopic { result: Ok(_), .. }
    ));
    let s = h.part(&tp("m", 0));
    assert_eq!((s.isr.clone(), s.leader), (vec![1], Some(1)));
    h.create("t", 1, 1, false);
    match h.request(
        Requester::Client(1),
        create("t", TopicConfig::default(), None),
    ) {
        ControllerResponse::CreateTopic {
            result: Err(ControllerError::TopicAlreadyExists { .. }),
            ..
        } => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn delete_topic_and_recreate_gets_new_id() {
    let mut h = Harness::new();
    h.register(1);
    let id = h.create("t", 2, 1, false);
    let del = |h: &mut Harness| {
        h.request(
            Requester::Client(1),
            ControllerRequest::DeleteTopic { name: "t".into() },
        )
    };
    assert_eq!(
        del(&mut h),
        ControllerResponse::DeleteTopic {
            name: "t".into(),
            result: Ok(())
        }
    );
    assert!(h.c().image().topic("t").is_none());
    assert!(matches!(
        del(&mut h),
        ControllerResponse::DeleteTopic {
            result: Err(ControllerError::UnknownTopic { .. }),
            ..
        }
    ));
    let id2 = h.create("t", 2, 1, false);
    assert!(id2 > id);
    h.assert_replays();
}

#[test]
fn broker_fencing_moves_leadership_and_bumps_epochs() {
    let mut h = Harness::new();
    for b in 1..=3 {
        h.register(b);
    }
    h.create("t", 3, 3, false);
    let before: Vec<PartitionState> = (0..3).map(|p| h.part(&tp("t", p))).collect();
    let led_by_1: Vec<u32> = (0..3)
        .filter(|&p| before[p as usize].leader == Some(1))
        .collect();
    assert_eq!(led_by_1.len(), 1);

    // Broker 1 stops heartbeating; 2 and 3 keep going.
    let events = h.run(h.c().config().session_timeout + SEC, &[2, 3]);
    assert!(events.contains(&ControllerEvent::BrokerFenced {
        broker: 1,
        reason: FenceReason::SessionTimeout
    }));
    assert!(!h.c().image().is_unfenced(1));
    for p in 0..3 {
        let (old, new) = (&before[p as usize], h.part(&tp("t", p)));
        assert!(!new.isr.contains(&1), "fenced broker leaves the ISR");
        assert_eq!(new.partition_epoch, old.partition_epoch + 1);
        if led_by_1.contains(&p) {
            // The next ISR member in assignment order takes over.
            let expected = old.replicas.iter().copied().find(|&b| b != 1);
            assert_eq!(new.leader, expected);
            assert_eq!(new.leader_epoch, old.leader_epoch + 1);
            assert!(events.contains(&ControllerEvent::LeaderChanged {
                tp: tp("t", p),
                leader: expected,
                leader_epoch: new.leader_epoch,
            }));
        } else {
            assert_eq!(new.leader, old.leader);
            assert_eq!(new.leader_epoch, old.leader_epoch);
        }
    }
    // Nothing more to fence: the survivors keep their sessions.
    assert!(h.run(20 * SEC, &[2, 3]).is_empty());
    // The fenced broker restarts and re-registers: unfenced, but it has to catch up (a
    // leader's AlterPartition) before it is in any ISR again; leaders stay put.
    let fenced_state: Vec<PartitionState> = (0..3).map(|p| h.part(&tp("t", p))).collect();
    let (r, events) =
        h.request_with_events(Requester::Broker(1), crate::testing::register_request(1, 2));
    let ControllerResponse::RegisterBroker(Ok(reg)) = r else {
        panic!("{r:?}")
    };
    h.epochs.insert(1, reg.broker_epoch);
    assert!(h.c().image().is_unfenced(1));
    assert!(events
        .iter()
        .all(|e| !matches!(e, ControllerEvent::LeaderChanged { .. })));
    for p in 0..3 {
        assert_eq!(h.part(&tp("t", p)), fenced_state[p as usize]);
    }
    assert!(h.run(20 * SEC, &[1, 2, 3]).is_empty());
    h.assert_replays();
}

#[test]
fn fenced_last_isr_member_stays_and_partition_goes_leaderless() {
    let mut h = Harness::new();
    h.register(1);
    h.register(2);
    h.create("t", 1, 2, false);
    let t0 = tp("t", 0);
    let s = h.part(&t0);
    let leader = s.leader.unwrap();
    let follower = s.replicas[1];
    // The leader shrinks the ISR to itself (follower lagging).
    let s = h
        .alter(&t0, leader, s.leader_epoch, s.partition_epoch, vec![leader])
        .unwrap();
    assert_eq!(s.isr, vec![leader]);
    h.run(h.c().config().session_timeout + SEC, &[follower]);
    let s2 = h.part(&t0);
    assert_eq!(s2.leader, None, "no ISR member is alive");
    assert_eq!(s2.isr, vec![leader], "the last ISR member is kept");
    assert_eq!(s2.leader_epoch, s.leader_epoch + 1);
    assert_eq!(s2.partition_epoch, s.partition_epoch + 1);

    // It comes back: once it has seen its own fencing it is unfenced and leads again.
    let since = match h.c().image().broker(leader).unwrap().state {
        BrokerState::Fenced { since } => since,
        s => panic!("{s:?}"),
    };
    let r = h.heartbeat_from(leader, since).unwrap();
    assert!(r.fenced, "has not seen its fencing record yet");
    let r = h.heartbeat_from(leader, since + 1).unwrap();
    assert!(!r.fenced);
    let s3 = h.part(&t0);
    assert_eq!(s3.leader, Some(leader));
    assert_eq!(s3.leader_epoch, s2.leader_epoch + 1);
    h.assert_replays();
}

#[test]
fn alter_partition_fencing() {
    let mut h = Harness::new();
    for b in 1..=3 {
        h.register(b);
    }
    h.create("t", 1, 3, false);
    let t0 = tp("t", 0);
    let s = h.part(&t0);
    let l = s.leader.unwrap();
    let others: Vec<NodeId> = s.replicas.iter().copied().filter(|&b| b != l).collect();

    // Accepted: new partition epoch, same leader epoch.
    let s1 = h
        .alter(
            &t0,
            l,
            s.leader_epoch,
            s.partition_epoch,
            vec![l, others[0]],
        )
        .unwrap();
    assert_eq!(s1.partition_epoch, s.partition_epoch + 1);
    assert_eq!(s1.leader_epoch, s.leader_epoch);
    assert_eq!(s1, h.part(&t0));

    // A retry of the same proposal (reply lost) is told the outcome.
    assert_eq!(
        h.alter(
            &t0,
            l,
            s.leader_epoch,
            s.partition_epoch,
            vec![l, others[0]]
        ),
        Ok(s1.clone())
    );
    // A different proposal on the stale partition epoch is rejected.
    assert!(matches!(
        h.alter(&t0, l, s.leader_epoch, s.partition_epoch, vec![l]),
        Err(ControllerError::InvalidUpdateVersion { current, got, .. })
            if current == s1.partition_epoch && got == s.partition_epoch
    ));
    // Wrong leader epoch, or not the leader at all.
    assert!(matches!(
        h.alter(&t0, l, s.leader_epoch + 1, s1.partition_epoch, vec![l]),
        Err(ControllerError::FencedLeaderEpoch { .. })
    ));
    assert!(matches!(
        h.alter(
            &t0,
            others[0],
            s.leader_epoch,
            s1.partition_epoch,
            vec![others[0]]
        ),
        Err(ControllerError::FencedLeaderEpoch { .. })
    ));
    // Bad ISRs.
    let bad = [vec![l, 42], vec![others[0]], vec![l, l], vec![]];
    for isr in bad {
        assert!(
            matches!(
                h.alter(&t0, l, s1.leader_epoch, s1.partition_epoch, isr.clone()),
                Err(ControllerError::InvalidIsr { .. })
            ),
            "{isr:?}"
        );
    }
    // A fenced broker cannot be added back.
    h.run(h.c().config().session_timeout + SEC, &[l, others[0]]);
    assert!(!h.c().image().is_unfenced(others[1]));
    let s2 = h.part(&t0);
    assert!(matches!(
        h.alter(&t0, l, s2.leader_epoch, s2.partition_epoch, s2.replicas.clone()),
        Err(ControllerError::IneligibleReplica { broker, .. }) if broker == others[1]
    ));
    assert_eq!(h.part(&t0), s2, "rejections change nothing");

    // A deposed leader's proposal is rejected.
    h.run(h.c().config().session_timeout + SEC, &[others[0]]);
    let s3 = h.part(&t0);
    assert_eq!(s3.leader, Some(others[0]));
    assert!(matches!(
        h.alter(&t0, l, s2.leader_epoch, s2.partition_epoch, vec![l]),
        Err(ControllerError::FencedLeaderEpoch { .. })
    ));
    // Requests naming another broker than the sender are refused outright.
    match h.request(
        Requester::Client(9),
        ControllerRequest::AlterPartition {
            tp: t0.clone(),
            leader: others[0],
            leader_epoch: s3.leader_epoch,
            partition_epoch: s3.partition_epoch,
            new_isr: vec![others[0]],
        },
    ) {
        ControllerResponse::AlterPartition {
            result: Err(ControllerError::InvalidRequest { .. }),
            ..
        } => {}
        other => panic!("{other:?}"),
    }
    h.assert_replays();
}

#[test]
fn unclean_election_only_when_enabled_and_reported() {
    let mut h = Harness::new();
    h.register(1);
    h.register(2);
    let assignment = Some(vec![vec![1, 2]]);
    for (name, unclean) in [("clean", false), ("dirty", true)] {
        let r = h.request(
            Requester::Client(0),
            ControllerRequest::CreateTopic {
                name: name.into(),
                config: TopicConfig {
                    replication_factor: 2,
                    unclean_leader_election: unclean,
                    ..TopicConfig::default()
                },
                assignment: assignment.clone(),
            },
        );
        assert!(matches!(
            r,
            ControllerResponse::CreateTopic { result: Ok(_), .. }
        ));
        let t = tp(name, 0);
        let s = h.part(&t);
        h.alter(&t, 1, s.leader_epoch, s.partition_epoch, vec![1])
            .unwrap();
    }
    // Broker 1, the only ISR member of both, dies.
    let events = h.run(h.c().config().session_timeout + SEC, &[2]);
    let clean = h.part(&tp("clean", 0));
    assert_eq!((clean.leader, clean.isr.clone()), (None, vec![1]));
    let dirty = h.part(&tp("dirty", 0));
    assert_eq!((dirty.leader, dirty.isr.clone()), (Some(2), vec![2]));
    let unclean: Vec<&ControllerEvent> = events
        .iter()
        .filter(|e| matches!(e, ControllerEvent::UncleanLeaderElection { .. }))
        .collect();
    assert_eq!(
        unclean,
        vec![&ControllerEvent::UncleanLeaderElection {
            tp: tp("dirty", 0),
            leader: 2,
            leader_epoch: dirty.leader_epoch,
            previous_isr: vec![1],
        }]
    );
    // Enabling it later elects right away, and reports it.
    let config = TopicConfig {
        replication_factor: 2,
        unclean_leader_election: true,
        ..TopicConfig::default()
    };
    let (r, events) = h.request_with_events(
        Requester::Client(0),
        ControllerRequest::UpdateTopicConfig {
            name: "clean".into(),
            config,
        },
    );
    assert!(matches!(
        r,
        ControllerResponse::UpdateTopicConfig { result: Ok(()), .. }
    ));
    assert_eq!(h.part(&tp("clean", 0)).leader, Some(2));
    assert!(events.iter().any(|e| matches!(
        e,
        ControllerEvent::UncleanLeaderElection { tp: t, leader: 2, .. } if *t == tp("clean", 0)
    )));
    h.assert_replays();
}

#[test]
fn heartbeat_pull_delivers_missed_records() {
    let mut h = Harness::with_config(ControllerConfig {
        max_records_per_pull: 3,
        ..ControllerConfig::default()
    });
    h.register(1);
    h.register(2);
    // Broker 2's view of the metadata, fed only by its heartbeat replies.
    let mut image = MetadataImage::new();
    h.create("a", 4, 2, false);
    // These replies are "lost".
    let _ = h.heartbeat_from(2, 0).unwrap();
    let stale = h.heartbeat_from(2, 0).unwrap();
    h.create("b", 2, 1, false);
    // Pulls are bounded, so it takes several rounds to catch up.
    let mut rounds = 0;
    loop {
        let r = h.heartbeat_from(2, image.next_offset).unwrap();
        assert!(r.metadata.records.len() <= 3);
        image.apply_delta(&r.metadata).unwrap();
        rounds += 1;
        if image.next_offset == r.metadata.end_offset {
            break;
        }
    }
    assert!(rounds > 1);
    assert_eq!(&image, h.c().image());
    // A late, reordered reply changes nothing.
    assert_eq!(image.apply_delta(&stale.metadata), Ok(0));
    assert_eq!(&image, h.c().image());
    // A gap (a delta from beyond what the image has) is refused, not misapplied.
    h.create("c", 1, 1, false);
    let end = h.c().metadata_end_offset();
    let r = h.heartbeat_from(2, end - 1).unwrap();
    assert!(matches!(
        image.apply_delta(&r.metadata),
        Err(ImageError::Gap { .. })
    ));
}

#[test]
fn heartbeat_errors_and_reregistration() {
    let mut h = Harness::new();
    let e1 = h.register(1);
    h.register(2);
    // Unknown broker.
    match h.request(
        Requester::Broker(7),
        crate::testing::heartbeat_request(7, 0, 0),
    ) {
        ControllerResponse::BrokerHeartbeat(Err(ControllerError::UnknownBroker { broker: 7 })) => {}
        other => panic!("{other:?}"),
    }
    // A retried registration of the same incarnation keeps its epoch.
    assert_eq!(h.register(1), e1);
    h.create("t", 1, 2, false);
    let t0 = tp("t", 0);
    let s = h.part(&t0);
    assert_eq!(s.leader, Some(1));
    // A restart (new incarnation) fences first: it loses leadership and ISR membership.
    let e1b = h.register_incarnation(1, 2);
    assert!(e1b > e1);
    let s2 = h.part(&t0);
    assert_eq!(s2.leader, Some(2));
    assert_eq!(s2.isr, vec![2]);
    assert!(s2.leader_epoch > s.leader_epoch);
    assert!(h.c().image().is_unfenced(1));
    // The old incarnation's heartbeats are stale.
    match h.request(
        Requester::Broker(1),
        crate::testing::heartbeat_request(1, e1, 0),
    ) {
        ControllerResponse::BrokerHeartbeat(Err(ControllerError::StaleBrokerEpoch {
            current,
            got,
            ..
        })) => assert_eq!((current, got), (e1b, e1)),
        other => panic!("{other:?}"),
    }
    h.assert_replays();
}

#[test]
fn preferred_leader_election() {
    let mut h = Harness::new();
    for b in 1..=3 {
        h.register(b);
    }
    h.create("t", 3, 3, false);
    let t0 = tp("t", 0);
    let preferred = h.part(&t0).replicas[0];
    // Preferred leader restarts: it loses leadership.
    h.register_incarnation(preferred, 2);
    let s = h.part(&t0);
    assert_ne!(s.leader, Some(preferred));
    let elect = |h: &mut Harness| match h.request(
        Requester::Client(0),
        ControllerRequest::ElectPreferredLeaders {
            partitions: Some(vec![t0.clone()]),
        },
    ) {
        ControllerResponse::ElectPreferredLeaders { mut results } => results.remove(0).1,
        other => panic!("{other:?}"),
    };
    // Not in the ISR yet: not available.
    assert!(matches!(
        elect(&mut h),
        Err(ControllerError::PreferredLeaderNotAvailable { .. })
    ));
    // The leader lets it back into the ISR once caught up.
    let l = s.leader.unwrap();
    h.alter(
        &t0,
        l,
        s.leader_epoch,
        s.partition_epoch,
        s.replicas.clone(),
    )
    .unwrap();
    assert_eq!(elect(&mut h), Ok(preferred));
    let s2 = h.part(&t0);
    assert_eq!(s2.leader, Some(preferred));
    assert_eq!(s2.leader_epoch, s.leader_epoch + 1);
    assert!(matches!(
        elect(&mut h),
        Err(ControllerError::ElectionNotNeeded { .. })
    ));
    h.assert_replays();
}

#[test]
fn producer_ids_are_unique() {
    let mut h = Harness::with_config(ControllerConfig {
        producer_id_block: 3,
        ..ControllerConfig::default()
    });
    let mut ids = Vec::new();
    for _ in 0..7 {
        match h.request(Requester::Client(5), ControllerRequest::InitProducerId) {
            ControllerResponse::InitProducerId(Ok(p)) => {
                assert_eq!(p.producer_epoch, 0);
                ids.push(p.producer_id)
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(ids, (0..7).collect::<Vec<_>>());
    assert_eq!(h.c().image().next_producer_id, 9, "three blocks reserved");
}

#[test]
fn next_timeout_is_the_earliest_session_deadline() {
    let mut h = Harness::new();
    assert_eq!(h.c().poll_timeout(), None);
    h.register(1);
    h.cluster.now = 2 * SEC;
    h.register(2);
    let st = h.c().config().session_timeout;
    assert_eq!(h.c().poll_timeout(), Some(st));
    h.cluster.now = st - 1;
    h.cluster.tick_all();
    assert!(h.c().image().is_unfenced(1));
    h.cluster.now = st;
    h.cluster.tick_all();
    assert!(!h.c().image().is_unfenced(1));
    assert_eq!(h.c().poll_timeout(), Some(2 * SEC + st));
}

/// Some history worth replaying: brokers, topics, a fencing, ISR changes, producer ids.
fn busy_harness() -> Harness {
    let mut h = Harness::with_config(ControllerConfig {
        producer_id_block: 4,
        ..ControllerConfig::default()
    });
    for b in 1..=3 {
        h.register(b);
    }
    h.create("a", 3, 3, false);
    h.create("b", 2, 2, true);
    let t = tp("a", 0);
    let s = h.part(&t);
    let l = s.leader.unwrap();
    h.alter(&t, l, s.leader_epoch, s.partition_epoch, vec![l])
        .unwrap();
    for _ in 0..5 {
        h.request(Requester::Client(1), ControllerRequest::InitProducerId);
    }
    h.run(h.c().config().session_timeout + SEC, &[1, 2]);
    assert!(!h.c().image().is_unfenced(3));
    h
}

fn reopen(h: &mut Harness, at: Nanos) -> Result<(), ControllerOpenError> {
    let config = h.c().config().clone();
    // Power loss: unsynced bytes are gone (there should be none).
    h.cluster.crash_controller(1);
    h.cluster.now = at;
    h.cluster.open_controller(config)
}

#[test]
fn controller_restart_replays_its_log_to_an_identical_image() {
    let mut h = busy_harness();
    let image = h.c().image().clone();
    let records = h.c().records().to_vec();
    let last_pid = h.c().image().next_producer_id;
    let at = h.cluster.now + 100 * SEC;
    reopen(&mut h, at).unwrap();
    assert_eq!(h.c().image(), &image);
    assert_eq!(h.c().records(), &records[..]);
    // Producer ids are never reused: a fresh block starts after every reserved one.
    match h.request(Requester::Client(1), ControllerRequest::InitProducerId) {
        ControllerResponse::InitProducerId(Ok(p)) => assert_eq!(p.producer_id, last_pid),
        other => panic!("{other:?}"),
    }
    // Broker epochs survive: the brokers' heartbeats are still valid.
    let r = h.heartbeat(1);
    assert!(!r.fenced);
    // Grace period: nobody could heartbeat while the controller was down, so no broker is
    // fenced before `restart_grace` has passed...
    let grace = h.c().config().restart_grace;
    assert!(h.run(grace - SEC, &[1]).is_empty());
    assert!(h.c().image().is_unfenced(2));
    // ...but a broker that stays silent after it is.
    let events = h.run(2 * SEC, &[1]);
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, ControllerEvent::BrokerFenced { broker: 2, .. }))
            .count(),
        1
    );
    h.assert_replays();
}

#[test]
fn large_decisions_span_several_batches_and_replay() {
    let mut h = Harness::new();
    h.register(1);
    // 1 MiB batches; ~20k partition records do not fit in one.
    h.create("big", 20_000, 1, false);
    let image = h.c().image().clone();
    reopen(&mut h, 0).unwrap();
    assert_eq!(h.c().image(), &image);
    assert_eq!(h.c().image().topic("big").unwrap().partitions.len(), 20_000);
}

#[test]
fn metadata_log_write_failure_stops_the_controller_until_reopened() {
    let mut h = busy_harness();
    let image = h.c().image().clone();
    let storage = h.c().storage().clone();
    storage.set_capacity(Some(storage.used_bytes()));
    let (r, events) = h.request_with_events(
        Requester::Client(1),
        ControllerRequest::DeleteTopic { name: "a".into() },
    );
    assert!(matches!(
        r,
        ControllerResponse::DeleteTopic {
            result: Err(ControllerError::StorageFailed { .. }),
            ..
        }
    ));
    assert!(events
        .iter()
        .any(|e| matches!(e, ControllerEvent::StorageFailed { .. })));
    assert_eq!(h.c().image(), &image, "nothing applied that is not durable");
    assert!(h.c().failed().is_some());
    assert_eq!(h.c().poll_timeout(), None);
    // Everything else is refused too, but metadata reads are served.
    assert!(matches!(
        h.request(Requester::Client(1), ControllerRequest::InitProducerId),
        ControllerResponse::InitProducerId(Err(ControllerError::StorageFailed { .. }))
    ));
    assert!(matches!(
        h.heartbeat_from(1, 0),
        Err(ControllerError::StorageFailed { .. })
    ));
    match h.request(
        Requester::Client(1),
        ControllerRequest::FetchMetadata { from_offset: 0 },
    ) {
        ControllerResponse::Metadata(d) => assert_eq!(d.end_offset, image.next_offset),
        other => panic!("{other:?}"),
    }
    // Space comes back; the restarted controller has exactly the durable state.
    storage.set_capacity(None);
    let now = h.cluster.now;
    reopen(&mut h, now).unwrap();
    assert_eq!(h.c().image(), &image);
    h.request(
        Requester::Client(1),
        ControllerRequest::DeleteTopic { name: "a".into() },
    );
    assert!(h.c().image().topic("a").is_none());
}

#[test]
fn corrupt_metadata_log_is_a_typed_open_error() {
    let mut h = busy_harness();
    let storage = h.c().storage().clone();
    let (path, len, _) = storage
        .files()
        .into_iter()
        .find(|(p, _, _)| p.ends_with(".log"))
        .expect("a segment");
    assert!(storage.flip_bit(&path, len / 2, 3));
    let config = h.c().config().clone();
    // Stopped (nothing lost) and opened again on the flipped bit.
    h.cluster.controllers.remove(&1);
    h.cluster.now = 0;
    match h.cluster.open_controller(config) {
        Err(ControllerOpenError::Log(crate::log::LogError::Corrupt { .. })) => {}
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("opened a corrupt metadata log"),
    }
}

impl Harness {
    fn controlled_shutdown(
        &mut self,
        b: NodeId,
    ) -> Result<ControlledShutdownReply, ControllerError> {
        let broker_epoch = self.epochs[&b];
        match self.request(
            Requester::Broker(b),
            ControllerRequest::ControlledShutdown {
                broker: b,
                broker_epoch,
            },
        ) {
            ControllerResponse::ControlledShutdown(r) => r,
            other => panic!("controlled shutdown reply {other:?}"),
        }
    }
}

#[test]
fn controlled_shutdown_moves_leaders_and_shrinks_isrs() {
    let mut h = Harness::new();
    for b in 1..=3 {
        h.register(b);
    }
    h.create("t", 3, 3, false); // broker 1 leads one partition, follows in two
    h.create("solo", 1, 1, true); // broker 1 is the only replica somewhere (maybe)
    let led_by_1: Vec<TopicPartition> = (0..3)
        .map(|p| tp("t", p))
        .filter(|tp| h.part(tp).leader == Some(1))
        .collect();
    assert_eq!(led_by_1.len(), 1);
    let solo = h.part(&tp("solo", 0));
    let before: Vec<PartitionState> = (0..3).map(|p| h.part(&tp("t", p))).collect();

    let reply = h.controlled_shutdown(1).expect("accepted");
    assert_eq!(reply.broker, 1);
    assert_eq!(reply.metadata_offset, h.c().metadata_end_offset());
    for (p, old) in before.iter().enumerate() {
        let now = h.part(&tp("t", p as u32));
        assert!(
            !now.isr.contains(&1),
            "t-{p}: broker 1 left the ISR: {now:?}"
        );
        assert_ne!(now.leader, Some(1), "t-{p}: leadership moved");
        assert!(
            now.leader.is_some_and(|l| old.isr.contains(&l)),
            "clean election"
        );
        if old.leader == Some(1) {
            assert_eq!(now.leader_epoch, old.leader_epoch + 1);
        } else {
            assert_eq!(now.leader, old.leader, "other leaders stay");
            assert_eq!(now.leader_epoch, old.leader_epoch);
        }
    }
    // A partition only broker 1 holds stays led by it (moving it would be unclean, even
    // with unclean election enabled).
    if solo.leader == Some(1) {
        assert_eq!(reply.remaining, vec![tp("solo", 0)]);
        assert_eq!(h.part(&tp("solo", 0)), solo);
    } else {
        assert!(reply.remaining.is_empty());
    }

    // While shutting down it may not rejoin an ISR, and is not elected when a leader fails.
    let p = h.part(&led_by_1[0]);
    let leader = p.leader.unwrap();
    let mut isr = p.isr.clone();
    isr.push(1);
    assert!(matches!(
        h.alter(&led_by_1[0], leader, p.leader_epoch, p.partition_epoch, isr),
        Err(ControllerError::IneligibleReplica { broker: 1, .. })
    ));
    let others: Vec<NodeId> = [2, 3].into_iter().filter(|&b| b != leader).collect();
    let mut alive = vec![1];
    alive.extend(&others);
    h.run(10 * SEC, &alive); // `leader` times out
    let after = h.part(&led_by_1[0]);
    assert_ne!(after.leader, Some(1), "never elected while shutting down");
    assert_eq!(after.leader, Some(others[0]));

    // A retry is answered again; a stale epoch is refused.
    assert!(h.controlled_shutdown(1).is_ok());
    h.epochs.insert(1, 999);
    assert!(matches!(
        h.controlled_shutdown(1),
        Err(ControllerError::StaleBrokerEpoch { .. })
    ));
    // Another broker cannot ask for broker 1.
    let epoch = h.c().image().broker(1).unwrap().broker_epoch;
    assert!(matches!(
        h.request(
            Requester::Broker(2),
            ControllerRequest::ControlledShutdown {
                broker: 1,
                broker_epoch: epoch
            }
        ),
        ControllerResponse::ControlledShutdown(Err(ControllerError::InvalidRequest { .. }))
    ));

    // Restarted (new incarnation), it is eligible again: the next election can pick it.
    h.register_incarnation(1, 2);
    h.run(2 * SEC, &[1, others[0]]);
    let p = h.part(&led_by_1[0]);
    let leader = p.leader.unwrap();
    let mut isr = p.isr.clone();
    isr.push(1);
    let grown = h
        .alter(&led_by_1[0], leader, p.leader_epoch, p.partition_epoch, isr)
        .expect("a restarted broker may rejoin");
    assert!(grown.isr.contains(&1));
    h.assert_replays();
}

#[test]
fn controlled_shutdown_of_an_unknown_broker_is_refused() {
    let mut h = Harness::new();
    h.register(1);
    h.epochs.insert(9, 0);
    assert!(matches!(
        h.controlled_shutdown(9),
        Err(ControllerError::UnknownBroker { broker: 9 })
    ));
}

/// Creates topic `name` with one partition on brokers 1, 2, 3 (in that order), rf 3 and
/// min.insync.replicas 2, under `h`.
fn create_min_isr_2(h: &mut Harness, name: &str) -> TopicPartition {
    let r = h.request(
        Requester::Client(0),
        ControllerRequest::CreateTopic {
            name: name.into(),
            config: TopicConfig {
                replication_factor: 3,
                min_insync_replicas: 2,
                ..TopicConfig::default()
            },
            assignment: Some(vec![vec![1, 2, 3]]),
        },
    );
    assert!(matches!(
        r,
        ControllerResponse::CreateTopic { result: Ok(_), .. }
    ));
    tp(name, 0)
}

/// Leader 1 shrinks the ISR to `isr` (one AlterPartition).
fn shrink(h: &mut Harness, t: &TopicPartition, isr: Vec<NodeId>) -> PartitionState {
    let s = h.part(t);
    h.alter(t, 1, s.leader_epoch, s.partition_epoch, isr)
        .expect("shrink accepted")
}

fn heartbeat_reporting(
    h: &mut Harness,
    b: NodeId,
    offline: Vec<TopicPartition>,
    corrupt: Vec<TopicPartition>,
) {
    let broker_epoch = h.epochs[&b];
    let metadata_offset = h.c().metadata_end_offset();
    let r = h.request(
        Requester::Broker(b),
        ControllerRequest::BrokerHeartbeat {
            broker: b,
            broker_epoch,
            metadata_offset,
            offline_partitions: offline,
            corrupt_partitions: corrupt,
            log_info: Vec::new(),
        },
    );
    assert!(
        matches!(r, ControllerResponse::BrokerHeartbeat(Ok(_))),
        "{r:?}"
    );
}

/// KIP-966: a replica leaving an ISR already at min.insync.replicas joins the ELR (one
/// leaving a larger ISR does not), and when the last ISR member dies the ELR member is
/// elected cleanly; the dead leader joins the ELR in its place.
#[test]
fn elr_member_is_elected_when_the_last_isr_member_dies() {
    let mut h = Harness::new();
    for b in [1, 2, 3] {
        h.register(b);
    }
    let t = create_min_isr_2(&mut h, "t");
    let s = shrink(&mut h, &t, vec![1, 2]);
    assert_eq!((s.isr.clone(), s.elr.clone()), (vec![1, 2], vec![]));
    let s = shrink(&mut h, &t, vec![1]);
    assert_eq!((s.isr.clone(), s.elr.clone()), (vec![1], vec![2]));
    // Broker 1 (leader, last ISR member) dies; 2 and 3 stay alive.
    let events = h.run(h.c().config().session_timeout + SEC, &[2, 3]);
    let s = h.part(&t);
    assert_eq!(s.leader, Some(2), "the ELR member leads");
    assert_eq!(s.isr, vec![2]);
    assert_eq!(
        s.elr,
        vec![1],
        "the fenced old leader still holds every committed record"
    );
    assert!(events.iter().any(|e| matches!(
        e,
        ControllerEvent::ElrChanged { tp: x, elr } if *x == t && *elr == vec![1]
    )));
    assert!(!events
        .iter()
        .any(|e| matches!(e, ControllerEvent::UncleanLeaderElection { .. })));
    // Broker 3 catches up: the ISR is back at min.insync, so the HW moves again and the
    // ELR is cleared.
    let s = h
        .alter(&t, 2, s.leader_epoch, s.partition_epoch, vec![2, 3])
        .expect("expand");
    assert_eq!(
        (s.isr, s.elr, s.last_known_elr),
        (vec![2, 3], vec![], vec![])
    );
    h.assert_replays();
}

/// The `no-elr` bug: the same history leaves the partition leaderless (pre-KIP-966).
#[test]
fn without_elr_the_same_history_leaves_the_partition_leaderless() {
    let mut config = ControllerConfig::default();
    config.bugs.no_elr = true;
    let mut h = Harness::with_config(config);
    for b in [1, 2, 3] {
        h.register(b);
    }
    let t = create_min_isr_2(&mut h, "t");
    shrink(&mut h, &t, vec![1, 2]);
    let s = shrink(&mut h, &t, vec![1]);
    assert!(s.elr.is_empty());
    h.run(h.c().config().session_timeout + SEC, &[2, 3]);
    let s = h.part(&t);
    assert_eq!((s.leader, s.isr), (None, vec![1]));
    h.assert_replays();
}

/// An ELR member whose log is briefly unreadable stays eligible (it is only skipped while
/// offline); one reporting a corrupt log leaves the ELR into the last known ELR, so its
/// broker may cut and refetch it. A corrupt last ISR member gives way to the ELR.
#[test]
fn corrupt_copies_leave_the_elr_transient_ones_stay() {
    let mut h = Harness::new();
    for b in [1, 2, 3] {
        h.register(b);
    }
    let t = create_min_isr_2(&mut h, "t");
    shrink(&mut h, &t, vec![1, 2]);
    shrink(&mut h, &t, vec![1]);
    assert_eq!(h.part(&t).elr, vec![2]);
    heartbeat_reporting(&mut h, 2, vec![t.clone()], vec![]);
    assert_eq!(
        h.part(&t).elr,
        vec![2],
        "a transient read error keeps it eligible"
    );
    heartbeat_reporting(&mut h, 2, vec![], vec![]);
    // The leader's own log turns out corrupt: ELR member 2 takes over, 1 is out of both.
    heartbeat_reporting(&mut h, 1, vec![t.clone()], vec![t.clone()]);
    let s = h.part(&t);
    assert_eq!((s.leader, s.isr.clone()), (Some(2), vec![2]));
    assert!(s.elr.is_empty(), "{s:?}");
    assert_eq!(s.last_known_elr, vec![1]);
    // Broker 3 (never eligible) and then 1 (repaired, caught up) rejoin the ISR.
    let s = h
        .alter(&t, 2, s.leader_epoch, s.partition_epoch, vec![2, 3])
        .expect("expand");
    assert_eq!((s.elr, s.last_known_elr), (vec![], vec![]));
    h.assert_replays();
}

/// A corrupt ELR member while another replica leads leaves the ELR at once.
#[test]
fn a_corrupt_elr_member_leaves_while_the_partition_is_led() {
    let mut h = Harness::new();
    for b in [1, 2, 3] {
        h.register(b);
    }
    let t = create_min_isr_2(&mut h, "t");
    shrink(&mut h, &t, vec![1, 2]);
    shrink(&mut h, &t, vec![1]);
    heartbeat_reporting(&mut h, 2, vec![t.clone()], vec![t.clone()]);
    let s = h.part(&t);
    assert_eq!(
        (s.leader, s.elr, s.last_known_elr),
        (Some(1), vec![], vec![2])
    );
    h.assert_replays();
}

/// The bug zoo's elect-out-of-isr, driven through the real controller: the controller's own
/// debug check stays quiet (a bug switch is on; the simulator is to catch it), but
/// `check_decision` names the decision that elected outside the ISR unreported.
#[test]
fn check_decision_names_the_elect_out_of_isr_bug() {
    let config = ControllerConfig {
        bugs: crate::bugs::Bugs {
            elect_out_of_isr: true,
            ..Default::default()
        },
        ..ControllerConfig::default()
    };
    let mut h = Harness::with_config(config);
    h.register(1);
    h.register(2);
    h.create("t", 1, 2, false);
    let t = tp("t", 0);
    let s = h.part(&t);
    let leader = s.leader.expect("led");
    let other = 3 - leader;
    h.alter(&t, leader, s.leader_epoch, s.partition_epoch, vec![leader])
        .expect("shrink to the leader");
    for _ in 0..60 {
        let before = h.c().image().clone();
        let from = h.c().records().len();
        let events = h.run(SEC, &[other]);
        if h.part(&t).leader != Some(other) {
            continue;
        }
        let records = &h.c().records()[from..];
        assert_eq!(
            check_decision(&before, h.c().image(), records, &events),
            Err(ControllerCheckError::UnreportedUncleanElection {
                tp: t.clone(),
                leader: other,
                leader_epoch: h.part(&t).leader_epoch,
                isr: vec![leader],
                elr: vec![],
            })
        );
        return;
    }
    panic!("the dead leader was never replaced");
}

/// A heartbeat from `b` reporting `corrupt` partitions damaged (and offline) and answering
/// the unclean recovery manager with `log_info`; the reply.
fn heartbeat_answering(
    h: &mut Harness,
    b: NodeId,
    corrupt: Vec<TopicPartition>,
    log_info: Vec<ReplicaLogInfo>,
) -> HeartbeatReply {
    let broker_epoch = h.epochs[&b];
    let metadata_offset = h.c().metadata_end_offset();
    match h.request(
        Requester::Broker(b),
        ControllerRequest::BrokerHeartbeat {
            broker: b,
            broker_epoch,
            metadata_offset,
            offline_partitions: corrupt.clone(),
            corrupt_partitions: corrupt,
            log_info,
        },
    ) {
        ControllerResponse::BrokerHeartbeat(Ok(r)) => r,
        other => panic!("heartbeat reply {other:?}"),
    }
}

fn log_info(
    t: &TopicPartition,
    epoch: u32,
    log_end: Offset,
    hw: Offset,
    damaged: bool,
) -> ReplicaLogInfo {
    ReplicaLogInfo {
        tp: t.clone(),
        leader_epoch: epoch,
        last_epoch: Some(0),
        log_end,
        high_watermark: hw,
        damaged_at: damaged.then_some(log_end),
    }
}

/// A topic of one partition on brokers 1, 2, 3 (min.insync 1) under `strategy`, whose ISR
/// shrank to broker 1, whose copy is then reported damaged: leaderless, at the returned
/// leader epoch.
fn last_isr_member_damaged(
    h: &mut Harness,
    strategy: UncleanRecoveryStrategy,
) -> (TopicPartition, u32) {
    for b in [1, 2, 3] {
        h.register(b);
    }
    let r = h.request(
        Requester::Client(0),
        ControllerRequest::CreateTopic {
            name: "u".into(),
            config: TopicConfig {
                replication_factor: 3,
                unclean_recovery_strategy: strategy,
                ..TopicConfig::default()
            },
            assignment: Some(vec![vec![1, 2, 3]]),
        },
    );
    assert!(matches!(
        r,
        ControllerResponse::CreateTopic { result: Ok(_), .. }
    ));
    let t = tp("u", 0);
    shrink(h, &t, vec![1]);
    heartbeat_answering(h, 1, vec![t.clone()], Vec::new());
    let s = h.part(&t);
    assert_eq!((s.leader, s.isr.clone()), (None, vec![1]), "{s:?}");
    (t, s.leader_epoch)
}

/// KIP-966's unclean recovery, Balanced: the last ISR member's copy is damaged, so the
/// manager asks every replica, waits for the ISR member's answer, and elects the replica
/// with the longest log (it reaches every reported HW); the election is written with an
/// `UncleanRecovery` record and reported.
#[test]
fn balanced_recovery_elects_the_longest_log_once_the_damaged_member_answered() {
    let mut h = Harness::new();
    let (t, epoch) = last_isr_member_damaged(&mut h, UncleanRecoveryStrategy::Balanced);
    let asked = h.heartbeat(2);
    assert_eq!(asked.log_info_queries, vec![(t.clone(), epoch)]);
    heartbeat_answering(
        &mut h,
        3,
        Vec::new(),
        vec![log_info(&t, epoch, 30, 20, false)],
    );
    heartbeat_answering(
        &mut h,
        2,
        Vec::new(),
        vec![log_info(&t, epoch, 40, 30, false)],
    );
    assert_eq!(h.part(&t).leader, None, "waits for the ISR member's answer");
    let (_, events) = h.request_with_events(
        Requester::Broker(1),
        ControllerRequest::BrokerHeartbeat {
            broker: 1,
            broker_epoch: h.epochs[&1],
            metadata_offset: h.c().metadata_end_offset(),
            offline_partitions: vec![t.clone()],
            corrupt_partitions: vec![t.clone()],
            log_info: vec![log_info(&t, epoch, 35, 38, true)],
        },
    );
    let s = h.part(&t);
    assert_eq!((s.leader, s.isr.clone()), (Some(2), vec![2]), "{s:?}");
    assert_eq!(s.recovered_at_epoch, Some(s.leader_epoch));
    assert!(
        events.iter().any(|e| matches!(
            e,
            ControllerEvent::UncleanRecovery {
                leader: 2,
                log_end: 40,
                committed: 38,
                answers: 3,
                ..
            }
        )),
        "{events:?}"
    );
    assert!(events
        .iter()
        .any(|e| matches!(e, ControllerEvent::UncleanLeaderElection { leader: 2, .. })));
    assert!(
        h.heartbeat(3).log_info_queries.is_empty(),
        "the round is over"
    );
    h.assert_replays();
}

/// Balanced never elects a replica whose log ends below a high watermark some replica
/// reported, not even after the timeout; Aggressive elects the best answer at once (here
/// the damaged member, which cuts at its damage); None never asks.
#[test]
fn balanced_refuses_to_lose_a_reported_commit_aggressive_does_not_none_never_asks() {
    let mut h = Harness::new();
    let (t, epoch) = last_isr_member_damaged(&mut h, UncleanRecoveryStrategy::Balanced);
    heartbeat_answering(
        &mut h,
        1,
        vec![t.clone()],
        vec![log_info(&t, epoch, 35, 38, true)],
    );
    heartbeat_answering(
        &mut h,
        2,
        Vec::new(),
        vec![log_info(&t, epoch, 20, 20, false)],
    );
    h.cluster.now += 11 * SEC;
    h.cluster.tick_all();
    heartbeat_answering(
        &mut h,
        2,
        Vec::new(),
        vec![log_info(&t, epoch, 20, 20, false)],
    );
    assert_eq!(
        h.part(&t).leader,
        None,
        "35 < 38 and 20 < 38: nobody keeps the commits"
    );

    let mut h = Harness::new();
    let (t, epoch) = last_isr_member_damaged(&mut h, UncleanRecoveryStrategy::Aggressive);
    heartbeat_answering(
        &mut h,
        1,
        vec![t.clone()],
        vec![log_info(&t, epoch, 35, 38, true)],
    );
    let s = h.part(&t);
    assert_eq!(s.leader, Some(1), "the first answer is enough: {s:?}");
    assert_eq!(s.recovered_at_epoch, Some(s.leader_epoch));
    // Its next report still names the damage (it has not seen the election yet): it keeps
    // the leadership and cuts.
    heartbeat_answering(&mut h, 1, vec![t.clone()], Vec::new());
    assert_eq!(h.part(&t).leader, Some(1));
    h.assert_replays();

    let mut h = Harness::new();
    let (t, _) = last_isr_member_damaged(&mut h, UncleanRecoveryStrategy::None);
    assert!(h.heartbeat(2).log_info_queries.is_empty());
    assert_eq!(h.part(&t).leader, None);
}

/// Balanced waits for an ISR member that is only fenced (it comes back whole): no query.
#[test]
fn balanced_recovery_waits_for_a_fenced_isr_member() {
    let mut h = Harness::new();
    for b in [1, 2, 3] {
        h.register(b);
    }
    let r = h.request(
        Requester::Client(0),
        ControllerRequest::CreateTopic {
            name: "f".into(),
            config: TopicConfig {
                replication_factor: 3,
                ..TopicConfig::default()
            },
            assignment: Some(vec![vec![1, 2, 3]]),
        },
    );
    assert!(matches!(
        r,
        ControllerResponse::CreateTopic { result: Ok(_), .. }
    ));
    let t = tp("f", 0);
    shrink(&mut h, &t, vec![1]);
    // Broker 1's session runs out; 2 and 3 keep heartbeating.
    h.run(8 * SEC, &[2, 3]);
    let s = h.part(&t);
    assert_eq!((s.leader, s.isr.clone()), (None, vec![1]), "{s:?}");
    assert!(h.heartbeat(2).log_info_queries.is_empty());
}
