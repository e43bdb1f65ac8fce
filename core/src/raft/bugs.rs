//! Deliberate Raft bugs for the bug zoo: each flag re-introduces a classic consensus bug so
//! the randomized cluster test (and a scripted scenario) can show that it is caught. All
//! false by default.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaftBugs {
    /// `vote-not-persisted`: a granted vote lives in memory only. A voter that crashes and
    /// restarts in the same term votes again, so two candidates can both win that term.
    pub vote_not_persisted: bool,
    /// `commit-previous-term` (Raft paper, figure 8): the leader commits any index stored
    /// on a majority, even one holding an entry of an older term. A later leader that never
    /// had that entry can still be elected and overwrite it: a committed entry is lost.
    pub commit_previous_term: bool,
    /// `no-check-quorum`: a leader that cannot reach a majority never steps down, so a
    /// partitioned leader goes on acting as leader after a new one was elected.
    pub no_check_quorum: bool,
}

impl RaftBugs {
    pub fn any(&self) -> bool {
        self.vote_not_persisted || self.commit_previous_term || self.no_check_quorum
    }

    /// The Raft bug named as in the bug zoo (`vote-not-persisted`, ...), or `None` (also for
    /// the zoo's other bugs). The names live in one place: [`crate::bugs::BUG_NAMES`].
    pub fn named(name: &str) -> Option<Self> {
        let bugs = crate::bugs::Bugs::from_names(&[name]).ok()?.raft;
        bugs.any().then_some(bugs)
    }
}
