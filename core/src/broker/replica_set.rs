//! The replicas a broker hosts: a map from partition to replica, in partition order, that
//! keeps each replica's next timer (and whether it is offline) cached.
//!
//! Read it as a `BTreeMap<TopicPartition, Replica>` whose [`ReplicaSet::summary`] is
//! "the earliest `poll_timeout` of any replica, and whether any is offline", whose
//! [`ReplicaSet::tick_due`] is "tick every replica whose timer is due" and whose
//! [`ReplicaSet::with_effects_mut`] is "every replica with effects to drain". A proptest
//! at the end checks exactly that against a `BTreeMap`.
//!
//! Why the caches: the driver asks the broker for its next timeout after every step, and a
//! step touches one or two replicas, so recomputing every replica's timer each time was ~9%
//! of a simulation's instructions (docs/PERFORMANCE.md). Every way to a `&mut Replica` goes
//! through this type and marks that replica's cached timer stale, so a cached value is
//! always the one `poll_timeout` would return now (debug builds check it on every read).
//! The same cache lets a tick visit only the replicas whose timer is due: a replica's
//! `handle_timeout` before its `poll_timeout` does nothing, because `poll_timeout` names
//! every deadline `handle_timeout` acts on. The set also remembers which replicas were reached mutably
//! since the last drain ([`Reached`]), since only those can have effects, and the earliest
//! timer of the replicas not reached ([`Earliest`]), so the summary after a step that
//! reached one replica looks at that replica alone.

use crate::group::CONSUMER_OFFSETS_TOPIC;
use crate::log::{PartitionLog, Storage};
use crate::replica::Replica;
use crate::types::{Nanos, TopicPartition};
use std::cell::Cell;
use std::ops::Range;

/// What the set needs of a hosted replica (a trait so the test can host a plain model).
pub(super) trait Hosted {
    /// Earliest time at which `handle_timeout` has something to do.
    fn poll_timeout(&self) -> Option<Nanos>;
    /// Whether it counts among the broker's offline partitions.
    fn offline(&self) -> bool;
    /// Whether it has effects to drain.
    fn has_outputs(&self) -> bool;
    fn handle_timeout(&mut self, now: Nanos);
}

impl<S: Storage> Hosted for Replica<PartitionLog<S>> {
    fn poll_timeout(&self) -> Option<Nanos> {
        Replica::poll_timeout(self)
    }

    fn offline(&self) -> bool {
        offline(self)
    }

    fn has_outputs(&self) -> bool {
        Replica::has_outputs(self)
    }

    fn handle_timeout(&mut self, now: Nanos) {
        Replica::handle_timeout(self, now)
    }
}

/// Whether the replica counts among the broker's offline partitions (its log failed a read,
/// or it waits for a newer epoch after failing as leader).
pub(super) fn offline<S: Storage>(r: &Replica<PartitionLog<S>>) -> bool {
    r.log_failure().is_some() || r.awaiting_new_epoch()
}

/// A replica's cached timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Timer {
    /// Not known: the replica was reached mutably since it was last computed.
    Stale,
    /// Its `poll_timeout()` as last computed.
    Known(Option<Nanos>),
}

/// Whether deadline `a` comes after deadline `b` (`None`: never, after every time).
fn later(a: Option<Nanos>, b: Option<Nanos>) -> bool {
    match (a, b) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(a), Some(b)) => a > b,
    }
}

/// The earlier of two deadlines (`None`: never).
fn sooner(a: Option<Nanos>, b: Option<Nanos>) -> Option<Nanos> {
    if later(a, b) {
        b
    } else {
        a
    }
}

/// What the set knows of its earliest replica timer between two summaries. A summary
/// caches every slot's timer, so a stale slot was reached since: under `All` none is,
/// under `AllBut` only `slot` may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Earliest {
    /// The earliest timer of every slot: no replica was reached since the last summary.
    All(Option<Nanos>),
    /// The earliest timer of every slot but `slot`, the one replica reached since.
    AllBut { slot: usize, others: Option<Nanos> },
    /// Not known: the next summary folds every slot.
    Unknown,
}

impl Earliest {
    /// What is known of the others once slot `i`, cached as `was`, may change. A slot that
    /// did not hold the earliest timer leaves it to the others; a stale one was already
    /// left out.
    fn without(self, i: usize, was: Timer) -> Earliest {
        match (self, was) {
            (_, Timer::Stale) => {
                debug_assert!(
                    matches!(self, Earliest::Unknown)
                        || matches!(self, Earliest::AllBut { slot, .. } if slot == i),
                    "the earliest timer counts a stale slot"
                );
                self
            }
            (Earliest::All(e), Timer::Known(t)) if later(t, e) => {
                Earliest::AllBut { slot: i, others: e }
            }
            _ => Earliest::Unknown,
        }
    }
}

/// The slots that were reached mutably since the last drain, so may have effects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reached {
    Nothing,
    /// Slots `lo..hi`.
    Span {
        lo: usize,
        hi: usize,
    },
    /// Any slot (slots moved, or every replica was handed out).
    Every,
}

impl Reached {
    fn add(&mut self, i: usize) {
        *self = match *self {
            Reached::Nothing => Reached::Span { lo: i, hi: i + 1 },
            Reached::Span { lo, hi } => Reached::Span {
                lo: lo.min(i),
                hi: hi.max(i + 1),
            },
            Reached::Every => Reached::Every,
        };
    }

    /// The reached slots as a range of indices into `len` slots.
    fn range(self, len: usize) -> Range<usize> {
        match self {
            Reached::Nothing => 0..0,
            Reached::Span { lo, hi } => lo.min(len)..hi.min(len),
            Reached::Every => 0..len,
        }
    }
}

/// The earliest timer of a set of replicas, and whether any of them is offline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Summary {
    pub timeout: Option<Nanos>,
    pub offline: bool,
}

struct Slot<R> {
    replica: R,
    /// A `__consumer_offsets` replica (see [`ReplicaSet::offsets_generation`]).
    offsets: bool,
}

/// A broker's hosted replicas (see the module docs). A vector sorted by partition, not a
/// `BTreeMap`: it is walked after every step (timers, effects), looked up a few times, and
/// changed only when the broker starts or stops hosting a partition.
pub(super) struct ReplicaSet<R> {
    slots: Vec<(TopicPartition, Slot<R>)>,
    /// Each slot's cached timer, by slot index. Apart from the replicas: a summary that has
    /// to fold every slot walks this dense array, not a field of each (large) slot. A
    /// `Cell` because the summary, asked through `&self`, fills in stale entries.
    timers: Vec<Cell<Timer>>,
    /// Whether each slot's replica was offline when its timer was last computed;
    /// `offline_count` counts the `true`s.
    offline: Vec<Cell<bool>>,
    offline_count: Cell<usize>,
    /// The earliest timer as far as known: the driver asks after every step, many steps
    /// reach no replica and most of the others one, and folding every slot after each was
    /// ~1% of a simulation's instructions.
    earliest: Cell<Earliest>,
    /// The slots that can have effects: the broker drains after every step and every
    /// group pump round, mostly with nothing new, else after reaching one replica, and
    /// walking all of its slots to find that one cost more than the rest of the drain.
    reached: Reached,
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

impl<R: Hosted> ReplicaSet<R> {
    pub fn new() -> Self {
        Self {
            slots: Vec::new(),
            timers: Vec::new(),
            offline: Vec::new(),
            offline_count: Cell::new(0),
            earliest: Cell::new(Earliest::All(None)),
            reached: Reached::Nothing,
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
    #[inline]
    fn topic_range(&self, topic: &str) -> Range<usize> {
        // A scan, not a binary search: a broker hosts a few topics, mostly of different
        // lengths, so nearly every name is compared only with its own.
        let found = self.topics.iter().find(|(t, _)| t == topic);
        match found {
            Some((_, r)) => r.clone(),
            None => {
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

    /// What `binary_search` over the slots (by topic, then partition) gives.
    #[inline]
    fn find(&self, tp: &TopicPartition) -> Result<usize, usize> {
        self.find_in(&tp.topic, tp.partition)
    }

    #[inline]
    fn find_in(&self, topic: &str, partition: u32) -> Result<usize, usize> {
        let r = self.topic_range(topic);
        // A broker mostly hosts every partition of a topic, 0 to n - 1: try the slot the
        // partition would then be in before searching (the search was ~1.5% of a
        // simulation's instructions).
        let guess = r.start + partition as usize;
        let found = if guess < r.end && self.slots[guess].0.partition == partition {
            Ok(guess)
        } else {
            self.slots[r.clone()]
                .binary_search_by(|(k, _)| k.partition.cmp(&partition))
                .map(|i| r.start + i)
                .map_err(|i| r.start + i)
        };
        debug_assert_eq!(
            found,
            self.slots
                .binary_search_by(|(k, _)| (k.topic.as_str(), k.partition).cmp(&(topic, partition))),
            "stale topic index"
        );
        found
    }

    /// Slot `i`'s replica, mutably: its cached timer goes stale (and with it maybe the
    /// earliest), it may get effects, and for a `__consumer_offsets` replica `offsets_gen`
    /// moves.
    #[inline]
    fn reach(&mut self, i: usize) -> &mut R {
        let was = self.timers[i].replace(Timer::Stale);
        let e = self.earliest.get_mut();
        *e = e.without(i, was);
        self.reached.add(i);
        let slot = &mut self.slots[i].1;
        if slot.offsets {
            self.offsets_gen += 1;
        }
        &mut slot.replica
    }

    /// Slot `i`'s timer, computed (with its offline flag) if stale.
    #[inline]
    fn timer(&self, i: usize) -> Option<Nanos> {
        match self.timers[i].get() {
            Timer::Stale => self.refresh(i),
            Timer::Known(t) => {
                let r = &self.slots[i].1.replica;
                debug_assert_eq!(t, r.poll_timeout(), "stale replica timer cache");
                debug_assert_eq!(self.offline[i].get(), r.offline(), "stale offline cache");
                t
            }
        }
    }

    /// Computes slot `i`'s timer and offline flag. Out of line: about one slot per step
    /// needs it, the fold walks them all.
    #[inline(never)]
    fn refresh(&self, i: usize) -> Option<Nanos> {
        let r = &self.slots[i].1.replica;
        let t = r.poll_timeout();
        self.timers[i].set(Timer::Known(t));
        let now = r.offline();
        if self.offline[i].replace(now) != now {
            let n = self.offline_count.get();
            self.offline_count.set(if now { n + 1 } else { n - 1 });
        }
        t
    }

    /// Host `replica` for `tp`, replacing the one hosted before (like `BTreeMap::insert`).
    pub fn insert(&mut self, tp: TopicPartition, replica: R) {
        self.offsets_gen += 1;
        *self.earliest.get_mut() = Earliest::Unknown;
        self.reached = Reached::Every;
        let slot = Slot {
            replica,
            offsets: tp.topic == CONSUMER_OFFSETS_TOPIC,
        };
        match self.find(&tp) {
            Ok(i) => {
                self.slots[i].1 = slot;
                // Its offline flag still counts the replaced replica: the refresh adjusts.
                self.timers[i].set(Timer::Stale);
            }
            Err(i) => {
                self.slots.insert(i, (tp, slot));
                self.timers.insert(i, Cell::new(Timer::Stale));
                self.offline.insert(i, Cell::new(false));
                self.index_topics();
            }
        }
    }

    pub fn remove(&mut self, tp: &TopicPartition) -> Option<R> {
        let i = self.find(tp).ok()?;
        self.offsets_gen += 1;
        *self.earliest.get_mut() = Earliest::Unknown;
        // The slots after it move down one: a reached span would be off by one.
        if self.maybe_effects() {
            self.reached = Reached::Every;
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
    pub fn get_in(&self, topic: &str, partition: u32) -> Option<&R> {
        let i = self.find_in(topic, partition).ok()?;
        Some(&self.slots[i].1.replica)
    }

    /// The replicas of `topic`, by partition, in partition order.
    pub fn in_topic<'a>(&'a self, topic: &'a str) -> impl Iterator<Item = (u32, &'a R)> + 'a {
        self.slots[self.topic_range(topic)]
            .iter()
            .map(|(k, s)| (k.partition, &s.replica))
    }

    #[inline]
    pub fn get(&self, tp: &TopicPartition) -> Option<&R> {
        let i = self.find(tp).ok()?;
        Some(&self.slots[i].1.replica)
    }

    #[inline]
    pub fn get_mut(&mut self, tp: &TopicPartition) -> Option<&mut R> {
        let i = self.find(tp).ok()?;
        Some(self.reach(i))
    }

    pub fn keys(&self) -> impl Iterator<Item = &TopicPartition> {
        self.slots.iter().map(|(tp, _)| tp)
    }

    pub fn values(&self) -> impl Iterator<Item = &R> {
        self.slots.iter().map(|(_, s)| &s.replica)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&TopicPartition, &R)> {
        self.slots.iter().map(|(tp, s)| (tp, &s.replica))
    }

    /// Every replica, mutably (each one's cached timer goes stale).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&TopicPartition, &mut R)> {
        *self.earliest.get_mut() = Earliest::Unknown;
        self.reached = Reached::Every;
        if self.slots.iter().any(|(_, s)| s.offsets) {
            self.offsets_gen += 1;
        }
        for t in &mut self.timers {
            *t.get_mut() = Timer::Stale;
        }
        self.slots.iter_mut().map(|(tp, s)| (&*tp, &mut s.replica))
    }

    /// False if no replica has effects to drain.
    pub fn maybe_effects(&self) -> bool {
        self.debug_check_reached();
        !self.reached.range(self.slots.len()).is_empty()
    }

    /// Only reached slots have effects.
    fn debug_check_reached(&self) {
        let reached = self.reached.range(self.slots.len());
        debug_assert!(
            self.slots
                .iter()
                .enumerate()
                .all(|(i, (_, s))| reached.contains(&i) || !s.replica.has_outputs()),
            "a replica got effects without being reached mutably"
        );
    }

    /// The replicas that have effects to drain, mutably; the others keep their cache. The
    /// caller drains every one (the next call looks only at replicas reached since).
    pub fn with_effects_mut(&mut self) -> impl Iterator<Item = &mut R> {
        self.debug_check_reached();
        let span = std::mem::replace(&mut self.reached, Reached::Nothing).range(self.slots.len());
        let gen = &mut self.offsets_gen;
        let earliest = self.earliest.get_mut();
        self.slots[span.clone()]
            .iter_mut()
            .zip(self.timers[span].iter_mut())
            .filter(|((_, s), _)| s.replica.has_outputs())
            .map(move |((_, s), t)| {
                // Nearly always a slot reached this step, so already stale; one cached
                // since it got its effects forgets the earliest (no index here: counting
                // slots in this walk cost more than it saves).
                if std::mem::replace(t.get_mut(), Timer::Stale) != Timer::Stale {
                    *earliest = Earliest::Unknown;
                }
                debug_assert!(!matches!(*earliest, Earliest::All(_)));
                if s.offsets {
                    *gen += 1;
                }
                &mut s.replica
            })
    }

    /// The earliest timer of any replica, and whether any replica is offline.
    #[inline]
    pub fn summary(&self) -> Summary {
        let timeout = match self.earliest.get() {
            Earliest::All(e) => e,
            Earliest::AllBut { slot, others } => sooner(others, self.timer(slot)),
            Earliest::Unknown => self.fold(),
        };
        self.earliest.set(Earliest::All(timeout));
        let s = Summary {
            timeout,
            offline: self.offline_count.get() > 0,
        };
        debug_assert_eq!(s, self.fresh_summary(), "stale replica summary");
        s
    }

    /// Every slot's timer (computed where stale), folded.
    #[inline(never)]
    fn fold(&self) -> Option<Nanos> {
        (0..self.slots.len()).fold(None, |e, i| sooner(e, self.timer(i)))
    }

    /// The summary computed from the replicas, none of the caches: for debug checks.
    fn fresh_summary(&self) -> Summary {
        Summary {
            timeout: self.values().filter_map(|r| r.poll_timeout()).min(),
            offline: self.values().any(|r| r.offline()),
        }
    }

    /// Tick the replicas whose timer is due at `now`. The others would do nothing.
    pub fn tick_due(&mut self, now: Nanos) {
        for i in 0..self.slots.len() {
            if self.timer(i).is_some_and(|t| t <= now) {
                self.reach(i).handle_timeout(now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// A replica reduced to what the set caches, with a log of its ticks.
    #[derive(Clone, Debug, PartialEq, Eq)]
    struct Fake {
        timer: Option<Nanos>,
        offline: bool,
        effects: bool,
        ticks: Vec<Nanos>,
        /// What a tick sets the timer to, relative to the tick's time (`None`: no timer).
        after_tick: Option<Nanos>,
    }

    impl Hosted for Fake {
        fn poll_timeout(&self) -> Option<Nanos> {
            self.timer
        }
        fn offline(&self) -> bool {
            self.offline
        }
        fn has_outputs(&self) -> bool {
            self.effects
        }
        fn handle_timeout(&mut self, now: Nanos) {
            self.ticks.push(now);
            self.timer = self.after_tick.map(|d| now + d);
            self.effects = true;
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(TopicPartition, Option<Nanos>, bool),
        Remove(TopicPartition),
        /// Reach one replica mutably and change it (maybe giving it effects).
        Change(TopicPartition, Option<Nanos>, bool, bool),
        ChangeAll(Option<Nanos>),
        Tick(Nanos),
        Drain,
        Summary,
    }

    fn tp() -> impl Strategy<Value = TopicPartition> {
        let topic = prop_oneof![
            Just("a".to_string()),
            Just("bb".to_string()),
            Just("cc".to_string()),
            Just(CONSUMER_OFFSETS_TOPIC.to_string()),
        ];
        (topic, 0..4u32).prop_map(|(topic, partition)| TopicPartition { topic, partition })
    }

    fn timer() -> impl Strategy<Value = Option<Nanos>> {
        proptest::option::of(0..100u64)
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (tp(), timer(), any::<bool>()).prop_map(|(k, t, o)| Op::Insert(k, t, o)),
            tp().prop_map(Op::Remove),
            (tp(), timer(), any::<bool>(), any::<bool>())
                .prop_map(|(k, t, o, e)| Op::Change(k, t, o, e)),
            timer().prop_map(Op::ChangeAll),
            (0..120u64).prop_map(Op::Tick),
            Just(Op::Drain),
            Just(Op::Summary),
        ]
    }

    fn fake(timer: Option<Nanos>, offline: bool) -> Fake {
        Fake {
            timer,
            offline,
            effects: false,
            ticks: Vec::new(),
            after_tick: timer.map(|t| t % 7 + 1),
        }
    }

    proptest! {
        /// Every answer is what the same operations on a `BTreeMap` give by the plain
        /// definitions, whatever the caches hold.
        #[test]
        fn behaves_as_a_btree_map(ops in proptest::collection::vec(op(), 0..80)) {
            let mut set = ReplicaSet::new();
            let mut map: BTreeMap<TopicPartition, Fake> = BTreeMap::new();
            for op in ops {
                let gen = set.offsets_generation();
                let mut touched_offsets = false;
                match op {
                    Op::Insert(k, t, o) => {
                        touched_offsets = k.topic == CONSUMER_OFFSETS_TOPIC;
                        set.insert(k.clone(), fake(t, o));
                        map.insert(k, fake(t, o));
                    }
                    Op::Remove(k) => {
                        touched_offsets = map.contains_key(&k) && k.topic == CONSUMER_OFFSETS_TOPIC;
                        prop_assert_eq!(set.remove(&k), map.remove(&k));
                    }
                    Op::Change(k, t, o, e) => {
                        touched_offsets = map.contains_key(&k) && k.topic == CONSUMER_OFFSETS_TOPIC;
                        for f in set.get_mut(&k).into_iter().chain(map.get_mut(&k)) {
                            f.timer = t;
                            f.offline = o;
                            f.effects |= e;
                        }
                    }
                    Op::ChangeAll(t) => {
                        touched_offsets = map.keys().any(|k| k.topic == CONSUMER_OFFSETS_TOPIC);
                        for (_, f) in set.iter_mut() {
                            f.timer = t;
                        }
                        for f in map.values_mut() {
                            f.timer = t;
                        }
                    }
                    Op::Tick(now) => {
                        set.tick_due(now);
                        for (k, f) in map.iter_mut() {
                            if f.timer.is_some_and(|t| t <= now) {
                                touched_offsets |= k.topic == CONSUMER_OFFSETS_TOPIC;
                                f.handle_timeout(now);
                            }
                        }
                    }
                    Op::Drain => {
                        prop_assert_eq!(set.maybe_effects() || map.values().all(|f| !f.effects), true);
                        let drained: Vec<Fake> = set
                            .with_effects_mut()
                            .map(|f| {
                                f.effects = false;
                                f.clone()
                            })
                            .collect();
                        let mut expected = Vec::new();
                        for (k, f) in map.iter_mut().filter(|(_, f)| f.effects) {
                            touched_offsets |= k.topic == CONSUMER_OFFSETS_TOPIC;
                            f.effects = false;
                            expected.push(f.clone());
                        }
                        prop_assert_eq!(drained, expected);
                        prop_assert!(!set.maybe_effects());
                    }
                    Op::Summary => {}
                }
                if touched_offsets {
                    prop_assert!(set.offsets_generation() > gen, "offsets_generation did not move");
                }
                let summary = set.summary();
                prop_assert_eq!(summary, Summary {
                    timeout: map.values().filter_map(|f| f.timer).min(),
                    offline: map.values().any(|f| f.offline),
                });
                prop_assert!(set.iter().eq(map.iter()));
                for k in map.keys() {
                    prop_assert_eq!(set.get(k), map.get(k));
                    prop_assert_eq!(set.get_in(&k.topic, k.partition), map.get(k));
                }
                for topic in ["a", "bb", "cc", "zz", CONSUMER_OFFSETS_TOPIC] {
                    let expected = map
                        .iter()
                        .filter(|(k, _)| k.topic == topic)
                        .map(|(k, f)| (k.partition, f));
                    prop_assert!(set.in_topic(topic).eq(expected));
                }
            }
        }
    }

    #[test]
    fn a_tick_reaches_only_the_due_replicas() {
        let mut set = ReplicaSet::new();
        let key = |p| TopicPartition {
            topic: "t".into(),
            partition: p,
        };
        set.insert(key(0), fake(Some(10), false));
        set.insert(key(1), fake(Some(30), false));
        set.insert(key(2), fake(None, false));
        assert_eq!(set.summary().timeout, Some(10));
        set.tick_due(20);
        let ticks: Vec<&[Nanos]> = set.values().map(|f| f.ticks.as_slice()).collect();
        assert_eq!(ticks, [&[20][..], &[], &[]]);
        // Ticked at 20, replica 0 wants the next tick 20 + (10 % 7 + 1) = 24.
        assert_eq!(set.summary().timeout, Some(24));
        let drained = set.with_effects_mut().count();
        assert_eq!(drained, 1, "only the ticked replica has effects");
    }
}
