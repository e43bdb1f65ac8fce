//! Per-node clocks: each node sees simulated time through its own skew and jumps.
//!
//! `skein_core::Nanos` is a monotonic clock by contract, so a node's clock never runs
//! backwards: a forward jump makes its timers fire early; a "backward jump" is modelled as a
//! stall (the clock stands still for a while, as an NTP slew-back would look to a monotonic
//! reader); skew makes it run fast or slow by some parts per million.

use crate::time::SimTime;

const PPM: i128 = 1_000_000;

/// A node's view of time: piecewise linear in simulated time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeClock {
    /// Simulated time at the start of the current piece.
    base_sim: SimTime,
    /// Local time at the start of the current piece.
    base_local: u64,
    /// Rate of the current piece in parts per million above (or below) real rate.
    skew_ppm: i64,
    /// While the clock is stalled: local time stays at `base_local` until this sim time.
    stalled_until: SimTime,
}

impl Default for NodeClock {
    fn default() -> Self {
        Self::new(0)
    }
}

impl NodeClock {
    /// A clock that starts at `offset` local nanoseconds when simulated time is 0.
    pub fn new(offset: u64) -> Self {
        Self {
            base_sim: 0,
            base_local: offset,
            skew_ppm: 0,
            stalled_until: 0,
        }
    }

    /// The local time at simulated time `now`.
    pub fn local(&self, now: SimTime) -> u64 {
        if now <= self.stalled_until.max(self.base_sim) {
            return self.base_local;
        }
        let start = self.stalled_until.max(self.base_sim);
        if self.skew_ppm == 0 {
            // The general formula's value at rate 1 (dt * PPM / PPM), without its 128-bit
            // division: this runs for every delivery and timer.
            return self.base_local + (now - start);
        }
        let dt = (now - start) as i128;
        let scaled = dt * (PPM + self.skew_ppm as i128) / PPM;
        self.base_local + scaled.max(0) as u64
    }

    /// The earliest simulated time (>= now) at which the local clock reads >= `local`.
    pub fn sim_time_of(&self, now: SimTime, local: u64) -> SimTime {
        let here = self.local(now);
        if local <= here {
            return now;
        }
        // Invert from the start of the current piece (not from `now`) so rounding matches
        // `local` exactly.
        let start = self.stalled_until.max(self.base_sim);
        if self.skew_ppm == 0 {
            // ceil(need * PPM / PPM) = need.
            return (start + (local - self.base_local)).max(now);
        }
        let need = (local - self.base_local) as i128;
        let rate = (PPM + self.skew_ppm as i128).max(1);
        // ceil(need * PPM / rate)
        let dt = (need * PPM + rate - 1) / rate;
        (start + dt as u64).max(now)
    }

    fn rebase(&mut self, now: SimTime) {
        self.base_local = self.local(now);
        self.base_sim = now;
        self.stalled_until = self.stalled_until.min(now);
    }

    /// Sets the rate skew from now on.
    pub fn set_skew(&mut self, now: SimTime, ppm: i64) {
        self.rebase(now);
        // Keep the rate positive: a clock always advances.
        self.skew_ppm = ppm.max(-(PPM as i64) / 2);
    }

    /// Jumps the local clock forward by `delta`.
    pub fn jump_forward(&mut self, now: SimTime, delta: u64) {
        self.rebase(now);
        self.base_local += delta;
    }

    /// Freezes the local clock for `delta` of simulated time.
    pub fn stall(&mut self, now: SimTime, delta: u64) {
        self.rebase(now);
        self.stalled_until = now + delta;
    }

    pub fn skew_ppm(&self) -> i64 {
        self.skew_ppm
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skew_jump_stall_are_monotonic_and_invertible() {
        let mut c = NodeClock::new(1_000);
        assert_eq!(c.local(0), 1_000);
        assert_eq!(c.local(500), 1_500);
        c.set_skew(1_000, 100_000); // 10% fast
        assert_eq!(c.local(2_000), 2_000 + 1_100);
        c.jump_forward(2_000, 5_000);
        assert_eq!(c.local(2_000), 8_100);
        c.stall(3_000, 1_000);
        let frozen = c.local(3_000);
        assert_eq!(c.local(3_500), frozen);
        assert_eq!(c.local(4_000), frozen);
        assert!(c.local(4_100) > frozen);
        let mut prev = 0;
        for t in (0..10_000).step_by(37) {
            let l = c.local(t);
            assert!(l >= prev);
            prev = l;
            let target = l + 777;
            let s = c.sim_time_of(t, target);
            assert!(c.local(s) >= target, "t={t} s={s}");
            assert!(
                s == t || c.local(s - 1) < target,
                "not the earliest: t={t} s={s}"
            );
        }
    }
}
