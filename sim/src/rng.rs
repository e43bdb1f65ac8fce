//! Seeded randomness, split into one independent stream per subsystem.
//!
//! Every random choice of a run comes from one `u64` seed. Each subsystem (network, disk,
//! process faults, workload...) draws from its own ChaCha stream: the same 256-bit key
//! derived from the seed, a different ChaCha stream number. Adding a draw in one subsystem
//! therefore never shifts the numbers another subsystem sees, so a change to the workload
//! does not silently reshuffle the fault schedule of every seed. rand_chacha's output is
//! specified, so a seed means the same run on every platform and version.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The subsystems that draw randomness. The discriminant is the ChaCha stream number:
/// never renumber an existing entry (that would change what every seed means).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Subsystem {
    /// Latency, drop, duplicate, reorder decisions for messages.
    Network = 1,
    /// Disk latency, torn writes, which unsynced bytes survive a crash, bit positions.
    Disk = 2,
    /// The random fault schedule (what fault, when, on which node).
    Faults = 3,
    /// Client behaviour: which partition to produce to, think times.
    Workload = 4,
    /// Per-node clock skew.
    Clock = 5,
    /// Seeds handed to state machines that want randomness of their own (jitter).
    Nodes = 6,
}

/// One deterministic generator per subsystem, derived from the run's seed.
pub fn stream(seed: u64, subsystem: Subsystem) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(subsystem as u64);
    rng
}

/// A sub-stream of a subsystem for one entity (say the disk of node 3), so that entities
/// do not perturb each other either. Stream numbers: subsystem in the high 32 bits.
pub fn substream(seed: u64, subsystem: Subsystem, entity: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(((subsystem as u64) << 32) | (entity & 0xffff_ffff));
    rng
}

/// `true` with probability `p` (clamped to [0, 1]); draws nothing when `p` is 0, so a
/// disabled fault does not consume randomness.
pub fn chance(rng: &mut ChaCha8Rng, p: f64) -> bool {
    if p <= 0.0 {
        return false;
    }
    if p >= 1.0 {
        return true;
    }
    rng.gen::<f64>() < p
}

/// A uniform draw in `[lo, hi]` (inclusive); `lo` when the range is empty.
pub fn between(rng: &mut ChaCha8Rng, lo: u64, hi: u64) -> u64 {
    if hi <= lo {
        lo
    } else {
        rng.gen_range(lo..=hi)
    }
}

/// An exponentially distributed duration with the given mean (for Poisson arrivals).
pub fn exponential(rng: &mut ChaCha8Rng, mean: u64) -> u64 {
    if mean == 0 {
        return 0;
    }
    // 1 - u lies in (0, 1], so ln is finite.
    let u: f64 = rng.gen::<f64>();
    let x = -(1.0 - u).ln() * mean as f64;
    x.min(mean as f64 * 50.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngCore;

    #[test]
    fn streams_are_independent_and_reproducible() {
        let a: Vec<u64> = (0..4)
            .map(|_| stream(7, Subsystem::Network).next_u64())
            .collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]), "same seed, same stream");
        let mut net = stream(7, Subsystem::Network);
        let mut disk = stream(7, Subsystem::Disk);
        assert_ne!(net.next_u64(), disk.next_u64());
        // Drawing from the disk stream does not move the network stream.
        let mut net2 = stream(7, Subsystem::Network);
        let _ = net2.next_u64();
        for _ in 0..100 {
            disk.next_u64();
        }
        assert_eq!(net.next_u64(), net2.next_u64());
        assert_ne!(
            stream(7, Subsystem::Network).next_u64(),
            stream(8, Subsystem::Network).next_u64()
        );
    }

    #[test]
    fn substreams_differ_per_entity() {
        let a = substream(1, Subsystem::Disk, 1).next_u64();
        let b = substream(1, Subsystem::Disk, 2).next_u64();
        assert_ne!(a, b);
        assert_eq!(a, substream(1, Subsystem::Disk, 1).next_u64());
    }

    #[test]
    fn helpers_stay_in_range() {
        let mut r = stream(3, Subsystem::Workload);
        assert!(!chance(&mut r, 0.0));
        assert!(chance(&mut r, 1.0));
        for _ in 0..1000 {
            let x = between(&mut r, 5, 9);
            assert!((5..=9).contains(&x));
        }
        let mean = (0..2000).map(|_| exponential(&mut r, 1000)).sum::<u64>() / 2000;
        assert!((700..1300).contains(&mean), "mean {mean}");
    }
}
