//! Jepsen-style pictures of a history: latency (raw and quantiles), throughput, unseen
//! records and consumer lag (SVG, faults in labelled lanes under each plot), an HTML
//! timeline of each process's operations, and the report directory linking them
//! ([`pages::write_dir`]).
//!
//! Module map: [`axis`] (log and linear ticks), [`lanes`] (fault lanes, label packing),
//! [`quantiles`], [`frame`] (what every SVG plot shares), [`latency`], [`rate`], [`progress`]
//! (unseen records and consumer lag), [`roles`] (row names), [`timeline`], [`pages`].
//!
//! Input is the history itself ([`operations`] pairs each `invoke` with its process's next
//! completion) plus the fault windows the harness recorded, so the pictures show exactly
//! what the checker judged. Hand-written SVG: no plotting dependency.

pub mod axis;
pub mod frame;
pub mod lanes;
pub mod latency;
pub mod pages;
pub mod progress;
pub mod quantiles;
pub mod rate;
pub mod roles;
pub mod timeline;

pub use frame::Chart;
pub use latency::{latency_quantiles_svg, latency_svg};
pub use pages::{read_faults, write_dir, ReportInput, PLOTS};
pub use progress::{lag_svg, unseen_svg};
pub use rate::rate_svg;
pub use timeline::{timeline_page, Mark, Timeline};

use crate::history::{Event, EventType, Function, Nanos, Process};
use std::collections::BTreeMap;

/// One operation: invoked at `start`, completed at `end` with `kind` (ok, fail or info).
#[derive(Clone, Debug, PartialEq)]
pub struct Operation {
    pub process: Process,
    pub f: Function,
    pub start: Nanos,
    pub end: Nanos,
    pub kind: EventType,
    /// History index of the invocation.
    pub index: u64,
    /// History index of the completion.
    pub done: u64,
}

/// A fault window: `kind` (its lane: `kill`, `partition`, `crash`...) struck `target`
/// (`broker-2`, `controller-1<->broker-3`...) from `start` to `end` (equal for an instant
/// fault), on the history's clock.
#[derive(Clone, Debug, PartialEq)]
pub struct Shade {
    pub start: Nanos,
    pub end: Nanos,
    pub kind: String,
    pub target: String,
}

impl Shade {
    /// `kind target`, as the harness printed it.
    pub fn label(&self) -> String {
        if self.target.is_empty() {
            self.kind.clone()
        } else {
            format!("{} {}", self.kind, self.target)
        }
    }
}

/// Pairs invocations with completions. An invocation never completed is left out.
pub fn operations(events: &[Event]) -> Vec<Operation> {
    let mut open: BTreeMap<Process, (u64, Nanos, Function)> = BTreeMap::new();
    let mut out = Vec::new();
    for e in events {
        if e.kind == EventType::Invoke {
            open.insert(e.process, (e.index, e.time, e.f));
        } else if let Some((index, start, f)) = open.remove(&e.process) {
            out.push(Operation {
                process: e.process,
                f,
                start,
                end: e.time.max(start),
                kind: e.kind,
                index,
                done: e.index,
            });
        }
    }
    out
}

/// Operation colours: one hue per function, so sends, polls and commits separate at a glance.
pub fn f_color(f: Function) -> &'static str {
    match f {
        Function::Send => "#1c7ed6",
        Function::Poll => "#2b8a3e",
        Function::Commit => "#7048e8",
        Function::Assign => "#e67700",
        Function::Subscribe => "#0c8599",
        Function::Txn => "#c2255c",
        Function::Crash => "#495057",
    }
}

/// The point marker of an outcome (ids defined in every plot's `<defs>`).
pub fn marker(kind: EventType) -> &'static str {
    match kind {
        EventType::Ok | EventType::Invoke => "#ok",
        EventType::Info => "#info",
        EventType::Fail => "#fail",
    }
}

pub fn kind_name(kind: EventType) -> &'static str {
    match kind {
        EventType::Ok => "ok",
        EventType::Fail => "fail",
        EventType::Info => "info",
        EventType::Invoke => "invoke",
    }
}

pub fn f_name(f: Function) -> &'static str {
    match f {
        Function::Send => "send",
        Function::Poll => "poll",
        Function::Assign => "assign",
        Function::Subscribe => "subscribe",
        Function::Commit => "commit",
        Function::Crash => "crash",
        Function::Txn => "txn",
    }
}

pub(crate) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

impl Chart {
    /// The chart of a history: long enough for its last event and every fault.
    pub fn new(events: &[Event], shades: &[Shade], time_label: &str) -> Chart {
        let end = events
            .iter()
            .map(|e| e.time)
            .chain(shades.iter().map(|s| s.end))
            .max()
            .unwrap_or(0);
        Chart {
            t_max: (end as f64 / 1e9).max(1e-3),
            time_label: time_label.to_string(),
            shades: shades.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Value;

    fn ev(index: u64, time: Nanos, process: Process, kind: EventType) -> Event {
        Event {
            index,
            time,
            process,
            kind,
            f: Function::Poll,
            value: Value::Null,
        }
    }

    #[test]
    fn pairs_and_draws() {
        let events = vec![
            ev(0, 0, 1, EventType::Invoke),
            ev(1, 1_000_000_000, 2, EventType::Invoke),
            ev(2, 2_000_000_000, 1, EventType::Ok),
            ev(3, 3_000_000_000, 2, EventType::Info),
            ev(4, 3_500_000_000, 1, EventType::Invoke),
        ];
        let ops = operations(&events);
        assert_eq!(ops.len(), 2, "the last invocation never completed");
        assert_eq!((ops[0].process, ops[0].end), (1, 2_000_000_000));
        assert_eq!(ops[1].kind, EventType::Info);
        let shades = vec![Shade {
            start: 500_000_000,
            end: 1_500_000_000,
            kind: "kill".into(),
            target: "<b>".into(),
        }];
        let chart = Chart::new(&events, &shades, "time (s)");
        let lat = latency_svg(&ops, &chart);
        assert_eq!(lat.matches("</use>").count(), 2, "two points");
        assert_eq!(lat.matches(r#"class="fault-span""#).count(), 1);
        assert_eq!(lat.matches(r#"class="lane" data-kind="kill""#).count(), 1);
        assert!(lat.contains("&lt;b&gt;") && !lat.contains("<b>"));
        assert!(
            lat.contains(r##"<use href="#info""##),
            "the info poll is a triangle"
        );
        let rate = rate_svg(&ops, &chart);
        assert_eq!(
            rate.matches("<polyline").count(),
            2,
            "poll ok and poll info"
        );
        let q = latency_quantiles_svg(&ops, &chart);
        assert_eq!(
            q.matches(r#"class="quantile""#).count(),
            4,
            "one poll line per quantile"
        );
        let roles = roles::infer(&events);
        let marks = vec![Mark {
            label: "lost-write #1".into(),
            indexes: vec![2],
            at: None,
        }];
        let html = timeline_page(&Timeline {
            title: "t <x>",
            time_label: "time (s)",
            t_max: chart.t_max,
            ops: &ops,
            shades: &shades,
            roles: &roles,
            marks: &marks,
        });
        assert!(html.contains("<h1>t &lt;x&gt;</h1>"));
        assert!(
            html.contains(r#""name":"consumer (read nothing)""#),
            "{html}"
        );
        assert!(html.contains(r#""indexes":[2]"#));
        assert!(!html.contains("{{"), "every placeholder filled");
    }
}
