//! The checker: one pass over the history indexes every observation per partition and tracks
//! each process's position; a sort-and-scan per partition then finds the offset- and
//! value-level anomalies, and the known offsets it collects decide which gaps are skips.
//!
//! Work is linear in the history: the per-partition sort is a counting sort by offset (a
//! comparison sort only when offsets are sparse). Hash maps are lookup tables only; nothing
//! iterates them into the report, which is ordered by history index.

use crate::fxhash::FastMap;
use crate::history::{Event, EventType, Function, Index, Offset, Partition, Process, Text};
use crate::report::{
    Anomaly, Duplicate, Inconsistent, Located, Missing, Observed, Place, Report, Seen, Source,
    Stats, Step,
};
use std::collections::BTreeMap;

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
    /// Examples kept per anomaly (the ones with the lowest history indexes).
    pub max_examples: usize,
}

impl Default for CheckOptions {
    fn default() -> Self {
        Self {
            final_reads: false,
            max_examples: DEFAULT_MAX_EXAMPLES,
        }
    }
}

impl CheckOptions {
    pub fn final_reads(mut self, on: bool) -> Self {
        self.final_reads = on;
        self
    }
}

/// Judges a history (events in real-time order, as read by [`crate::read_history`]).
pub fn check(events: &[Event], options: &CheckOptions) -> Report {
    Checker::new(events, options).run()
}

type TpId = u32;
type ValueId = u32;

/// Position of an event in the checked slice (examples convert it to the event's index).
type At = u64;

/// One observation of a value at an offset: a read record or an acknowledged send.
#[derive(Clone, Copy)]
struct Obs {
    offset: Offset,
    at: At,
    value: ValueId,
    source: Source,
}

struct PartitionState<'a> {
    topic: &'a Text,
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

#[derive(Default)]
struct ProcessState {
    /// Consumer position per partition: the last record read since the last reset.
    reads: FastMap<TpId, Pos>,
    /// Last acknowledged send per partition since the last crash.
    sends: FastMap<TpId, Pos>,
}

/// A gap between two successive reads of a partition by one process; it is a skip if a
/// known offset lies inside it, which is only decidable once the whole history is indexed.
struct Gap {
    internal: bool,
    tp: TpId,
    before: Pos,
    after: Pos,
}

/// Counts occurrences and keeps the `max` examples with the smallest keys (positions).
struct Examples<T> {
    max: usize,
    count: u64,
    kept: Vec<(At, T)>,
}

impl<T> Examples<T> {
    fn new(max: usize) -> Self {
        Self {
            max,
            count: 0,
            kept: Vec::new(),
        }
    }

    /// Counts one occurrence; `make` builds the example only if it is kept.
    fn add(&mut self, key: At, make: impl FnOnce() -> T) {
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

    fn into_anomaly<U>(self, mut convert: impl FnMut(T) -> U) -> Anomaly<U> {
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

struct Checker<'a> {
    events: &'a [Event],
    options: CheckOptions,
    tp_ids: BTreeMap<(&'a str, Partition), TpId>,
    last_tp: Option<(&'a str, Partition, TpId)>,
    parts: Vec<PartitionState<'a>>,
    value_ids: FastMap<&'a str, ValueId>,
    values: Vec<&'a Text>,
    value_read: Vec<bool>,
    process_slots: FastMap<Process, usize>,
    processes: Vec<ProcessState>,
    gaps: Vec<Gap>,
    stats: Stats,
    nonmonotonic_poll: Examples<RawStep>,
    int_nonmonotonic_poll: Examples<RawStep>,
    nonmonotonic_send: Examples<RawStep>,
}

impl<'a> Checker<'a> {
    fn new(events: &'a [Event], options: &CheckOptions) -> Self {
        let max = options.max_examples;
        Self {
            events,
            options: options.clone(),
            tp_ids: BTreeMap::new(),
            last_tp: None,
            parts: Vec::new(),
            value_ids: FastMap::default(),
            values: Vec::new(),
            value_read: Vec::new(),
            process_slots: FastMap::default(),
            processes: Vec::new(),
            gaps: Vec::new(),
            stats: Stats::default(),
            nonmonotonic_poll: Examples::new(max),
            int_nonmonotonic_poll: Examples::new(max),
            nonmonotonic_send: Examples::new(max),
        }
    }

    fn run(mut self) -> Report {
        let events = self.events;
        // Nearly every value is sent once: size the value table up front.
        let sends = events.iter().filter(|e| e.f == Function::Send).count();
        self.value_ids.reserve(sends / 2 + 16);
        for (at, event) in events.iter().enumerate() {
            self.event(at as At, event);
        }
        self.finish()
    }

    fn tp(&mut self, topic: &'a Text, partition: Partition) -> TpId {
        if let Some((t, p, id)) = self.last_tp {
            if p == partition && t == topic.as_str() {
                return id;
            }
        }
        let next = self.parts.len() as TpId;
        let id = *self
            .tp_ids
            .entry((topic.as_str(), partition))
            .or_insert(next);
        if id == next {
            self.parts.push(PartitionState {
                topic,
                partition,
                obs: Vec::new(),
                highest_read: None,
            });
        }
        self.last_tp = Some((topic.as_str(), partition, id));
        id
    }

    fn value(&mut self, value: &'a Text) -> ValueId {
        let next = self.values.len() as ValueId;
        let id = *self.value_ids.entry(value.as_str()).or_insert(next);
        if id == next {
            self.values.push(value);
            self.value_read.push(false);
        }
        id
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

    fn event(&mut self, at: At, event: &'a Event) {
        let slot = self.slot(event.process);
        match (event.f, event.kind) {
            (Function::Send, EventType::Ok) => {
                let Some(send) = event.send() else { return };
                let Some(offset) = send.offset else { return };
                self.stats.sends_ok += 1;
                let tp = self.tp(&send.topic, send.partition);
                let value = self.value(&send.value);
                self.parts[tp as usize].obs.push(Obs {
                    offset,
                    at,
                    value,
                    source: Source::Send,
                });
                let pos = Pos { offset, at, value };
                if let Some(before) = self.processes[slot].sends.insert(tp, pos) {
                    if offset <= before.offset {
                        self.nonmonotonic_send.add(at, || RawStep {
                            tp,
                            before,
                            after: pos,
                        });
                    }
                }
            }
            (Function::Send, EventType::Info) => self.stats.sends_info += 1,
            (Function::Send, EventType::Fail) => self.stats.sends_fail += 1,
            (Function::Poll, EventType::Ok) => {
                let Some(records) = event.records() else {
                    return;
                };
                self.stats.polls_ok += 1;
                self.stats.records_read += records.len() as u64;
                for record in records {
                    let offset = record.offset;
                    let tp = self.tp(&record.topic, record.partition);
                    let value = self.value(&record.value);
                    self.value_read[value as usize] = true;
                    let part = &mut self.parts[tp as usize];
                    part.obs.push(Obs {
                        offset,
                        at,
                        value,
                        source: Source::Read,
                    });
                    if !matches!(part.highest_read, Some((h, _)) if h >= offset) {
                        part.highest_read = Some((offset, at));
                    }
                    let pos = Pos { offset, at, value };
                    let Some(before) = self.processes[slot].reads.insert(tp, pos) else {
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
            }
            // A poll that timed out may have moved the consumer: its position is unknown. An
            // assign or subscribe (whatever its outcome) may restart it anywhere.
            (Function::Poll, EventType::Info) | (Function::Assign | Function::Subscribe, _) => {
                self.processes[slot].reads.clear();
            }
            (Function::Crash, _) => {
                let state = &mut self.processes[slot];
                state.reads.clear();
                state.sends.clear();
            }
            _ => {}
        }
    }

    fn finish(mut self) -> Report {
        let max = self.options.max_examples;
        let mut lost: Examples<(TpId, Obs)> = Examples::new(max);
        let mut unseen: Examples<(TpId, Obs)> = Examples::new(max);
        let mut inconsistent: Examples<(TpId, Offset, Vec<Obs>, u64)> = Examples::new(max);
        // Where each value was first seen, and every place of values seen in several places.
        let mut first_place: Vec<Option<(TpId, Obs)>> = vec![None; self.values.len()];
        let mut dup_places: BTreeMap<ValueId, Vec<(TpId, Obs)>> = BTreeMap::new();
        // Offsets known to hold records, per partition, sorted: the reference for skips.
        let mut known: Vec<Vec<Offset>> = Vec::with_capacity(self.parts.len());

        for (tp, part) in self.parts.iter_mut().enumerate() {
            let tp = tp as TpId;
            let obs = sort_observations(std::mem::take(&mut part.obs));
            let mut offsets = Vec::new();
            let mut start = 0;
            while start < obs.len() {
                let offset = obs[start].offset;
                let end = start + obs[start..].partition_point(|o| o.offset == offset);
                offsets.push(offset);
                // Distinct values at this offset, each with its first observation.
                let mut distinct: Vec<Obs> = Vec::new();
                let mut any_read = false;
                for o in &obs[start..end] {
                    any_read |= o.source == Source::Read;
                    if !matches!(distinct.last(), Some(d) if d.value == o.value) {
                        distinct.push(*o);
                    }
                    if o.source == Source::Send && !self.value_read[o.value as usize] {
                        let missing = match part.highest_read {
                            Some((h, _)) if h > offset => &mut lost,
                            _ => &mut unseen,
                        };
                        missing.add(o.at, || (tp, *o));
                    }
                }
                if any_read && distinct.len() > 1 {
                    distinct.sort_by_key(|d| d.at);
                    inconsistent.add(distinct[0].at, || {
                        let listed = distinct[..distinct.len().min(MAX_LISTED)].to_vec();
                        (tp, offset, listed, distinct.len() as u64)
                    });
                }
                for o in &distinct {
                    match first_place[o.value as usize] {
                        None => first_place[o.value as usize] = Some((tp, *o)),
                        Some(first) => dup_places
                            .entry(o.value)
                            .or_insert_with(|| vec![first])
                            .push((tp, *o)),
                    }
                }
                start = end;
            }
            known.push(offsets);
        }

        let mut duplicate: Examples<Vec<(TpId, Obs)>> = Examples::new(max);
        for places in dup_places.into_values() {
            let key = places.iter().map(|p| p.1.at).min().unwrap_or(0);
            duplicate.add(key, || places);
        }

        let mut poll_skip: Examples<(RawStep, Vec<Offset>, u64)> = Examples::new(max);
        let mut int_poll_skip: Examples<(RawStep, Vec<Offset>, u64)> = Examples::new(max);
        for gap in &self.gaps {
            let offsets = &known[gap.tp as usize];
            let lo = offsets.partition_point(|&o| o <= gap.before.offset);
            let hi = offsets.partition_point(|&o| o < gap.after.offset);
            if hi > lo {
                let ex = if gap.internal {
                    &mut int_poll_skip
                } else {
                    &mut poll_skip
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

        let view = View {
            events: self.events,
            parts: &self.parts,
            values: &self.values,
        };
        let skips = |(raw, skipped, count): (RawStep, Vec<Offset>, u64)| {
            let mut step = view.step(raw);
            step.skipped = skipped;
            step.skipped_count = count;
            step
        };
        let stats = Stats {
            events: self.events.len() as u64,
            processes: self.processes.len() as u64,
            partitions: self.parts.len() as u64,
            values: self.values.len() as u64,
            ..self.stats
        };
        let mut report = Report {
            valid: false,
            final_reads: self.options.final_reads,
            stats,
            lost_write: lost.into_anomaly(|m| view.missing(m)),
            duplicate: duplicate.into_anomaly(|d| view.duplicate(d)),
            inconsistent_offsets: inconsistent.into_anomaly(|i| view.inconsistent(i)),
            nonmonotonic_poll: self.nonmonotonic_poll.into_anomaly(|s| view.step(s)),
            poll_skip: poll_skip.into_anomaly(skips),
            int_nonmonotonic_poll: self.int_nonmonotonic_poll.into_anomaly(|s| view.step(s)),
            int_poll_skip: int_poll_skip.into_anomaly(skips),
            nonmonotonic_send: self.nonmonotonic_send.into_anomaly(|s| view.step(s)),
            unseen: unseen.into_anomaly(|m| view.missing(m)),
        };
        report.valid = report.found().is_empty();
        report
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
struct View<'c, 'a> {
    events: &'a [Event],
    parts: &'c [PartitionState<'a>],
    values: &'c [&'a Text],
}

impl View<'_, '_> {
    fn index(&self, at: At) -> Index {
        self.events[at as usize].index
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
            process: self.events[raw.after.at as usize].process,
            topic: part.topic.clone(),
            partition: part.partition,
            before: self.seen(raw.before),
            after: self.seen(raw.after),
            skipped_count: 0,
            skipped: Vec::new(),
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
            process: self.events[o.at as usize].process,
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
