//! The leader nemesis ("partition the leader", as Jepsen does, aimed as FoundationDB's
//! BUGGIFY aims faults): with `[faults] new_leader_isolate` above 0, a controller that has
//! just become Raft leader of a new term is, with that probability, isolated from every node
//! a random 0 to 6 message delays later, for 300 ms to 3 s. Cut off right after it wins,
//! its no-op (or the entry it was probing) reaches nobody or only some: the chain of
//! stranded entries of Raft's figure 8 (`commit-previous-term`), which faults at random
//! times almost never line up. Draws come from a stream of their own, so the seed's other
//! faults are unchanged; off (no draws, no faults) by default.

use super::{Ev, World};
use crate::faults::{ControllerTag, Fault, NodeRef};
use crate::net::Partition;
use crate::rng::{between, chance, substream, Subsystem};
use crate::time::{SimTime, MILLIS, SECS};
use rand_chacha::ChaCha8Rng;
use skein_core::NodeId;
use std::collections::BTreeMap;

/// The nemesis' stream, the newest term each controller was seen leading, and the faults
/// it scheduled (the run's report carries them, so `shrink` can replay them explicitly).
pub(super) struct LeaderNemesis {
    rng: ChaCha8Rng,
    led: BTreeMap<NodeId, u64>,
    pub(super) struck: Vec<crate::faults::Scheduled>,
}

impl LeaderNemesis {
    /// `None` unless the run draws random faults, has a controller quorum and a
    /// probability above 0.
    pub(super) fn new(cfg: &crate::config::SimConfig) -> Option<Self> {
        (cfg.random_faults && cfg.controllers >= 3 && cfg.rates.new_leader_isolate > 0.0).then(
            || Self {
                rng: substream(cfg.seed, Subsystem::Faults, 3),
                led: BTreeMap::new(),
                struck: Vec::new(),
            },
        )
    }
}

impl World {
    /// After a step of controller `id` (of Raft `term`, leader or not): if it has just
    /// become leader of a term it did not lead before, maybe schedule its isolation.
    pub(super) fn leader_nemesis(&mut self, now: SimTime, id: NodeId, term: u64, leader: bool) {
        let Some(n) = self.leader_nemesis.as_mut() else {
            return;
        };
        if !leader || n.led.get(&id).is_some_and(|&t| t >= term) {
            return;
        }
        n.led.insert(id, term);
        let end = self.cfg.faults_end();
        if now >= end || !chance(&mut n.rng, self.cfg.rates.new_leader_isolate) {
            return;
        }
        let delay = between(&mut n.rng, 0, 6 * self.cfg.network.latency_max);
        let at = now + delay;
        let cap = self.cfg.rates.max_duration().max(300 * MILLIS);
        let hi = (3 * SECS).min(cap).min(end.saturating_sub(at));
        if hi < 300 * MILLIS {
            return;
        }
        let duration = between(&mut n.rng, 300 * MILLIS, hi);
        let fault = Fault::Partition {
            shape: Partition::Isolate {
                node: NodeRef::Controller(ControllerTag(id)),
            },
            duration: Some(duration),
        };
        n.struck.push(crate::faults::Scheduled {
            at,
            fault: fault.clone(),
        });
        self.q.push(at, Ev::Fault(fault));
    }
}
