//! Property tests against a correct in-memory log: histories it produces are always valid,
//! and injecting one anomaly into them is always reported under that anomaly's name.

mod common;

use common::H;
use proptest::prelude::*;
use skein_jepsen::{
    check, read_history, AckPromise, AnomalyKind, CheckOptions, CommitOffset, CommitValue,
    EventType, Function, HistoryWriter, Policy, PolledRecord, Value,
};
use std::collections::BTreeMap;

const PARTITIONS: u32 = 3;
const FINAL_READER: u64 = 100;

#[derive(Clone, Debug)]
enum Op {
    /// outcome: 0 ok, 1 info but appended, 2 info and not appended, 3 fail.
    Send {
        process: u64,
        partition: u32,
        outcome: u8,
    },
    Poll {
        process: u64,
        max: usize,
        start: u64,
    },
    /// A poll that timed out after consuming `advance` records per partition, reporting
    /// them if `report`.
    PollInfo {
        process: u64,
        advance: u64,
        report: bool,
    },
    /// `keep`: positions of partitions that stay assigned are kept (and recorded as kept).
    Assign {
        process: u64,
        mask: u8,
        keep: bool,
    },
    Subscribe {
        process: u64,
    },
    Crash {
        process: u64,
    },
    Commit {
        process: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let p = 0..5u64;
    prop_oneof![
        6 => (p.clone(), 0..PARTITIONS, 0..4u8).prop_map(|(process, partition, outcome)| Op::Send { process, partition, outcome }),
        5 => (p.clone(), 0..6usize, any::<u64>()).prop_map(|(process, max, start)| Op::Poll { process, max, start }),
        1 => (p.clone(), 0..4u64, any::<bool>()).prop_map(|(process, advance, report)| Op::PollInfo { process, advance, report }),
        2 => (p.clone(), 1..8u8, any::<bool>()).prop_map(|(process, mask, keep)| Op::Assign { process, mask, keep }),
        1 => p.clone().prop_map(|process| Op::Subscribe { process }),
        1 => p.clone().prop_map(|process| Op::Crash { process }),
        1 => p.prop_map(|process| Op::Commit { process }),
    ]
}

#[derive(Default, Clone)]
struct Consumer {
    assigned: Vec<u32>,
    /// Next offset to read per partition; None until the first poll after a reset.
    next: BTreeMap<u32, u64>,
}

/// A correct log: every append is kept, offsets are dense, reads return what is there.
struct Model {
    logs: Vec<Vec<String>>,
    consumers: BTreeMap<u64, Consumer>,
    seq: u64,
    h: H,
    /// (partition, offset) of every acknowledged send.
    acked: Vec<(u32, u64)>,
}

impl Model {
    fn new() -> Self {
        let mut m = Model {
            logs: vec![Vec::new(); PARTITIONS as usize],
            consumers: BTreeMap::new(),
            seq: 0,
            h: H::new(),
            acked: Vec::new(),
        };
        // Every partition starts with three acknowledged records, so injections have material.
        for partition in 0..PARTITIONS {
            for _ in 0..3 {
                m.apply(&Op::Send {
                    process: 0,
                    partition,
                    outcome: 0,
                });
            }
        }
        m
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Send {
                process,
                partition,
                outcome,
            } => self.send(process, partition, outcome),
            Op::Poll {
                process,
                max,
                start,
            } => self.poll(process, max, start),
            Op::PollInfo {
                process,
                advance,
                report,
            } => self.poll_info(process, advance, report),
            Op::Assign {
                process,
                mask,
                keep,
            } => self.assign(process, mask, keep),
            Op::Subscribe { process } => {
                let c = self.consumers.entry(process).or_default();
                c.assigned = (0..PARTITIONS).collect();
                c.next.clear();
                self.h.subscribe(process);
            }
            Op::Crash { process } => {
                self.consumers.insert(process, Consumer::default());
                self.h.crash(process);
            }
            Op::Commit { process } => {
                let c = self.consumers.entry(process).or_default();
                let offsets = c
                    .next
                    .iter()
                    .map(|(&partition, &offset)| CommitOffset {
                        topic: "t".into(),
                        partition,
                        offset,
                    })
                    .collect();
                let v = CommitValue {
                    group: "g".into(),
                    offsets,
                    ..CommitValue::default()
                };
                self.h.push(
                    process,
                    EventType::Invoke,
                    Function::Commit,
                    Value::Commit(v.clone()),
                );
                self.h
                    .push(process, EventType::Ok, Function::Commit, Value::Commit(v));
            }
        }
    }

    /// A send of `process` to `partition`: acknowledged (0), in doubt and written (1) or
    /// not (2), or failed (3 and above).
    fn send(&mut self, process: u64, partition: u32, outcome: u8) {
        self.seq += 1;
        let value = format!("{process}-{}", self.seq);
        let log = &mut self.logs[partition as usize];
        match outcome {
            0 => {
                log.push(value.clone());
                let offset = log.len() as u64 - 1;
                self.acked.push((partition, offset));
                self.h.send(process, partition, &value, offset);
            }
            1 | 2 => {
                if outcome == 1 {
                    log.push(value.clone());
                }
                self.h
                    .send_unacked(process, partition, &value, EventType::Info);
            }
            _ => self
                .h
                .send_unacked(process, partition, &value, EventType::Fail),
        }
    }

    /// A poll of up to `max` records per assigned partition.
    fn poll(&mut self, process: u64, max: usize, start: u64) {
        let c = self.consumers.entry(process).or_default();
        let mut per_partition: Vec<Vec<(u32, u64, String)>> = Vec::new();
        for &p in &c.assigned {
            let log = &self.logs[p as usize];
            // After a reset the consumer may resume anywhere (a committed offset).
            let next = c.next.entry(p).or_insert(start % (log.len() as u64 + 1));
            let mut got = Vec::new();
            while got.len() < max && (*next as usize) < log.len() {
                got.push((p, *next, log[*next as usize].clone()));
                *next += 1;
            }
            per_partition.push(got);
        }
        // Interleave partitions, keeping each partition's order.
        let mut records = Vec::new();
        let mut i = 0;
        while per_partition.iter().any(|g| i < g.len()) {
            for g in &per_partition {
                if let Some(r) = g.get(i) {
                    records.push(r.clone());
                }
            }
            i += 1;
        }
        let refs: Vec<(u32, u64, &str)> = records
            .iter()
            .map(|(p, o, v)| (*p, *o, v.as_str()))
            .collect();
        self.h.poll(process, &refs);
    }

    /// A timed-out poll.
    fn poll_info(&mut self, process: u64, advance: u64, report: bool) {
        // The poll timed out, but the consumer may have consumed records meanwhile,
        // and may say which.
        let c = self.consumers.entry(process).or_default();
        let mut records = Vec::new();
        for (&p, next) in c.next.iter_mut() {
            let log = &self.logs[p as usize];
            for _ in 0..advance {
                if let Some(v) = log.get(*next as usize) {
                    records.push((p, *next, v.clone()));
                }
                *next += 1;
            }
        }
        if report && !records.is_empty() {
            let refs: Vec<(u32, u64, &str)> = records
                .iter()
                .map(|(p, o, v)| (*p, *o, v.as_str()))
                .collect();
            self.h.poll_as(process, EventType::Info, &refs);
        } else {
            self.h.poll_info(process);
        }
    }

    /// An assignment of the partitions of `mask`, keeping positions if `keep`.
    fn assign(&mut self, process: u64, mask: u8, keep: bool) {
        let c = self.consumers.entry(process).or_default();
        let assigned: Vec<u32> = (0..PARTITIONS).filter(|p| mask & (1 << p) != 0).collect();
        let kept: Vec<u32> = if keep {
            assigned
                .iter()
                .copied()
                .filter(|p| c.assigned.contains(p))
                .collect()
        } else {
            Vec::new()
        };
        c.next.retain(|p, _| kept.contains(p));
        c.assigned = assigned.clone();
        self.h.assign_as(process, EventType::Ok, &assigned, &kept);
    }

    /// Reads every partition from the start to the end, one poll per partition.
    fn final_reads(&mut self) {
        self.h
            .assign(FINAL_READER, &(0..PARTITIONS).collect::<Vec<_>>());
        for p in 0..PARTITIONS {
            let records: Vec<(u32, u64, &str)> = self.logs[p as usize]
                .iter()
                .enumerate()
                .map(|(o, v)| (p, o as u64, v.as_str()))
                .collect();
            self.h.poll(FINAL_READER, &records);
        }
    }
}

fn history(ops: &[Op]) -> Model {
    let mut m = Model::new();
    for op in ops {
        m.apply(op);
    }
    m.final_reads();
    m
}

/// A correct log's histories pass even Jepsen's strict policies.
fn final_opts() -> CheckOptions {
    CheckOptions::default().final_reads(true).strict(true)
}

/// Indexes (into `m.h.events`) of ok polls, with their records.
fn ok_polls(m: &Model) -> Vec<usize> {
    m.h.events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == EventType::Ok && e.records().is_some_and(|r| !r.is_empty()))
        .map(|(i, _)| i)
        .collect()
}

/// Polls of any outcome that report records.
fn reporting_polls(m: &Model) -> Vec<usize> {
    m.h.events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind != EventType::Invoke && e.records().is_some_and(|r| !r.is_empty()))
        .map(|(i, _)| i)
        .collect()
}

fn records_mut(m: &mut Model, at: usize) -> &mut Vec<PolledRecord> {
    match &mut m.h.events[at].value {
        Value::Poll(p) => &mut p.records,
        other => panic!("not a poll: {other:?}"),
    }
}

fn reindex(m: &mut Model) {
    for (i, e) in m.h.events.iter_mut().enumerate() {
        e.index = i as u64;
    }
}

/// Injects one anomaly of `kind`, choosing where with `pick`.
fn inject(m: &mut Model, kind: AnomalyKind, pick: usize) {
    let fresh = 200 + pick as u64 % 50;
    let partition = (pick % PARTITIONS as usize) as u32;
    let len = m.logs[partition as usize].len() as u64;
    let value_at = |m: &Model, o: u64| m.logs[partition as usize][o as usize].clone();
    match kind {
        AnomalyKind::LostWrite => {
            // Forget every read of an acknowledged value below the end of its partition.
            let candidates: Vec<(u32, u64)> = m
                .acked
                .iter()
                .copied()
                .filter(|&(p, o)| o + 1 < m.logs[p as usize].len() as u64)
                .collect();
            let (p, o) = candidates[pick % candidates.len()];
            let value = m.logs[p as usize][o as usize].clone();
            // Every poll that reported it, info polls included (a read is a read whatever
            // the poll's outcome): otherwise the value stays read, and a final poll that
            // skipped it is only an int-poll-skip.
            for at in reporting_polls(m) {
                records_mut(m, at).retain(|r| r.value != value);
            }
        }
        AnomalyKind::Duplicate => {
            let (p, o) = m.acked[pick % m.acked.len()];
            let value = m.logs[p as usize][o as usize].clone();
            m.h.send(fresh, partition, &value, len);
        }
        AnomalyKind::InconsistentOffsets => {
            // Change what a read saw at an offset an acknowledged send also names (an offset
            // read only once, of an unacknowledged send, would give no second opinion).
            let acked: std::collections::BTreeSet<(u32, u64)> = m.acked.iter().copied().collect();
            let mut candidates = Vec::new();
            for at in ok_polls(m) {
                for (i, r) in m.h.events[at].records().unwrap().iter().enumerate() {
                    if acked.contains(&(r.partition, r.offset)) {
                        candidates.push((at, i));
                    }
                }
            }
            let (at, i) = candidates[pick % candidates.len()];
            records_mut(m, at)[i].value = format!("bogus-{pick}").into();
        }
        AnomalyKind::NonmonotonicPoll => {
            let polls = ok_polls(m);
            let at = polls[pick % polls.len()];
            let copy = m.h.events[at].clone();
            m.h.events.insert(at + 1, copy);
            reindex(m);
        }
        AnomalyKind::PollSkip => {
            let a = pick as u64 % (len - 2);
            let b = a + 2 + (pick as u64 / 7) % (len - a - 2);
            m.h.assign(fresh, &[partition]);
            m.h.poll(fresh, &[(partition, a, &value_at(m, a))]);
            m.h.poll(fresh, &[(partition, b, &value_at(m, b))]);
        }
        AnomalyKind::IntNonmonotonicPoll => {
            let polls = ok_polls(m);
            let at = polls[pick % polls.len()];
            let records = records_mut(m, at);
            let r = records[pick % records.len()].clone();
            records.push(r);
        }
        AnomalyKind::IntPollSkip => {
            // Drop a record whose offset is known from an acknowledged send, from a poll that
            // read records of the same partition on both sides of it.
            let acked: std::collections::BTreeSet<(u32, u64)> = m.acked.iter().copied().collect();
            let mut candidates = Vec::new();
            for at in ok_polls(m) {
                let records = m.h.events[at].records().unwrap();
                for i in 0..records.len() {
                    let r = &records[i];
                    let same = |j: &usize| records[*j].partition == r.partition;
                    let before = (0..i).rev().find(same);
                    let after = (i + 1..records.len()).find(same);
                    if before.is_some()
                        && after.is_some()
                        && acked.contains(&(r.partition, r.offset))
                    {
                        candidates.push((at, i));
                    }
                }
            }
            let (at, i) = candidates[pick % candidates.len()];
            records_mut(m, at).remove(i);
        }
        AnomalyKind::NonmonotonicSend => {
            m.h.send(fresh, partition, &format!("ns-a-{pick}"), len);
            m.h.send(
                fresh,
                partition,
                &format!("ns-b-{pick}"),
                pick as u64 % (len + 1),
            );
        }
        AnomalyKind::Unseen => {
            m.h.send(fresh, partition, &format!("unseen-{pick}"), len);
        }
        AnomalyKind::AbortedRead => {
            // A failed send whose value a poll then finds at the end of the log.
            let value = format!("aborted-{pick}");
            m.h.send_unacked(fresh, partition, &value, EventType::Fail);
            m.h.poll(fresh + 1, &[(partition, len, &value)]);
        }
        AnomalyKind::FutureRead => {
            let value = format!("future-{pick}");
            m.h.poll(fresh + 1, &[(partition, len, &value)]);
            m.h.send(fresh, partition, &value, len);
        }
        AnomalyKind::CommitRegression => {
            let high = 5 + pick as u64 % 10;
            m.h.commit(fresh, high, Some(1));
            m.h.commit(fresh + 1, high - 1 - pick as u64 % 5, Some(2));
        }
        AnomalyKind::UnsentRead => {
            m.h.poll(fresh, &[(partition, len, &format!("unsent-{pick}"))]);
        }
        AnomalyKind::EmptyHistory => m.h.events.clear(),
        AnomalyKind::Acks1Loss => {
            // An acks=1 acknowledgement of an offset that holds another record.
            let o = pick as u64 % len;
            m.h.send_acks(
                fresh,
                partition,
                &format!("weak-{pick}"),
                o,
                AckPromise::Leader,
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn correct_log_histories_are_valid(ops in prop::collection::vec(op(), 0..150)) {
        let m = history(&ops);
        let report = check(&m.h.events, &final_opts());
        prop_assert!(report.valid, "{}", report);
        prop_assert_eq!(report.unseen.count, 0);
        prop_assert_eq!(report.stats.events, m.h.events.len() as u64);

        // The same history through the file format gives the same verdict.
        let mut w = HistoryWriter::new(Vec::new());
        for e in &m.h.events {
            w.write_event(&mut e.clone()).unwrap();
        }
        let back = read_history(&w.into_inner().unwrap()[..]).unwrap();
        prop_assert_eq!(&back, &m.h.events);
        prop_assert_eq!(check(&back, &final_opts()), report);
    }

    #[test]
    fn one_injected_anomaly_is_reported_by_name(
        ops in prop::collection::vec(op(), 0..150),
        which in 0..AnomalyKind::ALL.len(),
        pick in 0..10_000usize,
    ) {
        let kind = AnomalyKind::ALL[which];
        let mut m = history(&ops);
        prop_assert!(check(&m.h.events, &final_opts()).valid);
        inject(&mut m, kind, pick);
        let report = check(&m.h.events, &final_opts());
        if kind.policy() == Policy::Allowed {
            // Reported, but what the weaker guarantee allows.
            prop_assert!(report.valid, "{}", report);
            prop_assert!(report.count(kind) > 0, "injected {} but found nothing\n{}", kind, report);
        } else {
            prop_assert!(!report.valid);
            prop_assert!(report.found().contains(&kind), "injected {} but found {:?}\n{}", kind, report.found(), report);
        }
        prop_assert!(!report.example_indexes(kind).is_empty());
    }
}
