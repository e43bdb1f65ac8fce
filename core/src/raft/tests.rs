//! Scripted Raft scenarios on a hand-driven network, and the bug-zoo bounds.

use super::cluster::{first_failure, sweep, Options};
use super::*;
use crate::testing::MemStorage;
use crate::testing::{self, Delivery};
use crate::types::{Nanos, NodeId};
use std::collections::BTreeMap;

const MS: Nanos = 1_000_000;

/// Raft nodes on core's shared harness network ([`testing::Net`]): tests deliver in order,
/// only what a filter lets through, and every delivery moves the clock by 1 ns.
struct Net {
    now: Nanos,
    nodes: BTreeMap<NodeId, Option<Raft<MemStorage>>>,
    disks: BTreeMap<NodeId, MemStorage>,
    net: testing::Net<NodeId, Message>,
    applied: BTreeMap<NodeId, Vec<Entry>>,
    restored: BTreeMap<NodeId, Snapshot>,
    n: u32,
    bugs: RaftBugs,
    vote_retry: Option<Nanos>,
}

impl Net {
    fn new(n: u32, bugs: RaftBugs) -> Self {
        Self::with_vote_retry(n, bugs, None)
    }
    fn with_vote_retry(n: u32, bugs: RaftBugs, vote_retry: Option<Nanos>) -> Self {
        let mut net = Self {
            now: 0,
            nodes: BTreeMap::new(),
            disks: BTreeMap::new(),
            net: testing::Net::default(),
            applied: BTreeMap::new(),
            restored: BTreeMap::new(),
            n,
            bugs,
            vote_retry,
        };
        for id in 1..=n {
            net.disks.insert(id, MemStorage::new());
            net.start(id);
        }
        net
    }
    fn config(&self, id: NodeId) -> RaftConfig {
        RaftConfig {
            election_timeout: 100 * MS,
            heartbeat_interval: 10 * MS,
            max_entries_per_append: 1,
            bugs: self.bugs,
            vote_retry: self.vote_retry,
            seed: 7,
            ..RaftConfig::new(id, (1..=self.n).collect())
        }
    }
    fn start(&mut self, id: NodeId) {
        let r = Raft::open(self.disks[&id].clone(), self.config(id), self.now).expect("opens");
        self.nodes.insert(id, Some(r));
    }
    fn r(&self, id: NodeId) -> &Raft<MemStorage> {
        self.nodes[&id].as_ref().expect("live")
    }
    fn m(&mut self, id: NodeId) -> &mut Raft<MemStorage> {
        self.nodes.get_mut(&id).unwrap().as_mut().expect("live")
    }
    fn collect(&mut self, id: NodeId) {
        for o in self.m(id).poll_outputs() {
            match o {
                RaftOutput::Send { to, message } => self.net.send(id, to, message),
                RaftOutput::Apply(es) => self.applied.entry(id).or_default().extend(es),
                RaftOutput::RestoreSnapshot(s) => {
                    self.restored.insert(id, s);
                }
                _ => {}
            }
        }
    }
    /// Moves time past `id`'s election deadline and ticks it (it starts a pre-vote).
    fn timeout(&mut self, id: NodeId) {
        self.now = self.now.max(self.r(id).poll_timeout().unwrap());
        let now = self.now;
        self.m(id).handle_timeout(now);
        self.collect(id);
    }
    fn tick(&mut self, id: NodeId, by: Nanos) {
        self.now += by;
        let now = self.now;
        self.m(id).handle_timeout(now);
        self.collect(id);
    }
    fn elect(&mut self, id: NodeId, ok: impl Fn(NodeId, NodeId) -> bool + Copy) {
        self.timeout(id);
        self.deliver_only(|f, t, _| ok(f, t));
        assert_eq!(
            self.r(id).role(),
            RaftRole::Leader,
            "node {id} was not elected"
        );
    }
    fn propose(&mut self, id: NodeId, v: u8) -> Index {
        let now = self.now;
        let i = self.m(id).propose(now, vec![v]).expect("leader");
        self.collect(id);
        i
    }
    fn crash(&mut self, id: NodeId) {
        let r = self.nodes.insert(id, None).unwrap().unwrap();
        drop(r.into_storage());
        self.disks[&id].crash_lose_unsynced();
        self.net.lose_to(id);
        self.net.lose_from(id);
    }
}

impl Delivery for Net {
    type Addr = NodeId;
    type Msg = Message;

    fn net(&mut self) -> &mut testing::Net<NodeId, Message> {
        &mut self.net
    }

    /// A message to a crashed node is lost.
    fn step(&mut self, from: NodeId, to: NodeId, msg: Message) {
        if self.nodes[&to].is_some() {
            self.now += 1;
            let now = self.now;
            self.m(to).step(now, from, msg);
            self.collect(to);
        }
    }
}

#[test]
fn election_and_replication() {
    let mut net = Net::new(3, RaftBugs::default());
    net.elect(1, |_, _| true);
    assert_eq!(net.r(1).term(), 1);
    let i = net.propose(1, 9);
    net.deliver_all();
    net.tick(1, 10 * MS); // heartbeat carries the commit index
    net.deliver_all();
    for id in 1..=3 {
        assert_eq!(net.r(id).leader(), Some(1));
        assert_eq!(net.r(id).commit_index(), i, "node {id}");
        let applied = &net.applied[&id];
        assert_eq!(applied.last().unwrap().payload, Payload::Command(vec![9]));
    }
}

#[test]
fn log_repair_overwrites_an_uncommitted_divergent_suffix() {
    let mut net = Net::new(3, RaftBugs::default());
    net.elect(1, |_, _| true);
    // Node 1 appends three entries nobody gets, then loses leadership to 2.
    for v in 0..3 {
        net.propose(1, v);
    }
    net.net.queue.clear();
    net.crash(1);
    net.elect(2, |_, _| true);
    net.propose(2, 7);
    net.deliver_all();
    net.start(1);
    net.tick(2, 10 * MS);
    for _ in 0..6 {
        net.deliver_all();
        net.tick(2, 10 * MS);
    }
    net.deliver_all();
    assert_eq!(
        net.r(1).entries(),
        net.r(2).entries(),
        "1's log repaired to 2's"
    );
    assert!(net
        .r(1)
        .entries()
        .iter()
        .all(|e| e.payload != Payload::Command(vec![1])));
}

#[test]
fn pre_vote_keeps_a_partitioned_node_from_disrupting_the_leader() {
    let mut net = Net::new(3, RaftBugs::default());
    net.elect(1, |_, _| true);
    net.tick(1, 10 * MS);
    net.deliver_all();
    // The leader keeps hearing from 2 while 3 waits for its election timeout (check-quorum
    // counts only followers heard within the last election timeout).
    let keep_leading = |net: &mut Net| {
        let until = net.r(3).poll_timeout().expect("a timer");
        while net.now < until {
            net.tick(1, 10 * MS);
            net.deliver_only(|f, t, _| f != 3 && t != 3);
        }
    };
    // 3 is cut off and times out again and again: pre-vote never passes, its term stays.
    for _ in 0..5 {
        keep_leading(&mut net);
        net.timeout(3);
        net.deliver_only(|f, t, _| f != 3 && t != 3);
        net.net.queue.clear();
        net.tick(1, 10 * MS);
        net.deliver_only(|f, t, _| f != 3 && t != 3);
    }
    assert_eq!(net.r(3).term(), 1, "pre-vote does not bump the term");
    // 3 comes back and campaigns: 2 heard from 1 recently and refuses; 1 keeps leading.
    keep_leading(&mut net);
    net.timeout(3);
    net.deliver_all();
    assert_eq!(net.r(1).role(), RaftRole::Leader);
    assert_eq!(net.r(1).term(), 1);
}

fn isolated_leader(bugs: RaftBugs) -> RaftRole {
    let mut net = Net::new(3, bugs);
    net.elect(1, |_, _| true);
    for _ in 0..30 {
        net.tick(1, 10 * MS);
        net.net.queue.clear(); // nobody answers
    }
    net.r(1).role()
}

#[test]
fn check_quorum_steps_down_a_leader_that_cannot_reach_a_majority() {
    // Stepped down (and, its election timeout passed too, maybe campaigning again).
    assert_ne!(isolated_leader(RaftBugs::default()), RaftRole::Leader);
    assert_eq!(
        isolated_leader(RaftBugs::named("no-check-quorum").unwrap()),
        RaftRole::Leader
    );
}

#[test]
fn laggard_gets_a_snapshot_and_catches_up() {
    let mut net = Net::new(3, RaftBugs::default());
    net.elect(1, |_, _| true);
    for v in 0..10 {
        net.propose(1, v);
        net.deliver_only(|f, t, _| f != 3 && t != 3);
    }
    net.tick(1, 10 * MS);
    net.deliver_only(|f, t, _| f != 3 && t != 3);
    let applied = net.r(1).applied_index();
    for id in [1, 2] {
        net.m(id).compact(applied, b"image".to_vec()).unwrap();
    }
    assert_eq!(net.r(1).snapshot().last_index, applied);
    for _ in 0..5 {
        net.tick(1, 10 * MS);
        net.deliver_all();
    }
    assert_eq!(net.restored[&3].last_index, applied);
    assert_eq!(net.restored[&3].data, b"image");
    assert_eq!(net.r(3).commit_index(), net.r(1).commit_index());
    assert_eq!(net.r(3).last_index(), net.r(1).last_index());
}

#[test]
fn restart_recovers_term_vote_log_and_snapshot() {
    let mut net = Net::new(3, RaftBugs::default());
    net.elect(1, |_, _| true);
    for v in 0..5 {
        net.propose(1, v);
        net.deliver_all();
    }
    net.tick(1, 10 * MS);
    net.deliver_all();
    let applied = net.r(2).applied_index();
    net.m(2).compact(applied - 2, b"img".to_vec()).unwrap();
    let (term, vote, entries, snap) = {
        let r = net.r(2);
        (
            r.term(),
            r.voted_for(),
            r.entries().to_vec(),
            r.snapshot().clone(),
        )
    };
    net.crash(2);
    net.start(2);
    let r = net.r(2);
    assert_eq!((r.term(), r.voted_for()), (term, vote));
    assert_eq!(vote, Some(1));
    assert_eq!(r.entries(), &entries[..]);
    assert_eq!(r.snapshot(), &snap);
    assert_eq!(r.commit_index(), snap.last_index);
}

#[test]
fn a_torn_log_tail_is_cut_and_synced_corruption_is_an_error() {
    let mut net = Net::new(1, RaftBugs::default());
    net.timeout(1);
    assert_eq!(net.r(1).role(), RaftRole::Leader);
    net.propose(1, 1);
    net.propose(1, 2);
    net.crash(1);
    let disk = net.disks[&1].clone();
    let log = disk.contents("__raft/log").unwrap();
    // A torn last frame: cut, the rest opens.
    let mut torn = log.clone();
    torn.truncate(log.len() - 3);
    disk.put_raw("__raft/log", &torn);
    net.start(1);
    assert_eq!(net.r(1).last_index(), 2);
    net.crash(1);
    // A flipped bit in the first frame: a typed error, not a silent cut.
    let mut bad = log.clone();
    bad[10] ^= 1;
    disk.put_raw("__raft/log", &bad);
    let err = Raft::open(disk.clone(), net.config(1), 0)
        .err()
        .expect("refused");
    assert!(matches!(err, RaftOpenError::Corrupt { .. }), "{err}");
}

// ---- bug zoo: the randomized cluster catches each bug within a bound; the correct build
// passes the same seeds ----

fn zoo(bug: &str, nodes: u32, bound: u64) {
    let mut opts = Options::new(nodes);
    opts.bugs = RaftBugs::named(bug).unwrap();
    let (seed, failure) = first_failure(0..bound, &opts)
        .unwrap_or_else(|| panic!("{bug} not caught in seeds 0..{bound}"));
    eprintln!("{bug}: caught at seed {seed}: {failure}");
    let correct = Options::new(nodes);
    sweep(0..=seed, &correct).unwrap_or_else(|e| panic!("correct build fails: {e}"));
}

#[test]
fn zoo_commit_previous_term() {
    zoo("commit-previous-term", 3, ZOO_FIG8);
}

#[test]
fn zoo_no_check_quorum() {
    zoo("no-check-quorum", 3, ZOO_CQ);
}

const ZOO_FIG8: u64 = 200;

/// Nodes 1 and 2 campaign in the same term; 3 votes for 1, then restarts before 2's
/// `RequestVote` reaches it. Returns whether 2 also won that term.
fn second_candidate_wins_after_voter_restart(bugs: RaftBugs, vote_retry: Option<Nanos>) -> bool {
    let mut net = Net::with_vote_retry(3, bugs, vote_retry);
    net.timeout(1);
    net.timeout(2);
    // 1 and 2 never hear each other; 2's first RequestVote to 3 is lost, and so is 1's
    // first Append (3 keeps a log as short as 2's, so it may still vote for 2).
    net.deliver_only(|f, t, m| {
        f != t
            && (f == 3 || t == 3)
            && !(f == 2 && matches!(m, Message::RequestVote { .. }))
            && !matches!(m, Message::Append { .. })
    });
    assert_eq!(net.r(1).role(), RaftRole::Leader);
    assert_eq!(net.r(2).role(), RaftRole::Candidate);
    assert_eq!(net.r(1).term(), net.r(2).term());
    net.crash(3);
    net.start(3);
    net.tick(2, 30 * MS);
    net.deliver_only(|f, t, _| f != t && (f == 3 || t == 3));
    net.r(2).role() == RaftRole::Leader && net.r(2).term() == net.r(1).term()
}

#[test]
fn a_candidate_resends_request_vote_and_a_restarted_voter_keeps_its_vote() {
    let retry = Some(20 * MS);
    assert!(!second_candidate_wins_after_voter_restart(
        RaftBugs::default(),
        retry
    ));
    // Without the retry, 2 never asks 3 again in that term.
    let bug = RaftBugs::named("vote-not-persisted").unwrap();
    assert!(!second_candidate_wins_after_voter_restart(bug, None));
    // With it, a voter that forgot its vote grants the second candidate: two leaders.
    assert!(second_candidate_wins_after_voter_restart(bug, retry));
}
const ZOO_CQ: u64 = 20;

#[test]
fn a_leader_holds_its_lease_only_while_a_majority_answers_recent_appends() {
    // Under the no-check-quorum bug the isolated leader keeps leading, which isolates what
    // this test is about: the lease, not the step-down.
    let mut net = Net::new(3, RaftBugs::named("no-check-quorum").unwrap());
    net.elect(1, |_, _| true);
    net.tick(1, 10 * MS);
    net.deliver_all();
    let now = net.now;
    assert!(net.r(1).has_lease(now), "answered just now");
    assert!(!net.r(2).has_lease(now), "a follower holds no lease");
    let timeout = net.r(1).config().election_timeout;
    // Nobody answers any more: the lease ends one election timeout after the last Append
    // a majority answered was sent, whatever the leader still believes.
    let mut t = 0;
    while t <= timeout {
        net.tick(1, 10 * MS);
        net.net.queue.clear();
        t += 10 * MS;
    }
    assert_eq!(net.r(1).role(), RaftRole::Leader);
    assert!(!net.r(1).has_lease(net.now));
}
