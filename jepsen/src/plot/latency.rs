//! Latency pictures (Jepsen's `latency-raw` and `latency-quantiles`): a point per operation
//! at its invocation time, height its latency on a log scale, coloured by operation and
//! shaped by outcome; and per time window the p50, p95, p99 and max of each operation.

use super::axis::{ms_label, nice_step, LogAxis};
use super::frame::{Chart, Frame, Swatch};
use super::quantiles::{windows, QUANTILES};
use super::{f_color, f_name, kind_name, marker, Operation};
use crate::history::{EventType, Function};
use std::collections::BTreeMap;
use std::fmt::Write;

fn ms(o: &Operation) -> f64 {
    (o.end - o.start) as f64 / 1e6
}

/// The (operation, outcome) pairs present, in a fixed order.
fn present(ops: &[Operation]) -> Vec<(Function, EventType)> {
    let set: std::collections::BTreeSet<(Function, EventType)> =
        ops.iter().map(|o| (o.f, o.kind)).collect();
    set.into_iter().collect()
}

/// One point per operation; log latency axis with a tick per decade.
pub fn latency_svg(ops: &[Operation], chart: &Chart) -> String {
    let axis = LogAxis::covering(ops.iter().map(ms));
    let mut f = Frame::new(
        chart,
        "Latency of every operation",
        "one mark per operation at its invocation: colour = operation, shape = outcome (dot ok, triangle info, cross fail); log scale",
    );
    f.log_y(&axis, "latency");
    // Oks first so the rarer info and fail marks are drawn on top.
    let mut order: Vec<&Operation> = ops.iter().collect();
    order.sort_by_key(|o| (o.kind != EventType::Ok, o.start));
    let mut pts = String::from(r#"<g class="points">"#);
    for o in order {
        let _ = write!(
            pts,
            r#"<use href="{}" x="{:.1}" y="{:.1}" color="{}"><title>{} {} process {} #{}: {}</title></use>"#,
            marker(o.kind),
            f.x_ns(o.start),
            f.y(axis.fraction(ms(o))),
            f_color(o.f),
            f_name(o.f),
            kind_name(o.kind),
            o.process,
            o.index,
            ms_label(ms(o)),
        );
    }
    pts.push_str("</g>");
    f.svg.push_str(&pts);
    let legend: Vec<(String, Swatch)> = present(ops)
        .into_iter()
        .map(|(fun, k)| {
            let label = format!("{} {}", f_name(fun), kind_name(k));
            (label, Swatch::Marker(marker(k), f_color(fun)))
        })
        .collect();
    f.legend(&legend);
    f.finish()
}

/// The window width for quantiles: about 40 windows over the run, at least a second.
pub fn quantile_window(t_max: f64) -> f64 {
    nice_step(t_max, 40).max(1.0)
}

/// Dash pattern per quantile: p50 solid, p95 dashed, p99 dotted, max faint dots.
const DASHES: [&str; 4] = ["", "6 3", "2 2", "1 3"];

/// Per operation and time window: p50, p95, p99 and max latency, on a log axis.
pub fn latency_quantiles_svg(ops: &[Operation], chart: &Chart) -> String {
    let width = quantile_window(chart.t_max);
    let mut by_f: BTreeMap<Function, Vec<(f64, f64)>> = BTreeMap::new();
    for o in ops {
        by_f.entry(o.f)
            .or_default()
            .push((o.start as f64 / 1e9, ms(o)));
    }
    let axis = LogAxis::covering(ops.iter().map(ms));
    let mut f = Frame::new(
        chart,
        "Latency quantiles",
        &format!(
            "per {}-second window of invocations, every outcome: colour = operation, line = quantile (p50 solid, p95 dashed, p99 dotted, max faint)",
            super::axis::trim(width)
        ),
    );
    f.log_y(&axis, "latency");
    let mut legend = Vec::new();
    for (fun, samples) in &by_f {
        let ws = windows(samples, width);
        for (qi, (_, qname)) in QUANTILES.iter().enumerate() {
            let points: Vec<String> = ws
                .iter()
                .map(|w| {
                    format!(
                        "{:.1},{:.1}",
                        f.x(w.start + width / 2.0),
                        f.y(axis.fraction(w.values[qi]))
                    )
                })
                .collect();
            let _ = write!(
                f.svg,
                r#"<polyline class="quantile" data-q="{qname}" data-f="{}" fill="none" stroke="{}" stroke-width="{}" stroke-dasharray="{}" points="{}"><title>{} {qname}</title></polyline>"#,
                f_name(*fun),
                f_color(*fun),
                if qi == 3 { 1.0 } else { 1.6 },
                DASHES[qi],
                points.join(" "),
                f_name(*fun),
            );
        }
        legend.push((f_name(*fun).to_string(), Swatch::Line(f_color(*fun), "")));
    }
    for (qi, (_, qname)) in QUANTILES.iter().enumerate() {
        legend.push((qname.to_string(), Swatch::Line("#495057", DASHES[qi])));
    }
    f.legend(&legend);
    f.finish()
}
