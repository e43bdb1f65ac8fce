//! The network model, generic over the endpoint type: latency, drop, duplicate, reorder,
//! partitions (any set of blocked directed links), heal, and clogged links.
//!
//! The model decides a message's fate when it is sent (dropped, or delivered at some time,
//! perhaps twice); the world keeps the message in its event queue meanwhile and asks
//! [`Network::can_deliver`] again on arrival, so a partition that starts while a message is
//! in flight still cuts it off. Links are FIFO unless the reorder draw says otherwise, as TCP
//! connections are; a clogged link holds messages back until it unclogs instead of dropping.

use crate::rng::{between, chance, exponential};
use crate::time::{SimTime, MICROS, MILLIS};
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::hash::Hash;

use crate::fasthash::FastMap;

/// Per-message behaviour of the network.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NetConfig {
    /// Every message takes at least this long.
    pub latency_min: SimTime,
    /// Mean of the exponential extra latency on top of the minimum.
    pub latency_mean_extra: SimTime,
    /// Cap on one message's latency (the exponential tail is cut here).
    pub latency_max: SimTime,
    /// Probability that a message is lost.
    pub drop: f64,
    /// Probability that a message is delivered twice.
    pub duplicate: f64,
    /// Probability that a message ignores FIFO order on its link and takes extra delay.
    pub reorder: f64,
}

impl Default for NetConfig {
    fn default() -> Self {
        Self {
            latency_min: 100 * MICROS,
            latency_mean_extra: 400 * MICROS,
            latency_max: 20 * MILLIS,
            drop: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
        }
    }
}

impl NetConfig {
    /// A network that loses, duplicates and reorders a little, for faulty runs.
    pub fn lossy(rate: f64) -> Self {
        Self {
            drop: 0.01 * rate,
            duplicate: 0.005 * rate,
            reorder: 0.01 * rate,
            ..Self::default()
        }
    }
}

/// A network partition, described by intent; [`Partition::blocked_links`] expands it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "shape")]
pub enum Partition<A> {
    /// The nodes split into two random halves that cannot talk to each other.
    RandomHalves,
    /// These two groups cannot talk to each other (nodes in neither are unaffected).
    Split { a: Vec<A>, b: Vec<A> },
    /// One node cannot talk to anyone.
    Isolate { node: A },
    /// Two halves that cannot talk, except through one bridge node that sees both.
    Bridge { node: A },
    /// Messages from `from` to every other node are lost; the reverse direction works.
    OneWay { from: A },
}

impl<A: Ord + Copy + Debug> Partition<A> {
    /// The directed links this partition cuts among `nodes`. Random shapes draw from `rng`.
    pub fn blocked_links(&self, nodes: &[A], rng: &mut ChaCha8Rng) -> BTreeSet<(A, A)> {
        let mut out = BTreeSet::new();
        let mut cut = |a: &[A], b: &[A]| {
            for &x in a {
                for &y in b {
                    if x != y {
                        out.insert((x, y));
                        out.insert((y, x));
                    }
                }
            }
        };
        match self {
            Partition::RandomHalves => {
                let mut shuffled = nodes.to_vec();
                shuffled.shuffle(rng);
                let k = between(rng, 1, (shuffled.len() as u64).saturating_sub(1).max(1)) as usize;
                let (a, b) = shuffled.split_at(k.min(shuffled.len()));
                cut(a, b);
            }
            Partition::Split { a, b } => cut(a, b),
            Partition::Isolate { node } => {
                let others: Vec<A> = nodes.iter().copied().filter(|n| n != node).collect();
                cut(&[*node], &others);
            }
            Partition::Bridge { node } => {
                let mut others: Vec<A> = nodes.iter().copied().filter(|n| n != node).collect();
                others.shuffle(rng);
                let half = others.len() / 2;
                let (a, b) = others.split_at(half.max(1).min(others.len()));
                cut(a, b);
            }
            Partition::OneWay { from } => {
                for &y in nodes {
                    if y != *from {
                        out.insert((*from, y));
                    }
                }
            }
        }
        out
    }
}

/// Why the network refused a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// A random loss.
    Lost,
    /// The link is cut by a partition.
    Partitioned,
}

/// What happens to one sent message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Dropped(DropReason),
    /// Arrives at `at`, and a second copy at `duplicate` if that is set.
    Deliver {
        at: SimTime,
        duplicate: Option<SimTime>,
    },
}

/// Counters for the run report.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NetStats {
    pub sent: u64,
    pub lost: u64,
    pub partitioned: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub clogged: u64,
}

/// An endpoint of the simulated network. Most have a small number of their own, so the
/// state kept per link and looked up per message sits in a table, not a hashed map.
pub trait Endpoint: Ord + Copy + Debug + Hash {
    /// This endpoint's number below [`DENSE_ENDS`], if it has one.
    fn dense(&self) -> Option<usize>;
}

/// Endpoints numbered for the per-link table: `DENSE_ENDS`² entries.
pub const DENSE_ENDS: usize = 64;

impl Endpoint for skein_core::message::Address {
    /// Brokers 0..16, controllers 0..16 and clients 0..32 (the default world has 3, 3 and
    /// a handful); any other endpoint's links go to the hashed map.
    fn dense(&self) -> Option<usize> {
        use skein_core::message::Address;
        match *self {
            Address::Node(n) if n < 16 => Some(n as usize),
            Address::Controller(n) if n < 16 => Some(16 + n as usize),
            Address::Client(c) if c < 32 => Some(32 + c as usize),
            _ => None,
        }
    }
}

impl Endpoint for u32 {
    fn dense(&self) -> Option<usize> {
        (*self < DENSE_ENDS as u32).then_some(*self as usize)
    }
}

/// The network between endpoints of type `A`.
pub struct Network<A> {
    pub config: NetConfig,
    /// Every link cut now: the union of `cuts`, kept for the per-message lookup.
    blocked: BTreeSet<(A, A)>,
    /// The cuts in force, by id, so each timed partition ends on its own.
    cuts: BTreeMap<u64, BTreeSet<(A, A)>>,
    next_cut: u64,
    /// Looked up per message, never iterated: hashed.
    clogged_until: FastMap<(A, A), SimTime>,
    /// When the last in-order message on a link arrives (FIFO per link): by the ends'
    /// numbers where both have one ([`Endpoint::dense`]; 0: none yet), else hashed.
    last_arrival: Vec<SimTime>,
    last_arrival_other: FastMap<(A, A), SimTime>,
    pub stats: NetStats,
}

impl<A: Endpoint> Network<A> {
    pub fn new(config: NetConfig) -> Self {
        Self {
            config,
            blocked: BTreeSet::new(),
            cuts: BTreeMap::new(),
            next_cut: 0,
            clogged_until: FastMap::default(),
            last_arrival: vec![0; DENSE_ENDS * DENSE_ENDS],
            last_arrival_other: FastMap::default(),
            stats: NetStats::default(),
        }
    }

    fn last_arrival_mut(&mut self, (from, to): (A, A)) -> &mut SimTime {
        match (from.dense(), to.dense()) {
            (Some(f), Some(t)) => &mut self.last_arrival[f * DENSE_ENDS + t],
            _ => self.last_arrival_other.entry((from, to)).or_insert(0),
        }
    }

    fn latency(&self, rng: &mut ChaCha8Rng) -> SimTime {
        let c = &self.config;
        (c.latency_min + exponential(rng, c.latency_mean_extra))
            .min(c.latency_max.max(c.latency_min))
    }

    /// Decides the fate of a message sent now from `from` to `to`.
    pub fn send(&mut self, now: SimTime, from: A, to: A, rng: &mut ChaCha8Rng) -> Fate {
        self.stats.sent += 1;
        if self.blocked.contains(&(from, to)) {
            self.stats.partitioned += 1;
            return Fate::Dropped(DropReason::Partitioned);
        }
        if chance(rng, self.config.drop) {
            self.stats.lost += 1;
            return Fate::Dropped(DropReason::Lost);
        }
        let link = (from, to);
        let mut at = now + self.latency(rng);
        if let Some(&until) = self.clogged_until.get(&link) {
            if until > now {
                self.stats.clogged += 1;
                at = at.max(until + self.config.latency_min);
            }
        }
        if chance(rng, self.config.reorder) {
            // Overtaken by later messages: extra delay, and FIFO is not enforced.
            self.stats.reordered += 1;
            at += self.latency(rng) * 4;
        } else {
            let last = self.last_arrival_mut(link);
            at = at.max(*last);
            *last = at;
        }
        let duplicate = if chance(rng, self.config.duplicate) {
            self.stats.duplicated += 1;
            Some(at + self.latency(rng))
        } else {
            None
        };
        Fate::Deliver { at, duplicate }
    }

    /// Whether a message may arrive on `from -> to` right now (a partition may have begun
    /// while it was in flight).
    pub fn can_deliver(&self, from: A, to: A) -> bool {
        !self.blocked.contains(&(from, to))
    }

    /// Cuts the given directed links (adding to any partition already in force). Returns
    /// the cut's id, for [`Network::unblock`].
    pub fn block(&mut self, links: BTreeSet<(A, A)>) -> u64 {
        let id = self.next_cut;
        self.next_cut += 1;
        self.blocked.extend(links.iter().copied());
        self.cuts.insert(id, links);
        id
    }

    /// Ends one cut; links another cut in force also blocks stay blocked. A no-op if the
    /// cut already ended (a `heal` came first).
    pub fn unblock(&mut self, id: u64) {
        if self.cuts.remove(&id).is_some() {
            self.blocked = self.cuts.values().flatten().copied().collect();
        }
    }

    /// Removes every partition and clog.
    pub fn heal(&mut self) {
        self.blocked.clear();
        self.cuts.clear();
        self.clogged_until.clear();
    }

    /// Holds back messages on `from -> to` until `until`.
    pub fn clog(&mut self, from: A, to: A, until: SimTime) {
        let e = self.clogged_until.entry((from, to)).or_insert(0);
        *e = (*e).max(until);
    }

    pub fn is_partitioned(&self) -> bool {
        !self.blocked.is_empty()
    }

    pub fn blocked_links(&self) -> &BTreeSet<(A, A)> {
        &self.blocked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{stream, Subsystem};
    use skein_core::message::Address;

    #[test]
    fn fifo_per_link_without_reorder() {
        let mut net: Network<u32> = Network::new(NetConfig::default());
        let mut rng = stream(1, Subsystem::Network);
        let mut last = 0;
        for t in 0..200 {
            match net.send(t * 10, 1, 2, &mut rng) {
                Fate::Deliver {
                    at,
                    duplicate: None,
                } => {
                    assert!(at >= last && at >= t * 10 + net.config.latency_min);
                    last = at;
                }
                f => panic!("unexpected {f:?}"),
            }
        }
    }

    /// FIFO holds per link whether its ends are numbered (the table) or not (the map), and
    /// each link keeps its own order: the two stores never share an entry.
    #[test]
    fn fifo_per_link_in_the_table_and_the_map() {
        let mut net: Network<u32> = Network::new(NetConfig {
            latency_mean_extra: 50 * MILLIS,
            ..NetConfig::default()
        });
        let mut rng = stream(3, Subsystem::Network);
        let links = [
            (1, 2),
            (2, 1),
            (1, 1_000),
            (1_000, 1),
            (1_000, 2_000),
            (63, 64),
        ];
        let mut last = [0; 6];
        for t in 0..500 {
            for (i, &(from, to)) in links.iter().enumerate() {
                match net.send(t * MILLIS, from, to, &mut rng) {
                    Fate::Deliver { at, .. } => {
                        assert!(at >= last[i], "{from}->{to}: {at} before {}", last[i]);
                        last[i] = at;
                    }
                    f => panic!("unexpected {f:?}"),
                }
            }
        }
        assert_eq!(net.last_arrival_other.len(), 4);
        assert!(Address::Client(40).dense().is_none() && Address::Node(16).dense().is_none());
        let numbered = [Address::Node(0), Address::Controller(0), Address::Client(0)];
        let n: BTreeSet<usize> = numbered.iter().filter_map(Endpoint::dense).collect();
        assert_eq!(n.len(), 3, "distinct endpoints, distinct numbers");
    }

    #[test]
    fn partitions_block_and_heal() {
        let mut net: Network<u32> = Network::new(NetConfig::default());
        let mut rng = stream(2, Subsystem::Network);
        let nodes = [0, 1, 2, 3];
        net.block(Partition::Isolate { node: 2 }.blocked_links(&nodes, &mut rng));
        assert_eq!(
            net.send(0, 2, 1, &mut rng),
            Fate::Dropped(DropReason::Partitioned)
        );
        assert_eq!(
            net.send(0, 3, 2, &mut rng),
            Fate::Dropped(DropReason::Partitioned)
        );
        assert!(matches!(net.send(0, 1, 3, &mut rng), Fate::Deliver { .. }));
        net.heal();
        assert!(net.can_deliver(2, 1));

        let one_way = Partition::OneWay { from: 0 }.blocked_links(&nodes, &mut rng);
        assert!(one_way.contains(&(0, 1)) && !one_way.contains(&(1, 0)));

        for seed in 0..20 {
            let mut rng = stream(seed, Subsystem::Network);
            let halves = Partition::RandomHalves.blocked_links(&nodes, &mut rng);
            assert!(!halves.is_empty());
            assert!(halves.iter().all(|(a, b)| halves.contains(&(*b, *a))));
            let bridge = Partition::Bridge { node: 1 }.blocked_links(&nodes, &mut rng);
            assert!(bridge.iter().all(|(a, b)| *a != 1 && *b != 1));
            assert!(!bridge.is_empty());
        }
    }

    #[test]
    fn each_cut_ends_on_its_own() {
        let mut net: Network<u32> = Network::new(NetConfig::default());
        let mut rng = stream(5, Subsystem::Network);
        let nodes = [1, 2, 3];
        let a = net.block(Partition::Isolate { node: 1 }.blocked_links(&nodes, &mut rng));
        let b = net.block(Partition::OneWay { from: 2 }.blocked_links(&nodes, &mut rng));
        net.clog(3, 2, 1_000_000_000);
        assert!(!net.can_deliver(1, 2) && !net.can_deliver(2, 3));
        net.unblock(a);
        // (2, 1) was cut by both: still cut by b; (1, 3) only by a: open again.
        assert!(net.can_deliver(1, 3) && !net.can_deliver(2, 1) && !net.can_deliver(2, 3));
        net.unblock(a); // ending twice is harmless
        net.unblock(b);
        assert!(!net.is_partitioned());
        // The clog keeps its own end.
        match net.send(0, 3, 2, &mut rng) {
            Fate::Deliver { at, .. } => assert!(at >= 1_000_000_000),
            f => panic!("{f:?}"),
        }
    }

    #[test]
    fn clogging_delays_not_drops() {
        let mut net: Network<u32> = Network::new(NetConfig::default());
        let mut rng = stream(3, Subsystem::Network);
        net.clog(1, 2, 1_000_000_000);
        match net.send(0, 1, 2, &mut rng) {
            Fate::Deliver { at, .. } => assert!(at >= 1_000_000_000),
            f => panic!("{f:?}"),
        }
        match net.send(0, 2, 1, &mut rng) {
            Fate::Deliver { at, .. } => assert!(at < 1_000_000_000),
            f => panic!("{f:?}"),
        }
    }

    #[test]
    fn loss_duplicate_reorder_rates() {
        let mut net: Network<u32> = Network::new(NetConfig {
            drop: 0.1,
            duplicate: 0.1,
            reorder: 0.1,
            ..NetConfig::default()
        });
        let mut rng = stream(4, Subsystem::Network);
        for t in 0..10_000 {
            net.send(t, 1, 2, &mut rng);
        }
        let s = &net.stats;
        for n in [s.lost, s.duplicated, s.reordered] {
            assert!((700..1300).contains(&n), "{s:?}");
        }
    }
}
