//! Faults: what can go wrong, and the schedule of when it does.
//!
//! A schedule is a list of (simulated time, [`Fault`]), either drawn from the seed's fault
//! stream at the rates of [`FaultRates`] or written out exactly in a scenario file. Faults
//! with a duration (a pause, a partition, a full disk...) schedule their own end; the
//! world applies them in order. Random schedules keep faults inside a window that ends well
//! before the run does, so the liveness check has a quiet tail in which everything heals.
//!
//! This file holds the fault vocabulary ([`Fault`], [`Scheduled`]); what a fault can hit is
//! in `target` ([`NodeRef`], [`ClientRef`]), the random schedules' weights in `rates`
//! ([`FaultRates`]) and the random schedules themselves in `random`.

use crate::net::Partition;
use crate::time::SimTime;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

mod message;
mod random;
mod rates;
mod target;

pub use message::{MessageAction, MessageKind, MessageSender};
pub use random::{
    random_client_schedule, random_member_schedule, random_message_schedule, random_schedule,
    RANDOM_MESSAGE_KINDS,
};
pub use rates::FaultRates;
pub use target::{ClientRef, ControllerTag, LeaderOf, NodeRef};

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
    /// Cuts group member `member` off from every broker and the controller for `duration`:
    /// its requests and heartbeats are lost, so its session lapses at the coordinator while
    /// it goes on processing what it polled, and it must stop before its partitions move.
    MemberIsolate { member: u32, duration: SimTime },
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
    /// Arms a one-shot fault on the next message of `kind` that `from` sends: held back
    /// `delay`, duplicated (a copy `delay` after it was sent), or dropped (see
    /// [`MessageAction`]). `delay` is 0 for a drop.
    Message {
        action: MessageAction,
        kind: MessageKind,
        from: MessageSender,
        delay: SimTime,
    },
    /// Crashes the broker that leads the `__transaction_state` partition of
    /// `transactional_id` at that moment (its transaction coordinator); nothing happens if
    /// there is none. Restarts after `restart_after` if given.
    TxnCoordinatorCrash {
        transactional_id: String,
        power_loss: bool,
        unsynced: Unsynced,
        restart_after: Option<SimTime>,
    },
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
            Fault::MemberIsolate { .. } => "member-isolate",
            Fault::CoordinatorCrash { .. } => "coordinator-crash",
            Fault::ClientPause { .. } => "client-pause",
            Fault::ClientCrash { .. } => "client-crash",
            Fault::ClientRestart { .. } => "client-restart",
            Fault::ClientIsolate { .. } => "client-isolate",
            Fault::ClientTakeover { .. } => "client-takeover",
            Fault::Message { action, .. } => action.kind(),
            Fault::TxnCoordinatorCrash { .. } => "txn-coordinator-crash",
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
            | Fault::MemberIsolate { .. }
            | Fault::CoordinatorCrash { .. }
            | Fault::ClientPause { .. }
            | Fault::ClientCrash { .. }
            | Fault::ClientRestart { .. }
            | Fault::ClientIsolate { .. }
            | Fault::ClientTakeover { .. }
            | Fault::TxnCoordinatorCrash { .. }) => f,
            // A node sender ("leader:P" among them) is resolved when the fault is armed.
            Fault::Message {
                action,
                kind,
                from: MessageSender::Node(n),
                delay,
            } => Fault::Message {
                action,
                kind,
                from: MessageSender::Node(g(n)?),
                delay,
            },
            f @ Fault::Message { .. } => f,
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

#[cfg(test)]
mod tests;
