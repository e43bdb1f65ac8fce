//! Fixed, fast hash maps for lookup-only tables on the simulator's hot paths.
//!
//! The std hasher (SipHash, randomly keyed) costs more than the lookups it serves here, and
//! a BTreeMap's search costs a comparison per level. Maps built on [`FastMap`] are only ever
//! looked up, inserted into and removed from, never iterated where order could matter, so
//! the run stays deterministic (docs/simulation.md). The hasher is the one core defines
//! (`skein_core::fxhash`: FxHash with a murmur3 finish), one mechanism for all three users.

pub use skein_core::fxhash::{FastMap, FastSet};

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
        let s: FastSet<u64> = (0..100).collect();
        assert!(s.contains(&99) && !s.contains(&100));
    }
}
