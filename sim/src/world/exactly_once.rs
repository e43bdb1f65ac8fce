//! The end of a txn run with pipelines: `txn-exactly-once` judged on the final committed
//! logs of the input and output topics and on the group's committed offsets, as the
//! partition leaders and the group coordinator hold them (`invariants/exactly_once.rs`).

use super::World;
use crate::invariants::exactly_once::{self, Classified, PipelineTruth};
use crate::invariants::TXN_EXACTLY_ONCE;
use crate::time::SimTime;
use crate::topic::TOPIC;
use crate::txn_pipeline::OUTPUT_TOPICS;
use skein_core::group::{coordinator_partition, CoordinatorPhase, CONSUMER_OFFSETS_TOPIC};
use skein_core::replica::ReplicaRole;
use skein_core::{NodeId, TopicPartition};
use std::collections::BTreeMap;

impl World {
    /// Judges exactly-once if the run has pipelines; else, or when the end state cannot be
    /// read (a partition without a leader, a group without an active coordinator, a log
    /// trimmed by retention), says why it was skipped.
    pub(super) fn judge_exactly_once(
        &mut self,
        now: SimTime,
        skipped: &mut BTreeMap<&'static str, String>,
    ) {
        if self.cfg.workload != crate::config::Workload::Txn || self.cfg.pipelines == 0 {
            skipped.insert(TXN_EXACTLY_ONCE, "no read-process-write pipelines".into());
            return;
        }
        match self.pipeline_truth() {
            Ok(truth) => {
                for detail in exactly_once::judge(&truth) {
                    self.checker.violation(TXN_EXACTLY_ONCE, now, detail);
                }
            }
            Err(why) => {
                skipped.insert(TXN_EXACTLY_ONCE, why);
            }
        }
    }

    fn pipeline_truth(&mut self) -> Result<PipelineTruth, String> {
        let mut t = PipelineTruth::default();
        for p in 0..self.cfg.partitions {
            let c = self.final_classified(&TopicPartition::new(TOPIC, p))?;
            t.input.insert(p, c);
            for topic in OUTPUT_TOPICS {
                let c = self.final_classified(&TopicPartition::new(topic, p))?;
                t.outputs.entry(topic.to_string()).or_default().insert(p, c);
            }
        }
        let gid = self.cfg.group_id.clone();
        let n = self
            .metadata_view()
            .and_then(|i| i.topic(CONSUMER_OFFSETS_TOPIC).map(|t| t.config.partitions))
            .ok_or("no __consumer_offsets at the end")?;
        let gp = coordinator_partition(&gid, n);
        let offsets_tp = TopicPartition::new(CONSUMER_OFFSETS_TOPIC, gp);
        // Transactional offsets with no marker: a pipeline transaction still completing.
        t.offsets_pending = !self.final_classified(&offsets_tp)?.open.is_empty();
        let leader = self.final_leader(&offsets_tp).expect("read above");
        let coordinator = (self.brokers.get(leader))
            .and_then(|s| s.machine.as_ref())
            .and_then(|b| b.group_coordinators())
            .and_then(|cs| cs.coordinator(gp))
            .filter(|c| matches!(c.phase(), CoordinatorPhase::Active { .. }))
            .ok_or_else(|| format!("the group's coordinator on broker {leader} is not active"))?;
        t.committed = coordinator
            .committed_offsets(&gid)
            .into_iter()
            .flatten()
            .filter(|(tp, _)| tp.topic == TOPIC)
            .map(|(tp, o)| (tp.partition, o))
            .collect();
        Ok(t)
    }

    /// The broker leading `tp` at the end: the one acting as leader at the highest epoch.
    fn final_leader(&self, tp: &TopicPartition) -> Option<NodeId> {
        self.brokers
            .iter()
            .filter_map(|(id, s)| {
                let v = s.machine.as_ref()?.replica_view(tp)?;
                (v.role == ReplicaRole::Leader).then_some((v.leader_epoch, id))
            })
            .max()
            .map(|(_, id)| id)
    }

    /// `tp`'s committed log (below its leader's high watermark) sorted by outcome.
    fn final_classified(&mut self, tp: &TopicPartition) -> Result<Classified, String> {
        let leader = self
            .final_leader(tp)
            .ok_or_else(|| format!("no leader of {tp} at the end"))?;
        let slot = self.brokers.get_mut(leader).expect("a leader's slot");
        let b = slot.machine.as_mut().expect("a leader is up");
        let view = b.replica_view(tp).expect("it leads the partition");
        if view.log_start_offset > 0 {
            return Err(format!("{tp}'s log starts at {}", view.log_start_offset));
        }
        let batches = b
            .read_records(tp, 0, view.high_watermark)
            .map_err(|e| format!("{tp} unreadable at the end: {e}"));
        // Reads for checks are not the node's I/O: charge nothing.
        let _ = slot.disk.take_latency();
        Ok(exactly_once::classify(&batches?))
    }
}
