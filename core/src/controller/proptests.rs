//! Property test: random requests, ticks and restarts against the controller, checking its
//! invariants after every step.

use super::*;
use crate::testing::MemStorage;
use crate::testing::{Delivery as _, MemCluster};
use crate::types::{Nanos, NodeId, TopicPartition};
use proptest::prelude::*;
use std::collections::BTreeMap;

const SEC: Nanos = 1_000_000_000;
const BROKERS: u8 = 4;

#[derive(Clone, Debug)]
enum Op {
    Register {
        broker: u8,
        restart: bool,
    },
    Heartbeat {
        broker: u8,
        lose_reply: bool,
        stale_epoch: bool,
    },
    /// Every registered broker but `skip` heartbeats (keeps most of the cluster alive).
    HeartbeatAll {
        skip: u8,
    },
    Advance {
        secs: u8,
    },
    Create {
        partitions: u8,
        rf: u8,
        unclean: bool,
    },
    CreateManual {
        rotate: u8,
        partitions: u8,
        rf: u8,
    },
    Delete {
        topic: u8,
    },
    Alter {
        topic: u8,
        partition: u8,
        isr_mask: u8,
        stale: bool,
        from_follower: bool,
    },
    ElectPreferred,
    InitProducerId,
    ToggleUnclean {
        topic: u8,
    },
    Restart {
        secs: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1..=BROKERS, any::<bool>()).prop_map(|(broker, restart)| Op::Register { broker, restart }),
        6 => (1..=BROKERS, any::<bool>(), prop::bool::weighted(0.1))
            .prop_map(|(broker, lose_reply, stale_epoch)| Op::Heartbeat { broker, lose_reply, stale_epoch }),
        4 => (0..=BROKERS).prop_map(|skip| Op::HeartbeatAll { skip }),
        3 => (0u8..5).prop_map(|secs| Op::Advance { secs }),
        3 => (1u8..4, 1u8..4, any::<bool>()).prop_map(|(partitions, rf, unclean)| Op::Create { partitions, rf, unclean }),
        1 => (any::<u8>(), 1u8..4, 1u8..4).prop_map(|(rotate, partitions, rf)| Op::CreateManual { rotate, partitions, rf }),
        1 => any::<u8>().prop_map(|topic| Op::Delete { topic }),
        8 => (any::<u8>(), any::<u8>(), any::<u8>(), prop::bool::weighted(0.2), prop::bool::weighted(0.1))
            .prop_map(|(topic, partition, isr_mask, stale, from_follower)| Op::Alter { topic, partition, isr_mask, stale, from_follower }),
        1 => Just(Op::ElectPreferred),
        1 => Just(Op::InitProducerId),
        1 => any::<u8>().prop_map(|topic| Op::ToggleUnclean { topic }),
        1 => (0u8..10).prop_map(|secs| Op::Restart { secs }),
    ]
}

/// The single controller in core's shared harness; the brokers and the client are played
/// here.
struct World {
    cluster: MemCluster,
    incarnations: BTreeMap<NodeId, u64>,
    /// Each broker's metadata image, fed only by the heartbeat replies it received.
    broker_images: BTreeMap<NodeId, MetadataImage>,
    /// Highest epochs seen per (topic id, partition), and the state they belong to.
    seen: BTreeMap<(u64, u32), PartitionState>,
    last_producer_id: Option<u64>,
    topic_names: u32,
}

impl World {
    fn new() -> Self {
        let mut cluster = MemCluster::new();
        cluster.start_controller(ControllerConfig::default());
        Self {
            cluster,
            incarnations: BTreeMap::new(),
            broker_images: BTreeMap::new(),
            seen: BTreeMap::new(),
            last_producer_id: None,
            topic_names: 0,
        }
    }

    /// The controller (up).
    fn c(&self) -> &Controller<MemStorage> {
        self.cluster
            .single_controller()
            .expect("the controller is up")
    }

    fn send(&mut self, from: Requester, req: ControllerRequest) -> ControllerResponse {
        self.cluster.ask_controller(from, req).0
    }

    fn topic_at(&self, i: u8) -> Option<String> {
        let names: Vec<&String> = self.c().image().topics.keys().collect();
        (!names.is_empty()).then(|| names[i as usize % names.len()].clone())
    }

    /// Broker `broker` registers (a new incarnation if `restart`, with an empty image).
    fn register(&mut self, broker: u8, restart: bool) {
        let b = NodeId::from(broker);
        let inc = self.incarnations.entry(b).or_insert(0);
        if restart {
            *inc += 1;
            // A restarted broker starts with an empty image.
            self.broker_images.insert(b, MetadataImage::new());
        }
        let incarnation = *inc;
        let r = self.send(
            Requester::Broker(b),
            crate::testing::register_request(b, incarnation),
        );
        let ControllerResponse::RegisterBroker(Ok(reg)) = r else {
            panic!("registration refused: {r:?}")
        };
        assert_eq!(
            self.c().image().broker(b).unwrap().broker_epoch,
            reg.broker_epoch
        );
        assert!(self.c().image().is_unfenced(b), "registration unfences");
        self.broker_images.entry(b).or_default();
    }

    /// Broker `broker` heartbeats (with its previous epoch if `stale_epoch`) and applies
    /// the records it pulled, unless the reply is lost.
    fn heartbeat(&mut self, broker: u8, lose_reply: bool, stale_epoch: bool) {
        let b = NodeId::from(broker);
        let Some(info) = self.c().image().broker(b).cloned() else {
            return;
        };
        let image = self.broker_images.entry(b).or_default();
        let broker_epoch = if stale_epoch && info.broker_epoch > 0 {
            info.broker_epoch - 1
        } else {
            info.broker_epoch
        };
        let metadata_offset = image.next_offset;
        let r = self.send(
            Requester::Broker(b),
            crate::testing::heartbeat_request(b, broker_epoch, metadata_offset),
        );
        match r {
            ControllerResponse::BrokerHeartbeat(Ok(reply)) => {
                assert_eq!(broker_epoch, info.broker_epoch);
                assert!(reply.metadata.records.len() <= self.c().config().max_records_per_pull);
                if !lose_reply {
                    let image = self.broker_images.get_mut(&b).unwrap();
                    image
                        .apply_delta(&reply.metadata)
                        .expect("pulled records apply");
                    let n = image.next_offset as usize;
                    assert_eq!(
                        &self.broker_images[&b],
                        &MetadataImage::from_records(&self.c().records()[..n]).unwrap(),
                        "a broker's image is the controller's as of its offset"
                    );
                }
            }
            ControllerResponse::BrokerHeartbeat(Err(ControllerError::StaleBrokerEpoch {
                ..
            })) => {
                assert_ne!(broker_epoch, info.broker_epoch)
            }
            other => panic!("heartbeat: {other:?}"),
        }
    }

    /// A topic created with the controller's assignment: refused only when fewer brokers
    /// are live than `rf`.
    fn create(&mut self, partitions: u8, rf: u8, unclean: bool) {
        let name = format!("t{}", self.topic_names);
        self.topic_names += 1;
        let config = TopicConfig {
            partitions: partitions.into(),
            replication_factor: rf.into(),
            min_insync_replicas: 1,
            unclean_leader_election: unclean,
            ..TopicConfig::default()
        };
        let live = self.c().image().unfenced_brokers().len();
        let r = self.send(
            Requester::Client(0),
            ControllerRequest::CreateTopic {
                name: name.clone(),
                config,
                assignment: None,
            },
        );
        match r {
            ControllerResponse::CreateTopic { result: Ok(_), .. } => {
                let t = self.c().image().topic(&name).unwrap();
                assert_eq!(t.partitions.len(), usize::from(partitions));
            }
            ControllerResponse::CreateTopic {
                result: Err(ControllerError::InsufficientBrokers { .. }),
                ..
            } => assert!(live < usize::from(rf)),
            other => panic!("create: {other:?}"),
        }
    }

    /// A topic created with an explicit assignment (registered brokers, rotated).
    fn create_manual(&mut self, rotate: u8, partitions: u8, rf: u8) {
        let name = format!("t{}", self.topic_names);
        self.topic_names += 1;
        let registered: Vec<NodeId> = self.c().image().brokers.keys().copied().collect();
        if registered.is_empty() {
            return;
        }
        let rf = usize::from(rf);
        let assignment: Vec<Vec<NodeId>> = (0..usize::from(partitions))
            .map(|p| {
                (0..rf.min(registered.len()))
                    .map(|j| registered[(usize::from(rotate) + p + j) % registered.len()])
                    .collect()
            })
            .collect();
        let valid = registered.len() >= rf
            && assignment
                .iter()
                .all(|r| r.iter().any(|&b| self.c().image().is_unfenced(b)));
        let config = TopicConfig {
            partitions: partitions.into(),
            replication_factor: rf as u16,
            ..TopicConfig::default()
        };
        let r = self.send(
            Requester::Client(0),
            ControllerRequest::CreateTopic {
                name: name.clone(),
                config,
                assignment: Some(assignment.clone()),
            },
        );
        match r {
            ControllerResponse::CreateTopic { result: Ok(_), .. } => {
                assert!(valid);
                for (p, replicas) in assignment.iter().enumerate() {
                    let s = self
                        .c()
                        .image()
                        .partition(&TopicPartition::new(name.clone(), p as u32))
                        .unwrap();
                    assert_eq!(&s.replicas, replicas);
                }
            }
            ControllerResponse::CreateTopic {
                result: Err(ControllerError::InvalidAssignment { .. }),
                ..
            } => assert!(!valid),
            other => panic!("create: {other:?}"),
        }
    }

    /// An AlterPartition (ISR change) for one partition, possibly stale or sent by a
    /// follower.
    fn alter(&mut self, topic: u8, partition: u8, isr_mask: u8, stale: bool, from_follower: bool) {
        let Some(name) = self.topic_at(topic) else {
            return;
        };
        let t = self.c().image().topic(&name).unwrap();
        let p = u32::from(partition) % t.config.partitions;
        let tp = TopicPartition::new(name, p);
        let state = self.c().image().partition(&tp).unwrap().clone();
        let Some(leader) = state.leader else { return };
        let sender = if from_follower {
            match state.replicas.iter().find(|&&r| r != leader) {
                Some(&f) => f,
                None => return,
            }
        } else {
            leader
        };
        let mut new_isr: Vec<NodeId> = state
            .replicas
            .iter()
            .enumerate()
            .filter(|(i, _)| isr_mask & (1 << i) != 0)
            .map(|(_, &r)| r)
            .collect();
        if !new_isr.contains(&sender) && isr_mask & 0x80 == 0 {
            new_isr.push(sender);
        }
        let partition_epoch = if stale {
            state.partition_epoch.wrapping_sub(1)
        } else {
            state.partition_epoch
        };
        let r = self.send(
            Requester::Broker(sender),
            ControllerRequest::AlterPartition {
                tp: tp.clone(),
                leader: sender,
                leader_epoch: state.leader_epoch,
                partition_epoch,
                new_isr: new_isr.clone(),
            },
        );
        let ControllerResponse::AlterPartition { result, .. } = r else {
            panic!()
        };
        let after = self.c().image().partition(&tp).unwrap().clone();
        match result {
            Ok(s) => {
                assert!(!from_follower, "only the leader's proposals succeed");
                assert_eq!(s, after);
                let mut want = new_isr.clone();
                want.sort_by_key(|b| state.replicas.iter().position(|r| r == b));
                assert_eq!(after.isr, want);
                if !stale && after.isr != state.isr {
                    assert_eq!(after.partition_epoch, state.partition_epoch + 1);
                }
                if stale {
                    assert_eq!(after, state, "an accepted stale retry changes nothing");
                }
            }
            Err(e) => {
                assert_eq!(after, state, "a refused proposal changes nothing: {e}");
                let valid = !from_follower
                    && !stale
                    && !new_isr.is_empty()
                    && new_isr.contains(&leader)
                    && new_isr
                        .iter()
                        .all(|&b| state.isr.contains(&b) || self.c().image().is_unfenced(b));
                assert!(!valid, "a valid proposal was refused: {e}");
            }
        }
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::Register { broker, restart } => self.register(broker, restart),
            Op::Heartbeat {
                broker,
                lose_reply,
                stale_epoch,
            } => self.heartbeat(broker, lose_reply, stale_epoch),
            Op::HeartbeatAll { skip } => {
                let brokers: Vec<NodeId> = self.c().image().brokers.keys().copied().collect();
                for b in brokers.into_iter().filter(|&b| b != NodeId::from(skip)) {
                    self.step(&Op::Heartbeat {
                        broker: b as u8,
                        lose_reply: false,
                        stale_epoch: false,
                    });
                }
            }
            Op::Advance { secs } => {
                self.cluster.now += u64::from(secs) * SEC;
                self.cluster.tick_all();
                self.cluster.deliver_all();
                if let Some(t) = self.c().poll_timeout() {
                    assert!(t > self.cluster.now, "tick fenced every expired session");
                }
            }
            Op::Create {
                partitions,
                rf,
                unclean,
            } => self.create(partitions, rf, unclean),
            Op::CreateManual {
                rotate,
                partitions,
                rf,
            } => self.create_manual(rotate, partitions, rf),
            Op::Delete { topic } => {
                if let Some(name) = self.topic_at(topic) {
                    let r = self.send(
                        Requester::Client(0),
                        ControllerRequest::DeleteTopic { name: name.clone() },
                    );
                    assert_eq!(
                        r,
                        ControllerResponse::DeleteTopic {
                            name: name.clone(),
                            result: Ok(())
                        }
                    );
                    assert!(self.c().image().topic(&name).is_none());
                }
            }
            Op::Alter {
                topic,
                partition,
                isr_mask,
                stale,
                from_follower,
            } => self.alter(topic, partition, isr_mask, stale, from_follower),
            Op::ElectPreferred => {
                self.send(
                    Requester::Client(0),
                    ControllerRequest::ElectPreferredLeaders { partitions: None },
                );
            }
            Op::InitProducerId => {
                match self.send(Requester::Client(0), ControllerRequest::InitProducerId) {
                    ControllerResponse::InitProducerId(Ok(p)) => {
                        assert!(
                            self.last_producer_id.is_none_or(|l| p.producer_id > l),
                            "producer ids never repeat"
                        );
                        self.last_producer_id = Some(p.producer_id);
                    }
                    other => panic!("{other:?}"),
                }
            }
            Op::ToggleUnclean { topic } => {
                let Some(name) = self.topic_at(topic) else {
                    return;
                };
                let mut config = self.c().image().topic(&name).unwrap().config.clone();
                config.unclean_leader_election = !config.unclean_leader_election;
                let r = self.send(
                    Requester::Client(0),
                    ControllerRequest::UpdateTopicConfig {
                        name: name.clone(),
                        config,
                    },
                );
                assert_eq!(
                    r,
                    ControllerResponse::UpdateTopicConfig {
                        name,
                        result: Ok(())
                    }
                );
            }
            Op::Restart { secs } => {
                let image = self.c().image().clone();
                self.cluster.crash_controller(1);
                self.cluster.now += u64::from(secs) * SEC;
                self.cluster.start_controller(ControllerConfig::default());
                assert_eq!(
                    self.c().image(),
                    &image,
                    "restart replays to the same image"
                );
            }
        }
    }

    fn check_invariants(&mut self) {
        let image = self.c().image().clone();
        assert_eq!(
            MetadataImage::from_records(self.c().records()).unwrap(),
            image,
            "replaying the log yields the image"
        );
        for (name, topic) in &image.topics {
            for (&p, s) in &topic.partitions {
                s.validate().unwrap_or_else(|e| panic!("{name}-{p}: {e}"));
                if let Some(l) = s.leader {
                    assert!(image.is_unfenced(l), "{name}-{p}: leader {l} is fenced");
                    assert!(s.isr.contains(&l));
                }
                // A live ISR member means there is a leader (election is never skipped).
                if s.isr.iter().any(|&b| image.is_unfenced(b)) {
                    assert!(
                        s.leader.is_some(),
                        "{name}-{p} leaderless with a live ISR member: {s:?}"
                    );
                }
                // The ISR only holds fenced brokers if it is down to its last member.
                if s.isr.len() > 1 {
                    assert!(
                        s.isr.iter().all(|&b| image.is_unfenced(b)),
                        "{name}-{p}: fenced broker in ISR {s:?}"
                    );
                }
                let key = (topic.topic_id, p);
                if let Some(old) = self.seen.get(&key) {
                    assert!(s.leader_epoch >= old.leader_epoch, "leader epoch went back");
                    assert!(
                        s.partition_epoch >= old.partition_epoch,
                        "partition epoch went back"
                    );
                    if s.leader != old.leader {
                        assert!(
                            s.leader_epoch > old.leader_epoch,
                            "leader change without epoch bump"
                        );
                    }
                    if s.leader != old.leader || s.isr != old.isr {
                        assert!(
                            s.partition_epoch > old.partition_epoch,
                            "change without partition epoch bump"
                        );
                    }
                }
                self.seen.insert(key, s.clone());
            }
        }
    }

    /// Every broker that keeps pulling ends up with the controller's image.
    fn catch_up_brokers(&mut self) {
        let brokers: Vec<NodeId> = self.broker_images.keys().copied().collect();
        for b in brokers {
            let epoch = self.c().image().broker(b).unwrap().broker_epoch;
            for _ in 0..1000 {
                let offset = self.broker_images[&b].next_offset;
                if offset == self.c().metadata_end_offset() {
                    break;
                }
                let r = self.send(
                    Requester::Broker(b),
                    crate::testing::heartbeat_request(b, epoch, offset),
                );
                let ControllerResponse::BrokerHeartbeat(Ok(reply)) = r else {
                    panic!("{r:?}")
                };
                self.broker_images
                    .get_mut(&b)
                    .unwrap()
                    .apply_delta(&reply.metadata)
                    .unwrap();
            }
            assert_eq!(&self.broker_images[&b], self.c().image());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn controller_invariants_hold(ops in prop::collection::vec(op(), 1..60)) {
        let mut w = World::new();
        for op in &ops {
            w.step(op);
            w.check_invariants();
        }
        w.catch_up_brokers();
    }
}
