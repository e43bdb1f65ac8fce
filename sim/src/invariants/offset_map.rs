//! The committed log of one partition as the replication invariants first saw it: offset ->
//! record digest.
//!
//! Every audit pass looks up (and the first reader inserts) each new committed record, for
//! every replica: a `BTreeMap` per partition made those lookups ~3% of a simulation. The
//! offsets a log holds are dense from its start, so a deque indexed by `offset - base` does
//! the same at the cost of an index; holes (a compacted log's removed records, or a range
//! no replica has shown yet) are `None`.

use skein_core::types::Offset;
use std::collections::VecDeque;

#[derive(Default, Debug)]
pub(super) struct CommittedLog {
    /// The offset of `digests[0]`.
    base: Offset,
    digests: VecDeque<Option<u64>>,
}

impl CommittedLog {
    /// The digest recorded at `offset`, if any.
    pub(super) fn get(&self, offset: Offset) -> Option<u64> {
        let i = offset.checked_sub(self.base)?;
        self.digests
            .get(usize::try_from(i).ok()?)
            .copied()
            .flatten()
    }

    /// Records `digest` at `offset` (replacing what was there).
    pub(super) fn insert(&mut self, offset: Offset, digest: u64) {
        if self.digests.is_empty() {
            self.base = offset;
        }
        while offset < self.base {
            self.digests.push_front(None);
            self.base -= 1;
        }
        let i = (offset - self.base) as usize;
        if i >= self.digests.len() {
            self.digests.resize(i + 1, None);
        }
        self.digests[i] = Some(digest);
    }

    /// The recorded `(offset, digest)`s in `[from, below)`, in offset order.
    pub(super) fn range(
        &self,
        from: Offset,
        below: Offset,
    ) -> impl Iterator<Item = (Offset, u64)> + '_ {
        let lo = from.max(self.base);
        let hi = below.min(self.base + self.digests.len() as Offset).max(lo);
        let skip = (lo - self.base) as usize;
        self.digests
            .iter()
            .skip(skip)
            .take((hi - lo) as usize)
            .zip(lo..)
            .filter_map(|(d, o)| d.map(|d| (o, d)))
    }

    /// Forgets every offset at or above `offset` (an unclean election rewrote them).
    pub(super) fn truncate(&mut self, offset: Offset) {
        let keep = offset
            .saturating_sub(self.base)
            .min(self.digests.len() as Offset);
        self.digests.truncate(keep as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// The deque answers as the map it replaced, for inserts in any order, holes, and
    /// truncation.
    #[test]
    fn behaves_as_an_ordered_map() {
        let mut log = CommittedLog::default();
        let mut model: BTreeMap<Offset, u64> = BTreeMap::new();
        let ops: &[(char, Offset)] = &[
            ('i', 10),
            ('i', 11),
            ('i', 14),
            ('i', 7),
            ('i', 11),
            ('t', 13),
            ('i', 20),
            ('i', 3),
            ('t', 8),
            ('t', 0),
            ('i', 5),
            ('i', 6),
        ];
        for (n, &(op, o)) in ops.iter().enumerate() {
            match op {
                'i' => {
                    log.insert(o, o * 100 + n as u64);
                    model.insert(o, o * 100 + n as u64);
                }
                _ => {
                    log.truncate(o);
                    model.split_off(&o);
                }
            }
            for q in 0..25 {
                assert_eq!(log.get(q), model.get(&q).copied(), "get({q}) after op {n}");
            }
            for (lo, hi) in [(0, 25), (4, 12), (11, 11), (12, 30), (21, 40)] {
                let want: Vec<_> = model.range(lo..hi).map(|(o, d)| (*o, *d)).collect();
                let got: Vec<_> = log.range(lo, hi).collect();
                assert_eq!(got, want, "range({lo}, {hi}) after op {n}");
            }
        }
    }
}
