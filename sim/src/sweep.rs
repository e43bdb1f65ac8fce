//! Sweep results: what a sweep keeps of each seed, written as JSON Lines so shards run on
//! different machines merge into one report.
//!
//! A results file (`skein sim sweep --json FILE`) is one header line ([`SweepHeader`]: format
//! version, the seed range, the shard, the flags every seed ran with) followed by one
//! [`SeedResult`] per seed. [`merge`] reads any number of such files (the shards of one
//! sweep, in any order), checks that they describe the same sweep, and yields one
//! [`SweepResults`], whose [`Summary`] is the text a single unsharded sweep prints. Wall
//! times are kept per seed but are not part of a result's identity: merged shards equal
//! the unsharded sweep exactly, except for how long each seed took on its machine.
//!
//! Running seeds (worker threads, progress bars) is the command line's business (node's
//! `skein sim sweep`); this module holds only data, so it stays deterministic.

use crate::report::SimReport;
use crate::swarm::SwarmMix;
use crate::time::{Human, SimTime};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Bumped when a field changes meaning; readers refuse other versions.
pub const FORMAT_VERSION: u32 = 1;

/// The first line of a results file: which sweep the seeds belong to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepHeader {
    pub format: u32,
    /// The whole sweep's seed range, `start..end` (end excluded), before sharding.
    pub start: u64,
    pub end: u64,
    /// This file's shard `k` of `m` (1-based); `1/1` for an unsharded sweep or a merge.
    pub shard_k: u64,
    pub shard_m: u64,
    /// The flags every seed ran with, as a replay command would repeat them.
    pub flags: String,
}

impl SweepHeader {
    /// The seeds of the range that shard `k` of `m` runs: those whose position in the range
    /// is `k - 1` modulo `m`. Every seed of the range is in exactly one shard.
    pub fn shard_seeds(start: u64, end: u64, k: u64, m: u64) -> Vec<u64> {
        (start..end).filter(|s| (s - start) % m == k - 1).collect()
    }

    /// The seeds this header's shard covers.
    pub fn seeds(&self) -> Vec<u64> {
        Self::shard_seeds(self.start, self.end, self.shard_k, self.shard_m)
    }
}

/// How a seed ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SeedVerdict {
    /// Every invariant held (or, with a scenario, its `[expect]` was met).
    Pass,
    /// An invariant failed (or the scenario's expectation was not met).
    Fail,
    /// The run could not be made (a bad configuration for this seed, a simulator error).
    Error,
}

/// The earliest violation of a safety invariant in a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirstSafety {
    pub invariant: String,
    /// Simulated nanoseconds from the start of the run.
    pub at: SimTime,
}

/// One seed's result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SeedResult {
    pub seed: u64,
    pub verdict: SeedVerdict,
    /// The invariants that failed, in report order.
    #[serde(default)]
    pub failed: Vec<String>,
    /// The trace hash, as `skein sim run` prints it (16 hex digits).
    pub trace_hash: String,
    pub events: u64,
    /// Simulated time at the end of the run (ns).
    pub sim_time: SimTime,
    /// Wall-clock milliseconds the run took on its machine (not part of its identity).
    pub wall_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_safety: Option<FirstSafety>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The coverage probes the run hit (names, in report order).
    #[serde(default)]
    pub probes: Vec<String>,
    /// The fault atlas entries the run struck (`kind@role/moment`).
    #[serde(default)]
    pub atlas: Vec<String>,
    /// "All copies of committed records destroyed by injected faults" findings (the
    /// report's `copies_destroyed`): not failures, but counted and listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copies_destroyed: Vec<String>,
    /// The seed's fault mix, in a `--swarm` sweep (`SimOpts::swarm_mix`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swarm: Option<SwarmMix>,
}

/// Equal when the runs were the same: everything but the wall time.
impl PartialEq for SeedResult {
    fn eq(&self, o: &Self) -> bool {
        self.seed == o.seed
            && self.verdict == o.verdict
            && self.failed == o.failed
            && self.trace_hash == o.trace_hash
            && self.events == o.events
            && self.sim_time == o.sim_time
            && self.first_safety == o.first_safety
            && self.error == o.error
            && self.probes == o.probes
            && self.atlas == o.atlas
            && self.copies_destroyed == o.copies_destroyed
            && self.swarm == o.swarm
    }
}

impl SeedResult {
    /// The result of a finished run; `ok` is whether it met its expectation.
    pub fn from_report(report: &SimReport, ok: bool, wall_ms: f64) -> Self {
        SeedResult {
            seed: report.seed,
            verdict: if ok {
                SeedVerdict::Pass
            } else {
                SeedVerdict::Fail
            },
            failed: report
                .failed_invariants()
                .into_iter()
                .map(String::from)
                .collect(),
            trace_hash: format!("{:016x}", report.trace_hash),
            events: report.events,
            sim_time: report.sim_time,
            wall_ms,
            first_safety: report
                .violations
                .iter()
                .find(|v| crate::invariants::is_safety(v.invariant))
                .map(|v| FirstSafety {
                    invariant: v.invariant.to_string(),
                    at: v.at,
                }),
            error: None,
            probes: report.probes_hit().into_iter().map(String::from).collect(),
            atlas: report.atlas.iter().map(|(e, _)| e.clone()).collect(),
            copies_destroyed: report.copies_destroyed.clone(),
            swarm: None,
        }
    }

    /// A seed whose run could not be made.
    pub fn from_error(seed: u64, error: String, wall_ms: f64) -> Self {
        SeedResult {
            seed,
            verdict: SeedVerdict::Error,
            failed: Vec::new(),
            trace_hash: format!("{:016x}", 0),
            events: 0,
            sim_time: 0,
            wall_ms,
            first_safety: None,
            error: Some(error),
            probes: Vec::new(),
            atlas: Vec::new(),
            copies_destroyed: Vec::new(),
            swarm: None,
        }
    }

    pub fn ok(&self) -> bool {
        self.verdict == SeedVerdict::Pass
    }

    /// Why the seed failed, in one line.
    pub fn why(&self) -> String {
        match (&self.error, self.failed.is_empty()) {
            (Some(e), _) => e.clone(),
            (None, true) => "expectation not met".into(),
            (None, false) => self.failed.join(", "),
        }
    }
}

/// A whole sweep's results (one file, or shards merged), sorted by seed.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepResults {
    pub header: SweepHeader,
    pub seeds: Vec<SeedResult>,
    /// Seeds of the header's range that no file reported (an incomplete merge).
    pub missing: Vec<u64>,
}

/// Problems reading or merging results files: each names the file and what is wrong.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SweepError {
    #[error("{file}: empty (expected a header line)")]
    Empty { file: String },
    #[error("{file}:{line}: {reason}")]
    Parse {
        file: String,
        line: usize,
        reason: String,
    },
    #[error("{file}: results format {found}, this binary reads format {FORMAT_VERSION}")]
    Version { file: String, found: u32 },
    #[error("{file}: a different sweep ({found}) from {first} ({expected})")]
    Mismatch {
        file: String,
        first: String,
        found: String,
        expected: String,
    },
    #[error("{file}: seed {seed} is not in its shard {k}/{m} of {start}..{end}")]
    ForeignSeed {
        file: String,
        seed: u64,
        k: u64,
        m: u64,
        start: u64,
        end: u64,
    },
    #[error("seed {seed} appears twice ({first} and {second}) with different results (trace {h1} vs {h2}): the shards were not run by the same binary and flags")]
    Conflict {
        seed: u64,
        first: String,
        second: String,
        h1: String,
        h2: String,
    },
    #[error("no results files given")]
    NoFiles,
}

/// Writes a results file: the header, then one line per seed.
pub fn write_results(
    header: &SweepHeader,
    seeds: &[SeedResult],
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    writeln!(out, "{}", serde_json::to_string(header)?)?;
    for s in seeds {
        writeln!(out, "{}", serde_json::to_string(s)?)?;
    }
    Ok(())
}

/// How the last line of a results file starts: the sweep's sometimes-assertions
/// ([`SweepResults::sometimes`]), for readers of the file alone; `sim merge` recomputes it.
pub const SOMETIMES_TRAILER: &str = "{\"sometimes\":";

/// One sometimes-assertion (a probe) over a sweep: how many seeds hit it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sometimes {
    pub name: String,
    /// The source file that marks it (empty for a name this binary does not define).
    pub place: String,
    pub seeds: u64,
}

/// Writes the sometimes trailer line of a results file (after [`write_results`]).
pub fn write_sometimes(
    results: &SweepResults,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let line = serde_json::json!({ "sometimes": results.sometimes() });
    writeln!(out, "{line}")
}

/// Reads one results file (`name` is for error messages).
pub fn read_results(name: &str, text: &str) -> Result<(SweepHeader, Vec<SeedResult>), SweepError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, first) = lines.next().ok_or_else(|| SweepError::Empty {
        file: name.to_string(),
    })?;
    let parse_err = |line: usize, e: serde_json::Error| SweepError::Parse {
        file: name.to_string(),
        line: line + 1,
        reason: e.to_string(),
    };
    // Check the version before the rest of the header, so a newer format says so.
    let version: serde_json::Value = serde_json::from_str(first).map_err(|e| parse_err(0, e))?;
    match version.get("format").and_then(|v| v.as_u64()) {
        Some(v) if v == FORMAT_VERSION as u64 => {}
        Some(v) => {
            return Err(SweepError::Version {
                file: name.to_string(),
                found: v as u32,
            })
        }
        None => {
            return Err(SweepError::Parse {
                file: name.to_string(),
                line: 1,
                reason: "the first line is not a sweep header (no \"format\")".into(),
            })
        }
    }
    let header: SweepHeader = serde_json::from_value(version).map_err(|e| parse_err(0, e))?;
    if header.shard_m == 0 || header.shard_k == 0 || header.shard_k > header.shard_m {
        return Err(SweepError::Parse {
            file: name.to_string(),
            line: 1,
            reason: format!("bad shard {}/{}", header.shard_k, header.shard_m),
        });
    }
    let mut seeds = Vec::new();
    for (i, line) in lines {
        // The sometimes-assertions trailer is derived from the seeds: recomputed, not read.
        if line.starts_with(SOMETIMES_TRAILER) {
            continue;
        }
        let r: SeedResult = serde_json::from_str(line).map_err(|e| parse_err(i, e))?;
        let in_range = (header.start..header.end).contains(&r.seed);
        if !in_range || (r.seed - header.start) % header.shard_m != header.shard_k - 1 {
            return Err(SweepError::ForeignSeed {
                file: name.to_string(),
                seed: r.seed,
                k: header.shard_k,
                m: header.shard_m,
                start: header.start,
                end: header.end,
            });
        }
        seeds.push(r);
    }
    Ok((header, seeds))
}

/// Merges results files (name, contents) of one sweep: the same range and flags, shards of
/// any count (an unsharded file merges with shards too). A seed reported twice must have
/// the same result; seeds nobody reported are listed in `missing`.
pub fn merge(files: &[(String, String)]) -> Result<SweepResults, SweepError> {
    let mut header: Option<(String, SweepHeader)> = None;
    let mut by_seed: BTreeMap<u64, (String, SeedResult)> = BTreeMap::new();
    for (name, text) in files {
        let (h, seeds) = read_results(name, text)?;
        match &header {
            None => header = Some((name.clone(), h.clone())),
            Some((first, h0)) => {
                if (h0.start, h0.end, &h0.flags) != (h.start, h.end, &h.flags) {
                    let describe = |h: &SweepHeader| {
                        format!("seeds {}..{}, flags {:?}", h.start, h.end, h.flags)
                    };
                    return Err(SweepError::Mismatch {
                        file: name.clone(),
                        first: first.clone(),
                        found: describe(&h),
                        expected: describe(h0),
                    });
                }
            }
        }
        for r in seeds {
            match by_seed.get(&r.seed) {
                Some((other, prev)) if *prev != r => {
                    return Err(SweepError::Conflict {
                        seed: r.seed,
                        first: other.clone(),
                        second: name.clone(),
                        h1: prev.trace_hash.clone(),
                        h2: r.trace_hash.clone(),
                    })
                }
                Some(_) => {}
                None => {
                    by_seed.insert(r.seed, (name.clone(), r));
                }
            }
        }
    }
    let (_, h) = header.ok_or(SweepError::NoFiles)?;
    let header = SweepHeader {
        shard_k: 1,
        shard_m: 1,
        ..h
    };
    let missing = (header.start..header.end)
        .filter(|s| !by_seed.contains_key(s))
        .collect();
    Ok(SweepResults {
        header,
        seeds: by_seed.into_values().map(|(_, r)| r).collect(),
        missing,
    })
}

/// The report a sweep prints: counts, failures by invariant, every failing seed with the
/// command that replays it. The same text for one sweep and for its merged shards.
pub struct Summary<'a> {
    pub results: &'a SweepResults,
}

impl SweepResults {
    pub fn summary(&self) -> Summary<'_> {
        Summary { results: self }
    }

    pub fn failing(&self) -> impl Iterator<Item = &SeedResult> {
        self.seeds.iter().filter(|r| !r.ok())
    }

    /// Seeds failing each invariant (and `error` for runs that could not be made).
    pub fn by_invariant(&self) -> BTreeMap<String, u64> {
        let mut by: BTreeMap<String, u64> = BTreeMap::new();
        for r in self.failing() {
            for inv in &r.failed {
                *by.entry(inv.clone()).or_default() += 1;
            }
            if r.verdict == SeedVerdict::Error {
                *by.entry("error".into()).or_default() += 1;
            }
        }
        by
    }

    /// Seeds whose first safety violation fell on each invariant.
    pub fn safety_failures(&self) -> usize {
        self.seeds
            .iter()
            .filter(|r| r.first_safety.is_some())
            .count()
    }

    /// Per probe (every probe the core defines, hit or not, then any other name a file
    /// reported), how many seeds hit it.
    pub fn probe_runs(&self) -> Vec<(String, u64)> {
        let mut runs: BTreeMap<String, u64> = BTreeMap::new();
        for r in &self.seeds {
            for p in &r.probes {
                *runs.entry(p.clone()).or_default() += 1;
            }
        }
        let mut out: Vec<(String, u64)> = skein_core::probe::Probe::ALL
            .iter()
            .map(|p| (p.name().to_string(), runs.remove(p.name()).unwrap_or(0)))
            .collect();
        out.extend(runs);
        out
    }

    /// Every probe (sometimes-assertion) with its place and how many seeds hit it, in
    /// report order (0: never hit).
    pub fn sometimes(&self) -> Vec<Sometimes> {
        use skein_core::probe::Probe;
        self.probe_runs()
            .into_iter()
            .map(|(name, seeds)| Sometimes {
                place: Probe::ALL
                    .iter()
                    .find(|p| p.name() == name)
                    .map_or(String::new(), |p| p.place().to_string()),
                name,
                seeds,
            })
            .collect()
    }

    /// Per fault kind, the (role/moment, seeds) where it struck, most seeds first.
    pub fn atlas(&self) -> BTreeMap<String, Vec<(String, u64)>> {
        let mut runs: BTreeMap<&str, u64> = BTreeMap::new();
        for r in &self.seeds {
            for e in &r.atlas {
                *runs.entry(e.as_str()).or_default() += 1;
            }
        }
        let mut by_kind: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
        for (e, n) in runs {
            let (kind, at) = e.split_once('@').unwrap_or((e, "?"));
            by_kind
                .entry(kind.to_string())
                .or_default()
                .push((at.to_string(), n));
        }
        for v in by_kind.values_mut() {
            v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        }
        by_kind
    }

    /// Total wall time of the runs (ms), added over seeds: the CPU a sweep costs.
    pub fn wall_ms(&self) -> f64 {
        self.seeds.iter().map(|r| r.wall_ms).sum()
    }
}

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.results;
        let h = &r.header;
        let failing: Vec<&SeedResult> = r.failing().collect();
        let events: u64 = r.seeds.iter().map(|s| s.events).sum();
        let shard = if h.shard_m > 1 {
            format!(" shard {}/{}", h.shard_k, h.shard_m)
        } else {
            String::new()
        };
        writeln!(
            f,
            "{} seeds ({}..{}{shard}), {} passed, {} failed ({} by a safety invariant, {} by progress only: {}), {} events",
            r.seeds.len(),
            h.start,
            h.end,
            r.seeds.len() - failing.len(),
            failing.len(),
            r.safety_failures(),
            failing
                .iter()
                .filter(|s| s.verdict == SeedVerdict::Fail && s.first_safety.is_none())
                .count(),
            crate::invariants::PROGRESS.join("/"),
            events
        )?;
        if !r.missing.is_empty() {
            let shown: Vec<String> = r.missing.iter().take(10).map(u64::to_string).collect();
            writeln!(
                f,
                "  INCOMPLETE: {} seeds of the range have no result (first: {}{})",
                r.missing.len(),
                shown.join(", "),
                if r.missing.len() > 10 { ", ..." } else { "" }
            )?;
        }
        for (inv, n) in r.by_invariant() {
            writeln!(f, "  {inv}: {n} seeds")?;
        }
        let destroyed: Vec<&SeedResult> = r
            .seeds
            .iter()
            .filter(|s| !s.copies_destroyed.is_empty())
            .collect();
        if !destroyed.is_empty() {
            writeln!(
                f,
                "all copies of committed records destroyed by injected faults (not failures): {} seeds",
                destroyed.len()
            )?;
            for s in destroyed {
                writeln!(f, "  seed {}: {}", s.seed, s.copies_destroyed.join("; "))?;
            }
        }
        let probes = r.sometimes();
        let never: Vec<String> = probes
            .iter()
            .filter(|s| s.seeds == 0)
            .map(|s| format!("{} ({})", s.name, s.place))
            .collect();
        writeln!(
            f,
            "probes (sometimes-assertions): {} of {} hit by at least one seed (seeds hitting each):",
            probes.len() - never.len(),
            probes.len()
        )?;
        for s in probes.iter().filter(|s| s.seeds > 0) {
            writeln!(f, "  {:<40} {}", s.name, s.seeds)?;
        }
        if !never.is_empty() {
            writeln!(f, "  NEVER HIT: {}", never.join(", "))?;
        }
        let atlas = r.atlas();
        if !atlas.is_empty() {
            writeln!(
                f,
                "fault atlas: where each fault kind struck (target role/cluster moment: seeds):"
            )?;
            for (kind, at) in atlas {
                let cells: Vec<String> = at.iter().map(|(a, n)| format!("{a} {n}")).collect();
                writeln!(f, "  {kind:<18} {}", cells.join(", "))?;
            }
        }
        for o in failing {
            let first = o
                .first_safety
                .as_ref()
                .map(|s| {
                    format!(
                        " (first safety violation: {} at {})",
                        s.invariant,
                        Human(s.at)
                    )
                })
                .unwrap_or_default();
            writeln!(
                f,
                "FAIL seed {}: {}{first}\n  replay: skein sim replay --seed {}{}",
                o.seed,
                o.why(),
                o.seed,
                h.flags
            )?;
            if let Some(mix) = &o.swarm {
                writeln!(f, "  swarm mix: {mix}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(seed: u64, ok: bool) -> SeedResult {
        SeedResult {
            seed,
            verdict: if ok {
                SeedVerdict::Pass
            } else {
                SeedVerdict::Fail
            },
            failed: if ok { vec![] } else { vec!["liveness".into()] },
            trace_hash: format!("{:016x}", seed * 7919),
            events: 100 + seed,
            sim_time: 1_000,
            wall_ms: seed as f64,
            first_safety: None,
            error: None,
            probes: if seed.is_multiple_of(2) {
                vec!["replica.isr-shrink".into()]
            } else {
                vec![]
            },
            atlas: vec![format!(
                "crash@leader/{}",
                ["steady", "electing"][seed as usize % 2]
            )],
            copies_destroyed: Vec::new(),
            swarm: seed.is_multiple_of(3).then(|| SwarmMix::draw(seed)),
        }
    }

    fn file(start: u64, end: u64, k: u64, m: u64, flags: &str) -> String {
        let header = SweepHeader {
            format: FORMAT_VERSION,
            start,
            end,
            shard_k: k,
            shard_m: m,
            flags: flags.into(),
        };
        let seeds: Vec<SeedResult> = header
            .seeds()
            .into_iter()
            .map(|s| result(s, s % 5 != 0))
            .collect();
        let mut out = Vec::new();
        write_results(&header, &seeds, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn shards_cover_every_seed_once() {
        for m in 1..=7 {
            let mut all: Vec<u64> = (1..=m)
                .flat_map(|k| SweepHeader::shard_seeds(10, 53, k, m))
                .collect();
            all.sort_unstable();
            assert_eq!(all, (10..53).collect::<Vec<_>>(), "m = {m}");
        }
    }

    #[test]
    fn merged_shards_equal_the_whole_sweep() {
        let whole = merge(&[("all".into(), file(0, 40, 1, 1, " --duration 5s"))]).unwrap();
        let shards: Vec<(String, String)> = [3, 1, 4, 2]
            .iter()
            .map(|&k| (format!("s{k}"), file(0, 40, k, 4, " --duration 5s")))
            .collect();
        let merged = merge(&shards).unwrap();
        assert_eq!(merged, whole);
        assert!(merged.missing.is_empty());
        assert_eq!(merged.summary().to_string(), whole.summary().to_string());
        assert!(whole
            .summary()
            .to_string()
            .contains("40 seeds (0..40), 32 passed, 8 failed"));
    }

    #[test]
    fn a_missing_shard_is_reported_not_hidden() {
        let merged = merge(&[
            ("s1".into(), file(0, 20, 1, 2, "")),
            ("s1-again".into(), file(0, 20, 1, 2, "")),
        ])
        .unwrap();
        assert_eq!(
            merged.missing,
            (0..20).filter(|s| s % 2 == 1).collect::<Vec<_>>()
        );
        assert!(merged
            .summary()
            .to_string()
            .contains("INCOMPLETE: 10 seeds"));
    }

    #[test]
    fn mismatched_or_conflicting_files_are_refused_by_name() {
        let e = merge(&[
            ("a".into(), file(0, 20, 1, 2, "")),
            ("b".into(), file(0, 20, 2, 2, " --bug x")),
        ])
        .unwrap_err();
        assert!(
            matches!(e, SweepError::Mismatch { ref file, .. } if file == "b"),
            "{e}"
        );
        let changed = file(0, 20, 1, 1, "").replace("\"events\":104", "\"events\":9");
        let e = merge(&[("a".into(), file(0, 20, 1, 1, "")), ("c".into(), changed)]).unwrap_err();
        assert!(matches!(e, SweepError::Conflict { seed: 4, .. }), "{e}");
        let e = read_results("x", "").unwrap_err();
        assert_eq!(e.to_string(), "x: empty (expected a header line)");
        let e = read_results("x", "{\"format\":99}").unwrap_err();
        assert!(matches!(e, SweepError::Version { found: 99, .. }));
        let mut bad = file(0, 4, 1, 1, "");
        bad.push_str("{not json\n");
        let e = read_results("bad.jsonl", &bad).unwrap_err();
        assert!(e.to_string().starts_with("bad.jsonl:6:"), "{e}");
        let foreign = file(0, 4, 1, 2, "").replace("\"seed\":2", "\"seed\":3");
        assert!(matches!(
            read_results("f", &foreign).unwrap_err(),
            SweepError::ForeignSeed { seed: 3, .. }
        ));
    }

    #[test]
    fn the_sometimes_trailer_is_written_skipped_on_reading_and_lists_never_hit_places() {
        let text = file(0, 12, 1, 1, " --swarm");
        let whole = merge(&[("a".into(), text.clone())]).unwrap();
        let mut with_trailer = text.into_bytes();
        write_sometimes(&whole, &mut with_trailer).unwrap();
        let with_trailer = String::from_utf8(with_trailer).unwrap();
        assert!(with_trailer
            .lines()
            .last()
            .unwrap()
            .starts_with(SOMETIMES_TRAILER));
        assert_eq!(merge(&[("a".into(), with_trailer)]).unwrap(), whole);
        let s = whole.sometimes();
        let shrink = s.iter().find(|s| s.name == "replica.isr-shrink").unwrap();
        assert_eq!(shrink.seeds, 6);
        assert_eq!(shrink.place, "core/src/replica/leader.rs");
        let summary = whole.summary().to_string();
        assert!(
            summary
                .contains("NEVER HIT: replica.truncate-divergent (core/src/replica/follower.rs)"),
            "{summary}"
        );
        // A failing swarm seed prints its mix under its replay command.
        assert!(summary.contains(&format!(
            "replay: skein sim replay --seed 0 --swarm\n  swarm mix: {}",
            SwarmMix::draw(0)
        )));
    }

    #[test]
    fn wall_time_is_not_part_of_a_result() {
        let mut a = result(3, true);
        let b = result(3, true);
        a.wall_ms = 12345.0;
        assert_eq!(a, b);
    }
}
