//! Nemesis schedules: which fault strikes which node when, drawn from a seed.
//!
//! The schedule is pure data, computed before the run, so a seed names the same faults at the
//! same offsets every time (the cluster's reaction still varies with real timing). The
//! harness (`skein jepsen run`) executes it: it starts each window's fault at `start`, and
//! undoes it at `end` (restart, SIGCONT, heal). Windows never overlap, so each heal leaves
//! the cluster whole before the next fault.
//!
//! Nodes are indexes into the harness's node list, the controllers first: with a quorum of
//! `controllers`, a target can be the active controller (resolved when the fault starts,
//! like the partition leader), so controller failover is exercised, not only followers.

use serde::Serialize;
use std::fmt;

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NemesisKind {
    /// `kill -9` of a node; restarted from its data dir at the window's end.
    Kill,
    /// SIGSTOP of a node; SIGCONT at the window's end.
    Pause,
    /// Every link between a node and the others is cut (through the proxy); healed at the end.
    Partition,
    /// The link between two nodes is cut, both ways; each still reaches every other node
    /// (broker-broker, broker-controller or controller-controller: a non-transitive
    /// partition, where A sees B and C but B and C do not see each other).
    Link,
    /// The nodes are split into two random halves that cannot reach each other.
    Halves,
    /// Every link between a node and the others is slow: each chunk waits 150 ms.
    Slow,
    /// Every link between a node and the others is lossy: a tenth of the chunks wait a
    /// retransmission timeout (200 ms), one in a hundred resets its connection.
    Lossy,
}

impl NemesisKind {
    pub fn name(self) -> &'static str {
        match self {
            NemesisKind::Kill => "kill",
            NemesisKind::Pause => "pause",
            NemesisKind::Partition => "partition",
            NemesisKind::Link => "link",
            NemesisKind::Halves => "halves",
            NemesisKind::Slow => "slow",
            NemesisKind::Lossy => "lossy",
        }
    }

    /// How the proxy degrades a node's links during a `Slow` or `Lossy` window.
    pub fn degrade(self) -> Option<crate::proxy::Degrade> {
        match self {
            NemesisKind::Slow => Some(crate::proxy::Degrade {
                delay_ms: 150,
                loss_permille: 0,
            }),
            NemesisKind::Lossy => Some(crate::proxy::Degrade {
                delay_ms: 0,
                loss_permille: 100,
            }),
            _ => None,
        }
    }

    /// Whether the proxy undoes this fault (heal), rather than the process table.
    pub fn is_network(self) -> bool {
        !matches!(self, NemesisKind::Kill | NemesisKind::Pause)
    }

    /// Parses a comma-separated list (`kill,pause,partition`, or `all`), sorted, no repeats.
    pub fn parse_list(s: &str) -> Result<Vec<NemesisKind>, String> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let kinds: &[NemesisKind] = match part {
                "kill" => &[NemesisKind::Kill],
                "pause" => &[NemesisKind::Pause],
                "partition" => &[NemesisKind::Partition],
                "link" => &[NemesisKind::Link],
                "halves" => &[NemesisKind::Halves],
                "slow" => &[NemesisKind::Slow],
                "lossy" => &[NemesisKind::Lossy],
                "all" => &[
                    NemesisKind::Kill,
                    NemesisKind::Pause,
                    NemesisKind::Partition,
                    NemesisKind::Link,
                    NemesisKind::Halves,
                    NemesisKind::Slow,
                    NemesisKind::Lossy,
                ],
                "none" => &[],
                other => {
                    return Err(format!(
                        "unknown nemesis {other:?} (known: kill, pause, partition, link, halves, slow, lossy, all, none)"
                    ))
                }
            };
            out.extend_from_slice(kinds);
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

/// Whom a fault strikes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// The leader of a test partition at the moment the fault starts (the harness picks
    /// which partition).
    Leader,
    /// The active controller of the quorum at the moment the fault starts.
    ActiveController,
    /// A node by index into the harness's node list (the controllers first).
    Node(usize),
    /// The link between two nodes (`link`): the first may be a role, the second is a node;
    /// if both resolve to the same node, the harness takes the next one in the list.
    Link(Box<Target>, usize),
    /// One side of a split (`halves`): these nodes against all the others.
    Side(Vec<usize>),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Leader => write!(f, "leader"),
            Target::ActiveController => write!(f, "active controller"),
            Target::Node(i) => write!(f, "node #{i}"),
            Target::Link(a, b) => write!(f, "{a} <-> node #{b}"),
            Target::Side(side) => {
                let side: Vec<String> = side.iter().map(|i| format!("#{i}")).collect();
                write!(f, "nodes {} | the rest", side.join(","))
            }
        }
    }
}

/// One fault: what, whom, and when (milliseconds since the workload started).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Window {
    pub kind: NemesisKind,
    pub target: Target,
    pub start_ms: u64,
    pub end_ms: u64,
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} at {:.1}s-{:.1}s",
            self.kind.name(),
            self.target,
            self.start_ms as f64 / 1000.0,
            self.end_ms as f64 / 1000.0
        )
    }
}

/// SplitMix64: tiny, seedable, good enough to draw a schedule.
struct Rng(u64);

/// SplitMix64's output function: a well-mixed 64-bit value from any input (also what the
/// harness draws other seeded choices from, e.g. group members' lifetimes).
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The nodes a schedule draws from: `nodes` in all, the first `controllers` of them
/// controllers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Topology {
    pub nodes: usize,
    pub controllers: usize,
}

/// One node: half the time the leader; else a node drawn among all, and when that lands on
/// a controller of a quorum, half the time the active controller instead. (With a single
/// controller the draws are the same as before quorums existed, so old seeds replay.)
fn draw_one(rng: &mut Rng, t: Topology) -> Target {
    if rng.below(2) == 0 {
        return Target::Leader;
    }
    let i = rng.below(t.nodes as u64) as usize;
    if i < t.controllers && t.controllers > 1 && rng.below(2) == 0 {
        Target::ActiveController
    } else {
        Target::Node(i)
    }
}

fn draw_target(rng: &mut Rng, kind: NemesisKind, t: Topology) -> Target {
    match kind {
        NemesisKind::Link => {
            let first = draw_one(rng, t);
            Target::Link(Box::new(first), rng.below(t.nodes as u64) as usize)
        }
        NemesisKind::Halves => {
            let mut all: Vec<usize> = (0..t.nodes).collect();
            for i in (1..all.len()).rev() {
                all.swap(i, rng.below(i as u64 + 1) as usize);
            }
            let mut side = all[..t.nodes / 2].to_vec();
            side.sort_unstable();
            Target::Side(side)
        }
        _ => draw_one(rng, t),
    }
}

/// Draws the fault windows of a run of `duration_ms`: one window per `interval_ms` slot
/// (a quiet first slot lets the workload start), each lasting between a quarter and a half
/// of the slot, so the cluster has time to recover before the next. Kinds come in rounds,
/// each a seeded shuffle of `kinds`, so a run of `kinds.len()` windows has every kind once.
/// Targets as [`draw_one`]; a `link` joins such a node to one drawn among all, `halves`
/// splits the nodes in two random halves.
pub fn schedule(
    seed: u64,
    kinds: &[NemesisKind],
    topology: Topology,
    duration_ms: u64,
    interval_ms: u64,
) -> Vec<Window> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    if kinds.is_empty() || topology.nodes == 0 || interval_ms == 0 {
        return out;
    }
    let mut slot = interval_ms;
    let mut round: Vec<NemesisKind> = Vec::new();
    while slot + interval_ms <= duration_ms {
        if round.is_empty() {
            round = kinds.to_vec();
            for i in (1..round.len()).rev() {
                round.swap(i, rng.below(i as u64 + 1) as usize);
            }
        }
        let kind = round.remove(0);
        let target = draw_target(&mut rng, kind, topology);
        let len = interval_ms / 4 + rng.below(interval_ms / 4 + 1);
        let start = slot + rng.below(interval_ms / 4 + 1);
        out.push(Window {
            kind,
            target,
            start_ms: start,
            end_ms: start + len,
        });
        slot += interval_ms;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOUR: Topology = Topology {
        nodes: 4,
        controllers: 1,
    };

    #[test]
    fn parse_lists() {
        assert_eq!(
            NemesisKind::parse_list("partition,kill,kill").unwrap(),
            vec![NemesisKind::Kill, NemesisKind::Partition]
        );
        assert_eq!(NemesisKind::parse_list("all").unwrap().len(), 7);
        assert!(NemesisKind::parse_list("kill,clock").is_err());
    }

    #[test]
    fn schedule_is_seeded_and_windows_do_not_overlap() {
        let kinds = NemesisKind::parse_list("all").unwrap();
        let a = schedule(7, &kinds, FOUR, 60_000, 5_000);
        assert_eq!(a, schedule(7, &kinds, FOUR, 60_000, 5_000));
        assert_ne!(a, schedule(8, &kinds, FOUR, 60_000, 5_000));
        assert_eq!(a.len(), 11);
        for w in a.windows(2) {
            assert!(w[0].start_ms < w[0].end_ms && w[0].end_ms < w[1].start_ms);
        }
        assert!(a.last().unwrap().end_ms <= 60_000);
        for &k in &kinds {
            assert!(
                schedule(1, &[k], FOUR, 60_000, 5_000)
                    .iter()
                    .all(|w| w.kind == k),
                "only enabled kinds"
            );
        }
        assert!(schedule(1, &[], FOUR, 60_000, 5_000).is_empty());
        // Every kind in the first round.
        for seed in 0..20 {
            let mut first: Vec<NemesisKind> = schedule(seed, &kinds, FOUR, 32_000, 4_000)
                .iter()
                .map(|w| w.kind)
                .collect();
            first.sort();
            assert_eq!(first, kinds);
        }
    }

    /// A quorum's schedule strikes controllers, the active one included, cuts single links
    /// between two distinct node draws and splits the nodes into halves.
    #[test]
    fn quorum_schedules_target_controllers_links_and_halves() {
        let six = Topology {
            nodes: 6,
            controllers: 3,
        };
        let kinds = NemesisKind::parse_list("all").unwrap();
        let mut active = 0;
        let mut controllers = 0;
        for seed in 0..20 {
            for w in schedule(seed, &kinds, six, 60_000, 4_000) {
                match &w.target {
                    Target::ActiveController => active += 1,
                    Target::Node(i) if *i < 3 => controllers += 1,
                    Target::Link(_, b) => assert!(*b < 6),
                    Target::Side(side) => {
                        assert_eq!(side.len(), 3);
                        assert!(side.windows(2).all(|p| p[0] < p[1]));
                    }
                    _ => {}
                }
                assert_eq!(
                    matches!(w.target, Target::Side(_)),
                    w.kind == NemesisKind::Halves
                );
                assert_eq!(
                    matches!(w.target, Target::Link(..)),
                    w.kind == NemesisKind::Link
                );
            }
        }
        assert!(active > 0 && controllers > 0, "{active} {controllers}");
        // One controller: no active-controller draws (node #0 is the controller).
        for seed in 0..20 {
            assert!(schedule(seed, &kinds, FOUR, 60_000, 4_000)
                .iter()
                .all(|w| w.target != Target::ActiveController));
        }
    }
}
