//! The controller quorum's invariants, judged from outside the nodes: the world shows each
//! quorum node's Raft state after every step of it ([`Checker::on_raft`]), the committed
//! metadata's broker fencing as it changes ([`Checker::on_fencing`]) and every produce
//! acknowledgement a broker sends ([`Checker::on_fenced_check`]).

use super::{
    Checker, FENCED_BROKER_ACK, METADATA_COMMIT_LOST, RAFT_LOG_MATCHING, RAFT_STALE_LEADER,
    RAFT_TWO_LEADERS,
};
use crate::fnv::Fnv1a;
use crate::time::SimTime;
use skein_core::raft::{Entry, Index, Payload, Term};
use skein_core::{NodeId, Offset};
use std::collections::BTreeMap;

/// One quorum node's Raft state as the world sees it after a step.
pub struct RaftView<'a> {
    pub term: Term,
    pub leader: bool,
    /// The snapshot's last (index, term): the log's entries start after it.
    pub snapshot: (Index, Term),
    pub entries: &'a [Entry],
    pub commit: Index,
}

/// What the quorum invariants remember.
#[derive(Default)]
pub(super) struct QuorumState {
    /// Per term: the node that led it, and when it was first seen leading.
    leaders: BTreeMap<Term, (NodeId, SimTime)>,
    /// Per (index, term) ever seen in a log: the previous entry's term and the payload's
    /// digest. Log matching holds iff no (index, term) is seen with two different ones.
    entries: BTreeMap<(Index, Term), (Term, u64)>,
    /// Per node: its log's last (index, term) when it was last scanned.
    scanned: BTreeMap<NodeId, (Index, Term)>,
    /// Committed entries: index -> (term, digest), as first seen committed anywhere.
    committed: BTreeMap<Index, (Term, u64)>,
    /// Per node: the commit index up to which its entries were compared.
    commit_seen: BTreeMap<NodeId, Index>,
    /// Per broker: the broker epoch the committed metadata has fenced, and since when.
    fenced: BTreeMap<NodeId, (Offset, SimTime)>,
    /// The committed metadata offset the fencing was last taken from (older views are
    /// ignored: a lagging controller must not unfence what a newer one fenced).
    fencing_offset: Offset,
}

/// How long a deposed Raft leader may go on acting as one after a newer term's leader was
/// seen: check-quorum steps a leader down after one election timeout without a majority;
/// three leave room for a pause that ends just before it ticks.
pub const STALE_LEADER_BOUND: SimTime = 3 * crate::time::SECS / 2;

fn digest(e: &Entry) -> u64 {
    let mut h = Fnv1a::default();
    match &e.payload {
        Payload::Noop => h.u64(0),
        Payload::Command(data) => {
            h.u64(1);
            h.bytes(data);
        }
    }
    h.finish()
}

impl Checker {
    /// A quorum node's Raft state after a step: at most one leader per term, no leader of
    /// an old term long after a newer one was elected, log matching, and committed entries
    /// never lost or reordered.
    pub fn on_raft(&mut self, now: SimTime, id: NodeId, v: RaftView<'_>) {
        if v.leader {
            self.raft_leader(now, id, v.term);
        }
        self.raft_log(now, id, &v);
        self.raft_commit(now, id, &v);
    }

    fn raft_leader(&mut self, now: SimTime, id: NodeId, term: Term) {
        let q = &mut self.quorum;
        let (first, _) = *q.leaders.entry(term).or_insert((id, now));
        if first != id {
            let d = format!("controllers {first} and {id} both lead Raft term {term}");
            self.violate(RAFT_TWO_LEADERS, now, d);
            return;
        }
        let newer = q
            .leaders
            .range(term + 1..)
            .find(|(_, &(_, at))| now >= at + STALE_LEADER_BOUND)
            .map(|(&t, &(n, at))| (t, n, at));
        if let Some((t, n, at)) = newer {
            let d = format!(
                "controller {id} still leads Raft term {term} {} ms after controller {n} was seen leading term {t}",
                (now - at) / crate::time::MILLIS
            );
            self.violate(RAFT_STALE_LEADER, now, d);
        }
    }

    fn raft_log(&mut self, now: SimTime, id: NodeId, v: &RaftView<'_>) {
        let last = v.entries.last().map_or(v.snapshot, |e| (e.index, e.term));
        let q = &mut self.quorum;
        // Only entries after the last scan's end, unless the log was cut back below it.
        let from = match q.scanned.get(&id) {
            Some(&(i, t)) if term_at(v, i) == Some(t) => i + 1,
            _ => 0,
        };
        q.scanned.insert(id, last);
        let mut found = Vec::new();
        for (k, e) in v.entries.iter().enumerate() {
            if e.index < from {
                continue;
            }
            let prev = match k {
                0 => v.snapshot.1,
                _ => v.entries[k - 1].term,
            };
            let d = digest(e);
            match q.entries.get(&(e.index, e.term)) {
                Some(&(p, dd)) if (p, dd) != (prev, d) => found.push(format!(
                    "controller {id} holds entry {} of term {} after one of term {prev}, payload {d:016x}; another log held it after term {p}, payload {dd:016x}",
                    e.index, e.term
                )),
                Some(_) => {}
                None => {
                    q.entries.insert((e.index, e.term), (prev, d));
                }
            }
        }
        for d in found {
            self.violate(RAFT_LOG_MATCHING, now, d);
        }
    }

    fn raft_commit(&mut self, now: SimTime, id: NodeId, v: &RaftView<'_>) {
        let q = &mut self.quorum;
        let seen = q.commit_seen.get(&id).copied().unwrap_or(0);
        q.commit_seen.insert(id, v.commit.max(seen));
        if v.commit <= seen {
            return;
        }
        let mut found = Vec::new();
        for e in v
            .entries
            .iter()
            .filter(|e| e.index > seen && e.index <= v.commit)
        {
            let d = digest(e);
            match q.committed.get(&e.index) {
                Some(&(t, dd)) if (t, dd) != (e.term, d) => found.push(format!(
                    "controller {id} committed entry {} of term {} (payload {d:016x}), but entry {} of term {t} (payload {dd:016x}) was committed before",
                    e.index, e.term, e.index
                )),
                Some(_) => {}
                None => {
                    q.committed.insert(e.index, (e.term, d));
                }
            }
        }
        for d in found {
            self.violate(METADATA_COMMIT_LOST, now, d);
        }
    }

    /// The fencing of brokers in a controller's committed metadata as of `offset` (its
    /// image's end): `fenced` lists (broker, broker epoch) of every fenced broker. Views
    /// older than one already taken are ignored.
    pub fn on_fencing(&mut self, now: SimTime, offset: Offset, fenced: &[(NodeId, Offset)]) {
        let q = &mut self.quorum;
        if offset < q.fencing_offset {
            return;
        }
        q.fencing_offset = offset;
        q.fenced.retain(|b, (e, _)| fenced.contains(&(*b, *e)));
        for &(b, e) in fenced {
            q.fenced.entry(b).or_insert((e, now));
        }
    }

    /// A broker (registered at `broker_epoch`) acknowledged a produce request: the
    /// committed metadata must not have fenced that registration before now.
    pub fn on_fenced_check(&mut self, now: SimTime, broker: NodeId, broker_epoch: Offset) {
        if let Some(&(e, since)) = self.quorum.fenced.get(&broker) {
            if e == broker_epoch && since < now {
                let d = format!(
                    "broker {broker} (broker epoch {e}) acknowledged a produce request {} ms after the committed metadata fenced it",
                    (now - since) / crate::time::MILLIS
                );
                self.violate(FENCED_BROKER_ACK, now, d);
            }
        }
    }
}

/// The term of the entry at `index` in the view's log (the snapshot's for its last index).
fn term_at(v: &RaftView<'_>, index: Index) -> Option<Term> {
    if index == v.snapshot.0 {
        return Some(v.snapshot.1);
    }
    let first = v.entries.first()?.index;
    let k = index.checked_sub(first)? as usize;
    v.entries.get(k).map(|e| e.term)
}
