//! The transaction coordinator driven by hand: a host that commits every append at once
//! (or fails it on demand), hands out producer ids, keeps the written records (to load a
//! successor from) and leaves markers for the test to answer.

use super::*;
use crate::txn::TxnBugs;

const CLIENT: Address = Address::Client(1);

struct H {
    c: TxnCoordinator,
    now: Nanos,
    /// Every record written, in log order.
    log: Vec<Record>,
    responses: Vec<(u64, TxnResponse)>,
    /// Markers sent and not answered by the test yet.
    markers: Vec<WriteTxnMarkerRequest>,
    next_pid: u64,
    /// The next append fails with this error instead of committing.
    fail_next: Option<AppendError>,
    corr: u64,
}

fn config(bugs: TxnBugs) -> TxnConfig {
    TxnConfig {
        bugs,
        ..TxnConfig::default()
    }
}

impl H {
    fn new(bugs: TxnBugs) -> Self {
        Self::loaded(bugs, 1, Vec::new())
    }

    /// A coordinator (of the only partition) that loaded `log` at `epoch`.
    fn loaded(bugs: TxnBugs, epoch: LeaderEpoch, log: Vec<Record>) -> Self {
        let mut c = TxnCoordinator::new(0, 1, config(bugs));
        c.begin_load(epoch);
        let batches: Vec<RecordBatch> = log
            .iter()
            .enumerate()
            .map(|(i, r)| RecordBatch::of_records(0, vec![r.clone()]).at(i as u64))
            .collect();
        c.load_batches(&batches).unwrap();
        let mut h = Self {
            c,
            now: 0,
            log,
            responses: Vec::new(),
            markers: Vec::new(),
            next_pid: 1000,
            fail_next: None,
            corr: 0,
        };
        h.c.complete_load(0);
        h.settle();
        h
    }

    fn settle(&mut self) {
        loop {
            let out = self.c.poll_outputs();
            if out.is_empty() {
                return;
            }
            for o in out {
                match o {
                    TxnOutput::Respond {
                        to,
                        correlation,
                        response,
                    } => {
                        assert_eq!(to, CLIENT);
                        self.responses.push((correlation, response));
                    }
                    TxnOutput::Append { id, records, .. } => {
                        let result = match self.fail_next.take() {
                            Some(e) => Err(e),
                            None => {
                                self.log.extend(records);
                                Ok(self.log.len() as Offset - 1)
                            }
                        };
                        self.c.append_completed(self.now, id, result);
                    }
                    TxnOutput::AllocateProducerId {
                        transactional_id, ..
                    } => {
                        self.next_pid += 1;
                        let pid = ProducerIdAndEpoch {
                            producer_id: self.next_pid,
                            producer_epoch: 0,
                        };
                        self.c
                            .producer_id_allocated(self.now, &transactional_id, Ok(pid));
                    }
                    TxnOutput::SendMarker { request, .. } => self.markers.push(request),
                }
            }
        }
    }

    fn send(&mut self, request: TxnRequest) -> TxnResponse {
        self.corr += 1;
        let corr = self.corr;
        self.c.step(self.now, CLIENT, corr, request);
        self.settle();
        let i = self
            .responses
            .iter()
            .position(|(c, _)| *c == corr)
            .expect("answered");
        self.responses.remove(i).1
    }

    fn init(&mut self, id: &str, current: Option<ProducerIdAndEpoch>) -> TxnResponse {
        self.send(TxnRequest::InitProducerId(InitProducerIdRequest {
            transactional_id: id.into(),
            transaction_timeout_ms: 1000,
            current,
        }))
    }

    fn init_ok(&mut self, id: &str) -> ProducerIdAndEpoch {
        match self.init(id, None) {
            TxnResponse::InitProducerId(Ok(p)) => p,
            other => panic!("{other:?}"),
        }
    }

    fn add(&mut self, id: &str, p: ProducerIdAndEpoch, tps: &[TopicPartition]) -> TxnResponse {
        self.add_req(id, p, tps, false)
    }

    fn add_req(
        &mut self,
        id: &str,
        p: ProducerIdAndEpoch,
        tps: &[TopicPartition],
        verify_only: bool,
    ) -> TxnResponse {
        self.send(TxnRequest::AddPartitionsToTxn(AddPartitionsToTxnRequest {
            transactional_id: id.into(),
            producer_id: p.producer_id,
            producer_epoch: p.producer_epoch,
            partitions: tps.to_vec(),
            verify_only,
        }))
    }

    fn end(&mut self, id: &str, p: ProducerIdAndEpoch, result: TxnResult) -> TxnResponse {
        self.send(TxnRequest::EndTxn(EndTxnRequest {
            transactional_id: id.into(),
            producer_id: p.producer_id,
            producer_epoch: p.producer_epoch,
            result,
            keep_epoch: false,
        }))
    }

    /// Answer every outstanding marker with `result`.
    fn answer_markers(&mut self, result: Result<(), MarkerError>) {
        for m in std::mem::take(&mut self.markers) {
            self.c.marker_answered(
                self.now,
                WriteTxnMarkerResponse {
                    correlation: m.correlation,
                    tp: m.tp,
                    result: result.clone(),
                },
            );
        }
        self.settle();
    }

    fn advance_to(&mut self, t: Nanos) {
        self.now = t;
        self.c.handle_timeout(t);
        self.settle();
    }

    fn state(&self, id: &str) -> TxnState {
        self.c.txn(id).expect("known").state
    }
}

fn tp(p: u32) -> TopicPartition {
    TopicPartition::new("orders", p)
}

fn pe(producer_id: u64, producer_epoch: u16) -> ProducerIdAndEpoch {
    ProducerIdAndEpoch {
        producer_id,
        producer_epoch,
    }
}

fn fenced(r: &TxnResponse) -> bool {
    matches!(r.error(), Some(TxnError::ProducerFenced(_)))
}

#[test]
fn a_committed_transaction_bumps_the_epoch_and_marks_every_partition() {
    let mut h = H::new(TxnBugs::default());
    let p = h.init_ok("t");
    assert_eq!(p.producer_epoch, 0);
    assert_eq!(
        h.add("t", p, &[tp(0), tp(1)]),
        TxnResponse::AddPartitionsToTxn(Ok(()))
    );
    assert_eq!(h.state("t"), TxnState::Ongoing);
    // KIP-890 part 2: the producer continues at epoch + 1.
    assert_eq!(
        h.end("t", p, TxnResult::Commit),
        TxnResponse::EndTxn(Ok(pe(p.producer_id, 1)))
    );
    assert_eq!(h.state("t"), TxnState::PrepareCommit);
    let sent: Vec<_> = h.markers.iter().map(|m| m.tp.clone()).collect();
    assert_eq!(sent, vec![tp(0), tp(1)]);
    for m in &h.markers {
        assert_eq!(
            (
                m.producer_id,
                m.producer_epoch,
                m.coordinator_epoch,
                m.result
            ),
            (p.producer_id, 1, 1, TxnResult::Commit),
            "markers carry the bumped epoch"
        );
        // ... and say so: the partition refuses a late copy at the next transaction's epoch.
        assert!(m.bumped, "a part-2 marker is marked bumped");
    }
    h.answer_markers(Ok(()));
    assert_eq!(h.state("t"), TxnState::CompleteCommit);
    assert!(h.c.txn("t").unwrap().partitions.is_empty());
    // The old epoch is fenced for a new transaction.
    assert!(fenced(&h.add("t", p, &[tp(0)])));
    assert_eq!(
        h.add("t", pe(p.producer_id, 1), &[tp(2)]),
        TxnResponse::AddPartitionsToTxn(Ok(()))
    );
}

#[test]
fn late_txn_marker_keeps_the_epoch() {
    let bugs = TxnBugs {
        late_txn_marker: true,
        ..TxnBugs::default()
    };
    let mut h = H::new(bugs);
    let p = h.init_ok("t");
    h.add("t", p, &[tp(0)]);
    assert_eq!(h.end("t", p, TxnResult::Commit), TxnResponse::EndTxn(Ok(p)));
    assert_eq!(h.markers[0].producer_epoch, p.producer_epoch);
    assert!(
        !h.markers[0].bumped,
        "an unbumped marker is taken at the data's epoch"
    );
    h.answer_markers(Ok(()));
    // The same epoch opens the next transaction: a late marker cannot be told apart.
    assert_eq!(
        h.add("t", p, &[tp(0)]),
        TxnResponse::AddPartitionsToTxn(Ok(()))
    );
}

#[test]
fn an_old_clients_end_txn_keeps_the_epoch_and_its_retry_is_answered() {
    let mut h = H::new(TxnBugs::default());
    let p = h.init_ok("t");
    h.add("t", p, &[tp(0)]);
    let end = |result| {
        TxnRequest::EndTxn(EndTxnRequest {
            transactional_id: "t".into(),
            producer_id: p.producer_id,
            producer_epoch: p.producer_epoch,
            result,
            keep_epoch: true,
        })
    };
    // Kafka's EndTxn v0-4: the answer cannot carry a new epoch, so there is none.
    assert_eq!(h.send(end(TxnResult::Commit)), TxnResponse::EndTxn(Ok(p)));
    assert_eq!(h.markers[0].producer_epoch, p.producer_epoch);
    assert!(
        !h.markers[0].bumped,
        "an unbumped marker is taken at the data's epoch"
    );
    h.answer_markers(Ok(()));
    assert_eq!(h.state("t"), TxnState::CompleteCommit);
    // A retry is answered as the original; the other outcome is refused.
    assert_eq!(h.send(end(TxnResult::Commit)), TxnResponse::EndTxn(Ok(p)));
    assert!(matches!(
        h.send(end(TxnResult::Abort)),
        TxnResponse::EndTxn(Err(TxnError::InvalidTxnState(_)))
    ));
    // The client goes on at the epoch it has.
    assert_eq!(
        h.add("t", p, &[tp(1)]),
        TxnResponse::AddPartitionsToTxn(Ok(()))
    );
}

#[test]
fn a_reinit_fences_the_zombie_unless_fencing_is_off() {
    let mut h = H::new(TxnBugs::default());
    let old = h.init_ok("t");
    let new = h.init_ok("t");
    assert_eq!((new.producer_id, new.producer_epoch), (old.producer_id, 1));
    assert!(fenced(&h.add("t", old, &[tp(0)])));
    assert!(fenced(&h.end("t", old, TxnResult::Commit)));
    assert!(fenced(&h.add_req("t", old, &[tp(0)], true)));
    assert_eq!(
        h.add("t", new, &[tp(0)]),
        TxnResponse::AddPartitionsToTxn(Ok(()))
    );

    let mut h = H::new(TxnBugs {
        no_txn_fencing: true,
        ..TxnBugs::default()
    });
    let old = h.init_ok("t");
    let new = h.init_ok("t");
    assert_eq!(new, old, "no bump: the zombie keeps its identity");
    assert_eq!(
        h.add("t", old, &[tp(0)]),
        TxnResponse::AddPartitionsToTxn(Ok(()))
    );
}

#[test]
fn init_over_an_open_transaction_aborts_it_first() {
    let mut h = H::new(TxnBugs::default());
    let p = h.init_ok("t");
    h.add("t", p, &[tp(0)]);
    assert_eq!(
        h.init("t", None),
        TxnResponse::InitProducerId(Err(TxnError::ConcurrentTransactions))
    );
    let m = h.c.txn("t").unwrap().clone();
    assert_eq!((m.state, m.producer_epoch), (TxnState::PrepareAbort, 1));
    assert_eq!(h.markers.len(), 1);
    assert_eq!(
        (h.markers[0].result, h.markers[0].producer_epoch),
        (TxnResult::Abort, 1)
    );
    // Still completing: the retry waits.
    assert_eq!(
        h.init("t", None),
        TxnResponse::InitProducerId(Err(TxnError::ConcurrentTransactions))
    );
    assert_eq!(
        h.add("t", pe(p.producer_id, 1), &[tp(0)]),
        TxnResponse::AddPartitionsToTxn(Err(TxnError::ConcurrentTransactions))
    );
    h.answer_markers(Ok(()));
    assert_eq!(h.state("t"), TxnState::CompleteAbort);
    assert_eq!(h.init_ok("t"), pe(p.producer_id, 2));
    // The fenced instance cannot pass as a retry of the abort.
    assert!(fenced(&h.end("t", p, TxnResult::Abort)));
}

#[test]
fn end_txn_retries_get_the_same_answer() {
    let mut h = H::new(TxnBugs::default());
    let p = h.init_ok("t");
    h.add("t", p, &[tp(0)]);
    let first = h.end("t", p, TxnResult::Commit);
    assert_eq!(first, TxnResponse::EndTxn(Ok(pe(p.producer_id, 1))));
    // The answer was lost; the producer retries with the epoch it holds.
    assert_eq!(
        h.end("t", p, TxnResult::Commit),
        TxnResponse::EndTxn(Err(TxnError::ConcurrentTransactions))
    );
    h.answer_markers(Ok(()));
    assert_eq!(h.end("t", p, TxnResult::Commit), first);
    assert!(matches!(
        h.end("t", p, TxnResult::Abort),
        TxnResponse::EndTxn(Err(TxnError::InvalidTxnState(_)))
    ));
    // At the new epoch there is no open transaction to end.
    assert!(matches!(
        h.end("t", pe(p.producer_id, 1), TxnResult::Commit),
        TxnResponse::EndTxn(Err(TxnError::InvalidTxnState(_)))
    ));

    // Without part 2 the retry carries the same epoch and is still idempotent.
    let mut h = H::new(TxnBugs {
        late_txn_marker: true,
        ..TxnBugs::default()
    });
    let p = h.init_ok("t");
    h.add("t", p, &[tp(0)]);
    h.end("t", p, TxnResult::Abort);
    h.answer_markers(Ok(()));
    assert_eq!(h.end("t", p, TxnResult::Abort), TxnResponse::EndTxn(Ok(p)));
}

#[test]
fn an_expired_transaction_is_aborted_and_its_producer_fenced() {
    let mut h = H::new(TxnBugs::default());
    let p = h.init_ok("t");
    h.now = 5_000_000;
    h.add("t", p, &[tp(0), tp(1)]);
    let deadline = 5_000_000 + 1_000_000_000;
    assert_eq!(h.c.poll_timeout(), Some(deadline));
    h.advance_to(deadline - 1);
    assert_eq!(h.state("t"), TxnState::Ongoing);
    h.advance_to(deadline);
    let m = h.c.txn("t").unwrap().clone();
    assert_eq!((m.state, m.producer_epoch), (TxnState::PrepareAbort, 1));
    assert!(h.markers.iter().all(|m| m.result == TxnResult::Abort));
    h.answer_markers(Ok(()));
    assert_eq!(h.state("t"), TxnState::CompleteAbort);
    assert!(fenced(&h.end("t", p, TxnResult::Commit)));
    assert_eq!(h.c.poll_timeout(), None, "nothing left to time out");
}

#[test]
fn markers_are_retried_after_refusals_and_lost_answers() {
    let mut h = H::new(TxnBugs::default());
    let p = h.init_ok("t");
    h.add("t", p, &[tp(0), tp(1)]);
    h.end("t", p, TxnResult::Commit);
    let first = std::mem::take(&mut h.markers);
    // tp(0): the leader moved; tp(1): the answer is lost.
    h.c.marker_answered(
        h.now,
        WriteTxnMarkerResponse {
            correlation: first[0].correlation,
            tp: tp(0),
            result: Err(MarkerError::NotLeader),
        },
    );
    h.settle();
    let backoff = h.c.config().marker_retry_backoff;
    assert_eq!(h.c.poll_timeout(), Some(backoff));
    h.advance_to(backoff);
    assert_eq!(h.markers.len(), 1);
    assert_eq!(h.markers[0].tp, tp(0));
    assert_ne!(h.markers[0].correlation, first[0].correlation);
    h.answer_markers(Ok(()));
    assert_eq!(
        h.state("t"),
        TxnState::PrepareCommit,
        "tp(1) still unanswered"
    );
    // A stale answer (to the first tp(0) marker) changes nothing.
    h.c.marker_answered(
        h.now,
        WriteTxnMarkerResponse {
            correlation: first[0].correlation,
            tp: tp(0),
            result: Ok(()),
        },
    );
    let timeout = h.c.config().marker_request_timeout;
    h.advance_to(timeout);
    assert_eq!(h.markers.len(), 1);
    assert_eq!(h.markers[0].tp, tp(1));
    h.answer_markers(Ok(()));
    assert_eq!(h.state("t"), TxnState::CompleteCommit);
}

#[test]
fn a_new_leader_resumes_the_markers_of_a_prepared_commit() {
    let mut a = H::new(TxnBugs::default());
    let p = a.init_ok("t");
    a.add("t", p, &[tp(0), tp(1)]);
    a.end("t", p, TxnResult::Commit);
    // tp(0) gets its marker; then the coordinator's broker dies.
    let m0 = a.markers.remove(0);
    a.c.marker_answered(
        0,
        WriteTxnMarkerResponse {
            correlation: m0.correlation,
            tp: m0.tp,
            result: Ok(()),
        },
    );
    a.settle();
    assert_eq!(a.state("t"), TxnState::PrepareCommit);
    let mut b = H::loaded(TxnBugs::default(), 2, a.log.clone());
    assert_eq!(b.state("t"), TxnState::PrepareCommit);
    // Every partition again (the partition side ignores a repeated marker), at epoch 2.
    let resent: Vec<_> = b.markers.iter().map(|m| m.tp.clone()).collect();
    assert_eq!(resent, vec![tp(0), tp(1)]);
    assert!(b
        .markers
        .iter()
        .all(|m| m.coordinator_epoch == 2 && m.producer_epoch == 1));
    // A client that lost the EndTxn answer asks the new coordinator.
    assert_eq!(
        b.end("t", p, TxnResult::Commit),
        TxnResponse::EndTxn(Err(TxnError::ConcurrentTransactions))
    );
    b.answer_markers(Ok(()));
    assert_eq!(b.state("t"), TxnState::CompleteCommit);
    assert_eq!(
        b.end("t", p, TxnResult::Commit),
        TxnResponse::EndTxn(Ok(pe(p.producer_id, 1)))
    );
    // A third leader loads the completed transaction and has nothing to send.
    let c = H::loaded(TxnBugs::default(), 3, b.log.clone());
    assert!(c.markers.is_empty());
    assert_eq!(c.state("t"), TxnState::CompleteCommit);
}

#[test]
fn a_loaded_open_transaction_still_times_out() {
    let mut a = H::new(TxnBugs::default());
    let p = a.init_ok("t");
    a.add("t", p, &[tp(0)]);
    let mut b = H::loaded(TxnBugs::default(), 2, a.log.clone());
    b.now = 7;
    assert_eq!(b.c.poll_timeout(), Some(1_000_000_000));
    b.advance_to(1_000_000_000);
    assert_eq!(b.state("t"), TxnState::PrepareAbort);
}

#[test]
fn verify_only_answers_and_changes_nothing() {
    let mut h = H::new(TxnBugs::default());
    let p = h.init_ok("t");
    let not_in = |r: TxnResponse| matches!(r.error(), Some(TxnError::InvalidTxnState(_)));
    assert!(
        not_in(h.add_req("t", p, &[tp(0)], true)),
        "no open transaction"
    );
    h.add("t", p, &[tp(0)]);
    let log_len = h.log.len();
    assert_eq!(
        h.add_req("t", p, &[tp(0)], true),
        TxnResponse::AddPartitionsToTxn(Ok(()))
    );
    assert!(not_in(h.add_req("t", p, &[tp(1)], true)));
    assert_eq!(h.log.len(), log_len, "verification writes nothing");
    assert!(!h.c.txn("t").unwrap().partitions.contains(&tp(1)));
    assert!(matches!(
        h.add_req("t", pe(p.producer_id + 1, 0), &[tp(0)], true)
            .error(),
        Some(TxnError::InvalidProducerIdMapping(_))
    ));
    assert!(matches!(
        h.add_req("nobody", p, &[tp(0)], true).error(),
        Some(TxnError::InvalidProducerIdMapping(_))
    ));
    // After EndTxn the partition is no longer in an ongoing transaction.
    h.end("t", p, TxnResult::Abort);
    assert!(fenced(&h.add_req("t", p, &[tp(0)], true)));
    assert!(not_in(h.add_req("t", pe(p.producer_id, 1), &[tp(0)], true)));
}

#[test]
fn bad_input_gets_a_clear_error() {
    let mut h = H::new(TxnBugs::default());
    assert_eq!(
        h.init("", None),
        TxnResponse::InitProducerId(Err(TxnError::InvalidTransactionalId))
    );
    for t in [0, 900_001] {
        let r = h.send(TxnRequest::InitProducerId(InitProducerIdRequest {
            transactional_id: "t".into(),
            transaction_timeout_ms: t,
            current: None,
        }));
        assert_eq!(
            r,
            TxnResponse::InitProducerId(Err(TxnError::InvalidTransactionTimeout(t)))
        );
    }
    let ghost = pe(5, 0);
    assert!(matches!(
        h.end("ghost", ghost, TxnResult::Commit).error(),
        Some(TxnError::InvalidProducerIdMapping(_))
    ));
    let p = h.init_ok("t");
    assert!(matches!(
        h.end("t", p, TxnResult::Commit).error(),
        Some(TxnError::InvalidTxnState(_))
    ));
    assert!(matches!(
        h.add("t", pe(p.producer_id + 9, 0), &[tp(0)]).error(),
        Some(TxnError::InvalidProducerIdMapping(_))
    ));
    assert!(matches!(
        h.add("t", p, &[]).error(),
        Some(TxnError::InvalidRequest(_))
    ));
    let r = h.send(TxnRequest::AddOffsetsToTxn(AddOffsetsToTxnRequest {
        transactional_id: "t".into(),
        producer_id: p.producer_id,
        producer_epoch: p.producer_epoch,
        group_id: String::new(),
    }));
    assert!(matches!(
        r,
        TxnResponse::AddOffsetsToTxn(Err(TxnError::InvalidRequest(_)))
    ));
    // A newer epoch than the coordinator's is not a valid identity either.
    assert!(fenced(&h.add("t", pe(p.producer_id, 7), &[tp(0)])));
}

#[test]
fn add_offsets_adds_the_groups_offsets_partition() {
    let mut h = H::new(TxnBugs::default());
    let p = h.init_ok("t");
    let r = h.send(TxnRequest::AddOffsetsToTxn(AddOffsetsToTxnRequest {
        transactional_id: "t".into(),
        producer_id: p.producer_id,
        producer_epoch: p.producer_epoch,
        group_id: "g".into(),
    }));
    assert_eq!(r, TxnResponse::AddOffsetsToTxn(Ok(())));
    let offsets = TopicPartition::new(
        crate::group::CONSUMER_OFFSETS_TOPIC,
        crate::group::coordinator_partition("g", 8),
    );
    assert!(h.c.txn("t").unwrap().partitions.contains(&offsets));
}

#[test]
fn phases_gate_requests() {
    let mut c = TxnCoordinator::new(0, 1, TxnConfig::default());
    let req = TxnRequest::InitProducerId(InitProducerIdRequest {
        transactional_id: "t".into(),
        transaction_timeout_ms: 1000,
        current: None,
    });
    let answer = |c: &mut TxnCoordinator| match c.poll_outputs().pop() {
        Some(TxnOutput::Respond { response, .. }) => response.error().cloned(),
        other => panic!("{other:?}"),
    };
    c.step(0, CLIENT, 1, req.clone());
    assert_eq!(answer(&mut c), Some(TxnError::NotCoordinator));
    c.begin_load(1);
    c.step(0, CLIENT, 2, req.clone());
    assert_eq!(answer(&mut c), Some(TxnError::CoordinatorLoadInProgress));
    let garbage = Record::new(0, Some(records::encode_key("t")), Some(vec![0, 1, 2]));
    assert!(c
        .load_batches(&[RecordBatch::of_records(0, vec![garbage])])
        .is_err());
    c.complete_load(0);
    assert!(matches!(c.phase(), TxnPhase::LoadFailed { .. }));
    c.step(0, CLIENT, 3, req);
    assert_eq!(answer(&mut c), Some(TxnError::CoordinatorNotAvailable));
}

#[test]
fn a_failed_write_changes_nothing_and_the_unload_answers_waiters() {
    let mut h = H::new(TxnBugs::default());
    let p = h.init_ok("t");
    h.add("t", p, &[tp(0)]);
    h.fail_next = Some(AppendError::NotLeader);
    assert_eq!(
        h.end("t", p, TxnResult::Commit),
        TxnResponse::EndTxn(Err(TxnError::NotCoordinator))
    );
    assert_eq!(h.state("t"), TxnState::Ongoing);
    assert!(h.markers.is_empty());
    // A write still in flight when the leadership goes: NotCoordinator, then nothing.
    h.c.step(0, CLIENT, 99, {
        TxnRequest::EndTxn(EndTxnRequest {
            transactional_id: "t".into(),
            producer_id: p.producer_id,
            producer_epoch: p.producer_epoch,
            result: TxnResult::Commit,
            keep_epoch: false,
        })
    });
    let outs = h.c.poll_outputs();
    assert!(matches!(outs[..], [TxnOutput::Append { .. }]));
    h.c.unload();
    assert_eq!(
        h.c.poll_outputs(),
        vec![TxnOutput::Respond {
            to: CLIENT,
            correlation: 99,
            response: TxnResponse::EndTxn(Err(TxnError::NotCoordinator)),
        }]
    );
    assert!(h.c.txn("t").is_none());
}

#[test]
fn a_kip360_retry_of_init_gets_the_same_identity() {
    let mut h = H::new(TxnBugs::default());
    let p0 = h.init_ok("t");
    let p1 = match h.init("t", Some(p0)) {
        TxnResponse::InitProducerId(Ok(p)) => p,
        other => panic!("{other:?}"),
    };
    assert_eq!(p1, pe(p0.producer_id, 1));
    // The answer was lost: the same request again is not a second bump.
    assert_eq!(h.init("t", Some(p0)), TxnResponse::InitProducerId(Ok(p1)));
    assert!(fenced(&h.init("t", Some(pe(p0.producer_id + 1, 0)))));
}

mod random {
    //! Random request sequences (with stale identities, refused and lost markers, failed
    //! writes, failovers and time passing): never a panic (the transition `debug_assert!`s
    //! hold), the coordinator's memory always agrees with its log, and an id's producer
    //! epoch never goes back.
    use super::*;
    use proptest::prelude::*;

    const IDS: [&str; 2] = ["a", "b"];

    #[derive(Clone, Debug)]
    enum Op {
        Init {
            id: usize,
            current: bool,
        },
        Add {
            id: usize,
            tp: u32,
            stale: bool,
        },
        Verify {
            id: usize,
            tp: u32,
        },
        End {
            id: usize,
            commit: bool,
            stale: bool,
        },
        AnswerMarkers {
            ok: bool,
        },
        DropMarkers,
        Advance {
            ms: u64,
        },
        FailNextWrite,
        Failover,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..2usize, any::<bool>()).prop_map(|(id, current)| Op::Init { id, current }),
            (0..2usize, 0..3u32, any::<bool>()).prop_map(|(id, tp, stale)| Op::Add {
                id,
                tp,
                stale
            }),
            (0..2usize, 0..3u32).prop_map(|(id, tp)| Op::Verify { id, tp }),
            (0..2usize, any::<bool>(), any::<bool>())
                .prop_map(|(id, commit, stale)| { Op::End { id, commit, stale } }),
            any::<bool>().prop_map(|ok| Op::AnswerMarkers { ok }),
            Just(Op::DropMarkers),
            (1..3000u64).prop_map(|ms| Op::Advance { ms }),
            Just(Op::FailNextWrite),
            Just(Op::Failover),
        ]
    }

    /// The identity a request uses: the id's current one, or the one before it.
    fn identity(h: &H, id: &str, stale: bool) -> ProducerIdAndEpoch {
        match h.c.txn(id) {
            Some(m) => pe(
                m.producer_id,
                if stale {
                    m.producer_epoch.saturating_sub(1)
                } else {
                    m.producer_epoch
                },
            ),
            None => pe(1, 0),
        }
    }

    fn check(h: &H, epochs: &mut BTreeMap<String, (u64, u16)>) {
        let batches: Vec<RecordBatch> = h
            .log
            .iter()
            .enumerate()
            .map(|(i, r)| RecordBatch::of_records(0, vec![r.clone()]).at(i as u64))
            .collect();
        let logged = records::latest_per_id(&batches).expect("the log reads back");
        assert_eq!(
            logged.keys().collect::<Vec<_>>(),
            h.c.transactional_ids().iter().collect::<Vec<_>>()
        );
        for (id, (_, m)) in &logged {
            let mem = h.c.txn(id).expect("held");
            // A loaded Ongoing transaction's timeout restarts at the load.
            let same = TxnMetadata {
                start_time: mem.start_time,
                ..m.clone()
            };
            assert_eq!(mem, &same, "{id}: memory and log disagree");
            let before = epochs.insert(id.clone(), (m.producer_id, m.producer_epoch));
            if let Some((pid, epoch)) = before {
                if pid == m.producer_id {
                    assert!(m.producer_epoch >= epoch, "{id}: epoch went back");
                }
            }
            if m.state.is_preparing() {
                // Markers are on their way (or waiting to be retried).
                assert!(
                    !h.c.markers_pending(id).is_empty() || h.c.poll_timeout().is_some(),
                    "{id}: a Prepare* with nothing to complete it"
                );
            }
        }
    }

    fn run(ops: Vec<Op>, bugs: TxnBugs) {
        let mut h = H::new(bugs);
        let mut epoch = 1;
        let mut epochs = BTreeMap::new();
        for op in ops {
            match op {
                Op::Init { id, current } => {
                    let cur = current.then(|| identity(&h, IDS[id], false));
                    h.init(IDS[id], cur);
                }
                Op::Add { id, tp: p, stale } => {
                    let who = identity(&h, IDS[id], stale);
                    h.add(IDS[id], who, &[tp(p)]);
                }
                Op::Verify { id, tp: p } => {
                    let who = identity(&h, IDS[id], false);
                    h.add_req(IDS[id], who, &[tp(p)], true);
                }
                Op::End { id, commit, stale } => {
                    let who = identity(&h, IDS[id], stale);
                    let result = if commit {
                        TxnResult::Commit
                    } else {
                        TxnResult::Abort
                    };
                    h.end(IDS[id], who, result);
                }
                Op::AnswerMarkers { ok } => {
                    let r = if ok {
                        Ok(())
                    } else {
                        Err(MarkerError::NotLeader)
                    };
                    h.answer_markers(r);
                }
                Op::DropMarkers => h.markers.clear(),
                Op::Advance { ms } => {
                    let t = h.now + ms * 1_000_000;
                    h.advance_to(t);
                }
                Op::FailNextWrite => h.fail_next = Some(AppendError::Timeout),
                Op::Failover => {
                    epoch += 1;
                    let now = h.now;
                    let log = std::mem::take(&mut h.log);
                    h = H::loaded(bugs, epoch, log);
                    h.now = now;
                }
            }
            check(&h, &mut epochs);
        }
        // Left alone with every marker answered, everything completes.
        for _ in 0..20 {
            h.answer_markers(Ok(()));
            let t = h.now + 10_000_000_000;
            h.advance_to(t);
        }
        h.answer_markers(Ok(()));
        for id in h.c.transactional_ids() {
            let s = h.state(&id);
            assert!(
                !s.is_preparing() && s != TxnState::Ongoing,
                "{id} stuck in {s:?}"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn the_coordinator_agrees_with_its_log(ops in proptest::collection::vec(op(), 1..60)) {
            run(ops, TxnBugs::default());
        }

        #[test]
        fn so_it_does_with_the_bug_switches(ops in proptest::collection::vec(op(), 1..40)) {
            run(ops, TxnBugs { late_txn_marker: true, no_txn_fencing: true, ..TxnBugs::default() });
        }
    }
}
