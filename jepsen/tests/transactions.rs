//! The transactional checker on crafted histories: one per class that must be reported (with
//! the transactions and the cycle it names), each with a near-twin, the minimal change that
//! removes the anomaly, that must pass. Then: serial histories are always valid.

use proptest::prelude::*;
use skein_jepsen::{
    check, read_history, CheckOptions, CommitOffset, CommitValue, Dep, Event, EventType, Function,
    HistoryWriter, Index, Isolation, PollRead, Process, Report, SendValue, StreamChecker, TxnKind,
    TxnReport, TxnValue, Value,
};

const RC: Isolation = Isolation::ReadCommitted;
const RU: Isolation = Isolation::ReadUncommitted;

/// A history under construction: each transaction is invoked and completed at once.
#[derive(Default)]
struct H {
    events: Vec<Event>,
}

impl H {
    fn push(&mut self, process: Process, kind: EventType, value: Value) -> Index {
        let index = self.events.len() as Index;
        let e = Event::new(index, index * 1000, process, kind, Function::Txn, value);
        self.events.push(e);
        index
    }

    /// Invokes and completes a transaction; returns the completion's index (its name).
    fn txn(&mut self, process: Process, kind: EventType, value: TxnValue) -> Index {
        self.push(
            process,
            EventType::Invoke,
            Value::Txn(Box::new(value.clone())),
        );
        self.push(process, kind, Value::Txn(Box::new(value)))
    }

    fn report(&self) -> Report {
        check(&self.events, &CheckOptions::default())
    }

    /// The transactional report, with cycles judged as anomalies.
    fn serializable(&self) -> (Report, TxnReport) {
        let mut r = self.report();
        r.set_serializable(true);
        let t = r.txn.clone().expect("a txn report");
        (r, t)
    }
}

fn send(topic: &str, partition: u32, value: &str, offset: u64) -> SendValue {
    SendValue::new(topic, partition, value).at(offset)
}

fn read(topic: &str, partition: u32, records: &[(u64, &str)]) -> PollRead {
    records
        .iter()
        .fold(PollRead::new(topic, partition), |r, (o, v)| {
            r.record(*o, *v)
        })
}

fn offsets(group: &str, topic: &str, partition: u32, offset: u64) -> CommitValue {
    CommitValue {
        group: group.into(),
        offsets: vec![CommitOffset {
            topic: topic.into(),
            partition,
            offset,
        }],
        generation: None,
    }
}

fn assert_only(r: &Report, kind: TxnKind) -> TxnReport {
    let t = r.txn.clone().expect("a txn report");
    assert_eq!(t.found(), vec![kind], "report:\n{r}");
    assert!(!r.valid && !t.valid);
    assert!(
        r.to_string().contains(&format!("txn {}", kind.name())),
        "{r}"
    );
    t
}

fn assert_valid(r: &Report) {
    assert!(r.valid, "expected a valid history, got:\n{r}");
    assert!(r.txn.as_ref().unwrap().found().is_empty());
}

/// The cycle's steps as (from, to, edge type).
fn shape(t: &TxnReport, kind: TxnKind) -> Vec<(Index, Index, Dep)> {
    let cycles = t.cycles(kind);
    assert_eq!(cycles.len(), 1, "{kind}: {cycles:?}");
    cycles[0]
        .steps
        .iter()
        .map(|s| (s.from.index, s.to.index, s.dep))
        .collect()
}

// ---- G1a: aborted read ----

fn g1a(reader: Isolation) -> (H, Index, Index) {
    let mut h = H::default();
    let w = h.txn(
        1,
        EventType::Fail,
        TxnValue::new(RC).send(send("t", 0, "a", 0)),
    );
    let r = h.txn(
        2,
        EventType::Ok,
        TxnValue::new(reader).poll(vec![read("t", 0, &[(0, "a")])]),
    );
    (h, w, r)
}

#[test]
fn g1a_found() {
    let (h, w, r) = g1a(RC);
    let t = assert_only(&h.report(), TxnKind::G1a);
    let ex = &t.g1a.examples[0];
    assert_eq!((ex.writer.index, ex.reader.index), (w, r));
    assert_eq!((ex.record.offset, ex.record.value.as_str()), (Some(0), "a"));
    assert!(h.report().to_string().contains(&format!(
        "T{w} (process 1, aborted) wrote \"a\" at t-0@0, which T{r}"
    )));
}

#[test]
fn g1a_twin_read_uncommitted_passes() {
    assert_valid(&g1a(RU).0.report());
}

// ---- G1b: intermediate read ----

fn g1b(end: u64) -> (H, Index, Index) {
    let mut h = H::default();
    let w = h.txn(
        1,
        EventType::Ok,
        TxnValue::new(RC)
            .send(send("t", 0, "a", 0))
            .send(send("t", 0, "b", 1)),
    );
    let poll = read("t", 0, &[(0, "a")]).end(end);
    let r = h.txn(2, EventType::Ok, TxnValue::new(RC).poll(vec![poll]));
    // Someone reads "b", so it is not lost.
    h.txn(
        3,
        EventType::Ok,
        TxnValue::new(RC).poll(vec![read("t", 0, &[(0, "a"), (1, "b")])]),
    );
    (h, w, r)
}

#[test]
fn g1b_found() {
    let (h, w, r) = g1b(1);
    let t = assert_only(&h.report(), TxnKind::G1b);
    let ex = &t.g1b.examples[0];
    assert_eq!((ex.writer.index, ex.reader.index, ex.end), (w, r, 1));
    assert_eq!((ex.read.value.as_str(), ex.next.value.as_str()), ("a", "b"));
}

#[test]
fn g1b_twin_end_past_the_last_write_passes() {
    // The fetch saw the whole transaction and returned part of it: a short poll.
    assert_valid(&g1b(2).0.report());
}

// ---- lost write ----

fn lost(read_a: bool) -> (H, Index) {
    let mut h = H::default();
    let w = h.txn(
        1,
        EventType::Ok,
        TxnValue::new(RC).send(send("t", 0, "a", 0)),
    );
    h.txn(
        1,
        EventType::Ok,
        TxnValue::new(RC).send(send("t", 0, "b", 1)),
    );
    let records: &[(u64, &str)] = if read_a {
        &[(0, "a"), (1, "b")]
    } else {
        &[(1, "b")]
    };
    h.txn(
        2,
        EventType::Ok,
        TxnValue::new(RC).poll(vec![read("t", 0, records)]),
    );
    (h, w)
}

#[test]
fn lost_write_found() {
    let (h, w) = lost(false);
    let t = assert_only(&h.report(), TxnKind::LostWrite);
    let ex = &t.lost_write.examples[0];
    assert_eq!(
        (ex.txn.index, ex.record.value.as_str(), ex.highest_read),
        (w, "a", 1)
    );
}

#[test]
fn lost_write_twin_read_passes() {
    assert_valid(&lost(true).0.report());
}

// ---- duplicate ----

fn duplicate(twice: bool) -> H {
    let mut h = H::default();
    h.txn(
        1,
        EventType::Ok,
        TxnValue::new(RC).send(send("t", 0, "a", 0)),
    );
    h.txn(
        1,
        EventType::Ok,
        TxnValue::new(RC).send(send("t", 0, "b", 1)),
    );
    let records: &[(u64, &str)] = if twice {
        &[(0, "a"), (1, "b"), (2, "a")]
    } else {
        &[(0, "a"), (1, "b")]
    };
    h.txn(
        2,
        EventType::Ok,
        TxnValue::new(RC).poll(vec![read("t", 0, records)]),
    );
    h
}

#[test]
fn duplicate_found() {
    let t = assert_only(&duplicate(true).report(), TxnKind::Duplicate);
    let places: Vec<Option<u64>> = t.duplicate.examples[0]
        .places
        .iter()
        .map(|p| p.offset)
        .collect();
    assert_eq!(places, vec![Some(0), Some(2)]);
}

#[test]
fn duplicate_twin_passes() {
    assert_valid(&duplicate(false).report());
}

// ---- torn transaction ----

/// T1 writes t-0@5 and u-0@5; others write u-0@4 and u-0@6; process 3 reads t-0@5 and u-0
/// around 5 (or through it).
fn torn(through: bool) -> (H, Index, Index) {
    let mut h = H::default();
    h.txn(
        9,
        EventType::Ok,
        TxnValue::new(RC).send(send("u", 0, "c", 4)),
    );
    let w = h.txn(
        1,
        EventType::Ok,
        TxnValue::new(RC)
            .send(send("t", 0, "a", 5))
            .send(send("u", 0, "b", 5)),
    );
    h.txn(
        9,
        EventType::Ok,
        TxnValue::new(RC).send(send("u", 0, "d", 6)),
    );
    let u: &[(u64, &str)] = if through {
        &[(4, "c"), (5, "b"), (6, "d")]
    } else {
        &[(4, "c"), (6, "d")]
    };
    let r = h.txn(
        3,
        EventType::Ok,
        TxnValue::new(RC).poll(vec![read("t", 0, &[(5, "a")]), read("u", 0, u)]),
    );
    // Another consumer reads "b", so only process 3 misses it.
    h.txn(
        4,
        EventType::Ok,
        TxnValue::new(RC).poll(vec![read("u", 0, &[(5, "b")])]),
    );
    (h, w, r)
}

#[test]
fn torn_transaction_found() {
    let (h, w, r) = torn(false);
    let t = assert_only(&h.report(), TxnKind::TornTransaction);
    let ex = &t.torn_transaction.examples[0];
    assert_eq!((ex.txn.index, ex.read_by.index, ex.reader), (w, r, 3));
    assert_eq!(ex.seen.len(), 1);
    assert_eq!(ex.seen[0].value.as_str(), "a");
    assert_eq!(
        (ex.missing.value.as_str(), ex.missing.offset),
        ("b", Some(5))
    );
    assert_eq!((ex.before, ex.after), (4, 6));
}

#[test]
fn torn_transaction_twin_read_through_passes() {
    assert_valid(&torn(true).0.report());
}

/// A consumer that transacts across a reassignment: process 3 reads u-0@4 "c", is
/// assigned again (its positions restart), then reads t-0@5 "a" and u-0@6 "d". Across the
/// assignment its step over u-0@5 "b" (of the transaction it saw "a" of) is no torn read;
/// without the assignment it is. The streamed checker, which keeps only transactions and
/// position resets by default, judges both as `check` does.
#[test]
fn an_assignment_between_transactions_restarts_the_positions() {
    let build = |assigned: bool| {
        let mut h = H::default();
        h.txn(
            9,
            EventType::Ok,
            TxnValue::new(RC).send(send("u", 0, "c", 4)),
        );
        h.txn(
            1,
            EventType::Ok,
            TxnValue::new(RC)
                .send(send("t", 0, "a", 5))
                .send(send("u", 0, "b", 5)),
        );
        h.txn(
            9,
            EventType::Ok,
            TxnValue::new(RC).send(send("u", 0, "d", 6)),
        );
        h.txn(
            3,
            EventType::Ok,
            TxnValue::new(RC).poll(vec![read("u", 0, &[(4, "c")])]),
        );
        if assigned {
            let index = h.events.len() as Index;
            h.events.push(Event::new(
                index,
                index * 1000,
                3,
                EventType::Ok,
                Function::Assign,
                Value::Assign(skein_jepsen::AssignValue::default()),
            ));
        }
        h.txn(
            3,
            EventType::Ok,
            TxnValue::new(RC).poll(vec![read("t", 0, &[(5, "a")]), read("u", 0, &[(6, "d")])]),
        );
        h.txn(
            4,
            EventType::Ok,
            TxnValue::new(RC).poll(vec![read("u", 0, &[(5, "b")])]),
        );
        h
    };
    let torn = build(false);
    assert_only(&torn.report(), TxnKind::TornTransaction);
    assert_eq!(streamed(&torn.events, false), torn.report());
    let twin = build(true);
    assert_valid(&twin.report());
    assert_eq!(streamed(&twin.events, false), twin.report());
}

// ---- exactly-once of read-process-write ----

/// Inputs in-0@0 "i0", @1 "i1"; a processor consumes them and commits offset 2 for group g.
fn pipeline(h: &mut H, polled: &[(u64, &str)], commit: u64) -> Index {
    // Outputs are named after their input and the transaction, so a reprocessed input's
    // output is a new value (not a duplicate of the first).
    let n = h.events.len() as u64;
    let outputs = polled.iter().fold(
        TxnValue::new(RC).poll(vec![read("in", 0, polled)]),
        |t, (o, v)| t.send(SendValue::new("out", 0, format!("{v}-out{n}")).at(*o + 100 * n)),
    );
    h.txn(
        2,
        EventType::Ok,
        outputs.send_offsets(offsets("g", "in", 0, commit)),
    )
}

fn inputs() -> H {
    let mut h = H::default();
    let t = TxnValue::new(RC)
        .send(send("in", 0, "i0", 0))
        .send(send("in", 0, "i1", 1));
    h.txn(1, EventType::Ok, t);
    h
}

#[test]
fn exactly_once_twice_found() {
    let mut h = inputs();
    let a = pipeline(&mut h, &[(0, "i0"), (1, "i1")], 2);
    // A zombie processor commits i1 again.
    let b = pipeline(&mut h, &[(1, "i1")], 2);
    let t = assert_only(&h.report(), TxnKind::ExactlyOnce);
    let ex = &t.exactly_once.examples[0];
    let by: Vec<Index> = ex.by.iter().map(|t| t.index).collect();
    assert_eq!((ex.input.offset, by), (Some(1), vec![a, b]));
}

#[test]
fn exactly_once_twin_aborted_retry_passes() {
    let mut h = inputs();
    pipeline(&mut h, &[(0, "i0"), (1, "i1")], 2);
    // The same zombie, aborted: its output and offsets never count.
    let zombie = TxnValue::new(RC)
        .poll(vec![read("in", 0, &[(1, "i1")])])
        .send(SendValue::new("out", 0, "i1''"))
        .send_offsets(offsets("g", "in", 0, 2));
    h.txn(3, EventType::Fail, zombie);
    assert_valid(&h.report());
}

#[test]
fn exactly_once_skipped_input_found() {
    let mut h = inputs();
    pipeline(&mut h, &[(0, "i0")], 2);
    // Another consumer reads i1, so it is not lost, only never processed.
    h.txn(
        4,
        EventType::Ok,
        TxnValue::new(RC).poll(vec![read("in", 0, &[(1, "i1")])]),
    );
    let t = assert_only(&h.report(), TxnKind::ExactlyOnce);
    let ex = &t.exactly_once.examples[0];
    assert_eq!(
        (ex.input.value.as_str(), ex.by.len(), ex.committed),
        ("i1", 0, 2)
    );
    assert!(h
        .report()
        .to_string()
        .contains("processed by no committed transaction"));
}

#[test]
fn exactly_once_twin_commit_below_passes() {
    let mut h = inputs();
    pipeline(&mut h, &[(0, "i0")], 1);
    h.txn(
        4,
        EventType::Ok,
        TxnValue::new(RC).poll(vec![read("in", 0, &[(1, "i1")])]),
    );
    assert_valid(&h.report());
}

// ---- G0: write cycle ----

fn g0(cycle: bool) -> (H, Index, Index) {
    let mut h = H::default();
    let t1 = h.txn(
        1,
        EventType::Ok,
        TxnValue::new(RC)
            .send(send("x", 0, "a", 0))
            .send(send("y", 0, "d", 1)),
    );
    let y = if cycle { 0 } else { 2 };
    let t2 = h.txn(
        2,
        EventType::Ok,
        TxnValue::new(RC)
            .send(send("x", 0, "b", 1))
            .send(send("y", 0, "c", y)),
    );
    (h, t1, t2)
}

#[test]
fn g0_found() {
    let (h, t1, t2) = g0(true);
    // Counted always; an anomaly only where serializability is promised.
    let r = h.report();
    assert!(r.valid, "{r}");
    assert_eq!(r.txn.as_ref().unwrap().g0.count, 1);
    let (r, t) = h.serializable();
    assert_eq!(t.found(), vec![TxnKind::G0], "{r}");
    assert_eq!(
        shape(&t, TxnKind::G0),
        vec![(t1, t2, Dep::Ww), (t2, t1, Dep::Ww)]
    );
    let text = r.to_string();
    assert!(text.contains(&format!(
        "T{t1} (process 1) wrote \"a\" at x-0@0 and next in the log T{t2} (process 2) wrote \"b\" at x-0@1 (ww)"
    )), "{text}");
}

#[test]
fn g0_twin_same_order_passes() {
    let (h, _, _) = g0(false);
    let (r, t) = h.serializable();
    assert!(r.valid && t.g0.count == 0, "{r}");
}

// ---- G1c: write-read and write-write cycle ----

fn g1c(cycle: bool) -> (H, Index, Index) {
    let mut h = H::default();
    let (mine, theirs) = if cycle { (1, 0) } else { (0, 1) };
    let t1 = h.txn(
        1,
        EventType::Ok,
        TxnValue::new(RC)
            .send(send("x", 0, "a", 0))
            .send(send("y", 0, "c", mine)),
    );
    let t2 = h.txn(
        2,
        EventType::Ok,
        TxnValue::new(RC)
            .poll(vec![read("x", 0, &[(0, "a")])])
            .send(send("y", 0, "b", theirs)),
    );
    h.txn(
        3,
        EventType::Ok,
        TxnValue::new(RC).poll(vec![read("y", 0, &[(0, if cycle { "b" } else { "c" })])]),
    );
    (h, t1, t2)
}

#[test]
fn g1c_found() {
    let (h, t1, t2) = g1c(true);
    let (r, t) = h.serializable();
    assert_eq!(t.found(), vec![TxnKind::G1c], "{r}");
    assert_eq!(
        shape(&t, TxnKind::G1c),
        vec![(t1, t2, Dep::Wr), (t2, t1, Dep::Ww)]
    );
    assert!(r.to_string().contains(&format!(
        "wrote \"a\" at x-0@0, which T{t2} (process 2) read (wr)"
    )));
}

#[test]
fn g1c_twin_writes_in_order_passes() {
    let (r, _) = g1c(false).0.serializable();
    assert!(r.valid, "{r}");
}

// ---- G-single: one anti-dependency (read skew) ----

fn g_single(saw_x: bool) -> (H, Index, Index) {
    let mut h = H::default();
    let t2 = h.txn(
        2,
        EventType::Ok,
        TxnValue::new(RC)
            .send(send("x", 0, "a", 0))
            .send(send("y", 0, "c", 0)),
    );
    let x = if saw_x {
        read("x", 0, &[(0, "a")]).end(1)
    } else {
        read("x", 0, &[]).end(0)
    };
    let t1 = h.txn(
        1,
        EventType::Ok,
        TxnValue::new(RC).poll(vec![x, read("y", 0, &[(0, "c")]).end(1)]),
    );
    (h, t1, t2)
}

#[test]
fn g_single_found() {
    let (h, t1, t2) = g_single(false);
    let (r, t) = h.serializable();
    assert_eq!(t.found(), vec![TxnKind::GSingle], "{r}");
    assert_eq!(
        shape(&t, TxnKind::GSingle),
        vec![(t1, t2, Dep::Rw), (t2, t1, Dep::Wr)]
    );
    assert!(r.to_string().contains(&format!(
        "T{t1} (process 1) read x-0 up to its end 0 and did not see T{t2} (process 2) write \"a\" at x-0@0 (rw)"
    )), "{r}");
}

#[test]
fn g_single_twin_saw_both_passes() {
    let (r, t) = g_single(true).0.serializable();
    assert!(r.valid && t.stats.rw_edges == 0, "{r}");
}

// ---- G2: two anti-dependencies (write skew) ----

fn g2(saw: bool) -> (H, Index, Index) {
    let mut h = H::default();
    let t1 = h.txn(
        1,
        EventType::Ok,
        TxnValue::new(RC)
            .poll(vec![read("x", 0, &[]).end(0)])
            .send(send("y", 0, "b", 0)),
    );
    let y = if saw {
        read("y", 0, &[(0, "b")]).end(1)
    } else {
        read("y", 0, &[]).end(0)
    };
    let t2 = h.txn(
        2,
        EventType::Ok,
        TxnValue::new(RC).poll(vec![y]).send(send("x", 0, "a", 0)),
    );
    h.txn(
        3,
        EventType::Ok,
        TxnValue::new(RU).poll(vec![read("x", 0, &[(0, "a")]), read("y", 0, &[(0, "b")])]),
    );
    (h, t1, t2)
}

#[test]
fn g2_found() {
    let (h, t1, t2) = g2(false);
    let (r, t) = h.serializable();
    assert_eq!(t.found(), vec![TxnKind::G2], "{r}");
    assert_eq!(
        shape(&t, TxnKind::G2),
        vec![(t1, t2, Dep::Rw), (t2, t1, Dep::Rw)]
    );
}

#[test]
fn g2_twin_second_saw_the_first_passes() {
    let (r, _) = g2(true).0.serializable();
    assert!(r.valid, "{r}");
}

// ---- format ----

#[test]
fn txn_round_trips_through_json_lines() {
    let (h, _, _) = torn(false);
    let mut w = HistoryWriter::new(Vec::new());
    for e in &h.events {
        let mut e = e.clone();
        w.write_event(&mut e).unwrap();
    }
    let bytes = w.into_inner().unwrap();
    let back = read_history(&bytes[..]).unwrap();
    assert_eq!(back, h.events);
}

#[test]
fn txn_json_reads_and_bad_txns_are_named() {
    let ok = r#"{"index":0,"time":0,"process":1,"type":"ok","f":"txn","value":{"isolation":"read_committed","ops":[{"f":"send","topic":"t","partition":0,"value":"a","offset":3},{"f":"poll","reads":[{"topic":"t","partition":0,"records":[[3,"a"]],"end":4}]},{"f":"send-offsets","group":"g","offsets":[{"topic":"t","partition":0,"offset":4}]}]}}"#;
    let events = read_history(ok.as_bytes()).unwrap();
    let t = events[0].txn().unwrap();
    assert_eq!((t.isolation(), t.ops.len()), (RC, 3));
    let unacked = r#"{"index":0,"time":0,"process":1,"type":"ok","f":"txn","value":{"ops":[{"f":"send","topic":"t","partition":0,"value":"a"}]}}"#;
    let err = read_history(unacked.as_bytes()).unwrap_err().to_string();
    assert!(
        err.contains("line 1") && err.contains("needs its offset"),
        "{err}"
    );
    let unknown = r#"{"index":0,"time":0,"process":1,"type":"invoke","f":"txn","value":{"ops":[{"f":"append"}]}}"#;
    let err = read_history(unknown.as_bytes()).unwrap_err().to_string();
    assert!(err.contains("line 1") && err.contains("append"), "{err}");
    let null_ok = r#"{"index":0,"time":0,"process":1,"type":"ok","f":"txn","value":null}"#;
    let err = read_history(null_ok.as_bytes()).unwrap_err().to_string();
    assert!(err.contains("an ok txn needs a value with ops"), "{err}");
}

#[test]
fn histories_without_txns_have_no_txn_report() {
    let r = check(&[], &CheckOptions::default());
    assert!(r.txn.is_none());
    let json = serde_json::to_string(&r).unwrap();
    assert!(!json.contains("\"txn\""));
}

// ---- serial histories are valid ----

/// A one-at-a-time execution of random transactions against a model of Kafka's partitions:
/// producers (some aborting, some of unknown outcome), consumers of both isolation levels
/// (some with the fetch's end), and one read-process-write pipeline committing its input
/// offsets for group `g`.
struct Serial {
    rng: u64,
    h: H,
    /// Per partition: (value, committed) in offset order.
    log: Vec<Vec<(String, bool)>>,
    /// Per consumer process (1..=4): the next offset to read per partition.
    pos: Vec<Vec<u64>>,
    /// The pipeline's committed input offset.
    committed: u64,
    next_value: u64,
}

const TPS: [(&str, u32); 4] = [("in", 0), ("x", 0), ("x", 1), ("out", 0)];

impl Serial {
    fn new(seed: u64) -> Self {
        Self {
            rng: seed | 1,
            h: H::default(),
            log: vec![Vec::new(); TPS.len()],
            pos: vec![vec![0; TPS.len()]; 5],
            committed: 0,
            next_value: 0,
        }
    }

    fn below(&mut self, n: u64) -> u64 {
        // xorshift64*: enough for shapes, and reproducible from the seed.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) % n
    }

    fn outcome(&mut self) -> (EventType, bool) {
        match self.below(10) {
            0 | 1 => (EventType::Fail, false),
            2 => (EventType::Info, self.below(2) == 0),
            _ => (EventType::Ok, true),
        }
    }

    /// Appends a send; `acked`: the completion names its offset.
    fn send(&mut self, t: TxnValue, tp: usize, committed: bool, acked: bool) -> TxnValue {
        self.next_value += 1;
        let value = format!("v{}", self.next_value);
        let offset = self.log[tp].len() as u64;
        self.log[tp].push((value.clone(), committed));
        let s = SendValue::new(TPS[tp].0, TPS[tp].1, value);
        t.send(if acked { s.at(offset) } else { s })
    }

    /// Reads up to `n` visible records of `tp` from `from`; returns the read and the next
    /// position.
    fn scan(&self, tp: usize, from: u64, n: u64, iso: Isolation) -> (PollRead, u64) {
        let mut read = PollRead::new(TPS[tp].0, TPS[tp].1);
        let mut at = from;
        let log = &self.log[tp];
        while (read.records.len() as u64) < n && (at as usize) < log.len() {
            let (v, committed) = &log[at as usize];
            if *committed || iso == RU {
                read = read.record(at, v.as_str());
            }
            at += 1;
        }
        (read, at)
    }

    fn producer(&mut self) {
        let (kind, truth) = self.outcome();
        let mut t = TxnValue::new(RC);
        for _ in 0..=self.below(3) {
            let tp = self.below(TPS.len() as u64) as usize;
            let acked = kind == EventType::Ok || self.below(2) == 0;
            t = self.send(t, tp, truth, acked);
        }
        let p = 10 + self.below(3);
        self.h.txn(p, kind, t);
    }

    fn consumer(&mut self) {
        let p = 1 + self.below(4) as usize;
        let iso = if self.below(2) == 0 { RC } else { RU };
        let mut t = TxnValue::new(iso);
        let mut moved = self.pos[p].clone();
        let mut reads = Vec::new();
        for _ in 0..=self.below(2) {
            let tp = self.below(TPS.len() as u64) as usize;
            let n = self.below(5);
            let (mut read, next) = self.scan(tp, moved[tp], n, iso);
            if self.below(2) == 0 {
                read = read.end(self.log[tp].len() as u64);
            }
            moved[tp] = next;
            reads.push(read);
        }
        t = t.poll(reads);
        let (kind, truth) = self.outcome();
        if self.below(3) == 0 {
            let tp = self.below(TPS.len() as u64) as usize;
            t = self.send(t, tp, truth, kind == EventType::Ok);
        }
        // An application that aborts seeks back: only a committed poll moves it on.
        if kind == EventType::Ok {
            self.pos[p] = moved;
        }
        self.h.txn(p as Process, kind, t);
    }

    fn pipeline(&mut self) {
        let n = self.below(4);
        let (read, next) = self.scan(0, self.committed, n, RC);
        let inputs: Vec<String> = read.records.iter().map(|(_, v)| v.to_string()).collect();
        let (kind, truth) = self.outcome();
        let mut t = TxnValue::new(RC).poll(vec![read]);
        for _ in inputs {
            t = self.send(t, 3, truth, kind == EventType::Ok);
        }
        let t = t.send_offsets(offsets("g", "in", 0, next));
        if truth {
            self.committed = next;
        }
        self.h.txn(5, kind, t);
    }
}

fn serial_history(seed: u64, txns: usize) -> H {
    let mut s = Serial::new(seed);
    for _ in 0..txns {
        match s.below(3) {
            0 => s.producer(),
            1 => s.consumer(),
            _ => s.pipeline(),
        }
    }
    s.h
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// One transaction at a time can show none of the anomalies, cycles included.
    #[test]
    fn serial_histories_are_valid(seed in any::<u64>(), txns in 1usize..120) {
        let h = serial_history(seed, txns);
        let (r, t) = h.serializable();
        prop_assert!(r.valid, "seed {seed}:\n{r}");
        prop_assert_eq!(t.stats.txns, txns as u64);
    }
}

/// The checker's cost on a 100k-operation transactional history (run with `--ignored`; it
/// prints the time).
#[test]
#[ignore]
fn large_serial_history_checks_in_seconds() {
    let h = serial_history(7, 50_000);
    assert_eq!(h.events.len(), 100_000);
    if let Ok(path) = std::env::var("TXN_HISTORY_OUT") {
        let mut w = HistoryWriter::new(std::io::BufWriter::new(
            std::fs::File::create(path).unwrap(),
        ));
        for e in &h.events {
            w.write_event(&mut e.clone()).unwrap();
        }
        w.flush().unwrap();
    }
    let start = std::time::Instant::now();
    let (r, t) = h.serializable();
    eprintln!(
        "checked {} events in {:?}: {:?}",
        h.events.len(),
        start.elapsed(),
        t.stats
    );
    assert!(r.valid, "{r}");
}

// ---- the streamed checker ----

fn streamed(events: &[Event], keep_plain: bool) -> Report {
    let mut s = StreamChecker::new(&CheckOptions::default()).keep_plain_for_txns(keep_plain);
    for e in events {
        s.push(e);
    }
    s.finish()
}

/// Fed event by event, the checker judges transactions as `check` does: from the `txn`
/// events alone when the history has nothing else, and with the plain events kept when
/// asked to.
#[test]
fn the_streamed_checker_judges_txns_as_check_does() {
    let (torn, _, _) = torn(false);
    let whole = torn.report();
    assert!(!whole.valid, "{whole}");
    assert_eq!(streamed(&torn.events, false), whole);

    // A plain send and a plain poll before the transactions: writer-less log entries
    // and reads only the kept-plain stream sees.
    let mut events = vec![
        Event::new(
            0,
            0,
            20,
            EventType::Invoke,
            Function::Send,
            Value::Send(SendValue::new("x", 0, "plain")),
        ),
        Event::new(
            1,
            1,
            20,
            EventType::Ok,
            Function::Send,
            Value::Send(send("x", 0, "plain", 1000)),
        ),
    ];
    let h = serial_history(11, 60);
    for e in &h.events {
        let mut e = e.clone();
        e.index += 2;
        events.push(e);
    }
    let whole = check(&events, &CheckOptions::default());
    assert_eq!(streamed(&events, true), whole);
    assert_eq!(
        whole.txn.as_ref().unwrap().stats,
        streamed(&h.events, false).txn.unwrap().stats
    );
}
