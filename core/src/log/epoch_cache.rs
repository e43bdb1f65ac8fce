//! The leader-epoch cache: for each leader epoch the offset its first batch got (KIP-101 /
//! KIP-279). Followers use it to find where their log diverges from the leader's.

use super::checkpoint;
use crate::types::{LeaderEpoch, Offset};

/// One epoch and the first offset written in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct EpochEntry {
    pub epoch: LeaderEpoch,
    pub start_offset: Offset,
}

/// Entries strictly increasing in both epoch and start offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EpochCache {
    entries: Vec<EpochEntry>,
}

const KIND: &str = "leader-epoch-checkpoint";

impl EpochCache {
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.entries.last().map(|e| e.epoch)
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// KIP-279 lookup: for `requested`, the largest epoch `<= requested` in the cache and
    /// the start offset of the next epoch after it, or `log_end` if it is the latest.
    /// If `requested` is older than every cached epoch, returns `(requested, first start
    /// offset)` (as Kafka does: the requester must truncate to where this log begins).
    /// `None` only when the cache is empty.
    pub fn end_offset_for_epoch(
        &self,
        requested: LeaderEpoch,
        log_end: Offset,
    ) -> Option<(LeaderEpoch, Offset)> {
        let first = self.entries.first()?;
        // Index of the first entry with epoch > requested.
        let i = self.entries.partition_point(|e| e.epoch <= requested);
        if i == 0 {
            return Some((requested, first.start_offset));
        }
        let floor = self.entries[i - 1];
        let end = self.entries.get(i).map_or(log_end, |e| e.start_offset);
        Some((floor.epoch, end))
    }

    /// The epoch of the batch holding `offset` (the last entry starting at or before it),
    /// if the cache covers it.
    pub fn epoch_at(&self, offset: Offset) -> Option<LeaderEpoch> {
        let i = self.entries.partition_point(|e| e.start_offset <= offset);
        i.checked_sub(1).map(|i| self.entries[i].epoch)
    }

    /// Records that a batch of `epoch` starts at `offset`. Returns true if a new entry was
    /// added (so the checkpoint must be rewritten). Older epochs are ignored (the log
    /// rejects them before calling this).
    pub(crate) fn assign(&mut self, epoch: LeaderEpoch, offset: Offset) -> bool {
        match self.entries.last() {
            Some(last) if epoch <= last.epoch => false,
            Some(last) if offset < last.start_offset => false,
            _ => {
                // An epoch whose start equals the previous one's start replaces it: the
                // previous epoch then wrote nothing.
                if self
                    .entries
                    .last()
                    .is_some_and(|l| l.start_offset == offset)
                {
                    self.entries.pop();
                }
                self.entries.push(EpochEntry {
                    epoch,
                    start_offset: offset,
                });
                true
            }
        }
    }

    /// Drops entries starting at or after `end` (the log was truncated to `end`).
    pub(crate) fn truncate_from_end(&mut self, end: Offset) -> bool {
        let keep = self.entries.partition_point(|e| e.start_offset < end);
        let changed = keep < self.entries.len();
        self.entries.truncate(keep);
        changed
    }

    /// The log now starts at `start`: entries wholly before it go, and the last of them is
    /// kept with its start moved up to `start`.
    pub(crate) fn truncate_from_start(&mut self, start: Offset) -> bool {
        let before = self.entries.partition_point(|e| e.start_offset <= start);
        if before == 0 {
            return false;
        }
        let mut changed = before > 1;
        let mut e = self.entries[before - 1];
        if e.start_offset != start {
            e.start_offset = start;
            changed = true;
        }
        self.entries.drain(..before - 1);
        self.entries[0] = e;
        changed
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let lines: Vec<String> = self
            .entries
            .iter()
            .map(|e| format!("{} {}", e.epoch, e.start_offset))
            .collect();
        checkpoint::encode(KIND, &lines)
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, String> {
        let mut entries: Vec<EpochEntry> = Vec::new();
        for line in checkpoint::decode(KIND, bytes)? {
            let mut it = line.split(' ');
            let (Some(e), Some(o), None) = (it.next(), it.next(), it.next()) else {
                return Err(format!("bad entry {line:?}"));
            };
            let entry = EpochEntry {
                epoch: e.parse().map_err(|_| format!("bad epoch in {line:?}"))?,
                start_offset: o.parse().map_err(|_| format!("bad offset in {line:?}"))?,
            };
            if let Some(last) = entries.last() {
                if entry.epoch <= last.epoch || entry.start_offset <= last.start_offset {
                    return Err(format!("entries not increasing at {line:?}"));
                }
            }
            entries.push(entry);
        }
        Ok(Self { entries })
    }

    #[cfg(test)]
    pub(crate) fn from_entries(entries: Vec<EpochEntry>) -> Self {
        Self { entries }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(epoch: u32, start_offset: u64) -> EpochEntry {
        EpochEntry {
            epoch,
            start_offset,
        }
    }

    #[test]
    fn kip279_lookup() {
        let c = EpochCache::from_entries(vec![e(1, 0), e(3, 10), e(6, 25)]);
        assert_eq!(c.end_offset_for_epoch(0, 40), Some((0, 0)));
        assert_eq!(c.end_offset_for_epoch(1, 40), Some((1, 10)));
        assert_eq!(c.end_offset_for_epoch(2, 40), Some((1, 10)));
        assert_eq!(c.end_offset_for_epoch(3, 40), Some((3, 25)));
        assert_eq!(c.end_offset_for_epoch(5, 40), Some((3, 25)));
        assert_eq!(c.end_offset_for_epoch(6, 40), Some((6, 40)));
        assert_eq!(c.end_offset_for_epoch(9, 40), Some((6, 40)));
        assert_eq!(EpochCache::default().end_offset_for_epoch(1, 0), None);
        assert_eq!(c.epoch_at(0), Some(1));
        assert_eq!(c.epoch_at(24), Some(3));
        assert_eq!(c.epoch_at(99), Some(6));
        let late = EpochCache::from_entries(vec![e(2, 5)]);
        assert_eq!(late.epoch_at(4), None);
    }

    #[test]
    fn assign_and_truncate() {
        let mut c = EpochCache::default();
        assert!(c.assign(1, 0));
        assert!(!c.assign(1, 5));
        assert!(!c.assign(0, 7));
        assert!(c.assign(2, 5));
        assert!(c.assign(4, 5)); // epoch 2 wrote nothing: replaced
        assert_eq!(c.entries(), &[e(1, 0), e(4, 5)]);
        assert!(c.assign(5, 9));
        assert!(c.truncate_from_end(9));
        assert_eq!(c.entries(), &[e(1, 0), e(4, 5)]);
        assert!(c.truncate_from_start(7));
        assert_eq!(c.entries(), &[e(4, 7)]);
        assert!(!c.truncate_from_start(3));
        let dec = EpochCache::decode(&c.encode()).unwrap();
        assert_eq!(dec, c);
        assert!(EpochCache::decode(b"garbage").is_err());
    }
}
