//! How far readers are behind writers, over time, per partition.
//!
//! - **unseen** (Jepsen's `unseen`): acknowledged records no poll has returned yet. A
//!   record counts from its send's `ok` to the completion of the first poll (of any
//!   outcome) that returned its value; one never read counts to the end. During a failover
//!   it climbs (writes are acknowledged, readers see nothing new) and falls when readers
//!   catch up; a line that never comes back to zero at the end is data the readers did not
//!   find.
//! - **lag**: offsets between the log end the clients know (one past the highest
//!   acknowledged offset) and, per partition, the position of its most advanced reader
//!   (read lag), and the group's last acknowledged committed offset (commit lag).
//!
//! Transactional sends and reads (`txn` operations) count like plain ones.

use super::axis::LinAxis;
use super::frame::{Chart, Frame, Swatch};
use crate::history::{Event, EventType, Function, MicroOp, Nanos, Partition, Process, Text, Value};
use std::collections::BTreeMap;
use std::fmt::Write;

/// `(topic, partition)`.
pub type Key = (Text, Partition);

/// A step function: from each point's time on, its value holds.
pub type Steps = Vec<(Nanos, f64)>;

/// Sends acknowledged `ok`: key, offset, value, acknowledgement time.
fn acked(events: &[Event]) -> Vec<(Key, u64, Text, Nanos)> {
    let mut out = Vec::new();
    for e in events.iter().filter(|e| e.kind == EventType::Ok) {
        if let Some(s) = e.send() {
            if let Some(o) = s.offset {
                out.push(((s.topic.clone(), s.partition), o, s.value.clone(), e.time));
            }
        }
        if let Some(t) = e.txn() {
            for op in &t.ops {
                if let MicroOp::Send(s) = op {
                    if let Some(o) = s.offset {
                        out.push(((s.topic.clone(), s.partition), o, s.value.clone(), e.time));
                    }
                }
            }
        }
    }
    out
}

/// Every record a completed poll returned: key, offset, value.
fn reads(e: &Event) -> Vec<(Key, u64, Text)> {
    let mut out = Vec::new();
    if e.kind == EventType::Invoke {
        return out;
    }
    if let Some(rs) = e.records() {
        for r in rs {
            out.push(((r.topic.clone(), r.partition), r.offset, r.value.clone()));
        }
    }
    if let Some(t) = e.txn() {
        for op in &t.ops {
            if let MicroOp::Poll(p) = op {
                for r in &p.reads {
                    for (o, v) in &r.records {
                        out.push(((r.topic.clone(), r.partition), *o, v.clone()));
                    }
                }
            }
        }
    }
    out
}

/// Per partition, the number of acknowledged records not yet read, as a step function.
pub fn unseen(events: &[Event]) -> BTreeMap<Key, Steps> {
    let mut first_read: BTreeMap<(Key, Text), Nanos> = BTreeMap::new();
    for e in events {
        for (k, _, v) in reads(e) {
            first_read.entry((k, v)).or_insert(e.time);
        }
    }
    let mut deltas: BTreeMap<Key, Vec<(Nanos, i64)>> = BTreeMap::new();
    for (k, _, v, at) in acked(events) {
        let d = deltas.entry(k.clone()).or_default();
        d.push((at, 1));
        if let Some(&r) = first_read.get(&(k, v)) {
            d.push((r.max(at), -1));
        }
    }
    deltas
        .into_iter()
        .map(|(k, mut d)| {
            d.sort();
            let mut n = 0i64;
            let steps = d
                .into_iter()
                .map(|(t, x)| {
                    n += x;
                    (t, n as f64)
                })
                .collect();
            (k, steps)
        })
        .collect()
}

/// Per partition: read lag and (if the group committed any) commit lag, as step functions.
pub fn lag(events: &[Event]) -> BTreeMap<Key, (Steps, Option<Steps>)> {
    let mut end: BTreeMap<Key, u64> = BTreeMap::new();
    let mut pos: BTreeMap<(Key, Process), u64> = BTreeMap::new();
    let mut committed: BTreeMap<Key, u64> = BTreeMap::new();
    let mut out: BTreeMap<Key, (Steps, Option<Steps>)> = BTreeMap::new();
    let acks = acked(events);
    let mut acks = acks.iter().peekable();
    for e in events {
        let mut touched: Vec<Key> = Vec::new();
        while let Some((k, o, _, at)) = acks.peek() {
            if *at > e.time {
                break;
            }
            let x = end.entry(k.clone()).or_default();
            *x = (*x).max(o + 1);
            touched.push(k.clone());
            acks.next();
        }
        if e.f == Function::Crash {
            // The process forgot its positions.
            pos.retain(|(_, p), _| *p != e.process);
        }
        for (k, o, _) in reads(e) {
            pos.insert((k.clone(), e.process), o + 1);
            touched.push(k);
        }
        if let (EventType::Ok, Value::Commit(c)) = (e.kind, &e.value) {
            for co in &c.offsets {
                let k = (co.topic.clone(), co.partition);
                committed.insert(k.clone(), co.offset);
                touched.push(k);
            }
        }
        touched.sort();
        touched.dedup();
        for k in touched {
            let log_end = end.get(&k).copied().unwrap_or(0);
            let best = pos
                .range((k.clone(), 0)..=(k.clone(), Process::MAX))
                .map(|(_, p)| *p)
                .max()
                .unwrap_or(0);
            let entry = out.entry(k.clone()).or_insert((Vec::new(), None));
            entry.0.push((e.time, log_end.saturating_sub(best) as f64));
            if let Some(c) = committed.get(&k) {
                entry
                    .1
                    .get_or_insert_with(Vec::new)
                    .push((e.time, log_end.saturating_sub(*c) as f64));
            }
        }
    }
    out
}

/// A step function cut into `n` columns over `0..t_max` seconds: each column's highest
/// value (a spike shorter than a column still shows), carried over empty columns.
pub fn columns(steps: &Steps, t_max: f64, n: usize) -> Vec<(f64, f64)> {
    let span = ((t_max * 1e9).round() as u64).max(1);
    let bound = |c: usize| (span as u128 * c as u128 / n as u128) as u64;
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    let mut current = 0.0;
    for c in 0..n {
        let (from, to) = (bound(c), bound(c + 1));
        // The value the column starts with, then every value it takes before its end.
        while i < steps.len() && steps[i].0 <= from {
            current = steps[i].1;
            i += 1;
        }
        let mut top = current;
        while i < steps.len() && steps[i].0 < to {
            current = steps[i].1;
            top = top.max(current);
            i += 1;
        }
        out.push(((from + to) as f64 / 2e9, top));
    }
    out
}

const PALETTE: [&str; 10] = [
    "#1c7ed6", "#e8590c", "#2b8a3e", "#7048e8", "#c2255c", "#0c8599", "#5c940d", "#862e9c",
    "#d6336c", "#495057",
];

/// One line of a progress plot.
pub struct Line {
    pub label: String,
    pub color: &'static str,
    pub dash: &'static str,
    pub points: Vec<(f64, f64)>,
}

fn key_name(k: &Key) -> String {
    format!("{}-{}", k.0, k.1)
}

fn draw(
    chart: &Chart,
    title: &str,
    sub: &str,
    y: &str,
    lines: &[Line],
    legend: Vec<(String, Swatch)>,
) -> String {
    let y_max = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let axis = LinAxis::covering(y_max.max(1.0), 6);
    let mut f = Frame::new(chart, title, sub);
    f.lin_y(&axis, y);
    for l in lines {
        let pts: Vec<String> = l
            .points
            .iter()
            .map(|(t, v)| format!("{:.1},{:.1}", f.x(*t), f.y(axis.fraction(*v))))
            .collect();
        let _ = write!(
            f.svg,
            r#"<polyline class="series" fill="none" stroke="{}" stroke-width="1.5" stroke-dasharray="{}" points="{}"><title>{}</title></polyline>"#,
            l.color,
            l.dash,
            pts.join(" "),
            super::escape(&l.label)
        );
    }
    f.legend(&legend);
    f.finish()
}

const COLUMNS: usize = 690;

pub fn unseen_svg(events: &[Event], chart: &Chart) -> String {
    let series = unseen(events);
    let mut lines = Vec::new();
    let mut legend = Vec::new();
    for (i, (k, steps)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        lines.push(Line {
            label: format!("unseen in {}", key_name(k)),
            color,
            dash: "",
            points: columns(steps, chart.t_max, COLUMNS),
        });
        legend.push((key_name(k), Swatch::Line(color, "")));
    }
    draw(
        chart,
        "Unseen: acknowledged records no reader has returned yet",
        "per partition; climbs while writes are acknowledged and readers see nothing new (a failover), falls when they catch up; must end at 0",
        "records",
        &lines,
        legend,
    )
}

pub fn lag_svg(events: &[Event], chart: &Chart) -> String {
    let series = lag(events);
    let mut lines = Vec::new();
    let mut legend = Vec::new();
    let mut any_commit = false;
    for (i, (k, (read, commit))) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        lines.push(Line {
            label: format!("read lag of {}", key_name(k)),
            color,
            dash: "",
            points: columns(read, chart.t_max, COLUMNS),
        });
        if let Some(c) = commit {
            any_commit = true;
            lines.push(Line {
                label: format!("commit lag of {}", key_name(k)),
                color,
                dash: "5 3",
                points: columns(c, chart.t_max, COLUMNS),
            });
        }
        legend.push((key_name(k), Swatch::Line(color, "")));
    }
    legend.push(("read lag".into(), Swatch::Line("#495057", "")));
    if any_commit {
        legend.push(("commit lag".into(), Swatch::Line("#495057", "5 3")));
    }
    draw(
        chart,
        "Consumer lag",
        "offsets from the acknowledged log end to the most advanced reader's position (solid) and to the group's committed offset (dashed), per partition",
        "offsets behind",
        &lines,
        legend,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{CommitOffset, CommitValue, PollValue, PolledRecord, SendValue};

    fn send(index: u64, time: Nanos, value: &str, offset: u64) -> Event {
        Event::new(
            index,
            time,
            1,
            EventType::Ok,
            Function::Send,
            Value::Send(SendValue::new("t", 0, value).at(offset)),
        )
    }

    fn poll(index: u64, time: Nanos, process: u64, recs: &[(&str, u64)]) -> Event {
        let records = recs
            .iter()
            .map(|(v, o)| PolledRecord {
                topic: "t".into(),
                partition: 0,
                offset: *o,
                value: (*v).into(),
            })
            .collect();
        Event::new(
            index,
            time,
            process,
            EventType::Ok,
            Function::Poll,
            Value::Poll(PollValue { records }),
        )
    }

    #[test]
    fn unseen_counts_acknowledged_until_first_read() {
        let events = vec![
            send(0, 10, "a", 0),
            send(1, 20, "b", 1),
            poll(2, 30, 2, &[("a", 0)]),
            send(3, 40, "c", 2),
            poll(4, 50, 3, &[("a", 0), ("b", 1)]),
        ];
        let u = unseen(&events);
        let steps = &u[&("t".into(), 0)];
        assert_eq!(
            steps,
            &vec![(10, 1.0), (20, 2.0), (30, 1.0), (40, 2.0), (50, 1.0)],
            "c is never read: it stays unseen"
        );
        // Columns keep each column's peak.
        let c = columns(steps, 100e-9, 5);
        assert_eq!(
            c.iter().map(|p| p.1).collect::<Vec<_>>(),
            vec![1.0, 2.0, 2.0, 1.0, 1.0]
        );
    }

    #[test]
    fn lag_follows_the_best_reader_and_the_commits() {
        let commit = Event::new(
            5,
            60,
            9,
            EventType::Ok,
            Function::Commit,
            Value::Commit(CommitValue {
                group: "g".into(),
                offsets: vec![CommitOffset {
                    topic: "t".into(),
                    partition: 0,
                    offset: 1,
                }],
                generation: Some(1),
            }),
        );
        let events = vec![
            send(0, 10, "a", 0),
            send(1, 20, "b", 1),
            poll(2, 30, 2, &[("a", 0)]),
            poll(3, 40, 3, &[("a", 0), ("b", 1)]),
            send(4, 50, "c", 2),
            commit,
        ];
        let l = lag(&events);
        let (read, commit) = &l[&("t".into(), 0)];
        // Log end 2 at the first poll (position 1): 1 behind; the second reader is at 2;
        // c is acknowledged and nobody reads it.
        assert_eq!(
            read,
            &vec![
                (10, 1.0),
                (20, 2.0),
                (30, 1.0),
                (40, 0.0),
                (50, 1.0),
                (60, 1.0)
            ]
        );
        assert_eq!(commit.as_ref().unwrap(), &vec![(60, 2.0)]);
    }
}
