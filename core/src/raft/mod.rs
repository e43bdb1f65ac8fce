//! Raft for the controller quorum's metadata log: a small sans-I/O implementation in the
//! shape of every other core machine (`step`, `handle_timeout`, `poll_outputs`, `poll_timeout`),
//! after the shape (not the code) of etcd-io/raft and tikv/raft-rs.
//!
//! Data flow: peers' [`Message`]s arrive through [`Raft::step`], time through
//! [`Raft::handle_timeout`], application commands through [`Raft::propose`] (leader only) and the
//! application's images through [`Raft::compact`]. The node changes its term, vote and log
//! and writes them to its [`crate::log::Storage`] (fsynced) *before* queueing any message
//! that depends on them; then [`Raft::poll_outputs`] hands the driver the messages to send,
//! the newly committed entries to apply (in order, each once per process lifetime), images
//! to restore, and role changes. Elections use pre-vote (a node campaigns only if a
//! majority would vote for it, and nodes that hear from a live leader refuse), leaders step
//! down when they cannot reach a majority for an election timeout (check-quorum), and a
//! leader commits only entries of its own term (figure 8). A follower whose needed entries
//! were compacted gets an `InstallSnapshot`. Membership is fixed at `RaftConfig::voters`.
//! See `docs/controller.md` for the invariants and the bug flags of [`RaftBugs`].

mod bugs;
mod log;
mod message;
mod node;
mod progress;
mod store;

pub use bugs::RaftBugs;
pub use message::{
    AppendResult, Entry, Index, Message, Payload, RaftOutput, RaftRole, Snapshot, Term,
};
pub use node::{CompactError, ProposeError, Raft, RaftConfig};
pub use store::{HardState, RaftOpenError};

#[cfg(test)]
mod cluster;
#[cfg(test)]
mod tests;
