//! # skein-jepsen: client histories and the checker that judges them
//!
//! A history is a JSON Lines file of client operations (see `docs/history.md`), written by
//! the simulator or by tests against a real cluster through [`HistoryWriter`], and read back
//! with [`read_history`]. The checker ([`check`]) reads the events once, indexes sends and
//! reads per partition and each process's position, and returns a [`Report`] naming
//! Kafka-style anomalies as Jepsen does (lost-write, duplicate, poll-skip, ...), with counts
//! and examples that point at history indexes. The `skein check` command wraps all three.
//!
//! For tests of real processes (`skein jepsen run`, see `docs/jepsen.md`) the crate also
//! holds the generic harness parts: [`nemesis`] draws a seeded fault schedule, [`proxy`] is
//! the fault-injecting TCP proxy put between nodes, and [`plot`] draws the history (latency,
//! rate, timeline) with the fault windows shaded.

pub mod check;
mod cycles;
mod fast;
pub use skein_core::fxhash;
pub mod history;
pub mod io;
pub mod nemesis;
pub mod plot;
pub mod proxy;
pub mod report;
mod txn_check;
pub mod txn_report;
mod txn_value;

pub use check::{check, CheckOptions, StreamChecker, DEFAULT_MAX_EXAMPLES};
pub use history::{
    AckPromise, AssignValue, CommitOffset, CommitValue, Event, EventType, Function, Index, Nanos,
    Offset, Partition, PollValue, PolledRecord, Process, SendValue, SubscribeValue, Text, Value,
    FORMAT_VERSION,
};
pub use history::{Isolation, MicroOp, PollRead, PollValueTxn, TxnValue};
pub use io::{read_history, HistoryError, HistoryReader, HistoryWriter};
pub use report::{
    Anomaly, AnomalyKind, BadRead, CommitStep, Committed, Duplicate, Empty, Inconsistent, Located,
    Missing, Observed, Place, Policy, Report, Seen, Source, Stats, Step, WeakAck,
};
pub use txn_report::{
    Cycle, Dep, IntermediateRead, Processing, Record, Torn, TxnDuplicate, TxnKind, TxnRead, TxnRef,
    TxnReport, TxnStats, TxnStatus, TxnWrite,
};
