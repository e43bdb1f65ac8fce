//! The faulty-world pieces core's seeded randomized tests share (the Raft cluster test and
//! the controller-quorum test): a network that loses, duplicates and delays (so reorders)
//! messages, links cut by partition faults, power loss that tears unsynced tails, and the
//! choice of the earliest due event. One seeded `ChaCha8Rng` drives them all, so a seed
//! replays exactly; each helper draws from it in a fixed order.
//!
//! Test-only (it needs `rand`, a dev-dependency): [`super::MemCluster`] is the calm, FIFO
//! harness other crates get; this is the lossy one core's own sweeps run on.

use crate::testing::MemStorage;
use crate::types::{Nanos, NodeId};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

/// Messages in flight, due at a time each: a message is lost with probability `loss` and
/// sent twice with probability `dup` while the world is faulty, and every copy is delayed
/// by a random time in `delay`. A zero probability draws nothing from the rng.
#[derive(Debug)]
pub(crate) struct FaultyNet<A, M> {
    pub(crate) loss: f64,
    pub(crate) dup: f64,
    delay: Range<Nanos>,
    /// (due time, send order) -> (from, to, message): equal due times go in send order.
    queue: BTreeMap<(Nanos, u64), (A, A, M)>,
    seq: u64,
}

impl<A, M: Clone> FaultyNet<A, M> {
    pub(crate) fn new(loss: f64, dup: f64, delay: Range<Nanos>) -> Self {
        Self {
            loss,
            dup,
            delay,
            queue: BTreeMap::new(),
            seq: 0,
        }
    }

    /// Sends `msg` at `now`; `faulty` turns loss and duplication on.
    pub(crate) fn send(
        &mut self,
        rng: &mut ChaCha8Rng,
        now: Nanos,
        faulty: bool,
        (from, to): (A, A),
        msg: M,
    ) where
        A: Clone,
    {
        if faulty && self.loss > 0.0 && rng.gen_bool(self.loss) {
            return;
        }
        let copies = if faulty && self.dup > 0.0 && rng.gen_bool(self.dup) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = rng.gen_range(self.delay.clone());
            self.seq += 1;
            self.queue.insert(
                (now + delay, self.seq),
                (from.clone(), to.clone(), msg.clone()),
            );
        }
    }

    /// When the next message is due.
    pub(crate) fn next_due(&self) -> Option<Nanos> {
        self.queue.first_key_value().map(|(&(t, _), _)| t)
    }

    /// The next message due: (from, to, message).
    pub(crate) fn pop(&mut self) -> Option<(A, A, M)> {
        self.queue.pop_first().map(|(_, m)| m)
    }
}

/// Directed links that drop everything, set by partition faults.
#[derive(Debug, Default)]
pub(crate) struct Links {
    pub(crate) blocked: BTreeSet<(NodeId, NodeId)>,
}

impl Links {
    pub(crate) fn is_cut(&self, from: NodeId, to: NodeId) -> bool {
        self.blocked.contains(&(from, to))
    }

    pub(crate) fn heal(&mut self) {
        self.blocked.clear();
    }

    /// Cuts `victim` off from every other node of `ids` (both ways); draws nothing.
    pub(crate) fn isolate(&mut self, victim: NodeId, ids: &[NodeId]) {
        self.blocked.clear();
        for &o in ids {
            if o != victim {
                self.blocked.insert((victim, o));
                self.blocked.insert((o, victim));
            }
        }
    }

    /// Splits `ids` into two random sides (a coin per node) and cuts every link across.
    pub(crate) fn split(&mut self, ids: &[NodeId], rng: &mut ChaCha8Rng) {
        self.blocked.clear();
        let side: BTreeMap<NodeId, bool> = ids.iter().map(|&i| (i, rng.gen_bool(0.5))).collect();
        for &a in ids {
            for &b in ids {
                if side[&a] != side[&b] {
                    self.blocked.insert((a, b));
                }
            }
        }
    }
}

/// Power loss on `disk`: each file keeps a random amount of its unsynced tail (one draw
/// from `rng` seeds the tearing).
pub(crate) fn power_loss(disk: &MemStorage, rng: &mut ChaCha8Rng) {
    let seed: u64 = rng.gen();
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    disk.crash(|f| r.gen_range(f.synced_len..=f.len));
}

/// The earliest of the events a step considers (ties: the first considered), or the
/// fallback given at the start when none is earlier.
pub(crate) struct Earliest<E> {
    best: (Nanos, E),
}

impl<E> Earliest<E> {
    pub(crate) fn new(until: Nanos, fallback: E) -> Self {
        Self {
            best: (until, fallback),
        }
    }

    pub(crate) fn consider(&mut self, at: Nanos, ev: E) {
        if at < self.best.0 {
            self.best = (at, ev);
        }
    }

    pub(crate) fn pick(self) -> (Nanos, E) {
        self.best
    }
}

/// A number from the environment (`SKEIN_*_SEEDS` soaks, `SKEIN_*_SEED` replays).
pub(crate) fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calm_net_delivers_every_message_once_in_due_order() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut net: FaultyNet<u32, u32> = FaultyNet::new(1.0, 1.0, 1..2);
        for m in 0..3 {
            net.send(&mut rng, 10, false, (1, 2), m);
        }
        assert_eq!(net.next_due(), Some(11));
        let got: Vec<u32> = std::iter::from_fn(|| net.pop())
            .map(|(_, _, m)| m)
            .collect();
        assert_eq!(got, vec![0, 1, 2], "loss and dup are off when calm");
    }

    #[test]
    fn a_faulty_net_loses_and_duplicates() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut lossy: FaultyNet<u32, u32> = FaultyNet::new(1.0, 0.0, 1..5);
        lossy.send(&mut rng, 0, true, (1, 2), 7);
        assert_eq!(lossy.pop(), None);
        let mut dup: FaultyNet<u32, u32> = FaultyNet::new(0.0, 1.0, 1..5);
        dup.send(&mut rng, 0, true, (1, 2), 7);
        assert_eq!(
            (dup.pop(), dup.pop(), dup.pop()),
            (Some((1, 2, 7)), Some((1, 2, 7)), None)
        );
    }

    #[test]
    fn links_isolate_and_split() {
        let mut l = Links::default();
        l.isolate(2, &[1, 2, 3]);
        assert!(l.is_cut(2, 1) && l.is_cut(3, 2) && !l.is_cut(1, 3));
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        l.split(&[1, 2, 3, 4], &mut rng);
        for (a, b) in l.blocked.clone() {
            assert!(l.is_cut(b, a), "a split cuts both ways");
        }
        l.heal();
        assert!(l.blocked.is_empty());
    }

    #[test]
    fn earliest_keeps_the_first_of_equal_times() {
        let mut e = Earliest::new(100, "end");
        e.consider(100, "late");
        e.consider(5, "a");
        e.consider(5, "b");
        assert_eq!(e.pick(), (5, "a"));
    }
}
