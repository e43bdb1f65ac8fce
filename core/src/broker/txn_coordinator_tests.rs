//! Transaction coordinators over real brokers: `__transaction_state` created on the first
//! FindCoordinator, producer ids from the real controller, state replicated and reloaded
//! by a new leader. The partition side of the markers is played by the test: it takes
//! every WriteTxnMarker off the network and answers it (or not).

use super::tests::{broker_config, World, MS};
use super::*;
use crate::testing::Delivery as _;
use crate::txn::*;

const TXN_ID: &str = "pipeline-1";
const CLIENT: u64 = 9;

fn config() -> BrokerConfig {
    BrokerConfig {
        transaction_state_topic_partitions: 2,
        transaction_state_topic_replication_factor: 3,
        transaction_state_topic_min_insync_replicas: 2,
        group_append_timeout: 500 * MS,
        ..broker_config()
    }
}

fn cluster() -> World {
    let mut w = World::new(&[1, 2, 3], config());
    w.run(100 * MS);
    w.create_topic(3, 2);
    w
}

/// A marker the test took off the network: who sent it, to whom.
struct Marker {
    from: Address,
    to: Address,
    request: WriteTxnMarkerRequest,
}

impl World {
    fn send_txn(&mut self, from: Address, to: NodeId, request: TxnRequest) -> u64 {
        self.correlation += 1;
        let msg = Message::txn(self.correlation, request);
        self.net.queue.push_back((from, Address::Node(to), msg));
        self.correlation
    }

    fn txn_response(&self, correlation: u64) -> Option<TxnResponse> {
        self.inbox.iter().find_map(|(_, m)| match m {
            Message::TxnResponse {
                correlation: c,
                response,
            } if *c == correlation => Some((**response).clone()),
            _ => None,
        })
    }

    /// Run for `duration`, taking every WriteTxnMarker off the network.
    fn run_taking_markers(&mut self, duration: Nanos, markers: &mut Vec<Marker>) {
        let end = self.now + duration;
        while self.now < end {
            self.now += MS;
            self.tick_all();
            self.deliver_only(|from, to, msg| match msg {
                Message::WriteTxnMarker(r) => {
                    markers.push(Marker {
                        from,
                        to,
                        request: (**r).clone(),
                    });
                    false
                }
                _ => true,
            });
        }
    }

    /// Send and wait for the answer (markers taken meanwhile).
    fn txn_call_to(
        &mut self,
        to: NodeId,
        request: TxnRequest,
        markers: &mut Vec<Marker>,
    ) -> TxnResponse {
        let c = self.send_txn(Address::Client(CLIENT), to, request);
        for _ in 0..1500 {
            if let Some(r) = self.txn_response(c) {
                return r;
            }
            self.run_taking_markers(MS, markers);
        }
        panic!("no answer to txn request {c}");
    }

    fn find_txn_coordinator(&mut self, markers: &mut Vec<Marker>) -> TxnCoordinatorInfo {
        for attempt in 0..300usize {
            let ids: Vec<NodeId> = self.brokers.keys().copied().collect();
            let to = ids[attempt % ids.len()];
            let req = TxnRequest::FindCoordinator {
                transactional_id: TXN_ID.into(),
            };
            match self.txn_call_to(to, req, markers) {
                TxnResponse::FindCoordinator(Ok(info)) => return info,
                TxnResponse::FindCoordinator(Err(TxnError::CoordinatorNotAvailable)) => {
                    self.run_taking_markers(10 * MS, markers)
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        panic!("no transaction coordinator found");
    }

    /// Find the coordinator and ask it, retrying retriable errors.
    fn txn_call(&mut self, request: TxnRequest, markers: &mut Vec<Marker>) -> TxnResponse {
        for _ in 0..100 {
            let info = self.find_txn_coordinator(markers);
            let resp = self.txn_call_to(info.node, request.clone(), markers);
            match resp.error() {
                Some(e) if e.is_retriable() => self.run_taking_markers(10 * MS, markers),
                _ => return resp,
            }
        }
        panic!("coordinator never answered {request:?}");
    }

    /// Answer markers as their partition's leader would once the marker is committed.
    fn answer_markers(&mut self, markers: Vec<Marker>) {
        for m in markers {
            let resp = WriteTxnMarkerResponse {
                correlation: m.request.correlation,
                tp: m.request.tp,
                result: Ok(()),
            };
            self.net
                .queue
                .push_back((m.to, m.from, Message::WriteTxnMarkerResponse(resp)));
        }
        self.deliver_all();
    }

    fn txn_state_at(&self, node: NodeId) -> Option<TxnMetadata> {
        self.brokers
            .get(&node)?
            .txn_coordinators()?
            .coordinator_of(TXN_ID)?
            .txn(TXN_ID)
            .cloned()
    }
}

fn init() -> TxnRequest {
    TxnRequest::InitProducerId(InitProducerIdRequest {
        transactional_id: TXN_ID.into(),
        transaction_timeout_ms: 60_000,
        current: None,
    })
}

fn add(p: ProducerIdAndEpoch, verify_only: bool) -> TxnRequest {
    TxnRequest::AddPartitionsToTxn(AddPartitionsToTxnRequest {
        transactional_id: TXN_ID.into(),
        producer_id: p.producer_id,
        producer_epoch: p.producer_epoch,
        partitions: vec![super::tests::tp()],
        verify_only,
    })
}

fn end(p: ProducerIdAndEpoch) -> TxnRequest {
    TxnRequest::EndTxn(EndTxnRequest {
        transactional_id: TXN_ID.into(),
        producer_id: p.producer_id,
        producer_epoch: p.producer_epoch,
        result: TxnResult::Commit,
        keep_epoch: false,
    })
}

/// Up to a committed EndTxn whose markers are taken (not answered).
fn prepared_commit(w: &mut World, markers: &mut Vec<Marker>) -> (ProducerIdAndEpoch, NodeId) {
    let TxnResponse::InitProducerId(Ok(p)) = w.txn_call(init(), markers) else {
        panic!("InitProducerId failed");
    };
    assert_eq!(p.producer_epoch, 0);
    let nowhere = TopicPartition::new("no-such-topic", 0);
    let mut bad = add(p, false);
    if let TxnRequest::AddPartitionsToTxn(r) = &mut bad {
        r.partitions.push(nowhere.clone());
    }
    // Retriable for the client (the coordinator's image may lag a new topic): asked once.
    let node = w.find_txn_coordinator(markers).node;
    assert_eq!(
        w.txn_call_to(node, bad, markers),
        TxnResponse::AddPartitionsToTxn(Err(TxnError::UnknownTopicOrPartition(nowhere)))
    );
    assert_eq!(
        w.txn_call(add(p, false), markers),
        TxnResponse::AddPartitionsToTxn(Ok(()))
    );
    let coordinator = w.find_txn_coordinator(markers).node;
    // A partition leader's KIP-890 verification comes from a broker address and is
    // answered there.
    let asker = if coordinator == 2 { 3 } else { 2 };
    let c = w.send_txn(Address::Node(asker), coordinator, add(p, true));
    let mut verified = None;
    w.deliver_only(|_, to, msg| match msg {
        Message::TxnResponse {
            correlation,
            response,
        } if *correlation == c => {
            verified = Some((to, (**response).clone()));
            false
        }
        _ => true,
    });
    assert_eq!(
        verified,
        Some((
            Address::Node(asker),
            TxnResponse::AddPartitionsToTxn(Ok(()))
        ))
    );
    assert_eq!(
        w.txn_call(end(p), markers),
        TxnResponse::EndTxn(Ok(ProducerIdAndEpoch {
            producer_id: p.producer_id,
            producer_epoch: 1
        }))
    );
    (p, coordinator)
}

#[test]
fn a_transaction_commits_through_the_hosted_coordinator() {
    let mut w = cluster();
    let mut markers = Vec::new();
    let (p, coordinator) = prepared_commit(&mut w, &mut markers);
    let state = w.txn_state_at(coordinator).expect("hosted");
    assert_eq!(state.state, TxnState::PrepareCommit);
    assert_eq!(
        markers.len(),
        1,
        "one marker per partition: {}",
        markers.len()
    );
    let m = &markers[0];
    assert_eq!(m.from, Address::Node(coordinator));
    assert_eq!(m.to, Address::Node(w.leader().expect("t-0 has a leader")));
    assert_eq!(
        (
            m.request.producer_id,
            m.request.producer_epoch,
            m.request.result
        ),
        (p.producer_id, 1, TxnResult::Commit)
    );
    w.answer_markers(std::mem::take(&mut markers));
    w.run_taking_markers(50 * MS, &mut markers);
    assert_eq!(
        w.txn_state_at(coordinator).map(|s| s.state),
        Some(TxnState::CompleteCommit)
    );
    assert!(markers.is_empty(), "nothing resent once written");
}

#[test]
fn a_new_coordinator_resumes_the_markers_of_a_prepared_commit() {
    let mut w = cluster();
    let mut markers = Vec::new();
    let (p, old) = prepared_commit(&mut w, &mut markers);
    let first_epoch = markers[0].request.coordinator_epoch;
    markers.clear(); // lost with the coordinator
    w.crash(old);
    let mut new = old;
    let mut moved = false;
    for _ in 0..300 {
        let info = w.find_txn_coordinator(&mut markers);
        new = info.node;
        // Complete already if the new coordinator leads t-0 too: its marker then goes to
        // its own broker's partition side, which writes it.
        moved = new != old
            && w.txn_state_at(new).is_some_and(|s| {
                matches!(s.state, TxnState::PrepareCommit | TxnState::CompleteCommit)
            });
        if moved {
            break;
        }
        w.run_taking_markers(10 * MS, &mut markers);
    }
    assert!(moved, "no other broker took over the coordinator");
    w.run_taking_markers(50 * MS, &mut markers);
    assert!(markers.iter().all(|m| m.from == Address::Node(new)
        && m.request.coordinator_epoch > first_epoch
        && m.request.producer_epoch == 1));
    // The producer's retried EndTxn (its answer was lost) is told the same outcome.
    w.answer_markers(std::mem::take(&mut markers));
    w.run_taking_markers(50 * MS, &mut markers);
    assert_eq!(
        w.txn_state_at(new).map(|s| s.state),
        Some(TxnState::CompleteCommit)
    );
    assert_eq!(
        w.txn_call(end(p), &mut markers),
        TxnResponse::EndTxn(Ok(ProducerIdAndEpoch {
            producer_id: p.producer_id,
            producer_epoch: 1
        }))
    );
}

/// A coordinator's marker to a partition its own broker leads is delivered inside the
/// broker (drivers do not route a node's messages to itself): it never reaches the
/// network, while the markers to partitions led elsewhere do.
#[test]
fn markers_to_a_partition_led_here_stay_off_the_network() {
    let mut w = cluster();
    let mut markers = Vec::new();
    w.admin(ControllerRequest::CreateTopic {
        name: "u".into(),
        config: crate::controller::TopicConfig {
            partitions: 3,
            replication_factor: 3,
            min_insync_replicas: 2,
            ..Default::default()
        },
        assignment: None,
    });
    w.run_taking_markers(500 * MS, &mut markers);
    let TxnResponse::InitProducerId(Ok(p)) = w.txn_call(init(), &mut markers) else {
        panic!("InitProducerId failed");
    };
    let coordinator = w.find_txn_coordinator(&mut markers).node;
    let image_leader = |w: &World, tp: &TopicPartition| {
        w.brokers[&coordinator]
            .image
            .partition(tp)
            .and_then(|s| s.leader)
    };
    let tps: Vec<TopicPartition> = (0..3).map(|i| TopicPartition::new("u", i)).collect();
    let local: Vec<&TopicPartition> = tps
        .iter()
        .filter(|tp| image_leader(&w, tp) == Some(coordinator))
        .collect();
    let remote = tps.len() - local.len();
    assert!(
        !local.is_empty() && remote > 0,
        "leaders spread over the brokers"
    );
    let req = TxnRequest::AddPartitionsToTxn(AddPartitionsToTxnRequest {
        transactional_id: TXN_ID.into(),
        producer_id: p.producer_id,
        producer_epoch: p.producer_epoch,
        partitions: tps.clone(),
        verify_only: false,
    });
    assert_eq!(
        w.txn_call(req, &mut markers),
        TxnResponse::AddPartitionsToTxn(Ok(()))
    );
    assert!(matches!(
        w.txn_call(end(p), &mut markers),
        TxnResponse::EndTxn(Ok(_))
    ));
    w.run_taking_markers(20 * MS, &mut markers);
    assert_eq!(markers.len(), remote, "only the remote markers travel");
    assert!(markers
        .iter()
        .all(|m| m.to != Address::Node(coordinator) && !local.contains(&&m.request.tp)));
}
