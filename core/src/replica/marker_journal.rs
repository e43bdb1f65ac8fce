//! The markers a partition leader appended, for observers (the simulator's run viewer): each
//! with what it closed on the partition, so a marker landing on a later transaction than
//! its own (KAFKA-17754) can be shown. Nothing in the replica reads it to decide anything;
//! it is a short ring, so it costs a few entries per partition.

use crate::log::TxnMarker;
use crate::types::Offset;
use std::collections::VecDeque;

/// How many appended markers a replica remembers. An observer reads the journal after
/// every step of its broker, and a step appends at most a handful per partition.
pub const MARKER_JOURNAL_LEN: usize = 16;

/// One marker appended by this replica as leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendedMarker {
    /// 1 for the first marker this replica appended, then 2, 3, …
    pub seq: u64,
    /// Where the marker is in the log.
    pub offset: Offset,
    pub marker: TxnMarker,
    /// The producer's epoch at the partition just before the marker (that of its latest
    /// batches or marker); `None` if the partition had never seen the producer.
    pub partition_epoch: Option<u16>,
    /// The first offset of the producer's open transaction that the marker closed; `None`
    /// if none was open (a retried or late marker that closes nothing).
    pub closed_from: Option<Offset>,
}

/// The last [`MARKER_JOURNAL_LEN`] markers a replica appended as leader.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MarkerJournal {
    appended: u64,
    recent: VecDeque<AppendedMarker>,
}

impl MarkerJournal {
    /// How many markers this replica has appended since it was created.
    pub fn appended(&self) -> u64 {
        self.appended
    }

    /// The remembered markers with `seq > after`, oldest first (fewer than asked if the
    /// ring dropped some: compare the first `seq` with `after + 1`).
    pub fn since(&self, after: u64) -> impl Iterator<Item = &AppendedMarker> {
        self.recent.iter().filter(move |m| m.seq > after)
    }

    pub(crate) fn record(
        &mut self,
        offset: Offset,
        marker: TxnMarker,
        partition_epoch: Option<u16>,
        closed_from: Option<Offset>,
    ) {
        self.appended += 1;
        if self.recent.len() == MARKER_JOURNAL_LEN {
            self.recent.pop_front();
        }
        self.recent.push_back(AppendedMarker {
            seq: self.appended,
            offset,
            marker,
            partition_epoch,
            closed_from,
        });
        debug_assert!(self.recent.len() <= MARKER_JOURNAL_LEN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::TxnResult;

    fn marker(epoch: u16) -> TxnMarker {
        TxnMarker {
            producer_id: 7,
            producer_epoch: epoch,
            result: TxnResult::Commit,
            coordinator_epoch: 1,
        }
    }

    #[test]
    fn the_ring_keeps_the_latest_and_numbers_every_append() {
        let mut j = MarkerJournal::default();
        for i in 0..(MARKER_JOURNAL_LEN as u64 + 4) {
            j.record(10 * i + 5, marker(i as u16), Some(0), Some(10 * i));
        }
        assert_eq!(j.appended(), MARKER_JOURNAL_LEN as u64 + 4);
        let all: Vec<u64> = j.since(0).map(|m| m.seq).collect();
        assert_eq!(all.len(), MARKER_JOURNAL_LEN, "the oldest fell out");
        assert_eq!(all[0], 5, "seq 1..=4 dropped");
        let tail: Vec<(u64, u64)> = j
            .since(MARKER_JOURNAL_LEN as u64 + 2)
            .map(|m| (m.seq, m.offset))
            .collect();
        assert_eq!(
            tail,
            vec![
                (
                    MARKER_JOURNAL_LEN as u64 + 3,
                    10 * (MARKER_JOURNAL_LEN as u64 + 2) + 5
                ),
                (
                    MARKER_JOURNAL_LEN as u64 + 4,
                    10 * (MARKER_JOURNAL_LEN as u64 + 3) + 5
                )
            ]
        );
    }
}
