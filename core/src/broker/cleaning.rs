//! The broker hosts the log cleaner: every `cleaner_interval` each hosted compacted log
//! gets up to `cleaner_steps_per_tick` bounded cleaner steps, below its high watermark and
//! last stable offset (a record not yet committed, or in an open transaction, is never
//! cleaned). Leaders and followers clean their own copies, as in Kafka.

use super::*;
use crate::log::{CleanerInput, CleanerStep};

impl<S: Storage + Clone> Broker<S> {
    /// Whether some hosted log is compacted (only then does the cleaner's timer exist, so
    /// a cluster without compacted topics runs exactly as before).
    pub(super) fn hosts_compacted(&self) -> bool {
        self.replicas
            .iter()
            .any(|(_, r)| r.log().config().compaction.is_some())
    }

    /// Gives every hosted log its topic's compaction settings (a log opened before the
    /// image named its topic, or whose topic's `cleanup.policy` changed).
    pub(super) fn sync_compaction(&mut self) {
        for (tp, r) in self.replicas.iter_mut() {
            let compaction = self
                .image
                .topic(&tp.topic)
                .and_then(|t| t.config.compaction());
            if r.log().config().compaction != compaction {
                r.log_mut().set_compaction(compaction);
            }
        }
    }

    pub(super) fn run_cleaners(&mut self, now: Nanos) {
        let now_ms = (now / 1_000_000) as i64 + self.config.wall_clock_at_zero_ms;
        let steps = self.config.cleaner_steps_per_tick;
        for (tp, r) in self.replicas.iter_mut() {
            if r.log().config().compaction.is_none() || r.log().is_failed() {
                continue;
            }
            let input = CleanerInput {
                now_ms,
                cleanable_below: r.high_watermark().min(r.last_stable_offset()),
            };
            let cleaner = self.cleaners.entry(tp.clone()).or_default();
            match cleaner.run(r.log_mut(), input, steps) {
                Ok(CleanerStep::Abandoned(why)) => {
                    tracing::debug!(%tp, %why, "log cleaning abandoned");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(%tp, error = %e, "log cleaning failed"),
            }
        }
    }

    /// The cleaner checkpoint of a hosted partition's log (tests, metrics).
    pub fn clean_state(&self, tp: &TopicPartition) -> Option<&crate::log::CleanState> {
        self.replicas.get(tp).map(|r| r.log().clean_state())
    }

    /// The cleaner of a hosted partition (tests, metrics).
    pub fn cleaner(&self, tp: &TopicPartition) -> Option<&crate::log::Cleaner> {
        self.cleaners.get(tp)
    }
}
