//! The Raft node state machine.
//!
//! Inputs: messages from peers (`step`), the passage of time (`handle_timeout`), proposals from the
//! application (`propose`) and its snapshots (`compact`). Every change of term, vote or log
//! is written to the [`Storage`] (fsynced) before any message that depends on it is queued,
//! so every output describes durable state. Outputs leave through `poll_outputs`.

use super::bugs::RaftBugs;
use super::log::RaftLog;
use super::message::*;
use super::progress::{Progress, ProgressState};
use super::store::{HardState, RaftOpenError, RaftStore};
use crate::log::{Storage, StorageError};
use crate::types::{Nanos, NodeId};
use std::collections::BTreeMap;

/// Raft tunables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaftConfig {
    pub id: NodeId,
    /// Every voter, this node included.
    pub voters: Vec<NodeId>,
    /// Base election timeout: a follower campaigns after a random time in `[base, 2 base)`
    /// without a leader; a leader steps down if it has not heard from a majority in `base`
    /// (check-quorum); a follower that heard from its leader within `base` refuses
    /// (pre-)votes (the leader lease that makes pre-vote prevent disruption).
    pub election_timeout: Nanos,
    pub heartbeat_interval: Nanos,
    /// Most entries in one `Append`.
    pub max_entries_per_append: usize,
    /// A candidate resends `RequestVote` to voters that have not answered after this long,
    /// within its election (KRaft retries vote requests too): a lost request or a voter
    /// that restarted meanwhile need not cost the whole term. `None`: one request a term.
    pub vote_retry: Option<Nanos>,
    /// Directory of the Raft files under the storage root.
    pub dir: String,
    /// Seeds the election-timeout jitter (deterministic per node).
    pub seed: u64,
    pub bugs: RaftBugs,
}

impl RaftConfig {
    pub fn new(id: NodeId, voters: Vec<NodeId>) -> Self {
        Self {
            id,
            voters,
            election_timeout: 1_000_000_000,
            heartbeat_interval: 100_000_000,
            max_entries_per_append: 64,
            vote_retry: None,
            dir: "__raft".to_string(),
            seed: 0,
            bugs: RaftBugs::default(),
        }
    }

    /// The controllers' setting (simulator and node alike): resend `RequestVote` to silent
    /// voters once per heartbeat interval. An election lasts one to two election timeouts,
    /// so a voter that restarts or rejoins during it hears the campaign within a heartbeat,
    /// as it would hear a leader: at most ten small retries a term. Core's own tests keep
    /// `new`'s default (`None`) unless they ask for this.
    pub fn retrying_votes(self) -> Self {
        Self {
            vote_retry: Some(self.heartbeat_interval),
            ..self
        }
    }

    fn validate(&self) -> Result<(), String> {
        let mut v = self.voters.clone();
        v.sort_unstable();
        v.dedup();
        if v.len() != self.voters.len() {
            return Err(format!("duplicate voters in {:?}", self.voters));
        }
        if !v.contains(&self.id) {
            return Err(format!("node {} is not among the voters {:?}", self.id, v));
        }
        if self.election_timeout == 0 || self.heartbeat_interval == 0 {
            return Err("timeouts must be positive".into());
        }
        if self.heartbeat_interval >= self.election_timeout {
            return Err(format!(
                "heartbeat interval {} must be below the election timeout {}",
                self.heartbeat_interval, self.election_timeout
            ));
        }
        if self.max_entries_per_append == 0 {
            return Err("max_entries_per_append must be at least 1".into());
        }
        if self.vote_retry == Some(0) {
            return Err("vote_retry must be positive".into());
        }
        Ok(())
    }
}

/// Why a proposal was not appended.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    #[error("not the leader (leader: {leader:?})")]
    NotLeader { leader: Option<NodeId> },
    #[error("raft node stopped after a storage failure: {0}")]
    Stopped(String),
}

/// Why a compaction was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompactError {
    #[error("index {index} is not applied yet (applied {applied})")]
    NotApplied { index: Index, applied: Index },
    #[error("index {index} is already in the snapshot (which ends at {snapshot_index})")]
    AlreadyCompacted { index: Index, snapshot_index: Index },
    #[error("raft node stopped after a storage failure: {0}")]
    Stopped(String),
}

/// The node stopped (storage failed); the output says why.
struct Stopped;

pub struct Raft<S: Storage> {
    config: RaftConfig,
    store: RaftStore<S>,
    term: Term,
    voted_for: Option<NodeId>,
    role: RaftRole,
    leader: Option<NodeId>,
    log: RaftLog,
    /// The latest snapshot (its data is what a laggard gets).
    snapshot: Snapshot,
    commit: Index,
    applied: Index,
    election_deadline: Nanos,
    /// When a candidate next resends `RequestVote` to voters that have not answered.
    vote_retry_deadline: Nanos,
    heartbeat_deadline: Nanos,
    check_quorum_deadline: Nanos,
    /// When this node last heard from the leader of its term.
    leader_contact: Option<Nanos>,
    /// Answers to the current (pre-)campaign.
    votes: BTreeMap<NodeId, bool>,
    /// The leader's view of each follower.
    progress: BTreeMap<NodeId, Progress>,
    rng: u64,
    outputs: Vec<RaftOutput>,
    failed: Option<String>,
    /// The time of the step in progress (stamps `Append::sent_at`).
    clock: Nanos,
}

impl<S: Storage> Raft<S> {
    /// Opens (or creates) the node's durable state: it restarts as a follower in its saved
    /// term with its saved vote; the application restores its state from [`Raft::snapshot`]
    /// and gets every later committed entry through `Apply` outputs.
    pub fn open(storage: S, config: RaftConfig, now: Nanos) -> Result<Self, RaftOpenError> {
        config.validate().map_err(RaftOpenError::Config)?;
        let (store, rec) = RaftStore::open(storage, &config.dir)?;
        let log = RaftLog::new(rec.snapshot.last_index, rec.snapshot.last_term, rec.entries);
        if log.last_term() > rec.hard.term {
            return Err(RaftOpenError::Corrupt {
                file: config.dir.clone(),
                reason: format!(
                    "log holds term {} beyond the saved term {}",
                    log.last_term(),
                    rec.hard.term
                ),
            });
        }
        let rng = config.seed ^ u64::from(config.id).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut raft = Self {
            term: rec.hard.term,
            voted_for: rec.hard.voted_for,
            role: RaftRole::Follower,
            leader: None,
            commit: rec.snapshot.last_index,
            applied: rec.snapshot.last_index,
            snapshot: rec.snapshot,
            log,
            election_deadline: 0,
            vote_retry_deadline: 0,
            heartbeat_deadline: 0,
            check_quorum_deadline: 0,
            leader_contact: None,
            votes: BTreeMap::new(),
            progress: BTreeMap::new(),
            rng,
            outputs: Vec::new(),
            failed: None,
            clock: now,
            config,
            store,
        };
        raft.reset_election_deadline(now);
        Ok(raft)
    }

    // ---- accessors ----

    pub fn id(&self) -> NodeId {
        self.config.id
    }
    pub fn term(&self) -> Term {
        self.term
    }
    pub fn voted_for(&self) -> Option<NodeId> {
        self.voted_for
    }
    pub fn role(&self) -> RaftRole {
        self.role
    }
    /// The leader of the current term, if known.
    pub fn leader(&self) -> Option<NodeId> {
        self.leader
    }
    pub fn commit_index(&self) -> Index {
        self.commit
    }
    pub fn applied_index(&self) -> Index {
        self.applied
    }
    pub fn last_index(&self) -> Index {
        self.log.last_index()
    }
    /// The term of the entry at `index`, if it is in the log (or ends the snapshot).
    pub fn term_at(&self, index: Index) -> Option<Term> {
        self.log.term_at(index)
    }
    /// The entries after the snapshot.
    pub fn entries(&self) -> &[Entry] {
        self.log.entries()
    }
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }
    pub fn config(&self) -> &RaftConfig {
        &self.config
    }
    pub fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }
    pub fn storage(&self) -> &S {
        self.store.storage()
    }
    pub fn into_storage(self) -> S {
        self.store.into_storage()
    }

    /// Effects produced since the last call, in order.
    pub fn poll_outputs(&mut self) -> Vec<RaftOutput> {
        std::mem::take(&mut self.outputs)
    }

    /// When `handle_timeout` next has something to do.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        if self.failed.is_some() {
            return None;
        }
        Some(match self.role {
            RaftRole::Leader => self.heartbeat_deadline.min(self.check_quorum_deadline),
            RaftRole::Candidate if self.config.vote_retry.is_some() => {
                self.election_deadline.min(self.vote_retry_deadline)
            }
            _ => self.election_deadline,
        })
    }

    // ---- inputs ----

    pub fn handle_timeout(&mut self, now: Nanos) {
        if self.failed.is_some() {
            return;
        }
        self.clock = now;
        let _ = self.tick_inner(now);
        self.check_invariants();
    }

    fn tick_inner(&mut self, now: Nanos) -> Result<(), Stopped> {
        match self.role {
            RaftRole::Leader => {
                if now >= self.check_quorum_deadline {
                    self.check_quorum_deadline = now + self.config.election_timeout;
                    if !self.config.bugs.no_check_quorum && !self.quorum_active(now) {
                        tracing::info!(
                            id = self.id(),
                            term = self.term,
                            "raft: check-quorum failed, stepping down"
                        );
                        return self.become_follower(now, self.term, None);
                    }
                }
                if now >= self.heartbeat_deadline {
                    self.heartbeat_deadline = now + self.config.heartbeat_interval;
                    self.broadcast_append();
                }
                Ok(())
            }
            _ if now >= self.election_deadline => self.pre_campaign(now),
            RaftRole::Candidate => {
                if let Some(retry) = self.config.vote_retry {
                    if now >= self.vote_retry_deadline {
                        self.vote_retry_deadline = now + retry;
                        self.request_votes();
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Appends a command as the leader; it is durable here (not yet committed) on return.
    pub fn propose(&mut self, now: Nanos, data: Vec<u8>) -> Result<Index, ProposeError> {
        if let Some(f) = &self.failed {
            return Err(ProposeError::Stopped(f.clone()));
        }
        self.clock = now;
        if self.role != RaftRole::Leader {
            return Err(ProposeError::NotLeader {
                leader: self.leader,
            });
        }
        let _ = now;
        let index = self.log.last_index() + 1;
        let entry = Entry {
            index,
            term: self.term,
            payload: Payload::Command(data),
        };
        if self.append_local(vec![entry]).is_err() {
            return Err(ProposeError::Stopped(
                self.failed.clone().unwrap_or_default(),
            ));
        }
        self.broadcast_append();
        self.maybe_commit();
        self.check_invariants();
        Ok(index)
    }

    /// The application's image through `index` (applied already): the log before it is
    /// dropped, and laggards behind it get the image instead.
    pub fn compact(&mut self, index: Index, data: Vec<u8>) -> Result<(), CompactError> {
        if let Some(f) = &self.failed {
            return Err(CompactError::Stopped(f.clone()));
        }
        if index > self.applied {
            return Err(CompactError::NotApplied {
                index,
                applied: self.applied,
            });
        }
        if index <= self.log.snapshot_index() {
            return Err(CompactError::AlreadyCompacted {
                index,
                snapshot_index: self.log.snapshot_index(),
            });
        }
        let snapshot = Snapshot {
            last_index: index,
            last_term: self
                .log
                .term_at(index)
                .expect("applied entries are in the log"),
            data,
        };
        let rest = self.log.range(index + 1, self.log.last_index()).to_vec();
        if let Err(e) = self.store.install_snapshot(&snapshot, &rest) {
            let _ = self.fail(e);
            return Err(CompactError::Stopped(
                self.failed.clone().unwrap_or_default(),
            ));
        }
        self.log.compact_to(index);
        self.snapshot = snapshot;
        self.check_invariants();
        Ok(())
    }

    /// Handles one message from peer `from`.
    pub fn step(&mut self, now: Nanos, from: NodeId, message: Message) {
        if self.failed.is_some() {
            return;
        }
        self.clock = now;
        if from == self.id() || !self.config.voters.contains(&from) {
            tracing::warn!(
                id = self.id(),
                from,
                "raft: message from a non-voter ignored"
            );
            return;
        }
        let _ = self.step_message(now, from, message);
        self.check_invariants();
    }

    fn step_message(&mut self, now: Nanos, from: NodeId, message: Message) -> Result<(), Stopped> {
        let mterm = message.term();
        if mterm > self.term {
            match &message {
                // Pre-votes change nothing: the sender only asks about a future term.
                Message::PreVote { .. } | Message::PreVoteResponse { granted: true, .. } => {}
                // The lease: a node that hears from a live leader ignores campaigns.
                Message::RequestVote { .. } if self.in_lease(now) => return Ok(()),
                _ => {
                    let leader = message.is_from_leader().then_some(from);
                    self.become_follower(now, mterm, leader)?;
                }
            }
        } else if mterm < self.term {
            if let Some(reply) = self.stale_reply(&message) {
                self.send(from, reply);
            }
            return Ok(());
        }
        match message {
            Message::PreVote {
                term,
                last_index,
                last_term,
            } => {
                let granted = term > self.term
                    && self.up_to_date(last_index, last_term)
                    && !self.in_lease(now);
                let term = if granted { term } else { self.term };
                self.send(from, Message::PreVoteResponse { term, granted });
                Ok(())
            }
            Message::PreVoteResponse { term, granted } => {
                let current = if granted { self.term + 1 } else { self.term };
                if self.role == RaftRole::PreCandidate && term == current {
                    self.votes.insert(from, granted);
                    match self.tally() {
                        Some(true) => self.campaign(now)?,
                        Some(false) => self.become_follower(now, self.term, None)?,
                        None => {}
                    }
                }
                Ok(())
            }
            Message::RequestVote {
                last_index,
                last_term,
                ..
            } => {
                let can_vote = self.voted_for.is_none_or_eq(from);
                let granted = can_vote && self.up_to_date(last_index, last_term);
                if granted {
                    debug_assert!(matches!(
                        self.role,
                        RaftRole::Follower | RaftRole::PreCandidate
                    ));
                    self.voted_for = Some(from);
                    if !self.config.bugs.vote_not_persisted {
                        self.persist_hard_state()?;
                    }
                    self.reset_election_deadline(now);
                }
                self.send(
                    from,
                    Message::VoteResponse {
                        term: self.term,
                        granted,
                    },
                );
                Ok(())
            }
            Message::VoteResponse { granted, .. } => {
                if self.role == RaftRole::Candidate {
                    self.votes.insert(from, granted);
                    match self.tally() {
                        Some(true) => self.become_leader(now)?,
                        Some(false) => self.become_follower(now, self.term, None)?,
                        None => {}
                    }
                }
                Ok(())
            }
            Message::Append {
                prev_index,
                prev_term,
                entries,
                commit,
                sent_at,
                ..
            } => {
                if !self.accept_leader(now, from) {
                    return Ok(());
                }
                self.handle_append(from, (prev_index, prev_term), entries, commit, sent_at)
            }
            Message::InstallSnapshot { snapshot, .. } => {
                if !self.accept_leader(now, from) {
                    return Ok(());
                }
                self.handle_snapshot(from, snapshot)
            }
            Message::AppendResponse { result, echo, .. } => {
                if self.role == RaftRole::Leader {
                    self.handle_append_response(now, from, result, echo);
                }
                Ok(())
            }
        }
    }

    /// The answer to a message of an older term: stale leaders and campaigners hear our
    /// term so they step down; stale answers get none.
    fn stale_reply(&self, message: &Message) -> Option<Message> {
        let reject = |rejected| Message::AppendResponse {
            term: self.term,
            result: AppendResult::Reject {
                rejected,
                hint: self.log.last_index(),
            },
            echo: 0,
        };
        match message {
            Message::Append { prev_index, .. } => Some(reject(*prev_index)),
            Message::InstallSnapshot { .. } => Some(reject(0)),
            Message::PreVote { .. } => Some(Message::PreVoteResponse {
                term: self.term,
                granted: false,
            }),
            Message::RequestVote { .. } => Some(Message::VoteResponse {
                term: self.term,
                granted: false,
            }),
            _ => None,
        }
    }

    // ---- roles ----

    fn become_follower(
        &mut self,
        now: Nanos,
        term: Term,
        leader: Option<NodeId>,
    ) -> Result<(), Stopped> {
        debug_assert!(term >= self.term);
        if term > self.term {
            self.term = term;
            self.voted_for = None;
            self.persist_hard_state()?;
        }
        self.set_role(RaftRole::Follower, leader);
        self.leader_contact = leader.map(|_| now);
        self.votes.clear();
        self.progress.clear();
        self.reset_election_deadline(now);
        Ok(())
    }

    fn pre_campaign(&mut self, now: Nanos) -> Result<(), Stopped> {
        self.set_role(RaftRole::PreCandidate, None);
        self.leader_contact = None;
        self.votes = BTreeMap::from([(self.id(), true)]);
        self.reset_election_deadline(now);
        let message = Message::PreVote {
            term: self.term + 1,
            last_index: self.log.last_index(),
            last_term: self.log.last_term(),
        };
        self.broadcast(message);
        if self.tally() == Some(true) {
            self.campaign(now)?;
        }
        Ok(())
    }

    fn campaign(&mut self, now: Nanos) -> Result<(), Stopped> {
        self.term += 1;
        self.voted_for = Some(self.id());
        self.persist_hard_state()?;
        self.set_role(RaftRole::Candidate, None);
        self.votes = BTreeMap::from([(self.id(), true)]);
        self.reset_election_deadline(now);
        if let Some(retry) = self.config.vote_retry {
            self.vote_retry_deadline = now + retry;
        }
        self.request_votes();
        if self.tally() == Some(true) {
            self.become_leader(now)?;
        }
        Ok(())
    }

    /// Sends this term's `RequestVote` to every voter that has not answered it yet.
    fn request_votes(&mut self) {
        let message = Message::RequestVote {
            term: self.term,
            last_index: self.log.last_index(),
            last_term: self.log.last_term(),
        };
        let waiting: Vec<NodeId> = self
            .config
            .voters
            .iter()
            .copied()
            .filter(|v| !self.votes.contains_key(v))
            .collect();
        for v in waiting {
            self.send(v, message.clone());
        }
    }

    fn become_leader(&mut self, now: Nanos) -> Result<(), Stopped> {
        debug_assert_eq!(self.role, RaftRole::Candidate);
        debug_assert_eq!(self.voted_for, Some(self.id()));
        self.set_role(RaftRole::Leader, Some(self.id()));
        let last = self.log.last_index();
        // Every entry past the commit index is of an older term here (the no-op comes next).
        crate::sometimes!(RaftLeaderInheritsUncommitted, last > self.commit);
        self.progress = self
            .config
            .voters
            .iter()
            .filter(|&&v| v != self.config.id)
            .map(|&v| (v, Progress::new(last)))
            .collect();
        self.check_quorum_deadline = now + self.config.election_timeout;
        self.heartbeat_deadline = now + self.config.heartbeat_interval;
        // A no-op of the new term: once it commits, so does everything before it.
        let noop = Entry {
            index: last + 1,
            term: self.term,
            payload: Payload::Noop,
        };
        self.append_local(vec![noop])?;
        self.broadcast_append();
        self.maybe_commit();
        Ok(())
    }

    fn set_role(&mut self, role: RaftRole, leader: Option<NodeId>) {
        let changed = role != self.role || leader != self.leader;
        self.role = role;
        self.leader = leader;
        if changed {
            self.outputs.push(RaftOutput::RoleChanged {
                role,
                term: self.term,
                leader,
            });
        }
    }

    /// `from` leads our term: a (pre-)candidate steps back. Returns false if this node
    /// is itself leader of the term (two leaders in a term: only with a bug flag).
    fn accept_leader(&mut self, now: Nanos, from: NodeId) -> bool {
        if self.role == RaftRole::Leader {
            debug_assert!(self.config.bugs.any(), "two leaders in term {}", self.term);
            tracing::error!(
                id = self.id(),
                from,
                term = self.term,
                "raft: second leader in term"
            );
            return false;
        }
        if self.role != RaftRole::Follower || self.leader != Some(from) {
            self.set_role(RaftRole::Follower, Some(from));
            self.votes.clear();
        }
        self.leader_contact = Some(now);
        self.reset_election_deadline(now);
        true
    }

    fn in_lease(&self, now: Nanos) -> bool {
        match self.role {
            RaftRole::Leader => true,
            _ => {
                self.leader.is_some()
                    && self
                        .leader_contact
                        .is_some_and(|t| now < t + self.config.election_timeout)
            }
        }
    }

    fn quorum(&self) -> usize {
        self.config.voters.len() / 2 + 1
    }

    /// `Some(true)` won, `Some(false)` lost, `None` undecided.
    fn tally(&self) -> Option<bool> {
        let yes = self.votes.values().filter(|&&g| g).count();
        let no = self.votes.len() - yes;
        if yes >= self.quorum() {
            Some(true)
        } else if no >= self.quorum() {
            Some(false)
        } else {
            None
        }
    }

    /// Whether this node leads with a valid leader lease at `now`: a majority (itself
    /// included) answered `Append`s it sent less than an election timeout ago. Each of them
    /// refuses (pre-)votes for an election timeout after it heard from this leader, so no
    /// other leader can be elected before the lease ends (clocks assumed to run at the same
    /// rate). The quorum controller grants brokers' session leases only within it: a leader
    /// deposed by a partition must not renew a broker's lease after the next leader may
    /// already be fencing that broker (sim seed 4602).
    pub fn has_lease(&self, now: Nanos) -> bool {
        if self.role != RaftRole::Leader {
            return false;
        }
        let needed = self.quorum() - 1;
        if needed == 0 {
            return true;
        }
        let mut bases: Vec<Nanos> = self
            .progress
            .values()
            .filter_map(|p| p.lease_basis)
            .collect();
        bases.sort_unstable_by(|a, b| b.cmp(a));
        bases
            .get(needed - 1)
            .is_some_and(|&b| now < b.saturating_add(self.config.election_timeout))
    }

    /// Whether a majority (this leader included) was heard from within the last election
    /// timeout.
    fn quorum_active(&self, now: Nanos) -> bool {
        let window = self.config.election_timeout;
        let heard = |p: &&Progress| p.last_heard.is_some_and(|t| now < t.saturating_add(window));
        1 + self.progress.values().filter(heard).count() >= self.quorum()
    }

    fn up_to_date(&self, last_index: Index, last_term: Term) -> bool {
        last_term > self.log.last_term()
            || (last_term == self.log.last_term() && last_index >= self.log.last_index())
    }

    // ---- replication ----

    fn broadcast_append(&mut self) {
        let peers: Vec<NodeId> = self.progress.keys().copied().collect();
        for p in peers {
            self.send_append(p);
        }
    }

    fn send_append(&mut self, to: NodeId) {
        let pr = self.progress[&to];
        let prev_index = pr.next - 1;
        let message = match self.log.term_at(prev_index) {
            None if prev_index < self.log.snapshot_index() => {
                // The entries it needs are compacted: send the image.
                let p = self.progress.get_mut(&to).expect("peer");
                p.next = self.snapshot.last_index + 1;
                p.check();
                Message::InstallSnapshot {
                    term: self.term,
                    snapshot: self.snapshot.clone(),
                }
            }
            None => {
                debug_assert!(
                    false,
                    "next {} past the log end {}",
                    pr.next,
                    self.log.last_index()
                );
                return;
            }
            Some(prev_term) => {
                let entries = self
                    .log
                    .slice(pr.next, self.config.max_entries_per_append)
                    .to_vec();
                if pr.state == ProgressState::Replicate {
                    if let Some(last) = entries.last() {
                        self.progress.get_mut(&to).expect("peer").next = last.index + 1;
                    }
                }
                Message::Append {
                    term: self.term,
                    prev_index,
                    prev_term,
                    entries,
                    commit: self.commit,
                    sent_at: self.clock,
                }
            }
        };
        self.send(to, message);
    }

    fn handle_append_response(
        &mut self,
        now: Nanos,
        from: NodeId,
        result: AppendResult,
        echo: Nanos,
    ) {
        let last = self.log.last_index();
        let Some(pr) = self.progress.get_mut(&from) else {
            return;
        };
        pr.last_heard = Some(now);
        if echo > 0 {
            pr.lease_basis = pr.lease_basis.max(Some(echo));
        }
        match result {
            AppendResult::Ok { match_index } => {
                if match_index > last {
                    tracing::warn!(
                        from,
                        match_index,
                        last,
                        "raft: match beyond our log ignored"
                    );
                    return;
                }
                pr.match_index = pr.match_index.max(match_index);
                pr.next = pr.next.max(pr.match_index + 1);
                pr.state = ProgressState::Replicate;
                pr.check();
                let more = pr.next <= last;
                self.maybe_commit();
                if more {
                    self.send_append(from);
                }
            }
            AppendResult::Reject { rejected, hint } => {
                if rejected <= pr.match_index && rejected != 0 {
                    return; // stale: we already know it matches there
                }
                pr.next = (pr.match_index + 1).max(rejected.min(hint.saturating_add(1)));
                pr.next = pr.next.min(last + 1);
                pr.state = ProgressState::Probe;
                pr.check();
                self.send_append(from);
            }
        }
    }

    /// Commits the highest index stored on a majority — only if it is of the current
    /// term (figure 8): an older entry on a majority can still be overwritten by a leader
    /// that never had it; once an entry of this term is on a majority, no such leader can
    /// be elected, and the entries before it commit with it.
    fn maybe_commit(&mut self) {
        debug_assert_eq!(self.role, RaftRole::Leader);
        let mut matches: Vec<Index> = self.progress.values().map(|p| p.match_index).collect();
        matches.push(self.log.last_index());
        matches.sort_unstable_by(|a, b| b.cmp(a));
        let n = matches[self.quorum() - 1];
        if n <= self.commit {
            return;
        }
        if self.config.bugs.commit_previous_term || self.log.term_at(n) == Some(self.term) {
            self.commit_to(n);
        }
    }

    fn commit_to(&mut self, index: Index) {
        if index <= self.commit {
            return;
        }
        debug_assert!(index <= self.log.last_index());
        self.commit = index;
        let entries = self.log.range(self.applied + 1, index).to_vec();
        self.applied = index;
        if !entries.is_empty() {
            self.outputs.push(RaftOutput::Apply(entries));
        }
    }

    fn handle_append(
        &mut self,
        from: NodeId,
        (mut prev_index, mut prev_term): (Index, Term),
        mut entries: Vec<Entry>,
        leader_commit: Index,
        sent_at: Nanos,
    ) -> Result<(), Stopped> {
        let contiguous = entries
            .iter()
            .enumerate()
            .all(|(i, e)| e.index == prev_index + 1 + i as Index && e.term <= self.term);
        if !contiguous {
            tracing::warn!(from, prev_index, "raft: malformed append ignored");
            return Ok(());
        }
        if prev_index < self.commit {
            // Everything through our commit index matches any current leader's log
            // (leader completeness): skip that prefix.
            let skip = entries
                .iter()
                .take_while(|e| e.index <= self.commit)
                .count();
            entries.drain(..skip);
            prev_index = self.commit;
            prev_term = self.log.term_at(self.commit).expect("commit is in the log");
            if entries.first().is_some_and(|e| e.index != prev_index + 1) {
                entries.clear();
            }
        }
        if self.log.term_at(prev_index) != Some(prev_term) {
            let hint = (prev_index - 1).min(self.log.last_index());
            self.send(
                from,
                Message::AppendResponse {
                    term: self.term,
                    result: AppendResult::Reject {
                        rejected: prev_index,
                        hint,
                    },
                    echo: sent_at,
                },
            );
            return Ok(());
        }
        let last_new = prev_index + entries.len() as Index;
        let conflict = entries
            .iter()
            .position(|e| self.log.term_at(e.index) != Some(e.term));
        if let Some(at) = conflict {
            let first = entries[at].index;
            if first <= self.log.last_index() {
                debug_assert!(first > self.commit, "truncating committed entry {first}");
                crate::probe!(RaftFollowerTruncated);
                if let Err(e) = self.store.truncate_from(first) {
                    return self.fail(e);
                }
                self.log.truncate_from(first);
            }
            let new = entries.split_off(at);
            self.append_local(new)?;
        }
        self.commit_to(leader_commit.min(last_new));
        self.send(
            from,
            Message::AppendResponse {
                term: self.term,
                result: AppendResult::Ok {
                    match_index: last_new,
                },
                echo: sent_at,
            },
        );
        Ok(())
    }

    fn handle_snapshot(&mut self, from: NodeId, snapshot: Snapshot) -> Result<(), Stopped> {
        let index = snapshot.last_index;
        if index > self.commit {
            if self.log.term_at(index) == Some(snapshot.last_term) {
                // We hold its last entry, hence (log matching) everything before it.
                self.commit_to(index);
            } else {
                if let Err(e) = self.store.install_snapshot(&snapshot, &[]) {
                    return self.fail(e);
                }
                self.log.reset(index, snapshot.last_term);
                self.commit = index;
                self.applied = index;
                self.snapshot = snapshot.clone();
                self.outputs.push(RaftOutput::RestoreSnapshot(snapshot));
            }
        }
        self.send(
            from,
            Message::AppendResponse {
                term: self.term,
                result: AppendResult::Ok {
                    match_index: self.commit,
                },
                echo: 0,
            },
        );
        Ok(())
    }

    // ---- storage and outputs ----

    fn append_local(&mut self, entries: Vec<Entry>) -> Result<(), Stopped> {
        if let Err(e) = self.store.append(&entries) {
            return self.fail(e);
        }
        self.log.append(&entries);
        Ok(())
    }

    fn persist_hard_state(&mut self) -> Result<(), Stopped> {
        let hard = HardState {
            term: self.term,
            voted_for: self.voted_for,
        };
        match self.store.save_hard_state(&hard) {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }

    fn fail(&mut self, e: StorageError) -> Result<(), Stopped> {
        tracing::error!(id = self.id(), error = %e, "raft: storage failed, node stops");
        self.failed = Some(e.to_string());
        self.outputs.push(RaftOutput::StorageFailed(e.to_string()));
        // Nothing that depends on the failed write may leave: drop queued messages.
        self.outputs
            .retain(|o| !matches!(o, RaftOutput::Send { .. }));
        Err(Stopped)
    }

    fn send(&mut self, to: NodeId, message: Message) {
        self.outputs.push(RaftOutput::Send { to, message });
    }

    fn broadcast(&mut self, message: Message) {
        let peers: Vec<NodeId> = self
            .config
            .voters
            .iter()
            .copied()
            .filter(|&v| v != self.config.id)
            .collect();
        for p in peers {
            self.send(p, message.clone());
        }
    }

    fn reset_election_deadline(&mut self, now: Nanos) {
        // xorshift64*: deterministic jitter, so that one seed replays a run.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let base = self.config.election_timeout;
        self.election_deadline = now + base + r % base;
    }

    fn check_invariants(&self) {
        debug_assert!(self.applied == self.commit || self.failed.is_some());
        debug_assert!(self.commit <= self.log.last_index());
        debug_assert!(self.log.snapshot_index() <= self.commit);
        debug_assert!(self.log.last_term() <= self.term);
        debug_assert_eq!(self.snapshot.last_index, self.log.snapshot_index());
        debug_assert!(self.role != RaftRole::Leader || self.leader == Some(self.config.id));
        debug_assert!(
            !matches!(self.role, RaftRole::Leader | RaftRole::Candidate)
                || self.voted_for == Some(self.config.id)
        );
        debug_assert!(self.role == RaftRole::Leader || self.progress.is_empty());
        debug_assert!(self
            .progress
            .values()
            .all(|p| p.next <= self.log.last_index() + 1));
    }
}

trait VoteExt {
    fn is_none_or_eq(&self, id: NodeId) -> bool;
}

impl VoteExt for Option<NodeId> {
    fn is_none_or_eq(&self, id: NodeId) -> bool {
        self.is_none() || *self == Some(id)
    }
}
