//! Per-partition client state in slots indexed by partition number: the map a client asks
//! on every step and every wake-up (`BTreeMap<u32, T>` cost a search per question).
//! Iteration goes by partition number, as the map's did. The world keeps its brokers in one
//! too, by broker id, for the same reason.

/// A map from partition number to `T`, backed by a `Vec` of slots.
#[derive(Debug)]
pub struct PartitionSlots<T> {
    slots: Vec<Option<T>>,
    len: usize,
}

impl<T> Default for PartitionSlots<T> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            len: 0,
        }
    }
}

impl<T> PartitionSlots<T> {
    pub fn get(&self, p: u32) -> Option<&T> {
        self.slots.get(p as usize)?.as_ref()
    }

    pub fn get_mut(&mut self, p: u32) -> Option<&mut T> {
        self.slots.get_mut(p as usize)?.as_mut()
    }

    pub fn contains_key(&self, p: u32) -> bool {
        self.get(p).is_some()
    }

    fn slot(&mut self, p: u32) -> &mut Option<T> {
        let i = p as usize;
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, || None);
        }
        &mut self.slots[i]
    }

    pub fn insert(&mut self, p: u32, v: T) -> Option<T> {
        let old = self.slot(p).replace(v);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    /// The value at `p`, inserting `T::default()` first if there is none.
    pub fn get_or_default(&mut self, p: u32) -> &mut T
    where
        T: Default,
    {
        self.get_or_insert_with(p, T::default)
    }

    /// The value at `p`, inserting `make()` first if there is none.
    pub fn get_or_insert_with(&mut self, p: u32, make: impl FnOnce() -> T) -> &mut T {
        if !self.contains_key(p) {
            self.insert(p, make());
        }
        self.get_mut(p).expect("just inserted")
    }

    pub fn remove(&mut self, p: u32) -> Option<T> {
        let old = self.slots.get_mut(p as usize)?.take();
        if old.is_some() {
            self.len -= 1;
        }
        old
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn clear(&mut self) {
        self.slots.clear();
        self.len = 0;
    }

    /// `(partition, value)` by partition number.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        (0..)
            .zip(&self.slots)
            .filter_map(|(p, s)| s.as_ref().map(|v| (p, v)))
    }

    /// `(partition, value)` by partition number.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        (0..)
            .zip(&mut self.slots)
            .filter_map(|(p, s)| s.as_mut().map(|v| (p, v)))
    }

    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten()
    }
}

impl<T> IntoIterator for PartitionSlots<T> {
    type Item = (u32, T);
    type IntoIter = std::iter::FilterMap<
        std::iter::Zip<std::ops::RangeFrom<u32>, std::vec::IntoIter<Option<T>>>,
        fn((u32, Option<T>)) -> Option<(u32, T)>,
    >;

    /// `(partition, value)` by partition number.
    fn into_iter(self) -> Self::IntoIter {
        (0..).zip(self.slots).filter_map(|(p, s)| s.map(|v| (p, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn behaves_as_a_map_in_partition_order() {
        let mut s = PartitionSlots::default();
        let mut m = BTreeMap::new();
        for (i, p) in [5u32, 1, 3, 1, 0, 5, 2, 7].into_iter().enumerate() {
            if i % 3 == 2 {
                assert_eq!(s.remove(p), m.remove(&p));
            } else {
                assert_eq!(s.insert(p, i), m.insert(p, i));
            }
            assert_eq!(s.len(), m.len());
            assert!(s
                .iter()
                .map(|(p, v)| (p, *v))
                .eq(m.iter().map(|(p, v)| (*p, *v))));
        }
        assert_eq!(s.get(99), None);
        assert_eq!(s.remove(99), None);
        *s.get_or_default(9) += 4;
        m.insert(9, 4);
        assert!(s.into_iter().eq(m));
    }
}
