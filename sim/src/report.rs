//! The result of one run: counts, per-invariant verdicts, the trace hash.

use crate::net::NetStats;
use crate::time::{Human, SimTime};
use crate::violation::{Violation, NAMES};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// The verdict on one invariant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "verdict")]
pub enum Verdict {
    Pass,
    /// Violated `count` times; `first` describes the earliest violation.
    Fail {
        count: u64,
        first: String,
        at: SimTime,
    },
    /// Not checked in this run, and why.
    Skipped {
        reason: String,
    },
}

/// What the group members did, for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GroupStats {
    pub members: u32,
    pub processed: u64,
    pub commits: u64,
    pub coordinator_loads: u64,
    pub member_crashes: u64,
}

/// What the transactional producers did (`--workload txn`), for the report: transactions
/// committed, aborted (on purpose or after an error) and of unknown outcome (fenced,
/// crashed, or open at the end), and producer instances made again after a fatal error.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TxnStats {
    pub committed: u64,
    pub aborted: u64,
    pub unknown: u64,
    pub reinits: u64,
    /// Read-process-write pipelines' transactions, and the input records their committed
    /// transactions processed.
    pub pipeline_committed: u64,
    pub pipeline_aborted: u64,
    pub pipeline_unknown: u64,
    pub pipeline_processed: u64,
    pub pipeline_reinits: u64,
}

/// Deterministic measures of how much work a run did, summed over every node's disk: the
/// same for the same seed and binary, so a performance regression shows up as a changed
/// count (`skein sim bench`, docs/PERFORMANCE.md) even on a noisy machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WorkStats {
    /// Storage read calls and bytes read (log scans for fetches, invariant reads, recovery).
    pub disk_reads: u64,
    pub disk_read_bytes: u64,
    pub disk_appends: u64,
    pub disk_syncs: u64,
    /// Client history events, and how many the run estimated it would record
    /// (`History::for_run`; the name is from when the history was kept in memory and room
    /// for it reserved). The estimate errs high: the tests hold it to that.
    pub history_events: u64,
    pub history_reserved: u64,
}

/// What a run did and found.
#[derive(Clone, Debug, Serialize)]
pub struct SimReport {
    pub seed: u64,
    pub scenario: Option<String>,
    /// Simulated time at the end of the run.
    pub sim_time: SimTime,
    /// Events processed by the loop.
    pub events: u64,
    /// FNV-1a over every event: equal for equal (seed, flags, binary).
    pub trace_hash: u64,
    pub sends: u64,
    /// Distinct records acknowledged to producers (acks=all).
    pub acked: u64,
    /// Distinct acknowledged records consumers read at their acknowledged offset.
    pub read: u64,
    /// Acknowledged records not found where they were acknowledged.
    pub lost: u64,
    /// Sends that failed for certain / whose outcome is unknown.
    pub failed: u64,
    pub indeterminate: u64,
    pub records_polled: u64,
    /// Consumer group: members, records they processed, commits acknowledged to them,
    /// coordinator loads of the group seen (the first load and every failover).
    pub group: Option<GroupStats>,
    /// Transactions, in a txn workload run (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub txn: Option<TxnStats>,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, u64>,
    pub net: NetStats,
    pub work: WorkStats,
    /// Leader elections seen (leader epoch bumps across all partitions).
    pub leader_changes: u64,
    /// Leaders elected from outside the ISR (unclean election enabled): their data loss is
    /// reported by acked-write-lost, and expected.
    pub unclean_elections: u64,
    /// Leaderless partitions where the injected faults destroyed every copy of some
    /// acknowledged record, one line each naming the offsets: not a protocol failure
    /// (`liveness` does not judge them), but reported and counted by sweeps.
    pub copies_destroyed: Vec<String>,
    /// Per invariant, in [`NAMES`] order.
    pub verdicts: Vec<(&'static str, Verdict)>,
    /// The first violations of each invariant (at most `invariants::MAX_KEPT` each), in
    /// time order. The verdicts' counts are exact.
    pub violations: Vec<Violation>,
    /// The history checker's summary, when it ran.
    pub history_summary: Option<String>,
    /// The fault atlas: `kind@role/moment` and how often a fault struck there.
    pub atlas: Vec<(String, u64)>,
    /// Hits of every coverage probe (`skein_core::probe`), in report order, hit or not.
    pub probes: Vec<(&'static str, u64)>,
    /// The faults the leader nemesis scheduled as elections happened (`[faults]
    /// new_leader_isolate`), in order: not part of the schedule drawn before the run, so
    /// `shrink` adds them to it to replay the run with random faults off.
    #[serde(skip)]
    pub nemesis_faults: Vec<crate::faults::Scheduled>,
    /// Clients restarted after a client crash: (the new client's id, the id of the client it
    /// first was), in restart order, so reports name a restarted producer by its role.
    #[serde(skip)]
    pub client_restarts: Vec<(u64, u64)>,
}

impl SimReport {
    /// Records the run's probe counts (they are not part of the trace hash: recording
    /// probes observes the run, it does not change it).
    pub fn set_probes(&mut self, counts: skein_core::probe::ProbeCounts) {
        self.probes = counts.iter().map(|(p, n)| (p.name(), n)).collect();
    }

    /// Names of the probes this run hit.
    pub fn probes_hit(&self) -> Vec<&'static str> {
        self.probes
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(p, _)| *p)
            .collect()
    }

    /// No invariant failed.
    pub fn passed(&self) -> bool {
        self.verdicts
            .iter()
            .all(|(_, v)| !matches!(v, Verdict::Fail { .. }))
    }

    /// Names of the invariants that failed.
    pub fn failed_invariants(&self) -> Vec<&'static str> {
        self.verdicts
            .iter()
            .filter(|(_, v)| matches!(v, Verdict::Fail { .. }))
            .map(|(n, _)| *n)
            .collect()
    }

    /// The verdict of one invariant.
    pub fn verdict(&self, name: &str) -> Option<&Verdict> {
        self.verdicts
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
    }

    /// Builds the verdict list from the exact violation counts, the kept violations (sorted
    /// by time; each invariant's first among them) and skipped invariants. An invariant
    /// counted but not in [`NAMES`] still gets a failing verdict, after the named ones: a
    /// violation is never dropped from the verdicts.
    pub fn verdicts_from(
        counts: &BTreeMap<&'static str, u64>,
        violations: &[Violation],
        skipped: &BTreeMap<&'static str, String>,
    ) -> Vec<(&'static str, Verdict)> {
        let extra = counts.keys().copied().filter(|n| !NAMES.contains(n));
        NAMES
            .iter()
            .copied()
            .chain(extra)
            .map(|name| {
                let count = counts.get(name).copied().unwrap_or(0);
                let verdict = if count > 0 {
                    let first = violations.iter().find(|v| v.invariant == name);
                    Verdict::Fail {
                        count,
                        first: first
                            .map_or_else(|| "(no example kept)".to_string(), |v| v.detail.clone()),
                        at: first.map_or(0, |v| v.at),
                    }
                } else if let Some(reason) = skipped.get(name) {
                    Verdict::Skipped {
                        reason: reason.clone(),
                    }
                } else {
                    Verdict::Pass
                };
                (name, verdict)
            })
            .collect()
    }
}

impl fmt::Display for SimReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "seed         {}", self.seed)?;
        if let Some(s) = &self.scenario {
            writeln!(f, "scenario     {s}")?;
        }
        writeln!(f, "sim time     {}", Human(self.sim_time))?;
        writeln!(f, "events       {}", self.events)?;
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        writeln!(
            f,
            "faults       {} ({})",
            self.faults.values().sum::<u64>(),
            if faults.is_empty() {
                "none".to_string()
            } else {
                faults.join(" ")
            }
        )?;
        writeln!(
            f,
            "network      sent={} lost={} partitioned={} duplicated={} reordered={} clogged={}",
            self.net.sent,
            self.net.lost,
            self.net.partitioned,
            self.net.duplicated,
            self.net.reordered,
            self.net.clogged
        )?;
        write!(f, "elections    {} leader changes", self.leader_changes)?;
        if self.unclean_elections > 0 {
            write!(f, " ({} unclean)", self.unclean_elections)?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "records      sent={} acked={} read={} lost={} failed={} unknown={} polled={}",
            self.sends,
            self.acked,
            self.read,
            self.lost,
            self.failed,
            self.indeterminate,
            self.records_polled
        )?;
        for line in &self.copies_destroyed {
            writeln!(f, "destroyed    {line}")?;
        }
        if let Some(t) = &self.txn {
            writeln!(
                f,
                "txns         committed={} aborted={} unknown={} reinits={}",
                t.committed, t.aborted, t.unknown, t.reinits
            )?;
            writeln!(
                f,
                "pipelines    committed={} aborted={} unknown={} reinits={} processed={}",
                t.pipeline_committed,
                t.pipeline_aborted,
                t.pipeline_unknown,
                t.pipeline_reinits,
                t.pipeline_processed
            )?;
        }
        if let Some(g) = &self.group {
            writeln!(
                f,
                "group        members={} processed={} commits={} coordinator-loads={} member-crashes={}",
                g.members, g.processed, g.commits, g.coordinator_loads, g.member_crashes
            )?;
        }
        if !self.probes.is_empty() {
            let missed: Vec<&str> = self
                .probes
                .iter()
                .filter(|(_, n)| *n == 0)
                .map(|(p, _)| *p)
                .collect();
            write!(
                f,
                "probes       {} of {} hit",
                self.probes.len() - missed.len(),
                self.probes.len()
            )?;
            if !missed.is_empty() {
                write!(f, " (not hit: {})", missed.join(" "))?;
            }
            writeln!(f)?;
        }
        writeln!(f, "invariants")?;
        for (name, v) in &self.verdicts {
            match v {
                Verdict::Pass => writeln!(f, "  {name:<28} ok")?,
                Verdict::Skipped { reason } => writeln!(f, "  {name:<28} skipped ({reason})")?,
                Verdict::Fail { count, first, at } => writeln!(
                    f,
                    "  {name:<28} FAILED x{count}, first at {}: {first}",
                    Human(*at)
                )?,
            }
        }
        writeln!(f, "trace hash   {:016x}", self.trace_hash)?;
        write!(
            f,
            "verdict      {}",
            if self.passed() { "PASS" } else { "FAIL" }
        )
    }
}
