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
    let x = -portable_ln(1.0 - u) * mean as f64;
    x.min(mean as f64 * 50.0) as u64
}

/// Natural logarithm of `x > 0` from IEEE basic operations only (`f64::ln` calls the
/// platform's libm, whose last bit may differ between systems; a seed must not).
/// x = m * 2^e with m in [1, 2); ln m = 2 atanh(z), z = (m - 1) / (m + 1) <= 1/3.
pub fn portable_ln(x: f64) -> f64 {
    debug_assert!(x > 0.0 && x.is_finite());
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i64;
    if exp == 0 {
        // Subnormal: scale into the normal range first.
        return portable_ln(x * (1u64 << 54) as f64) - 54.0 * std::f64::consts::LN_2;
    }
    let e = exp - 1023;
    let m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | (1023u64 << 52));
    let z = (m - 1.0) / (m + 1.0);
    let z2 = z * z;
    let mut term = z;
    let mut sum = 0.0;
    let mut k = 1.0;
    for _ in 0..24 {
        // Terms shrink (|z| <= 1/3) and share z's sign, and rounding is monotonic: once a
        // term no longer moves the sum, no later one can, so stopping there gives the same
        // bits as all 24 terms (a network send computes this; most need ~12).
        let next = sum + term / k;
        if next == sum {
            break;
        }
        sum = next;
        term *= z2;
        k += 2.0;
    }
    e as f64 * std::f64::consts::LN_2 + 2.0 * sum
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
    fn portable_ln_matches_ln() {
        for x in [1.0, 0.5, 0.1, 1e-3, 0.999_999, 2.5, 1e-300, 5e-324, 7.0] {
            let (a, b) = (portable_ln(x), x.ln());
            assert!(
                (a - b).abs() <= 1e-12 * b.abs().max(1.0),
                "ln {x}: {a} vs {b}"
            );
        }
    }

    /// The early stop changes no bit: the full 24-term series, computed the old way, agrees
    /// on a sweep of inputs across the range a uniform draw gives.
    #[test]
    fn portable_ln_stops_early_without_changing_a_bit() {
        fn full_series(x: f64) -> f64 {
            let bits = x.to_bits();
            let e = ((bits >> 52) & 0x7ff) as i64 - 1023;
            let m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | (1023u64 << 52));
            let z = (m - 1.0) / (m + 1.0);
            let (z2, mut term, mut sum, mut k) = (z * z, z, 0.0, 1.0);
            for _ in 0..24 {
                sum += term / k;
                term *= z2;
                k += 2.0;
            }
            e as f64 * std::f64::consts::LN_2 + 2.0 * sum
        }
        let mut r = stream(11, Subsystem::Workload);
        for i in 0..200_000u64 {
            let x = if i < 1000 {
                1.0 - i as f64 / 1000.0 + f64::EPSILON
            } else {
                1.0 - r.gen::<f64>()
            };
            assert_eq!(portable_ln(x).to_bits(), full_series(x).to_bits(), "ln {x}");
        }
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
