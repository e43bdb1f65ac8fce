//! Follower side of a replica: pulling from the leader, appending what it returns,
//! truncating exactly the divergent suffix when the leader says the logs diverge
//! (KIP-101/279/320), and tracking the leader's high watermark.

use super::{
    now_ms, Event, LogFailure, Replica, ReplicaConfig, ReplicaEffect, ReplicaLog, RoleState,
};
use crate::log::verify_crc;
use crate::message::*;
use crate::types::{LeaderEpoch, Nanos, NodeId, Offset, PartitionEpoch};

#[derive(Clone, Debug)]
pub(crate) struct InFlight {
    pub correlation: u64,
    pub sent_at: Nanos,
}

pub(crate) struct FollowerState {
    pub leader: NodeId,
    pub in_flight: Option<InFlight>,
    /// Do not fetch before this time (backoff after an empty answer or an error).
    pub retry_at: Nanos,
}

impl FollowerState {
    pub fn next_timeout(&self, cfg: &ReplicaConfig) -> Option<Nanos> {
        Some(match &self.in_flight {
            Some(f) => f.sent_at + cfg.fetch_timeout + cfg.fetch_max_wait,
            None => self.retry_at,
        })
    }
}

impl<L: ReplicaLog> Replica<L> {
    /// This broker follows `leader` at `epoch` (None: the partition has no leader).
    /// No truncation happens here: the first fetch finds out where the logs diverge.
    pub fn become_follower(
        &mut self,
        now: Nanos,
        leader: Option<NodeId>,
        epoch: LeaderEpoch,
        partition_epoch: PartitionEpoch,
    ) {
        let same_leader = match (&self.role, leader) {
            (RoleState::Follower(f), Some(l)) => f.leader == l,
            (RoleState::Offline, None) => true,
            _ => false,
        };
        if epoch == self.leader_epoch && same_leader {
            self.partition_epoch = self.partition_epoch.max(partition_epoch);
            return;
        }
        if matches!(self.role, RoleState::Leader(_)) {
            self.release_parked();
            // Deposed: whatever is waiting for the HW can no longer be acknowledged here.
            self.fail_waiting(ProduceError::NotLeader {
                leader,
                leader_epoch: epoch,
            });
        }
        self.leader_epoch = epoch;
        self.partition_epoch = partition_epoch;
        if self.config.bugs.truncate_to_hw {
            let (leo, hw) = (self.log.log_end_offset(), self.high_watermark);
            if hw < leo {
                self.truncate(hw, leo);
            }
        }
        self.role = match leader {
            Some(l) => RoleState::Follower(FollowerState {
                leader: l,
                in_flight: None,
                retry_at: now,
            }),
            None => RoleState::Offline,
        };
        let tp = self.tp.clone();
        self.event(Event::BecameFollower { tp, leader, epoch });
        self.follower_tick(now);
        debug_assert!(!matches!(self.role, RoleState::Leader(_)) && self.leader_epoch == epoch);
    }

    fn truncate(&mut self, to: Offset, from: Offset) {
        let end_before = self.log.log_end_offset();
        match self.log.truncate_to(to) {
            Ok(()) => {
                let (hw, end) = (self.high_watermark, self.log.log_end_offset());
                debug_assert!(end <= end_before, "a truncation grew the log");
                self.high_watermark = hw.min(end);
                let tp = self.tp.clone();
                self.event(Event::Truncated { tp, from, to });
                if end < to && end < hw {
                    // `truncate_to` met a damaged batch below the HW and cut there: this
                    // copy lost committed records. Offline, as after a failed read, so the
                    // broker reports the damage and the controller takes the copy out of
                    // the ISR (it could be elected without them otherwise); it refetches
                    // once repaired. Before, it stayed in the ISR with a shorter log (seed
                    // 0 of sim/tests/seeds.rs `bit_flips_are_caught_never_served`).
                    let reason = format!("a damaged batch at {end} cut the log below HW {hw}");
                    self.fail_log("truncate", LogFailure(reason, Some(end)));
                }
            }
            Err(e) => self.log_error("truncate", e),
        }
    }

    /// The leader's log starts past this follower's log end (retention deleted what it
    /// still needed): nothing it holds can be continued, so it empties its log and starts
    /// again at the leader's log start, as Kafka does on `OffsetOutOfRange`. The leader
    /// deleted everything below that start on purpose (retention), so this copy's older
    /// records are not needed by anyone; it is never in the ISR while this far behind.
    fn reset_to_leader_start(&mut self, start: Offset) {
        let from = self.log.log_end_offset();
        match self.log.truncate_fully_and_start_at(start) {
            Ok(()) => {
                debug_assert_eq!(
                    self.log.log_end_offset(),
                    start,
                    "the reset log ends at its start"
                );
                self.high_watermark = start;
                let tp = self.tp.clone();
                self.event(Event::LogReset {
                    tp,
                    from,
                    to: start,
                });
            }
            Err(e) => self.log_error("reset to the leader's log start", e),
        }
    }

    /// Send a fetch if none is outstanding and no backoff is running.
    pub(crate) fn follower_tick(&mut self, now: Nanos) {
        let fetch_timeout = self.config.fetch_timeout + self.config.fetch_max_wait;
        let backoff = self.config.fetch_backoff;
        let RoleState::Follower(f) = &mut self.role else {
            return;
        };
        if let Some(inf) = &f.in_flight {
            if now < inf.sent_at + fetch_timeout {
                return;
            }
            f.in_flight = None; // lost; fetch again
        }
        if now < f.retry_at {
            return;
        }
        let leader = f.leader;
        // The fetch offset we report counts towards the HW as durable: fsync first.
        if !self.config.bugs.fsync_after_ack
            && self.log.flushed_offset() < self.log.log_end_offset()
            && !self.flush_log()
        {
            if let RoleState::Follower(f) = &mut self.role {
                f.retry_at = now + backoff;
            }
            return;
        }
        let correlation = self.correlation();
        let req = FetchRequest {
            correlation,
            tp: self.tp.clone(),
            replica_id: self.me,
            current_leader_epoch: self.leader_epoch,
            fetch_offset: self.log.log_end_offset(),
            last_fetched_epoch: self.log.latest_epoch(),
            max_bytes: self.config.fetch_max_bytes,
            high_watermark: self.high_watermark,
            max_wait: self.config.fetch_max_wait,
        };
        if let RoleState::Follower(f) = &mut self.role {
            f.in_flight = Some(InFlight {
                correlation,
                sent_at: now,
            });
        }
        self.emit(ReplicaEffect::Send {
            to: Address::Node(leader),
            msg: Message::Fetch(req),
        });
    }

    /// The leader answered a fetch.
    pub fn handle_fetch_response(&mut self, now: Nanos, from: NodeId, resp: FetchResponse) {
        let backoff = self.config.fetch_backoff;
        let RoleState::Follower(f) = &mut self.role else {
            return;
        };
        let expected = f.in_flight.as_ref().map(|i| i.correlation);
        if expected != Some(resp.correlation) || from != f.leader {
            return; // an answer to a fetch we gave up on, or from an old leader
        }
        if !self.config.bugs.unfenced_fetch && resp.leader_epoch != self.leader_epoch {
            f.in_flight = None;
            f.retry_at = now + backoff;
            return;
        }
        f.in_flight = None;
        let mut retry_at = now;
        match resp.result {
            FetchResult::Records {
                records,
                high_watermark,
                log_end_offset,
                ..
            } => {
                let mut appended = false;
                // Headers are read before the CRC is checked: a damaged one can only skip a
                // batch or stop here; the append checks every batch it writes.
                for b in records.iter() {
                    let (h, bytes) = match b {
                        Ok(b) => b,
                        Err(e) => {
                            self.log_error("append as follower", e.into());
                            break;
                        }
                    };
                    let leo = self.log.log_end_offset();
                    if h.next_offset() <= leo {
                        continue; // already have it (duplicate delivery)
                    }
                    // A compacted leader's log has gaps: the copy keeps them (the log
                    // makes the gap legal before the batch lands).
                    if h.base_offset != leo && !(h.base_offset > leo && self.log.compacted()) {
                        tracing::warn!(tp = %self.tp, base = h.base_offset, leo, "fetched batch does not start at log end");
                        break;
                    }
                    // I1: epochs only grow along the log and never pass the leader's (for a
                    // batch that is intact: a damaged one is refused by the append).
                    debug_assert!(
                        self.config.bugs.any()
                            || verify_crc(bytes).is_err()
                            || (h.partition_leader_epoch <= self.leader_epoch
                                && self
                                    .log
                                    .latest_epoch()
                                    .is_none_or(|e| e <= h.partition_leader_epoch)),
                        "{}: batch epoch {} out of order (log {:?}, leader {})",
                        self.tp,
                        h.partition_leader_epoch,
                        self.log.latest_epoch(),
                        self.leader_epoch
                    );
                    match self.log.append_encoded_as_follower(bytes, now_ms(now)) {
                        Ok(()) => appended = true,
                        Err(e) => {
                            self.log_error("append as follower", e);
                            break;
                        }
                    }
                }
                let leo = self.log.log_end_offset();
                self.high_watermark = self.high_watermark.max(high_watermark.min(leo));
                // An answer without records from a leader that holds fetches: it moved our
                // HW, or the wait ran out. The next fetch, carrying that HW, will be held
                // until there is data, so send it now: a backoff here left a batch that
                // arrived meanwhile waiting up to `fetch_backoff` for this follower
                // (issue 22). Without holding (`fetch_max_wait` 0) or when we are behind
                // and still got nothing, back off as before so an idle pair does not spin.
                let held = self.config.fetch_max_wait > 0 && log_end_offset <= leo;
                if !appended && !held {
                    retry_at = now + backoff;
                }
            }
            FetchResult::Diverging {
                epoch, end_offset, ..
            } => {
                let leo = self.log.log_end_offset();
                let target = match epoch {
                    None => end_offset.min(leo),
                    Some(e) => match self.log.end_offset_for_epoch(e) {
                        // Same epoch on both sides: the logs agree up to the smaller end.
                        Some((fe, fend)) if fe == e => end_offset.min(fend).min(leo),
                        // Our largest epoch <= e is older: drop everything after it and
                        // ask again with that epoch (converges in a few round trips).
                        Some((_, fend)) => {
                            crate::probe!(FollowerTruncateOlderEpoch);
                            fend.min(leo)
                        }
                        None => end_offset.min(leo),
                    },
                };
                if target < leo {
                    crate::probe!(FollowerTruncatedDivergent);
                    let hw = self.high_watermark;
                    if target < hw {
                        crate::probe!(FollowerTruncatedBelowHw);
                        // Below the HW means losing committed records. Only a leader elected
                        // from outside the ISR can lack them: allowed when the topic permits
                        // unclean election, and reported; otherwise a protocol bug.
                        debug_assert!(
                            self.config.bugs.any() || self.config.unclean_leader_election,
                            "{}: truncating to {target} below HW {hw}",
                            self.tp,
                        );
                        tracing::warn!(tp = %self.tp, hw, to = target, "truncating below the high watermark (unclean leader)");
                        let tp = self.tp.clone();
                        self.event(Event::TruncatedBelowHighWatermark {
                            tp,
                            high_watermark: hw,
                            to: target,
                        });
                    }
                    self.truncate(target, leo);
                } else if target == leo {
                    // Nothing to drop but the leader still disagrees: avoid a hot loop.
                    retry_at = now + backoff;
                }
            }
            FetchResult::Error(FetchError::OffsetOutOfRange {
                log_start_offset, ..
            }) if log_start_offset > self.log.log_end_offset() => {
                self.reset_to_leader_start(log_start_offset);
            }
            FetchResult::Error(e) => {
                tracing::debug!(tp = %self.tp, error = %e, "fetch refused");
                retry_at = now + backoff;
            }
        }
        if let RoleState::Follower(f) = &mut self.role {
            f.retry_at = retry_at;
        }
        self.follower_tick(now);
    }
}
