//! Broker-level scripted tests: real brokers and the real controller over `MemStorage`,
//! in core's shared harness ([`MemCluster`]), which can cut links, drop messages and crash
//! nodes.

use super::*;
use crate::controller::{Controller, ControllerConfig, TopicConfig};
use crate::log::{EncodedBatch, ProducerInfo};
use crate::node::Machine as _;
use crate::testing::MemStorage;
use crate::testing::{Delivery as _, MemCluster};

pub(crate) const MS: Nanos = 1_000_000;

pub(crate) fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

pub(crate) fn batch(value: &str) -> RecordBatch {
    RecordBatch::from_values(0, [value.as_bytes().to_vec()])
}

pub(crate) fn broker_config() -> BrokerConfig {
    BrokerConfig {
        replica_lag_time_max: 200 * MS,
        fetch_backoff: 2 * MS,
        fetch_max_wait: 20 * MS,
        fetch_timeout: 50 * MS,
        alter_partition_retry: 50 * MS,
        heartbeat_interval: 20 * MS,
        controller_timeout: 50 * MS,
        hw_checkpoint_interval: 50 * MS,
        ..BrokerConfig::default()
    }
}

pub(crate) fn controller_config() -> ControllerConfig {
    ControllerConfig {
        session_timeout: 150 * MS,
        restart_grace: 150 * MS,
        ..ControllerConfig::default()
    }
}

/// A whole cluster in one deterministic world: core's shared harness ([`MemCluster`], which
/// it derefs to for the nodes, disks, queue and links) plus the produce bookkeeping these
/// tests share.
pub(crate) struct World {
    pub cluster: MemCluster,
    pub config: BrokerConfig,
    pub correlation: u64,
    /// Values of acks=all produce requests, by correlation.
    pub acks_all: BTreeMap<u64, Vec<u8>>,
}

impl std::ops::Deref for World {
    type Target = MemCluster;
    fn deref(&self) -> &MemCluster {
        &self.cluster
    }
}

impl std::ops::DerefMut for World {
    fn deref_mut(&mut self) -> &mut MemCluster {
        &mut self.cluster
    }
}

impl World {
    pub fn new(ids: &[NodeId], config: BrokerConfig) -> Self {
        let mut cluster = MemCluster::new();
        cluster.start_controller(controller_config());
        let mut w = Self {
            cluster,
            config,
            correlation: 0,
            acks_all: BTreeMap::new(),
        };
        for &id in ids {
            w.start(id);
        }
        w
    }

    pub fn start(&mut self, id: NodeId) {
        let config = self.config.clone();
        self.cluster.start_broker(id, config);
    }

    /// Crash a broker: it loses every unsynced byte and every message in flight to it.
    pub fn crash(&mut self, id: NodeId) {
        self.cluster.crash_broker(id);
    }

    pub fn crash_controller(&mut self) {
        self.cluster.crash_controller(1);
    }

    pub fn restart_controller(&mut self) {
        self.cluster.start_controller(controller_config());
    }

    /// The controller, while up.
    pub fn controller(&self) -> Option<&Controller<MemStorage>> {
        self.cluster.single_controller()
    }

    pub fn run(&mut self, duration: Nanos) {
        let end = self.now + duration;
        while self.now < end {
            self.now += MS;
            self.tick_all();
            self.deliver_all();
        }
    }

    /// Run until `f` holds (checked every millisecond), at most `limit`.
    pub fn run_until(&mut self, limit: Nanos, mut f: impl FnMut(&mut Self) -> bool) -> bool {
        let end = self.now + limit;
        while self.now < end {
            if f(self) {
                return true;
            }
            self.now += MS;
            self.tick_all();
            self.deliver_all();
        }
        f(self)
    }

    pub fn admin(&mut self, req: ControllerRequest) {
        self.net.queue.push_back((
            Address::Client(0),
            Address::Controller(1),
            Message::ControllerRequest(req),
        ));
        self.deliver_all();
    }

    pub fn create_topic(&mut self, rf: u16, min_insync: u16) {
        let config = TopicConfig {
            partitions: 1,
            replication_factor: rf,
            min_insync_replicas: min_insync,
            ..TopicConfig::default()
        };
        self.admin(ControllerRequest::CreateTopic {
            name: "t".into(),
            config,
            assignment: None,
        });
        let ok = self.run_until(2000 * MS, |w| {
            w.leader().is_some() && w.isr_of_leader().len() == rf as usize
        });
        assert!(ok, "no leader with a full ISR for the new topic");
    }

    /// The broker that considers itself leader at the highest epoch.
    pub fn leader(&self) -> Option<NodeId> {
        self.brokers
            .iter()
            .filter_map(|(&id, b)| b.replica_view(&tp()).map(|v| (id, v)))
            .filter(|(_, v)| v.role == ReplicaRole::Leader)
            .max_by_key(|(_, v)| v.leader_epoch)
            .map(|(id, _)| id)
    }

    pub fn view(&self, id: NodeId) -> ReplicaView {
        self.brokers[&id].replica_view(&tp()).expect("hosted")
    }

    pub fn isr_of_leader(&self) -> Vec<NodeId> {
        self.leader().map(|l| self.view(l).isr).unwrap_or_default()
    }

    pub fn send_produce(&mut self, to: NodeId, acks: Acks, batch: RecordBatch) -> u64 {
        self.correlation += 1;
        let req = ProduceRequest {
            correlation: self.correlation,
            tp: tp(),
            acks,
            timeout: 500 * MS,
            batch: EncodedBatch::encode(&batch).expect("encodable"),
            transactional_id: None,
        };
        self.net
            .queue
            .push_back((Address::Client(1), Address::Node(to), req.into()));
        self.correlation
    }

    pub fn produce_response(&self, correlation: u64) -> Option<Result<ProduceAck, ProduceError>> {
        self.inbox.iter().find_map(|(_, m)| match m {
            Message::ProduceResponse(r) if r.correlation == correlation => Some(r.result.clone()),
            _ => None,
        })
    }

    /// Produce to the current leader and wait for the answer.
    pub fn produce_wait(&mut self, acks: Acks, value: &str) -> Result<ProduceAck, ProduceError> {
        let leader = self.leader().expect("a leader");
        let c = self.send_produce(leader, acks, batch(value));
        self.run_until(1000 * MS, |w| w.produce_response(c).is_some());
        self.produce_response(c).expect("an answer")
    }

    /// Data records (offset, value) of a broker's whole log.
    pub fn values(&mut self, id: NodeId) -> Vec<(Offset, String)> {
        let b = self.brokers.get_mut(&id).expect("up");
        let Some(v) = b.replica_view(&tp()) else {
            return Vec::new();
        };
        b.read_records(&tp(), v.log_start_offset, v.log_end_offset)
            .expect("read")
            .into_iter()
            .flat_map(|b| {
                b.data_records()
                    .map(|(o, r)| {
                        let value = r.value.as_deref().unwrap_or_default();
                        (o, String::from_utf8_lossy(value).into_owned())
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    pub fn consume(&mut self, id: NodeId) -> Result<ConsumerRecords, ConsumerFetchError> {
        self.correlation += 1;
        let req = ConsumerFetchRequest {
            correlation: self.correlation,
            tp: tp(),
            offset: 0,
            max_bytes: 1 << 20,
            current_leader_epoch: None,
            last_fetched_epoch: None,
            isolation: Default::default(),
        };
        let c = self.correlation;
        self.net.queue.push_back((
            Address::Client(2),
            Address::Node(id),
            Message::ConsumerFetch(req),
        ));
        self.deliver_all();
        self.inbox
            .iter()
            .find_map(|(_, m)| match m {
                Message::ConsumerFetchResponse(r) if r.correlation == c => Some(r.result.clone()),
                _ => None,
            })
            .expect("consumer answer")
    }
}

fn three() -> World {
    let mut w = World::new(&[1, 2, 3], broker_config());
    w.run(100 * MS);
    w.create_topic(3, 2);
    w
}

#[test]
fn brokers_register_and_replicate_to_hw() {
    let mut w = three();
    let leader = w.leader().unwrap();
    let ack = w.produce_wait(Acks::All, "a").expect("acked");
    assert_eq!(ack.leader_epoch, w.view(leader).leader_epoch);
    w.run(50 * MS);
    let leo = w.view(leader).log_end_offset;
    for id in [1, 2, 3] {
        let v = w.view(id);
        assert_eq!(v.log_end_offset, leo, "node {id}");
        assert!(v.high_watermark > ack.base_offset, "node {id}: {v:?}");
        assert_eq!(v.flushed_offset, leo);
        assert_eq!(w.values(id), vec![(ack.base_offset, "a".to_string())]);
    }
    let recs = w.consume(leader).expect("consume");
    assert_eq!(recs.batches.len(), 1);
    // Metadata from any broker names the leader.
    let follower = [1, 2, 3].into_iter().find(|&n| n != leader).unwrap();
    w.net.queue.push_back((
        Address::Client(3),
        Address::Node(follower),
        Message::Metadata(MetadataRequest {
            correlation: 99,
            topics: Some(vec!["t".into(), "nope".into()]),
        }),
    ));
    w.deliver_all();
    let md = w
        .inbox
        .iter()
        .find_map(|(_, m)| match m {
            Message::MetadataResponse(r) => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(md.partitions[0].leader, Some(leader));
    assert_eq!(md.unknown_topics, vec!["nope".to_string()]);
    // A consumer at a follower is told who leads.
    assert!(matches!(
        w.consume(follower),
        Err(ConsumerFetchError::NotLeader { leader: Some(l), .. }) if l == leader
    ));
}

#[test]
fn follower_crash_shrinks_isr_and_restart_rejoins() {
    let mut w = three();
    let leader = w.leader().unwrap();
    let f = [1, 2, 3].into_iter().find(|&n| n != leader).unwrap();
    w.produce_wait(Acks::All, "a").unwrap();
    w.crash(f);
    // The controller fences it (or the leader shrinks the ISR); writes go on with 2.
    assert!(w.run_until(1000 * MS, |w| !w.isr_of_leader().contains(&f)));
    let ack = w
        .produce_wait(Acks::All, "b")
        .expect("ISR of 2 >= min.insync");
    w.start(f);
    assert!(w.run_until(2000 * MS, |w| w.isr_of_leader().contains(&f)));
    w.run(50 * MS);
    assert_eq!(w.values(f), w.values(leader));
    assert!(w.values(f).contains(&(ack.base_offset, "b".to_string())));
}

#[test]
fn leader_crash_fails_over_without_losing_acknowledged_writes() {
    let mut w = three();
    let old = w.leader().unwrap();
    let mut acked = Vec::new();
    for v in ["a", "b", "c"] {
        let ack = w.produce_wait(Acks::All, v).unwrap();
        acked.push((ack.base_offset, v.to_string()));
    }
    // An acks=1 write only the old leader has when it dies.
    for f in [1, 2, 3] {
        if f != old {
            w.isolate(Address::Node(f));
        }
    }
    let c = w.send_produce(old, Acks::Leader, batch("lost-ok"));
    w.deliver_all();
    assert!(matches!(w.produce_response(c), Some(Ok(_))));
    w.net.cut.clear();
    w.crash(old);
    assert!(w.run_until(2000 * MS, |w| w.leader().is_some_and(|l| l != old)));
    let new = w.leader().unwrap();
    let values = w.values(new);
    for a in &acked {
        assert!(
            values.contains(a),
            "acked {a:?} lost on new leader {new}: {values:?}"
        );
    }
    let d = w.produce_wait(Acks::All, "d").unwrap();
    // The old leader comes back, truncates its acks=1 suffix and follows.
    w.start(old);
    assert!(w.run_until(3000 * MS, |w| w.isr_of_leader().contains(&old)));
    w.run(50 * MS);
    assert_eq!(w.values(old), w.values(new));
    assert!(w.values(old).contains(&(d.base_offset, "d".to_string())));
    assert!(w.values(old).iter().all(|(_, v)| v != "lost-ok"));
}

#[test]
fn every_replica_crashing_keeps_acknowledged_writes() {
    let mut w = three();
    let mut acked = Vec::new();
    for v in ["a", "b"] {
        let ack = w.produce_wait(Acks::All, v).unwrap();
        acked.push((ack.base_offset, v.to_string()));
    }
    for id in [1, 2, 3] {
        w.crash(id);
    }
    for id in [1, 2, 3] {
        w.start(id);
    }
    assert!(w.run_until(3000 * MS, |w| w.leader().is_some()));
    let l = w.leader().unwrap();
    let values = w.values(l);
    for a in &acked {
        assert!(values.contains(a), "{a:?} lost: {values:?}");
    }
}

#[test]
fn zombie_leader_after_partition_cannot_acknowledge() {
    let mut w = three();
    let zombie = w.leader().unwrap();
    w.produce_wait(Acks::All, "a").unwrap();
    w.isolate(Address::Node(zombie));
    assert!(w.run_until(2000 * MS, |w| w.leader().is_some_and(|l| l != zombie)));
    let new = w.leader().unwrap();
    // The zombie still thinks it leads its (older) epoch.
    assert_eq!(w.view(zombie).role, ReplicaRole::Leader);
    assert!(w.view(zombie).leader_epoch < w.view(new).leader_epoch);
    let c = w.send_produce(zombie, Acks::All, batch("zombie"));
    let good = w.send_produce(new, Acks::All, batch("good"));
    w.run(600 * MS);
    assert!(matches!(w.produce_response(good), Some(Ok(_))));
    assert!(
        matches!(
            w.produce_response(c),
            Some(Err(ProduceError::RequestTimedOut))
        ),
        "zombie answered {:?}",
        w.produce_response(c)
    );
    w.net.cut.clear();
    assert!(w.run_until(2000 * MS, |w| w.view(zombie).role
        == ReplicaRole::Follower { leader: new }));
    w.run(100 * MS);
    assert_eq!(w.values(zombie), w.values(new));
    assert!(w.values(zombie).iter().all(|(_, v)| v != "zombie"));
}

#[test]
fn isr_below_min_insync_refuses_acks_all() {
    let mut w = three();
    let leader = w.leader().unwrap();
    for f in [1, 2, 3] {
        if f != leader {
            w.crash(f);
        }
    }
    assert!(w.run_until(2000 * MS, |w| w.isr_of_leader() == vec![leader]));
    let r = w.produce_wait(Acks::All, "x");
    assert!(
        matches!(
            r,
            Err(ProduceError::NotEnoughReplicas {
                isr: 1,
                min_insync: 2
            })
        ),
        "{r:?}"
    );
    // acks=1 still works.
    assert!(w.produce_wait(Acks::Leader, "y").is_ok());
}

#[test]
fn producer_retry_after_lost_response_is_not_duplicated() {
    let mut w = three();
    let leader = w.leader().unwrap();
    let mut b = batch("once");
    b.producer = Some(ProducerInfo {
        producer_id: 42,
        producer_epoch: 0,
        base_sequence: 0,
    });
    // The response is lost on the way back.
    w.net
        .cut
        .insert((Address::Node(leader), Address::Client(1)));
    let c1 = w.send_produce(leader, Acks::All, b.clone());
    w.run(100 * MS);
    assert_eq!(w.produce_response(c1), None);
    w.net.cut.clear();
    let c2 = w.send_produce(leader, Acks::All, b);
    w.run_until(500 * MS, |w| w.produce_response(c2).is_some());
    let ack = w.produce_response(c2).unwrap().unwrap();
    assert!(ack.duplicate);
    w.run(50 * MS);
    for id in [1, 2, 3] {
        assert_eq!(w.values(id), vec![(ack.base_offset, "once".to_string())]);
    }
}

#[test]
fn controller_down_leaders_keep_serving() {
    let mut w = three();
    w.crash_controller();
    let ack = w
        .produce_wait(Acks::All, "a")
        .expect("ISR unchanged, no controller needed");
    w.run(300 * MS);
    w.restart_controller();
    w.run(300 * MS);
    let l = w.leader().unwrap();
    assert!(w.values(l).contains(&(ack.base_offset, "a".to_string())));
    assert!(w.produce_wait(Acks::All, "b").is_ok());
}

#[test]
fn restarted_broker_reopens_its_logs_before_metadata() {
    let mut w = three();
    w.produce_wait(Acks::All, "a").unwrap();
    w.run(50 * MS);
    let leader = w.leader().unwrap();
    let f = [1, 2, 3].into_iter().find(|&n| n != leader).unwrap();
    w.run(100 * MS); // a checkpoint interval passes
    let leo = w.view(f).log_end_offset;
    let hw = w.view(f).high_watermark;
    assert!(hw > 0);
    w.crash(f);
    let (b, reports) = Broker::open(f, broker_config(), w.disks[&f].clone(), w.now).unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].0, tp());
    let v = b.replica_view(&tp()).unwrap();
    assert_eq!(v.role, ReplicaRole::Offline);
    assert_eq!(
        v.log_end_offset, leo,
        "fsynced follower data survives the crash"
    );
    assert!(b.incarnation() >= 2);
}

#[test]
fn deleting_a_topic_removes_replicas_and_data() {
    let mut w = three();
    w.produce_wait(Acks::All, "a").unwrap();
    w.admin(ControllerRequest::DeleteTopic { name: "t".into() });
    assert!(w.run_until(500 * MS, |w| w
        .brokers
        .values()
        .all(|b| b.partitions().is_empty())));
    for d in w.disks.values() {
        assert!(
            d.files()
                .iter()
                .all(|(p, len, _)| !p.starts_with("t-0/") || *len == 0),
            "{:?}",
            d.files()
        );
    }
}

#[test]
fn unknown_partitions_get_typed_errors() {
    let mut w = three();
    let other = TopicPartition::new("nope", 0);
    let mut req = ProduceRequest {
        correlation: 500,
        tp: other.clone(),
        acks: Acks::All,
        timeout: MS,
        batch: EncodedBatch::encode(&batch("x")).unwrap(),
        transactional_id: None,
    };
    w.net
        .queue
        .push_back((Address::Client(1), Address::Node(1), req.clone().into()));
    req.acks = Acks::None;
    req.correlation = 501;
    w.net
        .queue
        .push_back((Address::Client(1), Address::Node(1), req.into()));
    w.net.queue.push_back((
        Address::Node(2),
        Address::Node(1),
        Message::Fetch(FetchRequest {
            correlation: 502,
            tp: other,
            replica_id: 2,
            current_leader_epoch: 0,
            fetch_offset: 0,
            last_fetched_epoch: None,
            max_bytes: 1,
            high_watermark: 0,
            max_wait: 0,
        }),
    ));
    w.deliver_all();
    assert_eq!(
        w.produce_response(500),
        Some(Err(ProduceError::UnknownTopicOrPartition))
    );
    assert_eq!(w.produce_response(501), None, "acks=0 gets no answer");
    // A fetch claiming to be from another replica than its sender is refused.
    let leader = w.leader().unwrap();
    let follower = [1, 2, 3].into_iter().find(|&n| n != leader).unwrap();
    let resp = {
        let b = w.brokers.get_mut(&leader).unwrap();
        b.step(
            0,
            Address::Client(9),
            Message::Fetch(FetchRequest {
                correlation: 503,
                tp: tp(),
                replica_id: follower,
                current_leader_epoch: 0,
                fetch_offset: 0,
                last_fetched_epoch: None,
                max_bytes: 1,
                high_watermark: 0,
                max_wait: 0,
            }),
        );
        b.poll_outputs()
    };
    assert!(resp.iter().any(|o| matches!(
        o,
        NodeOutput::Send {
            msg: Message::FetchResponse(FetchResponse {
                result: FetchResult::Error(FetchError::NotAssignedReplica(_)),
                ..
            }),
            ..
        }
    )));
}

/// Drive the cluster the way the simulator does — jumping from one `next_timeout` to the
/// next — and check that no timer stays due after its tick (which would spin a driver)
/// and that an idle cluster wakes up rarely.
#[test]
fn next_timeout_never_spins_and_idle_cluster_sleeps() {
    let mut w = three();
    w.produce_wait(Acks::All, "a").unwrap();
    let start = w.now;
    let mut wakeups = 0;
    while w.now < start + 2000 * MS {
        w.deliver_all();
        let next = w
            .brokers
            .values()
            .filter_map(|b| b.poll_timeout())
            .chain(w.controllers.values().filter_map(|c| c.poll_timeout()))
            .min()
            .expect("some timer");
        assert!(
            next > w.now || wakeups == 0,
            "timer due at {next} still pending at {}",
            w.now
        );
        w.now = next.max(w.now + 1);
        w.tick_all();
        for b in w.brokers.values() {
            let t = b.poll_timeout().unwrap();
            assert!(
                t > w.now,
                "broker {} due again at once ({t} <= {})",
                b.id(),
                w.now
            );
        }
        wakeups += 1;
    }
    // Heartbeats every 20ms from 3 brokers plus held fetches expiring: well under 1000.
    assert!(wakeups < 1000, "{wakeups} wakeups in 2s of idle time");
    assert!(w.produce_wait(Acks::All, "b").is_ok());
}

#[test]
fn corrupt_broker_state_file_is_a_typed_error() {
    let disk = MemStorage::new();
    let mut d = disk.clone();
    d.write_atomic("broker.meta", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff")
        .unwrap();
    match Broker::open(1, broker_config(), disk, 0) {
        Err(BrokerError::Meta { path, .. }) => assert_eq!(path, "broker.meta"),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("opened a broker over a corrupt state file"),
    }
}

/// The first segment of `id`'s log of `tp()`.
fn segment_path(w: &World, id: NodeId) -> String {
    w.disks[&id]
        .files()
        .into_iter()
        .map(|(path, _, _)| path)
        .find(|p| p.starts_with("t-0.") && p.ends_with(".log"))
        .expect("a log segment")
}

/// Flip a bit in the middle of `id`'s first segment (inside an already written batch).
fn flip_bit_in_log(w: &World, id: NodeId) {
    let path = segment_path(w, id);
    let len = w.disks[&id].contents(&path).expect("segment").len() as u64;
    assert!(w.disks[&id].flip_bit(&path, len / 2, 3));
}

fn controller_leader(w: &World) -> Option<NodeId> {
    let c = w.controller().expect("controller up");
    c.image().partition(&tp()).expect("partition").leader
}

fn had_event(w: &World, id: NodeId, f: impl Fn(&BrokerEvent) -> bool) -> bool {
    w.events.iter().any(|(n, e)| *n == id && f(e))
}

#[test]
fn bit_flip_in_leader_log_moves_leadership_and_the_copy_is_repaired() {
    let mut w = three();
    let mut acked = Vec::new();
    for v in ["a", "b", "c", "d", "e", "f"] {
        let ack = w.produce_wait(Acks::All, v).expect("acked");
        acked.push((ack.base_offset, v.to_string()));
    }
    w.run(50 * MS);
    let old = w.leader().unwrap();
    flip_bit_in_log(&w, old);
    // A read of the flipped batch (here a consumer's) finds the CRC mismatch.
    assert!(matches!(
        w.consume(old),
        Err(ConsumerFetchError::Storage(_))
    ));
    assert!(had_event(&w, old, |e| matches!(
        e,
        BrokerEvent::Replica(Event::LogFailed { .. })
    )));
    assert!(w.brokers[&old].offline_partitions().contains(&tp()));
    // Reported at once: a heartbeat is due now, unless one is already on its way (the
    // replica set's cached offline flag must have seen the failure).
    let b = &w.brokers[&old];
    assert!(b.heartbeat_in_flight || b.poll_timeout() == Some(0));
    // The controller hears of it in a heartbeat and elects another ISR member.
    let moved = w.run_until(500 * MS, |w| {
        controller_leader(w).is_some_and(|l| l != old) && w.leader().is_some_and(|l| l != old)
    });
    assert!(moved, "leadership did not move off the corrupt log");
    let new = w.leader().unwrap();
    for a in &acked {
        assert!(w.values(new).contains(a), "acknowledged {a:?} lost");
    }
    assert!(
        w.produce_wait(Acks::All, "g").is_ok(),
        "partition available again"
    );
    // The old leader refills its damaged batch with the new leader's copy (peer repair:
    // nothing cut), catches up and rejoins the ISR.
    let repaired = w.run_until(2000 * MS, |w| {
        had_event(w, old, |e| {
            matches!(e, BrokerEvent::Replica(Event::BatchRepaired { .. }))
        }) && w.isr_of_leader().contains(&old)
    });
    assert!(
        repaired,
        "the corrupt copy was not repaired and re-added to the ISR"
    );
    assert!(w.brokers[&old].offline_partitions().is_empty());
    assert!(!had_event(&w, old, |e| matches!(
        e,
        BrokerEvent::PartitionRepaired { .. }
    )));
    w.run(100 * MS);
    assert_eq!(w.values(old), w.values(new));
}

/// Flip a bit in the last byte (a record, under the CRC) of the batch holding `offset` in
/// `id`'s first segment of the partition whose directory starts with `dir` (`"t-0."`).
pub(super) fn flip_bit_in_batch(w: &World, id: NodeId, dir: &str, offset: Offset) {
    let path = w.disks[&id]
        .files()
        .into_iter()
        .map(|(path, _, _)| path)
        .find(|p| p.starts_with(dir) && p.ends_with(".log"))
        .expect("a log segment");
    let data = w.disks[&id].contents(&path).expect("segment");
    let mut pos = 0usize;
    loop {
        let (b, len) = RecordBatch::decode(&data[pos..]).expect("an intact batch");
        if b.next_offset() > offset {
            assert!(w.disks[&id].flip_bit(&path, (pos + len - 1) as u64, 0));
            return;
        }
        pos += len;
    }
}

#[test]
fn two_copies_damaged_at_different_offsets_repair_each_other() {
    let mut w = three();
    let mut acked = Vec::new();
    for v in ["a", "b", "c", "d", "e", "f"] {
        let ack = w.produce_wait(Acks::All, v).expect("acked");
        acked.push((ack.base_offset, v.to_string()));
    }
    w.run(50 * MS);
    let first = w.leader().unwrap();
    let others: Vec<NodeId> = [1, 2, 3].into_iter().filter(|&n| n != first).collect();
    // The third copy is gone for good; the two left are each damaged at another batch.
    w.crash(others[1]);
    let second = others[0];
    let fenced = w.run_until(1000 * MS, |w| !w.isr_of_leader().contains(&others[1]));
    assert!(fenced, "the crashed broker did not leave the ISR");
    flip_bit_in_batch(&w, first, "t-0.", acked[0].0);
    flip_bit_in_batch(&w, second, "t-0.", acked[4].0);
    // A read finds the leader's damage; the next leader finds its own when it reads its
    // log through (rebuilding producer state).
    assert!(w.consume(first).is_err());
    // Neither copy could be cut (each is the last whole copy of a batch): they trade the
    // damaged batches and one of them leads again, with every acknowledged record.
    let back = w.run_until(5000 * MS, |w| {
        w.leader().is_some()
            && w.brokers[&first].offline_partitions().is_empty()
            && w.brokers[&second].offline_partitions().is_empty()
    });
    assert!(back, "the partition did not come back");
    for id in [first, second] {
        assert!(had_event(&w, id, |e| matches!(
            e,
            BrokerEvent::Replica(Event::LogFailed { .. })
        )));
        assert!(had_event(&w, id, |e| matches!(
            e,
            BrokerEvent::Replica(Event::BatchRepaired { .. })
        )));
        assert!(!had_event(&w, id, |e| matches!(
            e,
            BrokerEvent::PartitionRepaired { .. }
        )));
        let values = w.values(id);
        for a in &acked {
            assert!(values.contains(a), "acknowledged {a:?} lost on {id}");
        }
    }
    let both = w.run_until(2000 * MS, |w| w.isr_of_leader().len() == 2);
    assert!(
        both,
        "the other copy did not rejoin the ISR: {:?}",
        w.isr_of_leader()
    );
    assert!(w.produce_wait(Acks::All, "g").is_ok(), "available again");
}

#[test]
fn last_isr_member_whose_log_fails_to_open_gives_way_to_an_eligible_replica() {
    let mut w = three();
    let ack = w.produce_wait(Acks::All, "a").expect("acked");
    let leader = w.leader().unwrap();
    let others: Vec<NodeId> = [1, 2, 3].into_iter().filter(|&n| n != leader).collect();
    for &n in &others {
        w.crash(n);
    }
    // The ISR shrinks to the leader alone: it is the only copy known to be complete.
    let shrunk = w.run_until(2000 * MS, |w| w.isr_of_leader() == vec![leader]);
    assert!(shrunk);
    w.crash(leader);
    // Its session times out: the partition is leaderless, the ISR keeps its last member.
    assert!(w.run_until(1000 * MS, |w| controller_leader(w).is_none()));
    flip_bit_in_log(&w, leader);
    w.start(leader);
    assert!(w.brokers[&leader].failed_partitions().contains_key(&tp()));
    let mut elected = Vec::new();
    w.run_until(500 * MS, |w| {
        elected.push(controller_leader(w));
        false
    });
    assert!(
        elected.iter().all(|l| l.is_none()),
        "offline replica elected: {elected:?}"
    );
    // Registered and heartbeating, but offline for the partition: not elected, and the
    // controller knows why.
    assert_eq!(controller_leader(&w), None);
    let c = w.controller().unwrap();
    assert!(c.offline_partitions(leader).contains(&tp()));
    assert!(c.image().is_unfenced(leader));
    // The other replicas come back. They left an ISR already below min.insync.replicas,
    // so they are eligible leader replicas (KIP-966): the HW has not moved since, they hold
    // every acknowledged write, and one is elected cleanly.
    assert!(!c.image().partition(&tp()).unwrap().elr.is_empty());
    for &n in &others {
        w.start(n);
    }
    assert!(w.run_until(1000 * MS, |w| controller_leader(w)
        .is_some_and(|l| others.contains(&l))));
    let new = controller_leader(&w).unwrap();
    let v = w.brokers[&new].replica_view(&tp()).unwrap();
    assert!(v.log_end_offset > ack.base_offset, "{v:?} lacks {ack:?}");
}

#[test]
fn follower_whose_log_fails_to_open_is_repaired_from_the_leader() {
    let mut w = three();
    for v in ["a", "b", "c"] {
        w.produce_wait(Acks::All, v).expect("acked");
    }
    w.run(100 * MS);
    let leader = w.leader().unwrap();
    let f = [1, 2, 3].into_iter().find(|&n| n != leader).unwrap();
    w.crash(f);
    flip_bit_in_log(&w, f);
    w.start(f);
    assert!(w.brokers[&f].failed_partitions().contains_key(&tp()));
    let repaired = w.run_until(2000 * MS, |w| {
        had_event(w, f, |e| matches!(e, BrokerEvent::PartitionRepaired { .. }))
            && w.isr_of_leader().contains(&f)
    });
    assert!(repaired, "the follower did not refetch and rejoin the ISR");
    assert!(w.brokers[&f].failed_partitions().is_empty());
    w.run(100 * MS);
    assert_eq!(w.values(f), w.values(leader));
}

#[test]
fn leader_that_cannot_read_its_whole_log_takes_no_idempotent_retry() {
    let mut w = three();
    let mut b = batch("once");
    b.producer = Some(ProducerInfo {
        producer_id: 42,
        producer_epoch: 0,
        base_sequence: 0,
    });
    let leader = w.leader().unwrap();
    let c1 = w.send_produce(leader, Acks::All, b.clone());
    w.run_until(500 * MS, |w| w.produce_response(c1).is_some());
    assert!(w.produce_response(c1).unwrap().is_ok());
    w.run(100 * MS);
    // Both followers' copies of the batch rot; the leader dies.
    let followers: Vec<NodeId> = [1, 2, 3].into_iter().filter(|&n| n != leader).collect();
    for &n in &followers {
        flip_bit_in_log(&w, n);
    }
    w.crash(leader);
    w.run(1000 * MS);
    // Whoever was elected could not rebuild its producer state and went offline instead
    // of leading with a partial table.
    assert!(followers.iter().any(|&n| had_event(&w, n, |e| matches!(
        e,
        BrokerEvent::Replica(Event::LogFailed { reason, .. }) if reason.contains("producer state")
    ))));
    // The producer's retry is never taken for a new write.
    for &n in &followers {
        let c = w.send_produce(n, Acks::All, b.clone());
        w.run_until(500 * MS, |w| w.produce_response(c).is_some());
        match w.produce_response(c) {
            Some(Err(ProduceError::NotLeader { .. })) | None => {}
            other => panic!("broker {n} answered the retry with {other:?}"),
        }
    }
    for &n in &followers {
        assert_eq!(w.view(n).role, ReplicaRole::Offline);
    }
}

#[test]
fn controlled_shutdown_hands_leadership_over_then_syncs() {
    let mut w = three();
    let old = w.leader().unwrap();
    let a = w.produce_wait(Acks::All, "a").unwrap();
    let now = w.now;
    let b = w.brokers.get_mut(&old).unwrap();
    b.begin_controlled_shutdown(now);
    assert!(matches!(
        b.shutdown_phase(),
        Some(ShutdownPhase::Requested { .. })
    ));
    assert!(!b.ready_to_stop());
    w.collect();
    // Ready once the controller moved the leadership and this broker's image shows it;
    // long before any session could expire (the broker keeps heartbeating).
    assert!(w.run_until(100 * MS, |w| w.brokers[&old].ready_to_stop()));
    assert_eq!(
        w.brokers[&old].shutdown_phase(),
        Some(&ShutdownPhase::Ready {
            remaining: Vec::new()
        })
    );
    assert!(had_event(&w, old, |e| matches!(
        e,
        BrokerEvent::ReadyToStop { remaining } if remaining.is_empty()
    )));
    assert!(matches!(w.view(old).role, ReplicaRole::Follower { leader } if leader != old));
    // The new leader learns it with its next heartbeat.
    assert!(w.run_until(100 * MS, |w| w.leader().is_some_and(|l| l != old)));
    let new = w.leader().unwrap();
    assert_ne!(new, old);
    assert!(!w.isr_of_leader().contains(&old));
    // It stays out of the ISR while it lingers, and acks=all writes go on without it.
    let c = w.produce_wait(Acks::All, "c").unwrap();
    w.run(300 * MS);
    assert!(
        !w.isr_of_leader().contains(&old),
        "no rejoin while shutting down"
    );
    assert!(w.brokers.get_mut(&old).unwrap().sync_all().is_empty());
    // Its durable log keeps what it acknowledged: a crash now loses nothing of it.
    w.crash(old);
    w.start(old);
    assert!(w.run_until(2000 * MS, |w| w.isr_of_leader().contains(&old)));
    w.run(50 * MS);
    let values = w.values(old);
    assert!(values.contains(&(a.base_offset, "a".to_string())));
    assert!(values.contains(&(c.base_offset, "c".to_string())));
    assert_eq!(values, w.values(new));
}

#[test]
fn controlled_shutdown_of_an_unregistered_broker_is_ready_at_once() {
    let mut w = World::new(&[1], broker_config());
    w.crash_controller();
    w.start(1);
    let now = w.now;
    let b = w.brokers.get_mut(&1).unwrap();
    b.begin_controlled_shutdown(now);
    assert!(b.ready_to_stop());
}

/// The controller requests among a broker's outputs, with where they go.
fn controller_sends(b: &mut Broker<MemStorage>) -> Vec<(Address, ControllerRequest)> {
    b.poll_outputs()
        .into_iter()
        .filter_map(|o| match o {
            NodeOutput::Send {
                to,
                msg: Message::ControllerRequest(r),
            } => Some((to, r)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_broker_follows_the_quorum_on_hints_and_timeouts() {
    let config = BrokerConfig {
        controllers: vec![1, 2, 3],
        ..broker_config()
    };
    let (mut b, _) = Broker::open(1, config, MemStorage::new(), 0).unwrap();
    let sent = controller_sends(&mut b);
    assert!(matches!(
        sent[..],
        [(
            Address::Controller(1),
            ControllerRequest::RegisterBroker { .. }
        )]
    ));
    // Controller 1 is not active and names 3: the registration goes there at once.
    let refused =
        ControllerResponse::RegisterBroker(Err(ControllerError::NotController { leader: Some(3) }));
    b.step(MS, Address::Controller(1), refused.into());
    let sent = controller_sends(&mut b);
    assert!(matches!(
        sent[..],
        [(
            Address::Controller(3),
            ControllerRequest::RegisterBroker { .. }
        )]
    ));
    // 3 never answers: after the controller timeout the next voter (1, wrapping) is tried.
    b.handle_timeout(MS + 50 * MS);
    let sent = controller_sends(&mut b);
    assert!(matches!(
        sent[..],
        [(
            Address::Controller(1),
            ControllerRequest::RegisterBroker { .. }
        )]
    ));
    assert_eq!(b.active_controller(), 1);
    // Controller 1 names nobody (the quorum is electing): the broker waits for its retry
    // timer, then asks the next voter, instead of asking every voter as fast as they refuse.
    let electing =
        ControllerResponse::RegisterBroker(Err(ControllerError::NotController { leader: None }));
    b.step(MS + 51 * MS, Address::Controller(1), electing.into());
    assert!(controller_sends(&mut b).is_empty(), "no request at once");
    b.handle_timeout(MS + 100 * MS);
    let sent = controller_sends(&mut b);
    assert!(matches!(
        sent[..],
        [(
            Address::Controller(2),
            ControllerRequest::RegisterBroker { .. }
        )]
    ));
}

#[test]
fn a_broker_cut_off_from_the_active_controller_stops_taking_produce() {
    let config = BrokerConfig {
        controllers: vec![1, 2, 3],
        session_timeout: Some(100 * MS),
        ..broker_config()
    };
    let (mut b, _) = Broker::open(1, config, MemStorage::new(), 0).unwrap();
    let ok = ControllerResponse::RegisterBroker(Ok(crate::controller::BrokerRegistration {
        broker: 1,
        broker_epoch: 7,
    }));
    b.step(MS, Address::Controller(1), ok.into());
    let heartbeat = |fenced| {
        Message::from(ControllerResponse::BrokerHeartbeat(Ok(HeartbeatReply {
            broker: 1,
            broker_epoch: 7,
            fenced,
            metadata: crate::controller::MetadataDelta {
                from: 0,
                records: Vec::new(),
                end_offset: 0,
            },
            log_info_queries: Vec::new(),
        })))
    };
    // The heartbeat sent at registration (1 ms) is answered: leased until 101 ms.
    b.step(2 * MS, Address::Controller(1), heartbeat(false));
    assert!(!b.session_lapsed());
    let produce = |corr| {
        Message::from(ProduceRequest {
            correlation: corr,
            tp: tp(),
            acks: Acks::All,
            timeout: 100 * MS,
            batch: EncodedBatch::encode(&batch("v")).unwrap(),
            transactional_id: None,
        })
    };
    let answer = |b: &mut Broker<MemStorage>| {
        b.poll_outputs().into_iter().find_map(|o| match o {
            NodeOutput::Send {
                msg: Message::ProduceResponse(r),
                ..
            } => Some(r.result),
            _ => None,
        })
    };
    b.step(3 * MS, Address::Client(9), produce(1));
    assert_eq!(
        answer(&mut b),
        Some(Err(ProduceError::UnknownTopicOrPartition))
    );
    // The next heartbeat leaves at 50 ms and is not answered (yet): at 101 ms the lease is
    // gone.
    b.handle_timeout(50 * MS);
    assert!(controller_sends(&mut b)
        .iter()
        .any(|(_, r)| matches!(r, ControllerRequest::BrokerHeartbeat { .. })));
    b.step(101 * MS, Address::Client(9), produce(2));
    assert!(b.session_lapsed());
    assert!(matches!(
        answer(&mut b),
        Some(Err(ProduceError::NotLeader { .. }))
    ));
    // The 50 ms heartbeat gets through (not fenced): leased until 150 ms, the broker takes
    // produce requests again.
    b.step(102 * MS, Address::Controller(1), heartbeat(false));
    b.step(103 * MS, Address::Client(9), produce(3));
    assert_eq!(
        answer(&mut b),
        Some(Err(ProduceError::UnknownTopicOrPartition))
    );
    // Answered, but fenced: no lease.
    b.handle_timeout(110 * MS);
    let _ = b.poll_outputs();
    b.step(111 * MS, Address::Controller(1), heartbeat(true));
    b.step(112 * MS, Address::Client(9), produce(4));
    assert!(matches!(
        answer(&mut b),
        Some(Err(ProduceError::NotLeader { .. }))
    ));
}

/// `poll_outputs_into` gives what `poll_outputs` would, in order, after what the buffer
/// already holds (an empty one is swapped in), and leaves nothing behind.
#[test]
fn taking_outputs_into_a_buffer_keeps_their_order_after_its_own() {
    let open = || {
        Broker::open(1, broker_config(), MemStorage::new(), 0)
            .unwrap()
            .0
    };
    let want = open().poll_outputs();
    assert!(!want.is_empty(), "a new broker registers");
    let mut b = open();
    let mut out = Vec::new();
    b.poll_outputs_into(&mut out);
    assert_eq!(out, want);
    assert!(b.poll_outputs().is_empty());
    let mut b = open();
    b.poll_outputs_into(&mut out);
    assert_eq!(out, [want.clone(), want].concat());
    assert!(b.poll_outputs().is_empty());
}
