//! Log compaction's settings and its durable state: the cleaner checkpoint, which says how
//! far a log has been cleaned (below that point offsets may have gaps) and when each
//! cleaned range was first cleaned (the start of its tombstones' `delete.retention.ms`).
//! The guarantees and how they are checked: docs/compaction.md.

use crate::types::{Offset, TimestampMs};

/// The log-level compaction settings (from the topic's `cleanup.policy` and friends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactionConfig {
    /// Kafka's `delete.retention.ms`: a tombstone is removed only this long after the
    /// cleaning that first saw it.
    pub delete_retention_ms: i64,
    /// Kafka's `min.compaction.lag.ms`: a segment holding a record younger than this is
    /// not cleaned.
    pub min_compaction_lag_ms: i64,
    /// Kafka's `min.cleanable.dirty.ratio` in thousandths: cleaning starts once the
    /// uncleaned bytes are at least this share of the cleanable bytes.
    pub min_cleanable_dirty_ratio_permille: u16,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        Self {
            delete_retention_ms: 24 * 3600 * 1000,
            min_compaction_lag_ms: 0,
            min_cleanable_dirty_ratio_permille: 500,
        }
    }
}

/// The cleaner checkpoint's file name, in the log's directory.
pub(crate) const CLEANER_CHECKPOINT: &str = "cleaner-offset-checkpoint";

/// What the cleaner checkpoint holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanState {
    /// Every offset below it has been through the cleaner (Kafka's first dirty offset).
    /// Offsets below it may be missing (compacted away); at and above it the log is
    /// dense, so a gap there is damage.
    pub clean_point: Offset,
    /// `(end, first_cleaned_ms)`, ascending by `end`: the records below `end` (and at or
    /// above the previous entry's `end`) were first cleaned at `first_cleaned_ms`. A
    /// tombstone in that range may be dropped once `now >= first_cleaned_ms +
    /// delete.retention.ms`.
    pub horizons: Vec<(Offset, TimestampMs)>,
}

impl CleanState {
    /// When the record at `offset` was first cleaned (None: not yet).
    pub fn first_cleaned(&self, offset: Offset) -> Option<TimestampMs> {
        let i = self.horizons.partition_point(|(end, _)| *end <= offset);
        self.horizons.get(i).map(|(_, ms)| *ms)
    }

    /// Records a cleaning at `now_ms` that brought the clean point to `end`; ranges whose
    /// tombstones all expired by `expired_before` are merged, so the list stays short.
    pub fn cleaned(&mut self, end: Offset, now_ms: TimestampMs, expired_before: TimestampMs) {
        if self.horizons.last().is_none_or(|h| h.0 < end) {
            self.horizons.push((end, now_ms));
        }
        self.clean_point = self.clean_point.max(end);
        // Adjacent entries that have both expired say the same thing: "removable".
        let mut merged: Vec<(Offset, TimestampMs)> = Vec::with_capacity(self.horizons.len());
        for &(e, ms) in &self.horizons {
            match merged.last_mut() {
                Some(last) if last.1 < expired_before && ms < expired_before => {
                    *last = (e, last.1.max(ms));
                }
                _ => merged.push((e, ms)),
            }
        }
        self.horizons = merged;
        debug_assert!(self.horizons.windows(2).all(|w| w[0].0 < w[1].0));
        debug_assert!(self.horizons.last().is_none_or(|h| h.0 <= self.clean_point));
    }

    /// The clean point drops to `to` (a truncation): what lay above is gone.
    pub fn lower(&mut self, to: Offset) {
        if self.clean_point <= to {
            return;
        }
        self.clean_point = to;
        let keep = self.horizons.partition_point(|(end, _)| *end <= to);
        let cut = self.horizons.get(keep).map(|&(_, ms)| (to, ms));
        self.horizons.truncate(keep);
        if let Some(c) = cut.filter(|c| self.horizons.last().is_none_or(|l| l.0 < c.0)) {
            self.horizons.push(c);
        }
    }

    /// A gap `[from, to)` in the data is allowed: it lies below the clean point.
    pub fn gap_allowed(&self, to: Offset) -> bool {
        to <= self.clean_point
    }

    /// Text form: `v1`, `clean <offset>`, then `horizon <end> <ms>` lines.
    pub fn encode(&self) -> Vec<u8> {
        let mut s = format!("v1\nclean {}\n", self.clean_point);
        for (end, ms) in &self.horizons {
            s.push_str(&format!("horizon {end} {ms}\n"));
        }
        s.into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
        let mut lines = text.lines();
        if lines.next() != Some("v1") {
            return Err("missing version line v1".into());
        }
        let clean = lines
            .next()
            .and_then(|l| l.strip_prefix("clean "))
            .and_then(|v| v.parse().ok())
            .ok_or("missing clean line")?;
        let mut st = Self {
            clean_point: clean,
            horizons: Vec::new(),
        };
        for l in lines {
            let mut p = l.split(' ');
            let (Some("horizon"), Some(e), Some(ms), None) =
                (p.next(), p.next(), p.next(), p.next())
            else {
                return Err(format!("bad line {l:?}"));
            };
            let e: Offset = e.parse().map_err(|_| format!("bad offset in {l:?}"))?;
            let ms: TimestampMs = ms.parse().map_err(|_| format!("bad time in {l:?}"))?;
            if st.horizons.last().is_some_and(|h| h.0 >= e) || e > clean {
                return Err(format!("horizon {l:?} out of order"));
            }
            st.horizons.push((e, ms));
        }
        Ok(st)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_round_trips_and_rejects_disorder() {
        let mut s = CleanState::default();
        s.cleaned(10, 1_000, 0);
        s.cleaned(25, 2_000, 0);
        assert_eq!(CleanState::decode(&s.encode()), Ok(s.clone()));
        assert_eq!(s.first_cleaned(3), Some(1_000));
        assert_eq!(s.first_cleaned(10), Some(2_000));
        assert_eq!(s.first_cleaned(25), None);
        assert!(CleanState::decode(b"v1\nclean 5\nhorizon 9 1\n").is_err());
        assert!(CleanState::decode(b"v2\nclean 5\n").is_err());
    }

    #[test]
    fn expired_horizons_merge_and_lowering_cuts() {
        let mut s = CleanState::default();
        s.cleaned(10, 1_000, 0);
        s.cleaned(20, 2_000, 0);
        s.cleaned(30, 9_000, 5_000);
        // The first two expired before 5_000: one entry keeps the later time.
        assert_eq!(s.horizons, vec![(20, 2_000), (30, 9_000)]);
        s.lower(25);
        assert_eq!(s.clean_point, 25);
        assert_eq!(s.horizons, vec![(20, 2_000), (25, 9_000)]);
        s.lower(5);
        assert_eq!(s.horizons, vec![(5, 2_000)]);
        assert!(s.gap_allowed(5) && !s.gap_allowed(6));
    }
}
