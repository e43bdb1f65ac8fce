//! The leaders of one topic's partitions as a client last heard of them: core's
//! [`LeaderCache`] for a client that works on one topic, with the leader of each partition
//! kept by number beside it.
//!
//! Plain meaning: `leader(p)` is `cache.leader(&TopicPartition::new(topic, p))`, and a
//! refresh is due when the cache is stale or a partition's leader is unknown. The
//! by-number list is the one optimisation: a client asks for leaders many times a step,
//! and a map lookup per question (with a `String` key built for it) cost a tenth of a
//! simulation's instructions. It is refreshed only when the cache says a leader may have
//! changed ([`LeaderCache::version`]); every change goes through [`TopicLeaders::with_cache`],
//! so the list cannot drift from the cache (the tests check it against the plain meaning).
//! Hosts (the simulator's clients, a real client) decide only where a refresh goes.

use super::group_wire::{self, Pending};
use super::{ConsumerRequest, ConsumerResponse, Destination, LeaderCache, Resolved};
use crate::message::{Message, MetadataRequest, MetadataResponse};
use crate::types::{Nanos, NodeId, TopicPartition};
use std::borrow::Cow;

#[derive(Clone, Debug)]
pub struct TopicLeaders {
    cache: LeaderCache,
    /// The topic's partitions as keys, built once.
    tps: Vec<TopicPartition>,
    /// The leader of each of `tps` as `cache` knows it, refreshed after every change.
    leaders: Vec<Option<NodeId>>,
    /// What a metadata request asks for (built once, like `tps`).
    topics: [String; 1],
    /// Whether any of `leaders` is unknown, kept with them.
    missing: bool,
}

impl TopicLeaders {
    /// Nothing known yet of `topic`'s `partitions`; refreshes time out after `timeout` and
    /// are sent at most once per `min_interval` ([`LeaderCache::new`]).
    pub fn new(topic: &str, partitions: u32, timeout: Nanos, min_interval: Nanos) -> Self {
        Self {
            cache: LeaderCache::new(timeout, min_interval),
            tps: (0..partitions)
                .map(|p| TopicPartition::new(topic, p))
                .collect(),
            leaders: vec![None; partitions as usize],
            topics: [topic.to_string()],
            missing: partitions > 0,
        }
    }

    /// The leader of partition `p`, if known. Inlined, with the cache lookup (a partition
    /// outside the topic) out of line.
    #[inline]
    pub fn leader(&self, p: u32) -> Option<NodeId> {
        match self.leaders.get(p as usize) {
            Some(l) => *l,
            None => self.cached_leader(p),
        }
    }

    /// The leader of each of the topic's partitions, by number, as [`Self::leader`] gives.
    #[inline]
    pub fn leaders(&self) -> &[Option<NodeId>] {
        &self.leaders
    }

    #[cold]
    fn cached_leader(&self, p: u32) -> Option<NodeId> {
        self.cache
            .leader(&TopicPartition::new(self.topics[0].as_str(), p))
    }

    /// Partition `p` of the topic as a key, without building one when it is one of the
    /// topic's partitions.
    #[inline]
    pub fn tp(&self, p: u32) -> Cow<'_, TopicPartition> {
        match self.tps.get(p as usize) {
            Some(t) => Cow::Borrowed(t),
            None => Cow::Owned(TopicPartition::new(self.topics[0].as_str(), p)),
        }
    }

    /// Changes the cache with `f`, then brings the by-number leaders up to date when the
    /// cache says a leader may have changed.
    pub fn with_cache<R>(&mut self, f: impl FnOnce(&mut LeaderCache) -> R) -> R {
        let before = self.cache.version();
        let r = f(&mut self.cache);
        if self.cache.version() != before {
            for (l, key) in self.leaders.iter_mut().zip(&self.tps) {
                *l = self.cache.leader(key);
            }
            self.missing = self.leaders.contains(&None);
        }
        debug_assert_eq!(self.missing, self.leaders.contains(&None));
        r
    }

    /// Marks what is known stale: the next [`Self::poll_refresh`] asks again.
    pub fn invalidate(&mut self) {
        self.cache.invalidate();
    }

    /// Core's routing of a group member's request ([`group_wire::route`]).
    pub fn route(
        &mut self,
        to: &Destination,
        request: &ConsumerRequest,
    ) -> Resolved<ConsumerResponse> {
        self.with_cache(|c| group_wire::route(to, request, c))
    }

    /// Core's reading of a broker's answer to a group member ([`group_wire::from_message`]).
    pub fn answer(
        &mut self,
        pending: Pending,
        from: Option<NodeId>,
        msg: Message,
    ) -> Option<ConsumerResponse> {
        self.with_cache(|c| group_wire::from_message(pending, from, msg, c))
    }

    /// A metadata request under `correlation`, if one is due now (a leader of the topic is
    /// unknown, or the cache was marked stale); the host picks the broker it goes to.
    #[inline]
    pub fn poll_refresh(&mut self, now: Nanos, correlation: u64) -> Option<MetadataRequest> {
        debug_assert_eq!(self.missing, self.leaders.contains(&None));
        self.cache
            .poll_refresh(now, correlation, &self.topics, self.missing)
    }

    /// Learns the leaders a metadata answer names.
    pub fn learn(&mut self, r: &MetadataResponse) {
        self.with_cache(|c| c.learn(r));
    }

    /// When a refresh may next be due, if one may.
    pub fn next_refresh(&self) -> Option<Nanos> {
        self.cache.next_refresh(self.missing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::PartitionMetadata;
    use crate::types::LeaderEpoch;

    /// A seeded walk of answers, hints and refreshes: the by-number leaders and every
    /// refresh decision match a plain `LeaderCache` asked with `TopicPartition` keys.
    #[test]
    fn agrees_with_the_plain_cache() {
        let (topic, parts) = ("t", 4u32);
        let mut fast = TopicLeaders::new(topic, parts, 500, 50);
        let mut plain = LeaderCache::new(500, 50);
        let keys: Vec<_> = (0..parts + 1)
            .map(|p| TopicPartition::new(topic, p))
            .collect();
        let mut x = 7u64;
        let mut corr = 0;
        for step in 0..2_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = x >> 33;
            let p = (r % (parts as u64 + 1)) as u32;
            let tp = &keys[p as usize];
            let leader = (!r.is_multiple_of(3)).then_some((r % 5) as NodeId + 1);
            let now = step * 20;
            match r % 4 {
                0 => {
                    let m = MetadataResponse {
                        correlation: corr,
                        brokers: vec![],
                        partitions: vec![PartitionMetadata {
                            tp: tp.clone(),
                            leader,
                            leader_epoch: (r % 7) as LeaderEpoch,
                            partition_epoch: 0,
                            replicas: vec![],
                            isr: vec![],
                            elr: vec![],
                        }],
                        unknown_topics: vec![],
                    };
                    fast.learn(&m);
                    plain.learn(&m);
                }
                1 => {
                    fast.with_cache(|c| c.not_leader(tp, Some(1), leader));
                    plain.not_leader(tp, Some(1), leader);
                }
                2 => {
                    fast.invalidate();
                    plain.invalidate();
                }
                _ => {
                    corr += 1;
                    let missing = plain.any_missing(keys[..parts as usize].iter());
                    let want = plain.poll_refresh(now, corr, &[topic.to_string()], missing);
                    assert_eq!(fast.poll_refresh(now, corr), want, "step {step}");
                    assert_eq!(fast.next_refresh(), plain.next_refresh(missing));
                }
            }
            for (q, key) in keys.iter().enumerate() {
                assert_eq!(fast.leader(q as u32), plain.leader(key), "step {step} p{q}");
                assert_eq!(*fast.tp(q as u32), *key);
            }
        }
    }
}
