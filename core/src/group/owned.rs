//! A map keyed by partition for a group consumer's assigned partitions: a handful of
//! entries, looked up on every fetch answer, commit and position query. A `Vec` kept in key
//! order finds one by comparing partition numbers and name words, where a `BTreeMap`
//! compared names through `memcmp` (~130 instructions a lookup). Iteration is in key order,
//! as a `BTreeMap`'s.

use crate::types::TopicPartition;

/// Above this many entries a lookup searches by halves instead of scanning.
const SCAN_MAX: usize = 16;

#[derive(Clone, Debug)]
pub(crate) struct PartitionMap<V>(Vec<(TopicPartition, V)>);

impl<V> Default for PartitionMap<V> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<V> PartitionMap<V> {
    /// Where `tp` is.
    #[inline]
    fn find(&self, tp: &TopicPartition) -> Option<usize> {
        if self.0.len() > SCAN_MAX {
            return self.0.binary_search_by(|(k, _)| k.cmp(tp)).ok();
        }
        self.0
            .iter()
            .position(|(k, _)| k.partition == tp.partition && k.topic == tp.topic)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, tp: &TopicPartition) -> Option<&V> {
        self.find(tp).map(|i| &self.0[i].1)
    }

    pub fn get_mut(&mut self, tp: &TopicPartition) -> Option<&mut V> {
        self.find(tp).map(|i| &mut self.0[i].1)
    }

    pub fn contains_key(&self, tp: &TopicPartition) -> bool {
        self.find(tp).is_some()
    }

    /// Sets `tp`'s value, returning the one it replaces.
    pub fn insert(&mut self, tp: TopicPartition, value: V) -> Option<V> {
        match self.0.binary_search_by(|(k, _)| k.cmp(&tp)) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (tp, value));
                None
            }
        }
    }

    pub fn remove(&mut self, tp: &TopicPartition) -> Option<V> {
        self.find(tp).map(|i| self.0.remove(i).1)
    }

    pub fn keys(&self) -> impl Iterator<Item = &TopicPartition> + '_ {
        self.0.iter().map(|(k, _)| k)
    }

    pub fn into_keys(self) -> impl Iterator<Item = TopicPartition> {
        self.0.into_iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.0.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> + '_ {
        self.0.iter_mut().map(|(_, v)| v)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&TopicPartition, &V)> + '_ {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&TopicPartition, &mut V)> + '_ {
        self.0.iter_mut().map(|(k, v)| (&*k, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Every operation answers as a `BTreeMap` does, over runs of mixed operations, with
    /// few keys (scanned) and many (searched by halves); names of different lengths, and
    /// of one length differing in one byte.
    #[test]
    fn behaves_as_a_btree_map() {
        let names = [
            "a",
            "b",
            "ab",
            "orders",
            "ordert",
            "__consumer_offsets",
            "t",
        ];
        for (keys, parts) in [(3usize, 2u32), (7, 6)] {
            let mut m: PartitionMap<u64> = PartitionMap::default();
            let mut b: BTreeMap<TopicPartition, u64> = BTreeMap::new();
            let mut x = 11u64 + keys as u64;
            for step in 0..3_000u64 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let tp = TopicPartition::new(
                    names[((x >> 20) as usize) % keys],
                    ((x >> 30) as u32) % parts,
                );
                match (x >> 40) % 5 {
                    0 | 1 => assert_eq!(m.insert(tp.clone(), step), b.insert(tp.clone(), step)),
                    2 => assert_eq!(m.remove(&tp), b.remove(&tp)),
                    3 => {
                        if let (Some(v), Some(w)) = (m.get_mut(&tp), b.get_mut(&tp)) {
                            *v += 1;
                            *w += 1;
                        }
                    }
                    _ => assert_eq!(m.contains_key(&tp), b.contains_key(&tp)),
                }
                assert_eq!(m.get(&tp), b.get(&tp));
                assert_eq!(m.is_empty(), b.is_empty());
                assert!(m.iter().eq(b.iter()));
                assert!(m.keys().eq(b.keys()));
                assert!(m.values().eq(b.values()));
            }
            for v in m.values_mut() {
                *v += 1;
            }
            for (_, v) in b.iter_mut() {
                *v += 1;
            }
            assert!(m.iter_mut().map(|(k, v)| (k.clone(), *v)).eq(b.clone()));
            assert!(m.into_keys().eq(b.into_keys()));
        }
    }
}
