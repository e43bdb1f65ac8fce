//! A small, fixed, fast hasher for lookup-only maps on the simulator's hot paths.
//!
//! The std hasher (SipHash, randomly keyed) costs more than the lookups it serves here, and
//! a BTreeMap's search costs a comparison per level. Maps built on [`FastMap`] are only ever
//! looked up, inserted into and removed from, never iterated where order could matter, so
//! the run stays deterministic (docs/simulation.md). The mixing is FxHash's (rustc's): a
//! rotate, an xor and a multiply per word.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash-style: fast on small integer keys, no seed.
#[derive(Clone, Copy, Default)]
pub struct FastHasher(u64);

const K: u64 = 0xf135_7aea_2e62_a9c5;

impl FastHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        // Fold the high bits down: hashbrown takes its bucket from the low bits.
        self.0.rotate_left(26)
    }
}

/// A HashMap for lookups only (never iterate it where the order could reach the run).
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;
/// A HashSet for membership only (never iterate it where the order could reach the run).
pub type FastSet<K> = HashSet<K, BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_find_what_they_hold() {
        let mut m: FastMap<(u32, u64), u64> = FastMap::default();
        for i in 0..10_000u64 {
            m.insert(((i % 7) as u32, i), i * 3);
        }
        assert_eq!(m.len(), 10_000);
        assert!((0..10_000u64).all(|i| m.get(&((i % 7) as u32, i)) == Some(&(i * 3))));
        assert_eq!(m.get(&(8, 1)), None);
    }

    #[test]
    fn hash_is_fixed() {
        let h = |v: u64| {
            let mut s = FastHasher::default();
            s.write_u64(v);
            s.finish()
        };
        assert_eq!(h(42), h(42));
        assert_ne!(h(1), h(2));
    }
}
