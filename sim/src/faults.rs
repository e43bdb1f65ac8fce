//! Faults: what can go wrong, and the schedule of when it does.
//!
//! A schedule is a list of (simulated time, [`Fault`]), either drawn from the seed's fault
//! stream at the rates of [`FaultRates`] or written out exactly in a scenario file. Faults
//! with a duration (a pause, a partition, a full disk...) schedule their own end; the
//! world applies them in order. Random schedules keep faults inside a window that ends well
//! before the run does, so the liveness check has a quiet tail in which everything heals.

use crate::net::Partition;
use crate::rng::{between, chance, exponential};
use crate::time::{SimTime, MILLIS, SECS};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A node a fault can hit: a broker by id, the controller, or whichever broker leads a
/// partition when the fault fires (resolved by the world; never seen by the network or disks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NodeRef {
    Broker(u32),
    Controller(ControllerTag),
    LeaderOf(LeaderOf),
}

/// The spelling of "the leader of partition p" in scenario files: `"leader"` (partition 0)
/// or `"leader:P"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaderOf(pub u32);

impl LeaderOf {
    /// Parses `leader` or `leader:P`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.strip_prefix("leader")? {
            "" => Some(LeaderOf(0)),
            rest => rest.strip_prefix(':')?.trim().parse().ok().map(LeaderOf),
        }
    }
}

impl fmt::Display for LeaderOf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "leader:{}", self.0)
    }
}

impl Serialize for LeaderOf {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for LeaderOf {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        LeaderOf::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "expected a broker id, \"controller\", \"leader\" or \"leader:P\", found {s:?}"
            ))
        })
    }
}

/// The spelling of the controller in scenario files: `"controller"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ControllerTag {
    Controller,
}

impl NodeRef {
    pub const CONTROLLER: NodeRef = NodeRef::Controller(ControllerTag::Controller);
}

/// A client a fault can hit: `"producer:N"` or `"consumer:N"` (1-based, in the order the
/// workload creates them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClientRef {
    Producer(u32),
    Consumer(u32),
}

impl ClientRef {
    /// Parses `producer:N` or `consumer:N` (N >= 1).
    pub fn parse(s: &str) -> Option<Self> {
        let (kind, n) = s.split_once(':')?;
        let n: u32 = n.trim().parse().ok().filter(|&n| n >= 1)?;
        match kind.trim() {
            "producer" => Some(ClientRef::Producer(n)),
            "consumer" => Some(ClientRef::Consumer(n)),
            _ => None,
        }
    }
}

impl fmt::Display for ClientRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientRef::Producer(n) => write!(f, "producer:{n}"),
            ClientRef::Consumer(n) => write!(f, "consumer:{n}"),
        }
    }
}

impl<'de> Deserialize<'de> for ClientRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ClientRef::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "expected \"producer:N\" or \"consumer:N\" (N from 1), found {s:?}"
            ))
        })
    }
}

/// What survives of a file's unsynced tail at a power loss (`unsynced = ...` on a crash
/// with `power_loss`). Synced bytes always survive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unsynced {
    /// Every file loses its whole unsynced tail.
    LoseAll,
    /// The page cache made it out: nothing is lost.
    KeepAll,
    /// Every file with an unsynced tail keeps a random part of it (a torn last write).
    Torn,
    /// Per file, one of the three above with equal chance (the default).
    #[default]
    Random,
}

impl Unsynced {
    pub const NAMES: &'static [&'static str] = &["lose-all", "keep-all", "torn", "random"];

    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "lose-all" => Unsynced::LoseAll,
            "keep-all" => Unsynced::KeepAll,
            "torn" => Unsynced::Torn,
            "random" => Unsynced::Random,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// How many of a file's bytes survive: `synced..=len`, drawing from `rng` as needed.
    pub fn keep(self, synced: u64, len: u64, rng: &mut ChaCha8Rng) -> u64 {
        let unsynced = len - synced;
        if unsynced == 0 {
            return len;
        }
        let how = match self {
            Unsynced::Random => rng.gen_range(0..3),
            Unsynced::LoseAll => 0,
            Unsynced::Torn => 1,
            Unsynced::KeepAll => 2,
        };
        match how {
            0 => synced,
            1 => synced + rng.gen_range(0..=unsynced),
            _ => len,
        }
    }
}

impl fmt::Display for NodeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeRef::Broker(id) => write!(f, "broker-{id}"),
            NodeRef::Controller(_) => write!(f, "controller"),
            NodeRef::LeaderOf(l) => write!(f, "{l}"),
        }
    }
}

/// One fault (or the end of one).
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// The process dies. With `power_loss`, the disk also loses unsynced data as `unsynced`
    /// says (by default per file: none, a random part, or all of it survives); without it
    /// the OS page cache survives and nothing written is lost. Restarts after
    /// `restart_after` if given, else at the next `restart` or at the final heal.
    Crash {
        node: NodeRef,
        power_loss: bool,
        unsynced: Unsynced,
        restart_after: Option<SimTime>,
    },
    /// Restarts a crashed node (no-op if it is up).
    Restart { node: NodeRef },
    /// A GC-like freeze: the node handles nothing for `duration`, then acts on what queued up.
    Pause { node: NodeRef, duration: SimTime },
    /// The node's clock jumps forward.
    ClockJump { node: NodeRef, forward: SimTime },
    /// The node's clock stands still for a while (a backward step, seen by a monotonic clock).
    ClockStall { node: NodeRef, duration: SimTime },
    /// The node's clock runs fast (positive) or slow (negative) by this many ppm.
    ClockSkew { node: NodeRef, ppm: i64 },
    /// Cuts network links; see [`Partition`]. Ends at `heal`, or after `duration` if given.
    Partition {
        shape: Partition<NodeRef>,
        duration: Option<SimTime>,
    },
    /// Ends every partition, client isolation and clog (a partition's `duration` ends only
    /// that partition).
    Heal,
    /// Internal: the end of one timed partition or client isolation (the network's cut id).
    EndPartition { id: u64 },
    /// Holds back messages from `from` to `to` for `duration` (delayed, not lost).
    Clog {
        from: NodeRef,
        to: NodeRef,
        duration: SimTime,
    },
    /// Flips one bit of one stored byte on the node's disk (a random file and position).
    BitFlip { node: NodeRef },
    /// Reads on the node's disk fail for `duration`.
    ReadErrors { node: NodeRef, duration: SimTime },
    /// The node's disk fills up for `duration`: capacity is set to what is used plus a
    /// few random KiB, so a write soon comes that fits only in part: its prefix is written
    /// and it fails with ENOSPC (a torn write); later writes fail whole.
    DiskFull { node: NodeRef, duration: SimTime },
    /// Writes and fsyncs on the node's disk take `latency` each, for `duration`.
    SlowDisk {
        node: NodeRef,
        latency: SimTime,
        duration: SimTime,
    },
    /// Internal: the end of a timed disk or pause fault on `node`.
    EndDiskFault { node: NodeRef, what: DiskFaultKind },
    /// Group member `member` (1-based) dies: its consumer state is gone. Restarts (as a new
    /// member) after `restart_after` if given, else at `member-restart` or the final heal.
    MemberCrash {
        member: u32,
        restart_after: Option<SimTime>,
    },
    /// Restarts a crashed group member (no-op if it is up).
    MemberRestart { member: u32 },
    /// A stop-the-world pause of group member `member` that strikes while it processes a
    /// batch (now if it is processing one, else when it starts the next): when it wakes it
    /// finishes the batch and commits it before its consumer notices the session is gone.
    MemberPause { member: u32, duration: SimTime },
    /// Crashes the broker that leads the group's `__consumer_offsets` partition at that
    /// moment (the group coordinator); nothing happens if there is none.
    CoordinatorCrash {
        power_loss: bool,
        unsynced: Unsynced,
        restart_after: Option<SimTime>,
    },
    /// A stop-the-world pause of a producer or consumer: it handles nothing for `duration`,
    /// then acts on what queued up. With `replaced_after` (producers only), a replacement
    /// instance takes over the producer's identity that long into the pause: it adopts the
    /// paused producer's id and bumps the epoch (KIP-360), so the paused one wakes a zombie
    /// and the brokers must fence it with `InvalidProducerEpoch`.
    ClientPause {
        client: ClientRef,
        duration: SimTime,
        replaced_after: Option<SimTime>,
    },
    /// The client process dies: what it had in flight has an unknown outcome, its state is
    /// gone. Restarts (a new producer id / read position from 0) after `restart_after` if
    /// given, else at `client-restart` or the final heal.
    ClientCrash {
        client: ClientRef,
        restart_after: Option<SimTime>,
    },
    /// Restarts a crashed client (no-op if it is up).
    ClientRestart { client: ClientRef },
    /// Cuts the client off from every broker and the controller for `duration`.
    ClientIsolate {
        client: ClientRef,
        duration: SimTime,
    },
    /// Internal: the replacement of a paused producer starts (see `ClientPause`).
    ClientTakeover { client: ClientRef },
}

/// Timed disk faults, for their end events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskFaultKind {
    ReadErrors,
    Full,
    Slow,
}

impl Fault {
    /// A short name, for traces and reports.
    pub fn name(&self) -> &'static str {
        match self {
            Fault::Crash {
                power_loss: true, ..
            } => "power-loss",
            Fault::Crash { .. } => "crash",
            Fault::Restart { .. } => "restart",
            Fault::Pause { .. } => "pause",
            Fault::ClockJump { .. } => "clock-jump",
            Fault::ClockStall { .. } => "clock-stall",
            Fault::ClockSkew { .. } => "clock-skew",
            Fault::Partition { .. } => "partition",
            Fault::Heal => "heal",
            Fault::EndPartition { .. } => "end-partition",
            Fault::Clog { .. } => "clog",
            Fault::BitFlip { .. } => "bit-flip",
            Fault::ReadErrors { .. } => "read-errors",
            Fault::DiskFull { .. } => "disk-full",
            Fault::SlowDisk { .. } => "slow-disk",
            Fault::EndDiskFault { .. } => "end-disk-fault",
            Fault::MemberCrash { .. } => "member-crash",
            Fault::MemberRestart { .. } => "member-restart",
            Fault::MemberPause { .. } => "member-pause",
            Fault::CoordinatorCrash { .. } => "coordinator-crash",
            Fault::ClientPause { .. } => "client-pause",
            Fault::ClientCrash { .. } => "client-crash",
            Fault::ClientRestart { .. } => "client-restart",
            Fault::ClientIsolate { .. } => "client-isolate",
            Fault::ClientTakeover { .. } => "client-takeover",
        }
    }
}

impl Fault {
    /// The same fault with every node it names replaced by `f` (used to resolve
    /// [`NodeRef::LeaderOf`] when the fault fires). `None` if `f` refuses a node.
    pub fn map_nodes(self, mut f: impl FnMut(NodeRef) -> Option<NodeRef>) -> Option<Fault> {
        let mut g = |n: NodeRef| f(n);
        Some(match self {
            Fault::Crash {
                node,
                power_loss,
                unsynced,
                restart_after,
            } => Fault::Crash {
                node: g(node)?,
                power_loss,
                unsynced,
                restart_after,
            },
            Fault::Restart { node } => Fault::Restart { node: g(node)? },
            Fault::Pause { node, duration } => Fault::Pause {
                node: g(node)?,
                duration,
            },
            Fault::ClockJump { node, forward } => Fault::ClockJump {
                node: g(node)?,
                forward,
            },
            Fault::ClockStall { node, duration } => Fault::ClockStall {
                node: g(node)?,
                duration,
            },
            Fault::ClockSkew { node, ppm } => Fault::ClockSkew {
                node: g(node)?,
                ppm,
            },
            Fault::Partition { shape, duration } => Fault::Partition {
                shape: match shape {
                    Partition::RandomHalves => Partition::RandomHalves,
                    Partition::Split { a, b } => Partition::Split {
                        a: a.into_iter().map(&mut g).collect::<Option<_>>()?,
                        b: b.into_iter().map(&mut g).collect::<Option<_>>()?,
                    },
                    Partition::Isolate { node } => Partition::Isolate { node: g(node)? },
                    Partition::Bridge { node } => Partition::Bridge { node: g(node)? },
                    Partition::OneWay { from } => Partition::OneWay { from: g(from)? },
                },
                duration,
            },
            f @ (Fault::Heal | Fault::EndPartition { .. }) => f,
            Fault::Clog { from, to, duration } => Fault::Clog {
                from: g(from)?,
                to: g(to)?,
                duration,
            },
            Fault::BitFlip { node } => Fault::BitFlip { node: g(node)? },
            Fault::ReadErrors { node, duration } => Fault::ReadErrors {
                node: g(node)?,
                duration,
            },
            Fault::DiskFull { node, duration } => Fault::DiskFull {
                node: g(node)?,
                duration,
            },
            Fault::SlowDisk {
                node,
                latency,
                duration,
            } => Fault::SlowDisk {
                node: g(node)?,
                latency,
                duration,
            },
            Fault::EndDiskFault { node, what } => Fault::EndDiskFault {
                node: g(node)?,
                what,
            },
            // Member and client faults name clients, not nodes; the coordinator is
            // resolved by the world when the fault fires.
            f @ (Fault::MemberCrash { .. }
            | Fault::MemberRestart { .. }
            | Fault::MemberPause { .. }
            | Fault::CoordinatorCrash { .. }
            | Fault::ClientPause { .. }
            | Fault::ClientCrash { .. }
            | Fault::ClientRestart { .. }
            | Fault::ClientIsolate { .. }
            | Fault::ClientTakeover { .. }) => f,
        })
    }

    /// Whether the fault names a node only known when it fires.
    pub fn names_a_leader(&self) -> bool {
        let mut found = false;
        let _ = self.clone().map_nodes(|n| {
            found |= matches!(n, NodeRef::LeaderOf(_));
            Some(n)
        });
        found
    }
}

/// A fault at a moment of simulated time.
#[derive(Clone, Debug, PartialEq)]
pub struct Scheduled {
    pub at: SimTime,
    pub fault: Fault,
}

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
    /// At most this many brokers down at once (crashed or paused).
    pub max_down: u32,
    /// Group member faults, drawn from their own stream (see [`random_member_schedule`]).
    pub member_crash: u32,
    pub member_pause: u32,
    /// Producer and consumer faults, drawn from their own stream (see
    /// [`random_client_schedule`]).
    pub client_crash: u32,
    pub client_pause: u32,
    pub client_isolate: u32,
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
            max_down: 1,
            member_crash: 2,
            member_pause: 2,
            client_crash: 1,
            client_pause: 1,
            client_isolate: 1,
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
        "member-crash",
        "member-pause",
        "client-crash",
        "client-pause",
        "client-isolate",
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
            "member-crash" => &mut self.member_crash,
            "member-pause" => &mut self.member_pause,
            "client-crash" => &mut self.client_crash,
            "client-pause" => &mut self.client_pause,
            "client-isolate" => &mut self.client_isolate,
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

/// Draws a random schedule for brokers `1..=brokers` within `[start, end)`.
pub fn random_schedule(
    rates: &FaultRates,
    brokers: u32,
    start: SimTime,
    end: SimTime,
    rng: &mut ChaCha8Rng,
) -> Vec<Scheduled> {
    let mut out = Vec::new();
    if rates.per_second <= 0.0 || end <= start || brokers == 0 {
        return out;
    }
    let mean_gap = (SECS as f64 / rates.per_second) as u64;
    let kinds: [(u32, u8); 12] = [
        (rates.crash, 0),
        (rates.power_loss, 1),
        (rates.controller_crash, 2),
        (rates.pause, 3),
        (rates.clock, 4),
        (rates.partition, 5),
        (rates.clog, 6),
        (rates.bit_flip, 7),
        (rates.read_errors, 8),
        (rates.disk_full, 9),
        (rates.slow_disk, 10),
        (0, 11),
    ];
    let total: u32 = kinds.iter().map(|k| k.0).sum();
    if total == 0 {
        return out;
    }
    // Sim time until which each broker is down (crashed or paused), to respect max_down.
    let mut down_until: Vec<SimTime> = vec![0; brokers as usize + 1];
    let mut controller_down_until: SimTime = 0;
    let mut t = start;
    let all: Vec<NodeRef> = (1..=brokers).map(NodeRef::Broker).collect();
    loop {
        t += exponential(rng, mean_gap).max(MILLIS);
        if t >= end {
            break;
        }
        let mut pick = rng.gen_range(0..total);
        let mut kind = 0;
        for &(w, k) in &kinds {
            if pick < w {
                kind = k;
                break;
            }
            pick -= w;
        }
        let node_id = rng.gen_range(1..=brokers);
        let node = NodeRef::Broker(node_id);
        let remaining = end - t;
        let short =
            |rng: &mut ChaCha8Rng, lo: u64, hi: u64| between(rng, lo, hi.min(remaining.max(lo)));
        let down_now = down_until.iter().filter(|&&u| u > t).count() as u32;
        let fault = match kind {
            0 | 1 | 3 => {
                if down_until[node_id as usize] > t || down_now >= rates.max_down.max(1) {
                    continue;
                }
                if kind == 3 {
                    let d = short(rng, 50 * MILLIS, 3 * SECS);
                    down_until[node_id as usize] = t + d;
                    Fault::Pause { node, duration: d }
                } else {
                    let d = short(rng, 100 * MILLIS, 5 * SECS);
                    down_until[node_id as usize] = t + d;
                    Fault::Crash {
                        node,
                        power_loss: kind == 1,
                        unsynced: Unsynced::Random,
                        restart_after: Some(d),
                    }
                }
            }
            2 => {
                if controller_down_until > t {
                    continue;
                }
                let d = short(rng, 100 * MILLIS, 4 * SECS);
                controller_down_until = t + d;
                Fault::Crash {
                    node: NodeRef::CONTROLLER,
                    power_loss: chance(rng, 0.5),
                    unsynced: Unsynced::Random,
                    restart_after: Some(d),
                }
            }
            4 => match rng.gen_range(0..3) {
                0 => Fault::ClockJump {
                    node,
                    forward: between(rng, 10 * MILLIS, 10 * SECS),
                },
                1 => Fault::ClockStall {
                    node,
                    duration: short(rng, 10 * MILLIS, 2 * SECS),
                },
                _ => Fault::ClockSkew {
                    node,
                    ppm: rng.gen_range(-200_000..=200_000),
                },
            },
            5 => {
                let mut with_ctl = all.clone();
                with_ctl.push(NodeRef::CONTROLLER);
                let shape = match rng.gen_range(0..4) {
                    0 => Partition::RandomHalves,
                    1 => Partition::Isolate {
                        node: *with_ctl.choose(rng).expect("nodes"),
                    },
                    2 => Partition::Bridge { node },
                    _ => Partition::OneWay { from: node },
                };
                Fault::Partition {
                    shape,
                    duration: Some(short(rng, 100 * MILLIS, 5 * SECS)),
                }
            }
            6 => {
                let mut other = NodeRef::Broker(rng.gen_range(1..=brokers));
                if other == node {
                    other = NodeRef::CONTROLLER;
                }
                Fault::Clog {
                    from: node,
                    to: other,
                    duration: short(rng, 10 * MILLIS, 3 * SECS),
                }
            }
            7 => Fault::BitFlip { node },
            8 => Fault::ReadErrors {
                node,
                duration: short(rng, 10 * MILLIS, 2 * SECS),
            },
            9 => Fault::DiskFull {
                node,
                duration: short(rng, 10 * MILLIS, 2 * SECS),
            },
            _ => Fault::SlowDisk {
                node,
                latency: between(rng, MILLIS, 50 * MILLIS),
                duration: short(rng, 100 * MILLIS, 3 * SECS),
            },
        };
        out.push(Scheduled { at: t, fault });
    }
    out
}

/// Draws group member faults (crashes and pauses) for members `1..=members` within
/// `[start, end)`, from a stream of their own, so adding members never changes a seed's
/// broker fault schedule. They come at the share of `per_second` their weights have among
/// all the weights, at most one member down at a time.
pub fn random_member_schedule(
    rates: &FaultRates,
    members: u32,
    start: SimTime,
    end: SimTime,
    rng: &mut ChaCha8Rng,
) -> Vec<Scheduled> {
    let mut out = Vec::new();
    let member_weight = rates.member_crash + rates.member_pause;
    let broker_weight = rates.broker_weight();
    if rates.per_second <= 0.0 || end <= start || members == 0 || member_weight == 0 {
        return out;
    }
    let per_second =
        rates.per_second * member_weight as f64 / (member_weight + broker_weight) as f64;
    let mean_gap = (SECS as f64 / per_second) as u64;
    let mut t = start;
    let mut down_until: SimTime = 0;
    loop {
        t += exponential(rng, mean_gap).max(MILLIS);
        if t >= end {
            break;
        }
        let member = rng.gen_range(1..=members);
        let crash = rng.gen_range(0..member_weight) < rates.member_crash;
        let remaining = end - t;
        let d = between(rng, 50 * MILLIS, (3 * SECS).min(remaining.max(50 * MILLIS)));
        if down_until > t {
            continue;
        }
        down_until = t + d;
        let fault = if crash {
            Fault::MemberCrash {
                member,
                restart_after: Some(d),
            }
        } else {
            Fault::MemberPause {
                member,
                duration: d,
            }
        };
        out.push(Scheduled { at: t, fault });
    }
    out
}

/// Draws producer and consumer faults (crash, pause, isolation) for `producers` producers
/// and `consumers` consumers within `[start, end)`, from a stream of their own (like
/// [`random_member_schedule`]), so a seed's broker and member faults are unchanged by it.
/// They come at the share of `per_second` their weights have against the broker weights,
/// at most one client faulted at a time. A third of producer pauses are replaced (the
/// paused producer wakes a zombie that the brokers must fence).
pub fn random_client_schedule(
    rates: &FaultRates,
    producers: u32,
    consumers: u32,
    start: SimTime,
    end: SimTime,
    rng: &mut ChaCha8Rng,
) -> Vec<Scheduled> {
    let mut out = Vec::new();
    let weight = rates.client_crash + rates.client_pause + rates.client_isolate;
    let clients = producers + consumers;
    if rates.per_second <= 0.0 || end <= start || clients == 0 || weight == 0 {
        return out;
    }
    let per_second = rates.per_second * weight as f64 / (weight + rates.broker_weight()) as f64;
    let mean_gap = (SECS as f64 / per_second) as u64;
    let mut t = start;
    let mut busy_until: SimTime = 0;
    loop {
        t += exponential(rng, mean_gap).max(MILLIS);
        if t >= end {
            break;
        }
        let n = rng.gen_range(0..clients);
        let client = if n < producers {
            ClientRef::Producer(n + 1)
        } else {
            ClientRef::Consumer(n - producers + 1)
        };
        let pick = rng.gen_range(0..weight);
        let remaining = end - t;
        let d = between(rng, 50 * MILLIS, (3 * SECS).min(remaining.max(50 * MILLIS)));
        let replace = chance(rng, 1.0 / 3.0);
        if busy_until > t {
            continue;
        }
        busy_until = t + d;
        let fault = if pick < rates.client_crash {
            Fault::ClientCrash {
                client,
                restart_after: Some(d),
            }
        } else if pick < rates.client_crash + rates.client_pause {
            Fault::ClientPause {
                client,
                duration: d,
                replaced_after: (replace && matches!(client, ClientRef::Producer(_)))
                    .then_some(d / 2),
            }
        } else {
            Fault::ClientIsolate {
                client,
                duration: d,
            }
        };
        out.push(Scheduled { at: t, fault });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{stream, Subsystem};

    #[test]
    fn client_schedules_are_seeded_bounded_one_at_a_time_and_varied() {
        let rates = FaultRates {
            per_second: 4.0,
            ..FaultRates::default()
        };
        let draw = |seed| {
            random_client_schedule(
                &rates,
                2,
                1,
                SECS,
                30 * SECS,
                &mut stream(seed, Subsystem::Faults),
            )
        };
        let a = draw(1);
        assert_eq!(a, draw(1));
        assert_ne!(a, draw(2));
        assert!(a.len() >= 5, "{a:?}");
        let mut busy_until = 0;
        let mut kinds = std::collections::BTreeSet::new();
        let mut replaced = 0;
        for seed in 0..10 {
            busy_until = 0;
            for s in draw(seed) {
                assert!((SECS..30 * SECS).contains(&s.at));
                let (client, d) = match &s.fault {
                    Fault::ClientCrash {
                        client,
                        restart_after: Some(d),
                    } => (*client, *d),
                    Fault::ClientPause {
                        client,
                        duration,
                        replaced_after,
                    } => {
                        if let Some(r) = replaced_after {
                            assert!(matches!(client, ClientRef::Producer(_)));
                            assert!(*r < *duration);
                            replaced += 1;
                        }
                        (*client, *duration)
                    }
                    Fault::ClientIsolate { client, duration } => (*client, *duration),
                    other => panic!("{other:?}"),
                };
                assert!(matches!(
                    client,
                    ClientRef::Producer(1 | 2) | ClientRef::Consumer(1)
                ));
                assert!(s.at >= busy_until, "two clients faulted at once");
                busy_until = s.at + d;
                kinds.insert(s.fault.name());
            }
        }
        let _ = busy_until;
        assert_eq!(kinds.len(), 3, "{kinds:?}");
        assert!(replaced > 0);
        let mut off = rates.clone();
        off.set_weights("client-crash=0,client-pause=0,client-isolate=0")
            .unwrap();
        assert!(random_client_schedule(
            &off,
            2,
            1,
            0,
            30 * SECS,
            &mut stream(1, Subsystem::Faults)
        )
        .is_empty());
    }

    #[test]
    fn random_schedules_are_seeded_bounded_and_varied() {
        let rates = FaultRates::default();
        let a = random_schedule(
            &rates,
            3,
            SECS,
            30 * SECS,
            &mut stream(9, Subsystem::Faults),
        );
        let b = random_schedule(
            &rates,
            3,
            SECS,
            30 * SECS,
            &mut stream(9, Subsystem::Faults),
        );
        let c = random_schedule(
            &rates,
            3,
            SECS,
            30 * SECS,
            &mut stream(10, Subsystem::Faults),
        );
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.len() >= 4, "{}", a.len());
        assert!(a.iter().all(|s| (SECS..30 * SECS).contains(&s.at)));
        assert!(a.windows(2).all(|w| w[0].at <= w[1].at));
        let none = random_schedule(
            &FaultRates::scaled(0.0),
            3,
            0,
            30 * SECS,
            &mut stream(9, Subsystem::Faults),
        );
        assert!(none.is_empty());
        let mut names = std::collections::BTreeSet::new();
        for seed in 0..30 {
            for s in random_schedule(
                &rates,
                3,
                0,
                30 * SECS,
                &mut stream(seed, Subsystem::Faults),
            ) {
                names.insert(s.fault.name());
            }
        }
        assert!(names.len() >= 12, "{names:?}");
    }

    #[test]
    fn weights_parse_and_steer_the_schedule() {
        let mut r = FaultRates::default();
        r.set_weights("crash=0, power-loss=0,pause=0,controller-crash=0,clock=0,clog=0,bit-flip=0,read-errors=0,disk-full=0,slow-disk=0").unwrap();
        assert!(r.set_weights("meteor=3").unwrap_err().contains("meteor"));
        assert!(r.set_weights("crash").is_err());
        let s = random_schedule(&r, 3, 0, 30 * SECS, &mut stream(1, Subsystem::Faults));
        assert!(!s.is_empty());
        assert!(s.iter().all(|f| f.fault.name() == "partition"), "{s:?}");
    }

    #[test]
    fn member_schedules_are_seeded_bounded_and_one_member_at_a_time() {
        let rates = FaultRates {
            per_second: 4.0,
            ..FaultRates::default()
        };
        let draw = |seed| {
            random_member_schedule(
                &rates,
                3,
                SECS,
                30 * SECS,
                &mut stream(seed, Subsystem::Faults),
            )
        };
        let a = draw(1);
        assert_eq!(a, draw(1));
        assert_ne!(a, draw(2));
        assert!(a.len() >= 5, "{a:?}");
        let mut busy_until = 0;
        let mut kinds = std::collections::BTreeSet::new();
        for s in &a {
            assert!((SECS..30 * SECS).contains(&s.at));
            let (member, d) = match &s.fault {
                Fault::MemberCrash {
                    member,
                    restart_after: Some(d),
                } => (*member, *d),
                Fault::MemberPause { member, duration } => (*member, *duration),
                other => panic!("{other:?}"),
            };
            assert!((1..=3).contains(&member));
            assert!(s.at >= busy_until, "two members down at once");
            busy_until = s.at + d;
            kinds.insert(s.fault.name());
        }
        assert_eq!(kinds.len(), 2, "{kinds:?}");
        // No members, or member weights 0: nothing.
        assert!(
            random_member_schedule(&rates, 0, 0, 30 * SECS, &mut stream(1, Subsystem::Faults))
                .is_empty()
        );
        let mut off = rates.clone();
        off.set_weights("member-crash=0,member-pause=0").unwrap();
        assert!(
            random_member_schedule(&off, 3, 0, 30 * SECS, &mut stream(1, Subsystem::Faults))
                .is_empty()
        );
    }

    #[test]
    fn max_down_is_respected() {
        let rates = FaultRates {
            per_second: 5.0,
            ..FaultRates::default()
        };
        for seed in 0..20 {
            let s = random_schedule(
                &rates,
                3,
                0,
                20 * SECS,
                &mut stream(seed, Subsystem::Faults),
            );
            let mut intervals: Vec<(SimTime, SimTime)> = Vec::new();
            for f in &s {
                let d = match &f.fault {
                    Fault::Crash {
                        node: NodeRef::Broker(_),
                        restart_after: Some(d),
                        ..
                    } => *d,
                    Fault::Pause { duration, .. } => *duration,
                    _ => continue,
                };
                assert!(
                    intervals.iter().all(|&(a, b)| !(a <= f.at && f.at < b)),
                    "seed {seed}"
                );
                intervals.push((f.at, f.at + d));
            }
        }
    }
}
