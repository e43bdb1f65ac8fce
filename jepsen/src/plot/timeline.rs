//! The timeline page (Jepsen's `timeline.html`): one row per process, named by its role,
//! each operation a bar from invocation to completion; faults in labelled lanes on top and
//! as bands over the rows; the operations a violation names outlined, with a marker. The
//! page carries its data as JSON and a small inlined script draws the window in view: rows
//! with no operation in it fold into one line, the wheel and the buttons zoom, and the URL
//! hash keeps the view (`#t=12.5-20`, `#sel=violation`). Works offline, no library.

use super::{f_color, f_name, kind_name, Operation, Shade};
use crate::history::{Index, Process};
use serde_json::json;
use std::collections::BTreeMap;

const PAGE: &str = include_str!("timeline.html");
const SCRIPT: &str = include_str!("timeline.js");

/// A violation to mark: its name and the history indexes of the operations involved
/// (invocations or completions), or only a time (a simulator invariant's violation).
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    pub label: String,
    pub indexes: Vec<Index>,
    pub at: Option<u64>,
}

/// What the timeline draws.
pub struct Timeline<'a> {
    pub title: &'a str,
    pub time_label: &'a str,
    pub t_max: f64,
    pub ops: &'a [Operation],
    pub shades: &'a [Shade],
    pub roles: &'a BTreeMap<Process, String>,
    pub marks: &'a [Mark],
}

fn s(t: u64) -> f64 {
    (t as f64 / 1e6).round() / 1e3
}

/// The page's data: rows (one per process, in role order), faults, marks.
fn data(t: &Timeline<'_>) -> serde_json::Value {
    let mut rows: BTreeMap<Process, Vec<serde_json::Value>> = BTreeMap::new();
    let fs = [
        "send",
        "poll",
        "assign",
        "subscribe",
        "commit",
        "crash",
        "txn",
    ];
    for o in t.ops {
        let f = fs.iter().position(|n| *n == f_name(o.f)).unwrap_or(0);
        let k = ["ok", "fail", "info"]
            .iter()
            .position(|n| *n == kind_name(o.kind))
            .unwrap_or(0);
        rows.entry(o.process).or_default().push(json!([
            s(o.start),
            s(o.end),
            f,
            k,
            o.index,
            o.done
        ]));
    }
    let name = |p: &Process| {
        t.roles
            .get(p)
            .cloned()
            .unwrap_or_else(|| format!("process {p}"))
    };
    let mut order: Vec<&Process> = rows.keys().collect();
    // Producers, then consumers, then group members, each in number order; natural
    // order for the numbers within a name ("producer 10" after "producer 9").
    order.sort_by_key(|p| (role_rank(&name(p)), natural(&name(p)), **p));
    let rows: Vec<serde_json::Value> = order
        .into_iter()
        .map(|p| json!({"name": name(p), "process": p, "ops": rows[p]}))
        .collect();
    let faults: Vec<serde_json::Value> = t
        .shades
        .iter()
        .map(|f| json!({"kind": f.kind, "target": f.target, "start": s(f.start), "end": s(f.end.max(f.start))}))
        .collect();
    let marks: Vec<serde_json::Value> = t
        .marks
        .iter()
        .map(|m| json!({"label": m.label, "indexes": m.indexes, "at": m.at.map(s)}))
        .collect();
    let colors: Vec<&str> = fs
        .iter()
        .map(|n| {
            f_color(match *n {
                "send" => crate::history::Function::Send,
                "poll" => crate::history::Function::Poll,
                "assign" => crate::history::Function::Assign,
                "subscribe" => crate::history::Function::Subscribe,
                "commit" => crate::history::Function::Commit,
                "crash" => crate::history::Function::Crash,
                _ => crate::history::Function::Txn,
            })
        })
        .collect();
    json!({
        "title": t.title,
        "timeLabel": t.time_label,
        "tMax": t.t_max,
        "fnames": fs,
        "fcolors": colors,
        "rows": rows,
        "faults": faults,
        "marks": marks,
    })
}

fn role_rank(name: &str) -> u8 {
    ["producer", "consumer", "group member", "group reader"]
        .iter()
        .position(|r| name.starts_with(r))
        .unwrap_or(4) as u8
}

/// A sort key reading digit runs as numbers.
fn natural(name: &str) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut num: Option<u64> = None;
    for c in name.chars() {
        if let Some(d) = c.to_digit(10) {
            num = Some(
                num.unwrap_or(0)
                    .saturating_mul(10)
                    .saturating_add(u64::from(d)),
            );
        } else {
            if let Some(n) = num.take() {
                out.push((n, std::mem::take(&mut text)));
            }
            text.push(c);
        }
    }
    out.push((num.unwrap_or(0), text));
    out
}

/// The page, self-contained.
pub fn timeline_page(t: &Timeline<'_>) -> String {
    let json = data(t).to_string().replace("</", "<\\/");
    PAGE.replace("{{TITLE}}", &super::escape(t.title))
        .replace("{{DATA}}", &json)
        .replace("{{SCRIPT}}", SCRIPT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_sort_by_role_then_number() {
        let mut names = vec![
            "group member 1",
            "producer 10",
            "consumer of t-2",
            "producer 9",
        ];
        names.sort_by_key(|n| (role_rank(n), natural(n)));
        assert_eq!(
            names,
            [
                "producer 9",
                "producer 10",
                "consumer of t-2",
                "group member 1"
            ]
        );
    }
}
