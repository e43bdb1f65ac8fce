//! A report directory: every plot of a history, its timeline, and an `index.html` that
//! links the verdict, the plots, the timeline and the run's other files (node logs...).
//! `skein jepsen run`, `skein check --plots` and `skein sim run --plots` all write it.

use super::timeline::{timeline_page, Mark, Timeline};
use super::{escape, operations, Chart, Shade};
use crate::history::{Event, Process};
use crate::report::Report;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// What a report directory is made of.
pub struct ReportInput<'a> {
    /// The page titles: the command that made the history.
    pub title: String,
    pub events: &'a [Event],
    pub shades: &'a [Shade],
    /// `time (s)`, or `simulated time (s)`.
    pub time_label: &'a str,
    /// Row names by process; processes missing here are named by [`super::roles::infer`].
    pub roles: BTreeMap<Process, String>,
    /// The checker's verdict, if it ran: its anomalies' examples are marked on the timeline.
    pub report: Option<&'a Report>,
    /// The verdict in words (first line: the verdict), shown on the index page.
    pub verdict: String,
    /// Whether the run passed (the index page's colour).
    pub valid: bool,
    /// More violations to mark (a simulator's invariants).
    pub marks: Vec<Mark>,
    /// Other files to link: (path relative to the directory, what it is).
    pub files: Vec<(String, String)>,
}

/// The pictures, in index order: file, title, what it tells.
pub const PLOTS: [(&str, &str, &str); 5] = [
    (
        "latency.svg",
        "Latency, every operation",
        "One mark per operation at its invocation, height its latency on a log scale. Faults show as columns of slow marks: a failover holds sends until a new leader is elected; triangles (info) at the client's timeout are operations whose outcome is unknown.",
    ),
    (
        "latency-quantiles.svg",
        "Latency quantiles",
        "p50, p95, p99 and max of each operation per time window: how much of the traffic a fault slows, and for how long after it heals.",
    ),
    (
        "rate.svg",
        "Throughput",
        "Operations completed per second by operation and outcome. A fault that stops a partition drops its sends to zero; info and fail lines rise while it lasts.",
    ),
    (
        "unseen.svg",
        "Unseen records",
        "Acknowledged records that no reader has returned yet, per partition. It climbs while a failover hides new data from readers and falls when they catch up; a line that stays up at the end is acknowledged data nobody found.",
    ),
    (
        "lag.svg",
        "Consumer lag",
        "Offsets between the acknowledged log end and the most advanced reader (solid) or the group's committed offset (dashed), per partition.",
    ),
];

/// The marks of the checker's anomalies: one per example, naming its operations.
pub fn report_marks(report: &Report) -> Vec<Mark> {
    let mut out = Vec::new();
    for kind in report.found() {
        for (i, indexes) in report.example_indexes(kind).into_iter().enumerate() {
            out.push(Mark {
                label: format!("{} #{}", kind.name(), i + 1),
                indexes,
                at: None,
            });
        }
    }
    out
}

/// Writes the plots, `timeline.html` and `index.html` into `dir` (created if missing);
/// returns the names of the files written.
pub fn write_dir(dir: &Path, input: &ReportInput<'_>) -> std::io::Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    let ops = operations(input.events);
    let chart = Chart::new(input.events, input.shades, input.time_label);
    let svgs = [
        super::latency_svg(&ops, &chart),
        super::latency_quantiles_svg(&ops, &chart),
        super::rate_svg(&ops, &chart),
        super::unseen_svg(input.events, &chart),
        super::lag_svg(input.events, &chart),
    ];
    let mut written = Vec::new();
    for ((name, _, _), svg) in PLOTS.iter().zip(svgs) {
        std::fs::write(dir.join(name), svg)?;
        written.push(name.to_string());
    }
    let mut roles = super::roles::infer(input.events);
    roles.extend(input.roles.clone());
    let mut marks = input.report.map(report_marks).unwrap_or_default();
    marks.extend(input.marks.iter().cloned());
    let page = timeline_page(&Timeline {
        title: &input.title,
        time_label: input.time_label,
        t_max: chart.t_max,
        ops: &ops,
        shades: input.shades,
        roles: &roles,
        marks: &marks,
    });
    std::fs::write(dir.join("timeline.html"), page)?;
    written.push("timeline.html".into());
    std::fs::write(dir.join("index.html"), index_html(input, &marks))?;
    written.push("index.html".into());
    Ok(written)
}

const STYLE: &str =
    "body{font-family:sans-serif;font-size:14px;margin:16px 24px;color:#212529;max-width:1060px}\
h1{font-size:20px;margin:0 0 8px}h2{font-size:16px;margin:22px 0 4px}\
.verdict{padding:8px 12px;border-radius:4px;font-weight:bold;font-size:16px}\
.pass{background:#d3f9d8;color:#2b8a3e}.fail{background:#ffe3e3;color:#c92a2a}\
pre{background:#f8f9fa;padding:8px;overflow-x:auto;font-size:12px}\
img{border:1px solid #dee2e6;max-width:100%}p.what{margin:2px 0 6px;color:#495057}\
ul.files li{margin:2px 0}";

fn index_html(input: &ReportInput<'_>, marks: &[Mark]) -> String {
    let mut h = String::new();
    let title = escape(&input.title);
    let (class, first) = match input.verdict.lines().next() {
        Some(l) => (if input.valid { "pass" } else { "fail" }, l.to_string()),
        None => ("pass", String::new()),
    };
    let _ = write!(
        h,
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>{STYLE}</style></head><body><h1>{title}</h1><p id="verdict" class="verdict {class}">{}</p>"#,
        escape(&first)
    );
    let _ = write!(
        h,
        r#"<details><summary>the whole verdict</summary><pre id="verdict-text">{}</pre></details>"#,
        escape(&input.verdict)
    );
    let events = input.events.len();
    let _ = write!(
        h,
        r#"<p>{events} history events, {} faults; {} violation marks on the timeline. Times are {} from the start of the history.</p><ul class="toc"><li><a href="timeline.html">timeline</a>{}</li>"#,
        input.shades.len(),
        marks.len(),
        if input.time_label.starts_with("simulated") {
            "simulated seconds"
        } else {
            "seconds"
        },
        if marks.is_empty() {
            ""
        } else {
            r#" (<a href="timeline.html#sel=violation">at the first violation</a>)"#
        }
    );
    for (file, name, _) in PLOTS {
        let _ = write!(h, r##"<li><a href="#{file}">{name}</a></li>"##);
    }
    h.push_str("</ul>");
    for (file, name, what) in PLOTS {
        let _ = write!(
            h,
            r#"<h2 id="{file}">{name}</h2><p class="what">{} <a href="{file}">open</a></p><img src="{file}" alt="{name}">"#,
            escape(what)
        );
    }
    h.push_str(r#"<h2>Files</h2><ul class="files">"#);
    for (path, what) in &input.files {
        let _ = write!(
            h,
            r#"<li><a href="{}">{}</a>: {}</li>"#,
            escape(path),
            escape(path),
            escape(what)
        );
    }
    h.push_str("</ul></body></html>\n");
    h
}

/// A fault as `nemesis.jsonl` (written by `skein jepsen run`) holds it.
#[derive(serde::Deserialize)]
struct FaultLine {
    kind: String,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    node: Option<String>,
    start: u64,
    end: u64,
}

/// Reads fault windows from JSON Lines of `{"kind", "start", "end"}` (ns on the history's
/// clock) with the target in `label` (`kind target`) or `node`: `nemesis.jsonl`.
pub fn read_faults(text: &str) -> Result<Vec<Shade>, String> {
    let mut out = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let f: FaultLine =
            serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
        let target = match (&f.label, &f.node) {
            (Some(l), _) => l
                .strip_prefix(f.kind.as_str())
                .unwrap_or(l)
                .trim()
                .to_string(),
            (None, Some(n)) => n.clone(),
            (None, None) => String::new(),
        };
        out.push(Shade {
            start: f.start,
            end: f.end.max(f.start),
            kind: f.kind,
            target,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_read_back_from_nemesis_lines() {
        let text = r#"{"kind":"link","target":"leader <-> node #1","node":"broker-2","links":[["broker-2","controller-1"]],"start":5,"end":9,"label":"link broker-2<->controller-1"}

{"kind":"kill","node":"broker-1","start":20,"end":30}"#;
        let f = read_faults(text).unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!(
            (f[0].kind.as_str(), f[0].target.as_str()),
            ("link", "broker-2<->controller-1")
        );
        assert_eq!(
            (f[1].target.as_str(), f[1].start, f[1].end),
            ("broker-1", 20, 30)
        );
        assert!(read_faults("{").unwrap_err().starts_with("line 1"));
    }
}
