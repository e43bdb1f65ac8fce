//! A seeded, randomized Raft cluster (3 or 5 nodes) over a faulty network, with every
//! safety property checked after every step.
//!
//! One `ChaCha8Rng` seed drives everything: message loss, duplication and delay (so
//! reordering), partitions (isolating a node, often the leader, splitting the cluster,
//! cutting single links), crashes and restarts (a power loss during an fsync tears the
//! unsynced tail), proposals at whoever believes it leads, and compactions. Checked after
//! every delivered message, tick and fault:
//! - election safety: at most one leader per term;
//! - log matching: two logs with an entry of the same index and term agree up to it;
//! - leader completeness: a leader of a term above the one an entry was seen committed in
//!   holds that entry;
//! - state-machine safety: no two nodes apply different entries at an index (entries, and
//!   the hash chain of the image for snapshots);
//! - bounded zombie leadership: no node acts as leader of an old term for longer than
//!   `3 x election timeout` after a newer leader was elected (what check-quorum buys);
//! - at the end (faults off, network healed): a leader exists, a fresh proposal commits,
//!   and every node applied every committed entry.
//!
//! `SKEIN_RAFT_SEEDS=N` runs N seeds per cluster size (soak); `SKEIN_RAFT_SEED=S` replays one.

use super::*;
use crate::testing::faulty::{env_u64, power_loss, Earliest, FaultyNet, Links};
use crate::testing::MemStorage;
use crate::types::{Nanos, NodeId};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

const MS: Nanos = 1_000_000;

#[derive(Clone, Debug)]
pub(super) struct Options {
    pub(super) nodes: u32,
    pub(super) bugs: RaftBugs,
    pub(super) faulty_for: Nanos,
    pub(super) settle_for: Nanos,
}

impl Options {
    pub(super) fn new(nodes: u32) -> Self {
        Self {
            nodes,
            bugs: RaftBugs::default(),
            faulty_for: 6_000 * MS,
            settle_for: 3_000 * MS,
        }
    }
}

/// The test application: an image `(applied index, hash chain of the applied entries)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Image {
    index: Index,
    hash: u64,
}

fn mix(hash: u64, e: &Entry) -> u64 {
    let mut h = hash ^ 0xcbf2_9ce4_8422_2325;
    let mut feed = |b: u64| {
        h ^= b;
        h = h.wrapping_mul(0x100_0000_01b3).rotate_left(29);
    };
    feed(e.index);
    feed(e.term);
    match &e.payload {
        Payload::Noop => feed(u64::MAX),
        Payload::Command(d) => d.iter().for_each(|&b| feed(u64::from(b))),
    }
    h
}

struct Node {
    raft: Option<Raft<MemStorage>>,
    disk: MemStorage,
    image: Image,
    restart_at: Option<Nanos>,
}

#[derive(Debug, Default)]
pub(super) struct Stats {
    pub(super) delivered: u64,
    pub(super) leaders: usize,
    pub(super) crashes: u64,
    pub(super) snapshots_installed: u64,
    pub(super) committed: Index,
}

pub(super) struct RaftCluster {
    seed: u64,
    opts: Options,
    now: Nanos,
    rng: ChaCha8Rng,
    nodes: BTreeMap<NodeId, Node>,
    election_timeout: Nanos,
    max_entries: usize,
    net: FaultyNet<NodeId, Message>,
    links: Links,
    heal_at: Option<Nanos>,
    next_fault: Nanos,
    next_propose: Nanos,
    proposals: u64,
    // checker state
    leaders: BTreeMap<Term, NodeId>,
    applied: BTreeMap<Index, (Entry, u64)>,
    committed: BTreeMap<Index, (Term, Term)>,
    stale_leader_since: BTreeMap<(NodeId, Term), Nanos>,
    stats: Stats,
}

impl RaftCluster {
    pub(super) fn new(seed: u64, opts: Options) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let max_entries = [1, 2, 3, 64][rng.gen_range(0..4)];
        let loss = rng.gen_range(0.0..0.15);
        let dup = rng.gen_range(0.0..0.05);
        let mut c = Self {
            seed,
            now: 0,
            nodes: BTreeMap::new(),
            election_timeout: 100 * MS,
            max_entries,
            net: FaultyNet::new(loss, dup, MS..15 * MS),
            links: Links::default(),
            heal_at: None,
            next_fault: 0,
            next_propose: 0,
            proposals: 0,
            leaders: BTreeMap::new(),
            applied: BTreeMap::new(),
            committed: BTreeMap::new(),
            stale_leader_since: BTreeMap::new(),
            stats: Stats::default(),
            rng,
            opts,
        };
        c.next_fault = c.rng.gen_range(100 * MS..400 * MS);
        for id in 1..=c.opts.nodes {
            let disk = MemStorage::new();
            let raft = Raft::open(disk.clone(), c.config(id), 0).expect("fresh node opens");
            c.nodes.insert(
                id,
                Node {
                    raft: Some(raft),
                    disk,
                    image: Image::default(),
                    restart_at: None,
                },
            );
        }
        c
    }

    fn config(&self, id: NodeId) -> RaftConfig {
        RaftConfig {
            election_timeout: self.election_timeout,
            heartbeat_interval: 20 * MS,
            max_entries_per_append: self.max_entries,
            seed: self.seed.wrapping_mul(31).wrapping_add(u64::from(id)),
            bugs: self.opts.bugs,
            ..RaftConfig::new(id, (1..=self.opts.nodes).collect())
        }
    }

    fn fail(&self, what: String) -> String {
        format!(
            "seed {} at {} ms: {what} (replay: SKEIN_RAFT_SEED={} SKEIN_RAFT_NODES={} cargo test -p skein-core raft::cluster::replay -- --nocapture)",
            self.seed,
            self.now / MS,
            self.seed,
            self.opts.nodes
        )
    }

    /// Runs the faulty phase, then the healed phase; the first violated property, if any.
    pub(super) fn run(mut self) -> Result<Stats, String> {
        let faulty_end = self.opts.faulty_for;
        let end = faulty_end + self.opts.settle_for;
        while self.now < end {
            let faulty = self.now < faulty_end;
            if !faulty && (self.heal_at.is_some() || !self.links.blocked.is_empty()) {
                self.links.heal();
                self.heal_at = None;
            }
            self.step(faulty, end)?;
        }
        self.final_checks()?;
        Ok(self.stats)
    }

    fn step(&mut self, faulty: bool, end: Nanos) -> Result<(), String> {
        #[derive(Debug)]
        enum Ev {
            Deliver,
            Tick(NodeId),
            Restart(NodeId),
            Fault,
            Heal,
            Propose,
        }
        let mut next = Earliest::new(end, Ev::Propose);
        if let Some(t) = self.net.next_due() {
            next.consider(t, Ev::Deliver);
        }
        for (&id, n) in &self.nodes {
            match (&n.raft, n.restart_at) {
                (Some(r), _) => {
                    if let Some(t) = r.poll_timeout() {
                        next.consider(t, Ev::Tick(id));
                    }
                }
                (None, Some(t)) => next.consider(t, Ev::Restart(id)),
                (None, None) => {}
            }
        }
        if faulty {
            next.consider(self.next_fault, Ev::Fault);
            if let Some(t) = self.heal_at {
                next.consider(t, Ev::Heal);
            }
        }
        next.consider(self.next_propose, Ev::Propose);
        let (t, ev) = next.pick();
        self.now = self.now.max(t);
        if self.now >= end {
            return Ok(());
        }
        let touched: Option<NodeId> = match ev {
            Ev::Deliver => {
                let (from, to, msg) = self.net.pop().expect("due message");
                let live = self.nodes[&to].raft.is_some();
                if live && !self.links.is_cut(from, to) {
                    self.stats.delivered += 1;
                    // Power loss during this step's fsyncs, now and then.
                    let torn = faulty && self.rng.gen_bool(0.002);
                    let disk = self.nodes[&to].disk.clone();
                    disk.set_fail_syncs(torn);
                    let now = self.now;
                    self.raft_mut(to).step(now, from, msg);
                    disk.set_fail_syncs(false);
                    self.after(to)?;
                    Some(to)
                } else {
                    None
                }
            }
            Ev::Tick(id) => {
                let now = self.now;
                self.raft_mut(id).handle_timeout(now);
                self.after(id)?;
                Some(id)
            }
            Ev::Restart(id) => {
                self.restart(id)?;
                Some(id)
            }
            Ev::Heal => {
                self.links.heal();
                self.heal_at = None;
                None
            }
            Ev::Fault => {
                self.fault();
                self.next_fault = self.now + self.rng.gen_range(50 * MS..500 * MS);
                None
            }
            Ev::Propose => {
                self.propose_everywhere()?;
                self.next_propose = self.now + 10 * MS;
                None
            }
        };
        self.check(touched)
    }

    fn raft_mut(&mut self, id: NodeId) -> &mut Raft<MemStorage> {
        self.nodes
            .get_mut(&id)
            .and_then(|n| n.raft.as_mut())
            .expect("live node")
    }

    fn propose_everywhere(&mut self) -> Result<(), String> {
        let leaders: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|(_, n)| {
                n.raft
                    .as_ref()
                    .is_some_and(|r| r.role() == RaftRole::Leader)
            })
            .map(|(&id, _)| id)
            .collect();
        for id in leaders {
            let backlog = {
                let r = self.nodes[&id].raft.as_ref().expect("live");
                r.last_index() - r.commit_index()
            };
            if backlog > 40 {
                continue;
            }
            self.proposals += 1;
            let data = self.proposals.to_le_bytes().to_vec();
            let now = self.now;
            let _ = self.raft_mut(id).propose(now, data);
            self.after(id)?;
        }
        Ok(())
    }

    /// Drains node `id`'s outputs into the network and its application.
    fn after(&mut self, id: NodeId) -> Result<(), String> {
        let Some(raft) = self.nodes.get_mut(&id).and_then(|n| n.raft.as_mut()) else {
            return Ok(());
        };
        let outputs = raft.poll_outputs();
        let mut crashed = false;
        for out in outputs {
            match out {
                RaftOutput::Send { to, message } => self.enqueue(id, to, message),
                RaftOutput::Apply(entries) => {
                    for e in entries {
                        self.apply(id, e)?;
                    }
                }
                RaftOutput::RestoreSnapshot(s) => {
                    self.stats.snapshots_installed += 1;
                    let image: Image = bincode::deserialize(&s.data).expect("image decodes");
                    if image.index != s.last_index {
                        return Err(self.fail(format!(
                            "snapshot at {} holds image {image:?}",
                            s.last_index
                        )));
                    }
                    self.check_image(id, image)?;
                    self.nodes.get_mut(&id).expect("node").image = image;
                }
                RaftOutput::RoleChanged { role, term, .. } => {
                    if role == RaftRole::Leader {
                        if let Some(&other) = self.leaders.get(&term) {
                            if other != id {
                                return Err(self.fail(format!(
                                    "election safety: nodes {other} and {id} both leaders of term {term}"
                                )));
                            }
                        }
                        self.leaders.insert(term, id);
                    }
                }
                RaftOutput::StorageFailed(_) => crashed = true,
            }
        }
        if crashed {
            self.crash(id);
            return Ok(());
        }
        self.maybe_compact(id)
    }

    fn apply(&mut self, id: NodeId, e: Entry) -> Result<(), String> {
        let node = self.nodes.get_mut(&id).expect("node");
        if e.index != node.image.index + 1 {
            let img = node.image;
            return Err(self.fail(format!("node {id} applied {} after {img:?}", e.index)));
        }
        let hash = mix(node.image.hash, &e);
        node.image = Image {
            index: e.index,
            hash,
        };
        match self.applied.get(&e.index) {
            Some((other, h)) if other != &e || *h != hash => {
                return Err(self.fail(format!(
                    "state-machine safety: node {id} applied {e:?} at {} where another applied {other:?}",
                    e.index
                )))
            }
            Some(_) => {}
            None => {
                self.applied.insert(e.index, (e, hash));
            }
        }
        Ok(())
    }

    fn check_image(&self, id: NodeId, image: Image) -> Result<(), String> {
        if image.index == 0 {
            return Ok(());
        }
        match self.applied.get(&image.index) {
            Some((_, h)) if *h != image.hash => Err(self.fail(format!(
                "state-machine safety: node {id} restored an image at {} that differs from what others applied",
                image.index
            ))),
            Some(_) => Ok(()),
            None => Err(self.fail(format!(
                "node {id} restored an image at {} that nobody applied",
                image.index
            ))),
        }
    }

    fn maybe_compact(&mut self, id: NodeId) -> Result<(), String> {
        let node = self.nodes.get_mut(&id).expect("node");
        let Some(raft) = node.raft.as_mut() else {
            return Ok(());
        };
        if node.image.index >= raft.snapshot().last_index + 16 {
            let data = bincode::serialize(&node.image).expect("image encodes");
            match raft.compact(node.image.index, data) {
                Ok(()) => {}
                Err(CompactError::Stopped(_)) => self.crash(id),
                Err(e) => return Err(self.fail(format!("node {id}: compact refused: {e}"))),
            }
        }
        Ok(())
    }

    fn enqueue(&mut self, from: NodeId, to: NodeId, message: Message) {
        let faulty = self.now < self.opts.faulty_for;
        self.net
            .send(&mut self.rng, self.now, faulty, (from, to), message);
    }

    fn crash(&mut self, id: NodeId) {
        self.stats.crashes += 1;
        let down_for = self.rng.gen_range(10 * MS..800 * MS);
        let node = self.nodes.get_mut(&id).expect("node");
        if let Some(raft) = node.raft.take() {
            drop(raft.into_storage());
        }
        power_loss(&node.disk, &mut self.rng);
        node.restart_at = Some(self.now + down_for);
    }

    fn restart(&mut self, id: NodeId) -> Result<(), String> {
        let config = self.config(id);
        let now = self.now;
        let node = self.nodes.get_mut(&id).expect("node");
        node.restart_at = None;
        let raft = match Raft::open(node.disk.clone(), config, now) {
            Ok(r) => r,
            Err(e) => return Err(self.fail(format!("node {id} does not reopen: {e}"))),
        };
        let s = raft.snapshot();
        let image = if s.last_index == 0 {
            Image::default()
        } else {
            bincode::deserialize(&s.data).expect("image decodes")
        };
        node.image = image;
        node.raft = Some(raft);
        self.check_image(id, image)
    }

    fn fault(&mut self) {
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        let leader = self
            .nodes
            .iter()
            .filter(|(_, n)| {
                n.raft
                    .as_ref()
                    .is_some_and(|r| r.role() == RaftRole::Leader)
            })
            .map(|(&id, _)| id)
            .max();
        let pick = |rng: &mut ChaCha8Rng| ids[rng.gen_range(0..ids.len())];
        match self.rng.gen_range(0..10) {
            // Isolate the leader (or a random node) for long enough to elect another.
            0..=2 => {
                let victim = match leader {
                    Some(l) if self.rng.gen_bool(0.7) => l,
                    _ => pick(&mut self.rng),
                };
                self.links.isolate(victim, &ids);
                self.heal_at = Some(self.now + self.rng.gen_range(100 * MS..1_500 * MS));
            }
            // Split into two random groups.
            3 => {
                self.links.split(&ids, &mut self.rng);
                self.heal_at = Some(self.now + self.rng.gen_range(100 * MS..1_500 * MS));
            }
            // Cut one link one way.
            4 => {
                let (a, b) = (pick(&mut self.rng), pick(&mut self.rng));
                if a != b {
                    self.links.blocked.insert((a, b));
                }
                self.heal_at = Some(self.now + self.rng.gen_range(100 * MS..1_000 * MS));
            }
            // Crash a node (often the leader).
            5..=7 => {
                let victim = match leader {
                    Some(l) if self.rng.gen_bool(0.5) => l,
                    _ => pick(&mut self.rng),
                };
                if self.nodes[&victim].raft.is_some() {
                    self.crash(victim);
                }
            }
            _ => {
                self.links.heal();
                self.heal_at = None;
            }
        }
    }

    /// The per-step checks. `touched` is the node whose state just changed (log matching is
    /// checked between it and every other node).
    fn check(&mut self, touched: Option<NodeId>) -> Result<(), String> {
        // Record newly committed entries (with the observer's term as an upper bound of the
        // term they were committed in).
        for n in self.nodes.values() {
            let Some(r) = &n.raft else { continue };
            let from = self.committed.last_key_value().map_or(0, |(&i, _)| i) + 1;
            for i in from..=r.commit_index() {
                let t = match r.term_at(i) {
                    Some(t) => t,
                    None => match self.applied.get(&i) {
                        Some((e, _)) => e.term,
                        None => continue,
                    },
                };
                self.committed.insert(i, (t, r.term()));
            }
        }
        self.stats.committed = self.committed.len() as Index;
        // Leader completeness, and bounded zombie leadership.
        let leaders: Vec<(NodeId, Term)> = self
            .nodes
            .iter()
            .filter_map(|(&id, n)| n.raft.as_ref().map(|r| (id, r)))
            .filter(|(_, r)| r.role() == RaftRole::Leader)
            .map(|(id, r)| (id, r.term()))
            .collect();
        self.stats.leaders = self.stats.leaders.max(leaders.len());
        for &(id, term) in &leaders {
            let r = self.nodes[&id].raft.as_ref().expect("live");
            let snap = r.snapshot().last_index;
            for (&i, &(t, seen_in)) in self.committed.range(snap + 1..) {
                if seen_in < term && r.term_at(i) != Some(t) {
                    return Err(self.fail(format!(
                        "leader completeness: leader {id} of term {term} has {:?} at {i}, committed with term {t} (seen in term {seen_in})",
                        r.term_at(i)
                    )));
                }
            }
        }
        let newest = leaders.iter().map(|&(_, t)| t).max().unwrap_or(0);
        let newest_at = self.leaders.keys().next_back().copied().unwrap_or(0);
        let newest = newest.max(newest_at);
        self.stale_leader_since.retain(|k, _| leaders.contains(k));
        for &(id, term) in &leaders {
            if term < newest {
                let since = *self
                    .stale_leader_since
                    .entry((id, term))
                    .or_insert(self.now);
                let bound = 3 * self.election_timeout;
                if self.now - since > bound {
                    return Err(self.fail(format!(
                        "zombie leader: node {id} still leads term {term} {} ms after term {newest} elected a leader",
                        (self.now - since) / MS
                    )));
                }
            }
        }
        // Log matching between the touched node and every other live node.
        if let Some(a) = touched {
            let Some(ra) = self.nodes[&a].raft.as_ref() else {
                return Ok(());
            };
            for (&b, n) in &self.nodes {
                let Some(rb) = &n.raft else { continue };
                if b == a {
                    continue;
                }
                if let Some(i) = log_matching_violation(ra, rb) {
                    return Err(self.fail(format!(
                        "log matching: nodes {a} and {b} agree on the term at {i} but not before or at it"
                    )));
                }
            }
        }
        Ok(())
    }

    fn final_checks(&mut self) -> Result<(), String> {
        for id in self.nodes.keys().copied().collect::<Vec<_>>() {
            if self.nodes[&id].raft.is_none() {
                self.restart(id)?;
            }
        }
        // Settle with a healthy network until one leader commits a fresh entry.
        let deadline = self.now + 2_000 * MS;
        let target = loop {
            let leader = self
                .nodes
                .iter()
                .filter_map(|(&id, n)| n.raft.as_ref().map(|r| (id, r)))
                .find(|(_, r)| r.role() == RaftRole::Leader)
                .map(|(id, _)| id);
            if let Some(l) = leader {
                let now = self.now;
                if let Ok(i) = self.raft_mut(l).propose(now, b"final".to_vec()) {
                    self.after(l)?;
                    break i;
                }
            }
            if self.now > deadline {
                return Err(self.fail("liveness: no leader 2 s after healing".into()));
            }
            self.step(false, deadline + 1)?;
        };
        let deadline = self.now + 2_000 * MS;
        while self.nodes.values().any(|n| n.image.index < target) {
            if self.now > deadline {
                let behind: Vec<(NodeId, Index)> = self
                    .nodes
                    .iter()
                    .map(|(&i, n)| (i, n.image.index))
                    .collect();
                return Err(self.fail(format!(
                    "liveness: entry {target} not applied everywhere 2 s after proposal: {behind:?}"
                )));
            }
            self.step(false, deadline + 1)?;
        }
        // Every entry ever seen committed is what everyone applied.
        for (&i, &(t, _)) in &self.committed {
            match self.applied.get(&i) {
                Some((e, _)) if e.term == t => {}
                other => {
                    return Err(self.fail(format!(
                        "committed entry lost: index {i} was committed with term {t}, applied {:?}",
                        other.map(|(e, _)| e)
                    )))
                }
            }
        }
        Ok(())
    }
}

/// The highest index where the two logs hold the same term but differ at or before it.
fn log_matching_violation(a: &Raft<MemStorage>, b: &Raft<MemStorage>) -> Option<Index> {
    let lo = a.snapshot().last_index.max(b.snapshot().last_index) + 1;
    let hi = a.last_index().min(b.last_index());
    let entry = |r: &Raft<MemStorage>, i: Index| {
        let s = r.snapshot().last_index;
        r.entries()[(i - s - 1) as usize].clone()
    };
    let mut i = hi;
    while i >= lo {
        if a.term_at(i) == b.term_at(i) {
            // From here down everything must be identical.
            let mut j = i;
            while j >= lo {
                if entry(a, j) != entry(b, j) {
                    return Some(i);
                }
                j -= 1;
            }
            return None;
        }
        i -= 1;
    }
    None
}

/// Runs `seeds` with `opts`; returns the first failure.
pub(super) fn sweep(seeds: impl IntoIterator<Item = u64>, opts: &Options) -> Result<u64, String> {
    let mut n = 0;
    for seed in seeds {
        RaftCluster::new(seed, opts.clone()).run()?;
        n += 1;
    }
    Ok(n)
}

/// The first seed in `seeds` on which `opts` fails, with the failure.
pub(super) fn first_failure(
    seeds: impl IntoIterator<Item = u64>,
    opts: &Options,
) -> Option<(u64, String)> {
    seeds.into_iter().find_map(|s| {
        RaftCluster::new(s, opts.clone())
            .run()
            .err()
            .map(|e| (s, e))
    })
}

#[test]
fn random_clusters_of_3_and_5_keep_raft_safe() {
    let seeds = env_u64("SKEIN_RAFT_SEEDS").unwrap_or(12);
    for nodes in [3, 5] {
        let opts = Options::new(nodes);
        if let Err(e) = sweep(0..seeds, &opts) {
            panic!("{e}");
        }
    }
}

#[test]
fn replay() {
    let Some(seed) = env_u64("SKEIN_RAFT_SEED") else {
        return;
    };
    let mut opts = Options::new(env_u64("SKEIN_RAFT_NODES").unwrap_or(3) as u32);
    if let Ok(bug) = std::env::var("SKEIN_RAFT_BUG") {
        opts.bugs = RaftBugs::named(&bug).expect("known bug name");
    }
    let stats = RaftCluster::new(seed, opts)
        .run()
        .unwrap_or_else(|e| panic!("{e}"));
    println!("seed {seed}: {stats:?}");
}
