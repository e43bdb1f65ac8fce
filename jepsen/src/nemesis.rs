//! Nemesis schedules: which fault strikes which node when, drawn from a seed.
//!
//! The schedule is pure data, computed before the run, so a seed names the same faults at the
//! same offsets every time (the cluster's reaction still varies with real timing). The
//! harness (`skein jepsen run`) executes it: it starts each window's fault at `start`, and
//! undoes it at `end` (restart, SIGCONT, heal). Windows never overlap, so each heal leaves
//! the cluster whole before the next fault.

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

    /// Parses a comma-separated list (`kill,pause,partition`, or `all`), sorted, no repeats.
    pub fn parse_list(s: &str) -> Result<Vec<NemesisKind>, String> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let kinds: &[NemesisKind] = match part {
                "kill" => &[NemesisKind::Kill],
                "pause" => &[NemesisKind::Pause],
                "partition" => &[NemesisKind::Partition],
                "slow" => &[NemesisKind::Slow],
                "lossy" => &[NemesisKind::Lossy],
                "all" => &[
                    NemesisKind::Kill,
                    NemesisKind::Pause,
                    NemesisKind::Partition,
                    NemesisKind::Slow,
                    NemesisKind::Lossy,
                ],
                "none" => &[],
                other => {
                    return Err(format!(
                        "unknown nemesis {other:?} (known: kill, pause, partition, slow, lossy, all, none)"
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
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// The test partition's leader at the moment the fault starts.
    Leader,
    /// A node by index into the harness's node list (0 = controller).
    Node(usize),
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
        let target = match &self.target {
            Target::Leader => "leader".to_string(),
            Target::Node(i) => format!("node #{i}"),
        };
        write!(
            f,
            "{} {} at {:.1}s-{:.1}s",
            self.kind.name(),
            target,
            self.start_ms as f64 / 1000.0,
            self.end_ms as f64 / 1000.0
        )
    }
}

/// SplitMix64: tiny, seedable, good enough to draw a schedule.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Draws the fault windows of a run of `duration_ms`: one window per `interval_ms` slot
/// (a quiet first slot lets the workload start), each lasting between a quarter and a half
/// of the slot, so the cluster has time to recover before the next. Kinds come in rounds,
/// each a seeded shuffle of `kinds`, so a run of `kinds.len()` windows has every kind once.
/// Half the faults target the leader, the others a node drawn among `nodes`.
pub fn schedule(
    seed: u64,
    kinds: &[NemesisKind],
    nodes: usize,
    duration_ms: u64,
    interval_ms: u64,
) -> Vec<Window> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    if kinds.is_empty() || nodes == 0 || interval_ms == 0 {
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
        let target = if rng.below(2) == 0 {
            Target::Leader
        } else {
            Target::Node(rng.below(nodes as u64) as usize)
        };
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

    #[test]
    fn parse_lists() {
        assert_eq!(
            NemesisKind::parse_list("partition,kill,kill").unwrap(),
            vec![NemesisKind::Kill, NemesisKind::Partition]
        );
        assert_eq!(NemesisKind::parse_list("all").unwrap().len(), 5);
        assert!(NemesisKind::parse_list("kill,clock").is_err());
    }

    #[test]
    fn schedule_is_seeded_and_windows_do_not_overlap() {
        let kinds = NemesisKind::parse_list("all").unwrap();
        let a = schedule(7, &kinds, 4, 60_000, 5_000);
        assert_eq!(a, schedule(7, &kinds, 4, 60_000, 5_000));
        assert_ne!(a, schedule(8, &kinds, 4, 60_000, 5_000));
        assert_eq!(a.len(), 11);
        for w in a.windows(2) {
            assert!(w[0].start_ms < w[0].end_ms && w[0].end_ms < w[1].start_ms);
        }
        assert!(a.last().unwrap().end_ms <= 60_000);
        for &k in &kinds {
            assert!(
                schedule(1, &[k], 4, 60_000, 5_000)
                    .iter()
                    .all(|w| w.kind == k),
                "only enabled kinds"
            );
        }
        assert!(schedule(1, &[], 4, 60_000, 5_000).is_empty());
        // Every kind in the first round.
        for seed in 0..20 {
            let mut first: Vec<NemesisKind> = schedule(seed, &kinds, 4, 24_000, 4_000)
                .iter()
                .map(|w| w.kind)
                .collect();
            first.sort();
            assert_eq!(first, kinds);
        }
    }
}
