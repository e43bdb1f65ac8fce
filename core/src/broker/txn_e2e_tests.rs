//! Transactions end to end over real brokers and a real controller: core's
//! `TransactionalProducer` drives the coordinator (`txns`), the partition side
//! (`txn_partition`: verification, markers, LSO) and the group coordinator (KIP-447 offsets),
//! and read_committed fetches see exactly the committed transactions. No part is played by
//! the test: it only routes the producer's messages, as the simulator and the node do.

use super::tests::{broker_config, World, MS};
use super::*;
use crate::client::{
    Destination, TransactionalProducer, TxnProducerConfig, TxnProducerEvent, TxnProducerOutput,
    TxnProducerState,
};
use crate::controller::TopicConfig;
use crate::group::{GroupRequest, GroupResponse, OffsetAndMetadata, OffsetFetchRequest};
use crate::testing::Delivery as _;
use crate::txn::{IsolationLevel, TxnResult};

const CLIENT: u64 = 7;
const READER: u64 = 8;

fn config() -> BrokerConfig {
    BrokerConfig {
        transaction_state_topic_partitions: 2,
        transaction_state_topic_replication_factor: 3,
        transaction_state_topic_min_insync_replicas: 2,
        group_append_timeout: 500 * MS,
        ..broker_config()
    }
}

fn part(p: u32) -> TopicPartition {
    TopicPartition::new("x", p)
}

/// Three brokers, topic `x` with two partitions (RF 3, min.insync 2).
fn cluster() -> World {
    cluster_with(config())
}

/// [`cluster`] with brokers configured by `config`.
fn cluster_with(config: BrokerConfig) -> World {
    let mut w = World::new(&[1, 2, 3], config);
    w.run(100 * MS);
    w.admin(ControllerRequest::CreateTopic {
        name: "x".into(),
        config: TopicConfig {
            partitions: 2,
            replication_factor: 3,
            min_insync_replicas: 2,
            ..TopicConfig::default()
        },
        assignment: None,
    });
    let ok = w.run_until(2000 * MS, |w| {
        (0..2).all(|p| w.leader_of(&part(p)).is_some())
    });
    assert!(ok, "x has no leaders");
    w
}

fn records(values: &[&str]) -> RecordBatch {
    RecordBatch::new(
        0,
        values.iter().map(|v| (None, Some(v.as_bytes().to_vec()))),
    )
}

impl World {
    /// The broker that leads `tp` at the highest epoch it knows.
    fn leader_of(&self, tp: &TopicPartition) -> Option<NodeId> {
        self.brokers
            .iter()
            .filter_map(|(&id, b)| b.replica_view(tp).map(|v| (id, v)))
            .filter(|(_, v)| v.role == ReplicaRole::Leader)
            .max_by_key(|(_, v)| v.leader_epoch)
            .map(|(id, _)| id)
    }

    fn address_of(&self, to: &Destination, tick: u64) -> Option<Address> {
        let live: Vec<NodeId> = self.brokers.keys().copied().collect();
        Some(Address::Node(match to {
            Destination::AnyBroker => live[(tick as usize) % live.len()],
            Destination::Node(n) => *n,
            Destination::LeaderOf(tp) => self.leader_of(tp)?,
        }))
    }

    /// Run the producer (routing its messages and answers) until `done` holds, at most
    /// `limit`; the application events it reported meanwhile.
    fn drive(
        &mut self,
        p: &mut TransactionalProducer,
        limit: Nanos,
        done: impl Fn(&TransactionalProducer, &[TxnProducerEvent]) -> bool,
    ) -> Vec<TxnProducerEvent> {
        let end = self.now + limit;
        let mut events = Vec::new();
        let mut tick = 0u64;
        while self.now < end && !done(p, &events) {
            for out in p.poll_outputs() {
                match out {
                    TxnProducerOutput::Event(e) => events.push(e),
                    TxnProducerOutput::Send {
                        to,
                        correlation,
                        request,
                    } => {
                        let msg = p.to_message(correlation, &request).expect("encodable");
                        // No leader known: the message is lost, and the producer's request
                        // timeout sends it again, as on a real network.
                        if let Some(to) = self.address_of(&to, tick) {
                            self.net.queue.push_back((Address::Client(CLIENT), to, msg));
                        }
                    }
                }
            }
            self.now += MS;
            tick += 1;
            self.tick_all();
            self.deliver_all();
            let answers: Vec<Message> = {
                let (mine, rest) = std::mem::take(&mut self.inbox)
                    .into_iter()
                    .partition(|(c, _)| *c == CLIENT);
                self.inbox = rest;
                mine.into_iter().map(|(_, m)| m).collect()
            };
            for m in answers {
                if let Some((c, r)) = crate::client::txn_producer::from_message(m) {
                    p.step(self.now, c, r);
                }
            }
            if p.poll_timeout().is_some_and(|t| t <= self.now) {
                p.handle_timeout(self.now);
            }
        }
        for out in p.poll_outputs() {
            if let TxnProducerOutput::Event(e) = out {
                events.push(e);
            }
        }
        events
    }

    /// Values a reader at `isolation` gets from the whole of `tp` (aborted transactions'
    /// records dropped under read_committed), and the end the fetch reported.
    fn read(&mut self, tp: &TopicPartition, isolation: IsolationLevel) -> (Vec<String>, Offset) {
        let leader = self.leader_of(tp).expect("a leader");
        self.correlation += 1;
        let c = self.correlation;
        let req = ConsumerFetchRequest {
            correlation: c,
            tp: tp.clone(),
            offset: 0,
            max_bytes: 1 << 20,
            current_leader_epoch: None,
            last_fetched_epoch: None,
            isolation,
        };
        self.net.queue.push_back((
            Address::Client(READER),
            Address::Node(leader),
            Message::ConsumerFetch(req),
        ));
        self.deliver_all();
        let got = self
            .inbox
            .iter()
            .find_map(|(_, m)| match m {
                Message::ConsumerFetchResponse(r) if r.correlation == c => Some(r.result.clone()),
                _ => None,
            })
            .expect("an answer")
            .expect("records");
        let end = match isolation {
            IsolationLevel::ReadCommitted => got.last_stable_offset,
            IsolationLevel::ReadUncommitted => got.high_watermark,
        };
        let values = got
            .batches
            .iter()
            .flat_map(|b| {
                let pid = b.producer.map(|p| p.producer_id);
                b.data_records()
                    .filter(|(o, _)| {
                        !(b.is_transactional()
                            && pid.is_some_and(|pid| got.aborted.iter().any(|a| a.covers(pid, *o))))
                    })
                    .map(|(_, r)| {
                        String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned()
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        (values, end)
    }

    fn committed_offsets(&mut self, group: &str) -> Option<BTreeMap<TopicPartition, Offset>> {
        for node in [1, 2, 3] {
            self.correlation += 1;
            let c = self.correlation;
            let req = GroupRequest::OffsetFetch(OffsetFetchRequest {
                group_id: group.into(),
                partitions: None,
                require_stable: true,
            });
            self.net.queue.push_back((
                Address::Client(READER),
                Address::Node(node),
                Message::group(c, req),
            ));
            self.deliver_all();
            let answer = self.inbox.iter().find_map(|(_, m)| match m {
                Message::GroupResponse {
                    correlation,
                    response,
                } if *correlation == c => Some((**response).clone()),
                _ => None,
            });
            if let Some(GroupResponse::OffsetFetch(Ok(o))) = answer {
                return Some(o.into_iter().map(|(tp, m)| (tp, m.offset)).collect());
            }
        }
        None
    }
}

fn completed(result: TxnResult) -> impl Fn(&TransactionalProducer, &[TxnProducerEvent]) -> bool {
    move |_, events| {
        events
            .iter()
            .any(|e| matches!(e, TxnProducerEvent::Completed { result: r, .. } if *r == result))
    }
}

fn initialised(w: &mut World) -> TransactionalProducer {
    let mut p = TransactionalProducer::new(TxnProducerConfig::new("e2e-1"));
    p.init(w.now).expect("init");
    w.drive(&mut p, 5_000 * MS, |p, _| {
        *p.state() == TxnProducerState::Ready
    });
    assert_eq!(*p.state(), TxnProducerState::Ready, "init did not finish");
    p
}

#[test]
fn committed_aborted_and_open_transactions_are_seen_as_read_committed_allows() {
    let mut w = cluster();
    let mut p = initialised(&mut w);

    p.begin().unwrap();
    p.send(w.now, part(0), records(&["a1"])).unwrap();
    p.send(w.now, part(1), records(&["a2"])).unwrap();
    p.commit(w.now).unwrap();
    let ev = w.drive(&mut p, 5_000 * MS, completed(TxnResult::Commit));
    assert!(
        completed(TxnResult::Commit)(&p, &ev),
        "commit did not complete: {ev:?}"
    );

    p.begin().unwrap();
    p.send(w.now, part(0), records(&["b1"])).unwrap();
    p.send(w.now, part(1), records(&["b2"])).unwrap();
    let written = |_: &TransactionalProducer, ev: &[TxnProducerEvent]| {
        ev.iter()
            .filter(|e| matches!(e, TxnProducerEvent::Written { .. }))
            .count()
            == 2
    };
    w.drive(&mut p, 5_000 * MS, written);
    p.abort(w.now).unwrap();
    let ev = w.drive(&mut p, 5_000 * MS, completed(TxnResult::Abort));
    assert!(
        completed(TxnResult::Abort)(&p, &ev),
        "abort did not complete: {ev:?}"
    );

    // An open transaction: written, neither committed nor aborted.
    p.begin().unwrap();
    p.send(w.now, part(0), records(&["c1"])).unwrap();
    let one = |_: &TransactionalProducer, ev: &[TxnProducerEvent]| {
        ev.iter()
            .any(|e| matches!(e, TxnProducerEvent::Written { .. }))
    };
    w.drive(&mut p, 5_000 * MS, one);
    w.run(200 * MS); // every marker committed, the open write below the HW

    let (seen, lso) = w.read(&part(0), IsolationLevel::ReadCommitted);
    assert_eq!(seen, ["a1"], "read_committed sees the commit only");
    let (all, hw) = w.read(&part(0), IsolationLevel::ReadUncommitted);
    assert_eq!(all, ["a1", "b1", "c1"], "read_uncommitted sees everything");
    assert!(
        lso < hw,
        "the open transaction holds the LSO ({lso}) below the HW ({hw})"
    );
    let (seen, _) = w.read(&part(1), IsolationLevel::ReadCommitted);
    assert_eq!(seen, ["a2"]);

    p.commit(w.now).unwrap();
    let ev = w.drive(&mut p, 5_000 * MS, completed(TxnResult::Commit));
    assert!(completed(TxnResult::Commit)(&p, &ev), "{ev:?}");
    w.run(200 * MS);
    let (seen, lso) = w.read(&part(0), IsolationLevel::ReadCommitted);
    assert_eq!(seen, ["a1", "c1"]);
    let (_, hw) = w.read(&part(0), IsolationLevel::ReadUncommitted);
    assert_eq!(lso, hw, "no open transaction: the LSO is the HW");
}

/// The zoo's `txn_offsets_visible_early`, switched on in the brokers' `bugs.txn`, reaches
/// the group coordinators they host: offsets sent in a transaction that then aborts are
/// the group's committed offsets anyway (the correct core drops them: the test below).
#[test]
fn the_visible_early_switch_commits_offsets_of_an_aborted_transaction() {
    let mut cfg = config();
    cfg.bugs.txn.txn_offsets_visible_early = true;
    let mut w = cluster_with(cfg);
    let mut p = initialised(&mut w);
    p.begin().unwrap();
    p.send(w.now, part(1), records(&["out-1"])).unwrap();
    let offsets = BTreeMap::from([(part(0), OffsetAndMetadata::new(5))]);
    p.send_offsets(w.now, "g", None, None, offsets).unwrap();
    let sent = |_: &TransactionalProducer, ev: &[TxnProducerEvent]| {
        ev.iter()
            .any(|e| matches!(e, TxnProducerEvent::OffsetsSent { .. }))
    };
    let ev = w.drive(&mut p, 5_000 * MS, sent);
    assert!(sent(&p, &ev), "{ev:?}");
    p.abort(w.now).unwrap();
    let ev = w.drive(&mut p, 5_000 * MS, completed(TxnResult::Abort));
    assert!(completed(TxnResult::Abort)(&p, &ev), "{ev:?}");
    w.run(200 * MS);
    let committed = w
        .committed_offsets("g")
        .expect("the group coordinator answers");
    assert_eq!(committed.get(&part(0)), Some(&5), "the bug shows");
}

#[test]
fn offsets_sent_in_a_transaction_commit_with_it_and_vanish_with_an_abort() {
    let mut w = cluster();
    let mut p = initialised(&mut w);
    let offsets = |o| {
        BTreeMap::from([(
            part(0),
            OffsetAndMetadata {
                offset: o,
                leader_epoch: None,
                metadata: String::new(),
            },
        )])
    };

    p.begin().unwrap();
    p.send(w.now, part(1), records(&["out-1"])).unwrap();
    p.send_offsets(w.now, "g", None, None, offsets(5)).unwrap();
    // The offsets reach the group coordinator (pending) before the abort.
    let sent = |_: &TransactionalProducer, ev: &[TxnProducerEvent]| {
        ev.iter()
            .any(|e| matches!(e, TxnProducerEvent::OffsetsSent { .. }))
    };
    let ev = w.drive(&mut p, 5_000 * MS, sent);
    assert!(sent(&p, &ev), "{ev:?}");
    p.abort(w.now).unwrap();
    let ev = w.drive(&mut p, 5_000 * MS, completed(TxnResult::Abort));
    assert!(completed(TxnResult::Abort)(&p, &ev), "{ev:?}");
    w.run(200 * MS);
    let committed = w
        .committed_offsets("g")
        .expect("the group coordinator answers");
    assert_eq!(committed.get(&part(0)), None, "aborted offsets never apply");

    p.begin().unwrap();
    p.send(w.now, part(1), records(&["out-2"])).unwrap();
    p.send_offsets(w.now, "g", None, None, offsets(7)).unwrap();
    p.commit(w.now).unwrap();
    let ev = w.drive(&mut p, 5_000 * MS, completed(TxnResult::Commit));
    assert!(completed(TxnResult::Commit)(&p, &ev), "{ev:?}");
    w.run(200 * MS);
    let committed = w
        .committed_offsets("g")
        .expect("the group coordinator answers");
    assert_eq!(committed.get(&part(0)), Some(&7));
    let (seen, _) = w.read(&part(1), IsolationLevel::ReadCommitted);
    assert_eq!(seen, ["out-2"]);
}

#[test]
fn a_commit_survives_the_crash_of_its_coordinator() {
    let mut w = cluster();
    let mut p = initialised(&mut w);
    let coordinator = p.coordinator().expect("found");
    p.begin().unwrap();
    p.send(w.now, part(0), records(&["k1"])).unwrap();
    p.send(w.now, part(1), records(&["k2"])).unwrap();
    p.commit(w.now).unwrap();
    // Until EndTxn is answered (PrepareCommit is written), then the coordinator dies
    // before (or while) its markers are written.
    let ev = w.drive(&mut p, 5_000 * MS, completed(TxnResult::Commit));
    assert!(completed(TxnResult::Commit)(&p, &ev), "{ev:?}");
    w.crash(coordinator);
    let ok = w.run_until(10_000 * MS, |w| {
        (0..2).all(|i| {
            w.leader_of(&part(i)).is_some_and(|l| l != coordinator)
                && w.read(&part(i), IsolationLevel::ReadCommitted).0.len() == 1
        })
    });
    assert!(
        ok,
        "the commit never became visible after the coordinator crashed"
    );
    assert_eq!(w.read(&part(0), IsolationLevel::ReadCommitted).0, ["k1"]);
    assert_eq!(w.read(&part(1), IsolationLevel::ReadCommitted).0, ["k2"]);
}
