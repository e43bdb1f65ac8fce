//! What a leader knows about each follower's log.

use super::message::Index;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProgressState {
    /// Where the follower's log matches is unknown: one append at a time, each waiting for
    /// its answer (or the next heartbeat), walking `next` back on every reject.
    Probe,
    /// The follower matched: appends are pipelined, `next` advances as they are sent.
    Replicate,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Progress {
    /// Highest index known to match the leader's log (only ever grows within a term).
    pub(crate) match_index: Index,
    /// Next index to send.
    pub(crate) next: Index,
    pub(crate) state: ProgressState,
    /// When the leader last heard from it at this term (check-quorum counts followers
    /// heard within the last election timeout: by time, not by rounds, so a leader that
    /// was paused past its deadline does not count what it heard before the pause).
    pub(crate) last_heard: Option<crate::types::Nanos>,
    /// The latest `Append::sent_at` it echoed: it heard from this leader no earlier (the
    /// leader lease, `Raft::has_lease`).
    pub(crate) lease_basis: Option<crate::types::Nanos>,
}

impl Progress {
    pub(crate) fn new(last_index: Index) -> Self {
        Self {
            match_index: 0,
            next: last_index + 1,
            state: ProgressState::Probe,
            last_heard: None,
            lease_basis: None,
        }
    }

    pub(crate) fn check(&self) {
        debug_assert!(self.next > self.match_index, "{self:?}");
    }
}
