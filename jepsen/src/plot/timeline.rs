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
    let mut by_name: BTreeMap<String, Vec<Process>> = BTreeMap::new();
    for p in rows.keys() {
        by_name.entry(name(p)).or_default().push(*p);
    }
    let mut merged: Vec<(String, Vec<Process>)> = Vec::new();
    for (n, procs) in by_name {
        for (k, group) in share_rows(&procs, |p| span(&rows[p]))
            .into_iter()
            .enumerate()
        {
            let label = if k == 0 {
                n.clone()
            } else {
                format!("{n} ({})", k + 1)
            };
            merged.push((label, group));
        }
    }
    // Producers, then consumers, then group members, each in number order; natural
    // order for the numbers within a name ("producer 10" after "producer 9").
    merged.sort_by_key(|(n, procs)| (role_rank(n), natural(n), procs[0]));
    let rows: Vec<serde_json::Value> = merged
        .into_iter()
        .map(|(n, procs)| {
            let ops: Vec<&serde_json::Value> = procs.iter().flat_map(|p| &rows[p]).collect();
            json!({"name": n, "processes": procs, "ops": ops})
        })
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

/// First invocation and last completion (s) of a row's operations.
fn span(ops: &[serde_json::Value]) -> (f64, f64) {
    let at = |o: &serde_json::Value, i: usize| o[i].as_f64().unwrap_or(0.0);
    let start = ops.iter().map(|o| at(o, 0)).fold(f64::INFINITY, f64::min);
    let end = ops.iter().map(|o| at(o, 1)).fold(0.0, f64::max);
    (start, end)
}

/// Processes of one role share rows: each goes on the first row whose last process ended
/// before it started (a replaced producer, a member's next incarnation, the final reads
/// after a consumer), so a role takes as many rows as it had processes at once.
pub fn share_rows<P: Copy>(procs: &[P], span: impl Fn(&P) -> (f64, f64)) -> Vec<Vec<P>> {
    let mut order: Vec<(f64, f64, P)> = procs
        .iter()
        .map(|p| {
            let (a, b) = span(p);
            (a, b, *p)
        })
        .collect();
    order.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut rows: Vec<(f64, Vec<P>)> = Vec::new();
    for (a, b, p) in order {
        match rows.iter_mut().find(|(end, _)| *end <= a) {
            Some(row) => {
                row.0 = b;
                row.1.push(p);
            }
            None => rows.push((b, vec![p])),
        }
    }
    rows.into_iter().map(|(_, ps)| ps).collect()
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
    fn processes_of_one_role_share_rows_when_they_do_not_overlap() {
        // (process, start, end): 1 then 2 in turn, 3 overlapping 1, 4 after everyone.
        let spans = [
            (1u64, 0.0, 5.0),
            (2, 5.0, 9.0),
            (3, 4.0, 6.0),
            (4, 10.0, 11.0),
        ];
        let procs: Vec<u64> = spans.iter().map(|s| s.0).collect();
        let rows = share_rows(&procs, |p| {
            let s = spans.iter().find(|s| s.0 == *p).unwrap();
            (s.1, s.2)
        });
        assert_eq!(rows, vec![vec![1, 2, 4], vec![3]]);
    }

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
