//! What each history process is, for the timeline's row names: `producer 1`, `consumer of
//! t-2`, `group member 3`. A harness that knows its clients passes their names; for any
//! other history they are inferred from what each process did.

use crate::history::{Event, Function, Process, Value};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Default)]
struct Seen {
    first: u64,
    sends: bool,
    group: bool,
    /// Partitions it was assigned or read, as `topic-partition`.
    partitions: BTreeSet<String>,
    /// An `assign []`: a group rebalance took its partitions away.
    revoked: bool,
    polls: bool,
}

/// Names every process of `events` by its role. Processes that send (or run transactions)
/// are producers, numbered by first appearance; those that subscribe or commit are group
/// members; the rest read: a reader once revoked (`assign []`) is a group member's reader,
/// any other a consumer; readers are named by the partitions they read.
pub fn infer(events: &[Event]) -> BTreeMap<Process, String> {
    let mut seen: BTreeMap<Process, Seen> = BTreeMap::new();
    for e in events {
        let s = seen.entry(e.process).or_insert_with(|| Seen {
            first: e.index,
            ..Seen::default()
        });
        match (&e.f, &e.value) {
            (Function::Send | Function::Txn, _) => s.sends = true,
            (Function::Subscribe | Function::Commit, _) => s.group = true,
            (Function::Assign, Value::Assign(a)) => {
                if a.partitions.is_empty() {
                    s.revoked = true;
                }
                for (t, p) in &a.partitions {
                    s.partitions.insert(format!("{t}-{p}"));
                }
            }
            (Function::Poll, _) => {
                s.polls = true;
                for r in e.records().unwrap_or(&[]) {
                    s.partitions.insert(format!("{}-{}", r.topic, r.partition));
                }
            }
            _ => {}
        }
    }
    let mut order: Vec<(&Process, &Seen)> = seen.iter().collect();
    order.sort_by_key(|(p, s)| (s.first, **p));
    let (mut producers, mut members) = (0, 0);
    let mut out = BTreeMap::new();
    for (p, s) in order {
        let name = if s.sends {
            producers += 1;
            format!("producer {producers}")
        } else if s.group {
            members += 1;
            format!("group member {members}")
        } else {
            let what = if s.revoked {
                "group reader"
            } else {
                "consumer"
            };
            match s.partitions.len() {
                0 if !s.polls => format!("process {p}"),
                0 => format!("{what} (read nothing)"),
                1 => format!("{what} of {}", s.partitions.iter().next().expect("one")),
                _ => format!(
                    "{what} of {}",
                    s.partitions.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
            }
        };
        out.insert(*p, name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{AssignValue, EventType, SendValue, SubscribeValue};

    #[test]
    fn roles_from_what_processes_did() {
        let ev = |i: u64, p: u64, f: Function, value: Value| {
            Event::new(i, i, p, EventType::Ok, f, value)
        };
        let assign = |parts: &[u32]| {
            Value::Assign(AssignValue {
                partitions: parts.iter().map(|p| ("t".into(), *p)).collect(),
                kept: Vec::new(),
            })
        };
        let events = vec![
            ev(
                0,
                10,
                Function::Send,
                Value::Send(SendValue::new("t", 0, "a")),
            ),
            ev(
                1,
                11,
                Function::Send,
                Value::Send(SendValue::new("t", 1, "b")),
            ),
            ev(2, 20, Function::Assign, assign(&[2])),
            ev(
                3,
                30,
                Function::Subscribe,
                Value::Subscribe(SubscribeValue {
                    group: "g".into(),
                    topics: vec!["t".into()],
                }),
            ),
            ev(4, 31, Function::Assign, assign(&[1])),
            ev(5, 31, Function::Assign, assign(&[])),
            ev(6, 40, Function::Crash, Value::Null),
        ];
        let r = infer(&events);
        assert_eq!(r[&10], "producer 1");
        assert_eq!(r[&11], "producer 2");
        assert_eq!(r[&20], "consumer of t-2");
        assert_eq!(r[&30], "group member 1");
        assert_eq!(r[&31], "group reader of t-1");
        assert_eq!(r[&40], "process 40");
    }
}
