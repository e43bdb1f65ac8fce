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
//! offline partitions changed, and on nearly every step none is offline. The same way to a
//! `&mut Replica` notes that a replica may have effects, and keeps the earliest timer of
//! the replicas it did not reach ([`Earliest`]), so the summary after a step that reached
//! one replica looks at that replica alone, not at every slot.

use crate::group::CONSUMER_OFFSETS_TOPIC;
use crate::log::{PartitionLog, Storage};
use crate::replica::Replica;
use crate::types::{Nanos, TopicPartition};
use std::cell::Cell;
use std::ops::Range;

type HostedReplica<S> = Replica<PartitionLog<S>>;

/// A slot's entry in [`ReplicaSet::timers`] while its replica may have changed since its
/// timer was cached.
const STALE: Nanos = Nanos::MAX - 1;
/// `ReplicaSet::reached` when no slot was reached, and when any may have been.
const REACHED_NONE: (usize, usize) = (usize::MAX, 0);
const REACHED_ALL: (usize, usize) = (0, usize::MAX);
/// A slot's entry in [`ReplicaSet::timers`] for a replica with no timer (above every
/// timer, so the earliest entry is a plain minimum).
const NO_TIMER: Nanos = Nanos::MAX;

struct Slot<S: Storage> {
    replica: HostedReplica<S>,
    /// A `__consumer_offsets` replica (see [`ReplicaSet::offsets_generation`]).
    offsets: bool,
}

/// Whether the replica counts among the broker's offline partitions (its log failed a read,
/// or it waits for a newer epoch after failing as leader).
pub(super) fn offline<S: Storage>(r: &HostedReplica<S>) -> bool {
    r.log_failure().is_some() || r.awaiting_new_epoch()
}

/// A replica's next timer as [`ReplicaSet::timers`] holds it.
fn timer_of<S: Storage>(r: &HostedReplica<S>) -> Nanos {
    match r.next_timeout() {
        Some(t) => {
            debug_assert!(
                t < STALE,
                "a replica timer collides with the cache's markers"
            );
            t
        }
        None => NO_TIMER,
    }
}

/// What [`ReplicaSet`] knows of its earliest replica timer between two summaries. A
/// summary caches every slot's timer, so a [`STALE`] slot was reached since: under `All`
/// none is, under `AllBut` only `slot` may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Earliest {
    /// The earliest timer of every slot: no replica was reached since the last summary.
    All(Nanos),
    /// The earliest timer of every slot but `slot`, the one replica reached since.
    AllBut { slot: usize, others: Nanos },
    /// Not known: the next summary folds every slot.
    Unknown,
}

/// What is known of the others once slot `i`, whose cached timer was `t`, may change. A
/// slot that did not hold the earliest timer leaves it to the others; a stale one was
/// already left out (see [`Earliest`]).
fn without(earliest: Earliest, i: usize, t: Nanos) -> Earliest {
    debug_assert!(
        t != STALE
            || match earliest {
                Earliest::AllBut { slot, .. } => slot == i,
                Earliest::All(_) => false,
                Earliest::Unknown => true,
            },
        "a stale slot the earliest timer counts"
    );
    match earliest {
        _ if t == STALE => earliest,
        Earliest::All(e) if t > e => Earliest::AllBut { slot: i, others: e },
        _ => Earliest::Unknown,
    }
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
        }
    }
}

/// A broker's hosted replicas (see the module docs). A vector sorted by partition, not a
/// `BTreeMap`: it is walked after every step (timers, effects), looked up a few times, and
/// changed only when the broker starts or stops hosting a partition.
pub(super) struct ReplicaSet<S: Storage> {
    slots: Vec<(TopicPartition, Slot<S>)>,
    /// Each slot's cached replica timer, by slot index ([`NO_TIMER`]: none; [`STALE`]: not
    /// known). Apart from the replicas: a summary that has to fold every slot folds this
    /// dense array, not a field of each (large) slot.
    timers: Vec<Cell<Nanos>>,
    /// Whether each slot's replica was offline when its timer was last cached, by slot
    /// index; `offline_count` counts the `true`s (kept as entries are refreshed).
    offline: Vec<Cell<bool>>,
    offline_count: Cell<usize>,
    /// The earliest timer as far as known (see [`Earliest`]): the driver asks after every
    /// step, many steps reach no replica and most of the others one, and folding every
    /// slot after each was ~1% of a simulation's instructions.
    earliest: Cell<Earliest>,
    /// The slots that can have effects to drain, as a span `[lo, hi)` of indices (empty
    /// when `lo >= hi`): emptied by a drain, grown when a replica is reached mutably (the
    /// only way one gets effects). The broker drains after every step and every group
    /// pump round, mostly with nothing new, else after reaching one replica: walking all
    /// of its slots to find that one cost more than the rest of the drain.
    reached: (usize, usize),
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
            timers: Vec::new(),
            offline: Vec::new(),
            offline_count: Cell::new(0),
            earliest: Cell::new(Earliest::All(NO_TIMER)),
            reached: REACHED_NONE,
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
    /// topic is not hosted). Inlined into the lookups (a call of its own was ~10
    /// instructions of ~40 per lookup); a topic not hosted is looked up out of line.
    #[inline(always)]
    fn topic_range(&self, topic: &str) -> Range<usize> {
        // A scan, not a binary search: a broker hosts a few topics, mostly of different
        // lengths, so nearly every name is compared only with its own.
        let found = self.topics.iter().find(|(t, _)| t == topic);
        match found {
            Some((_, r)) => r.clone(),
            None => self.unhosted_range(topic),
        }
    }

    /// [`Self::topic_range`] of a topic not hosted: empty, where its slots would start.
    #[cold]
    #[inline(never)]
    fn unhosted_range(&self, topic: &str) -> Range<usize> {
        let at = self
            .slots
            .partition_point(|(k, _)| k.topic.as_str() < topic);
        at..at
    }

    /// See the `offsets_gen` field: equal values mean no `__consumer_offsets` replica
    /// changed in between.
    pub fn offsets_generation(&self) -> u64 {
        self.offsets_gen
    }

    /// What `binary_search` over the slots (by topic, then partition) gives, through the
    /// topic index.
    #[inline]
    fn find(&self, tp: &TopicPartition) -> Result<usize, usize> {
        self.find_in(&tp.topic, tp.partition)
    }

    #[inline]
    fn find_in(&self, topic: &str, partition: u32) -> Result<usize, usize> {
        let r = self.topic_range(topic);
        // A broker mostly hosts every partition of a topic, 0 to n - 1: try the slot that
        // partition would then be in before searching.
        let guess = r.start + partition as usize;
        let found = if guess < r.end && self.slots[guess].0.partition == partition {
            Ok(guess)
        } else {
            self.search_in(r, partition)
        };
        debug_assert_eq!(
            found,
            self.slots
                .binary_search_by(|(k, _)| (k.topic.as_str(), k.partition).cmp(&(topic, partition))),
            "stale topic index"
        );
        found
    }

    /// [`Self::find_in`]'s search of the topic's slots `r`, when the guess missed. Out of
    /// line: lookups are inlined where made (several per step), and nearly all hit.
    #[inline(never)]
    fn search_in(&self, r: Range<usize>, partition: u32) -> Result<usize, usize> {
        self.slots[r.clone()]
            .binary_search_by(|(k, _)| k.partition.cmp(&partition))
            .map(|i| r.start + i)
            .map_err(|i| r.start + i)
    }

    /// Slot `i`'s replica, mutably: its cached timer is forgotten (and with it maybe the
    /// earliest), it may get effects, and for a `__consumer_offsets` replica `offsets_gen`
    /// moves.
    #[inline]
    fn reach(&mut self, i: usize) -> &mut HostedReplica<S> {
        let t = std::mem::replace(self.timers[i].get_mut(), STALE);
        let e = self.earliest.get_mut();
        *e = without(*e, i, t);
        self.reached = (self.reached.0.min(i), self.reached.1.max(i + 1));
        let slot = &mut self.slots[i].1;
        if slot.offsets {
            self.offsets_gen += 1;
        }
        &mut slot.replica
    }

    /// Slot `i`'s timer, computed (with its offline flag) if not known.
    #[inline]
    fn timer(&self, i: usize) -> Nanos {
        match self.timers[i].get() {
            STALE => self.refresh(i),
            t => self.checked(i, t),
        }
    }

    /// `t`, slot `i`'s cached timer, checked against its replica in debug builds.
    fn checked(&self, i: usize, t: Nanos) -> Nanos {
        debug_assert_eq!(
            t,
            timer_of(&self.slots[i].1.replica),
            "stale replica timer cache"
        );
        debug_assert_eq!(
            self.offline[i].get(),
            offline(&self.slots[i].1.replica),
            "stale offline cache"
        );
        t
    }

    /// Out of line: about one slot per step needs it, the fold walks them all.
    #[inline(never)]
    fn refresh(&self, i: usize) -> Nanos {
        let r = &self.slots[i].1.replica;
        let t = timer_of(r);
        self.timers[i].set(t);
        let now = offline(r);
        if self.offline[i].replace(now) != now {
            let n = self.offline_count.get();
            self.offline_count.set(if now { n + 1 } else { n - 1 });
        }
        t
    }

    /// Host `replica` for `tp`, replacing the one hosted before (like `BTreeMap::insert`).
    pub fn insert(&mut self, tp: TopicPartition, replica: HostedReplica<S>) {
        self.offsets_gen += 1;
        *self.earliest.get_mut() = Earliest::Unknown;
        self.reached = REACHED_ALL;
        let slot = Slot::new(&tp, replica);
        match self.find(&tp) {
            Ok(i) => {
                self.slots[i].1 = slot;
                // Its offline flag still counts the replaced replica: the refresh adjusts.
                *self.timers[i].get_mut() = STALE;
            }
            Err(i) => {
                self.slots.insert(i, (tp, slot));
                self.timers.insert(i, Cell::new(STALE));
                self.offline.insert(i, Cell::new(false));
                self.index_topics();
            }
        }
    }

    pub fn remove(&mut self, tp: &TopicPartition) -> Option<HostedReplica<S>> {
        let i = self.find(tp).ok()?;
        self.offsets_gen += 1;
        *self.earliest.get_mut() = Earliest::Unknown;
        // The slots after it move down one: the reached span would be off by one.
        if self.maybe_effects() {
            self.reached = REACHED_ALL;
        }
        let (_, slot) = self.slots.remove(i);
        self.timers.remove(i);
        if self.offline.remove(i).into_inner() {
            *self.offline_count.get_mut() -= 1;
        }
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

    #[inline]
    pub fn get(&self, tp: &TopicPartition) -> Option<&HostedReplica<S>> {
        let i = self.find(tp).ok()?;
        Some(&self.slots[i].1.replica)
    }

    #[inline]
    pub fn get_mut(&mut self, tp: &TopicPartition) -> Option<&mut HostedReplica<S>> {
        let i = self.find(tp).ok()?;
        Some(self.reach(i))
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
        *self.earliest.get_mut() = Earliest::Unknown;
        self.reached = REACHED_ALL;
        let gen = &mut self.offsets_gen;
        self.slots
            .iter_mut()
            .zip(self.timers.iter_mut())
            .map(move |((tp, s), t)| {
                *t.get_mut() = STALE;
                if s.offsets {
                    *gen += 1;
                }
                (&*tp, &mut s.replica)
            })
    }

    /// False if no replica has effects to drain (see the `reached` field).
    pub fn maybe_effects(&self) -> bool {
        self.debug_check_reached();
        self.reached.0 < self.reached.1
    }

    /// Only slots in the reached span have effects.
    fn debug_check_reached(&self) {
        let (lo, hi) = self.reached;
        debug_assert!(
            self.slots
                .iter()
                .enumerate()
                .all(|(i, (_, s))| (lo <= i && i < hi) || !s.replica.has_effects()),
            "a replica got effects without being reached mutably"
        );
    }

    /// The replicas that have effects to drain, mutably; the others keep their cache. The
    /// caller drains every one (the next call looks only if a replica was reached since).
    pub fn with_effects_mut(&mut self) -> impl Iterator<Item = &mut HostedReplica<S>> {
        self.debug_check_reached();
        let (lo, hi) = std::mem::replace(&mut self.reached, REACHED_NONE);
        let hi = hi.min(self.slots.len());
        let span = lo.min(hi)..hi;
        let gen = &mut self.offsets_gen;
        let earliest = self.earliest.get_mut();
        self.slots[span.clone()]
            .iter_mut()
            .zip(self.timers[span].iter_mut())
            .filter(|((_, s), _)| s.replica.has_effects())
            .map(move |((_, s), t)| {
                // Nearly always a slot reached this step, so already stale (see `without`);
                // one cached since it got its effects forgets the earliest (no index here:
                // counting slots in this walk cost more than it saves).
                if std::mem::replace(t.get_mut(), STALE) != STALE {
                    *earliest = Earliest::Unknown;
                }
                debug_assert!(!matches!(*earliest, Earliest::All(_)));
                if s.offsets {
                    *gen += 1;
                }
                &mut s.replica
            })
    }

    /// The earliest timer of any replica, and whether any replica is offline. Inlined into
    /// the broker's `next_timeout` (asked after every step): the common cases are a few
    /// instructions and a call of their own cost more; the fold of every slot is out of line.
    #[inline]
    pub fn summary(&self) -> Summary {
        let earliest = match self.earliest.get() {
            Earliest::All(e) => e,
            Earliest::AllBut { slot, others } => others.min(self.timer(slot)),
            Earliest::Unknown => self.fold(),
        };
        self.earliest.set(Earliest::All(earliest));
        let s = Summary {
            timeout: (earliest != NO_TIMER).then_some(earliest),
            offline: self.offline_count.get() > 0,
        };
        debug_assert_eq!(s, self.fresh_summary(), "stale replica summary");
        s
    }

    /// Every slot's timer (refreshed where not known), folded.
    #[inline(never)]
    fn fold(&self) -> Nanos {
        let mut earliest = NO_TIMER;
        for (i, t) in self.timers.iter().enumerate() {
            let t = match t.get() {
                STALE => self.refresh(i),
                t => self.checked(i, t),
            };
            earliest = earliest.min(t);
        }
        earliest
    }

    /// The summary computed from the replicas, none of the caches: for debug checks.
    fn fresh_summary(&self) -> Summary {
        Summary {
            timeout: self.values().filter_map(|r| r.next_timeout()).min(),
            offline: self.values().any(|r| offline(r)),
        }
    }

    /// Tick the replicas whose timer is due at `now`. The others would do nothing.
    pub fn tick_due(&mut self, now: Nanos) {
        debug_assert!(now < STALE);
        for i in 0..self.slots.len() {
            if self.timer(i) <= now {
                self.reach(i).tick(now);
            }
        }
    }
}
