//! The transactional producer driven by scripted answers: a fake coordinator, group
//! coordinator and partition leaders, answering exactly what each test needs.

use super::*;
use crate::group::CoordinatorInfo;
use crate::txn::TxnCoordinatorInfo;

const TXN_NODE: NodeId = 2;
const GROUP_NODE: NodeId = 3;

fn tp(p: u32) -> TopicPartition {
    TopicPartition::new("out", p)
}

fn id(epoch: u16) -> ProducerIdAndEpoch {
    ProducerIdAndEpoch {
        producer_id: 7,
        producer_epoch: epoch,
    }
}

fn batch() -> RecordBatch {
    RecordBatch::from_values(0, [b"a".to_vec(), b"b".to_vec()])
}

struct H {
    p: TransactionalProducer,
    now: Nanos,
    events: Vec<TxnProducerEvent>,
    sends: Vec<(Destination, u64, TxnProducerRequest)>,
}

impl H {
    fn new() -> Self {
        Self::with(TxnProducerConfig::new("tx-1"))
    }

    fn with(config: TxnProducerConfig) -> Self {
        Self {
            p: TransactionalProducer::new(config),
            now: 0,
            events: Vec::new(),
            sends: Vec::new(),
        }
    }

    /// Moves the producer's outputs into `sends` and `events`.
    fn collect(&mut self) {
        for o in self.p.poll_outputs() {
            match o {
                TxnProducerOutput::Send {
                    to,
                    correlation,
                    request,
                } => self.sends.push((to, correlation, request)),
                TxnProducerOutput::Event(e) => self.events.push(e),
            }
        }
    }

    /// The requests sent since the last call.
    fn sent(&mut self) -> Vec<(Destination, u64, TxnProducerRequest)> {
        self.collect();
        std::mem::take(&mut self.sends)
    }

    /// Exactly one request was sent: it.
    fn one(&mut self) -> (Destination, u64, TxnProducerRequest) {
        let mut s = self.sent();
        assert_eq!(s.len(), 1, "expected one request, got {s:?}");
        s.pop().expect("one")
    }

    fn answer(&mut self, correlation: u64, r: TxnProducerResponse) {
        self.p.step(self.now, correlation, r);
        self.collect();
    }

    fn txn_ok(&mut self, correlation: u64, r: TxnResponse) {
        self.answer(correlation, TxnProducerResponse::Txn(r));
    }

    fn advance_to_timer(&mut self) {
        self.now = self.p.poll_timeout().expect("a timer");
        self.p.handle_timeout(self.now);
        self.collect();
    }

    /// init answered: coordinator TXN_NODE, identity `id(epoch)`.
    fn initialised(epoch: u16) -> Self {
        Self::initialised_with(TxnProducerConfig::new("tx-1"), epoch)
    }

    /// `initialised` with a producer of `config` (transactional id "tx-1").
    fn initialised_with(config: TxnProducerConfig, epoch: u16) -> Self {
        let mut h = H::with(config);
        h.p.init(0).unwrap();
        let (to, c, r) = h.one();
        assert_eq!(to, Destination::AnyBroker);
        assert!(
            matches!(r, TxnProducerRequest::Txn(TxnRequest::FindCoordinator { ref transactional_id }) if transactional_id == "tx-1")
        );
        h.txn_ok(
            c,
            TxnResponse::FindCoordinator(Ok(TxnCoordinatorInfo {
                node: TXN_NODE,
                partition: 0,
            })),
        );
        let (to, c, r) = h.one();
        assert_eq!(to, Destination::Node(TXN_NODE));
        assert!(matches!(
            r,
            TxnProducerRequest::Txn(TxnRequest::InitProducerId(_))
        ));
        h.txn_ok(c, TxnResponse::InitProducerId(Ok(id(epoch))));
        assert_eq!(h.p.state(), &TxnProducerState::Ready);
        assert_eq!(
            h.events.pop(),
            Some(TxnProducerEvent::Initialized(id(epoch)))
        );
        h
    }

    /// begin + send to `tp(0)`, partition added: the produce request's correlation and batch.
    fn written_batch(&mut self) -> (u64, RecordBatch) {
        self.p.begin().unwrap();
        self.p.send(self.now, tp(0), batch()).unwrap();
        let (_, c, r) = self.one();
        let TxnProducerRequest::Txn(TxnRequest::AddPartitionsToTxn(a)) = r else {
            panic!("expected AddPartitionsToTxn, got {r:?}");
        };
        assert_eq!(a.partitions, vec![tp(0)]);
        self.txn_ok(c, TxnResponse::AddPartitionsToTxn(Ok(())));
        let (to, c, r) = self.one();
        assert_eq!(to, Destination::LeaderOf(tp(0)));
        let TxnProducerRequest::Produce { batch, .. } = r else {
            panic!("expected a produce, got {r:?}");
        };
        (c, batch)
    }
}

fn acked(offset: Offset) -> TxnProducerResponse {
    TxnProducerResponse::Produce(Ok(ProduceAck {
        base_offset: offset,
        leader_epoch: 1,
        duplicate: false,
    }))
}

fn end_txn(r: &TxnProducerRequest) -> &EndTxnRequest {
    match r {
        TxnProducerRequest::Txn(TxnRequest::EndTxn(e)) => e,
        other => panic!("expected EndTxn, got {other:?}"),
    }
}

#[test]
fn a_read_process_write_transaction_end_to_end() {
    let mut h = H::initialised(0);
    let (pc, b) = h.written_batch();
    assert!(b.is_transactional());
    let info = b.producer.expect("stamped");
    assert_eq!(
        (info.producer_id, info.producer_epoch, info.base_sequence),
        (7, 0, 0)
    );

    // The input offsets join the transaction while the batch is in flight.
    let offsets: BTreeMap<_, _> = [(
        TopicPartition::new("in", 0),
        OffsetAndMetadata {
            offset: 42,
            leader_epoch: None,
            metadata: String::new(),
        },
    )]
    .into();
    h.p.send_offsets(h.now, "g", Some(5), Some("m-1".into()), offsets.clone())
        .unwrap();
    let (to, c, r) = h.one();
    assert_eq!(to, Destination::Node(TXN_NODE));
    assert!(
        matches!(r, TxnProducerRequest::Txn(TxnRequest::AddOffsetsToTxn(ref a)) if a.group_id == "g" && a.producer_id == 7)
    );
    h.txn_ok(c, TxnResponse::AddOffsetsToTxn(Ok(())));
    let (to, c, r) = h.one();
    assert_eq!(to, Destination::AnyBroker);
    assert_eq!(
        r,
        TxnProducerRequest::Group(GroupRequest::FindCoordinator {
            group_id: "g".into()
        })
    );
    h.answer(
        c,
        TxnProducerResponse::Group(GroupResponse::FindCoordinator(Ok(CoordinatorInfo {
            node: GROUP_NODE,
            partition: 1,
        }))),
    );
    let (to, c, r) = h.one();
    assert_eq!(to, Destination::Node(GROUP_NODE));
    let TxnProducerRequest::Group(GroupRequest::TxnOffsetCommit(t)) = r else {
        panic!("expected TxnOffsetCommit, got {r:?}");
    };
    assert_eq!(
        (
            t.producer_id,
            t.producer_epoch,
            t.generation,
            t.member_id.as_deref()
        ),
        (7, 0, Some(5), Some("m-1"))
    );
    assert_eq!(t.offsets, offsets);
    h.answer(
        c,
        TxnProducerResponse::Group(GroupResponse::TxnOffsetCommit(Ok(()))),
    );
    assert!(h
        .events
        .contains(&TxnProducerEvent::OffsetsSent { group: "g".into() }));

    // Commit waits for the write in flight.
    h.p.commit(h.now).unwrap();
    assert!(h.sent().is_empty(), "no EndTxn while a batch is in flight");
    h.answer(pc, acked(100));
    assert!(h.events.contains(&TxnProducerEvent::Written {
        tp: tp(0),
        base_offset: 100,
        records: 2
    }));
    let (to, c, r) = h.one();
    assert_eq!(to, Destination::Node(TXN_NODE));
    let e = end_txn(&r);
    assert_eq!((e.result, e.producer_epoch), (TxnResult::Commit, 0));
    // KIP-890 part 2: the answer carries the bumped epoch; sequences restart at 0.
    h.txn_ok(c, TxnResponse::EndTxn(Ok(id(1))));
    assert_eq!(
        h.events.last(),
        Some(&TxnProducerEvent::Completed {
            result: TxnResult::Commit,
            producer: id(1)
        })
    );
    assert_eq!(h.p.state(), &TxnProducerState::Ready);
    let (_, b) = h.written_batch();
    let info = b.producer.expect("stamped");
    assert_eq!((info.producer_epoch, info.base_sequence), (1, 0));
}

#[test]
fn operations_out_of_order_are_refused_with_a_typed_error() {
    let mut h = H::new();
    assert_eq!(h.p.begin(), Err(TxnClientError::NotInitialized));
    assert_eq!(
        h.p.send(0, tp(0), batch()),
        Err(TxnClientError::NotInitialized)
    );
    assert_eq!(h.p.commit(0), Err(TxnClientError::NotInitialized));
    let mut h = H::initialised(0);
    assert_eq!(h.p.init(0), Err(TxnClientError::AlreadyInitialized));
    assert_eq!(
        h.p.send(0, tp(0), batch()),
        Err(TxnClientError::NoTransaction)
    );
    assert_eq!(h.p.commit(0), Err(TxnClientError::NoTransaction));
    assert_eq!(h.p.abort(0), Err(TxnClientError::NoTransaction));
    assert_eq!(
        h.p.send_offsets(0, "g", None, None, BTreeMap::new()),
        Err(TxnClientError::NoTransaction)
    );
    h.p.begin().unwrap();
    assert_eq!(h.p.begin(), Err(TxnClientError::TransactionInProgress));
    assert_eq!(
        h.p.send(0, tp(0), RecordBatch::from_values(0, [])),
        Err(TxnClientError::EmptyBatch(tp(0)))
    );
    assert_eq!(
        h.p.send_offsets(0, "", None, None, BTreeMap::new()),
        Err(TxnClientError::InvalidGroupId)
    );
    // An empty transaction ends without asking the coordinator (nothing was registered).
    h.p.commit(0).unwrap();
    assert!(h.sent().is_empty());
    assert_eq!(
        h.events.last(),
        Some(&TxnProducerEvent::Completed {
            result: TxnResult::Commit,
            producer: id(0)
        })
    );
    assert_eq!(h.p.state(), &TxnProducerState::Ready);
}

#[test]
fn retriable_coordinator_errors_are_retried_and_rediscover() {
    let mut h = H::new();
    h.p.init(0).unwrap();
    let (_, c, _) = h.one();
    h.txn_ok(
        c,
        TxnResponse::FindCoordinator(Err(TxnError::CoordinatorNotAvailable)),
    );
    assert!(h.sent().is_empty(), "backs off before asking again");
    h.advance_to_timer();
    let (_, c, r) = h.one();
    assert!(matches!(
        r,
        TxnProducerRequest::Txn(TxnRequest::FindCoordinator { .. })
    ));
    h.txn_ok(
        c,
        TxnResponse::FindCoordinator(Ok(TxnCoordinatorInfo {
            node: TXN_NODE,
            partition: 0,
        })),
    );
    // The previous instance's transaction is still aborting: the same request again.
    let (_, c, _) = h.one();
    h.txn_ok(
        c,
        TxnResponse::InitProducerId(Err(TxnError::ConcurrentTransactions)),
    );
    h.advance_to_timer();
    let (to, c, r) = h.one();
    assert_eq!(to, Destination::Node(TXN_NODE));
    assert!(matches!(
        r,
        TxnProducerRequest::Txn(TxnRequest::InitProducerId(_))
    ));
    // The coordinator moved: find it again, then InitProducerId there.
    h.txn_ok(
        c,
        TxnResponse::InitProducerId(Err(TxnError::NotCoordinator)),
    );
    assert_eq!(h.p.coordinator(), None);
    h.advance_to_timer();
    let (_, c, r) = h.one();
    assert!(matches!(
        r,
        TxnProducerRequest::Txn(TxnRequest::FindCoordinator { .. })
    ));
    h.txn_ok(
        c,
        TxnResponse::FindCoordinator(Ok(TxnCoordinatorInfo {
            node: 4,
            partition: 0,
        })),
    );
    let (to, c, _) = h.one();
    assert_eq!(to, Destination::Node(4));
    h.txn_ok(c, TxnResponse::InitProducerId(Ok(id(3))));
    assert_eq!(h.p.state(), &TxnProducerState::Ready);
    // A lost EndTxn answer: asked again (after finding the coordinator again).
    let (pc, _) = h.written_batch();
    h.answer(pc, acked(0));
    h.p.commit(h.now).unwrap();
    let (_, _lost, r) = h.one();
    assert_eq!(end_txn(&r).result, TxnResult::Commit);
    h.advance_to_timer();
    let (_, c, r) = h.one();
    assert!(matches!(
        r,
        TxnProducerRequest::Txn(TxnRequest::FindCoordinator { .. })
    ));
    h.txn_ok(
        c,
        TxnResponse::FindCoordinator(Ok(TxnCoordinatorInfo {
            node: 4,
            partition: 0,
        })),
    );
    let (_, c, r) = h.one();
    assert_eq!(end_txn(&r).result, TxnResult::Commit);
    h.txn_ok(c, TxnResponse::EndTxn(Ok(id(4))));
    assert_eq!(h.p.state(), &TxnProducerState::Ready);
    assert_eq!(h.p.producer(), Some(id(4)));
}

#[test]
fn a_fenced_producer_stops_for_good() {
    // Fenced at EndTxn.
    let mut h = H::initialised(0);
    let (pc, _) = h.written_batch();
    h.answer(pc, acked(0));
    h.p.commit(h.now).unwrap();
    let (_, c, _) = h.one();
    h.txn_ok(
        c,
        TxnResponse::EndTxn(Err(TxnError::ProducerFenced("epoch 1 exists".into()))),
    );
    assert!(matches!(h.p.state(), TxnProducerState::Fatal(_)));
    assert!(matches!(h.events.last(), Some(TxnProducerEvent::Fatal(_))));
    assert!(matches!(h.p.begin(), Err(TxnClientError::Fatal(_))));
    assert!(matches!(h.p.abort(0), Err(TxnClientError::Fatal(_))));
    assert!(h.sent().is_empty());
    assert_eq!(h.p.poll_timeout(), None);

    // Fenced by a partition leader (a newer epoch wrote there).
    let mut h = H::initialised(0);
    let (pc, _) = h.written_batch();
    h.answer(
        pc,
        TxnProducerResponse::Produce(Err(ProduceError::InvalidProducerEpoch("1 > 0".into()))),
    );
    assert!(matches!(h.p.state(), TxnProducerState::Fatal(_)));
    assert!(matches!(h.p.commit(0), Err(TxnClientError::Fatal(_))));

    // Fenced by the group coordinator.
    let mut h = H::initialised(0);
    h.p.begin().unwrap();
    h.p.send_offsets(0, "g", None, None, BTreeMap::new())
        .unwrap();
    let (_, c, _) = h.one();
    h.txn_ok(c, TxnResponse::AddOffsetsToTxn(Ok(())));
    let (_, c, _) = h.one();
    h.answer(
        c,
        TxnProducerResponse::Group(GroupResponse::FindCoordinator(Ok(CoordinatorInfo {
            node: GROUP_NODE,
            partition: 0,
        }))),
    );
    let (_, c, _) = h.one();
    h.answer(
        c,
        TxnProducerResponse::Group(GroupResponse::TxnOffsetCommit(Err(
            GroupError::InvalidProducerEpoch("epoch 0 is older than 1".into()),
        ))),
    );
    assert!(matches!(h.p.state(), TxnProducerState::Fatal(_)));
}

#[test]
fn a_failed_write_makes_the_transaction_abort_only() {
    let mut h = H::initialised(0);
    let (pc, _) = h.written_batch();
    h.p.commit(h.now).unwrap();
    // The write fails while the commit waits for it: the commit cannot happen.
    h.answer(
        pc,
        TxnProducerResponse::Produce(Err(ProduceError::InvalidRecord("bad".into()))),
    );
    assert!(matches!(h.p.state(), TxnProducerState::AbortableError(_)));
    assert!(h
        .events
        .iter()
        .any(|e| matches!(e, TxnProducerEvent::CommitFailed(_))));
    assert!(h.sent().is_empty(), "no EndTxn(commit)");
    assert!(matches!(
        h.p.commit(h.now),
        Err(TxnClientError::AbortOnly(_))
    ));
    assert!(matches!(
        h.p.send(h.now, tp(1), batch()),
        Err(TxnClientError::AbortOnly(_))
    ));
    h.p.abort(h.now).unwrap();
    let (_, c, r) = h.one();
    let e = end_txn(&r);
    assert_eq!((e.result, e.producer_epoch), (TxnResult::Abort, 0));
    h.txn_ok(c, TxnResponse::EndTxn(Ok(id(1))));
    assert_eq!(
        h.events.last(),
        Some(&TxnProducerEvent::Completed {
            result: TxnResult::Abort,
            producer: id(1)
        })
    );
    assert_eq!(h.p.state(), &TxnProducerState::Ready);
}

#[test]
fn coordinator_refusals_of_a_write_make_it_abort_only() {
    // InvalidTxnState from AddPartitionsToTxn.
    let mut h = H::initialised(0);
    h.p.begin().unwrap();
    h.p.send(0, tp(0), batch()).unwrap();
    let (_, c, _) = h.one();
    h.txn_ok(
        c,
        TxnResponse::AddPartitionsToTxn(Err(TxnError::InvalidTxnState("PrepareCommit".into()))),
    );
    assert!(matches!(h.p.state(), TxnProducerState::AbortableError(_)));
    // Nothing was added: the abort ends locally, the batch never went out.
    h.p.abort(0).unwrap();
    assert!(h.sent().is_empty());
    assert_eq!(h.p.state(), &TxnProducerState::Ready);

    // TransactionAbortable from AddOffsetsToTxn after a partition was added.
    let mut h = H::initialised(0);
    let (pc, _) = h.written_batch();
    h.p.send_offsets(h.now, "g", None, None, BTreeMap::new())
        .unwrap();
    let (_, c, _) = h.one();
    h.txn_ok(
        c,
        TxnResponse::AddOffsetsToTxn(Err(TxnError::TransactionAbortable("timed out".into()))),
    );
    assert!(matches!(h.p.state(), TxnProducerState::AbortableError(_)));
    h.p.abort(h.now).unwrap();
    assert!(h.sent().is_empty(), "abort waits for the batch in flight");
    h.answer(pc, acked(3));
    let (_, _, r) = h.one();
    assert_eq!(end_txn(&r).result, TxnResult::Abort);

    // A sequence error inside a transaction.
    let mut h = H::initialised(0);
    let (pc, _) = h.written_batch();
    h.answer(
        pc,
        TxnProducerResponse::Produce(Err(ProduceError::OutOfOrderSequence("gap".into()))),
    );
    assert!(matches!(h.p.state(), TxnProducerState::AbortableError(_)));
}

#[test]
fn retriable_writes_go_again_with_the_same_sequence_before_the_commit() {
    let mut h = H::initialised(0);
    let (pc, first) = h.written_batch();
    h.p.commit(h.now).unwrap();
    h.answer(
        pc,
        TxnProducerResponse::Produce(Err(ProduceError::NotLeader {
            leader: Some(9),
            leader_epoch: 4,
        })),
    );
    assert!(h.sent().is_empty(), "backs off, and no EndTxn yet");
    h.advance_to_timer();
    let (_, pc, r) = h.one();
    let TxnProducerRequest::Produce { batch, .. } = r else {
        panic!("expected the batch again, got {r:?}");
    };
    assert_eq!(batch.producer, first.producer);
    // Unanswered within the request timeout: the same batch again.
    h.advance_to_timer();
    let (_, pc2, r) = h.one();
    assert!(pc2 != pc);
    assert!(
        matches!(r, TxnProducerRequest::Produce { ref batch, .. } if batch.producer == first.producer)
    );
    // A late answer to the first send is ignored; the live one completes the write.
    h.answer(pc, acked(5));
    assert!(h.sent().is_empty());
    h.answer(
        pc2,
        TxnProducerResponse::Produce(Ok(ProduceAck {
            base_offset: 5,
            leader_epoch: 4,
            duplicate: true,
        })),
    );
    let (_, _, r) = h.one();
    assert_eq!(end_txn(&r).result, TxnResult::Commit);
}

#[test]
fn an_old_client_asks_to_keep_its_epoch_at_every_end_txn() {
    // The default client asks for the KIP-890 part 2 bump...
    let mut h = H::initialised(0);
    let (pc, _) = h.written_batch();
    h.answer(pc, acked(0));
    h.p.commit(h.now).unwrap();
    let (_, _, r) = h.one();
    assert!(!end_txn(&r).keep_epoch);
    // ...an old one (EndTxn before v5) does not, at commit and at abort alike.
    let mut config = TxnProducerConfig::new("tx-1");
    config.keep_epoch = true;
    let mut h = H::initialised_with(config, 0);
    for result in [TxnResult::Commit, TxnResult::Abort] {
        let (pc, _) = h.written_batch();
        h.answer(pc, acked(0));
        match result {
            TxnResult::Commit => h.p.commit(h.now).unwrap(),
            TxnResult::Abort => h.p.abort(h.now).unwrap(),
        }
        let (_, c, r) = h.one();
        assert_eq!(
            (
                end_txn(&r).result,
                end_txn(&r).keep_epoch,
                end_txn(&r).producer_epoch
            ),
            (result, true, 0)
        );
        h.txn_ok(c, TxnResponse::EndTxn(Ok(id(0))));
    }
}

#[test]
fn a_coordinator_without_epoch_bumps_keeps_the_sequences_going() {
    let mut h = H::initialised(0);
    let (pc, _) = h.written_batch();
    h.answer(pc, acked(0));
    h.p.commit(h.now).unwrap();
    let (_, c, _) = h.one();
    // The same epoch back (KIP-890 part 2 off): the partition expects sequence 2 next.
    h.txn_ok(c, TxnResponse::EndTxn(Ok(id(0))));
    let (_, b) = h.written_batch();
    let info = b.producer.expect("stamped");
    assert_eq!((info.producer_epoch, info.base_sequence), (0, 2));
}

#[test]
fn wire_round_trip() {
    let r = TxnProducerRequest::Txn(TxnRequest::FindCoordinator {
        transactional_id: "tx".into(),
    });
    let p = TransactionalProducer::new(TxnProducerConfig::new("tx"));
    let m = p.to_message(9, &r).unwrap();
    assert!(matches!(m, Message::Txn { correlation: 9, .. }));
    let back = from_message(Message::txn_response(
        9,
        TxnResponse::EndTxn(Err(TxnError::NotCoordinator)),
    ));
    assert_eq!(
        back,
        Some((
            9,
            TxnProducerResponse::Txn(TxnResponse::EndTxn(Err(TxnError::NotCoordinator)))
        ))
    );
    let b = batch().transactional();
    let m = p
        .to_message(
            3,
            &TxnProducerRequest::Produce {
                tp: tp(0),
                batch: b,
            },
        )
        .unwrap();
    assert!(matches!(m, Message::Produce(ref r)
        if r.acks == Acks::All && r.correlation == 3 && r.transactional_id.as_deref() == Some("tx")));
}

#[test]
fn an_abort_waits_for_the_offsets_call_in_flight_then_ends_the_transaction() {
    let mut h = H::initialised(0);
    h.p.begin().unwrap();
    h.p.send_offsets(0, "g", Some(1), Some("m".into()), BTreeMap::new())
        .unwrap();
    let (_, c, _) = h.one();
    h.txn_ok(c, TxnResponse::AddOffsetsToTxn(Ok(())));
    let (_, c, _) = h.one();
    h.answer(
        c,
        TxnProducerResponse::Group(GroupResponse::FindCoordinator(Ok(CoordinatorInfo {
            node: GROUP_NODE,
            partition: 0,
        }))),
    );
    let (_, c, r) = h.one();
    assert!(matches!(
        r,
        TxnProducerRequest::Group(GroupRequest::TxnOffsetCommit(_))
    ));
    h.p.abort(h.now).unwrap();
    assert!(h.sent().is_empty(), "EndTxn waits for the call in flight");
    h.answer(
        c,
        TxnProducerResponse::Group(GroupResponse::TxnOffsetCommit(Ok(()))),
    );
    let (to, c, r) = h.one();
    assert_eq!(to, Destination::Node(TXN_NODE));
    assert_eq!(end_txn(&r).result, TxnResult::Abort);
    h.txn_ok(c, TxnResponse::EndTxn(Ok(id(1))));
    assert_eq!(h.p.state(), &TxnProducerState::Ready);
}

mod random {
    //! Random schedules of operations and answers (lost, duplicated, refused): the machine
    //! never panics, and its rules hold whatever the coordinator, group coordinator and
    //! leaders answer.
    use super::*;
    use proptest::prelude::*;

    /// A plausible answer to `r`, chosen by `pick`.
    fn answer_to(r: &TxnProducerRequest, pick: u8, epoch: u16) -> TxnProducerResponse {
        use TxnProducerResponse as R;
        let fenced = || TxnError::ProducerFenced("newer".into());
        match r {
            TxnProducerRequest::Txn(t) => R::Txn(match t {
                TxnRequest::FindCoordinator { .. } => {
                    TxnResponse::FindCoordinator(match pick % 3 {
                        0 => Err(TxnError::CoordinatorNotAvailable),
                        _ => Ok(TxnCoordinatorInfo {
                            node: TXN_NODE,
                            partition: 0,
                        }),
                    })
                }
                TxnRequest::InitProducerId(_) => TxnResponse::InitProducerId(match pick % 6 {
                    0 => Err(TxnError::ConcurrentTransactions),
                    1 => Err(TxnError::NotCoordinator),
                    2 if pick > 200 => Err(fenced()),
                    _ => Ok(id(epoch)),
                }),
                TxnRequest::AddPartitionsToTxn(_) => {
                    TxnResponse::AddPartitionsToTxn(match pick % 8 {
                        0 => Err(TxnError::ConcurrentTransactions),
                        1 => Err(TxnError::InvalidTxnState("x".into())),
                        2 => Err(TxnError::TransactionAbortable("x".into())),
                        3 => Err(TxnError::NotCoordinator),
                        4 if pick > 200 => Err(fenced()),
                        _ => Ok(()),
                    })
                }
                TxnRequest::AddOffsetsToTxn(_) => TxnResponse::AddOffsetsToTxn(match pick % 6 {
                    0 => Err(TxnError::ConcurrentTransactions),
                    1 => Err(TxnError::TransactionAbortable("x".into())),
                    _ => Ok(()),
                }),
                TxnRequest::EndTxn(_) => TxnResponse::EndTxn(match pick % 7 {
                    0 => Err(TxnError::ConcurrentTransactions),
                    1 => Err(TxnError::NotCoordinator),
                    2 if pick > 200 => Err(fenced()),
                    3 => Ok(id(epoch)),
                    _ => Ok(id(epoch.saturating_add(1))),
                }),
            }),
            TxnProducerRequest::Group(g) => R::Group(match g {
                GroupRequest::FindCoordinator { .. } => {
                    GroupResponse::FindCoordinator(match pick % 3 {
                        0 => Err(GroupError::CoordinatorNotAvailable),
                        _ => Ok(CoordinatorInfo {
                            node: GROUP_NODE,
                            partition: 0,
                        }),
                    })
                }
                _ => GroupResponse::TxnOffsetCommit(match pick % 6 {
                    0 => Err(GroupError::NotCoordinator),
                    1 => Err(GroupError::IllegalGeneration),
                    2 => Err(GroupError::CoordinatorLoadInProgress),
                    _ => Ok(()),
                }),
            }),
            TxnProducerRequest::Produce { .. } => R::Produce(match pick % 9 {
                0 => Err(ProduceError::NotLeader {
                    leader: None,
                    leader_epoch: 0,
                }),
                1 => Err(ProduceError::RequestTimedOut),
                2 => Err(ProduceError::InvalidRecord("x".into())),
                3 => Err(ProduceError::OutOfOrderSequence("x".into())),
                4 if pick > 200 => Err(ProduceError::InvalidProducerEpoch("x".into())),
                _ => Ok(ProduceAck {
                    base_offset: u64::from(pick),
                    leader_epoch: 1,
                    duplicate: pick.is_multiple_of(2),
                }),
            }),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn rules_hold_under_any_answers(script in proptest::collection::vec(any::<(u8, u8)>(), 0..400)) {
            let mut h = H::new();
            let mut outstanding: Vec<(u64, TxnProducerRequest)> = Vec::new();
            // Partitions the coordinator accepted into the current transaction.
            let mut accepted: BTreeSet<TopicPartition> = BTreeSet::new();
            let mut adding: BTreeMap<u64, Vec<TopicPartition>> = BTreeMap::new();
            let mut abort_only = false;
            let mut fatal = false;
            let mut epoch = 0u16;
            for (op, pick) in script {
                let now = h.now;
                match op % 10 {
                    0 => { let _ = h.p.init(now); }
                    1 => { let _ = h.p.begin(); }
                    2 => { let _ = h.p.send(now, tp(u32::from(pick % 3)), batch()); }
                    3 => {
                        let o = [(TopicPartition::new("in", 0), OffsetAndMetadata::new(u64::from(pick)))].into();
                        let _ = h.p.send_offsets(now, "g", Some(1), Some("m".into()), o);
                    }
                    4 => { let _ = h.p.commit(now); }
                    5 => { let _ = h.p.abort(now); }
                    6 => {
                        if let Some(t) = h.p.poll_timeout() {
                            h.now = h.now.max(t);
                            h.p.handle_timeout(h.now);
                        }
                    }
                    7 if !outstanding.is_empty() => {
                        // Lost on the way.
                        outstanding.remove(usize::from(pick) % outstanding.len());
                    }
                    _ if !outstanding.is_empty() => {
                        let i = usize::from(pick) % outstanding.len();
                        let (c, r) = if op % 10 == 9 {
                            outstanding[i].clone() // answered twice
                        } else {
                            outstanding.remove(i)
                        };
                        let resp = answer_to(&r, pick, epoch);
                        if let TxnProducerResponse::Txn(TxnResponse::AddPartitionsToTxn(Ok(()))) = &resp {
                            if h.p.awaits(c) {
                                accepted.extend(adding.remove(&c).unwrap_or_default());
                            }
                        }
                        if let TxnProducerResponse::Txn(TxnResponse::InitProducerId(Ok(_)) | TxnResponse::EndTxn(Ok(_))) = &resp {
                            if h.p.awaits(c) {
                                epoch = epoch.saturating_add(1);
                            }
                        }
                        h.answer(c, resp);
                    }
                    _ => {}
                }
                h.collect();
                for e in std::mem::take(&mut h.events) {
                    match e {
                        TxnProducerEvent::Abortable(_) => abort_only = true,
                        TxnProducerEvent::Fatal(_) => fatal = true,
                        TxnProducerEvent::Completed { result, .. } => {
                            // Never a commit of a transaction that became abort-only.
                            prop_assert!(!(abort_only && result == TxnResult::Commit));
                            abort_only = false;
                            accepted.clear();
                        }
                        _ => {}
                    }
                }
                for (to, c, r) in std::mem::take(&mut h.sends) {
                    prop_assert!(!fatal, "a fatal producer sends nothing");
                    match &r {
                        // A batch goes only to a partition the coordinator accepted.
                        TxnProducerRequest::Produce { tp, batch } => {
                            prop_assert!(accepted.contains(tp), "{tp} not in the transaction");
                            prop_assert!(batch.is_transactional());
                            prop_assert_eq!(&to, &Destination::LeaderOf(tp.clone()));
                        }
                        TxnProducerRequest::Txn(TxnRequest::AddPartitionsToTxn(a)) => {
                            adding.insert(c, a.partitions.clone());
                        }
                        // EndTxn only once no write is awaited.
                        TxnProducerRequest::Txn(TxnRequest::EndTxn(e)) => {
                            for (pc, pr) in &outstanding {
                                if matches!(pr, TxnProducerRequest::Produce { .. }) {
                                    prop_assert!(!h.p.awaits(*pc), "EndTxn({:?}) with a write in flight", e.result);
                                }
                            }
                        }
                        _ => {}
                    }
                    outstanding.push((c, r));
                }
                if let TxnProducerState::Fatal(_) = h.p.state() {
                    prop_assert!(fatal);
                    prop_assert_eq!(h.p.poll_timeout(), None);
                }
            }
        }
    }
}

#[test]
fn route_answers_not_leader_at_once_and_marks_the_cache_stale() {
    let mut leaders = LeaderCache::new(500, 50);
    let topics = vec!["out".to_string()];
    // Learn nothing: no leader of out-0 is known, and nothing is stale yet (a refresh is
    // due only for the missing leader, at most every min_interval).
    let first = leaders.poll_refresh(0, 1, &topics, false);
    assert!(first.is_none(), "nothing missing asked, nothing stale");
    match route(&Destination::LeaderOf(tp(0)), &mut leaders) {
        Resolved::NoLeader(TxnProducerResponse::Produce(Err(ProduceError::NotLeader {
            leader: None,
            ..
        }))) => {}
        other => panic!("expected an immediate NotLeader, got {other:?}"),
    }
    assert!(
        leaders.poll_refresh(100, 2, &topics, false).is_some(),
        "the cache was marked stale, so a refresh is due without a missing leader"
    );
    leaders.learn_leader(&tp(0), Some(4), 3);
    assert_eq!(
        route(&Destination::LeaderOf(tp(0)), &mut leaders),
        Resolved::Node(4)
    );
    assert_eq!(
        route(&Destination::Node(TXN_NODE), &mut leaders),
        Resolved::Node(TXN_NODE)
    );
    assert_eq!(
        route(&Destination::AnyBroker, &mut leaders),
        Resolved::AnyBroker
    );
}

#[test]
fn an_unknown_partition_at_the_coordinator_is_retried_not_abortable() {
    // Kafka's producer retries UNKNOWN_TOPIC_OR_PARTITION on AddPartitionsToTxn (the
    // coordinator's metadata may lag a topic's creation); the transaction stays usable.
    let mut h = H::initialised(0);
    h.p.begin().unwrap();
    h.p.send(h.now, tp(0), batch()).unwrap();
    let (_, c, r) = h.one();
    assert!(matches!(
        r,
        TxnProducerRequest::Txn(TxnRequest::AddPartitionsToTxn(_))
    ));
    h.txn_ok(
        c,
        TxnResponse::AddPartitionsToTxn(Err(TxnError::UnknownTopicOrPartition(tp(0)))),
    );
    assert_eq!(h.p.state(), &TxnProducerState::InTransaction);
    assert!(h.sent().is_empty(), "no retry before the backoff");
    h.advance_to_timer();
    let (to, c, r) = h.one();
    assert_eq!(to, Destination::Node(TXN_NODE));
    let TxnProducerRequest::Txn(TxnRequest::AddPartitionsToTxn(a)) = r else {
        panic!("expected AddPartitionsToTxn again, got {r:?}");
    };
    assert_eq!(a.partitions, vec![tp(0)]);
    h.txn_ok(c, TxnResponse::AddPartitionsToTxn(Ok(())));
    let (to, _, _) = h.one();
    assert_eq!(to, Destination::LeaderOf(tp(0)));
}
