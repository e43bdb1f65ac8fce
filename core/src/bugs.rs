//! Deliberate protocol bugs for the bug zoo: each flag re-introduces a known bug of the
//! replica, group, controller or Raft protocols so the simulator can demonstrate that it
//! finds it. All false by default. One place for every layer's switches: the replica, the
//! controller and the Raft quorum all read them from here.

use serde::{Deserialize, Serialize};

/// Every bug's name, as `--bug NAME` (simulator, node configuration, jepsen harness) spells
/// it, in the bug zoo's order.
pub const BUG_NAMES: &[&str] = &[
    "truncate-to-hw",
    "next-epoch-start",
    "unfenced-fetch",
    "ack-before-isr",
    "fsync-after-ack",
    "no-generation-fencing",
    "elect-out-of-isr",
    "no-elr",
    "stale-producer-epoch",
    "consumer-ignores-truncation",
    "vote-not-persisted",
    "commit-previous-term",
    "no-check-quorum",
    "unclean-shorter-log",
    "late-txn-marker",
    "unverified-txn-partition",
    "no-lso",
    "txn-offsets-visible-early",
    "no-txn-fencing",
];

/// A `--bug` name that is not in [`BUG_NAMES`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown bug {name:?} (known: {})", BUG_NAMES.join(", "))]
pub struct UnknownBug {
    pub name: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bugs {
    /// Pre-KIP-101: a replica that becomes a follower truncates its log to its high
    /// watermark instead of asking the leader where its log diverges.
    pub truncate_to_hw: bool,
    /// KIP-279's bug: when the leader does not know the follower's last epoch it answers
    /// with the start of its next epoch *as if it were the follower's epoch*, so the
    /// follower keeps a divergent suffix after a fast double failover.
    pub next_epoch_start: bool,
    /// Pre-KIP-320: fetches are checked neither against the leader epoch (no
    /// Fenced/UnknownLeaderEpoch; responses of any epoch accepted) nor against the epoch
    /// cache, so the leader trusts a divergent follower's fetch offset for the HW.
    pub unfenced_fetch: bool,
    /// The high watermark follows the leader's own log only: acks=all writes are
    /// acknowledged before the ISR has them.
    pub ack_before_isr: bool,
    /// Unsynced data counts: the leader uses its log end (not its flushed offset) for
    /// the high watermark and followers report their offset before fsyncing.
    pub fsync_after_ack: bool,
    /// The group coordinator checks neither the member id nor the generation of an
    /// OffsetCommit (nor of a Heartbeat): a zombie consumer whose session expired, or a
    /// member of an old generation, overwrites the offsets of the partition's new owner.
    pub no_generation_fencing: bool,
    /// The controller elects a replica from outside the ISR when no ISR member is
    /// eligible, although the topic does not allow unclean election, and reports it as a
    /// clean election (no `UncleanLeaderElection` event): acknowledged records the new
    /// leader lacks are silently lost.
    pub elect_out_of_isr: bool,
    /// The leader appends a batch whose producer epoch is older than the producer's
    /// current one (a fenced, zombie epoch) as if it were new, instead of answering
    /// `InvalidProducerEpoch`.
    pub stale_producer_epoch: bool,
    /// Pre-KIP-966: no eligible leader replicas. The controller keeps no ELR (so when the
    /// last ISR member cannot lead, nobody may) and the leader advances the high watermark
    /// even while its ISR is below `min.insync.replicas`.
    pub no_elr: bool,
    /// Pre-KIP-320 consumers: the reader's fetch cursor (`client::FetchCursor`) ignores the
    /// leader's `DivergingEpoch` answer, forgets its epoch and fetches the same position
    /// again unchecked, so after an unclean election truncated the log under it, it waits
    /// until the log grows past its position and silently skips what was written at the
    /// truncated offsets. A client-side bug: the simulator's consumers read the flag.
    pub consumer_ignores_truncation: bool,
    /// KIP-966's unclean recovery manager ranks the replicas' answers backwards (the lowest
    /// last epoch, then the shortest log) and elects that replica, though it checks
    /// Balanced's high-watermark rule against the right choice: a damaged or lagging copy
    /// leads and the records only the longer logs held are lost.
    #[serde(default)]
    pub unclean_shorter_log: bool,
    /// The controller quorum's Raft bugs (see [`crate::raft::RaftBugs`]). Only a quorum of
    /// controllers runs Raft: with a single controller they change nothing. All three are
    /// zoo rows (in [`BUG_NAMES`]): each fails a named scenario in the simulator
    /// (`raft-vote-forgotten`, `raft-figure-8`, `raft-leader-isolated`; docs/controller.md,
    /// "Bug flags"), and core's Raft tests catch them too.
    #[serde(default)]
    pub raft: crate::raft::RaftBugs,
    /// The transaction protocol's bugs (see [`crate::txn::TxnBugs`]).
    #[serde(default)]
    pub txn: crate::txn::TxnBugs,
}

impl Bugs {
    /// The flags named by `names` (each in [`BUG_NAMES`]) switched on.
    pub fn from_names<S: AsRef<str>>(names: &[S]) -> Result<Bugs, UnknownBug> {
        let mut b = Bugs::default();
        for n in names {
            *b.flag(n.as_ref()).ok_or_else(|| UnknownBug {
                name: n.as_ref().to_string(),
            })? = true;
        }
        Ok(b)
    }

    /// The flag behind a bug's name.
    fn flag(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "truncate-to-hw" => &mut self.truncate_to_hw,
            "next-epoch-start" => &mut self.next_epoch_start,
            "unfenced-fetch" => &mut self.unfenced_fetch,
            "ack-before-isr" => &mut self.ack_before_isr,
            "fsync-after-ack" => &mut self.fsync_after_ack,
            "no-generation-fencing" => &mut self.no_generation_fencing,
            "elect-out-of-isr" => &mut self.elect_out_of_isr,
            "no-elr" => &mut self.no_elr,
            "stale-producer-epoch" => &mut self.stale_producer_epoch,
            "consumer-ignores-truncation" => &mut self.consumer_ignores_truncation,
            "vote-not-persisted" => &mut self.raft.vote_not_persisted,
            "commit-previous-term" => &mut self.raft.commit_previous_term,
            "no-check-quorum" => &mut self.raft.no_check_quorum,
            "unclean-shorter-log" => &mut self.unclean_shorter_log,
            "late-txn-marker" => &mut self.txn.late_txn_marker,
            "unverified-txn-partition" => &mut self.txn.unverified_txn_partition,
            "no-lso" => &mut self.txn.no_lso,
            "txn-offsets-visible-early" => &mut self.txn.txn_offsets_visible_early,
            "no-txn-fencing" => &mut self.txn.no_txn_fencing,
            _ => return None,
        })
    }

    pub fn any(&self) -> bool {
        self.truncate_to_hw
            || self.next_epoch_start
            || self.unfenced_fetch
            || self.ack_before_isr
            || self.fsync_after_ack
            || self.no_generation_fencing
            || self.elect_out_of_isr
            || self.stale_producer_epoch
            || self.no_elr
            || self.consumer_ignores_truncation
            || self.unclean_shorter_log
            || self.raft.any()
            || self.txn.any()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_switches_exactly_its_own_flag() {
        for name in BUG_NAMES {
            let b = Bugs::from_names(&[name]).expect("a known name");
            assert!(b.any(), "{name} switched nothing on");
            let mut off = b;
            *off.flag(name).expect("known") = false;
            assert_eq!(
                off,
                Bugs::default(),
                "{name} switched on more than its flag"
            );
        }
        let e = Bugs::from_names(&["no-such-bug"]).unwrap_err();
        assert!(e.to_string().contains("no-such-bug") && e.to_string().contains("ack-before-isr"));
    }
}
