//! The weights of each fault kind in random schedules, and how often faults come.

use super::MessageKind;
use crate::time::{SimTime, MILLIS};
use serde::{Deserialize, Serialize};

/// Relative weights of each fault kind in random schedules, and how often faults come.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultRates {
    /// Mean faults per simulated second; 0 turns random faults off.
    pub per_second: f64,
    /// Probability of network loss/duplication/reordering per message scales with this too.
    pub network_noise: f64,
    pub crash: u32,
    pub power_loss: u32,
    pub controller_crash: u32,
    pub pause: u32,
    pub clock: u32,
    pub partition: u32,
    pub clog: u32,
    pub bit_flip: u32,
    pub read_errors: u32,
    pub disk_full: u32,
    pub slow_disk: u32,
    /// Partitions of the controller quorum through one controller (`controller-bridge`:
    /// the other controllers split into two halves that only the bridge joins; 3 or more
    /// controllers, otherwise not drawn). Weight 0 in the default mix, so existing seeds keep
    /// their schedules; Raft shapes turn it on.
    pub controller_bridge: u32,
    /// The probability that a controller that has just become Raft leader is isolated from
    /// every node 0 to 4 message delays later, for 300 ms to 3 s (the leader nemesis,
    /// sim/src/world/leader_nemesis.rs: event-driven, from a stream of its own; a controller
    /// quorum only). 0 (the default): never, so no run changes.
    pub new_leader_isolate: f64,
    /// At most this many brokers down at once (crashed or paused).
    pub max_down: u32,
    /// The longest fault of [`random_schedule`] in milliseconds (down time of a crash,
    /// pause, partition, clog, disk fault), as if the fault window ended that soon after it
    /// struck; 0 (the default): each kind's own maximum (3 to 5 s), so no run changes.
    /// Member and client faults keep theirs.
    pub max_duration_ms: u32,
    /// Group member faults, drawn from their own stream (see [`random_member_schedule`]).
    pub member_crash: u32,
    pub member_pause: u32,
    /// Weight 0 in the default mix: a non-zero default would redraw every seed's member
    /// faults (and move every pinned seed). Group test shapes and `--fault-weights
    /// member-isolate=N` turn it on.
    pub member_isolate: u32,
    /// Producer and consumer faults, drawn from their own stream (see
    /// [`random_client_schedule`]).
    pub client_crash: u32,
    pub client_pause: u32,
    pub client_isolate: u32,
    /// Random message faults (`message`: the next message of a random transaction kind
    /// from a random sender held back or duplicated 0.5-2.5 s, see
    /// [`random_message_schedule`]), drawn from a stream of their own at their weight's share
    /// against the broker weights, in the txn workload only. Weight 0 in the default mix, so
    /// no seed's schedule changes; txn sweeps turn it on.
    ///
    /// [`random_message_schedule`]: super::random_message_schedule
    pub message: u32,
    /// The kinds a random message fault picks from; empty (the default): every kind of
    /// [`RANDOM_MESSAGE_KINDS`], so no seed's schedule changes. A shape aiming at one
    /// message of the protocol names it (`message_kinds = ["txn-produce"]`).
    ///
    /// [`RANDOM_MESSAGE_KINDS`]: super::RANDOM_MESSAGE_KINDS
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub message_kinds: Vec<MessageKind>,
}

impl Default for FaultRates {
    fn default() -> Self {
        Self {
            per_second: 0.5,
            network_noise: 1.0,
            crash: 3,
            power_loss: 2,
            controller_crash: 1,
            pause: 2,
            clock: 2,
            partition: 3,
            clog: 2,
            bit_flip: 1,
            read_errors: 1,
            disk_full: 1,
            slow_disk: 1,
            controller_bridge: 0,
            new_leader_isolate: 0.0,
            max_down: 1,
            max_duration_ms: 0,
            member_crash: 2,
            member_pause: 2,
            member_isolate: 0,
            client_crash: 1,
            client_pause: 1,
            client_isolate: 1,
            message: 0,
            message_kinds: Vec::new(),
        }
    }
}

impl FaultRates {
    /// Scales the frequency of faults (the `--fault-rate` flag: 0 = none, 1 = default).
    pub fn scaled(factor: f64) -> Self {
        let d = Self::default();
        Self {
            per_second: d.per_second * factor,
            network_noise: d.network_noise * factor,
            ..d
        }
    }
}

impl FaultRates {
    /// The summed weights of the broker fault kinds (the share of `per_second` that the
    /// broker schedule gets, against which member and client shares are reckoned).
    pub fn broker_weight(&self) -> u32 {
        self.crash
            + self.power_loss
            + self.controller_crash
            + self.pause
            + self.clock
            + self.partition
            + self.clog
            + self.bit_flip
            + self.read_errors
            + self.disk_full
            + self.slow_disk
            + self.controller_bridge
    }

    /// The cap [`FaultRates::max_duration_ms`] puts on a random fault's length.
    pub fn max_duration(&self) -> SimTime {
        match self.max_duration_ms {
            0 => SimTime::MAX,
            ms => u64::from(ms) * MILLIS,
        }
    }

    /// Names of the weights, as `--fault-weights` and scenario files spell them.
    pub const KINDS: &'static [&'static str] = &[
        "crash",
        "power-loss",
        "controller-crash",
        "pause",
        "clock",
        "partition",
        "clog",
        "bit-flip",
        "read-errors",
        "disk-full",
        "slow-disk",
        "controller-bridge",
        "member-crash",
        "member-pause",
        "member-isolate",
        "client-crash",
        "client-pause",
        "client-isolate",
        "message",
    ];

    /// Sets the weight of one fault kind; the error names the unknown kind.
    pub fn set_weight(&mut self, kind: &str, weight: u32) -> Result<(), String> {
        let w = match kind {
            "crash" => &mut self.crash,
            "power-loss" => &mut self.power_loss,
            "controller-crash" => &mut self.controller_crash,
            "pause" => &mut self.pause,
            "clock" => &mut self.clock,
            "partition" => &mut self.partition,
            "clog" => &mut self.clog,
            "bit-flip" => &mut self.bit_flip,
            "read-errors" => &mut self.read_errors,
            "disk-full" => &mut self.disk_full,
            "slow-disk" => &mut self.slow_disk,
            "controller-bridge" => &mut self.controller_bridge,
            "member-crash" => &mut self.member_crash,
            "member-pause" => &mut self.member_pause,
            "member-isolate" => &mut self.member_isolate,
            "client-crash" => &mut self.client_crash,
            "client-pause" => &mut self.client_pause,
            "client-isolate" => &mut self.client_isolate,
            "message" => &mut self.message,
            other => {
                return Err(format!(
                    "unknown fault kind {other:?}; known: {}",
                    Self::KINDS.join(", ")
                ))
            }
        };
        *w = weight;
        Ok(())
    }

    /// The weights in [`FaultRates::KINDS`] order.
    pub fn weights(&self) -> [u32; 19] {
        [
            self.crash,
            self.power_loss,
            self.controller_crash,
            self.pause,
            self.clock,
            self.partition,
            self.clog,
            self.bit_flip,
            self.read_errors,
            self.disk_full,
            self.slow_disk,
            self.controller_bridge,
            self.member_crash,
            self.member_pause,
            self.member_isolate,
            self.client_crash,
            self.client_pause,
            self.client_isolate,
            self.message,
        ]
    }

    /// The weight of one fault kind (named as in [`FaultRates::KINDS`]); `None` if unknown.
    pub fn weight(&self, kind: &str) -> Option<u32> {
        let i = Self::KINDS.iter().position(|k| *k == kind)?;
        Some(self.weights()[i])
    }

    /// Applies `kind=weight,kind=weight...` (the `--fault-weights` flag).
    pub fn set_weights(&mut self, spec: &str) -> Result<(), String> {
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, w) = part
                .split_once('=')
                .ok_or_else(|| format!("expected KIND=WEIGHT, found {part:?}"))?;
            let w: u32 = w
                .trim()
                .parse()
                .map_err(|_| format!("bad weight {w:?} for {k}"))?;
            self.set_weight(k.trim(), w)?;
        }
        Ok(())
    }
}
