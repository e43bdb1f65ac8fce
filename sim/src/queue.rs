//! The discrete-event queue: events ordered by (simulated time, insertion sequence).
//!
//! Two events at the same instant run in the order they were scheduled, so the order never
//! depends on anything but the run's own history. BinaryHeap's internal layout is irrelevant
//! to the result because (time, seq) is a total order with no ties (the slot number after
//! them never decides).

use crate::time::SimTime;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Bits of a heap key below the sequence number: the event's slot.
const SLOT_BITS: u32 = 24;

/// Values parked under small integer handles, their slots reused through a free list: the
/// event queue keeps its events here, the world its messages in flight (a box per message
/// cost a malloc and a free each, which this reuse avoids).
pub struct Slab<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slab<T> {
    /// Parks `value`; the handle gives it back once.
    #[inline]
    pub fn insert(&mut self, value: T) -> u32 {
        match self.free.pop() {
            Some(i) => {
                // A freed slot is empty (`take` emptied it): written without a drop of
                // what it held, which cost a test of the old value on every insert.
                let old = self.slots[i as usize].replace(value);
                debug_assert!(old.is_none(), "a freed slot held a value");
                std::mem::forget(old);
                i
            }
            None => {
                self.slots.push(Some(value));
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// The value parked under `handle`, left parked.
    #[inline]
    pub fn get(&self, handle: u32) -> &T {
        self.slots[handle as usize]
            .as_ref()
            .expect("a parked value")
    }

    /// Takes back the value parked under `handle` (a handle is used once).
    #[inline]
    pub fn take(&mut self, handle: u32) -> T {
        let value = self.slots[handle as usize].take().expect("a parked value");
        self.free.push(handle);
        value
    }
}

/// A priority queue of future events.
///
/// The heap orders small keys (time, sequence, slot); the events themselves wait in a slab
/// of slots reused through a free list. Sifting whole events (a `Message` is ~100
/// bytes) through the heap on every push and pop cost more than the rest of the queue.
/// Each key is one `u128`, `time << 64 | seq << 24 | slot`, so a comparison is a single
/// integer comparison: it orders as (time, seq) did, since sequence numbers are unique
/// (2^40 of them and 2^24 events waiting at once are far beyond any run).
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<u128>>,
    slots: Slab<E>,
    next_seq: u64,
    now: SimTime,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        Self {
            heap: BinaryHeap::new(),
            slots: Slab::default(),
            next_seq: 0,
            now: 0,
        }
    }

    /// The time of the event popped last.
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// Schedules `event` at `at`; an instant in the past is moved to now (time never runs back).
    pub fn push(&mut self, at: SimTime, event: E) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let slot = self.slots.insert(event);
        assert!(
            seq < 1 << (64 - SLOT_BITS) && slot < 1 << SLOT_BITS,
            "event queue key space exhausted (sequence {seq}, slot {slot})"
        );
        let low = seq << SLOT_BITS | u64::from(slot);
        self.heap.push(Reverse(
            u128::from(at.max(self.now)) << 64 | u128::from(low),
        ));
        seq
    }

    /// Pops the earliest event, advancing the clock to its time.
    pub fn pop(&mut self) -> Option<(SimTime, u64, E)> {
        let Reverse(key) = self.heap.pop()?;
        let (at, low) = ((key >> 64) as SimTime, key as u64);
        let (seq, slot) = (low >> SLOT_BITS, (low & ((1 << SLOT_BITS) - 1)) as u32);
        debug_assert!(at >= self.now, "the event queue went back in time");
        self.now = at;
        let event = self.slots.take(slot);
        Some((at, seq, event))
    }

    /// The earliest event, left queued: its time and the event.
    #[inline]
    pub fn peek(&self) -> Option<(SimTime, &E)> {
        let Reverse(key) = *self.heap.peek()?;
        let slot = (key as u64 & ((1 << SLOT_BITS) - 1)) as u32;
        Some(((key >> 64) as SimTime, self.slots.get(slot)))
    }

    /// Moves the earliest event to `at` under a new sequence number: what popping it and
    /// pushing it again would do (the clock advances to its time; the event keeps its
    /// slot), with one sift of the heap instead of two and the event left where it is.
    /// Returns the new sequence number; does nothing on an empty queue.
    pub fn requeue_first(&mut self, at: SimTime) -> u64 {
        let seq = self.next_seq;
        let Some(mut first) = self.heap.peek_mut() else {
            return seq;
        };
        let Reverse(key) = *first;
        let (was, slot) = ((key >> 64) as SimTime, key as u64 & ((1 << SLOT_BITS) - 1));
        debug_assert!(was >= self.now, "the event queue went back in time");
        self.now = was;
        self.next_seq += 1;
        assert!(
            seq < 1 << (64 - SLOT_BITS),
            "event queue key space exhausted (sequence {seq})"
        );
        // Keys are unique, so the heap pops in the same order whichever way it holds them.
        *first = Reverse(u128::from(at.max(was)) << 64 | u128::from(seq << SLOT_BITS | slot));
        seq
    }

    /// Time of the next event, if any.
    pub fn peek_time(&self) -> Option<SimTime> {
        self.heap.peek().map(|Reverse(key)| (key >> 64) as SimTime)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_time_then_insertion() {
        let mut q = EventQueue::new();
        q.push(30, "c");
        q.push(10, "a1");
        q.push(20, "b");
        q.push(10, "a2");
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|(_, _, e)| e)).collect();
        assert_eq!(order, ["a1", "a2", "b", "c"]);
        assert_eq!(q.now(), 30);
    }

    #[test]
    fn packed_keys_order_by_time_across_the_whole_range() {
        let mut q = EventQueue::new();
        q.push(u64::MAX, "last");
        q.push(1 << 40, "middle");
        q.push(0, "first");
        q.push(1 << 40, "middle2");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            [
                (0, 2, "first"),
                (1 << 40, 1, "middle"),
                (1 << 40, 3, "middle2"),
                (u64::MAX, 0, "last")
            ]
        );
    }

    #[test]
    fn pops_in_key_order_under_random_interleaving() {
        // Against a reference: a BinaryHeap of (time, seq), pushes and pops interleaved,
        // times near now and far ahead, ties at one instant.
        use rand::{Rng, SeedableRng};
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut q = EventQueue::new();
        let mut reference = BinaryHeap::new();
        for _ in 0..200_000 {
            if rng.gen_bool(0.52) {
                let at = match rng.gen_range(0..4) {
                    0 => q.now(),
                    1 => q.now() + rng.gen_range(0..1_000),
                    2 => q.now() + rng.gen_range(0..1_000_000_000),
                    _ => q.now().saturating_sub(5),
                };
                let seq = q.push(at, ());
                reference.push(Reverse((at.max(q.now()), seq)));
            } else {
                assert_eq!(q.peek_time(), reference.peek().map(|Reverse((t, _))| *t));
                let got = q.pop().map(|(t, s, _)| (t, s));
                assert_eq!(got, reference.pop().map(|Reverse(k)| k));
            }
            assert_eq!(q.len(), reference.len());
        }
    }

    #[test]
    fn slab_gives_back_what_it_holds_and_reuses_freed_slots() {
        let mut s = Slab::default();
        let a = s.insert("a");
        let b = s.insert("b");
        assert_ne!(a, b);
        assert_eq!(*s.get(a), "a");
        assert_eq!(s.take(a), "a");
        // The freed slot is reused; the other value is untouched.
        let c = s.insert("c");
        assert_eq!(c, a);
        assert_eq!(s.take(b), "b");
        assert_eq!(s.take(c), "c");
        assert_eq!(s.slots.len(), 2);
    }

    #[test]
    fn requeue_first_is_pop_then_push() {
        // Against a twin queue that pops and pushes again: the same sequence numbers, the
        // same clock, the same order of everything popped afterwards.
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let (mut q, mut twin) = (EventQueue::new(), EventQueue::new());
        let mut next = 0u32;
        for _ in 0..100_000 {
            match rng.gen_range(0..10) {
                0..=4 => {
                    let at = q.now() + rng.gen_range(0..2_000);
                    assert_eq!(q.push(at, next), twin.push(at, next));
                    next += 1;
                }
                5..=6 => {
                    let first = q.peek().map(|(t, e)| (t, *e));
                    assert_eq!(first, twin.peek().map(|(t, e)| (t, *e)));
                    let Some((t, e)) = first else { continue };
                    let at = match rng.gen_range(0..3) {
                        0 => t,
                        1 => t.saturating_sub(3),
                        _ => t + rng.gen_range(0..3_000),
                    };
                    let seq = q.requeue_first(at);
                    let (t2, _, e2) = twin.pop().expect("an event");
                    assert_eq!((t2, e2), (t, e));
                    assert_eq!(twin.push(at, e2), seq);
                    assert_eq!(q.now(), twin.now());
                }
                _ => assert_eq!(q.pop(), twin.pop()),
            }
            assert_eq!(q.len(), twin.len());
        }
        while let Some(e) = twin.pop() {
            assert_eq!(q.pop(), Some(e));
        }
        assert!(q.is_empty());
        assert_eq!(q.requeue_first(5), q.push(5, 0));
    }

    #[test]
    fn past_events_run_now() {
        let mut q = EventQueue::new();
        q.push(100, 1);
        q.pop();
        q.push(5, 2);
        assert_eq!(q.pop().map(|(t, _, e)| (t, e)), Some((100, 2)));
    }
}
