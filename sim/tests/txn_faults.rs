//! Precise faults for the transactional workload (issue 52): a held, duplicated or dropped
//! message of one kind from one sender, a paused transactional producer (a zombie past
//! `transaction.timeout.ms`), and a crash of one transactional id's coordinator.

use serde_json::Value as Json;
use skein_jepsen::{read_history, Event, EventType, Function, MicroOp, Value};
use skein_sim::config::SimConfig;
use skein_sim::report::SimReport;
use skein_sim::scenario::Scenario;
use skein_sim::time::{MILLIS, SECS};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::io::Write;
use std::rc::Rc;

/// A sink the test reads back after the run.
#[derive(Clone, Default)]
struct Shared(Rc<RefCell<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A 20 s txn scenario: seed 1, 3 partitions, no random faults and no read-process-write
/// pipelines (the recipes below were timed without them), the given `[[fault]]` entries.
fn scenario(faults: &str) -> SimConfig {
    let text = format!(
        "seed = 1\n[cluster]\npartitions = 3\n[workload]\nkind = \"txn\"\npipelines = 0\n[run]\nduration = \"20s\"\nliveness = \"4s\"\n{faults}"
    );
    let sc = Scenario::parse("t.toml", &text).expect("a valid scenario");
    let mut c = SimConfig {
        seed: 1,
        ..SimConfig::default()
    };
    c.apply_scenario(&sc);
    c
}

/// One traced event.
struct Ev {
    time: u64,
    kind: String,
    node: String,
    detail: String,
}

/// Runs `c`, returning the report, the trace and the history.
fn run(c: &SimConfig) -> (SimReport, Vec<Ev>, Vec<Event>) {
    let (trace, history) = (Shared::default(), Shared::default());
    let r = skein_sim::run(
        c,
        Some(Box::new(trace.clone())),
        Some(Box::new(history.clone())),
    )
    .expect("the run starts");
    let events = trace
        .0
        .borrow()
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let j: Json = serde_json::from_slice(l).expect("a JSON trace line");
            let s = |k: &str| j[k].as_str().unwrap_or_default().to_string();
            Ev {
                time: j["time"].as_u64().unwrap_or(0),
                kind: s("kind"),
                node: s("node"),
                detail: s("detail"),
            }
        })
        .collect();
    let bytes = history.0.borrow().clone();
    let h = read_history(&bytes[..]).expect("a valid history");
    (r, events, h)
}

fn end_txns_from_client_1(trace: &[Ev]) -> impl Iterator<Item = &Ev> {
    trace.iter().filter(|e| {
        e.kind == "deliver" && e.detail.starts_with("client-1 -> ") && e.detail.contains("EndTxn")
    })
}

/// The held EndTxn is delivered `delay` after it was sent, after the producer, having had
/// no answer, sent it again and moved on: nothing about its sender took it back. With
/// KIP-890 part 2 the coordinator fences it (its epoch is older), and the run passes.
#[test]
fn a_held_end_txn_arrives_after_its_sender_retried() {
    let c = scenario(
        "[[fault]]\nat = \"2s\"\nkind = \"message-delay\"\nmessage = \"end-txn\"\nfrom = \"producer:1\"\ndelay = \"3s\"\n",
    );
    let (r, trace, _) = run(&c);
    assert!(r.passed(), "{:?}\n{r}", r.failed_invariants());
    let hits: Vec<&Ev> = trace.iter().filter(|e| e.kind == "message-fault").collect();
    assert_eq!(hits.len(), 1, "one-shot");
    let hit = hits[0];
    assert_eq!(hit.node, "message-delay");
    assert!(
        hit.detail.starts_with("end-txn client-1 -> ") && hit.detail.contains("EndTxn"),
        "{}",
        hit.detail
    );
    assert!(hit.time >= 2 * SECS);
    // The same request (its correlation) arrives 3 s after it was sent...
    let corr = hit
        .detail
        .split("correlation: ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .expect("the held request's correlation");
    let arrived: Vec<&Ev> = end_txns_from_client_1(&trace)
        .filter(|e| e.detail.contains(&format!("correlation: {corr},")))
        .collect();
    assert_eq!(arrived.len(), 1, "delivered once");
    assert_eq!(arrived[0].time, hit.time + 3 * SECS);
    // ...after the producer sent EndTxns again (its retry, and later transactions').
    let others = end_txns_from_client_1(&trace)
        .filter(|e| e.time > hit.time && e.time < arrived[0].time)
        .count();
    assert!(others >= 2, "only {others} EndTxns meanwhile");
    // Part 2 fences it: the coordinator answers the late request ProducerFenced.
    assert!(trace.iter().any(|e| e.time >= arrived[0].time
        && e.kind == "deliver"
        && e.detail
            .contains(&format!("-> client-1: TxnResponse {{ correlation: {corr},"))
        && e.detail.contains("ProducerFenced")));
}

/// A duplicated marker arrives twice; a dropped EndTxn never does (the producer's retry
/// ends the transaction). Each is one-shot, and the runs pass.
#[test]
fn duplicate_and_drop_strike_once() {
    let c = scenario(
        "[[fault]]\nat = \"2s\"\nkind = \"message-duplicate\"\nmessage = \"txn-marker\"\nfrom = \"coordinator:txn-2\"\ndelay = \"200ms\"\n[[fault]]\nat = \"3s\"\nkind = \"message-drop\"\nmessage = \"end-txn\"\nfrom = \"producer:2\"\n",
    );
    let (r, trace, _) = run(&c);
    assert!(r.passed(), "{:?}\n{r}", r.failed_invariants());
    let hits: Vec<&Ev> = trace.iter().filter(|e| e.kind == "message-fault").collect();
    assert_eq!(hits.len(), 2, "each strikes once");
    let dup = hits.iter().find(|e| e.node == "message-duplicate").unwrap();
    assert!(dup.detail.starts_with("txn-marker node-"), "{}", dup.detail);
    let marker = dup
        .detail
        .splitn(3, ": ")
        .nth(2)
        .expect("the marker")
        .to_string();
    let copies = trace
        .iter()
        .filter(|e| e.kind == "deliver" && e.detail.ends_with(&marker))
        .count();
    assert_eq!(copies, 2, "the marker and its copy: {marker}");
    let drop = hits.iter().find(|e| e.node == "message-drop").unwrap();
    assert!(drop.detail.contains("dropped"), "{}", drop.detail);
    assert!(r.txn.expect("txn stats").committed > 0);
}

/// Producer 1 stops the world for 5 s, past its 3 s `transaction.timeout.ms`: its
/// coordinator aborts the open transaction with an epoch bump, so when the producer wakes
/// (a zombie) its requests are fenced; it starts a new instance and goes on committing.
/// The transaction it had open is never read.
#[test]
fn a_paused_txn_producer_is_a_zombie_past_its_timeout() {
    // Mid-transaction: producer 1 has added partition 0 and written there.
    let pause_at = 4_500 * MILLIS;
    let wake = pause_at + 5 * SECS;
    let c = scenario(
        "[[fault]]\nat = \"4500ms\"\nkind = \"client-pause\"\nclient = \"producer:1\"\nduration = \"5s\"\n",
    );
    let (r, _, history) = run(&c);
    assert!(r.passed(), "{:?}\n{r}", r.failed_invariants());
    assert!(r.txn.clone().expect("txn stats").reinits >= 1, "{r}");
    let p1 = skein_sim::topic::process_id(1, 0);
    let txns: Vec<&Event> = history
        .iter()
        .filter(|e| e.f == Function::Txn && e.process == p1)
        .collect();
    // The transaction open when the pause struck: invoked before it, ended after the wake.
    let open = txns
        .iter()
        .rfind(|e| e.kind == EventType::Invoke && e.time < pause_at)
        .expect("a transaction before the pause");
    let ended = txns
        .iter()
        .find(|e| e.kind != EventType::Invoke && e.time > open.time)
        .expect("it ended");
    assert!(
        ended.time >= wake && ended.kind == EventType::Info,
        "the zombie learns it is fenced when it wakes: {:?} at {}",
        ended.kind,
        ended.time
    );
    let values = |e: &Event| -> BTreeSet<String> {
        let Value::Txn(v) = &e.value else {
            return BTreeSet::new();
        };
        (v.ops.iter())
            .filter_map(|op| match op {
                MicroOp::Send(s) => Some(s.value.to_string()),
                _ => None,
            })
            .collect()
    };
    let zombie = values(ended);
    assert!(!zombie.is_empty());
    let read: BTreeSet<String> = (history.iter())
        .filter(|e| e.f == Function::Txn)
        .flat_map(|e| match &e.value {
            Value::Txn(v) => v
                .ops
                .iter()
                .filter_map(|op| match op {
                    MicroOp::Poll(p) => Some(
                        p.reads
                            .iter()
                            .flat_map(|r| r.records.iter().map(|(_, v)| v.to_string()))
                            .collect::<Vec<_>>(),
                    ),
                    _ => None,
                })
                .flatten()
                .collect::<Vec<_>>(),
            _ => Vec::new(),
        })
        .collect();
    assert!(
        zombie.is_disjoint(&read),
        "the coordinator aborted the zombie's transaction: {zombie:?}"
    );
    // The new instance commits after the wake.
    assert!(txns
        .iter()
        .any(|e| e.kind == EventType::Ok && e.time > wake + 100 * MILLIS));
}

/// `coordinator-crash` with a transactional id crashes the broker leading that id's
/// `__transaction_state` partition at that moment; the id's transactions go on after the
/// failover (and after the restart), and the run passes.
#[test]
fn the_coordinator_of_a_transactional_id_crashes() {
    let c = scenario(
        "[[fault]]\nat = \"4s\"\nkind = \"coordinator-crash\"\ntransactional_id = \"txn-1\"\nrestart_after = \"2s\"\n",
    );
    let (r, trace, history) = run(&c);
    assert!(r.passed(), "{:?}\n{r}", r.failed_invariants());
    let crash = trace
        .iter()
        .find(|e| e.kind == "coordinator-crash")
        .expect("traced");
    let broker: u32 = crash
        .detail
        .strip_prefix("the transaction coordinator of \"txn-1\" is Some(")
        .and_then(|s| s.strip_suffix(')'))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{}", crash.detail));
    // That broker really was txn-1's coordinator: it answered txn-1's EndTxns before.
    assert!(trace.iter().any(|e| e.time < crash.time
        && e.kind == "deliver"
        && e.detail
            .starts_with(&format!("client-1 -> node-{broker}: Txn"))
        && e.detail.contains("EndTxn")));
    let p1 = skein_sim::topic::process_id(1, 0);
    let committed_after = history
        .iter()
        .filter(|e| {
            e.f == Function::Txn && e.process == p1 && e.kind == EventType::Ok && e.time > 4 * SECS
        })
        .count();
    assert!(
        committed_after > 0,
        "txn-1 commits after its coordinator's crash"
    );
    assert_eq!(
        r.faults.get("txn-coordinator-crash"),
        Some(&1),
        "{:?}",
        r.faults
    );
}

/// The count the history summary gives class `name` (0 if it does not list it).
fn class_count(r: &SimReport, name: &str) -> u64 {
    let Some(summary) = r.history_summary.as_deref() else {
        return 0;
    };
    summary
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some(name)).then(|| words.next()?.parse().ok())?
        })
        .max()
        .unwrap_or(0)
}

/// KAFKA-17754 step by step (`scenarios/txn-late-marker.toml`, seed 1; docs/transactions.md):
/// txn-1's abort marker to sim-0 is held 1.6 s, resent and written, and lands while the
/// next transaction is open there. With KIP-890 part 2 off (core's `late_txn_marker`) it
/// ends that transaction: the producer is told it committed, but its write is aborted
/// (history: lost-write). With part 2 on, the marker carries the bumped epoch the next
/// transaction writes at, is marked bumped, and is refused: the run passes.
#[test]
fn the_late_marker_scenario_fails_only_without_kip890_part2() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/txn-late-marker.toml"
    );
    let sc = Scenario::load(std::path::Path::new(path)).expect("the scenario");
    let mut c = SimConfig::default();
    c.apply_scenario(&sc);
    c.seed = sc.seed.expect("the worked example's seed");
    let (r, trace, _) = run(&c);
    assert!(r.passed(), "{:?}\n{r}", r.failed_invariants());
    let held = |trace: &[Ev]| -> (u64, String) {
        let hit = (trace.iter())
            .find(|e| e.kind == "message-fault")
            .expect("the marker was held");
        let corr = hit
            .detail
            .split("correlation: ")
            .nth(1)
            .and_then(|s| s.split(',').next())
            .expect("its correlation")
            .to_string();
        assert!(
            hit.detail.contains("WriteTxnMarker") && hit.detail.contains("result: Abort"),
            "{}",
            hit.detail
        );
        (hit.time, corr)
    };
    let (at, corr) = held(&trace);
    let answer = |trace: &[Ev]| -> String {
        (trace.iter())
            .find(|e| {
                e.time > at + 1_600 * MILLIS
                    && e.kind == "deliver"
                    && e.detail
                        .contains(&format!("WriteTxnMarkerResponse {{ correlation: {corr},"))
            })
            .map(|e| e.detail.clone())
            .expect("the late copy is answered")
    };
    assert!(
        answer(&trace).contains("Err(LateMarker"),
        "{}",
        answer(&trace)
    );

    c.txn_bugs.late_txn_marker = true;
    let (r, trace, _) = run(&c);
    // The checker (lost-write) and the ground-truth invariants agree: the late abort
    // marker ended a transaction its client was told committed.
    assert_eq!(
        r.failed_invariants(),
        ["history", "txn-torn", "txn-marker-misapplied"],
        "{r}"
    );
    assert!(class_count(&r, "lost-write") > 0, "{r}");
    assert_eq!(held(&trace).1, corr, "the same marker is held");
    assert!(
        answer(&trace).contains("result: Ok(())"),
        "the late marker is written: {}",
        answer(&trace)
    );
}

/// The txn workload at `rate` times the default fault rate with random message faults only
/// (`--fault-weights message=3`, every other weight 0), 20 s.
fn message_faults_only(seed: u64, rate: f64) -> SimConfig {
    let mut c = SimConfig {
        workload: skein_sim::config::Workload::Txn,
        group_members: 0,
        duration: 20 * SECS,
        liveness: 20 * SECS / 3,
        ..SimConfig::default()
    }
    .with_fault_rate(rate);
    c.seed = seed;
    for kind in skein_sim::faults::FaultRates::KINDS {
        c.rates.set_weight(kind, 0).expect("a known kind");
    }
    c.rates.set_weight("message", 3).expect("a known kind");
    c
}

/// Random message faults (the `message` weight) arm the scenario's message faults at random
/// times: each strikes once, on a transaction message of its kind from its sender, holding
/// or duplicating it 0.5-2.5 s; the correct core passes. The plain workload draws none.
#[test]
fn random_message_faults_hold_and_duplicate_txn_messages() {
    let mut kinds = BTreeSet::new();
    let mut actions = BTreeSet::new();
    for seed in 0..4 {
        let c = message_faults_only(seed, 4.0);
        let (r, trace, _) = run(&c);
        assert!(r.passed(), "seed {seed}: {:?}\n{r}", r.failed_invariants());
        let hits: Vec<&Ev> = trace.iter().filter(|e| e.kind == "message-fault").collect();
        assert!(!hits.is_empty(), "seed {seed}: no message fault struck");
        for hit in hits {
            let kind = hit.detail.split(' ').next().unwrap_or_default().to_string();
            assert!(
                ["txn-marker", "end-txn", "add-partitions", "txn-produce"].contains(&&*kind),
                "{}",
                hit.detail
            );
            // A marker comes from a broker (a coordinator), the rest from a producer.
            let from = hit.detail.split(' ').nth(1).unwrap_or_default();
            assert_eq!(
                kind == "txn-marker",
                from.starts_with("node-"),
                "{}",
                hit.detail
            );
            kinds.insert(kind);
            actions.insert(hit.node.clone());
        }
    }
    assert!(kinds.len() >= 3, "{kinds:?}");
    assert_eq!(
        actions,
        BTreeSet::from(["message-delay".to_string(), "message-duplicate".to_string()])
    );
    let mut plain = message_faults_only(0, 4.0);
    plain.workload = skein_sim::config::Workload::Plain;
    plain.group_members = 2;
    assert!(skein_sim::realised_schedule(&plain).is_empty());
}

/// With old clients (`txn_keep_epoch`: EndTxn before v5, no KIP-890 part 2 bump), the
/// correct core is open to KAFKA-17754 as Kafka is: the late marker of the worked example
/// carries the epoch the next transaction writes at and is unbumped, so nothing tells it
/// from that transaction's own, and it ends it (as with `--bug late-txn-marker`). Every
/// EndTxn they send asks to keep the epoch.
#[test]
fn old_clients_keep_their_epoch_and_are_open_to_a_late_marker() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/txn-late-marker.toml"
    );
    let sc = Scenario::load(std::path::Path::new(path)).expect("the scenario");
    let mut c = SimConfig::default();
    c.apply_scenario(&sc);
    c.seed = 1;
    c.txn_keep_epoch = true;
    let (r, trace, _) = run(&c);
    assert!(
        r.failed_invariants().contains(&"txn-marker-misapplied"),
        "{:?}\n{r}",
        r.failed_invariants()
    );
    let end_txns: Vec<&Ev> = trace
        .iter()
        .filter(|e| e.kind == "deliver" && e.detail.contains("EndTxn(EndTxnRequest"))
        .collect();
    assert!(!end_txns.is_empty());
    for e in end_txns {
        assert!(e.detail.contains("keep_epoch: true"), "{}", e.detail);
    }
}
