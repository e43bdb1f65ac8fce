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
    /// A `--swarm` seed's fault mix (`swarm::SwarmMix::draw`), drawn before the run and
    /// never read by it.
    Swarm = 7,
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
    exponential_of(1.0 - u, mean)
}

/// `-ln(v) * mean`, capped at 50 means, truncated: what [`exponential`] returns for the
/// draw `v` in (0, 1].
///
/// The answer is defined by [`portable_ln`]'s bits, but its series costs ~12 dependent
/// steps with a division each, once per simulated message. [`quick_ln`] is within 1e-13 of
/// the true logarithm, and so is `portable_ln`: when the quick duration lies more than
/// `slack` (1e-9 of the mean, thousands of times both errors) from any whole number of
/// nanoseconds, both truncate to the same integer, so the exact series is computed only
/// in the rare draws where they might not. Same answers, bit for bit; the test below
/// compares the two on millions of draws.
fn exponential_of(v: f64, mean: u64) -> u64 {
    let m = mean as f64;
    let cap = m * 50.0;
    let y = -quick_ln(v) * m;
    let slack = m * 1e-9 + 1e-9;
    let (lo, hi) = (y - slack, y + slack);
    // Below 2^53 both ends convert to i64 exactly and cheaply (u64 conversion branches).
    if lo >= 0.0 && hi < cap && hi < 9e15 && (lo as i64) == (hi as i64) {
        return lo as u64;
    }
    exact_exponential_of(v, mean)
}

/// [`exponential_of`] by the definition: the full series, then the cap.
fn exact_exponential_of(v: f64, mean: u64) -> u64 {
    let x = -portable_ln(v) * mean as f64;
    x.min(mean as f64 * 50.0) as u64
}

/// Bins of [`quick_ln`]'s table: the top 8 bits of the mantissa.
const LN_BITS: u32 = 8;
const LN_BINS: usize = 1 << LN_BITS;

/// For each bin of mantissas m in [1, 2): `(1 / c, ln(1 / c))` for the bin's centre c, so
/// that ln m = ln(m / c) - ln(1 / c) with |m / c - 1| < 1/512. Computed by the compiler
/// from IEEE operations and `portable_ln`, so it is the same on every platform.
static LN_TABLE: [(f64, f64); LN_BINS] = {
    let mut t = [(0.0, 0.0); LN_BINS];
    let mut j = 0;
    while j < LN_BINS {
        let centre = 1.0 + (j as f64 + 0.5) / LN_BINS as f64;
        let inv = 1.0 / centre;
        t[j] = (inv, portable_ln(inv));
        j += 1;
    }
    t
};

/// ln `x` for a normal `x > 0`, within ~1e-15 of the true value plus 1 ulp of the
/// exponent's term: a table of 256 bins and five terms of ln(1 + r) for |r| < 1/512 (the
/// first omitted term is below 1e-17), evaluated in two independent halves so the chain of
/// dependent multiplications is short. Falls back to [`portable_ln`] for subnormals.
fn quick_ln(x: f64) -> f64 {
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i64;
    if exp == 0 {
        return portable_ln(x);
    }
    let e = exp - 1023;
    let m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | (1023u64 << 52));
    let (inv, ln_inv) = LN_TABLE[((bits >> (52 - LN_BITS)) & (LN_BINS as u64 - 1)) as usize];
    let r = m * inv - 1.0;
    let r2 = r * r;
    let low = r + r2 * (-0.5 + r * (1.0 / 3.0));
    let high = r2 * r2 * (-0.25 + r * 0.2);
    e as f64 * std::f64::consts::LN_2 + ((low + high) - ln_inv)
}

/// Natural logarithm of `x > 0` from IEEE basic operations only (`f64::ln` calls the
/// platform's libm, whose last bit may differ between systems; a seed must not).
/// x = m * 2^e with m in [1, 2); ln m = 2 atanh(z), z = (m - 1) / (m + 1) <= 1/3.
pub const fn portable_ln(x: f64) -> f64 {
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
    let mut i = 0;
    while i < 24 {
        i += 1;
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
    fn quick_ln_is_close_to_ln() {
        let mut r = stream(5, Subsystem::Workload);
        for i in 0..100_000u64 {
            let x = if i < 64 {
                [
                    1.0,
                    0.5,
                    2f64.powi(-53),
                    0.999_999_999,
                    1e-300,
                    7.0,
                    1.5,
                    1.0 - 1e-16,
                ][i as usize % 8]
            } else {
                1.0 - r.gen::<f64>()
            };
            let (q, p) = (quick_ln(x), portable_ln(x));
            assert!((q - p).abs() <= 1e-13, "ln {x}: quick {q} vs series {p}");
        }
    }

    /// The quick path changes no duration: on draws across (0, 1] (and the ones nearest
    /// its edges) and means from 1 ns to minutes, it returns what the full series does,
    /// and it is the path taken (otherwise it would be no faster).
    #[test]
    fn exponential_matches_the_exact_series_bit_for_bit() {
        let mut r = stream(9, Subsystem::Network);
        let means = [
            1,
            3,
            7,
            1_000,
            999_983,
            1_000_000,
            5_000_000,
            60_000_000_000,
            1 << 40,
        ];
        let mut slow = 0u64;
        let mut total = 0u64;
        for i in 0..400_000u64 {
            let v = match i {
                0 => 1.0,
                1 => 2f64.powi(-53),
                2 => 1.0 - 2f64.powi(-53),
                3 => (-50.0f64).exp(),
                _ => 1.0 - r.gen::<f64>(),
            };
            for &mean in &means {
                let (q, e) = (exponential_of(v, mean), exact_exponential_of(v, mean));
                assert_eq!(q, e, "v {v} mean {mean}");
                let m = mean as f64;
                let y = -quick_ln(v) * m;
                if mean <= 5_000_000 {
                    total += 1;
                    let slack = m * 1e-9 + 1e-9;
                    if (y - slack) as u64 != (y + slack) as u64 || y - slack < 0.0 {
                        slow += 1;
                    }
                }
            }
        }
        assert!(
            slow * 100 < total,
            "the exact series ran on {slow} of {total} draws"
        );
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
