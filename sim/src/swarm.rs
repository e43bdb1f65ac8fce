//! Swarm testing (Groce et al., ISSTA 2012; TigerBeetle's VOPR): every seed of a
//! `--swarm` sweep runs under a fault mix of its own, drawn from the seed.
//!
//! One fixed mix spends every seed the same way: each fault kind gets its share in every
//! run, so a bug that needs many faults of one kind and none of another (two brokers down
//! at once, long message delays, no clock noise masking an election) is rarely drawn. A
//! swarm switches about half the kinds off per seed, reweights the rest and redraws the
//! rate, the message delays, `max_down` and the fault lengths, so some seeds are extreme
//! in one direction. [`SwarmMix::draw`] takes its numbers from a stream of its own
//! ([`Subsystem::Swarm`]), which the run never reads, so the mix is a pure function of the
//! seed and the run's own streams are untouched; [`SwarmMix::apply`] writes it into a
//! [`SimConfig`]. The mix is a value (serde), kept in sweep results and printed with a
//! verdict, so the explorer can reuse and mutate it.
//!
//! The ranges ([`RANGES`], docs/search.md) use integer draws only (no `ln`/`exp`), so a
//! seed means the same mix on every platform.

use crate::config::SimConfig;
use crate::faults::FaultRates;
use crate::net::NetConfig;
use crate::rng::{between, stream, Subsystem};
use crate::time::{format_duration, SimTime, MICROS, MILLIS};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// One seed's fault mix: what [`SwarmMix::apply`] writes over the configuration's fault
/// rates and network.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SwarmMix {
    /// Mean random faults per simulated second (`FaultRates::per_second`).
    pub per_second: f64,
    /// Weight of every kind of `FaultRates::KINDS` (0: switched off for this seed).
    pub weights: BTreeMap<String, u32>,
    /// At most this many brokers crashed or paused at once.
    pub max_down: u32,
    /// Cap on a random fault's length in ms (0: each kind's own maximum, 3-5 s).
    pub max_duration_ms: u32,
    /// Message latency, loss, duplication and reordering.
    pub network: NetConfig,
}

/// The documented ranges a mix is drawn from (docs/search.md, "Swarm testing").
pub struct Ranges {
    /// Chance that a fault kind is on for a seed (then weight 1..=`max_weight`).
    pub kind_on: f64,
    pub max_weight: u32,
    /// Fault rate, in faults per 1,000 simulated seconds: a bucket is picked uniformly,
    /// then a value uniformly within it (log-uniform-ish over 0.1-4 per second).
    pub milli_per_second: &'static [u64],
    /// `max_down`, uniformly.
    pub max_down: (u32, u32),
    /// Chance of capping fault lengths, and the cap's buckets (ms).
    pub cap_durations: f64,
    pub max_duration_ms: &'static [u64],
    /// Minimum message latency's buckets (ns).
    pub latency_min: &'static [SimTime],
    /// Mean extra latency's buckets (ns).
    pub latency_mean_extra: &'static [SimTime],
    /// The latency cap, as `latency_min` plus this many times the mean extra (uniform).
    pub tail_factor: (u64, u64),
    /// Network noise in percent of `NetConfig::lossy(1)` (1% loss, 0.5% duplicates, 1%
    /// reordering at 100).
    pub noise_percent: (u64, u64),
}

/// The ranges of every `--swarm` draw.
pub const RANGES: Ranges = Ranges {
    kind_on: 0.5,
    max_weight: 5,
    milli_per_second: &[100, 250, 500, 1_000, 2_000, 4_000],
    max_down: (1, 2),
    cap_durations: 0.5,
    max_duration_ms: &[50, 200, 1_000, 5_000],
    latency_min: &[
        20 * MICROS,
        100 * MICROS,
        MILLIS,
        10 * MILLIS,
        50 * MILLIS,
        150 * MILLIS,
    ],
    latency_mean_extra: &[50 * MICROS, 400 * MICROS, 2 * MILLIS, 20 * MILLIS],
    tail_factor: (2, 50),
    noise_percent: (0, 400),
};

/// A value in one of `buckets`' spans, picked uniformly, then uniformly within it.
fn bucketed(rng: &mut impl Rng, buckets: &[u64]) -> u64 {
    let i = rng.gen_range(0..buckets.len() - 1);
    rng.gen_range(buckets[i]..=buckets[i + 1])
}

impl SwarmMix {
    /// The mix of `seed`, from its own stream: the same seed, the same mix.
    pub fn draw(seed: u64) -> Self {
        let mut rng = stream(seed, Subsystem::Swarm);
        let r = &RANGES;
        let weights = FaultRates::KINDS
            .iter()
            .map(|&k| {
                let on = rng.gen_bool(r.kind_on);
                let w = rng.gen_range(1..=r.max_weight);
                (k.to_string(), if on { w } else { 0 })
            })
            .collect();
        let per_second = bucketed(&mut rng, r.milli_per_second) as f64 / 1_000.0;
        let max_down = rng.gen_range(r.max_down.0..=r.max_down.1);
        let cap = rng.gen_bool(r.cap_durations);
        let cap_ms = bucketed(&mut rng, r.max_duration_ms) as u32;
        // Whole microseconds: a mix reads (and is written into scenario files) plainly.
        let latency_min = bucketed(&mut rng, r.latency_min) / MICROS * MICROS;
        let mean_extra = bucketed(&mut rng, r.latency_mean_extra) / MICROS * MICROS;
        let tail = between(&mut rng, r.tail_factor.0, r.tail_factor.1);
        let noise = between(&mut rng, r.noise_percent.0, r.noise_percent.1);
        let network = NetConfig {
            latency_min,
            latency_mean_extra: mean_extra,
            latency_max: latency_min + tail * mean_extra,
            ..NetConfig::lossy(noise as f64 / 100.0)
        };
        Self {
            per_second,
            weights,
            max_down,
            max_duration_ms: if cap { cap_ms } else { 0 },
            network,
        }
    }

    /// Writes the mix over `c`'s fault rates and network (everything else, the leader
    /// nemesis among it, stays as it was). Flags applied afterwards still win.
    pub fn apply(&self, c: &mut SimConfig) {
        c.rates.per_second = self.per_second;
        for (kind, &w) in &self.weights {
            // A mix read from a newer binary may name a kind this one lacks: skip it.
            let _ = c.rates.set_weight(kind, w);
        }
        c.rates.max_down = self.max_down;
        c.rates.max_duration_ms = self.max_duration_ms;
        c.network = self.network.clone();
    }

    /// The weight of `kind` (0 if off or unknown).
    pub fn weight(&self, kind: &str) -> u32 {
        self.weights.get(kind).copied().unwrap_or(0)
    }

    /// The weights as `--fault-weights` takes them, in `FaultRates::KINDS` order.
    pub fn fault_weights(&self) -> String {
        let parts: Vec<String> = FaultRates::KINDS
            .iter()
            .map(|k| format!("{k}={}", self.weight(k)))
            .collect();
        parts.join(",")
    }
}

/// One line: rate, limits, network, kinds on (with weights) and off.
impl fmt::Display for SwarmMix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = &self.network;
        let cap = match self.max_duration_ms {
            0 => "kind default".to_string(),
            ms => format_duration(u64::from(ms) * MILLIS),
        };
        write!(
            f,
            "{}/s, max-down {}, fault length cap {cap}, latency {}+{} (max {}), loss {:.2}%; on:",
            self.per_second,
            self.max_down,
            format_duration(n.latency_min),
            format_duration(n.latency_mean_extra),
            format_duration(n.latency_max),
            n.drop * 100.0
        )?;
        for k in FaultRates::KINDS.iter().filter(|k| self.weight(k) > 0) {
            write!(f, " {k}={}", self.weight(k))?;
        }
        f.write_str("; off:")?;
        for k in FaultRates::KINDS.iter().filter(|k| self.weight(k) == 0) {
            write!(f, " {k}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_always_draws_the_same_mix() {
        for seed in [0, 1, 7, u64::MAX] {
            assert_eq!(SwarmMix::draw(seed), SwarmMix::draw(seed));
        }
        assert_ne!(SwarmMix::draw(1), SwarmMix::draw(2));
    }

    /// Over 200 seeds every kind is on in some and off in others, and every drawn knob
    /// stays in its range and takes several values.
    #[test]
    fn mixes_differ_across_seeds_and_cover_the_ranges() {
        let mixes: Vec<SwarmMix> = (0..200).map(SwarmMix::draw).collect();
        for k in FaultRates::KINDS {
            let on = mixes.iter().filter(|m| m.weight(k) > 0).count();
            assert!(on > 0 && on < 200, "{k}: on in {on} of 200");
            assert!(mixes.iter().all(|m| m.weight(k) <= RANGES.max_weight));
        }
        let r = &RANGES;
        let (lo, hi) = (r.milli_per_second[0], *r.milli_per_second.last().unwrap());
        for m in &mixes {
            let milli = (m.per_second * 1_000.0).round() as u64;
            assert!((lo..=hi).contains(&milli), "{}", m.per_second);
            assert!((r.max_down.0..=r.max_down.1).contains(&m.max_down));
            let n = &m.network;
            assert!(n.latency_min >= r.latency_min[0] && n.latency_max > n.latency_min);
            assert!(n.drop >= 0.0 && n.drop <= 0.04 + 1e-12);
        }
        let distinct = |f: &dyn Fn(&SwarmMix) -> u64| {
            let mut v: Vec<u64> = mixes.iter().map(f).collect();
            v.sort_unstable();
            v.dedup();
            v.len()
        };
        assert!(distinct(&|m| (m.per_second * 1e3) as u64) > 50);
        assert_eq!(distinct(&|m| u64::from(m.max_down)), 2);
        assert!(distinct(&|m| u64::from(m.max_duration_ms)) > 50);
        assert!(mixes.iter().any(|m| m.max_duration_ms == 0));
        assert!(distinct(&|m| m.network.latency_min) > 100);
        // Some seeds have slow links (tens of ms, the Raft bugs' shapes), some fast ones.
        assert!(mixes.iter().any(|m| m.network.latency_min > 50 * MILLIS));
        assert!(mixes.iter().any(|m| m.network.latency_min < MILLIS));
    }

    #[test]
    fn fault_rates_read_each_kind_where_set_weight_writes_it() {
        for (i, k) in FaultRates::KINDS.iter().enumerate() {
            let mut r = FaultRates::default();
            r.set_weight(k, 100 + i as u32).unwrap();
            assert_eq!(r.weight(k), Some(100 + i as u32), "{k}");
            assert_eq!(r.weights().iter().filter(|&&w| w >= 100).count(), 1);
        }
        assert_eq!(FaultRates::default().weight("nope"), None);
    }

    #[test]
    fn apply_writes_the_mix_and_round_trips_through_fault_weights() {
        let m = SwarmMix::draw(42);
        let mut c = SimConfig::default();
        m.apply(&mut c);
        assert_eq!(c.rates.per_second, m.per_second);
        assert_eq!(c.rates.max_down, m.max_down);
        assert_eq!(c.network, m.network);
        let mut r = FaultRates::default();
        r.set_weights(&m.fault_weights()).unwrap();
        for k in FaultRates::KINDS {
            assert_eq!(r.weight(k), Some(m.weight(k)), "{k}");
            assert_eq!(c.rates.weight(k), Some(m.weight(k)), "{k}");
        }
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<SwarmMix>(&json).unwrap(), m);
        let text = m.to_string();
        assert!(text.contains("on:") && text.contains("off:"), "{text}");
    }
}
