//! FxHash (the multiply-rotate hash rustc uses) with a murmur3 finish, for lookup tables:
//! the in-memory disk's, the history checker's (`skein_jepsen::fxhash` re-exports it) and
//! the simulator's hot paths (`skein_sim::fasthash`). Never iterate one where order could
//! reach a result: its order is not part of the run's meaning.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// Hash maps here are lookup tables only: their order never reaches the report. They hash
/// with FxHash (as rustc does) because SipHash's DoS resistance buys nothing for a checker
/// and cost a sixth of its time.
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;
pub type FastSet<K> = HashSet<K, BuildHasherDefault<FxHasher>>;

#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        // Fx mixes input into the high bits only, but the table indexes with the low bits:
        // finish with murmur3's fmix64 so values differing late in the string spread out.
        let mut h = self.hash;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, BuildHasherDefault};

    /// Workload values differ late in the string; the low bits (the table index) must still
    /// spread them, or the value table degrades into long probe chains.
    #[test]
    fn low_bits_spread_values_that_differ_late() {
        let build = BuildHasherDefault::<FxHasher>::default();
        let buckets: std::collections::BTreeSet<u64> = (0..10_000)
            .map(|i| build.hash_one(format!("2-24{i:04}").as_str()) & 0x3fff)
            .collect();
        // 10,000 random keys in 16,384 buckets fill about 7,800 of them.
        assert!(buckets.len() > 7_000, "{} buckets", buckets.len());
    }
}
