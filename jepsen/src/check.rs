//! The checker: one pass over the history indexes every observation per partition (records
//! of every poll, whatever its completion, and acknowledged sends), what each value's sends
//! did, each process's position, its sends and its group commits; a sort-and-scan per
//! partition then finds the offset- and value-level anomalies, the known offsets it collects
//! decide which gaps are skips, and the places it finds for indeterminate sends order them.
//!
//! Work is linear in the history: the per-partition sort is a counting sort by offset (a
//! comparison sort only when offsets are sparse). Hash maps are lookup tables only; nothing
//! iterates them into the report, which is ordered by history index.
//!
//! An `acks=1` (or `0`) acknowledgement is *weak* evidence: the leader appended the record,
//! but may lose it. Anomalies that need a weak acknowledgement no read confirmed are reported
//! as `acks-1-loss` (allowed) instead of under their own name.

use crate::fxhash::FastMap;
use crate::history::{
    AckPromise, CommitValue, Event, EventType, Function, Index, Offset, Partition, PolledRecord,
    Process, Text, Value,
};
use crate::report::{
    Anomaly, AnomalyKind, BadRead, CommitStep, Committed, Duplicate, Empty, Inconsistent, Located,
    Missing, Observed, Place, Report, Seen, Source, Stats, Step, WeakAck,
};
use crate::txn_report::TxnReport;
use std::collections::{BTreeMap, VecDeque};

/// Examples kept per anomaly unless told otherwise.
pub const DEFAULT_MAX_EXAMPLES: usize = 8;
/// Within one example, how many places, values or skipped offsets are listed (all counted).
const MAX_LISTED: usize = 8;

/// How to judge a history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckOptions {
    /// The history ends with reads to the end of every partition, so an acknowledged send
    /// never read (`unseen`) is an anomaly.
    pub final_reads: bool,
    /// Jepsen's policies: a history that proves nothing (`empty-history`) and a read of a
    /// value no send carried (`unsent-read`) are anomalies.
    pub strict: bool,
    /// Examples kept per anomaly (the ones with the lowest history indexes).
    pub max_examples: usize,
}

impl Default for CheckOptions {
    fn default() -> Self {
        Self {
            final_reads: false,
            strict: false,
            max_examples: DEFAULT_MAX_EXAMPLES,
        }
    }
}

impl CheckOptions {
    pub fn final_reads(mut self, on: bool) -> Self {
        self.final_reads = on;
        self
    }

    pub fn strict(mut self, on: bool) -> Self {
        self.strict = on;
        self
    }
}

/// Judges a history (events in real-time order, as read by [`crate::read_history`]).
pub fn check(events: &[Event], options: &CheckOptions) -> Report {
    let mut checker = Checker::new(options);
    // Nearly every value is sent once: size the value table up front.
    let sends = events.iter().filter(|e| e.f == Function::Send).count();
    checker.reserve(sends / 2 + 16);
    for event in events {
        checker.event(event);
    }
    let txn = crate::txn_check::check(events, options.max_examples);
    checker.finish(txn)
}

/// The checker fed one event at a time, as a history is recorded: it keeps what the
/// judgements need (observations, values, positions), not the events, so a long run need
/// not hold its history in memory. [`check`] is this, fed a whole history: both judge
/// plain operations with the same code in the same order, so for a history without `txn`
/// events their reports are identical.
///
/// Transactions are judged at the end from kept events (the transactional checker needs
/// the whole graph): by default the `txn` events and the position resets (crashes,
/// assignments, subscriptions: few, and without them a consumer that transacts across a
/// reassignment, such as a read-process-write pipeline, seems to step over records), so a
/// history that mixes plain operations with transactions gets no writer-less log entries or
/// reads from the plain ones in its transactional verdict.
/// [`StreamChecker::keep_plain_for_txns`] keeps those too, and the verdict is then
/// [`check`]'s, at the cost of memory that grows with the history.
pub struct StreamChecker {
    plain: Checker,
    /// Events the transactional checker will read.
    txn_events: Vec<Event>,
    keep_plain: bool,
}

impl StreamChecker {
    pub fn new(options: &CheckOptions) -> Self {
        Self {
            plain: Checker::new(options),
            txn_events: Vec::new(),
            keep_plain: false,
        }
    }

    /// Also keep, for the transactional verdict, the plain events it reads (see above).
    pub fn keep_plain_for_txns(mut self, on: bool) -> Self {
        self.keep_plain = on;
        self
    }

    /// The next event of the history (in history order).
    pub fn push(&mut self, event: &Event) {
        self.plain.event(event);
        let reset = matches!(
            (event.f, event.kind),
            (Function::Crash, _)
                | (
                    Function::Assign | Function::Subscribe,
                    EventType::Ok | EventType::Info
                )
        );
        if event.f == Function::Txn || reset || (self.keep_plain && crate::txn_check::reads(event))
        {
            self.txn_events.push(event.clone());
        }
    }

    /// Events pushed so far.
    pub fn events(&self) -> u64 {
        self.plain.events
    }

    /// Whether the history ends with reads to the end of every partition (known only at
    /// the end of a run; see [`CheckOptions::final_reads`]).
    pub fn set_final_reads(&mut self, on: bool) {
        self.plain.options.final_reads = on;
    }

    pub fn finish(self) -> Report {
        let max = self.plain.options.max_examples;
        let txn = crate::txn_check::check(&self.txn_events, max);
        self.plain.finish(txn)
    }
}

type TpId = u32;
type ValueId = u32;

/// Position of an event among those the checker noted (`Checker::marks`; examples convert
/// it to the event's index). Ordered as the history is.
type At = u64;
/// No such event.
const NEVER: At = At::MAX;
/// No partition (a crash marker among the sends; an unplaced value).
const NO_TP: TpId = TpId::MAX;

/// One observation of a value at an offset: a read record or an acknowledged send.
#[derive(Clone, Copy)]
struct Obs {
    offset: Offset,
    at: At,
    value: ValueId,
    source: Source,
    /// A send acknowledged with acks=1/0 (or, for a place, a place known only from such).
    weak: bool,
}

struct PartitionState {
    topic: Text,
    partition: Partition,
    obs: Vec<Obs>,
    /// Highest offset read, and the poll that read it.
    highest_read: Option<(Offset, At)>,
}

/// The last thing a process saw of a partition: by a poll (position) or a send.
#[derive(Clone, Copy)]
struct Pos {
    offset: Offset,
    at: At,
    value: ValueId,
}

/// What the history says about one value (workloads send each value once).
#[derive(Clone, Copy)]
struct ValueInfo {
    /// The first `invoke` of a send of it.
    invoked: At,
    /// The first poll completion that returned it.
    first_read: At,
    /// A `fail` completion of a send of it.
    failed: At,
    /// A send of it completed `ok` or `info`: it may be in the log.
    written: bool,
    /// A read at the offset an `ok` send of it was acknowledged at returned it.
    confirmed: bool,
    /// Where the first read (lowest offset of the first partition scanned) placed it.
    placed: (TpId, Offset),
}

impl Default for ValueInfo {
    fn default() -> Self {
        Self {
            invoked: NEVER,
            first_read: NEVER,
            failed: NEVER,
            written: false,
            confirmed: false,
            placed: (NO_TP, 0),
        }
    }
}

impl ValueInfo {
    fn sent(&self) -> bool {
        self.invoked != NEVER || self.written || self.failed != NEVER
    }
}

#[derive(Default)]
struct ProcessState {
    /// Consumer position per partition: the last record read since the last reset.
    reads: FastMap<TpId, Pos>,
    /// During the final walk over sends: the last placed send per partition since the last
    /// crash, and whether its place rests on a weak acknowledgement alone.
    sends: FastMap<TpId, (Pos, bool)>,
    /// The value of this process's last send invocation (its completion names it again).
    last_invoke: Option<ValueId>,
    /// Invocations of commits not completed yet.
    open_commits: VecDeque<At>,
}

/// A send (`ok` or `info`), or a crash (`tp == NO_TP`), in history order.
#[derive(Clone, Copy)]
struct SendRec {
    at: At,
    offset: Offset,
    value: ValueId,
    tp: TpId,
    slot: u32,
    /// `ok` (the offset is its acknowledgement); else `info` (placed by reads, if at all).
    acked: bool,
    weak: bool,
}

/// A gap between two successive reads of a partition by one process; it is a skip if a
/// known offset lies inside it, which is only decidable once the whole history is indexed.
struct Gap {
    internal: bool,
    tp: TpId,
    before: Pos,
    after: Pos,
}

/// Committed offsets of one (group, topic, partition), in completion order.
struct CommitLog {
    group: Text,
    topic: Text,
    partition: Partition,
    done: Vec<CommitMark>,
}

/// After the commit completed at `completed`: the highest offset committed so far (since the
/// last commit outside a generation), and the commit that committed it.
#[derive(Clone, Copy)]
struct CommitMark {
    completed: At,
    max: Offset,
    by: At,
    generation: Option<u32>,
}

#[derive(Clone, Copy)]
struct RawCommit {
    log: usize,
    before: CommitMark,
    after: CommitMark,
}

/// A weak acknowledgement the log did not keep, with the anomaly it would otherwise be.
struct RawWeak {
    excuses: AnomalyKind,
    tp: TpId,
    send: Obs,
    ats: Vec<At>,
}

/// Counts occurrences and keeps the `max` examples with the smallest keys (positions).
pub(crate) struct Examples<T> {
    max: usize,
    count: u64,
    kept: Vec<(At, T)>,
}

impl<T> Examples<T> {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max,
            count: 0,
            kept: Vec::new(),
        }
    }

    /// Counts one occurrence; `make` builds the example only if it is kept.
    pub(crate) fn add(&mut self, key: At, make: impl FnOnce() -> T) {
        self.count += 1;
        if self.max == 0 {
            return;
        }
        if self.kept.len() == self.max {
            match self.kept.last() {
                Some((last, _)) if key < *last => {
                    self.kept.pop();
                }
                _ => return,
            }
        }
        let at = self.kept.partition_point(|(k, _)| *k <= key);
        self.kept.insert(at, (key, make()));
    }

    pub(crate) fn into_anomaly<U>(self, mut convert: impl FnMut(T) -> U) -> Anomaly<U> {
        Anomaly {
            count: self.count,
            examples: self.kept.into_iter().map(|(_, t)| convert(t)).collect(),
        }
    }
}

/// A step anomaly before it becomes a report [`Step`]: who, where, and the two positions.
#[derive(Clone, Copy)]
struct RawStep {
    tp: TpId,
    before: Pos,
    after: Pos,
}

/// One value's observations at one offset: a place of that value.
#[derive(Clone, Copy)]
struct Run {
    /// The earliest observation.
    first: Obs,
    read: bool,
    send: bool,
    /// Read, or acknowledged by a strong (acks=all) send.
    strong: bool,
}

struct Checker {
    /// Events pushed.
    events: u64,
    /// Index and process of each event an observation may point at (sends, polls that
    /// returned records, crashes, commits), in history order; empty polls, the bulk of a
    /// history, are counted and forgotten.
    marks: Vec<(Index, Process)>,
    options: CheckOptions,
    tp_ids: BTreeMap<(Text, Partition), TpId>,
    last_tp: Option<TpId>,
    parts: Vec<PartitionState>,
    value_ids: FastMap<Text, ValueId>,
    values: Vec<Text>,
    info: Vec<ValueInfo>,
    process_slots: FastMap<Process, usize>,
    processes: Vec<ProcessState>,
    gaps: Vec<Gap>,
    sends: Vec<SendRec>,
    /// Positions within one poll that does not move the consumer's (info or fail).
    scratch: Vec<(TpId, Pos)>,
    commit_ids: BTreeMap<(Text, Text, Partition), usize>,
    commit_logs: Vec<CommitLog>,
    stats: Stats,
    nonmonotonic_poll: Examples<RawStep>,
    int_nonmonotonic_poll: Examples<RawStep>,
    commit_regression: Examples<RawCommit>,
}

impl Checker {
    fn new(options: &CheckOptions) -> Self {
        let max = options.max_examples;
        Self {
            events: 0,
            marks: Vec::new(),
            options: options.clone(),
            tp_ids: BTreeMap::new(),
            last_tp: None,
            parts: Vec::new(),
            value_ids: FastMap::default(),
            values: Vec::new(),
            info: Vec::new(),
            process_slots: FastMap::default(),
            processes: Vec::new(),
            gaps: Vec::new(),
            sends: Vec::new(),
            scratch: Vec::new(),
            commit_ids: BTreeMap::new(),
            commit_logs: Vec::new(),
            stats: Stats::default(),
            nonmonotonic_poll: Examples::new(max),
            int_nonmonotonic_poll: Examples::new(max),
            commit_regression: Examples::new(max),
        }
    }

    /// Room for `values` values and as many sends.
    fn reserve(&mut self, values: usize) {
        self.value_ids.reserve(values);
        self.sends.reserve(values);
    }

    fn tp(&mut self, topic: &Text, partition: Partition) -> TpId {
        if let Some(id) = self.last_tp {
            let part = &self.parts[id as usize];
            if part.partition == partition && part.topic == *topic {
                return id;
            }
        }
        let next = self.parts.len() as TpId;
        let id = *self
            .tp_ids
            .entry((topic.clone(), partition))
            .or_insert(next);
        if id == next {
            self.parts.push(PartitionState {
                topic: topic.clone(),
                partition,
                obs: Vec::new(),
                highest_read: None,
            });
        }
        self.last_tp = Some(id);
        id
    }

    fn value(&mut self, value: &Text) -> ValueId {
        if let Some(&id) = self.value_ids.get(value.as_str()) {
            return id;
        }
        let id = self.values.len() as ValueId;
        self.value_ids.insert(value.clone(), id);
        self.values.push(value.clone());
        self.info.push(ValueInfo::default());
        id
    }

    /// The value of a send completion: usually the one its process just invoked.
    fn sent_value(&mut self, slot: usize, value: &Text) -> ValueId {
        if let Some(v) = self.processes[slot].last_invoke {
            if self.values[v as usize] == value {
                return v;
            }
        }
        self.value(value)
    }

    /// The state of `process`, created on first sight.
    fn slot(&mut self, process: Process) -> usize {
        let next = self.processes.len();
        let slot = *self.process_slots.entry(process).or_insert(next);
        if slot == next {
            self.processes.push(ProcessState::default());
        }
        slot
    }

    /// Whether an observation may point at `event`: only those get a mark.
    fn marked(event: &Event) -> bool {
        match event.f {
            Function::Poll => event.records().is_some_and(|r| !r.is_empty()),
            // The transactional checker judges txns from its own copy of the events.
            Function::Assign | Function::Subscribe | Function::Txn => false,
            Function::Send | Function::Crash | Function::Commit => true,
        }
    }

    fn event(&mut self, event: &Event) {
        self.events += 1;
        // Unmarked events never reach an observation: their position is never read.
        let at = self.marks.len() as At;
        if Self::marked(event) {
            self.marks.push((event.index, event.process));
        }
        let slot = self.slot(event.process);
        match (event.f, event.kind) {
            (Function::Send, kind) => self.send(slot, at, event, kind),
            (Function::Poll, kind) => {
                match kind {
                    EventType::Invoke => return,
                    EventType::Ok => self.stats.polls_ok += 1,
                    EventType::Info => self.stats.polls_info += 1,
                    EventType::Fail => self.stats.polls_fail += 1,
                }
                if let Some(records) = event.records() {
                    // Records of a poll that failed or timed out still say what the log
                    // holds, and follow the consumer's position, but do not move it.
                    self.read(slot, at, records, kind == EventType::Ok);
                }
                if kind == EventType::Info {
                    // It may have consumed records it never reported: position unknown.
                    self.processes[slot].reads.clear();
                }
            }
            // Transactions have their own checker (`txn_check`).
            (Function::Txn, _) => {}
            (Function::Assign, EventType::Ok) => self.assigned(slot, event),
            // It may or may not have happened (info), or did (subscribe: the group decides
            // what the consumer reads, from where).
            (Function::Assign | Function::Subscribe, EventType::Info)
            | (Function::Subscribe, EventType::Ok) => self.processes[slot].reads.clear(),
            // Not yet (invoke), or certainly not (fail): the consumer is where it was.
            (Function::Assign | Function::Subscribe, _) => {}
            (Function::Crash, _) => {
                let state = &mut self.processes[slot];
                state.reads.clear();
                state.last_invoke = None;
                state.open_commits.clear();
                self.sends.push(SendRec {
                    at,
                    offset: 0,
                    value: 0,
                    tp: NO_TP,
                    slot: slot as u32,
                    acked: false,
                    weak: false,
                });
            }
            (Function::Commit, EventType::Invoke) => {
                self.processes[slot].open_commits.push_back(at)
            }
            (Function::Commit, kind) => {
                // Which invocation this completes is ambiguous when commits overlap (async
                // commits): take the earliest open one, which can only make it look earlier
                // and so order fewer commits before it.
                let open = &mut self.processes[slot].open_commits;
                let invoked = open.front().copied().unwrap_or(at);
                open.pop_back();
                if kind == EventType::Ok {
                    if let Value::Commit(c) = &event.value {
                        self.commit(at, invoked, c);
                    }
                }
            }
        }
    }

    fn send(&mut self, slot: usize, at: At, event: &Event, kind: EventType) {
        match kind {
            EventType::Info => self.stats.sends_info += 1,
            EventType::Fail => self.stats.sends_fail += 1,
            _ => {}
        }
        let Some(send) = event.send() else { return };
        match kind {
            EventType::Invoke => {
                let value = self.value(&send.value);
                let info = &mut self.info[value as usize];
                info.invoked = info.invoked.min(at);
                self.processes[slot].last_invoke = Some(value);
            }
            EventType::Ok => {
                let Some(offset) = send.offset else { return };
                self.stats.sends_ok += 1;
                let tp = self.tp(&send.topic, send.partition);
                let value = self.sent_value(slot, &send.value);
                self.info[value as usize].written = true;
                let weak = matches!(send.acks, Some(AckPromise::Leader | AckPromise::None));
                self.parts[tp as usize].obs.push(Obs {
                    offset,
                    at,
                    value,
                    source: Source::Send,
                    weak,
                });
                self.sends.push(SendRec {
                    at,
                    offset,
                    value,
                    tp,
                    slot: slot as u32,
                    acked: true,
                    weak,
                });
            }
            EventType::Info => {
                let tp = self.tp(&send.topic, send.partition);
                let value = self.sent_value(slot, &send.value);
                self.info[value as usize].written = true;
                self.sends.push(SendRec {
                    at,
                    offset: 0,
                    value,
                    tp,
                    slot: slot as u32,
                    acked: false,
                    weak: false,
                });
            }
            EventType::Fail => {
                let value = self.sent_value(slot, &send.value);
                let info = &mut self.info[value as usize];
                info.failed = info.failed.min(at);
            }
        }
    }

    /// The records of one poll; `moves`: an `ok` poll, which moves the consumer's position.
    fn read(&mut self, slot: usize, at: At, records: &[PolledRecord], moves: bool) {
        self.stats.records_read += records.len() as u64;
        for record in records {
            let offset = record.offset;
            let tp = self.tp(&record.topic, record.partition);
            let value = self.value(&record.value);
            let info = &mut self.info[value as usize];
            info.first_read = info.first_read.min(at);
            let part = &mut self.parts[tp as usize];
            part.obs.push(Obs {
                offset,
                at,
                value,
                source: Source::Read,
                weak: false,
            });
            if !matches!(part.highest_read, Some((h, _)) if h >= offset) {
                part.highest_read = Some((offset, at));
            }
            let pos = Pos { offset, at, value };
            let before = if moves {
                self.processes[slot].reads.insert(tp, pos)
            } else {
                self.scratch_step(slot, tp, pos)
            };
            let Some(before) = before else {
                continue;
            };
            // A position set by this very poll makes the anomaly an internal one.
            let internal = before.at == at;
            if offset <= before.offset {
                let ex = if internal {
                    &mut self.int_nonmonotonic_poll
                } else {
                    &mut self.nonmonotonic_poll
                };
                ex.add(at, || RawStep {
                    tp,
                    before,
                    after: pos,
                });
            } else if offset > before.offset + 1 {
                self.gaps.push(Gap {
                    internal,
                    tp,
                    before,
                    after: pos,
                });
            }
        }
        self.scratch.clear();
    }

    /// Within a poll that does not move the position: the previous record of `tp` in this
    /// poll, or else the consumer's position; then `pos` becomes the previous record.
    fn scratch_step(&mut self, slot: usize, tp: TpId, pos: Pos) -> Option<Pos> {
        if let Some(e) = self.scratch.iter_mut().find(|e| e.0 == tp) {
            return Some(std::mem::replace(&mut e.1, pos));
        }
        self.scratch.push((tp, pos));
        self.processes[slot].reads.get(&tp).copied()
    }

    /// An `ok` assign: positions in the partitions it says it kept survive, others restart.
    fn assigned(&mut self, slot: usize, event: &Event) {
        let kept: Vec<TpId> = match &event.value {
            Value::Assign(a) => a
                .kept
                .iter()
                .filter_map(|(t, p)| self.tp_ids.get(&(t.clone(), *p)).copied())
                .collect(),
            _ => Vec::new(),
        };
        let reads = &mut self.processes[slot].reads;
        if kept.is_empty() {
            reads.clear();
        } else {
            reads.retain(|tp, _| kept.contains(tp));
        }
    }

    /// An `ok` commit completed at `at`, invoked at `invoked`.
    fn commit(&mut self, at: At, invoked: At, c: &CommitValue) {
        self.stats.commits_ok += 1;
        for o in &c.offsets {
            let key = (c.group.clone(), o.topic.clone(), o.partition);
            let next = self.commit_logs.len();
            let id = *self.commit_ids.entry(key).or_insert(next);
            if id == next {
                self.commit_logs.push(CommitLog {
                    group: c.group.clone(),
                    topic: o.topic.clone(),
                    partition: o.partition,
                    done: Vec::new(),
                });
            }
            let log = &mut self.commit_logs[id];
            let mark = CommitMark {
                completed: at,
                max: o.offset,
                by: at,
                generation: c.generation,
            };
            if c.generation.is_none() {
                // Outside a generation (an operator's reset, a manually assigned consumer):
                // not judged, and later member commits go on from it.
                log.done.push(mark);
                continue;
            }
            let i = log.done.partition_point(|m| m.completed < invoked);
            if let Some(&before) = i.checked_sub(1).map(|i| &log.done[i]) {
                if o.offset < before.max {
                    self.commit_regression.add(at, || RawCommit {
                        log: id,
                        before,
                        after: mark,
                    });
                }
            }
            let top = match log.done.last() {
                Some(t) if t.max > o.offset => CommitMark {
                    completed: at,
                    ..*t
                },
                _ => mark,
            };
            log.done.push(top);
        }
    }

    /// The report; `txn`: the transactional checker's verdict, if the history had any.
    fn finish(mut self, txn: Option<TxnReport>) -> Report {
        let mut found = Found::new(self.options.max_examples);
        let (known, dup_places) = self.judge_partitions(&mut found);
        found.judge_duplicates(dup_places);
        found.judge_gaps(&self.gaps, &known);
        self.judge_sends(&mut found);
        self.report(found, txn)
    }

    /// Walks every partition's observations offset by offset: lost, unseen and badly read
    /// values, offsets holding several values. Returns the offsets known to hold records
    /// per partition (sorted: the reference for skips) and every place of each value seen
    /// in several places.
    fn judge_partitions(&mut self, found: &mut Found) -> (Vec<Vec<Offset>>, DupPlaces) {
        let final_reads = self.options.final_reads;
        let mut places = Places {
            first: vec![None; self.values.len()],
            dup: BTreeMap::new(),
        };
        let mut judged = vec![false; self.values.len()];
        let mut known: Vec<Vec<Offset>> = Vec::with_capacity(self.parts.len());
        let mut runs: Vec<Run> = Vec::new();
        for (tp, part) in self.parts.iter_mut().enumerate() {
            let tp = tp as TpId;
            let obs = sort_observations(std::mem::take(&mut part.obs));
            let mut offsets = Vec::new();
            let mut start = 0;
            while start < obs.len() {
                let offset = obs[start].offset;
                let end = start + obs[start..].partition_point(|o| o.offset == offset);
                runs.clear();
                for o in &obs[start..end] {
                    if !matches!(runs.last(), Some(r) if r.first.value == o.value) {
                        runs.push(Run {
                            first: *o,
                            read: false,
                            send: false,
                            strong: false,
                        });
                    }
                    let run = runs.last_mut().expect("just pushed");
                    let info = &mut self.info[o.value as usize];
                    match o.source {
                        Source::Read => {
                            found.observe_read((tp, o), run, info, &mut judged[o.value as usize]);
                        }
                        Source::Send => {
                            let highest = part.highest_read;
                            found.observe_send((tp, o), run, info, highest, final_reads);
                        }
                    }
                }
                if found.judge_offset((tp, offset), &runs, &mut self.info, &mut places) {
                    offsets.push(offset);
                }
                start = end;
            }
            known.push(offsets);
        }
        (known, places.dup)
    }

    /// Each process's sends to a partition, in order, at the offsets they were
    /// acknowledged at or (indeterminate ones) read at, must increase.
    fn judge_sends(&mut self, found: &mut Found) {
        let (weak, nonmonotonic_send) = (&mut found.weak, &mut found.nonmonotonic_send);
        for s in &self.sends {
            let state = &mut self.processes[s.slot as usize];
            if s.tp == NO_TP {
                state.sends.clear();
                continue;
            }
            let info = &self.info[s.value as usize];
            let offset = if s.acked {
                s.offset
            } else {
                match info.placed {
                    (tp, offset) if tp == s.tp => offset,
                    _ => continue, // never read: no place to judge
                }
            };
            let uncertain = s.weak && !info.confirmed;
            let pos = Pos {
                offset,
                at: s.at,
                value: s.value,
            };
            let Some((before, before_uncertain)) = state.sends.insert(s.tp, (pos, uncertain))
            else {
                continue;
            };
            if offset > before.offset {
                continue;
            }
            if uncertain || before_uncertain {
                let send = if uncertain { pos } else { before };
                weak.add(s.at, || RawWeak {
                    excuses: AnomalyKind::NonmonotonicSend,
                    tp: s.tp,
                    send: Obs {
                        offset: send.offset,
                        at: send.at,
                        value: send.value,
                        source: Source::Send,
                        weak: true,
                    },
                    ats: vec![before.at, s.at],
                });
            } else {
                nonmonotonic_send.add(s.at, || RawStep {
                    tp: s.tp,
                    before,
                    after: pos,
                });
            }
        }
    }

    /// The report: the anomalies found, as the history names them.
    fn report(self, found: Found, txn: Option<TxnReport>) -> Report {
        let Found {
            lost,
            unseen,
            inconsistent,
            weak,
            aborted,
            future,
            unsent,
            duplicate,
            poll_skip,
            int_poll_skip,
            nonmonotonic_send,
        } = found;
        let max = self.options.max_examples;
        let final_reads = self.options.final_reads;
        let mut empty: Examples<Empty> = Examples::new(max);
        let reason = if self.events == 0 {
            Some("the history has no events")
        } else if self.stats.sends_ok == 0 {
            Some("no send was acknowledged")
        } else if self.stats.records_read == 0 {
            Some("no poll returned a record")
        } else {
            None
        };
        if let Some(reason) = reason {
            empty.add(0, || Empty {
                reason: reason.to_string(),
            });
        }

        let view = View {
            marks: &self.marks,
            parts: &self.parts,
            values: &self.values,
            commits: &self.commit_logs,
        };
        let skips = |(raw, skipped, count): (RawStep, Vec<Offset>, u64)| {
            let mut step = view.step(raw);
            step.skipped = skipped;
            step.skipped_count = count;
            step
        };
        let stats = Stats {
            events: self.events,
            processes: self.processes.len() as u64,
            partitions: self.parts.len() as u64,
            values: self.values.len() as u64,
            ..self.stats
        };
        let mut report = Report {
            valid: false,
            final_reads,
            strict: self.options.strict,
            stats,
            lost_write: lost.into_anomaly(|m| view.missing(m)),
            duplicate: duplicate.into_anomaly(|d| view.duplicate(d)),
            inconsistent_offsets: inconsistent.into_anomaly(|i| view.inconsistent(i)),
            nonmonotonic_poll: self.nonmonotonic_poll.into_anomaly(|s| view.step(s)),
            poll_skip: poll_skip.into_anomaly(skips),
            int_nonmonotonic_poll: self.int_nonmonotonic_poll.into_anomaly(|s| view.step(s)),
            int_poll_skip: int_poll_skip.into_anomaly(skips),
            nonmonotonic_send: nonmonotonic_send.into_anomaly(|s| view.step(s)),
            aborted_read: aborted.into_anomaly(|r| view.bad_read(r)),
            future_read: future.into_anomaly(|r| view.bad_read(r)),
            commit_regression: self.commit_regression.into_anomaly(|c| view.commit(c)),
            unseen: unseen.into_anomaly(|m| view.missing(m)),
            unsent_read: unsent.into_anomaly(|r| view.bad_read(r)),
            empty_history: empty.into_anomaly(|e| e),
            acks_1_loss: weak.into_anomaly(|w| view.weak(w)),
            txn,
        };
        report.valid = report.found().is_empty() && report.txn.as_ref().is_none_or(|t| t.valid);
        report
    }
}

/// Every place of each value seen in more than one place.
type DupPlaces = BTreeMap<ValueId, Vec<(TpId, Obs)>>;

/// Where each value was first seen, and every place of values seen in several places (a
/// place's `weak`: known only from a weak acknowledgement).
struct Places {
    first: Vec<Option<(TpId, Obs)>>,
    dup: DupPlaces,
}

/// The anomalies the final judgements collect, in the order they find them.
struct Found {
    lost: Examples<(TpId, Obs)>,
    unseen: Examples<(TpId, Obs)>,
    inconsistent: Examples<(TpId, Offset, Vec<Obs>, u64)>,
    weak: Examples<RawWeak>,
    aborted: Examples<(TpId, Obs, Option<At>)>,
    future: Examples<(TpId, Obs, Option<At>)>,
    unsent: Examples<(TpId, Obs, Option<At>)>,
    duplicate: Examples<Vec<(TpId, Obs)>>,
    poll_skip: Examples<(RawStep, Vec<Offset>, u64)>,
    int_poll_skip: Examples<(RawStep, Vec<Offset>, u64)>,
    nonmonotonic_send: Examples<RawStep>,
}

impl Found {
    fn new(max: usize) -> Self {
        Self {
            lost: Examples::new(max),
            unseen: Examples::new(max),
            inconsistent: Examples::new(max),
            weak: Examples::new(max),
            aborted: Examples::new(max),
            future: Examples::new(max),
            unsent: Examples::new(max),
            duplicate: Examples::new(max),
            poll_skip: Examples::new(max),
            int_poll_skip: Examples::new(max),
            nonmonotonic_send: Examples::new(max),
        }
    }

    /// A read of a value at `o`'s offset; its first read is judged against its sends.
    fn observe_read(
        &mut self,
        (tp, o): (TpId, &Obs),
        run: &mut Run,
        info: &mut ValueInfo,
        judged: &mut bool,
    ) {
        run.read = true;
        run.strong = true;
        if info.placed.0 == NO_TP {
            info.placed = (tp, o.offset);
        }
        if !*judged && o.at == info.first_read {
            *judged = true;
            let info = *info;
            judge_read(
                (tp, *o),
                &info,
                &mut self.aborted,
                &mut self.future,
                &mut self.unsent,
            );
        }
    }

    /// An acknowledged send of a value at `o`'s offset: lost if never read though the
    /// partition was read past it, else unseen (weakly acknowledged ones are excused).
    fn observe_send(
        &mut self,
        (tp, o): (TpId, &Obs),
        run: &mut Run,
        info: &ValueInfo,
        highest_read: Option<(Offset, At)>,
        final_reads: bool,
    ) {
        run.send = true;
        run.strong |= !o.weak;
        if info.first_read != NEVER {
            return;
        }
        let is_lost = matches!(highest_read, Some((h, _)) if h > o.offset);
        if !o.weak {
            let missing = if is_lost {
                &mut self.lost
            } else {
                &mut self.unseen
            };
            missing.add(o.at, || (tp, *o));
        } else if is_lost || final_reads {
            let (excuses, ats) = if is_lost {
                let high = highest_read.map_or(o.at, |(_, a)| a);
                (AnomalyKind::LostWrite, vec![o.at, high])
            } else {
                (AnomalyKind::Unseen, vec![o.at])
            };
            self.weak.add(o.at, || RawWeak {
                excuses,
                tp,
                send: *o,
                ats,
            });
        } else {
            self.unseen.add(o.at, || (tp, *o));
        }
    }

    /// The values (`runs`) at one offset: confirmed sends, inconsistent offsets, and
    /// each value's places. True if a read or strong send holds the offset.
    fn judge_offset(
        &mut self,
        (tp, offset): (TpId, Offset),
        runs: &[Run],
        info: &mut [ValueInfo],
        places: &mut Places,
    ) -> bool {
        let mut strong = 0;
        for r in runs {
            if r.read && r.send {
                info[r.first.value as usize].confirmed = true;
            }
            strong += usize::from(r.strong);
        }
        if runs.len() > 1 {
            let mut distinct: Vec<Obs> = runs.iter().map(|r| r.first).collect();
            distinct.sort_by_key(|d| d.at);
            let count = distinct.len() as u64;
            if strong > 1 {
                self.inconsistent.add(distinct[0].at, || {
                    distinct.truncate(MAX_LISTED);
                    (tp, offset, distinct, count)
                });
            } else {
                // All but at most one value come from weak acknowledgements alone.
                let send = runs
                    .iter()
                    .find(|r| !r.strong)
                    .expect("runs > strong")
                    .first;
                self.weak.add(distinct[0].at, || RawWeak {
                    excuses: AnomalyKind::InconsistentOffsets,
                    tp,
                    send,
                    ats: distinct.iter().take(MAX_LISTED).map(|d| d.at).collect(),
                });
            }
        }
        for r in runs {
            let place = Obs {
                weak: !r.strong,
                ..r.first
            };
            match places.first[place.value as usize] {
                None => places.first[place.value as usize] = Some((tp, place)),
                Some(first) => places
                    .dup
                    .entry(place.value)
                    .or_insert_with(|| vec![first])
                    .push((tp, place)),
            }
        }
        strong > 0
    }

    /// Values seen in several places: duplicates, unless all but one place rest on weak
    /// acknowledgements alone.
    fn judge_duplicates(&mut self, dup_places: DupPlaces) {
        for mut places in dup_places.into_values() {
            places.sort_by_key(|p| p.1.at);
            let key = places[0].1.at;
            if places.iter().filter(|p| !p.1.weak).count() > 1 {
                self.duplicate.add(key, || places);
            } else {
                let (tp, send) = *places.iter().find(|p| p.1.weak).expect("a weak place");
                self.weak.add(key, || RawWeak {
                    excuses: AnomalyKind::Duplicate,
                    tp,
                    send,
                    ats: places.iter().take(MAX_LISTED).map(|p| p.1.at).collect(),
                });
            }
        }
    }

    /// A gap between two successive reads is a skip if an offset known to hold a record
    /// lies inside it.
    fn judge_gaps(&mut self, gaps: &[Gap], known: &[Vec<Offset>]) {
        for gap in gaps {
            let offsets = &known[gap.tp as usize];
            let lo = offsets.partition_point(|&o| o <= gap.before.offset);
            let hi = offsets.partition_point(|&o| o < gap.after.offset);
            if hi > lo {
                let ex = if gap.internal {
                    &mut self.int_poll_skip
                } else {
                    &mut self.poll_skip
                };
                ex.add(gap.after.at, || {
                    let raw = RawStep {
                        tp: gap.tp,
                        before: gap.before,
                        after: gap.after,
                    };
                    let shown = offsets[lo..hi.min(lo + MAX_LISTED)].to_vec();
                    (raw, shown, (hi - lo) as u64)
                });
            }
        }
    }
}

/// The first read of a value, against what its sends did: it was never sent, or its only
/// sends failed (aborted read), or it was read before any send of it was invoked.
fn judge_read(
    (tp, o): (TpId, Obs),
    info: &ValueInfo,
    aborted: &mut Examples<(TpId, Obs, Option<At>)>,
    future: &mut Examples<(TpId, Obs, Option<At>)>,
    unsent: &mut Examples<(TpId, Obs, Option<At>)>,
) {
    if !info.sent() {
        unsent.add(o.at, || (tp, o, None));
        return;
    }
    if !info.written && info.failed != NEVER {
        aborted.add(o.at, || (tp, o, Some(info.failed)));
    }
    if info.invoked != NEVER && info.invoked > o.at {
        future.add(o.at, || (tp, o, Some(info.invoked)));
    }
}

/// Sorts observations by (offset, value, position). Offsets of a partition are dense in
/// practice, so a counting sort by offset does it in linear time, leaving only the few
/// observations of each offset to order; sparse offsets fall back to a comparison sort.
fn sort_observations(mut obs: Vec<Obs>) -> Vec<Obs> {
    let key = |o: &Obs| (o.offset, o.value, o.at);
    let (Some(min), Some(max)) = (
        obs.iter().map(|o| o.offset).min(),
        obs.iter().map(|o| o.offset).max(),
    ) else {
        return obs;
    };
    let range = max - min;
    if range > 2 * obs.len() as u64 + 1024 {
        obs.sort_unstable_by_key(key);
        return obs;
    }
    // starts[k] = where the observations of offset min + k begin in the output.
    let mut starts = vec![0usize; range as usize + 2];
    for o in &obs {
        starts[(o.offset - min) as usize + 1] += 1;
    }
    for k in 1..starts.len() {
        starts[k] += starts[k - 1];
    }
    let mut sorted = vec![obs[0]; obs.len()];
    let mut fill = starts.clone();
    for o in &obs {
        let k = (o.offset - min) as usize;
        sorted[fill[k]] = *o;
        fill[k] += 1;
    }
    for k in 0..=range as usize {
        let group = &mut sorted[starts[k]..starts[k + 1]];
        if group.len() > 1 {
            group.sort_unstable_by_key(key);
        }
    }
    debug_assert!(sorted.windows(2).all(|w| key(&w[0]) <= key(&w[1])));
    sorted
}

/// Turns the checker's positions and ids back into names, values and history indexes.
struct View<'c> {
    marks: &'c [(Index, Process)],
    parts: &'c [PartitionState],
    values: &'c [Text],
    commits: &'c [CommitLog],
}

impl View<'_> {
    fn index(&self, at: At) -> Index {
        self.marks[at as usize].0
    }

    fn process(&self, at: At) -> Process {
        self.marks[at as usize].1
    }

    fn value(&self, id: ValueId) -> Text {
        self.values[id as usize].clone()
    }

    fn seen(&self, pos: Pos) -> Seen {
        Seen {
            index: self.index(pos.at),
            offset: pos.offset,
            value: self.value(pos.value),
        }
    }

    fn step(&self, raw: RawStep) -> Step {
        let part = &self.parts[raw.tp as usize];
        Step {
            process: self.process(raw.after.at),
            topic: part.topic.clone(),
            partition: part.partition,
            before: self.seen(raw.before),
            after: self.seen(raw.after),
            skipped_count: 0,
            skipped: Vec::new(),
        }
    }

    fn bad_read(&self, (tp, o, send): (TpId, Obs, Option<At>)) -> BadRead {
        let part = &self.parts[tp as usize];
        BadRead {
            topic: part.topic.clone(),
            partition: part.partition,
            offset: o.offset,
            value: self.value(o.value),
            process: self.process(o.at),
            read_index: self.index(o.at),
            send_index: send.map(|at| self.index(at)),
        }
    }

    fn commit(&self, raw: RawCommit) -> CommitStep {
        let log = &self.commits[raw.log];
        let committed = |m: CommitMark| Committed {
            index: self.index(m.by),
            process: self.process(m.by),
            offset: m.max,
            generation: m.generation,
        };
        CommitStep {
            group: log.group.clone(),
            topic: log.topic.clone(),
            partition: log.partition,
            before: committed(raw.before),
            after: committed(raw.after),
        }
    }

    fn weak(&self, w: RawWeak) -> WeakAck {
        let part = &self.parts[w.tp as usize];
        WeakAck {
            excuses: w.excuses,
            topic: part.topic.clone(),
            partition: part.partition,
            offset: w.send.offset,
            value: self.value(w.send.value),
            send_index: self.index(w.send.at),
            indexes: w.ats.into_iter().map(|at| self.index(at)).collect(),
        }
    }

    fn place(&self, tp: TpId, o: Obs) -> Place {
        let part = &self.parts[tp as usize];
        Place {
            topic: part.topic.clone(),
            partition: part.partition,
            offset: o.offset,
            index: self.index(o.at),
            source: o.source,
        }
    }

    fn missing(&self, (tp, o): (TpId, Obs)) -> Missing {
        let part = &self.parts[tp as usize];
        Missing {
            topic: part.topic.clone(),
            partition: part.partition,
            offset: o.offset,
            value: self.value(o.value),
            send_index: self.index(o.at),
            process: self.process(o.at),
            highest_read: part.highest_read.map(|(offset, at)| Located {
                index: self.index(at),
                offset,
            }),
        }
    }

    fn duplicate(&self, mut places: Vec<(TpId, Obs)>) -> Duplicate {
        places.sort_by_key(|p| p.1.at);
        Duplicate {
            value: self.value(places[0].1.value),
            place_count: places.len() as u64,
            places: places
                .into_iter()
                .take(MAX_LISTED)
                .map(|(tp, o)| self.place(tp, o))
                .collect(),
        }
    }

    fn inconsistent(
        &self,
        (tp, offset, distinct, count): (TpId, Offset, Vec<Obs>, u64),
    ) -> Inconsistent {
        let part = &self.parts[tp as usize];
        Inconsistent {
            topic: part.topic.clone(),
            partition: part.partition,
            offset,
            value_count: count,
            values: distinct
                .into_iter()
                .map(|o| Observed {
                    value: self.value(o.value),
                    index: self.index(o.at),
                    source: o.source,
                })
                .collect(),
        }
    }
}
