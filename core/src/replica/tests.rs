//! Scripted replica-level tests: three replicas over `PartitionLog`s on `MemStorage`, metadata decisions
//! made by the test (standing in for the controller), on core's shared harness network
//! ([`testing::Net`]), delivered one message at a time where a KIP-101/279/320 sequence
//! needs it reproduced step by step.

use super::*;
use crate::log::{EncodedBatch, EncodedBatches, LogConfig, PartitionLog, ProducerInfo};
use crate::message::*;
use crate::testing::MemStorage;
use crate::testing::{self, Delivery};
use std::collections::BTreeMap;

const MS: Nanos = 1_000_000;
/// The consumer the scripted reads come from (producers are `Client(0)`).
const READER: Address = Address::Client(99);

/// (offset, value) of every data record of a log.
type Values = Vec<(Offset, String)>;

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

fn batch(values: &[&str]) -> RecordBatch {
    RecordBatch::from_values(0, values.iter().map(|v| v.as_bytes().to_vec()))
}

/// What the scripted tests need of a log beyond `ReplicaLog`. Only the real
/// `PartitionLog` over `MemStorage` implements it: one log implementation, so the KIP
/// sequences exercise the real epoch cache and crash recovery.
pub(crate) trait TestLog: ReplicaLog + Sized {
    fn fresh() -> Self;
    /// Lose everything unsynced and come back.
    fn crash(self) -> Self;
    fn all_batches(&mut self) -> Vec<RecordBatch> {
        let end = self.log_end_offset();
        let mut at = self.log_start_offset();
        let mut out = Vec::new();
        while at < end {
            let batches = self.read(at, 1 << 20).expect("read");
            let Some(last) = batches.last() else { break };
            at = last.next_offset();
            out.extend(batches);
        }
        out
    }
}

impl TestLog for PartitionLog<MemStorage> {
    fn fresh() -> Self {
        PartitionLog::open(MemStorage::new(), "t-0", LogConfig::default())
            .expect("open")
            .0
    }
    fn crash(self) -> Self {
        let storage = self.into_storage();
        storage.crash_lose_unsynced();
        PartitionLog::open(storage, "t-0", LogConfig::default())
            .expect("reopen")
            .0
    }
}

/// Data values (control batches left out) of a log, in offset order.
fn values<L: TestLog>(log: &mut L) -> Values {
    log.all_batches()
        .iter()
        .flat_map(|b| {
            b.data_records()
                .map(|(o, r)| (o, String::from_utf8(r.value.clone().unwrap()).unwrap()))
                .collect::<Vec<_>>()
        })
        .collect()
}

struct Net<L: TestLog> {
    now: Nanos,
    config: ReplicaConfig,
    nodes: BTreeMap<NodeId, Replica<L>>,
    /// Logs of crashed nodes, waiting for a restart.
    down: BTreeMap<NodeId, L>,
    net: testing::Net<Address, Message>,
    responses: Vec<ProduceResponse>,
    proposals: Vec<IsrProposal>,
    correlation: u64,
    /// Every replica event, with the node that emitted it.
    events: Vec<(NodeId, Event)>,
    /// Answers to transaction markers (`append_txn_marker`).
    marker_answers: Vec<ProduceResponse>,
}

impl<L: TestLog> Net<L> {
    fn new(ids: &[NodeId], config: ReplicaConfig) -> Self {
        let nodes = ids
            .iter()
            .map(|&id| (id, Replica::new(tp(), id, L::fresh(), config.clone())))
            .collect();
        Self {
            now: 0,
            config,
            nodes,
            down: BTreeMap::new(),
            net: testing::Net::default(),
            responses: Vec::new(),
            proposals: Vec::new(),
            correlation: 0,
            events: Vec::new(),
            marker_answers: Vec::new(),
        }
    }

    fn r(&mut self, id: NodeId) -> &mut Replica<L> {
        self.nodes.get_mut(&id).expect("node up")
    }

    fn collect(&mut self) {
        for (&id, r) in self.nodes.iter_mut() {
            for e in r.poll_outputs() {
                match e {
                    ReplicaEffect::Send { to, msg } => self.net.send(Address::Node(id), to, msg),
                    ReplicaEffect::AlterPartition(p) => self.proposals.push(p),
                    ReplicaEffect::Event(e) => self.events.push((id, e)),
                    ReplicaEffect::LocalProduceAnswer(r) => panic!("no local produces here: {r:?}"),
                    ReplicaEffect::LocalMarkerAnswer(r) => self.marker_answers.push(r),
                }
            }
        }
    }

    /// Metadata decision delivered to the given nodes.
    fn elect(&mut self, to: &[NodeId], leader: Option<NodeId>, epoch: u32, pe: u32, isr: &[u32]) {
        let replicas: Vec<NodeId> = vec![1, 2, 3];
        for id in to {
            if let Some(r) = self.nodes.get_mut(id) {
                r.apply_partition_state(self.now, leader, epoch, pe, isr, &replicas);
            }
        }
        self.collect();
    }

    /// Cuts exactly these links between replicas (from, to); `&[]` heals.
    fn cut(&mut self, links: &[(NodeId, NodeId)]) {
        let node = Address::Node;
        self.net.cut = links.iter().map(|&(f, t)| (node(f), node(t))).collect();
    }

    /// Node `id`'s answer to `asker` for the request `ask` hands it, taken off the network;
    /// whatever else the request set off stays queued. `None`: no answer yet (a held fetch).
    fn answer(
        &mut self,
        id: NodeId,
        asker: Address,
        ask: impl FnOnce(&mut Replica<L>),
    ) -> Option<Message> {
        let before = self.net.queue.len();
        ask(self.r(id));
        self.collect();
        let queue = &mut self.net.queue;
        let i = (before..queue.len())
            .find(|&i| queue[i].0 == Address::Node(id) && queue[i].1 == asker)?;
        queue.remove(i).map(|(_, _, msg)| msg)
    }

    /// A follower's fetch at node `id` (the request names the follower), answered now or
    /// held (`None`).
    fn fetch(&mut self, id: NodeId, req: FetchRequest) -> Option<FetchResponse> {
        let now = self.now;
        let asker = Address::Node(req.replica_id);
        match self.answer(id, asker, |r| r.handle_fetch(now, req))? {
            Message::FetchResponse(resp) => Some(resp),
            other => panic!("a fetch answered {other:?}"),
        }
    }

    /// A consumer's read at node `id`.
    fn consumer_fetch(&mut self, id: NodeId, req: &ConsumerFetchRequest) -> ConsumerFetchResponse {
        match self.answer(id, READER, |r| r.handle_consumer_fetch(READER, req)) {
            Some(Message::ConsumerFetchResponse(resp)) => *resp,
            other => panic!("a consumer fetch answered {other:?}"),
        }
    }

    /// A consumer's offset lookup at node `id`.
    fn list_offsets(&mut self, id: NodeId, req: &ListOffsetsRequest) -> ListOffsetsResponse {
        match self.answer(id, READER, |r| r.handle_list_offsets(READER, req)) {
            Some(Message::ListOffsetsResponse(resp)) => resp,
            other => panic!("a list-offsets answered {other:?}"),
        }
    }

    /// Advance time in steps, ticking and delivering everything.
    fn run(&mut self, duration: Nanos) {
        let end = self.now + duration;
        while self.now < end {
            self.now += MS;
            for r in self.nodes.values_mut() {
                r.handle_timeout(self.now);
            }
            self.collect();
            self.deliver_all();
        }
    }

    fn produce(&mut self, node: NodeId, acks: Acks, values: &[&str]) -> u64 {
        self.produce_batch(node, acks, batch(values))
    }

    fn produce_batch(&mut self, node: NodeId, acks: Acks, batch: RecordBatch) -> u64 {
        self.correlation += 1;
        let c = self.correlation;
        let now = self.now;
        let req = ProduceRequest {
            correlation: c,
            tp: tp(),
            acks,
            timeout: 1000 * MS,
            batch: EncodedBatch::encode(&batch).expect("encodable"),
            transactional_id: None,
        };
        self.r(node).handle_produce(now, Address::Client(0), req);
        self.collect();
        self.deliver_all();
        c
    }

    fn response(&self, correlation: u64) -> Option<&Result<ProduceAck, ProduceError>> {
        self.responses
            .iter()
            .find(|r| r.correlation == correlation)
            .map(|r| &r.result)
    }

    fn crash(&mut self, id: NodeId) {
        let r = self.nodes.remove(&id).unwrap();
        self.down.insert(id, TestLog::crash(r.log));
        self.net.lose_to(Address::Node(id));
        self.net.lose_from(Address::Node(id));
    }

    fn restart(&mut self, id: NodeId) {
        let log = self.down.remove(&id).unwrap();
        self.nodes
            .insert(id, Replica::new(tp(), id, log, self.config.clone()));
    }

    fn values(&mut self, id: NodeId) -> Values {
        match self.nodes.get_mut(&id) {
            Some(r) => values(r.log_mut()),
            None => values(self.down.get_mut(&id).expect("known node")),
        }
    }

    /// Confirm the latest ISR proposal as the controller would (bumping the partition
    /// epoch), delivering the new state to every node.
    fn confirm_proposal(&mut self) -> Vec<NodeId> {
        let p = self.proposals.pop().expect("a proposal");
        let pe = p.partition_epoch + 1;
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        self.elect(&ids, Some(p.leader), p.leader_epoch, pe, &p.new_isr);
        self.deliver_all();
        p.new_isr
    }
}

impl<L: TestLog> Net<L> {
    /// Node 2 misses two batches led by node 1; steps until node 1 answers node 2's next
    /// fetch with records and takes that answer off the network. Gives node 2's log end
    /// then (where the answer starts) and the answer.
    fn held_records_answer(&mut self) -> (Offset, FetchResponse) {
        self.cut(&[(1, 2)]);
        self.produce(1, Acks::Leader, &["a", "b"]);
        self.produce(1, Acks::Leader, &["c"]);
        self.cut(&[]);
        let start = self.r(2).log_mut().log_end_offset();
        let is_answer = |f, t, m: &Message| {
            (f, t) == (NODE_1, NODE_2)
                && matches!(m, Message::FetchResponse(FetchResponse {
                    result: FetchResult::Records { records, .. }, ..
                }) if !records.is_empty())
        };
        for _ in 0..10_000 {
            if let Some((_, _, Message::FetchResponse(resp))) = self.net.take_where(is_answer) {
                return (start, resp);
            }
            if !self.deliver_next() {
                self.now += MS;
                let now = self.now;
                for r in self.nodes.values_mut() {
                    r.handle_timeout(now);
                }
                self.collect();
            }
        }
        panic!("node 1 never answered node 2 with records");
    }

    /// Whether a replica event since `since` reports a refused follower append whose error
    /// mentions `needle`.
    fn reported_append_error(&self, since: usize, needle: &str) -> bool {
        self.events[since..].iter().any(|(id, e)| {
            *id == 2
                && matches!(e, Event::LogError { op: "append as follower", error, .. }
                    if error.contains(needle))
        })
    }
}

const NODE_1: Address = Address::Node(1);
const NODE_2: Address = Address::Node(2);

/// `resp` (a records answer) carrying `bytes` instead, as if changed in flight.
fn with_records(resp: FetchResponse, bytes: Vec<u8>) -> Message {
    let FetchResult::Records {
        high_watermark,
        log_start_offset,
        log_end_offset,
        ..
    } = resp.result
    else {
        panic!("not a records answer: {resp:?}")
    };
    Message::FetchResponse(FetchResponse {
        result: FetchResult::Records {
            records: EncodedBatches::new(bytes),
            high_watermark,
            log_start_offset,
            log_end_offset,
        },
        ..resp
    })
}

impl<L: TestLog> Delivery for Net<L> {
    type Addr = Address;
    type Msg = Message;

    fn net(&mut self) -> &mut testing::Net<Address, Message> {
        &mut self.net
    }

    /// A produce response lands in `responses`; a message to a crashed replica is lost.
    fn step(&mut self, from: Address, to: Address, msg: Message) {
        let Address::Node(dst) = to else {
            if let Message::ProduceResponse(r) = msg {
                self.responses.push(r);
            }
            return;
        };
        let (Address::Node(src), Some(r)) = (from, self.nodes.get_mut(&dst)) else {
            return;
        };
        let now = self.now;
        match msg {
            // Answered as an effect (collected below), now or when the long poll ends.
            Message::Fetch(req) => r.handle_fetch(now, req),
            Message::FetchResponse(resp) => r.handle_fetch_response(now, src, resp),
            other => panic!("unexpected {other:?}"),
        }
        self.collect();
    }
}

fn config() -> ReplicaConfig {
    ReplicaConfig {
        replica_lag_time_max: 100 * MS,
        min_insync_replicas: 2,
        fetch_backoff: MS,
        fetch_max_wait: 20 * MS,
        fetch_timeout: 50 * MS,
        alter_partition_retry: 50 * MS,
        ..ReplicaConfig::default()
    }
}

macro_rules! replica_suite {
    () => {
        fn three() -> Net<L> {
            let mut net = Net::<L>::new(&[1, 2, 3], config());
            net.elect(&[1, 2, 3], Some(1), 1, 1, &[1, 2, 3]);
            net.run(5 * MS);
            net
        }

        #[test]
        fn normal_replication_advances_hw_and_acknowledges() {
            let mut net = three();
            net.cut(&[(1, 2), (1, 3)]);
            let c = net.produce(1, Acks::All, &["a", "b"]);
            net.run(10 * MS);
            assert_eq!(net.response(c), None, "acks=all waits for the ISR");
            net.cut(&[]);
            net.run(100 * MS);
            let ack = net.response(c).unwrap().clone().unwrap();
            // Offset 0 is leader 1's epoch marker.
            assert_eq!(ack.base_offset, 1);
            assert_eq!(ack.leader_epoch, 1);
            for id in [1, 2, 3] {
                assert_eq!(net.values(id), vec![(1, "a".into()), (2, "b".into())]);
                assert_eq!(net.r(id).high_watermark(), 3, "node {id}");
            }
            let leader = net.r(1).view();
            assert_eq!(leader.isr, vec![1, 2, 3]);
            assert_eq!(leader.role, ReplicaRole::Leader);
        }

        #[test]
        fn acks_one_answers_at_once_and_acks_zero_never() {
            let mut net = three();
            let c1 = net.produce(1, Acks::Leader, &["x"]);
            net.deliver_all();
            assert!(matches!(net.response(c1), Some(Ok(_))));
            let c0 = net.produce(1, Acks::None, &["y"]);
            net.run(10 * MS);
            assert_eq!(net.response(c0), None);
            assert_eq!(net.values(2).len(), 2);
        }

        #[test]
        fn consumers_only_see_records_below_hw() {
            let mut net = three();
            net.cut(&[(2, 1), (3, 1)]); // followers cannot fetch
            net.produce(1, Acks::Leader, &["a"]);
            net.deliver_all();
            let req = ConsumerFetchRequest {
                correlation: 9,
                tp: tp(),
                offset: 0,
                max_bytes: 1 << 20,
                current_leader_epoch: None,
                last_fetched_epoch: None,
                isolation: Default::default(),
            };
            let resp = net.consumer_fetch(1, &req);
            let recs = resp.result.unwrap();
            assert!(
                recs.batches.is_empty(),
                "uncommitted record visible: {recs:?}"
            );
            net.cut(&[]);
            net.run(100 * MS); // dropped fetches time out and are resent
            let recs = net.consumer_fetch(1, &req).result.unwrap();
            assert_eq!(recs.batches.len(), 1, "marker left out, data batch visible");
            assert_eq!(recs.high_watermark, 2);
            // A follower refuses consumer reads.
            assert!(matches!(
                net.consumer_fetch(2, &req).result,
                Err(ConsumerFetchError::NotLeader {
                    leader: Some(1),
                    ..
                })
            ));
        }

        #[test]
        fn consumers_are_moved_past_a_marker_at_the_end_of_the_log() {
            let mut net = three();
            net.produce(1, Acks::All, &["a"]);
            net.run(100 * MS);
            // A new leader epoch: broker 2 writes its marker at offset 2, the log's end.
            net.elect(&[1, 2, 3], Some(2), 2, 2, &[1, 2, 3]);
            net.run(100 * MS);
            assert_eq!(net.r(2).high_watermark(), 3);
            let mut req = ConsumerFetchRequest {
                correlation: 9,
                tp: tp(),
                offset: 1,
                max_bytes: 1 << 20,
                current_leader_epoch: None,
                last_fetched_epoch: None,
                isolation: Default::default(),
            };
            let recs = net.consumer_fetch(2, &req).result.unwrap();
            assert_eq!(recs.batches.len(), 1, "the data batch, marker left out");
            assert_eq!(recs.next_offset, 3, "past the marker after the data");
            req.offset = 2;
            let recs = net.consumer_fetch(2, &req).result.unwrap();
            assert!(recs.batches.is_empty());
            assert_eq!(recs.next_offset, 3, "only a marker below the HW: skip it");
            req.offset = 3;
            let recs = net.consumer_fetch(2, &req).result.unwrap();
            assert_eq!(recs.next_offset, 3, "never past the HW");
            assert_eq!(recs.last_epoch, None, "nothing read");
            // A reader that read epoch 1 up to offset 2 passes the divergence check after a
            // clean failover; moving past the marker, it takes the marker's epoch.
            let mut cursor = crate::client::FetchCursor::new(0);
            let recs = net.consumer_fetch(2, &cursor.request(1, tp(), 1 << 20));
            let recs = recs.result.unwrap();
            assert_eq!(recs.last_epoch, Some(2), "the marker is the last batch read");
            assert_eq!(cursor.take(&recs).records.len(), 1);
            assert_eq!((cursor.position(), cursor.last_fetched_epoch()), (3, Some(2)));
            req.offset = 2;
            req.last_fetched_epoch = Some(1);
            let recs = net.consumer_fetch(2, &req).result.unwrap();
            assert_eq!(recs.next_offset, 3);
        }

        /// KIP-74: a read stops at `max_bytes` but returns its first batch whole, so a
        /// consumer whose limit is below a batch's size still reads it; from a marker
        /// followed by such a batch it is moved past the marker (Kafka clients step over
        /// the marker as a control batch).
        #[test]
        fn a_consumer_read_returns_its_first_batch_whole_past_max_bytes() {
            let mut net = three();
            let big = "x".repeat(10_000);
            net.produce(1, Acks::All, &[big.as_str(), big.as_str()]);
            net.produce(1, Acks::All, &["small"]);
            net.run(100 * MS);
            assert_eq!(net.r(1).high_watermark(), 4);
            let mut req = ConsumerFetchRequest {
                correlation: 9,
                tp: tp(),
                offset: 0,
                max_bytes: 8192,
                current_leader_epoch: None,
                last_fetched_epoch: None,
                isolation: Default::default(),
            };
            let recs = net.consumer_fetch(1, &req).result.unwrap();
            assert!(recs.batches.is_empty(), "only the marker fits: {recs:?}");
            assert_eq!(recs.next_offset, 1, "past the marker");
            for (from, max_bytes) in [(1, 8192), (2, 8192), (1, 0)] {
                req.offset = from;
                req.max_bytes = max_bytes;
                let recs = net.consumer_fetch(1, &req).result.unwrap();
                assert_eq!(recs.batches.len(), 1, "from {from}, max {max_bytes}");
                let b = &recs.batches[0];
                assert_eq!((b.base_offset, b.records.len()), (1, 2), "whole");
                assert_eq!(b.records[1].value.as_ref().map(Vec::len), Some(10_000));
                assert_eq!(recs.next_offset, 3);
            }
            // With room for both, both come.
            req.max_bytes = 1 << 20;
            let recs = net.consumer_fetch(1, &req).result.unwrap();
            assert_eq!(recs.batches.len(), 2);
            assert_eq!(recs.next_offset, 4);
        }

        #[test]
        fn stale_and_future_epoch_fetches_are_refused() {
            let mut net = three();
            let mut req = FetchRequest {
                correlation: 1,
                tp: tp(),
                replica_id: 2,
                current_leader_epoch: 0,
                fetch_offset: 0,
                last_fetched_epoch: None,
                max_bytes: 1 << 20,
                high_watermark: 0,
                max_wait: 0,
            };
            let r = net.fetch(1, req.clone()).unwrap();
            assert!(matches!(
                r.result,
                FetchResult::Error(FetchError::FencedLeaderEpoch {
                    request: 0,
                    current: 1
                })
            ));
            req.current_leader_epoch = 2;
            let r = net.fetch(1, req.clone()).unwrap();
            assert!(matches!(
                r.result,
                FetchResult::Error(FetchError::UnknownLeaderEpoch {
                    request: 2,
                    current: 1
                })
            ));
            req.current_leader_epoch = 1;
            let r = net.fetch(2, req).unwrap();
            assert!(matches!(
                r.result,
                FetchResult::Error(FetchError::NotLeader)
            ));
        }

        #[test]
        fn follower_restart_keeps_its_log_and_catches_up() {
            let mut net = three();
            let c = net.produce(1, Acks::All, &["a"]);
            net.run(10 * MS);
            assert!(matches!(net.response(c), Some(Ok(_))));
            net.crash(3);
            let c = net.produce(1, Acks::All, &["b"]);
            net.run(10 * MS);
            assert_eq!(net.response(c), None, "3 is still in the ISR");
            net.run(150 * MS);
            assert_eq!(net.confirm_proposal(), vec![1, 2]);
            assert!(
                matches!(net.response(c), Some(Ok(_))),
                "ISR 1,2 still >= min.insync"
            );
            net.restart(3);
            // After a restart the replica's HW is low but its log is not truncated to it.
            assert_eq!(net.r(3).high_watermark(), 0);
            assert_eq!(net.values(3), vec![(1, "a".into())]);
            net.elect(&[3], Some(1), 1, 1, &[1, 2, 3]);
            net.run(10 * MS);
            assert_eq!(net.values(3), net.values(1));
        }

        /// KIP-101 scenario 1: a follower holds a committed record but has not learned the HW
        /// covering it when it restarts. Truncating to the HW (the old behaviour) then loses a
        /// committed record once it becomes leader; epoch-based truncation keeps it.
        fn kip101_loss(bugs: Bugs) -> (Values, Option<ProduceAck>) {
            let mut cfg = config();
            cfg.bugs = bugs;
            cfg.min_insync_replicas = 1;
            cfg.fetch_max_wait = 0; // plain polling: the script below steps each fetch by hand
            let mut net = Net::<L>::new(&[1, 2], cfg);
            net.elect(&[1, 2], Some(1), 1, 1, &[1, 2]);
            net.run(5 * MS);
            let c = net.produce(1, Acks::All, &["m1"]);
            // Follower 2 fetches m1 and fetches again; that second fetch commits m1 on the
            // leader, but its response (carrying the new HW) is lost.
            net.now += MS;
            let now = net.now;
            net.r(2).handle_timeout(now);
            net.collect();
            assert!(net.deliver_next()); // fetch(1) -> leader
            assert!(net.deliver_next()); // m1 -> follower, which fetches(2) at once
            assert!(net.deliver_next()); // fetch(2) -> leader: HW 2, m1 acknowledged
            net.cut(&[(1, 2)]);
            net.deliver_all();
            let ack = net.response(c).and_then(|r| r.clone().ok());
            net.cut(&[(1, 2)]);
            net.run(5 * MS);
            assert!(net.r(2).high_watermark() < net.r(1).high_watermark());
            // 2 restarts, then 1 dies and 2 takes over.
            net.crash(2);
            net.restart(2);
            net.elect(&[2], Some(1), 1, 1, &[1, 2]);
            net.crash(1);
            net.elect(&[2], Some(2), 2, 2, &[2]);
            net.run(5 * MS);
            (net.values(2), ack)
        }

        #[test]
        fn kip101_restarted_follower_does_not_truncate_to_hw() {
            let (values, ack) = kip101_loss(Bugs::default());
            let ack = ack.expect("m1 was acknowledged");
            assert_eq!(values, vec![(ack.base_offset, "m1".to_string())]);
        }

        #[test]
        fn kip101_bug_truncate_to_hw_loses_committed_record() {
            let bugs = Bugs {
                truncate_to_hw: true,
                ..Bugs::default()
            };
            let (values, ack) = kip101_loss(bugs);
            assert!(ack.is_some());
            assert!(
                values.is_empty(),
                "the bug should lose m1, log is {values:?}"
            );
        }

        /// KIP-101 scenario 2: after both replicas crash, the one that comes back first leads a
        /// new epoch with a different record at the same offset; the other must drop its
        /// divergent suffix instead of keeping a log that differs below the new HW.
        #[test]
        fn kip101_divergent_logs_reconcile_by_epoch() {
            let (one, two) = kip101_divergence(Bugs::default());
            assert_eq!(one, two);
            assert!(one.iter().all(|(_, v)| v != "m2"));
            assert!(one.iter().any(|(_, v)| v == "m3"));
        }

        /// Without epoch validation the leader trusts the divergent follower's offset: m2
        /// stays on 1 at an offset the HW covers, where 2 holds its epoch marker.
        #[test]
        fn bug_unfenced_fetch_keeps_divergent_suffix_below_hw() {
            let bugs = Bugs {
                unfenced_fetch: true,
                ..Bugs::default()
            };
            let (one, two) = kip101_divergence(bugs);
            assert!(
                one.iter().any(|(_, v)| v == "m2"),
                "the bug keeps m2: {one:?}"
            );
            assert_ne!(one, two);
        }

        fn kip101_divergence(bugs: Bugs) -> (Values, Values) {
            let mut cfg = config();
            cfg.bugs = bugs;
            cfg.min_insync_replicas = 1;
            let mut net = Net::<L>::new(&[1, 2], cfg);
            net.elect(&[1, 2], Some(1), 1, 1, &[1, 2]);
            net.run(5 * MS);
            net.produce(1, Acks::All, &["m1"]);
            net.run(5 * MS);
            // m2 reaches only the leader's (flushed) log.
            net.cut(&[(1, 2), (2, 1)]);
            net.produce(1, Acks::Leader, &["m2"]);
            net.crash(1);
            net.crash(2);
            net.cut(&[]);
            net.restart(2);
            net.elect(&[2], Some(2), 2, 2, &[2]);
            let c = net.produce(2, Acks::All, &["m3"]);
            net.run(5 * MS);
            assert!(matches!(net.response(c), Some(Ok(_))));
            net.restart(1);
            net.elect(&[1, 2], Some(2), 2, 2, &[2]);
            net.run(20 * MS);
            (net.values(1), net.values(2))
        }

        /// KIP-279: leader 1 (epoch 1) fails over to 2 (epoch 2), which writes and fails back to
        /// 1 (epoch 3) before 1 ever fetched epoch 2. 1 does not know epoch 2, so it answers
        /// with its largest epoch below (1) and where that ends; 2 must drop its epoch-2 suffix.
        fn kip279(bugs: Bugs) -> (Values, Values) {
            let mut cfg = config();
            cfg.bugs = bugs;
            cfg.min_insync_replicas = 1;
            let mut net = Net::<L>::new(&[1, 2], cfg);
            net.elect(&[1, 2], Some(1), 1, 1, &[1, 2]);
            net.run(5 * MS);
            net.produce(1, Acks::All, &["a"]);
            net.run(5 * MS);
            net.cut(&[(1, 2), (2, 1)]);
            net.produce(1, Acks::Leader, &["b1"]); // only on 1
                                                   // Fast failover to 2, which writes its own record at the same offset.
            net.elect(&[2], Some(2), 2, 2, &[1, 2]);
            net.produce(2, Acks::Leader, &["b2"]);
            net.run(2 * MS);
            // And straight back to 1, before 1 fetched anything of epoch 2.
            net.elect(&[1, 2], Some(1), 3, 3, &[1, 2]);
            net.cut(&[]);
            net.run(20 * MS);
            (net.values(1), net.values(2))
        }

        #[test]
        fn an_unclean_leader_may_truncate_a_follower_below_its_hw_and_it_is_reported() {
            let mut net = Net::<L>::new(
                &[1, 2, 3],
                ReplicaConfig {
                    unclean_leader_election: true,
                    ..config()
                },
            );
            net.elect(&[1, 2, 3], Some(1), 1, 1, &[1, 2, 3]);
            net.run(5 * MS);
            // 3 drops out of the ISR; 1 and 2 commit two records.
            net.cut(&[(1, 3), (3, 1), (2, 3), (3, 2)]);
            net.elect(&[1, 2], Some(1), 1, 2, &[1, 2]);
            let c = net.produce(1, Acks::All, &["a", "b"]);
            net.run(50 * MS);
            assert!(matches!(net.response(c), Some(Ok(_))));
            assert_eq!(net.r(2).high_watermark(), 3);
            // 1 dies; 3, out of the ISR, is elected uncleanly and writes at offset 1.
            net.crash(1);
            net.elect(&[3], Some(3), 2, 3, &[3]);
            net.produce(3, Acks::Leader, &["x"]);
            net.run(5 * MS);
            // 2 follows the unclean leader: it must drop committed records to match it.
            net.cut(&[]);
            net.elect(&[2, 3], Some(3), 2, 4, &[3]);
            net.run(50 * MS);
            assert_eq!(net.values(2), net.values(3));
            assert_eq!(net.values(2), vec![(2, "x".into())]);
            let reported: Vec<&Event> = net
                .events
                .iter()
                .filter(|(id, _)| *id == 2)
                .map(|(_, e)| e)
                .filter(|e| matches!(e, Event::TruncatedBelowHighWatermark { .. }))
                .collect();
            assert_eq!(
                reported,
                vec![&Event::TruncatedBelowHighWatermark {
                    tp: tp(),
                    high_watermark: 3,
                    to: 1
                }]
            );
        }

        #[test]
        fn a_consumer_fetch_below_an_unclean_truncation_diverges_and_the_cursor_resets() {
            use crate::client::{FetchCursor, Truncation};
            let mut net = Net::<L>::new(
                &[1, 2, 3],
                ReplicaConfig {
                    unclean_leader_election: true,
                    ..config()
                },
            );
            net.elect(&[1, 2, 3], Some(1), 1, 1, &[1, 2, 3]);
            net.run(5 * MS);
            net.cut(&[(1, 3), (3, 1), (2, 3), (3, 2)]);
            net.elect(&[1, 2], Some(1), 1, 2, &[1, 2]);
            net.produce(1, Acks::All, &["a", "b"]);
            net.run(50 * MS);
            // The consumer reads both records from leader 1: position 3, epoch 1.
            let mut cursor = FetchCursor::new(0);
            let recs = net.consumer_fetch(1, &cursor.request(1, tp(), 1 << 20));
            let recs = recs.result.unwrap();
            assert_eq!(cursor.take(&recs).records.len(), 2);
            assert_eq!((cursor.position(), cursor.last_fetched_epoch()), (3, Some(1)));
            // The same check a clean successor applies passes: 2 holds epoch 1 up to 3.
            // 1 dies; 3 is elected uncleanly: its epoch 1 ends at offset 1.
            net.crash(1);
            net.elect(&[3], Some(3), 2, 3, &[3]);
            net.produce(3, Acks::Leader, &["x"]);
            net.cut(&[]);
            net.elect(&[2, 3], Some(3), 2, 4, &[2, 3]);
            net.run(50 * MS);
            assert_eq!(net.r(3).high_watermark(), 3);
            let r = net.consumer_fetch(3, &cursor.request(2, tp(), 1 << 20));
            let e = r.result.unwrap_err();
            assert_eq!(
                e,
                ConsumerFetchError::DivergingEpoch {
                    epoch: Some(1),
                    end_offset: 1
                }
            );
            // The cursor detects the truncation, resets to the divergence point and reads x.
            let t = cursor.clone().on_error(&e);
            assert_eq!(
                t,
                Some(Truncation {
                    from: 3,
                    to: 1,
                    epoch: Some(1)
                })
            );
            assert_eq!(
                t.unwrap().to_string(),
                "truncation detected: position 3 -> 1, epoch 1"
            );
            // Bugged: the answer is ignored and the position kept; without an epoch the
            // leader no longer checks, so the reader waits past offset 2 and skips x.
            let mut bugged = cursor.clone().ignoring_truncation(true);
            assert_eq!(bugged.on_error(&e), None);
            assert_eq!((bugged.position(), bugged.last_fetched_epoch()), (3, None));
            let r = net.consumer_fetch(3, &bugged.request(3, tp(), 1 << 20));
            assert!(matches!(r.result, Ok(ref recs) if recs.batches.is_empty()));
            cursor.on_error(&e);
            let r = net.consumer_fetch(3, &cursor.request(4, tp(), 1 << 20));
            let recs = r.result.unwrap();
            let taken = cursor.take(&recs);
            let read: Vec<_> = taken.records.iter().map(|(o, _, _)| *o).collect();
            assert_eq!(read, vec![2]);
            assert_eq!((cursor.position(), cursor.last_fetched_epoch()), (3, Some(2)));
            // Caught up at the new epoch: no divergence any more.
            let r = net.consumer_fetch(3, &cursor.request(5, tp(), 1 << 20));
            assert!(r.result.is_ok());
            // An epoch newer than the answering leader's: a deposed leader, refused.
            let mut req = cursor.request(6, tp(), 1 << 20);
            req.last_fetched_epoch = Some(3);
            assert!(matches!(
                net.consumer_fetch(3, &req).result,
                Err(ConsumerFetchError::UnknownLeaderEpoch {
                    request: 3,
                    current: 2
                })
            ));
        }

        #[test]
        fn kip279_fast_double_failover_converges() {
            let (one, two) = kip279(Bugs::default());
            assert_eq!(one, two);
            assert!(two.iter().any(|(_, v)| v == "b1"));
            assert!(two.iter().all(|(_, v)| v != "b2"));
        }

        #[test]
        fn kip279_bug_next_epoch_start_keeps_divergent_suffix() {
            let bugs = Bugs {
                next_epoch_start: true,
                ..Bugs::default()
            };
            let (one, two) = kip279(bugs);
            assert_ne!(one, two, "the bug should leave the logs diverged");
        }

        #[test]
        fn isr_shrinks_when_followers_lag_and_min_insync_refuses_writes() {
            let mut net = three();
            net.crash(2);
            net.crash(3);
            let c = net.produce(1, Acks::All, &["a"]);
            net.run(150 * MS);
            // The leader proposed {1} but, unconfirmed, still waits for the maximal ISR.
            assert_eq!(net.proposals.last().unwrap().new_isr, vec![1]);
            assert_eq!(net.r(1).view().isr, vec![1, 2, 3]);
            assert!(net.r(1).high_watermark() < 2);
            assert_eq!(net.response(c), None);
            assert_eq!(net.confirm_proposal(), vec![1]);
            // KIP-966's strict min ISR: under an ISR of one the HW does not move, so the
            // write stays uncommitted (and the followers that left keep every committed
            // record: they are eligible leaders).
            net.run(10 * MS);
            assert_eq!(net.response(c), None);
            assert!(net.r(1).high_watermark() < 2);
            let c_b = net.produce(1, Acks::All, &["b"]);
            assert!(matches!(
                net.response(c_b),
                Some(Err(ProduceError::NotEnoughReplicas {
                    isr: 1,
                    min_insync: 2
                }))
            ));
            // A follower comes back, catches up and rejoins: the HW moves again and the
            // write that waited is acknowledged.
            net.restart(2);
            net.elect(&[2], Some(1), 1, 2, &[1]);
            net.run(10 * MS);
            assert_eq!(net.proposals.last().unwrap().new_isr, vec![1, 2]);
            assert_eq!(net.confirm_proposal(), vec![1, 2]);
            net.run(10 * MS);
            assert!(
                matches!(net.response(c), Some(Ok(_))),
                "{:?}",
                net.response(c)
            );
            let c = net.produce(1, Acks::All, &["c"]);
            net.run(10 * MS);
            assert!(matches!(net.response(c), Some(Ok(_))));
        }

        #[test]
        fn no_elr_bug_commits_under_an_isr_below_min_insync() {
            let mut cfg = config();
            cfg.bugs.no_elr = true;
            let mut net = Net::<L>::new(&[1, 2, 3], cfg);
            net.elect(&[1, 2, 3], Some(1), 1, 1, &[1, 2, 3]);
            net.run(5 * MS);
            net.crash(2);
            net.crash(3);
            let c = net.produce(1, Acks::All, &["a"]);
            net.run(150 * MS);
            assert_eq!(net.confirm_proposal(), vec![1]);
            // Pre-KIP-966: committed by one copy; the writer is told it is not enough.
            assert!(net.r(1).high_watermark() >= 2);
            assert!(matches!(
                net.response(c),
                Some(Err(ProduceError::NotEnoughReplicasAfterAppend {
                    isr: 1,
                    min_insync: 2
                }))
            ));
        }

        /// Kafka's OffsetOutOfRange handling: a follower whose log ends below the leader's
        /// log start (retention overtook it) empties its log, restarts it at the leader's
        /// log start and fetches from there.
        #[test]
        fn follower_behind_the_leader_log_start_resets_and_catches_up() {
            let mut net = three();
            net.produce(1, Acks::All, &["a", "b"]);
            net.run(20 * MS);
            let mut f = Replica::new(tp(), 3, L::fresh(), config());
            f.apply_partition_state(net.now, Some(1), 1, 1, &[1, 2], &[1, 2, 3]);
            let fetch = |f: &mut Replica<L>| {
                f.poll_outputs()
                    .into_iter()
                    .find_map(|e| match e {
                        ReplicaEffect::Send {
                            msg: Message::Fetch(req),
                            ..
                        } => Some(req),
                        _ => None,
                    })
                    .expect("a fetch")
            };
            let req = fetch(&mut f);
            assert_eq!(req.fetch_offset, 0);
            let resp = FetchResponse {
                correlation: req.correlation,
                tp: tp(),
                leader_epoch: 1,
                result: FetchResult::Error(FetchError::OffsetOutOfRange {
                    fetch_offset: 0,
                    log_start_offset: 1,
                }),
            };
            let now = net.now;
            f.handle_fetch_response(now, 1, resp);
            assert_eq!(f.log().log_start_offset(), 1);
            assert_eq!(f.log().log_end_offset(), 1);
            assert_eq!(f.high_watermark(), 1);
            let effects = f.poll_outputs();
            assert!(effects.iter().any(|e| matches!(
                e,
                ReplicaEffect::Event(Event::LogReset { from: 0, to: 1, .. })
            )));
            let req = effects
                .into_iter()
                .find_map(|e| match e {
                    ReplicaEffect::Send {
                        msg: Message::Fetch(req),
                        ..
                    } => Some(req),
                    _ => None,
                })
                .expect("fetches again at once");
            assert_eq!(req.fetch_offset, 1, "continues at the leader's log start");
            // The leader's answer from there appends normally.
            let resp = net.fetch(1, req).expect("answered");
            f.handle_fetch_response(now, 1, resp);
            assert_eq!(f.log().log_end_offset(), net.r(1).log().log_end_offset());
            // An OffsetOutOfRange that does not leave this follower behind changes nothing.
            let req = fetch(&mut f);
            let leo = f.log().log_end_offset();
            f.handle_fetch_response(
                now,
                1,
                FetchResponse {
                    correlation: req.correlation,
                    tp: tp(),
                    leader_epoch: 1,
                    result: FetchResult::Error(FetchError::OffsetOutOfRange {
                        fetch_offset: leo,
                        log_start_offset: 1,
                    }),
                },
            );
            assert_eq!(f.log().log_end_offset(), leo);
            assert_eq!(f.log().log_start_offset(), 1);
        }

        #[test]
        fn pending_writes_time_out() {
            let mut net = three();
            net.crash(2);
            net.crash(3);
            let c = net.produce(1, Acks::All, &["a"]);
            // Keep the ISR unconfirmed: the write can never commit and must time out.
            net.run(1100 * MS);
            assert!(matches!(
                net.response(c),
                Some(Err(ProduceError::RequestTimedOut))
            ));
        }

        #[test]
        fn zombie_leader_cannot_acknowledge_and_is_deposed() {
            let mut net = three();
            // Leader 1 is cut off; 2 becomes leader at epoch 2 (1 does not hear of it).
            net.cut(&[(1, 2), (1, 3), (2, 1), (3, 1)]);
            net.elect(&[2, 3], Some(2), 2, 2, &[2, 3]);
            let zombie = net.produce(1, Acks::All, &["zombie"]);
            let good = net.produce(2, Acks::All, &["good"]);
            net.run(200 * MS);
            assert!(matches!(net.response(good), Some(Ok(_))));
            assert_eq!(net.response(zombie), None, "zombie must not acknowledge");
            // The zombie's ISR shrink proposal is stale: the controller rejects it.
            let stale = net
                .proposals
                .iter()
                .find(|p| p.leader == 1)
                .cloned()
                .unwrap();
            assert_eq!(stale.leader_epoch, 1);
            let now = net.now;
            net.r(1).on_alter_partition_result(
                now,
                AlterOutcome::Rejected {
                    reason: "fenced".into(),
                },
            );
            // Followers that reach the zombie with the new epoch get UnknownLeaderEpoch.
            let req = FetchRequest {
                correlation: 1,
                tp: tp(),
                replica_id: 3,
                current_leader_epoch: 2,
                fetch_offset: 0,
                last_fetched_epoch: None,
                max_bytes: 1,
                high_watermark: 0,
                max_wait: 0,
            };
            assert!(matches!(
                net.fetch(1, req).unwrap().result,
                FetchResult::Error(FetchError::UnknownLeaderEpoch { .. })
            ));
            // Metadata reaches the zombie: pending write fails NotLeader, log converges.
            net.cut(&[]);
            net.elect(&[1], Some(2), 2, 2, &[2, 3]);
            net.deliver_all();
            assert!(matches!(
                net.response(zombie),
                Some(Err(ProduceError::NotLeader {
                    leader: Some(2),
                    leader_epoch: 2
                }))
            ));
            net.run(20 * MS);
            assert_eq!(net.values(1), net.values(2));
            assert!(net.values(1).iter().all(|(_, v)| v != "zombie"));
        }

        #[test]
        fn idempotent_retry_after_lost_response_is_not_duplicated() {
            let mut net = three();
            let mut b = batch(&["once"]);
            b.producer = Some(ProducerInfo {
                producer_id: 7,
                producer_epoch: 0,
                base_sequence: 0,
            });
            let c1 = net.produce_batch(1, Acks::All, b.clone());
            net.run(10 * MS);
            let first = net.response(c1).unwrap().clone().unwrap();
            net.responses.clear(); // the response was lost
            let c2 = net.produce_batch(1, Acks::All, b.clone());
            net.run(10 * MS);
            let second = net.response(c2).unwrap().clone().unwrap();
            assert_eq!(second.base_offset, first.base_offset);
            assert!(second.duplicate);
            assert_eq!(net.values(1), vec![(first.base_offset, "once".into())]);
            // Out of order: a gap in the sequence is refused.
            let mut gap = batch(&["gap"]);
            gap.producer = Some(ProducerInfo {
                producer_id: 7,
                producer_epoch: 0,
                base_sequence: 5,
            });
            let c3 = net.produce_batch(1, Acks::All, gap);
            assert!(matches!(
                net.response(c3),
                Some(Err(ProduceError::OutOfOrderSequence(_)))
            ));
            // After a failover the new leader rebuilds producer state from its log.
            net.elect(&[1, 2, 3], Some(2), 2, 2, &[1, 2, 3]);
            let c4 = net.produce_batch(2, Acks::All, b);
            net.run(10 * MS);
            let third = net.response(c4).unwrap().clone().unwrap();
            assert_eq!(third.base_offset, first.base_offset);
            assert_eq!(net.values(2).len(), 1);
        }

        #[test]
        fn leader_hw_counts_only_flushed_data() {
            let mut cfg = config();
            cfg.flush_interval = 20 * MS;
            cfg.min_insync_replicas = 1;
            let mut net = Net::<L>::new(&[1], cfg);
            net.elect(&[1], Some(1), 1, 1, &[1]);
            net.run(25 * MS);
            let hw0 = net.r(1).high_watermark();
            let c = net.produce(1, Acks::All, &["a"]);
            net.run(5 * MS);
            assert_eq!(
                net.r(1).high_watermark(),
                hw0,
                "unflushed data is not committed"
            );
            assert_eq!(net.response(c), None);
            net.run(30 * MS);
            assert!(matches!(net.response(c), Some(Ok(_))));
            assert_eq!(net.r(1).view().flushed_offset, net.r(1).high_watermark());
        }

        #[test]
        fn hw_advances_only_with_a_record_of_the_current_epoch() {
            let mut net = three();
            net.produce(1, Acks::All, &["a"]);
            net.run(10 * MS);
            // New leader 2 starts with its follower HW; it moves past the old epoch's data only
            // once its own epoch marker is replicated.
            net.cut(&[(1, 2), (3, 2)]);
            net.elect(&[1, 2, 3], Some(2), 2, 2, &[1, 2, 3]);
            let hw = net.r(2).high_watermark();
            let marker_at = net.r(2).log().log_end_offset() - 1;
            net.run(5 * MS);
            assert_eq!(net.r(2).high_watermark(), hw);
            assert!(hw <= marker_at);
            net.cut(&[]);
            net.run(100 * MS); // the cut fetches time out and are resent
            assert_eq!(net.r(2).high_watermark(), marker_at + 1);
        }

        #[test]
        fn long_poll_fetch_is_held_until_there_is_news() {
            let mut net = three();
            net.run(5 * MS);
            // Both followers are caught up: their fetches are parked at the leader.
            assert!(net.net.queue.is_empty());
            let before = net.r(2).log().log_end_offset();
            let c = net.produce(1, Acks::All, &["a"]);
            // The append answers the held fetches at once; no polling delay.
            net.deliver_all();
            assert!(matches!(net.response(c), Some(Ok(_))));
            assert!(net.r(2).log().log_end_offset() > before);
            assert_eq!(net.r(2).high_watermark(), net.r(1).high_watermark());
            // With nothing new, a held fetch is answered when its wait is over.
            net.run(25 * MS);
            assert!(net.r(2).view().role == ReplicaRole::Follower { leader: 1 });
        }

        #[test]
        fn bug_unfenced_fetch_serves_stale_epochs() {
            let mut cfg = config();
            cfg.bugs.unfenced_fetch = true;
            let mut net = Net::<L>::new(&[1, 2, 3], cfg);
            net.elect(&[1, 2, 3], Some(1), 3, 3, &[1, 2, 3]);
            let req = FetchRequest {
                correlation: 1,
                tp: tp(),
                replica_id: 2,
                current_leader_epoch: 1,
                fetch_offset: 0,
                last_fetched_epoch: None,
                max_bytes: 1 << 20,
                high_watermark: 0,
                max_wait: 0,
            };
            let r = net.fetch(1, req).unwrap();
            assert!(
                matches!(r.result, FetchResult::Records { .. }),
                "the bug serves a fetch of epoch 1 at epoch 3: {r:?}"
            );
        }

        #[test]
        fn follower_appends_fetched_bytes_verbatim_and_refuses_a_damaged_batch() {
            let mut net = three();
            let (start, resp) = net.held_records_answer();
            let FetchResult::Records { records, .. } = &resp.result else {
                unreachable!()
            };
            let batches: Vec<_> = records.iter().map(|b| b.unwrap()).collect();
            assert_eq!(batches.len(), 2, "{records:?}");
            assert_eq!(batches[0].0.base_offset, start);
            let second = batches[1].0;
            // One bit of the second batch's last record flipped in flight.
            let mut bytes = records.as_bytes().to_vec();
            *bytes.last_mut().unwrap() ^= 0x10;
            let errors = net.events.len();
            net.step(NODE_1, NODE_2, with_records(resp, bytes));
            // The intact first batch is appended, the damaged one refused and reported.
            assert_eq!(net.r(2).log_mut().log_end_offset(), second.base_offset);
            assert!(net.reported_append_error(errors, "CRC"), "{:?}", &net.events[errors..]);
            // The follower fetches again and catches up; its log holds the leader's bytes.
            net.run(100 * MS);
            let leo = net.r(1).log_mut().log_end_offset();
            assert_eq!(net.r(2).log_mut().log_end_offset(), leo);
            assert_eq!(net.values(2), net.values(1));
            let on = |net: &mut Net<L>, id| net.r(id).log_mut().read_encoded(start, 1 << 20).unwrap();
            assert_eq!(on(&mut net, 2), on(&mut net, 1));
        }

        #[test]
        fn follower_refuses_fetched_bytes_that_do_not_parse_and_fetches_again() {
            // Cut inside the first batch's header, cut inside its records, not a batch at all.
            let damage: [(&str, fn(&[u8]) -> Vec<u8>); 3] = [
                ("header cut", |b| b[..20].to_vec()),
                ("body cut", |b| b[..b.len() - 3].to_vec()),
                ("garbage", |b| vec![0xff; b.len()]),
            ];
            for (what, damage) in damage {
                let mut net = three();
                let (start, resp) = net.held_records_answer();
                let FetchResult::Records { records, .. } = &resp.result else {
                    unreachable!()
                };
                let bytes = damage(&records.as_bytes()[..records.iter().next().unwrap().unwrap().1.len()]);
                let errors = net.events.len();
                net.step(NODE_1, NODE_2, with_records(resp, bytes));
                assert_eq!(net.r(2).log_mut().log_end_offset(), start, "{what}");
                assert!(net.reported_append_error(errors, ""), "{what}: {:?}", &net.events[errors..]);
                net.run(100 * MS);
                assert_eq!(net.values(2), net.values(1), "{what}");
            }
        }

        #[test]
        fn list_offsets_and_consumer_epoch_checks() {
            let mut net = three();
            net.produce(1, Acks::All, &["a", "b"]);
            net.run(10 * MS);
            let list = |net: &mut Net<L>, spec| {
                let req = ListOffsetsRequest {
                    correlation: 1,
                    tp: tp(),
                    spec,
                    isolation: Default::default(),
                };
                net.list_offsets(1, &req).result
            };
            assert_eq!(
                list(&mut net, OffsetSpec::Earliest)
                    .unwrap()
                    .unwrap()
                    .offset,
                0
            );
            let latest = list(&mut net, OffsetSpec::Latest).unwrap().unwrap();
            assert_eq!((latest.offset, latest.leader_epoch), (3, 1));
            assert!(matches!(
                net.list_offsets(
                    2,
                    &ListOffsetsRequest {
                        correlation: 2,
                        tp: tp(),
                        spec: OffsetSpec::Latest
                    , isolation: Default::default() },
                )
                .result,
                Err(ConsumerFetchError::NotLeader { .. })
            ));
            let mut req = ConsumerFetchRequest {
                correlation: 3,
                tp: tp(),
                offset: 1,
                max_bytes: 1 << 20,
                current_leader_epoch: Some(0),
                last_fetched_epoch: None,
                isolation: Default::default(),
            };
            assert!(matches!(
                net.consumer_fetch(1, &req).result,
                Err(ConsumerFetchError::FencedLeaderEpoch {
                    request: 0,
                    current: 1
                })
            ));
            req.current_leader_epoch = Some(2);
            assert!(matches!(
                net.consumer_fetch(1, &req).result,
                Err(ConsumerFetchError::UnknownLeaderEpoch {
                    request: 2,
                    current: 1
                })
            ));
            req.current_leader_epoch = Some(1);
            req.offset = 99;
            assert!(matches!(
                net.consumer_fetch(1, &req).result,
                Err(ConsumerFetchError::OffsetOutOfRange { offset: 99, .. })
            ));
            req.offset = 1;
            let recs = net.consumer_fetch(1, &req).result.unwrap();
            assert_eq!(recs.batches[0].records.len(), 2);
        }

        #[test]
        fn produce_refusals_are_typed() {
            let mut net = three();
            let c = net.produce(2, Acks::All, &["x"]);
            assert!(matches!(
                net.response(c),
                Some(Err(ProduceError::NotLeader {
                    leader: Some(1),
                    leader_epoch: 1
                }))
            ));
            let c = net.produce_batch(1, Acks::Leader, batch(&[]));
            assert!(matches!(
                net.response(c),
                Some(Err(ProduceError::InvalidRecord(_)))
            ));
            let mut control = batch(&["c"]);
            control.attributes = CONTROL_BATCH_BIT;
            let c = net.produce_batch(1, Acks::Leader, control);
            assert!(matches!(
                net.response(c),
                Some(Err(ProduceError::InvalidRecord(_)))
            ));
            // Fenced producer epoch.
            let mut b = batch(&["p"]);
            b.producer = Some(ProducerInfo {
                producer_id: 1,
                producer_epoch: 2,
                base_sequence: 0,
            });
            let c = net.produce_batch(1, Acks::Leader, b.clone());
            assert!(matches!(net.response(c), Some(Ok(_))));
            b.producer = Some(ProducerInfo {
                producer_id: 1,
                producer_epoch: 1,
                base_sequence: 1,
            });
            let c = net.produce_batch(1, Acks::Leader, b);
            assert!(matches!(
                net.response(c),
                Some(Err(ProduceError::InvalidProducerEpoch(_)))
            ));
        }

        #[test]
        fn bug_stale_producer_epoch_appends_a_fenced_epoch() {
            let mut cfg = config();
            cfg.bugs.stale_producer_epoch = true;
            let mut net = Net::<L>::new(&[1, 2, 3], cfg);
            net.elect(&[1, 2, 3], Some(1), 1, 1, &[1, 2, 3]);
            net.run(5 * MS);
            let stamp = |epoch, seq| {
                let mut b = batch(&["p"]);
                b.producer = Some(ProducerInfo {
                    producer_id: 1,
                    producer_epoch: epoch,
                    base_sequence: seq,
                });
                b
            };
            let c = net.produce_batch(1, Acks::Leader, stamp(2, 0));
            assert!(matches!(net.response(c), Some(Ok(_))));
            // The zombie's epoch 1 is written instead of answered InvalidProducerEpoch ...
            let c = net.produce_batch(1, Acks::Leader, stamp(1, 7));
            assert!(
                matches!(net.response(c), Some(Ok(_))),
                "{:?}",
                net.response(c)
            );
            // ... without moving the producer back: epoch 2 continues at sequence 1.
            let c = net.produce_batch(1, Acks::Leader, stamp(2, 1));
            assert!(
                matches!(net.response(c), Some(Ok(_))),
                "{:?}",
                net.response(c)
            );
        }
    };
}

mod on_partition_log {
    use super::*;
    type L = PartitionLog<MemStorage>;
    replica_suite!();
}

/// The hosting broker's own produce (a group coordinator's append) is answered as a
/// `LocalProduceAnswer` effect, never as a message; a remote asker's as a `Send` to it.
#[test]
fn a_local_produce_is_answered_locally_and_a_remote_one_over_the_network() {
    let log = <PartitionLog<MemStorage> as TestLog>::fresh();
    let mut r = Replica::new(tp(), 1, log, config());
    r.apply_partition_state(0, Some(1), 1, 1, &[1], &[1]);
    r.poll_outputs();
    let req = |correlation| ProduceRequest {
        correlation,
        tp: tp(),
        acks: Acks::Leader,
        timeout: MS,
        batch: EncodedBatch::encode(&batch(&["v"])).unwrap(),
        transactional_id: None,
    };
    r.handle_produce(0, ProduceOrigin::Local, req(1));
    r.handle_produce(0, Address::Client(7), req(2));
    let answers: Vec<(Option<Address>, u64)> = r
        .poll_outputs()
        .into_iter()
        .filter_map(|e| match e {
            ReplicaEffect::LocalProduceAnswer(resp) => Some((None, resp.correlation)),
            ReplicaEffect::Send {
                to,
                msg: Message::ProduceResponse(resp),
            } => Some((Some(to), resp.correlation)),
            _ => None,
        })
        .collect();
    assert_eq!(answers, vec![(None, 1), (Some(Address::Client(7)), 2)]);
}

/// A fetch's answer leaves ahead of what the fetch set off: the follower catching up
/// commits an acks=all produce, and the fetch response is emitted before the produce's.
#[test]
fn a_fetch_is_answered_before_the_produce_it_commits() {
    let log = <PartitionLog<MemStorage> as TestLog>::fresh();
    let mut r = Replica::new(tp(), 1, log, config());
    r.apply_partition_state(0, Some(1), 1, 1, &[1, 2], &[1, 2]);
    r.poll_outputs();
    let produce = ProduceRequest {
        correlation: 5,
        tp: tp(),
        acks: Acks::All,
        timeout: 1_000 * MS,
        batch: EncodedBatch::encode(&batch(&["v"])).unwrap(),
        transactional_id: None,
    };
    r.handle_produce(0, Address::Client(0), produce);
    assert!(r.poll_outputs().is_empty(), "waits for follower 2");
    let leo = r.log().log_end_offset();
    r.handle_fetch(
        MS,
        FetchRequest {
            correlation: 9,
            tp: tp(),
            replica_id: 2,
            current_leader_epoch: 1,
            fetch_offset: leo,
            last_fetched_epoch: Some(1),
            max_bytes: 1 << 20,
            high_watermark: 0,
            max_wait: 0,
        },
    );
    let sent: Vec<(Address, &'static str)> = r
        .poll_outputs()
        .into_iter()
        .filter_map(|e| match e {
            ReplicaEffect::Send { to, msg } => Some((
                to,
                match msg {
                    Message::FetchResponse(_) => "fetch",
                    Message::ProduceResponse(_) => "produce",
                    _ => "other",
                },
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        sent,
        vec![(Address::Node(2), "fetch"), (Address::Client(0), "produce")]
    );
}

/// A leader whose flush failed (a full disk) tries again on a timer: with
/// no further append the HW would otherwise stay below the log end for good, and a
/// `__consumer_offsets` coordinator waiting for HW = log end never loaded (seed 5503).
#[test]
fn a_failed_leader_flush_is_retried_without_another_append() {
    let disk = MemStorage::new();
    let (log, _) = PartitionLog::open(disk.clone(), "t-0", LogConfig::default()).expect("open");
    let cfg = ReplicaConfig {
        flush_interval: 20 * MS,
        min_insync_replicas: 1,
        ..config()
    };
    let mut r = Replica::new(tp(), 1, log, cfg);
    r.apply_partition_state(0, Some(1), 1, 1, &[1], &[1]);
    let mut now = 0;
    let mut run_to = |r: &mut Replica<PartitionLog<MemStorage>>, until: Nanos| {
        while let Some(t) = r.poll_timeout().filter(|&t| t <= until) {
            now = now.max(t);
            r.handle_timeout(now);
        }
        now = until;
    };
    run_to(&mut r, 25 * MS);
    let req = ProduceRequest {
        correlation: 1,
        tp: tp(),
        acks: Acks::All,
        timeout: 10_000 * MS,
        batch: EncodedBatch::encode(&batch(&["v"])).unwrap(),
        transactional_id: None,
    };
    r.handle_produce(25 * MS, Address::Client(7), req);
    // The disk fills before the group-commit flush: the segment syncs, the recovery-point
    // journal's append fails.
    disk.set_capacity(Some(0));
    run_to(&mut r, 100 * MS);
    let leo = r.log().log_end_offset();
    assert!(
        r.high_watermark() < leo,
        "nothing new is durable while the disk is full"
    );
    disk.set_capacity(None);
    // No append follows: only the retry can flush.
    run_to(&mut r, 400 * MS);
    assert_eq!(
        r.high_watermark(),
        leo,
        "the retried flush commits the tail"
    );
    let acked = r.poll_outputs().into_iter().any(|e| {
        matches!(e, ReplicaEffect::Send { msg: Message::ProduceResponse(resp), .. } if resp.result.is_ok())
    });
    assert!(acked, "the waiting acks=all produce is acknowledged");
}

/// A leader that is the partition's only replica, over a fresh log with `log_config`.
fn lone_leader(log_config: LogConfig) -> Replica<PartitionLog<MemStorage>> {
    let (log, _) = PartitionLog::open(MemStorage::new(), "t-0", log_config).expect("open");
    let mut r = Replica::new(tp(), 1, log, config());
    r.apply_partition_state(0, Some(1), 1, 1, &[1], &[1]);
    r.poll_outputs();
    r
}

/// `bytes` produced (acks=1) to `r` as they are; its answer.
fn produce_bytes(
    r: &mut Replica<PartitionLog<MemStorage>>,
    bytes: Vec<u8>,
) -> Result<ProduceAck, ProduceError> {
    let req = ProduceRequest {
        correlation: 3,
        tp: tp(),
        acks: Acks::Leader,
        timeout: MS,
        batch: EncodedBatch::from_bytes(bytes),
        transactional_id: None,
    };
    r.handle_produce(MS, Address::Client(7), req);
    r.poll_outputs()
        .into_iter()
        .find_map(|e| match e {
            ReplicaEffect::Send {
                msg: Message::ProduceResponse(resp),
                ..
            } => Some(resp.result),
            _ => None,
        })
        .expect("answered")
}

/// What the whole log holds, as stored.
fn stored(r: &mut Replica<PartitionLog<MemStorage>>) -> Vec<u8> {
    let start = r.log().log_start_offset();
    let bytes = r.log_mut().read_encoded(start, usize::MAX).expect("read");
    bytes.as_bytes().to_vec()
}

/// The CRC of an encoded batch made right again after an edit.
fn fix_crc(b: &mut [u8]) {
    use crate::log::{CRC_POS, CRC_START};
    let crc = crc32fast::hash(&b[CRC_START..]);
    b[CRC_POS..CRC_START].copy_from_slice(&crc.to_be_bytes());
}

/// The produce path passes the producer's bytes through: the leader's log holds exactly
/// what the producer encoded, with only base offset, epoch, offset deltas and max
/// timestamp set in place (and the CRC made to match). Decoding and encoding again would
/// not give these bytes: the producer fields of this plain batch are not the values the
/// encoder writes for "no producer".
#[test]
fn the_leader_writes_the_producers_bytes_with_offsets_placed() {
    use crate::log::{place_encoded, Record};
    let mut r = lone_leader(LogConfig::default());
    let before = r.log().log_end_offset();
    assert!(before > 0, "the epoch marker is in the log");
    let mut records: Vec<Record> = (0..3u32)
        .map(|i| Record::new(i * 4, None, Some(vec![b'a' + i as u8; 5])))
        .collect();
    records[1].timestamp_delta = 9;
    let mut sent = RecordBatch::of_records(1_000, records).encode().unwrap();
    // No producer id, but zeros (not u16::MAX, u32::MAX) in its epoch and sequence.
    sent[47..53].fill(0);
    fix_crc(&mut sent);
    let ack = produce_bytes(&mut r, sent.clone()).expect("appended");
    assert_eq!(ack.base_offset, before);
    let mut want = sent.clone();
    let h = place_encoded(&mut want, before, 1).unwrap();
    assert_eq!((h.max_timestamp, h.next_offset()), (1_009, before + 3));
    let all = stored(&mut r);
    assert_eq!(&all[all.len() - want.len()..], &want[..]);
    assert_eq!(r.log().log_end_offset(), before + 3);
    let decoded = RecordBatch::decode(&want).unwrap().0;
    assert_ne!(decoded.encode().unwrap(), want, "re-encoding would differ");

    // An idempotent producer's batch: its sequence lands in the producer state table, so
    // a retry of the same bytes is a duplicate with the original offset.
    let info = ProducerInfo {
        producer_id: 11,
        producer_epoch: 0,
        base_sequence: 0,
    };
    let b = batch(&["x", "y"]).with_producer(Some(info));
    let sent = EncodedBatch::encode(&b).unwrap().into_bytes();
    let first = produce_bytes(&mut r, sent.clone()).expect("appended");
    assert_eq!((first.base_offset, first.duplicate), (before + 3, false));
    let again = produce_bytes(&mut r, sent.clone()).expect("answered");
    assert_eq!((again.base_offset, again.duplicate), (before + 3, true));
    assert_eq!(r.log().log_end_offset(), before + 5, "written once");
    let tail = stored(&mut r);
    let placed = b.at(before + 3).in_epoch(1).encode().unwrap();
    assert_eq!(&tail[tail.len() - placed.len()..], &placed[..]);
}

/// Bytes that are not one good batch get an answer naming the problem, never a panic, and
/// leave the log (and the replica's leadership) as they were; none of the answers is one
/// a producer would retry.
#[test]
fn a_malformed_produce_batch_is_refused_by_name_and_nothing_is_written() {
    use crate::log::{BATCH_HEADER_LEN, CONTROL_BATCH_BIT};
    let config = LogConfig {
        max_batch_bytes: 300,
        ..LogConfig::default()
    };
    let mut r = lone_leader(config);
    let info = ProducerInfo {
        producer_id: 11,
        producer_epoch: 0,
        base_sequence: 0,
    };
    let good = EncodedBatch::encode(&batch(&["good", "one"]).with_producer(Some(info)))
        .unwrap()
        .into_bytes();
    produce_bytes(&mut r, good.clone()).expect("a good batch is appended");
    let log_before = stored(&mut r);
    let end_before = r.log().log_end_offset();

    let mut flipped = good.clone();
    *flipped.last_mut().unwrap() ^= 1;
    let mut magic = good.clone();
    magic[12] = 9;
    let mut trailing = good.clone();
    trailing.push(0);
    let mut lying = good.clone();
    lying[BATCH_HEADER_LEN..BATCH_HEADER_LEN + 4].copy_from_slice(&1000u32.to_be_bytes());
    fix_crc(&mut lying);
    let empty = batch(&[]).encode().unwrap();
    let mut empty_flipped = empty.clone();
    empty_flipped[20] ^= 1;
    let mut control = batch(&["c"]).encode().unwrap();
    control[21..23].copy_from_slice(&CONTROL_BATCH_BIT.to_be_bytes());
    fix_crc(&mut control);
    let big = batch(&[&"v".repeat(400)]).encode().unwrap();
    let big_len = big.len();
    // A retry of the appended batch (a duplicate) whose bytes were damaged on the way.
    let mut dup_flipped = good.clone();
    dup_flipped[BATCH_HEADER_LEN + 20] ^= 1;

    type Check = Box<dyn Fn(&ProduceError) -> bool>;
    let corrupt = |needle: &'static str| -> Check {
        Box::new(move |e| matches!(e, ProduceError::CorruptBatch(m) if m.contains(needle)))
    };
    let cases: Vec<(&str, Vec<u8>, Check)> = vec![
        ("bad CRC", flipped, corrupt("CRC mismatch")),
        (
            "truncated",
            good[..good.len() - 1].to_vec(),
            corrupt("truncated"),
        ),
        ("not a batch", b"evil".to_vec(), corrupt("truncated")),
        ("no bytes", Vec::new(), corrupt("truncated")),
        (
            "wrong magic",
            magic,
            corrupt("unsupported batch format version 9"),
        ),
        (
            "trailing bytes",
            trailing,
            corrupt("1 bytes after the batch"),
        ),
        ("lying record length", lying, corrupt("record 0")),
        (
            "zero records",
            empty,
            Box::new(|e| matches!(e, ProduceError::InvalidRecord(m) if m == "empty batch")),
        ),
        (
            "zero records, damaged",
            empty_flipped,
            corrupt("CRC mismatch"),
        ),
        (
            "control batch",
            control,
            Box::new(|e| matches!(e, ProduceError::InvalidRecord(m) if m.contains("control"))),
        ),
        (
            "too large",
            big,
            Box::new(move |e| {
                *e == ProduceError::BatchTooLarge {
                    size: big_len,
                    max: 300,
                }
            }),
        ),
        ("damaged duplicate", dup_flipped, corrupt("CRC mismatch")),
    ];
    for (what, bytes, expected) in cases {
        let e = produce_bytes(&mut r, bytes).expect_err(what);
        assert!(expected(&e), "{what}: {e:?}");
        assert!(!crate::client::retriable(&e), "{what}: {e} is final");
        assert_eq!(r.log().log_end_offset(), end_before, "{what}");
        assert_eq!(stored(&mut r), log_before, "{what}: the log is unchanged");
        assert_eq!(r.role(), ReplicaRole::Leader, "{what}: still leading");
    }
    // The producer's next batch still follows its last good one.
    let next = ProducerInfo {
        base_sequence: 2,
        ..info
    };
    let b = batch(&["next"]).with_producer(Some(next));
    let ack = produce_bytes(&mut r, EncodedBatch::encode(&b).unwrap().into_bytes());
    assert_eq!(ack.map(|a| a.base_offset), Ok(end_before));
}

/// Kafka refuses a keyless record on a compacted topic with INVALID_RECORD and this very
/// message; keyed records (tombstones included) go in, and a log that is not compacted
/// still takes keyless ones.
#[test]
fn a_compacted_log_refuses_keyless_records_by_kafkas_message() {
    use super::leader::KEYLESS_ON_COMPACTED;
    let compacted = LogConfig {
        compaction: Some(crate::log::CompactionConfig::default()),
        ..LogConfig::default()
    };
    let mut r = lone_leader(compacted);
    let keyed = RecordBatch::new(0, [(Some(b"k".to_vec()), Some(b"v".to_vec()))]);
    let tombstone = RecordBatch::new(0, [(Some(b"k".to_vec()), None)]);
    let mixed = RecordBatch::new(
        0,
        [
            (Some(b"k".to_vec()), Some(b"v".to_vec())),
            (None, Some(b"x".to_vec())),
        ],
    );
    let compressed = batch(&["no key"]).with_codec(crate::log::Codec::Lz4);
    for b in [&keyed, &tombstone] {
        let bytes = EncodedBatch::encode(b).unwrap().into_bytes();
        produce_bytes(&mut r, bytes).expect("a keyed record is appended");
    }
    let end = r.log().log_end_offset();
    for (what, b) in [
        ("mixed", mixed),
        ("keyless", batch(&["v"])),
        ("lz4", compressed),
    ] {
        let bytes = EncodedBatch::encode(&b).unwrap().into_bytes();
        let e = produce_bytes(&mut r, bytes).expect_err(what);
        assert_eq!(
            e,
            ProduceError::InvalidRecord(KEYLESS_ON_COMPACTED.into()),
            "{what}"
        );
        assert!(!crate::client::retriable(&e));
        assert_eq!(r.log().log_end_offset(), end, "{what}: nothing written");
    }
    let mut plain = lone_leader(LogConfig::default());
    let bytes = EncodedBatch::encode(&batch(&["v"])).unwrap().into_bytes();
    produce_bytes(&mut plain, bytes).expect("a log that is not compacted takes it");
}

#[cfg(test)]
mod txn_tests;
