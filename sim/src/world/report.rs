//! The end of a run: the final audit, the liveness and group verdicts (or why they were
//! skipped), the history check, and the report.

use super::{Client, SimError, World};
use crate::client_step::Ctx;
use crate::fields::Fields;
use crate::group_client::SETTLE_BOUND;
use crate::group_invariants;
use crate::invariants;
use crate::report::SimReport;
use crate::time::SimTime;
use crate::topic::TOPIC;
use skein_core::TopicPartition;
use std::collections::{BTreeMap, BTreeSet};

/// What the clients did, summed at the end of a run.
#[derive(Default)]
struct ClientTotals {
    sends: u64,
    polled: u64,
    processed: u64,
    member_crashes: u64,
    txn: crate::report::TxnStats,
}

impl World {
    pub(super) fn finish(mut self) -> Result<SimReport, SimError> {
        self.finish_ref()
    }

    /// Disk work summed over the controller and every broker (their disks outlive restarts).
    pub(super) fn work_stats(&self) -> crate::report::WorkStats {
        let mut w = crate::report::WorkStats::default();
        let disks = self.brokers.values().map(|s| &s.disk);
        for d in disks.chain(self.controllers.values().map(|s| &s.disk)) {
            let ((appends, syncs), (reads, bytes)) = (d.op_counts(), d.read_counts());
            w.disk_appends += appends;
            w.disk_syncs += syncs;
            w.disk_reads += reads;
            w.disk_read_bytes += bytes;
        }
        w.history_events = self.history.len();
        w.history_reserved = self.history.estimate();
        w
    }

    pub(super) fn finish_ref(&mut self) -> Result<SimReport, SimError> {
        let now = self.q.now();
        self.audit(now);
        self.judge_skipped(now);
        let mut skipped: BTreeMap<&'static str, String> = BTreeMap::new();
        self.judge_txn(now, &mut skipped);
        let liveness_window = now.saturating_sub(self.healed_at);
        let judge_liveness = self.judge_liveness(now, liveness_window, &mut skipped);
        let totals = self.finish_clients(now);
        self.judge_exactly_once(now, &mut skipped);
        self.finish_group(now, judge_liveness, liveness_window, &mut skipped);
        let history_summary = self.check_history(now, judge_liveness, &mut skipped);
        self.history.finish_output()?;
        self.history_to_tracer();
        self.tracer.finish()?;
        let violations = self.checker.violations();
        for v in &violations {
            self.tracer.fields(v.at, Fields::Violation(v));
        }
        let verdicts = SimReport::verdicts_from(self.checker.counts(), &violations, &skipped);
        let acked = self.checker.acked_count();
        let read = self.checker.read_acked_count();
        let lost = self.checker.count(invariants::ACKED_WRITE_LOST);
        let (failed, indeterminate) = self.history.send_outcomes();
        Ok(SimReport {
            seed: self.cfg.seed,
            scenario: self.cfg.scenario_name.clone(),
            sim_time: now,
            events: self.tracer.events(),
            trace_hash: self.tracer.hash(),
            sends: totals.sends,
            acked,
            read,
            lost,
            failed,
            indeterminate,
            records_polled: totals.polled,
            group: self.group.as_ref().map(|g| crate::report::GroupStats {
                members: self.cfg.group_members,
                processed: totals.processed,
                commits: g.commits_acked,
                coordinator_loads: g.loads,
                member_crashes: totals.member_crashes,
            }),
            txn: (self.cfg.workload == crate::config::Workload::Txn).then_some(totals.txn),
            faults: self.fault_counts.clone(),
            atlas: self.atlas.entries(),
            net: self.net.stats.clone(),
            work: self.work_stats(),
            leader_changes: self.checker.leader_changes,
            unclean_elections: self.checker.unclean_elections,
            copies_destroyed: std::mem::take(&mut self.copies_destroyed),
            verdicts,
            violations,
            history_summary,
            probes: Vec::new(),
            client_restarts: self
                .restarted_from
                .iter()
                .map(|(&new, &original)| (new as u64 + 1, original as u64 + 1))
                .collect(),
            nemesis_faults: self
                .leader_nemesis
                .as_ref()
                .map(|n| n.struck.clone())
                .unwrap_or_default(),
        })
    }

    /// The transaction invariants (txn runs): each partition's final committed log, as its
    /// leader holds it, against what the transactional clients and consumers saw.
    fn judge_txn(&mut self, now: SimTime, skipped: &mut BTreeMap<&'static str, String>) {
        if !self.checker.txn_enabled() {
            for name in invariants::TXN_NAMES {
                skipped.insert(name, "not a txn workload run".into());
            }
            return;
        }
        for p in 0..self.cfg.partitions {
            let Some(leader) = self.leader_of(p) else {
                continue;
            };
            let tp = TopicPartition::new(TOPIC, p);
            let Some(view) = (self.brokers.get(leader))
                .and_then(|s| s.machine.as_ref())
                .and_then(|b| b.replica_view(&tp))
            else {
                continue;
            };
            self.with_reader(leader, &tp, |checker, read| {
                if let Ok(batches) = read(view.log_start_offset, view.high_watermark) {
                    checker.finish_txn_log(p, &batches, view.high_watermark);
                }
            });
        }
        self.checker.finish_txn(now);
    }

    /// consumer-skipped-records: each partition's final committed log, as its leader holds
    /// it, against the partition consumers and group members still running.
    fn judge_skipped(&mut self, now: SimTime) {
        let live: BTreeSet<u64> = (self.clients.iter().enumerate())
            .filter(|(_, cs)| {
                !cs.down
                    && !cs.retired
                    && matches!(cs.client, Client::Consumer(_) | Client::Member(_))
            })
            .map(|(i, _)| i as u64 + 1)
            .collect();
        for p in 0..self.cfg.partitions {
            let Some(leader) = self.leader_of(p) else {
                continue;
            };
            let tp = TopicPartition::new(TOPIC, p);
            let Some(view) = (self.brokers.get(leader))
                .and_then(|s| s.machine.as_ref())
                .and_then(|b| b.replica_view(&tp))
            else {
                continue;
            };
            self.with_reader(leader, &tp, |checker, read| {
                if let Ok(batches) = read(view.log_start_offset, view.high_watermark) {
                    let log = invariants::FinalLog {
                        partition: p,
                        leader_epoch: view.leader_epoch,
                        high_watermark: view.high_watermark,
                        batches: &batches,
                    };
                    checker.finish_skipped(now, &live, &log);
                }
            });
        }
    }

    /// Judges liveness and replication if the run ends with a quiet window long enough
    /// (no faults after the final heal); otherwise marks both skipped. Whether it judged.
    fn judge_liveness(
        &mut self,
        now: SimTime,
        liveness_window: SimTime,
        skipped: &mut BTreeMap<&'static str, String>,
    ) -> bool {
        let judge_liveness = !self.faults_after_heal
            && liveness_window >= self.cfg.liveness.min(self.cfg.duration / 4);
        if judge_liveness {
            let leaderless = self.leaderless();
            let destroyed = self.destroyed_copies(&leaderless);
            if !destroyed.is_empty() {
                self.note_destroyed(&destroyed, skipped);
            }
            let exempt: BTreeSet<u32> = destroyed.keys().copied().collect();
            self.checker
                .finish_liveness(now, &leaderless, &exempt, liveness_window);
            let stuck = self.stuck_followers();
            self.checker
                .finish_replication(now, &stuck, liveness_window);
        } else {
            for inv in [invariants::LIVENESS, invariants::UNDER_REPLICATED] {
                skipped.insert(inv, "faults continue until the end of the run".into());
            }
        }
        judge_liveness
    }

    /// Keeps the "all copies destroyed" findings for the report (`copies_destroyed`), and
    /// says why `liveness` did not judge those partitions.
    fn note_destroyed(
        &mut self,
        destroyed: &BTreeMap<u32, Vec<skein_core::Offset>>,
        skipped: &mut BTreeMap<&'static str, String>,
    ) {
        let lines: Vec<String> = destroyed
            .iter()
            .map(|(p, offsets)| {
                let shown: Vec<String> = offsets.iter().take(8).map(|o| o.to_string()).collect();
                let more = if offsets.len() > 8 { ", ..." } else { "" };
                format!(
                    "partition {p}: all copies of committed records destroyed by injected faults ({} acknowledged records: offsets {}{more})",
                    offsets.len(),
                    shown.join(", ")
                )
            })
            .collect();
        skipped.insert(invariants::LIVENESS, lines.join("; "));
        self.copies_destroyed = lines;
    }

    /// Lets every client finish (closing its open operations in the history) and sums
    /// what they did.
    fn finish_clients(&mut self, now: SimTime) -> ClientTotals {
        let mut t = ClientTotals::default();
        let mut out = std::mem::take(&mut self.out);
        for cs in self.clients.iter_mut() {
            let mut ctx = Ctx::new(
                now,
                &mut self.history,
                &mut self.work_rng,
                &mut out,
                &self.cfg,
            );
            match &mut cs.client {
                Client::Producer(p) => {
                    t.sends += p.sends;
                    p.finish(&mut ctx);
                }
                Client::Consumer(c) => {
                    t.polled += c.records;
                    c.finish(&mut ctx);
                }
                Client::Member(m) => {
                    t.processed += m.records;
                    t.member_crashes += m.crashes;
                    m.finish(&mut ctx);
                }
                Client::Txn(x) => {
                    t.sends += x.sends;
                    // Finished first: a transaction still open counts as unknown.
                    x.finish(&mut ctx);
                    t.txn.committed += x.committed;
                    t.txn.aborted += x.aborted;
                    t.txn.unknown += x.unknown;
                    t.txn.reinits += x.reinits;
                }
                Client::Pipeline(x) => {
                    x.finish(&mut ctx);
                    t.txn.pipeline_committed += x.committed;
                    t.txn.pipeline_aborted += x.aborted;
                    t.txn.pipeline_unknown += x.unknown;
                    t.txn.pipeline_processed += x.processed;
                    t.txn.pipeline_reinits += x.reinits;
                }
            }
        }
        t
    }

    /// The group checks' end of run (ownership liveness judged like the cluster's: only
    /// when the run ends with a quiet window longer than the rebalance bound).
    fn finish_group(
        &mut self,
        now: SimTime,
        judge_liveness: bool,
        liveness_window: SimTime,
        skipped: &mut BTreeMap<&'static str, String>,
    ) {
        match self.group.as_mut() {
            Some(g) => {
                let bound = SETTLE_BOUND;
                let settled = (judge_liveness && liveness_window > bound).then_some(self.healed_at);
                if settled.is_none() {
                    skipped.insert(
                        group_invariants::GROUP_UNOWNED,
                        "no quiet window longer than the rebalance bound at the end".into(),
                    );
                }
                g.finish(&mut self.checker, now, settled, bound);
            }
            None => {
                for name in group_invariants::NAMES {
                    skipped.insert(name, "no group members".into());
                }
            }
        }
    }

    /// Checks the client history with `skein-jepsen` (final reads only if liveness was
    /// judged and held); its summary if it found anything.
    fn check_history(
        &mut self,
        now: SimTime,
        judge_liveness: bool,
        skipped: &mut BTreeMap<&'static str, String>,
    ) -> Option<String> {
        if !self.cfg.check_history {
            skipped.insert(invariants::HISTORY, "--no-history-check".into());
            return None;
        }
        let final_reads = judge_liveness && self.checker.count(invariants::LIVENESS) == 0;
        let report = self.history.check(final_reads)?;
        if report.valid {
            return None;
        }
        let found: Vec<String> = report
            .found()
            .iter()
            .map(|k| format!("{k} x{}", report.count(*k)))
            .collect();
        self.checker
            .history_failed(now, format!("skein-jepsen found {}", found.join(", ")));
        Some(report.to_string())
    }
}
