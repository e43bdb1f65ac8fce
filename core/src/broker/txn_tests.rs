//! The partition side of transactions at the broker: KIP-890 part 1 (a transactional write
//! is held while the leader asks the coordinator, whose answers the test gives by hand) and
//! WriteTxnMarker answered once the marker is committed.

use super::tests::{broker_config, tp, World, MS};
use super::*;
use crate::controller::TopicConfig;
use crate::log::{EncodedBatch, ProducerInfo};
use crate::testing::Delivery as _;
use crate::txn::{
    IsolationLevel, MarkerError, TxnError, TxnRequest, TxnResponse, TxnResult,
    WriteTxnMarkerRequest, WriteTxnMarkerResponse, TRANSACTION_STATE_TOPIC,
};

/// Plays the transaction coordinator: the stand-in's address for markers.
const COORDINATOR: Address = Address::Client(5);

/// A verification request a leader sent: (to, correlation, request).
type Caught = (Address, u64, TxnRequest);

fn txn_state_tp() -> TopicPartition {
    TopicPartition::new(TRANSACTION_STATE_TOPIC, 0)
}

/// Brokers 1-3 with topic `t` (rf 3) and, if `with_txn_state`, `__transaction_state`.
fn world(config: BrokerConfig, with_txn_state: bool) -> World {
    let mut w = World::new(&[1, 2, 3], config);
    w.run(100 * MS);
    w.create_topic(3, 2);
    if with_txn_state {
        w.admin(crate::controller::ControllerRequest::CreateTopic {
            name: TRANSACTION_STATE_TOPIC.into(),
            config: TopicConfig {
                partitions: 1,
                replication_factor: 1,
                min_insync_replicas: 1,
                ..TopicConfig::default()
            },
            assignment: None,
        });
        let known = w.run_until(2000 * MS, |w| {
            (1..=3).all(|id| {
                let image = w.brokers[&id].metadata_image();
                image
                    .partition(&txn_state_tp())
                    .is_some_and(|s| s.leader.is_some())
            })
        });
        assert!(known, "__transaction_state has no leader");
    }
    w
}

fn txn_coordinator(w: &World) -> NodeId {
    let image = w.brokers[&1].metadata_image();
    image
        .partition(&txn_state_tp())
        .and_then(|s| s.leader)
        .expect("a coordinator")
}

fn txn_batch(pid: u64, seq: u32, value: &str) -> RecordBatch {
    RecordBatch::from_values(0, [value.as_bytes().to_vec()])
        .transactional()
        .with_producer(Some(ProducerInfo {
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: seq,
        }))
}

fn send_txn(w: &mut World, to: NodeId, batch: RecordBatch) -> u64 {
    w.correlation += 1;
    let req = ProduceRequest {
        correlation: w.correlation,
        tp: tp(),
        acks: Acks::All,
        timeout: 500 * MS,
        batch: EncodedBatch::encode(&batch).expect("encodable"),
        transactional_id: Some("tx".into()),
    };
    w.net
        .queue
        .push_back((Address::Client(1), Address::Node(to), req.into()));
    w.correlation
}

/// Delivers everything in flight, taking the `Txn` requests out (the test answers them).
fn deliver_catching(w: &mut World) -> Vec<Caught> {
    let mut caught = Vec::new();
    w.deliver_only(|_, to, m| match m {
        Message::Txn {
            correlation,
            request,
        } => {
            caught.push((to, *correlation, (**request).clone()));
            false
        }
        _ => true,
    });
    caught
}

/// Runs for `duration` (1 ms steps), taking the `Txn` requests out.
fn run_catching(w: &mut World, duration: Nanos) -> Vec<Caught> {
    let mut caught = deliver_catching(w);
    let end = w.now + duration;
    while w.now < end {
        w.now += MS;
        w.tick_all();
        caught.extend(deliver_catching(w));
    }
    caught
}

/// The coordinator's answer to verification `correlation`, to `leader`.
fn answer(w: &mut World, leader: NodeId, correlation: u64, r: Result<(), TxnError>) {
    let from = Address::Node(txn_coordinator(w));
    let msg = Message::txn_response(correlation, TxnResponse::AddPartitionsToTxn(r));
    w.net.queue.push_back((from, Address::Node(leader), msg));
}

fn marker_answer(w: &World, correlation: u64) -> Option<WriteTxnMarkerResponse> {
    w.inbox.iter().find_map(|(c, m)| match m {
        Message::WriteTxnMarkerResponse(r) if *c == 5 && r.correlation == correlation => {
            Some(r.clone())
        }
        _ => None,
    })
}

fn send_marker(w: &mut World, to: NodeId, correlation: u64, tp: TopicPartition, result: TxnResult) {
    let req = WriteTxnMarkerRequest {
        correlation,
        tp,
        producer_id: 7,
        producer_epoch: 0,
        coordinator_epoch: 0,
        result,
        bumped: false,
    };
    let msg = Message::WriteTxnMarker(Box::new(req));
    w.net.queue.push_back((COORDINATOR, Address::Node(to), msg));
}

#[test]
fn kip890_part1_holds_a_transactional_write_until_the_coordinator_verifies_it() {
    let mut w = world(broker_config(), true);
    let leader = w.leader().expect("a leader");
    let coordinator = txn_coordinator(&w);
    let end_before = w.view(leader).log_end_offset;

    // Not verified: held, then refused with InvalidTxnState; nothing written.
    let c = send_txn(&mut w, leader, txn_batch(7, 0, "t"));
    let caught = run_catching(&mut w, 5 * MS);
    let [(to, corr, TxnRequest::AddPartitionsToTxn(req))] = caught.as_slice() else {
        panic!("one verification expected: {caught:?}");
    };
    assert_eq!(*to, Address::Node(coordinator));
    assert!(req.verify_only);
    assert_eq!((req.producer_id, req.producer_epoch), (7, 0));
    assert_eq!(
        (req.transactional_id.as_str(), req.partitions.as_slice()),
        ("tx", &[tp()][..])
    );
    assert_eq!(
        w.produce_response(c),
        None,
        "held while the coordinator is asked"
    );
    answer(
        &mut w,
        leader,
        *corr,
        Err(TxnError::InvalidTxnState("not in the txn".into())),
    );
    run_catching(&mut w, 5 * MS);
    assert!(
        matches!(
            w.produce_response(c),
            Some(Err(ProduceError::InvalidTxnState(_)))
        ),
        "{:?}",
        w.produce_response(c)
    );
    assert_eq!(w.view(leader).log_end_offset, end_before, "nothing written");

    // Verified: appended and acknowledged.
    let c = send_txn(&mut w, leader, txn_batch(7, 0, "t"));
    let caught = run_catching(&mut w, 5 * MS);
    assert_eq!(caught.len(), 1);
    answer(&mut w, leader, caught[0].1, Ok(()));
    let again = run_catching(&mut w, 100 * MS);
    assert!(
        matches!(w.produce_response(c), Some(Ok(_))),
        "{:?}",
        w.produce_response(c)
    );
    assert!(again.is_empty());
    // The transaction is open on the partition: its next write is not verified again.
    let c = send_txn(&mut w, leader, txn_batch(7, 1, "u"));
    assert!(run_catching(&mut w, 100 * MS).is_empty());
    assert!(matches!(w.produce_response(c), Some(Ok(_))));
    assert_eq!(w.values(leader).len(), 2);

    // A retriable coordinator error, or no answer at all: a retriable error.
    let c = send_txn(&mut w, leader, txn_batch(8, 0, "v"));
    let caught = run_catching(&mut w, 5 * MS);
    answer(
        &mut w,
        leader,
        caught[0].1,
        Err(TxnError::CoordinatorLoadInProgress),
    );
    run_catching(&mut w, 5 * MS);
    assert_eq!(
        w.produce_response(c),
        Some(Err(ProduceError::RequestTimedOut))
    );
    let c = send_txn(&mut w, leader, txn_batch(8, 0, "v"));
    run_catching(&mut w, 400 * MS);
    assert_eq!(w.produce_response(c), None);
    run_catching(&mut w, 200 * MS);
    assert_eq!(
        w.produce_response(c),
        Some(Err(ProduceError::RequestTimedOut))
    );
    assert_eq!(w.values(leader).len(), 2, "neither of producer 8's writes");
}

#[test]
fn unverified_txn_partition_appends_without_asking() {
    let mut config = broker_config();
    config.bugs.txn.unverified_txn_partition = true;
    let mut w = world(config, true);
    let leader = w.leader().expect("a leader");
    let c = send_txn(&mut w, leader, txn_batch(7, 0, "t"));
    assert!(run_catching(&mut w, 100 * MS).is_empty(), "no verification");
    assert!(matches!(w.produce_response(c), Some(Ok(_))));
}

#[test]
fn without_a_coordinator_a_transactional_write_gets_a_retriable_error() {
    let mut w = world(broker_config(), false);
    let leader = w.leader().expect("a leader");
    let c = send_txn(&mut w, leader, txn_batch(7, 0, "t"));
    assert!(run_catching(&mut w, 5 * MS).is_empty());
    assert_eq!(
        w.produce_response(c),
        Some(Err(ProduceError::RequestTimedOut))
    );
    assert!(w.values(leader).is_empty());
}

#[test]
fn a_marker_is_answered_once_committed_and_releases_read_committed_readers() {
    let mut config = broker_config();
    config.bugs.txn.unverified_txn_partition = true; // no coordinator in this test
    let mut w = world(config, false);
    let leader = w.leader().expect("a leader");
    let c = send_txn(&mut w, leader, txn_batch(7, 0, "t"));
    w.run(100 * MS);
    assert!(matches!(w.produce_response(c), Some(Ok(_))));
    let read_committed = |w: &mut World| {
        w.correlation += 1;
        let req = ConsumerFetchRequest {
            correlation: w.correlation,
            tp: tp(),
            offset: 0,
            max_bytes: 1 << 20,
            current_leader_epoch: None,
            last_fetched_epoch: None,
            isolation: IsolationLevel::ReadCommitted,
        };
        let c = w.correlation;
        w.net.queue.push_back((
            Address::Client(2),
            Address::Node(leader),
            Message::ConsumerFetch(req),
        ));
        w.deliver_all();
        w.inbox
            .iter()
            .find_map(|(_, m)| match m {
                Message::ConsumerFetchResponse(r) if r.correlation == c => Some(r.result.clone()),
                _ => None,
            })
            .expect("answered")
            .expect("records")
    };
    let before = read_committed(&mut w);
    assert!(
        before.batches.is_empty(),
        "the open transaction is not readable"
    );
    send_marker(&mut w, leader, 41, tp(), TxnResult::Commit);
    w.run(100 * MS);
    let resp = marker_answer(&w, 41).expect("the marker is answered");
    assert_eq!((resp.tp.clone(), resp.result.clone()), (tp(), Ok(())));
    let after = read_committed(&mut w);
    assert_eq!(after.batches.len(), 1);
    assert_eq!(after.next_offset, after.high_watermark, "past the marker");

    // Refusals are answered at once: a follower, an unknown partition.
    let follower = (1..=3).find(|&id| id != leader).unwrap();
    send_marker(&mut w, follower, 42, tp(), TxnResult::Abort);
    send_marker(
        &mut w,
        leader,
        43,
        TopicPartition::new("nope", 0),
        TxnResult::Abort,
    );
    w.deliver_all();
    assert_eq!(
        marker_answer(&w, 42).unwrap().result,
        Err(MarkerError::NotLeader)
    );
    assert_eq!(
        marker_answer(&w, 43).unwrap().result,
        Err(MarkerError::UnknownTopicOrPartition)
    );
}
