//! The checker's verdict: counts and examples per anomaly, as JSON or as a human summary.

use crate::history::{Index, Offset, Partition, Process, Text};
use crate::txn_report::TxnReport;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The anomalies the checker knows, named as in Jepsen's Kafka checker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnomalyKind {
    LostWrite,
    Duplicate,
    InconsistentOffsets,
    NonmonotonicPoll,
    PollSkip,
    IntNonmonotonicPoll,
    IntPollSkip,
    NonmonotonicSend,
    AbortedRead,
    FutureRead,
    CommitRegression,
    Unseen,
    UnsentRead,
    EmptyHistory,
    Acks1Loss,
}

/// Which policy makes an anomaly kind count against a history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Always an anomaly.
    Always,
    /// Only with `--final-reads` (the history ends with reads to the end of every partition).
    FinalReads,
    /// Only with `--strict` (Jepsen's policies).
    Strict,
    /// Never: what a weaker guarantee allows, reported for information.
    Allowed,
}

impl AnomalyKind {
    pub const ALL: [AnomalyKind; 15] = [
        AnomalyKind::LostWrite,
        AnomalyKind::Duplicate,
        AnomalyKind::InconsistentOffsets,
        AnomalyKind::NonmonotonicPoll,
        AnomalyKind::PollSkip,
        AnomalyKind::IntNonmonotonicPoll,
        AnomalyKind::IntPollSkip,
        AnomalyKind::NonmonotonicSend,
        AnomalyKind::AbortedRead,
        AnomalyKind::FutureRead,
        AnomalyKind::CommitRegression,
        AnomalyKind::Unseen,
        AnomalyKind::UnsentRead,
        AnomalyKind::EmptyHistory,
        AnomalyKind::Acks1Loss,
    ];

    /// When this kind invalidates a history.
    pub fn policy(self) -> Policy {
        match self {
            AnomalyKind::Unseen => Policy::FinalReads,
            AnomalyKind::UnsentRead | AnomalyKind::EmptyHistory => Policy::Strict,
            AnomalyKind::Acks1Loss => Policy::Allowed,
            _ => Policy::Always,
        }
    }

    /// The name Jepsen's Kafka checker (or Elle, behind it) reports the same finding under,
    /// if it has one.
    pub fn jepsen_name(self) -> Option<&'static str> {
        match self {
            AnomalyKind::AbortedRead => Some("G1a"),
            AnomalyKind::FutureRead => Some("G1c-realtime"),
            AnomalyKind::UnsentRead => Some("no-writer-of-value"),
            AnomalyKind::EmptyHistory => Some("stats: no ok operations"),
            AnomalyKind::CommitRegression | AnomalyKind::Acks1Loss => None,
            k => Some(k.name()),
        }
    }

    /// Skein's name, e.g. `lost-write` (Jepsen's where Jepsen has one; see `jepsen_name`).
    pub fn name(self) -> &'static str {
        match self {
            AnomalyKind::LostWrite => "lost-write",
            AnomalyKind::Duplicate => "duplicate",
            AnomalyKind::InconsistentOffsets => "inconsistent-offsets",
            AnomalyKind::NonmonotonicPoll => "nonmonotonic-poll",
            AnomalyKind::PollSkip => "poll-skip",
            AnomalyKind::IntNonmonotonicPoll => "int-nonmonotonic-poll",
            AnomalyKind::IntPollSkip => "int-poll-skip",
            AnomalyKind::NonmonotonicSend => "nonmonotonic-send",
            AnomalyKind::AbortedRead => "aborted-read",
            AnomalyKind::FutureRead => "future-read",
            AnomalyKind::CommitRegression => "commit-regression",
            AnomalyKind::Unseen => "unseen",
            AnomalyKind::UnsentRead => "unsent-read",
            AnomalyKind::EmptyHistory => "empty-history",
            AnomalyKind::Acks1Loss => "acks-1-loss",
        }
    }
}

impl fmt::Display for AnomalyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How many times one anomaly occurred, with the first few occurrences (by history index).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Anomaly<T> {
    pub count: u64,
    pub examples: Vec<T>,
}

impl<T> Default for Anomaly<T> {
    fn default() -> Self {
        Self {
            count: 0,
            examples: Vec::new(),
        }
    }
}

/// An acknowledged send whose value no read ever observed (lost-write, unseen).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Missing {
    pub topic: Text,
    pub partition: Partition,
    pub offset: Offset,
    pub value: Text,
    /// Index of the `ok` send.
    pub send_index: Index,
    pub process: Process,
    /// The highest offset any read observed in this partition, and the poll that read it.
    pub highest_read: Option<Located>,
}

/// An offset seen at some history index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Located {
    pub index: Index,
    pub offset: Offset,
}

/// A value observed at more than one place (duplicate).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Duplicate {
    pub value: Text,
    /// How many distinct places (partition, offset) the value was seen at.
    pub place_count: u64,
    /// The first few of them (by history index), each with its first observation.
    pub places: Vec<Place>,
}

/// Where a value was observed, and by which event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Place {
    pub topic: Text,
    pub partition: Partition,
    pub offset: Offset,
    pub index: Index,
    pub source: Source,
}

/// What observed a value at an offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// A record returned by an `ok` poll.
    Read,
    /// The offset of an `ok` send.
    Send,
}

/// One offset seen holding different values (inconsistent-offsets).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Inconsistent {
    pub topic: Text,
    pub partition: Partition,
    pub offset: Offset,
    /// How many distinct values the offset was seen holding.
    pub value_count: u64,
    /// The first few of them (by history index), each with the first event that observed it.
    pub values: Vec<Observed>,
}

/// A value and the event that observed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Observed {
    pub value: Text,
    pub index: Index,
    pub source: Source,
}

/// Two successive observations by one process of one partition that go wrong
/// (nonmonotonic-poll, poll-skip, their int- forms, nonmonotonic-send).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Step {
    pub process: Process,
    pub topic: Text,
    pub partition: Partition,
    pub before: Seen,
    pub after: Seen,
    /// For skips: how many offsets strictly between the two are known to hold records, and
    /// the first few of them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped_count: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Offset>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A value at an offset, seen by the event at `index`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Seen {
    pub index: Index,
    pub offset: Offset,
    pub value: Text,
}

/// A read of a value that cannot have been there yet or at all (aborted-read, future-read,
/// unsent-read).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct BadRead {
    pub topic: Text,
    pub partition: Partition,
    pub offset: Offset,
    pub value: Text,
    /// The reading process and its poll's completion.
    pub process: Process,
    pub read_index: Index,
    /// The send event that makes the read wrong: the `fail` completion (aborted-read) or the
    /// `invoke` (future-read); none for unsent-read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_index: Option<Index>,
}

/// A committed offset that went backwards (commit-regression).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CommitStep {
    pub group: Text,
    pub topic: Text,
    pub partition: Partition,
    /// The highest acknowledged commit completed before `after` was invoked.
    pub before: Committed,
    pub after: Committed,
}

/// One acknowledged commit of one partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Committed {
    /// The `ok` completion.
    pub index: Index,
    pub process: Process,
    pub offset: Offset,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u32>,
}

/// Why a history proves nothing (empty-history).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Empty {
    pub reason: String,
}

/// An `acks=1` (or `0`) acknowledgement that the log did not keep: the anomaly it would be
/// under `acks=all`, and the events involved (acks-1-loss).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct WeakAck {
    /// What the history would show under `acks=all`.
    pub excuses: AnomalyKind,
    pub topic: Text,
    pub partition: Partition,
    pub offset: Offset,
    pub value: Text,
    /// The weakly acknowledged send.
    pub send_index: Index,
    /// Every event the finding names (as the excused anomaly's example would).
    pub indexes: Vec<Index>,
}

/// What the history contained, for context in the summary.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Stats {
    pub events: u64,
    pub processes: u64,
    pub partitions: u64,
    pub sends_ok: u64,
    pub sends_info: u64,
    pub sends_fail: u64,
    pub polls_ok: u64,
    /// Polls completed `info` or `fail` (their records, if any, are evidence too).
    #[serde(default)]
    pub polls_info: u64,
    #[serde(default)]
    pub polls_fail: u64,
    /// Records returned by polls of any completion type.
    pub records_read: u64,
    #[serde(default)]
    pub commits_ok: u64,
    /// Distinct values sent or read.
    pub values: u64,
}

/// The checker's verdict on one history.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct Report {
    /// No anomaly found that counts in this mode (see [`AnomalyKind::policy`]).
    pub valid: bool,
    /// Whether the history was checked as ending with reads to the end of every partition.
    pub final_reads: bool,
    /// Whether Jepsen's stricter policies applied (empty-history, unsent-read).
    pub strict: bool,
    pub stats: Stats,
    pub lost_write: Anomaly<Missing>,
    pub duplicate: Anomaly<Duplicate>,
    pub inconsistent_offsets: Anomaly<Inconsistent>,
    pub nonmonotonic_poll: Anomaly<Step>,
    pub poll_skip: Anomaly<Step>,
    pub int_nonmonotonic_poll: Anomaly<Step>,
    pub int_poll_skip: Anomaly<Step>,
    pub nonmonotonic_send: Anomaly<Step>,
    pub aborted_read: Anomaly<BadRead>,
    pub future_read: Anomaly<BadRead>,
    pub commit_regression: Anomaly<CommitStep>,
    /// Acknowledged sends never read and with no higher offset read: always counted, an
    /// anomaly only with `final_reads`.
    pub unseen: Anomaly<Missing>,
    /// Counted always, an anomaly only with `strict`.
    pub unsent_read: Anomaly<BadRead>,
    pub empty_history: Anomaly<Empty>,
    /// Never an anomaly: what `acks=1` allows.
    #[serde(rename = "acks-1-loss")]
    pub acks_1_loss: Anomaly<WeakAck>,
    /// The transactional verdict, if the history has `txn` events (`docs/history.md`,
    /// "Transactions").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub txn: Option<TxnReport>,
}

impl Report {
    /// How many times `kind` occurred.
    pub fn count(&self, kind: AnomalyKind) -> u64 {
        match kind {
            AnomalyKind::LostWrite => self.lost_write.count,
            AnomalyKind::Duplicate => self.duplicate.count,
            AnomalyKind::InconsistentOffsets => self.inconsistent_offsets.count,
            AnomalyKind::NonmonotonicPoll => self.nonmonotonic_poll.count,
            AnomalyKind::PollSkip => self.poll_skip.count,
            AnomalyKind::IntNonmonotonicPoll => self.int_nonmonotonic_poll.count,
            AnomalyKind::IntPollSkip => self.int_poll_skip.count,
            AnomalyKind::NonmonotonicSend => self.nonmonotonic_send.count,
            AnomalyKind::AbortedRead => self.aborted_read.count,
            AnomalyKind::FutureRead => self.future_read.count,
            AnomalyKind::CommitRegression => self.commit_regression.count,
            AnomalyKind::Unseen => self.unseen.count,
            AnomalyKind::UnsentRead => self.unsent_read.count,
            AnomalyKind::EmptyHistory => self.empty_history.count,
            AnomalyKind::Acks1Loss => self.acks_1_loss.count,
        }
    }

    /// Whether `kind` makes this history invalid when it occurs, in this report's mode.
    pub fn is_anomaly(&self, kind: AnomalyKind) -> bool {
        match kind.policy() {
            Policy::Always => true,
            Policy::FinalReads => self.final_reads,
            Policy::Strict => self.strict,
            Policy::Allowed => false,
        }
    }

    /// The anomalies found (those that make the history invalid), in a fixed order.
    pub fn found(&self) -> Vec<AnomalyKind> {
        AnomalyKind::ALL
            .into_iter()
            .filter(|&k| self.is_anomaly(k) && self.count(k) > 0)
            .collect()
    }

    /// Judges dependency cycles of transactions (G0, G1c, G-single, G2) as anomalies, or
    /// not (the default: Kafka does not promise serializability), and recomputes `valid`.
    pub fn set_serializable(&mut self, on: bool) {
        if let Some(t) = &mut self.txn {
            t.set_serializable(on);
        }
        self.valid = self.found().is_empty() && self.txn.as_ref().is_none_or(|t| t.valid);
    }

    /// The history indexes named by the examples of `kind`, in example order.
    pub fn example_indexes(&self, kind: AnomalyKind) -> Vec<Vec<Index>> {
        fn steps(a: &Anomaly<Step>) -> Vec<Vec<Index>> {
            a.examples
                .iter()
                .map(|s| vec![s.before.index, s.after.index])
                .collect()
        }
        fn missing(a: &Anomaly<Missing>) -> Vec<Vec<Index>> {
            a.examples.iter().map(|m| vec![m.send_index]).collect()
        }
        fn reads(a: &Anomaly<BadRead>) -> Vec<Vec<Index>> {
            a.examples
                .iter()
                .map(|r| r.send_index.into_iter().chain([r.read_index]).collect())
                .collect()
        }
        match kind {
            AnomalyKind::LostWrite => missing(&self.lost_write),
            AnomalyKind::Unseen => missing(&self.unseen),
            AnomalyKind::Duplicate => self
                .duplicate
                .examples
                .iter()
                .map(|d| d.places.iter().map(|p| p.index).collect())
                .collect(),
            AnomalyKind::InconsistentOffsets => self
                .inconsistent_offsets
                .examples
                .iter()
                .map(|i| i.values.iter().map(|v| v.index).collect())
                .collect(),
            AnomalyKind::NonmonotonicPoll => steps(&self.nonmonotonic_poll),
            AnomalyKind::PollSkip => steps(&self.poll_skip),
            AnomalyKind::IntNonmonotonicPoll => steps(&self.int_nonmonotonic_poll),
            AnomalyKind::IntPollSkip => steps(&self.int_poll_skip),
            AnomalyKind::NonmonotonicSend => steps(&self.nonmonotonic_send),
            AnomalyKind::AbortedRead => reads(&self.aborted_read),
            AnomalyKind::FutureRead => reads(&self.future_read),
            AnomalyKind::UnsentRead => reads(&self.unsent_read),
            AnomalyKind::CommitRegression => self
                .commit_regression
                .examples
                .iter()
                .map(|c| vec![c.before.index, c.after.index])
                .collect(),
            AnomalyKind::EmptyHistory => vec![Vec::new(); self.empty_history.examples.len()],
            AnomalyKind::Acks1Loss => self
                .acks_1_loss
                .examples
                .iter()
                .map(|w| w.indexes.clone())
                .collect(),
        }
    }
}

/// The human summary: verdict, counts per anomaly, and examples with history indexes.
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.stats;
        let mut names: Vec<String> = self.found().iter().map(|k| k.name().to_string()).collect();
        if let Some(t) = &self.txn {
            names.extend(t.found().iter().map(|k| format!("txn {}", k.name())));
        }
        if names.is_empty() {
            writeln!(f, "VALID: no anomalies")?;
        } else {
            writeln!(f, "INVALID: {}", names.join(", "))?;
        }
        writeln!(
            f,
            "history: {} events, {} processes, {} partitions, {} values; sends ok {}, info {}, fail {}; polls ok {}, info {}, fail {}, reading {} records; commits ok {}",
            s.events,
            s.processes,
            s.partitions,
            s.values,
            s.sends_ok,
            s.sends_info,
            s.sends_fail,
            s.polls_ok,
            s.polls_info,
            s.polls_fail,
            s.records_read,
            s.commits_ok
        )?;
        for kind in AnomalyKind::ALL {
            let count = self.count(kind);
            let note = match kind.policy() {
                _ if self.is_anomaly(kind) => "",
                Policy::FinalReads => " (not an anomaly without --final-reads)",
                Policy::Strict => " (not an anomaly without --strict)",
                _ => " (allowed: acks=1 promises only the leader's append)",
            };
            writeln!(f, "  {:<22} {count}{note}", kind.name())?;
        }
        for kind in AnomalyKind::ALL {
            if self.count(kind) == 0 {
                continue;
            }
            writeln!(f, "{} examples:", kind.name())?;
            self.write_examples(f, kind)?;
        }
        if let Some(t) = &self.txn {
            write!(f, "{t}")?;
        }
        Ok(())
    }
}

impl Report {
    /// The example lines of one anomaly kind, as the summary lists them.
    fn write_examples(&self, f: &mut fmt::Formatter<'_>, kind: AnomalyKind) -> fmt::Result {
        match kind {
            AnomalyKind::LostWrite => missing_lines(f, &self.lost_write)?,
            AnomalyKind::Unseen => missing_lines(f, &self.unseen)?,
            AnomalyKind::Duplicate => {
                for d in &self.duplicate.examples {
                    write!(f, "  value {:?} at", d.value.as_str())?;
                    for p in &d.places {
                        write!(
                            f,
                            " {}-{}@{} ({} #{})",
                            p.topic,
                            p.partition,
                            p.offset,
                            source_name(p.source),
                            p.index
                        )?;
                    }
                    more(f, d.place_count, d.places.len())?;
                }
            }
            AnomalyKind::InconsistentOffsets => {
                for i in &self.inconsistent_offsets.examples {
                    write!(f, "  {}-{}@{} holds", i.topic, i.partition, i.offset)?;
                    for v in &i.values {
                        write!(
                            f,
                            " {:?} ({} #{})",
                            v.value.as_str(),
                            source_name(v.source),
                            v.index
                        )?;
                    }
                    more(f, i.value_count, i.values.len())?;
                }
            }
            AnomalyKind::NonmonotonicPoll => step_lines(f, &self.nonmonotonic_poll)?,
            AnomalyKind::PollSkip => step_lines(f, &self.poll_skip)?,
            AnomalyKind::IntNonmonotonicPoll => step_lines(f, &self.int_nonmonotonic_poll)?,
            AnomalyKind::IntPollSkip => step_lines(f, &self.int_poll_skip)?,
            AnomalyKind::NonmonotonicSend => step_lines(f, &self.nonmonotonic_send)?,
            AnomalyKind::AbortedRead => read_lines(f, &self.aborted_read, "failed send")?,
            AnomalyKind::FutureRead => read_lines(f, &self.future_read, "send invoked")?,
            AnomalyKind::UnsentRead => read_lines(f, &self.unsent_read, "")?,
            AnomalyKind::CommitRegression => {
                for c in &self.commit_regression.examples {
                    writeln!(
                        f,
                        "  group {:?} {}-{}: committed {} by process {} (#{}{}), then {} by process {} (#{}{})",
                        c.group.as_str(),
                        c.topic,
                        c.partition,
                        c.before.offset,
                        c.before.process,
                        c.before.index,
                        generation(c.before.generation),
                        c.after.offset,
                        c.after.process,
                        c.after.index,
                        generation(c.after.generation),
                    )?;
                }
            }
            AnomalyKind::EmptyHistory => {
                for e in &self.empty_history.examples {
                    writeln!(f, "  {}", e.reason)?;
                }
            }
            AnomalyKind::Acks1Loss => {
                for w in &self.acks_1_loss.examples {
                    let list: Vec<String> = w.indexes.iter().map(|i| format!("#{i}")).collect();
                    writeln!(
                        f,
                        "  {}-{}@{} value {:?} acknowledged with acks=1 (#{}): {} ({})",
                        w.topic,
                        w.partition,
                        w.offset,
                        w.value.as_str(),
                        w.send_index,
                        w.excuses.name(),
                        list.join(", ")
                    )?;
                }
            }
        }
        Ok(())
    }
}

/// Ends an example line, saying how many entries it did not list.
fn more(f: &mut fmt::Formatter<'_>, count: u64, listed: usize) -> fmt::Result {
    match count.saturating_sub(listed as u64) {
        0 => writeln!(f),
        n => writeln!(f, " and {n} more"),
    }
}

fn source_name(s: Source) -> &'static str {
    match s {
        Source::Read => "read",
        Source::Send => "send",
    }
}

fn missing_lines(f: &mut fmt::Formatter<'_>, a: &Anomaly<Missing>) -> fmt::Result {
    for m in &a.examples {
        write!(
            f,
            "  {}-{}@{} value {:?} sent ok by process {} (#{})",
            m.topic,
            m.partition,
            m.offset,
            m.value.as_str(),
            m.process,
            m.send_index
        )?;
        match &m.highest_read {
            Some(h) => writeln!(f, "; highest offset read {} (#{})", h.offset, h.index)?,
            None => writeln!(f, "; partition never read")?,
        }
    }
    Ok(())
}

fn generation(g: Option<u32>) -> String {
    g.map_or(String::new(), |g| format!(", generation {g}"))
}

fn read_lines(f: &mut fmt::Formatter<'_>, a: &Anomaly<BadRead>, what: &str) -> fmt::Result {
    for r in &a.examples {
        write!(
            f,
            "  process {} read {}-{}@{} value {:?} (#{})",
            r.process,
            r.topic,
            r.partition,
            r.offset,
            r.value.as_str(),
            r.read_index
        )?;
        match r.send_index {
            Some(i) => writeln!(f, "; {what} #{i}")?,
            None => writeln!(f, "; no send of it in the history")?,
        }
    }
    Ok(())
}

fn step_lines(f: &mut fmt::Formatter<'_>, a: &Anomaly<Step>) -> fmt::Result {
    for s in &a.examples {
        write!(
            f,
            "  process {} on {}-{}: {} {:?} (#{}) then {} {:?} (#{})",
            s.process,
            s.topic,
            s.partition,
            s.before.offset,
            s.before.value.as_str(),
            s.before.index,
            s.after.offset,
            s.after.value.as_str(),
            s.after.index
        )?;
        if s.skipped_count > 0 {
            write!(f, ", skipping {} known offsets", s.skipped_count)?;
            let list: Vec<String> = s.skipped.iter().map(|o| o.to_string()).collect();
            write!(f, " ({}", list.join(", "))?;
            if s.skipped_count > s.skipped.len() as u64 {
                write!(f, ", ...")?;
            }
            write!(f, ")")?;
        }
        writeln!(f)?;
    }
    Ok(())
}
