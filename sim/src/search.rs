//! Time to bug: how much search a bug costs to find, the benchmark of the simulator as a
//! bug finder (issue 47; `skein sim zoo --time-to-bug`, bench/search.sh, docs/search.md).
//!
//! An *attempt* runs seeds one after another from its first seed until a run fails a
//! safety invariant (a *finding*) or a cap (seeds or CPU time) runs out. Attempts of one
//! measurement start at disjoint seeds, so they are independent samples; the table gives
//! the median and worst over them, a capped attempt counting as worse than any finding.
//! Running attempts and timing them needs threads and a CPU clock: that is node's
//! `skein sim zoo`; this module holds the results and their table.

use crate::time::{Human, SimTime};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The first safety violation of the run that ended an attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub seed: u64,
    pub invariant: String,
    /// Simulated time of the violation.
    pub at: SimTime,
}

/// One attempt: from `first_seed`, `seeds` runs costing `cpu_s` CPU-seconds, ending at
/// `found` or at a cap.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub first_seed: u64,
    pub seeds: u64,
    pub cpu_s: f64,
    pub found: Option<Finding>,
    /// Seeds whose safety failure the correct core has too (same seed, no bug): not the
    /// bug's finding, so the attempt went on; each is worth a look on its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub correct_core_fails: Vec<u64>,
}

/// A bug's attempts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimeToBug {
    pub bug: String,
    pub attempts: Vec<Attempt>,
}

/// The caps of one measurement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Caps {
    pub seeds: u64,
    pub cpu_s: f64,
}

impl TimeToBug {
    /// Attempts that found the bug.
    pub fn found(&self) -> usize {
        self.attempts.iter().filter(|a| a.found.is_some()).count()
    }

    /// The median and worst of `f` over attempts; a capped attempt counts as worse than
    /// any finding (`None`). The median of an even count is the upper one.
    fn median_worst(&self, f: impl Fn(&Attempt) -> f64) -> (Option<f64>, Option<f64>) {
        let mut v: Vec<Option<f64>> = self
            .attempts
            .iter()
            .map(|a| a.found.as_ref().map(|_| f(a)))
            .collect();
        // Found (Some) before capped (None), each in increasing order.
        v.sort_by(|a, b| match (a, b) {
            (Some(x), Some(y)) => x.total_cmp(y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
        let median = v.get(v.len() / 2).copied().flatten();
        let worst = v.last().copied().flatten();
        (median, worst)
    }

    pub fn seeds(&self) -> (Option<f64>, Option<f64>) {
        self.median_worst(|a| a.seeds as f64)
    }

    pub fn cpu_s(&self) -> (Option<f64>, Option<f64>) {
        self.median_worst(|a| a.cpu_s)
    }
}

/// The Markdown table of `rows` measured under `caps`.
pub fn table(rows: &[TimeToBug], caps: Caps) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "| bug | attempts finding it | seeds to find: median | worst | CPU-s to find: median | worst | first findings (invariant, seed, sim time) |");
    let _ = writeln!(o, "| --- | --- | --- | --- | --- | --- | --- |");
    let seeds = |v: Option<f64>| v.map_or(format!("> {}", caps.seeds), |s| format!("{s:.0}"));
    let cpu =
        |v: Option<f64>| v.map_or(format!("> cap ({:.0})", caps.cpu_s), |s| format!("{s:.1}"));
    for r in rows {
        let (sm, sw) = r.seeds();
        let (cm, cw) = r.cpu_s();
        let mut found: Vec<String> = r
            .attempts
            .iter()
            .filter_map(|a| a.found.as_ref())
            .map(|f| format!("{} ({}, {})", f.invariant, f.seed, Human(f.at)))
            .collect();
        found.dedup();
        let also: Vec<u64> = r
            .attempts
            .iter()
            .flat_map(|a| a.correct_core_fails.iter().copied())
            .collect();
        let mut note = if found.is_empty() {
            "-".to_string()
        } else {
            found.join("; ")
        };
        if !also.is_empty() {
            let _ = write!(
                note,
                "; the correct core fails safety too on seeds {also:?}"
            );
        }
        let _ = writeln!(
            o,
            "| {} | {}/{} | {} | {} | {} | {} | {note} |",
            r.bug,
            r.found(),
            r.attempts.len(),
            seeds(sm),
            seeds(sw),
            cpu(cm),
            cpu(cw)
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(seeds: u64, cpu_s: f64, found: bool) -> Attempt {
        Attempt {
            first_seed: 0,
            seeds,
            cpu_s,
            found: found.then(|| Finding {
                seed: seeds - 1,
                invariant: "acked-write-lost".into(),
                at: 5_000_000_000,
            }),
            correct_core_fails: Vec::new(),
        }
    }

    #[test]
    fn capped_attempts_count_as_worse_than_any_finding() {
        let caps = Caps {
            seeds: 300,
            cpu_s: 120.0,
        };
        let row = TimeToBug {
            bug: "b".into(),
            attempts: vec![
                attempt(7, 2.0, true),
                attempt(300, 90.0, false),
                attempt(3, 1.0, true),
            ],
        };
        assert_eq!(row.seeds(), (Some(7.0), None));
        assert_eq!(row.cpu_s(), (Some(2.0), None));
        let t = table(&[row], caps);
        assert!(
            t.contains("| b | 2/3 | 7 | > 300 | 2.0 | > cap (120) |"),
            "{t}"
        );
        let most_capped = TimeToBug {
            bug: "c".into(),
            attempts: vec![attempt(300, 9.0, false), attempt(4, 1.5, true)],
        };
        // The upper median of two: capped.
        assert_eq!(most_capped.seeds(), (None, None));
    }
}
