//! Coverage probes: named marks at the protocol branches a fault test should reach.
//!
//! A passing sweep says little if it never drove the code down the paths that matter: a
//! follower truncating a divergent suffix (KIP-101/279), a fetch fenced by a newer leader
//! epoch (KIP-320), an idempotent retry recognised as a duplicate, a zombie group member's
//! commit refused. `probe!(Name)` marks such a branch, in the manner of FoundationDB's code
//! probes; the simulator records which probes each run hit, and a sweep lists the probes no
//! seed reached, a red flag that the fault mix or the workload misses a path.
//!
//! Probes are Skein's *sometimes-assertions* (Antithesis' `sometimes`, FoundationDB's
//! `TEST(cond)`): each says "a good sweep reaches this at least once", with a name and a
//! place ([`Probe::place`]), and a sweep reports each as hit (in how many seeds) or never
//! hit. `probe!(Name)` marks a branch; `sometimes!(Name, cond)` counts only when a
//! condition on the state holds there (a shrink that goes *below* min.insync, not any
//! shrink), and evaluates `cond` only while recording.
//!
//! Probes are a closed set ([`Probe`]), so a report can name the ones never hit and a typo
//! cannot silently create a new one. Recording is per thread and off by default: outside a
//! recording (the node, every test that does not ask) `probe!` costs one thread-local flag
//! test. A recording never feeds back into the state machines, so it cannot change a run.

use std::cell::{Cell, RefCell};

macro_rules! probes {
    ($($(#[doc = $doc:literal])* $name:ident = $text:literal @ $place:literal,)*) => {
        /// Every probe, in report order.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Probe {
            $($(#[doc = $doc])* $name,)*
        }

        impl Probe {
            pub const ALL: &'static [Probe] = &[$(Probe::$name,)*];

            /// The probe's name in reports (`area.what`).
            pub fn name(self) -> &'static str {
                match self {
                    $(Probe::$name => $text,)*
                }
            }

            /// The source file that marks it (`probe!` or `sometimes!`), from the
            /// workspace root: where to look when a sweep never hits it (a test checks
            /// the file does mark it).
            pub fn place(self) -> &'static str {
                match self {
                    $(Probe::$name => $place,)*
                }
            }
        }
    };
}

probes! {
    /// A follower cut a divergent suffix after the leader answered Diverging (KIP-101/320).
    FollowerTruncatedDivergent = "replica.truncate-divergent" @ "core/src/replica/follower.rs",
    /// The follower's last epoch was older than the leader's: it asked again with an older
    /// epoch (the multi-round truncation of KIP-279).
    FollowerTruncateOlderEpoch = "replica.truncate-older-epoch" @ "core/src/replica/follower.rs",
    /// A follower truncated below its high watermark (only an unclean leader can cause it).
    FollowerTruncatedBelowHw = "replica.truncate-below-hw" @ "core/src/replica/follower.rs",
    /// A follower fetch carried a stale leader epoch and was fenced.
    FetchFencedLeaderEpoch = "replica.fetch-fenced-epoch" @ "core/src/replica/leader.rs",
    /// A fetch named an epoch newer than the leader's (the leader has not heard yet).
    FetchUnknownLeaderEpoch = "replica.fetch-unknown-epoch" @ "core/src/replica/leader.rs",
    /// A consumer's fetch failed KIP-320's divergence check (the leader answered
    /// DivergingEpoch): an unclean election rewrote the log under the consumer.
    ConsumerFetchDiverging = "replica.consumer-fetch-diverging" @ "core/src/replica/leader.rs",
    /// The leader proposed removing a lagging follower from the ISR.
    IsrShrinkProposed = "replica.isr-shrink" @ "core/src/replica/leader.rs",
    /// The leader proposed adding a caught-up follower back to the ISR.
    IsrExpandProposed = "replica.isr-expand" @ "core/src/replica/leader.rs",
    /// The controller refused an ISR proposal (stale partition epoch, fenced leader...).
    IsrProposalRejected = "replica.isr-rejected" @ "core/src/replica/leader.rs",
    /// An acks=all produce was refused: the ISR is below min.insync.replicas.
    ProduceNotEnoughReplicas = "replica.produce-not-enough-replicas" @ "core/src/replica/leader.rs",
    /// A replica's log failed a read (CRC, I/O) and it went offline for the partition.
    ReplicaWentOffline = "replica.offline" @ "core/src/replica/mod.rs",
    /// A leader's flush failed (a full disk) with data unflushed: it is tried again on a
    /// timer, not only at the next append (seed 5503).
    LeaderFlushRetry = "replica.leader-flush-retry" @ "core/src/replica/mod.rs",
    /// A damaged batch was refilled with another replica's intact copy (peer repair).
    ReplicaPeerRepaired = "replica.peer-repaired" @ "core/src/replica/repair.rs",
    /// An idempotent retry matched a batch already in the log: acknowledged, not rewritten.
    IdempotentDuplicate = "idempotence.duplicate" @ "core/src/replica/leader.rs",
    /// A batch's sequence did not follow the last one: OutOfOrderSequence.
    IdempotentOutOfOrder = "idempotence.out-of-order" @ "core/src/replica/leader.rs",
    /// A producer epoch older than the current one was refused (a zombie producer).
    IdempotentStaleEpoch = "idempotence.stale-epoch" @ "core/src/replica/leader.rs",
    /// The producer client bumped its epoch to get past a sequence gap.
    ProducerEpochBump = "producer.epoch-bump" @ "core/src/producer/client.rs",
    /// The controller elected a leader from the ISR.
    ElectionClean = "controller.election-clean" @ "core/src/controller/machine.rs",
    /// The ISR had no live member: the controller elected an eligible leader replica
    /// (KIP-966).
    ElectionEligible = "controller.election-elr" @ "core/src/controller/machine.rs",
    /// The controller elected a leader from outside the ISR (unclean election enabled).
    ElectionUnclean = "controller.election-unclean" @ "core/src/controller/machine.rs",
    /// The controller found no eligible leader for a partition.
    ElectionNoneEligible = "controller.election-none" @ "core/src/controller/machine.rs",
    /// A broker's session expired and the controller fenced it.
    BrokerFenced = "controller.broker-fenced" @ "core/src/controller/machine.rs",
    /// A group member's request carried an old generation (IllegalGeneration).
    GroupIllegalGeneration = "group.illegal-generation" @ "core/src/group/state.rs",
    /// A request from a member the coordinator no longer knows (UnknownMemberId).
    GroupUnknownMember = "group.unknown-member" @ "core/src/group/state.rs",
    /// A group's member session expired and the coordinator removed it.
    GroupMemberExpired = "group.member-expired" @ "core/src/group/state.rs",
    /// A coordinator loaded its groups from `__consumer_offsets` (first load or failover).
    CoordinatorLoaded = "group.coordinator-loaded" @ "core/src/group/coordinator.rs",
    /// A coordinator could not read `__consumer_offsets` to load (a damaged batch): its
    /// log went offline and another replica's coordinator takes over (seed 361).
    CoordinatorLoadFailed = "group.coordinator-load-failed" @ "core/src/broker/coordinator_host.rs",
    /// Recovery cut a torn or corrupt tail from a segment after a crash.
    LogRecoveryTruncated = "log.recovery-truncated" @ "core/src/log/partition_log/recovery.rs",
    /// A batch failed its CRC on read.
    LogCrcMismatch = "log.crc-mismatch" @ "core/src/log/batch/header.rs",
    /// A compressed batch's records were decompressed (to check, place or decode it).
    LogDecompressed = "log.decompressed" @ "core/src/log/batch/walk.rs",
    /// Sometimes: a Raft candidate won an election holding entries past its commit index,
    /// all of older terms (its new no-op not yet appended): the state in which Raft's
    /// figure 8 (`commit-previous-term`) can commit an older term's entry by counting.
    RaftLeaderInheritsUncommitted = "raft.leader-inherits-uncommitted" @ "core/src/raft/node.rs",
    /// A Raft follower cut a conflicting suffix of its log (entries of a deposed leader's
    /// term that never committed).
    RaftFollowerTruncated = "raft.follower-truncated" @ "core/src/raft/node.rs",
    /// Sometimes: the controller shrank an ISR from at least min.insync.replicas members to
    /// fewer (a leader's proposal or a fencing): acks=all produces are refused until it
    /// grows back, and KIP-966's ELR starts to matter.
    IsrBelowMinInsync = "controller.isr-below-min-insync" @ "core/src/controller/machine.rs",
    /// The controller's unclean recovery manager (KIP-966) elected a leader for a
    /// partition none of whose ISR and ELR members could lead.
    UncleanRecovery = "controller.unclean-recovery" @ "core/src/controller/machine.rs",
}

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static HITS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Marks that the running code reached probe `p` (see [`probe!`](crate::probe!)).
#[inline]
pub fn hit(p: Probe) {
    if ON.with(Cell::get) {
        HITS.with(|h| {
            if let Some(n) = h.borrow_mut().get_mut(p as usize) {
                *n += 1;
            }
        });
    }
}

/// Hit counts of one recording, indexed like [`Probe::ALL`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeCounts(pub Vec<u64>);

impl ProbeCounts {
    /// (probe, hits) for every probe, hit or not, in report order.
    pub fn iter(&self) -> impl Iterator<Item = (Probe, u64)> + '_ {
        Probe::ALL
            .iter()
            .map(|&p| (p, self.0.get(p as usize).copied().unwrap_or(0)))
    }
}

/// A recording of the probes this thread hits, from [`record`] until [`Recording::finish`]
/// (or drop). Recordings do not nest: a second one on the same thread replaces the first.
pub struct Recording {
    _not_send: std::marker::PhantomData<*const ()>,
}

/// Starts recording this thread's probe hits.
pub fn record() -> Recording {
    HITS.with(|h| *h.borrow_mut() = vec![0; Probe::ALL.len()]);
    ON.with(|on| on.set(true));
    Recording {
        _not_send: std::marker::PhantomData,
    }
}

impl Recording {
    /// Stops recording and returns the counts.
    pub fn finish(self) -> ProbeCounts {
        ProbeCounts(HITS.with(|h| std::mem::take(&mut *h.borrow_mut())))
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        ON.with(|on| on.set(false));
    }
}

/// `probe!(FollowerTruncatedDivergent)`: mark a branch as reached (see the module doc).
#[macro_export]
macro_rules! probe {
    ($name:ident) => {
        $crate::probe::hit($crate::probe::Probe::$name)
    };
}

/// Whether this thread is recording probe hits (so a `sometimes!` condition is worth
/// evaluating).
#[inline]
pub fn recording() -> bool {
    ON.with(Cell::get)
}

/// `sometimes!(IsrBelowMinInsync, isr.len() < min_insync)`: the probe counts when the
/// condition holds here. The condition must be side-effect free: it is evaluated only while
/// a recording is on, so it can never change a run.
#[macro_export]
macro_rules! sometimes {
    ($name:ident, $cond:expr) => {
        if $crate::probe::recording() && $cond {
            $crate::probe::hit($crate::probe::Probe::$name)
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_dotted() {
        let mut names: Vec<&str> = Probe::ALL.iter().map(|p| p.name()).collect();
        assert!(names.iter().all(|n| n.contains('.')));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Probe::ALL.len());
    }

    /// Every probe's declared place marks it (`probe!(Name)` or `sometimes!(Name, ...)`),
    /// so the place a report prints for a never-hit probe is where to look.
    #[test]
    fn every_probe_is_marked_at_its_place() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        for &p in Probe::ALL {
            let path = format!("{root}/{}", p.place());
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: place {path}: {e}", p.name()));
            let name = format!("{p:?}");
            assert!(
                text.contains(&format!("probe!({name})"))
                    || text.contains(&format!("sometimes!({name},")),
                "{}: {} marks neither probe!({name}) nor sometimes!({name}, ...)",
                p.name(),
                p.place()
            );
        }
    }

    #[test]
    fn sometimes_counts_only_when_its_condition_holds_and_only_while_recording() {
        let mut evaluated = 0;
        let mut cond = |v: bool| {
            evaluated += 1;
            v
        };
        sometimes!(UncleanRecovery, cond(true));
        let rec = record();
        sometimes!(UncleanRecovery, cond(false));
        sometimes!(UncleanRecovery, cond(true));
        let counts = rec.finish();
        let got = counts.iter().find(|(q, _)| *q == Probe::UncleanRecovery);
        assert_eq!(got.map(|(_, n)| n), Some(1));
        assert_eq!(evaluated, 2, "not evaluated outside a recording");
    }

    #[test]
    fn hits_count_only_while_recording() {
        probe!(IsrShrinkProposed);
        let rec = record();
        probe!(IsrShrinkProposed);
        probe!(IsrShrinkProposed);
        probe!(LogCrcMismatch);
        let counts = rec.finish();
        let get = |p: Probe| counts.iter().find(|(q, _)| *q == p).unwrap().1;
        assert_eq!(get(Probe::IsrShrinkProposed), 2);
        assert_eq!(get(Probe::LogCrcMismatch), 1);
        assert_eq!(get(Probe::ElectionClean), 0);
        probe!(LogCrcMismatch);
        assert_eq!(record().finish().iter().map(|(_, n)| n).sum::<u64>(), 0);
    }
}
