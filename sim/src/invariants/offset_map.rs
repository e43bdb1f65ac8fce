//! Per-offset state of the checker, kept by offset: the committed log as the replication
//! invariants first saw it (offset -> record digest), and per partition of the simulator's
//! topic the acknowledged values, the first values read and which acknowledged records
//! were read back.
//!
//! Every audit pass looks up (and the first reader inserts) each new committed record, for
//! every replica, and every acknowledgement and every record a consumer reads is looked up
//! and inserted: ordered maps made those lookups ~3% of a simulation, hashed ones ~1.5%.
//! The offsets a log holds are dense from its start, so a deque indexed by `offset - base`
//! does the same at the cost of an index; holes (a compacted log's removed records, or a
//! range nobody has shown yet) are `None`. The group checks keep their per-offset sets
//! (records known to exist, records processed) in the same way.

use crate::slots::PartitionSlots;
use skein_core::types::Offset;
use std::collections::VecDeque;

/// A map from offsets to `T`, stored densely from its lowest offset.
#[derive(Debug)]
pub(super) struct OffsetMap<T> {
    /// The offset of `slots[0]`.
    base: Offset,
    slots: VecDeque<Option<T>>,
}

impl<T> Default for OffsetMap<T> {
    fn default() -> Self {
        Self {
            base: 0,
            slots: VecDeque::new(),
        }
    }
}

/// The committed log of one partition: offset -> record digest.
pub(super) type CommittedLog = OffsetMap<u64>;

impl<T> OffsetMap<T> {
    /// What is recorded at `offset`, if anything.
    pub(super) fn get(&self, offset: Offset) -> Option<&T> {
        let i = offset.checked_sub(self.base)?;
        self.slots.get(usize::try_from(i).ok()?)?.as_ref()
    }

    /// Records `value` at `offset`; returns what was there.
    ///
    /// Inlined for the usual cases, an offset already held or the next one (the checks
    /// insert ~90k times in the bench's 10 s; the call was most of each insert's cost);
    /// the rest out of line.
    #[inline]
    pub(super) fn insert(&mut self, offset: Offset, value: T) -> Option<T> {
        if let Some(i) = offset.checked_sub(self.base) {
            let len = self.slots.len() as Offset;
            if i < len {
                return self.slots[i as usize].replace(value);
            }
            if i == len && len > 0 {
                self.slots.push_back(Some(value));
                return None;
            }
        }
        self.insert_other(offset, value)
    }

    /// [`Self::insert`] into an empty map, below the lowest offset or past the next one.
    #[inline(never)]
    fn insert_other(&mut self, offset: Offset, value: T) -> Option<T> {
        if self.slots.is_empty() {
            self.base = offset;
        }
        while offset < self.base {
            self.slots.push_front(None);
            self.base -= 1;
        }
        let i = (offset - self.base) as usize;
        if i == self.slots.len() {
            // The usual case, the next offset: one push rather than a resize.
            self.slots.push_back(Some(value));
            return None;
        }
        if i > self.slots.len() {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i].replace(value)
    }

    /// The recorded `(offset, value)`s in `[from, below)`, in offset order.
    pub(super) fn range(&self, from: Offset, below: Offset) -> impl Iterator<Item = (Offset, &T)> {
        let lo = from.max(self.base);
        let hi = below.min(self.base + self.slots.len() as Offset).max(lo);
        let skip = (lo - self.base) as usize;
        self.slots
            .iter()
            .skip(skip)
            .take((hi - lo) as usize)
            .zip(lo..)
            .filter_map(|(v, o)| v.as_ref().map(|v| (o, v)))
    }

    /// Every recorded `(offset, value)`, in offset order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (Offset, &T)> {
        self.range(self.base, Offset::MAX)
    }

    /// Forgets every offset at or above `offset`; returns how many values it held.
    pub(super) fn truncate(&mut self, offset: Offset) -> usize {
        let keep = offset
            .saturating_sub(self.base)
            .min(self.slots.len() as Offset) as usize;
        let dropped = self.slots.range(keep..).filter(|v| v.is_some()).count();
        self.slots.truncate(keep);
        dropped
    }
}

/// An [`OffsetMap`] per partition of the simulator's topic, in the simulator's slots by
/// partition number, with a count of the values held.
#[derive(Debug)]
pub(crate) struct PerPartition<T> {
    maps: PartitionSlots<OffsetMap<T>>,
    len: usize,
}

impl<T> Default for PerPartition<T> {
    fn default() -> Self {
        Self {
            maps: PartitionSlots::default(),
            len: 0,
        }
    }
}

impl<T> PerPartition<T> {
    pub(super) fn get(&self, p: u32, offset: Offset) -> Option<&T> {
        self.maps.get(p)?.get(offset)
    }

    pub(crate) fn contains(&self, p: u32, offset: Offset) -> bool {
        self.get(p, offset).is_some()
    }

    /// Records `value` at `offset` of partition `p`; returns what was there.
    ///
    /// Called for every acknowledgement and first read: the partition's map almost always
    /// exists, so creating one is out of line (with it inline, the slot's replacement and
    /// the drop of what it held made this too big to inline).
    #[inline]
    pub(crate) fn insert(&mut self, p: u32, offset: Offset, value: T) -> Option<T> {
        let old = match self.maps.get_mut(p) {
            Some(m) => m.insert(offset, value),
            None => {
                self.first_in(p, offset, value);
                None
            }
        };
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    /// The first value of partition `p` (its map created).
    #[cold]
    #[inline(never)]
    fn first_in(&mut self, p: u32, offset: Offset, value: T) {
        let mut m = OffsetMap::default();
        m.insert(offset, value);
        self.maps.insert(p, m);
    }

    /// Partition `p`'s recorded `(offset, value)`s in `[from, below)`, in offset order.
    pub(crate) fn range(
        &self,
        p: u32,
        from: Offset,
        below: Offset,
    ) -> impl Iterator<Item = (Offset, &T)> {
        self.maps
            .get(p)
            .into_iter()
            .flat_map(move |m| m.range(from, below))
    }

    /// Forgets partition `p`'s offsets at or above `offset`.
    pub(super) fn truncate(&mut self, p: u32, offset: Offset) {
        if let Some(m) = self.maps.get_mut(p) {
            self.len -= m.truncate(offset);
        }
    }

    /// How many (partition, offset)s hold a value.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Every `((partition, offset), value)`, in that order.
    pub(super) fn iter(&self) -> impl Iterator<Item = ((u32, Offset), &T)> {
        self.maps
            .iter()
            .flat_map(|(p, m)| m.iter().map(move |(o, v)| ((p, o), v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// The deque answers as the map it replaced, for inserts in any order, holes, and
    /// truncation.
    #[test]
    fn behaves_as_an_ordered_map() {
        let mut log = CommittedLog::default();
        let mut model: BTreeMap<Offset, u64> = BTreeMap::new();
        let ops: &[(char, Offset)] = &[
            ('i', 10),
            ('i', 11),
            ('i', 14),
            ('i', 7),
            ('i', 11),
            ('t', 13),
            ('i', 20),
            ('i', 3),
            ('t', 8),
            ('t', 0),
            ('i', 5),
            ('i', 6),
        ];
        for (n, &(op, o)) in ops.iter().enumerate() {
            match op {
                'i' => {
                    let old = log.insert(o, o * 100 + n as u64);
                    assert_eq!(old, model.insert(o, o * 100 + n as u64));
                }
                _ => {
                    let dropped = log.truncate(o);
                    assert_eq!(dropped, model.split_off(&o).len());
                }
            }
            for q in 0..25 {
                assert_eq!(log.get(q), model.get(&q), "get({q}) after op {n}");
            }
            for (lo, hi) in [(0, 25), (4, 12), (11, 11), (12, 30), (21, 40)] {
                let want: Vec<_> = model.range(lo..hi).map(|(o, d)| (*o, *d)).collect();
                let got: Vec<_> = log.range(lo, hi).map(|(o, d)| (o, *d)).collect();
                assert_eq!(got, want, "range({lo}, {hi}) after op {n}");
            }
            let all: Vec<_> = log.iter().map(|(o, d)| (o, *d)).collect();
            let want: Vec<_> = model.iter().map(|(o, d)| (*o, *d)).collect();
            assert_eq!(all, want, "iter after op {n}");
        }
    }

    /// Per partition: the same answers as a map keyed by (partition, offset), and the count.
    #[test]
    fn per_partition_behaves_as_a_map_keyed_by_partition_and_offset() {
        let mut pp: PerPartition<u64> = PerPartition::default();
        let mut model: BTreeMap<(u32, Offset), u64> = BTreeMap::new();
        let ops: &[(char, u32, Offset)] = &[
            ('i', 2, 5),
            ('i', 0, 1),
            ('i', 2, 3),
            ('i', 2, 5),
            ('t', 2, 4),
            ('i', 1, 0),
            ('t', 0, 0),
            ('i', 0, 9),
            ('t', 7, 0),
            ('i', 2, 4),
        ];
        for (n, &(op, p, o)) in ops.iter().enumerate() {
            match op {
                'i' => assert_eq!(pp.insert(p, o, n as u64), model.insert((p, o), n as u64)),
                _ => {
                    pp.truncate(p, o);
                    model.retain(|&(q, x), _| q != p || x < o);
                }
            }
            assert_eq!(pp.len(), model.len(), "len after op {n}");
            for p in 0..4 {
                for o in 0..12 {
                    assert_eq!(pp.get(p, o), model.get(&(p, o)), "({p}, {o}) after op {n}");
                    assert_eq!(pp.contains(p, o), model.contains_key(&(p, o)));
                }
            }
            let all: Vec<_> = pp.iter().map(|(k, v)| (k, *v)).collect();
            let want: Vec<_> = model.iter().map(|(k, v)| (*k, *v)).collect();
            assert_eq!(all, want, "iter after op {n}");
        }
    }
}
