//! The transactional part of the verdict (`docs/history.md`, "Transactions"):
//! counts and examples per class, each example naming its transactions and, for
//! the cycle classes, the cycle as a chain of sentences.

use crate::history::{Index, Offset, Partition, Process, Text};
use crate::report::Anomaly;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The transactional anomaly classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TxnKind {
    G0,
    G1a,
    G1b,
    G1c,
    GSingle,
    G2,
    LostWrite,
    Duplicate,
    TornTransaction,
    ExactlyOnce,
}

impl TxnKind {
    pub const ALL: [TxnKind; 10] = [
        TxnKind::G0,
        TxnKind::G1a,
        TxnKind::G1b,
        TxnKind::G1c,
        TxnKind::GSingle,
        TxnKind::G2,
        TxnKind::LostWrite,
        TxnKind::Duplicate,
        TxnKind::TornTransaction,
        TxnKind::ExactlyOnce,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TxnKind::G0 => "G0",
            TxnKind::G1a => "G1a",
            TxnKind::G1b => "G1b",
            TxnKind::G1c => "G1c",
            TxnKind::GSingle => "G-single",
            TxnKind::G2 => "G2",
            TxnKind::LostWrite => "lost-write",
            TxnKind::Duplicate => "duplicate",
            TxnKind::TornTransaction => "torn-transaction",
            TxnKind::ExactlyOnce => "exactly-once",
        }
    }

    /// Cycles need serializability to be anomalies: Kafka promises atomic commits and
    /// read_committed visibility, not isolation between writers, so concurrent
    /// transactions' records interleave in a partition and form write cycles legitimately.
    pub fn needs_serializable(self) -> bool {
        matches!(
            self,
            TxnKind::G0 | TxnKind::G1c | TxnKind::GSingle | TxnKind::G2
        )
    }
}

impl fmt::Display for TxnKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a transaction ended, as the history (and reads of its writes) tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TxnStatus {
    /// Completed `ok`, or completed `info` and a read_committed poll returned its write.
    Committed,
    /// Completed `fail`.
    Aborted,
    /// Completed `info` (or never), and nothing shows it committed.
    Unknown,
}

/// A transaction, named `T<index>` after its completion's history index (its invocation's
/// if it never completed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnRef {
    pub index: Index,
    pub process: Process,
    pub status: TxnStatus,
}

impl fmt::Display for TxnRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "T{} (process {}", self.index, self.process)?;
        match self.status {
            TxnStatus::Committed => f.write_str(")"),
            TxnStatus::Aborted => f.write_str(", aborted)"),
            TxnStatus::Unknown => f.write_str(", outcome unknown)"),
        }
    }
}

/// A record in a partition: `value` at `topic-partition@offset` (offset unknown: `None`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub topic: Text,
    pub partition: Partition,
    pub offset: Option<Offset>,
    pub value: Text,
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(o) => write!(
                f,
                "{:?} at {}-{}@{o}",
                self.value.as_str(),
                self.topic,
                self.partition
            ),
            None => write!(
                f,
                "{:?} to {}-{}",
                self.value.as_str(),
                self.topic,
                self.partition
            ),
        }
    }
}

/// A write of a transaction (lost-write).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnWrite {
    pub txn: TxnRef,
    pub record: Record,
    /// The highest offset of the partition any poll read (above the lost write's).
    pub highest_read: Offset,
}

/// One value at several places (duplicate).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnDuplicate {
    pub writer: Option<TxnRef>,
    pub places: Vec<Record>,
}

/// A read of a write it should not have seen (G1a).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnRead {
    pub writer: TxnRef,
    pub reader: TxnRef,
    pub record: Record,
}

/// A read_committed poll that stopped between two writes of one transaction (G1b).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntermediateRead {
    pub writer: TxnRef,
    pub reader: TxnRef,
    pub read: Record,
    /// The read's end (its last stable offset): the rest of the writer's writes lie beyond.
    pub end: Offset,
    pub next: Record,
}

/// A committed transaction a read_committed consumer saw in part (torn-transaction).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Torn {
    pub txn: TxnRef,
    pub reader: Process,
    /// Writes of `txn` the reader read.
    pub seen: Vec<Record>,
    /// The write the reader read past: it read `before` then `after` of its partition.
    pub missing: Record,
    pub before: Offset,
    pub after: Offset,
    /// The transaction whose poll read past it.
    pub read_by: TxnRef,
}

/// An input record of a read-process-write group not processed exactly once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Processing {
    pub group: Text,
    pub input: Record,
    /// The committed transactions that consumed it and committed the group's offset past
    /// it: none (lost: the group moved past it with no output) or several (duplicated).
    pub by: Vec<TxnRef>,
    /// The group's highest committed offset of the input partition.
    pub committed: Offset,
}

/// A dependency edge type (Adya): write-write, write-read, read-write (anti-dependency).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dep {
    Ww,
    Wr,
    Rw,
}

/// One edge of a cycle, with the sentence that justifies it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    pub from: TxnRef,
    pub to: TxnRef,
    #[serde(rename = "type")]
    pub dep: Dep,
    pub explanation: String,
}

/// A dependency cycle: each step's `to` is the next step's `from`, the last returns to the
/// first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cycle {
    pub steps: Vec<Step>,
}

/// What the transactions of the history held.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct TxnStats {
    pub txns: u64,
    pub committed: u64,
    pub aborted: u64,
    pub unknown: u64,
    pub sends: u64,
    pub polls: u64,
    pub records_read: u64,
    pub offset_commits: u64,
    pub ww_edges: u64,
    pub wr_edges: u64,
    pub rw_edges: u64,
}

/// The transactional verdict; present in a [`crate::Report`] when the history has txns.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct TxnReport {
    /// No transactional anomaly that counts in this mode.
    pub valid: bool,
    /// Whether dependency cycles (G0, G1c, G-single, G2) count as anomalies.
    pub serializable: bool,
    pub stats: TxnStats,
    #[serde(rename = "G0")]
    pub g0: Anomaly<Cycle>,
    #[serde(rename = "G1a")]
    pub g1a: Anomaly<TxnRead>,
    #[serde(rename = "G1b")]
    pub g1b: Anomaly<IntermediateRead>,
    #[serde(rename = "G1c")]
    pub g1c: Anomaly<Cycle>,
    #[serde(rename = "G-single")]
    pub g_single: Anomaly<Cycle>,
    #[serde(rename = "G2")]
    pub g2: Anomaly<Cycle>,
    pub lost_write: Anomaly<TxnWrite>,
    pub duplicate: Anomaly<TxnDuplicate>,
    pub torn_transaction: Anomaly<Torn>,
    pub exactly_once: Anomaly<Processing>,
}

impl TxnReport {
    pub fn count(&self, kind: TxnKind) -> u64 {
        match kind {
            TxnKind::G0 => self.g0.count,
            TxnKind::G1a => self.g1a.count,
            TxnKind::G1b => self.g1b.count,
            TxnKind::G1c => self.g1c.count,
            TxnKind::GSingle => self.g_single.count,
            TxnKind::G2 => self.g2.count,
            TxnKind::LostWrite => self.lost_write.count,
            TxnKind::Duplicate => self.duplicate.count,
            TxnKind::TornTransaction => self.torn_transaction.count,
            TxnKind::ExactlyOnce => self.exactly_once.count,
        }
    }

    pub fn is_anomaly(&self, kind: TxnKind) -> bool {
        self.serializable || !kind.needs_serializable()
    }

    /// The classes found that make the history invalid, in a fixed order.
    pub fn found(&self) -> Vec<TxnKind> {
        TxnKind::ALL
            .into_iter()
            .filter(|&k| self.is_anomaly(k) && self.count(k) > 0)
            .collect()
    }

    /// Judges cycles as anomalies (or not) and recomputes `valid`.
    pub fn set_serializable(&mut self, on: bool) {
        self.serializable = on;
        self.valid = self.found().is_empty();
    }

    /// The cycles found for a cycle class (empty for the others).
    pub fn cycles(&self, kind: TxnKind) -> &[Cycle] {
        match kind {
            TxnKind::G0 => &self.g0.examples,
            TxnKind::G1c => &self.g1c.examples,
            TxnKind::GSingle => &self.g_single.examples,
            TxnKind::G2 => &self.g2.examples,
            _ => &[],
        }
    }

    fn write_examples(&self, f: &mut fmt::Formatter<'_>, kind: TxnKind) -> fmt::Result {
        match kind {
            TxnKind::G0 | TxnKind::G1c | TxnKind::GSingle | TxnKind::G2 => {
                for c in self.cycles(kind) {
                    writeln!(f, "  {c}")?;
                }
            }
            TxnKind::G1a => {
                for r in &self.g1a.examples {
                    let (w, rd, rec) = (&r.writer, &r.reader, &r.record);
                    writeln!(f, "  {w} wrote {rec}, which {rd} read with read_committed")?;
                }
            }
            TxnKind::G1b => {
                for r in &self.g1b.examples {
                    writeln!(
                        f,
                        "  {} wrote {} and then {}; {} read the first but its read ended at {} (last stable offset) before the second",
                        r.writer, r.read, r.next, r.reader, r.end
                    )?;
                }
            }
            TxnKind::LostWrite => {
                for w in &self.lost_write.examples {
                    writeln!(
                        f,
                        "  {} wrote {}: never read, though polls read up to offset {}",
                        w.txn, w.record, w.highest_read
                    )?;
                }
            }
            TxnKind::Duplicate => {
                for d in &self.duplicate.examples {
                    let places: Vec<String> = d.places.iter().map(|p| p.to_string()).collect();
                    let by = d
                        .writer
                        .map(|w| format!(" (written by {w})"))
                        .unwrap_or_default();
                    writeln!(f, "  {}{by}", places.join(" and "))?;
                }
            }
            TxnKind::TornTransaction => {
                for t in &self.torn_transaction.examples {
                    let seen: Vec<String> = t.seen.iter().map(|p| p.to_string()).collect();
                    writeln!(
                        f,
                        "  {} committed; process {} saw {} but in {} read offset {} then {} of {}-{}, missing {}",
                        t.txn,
                        t.reader,
                        seen.join(", "),
                        t.read_by,
                        t.before,
                        t.after,
                        t.missing.topic,
                        t.missing.partition,
                        t.missing
                    )?;
                }
            }
            TxnKind::ExactlyOnce => {
                for p in &self.exactly_once.examples {
                    let by: Vec<String> = p.by.iter().map(|t| t.to_string()).collect();
                    let what = if by.is_empty() {
                        "processed by no committed transaction".to_string()
                    } else {
                        format!("processed {} times: by {}", by.len(), by.join(", "))
                    };
                    writeln!(
                        f,
                        "  group {:?} input {}: {what} (the group committed up to {})",
                        p.group.as_str(),
                        p.input,
                        p.committed
                    )?;
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<&str> = self.steps.iter().map(|s| s.explanation.as_str()).collect();
        write!(f, "{}; a cycle", parts.join("; "))
    }
}

/// The transactional summary, printed after the rest of the report.
impl fmt::Display for TxnReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.stats;
        let found = self.found();
        if found.is_empty() {
            writeln!(f, "transactions: VALID")?;
        } else {
            let names: Vec<&str> = found.iter().map(|k| k.name()).collect();
            writeln!(f, "transactions: INVALID: {}", names.join(", "))?;
        }
        writeln!(
            f,
            "transactions: {} ({} committed, {} aborted, {} unknown); {} sends, {} polls reading {} records, {} offset commits; dependencies ww {}, wr {}, rw {}",
            s.txns, s.committed, s.aborted, s.unknown, s.sends, s.polls, s.records_read,
            s.offset_commits, s.ww_edges, s.wr_edges, s.rw_edges
        )?;
        for kind in TxnKind::ALL {
            let note = if self.is_anomaly(kind) {
                ""
            } else {
                " (not an anomaly without --serializable)"
            };
            writeln!(f, "  {:<22} {}{note}", kind.name(), self.count(kind))?;
        }
        for kind in TxnKind::ALL {
            if self.count(kind) > 0 {
                writeln!(f, "{} examples:", kind.name())?;
                self.write_examples(f, kind)?;
            }
        }
        Ok(())
    }
}
