//! The replication-state invariants of the TLA+ Kafka specification
//! (hachikuji/kafka-specification: `LeaderInIsr`, `StrongIsr` in KafkaReplication.tla and
//! Kip320.tla; `HighWatermarkRangeOk` in later versions), and how the committed log is
//! re-based after an unclean election. The world feeds them from its audits: every replica
//! of every topic, plus the controller's partition states.

use super::{part, records_in, ByOffset, Checker, LogReader, LEADER_IN_ISR, STRONG_ISR, VALID_HW};
use crate::time::SimTime;
use skein_core::replica::{ReplicaRole, ReplicaView};
use skein_core::{NodeId, Offset, TopicPartition};

impl Checker {
    /// Starts an audit pass: forgets the previous pass's leader HWs.
    pub fn begin_audit(&mut self) {
        self.presumed_hw.clear();
    }

    /// LeaderInIsr, at the controller: the leader it names for `tp` is in the ISR it names.
    pub fn leader_in_isr(
        &mut self,
        now: SimTime,
        tp: &TopicPartition,
        leader: Option<NodeId>,
        isr: &[NodeId],
    ) {
        if let Some(l) = leader.filter(|l| !isr.contains(l)) {
            let d = format!(
                "partition {}: the controller names leader {l} outside its ISR {isr:?}",
                part(tp)
            );
            self.violate(LEADER_IN_ISR, now, d);
        }
    }

    /// HighWatermarkRangeOk: a replica's HW is never past its log end.
    pub(super) fn check_hw_range(&mut self, now: SimTime, broker: NodeId, view: &ReplicaView) {
        if view.high_watermark > view.log_end_offset {
            let d = format!(
                "partition {}: broker {broker} ({:?}, epoch {}) has its HW {} past its log end {}",
                part(&view.tp),
                view.role,
                view.leader_epoch,
                view.high_watermark,
                view.log_end_offset
            );
            self.violate(VALID_HW, now, d);
        }
    }

    /// The offset below which `view`'s log is compared with the committed log: its HW
    /// (within its log), but nothing while an unclean leader's log it holds has not been
    /// reconciled yet, and only below the lowest departure point of the unclean elections
    /// whose leader's log it has not followed yet.
    pub(super) fn comparable_below(&self, view: &ReplicaView) -> Offset {
        let hw = view.high_watermark.min(view.log_end_offset);
        let holds = |e| view.latest_log_epoch.is_some_and(|l| l >= e);
        if let Some(&(e, _)) = self.unclean_pending.get(&view.tp) {
            if holds(e) {
                return 0;
            }
        }
        hw.min(self.unfollowed_floor(view))
    }

    /// After an unclean election, the first audited replica that holds the new leader's
    /// log (the leader itself, or a follower that truncated to it) fixes where that log
    /// departs from the committed log: the first committed offset below the leader's epoch
    /// marker that it does not hold identically. Committed records from there on are
    /// forgotten (the price of unclean election: acked-write-lost reports acknowledged
    /// ones), every replica is re-verified from there, and replicas must then converge on
    /// the new log. Judging from the epoch marker instead would flag the deposed leader's
    /// unacknowledged tail that an unclean leader may hold below it as divergence.
    pub(super) fn reconcile_unclean(
        &mut self,
        _broker: NodeId,
        view: &ReplicaView,
        read: LogReader<'_>,
    ) {
        let tp = &view.tp;
        let Some(&(e, marker)) = self.unclean_pending.get(tp) else {
            return;
        };
        if view.latest_log_epoch.is_none_or(|l| l < e) {
            return;
        }
        let lo = view.log_start_offset;
        let hi = marker.min(view.log_end_offset);
        let held = ByOffset::new(if hi > lo {
            match read(lo, hi) {
                Ok(batches) => records_in(&batches, lo, hi)
                    .into_iter()
                    .map(|(o, d, _)| (o, d))
                    .collect(),
                // Unreadable now: the next audit of such a replica tries again.
                Err(_) => return,
            }
        } else {
            Vec::new()
        });
        let st = self.partition_mut(tp);
        let departs = st
            .committed
            .range(lo, hi)
            .find(|(o, c)| held.get(*o) != Some(**c))
            .map_or(hi, |(o, _)| o);
        st.committed.truncate(departs);
        for v in st.verified.values_mut() {
            *v = (*v).min(departs);
        }
        self.unclean_floor
            .entry(tp.clone())
            .or_default()
            .push((e, departs));
        self.unclean_pending.remove(tp);
    }

    /// LeaderInIsr on the replica side, and the HW that bounds strong-isr this pass. A
    /// replica still holding the log from before the last unclean election is left out of
    /// strong-isr: its HW covers records that election forfeited.
    pub(super) fn note_presumed_leader(
        &mut self,
        now: SimTime,
        broker: NodeId,
        view: &ReplicaView,
    ) {
        let tp = &view.tp;
        if !view.isr.contains(&broker) {
            let d = format!(
                "partition {}: broker {broker} leads at epoch {} with itself outside its ISR {:?}",
                part(tp),
                view.leader_epoch,
                view.isr
            );
            self.violate(LEADER_IN_ISR, now, d);
        }
        // Deposed by an unclean election whose leader has not taken office yet: the
        // controller's ISR is that election's, which need not hold what this epoch
        // committed (from the leader's first audit on, `comparable_below` says how much).
        if self
            .unclean
            .iter()
            .any(|(t, e)| t == tp && view.leader_epoch < *e)
        {
            return;
        }
        let hw = self.comparable_below(view);
        let best = self.presumed_hw.entry(tp.clone()).or_insert((broker, hw));
        if hw > best.1 {
            *best = (broker, hw);
        }
    }

    /// StrongIsr: `view` is a replica of a broker in the controller's ISR for its
    /// partition; it must hold, at every offset below the highest HW of a replica presuming
    /// leadership in this pass, the record that replica holds. Below its own HW that is
    /// replica-divergence's check (`verified`); from there up to the leader's HW its log is
    /// read and compared with the committed log. Unreadable logs (injected read errors, a
    /// corrupt segment) are skipped until they read again, and so is a copy whose log went
    /// offline with a corrupt batch (`view.log_corrupt`), even where the damage made it cut
    /// its log below the HW: such a copy takes no role, serves and counts nothing, and is
    /// repaired only once the controller has taken it out of the ISR and the ELR, so an
    /// election that picks it meanwhile costs availability, not records (seed 2010: a bit
    /// flip found when a follower truncated left it in the ISR for 0.3 s with its log cut
    /// below the HW, until the shrink committed).
    pub fn strong_isr(
        &mut self,
        now: SimTime,
        broker: NodeId,
        view: &ReplicaView,
        read: LogReader<'_>,
    ) {
        let tp = &view.tp;
        if view.role == ReplicaRole::Leader || view.log_corrupt {
            return;
        }
        let Some(&(leader, bound)) = self.presumed_hw.get(tp) else {
            return;
        };
        if leader == broker {
            return;
        }
        let bound = bound.min(self.stale_bound(view));
        let from = self.verified(broker, tp).max(view.log_start_offset);
        if bound <= from {
            return;
        }
        if view.log_end_offset < bound {
            let d = format!(
                "partition {}: ISR member {broker} ends at {}, below leader {leader}'s HW {bound}",
                part(tp),
                view.log_end_offset
            );
            self.violate(STRONG_ISR, now, d);
            return;
        }
        let Ok(batches) = read(from, bound) else {
            return;
        };
        let held = ByOffset::new(
            records_in(&batches, from, bound)
                .into_iter()
                .map(|(o, d, _)| (o, d))
                .collect(),
        );
        let Some(st) = self.partition(tp) else {
            return;
        };
        let bad: Vec<Offset> = st
            .committed
            .range(from, bound)
            .filter(|(o, c)| held.get(*o) != Some(**c))
            .map(|(o, _)| o)
            .collect();
        if let Some(o) = bad.first() {
            let d = format!(
                "partition {}: ISR member {broker} lacks leader {leader}'s record at offset {o} below its HW {bound} ({} offsets)",
                part(tp),
                bad.len()
            );
            self.violate(STRONG_ISR, now, d);
        }
    }

    /// For a replica that has not yet followed an unclean leader (or while the last one's
    /// log is not reconciled): only below the departure point is it comparable.
    fn stale_bound(&self, view: &ReplicaView) -> Offset {
        let holds = |e| view.latest_log_epoch.is_some_and(|l| l >= e);
        if let Some(&(e, _)) = self.unclean_pending.get(&view.tp) {
            if holds(e) {
                return 0;
            }
        }
        self.unfollowed_floor(view)
    }

    /// The lowest departure point of the unclean leaders `view` has not followed yet (whose
    /// epoch its log does not reach): below it, its log is still comparable.
    fn unfollowed_floor(&self, view: &ReplicaView) -> Offset {
        let holds = |e| view.latest_log_epoch.is_some_and(|l| l >= e);
        self.unclean_floor
            .get(&view.tp)
            .into_iter()
            .flatten()
            .filter(|(e, _)| !holds(*e))
            .map(|(_, floor)| *floor)
            .min()
            .unwrap_or(Offset::MAX)
    }
}
