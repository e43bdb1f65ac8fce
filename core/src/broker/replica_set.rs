//! The replicas a broker hosts, keyed by partition, with each replica's next timer cached.
//!
//! The driver asks [`super::Broker::next_timeout`] after every step, and a broker step
//! touches one or two of its replicas, so recomputing every replica's timer each time was
//! ~9% of a simulation's instructions (docs/PERFORMANCE.md). Every way to a `&mut Replica`
//! goes through this type and forgets that replica's cached timer, so a cached value is
//! always the one `Replica::next_timeout` would return now. The same cache lets a tick
//! visit only the replicas whose timer is due: a replica's `tick` before its
//! `next_timeout` does nothing, because `next_timeout` names every deadline `tick` acts on
//! (the trace hashes of the pinned seeds were unchanged by this shortcut). Whether the
//! replica is offline is cached alongside: the broker asks after every step whether its
//! offline partitions changed, and on nearly every step none is offline.

use crate::group::CONSUMER_OFFSETS_TOPIC;
use crate::log::{PartitionLog, Storage};
use crate::replica::Replica;
use crate::types::{earliest, Nanos, TopicPartition};
use std::cell::Cell;
use std::ops::Range;

type HostedReplica<S> = Replica<PartitionLog<S>>;

struct Slot<S: Storage> {
    replica: HostedReplica<S>,
    /// A `__consumer_offsets` replica (see [`ReplicaSet::offsets_generation`]).
    offsets: bool,
    /// `None`: not known (the replica may have changed since it was computed).
    cached: Cell<Option<Cached>>,
}

/// What a slot caches of its replica, computed together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cached {
    timeout: Option<Nanos>,
    /// [`offline`]
    offline: bool,
}

impl Cached {
    fn of<S: Storage>(r: &HostedReplica<S>) -> Self {
        Self {
            timeout: r.next_timeout(),
            offline: offline(r),
        }
    }
}

/// Whether the replica counts among the broker's offline partitions (its log failed a read,
/// or it waits for a newer epoch after failing as leader).
pub(super) fn offline<S: Storage>(r: &HostedReplica<S>) -> bool {
    r.log_failure().is_some() || r.awaiting_new_epoch()
}

/// The earliest timer of a set of replicas, and whether any of them is offline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Summary {
    pub timeout: Option<Nanos>,
    pub offline: bool,
}

impl<S: Storage> Slot<S> {
    fn new(tp: &TopicPartition, replica: HostedReplica<S>) -> Self {
        Self {
            replica,
            offsets: tp.topic == CONSUMER_OFFSETS_TOPIC,
            cached: Cell::new(None),
        }
    }

    fn cached(&self) -> Cached {
        match self.cached.get() {
            Some(c) => {
                debug_assert_eq!(c, Cached::of(&self.replica), "stale replica timer cache");
                c
            }
            None => {
                let c = Cached::of(&self.replica);
                self.cached.set(Some(c));
                c
            }
        }
    }

    fn timeout(&self) -> Option<Nanos> {
        self.cached().timeout
    }

    /// The replica, mutably: its cached timer is forgotten and, for a `__consumer_offsets`
    /// replica, `offsets_gen` moves.
    fn get_mut(&mut self, offsets_gen: &mut u64) -> &mut HostedReplica<S> {
        self.cached.set(None);
        if self.offsets {
            *offsets_gen += 1;
        }
        &mut self.replica
    }
}

/// A broker's hosted replicas (see the module docs). A vector sorted by partition, not a
/// `BTreeMap`: it is walked after every step (timers, effects), looked up a few times, and
/// changed only when the broker starts or stops hosting a partition.
pub(super) struct ReplicaSet<S: Storage> {
    slots: Vec<(TopicPartition, Slot<S>)>,
    /// Moves whenever a `__consumer_offsets` replica may have changed (hosted, dropped or
    /// reached mutably): the group pump follows those replicas after every step, and skips
    /// the walk while this has not moved.
    offsets_gen: u64,
    /// Each hosted topic and its slots (rebuilt when a partition is hosted or dropped),
    /// ordered by name length, then name: a lookup compares the name with these few topics
    /// (mostly by length alone), then partitions as numbers. Comparing names slot by slot
    /// was ~2% of a simulation.
    topics: Vec<(String, Range<usize>)>,
}

impl<S: Storage> ReplicaSet<S> {
    pub fn new() -> Self {
        Self {
            slots: Vec::new(),
            offsets_gen: 0,
            topics: Vec::new(),
        }
    }

    fn index_topics(&mut self) {
        self.topics.clear();
        for (i, (tp, _)) in self.slots.iter().enumerate() {
            match self.topics.last_mut() {
                Some((t, r)) if *t == tp.topic => r.end = i + 1,
                _ => self.topics.push((tp.topic.clone(), i..i + 1)),
            }
        }
        self.topics
            .sort_by(|(a, _), (b, _)| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    }

    /// The slots of `topic`, as a range of indices (empty, where it would start, if the
    /// topic is not hosted).
    fn topic_range(&self, topic: &str) -> Range<usize> {
        let found = self.topics.binary_search_by(|(t, _)| {
            t.len()
                .cmp(&topic.len())
                .then_with(|| t.as_str().cmp(topic))
        });
        match found {
            Ok(i) => self.topics[i].1.clone(),
            Err(_) => {
                let at = self
                    .slots
                    .partition_point(|(k, _)| k.topic.as_str() < topic);
                at..at
            }
        }
    }

    /// See the `offsets_gen` field: equal values mean no `__consumer_offsets` replica
    /// changed in between.
    pub fn offsets_generation(&self) -> u64 {
        self.offsets_gen
    }

    /// What `binary_search` over the slots (by topic, then partition) gives, through the
    /// topic index.
    fn find(&self, tp: &TopicPartition) -> Result<usize, usize> {
        self.find_in(&tp.topic, tp.partition)
    }

    fn find_in(&self, topic: &str, partition: u32) -> Result<usize, usize> {
        let r = self.topic_range(topic);
        let found = self.slots[r.clone()]
            .binary_search_by(|(k, _)| k.partition.cmp(&partition))
            .map(|i| r.start + i)
            .map_err(|i| r.start + i);
        debug_assert_eq!(
            found,
            self.slots
                .binary_search_by(|(k, _)| (k.topic.as_str(), k.partition).cmp(&(topic, partition))),
            "stale topic index"
        );
        found
    }

    /// Host `replica` for `tp`, replacing the one hosted before (like `BTreeMap::insert`).
    pub fn insert(&mut self, tp: TopicPartition, replica: HostedReplica<S>) {
        self.offsets_gen += 1;
        let slot = Slot::new(&tp, replica);
        match self.find(&tp) {
            Ok(i) => self.slots[i].1 = slot,
            Err(i) => {
                self.slots.insert(i, (tp, slot));
                self.index_topics();
            }
        }
    }

    pub fn remove(&mut self, tp: &TopicPartition) -> Option<HostedReplica<S>> {
        let i = self.find(tp).ok()?;
        self.offsets_gen += 1;
        let (_, slot) = self.slots.remove(i);
        self.index_topics();
        Some(slot.replica)
    }

    pub fn contains_key(&self, tp: &TopicPartition) -> bool {
        self.find(tp).is_ok()
    }

    /// [`ReplicaSet::get`] by topic name and partition, without building a `TopicPartition`
    /// (the group pump asks for every `__consumer_offsets` partition several times a step).
    pub fn get_in(&self, topic: &str, partition: u32) -> Option<&HostedReplica<S>> {
        let i = self.find_in(topic, partition).ok()?;
        Some(&self.slots[i].1.replica)
    }

    /// The replicas of `topic`, by partition, in partition order: one binary search for
    /// the whole topic (the group pump walks every `__consumer_offsets` partition on every
    /// pump, several times a step).
    pub fn in_topic<'a>(
        &'a self,
        topic: &'a str,
    ) -> impl Iterator<Item = (u32, &'a HostedReplica<S>)> + 'a {
        self.slots[self.topic_range(topic)]
            .iter()
            .map(|(k, s)| (k.partition, &s.replica))
    }

    pub fn get(&self, tp: &TopicPartition) -> Option<&HostedReplica<S>> {
        let i = self.find(tp).ok()?;
        Some(&self.slots[i].1.replica)
    }

    pub fn get_mut(&mut self, tp: &TopicPartition) -> Option<&mut HostedReplica<S>> {
        let i = self.find(tp).ok()?;
        Some(self.slots[i].1.get_mut(&mut self.offsets_gen))
    }

    pub fn keys(&self) -> impl Iterator<Item = &TopicPartition> {
        self.slots.iter().map(|(tp, _)| tp)
    }

    pub fn values(&self) -> impl Iterator<Item = &HostedReplica<S>> {
        self.slots.iter().map(|(_, s)| &s.replica)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&TopicPartition, &HostedReplica<S>)> {
        self.slots.iter().map(|(tp, s)| (tp, &s.replica))
    }

    /// Every replica, mutably (each one's cached timer forgotten).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&TopicPartition, &mut HostedReplica<S>)> {
        let gen = &mut self.offsets_gen;
        self.slots
            .iter_mut()
            .map(move |(tp, s)| (&*tp, s.get_mut(gen)))
    }

    /// The replicas that have effects to drain, mutably; the others keep their cache.
    pub fn with_effects_mut(&mut self) -> impl Iterator<Item = &mut HostedReplica<S>> {
        let gen = &mut self.offsets_gen;
        self.slots
            .iter_mut()
            .filter(|(_, s)| s.replica.has_effects())
            .map(move |(_, s)| s.get_mut(gen))
    }

    /// The earliest timer of any replica, and whether any replica is offline.
    pub fn summary(&self) -> Summary {
        let mut sum = Summary {
            timeout: None,
            offline: false,
        };
        for (_, s) in &self.slots {
            let c = s.cached();
            sum.timeout = earliest(sum.timeout, c.timeout);
            sum.offline |= c.offline;
        }
        sum
    }

    /// Tick the replicas whose timer is due at `now`. The others would do nothing.
    pub fn tick_due(&mut self, now: Nanos) {
        for (_, slot) in self.slots.iter_mut() {
            if slot.timeout().is_some_and(|t| t <= now) {
                slot.get_mut(&mut self.offsets_gen).tick(now);
            }
        }
    }
}
