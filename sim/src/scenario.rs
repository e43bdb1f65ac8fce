//! Scenario files: a cluster shape, a workload, fault rates and/or an exact fault schedule,
//! and the expected verdict, in TOML. All parsing of the format lives in this module.
//!
//! ```toml
//! version = 1          # the format version (optional; 1 is the only one so far)
//! name = "zombie-leader"
//! description = "The leader of every partition is isolated; a new one is elected."
//! [cluster]            # all optional: brokers, controllers (1, 3 or 5), partitions,
//! brokers = 3          # replication_factor, min_insync_replicas, unclean_leader_election,
//!                      # raft_max_entries_per_append (the controllers' Raft; default 64)
//! [workload]           # producers, consumers, produce_rate (requests per sim second),
//! producers = 2        # acks (0, 1 or "all"), idempotent, compression (true: producers
//!                      # compress some batches, a seeded codec each); group_members,
//!                      # group_id, group_commit ("sync" or "async"), group_assignor,
//!                      # group_static; kind ("plain", the default, or "txn": transactional
//!                      # producers and read_committed consumers); pipelines (txn only:
//!                      # read-process-write pipelines, default 2); txn_keep_epoch
//!                      # (txn only: old clients without KIP-890 part 2's bump);
//!                      # txn_abort_in_flight (txn only: abort before writes are acked)
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
//!                      # message-delay message-duplicate message-drop (with `message`,
//!                      # `from`, `delay`; docs/scenarios.md); coordinator-crash with
//!                      # `transactional_id` (or txn-coordinator-crash)
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

use crate::faults::{FaultRates, Scheduled};
use crate::modes::{Acks, CommitMode};
use crate::net::NetConfig;
use crate::time::SimTime;
use std::fmt;
use std::path::Path;

mod apply;
mod expect;
mod fault;
mod raw;
#[cfg(test)]
mod tests;

pub use crate::expect::Expect;
use expect::parse_expect;
use fault::parse_fault;
use raw::{line_of, Ctx, RawScenario};

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

/// The scenario format version this build reads; files without `version` are version 1.
pub const FORMAT_VERSION: u32 = 1;

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
    /// `[cluster] controllers`: 1, 3 or 5.
    pub controllers: Option<u32>,
    /// `[cluster] raft_max_entries_per_append`: at least 1.
    pub raft_max_entries_per_append: Option<usize>,
    pub partitions: Option<u32>,
    pub replication_factor: Option<u32>,
    pub min_insync_replicas: Option<u32>,
    pub unclean_leader_election: Option<bool>,
    /// `[cluster] unclean_recovery_strategy`: "none", "balanced" or "aggressive".
    pub unclean_recovery_strategy: Option<skein_core::controller::UncleanRecoveryStrategy>,
    pub producers: Option<u32>,
    pub consumers: Option<u32>,
    pub group_members: Option<u32>,
    pub group_id: Option<String>,
    pub group_commit: Option<CommitMode>,
    pub group_assignor: Option<skein_core::group::AssignorKind>,
    pub group_static: Option<bool>,
    pub produce_rate: Option<f64>,
    pub acks: Option<Acks>,
    pub idempotent: Option<bool>,
    /// `[workload] compression`: producers compress some batches (a seeded codec each).
    pub compression: Option<bool>,
    /// `[workload] kind`: "plain" (the default) or "txn".
    pub workload: Option<crate::modes::Workload>,
    /// `[workload] pipelines`: the txn workload's read-process-write pipelines.
    pub pipelines: Option<u32>,
    /// `[workload] txn_keep_epoch`: the txn workload's producers are old clients (EndTxn
    /// before v5: no KIP-890 part 2 epoch bump per transaction).
    pub txn_keep_epoch: Option<bool>,
    /// `[workload] txn_abort_in_flight`: the txn workload's applications abort without
    /// waiting for their writes.
    pub txn_abort_in_flight: Option<bool>,
    pub duration: Option<SimTime>,
    pub liveness: Option<SimTime>,
    pub network: Option<NetConfig>,
    /// Random fault rates; `None` means the scenario does not set them.
    pub rates: Option<FaultRates>,
    /// Exact faults, sorted by time.
    pub schedule: Vec<Scheduled>,
    pub expect: Option<Expect>,
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
            c.apply(&cx, &mut sc)?;
        }
        if let Some(w) = raw.workload {
            w.apply(&cx, &mut sc)?;
        }
        if let Some(r) = raw.run {
            sc.duration = cx.opt_dur(&r.duration, "run.duration")?;
            sc.liveness = cx.opt_dur(&r.liveness, "run.liveness")?;
        }
        if let Some(n) = raw.network {
            sc.network = Some(n.config(&cx)?);
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
