//! The in-memory Raft log: the entries after the last snapshot, and the snapshot's
//! `(last_index, last_term)` standing in for everything before it.

use super::message::{Entry, Index, Term};

#[derive(Clone, Debug)]
pub(crate) struct RaftLog {
    /// Index and term of the last entry folded into the snapshot (0, 0 for none).
    snapshot_index: Index,
    snapshot_term: Term,
    /// Entries `snapshot_index + 1 ..`, dense.
    entries: Vec<Entry>,
}

impl RaftLog {
    pub(crate) fn new(snapshot_index: Index, snapshot_term: Term, entries: Vec<Entry>) -> Self {
        let log = Self {
            snapshot_index,
            snapshot_term,
            entries,
        };
        log.check();
        log
    }

    fn check(&self) {
        debug_assert!(self
            .entries
            .iter()
            .enumerate()
            .all(|(i, e)| e.index == self.snapshot_index + 1 + i as Index));
        debug_assert!(self.entries.windows(2).all(|w| w[0].term <= w[1].term));
        debug_assert!(self
            .entries
            .first()
            .iter()
            .all(|e| e.term >= self.snapshot_term));
    }

    pub(crate) fn snapshot_index(&self) -> Index {
        self.snapshot_index
    }

    pub(crate) fn last_index(&self) -> Index {
        self.snapshot_index + self.entries.len() as Index
    }

    pub(crate) fn last_term(&self) -> Term {
        self.entries.last().map_or(self.snapshot_term, |e| e.term)
    }

    /// The term of the entry at `index`: known for the snapshot's last entry and for every
    /// entry after it; `None` before the snapshot (compacted) or past the end.
    pub(crate) fn term_at(&self, index: Index) -> Option<Term> {
        if index == self.snapshot_index {
            Some(self.snapshot_term)
        } else if index < self.snapshot_index || index > self.last_index() {
            None
        } else {
            Some(self.entries[(index - self.snapshot_index - 1) as usize].term)
        }
    }

    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Entries `from ..= to` (both within the log after the snapshot).
    pub(crate) fn range(&self, from: Index, to: Index) -> &[Entry] {
        debug_assert!(from > self.snapshot_index && to <= self.last_index());
        if from > to {
            return &[];
        }
        let start = (from - self.snapshot_index - 1) as usize;
        let end = (to - self.snapshot_index) as usize;
        &self.entries[start..end]
    }

    /// Up to `max` entries from `from` on.
    pub(crate) fn slice(&self, from: Index, max: usize) -> &[Entry] {
        let to = self
            .last_index()
            .min(from.saturating_add(max as Index).saturating_sub(1));
        self.range(from, to)
    }

    pub(crate) fn append(&mut self, entries: &[Entry]) {
        self.entries.extend_from_slice(entries);
        self.check();
    }

    /// Drops every entry from `index` on.
    pub(crate) fn truncate_from(&mut self, index: Index) {
        debug_assert!(index > self.snapshot_index);
        self.entries
            .truncate((index - self.snapshot_index - 1) as usize);
    }

    /// Folds everything through `index` (which must be in the log) into a snapshot.
    pub(crate) fn compact_to(&mut self, index: Index) {
        let term = self
            .term_at(index)
            .expect("compacting to an entry of the log");
        let drop = (index - self.snapshot_index) as usize;
        self.entries.drain(..drop);
        self.snapshot_index = index;
        self.snapshot_term = term;
        self.check();
    }

    /// Replaces the whole log by a snapshot ending at `(index, term)`.
    pub(crate) fn reset(&mut self, index: Index, term: Term) {
        self.entries.clear();
        self.snapshot_index = index;
        self.snapshot_term = term;
    }
}
