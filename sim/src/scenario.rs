//! Scenario files: a cluster shape, a workload, fault rates and/or an exact fault schedule,
//! and the expected verdict, in TOML. All parsing of the format lives in this module.
//!
//! ```toml
//! version = 1          # the format version (optional; 1 is the only one so far)
//! name = "zombie-leader"
//! description = "The leader of every partition is isolated; a new one is elected."
//! [cluster]            # all optional: brokers, partitions, replication_factor,
//! brokers = 3          # min_insync_replicas, unclean_leader_election
//! [workload]           # producers, consumers, produce_rate (requests per sim second),
//! producers = 2        # acks (0, 1 or "all"), idempotent; group_members, group_id,
//!                      # group_commit ("sync" or "async"), group_assignor, group_static
//! [run]                # duration, liveness (durations like "30s")
//! duration = "20s"
//! [network]            # latency_min, latency_mean_extra, latency_max, drop, duplicate, reorder
//! [faults]             # random fault rates (see FaultRates); omit for an exact schedule only
//! per_second = 0.0
//! [[fault]]            # exact schedule, any number of entries
//! at = "5s"
//! kind = "partition"   # crash restart pause clock-jump clock-stall clock-skew partition
//! shape = "isolate"    # heal clog bit-flip read-errors disk-full slow-disk
//!                      # member-crash member-restart member-pause (with `member = N`)
//!                      # coordinator-crash; client-pause client-crash client-restart
//!                      # client-isolate (with `client = "producer:N"` / "consumer:N")
//! node = 1             # a broker id, "controller", or "leader" / "leader:P": the broker
//! duration = "4s"      # leading partition P (default 0) when the fault fires
//! [expect]
//! verdict = "pass"     # or "fail", with invariant = "<name>" and/or fail = [...], and
//!                      # optionally hold = [...]: invariants that must not fail, and
//!                      # may = [...]: invariants allowed, not required, to fail
//! ```
//!
//! An invariant in no list must hold under "pass" and is unconstrained under "fail". A
//! field the fault's kind does not take, a zero duration, a missing target, or a fault that
//! outlasts the final heal is an error, never silently ignored.
//!
//! Every error names the file, the line and the field at fault.

use crate::faults::{ClientRef, Fault, FaultRates, LeaderOf, NodeRef, Scheduled, Unsynced};
use crate::net::{NetConfig, Partition};
use crate::time::{parse_duration, SimTime};
use serde::Deserialize;
use std::fmt;
use std::path::Path;
use toml::Spanned;

/// A bad scenario file: where, which field, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ScenarioError {
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// Dotted path of the field, e.g. `fault[2].node`.
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": field `{field}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// The expected outcome of a scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    Pass,
    /// The named invariant must be violated (others may fail too).
    Fail {
        invariant: String,
    },
    /// Every invariant in `fail` must be violated and every one in `hold` must not be
    /// (`[expect] verdict = "fail"` with `fail = [...]` and/or `hold = [...]`).
    /// `may` is allowed alongside `fail`/`hold` to state intent; with a "fail" verdict an
    /// invariant in no list is unconstrained anyway, so `may` changes nothing there.
    Invariants {
        fail: Vec<String>,
        hold: Vec<String>,
        may: Vec<String>,
    },
    /// `verdict = "pass"` with `may = [...]`: every invariant holds except those in `may`,
    /// which are allowed, not required, to fail (acknowledged loss under unclean election).
    PassExcept {
        may: Vec<String>,
    },
}

impl Expect {
    /// Whether a run whose failed invariants are `failed` meets this expectation.
    pub fn met_by(&self, failed: &[&str]) -> bool {
        match self {
            Expect::Pass => failed.is_empty(),
            Expect::Fail { invariant } => failed.contains(&invariant.as_str()),
            Expect::Invariants { fail, hold, .. } => {
                fail.iter().all(|i| failed.contains(&i.as_str()))
                    && hold.iter().all(|i| !failed.contains(&i.as_str()))
            }
            Expect::PassExcept { may } => failed.iter().all(|f| may.iter().any(|m| m == f)),
        }
    }

    /// Whether a report meets this expectation (`None` expects a pass).
    pub fn met(expect: Option<&Expect>, report: &crate::report::SimReport) -> bool {
        expect
            .unwrap_or(&Expect::Pass)
            .met_by(&report.failed_invariants())
    }

    /// The invariants this expectation requires to fail.
    pub fn failing(&self) -> Vec<&str> {
        match self {
            Expect::Pass | Expect::PassExcept { .. } => Vec::new(),
            Expect::Fail { invariant } => vec![invariant.as_str()],
            Expect::Invariants { fail, .. } => fail.iter().map(String::as_str).collect(),
        }
    }
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expect::Pass => write!(f, "pass"),
            Expect::Fail { invariant } => write!(f, "fail ({invariant})"),
            Expect::Invariants { fail, hold, may } => {
                write!(f, "fail ({})", fail.join(", "))?;
                if !hold.is_empty() {
                    write!(f, ", hold ({})", hold.join(", "))?;
                }
                if !may.is_empty() {
                    write!(f, ", may fail ({})", may.join(", "))?;
                }
                Ok(())
            }
            Expect::PassExcept { may } => write!(f, "pass, may fail ({})", may.join(", ")),
        }
    }
}

/// The scenario format version this build reads; files without `version` are version 1.
pub const FORMAT_VERSION: u32 = 1;

/// Acknowledgement level asked by producers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acks {
    None,
    Leader,
    All,
}

/// A parsed scenario: every field optional, so it overrides only what it names.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scenario {
    pub file: String,
    /// Format version (`version = 1`); `None` when the file does not say.
    pub version: Option<u32>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub seed: Option<u64>,
    pub brokers: Option<u32>,
    pub partitions: Option<u32>,
    pub replication_factor: Option<u32>,
    pub min_insync_replicas: Option<u32>,
    pub unclean_leader_election: Option<bool>,
    pub producers: Option<u32>,
    pub consumers: Option<u32>,
    pub group_members: Option<u32>,
    pub group_id: Option<String>,
    pub group_commit: Option<crate::group_client::CommitMode>,
    pub group_assignor: Option<skein_core::group::AssignorKind>,
    pub group_static: Option<bool>,
    pub produce_rate: Option<f64>,
    pub acks: Option<Acks>,
    pub idempotent: Option<bool>,
    pub duration: Option<SimTime>,
    pub liveness: Option<SimTime>,
    pub network: Option<NetConfig>,
    /// Random fault rates; `None` means the scenario does not set them.
    pub rates: Option<FaultRates>,
    /// Exact faults, sorted by time.
    pub schedule: Vec<Scheduled>,
    pub expect: Option<Expect>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    version: Option<Spanned<u32>>,
    name: Option<String>,
    description: Option<String>,
    seed: Option<u64>,
    cluster: Option<RawCluster>,
    workload: Option<RawWorkload>,
    run: Option<RawRun>,
    network: Option<RawNetwork>,
    faults: Option<FaultRates>,
    #[serde(default)]
    fault: Vec<Spanned<RawFault>>,
    expect: Option<Spanned<RawExpect>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    brokers: Option<Spanned<u32>>,
    partitions: Option<Spanned<u32>>,
    replication_factor: Option<Spanned<u32>>,
    min_insync_replicas: Option<Spanned<u32>>,
    unclean_leader_election: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkload {
    producers: Option<u32>,
    consumers: Option<u32>,
    produce_rate: Option<Spanned<f64>>,
    acks: Option<Spanned<toml::Value>>,
    idempotent: Option<bool>,
    group_members: Option<u32>,
    group_id: Option<Spanned<String>>,
    group_commit: Option<Spanned<String>>,
    group_assignor: Option<Spanned<String>>,
    group_static: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRun {
    duration: Option<Spanned<String>>,
    liveness: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetwork {
    latency_min: Option<Spanned<String>>,
    latency_mean_extra: Option<Spanned<String>>,
    latency_max: Option<Spanned<String>>,
    drop: Option<Spanned<f64>>,
    duplicate: Option<Spanned<f64>>,
    reorder: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    verdict: Spanned<String>,
    invariant: Option<Spanned<String>>,
    fail: Option<Spanned<Vec<String>>>,
    hold: Option<Spanned<Vec<String>>>,
    may: Option<Spanned<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
struct RawFault {
    at: Spanned<String>,
    kind: Spanned<String>,
    node: Option<Spanned<NodeRef>>,
    from: Option<Spanned<NodeRef>>,
    to: Option<Spanned<NodeRef>>,
    a: Option<Spanned<Vec<NodeRef>>>,
    b: Option<Spanned<Vec<NodeRef>>>,
    shape: Option<Spanned<String>>,
    power_loss: Option<bool>,
    restart_after: Option<Spanned<String>>,
    duration: Option<Spanned<String>>,
    forward: Option<Spanned<String>>,
    latency: Option<Spanned<String>>,
    ppm: Option<Spanned<i64>>,
    member: Option<Spanned<u32>>,
    client: Option<Spanned<ClientRef>>,
    unsynced: Option<Spanned<String>>,
    replaced_after: Option<Spanned<String>>,
}

impl RawFault {
    /// The optional fields this entry sets, with their spans (for "does not take" errors).
    fn present(&self) -> Vec<(&'static str, std::ops::Range<usize>)> {
        let mut v = Vec::new();
        macro_rules! p {
            ($($f:ident),*) => { $( if let Some(x) = &self.$f { v.push((stringify!($f), x.span())); } )* };
        }
        p!(
            node,
            from,
            to,
            a,
            b,
            shape,
            restart_after,
            duration,
            forward,
            latency,
            ppm,
            member,
            client,
            unsynced,
            replaced_after
        );
        v
    }
}

/// The optional fields each fault kind takes (`at` and `kind` always).
fn fields_of(kind: &str) -> &'static [&'static str] {
    match kind {
        "crash" => &["node", "power_loss", "unsynced", "restart_after"],
        "restart" | "bit-flip" => &["node"],
        "pause" | "clock-stall" | "read-errors" | "disk-full" => &["node", "duration"],
        "clock-jump" => &["node", "forward"],
        "clock-skew" => &["node", "ppm"],
        "partition" => &["shape", "node", "from", "a", "b", "duration"],
        "heal" => &[],
        "clog" => &["from", "to", "duration"],
        "slow-disk" => &["node", "latency", "duration"],
        "member-crash" => &["member", "restart_after"],
        "member-restart" => &["member"],
        "member-pause" => &["member", "duration"],
        "coordinator-crash" => &["power_loss", "unsynced", "restart_after"],
        "client-pause" => &["client", "duration", "replaced_after"],
        "client-crash" => &["client", "restart_after"],
        "client-restart" => &["client"],
        "client-isolate" => &["client", "duration"],
        _ => &[],
    }
}

/// Line number (1-based) of a byte offset.
fn line_of(text: &str, pos: usize) -> usize {
    text.as_bytes()[..pos.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn err(
        &self,
        span: Option<std::ops::Range<usize>>,
        field: &str,
        msg: impl Into<String>,
    ) -> ScenarioError {
        ScenarioError {
            file: self.file.to_string(),
            line: span.map(|s| line_of(self.text, s.start)),
            field: Some(field.to_string()),
            message: msg.into(),
        }
    }

    fn dur(&self, v: &Spanned<String>, field: &str) -> Result<SimTime, ScenarioError> {
        parse_duration(v.get_ref()).map_err(|e| self.err(Some(v.span()), field, e.to_string()))
    }

    /// A duration that must be more than zero (how long a fault lasts, a restart delay).
    fn positive_dur(&self, v: &Spanned<String>, field: &str) -> Result<SimTime, ScenarioError> {
        match self.dur(v, field)? {
            0 => Err(self.err(Some(v.span()), field, "must be longer than zero")),
            d => Ok(d),
        }
    }

    fn opt_dur(
        &self,
        v: &Option<Spanned<String>>,
        field: &str,
    ) -> Result<Option<SimTime>, ScenarioError> {
        v.as_ref().map(|v| self.dur(v, field)).transpose()
    }

    fn prob(
        &self,
        v: &Option<Spanned<f64>>,
        field: &str,
        default: f64,
    ) -> Result<f64, ScenarioError> {
        match v {
            None => Ok(default),
            Some(v) if (0.0..=1.0).contains(v.get_ref()) => Ok(*v.get_ref()),
            Some(v) => Err(self.err(Some(v.span()), field, "a probability must be within 0..=1")),
        }
    }
}

impl Scenario {
    /// Reads and parses a scenario file.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            file: file.clone(),
            line: None,
            field: None,
            message: format!("cannot read: {e}"),
        })?;
        Self::parse(&file, &text)
    }

    /// Parses scenario text; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, ScenarioError> {
        let cx = Ctx { file, text };
        let raw: RawScenario = toml::from_str(text).map_err(|e| {
            let msg = e.message().trim().to_string();
            // serde's messages name unknown/missing fields in backticks; surface the first.
            let field = msg.split('`').nth(1).map(str::to_string);
            ScenarioError {
                file: file.to_string(),
                line: e.span().map(|s| line_of(text, s.start)),
                field,
                message: msg,
            }
        })?;
        if let Some(v) = &raw.version {
            if *v.get_ref() == 0 || *v.get_ref() > FORMAT_VERSION {
                return Err(cx.err(
                    Some(v.span()),
                    "version",
                    format!(
                        "unsupported scenario format version {}; this build reads 1..={FORMAT_VERSION}",
                        v.get_ref()
                    ),
                ));
            }
        }
        let mut sc = Scenario {
            file: file.to_string(),
            version: raw.version.map(|v| *v.get_ref()),
            name: raw.name,
            description: raw.description,
            seed: raw.seed,
            rates: raw.faults,
            ..Scenario::default()
        };
        if let Some(c) = raw.cluster {
            let positive =
                |v: &Option<Spanned<u32>>, field: &str| -> Result<Option<u32>, ScenarioError> {
                    match v {
                        Some(v) if *v.get_ref() == 0 => {
                            Err(cx.err(Some(v.span()), field, "must be at least 1"))
                        }
                        Some(v) => Ok(Some(*v.get_ref())),
                        None => Ok(None),
                    }
                };
            sc.brokers = positive(&c.brokers, "cluster.brokers")?;
            sc.partitions = positive(&c.partitions, "cluster.partitions")?;
            sc.replication_factor = positive(&c.replication_factor, "cluster.replication_factor")?;
            sc.min_insync_replicas =
                positive(&c.min_insync_replicas, "cluster.min_insync_replicas")?;
            sc.unclean_leader_election = c.unclean_leader_election;
            if let (Some(rf), Some(b)) = (&c.replication_factor, sc.brokers) {
                if *rf.get_ref() > b {
                    return Err(cx.err(
                        Some(rf.span()),
                        "cluster.replication_factor",
                        format!("{} exceeds the {b} brokers", rf.get_ref()),
                    ));
                }
            }
        }
        if let Some(w) = raw.workload {
            sc.producers = w.producers;
            sc.consumers = w.consumers;
            if let Some(r) = w.produce_rate {
                if !(*r.get_ref() >= 0.0 && r.get_ref().is_finite()) {
                    return Err(cx.err(
                        Some(r.span()),
                        "workload.produce_rate",
                        "must be a finite number >= 0",
                    ));
                }
                sc.produce_rate = Some(*r.get_ref());
            }
            sc.idempotent = w.idempotent;
            sc.group_members = w.group_members;
            sc.group_static = w.group_static;
            if let Some(g) = w.group_id {
                if g.get_ref().is_empty() {
                    return Err(cx.err(Some(g.span()), "workload.group_id", "must not be empty"));
                }
                sc.group_id = Some(g.into_inner());
            }
            if let Some(m) = w.group_commit {
                sc.group_commit = Some(
                    crate::group_client::CommitMode::from_name(m.get_ref()).ok_or_else(|| {
                        cx.err(
                            Some(m.span()),
                            "workload.group_commit",
                            format!("expected \"sync\" or \"async\", found {:?}", m.get_ref()),
                        )
                    })?,
                );
            }
            if let Some(a) = w.group_assignor {
                sc.group_assignor = Some(
                    skein_core::group::AssignorKind::from_name(a.get_ref()).ok_or_else(|| {
                        cx.err(
                            Some(a.span()),
                            "workload.group_assignor",
                            format!("expected \"range\", \"roundrobin\" or \"cooperative-sticky\", found {:?}", a.get_ref()),
                        )
                    })?,
                );
            }
            if let Some(a) = w.acks {
                sc.acks = Some(match a.get_ref() {
                    toml::Value::Integer(0) => Acks::None,
                    toml::Value::Integer(1) => Acks::Leader,
                    toml::Value::String(s) if s == "all" || s == "-1" => Acks::All,
                    other => {
                        return Err(cx.err(
                            Some(a.span()),
                            "workload.acks",
                            format!("expected 0, 1 or \"all\", found {other}"),
                        ))
                    }
                });
            }
        }
        if let Some(r) = raw.run {
            sc.duration = cx.opt_dur(&r.duration, "run.duration")?;
            sc.liveness = cx.opt_dur(&r.liveness, "run.liveness")?;
        }
        if let Some(n) = raw.network {
            let d = NetConfig::default();
            sc.network = Some(NetConfig {
                latency_min: cx
                    .opt_dur(&n.latency_min, "network.latency_min")?
                    .unwrap_or(d.latency_min),
                latency_mean_extra: cx
                    .opt_dur(&n.latency_mean_extra, "network.latency_mean_extra")?
                    .unwrap_or(d.latency_mean_extra),
                latency_max: cx
                    .opt_dur(&n.latency_max, "network.latency_max")?
                    .unwrap_or(d.latency_max),
                drop: cx.prob(&n.drop, "network.drop", d.drop)?,
                duplicate: cx.prob(&n.duplicate, "network.duplicate", d.duplicate)?,
                reorder: cx.prob(&n.reorder, "network.reorder", d.reorder)?,
            });
        }
        for (i, f) in raw.fault.iter().enumerate() {
            sc.schedule
                .push(parse_fault(&cx, i, f, sc.brokers, sc.partitions)?);
        }
        // With the run's length known, a fault that fires after the end or lasts past the
        // final heal (which would cut it short), or names a client the workload lacks, is
        // reported here, at its line; the same check runs again before every run, when
        // flags may have changed the shape.
        if sc.duration.is_some() {
            let mut c = crate::config::SimConfig::default();
            c.apply_scenario(&sc);
            for (i, (s, f)) in sc.schedule.iter().zip(&raw.fault).enumerate() {
                c.check_scheduled(s)
                    .map_err(|e| cx.err(Some(f.span()), &format!("fault[{i}]"), e))?;
            }
        }
        sc.schedule.sort_by_key(|s| s.at);
        if let Some(e) = raw.expect {
            sc.expect = Some(parse_expect(&cx, e)?);
        }
        Ok(sc)
    }
}

fn parse_expect(cx: &Ctx<'_>, e: Spanned<RawExpect>) -> Result<Expect, ScenarioError> {
    let e_span = e.span();
    let e = e.into_inner();
    let known = |name: &str, span: std::ops::Range<usize>, field: &str| {
        if crate::invariants::NAMES.contains(&name) {
            Ok(name.to_string())
        } else {
            Err(cx.err(
                Some(span),
                field,
                format!(
                    "unknown invariant {name:?}; known: {}",
                    crate::invariants::NAMES.join(", ")
                ),
            ))
        }
    };
    let list =
        |v: &Option<Spanned<Vec<String>>>, field: &str| -> Result<Vec<String>, ScenarioError> {
            match v {
                None => Ok(Vec::new()),
                Some(v) => v
                    .get_ref()
                    .iter()
                    .map(|n| known(n, v.span(), field))
                    .collect(),
            }
        };
    let fail = list(&e.fail, "expect.fail")?;
    let hold = list(&e.hold, "expect.hold")?;
    let may = list(&e.may, "expect.may")?;
    // An invariant in two lists is a contradiction (or a typo): name it.
    for (a, an, b, bn, span) in [
        (&fail, "fail", &may, "may", e.may.as_ref().map(|m| m.span())),
        (&hold, "hold", &may, "may", e.may.as_ref().map(|m| m.span())),
    ] {
        if let Some(both) = a.iter().find(|i| b.contains(i)) {
            return Err(cx.err(
                span,
                &format!("expect.{bn}"),
                format!("{both:?} is in both `{an}` and `{bn}`"),
            ));
        }
    }
    let invariant = e
        .invariant
        .as_ref()
        .map(|i| known(i.get_ref(), i.span(), "expect.invariant"))
        .transpose()?;
    match e.verdict.get_ref().as_str() {
        "pass" => {
            if let Some(i) = &e.invariant {
                return Err(cx.err(
                    Some(i.span()),
                    "expect.invariant",
                    "only a \"fail\" verdict names an invariant",
                ));
            }
            if let Some(f) = &e.fail {
                return Err(cx.err(
                    Some(f.span()),
                    "expect.fail",
                    "only a \"fail\" verdict names invariants that fail",
                ));
            }
            if let Some(h) = &e.hold {
                return Err(cx.err(
                    Some(h.span()),
                    "expect.hold",
                    "a \"pass\" verdict already means every invariant holds",
                ));
            }
            if may.is_empty() {
                Ok(Expect::Pass)
            } else {
                Ok(Expect::PassExcept { may })
            }
        }
        "fail" => {
            let mut all = fail;
            if let Some(i) = invariant {
                if !all.contains(&i) {
                    all.insert(0, i);
                }
            }
            if all.is_empty() {
                return Err(cx.err(
                    Some(e_span),
                    "expect.invariant",
                    "a \"fail\" verdict must name the invariant that fails (`invariant` or `fail = [...]`)",
                ));
            }
            if let Some(both) = all.iter().find(|i| may.contains(i)) {
                return Err(cx.err(
                    e.may.as_ref().map(|m| m.span()),
                    "expect.may",
                    format!("{both:?} must fail, so it cannot be one that only may"),
                ));
            }
            if let Some(both) = all.iter().find(|i| hold.contains(i)) {
                return Err(cx.err(
                    e.hold.as_ref().map(|h| h.span()),
                    "expect.hold",
                    format!("{both:?} cannot both fail and hold"),
                ));
            }
            if all.len() == 1 && hold.is_empty() && may.is_empty() {
                return Ok(Expect::Fail {
                    invariant: all.remove(0),
                });
            }
            Ok(Expect::Invariants {
                fail: all,
                hold,
                may,
            })
        }
        other => Err(cx.err(
            Some(e.verdict.span()),
            "expect.verdict",
            format!("expected \"pass\" or \"fail\", found {other:?}"),
        )),
    }
}

fn parse_fault(
    cx: &Ctx<'_>,
    i: usize,
    f: &Spanned<RawFault>,
    brokers: Option<u32>,
    partitions: Option<u32>,
) -> Result<Scheduled, ScenarioError> {
    let span = f.span();
    let f = f.get_ref();
    let field = |name: &str| format!("fault[{i}].{name}");
    let at = cx.dur(&f.at, &field("at"))?;
    let check_node = |n: &Spanned<NodeRef>, name: &str| -> Result<NodeRef, ScenarioError> {
        match (*n.get_ref(), brokers) {
            (NodeRef::Broker(0), _) => {
                Err(cx.err(Some(n.span()), &field(name), "broker ids start at 1"))
            }
            (NodeRef::Broker(id), Some(b)) if id > b => Err(cx.err(
                Some(n.span()),
                &field(name),
                format!("broker {id} does not exist (the cluster has {b})"),
            )),
            (NodeRef::LeaderOf(LeaderOf(p)), _) if partitions.is_some_and(|n| p >= n) => Err(cx
                .err(
                    Some(n.span()),
                    &field(name),
                    format!(
                        "partition {p} does not exist (the topic has {})",
                        partitions.unwrap_or(0)
                    ),
                )),
            (node, _) => Ok(node),
        }
    };
    let need_node = |v: &Option<Spanned<NodeRef>>, name: &str| -> Result<NodeRef, ScenarioError> {
        match v {
            Some(n) => check_node(n, name),
            None => Err(cx.err(
                Some(span.clone()),
                &field(name),
                format!("`{}` needs `{name}`", f.kind.get_ref()),
            )),
        }
    };
    let kind = f.kind.get_ref().as_str();
    // A field the kind does not take would be silently ignored: refuse it by name.
    let takes = fields_of(kind);
    if !takes.is_empty() || kind == "heal" {
        if let Some((name, sp)) = f.present().into_iter().find(|(n, _)| !takes.contains(n)) {
            return Err(cx.err(
                Some(sp),
                &field(name),
                format!(
                    "`{kind}` does not take `{name}`; it takes {}",
                    if takes.is_empty() {
                        "no fields besides `at`".to_string()
                    } else {
                        takes
                            .iter()
                            .map(|t| format!("`{t}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ),
            ));
        }
        if f.power_loss.is_some() && !takes.contains(&"power_loss") {
            return Err(cx.err(
                Some(span.clone()),
                &field("power_loss"),
                format!("`{kind}` does not take `power_loss`"),
            ));
        }
    }
    let opt_pos_dur =
        |v: &Option<Spanned<String>>, name: &str| -> Result<Option<SimTime>, ScenarioError> {
            v.as_ref()
                .map(|d| cx.positive_dur(d, &field(name)))
                .transpose()
        };
    let unsynced = || -> Result<Unsynced, ScenarioError> {
        match &f.unsynced {
            None => Ok(Unsynced::Random),
            Some(u) if f.power_loss != Some(true) => Err(cx.err(
                Some(u.span()),
                &field("unsynced"),
                "`unsynced` says what a power loss keeps: it needs `power_loss = true`",
            )),
            Some(u) => Unsynced::from_name(u.get_ref()).ok_or_else(|| {
                cx.err(
                    Some(u.span()),
                    &field("unsynced"),
                    format!(
                        "expected one of {}, found {:?}",
                        Unsynced::NAMES.join(", "),
                        u.get_ref()
                    ),
                )
            }),
        }
    };
    let need_client = || -> Result<ClientRef, ScenarioError> {
        f.client.as_ref().map(|c| *c.get_ref()).ok_or_else(|| {
            cx.err(
                Some(span.clone()),
                &field("client"),
                format!("`{kind}` needs `client` (\"producer:N\" or \"consumer:N\")"),
            )
        })
    };
    let need_dur = |v: &Option<Spanned<String>>, name: &str| -> Result<SimTime, ScenarioError> {
        match v {
            Some(d) => cx.positive_dur(d, &field(name)),
            None => Err(cx.err(
                Some(span.clone()),
                &field(name),
                format!("`{}` needs `{name}`", f.kind.get_ref()),
            )),
        }
    };
    let need_member = || -> Result<u32, ScenarioError> {
        match &f.member {
            Some(m) if *m.get_ref() == 0 => Err(cx.err(
                Some(m.span()),
                &field("member"),
                "group members are numbered from 1",
            )),
            Some(m) => Ok(*m.get_ref()),
            None => Err(cx.err(
                Some(span.clone()),
                &field("member"),
                format!("`{}` needs `member`", f.kind.get_ref()),
            )),
        }
    };
    let fault = match kind {
        "crash" => Fault::Crash {
            node: need_node(&f.node, "node")?,
            power_loss: f.power_loss.unwrap_or(false),
            unsynced: unsynced()?,
            restart_after: opt_pos_dur(&f.restart_after, "restart_after")?,
        },
        "restart" => Fault::Restart { node: need_node(&f.node, "node")? },
        "pause" => Fault::Pause {
            node: need_node(&f.node, "node")?,
            duration: need_dur(&f.duration, "duration")?,
        },
        "clock-jump" => Fault::ClockJump {
            node: need_node(&f.node, "node")?,
            forward: need_dur(&f.forward, "forward")?,
        },
        "clock-stall" => Fault::ClockStall {
            node: need_node(&f.node, "node")?,
            duration: need_dur(&f.duration, "duration")?,
        },
        "clock-skew" => Fault::ClockSkew {
            node: need_node(&f.node, "node")?,
            ppm: match &f.ppm {
                None => return Err(cx.err(Some(span.clone()), &field("ppm"), "`clock-skew` needs `ppm`")),
                // A clock at half speed or less, or over twice as fast, is no skew: the
                // clock model would clamp it silently.
                Some(p) if !(-500_000..=1_000_000).contains(p.get_ref()) => return Err(cx.err(
                    Some(p.span()),
                    &field("ppm"),
                    format!("{} is out of range: a skew is within -500000..=1000000 ppm", p.get_ref()),
                )),
                Some(p) => *p.get_ref(),
            },
        },
        "partition" => {
            let shape_name = f.shape.as_ref().ok_or_else(|| cx.err(Some(span.clone()), &field("shape"), "`partition` needs `shape` (halves, split, isolate, bridge, one-way)"))?;
            let shape = match shape_name.get_ref().as_str() {
                "halves" => Partition::RandomHalves,
                "isolate" => Partition::Isolate { node: need_node(&f.node, "node")? },
                "bridge" => Partition::Bridge { node: need_node(&f.node, "node")? },
                "one-way" => Partition::OneWay { from: need_node(&f.from.clone().or(f.node.clone()), "from")? },
                "split" => {
                    let group = |v: &Option<Spanned<Vec<NodeRef>>>, name: &str| -> Result<Vec<NodeRef>, ScenarioError> {
                        let v = v.as_ref().ok_or_else(|| cx.err(Some(span.clone()), &field(name), "`split` needs groups `a` and `b`"))?;
                        v.get_ref().iter().map(|n| check_node(&Spanned::new(v.span(), *n), name)).collect()
                    };
                    let (a, b) = (group(&f.a, "a")?, group(&f.b, "b")?);
                    if let Some(both) = a.iter().find(|n| b.contains(n)) {
                        return Err(cx.err(f.b.as_ref().map(|b| b.span()), &field("b"), format!("{both} is in both groups `a` and `b`")));
                    }
                    if a.is_empty() || b.is_empty() {
                        return Err(cx.err(Some(span.clone()), &field(if a.is_empty() { "a" } else { "b" }), "a split needs a node on each side"));
                    }
                    Partition::Split { a, b }
                }
                other => return Err(cx.err(Some(shape_name.span()), &field("shape"), format!("unknown shape {other:?}; expected halves, split, isolate, bridge or one-way"))),
            };
            // Fields of other shapes would be ignored: refuse them.
            let shape_fields: &[&str] = match shape_name.get_ref().as_str() {
                "halves" => &[],
                "isolate" | "bridge" => &["node"],
                "one-way" => &["from", "node"],
                _ => &["a", "b"],
            };
            if let Some((name, sp)) = f.present().into_iter().find(|(n, _)| {
                ["node", "from", "a", "b"].contains(n) && !shape_fields.contains(n)
            }) {
                return Err(cx.err(Some(sp), &field(name), format!("shape {:?} does not take `{name}`", shape_name.get_ref())));
            }
            Fault::Partition {
                shape,
                duration: opt_pos_dur(&f.duration, "duration")?,
            }
        }
        "heal" => Fault::Heal,
        "clog" => Fault::Clog {
            from: need_node(&f.from, "from")?,
            to: need_node(&f.to, "to")?,
            duration: need_dur(&f.duration, "duration")?,
        },
        "bit-flip" => Fault::BitFlip { node: need_node(&f.node, "node")? },
        "read-errors" => Fault::ReadErrors {
            node: need_node(&f.node, "node")?,
            duration: need_dur(&f.duration, "duration")?,
        },
        "disk-full" => Fault::DiskFull {
            node: need_node(&f.node, "node")?,
            duration: need_dur(&f.duration, "duration")?,
        },
        "slow-disk" => Fault::SlowDisk {
            node: need_node(&f.node, "node")?,
            latency: need_dur(&f.latency, "latency")?,
            duration: need_dur(&f.duration, "duration")?,
        },
        "member-crash" => Fault::MemberCrash {
            member: need_member()?,
            restart_after: opt_pos_dur(&f.restart_after, "restart_after")?,
        },
        "member-restart" => Fault::MemberRestart { member: need_member()? },
        "member-pause" => Fault::MemberPause {
            member: need_member()?,
            duration: need_dur(&f.duration, "duration")?,
        },
        "coordinator-crash" => Fault::CoordinatorCrash {
            power_loss: f.power_loss.unwrap_or(false),
            unsynced: unsynced()?,
            restart_after: opt_pos_dur(&f.restart_after, "restart_after")?,
        },
        "client-pause" => {
            let client = need_client()?;
            let duration = need_dur(&f.duration, "duration")?;
            let replaced_after = opt_pos_dur(&f.replaced_after, "replaced_after")?;
            if let (Some(r), Some(sp)) = (replaced_after, f.replaced_after.as_ref()) {
                if !matches!(client, ClientRef::Producer(_)) {
                    return Err(cx.err(Some(sp.span()), &field("replaced_after"), "only a producer has an identity a replacement can take over"));
                }
                if r >= duration {
                    return Err(cx.err(Some(sp.span()), &field("replaced_after"), "the replacement must start while the producer is still paused (before `duration` ends)"));
                }
            }
            Fault::ClientPause { client, duration, replaced_after }
        }
        "client-crash" => Fault::ClientCrash {
            client: need_client()?,
            restart_after: opt_pos_dur(&f.restart_after, "restart_after")?,
        },
        "client-restart" => Fault::ClientRestart { client: need_client()? },
        "client-isolate" => Fault::ClientIsolate {
            client: need_client()?,
            duration: need_dur(&f.duration, "duration")?,
        },
        other => {
            return Err(cx.err(
                Some(f.kind.span()),
                &field("kind"),
                format!("unknown fault kind {other:?}; expected crash, restart, pause, clock-jump, clock-stall, clock-skew, partition, heal, clog, bit-flip, read-errors, disk-full, slow-disk, member-crash, member-restart, member-pause, coordinator-crash, client-pause, client-crash, client-restart or client-isolate"),
            ))
        }
    };
    Ok(Scheduled { at, fault })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::SECS;

    const GOOD: &str = r#"
name = "zombie"
description = "isolate a broker"
[cluster]
brokers = 3
partitions = 2
[workload]
producers = 1
acks = "all"
[run]
duration = "20s"
liveness = "5s"
[[fault]]
at = "5s"
kind = "partition"
shape = "isolate"
node = 1
duration = "3s"
[[fault]]
at = "2s"
kind = "crash"
node = "controller"
power_loss = true
restart_after = "1s"
[expect]
verdict = "pass"
"#;

    #[test]
    fn parses_a_scenario() {
        let sc = Scenario::parse("good.toml", GOOD).unwrap();
        assert_eq!(sc.brokers, Some(3));
        assert_eq!(sc.duration, Some(20 * SECS));
        assert_eq!(sc.acks, Some(Acks::All));
        assert_eq!(sc.schedule.len(), 2);
        assert_eq!(sc.schedule[0].at, 2 * SECS, "sorted by time");
        assert_eq!(
            sc.schedule[0].fault,
            Fault::Crash {
                node: NodeRef::CONTROLLER,
                power_loss: true,
                unsynced: Unsynced::Random,
                restart_after: Some(SECS)
            }
        );
        assert_eq!(sc.expect, Some(Expect::Pass));
    }

    fn err(text: &str) -> ScenarioError {
        Scenario::parse("bad.toml", text).unwrap_err()
    }

    #[test]
    fn parses_the_group_workload_and_member_faults() {
        let text = "[workload]\ngroup_members = 3\ngroup_id = \"g\"\ngroup_commit = \"async\"\ngroup_assignor = \"cooperative-sticky\"\n[[fault]]\nat = \"1s\"\nkind = \"member-pause\"\nmember = 2\nduration = \"2s\"\n[[fault]]\nat = \"2s\"\nkind = \"coordinator-crash\"\npower_loss = true\n[[fault]]\nat = \"3s\"\nkind = \"member-crash\"\nmember = 1\nrestart_after = \"1s\"\n";
        let sc = Scenario::parse("g.toml", text).unwrap();
        assert_eq!(sc.group_members, Some(3));
        assert_eq!(sc.group_id.as_deref(), Some("g"));
        assert_eq!(
            sc.group_commit,
            Some(crate::group_client::CommitMode::Async)
        );
        assert_eq!(
            sc.group_assignor,
            Some(skein_core::group::AssignorKind::CooperativeSticky)
        );
        assert_eq!(
            sc.schedule[0].fault,
            Fault::MemberPause {
                member: 2,
                duration: 2 * SECS
            }
        );
        assert_eq!(
            sc.schedule[1].fault,
            Fault::CoordinatorCrash {
                power_loss: true,
                unsynced: Unsynced::Random,
                restart_after: None
            }
        );
        assert_eq!(
            sc.schedule[2].fault,
            Fault::MemberCrash {
                member: 1,
                restart_after: Some(SECS)
            }
        );
        let e = err("[[fault]]\nat = \"1s\"\nkind = \"member-pause\"\nduration = \"1s\"\n");
        assert_eq!(e.field.as_deref(), Some("fault[0].member"));
        let e = err("[[fault]]\nat = \"1s\"\nkind = \"member-crash\"\nmember = 0\n");
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(4), Some("fault[0].member"))
        );
        let e = err("[workload]\ngroup_commit = \"sometimes\"\n");
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(2), Some("workload.group_commit"))
        );
        let e = err("[workload]\ngroup_assignor = \"sticky\"\n");
        assert_eq!(e.field.as_deref(), Some("workload.group_assignor"));
        // A member the workload does not have is a configuration error naming it.
        let mut c = crate::config::SimConfig::default();
        c.apply_scenario(&sc);
        c.group_members = 1;
        assert!(c.validate().unwrap_err().contains("group member 2"));
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let e =
            err("[cluster]\nbrokers = 3\n\n[[fault]]\nat = \"1s\"\nkind = \"crash\"\nnode = 7\n");
        assert_eq!(
            (e.file.as_str(), e.line, e.field.as_deref()),
            ("bad.toml", Some(7), Some("fault[0].node"))
        );
        assert!(
            e.to_string()
                .starts_with("bad.toml:7: field `fault[0].node`"),
            "{e}"
        );

        let e = err("[[fault]]\nat = \"soon\"\nkind = \"heal\"\n");
        assert_eq!((e.line, e.field.as_deref()), (Some(2), Some("fault[0].at")));

        let e = err("[[fault]]\nat = \"1s\"\nkind = \"meteor\"\n");
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(3), Some("fault[0].kind"))
        );

        let e = err("[cluster]\nbrokerz = 3\n");
        assert_eq!((e.line, e.field.as_deref()), (Some(2), Some("brokerz")));

        let e = err("[workload]\nacks = 2\n");
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(2), Some("workload.acks"))
        );

        let e = err("[[fault]]\nat = \"1s\"\nkind = \"pause\"\nnode = 1\n");
        assert_eq!(e.field.as_deref(), Some("fault[0].duration"));

        let e = err("[expect]\nverdict = \"fail\"\ninvariant = \"nope\"\n");
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(3), Some("expect.invariant"))
        );

        let e = err("[cluster]\nbrokers = 2\nreplication_factor = 3\n");
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(3), Some("cluster.replication_factor"))
        );

        let e = err("[network]\ndrop = 1.5\n");
        assert_eq!(e.field.as_deref(), Some("network.drop"));

        let e = err("this is not toml");
        assert_eq!(e.line, Some(1));
    }

    #[test]
    fn version_expectations_and_leader_targets() {
        let sc = Scenario::parse(
            "v.toml",
            "version = 1\n[cluster]\npartitions = 2\n[[fault]]\nat = \"1s\"\nkind = \"crash\"\nnode = \"leader:1\"\n[[fault]]\nat = \"2s\"\nkind = \"partition\"\nshape = \"isolate\"\nnode = \"leader\"\n[expect]\nverdict = \"fail\"\nfail = [\"acked-write-lost\"]\nhold = [\"replica-divergence\"]\n",
        )
        .unwrap();
        assert_eq!(sc.version, Some(1));
        assert_eq!(
            sc.schedule[0].fault,
            Fault::Crash {
                node: NodeRef::LeaderOf(LeaderOf(1)),
                power_loss: false,
                unsynced: Unsynced::Random,
                restart_after: None
            }
        );
        assert!(sc.schedule[1].fault.names_a_leader());
        let e = sc.expect.unwrap();
        assert!(e.met_by(&["acked-write-lost", "history"]));
        assert!(!e.met_by(&["acked-write-lost", "replica-divergence"]));
        assert!(!e.met_by(&[]));
        assert_eq!(
            e.to_string(),
            "fail (acked-write-lost), hold (replica-divergence)"
        );
        // One invariant alone keeps the old meaning.
        let sc = Scenario::parse(
            "o.toml",
            "[expect]\nverdict = \"fail\"\ninvariant = \"liveness\"\n",
        )
        .unwrap();
        assert_eq!(
            sc.expect,
            Some(Expect::Fail {
                invariant: "liveness".into()
            })
        );

        let e = err("version = 9\n");
        assert_eq!((e.line, e.field.as_deref()), (Some(1), Some("version")));
        let e = err("[cluster]\npartitions = 2\n[[fault]]\nat = \"1s\"\nkind = \"crash\"\nnode = \"leader:2\"\n");
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(6), Some("fault[0].node"))
        );
        let e = err("[expect]\nverdict = \"fail\"\nfail = [\"liveness\"]\nhold = [\"liveness\"]\n");
        assert_eq!(e.field.as_deref(), Some("expect.hold"));
        let e = err("[expect]\nverdict = \"fail\"\nhold = [\"nope\"]\n");
        assert_eq!((e.line, e.field.as_deref()), (Some(3), Some("expect.hold")));
        let e = err("[expect]\nverdict = \"pass\"\nhold = [\"liveness\"]\n");
        assert_eq!(e.field.as_deref(), Some("expect.hold"));
        let e = err("[[fault]]\nat = \"1s\"\nkind = \"crash\"\nnode = \"leeder\"\n");
        assert_eq!(e.line, Some(4), "{e}");
    }

    #[test]
    fn may_allows_without_requiring() {
        let sc = Scenario::parse(
            "m.toml",
            "[expect]\nverdict = \"pass\"\nmay = [\"acked-write-lost\", \"history\"]\n",
        )
        .unwrap();
        let e = sc.expect.unwrap();
        assert_eq!(
            e,
            Expect::PassExcept {
                may: vec!["acked-write-lost".into(), "history".into()]
            }
        );
        assert!(e.met_by(&[]));
        assert!(e.met_by(&["acked-write-lost"]));
        assert!(e.met_by(&["history", "acked-write-lost"]));
        assert!(!e.met_by(&["acked-write-lost", "replica-divergence"]));
        assert!(e.failing().is_empty());
        assert_eq!(e.to_string(), "pass, may fail (acked-write-lost, history)");
        // With "fail", unlisted invariants are unconstrained anyway: `may` states intent.
        let sc = Scenario::parse(
            "m.toml",
            "[expect]\nverdict = \"fail\"\nfail = [\"liveness\"]\nhold = [\"dirty-read\"]\nmay = [\"history\"]\n",
        )
        .unwrap();
        let e = sc.expect.unwrap();
        assert!(e.met_by(&["liveness"]) && e.met_by(&["liveness", "history", "hw-regression"]));
        assert!(!e.met_by(&["history"]) && !e.met_by(&["liveness", "dirty-read"]));
        // One list per invariant; names must exist.
        let e = err("[expect]\nverdict = \"fail\"\nfail = [\"liveness\"]\nmay = [\"liveness\"]\n");
        assert_eq!((e.line, e.field.as_deref()), (Some(4), Some("expect.may")));
        let e =
            err("[expect]\nverdict = \"fail\"\ninvariant = \"liveness\"\nmay = [\"liveness\"]\n");
        assert_eq!(e.field.as_deref(), Some("expect.may"));
        let e = err("[expect]\nverdict = \"pass\"\nmay = [\"sometimes\"]\n");
        assert_eq!((e.line, e.field.as_deref()), (Some(3), Some("expect.may")));
    }

    #[test]
    fn parses_client_faults_and_unsynced() {
        let text = "[workload]\nproducers = 2\nconsumers = 1\n[[fault]]\nat = \"1s\"\nkind = \"client-pause\"\nclient = \"producer:2\"\nduration = \"3s\"\nreplaced_after = \"1s\"\n[[fault]]\nat = \"2s\"\nkind = \"client-crash\"\nclient = \"consumer:1\"\nrestart_after = \"500ms\"\n[[fault]]\nat = \"3s\"\nkind = \"client-isolate\"\nclient = \"producer:1\"\nduration = \"1s\"\n[[fault]]\nat = \"4s\"\nkind = \"crash\"\nnode = 1\npower_loss = true\nunsynced = \"lose-all\"\n[[fault]]\nat = \"5s\"\nkind = \"client-restart\"\nclient = \"consumer:1\"\n";
        let sc = Scenario::parse("c.toml", text).unwrap();
        assert_eq!(
            sc.schedule[0].fault,
            Fault::ClientPause {
                client: ClientRef::Producer(2),
                duration: 3 * SECS,
                replaced_after: Some(SECS)
            }
        );
        assert_eq!(
            sc.schedule[1].fault,
            Fault::ClientCrash {
                client: ClientRef::Consumer(1),
                restart_after: Some(SECS / 2)
            }
        );
        assert_eq!(
            sc.schedule[2].fault,
            Fault::ClientIsolate {
                client: ClientRef::Producer(1),
                duration: SECS
            }
        );
        assert_eq!(
            sc.schedule[3].fault,
            Fault::Crash {
                node: NodeRef::Broker(1),
                power_loss: true,
                unsynced: Unsynced::LoseAll,
                restart_after: None
            }
        );
        let mut c = crate::config::SimConfig::default();
        c.apply_scenario(&sc);
        c.validate().unwrap();
        // A client the workload does not have is named, before the run.
        c.consumers = 0;
        let e = c.validate().unwrap_err();
        assert!(e.contains("consumer:1 does not exist"), "{e}");

        let e = err("[[fault]]\nat = \"1s\"\nkind = \"client-pause\"\nclient = \"broker:1\"\nduration = \"1s\"\n");
        assert_eq!(e.line, Some(4), "{e}");
        let e = err("[[fault]]\nat = \"1s\"\nkind = \"client-pause\"\nduration = \"1s\"\n");
        assert_eq!(e.field.as_deref(), Some("fault[0].client"));
        let e = err("[[fault]]\nat = \"1s\"\nkind = \"client-pause\"\nclient = \"consumer:1\"\nduration = \"2s\"\nreplaced_after = \"1s\"\n");
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(6), Some("fault[0].replaced_after"))
        );
        let e = err("[[fault]]\nat = \"1s\"\nkind = \"client-pause\"\nclient = \"producer:1\"\nduration = \"2s\"\nreplaced_after = \"2s\"\n");
        assert_eq!(e.field.as_deref(), Some("fault[0].replaced_after"));
        let e = err("[[fault]]\nat = \"1s\"\nkind = \"crash\"\nnode = 1\nunsynced = \"torn\"\n");
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(5), Some("fault[0].unsynced"))
        );
        let e = err("[[fault]]\nat = \"1s\"\nkind = \"crash\"\nnode = 1\npower_loss = true\nunsynced = \"half\"\n");
        assert!(e.message.contains("lose-all"), "{e}");
    }

    #[test]
    fn nonsense_is_refused_by_name() {
        // A field the kind does not take.
        let e = err("[[fault]]\nat = \"1s\"\nkind = \"crash\"\nnode = 1\nduration = \"2s\"\n");
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(5), Some("fault[0].duration"))
        );
        assert!(
            e.message.contains("`crash` does not take `duration`"),
            "{e}"
        );
        let e = err("[[fault]]\nat = \"1s\"\nkind = \"heal\"\nnode = 1\n");
        assert_eq!(e.field.as_deref(), Some("fault[0].node"));
        let e = err("[[fault]]\nat = \"1s\"\nkind = \"pause\"\nnode = 1\nduration = \"1s\"\npower_loss = true\n");
        assert_eq!(e.field.as_deref(), Some("fault[0].power_loss"));
        // A field of another shape.
        let e = err("[[fault]]\nat = \"1s\"\nkind = \"partition\"\nshape = \"isolate\"\nnode = 1\na = [2]\n");
        assert_eq!((e.line, e.field.as_deref()), (Some(6), Some("fault[0].a")));
        // Zero durations.
        let e = err("[[fault]]\nat = \"1s\"\nkind = \"pause\"\nnode = 1\nduration = \"0s\"\n");
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(5), Some("fault[0].duration"))
        );
        let e =
            err("[[fault]]\nat = \"1s\"\nkind = \"crash\"\nnode = 1\nrestart_after = \"0ms\"\n");
        assert_eq!(e.field.as_deref(), Some("fault[0].restart_after"));
        let e = err("[[fault]]\nat = \"-1s\"\nkind = \"heal\"\n");
        assert_eq!(e.field.as_deref(), Some("fault[0].at"));
        // A split with a node on both sides; a skew the clock would clamp.
        let e = err("[[fault]]\nat = \"1s\"\nkind = \"partition\"\nshape = \"split\"\na = [1, 2]\nb = [2, 3]\n");
        assert_eq!(e.field.as_deref(), Some("fault[0].b"));
        let e = err("[[fault]]\nat = \"1s\"\nkind = \"clock-skew\"\nnode = 1\nppm = -900000\n");
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(5), Some("fault[0].ppm"))
        );
        // A restart past the final heal (20s - 1.25 * 4s = 15s), at its line.
        let e = err("[run]\nduration = \"20s\"\nliveness = \"4s\"\n[[fault]]\nat = \"1s\"\nkind = \"heal\"\n[[fault]]\nat = \"12s\"\nkind = \"crash\"\nnode = 2\nrestart_after = \"4s\"\n");
        assert_eq!((e.line, e.field.as_deref()), (Some(7), Some("fault[1]")));
        assert!(
            e.message.contains(
                "restart_after 4.000s ends it at 16.000s, after the final heal at 15.000s"
            ),
            "{e}"
        );
        // A fault after the end of the run never fires.
        let e = err("[run]\nduration = \"20s\"\nliveness = \"4s\"\n[[fault]]\nat = \"25s\"\nkind = \"heal\"\n");
        assert!(e.message.contains("after the run ends"), "{e}");
        // Without a duration in the file, the check waits for the run's shape.
        let sc = Scenario::parse(
            "late.toml",
            "[[fault]]\nat = \"12s\"\nkind = \"crash\"\nnode = 2\nrestart_after = \"4s\"\n",
        )
        .unwrap();
        let mut c = crate::config::SimConfig::default();
        c.apply_scenario(&sc);
        assert!(c.validate().is_ok(), "60 s run, final heal at 35 s");
        c.duration = 20 * SECS;
        c.liveness = 4 * SECS;
        assert!(c.validate().unwrap_err().contains("restart_after"));
        // A broker the default cluster lacks: an error, not a panic in the world.
        let sc = Scenario::parse(
            "b.toml",
            "[[fault]]\nat = \"1s\"\nkind = \"bit-flip\"\nnode = 5\n",
        )
        .unwrap();
        let mut c = crate::config::SimConfig::default();
        c.apply_scenario(&sc);
        assert!(c
            .validate()
            .unwrap_err()
            .contains("broker 5 does not exist"));
    }
}
