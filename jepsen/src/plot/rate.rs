//! Throughput (Jepsen's `rate`): completed operations per second, one line per operation
//! and outcome, coloured by operation and dashed by outcome.

use super::axis::{nice_step, trim, LinAxis};
use super::frame::{Chart, Frame, Swatch};
use super::{f_color, f_name, kind_name, Operation};
use crate::history::EventType;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Dash pattern by outcome: ok solid, info dashed, fail dotted.
pub fn dash(kind: EventType) -> &'static str {
    match kind {
        EventType::Ok | EventType::Invoke => "",
        EventType::Info => "6 3",
        EventType::Fail => "2 2",
    }
}

/// The bucket width: about 150 buckets over the run, at least 0.5 s.
pub fn rate_bucket(t_max: f64) -> f64 {
    nice_step(t_max, 150).max(0.5)
}

pub fn rate_svg(ops: &[Operation], chart: &Chart) -> String {
    let width = rate_bucket(chart.t_max);
    let buckets = ((chart.t_max / width).ceil() as usize).max(1);
    let mut series: BTreeMap<_, Vec<u64>> = BTreeMap::new();
    for o in ops {
        let b = ((o.end as f64 / 1e9 / width) as usize).min(buckets - 1);
        series
            .entry((o.f, o.kind))
            .or_insert_with(|| vec![0; buckets])[b] += 1;
    }
    let per_s = |n: u64| n as f64 / width;
    let y_max = series
        .values()
        .flatten()
        .map(|n| per_s(*n))
        .fold(0.0, f64::max);
    let axis = LinAxis::covering(y_max, 6);
    let mut f = Frame::new(
        chart,
        "Throughput",
        &format!(
            "operations completed per second, in {}-second buckets: colour = operation, line = outcome (solid ok, dashed info, dotted fail)",
            trim(width)
        ),
    );
    f.lin_y(&axis, "operations / s");
    let mut legend = Vec::new();
    for ((fun, kind), counts) in &series {
        let points: Vec<String> = counts
            .iter()
            .enumerate()
            .map(|(i, n)| {
                format!(
                    "{:.1},{:.1}",
                    f.x((i as f64 + 0.5) * width),
                    f.y(axis.fraction(per_s(*n)))
                )
            })
            .collect();
        let _ = write!(
            f.svg,
            r#"<polyline class="rate" data-f="{}" data-type="{}" fill="none" stroke="{}" stroke-width="1.5" stroke-dasharray="{}" points="{}"><title>{} {}</title></polyline>"#,
            f_name(*fun),
            kind_name(*kind),
            f_color(*fun),
            dash(*kind),
            points.join(" "),
            f_name(*fun),
            kind_name(*kind),
        );
        legend.push((
            format!("{} {}", f_name(*fun), kind_name(*kind)),
            Swatch::Line(f_color(*fun), dash(*kind)),
        ));
    }
    f.legend(&legend);
    f.finish()
}
