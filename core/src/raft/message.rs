//! Raft's vocabulary: log entries, snapshots and the messages nodes exchange.

use crate::types::{Nanos, NodeId};
use serde::{Deserialize, Serialize};

/// A Raft term: a logical clock bumped by every election.
pub type Term = u64;
/// Position of an entry in the Raft log, dense from 1 (0 means "before the first entry").
pub type Index = u64;

/// What an entry carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Payload {
    /// Appended by every new leader: committing it commits everything before it, which a
    /// leader may not do by counting replicas of older terms (Raft paper, figure 8).
    Noop,
    /// An application command (for the controller: one batch of metadata records).
    Command(Vec<u8>),
}

/// One entry of the Raft log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub index: Index,
    pub term: Term,
    pub payload: Payload,
}

/// The application's state-machine image as of `last_index` (inclusive): every entry up
/// to it is folded into `data`, so the log before it can be dropped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub last_index: Index,
    pub last_term: Term,
    pub data: Vec<u8>,
}

impl Snapshot {
    /// The snapshot of the empty log every node starts from.
    pub fn empty() -> Self {
        Self {
            last_index: 0,
            last_term: 0,
            data: Vec::new(),
        }
    }
}

/// A message between Raft nodes. Every message carries the sender's term (for
/// `PreVote` the term it *would* campaign in).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    /// "Would you vote for me in `term`?" Changes no state at the receiver: a node that
    /// cannot win (partitioned, or behind) learns so without bumping anyone's term.
    PreVote {
        term: Term,
        last_index: Index,
        last_term: Term,
    },
    /// `term` is the campaign term when granted, the responder's term when refused.
    PreVoteResponse {
        term: Term,
        granted: bool,
    },
    RequestVote {
        term: Term,
        last_index: Index,
        last_term: Term,
    },
    VoteResponse {
        term: Term,
        granted: bool,
    },
    /// Replication and heartbeat in one: entries after `prev_index`, which must hold an
    /// entry of `prev_term` at the receiver (log matching).
    Append {
        term: Term,
        prev_index: Index,
        prev_term: Term,
        entries: Vec<Entry>,
        commit: Index,
        /// The leader's clock when it sent this, echoed back: the follower heard from the
        /// leader no earlier, so it refuses votes until at least `sent_at` plus an election
        /// timeout (the leader lease, [`crate::raft::Raft::has_lease`]).
        sent_at: Nanos,
    },
    /// `Ok { match_index }`: the follower's log matches the leader's through `match_index`.
    /// `Reject`: the follower has no entry of `prev_term` at `rejected`; `hint` is where the
    /// leader should probe next (the follower's last index, if shorter).
    AppendResponse {
        term: Term,
        result: AppendResult,
        /// The answered `Append`'s `sent_at` (0: not an answer to an accepted `Append`).
        echo: Nanos,
    },
    /// The leader no longer has the entries a follower needs: the whole image instead.
    InstallSnapshot {
        term: Term,
        snapshot: Snapshot,
    },
}

/// Outcome of an `Append` (or `InstallSnapshot`) at the follower.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AppendResult {
    Ok { match_index: Index },
    Reject { rejected: Index, hint: Index },
}

impl Message {
    pub fn term(&self) -> Term {
        match self {
            Message::PreVote { term, .. }
            | Message::PreVoteResponse { term, .. }
            | Message::RequestVote { term, .. }
            | Message::VoteResponse { term, .. }
            | Message::Append { term, .. }
            | Message::AppendResponse { term, .. }
            | Message::InstallSnapshot { term, .. } => *term,
        }
    }

    /// Whether the message comes from a leader of its term.
    pub fn is_from_leader(&self) -> bool {
        matches!(
            self,
            Message::Append { .. } | Message::InstallSnapshot { .. }
        )
    }
}

/// The role a node plays in its current term.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RaftRole {
    Follower,
    /// Asking for pre-votes; the term is not bumped yet.
    PreCandidate,
    Candidate,
    Leader,
}

/// What a Raft node asks its driver to do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RaftOutput {
    /// Deliver `message` to `to`. Everything it depends on is already durable.
    Send { to: NodeId, message: Message },
    /// Entries newly known committed, in index order, each exactly once per process
    /// lifetime (after a restart, from the snapshot on).
    Apply(Vec<Entry>),
    /// Replace the application state with this image (a laggard got a snapshot).
    RestoreSnapshot(Snapshot),
    /// The node's role, term or known leader changed.
    RoleChanged {
        role: RaftRole,
        term: Term,
        leader: Option<NodeId>,
    },
    /// A storage write failed: the node stopped and must be reopened.
    StorageFailed(String),
}
