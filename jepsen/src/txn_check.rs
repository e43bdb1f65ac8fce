//! The transactional checker (`docs/history.md`, "Transactions").
//!
//! One pass pairs each `txn` invocation with its completion and records, in history order,
//! what each consumer read; the ground truth follows: every offset any send acknowledged or
//! any poll returned, the writer of every value, and which transactions committed. From it
//! come the per-record classes (aborted and intermediate reads, lost writes, duplicates, torn
//! transactions, exactly-once of read-process-write) and the dependency graph (ww by offset
//! order, wr by reads, rw by the end a read saw), whose cycles `cycles` finds.
//!
//! Hash maps are lookup tables only; everything reported is ordered by history position.

use crate::check::Examples;
use crate::cycles::{self, Edge};
use crate::fxhash::{FastMap, FastSet};
use crate::history::{
    Event, EventType, Function, Isolation, MicroOp, Offset, Partition, Process, Text, TxnValue,
};
use crate::report::Anomaly;
use crate::txn_report::{
    Cycle, Dep, IntermediateRead, Processing, Record, Step, Torn, TxnDuplicate, TxnRead, TxnRef,
    TxnReport, TxnStats, TxnStatus, TxnWrite,
};
use std::collections::BTreeMap;

type At = u64;
type TpId = u32;
type ValueId = u32;
type TxnId = u32;
/// Not written by a transaction: a plain send, or a value no send carried.
const NO_TXN: TxnId = TxnId::MAX;

/// Judges the `txn` events of a history; `None` if it has none.
pub(crate) fn check(events: &[Event], max_examples: usize) -> Option<TxnReport> {
    if !events.iter().any(|e| e.f == Function::Txn) {
        return None;
    }
    let mut c = TxnChecker::new(events, max_examples);
    c.index();
    Some(c.judge())
}

/// Whether [`check`] reads a plain (not `txn`) event: the ones [`TxnChecker::index`]
/// matches.
pub(crate) fn reads(e: &Event) -> bool {
    matches!(
        (e.f, e.kind),
        (Function::Txn | Function::Crash, _)
            | (
                Function::Assign | Function::Subscribe,
                EventType::Ok | EventType::Info
            )
            | (Function::Send, EventType::Ok)
            | (
                Function::Poll,
                EventType::Ok | EventType::Info | EventType::Fail
            )
    )
}

struct Txn<'a> {
    /// Position of the completion (of the invocation, if it never completed).
    at: At,
    process: Process,
    status: TxnStatus,
    isolation: Isolation,
    value: &'a TxnValue,
}

/// One record returned by a poll.
#[derive(Clone, Copy)]
struct Read {
    /// `NO_TXN` for a plain poll.
    reader: TxnId,
    at: At,
    tp: TpId,
    offset: Offset,
    value: ValueId,
    committed_only: bool,
}

/// One partition's part of a transaction's poll, with the end the fetch reported.
#[derive(Clone, Copy)]
struct Bound {
    reader: TxnId,
    tp: TpId,
    end: Offset,
    /// The highest offset this part returned, if any.
    last: Option<(Offset, ValueId)>,
}

/// A read_committed consumer went from `before` to `after` of a partition, skipping offsets.
#[derive(Clone, Copy)]
struct Gap {
    process: u32,
    reader: TxnId,
    tp: TpId,
    before: Offset,
    after: Offset,
}

/// What happened, in history order, that the per-process consumer positions follow.
enum Item {
    Txn(TxnId),
    /// The process's positions are unknown from here (crash, new assignment).
    Reset(Process),
}

struct TxnChecker<'a> {
    events: &'a [Event],
    max: usize,
    txns: Vec<Txn<'a>>,
    timeline: Vec<Item>,
    tp_ids: BTreeMap<(&'a str, Partition), TpId>,
    tps: Vec<(&'a Text, Partition)>,
    value_ids: FastMap<&'a str, ValueId>,
    values: Vec<&'a Text>,
    /// Per value: its writing transaction, and where its acknowledgement put it.
    writer: Vec<TxnId>,
    acked: Vec<Option<(TpId, Offset)>>,
    times_read: Vec<u32>,
    /// Plain sends' acknowledged places (writer-less log entries).
    plain: Vec<(TpId, Offset, ValueId, At)>,
    reads: Vec<Read>,
    bounds: Vec<Bound>,
    gaps: Vec<Gap>,
    /// (process slot, transaction) pairs where the process read a write of the transaction.
    seen: FastSet<(u32, TxnId)>,
    /// Per partition: (offset, value) in offset order, one value per offset.
    log: Vec<Vec<(Offset, ValueId)>>,
}

impl<'a> TxnChecker<'a> {
    fn new(events: &'a [Event], max: usize) -> Self {
        Self {
            events,
            max,
            txns: Vec::new(),
            timeline: Vec::new(),
            tp_ids: BTreeMap::new(),
            tps: Vec::new(),
            value_ids: FastMap::default(),
            values: Vec::new(),
            writer: Vec::new(),
            acked: Vec::new(),
            times_read: Vec::new(),
            plain: Vec::new(),
            reads: Vec::new(),
            bounds: Vec::new(),
            gaps: Vec::new(),
            seen: FastSet::default(),
            log: Vec::new(),
        }
    }

    fn tp(&mut self, topic: &'a Text, partition: Partition) -> TpId {
        let next = self.tps.len() as TpId;
        let id = *self
            .tp_ids
            .entry((topic.as_str(), partition))
            .or_insert(next);
        if id == next {
            self.tps.push((topic, partition));
        }
        id
    }

    fn value(&mut self, value: &'a Text) -> ValueId {
        let next = self.values.len() as ValueId;
        let id = *self.value_ids.entry(value.as_str()).or_insert(next);
        if id == next {
            self.values.push(value);
            self.writer.push(NO_TXN);
            self.acked.push(None);
            self.times_read.push(0);
        }
        id
    }

    /// Pairs invocations with completions and collects plain sends and polls.
    fn index(&mut self) {
        let events = self.events;
        let mut open: FastMap<Process, At> = FastMap::default();
        for (at, e) in events.iter().enumerate() {
            let at = at as At;
            match (e.f, e.kind) {
                (Function::Txn, EventType::Invoke) => {
                    if let Some(prev) = open.insert(e.process, at) {
                        self.push_txn(prev, prev, TxnStatus::Unknown);
                    }
                }
                (Function::Txn, kind) => {
                    let invoked = open.remove(&e.process).unwrap_or(at);
                    let status = match kind {
                        EventType::Ok => TxnStatus::Committed,
                        EventType::Fail => TxnStatus::Aborted,
                        _ => TxnStatus::Unknown,
                    };
                    self.push_txn(invoked, at, status);
                }
                (Function::Crash, _) => {
                    if let Some(prev) = open.remove(&e.process) {
                        self.push_txn(prev, prev, TxnStatus::Unknown);
                    }
                    self.timeline.push(Item::Reset(e.process));
                }
                (Function::Assign | Function::Subscribe, EventType::Ok | EventType::Info) => {
                    self.timeline.push(Item::Reset(e.process))
                }
                (Function::Send, EventType::Ok) => self.plain_send(at, e),
                (Function::Poll, EventType::Ok | EventType::Info | EventType::Fail) => {
                    self.plain_poll(at, e)
                }
                _ => {}
            }
        }
        let mut left: Vec<At> = open.into_values().collect();
        left.sort_unstable();
        for at in left {
            self.push_txn(at, at, TxnStatus::Unknown);
        }
        self.writes();
        self.txn_reads();
        self.build_log();
    }

    fn push_txn(&mut self, invoked: At, at: At, status: TxnStatus) {
        let e = &self.events[at as usize];
        let value = e
            .txn()
            .or_else(|| self.events[invoked as usize].txn())
            .unwrap_or(&EMPTY);
        self.timeline.push(Item::Txn(self.txns.len() as TxnId));
        self.txns.push(Txn {
            at,
            process: e.process,
            status,
            isolation: value.isolation(),
            value,
        });
    }

    fn plain_send(&mut self, at: At, e: &'a Event) {
        if let Some(s) = e.send() {
            if let Some(offset) = s.offset {
                let tp = self.tp(&s.topic, s.partition);
                let v = self.value(&s.value);
                self.plain.push((tp, offset, v, at));
            }
        }
    }

    fn plain_poll(&mut self, at: At, e: &'a Event) {
        for r in e.records().unwrap_or_default() {
            let tp = self.tp(&r.topic, r.partition);
            let value = self.value(&r.value);
            self.times_read[value as usize] += 1;
            self.reads.push(Read {
                reader: NO_TXN,
                at,
                tp,
                offset: r.offset,
                value,
                committed_only: false,
            });
        }
    }

    /// Each value's writer and acknowledged place.
    fn writes(&mut self) {
        for id in 0..self.txns.len() {
            let value = self.txns[id].value;
            for op in &value.ops {
                let MicroOp::Send(s) = op else { continue };
                let tp = self.tp(&s.topic, s.partition);
                let v = self.value(&s.value);
                if self.writer[v as usize] == NO_TXN {
                    self.writer[v as usize] = id as TxnId;
                }
                if let (Some(o), None) = (s.offset, self.acked[v as usize]) {
                    self.acked[v as usize] = Some((tp, o));
                }
            }
        }
    }

    /// The reads of transactions, in history order, following each consumer's position.
    fn txn_reads(&mut self) {
        let mut slots: FastMap<Process, u32> = FastMap::default();
        let mut positions: FastMap<(u32, TpId), Offset> = FastMap::default();
        let timeline = std::mem::take(&mut self.timeline);
        for item in &timeline {
            let id = match *item {
                Item::Reset(p) => {
                    if let Some(&slot) = slots.get(&p) {
                        positions.retain(|(s, _), _| *s != slot);
                    }
                    continue;
                }
                Item::Txn(id) => id,
            };
            let next = slots.len() as u32;
            let slot = *slots.entry(self.txns[id as usize].process).or_insert(next);
            if self.txns[id as usize].status != TxnStatus::Committed {
                // What its polls returned is evidence of the log, but not of the consumer's
                // position: an application seeks back after an abort, and an unknown
                // outcome leaves the position unknown.
                self.txn_polls(id, slot, &mut FastMap::default(), false);
                positions.retain(|(s, _), _| *s != slot);
                continue;
            }
            self.txn_polls(id, slot, &mut positions, true);
        }
        self.timeline = timeline;
    }

    /// Records the polls of transaction `id`; `judged`: follow the consumer's position and
    /// what it saw, for torn transactions.
    fn txn_polls(
        &mut self,
        id: TxnId,
        slot: u32,
        positions: &mut FastMap<(u32, TpId), Offset>,
        judged: bool,
    ) {
        let txn = &self.txns[id as usize];
        let (at, value) = (txn.at, txn.value);
        let committed_only = txn.isolation == Isolation::ReadCommitted;
        for op in &value.ops {
            let MicroOp::Poll(poll) = op else { continue };
            for part in &poll.reads {
                let tp = self.tp(&part.topic, part.partition);
                let mut last = None;
                for (offset, text) in &part.records {
                    let v = self.value(text);
                    self.times_read[v as usize] += 1;
                    let offset = *offset;
                    self.reads.push(Read {
                        reader: id,
                        at,
                        tp,
                        offset,
                        value: v,
                        committed_only,
                    });
                    if last.is_none_or(|(o, _)| offset > o) {
                        last = Some((offset, v));
                    }
                    // Every read moves the consumer; only a read_committed one judges what
                    // it stepped over (read_uncommitted steps over nothing legitimately).
                    let before = positions.insert((slot, tp), offset);
                    if !committed_only || !judged {
                        continue;
                    }
                    let w = self.writer[v as usize];
                    if w != NO_TXN && w != id {
                        self.seen.insert((slot, w));
                    }
                    if let Some(before) = before {
                        if offset > before + 1 {
                            self.gaps.push(Gap {
                                process: slot,
                                reader: id,
                                tp,
                                before,
                                after: offset,
                            });
                        }
                    }
                }
                if let Some(end) = part.end {
                    self.bounds.push(Bound {
                        reader: id,
                        tp,
                        end,
                        last,
                    });
                }
            }
        }
    }

    /// Statuses settled by reads, then each partition's known offsets in order.
    fn build_log(&mut self) {
        for r in &self.reads {
            let w = self.writer[r.value as usize];
            if r.committed_only && w != NO_TXN && w != r.reader {
                let t = &mut self.txns[w as usize];
                if t.status == TxnStatus::Unknown {
                    t.status = TxnStatus::Committed;
                }
            }
        }
        let mut log = vec![Vec::new(); self.tps.len()];
        for (v, place) in self.acked.iter().enumerate() {
            if let Some((tp, o)) = place {
                log[*tp as usize].push((*o, v as ValueId));
            }
        }
        for &(tp, o, v, _) in &self.plain {
            log[tp as usize].push((o, v));
        }
        for r in &self.reads {
            log[r.tp as usize].push((r.offset, r.value));
        }
        for l in &mut log {
            // Stable: an acknowledgement's value wins a disagreement (inconsistent offsets
            // are the base checker's finding).
            l.sort_by_key(|&(o, _)| o);
            l.dedup_by_key(|&mut (o, _)| o);
        }
        self.log = log;
    }

    fn committed(&self, id: TxnId) -> bool {
        id != NO_TXN && self.txns[id as usize].status == TxnStatus::Committed
    }

    fn tref(&self, id: TxnId) -> TxnRef {
        let t = &self.txns[id as usize];
        TxnRef {
            index: self.events[t.at as usize].index,
            process: t.process,
            status: t.status,
        }
    }

    fn record(&self, tp: TpId, offset: Option<Offset>, value: ValueId) -> Record {
        let (topic, partition) = self.tps[tp as usize];
        Record {
            topic: topic.clone(),
            partition,
            offset,
            value: self.values[value as usize].clone(),
        }
    }

    /// The value at `offset` of `tp`, if known.
    fn at_offset(&self, tp: TpId, offset: Offset) -> Option<ValueId> {
        let l = &self.log[tp as usize];
        l.binary_search_by_key(&offset, |&(o, _)| o)
            .ok()
            .map(|i| l[i].1)
    }

    fn judge(self) -> TxnReport {
        let (edges, why) = self.edges();
        let mut stats = self.stats();
        for e in &edges {
            match e.dep {
                Dep::Ww => stats.ww_edges += 1,
                Dep::Wr => stats.wr_edges += 1,
                Dep::Rw => stats.rw_edges += 1,
            }
        }
        let found = cycles::find(self.txns.len(), &edges);
        let to_anomaly = |cs: Vec<Vec<usize>>| self.cycles(cs, &edges, &why);
        let mut report = TxnReport {
            valid: false,
            serializable: false,
            stats,
            g0: to_anomaly(found.g0),
            g1a: self.aborted_reads(),
            g1b: self.intermediate_reads(),
            g1c: to_anomaly(found.g1c),
            g_single: to_anomaly(found.g_single),
            g2: to_anomaly(found.g2),
            lost_write: self.lost_writes(),
            duplicate: self.duplicates(),
            torn_transaction: self.torn(),
            exactly_once: self.exactly_once(),
        };
        report.set_serializable(false);
        report
    }

    fn stats(&self) -> TxnStats {
        let mut s = TxnStats {
            txns: self.txns.len() as u64,
            ..TxnStats::default()
        };
        for t in &self.txns {
            match t.status {
                TxnStatus::Committed => s.committed += 1,
                TxnStatus::Aborted => s.aborted += 1,
                TxnStatus::Unknown => s.unknown += 1,
            }
            for op in &t.value.ops {
                match op {
                    MicroOp::Send(_) => s.sends += 1,
                    MicroOp::Poll(p) => {
                        s.polls += 1;
                        s.records_read +=
                            p.reads.iter().map(|r| r.records.len() as u64).sum::<u64>();
                    }
                    MicroOp::SendOffsets(_) => s.offset_commits += 1,
                }
            }
        }
        s
    }
}

/// One consumer group's input partition, as exactly-once judges it.
#[derive(Clone, Copy)]
struct Input<'a> {
    group: (u32, &'a Text),
    tp: TpId,
    /// The group's highest committed offset of `tp`.
    committed: Offset,
}

/// The value of a transaction whose events carry none.
static EMPTY: TxnValue = TxnValue {
    isolation: None,
    id: None,
    ops: Vec::new(),
};

/// Why an edge exists: what the sentence of a cycle step says.
#[derive(Clone, Copy)]
enum Why {
    /// Two successive committed writes of a partition.
    Ww {
        tp: TpId,
        first: (Offset, ValueId),
        next: (Offset, ValueId),
    },
    /// A read of a write.
    Wr {
        tp: TpId,
        offset: Offset,
        value: ValueId,
    },
    /// A read that ended before a later write.
    Rw {
        tp: TpId,
        end: Offset,
        next: (Offset, ValueId),
    },
}

impl TxnChecker<'_> {
    /// The dependency graph over committed transactions: sorted, deduplicated edges (the
    /// first justification of each kept), no self-loops.
    fn edges(&self) -> (Vec<Edge>, Vec<Why>) {
        let mut raw: Vec<(Edge, Why)> = Vec::new();
        let mut add = |from: TxnId, to: TxnId, dep: Dep, why: Why| {
            if from != to && self.committed(from) && self.committed(to) {
                raw.push((Edge { from, to, dep }, why));
            }
        };
        for (tp, l) in self.log.iter().enumerate() {
            let tp = tp as TpId;
            let mut prev: Option<(TxnId, Offset, ValueId)> = None;
            for &(o, v) in l {
                let w = self.writer[v as usize];
                if !self.committed(w) {
                    continue;
                }
                if let Some((pw, po, pv)) = prev {
                    let why = Why::Ww {
                        tp,
                        first: (po, pv),
                        next: (o, v),
                    };
                    add(pw, w, Dep::Ww, why);
                }
                prev = Some((w, o, v));
            }
        }
        for r in &self.reads {
            let why = Why::Wr {
                tp: r.tp,
                offset: r.offset,
                value: r.value,
            };
            add(self.writer[r.value as usize], r.reader, Dep::Wr, why);
        }
        for b in &self.bounds {
            let l = &self.log[b.tp as usize];
            let start = l.partition_point(|&(o, _)| o < b.end);
            let next = l[start..]
                .iter()
                .find(|&&(_, v)| self.committed(self.writer[v as usize]));
            if let Some(&(o, v)) = next {
                let why = Why::Rw {
                    tp: b.tp,
                    end: b.end,
                    next: (o, v),
                };
                add(b.reader, self.writer[v as usize], Dep::Rw, why);
            }
        }
        raw.sort_by_key(|&(e, _)| e);
        raw.dedup_by_key(|&mut (e, _)| e);
        raw.into_iter().unzip()
    }

    fn explain(&self, e: &Edge, why: &Why) -> String {
        let (from, to) = (self.tref(e.from), self.tref(e.to));
        match *why {
            Why::Ww { tp, first, next } => format!(
                "{from} wrote {} and next in the log {to} wrote {} (ww)",
                self.record(tp, Some(first.0), first.1),
                self.record(tp, Some(next.0), next.1)
            ),
            Why::Wr { tp, offset, value } => format!(
                "{from} wrote {}, which {to} read (wr)",
                self.record(tp, Some(offset), value)
            ),
            Why::Rw { tp, end, next } => {
                let (topic, partition) = self.tps[tp as usize];
                format!(
                    "{from} read {topic}-{partition} up to its end {end} and did not see {to} write {} (rw)",
                    self.record(tp, Some(next.0), next.1)
                )
            }
        }
    }

    fn cycles(&self, found: Vec<Vec<usize>>, edges: &[Edge], why: &[Why]) -> Anomaly<Cycle> {
        let mut ex = Examples::new(self.max);
        for c in found {
            // Keyed by the earliest transaction in it, for a stable, history-ordered report.
            let key = c
                .iter()
                .map(|&i| self.txns[edges[i].from as usize].at)
                .min();
            ex.add(key.unwrap_or(0), || Cycle {
                steps: c
                    .iter()
                    .map(|&i| Step {
                        from: self.tref(edges[i].from),
                        to: self.tref(edges[i].to),
                        dep: edges[i].dep,
                        explanation: self.explain(&edges[i], &why[i]),
                    })
                    .collect(),
            });
        }
        ex.into_anomaly(|c| c)
    }
}

impl TxnChecker<'_> {
    /// G1a: a read_committed poll returned a write of an aborted transaction.
    fn aborted_reads(&self) -> Anomaly<TxnRead> {
        let mut ex = Examples::new(self.max);
        for r in &self.reads {
            let w = self.writer[r.value as usize];
            if !r.committed_only || w == NO_TXN || w == r.reader {
                continue;
            }
            if self.txns[w as usize].status == TxnStatus::Aborted {
                ex.add(r.at, || TxnRead {
                    writer: self.tref(w),
                    reader: self.tref(r.reader),
                    record: self.record(r.tp, Some(r.offset), r.value),
                });
            }
        }
        ex.into_anomaly(|r| r)
    }

    /// G1b: a read_committed poll of a partition returned a write of a transaction and
    /// reported an end (last stable offset) at another write of that same transaction. The
    /// last stable offset stops at the first write of an open transaction; this one had
    /// written before it, so it was open and its first write should not have been visible.
    fn intermediate_reads(&self) -> Anomaly<IntermediateRead> {
        let mut ex = Examples::new(self.max);
        for b in &self.bounds {
            let reader = &self.txns[b.reader as usize];
            let Some((o, v)) = b.last else { continue };
            let w = self.writer[v as usize];
            if reader.isolation != Isolation::ReadCommitted || w == NO_TXN || w == b.reader {
                continue;
            }
            let Some(next) = self.at_offset(b.tp, b.end) else {
                continue;
            };
            if self.writer[next as usize] == w && b.end > o {
                ex.add(reader.at, || IntermediateRead {
                    writer: self.tref(w),
                    reader: self.tref(b.reader),
                    read: self.record(b.tp, Some(o), v),
                    end: b.end,
                    next: self.record(b.tp, Some(b.end), next),
                });
            }
        }
        ex.into_anomaly(|r| r)
    }

    /// An acknowledged write of a committed transaction nobody read, below an offset of its
    /// partition that was read.
    fn lost_writes(&self) -> Anomaly<TxnWrite> {
        let mut highest: Vec<Option<Offset>> = vec![None; self.tps.len()];
        for r in &self.reads {
            let h = &mut highest[r.tp as usize];
            *h = Some(h.map_or(r.offset, |h| h.max(r.offset)));
        }
        let mut ex = Examples::new(self.max);
        for (v, place) in self.acked.iter().enumerate() {
            let (Some((tp, o)), w) = (*place, self.writer[v]) else {
                continue;
            };
            if !self.committed(w) || self.times_read[v] > 0 {
                continue;
            }
            if let Some(h) = highest[tp as usize].filter(|&h| h > o) {
                ex.add(self.txns[w as usize].at, || TxnWrite {
                    txn: self.tref(w),
                    record: self.record(tp, Some(o), v as ValueId),
                    highest_read: h,
                });
            }
        }
        ex.into_anomaly(|w| w)
    }

    /// One value at two or more offsets (of transactions' writes).
    fn duplicates(&self) -> Anomaly<TxnDuplicate> {
        let mut places: Vec<(ValueId, TpId, Offset, At)> = Vec::new();
        for (v, place) in self.acked.iter().enumerate() {
            if let Some((tp, o)) = place {
                let w = self.writer[v];
                places.push((v as ValueId, *tp, *o, self.txns[w as usize].at));
            }
        }
        for r in &self.reads {
            if self.writer[r.value as usize] != NO_TXN {
                places.push((r.value, r.tp, r.offset, r.at));
            }
        }
        places.sort_unstable();
        places.dedup_by_key(|&mut (v, tp, o, _)| (v, tp, o));
        let mut ex = Examples::new(self.max);
        for group in places.chunk_by(|a, b| a.0 == b.0) {
            if group.len() < 2 {
                continue;
            }
            let first = group.iter().map(|p| p.3).min().unwrap_or(0);
            let v = group[0].0;
            ex.add(first, || TxnDuplicate {
                writer: Some(self.tref(self.writer[v as usize])),
                places: group
                    .iter()
                    .map(|&(v, tp, o, _)| self.record(tp, Some(o), v))
                    .collect(),
            });
        }
        ex.into_anomaly(|d| d)
    }

    /// torn-transaction: a read_committed consumer read past a committed write of a
    /// transaction it saw other writes of.
    fn torn(&self) -> Anomaly<Torn> {
        let mut ex = Examples::new(self.max);
        let mut counted: FastSet<(u32, ValueId)> = FastSet::default();
        for g in &self.gaps {
            let l = &self.log[g.tp as usize];
            let from = l.partition_point(|&(o, _)| o <= g.before);
            let to = l.partition_point(|&(o, _)| o < g.after);
            for &(o, v) in &l[from..to] {
                let w = self.writer[v as usize];
                if !self.committed(w) || w == g.reader || !self.seen.contains(&(g.process, w)) {
                    continue;
                }
                if !counted.insert((g.process, v)) {
                    continue;
                }
                ex.add(self.txns[g.reader as usize].at, || {
                    self.torn_example(g, w, o, v)
                });
            }
        }
        ex.into_anomaly(|t| t)
    }

    fn torn_example(&self, g: &Gap, w: TxnId, offset: Offset, value: ValueId) -> Torn {
        let process = self.txns[g.reader as usize].process;
        let mut seen: Vec<Record> = self
            .reads
            .iter()
            .filter(|r| r.committed_only && self.writer[r.value as usize] == w)
            .filter(|r| r.reader != NO_TXN && self.txns[r.reader as usize].process == process)
            .map(|r| self.record(r.tp, Some(r.offset), r.value))
            .collect();
        seen.dedup();
        Torn {
            txn: self.tref(w),
            reader: process,
            seen,
            missing: self.record(g.tp, Some(offset), value),
            before: g.before,
            after: g.after,
            read_by: self.tref(g.reader),
        }
    }

    /// Exactly-once of read-process-write: per consumer group and input partition, every
    /// committed input record below the group's committed offset was consumed (polled,
    /// and the offset committed past it) by exactly one committed transaction.
    fn exactly_once(&self) -> Anomaly<Processing> {
        let mut groups: BTreeMap<&str, u32> = BTreeMap::new();
        let mut names: Vec<&Text> = Vec::new();
        // (group, tp, offset, txn) consumed by committed transactions, and by transactions
        // of unknown outcome (which may have processed a record: never called missing);
        // per (group, tp): the highest commit.
        let mut consumed: Vec<(u32, TpId, Offset, TxnId)> = Vec::new();
        let mut maybe: Vec<(u32, TpId, Offset, TxnId)> = Vec::new();
        let mut high: BTreeMap<(u32, TpId), Offset> = BTreeMap::new();
        for (id, t) in self.txns.iter().enumerate() {
            if t.status == TxnStatus::Aborted {
                continue;
            }
            let sure = t.status == TxnStatus::Committed;
            for op in &t.value.ops {
                let MicroOp::SendOffsets(c) = op else {
                    continue;
                };
                let next = groups.len() as u32;
                let g = *groups.entry(c.group.as_str()).or_insert(next);
                if g == next {
                    names.push(&c.group);
                }
                for co in &c.offsets {
                    let Some(&tp) = self.tp_ids.get(&(co.topic.as_str(), co.partition)) else {
                        continue;
                    };
                    if sure {
                        let h = high.entry((g, tp)).or_insert(co.offset);
                        *h = (*h).max(co.offset);
                    }
                    let to = if sure { &mut consumed } else { &mut maybe };
                    to.extend(
                        self.polled(id as TxnId, tp)
                            .filter(|&o| o < co.offset)
                            .map(|o| (g, tp, o, id as TxnId)),
                    );
                }
            }
        }
        for list in [&mut consumed, &mut maybe] {
            list.sort_unstable();
            list.dedup();
        }
        let mut ex = Examples::new(self.max);
        for (&(g, tp), &committed) in &high {
            let input = Input {
                group: (g, names[g as usize]),
                tp,
                committed,
            };
            self.processing(input, &consumed, &maybe, &mut ex);
        }
        ex.into_anomaly(|p| p)
    }

    /// The offsets of `tp` that transaction `id` polled.
    fn polled(&self, id: TxnId, tp: TpId) -> impl Iterator<Item = Offset> + '_ {
        let (topic, partition) = self.tps[tp as usize];
        self.txns[id as usize].value.ops.iter().flat_map(move |op| {
            let reads = match op {
                MicroOp::Poll(p) => &p.reads[..],
                _ => &[],
            };
            reads
                .iter()
                .filter(move |r| r.partition == partition && r.topic == *topic)
                .flat_map(|r| r.records.iter().map(|(o, _)| *o))
        })
    }

    fn processing(
        &self,
        input: Input<'_>,
        consumed: &[(u32, TpId, Offset, TxnId)],
        maybe: &[(u32, TpId, Offset, TxnId)],
        ex: &mut Examples<Processing>,
    ) {
        let Input {
            group: (g, group),
            tp,
            committed,
        } = input;
        let lo = consumed.partition_point(|c| (c.0, c.1) < (g, tp));
        let hi = consumed.partition_point(|c| (c.0, c.1) <= (g, tp));
        let mine = &consumed[lo..hi];
        let Some(first) = mine.first().map(|c| c.2) else {
            return;
        };
        for &(o, v) in &self.log[tp as usize] {
            if o < first || o >= committed {
                continue;
            }
            let w = self.writer[v as usize];
            if w != NO_TXN && !self.committed(w) {
                continue;
            }
            let a = mine.partition_point(|c| c.2 < o);
            let b = mine.partition_point(|c| c.2 <= o);
            if b - a == 1 {
                continue;
            }
            let perhaps = maybe.partition_point(|c| (c.0, c.1, c.2) < (g, tp, o));
            if b == a
                && maybe
                    .get(perhaps)
                    .is_some_and(|c| (c.0, c.1, c.2) == (g, tp, o))
            {
                continue;
            }
            let by: Vec<TxnId> = mine[a..b].iter().map(|c| c.3).collect();
            let key = by
                .iter()
                .map(|&t| self.txns[t as usize].at)
                .max()
                .unwrap_or(0);
            ex.add(key, || Processing {
                group: group.clone(),
                input: self.record(tp, Some(o), v),
                by: by.iter().map(|&t| self.tref(t)).collect(),
                committed,
            });
        }
    }
}
