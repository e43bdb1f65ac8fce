//! Jepsen-style pictures of a history: latency over time and throughput (SVG, fault windows
//! shaded) and an HTML timeline of each process's operations.
//!
//! Input is the history itself ([`operations`] pairs each `invoke` with its process's next
//! completion) plus the fault windows the harness recorded, so the pictures show exactly
//! what the checker judged. Hand-written SVG: no plotting dependency.

use crate::history::{Event, EventType, Function, Nanos, Process};
use std::collections::BTreeMap;
use std::fmt::Write;

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
}

/// A shaded interval: a fault, from `start` to `end`, named `label`.
#[derive(Clone, Debug, PartialEq)]
pub struct Shade {
    pub start: Nanos,
    pub end: Nanos,
    pub label: String,
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
            });
        }
    }
    out
}

const W: f64 = 900.0;
const H: f64 = 360.0;
const LEFT: f64 = 60.0;
const BOTTOM: f64 = 40.0;
const TOP: f64 = 30.0;

fn color(kind: EventType) -> &'static str {
    match kind {
        EventType::Ok => "#2b8a3e",
        EventType::Fail => "#c92a2a",
        EventType::Info => "#e67700",
        EventType::Invoke => "#868e96",
    }
}

fn kind_name(kind: EventType) -> &'static str {
    match kind {
        EventType::Ok => "ok",
        EventType::Fail => "fail",
        EventType::Info => "info",
        EventType::Invoke => "invoke",
    }
}

fn f_name(f: Function) -> &'static str {
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

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Frame of a plot: title, axes, shaded faults; `x` maps seconds to pixels.
struct Frame {
    t_max: f64,
    y_max: f64,
    svg: String,
}

impl Frame {
    fn new(title: &str, y_label: &str, t_max: f64, y_max: f64, shades: &[Shade]) -> Frame {
        let t_max = t_max.max(1.0);
        let y_max = if y_max > 0.0 { y_max * 1.05 } else { 1.0 };
        let mut svg = String::new();
        let _ = write!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/><text x="{}" y="18" font-size="14" text-anchor="middle">{}</text>"#,
            W / 2.0,
            escape(title)
        );
        let mut f = Frame { t_max, y_max, svg };
        for s in shades {
            let (x0, x1) = (f.x(s.start as f64 / 1e9), f.x(s.end as f64 / 1e9));
            let _ = write!(
                f.svg,
                r##"<rect class="fault" x="{x0:.1}" y="{TOP}" width="{:.1}" height="{:.1}" fill="#fa5252" fill-opacity="0.15"><title>{}</title></rect><text x="{x0:.1}" y="{}" fill="#c92a2a" font-size="9">{}</text>"##,
                (x1 - x0).max(1.0),
                H - TOP - BOTTOM,
                escape(&s.label),
                TOP - 2.0,
                escape(&s.label)
            );
        }
        let (x0, y0) = (LEFT, H - BOTTOM);
        let _ = write!(
            f.svg,
            r#"<line x1="{x0}" y1="{y0}" x2="{}" y2="{y0}" stroke="black"/><line x1="{x0}" y1="{TOP}" x2="{x0}" y2="{y0}" stroke="black"/><text x="{}" y="{}" text-anchor="middle">time (s)</text><text x="14" y="{}" transform="rotate(-90 14 {})" text-anchor="middle">{}</text>"#,
            W - 10.0,
            (LEFT + W) / 2.0,
            H - 6.0,
            H / 2.0,
            H / 2.0,
            escape(y_label)
        );
        for i in 0..=5 {
            let t = f.t_max * i as f64 / 5.0;
            let y = f.y_max * i as f64 / 5.0;
            let _ = write!(
                f.svg,
                r#"<text x="{:.1}" y="{}" text-anchor="middle">{t:.1}</text><text x="{}" y="{:.1}" text-anchor="end">{y:.0}</text>"#,
                f.x(t),
                H - BOTTOM + 14.0,
                LEFT - 4.0,
                f.y(y) + 4.0
            );
        }
        f
    }
    fn x(&self, t: f64) -> f64 {
        LEFT + (W - LEFT - 10.0) * (t / self.t_max).clamp(0.0, 1.0)
    }
    fn y(&self, v: f64) -> f64 {
        (H - BOTTOM) - (H - BOTTOM - TOP) * (v / self.y_max).clamp(0.0, 1.0)
    }
    fn legend(&mut self, items: &[(String, &str)]) {
        for (i, (name, c)) in items.iter().enumerate() {
            let x = W - 110.0;
            let y = TOP + 12.0 + 14.0 * i as f64;
            let _ = write!(
                self.svg,
                r#"<rect x="{x}" y="{}" width="10" height="10" fill="{c}"/><text x="{}" y="{y}">{}</text>"#,
                y - 9.0,
                x + 14.0,
                escape(name)
            );
        }
    }
    fn finish(mut self) -> String {
        self.svg.push_str("</svg>\n");
        self.svg
    }
}

fn t_max(ops: &[Operation], shades: &[Shade]) -> f64 {
    let end = ops
        .iter()
        .map(|o| o.end)
        .chain(shades.iter().map(|s| s.end))
        .max()
        .unwrap_or(0);
    end as f64 / 1e9
}

/// Latency of every operation (one dot at its invocation time), coloured by outcome.
pub fn latency_svg(ops: &[Operation], shades: &[Shade]) -> String {
    let ms = |o: &Operation| (o.end - o.start) as f64 / 1e6;
    let y_max = ops.iter().map(ms).fold(0.0, f64::max);
    let mut f = Frame::new(
        "Latency of operations (faults shaded)",
        "latency (ms)",
        t_max(ops, shades),
        y_max,
        shades,
    );
    for o in ops {
        let _ = write!(
            f.svg,
            r#"<circle class="op" cx="{:.1}" cy="{:.1}" r="1.6" fill="{}"><title>{} {} p{} {:.1} ms</title></circle>"#,
            f.x(o.start as f64 / 1e9),
            f.y(ms(o)),
            color(o.kind),
            f_name(o.f),
            kind_name(o.kind),
            o.process,
            ms(o)
        );
    }
    let legend: Vec<(String, &str)> = [EventType::Ok, EventType::Fail, EventType::Info]
        .into_iter()
        .map(|k| (kind_name(k).to_string(), color(k)))
        .collect();
    f.legend(&legend);
    f.finish()
}

/// Completed operations per second, one line per (function, outcome).
pub fn rate_svg(ops: &[Operation], shades: &[Shade]) -> String {
    let t = t_max(ops, shades);
    let buckets = t.ceil().max(1.0) as usize;
    let mut series: BTreeMap<(&str, &str), Vec<u64>> = BTreeMap::new();
    for o in ops {
        let b = ((o.end as f64 / 1e9) as usize).min(buckets - 1);
        series
            .entry((f_name(o.f), kind_name(o.kind)))
            .or_insert_with(|| vec![0; buckets])[b] += 1;
    }
    let y_max = series.values().flatten().copied().max().unwrap_or(0) as f64;
    let mut f = Frame::new(
        "Throughput (faults shaded)",
        "operations / s",
        t,
        y_max,
        shades,
    );
    let palette = [
        "#1c7ed6", "#2b8a3e", "#e67700", "#c92a2a", "#7048e8", "#0c8599",
    ];
    let mut legend = Vec::new();
    for (i, ((fname, kname), counts)) in series.iter().enumerate() {
        let c = palette[i % palette.len()];
        let points: Vec<String> = counts
            .iter()
            .enumerate()
            .map(|(s, n)| format!("{:.1},{:.1}", f.x(s as f64 + 0.5), f.y(*n as f64)))
            .collect();
        let _ = write!(
            f.svg,
            r#"<polyline class="rate" fill="none" stroke="{c}" stroke-width="1.5" points="{}"/>"#,
            points.join(" ")
        );
        legend.push((format!("{fname} {kname}"), c));
    }
    f.legend(&legend);
    f.finish()
}

/// One lane per process; each operation a bar from invocation to completion, with its
/// function, outcome and history index on hover; fault windows as red bands.
pub fn timeline_html(title: &str, ops: &[Operation], shades: &[Shade]) -> String {
    let t = t_max(ops, shades).max(0.001);
    let px_per_s = 120.0;
    let width = (t * px_per_s).ceil() + 100.0;
    let mut lanes: BTreeMap<Process, Vec<&Operation>> = BTreeMap::new();
    for o in ops {
        lanes.entry(o.process).or_default().push(o);
    }
    let lane_h = 22.0;
    let height = lanes.len() as f64 * lane_h + 40.0;
    let mut h = String::new();
    let _ = write!(
        h,
        r#"<!DOCTYPE html><html><head><meta charset="utf-8"><title>{t}</title><style>
body {{ font-family: sans-serif; font-size: 12px; }}
#tl {{ position: relative; width: {width:.0}px; height: {height:.0}px; border-top: 1px solid #ccc; }}
.op {{ position: absolute; height: 16px; opacity: 0.85; border-right: 1px solid white; }}
.fault {{ position: absolute; top: 0; bottom: 0; background: rgba(250,82,82,0.15); }}
.lane {{ position: absolute; left: 0; width: 90px; }}
</style></head><body><h1>{t}</h1><p>One row per process; bars span invocation to completion (green ok, red fail, orange info); red bands are faults. Hover for details. Time axis: {px_per_s} px per second.</p><div id="tl">"#,
        t = escape(title)
    );
    for s in shades {
        let _ = write!(
            h,
            r#"<div class="fault" style="left:{:.1}px;width:{:.1}px" title="{}"></div>"#,
            100.0 + s.start as f64 / 1e9 * px_per_s,
            ((s.end - s.start) as f64 / 1e9 * px_per_s).max(1.0),
            escape(&s.label)
        );
    }
    for (row, (p, lane)) in lanes.iter().enumerate() {
        let top = 20.0 + row as f64 * lane_h;
        let _ = write!(
            h,
            r#"<div class="lane" style="top:{top:.0}px">process {p}</div>"#
        );
        for o in lane {
            let _ = write!(
                h,
                r#"<div class="op" style="left:{:.1}px;top:{top:.0}px;width:{:.1}px;background:{}" title="{} {} #{} {:.1} ms"></div>"#,
                100.0 + o.start as f64 / 1e9 * px_per_s,
                ((o.end - o.start) as f64 / 1e9 * px_per_s).max(1.0),
                color(o.kind),
                f_name(o.f),
                kind_name(o.kind),
                o.index,
                (o.end - o.start) as f64 / 1e6
            );
        }
    }
    h.push_str("</div></body></html>\n");
    h
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
            label: "kill <b>".into(),
        }];
        let lat = latency_svg(&ops, &shades);
        assert_eq!(lat.matches("<circle").count(), 2);
        assert_eq!(lat.matches(r#"class="fault""#).count(), 1);
        assert!(lat.contains("kill &lt;b&gt;") && !lat.contains("<b>"));
        let rate = rate_svg(&ops, &shades);
        assert_eq!(
            rate.matches("<polyline").count(),
            2,
            "poll ok and poll info"
        );
        let html = timeline_html("t", &ops, &shades);
        assert_eq!(html.matches(r#"class="op""#).count(), 2);
        assert!(html.contains("process 2"));
    }
}
