//! The invariants the simulator checks while a run goes, and their violations.

// The names and the violation type live on the ground floor (`violation`), so the report,
// the scenario format and the tracer need not import the checks; they stay reachable here,
// where the checks' users look for them.
pub use crate::violation::*;

use crate::fnv::Fnv1a;
use crate::time::SimTime;
use offset_map::PerPartition;
use skein_core::log::RecordBatch;
use skein_core::replica::{ReplicaRole, ReplicaView};
use skein_core::{LeaderEpoch, NodeId, Offset, TopicPartition};
use skein_jepsen::Text;
use std::collections::{BTreeMap, BTreeSet};

mod audit;
pub mod exactly_once;
mod matching;
mod metadata;
pub(crate) mod offset_map;
mod quorum;
mod skipped;
mod spec;
mod txn;

pub use matching::LogSlice;
pub use quorum::{RaftView, STALE_LEADER_BOUND};
pub use skipped::FinalLog;
pub use txn::TxnTrack;

/// How reports name a partition: its number for the simulator's topic, `topic-n` otherwise
/// (`__consumer_offsets-1`).
fn part(tp: &TopicPartition) -> String {
    if tp.topic == crate::topic::TOPIC {
        tp.partition.to_string()
    } else {
        tp.to_string()
    }
}

/// Most violations kept in detail per invariant (the count is always exact, and every
/// invariant keeps its first: a flood of one invariant never hides another).
pub const MAX_KEPT: usize = 16;

/// Identity of the record at an offset, as replicas must agree on it: the batch's leader
/// epoch and attributes, and the record's key and value.
pub fn record_digest(batch: &RecordBatch, record: &skein_core::log::Record) -> u64 {
    record_digest_from(batch_digest(batch), record)
}

/// The state of [`record_digest`] after the batch's fields, the same for all its records:
/// hashed once per batch, not once per record.
fn batch_digest(batch: &RecordBatch) -> Fnv1a {
    let mut h = Fnv1a::default();
    h.u64(batch.partition_leader_epoch as u64);
    h.u64(batch.attributes as u64);
    h
}

/// [`record_digest`] of `record`, from its batch's [`batch_digest`].
fn record_digest_from(mut h: Fnv1a, record: &skein_core::log::Record) -> u64 {
    match &record.key {
        Some(k) => {
            h.u64(k.len() as u64 + 1);
            h.bytes(k);
        }
        None => h.u64(0),
    }
    match &record.value {
        Some(v) => {
            h.u64(v.len() as u64 + 1);
            h.bytes(v);
        }
        None => h.u64(0),
    }
    h.finish()
}

/// Every record of `batches` at offsets in `[from, below)`, with its value bytes.
fn records_in(
    batches: &[RecordBatch],
    from: Offset,
    below: Offset,
) -> Vec<(Offset, u64, Option<&[u8]>)> {
    // Sized for every record up front: growing it a push at a time reallocated (and
    // copied) it several times per audited replica.
    let mut out = Vec::with_capacity(batches.iter().map(|b| b.records.len()).sum());
    for b in batches {
        let h = batch_digest(b);
        for (o, r) in b.iter_offsets() {
            if o >= from && o < below {
                out.push((o, record_digest_from(h, r), r.value.as_deref()));
            }
        }
    }
    out
}

struct Acked {
    offset: Offset,
    value: Text,
    epoch: LeaderEpoch,
}

/// A partition's acknowledged records in acknowledgement order, as a window: `dropped`
/// records were pruned from the front (indexes into it stay those of the whole list).
#[derive(Default)]
struct AckedLog {
    dropped: usize,
    kept: Vec<Acked>,
    /// The floor of the last [`AckedLog::prune`]: pruning looks again only when it rises.
    floor: Offset,
}

impl AckedLog {
    /// The records from index `n` of the whole list on (those still kept).
    fn from(&self, n: usize) -> &[Acked] {
        &self.kept[n.saturating_sub(self.dropped).min(self.kept.len())..]
    }

    /// Index (in the whole list) of the first record kept.
    fn first_kept(&self) -> usize {
        self.dropped
    }

    /// Drops the leading records below `floor` (the least log start of every replica: no
    /// leader can hold them again, so the leader check would skip them anyway). Drained in
    /// bulk, once at least half the kept records can go, so each record is moved O(1)
    /// times.
    fn prune(&mut self, floor: Offset) {
        if floor <= self.floor {
            return;
        }
        self.floor = floor;
        let n = self.kept.iter().take_while(|a| a.offset < floor).count();
        if n > 0 && n * 2 >= self.kept.len() {
            self.kept.drain(..n);
            self.dropped += n;
        }
    }
}

/// `(offset, x)` pairs of records in the order read, as a lookup by offset: where two
/// records claim one offset the one read last answers, as in a map collected from them
/// (what this replaced; a sorted vector costs no node per record).
struct ByOffset<T>(Vec<(Offset, T)>);

impl<T: Copy> ByOffset<T> {
    fn new(mut v: Vec<(Offset, T)>) -> Self {
        // A log's records come in offset order; the sort is stable (read order kept among
        // equal offsets), so the last of them answers below.
        if v.windows(2).any(|w| w[0].0 > w[1].0) {
            v.sort_by_key(|e| e.0);
        }
        Self(v)
    }

    fn get(&self, offset: Offset) -> Option<T> {
        let i = self.0.partition_point(|e| e.0 <= offset);
        self.0[..i].last().filter(|e| e.0 == offset).map(|e| e.1)
    }
}

/// The replication invariants' state of one partition, kept together so that an audit
/// finds it with one search by topic name (two topics) and an index, and no clone of the
/// name (maps keyed by `(broker, topic partition)` cost a clone and a search comparing
/// names, several times per audited replica).
#[derive(Default)]
struct PartitionAudit {
    /// The committed log as first seen below some replica's HW: offset -> record digest.
    committed: offset_map::CommittedLog,
    /// Per broker: offsets below this were checked against `committed`.
    verified: BTreeMap<NodeId, Offset>,
    /// Per broker: the last HW announced as leader, with its epoch.
    leader_hw: BTreeMap<NodeId, (LeaderEpoch, Offset)>,
    /// Per producer id in the committed log: the highest producer epoch seen and the
    /// lowest offset of a batch carrying it (fenced-producer-write's state).
    producer_epochs: BTreeMap<u64, (u16, Offset)>,
}

/// Reads a broker's local log: `(from, below) -> batches`, for audits.
pub type LogReader<'a> = &'a mut dyn FnMut(Offset, Offset) -> Result<Vec<RecordBatch>, String>;

/// The running invariant checks of one simulation.
#[derive(Default)]
pub struct Checker {
    /// Per invariant, its first [`MAX_KEPT`] violations in the order found.
    kept: BTreeMap<&'static str, Vec<Violation>>,
    counts: BTreeMap<&'static str, u64>,
    /// Acknowledged acks=all records per partition, in acknowledgement order, less those
    /// below every replica's log start (`AckedLog::prune`).
    acked: BTreeMap<u32, AckedLog>,
    /// Per (partition of the simulator's topic, broker): the replica's log start as last
    /// audited. A log start never goes back (retention and a follower restarting at its
    /// leader's start only move it up), so no replica holds anything below the least of
    /// them again.
    log_starts: BTreeMap<(u32, NodeId), Offset>,
    /// The acknowledged value at each offset (looked up per read and per ack).
    acked_at: PerPartition<Text>,
    /// The replication invariants' state per partition. They cover every topic (the
    /// simulator's and `__consumer_offsets`): per topic, by partition number (dense from 0).
    /// A list, not a map: a few topics, each call finds its topic in one scan (a map's
    /// lookup then insert searched twice), and nothing walks it in order.
    parts: Vec<(String, Vec<PartitionAudit>)>,
    /// In the current audit pass: per partition, the highest HW of a replica presuming
    /// leadership, and which (strong-isr's bound for the controller's ISR).
    presumed_hw: BTreeMap<TopicPartition, (NodeId, Offset)>,
    /// Per (partition, broker): the leader epoch at which that broker was last checked
    /// for acked records as leader, and how many of them (a prefix of `acked`) it was
    /// checked for. Forgotten when the broker restarts (`on_broker_restart`): a new process
    /// is checked from the first record again.
    leader_checked: BTreeMap<(u32, NodeId), (LeaderEpoch, usize)>,
    /// Per (partition, epoch): the broker that acknowledged writes at that epoch.
    acking: BTreeMap<(u32, LeaderEpoch), NodeId>,
    /// Per (partition, epoch): the offset the epoch's leader started at.
    epoch_start: BTreeMap<(u32, LeaderEpoch), Offset>,
    /// First value read at each offset (looked up per read).
    reads: PerPartition<Text>,
    /// Acknowledged records read back at their offset (membership only).
    read_acked: PerPartition<()>,
    /// Highest leader epoch seen per partition, to count leader changes.
    epochs: BTreeMap<u32, LeaderEpoch>,
    /// (partition, epoch) of leaders the controller elected from outside the ISR.
    unclean: BTreeSet<(TopicPartition, LeaderEpoch)>,
    /// Per partition: an unclean leader's epoch and the offset of its epoch marker, from
    /// its `BecameLeader` until a replica holding its log is audited (see
    /// `reconcile_unclean`). Meanwhile replicas that hold its log are not compared.
    unclean_pending: BTreeMap<TopicPartition, (LeaderEpoch, Offset)>,
    /// Per partition: each unclean leader's epoch and the offset where its log departs
    /// from the committed log. Committed records from there on were replaced; a replica that
    /// has not yet followed such a leader (holds no epoch of it or later) is compared only
    /// below that offset, the lowest one if it has followed none of several.
    unclean_floor: BTreeMap<TopicPartition, Vec<(LeaderEpoch, Offset)>>,
    /// Per (client, partition): what a partition consumer's cursor did
    /// (consumer-skipped-records' state).
    consumers: BTreeMap<(u64, u32), skipped::ConsumerTrack>,
    /// The controller quorum's invariants' state.
    quorum: quorum::QuorumState,
    /// `metadata-in-order`'s state.
    metadata: metadata::MetadataOrderState,
    /// The transaction invariants' state: `Some` in txn workload runs only
    /// ([`Checker::enable_txn`]), so other runs pay nothing for them.
    txn: Option<Box<TxnTrack>>,
    /// Unclean elections seen (their losses are expected, and reported).
    pub unclean_elections: u64,
    pub leader_changes: u64,
}

impl Checker {
    pub fn new() -> Self {
        Self::default()
    }

    /// `tp`'s replication state, created empty when first asked for.
    fn partition_mut(&mut self, tp: &TopicPartition) -> &mut PartitionAudit {
        let at = match self.topic_at(&tp.topic) {
            Some(at) => at,
            None => {
                self.parts.push((tp.topic.clone(), Vec::new()));
                self.parts.len() - 1
            }
        };
        let parts = &mut self.parts[at].1;
        let i = tp.partition as usize;
        if parts.len() <= i {
            parts.resize_with(i + 1, PartitionAudit::default);
        }
        &mut parts[i]
    }

    /// Where `topic` is in `parts`, if it has any state.
    fn topic_at(&self, topic: &str) -> Option<usize> {
        self.parts.iter().position(|(t, _)| t == topic)
    }

    /// `tp`'s replication state, if it has any.
    fn partition(&self, tp: &TopicPartition) -> Option<&PartitionAudit> {
        self.parts[self.topic_at(&tp.topic)?]
            .1
            .get(tp.partition as usize)
    }

    /// Where `broker`'s copy of `tp` was last verified up to (0 if never).
    fn verified(&self, broker: NodeId, tp: &TopicPartition) -> Offset {
        self.partition(tp)
            .and_then(|p| p.verified.get(&broker))
            .copied()
            .unwrap_or(0)
    }

    fn violate(&mut self, invariant: &'static str, at: SimTime, detail: String) {
        *self.counts.entry(invariant).or_default() += 1;
        let kept = self.kept.entry(invariant).or_default();
        if kept.len() < MAX_KEPT {
            tracing::warn!(invariant, at, %detail, "invariant violated");
            kept.push(Violation {
                invariant,
                at,
                detail,
            });
        }
    }

    /// Broker `broker` started a new process: its logs are what its disk kept, so as a
    /// leader it is checked for every acknowledged record again.
    pub fn on_broker_restart(&mut self, broker: NodeId) {
        self.leader_checked.retain(|(_, b), _| *b != broker);
        self.txn_on_broker_restart(broker);
    }

    /// Records a violation found by another checker (the group checks).
    pub fn violation(&mut self, invariant: &'static str, at: SimTime, detail: String) {
        self.violate(invariant, at, detail);
    }

    /// Violations kept (the first [`MAX_KEPT`] of each invariant), in time order (ties in
    /// the order found).
    pub fn violations(&self) -> Vec<Violation> {
        let mut all: Vec<Violation> = self.kept.values().flatten().cloned().collect();
        all.sort_by_key(|v| v.at);
        all
    }

    /// Exact count of violations of one invariant.
    pub fn count(&self, invariant: &str) -> u64 {
        self.counts.get(invariant).copied().unwrap_or(0)
    }

    /// Exact count of violations of every invariant violated at least once.
    pub fn counts(&self) -> &BTreeMap<&'static str, u64> {
        &self.counts
    }

    pub fn acked_count(&self) -> u64 {
        self.acked_at.len() as u64
    }

    pub fn read_acked_count(&self) -> u64 {
        self.read_acked.len() as u64
    }

    /// A producer received an acks=all acknowledgement.
    pub fn on_client_ack(
        &mut self,
        now: SimTime,
        p: u32,
        offset: Offset,
        value: Text,
        epoch: LeaderEpoch,
    ) {
        if let Some(prev) = self.acked_at.get(p, offset) {
            if *prev != value {
                let d = format!("partition {p} offset {offset}: acknowledged twice, as {prev:?} and as {value:?}");
                self.violate(ACKED_WRITE_LOST, now, d);
            }
            return;
        }
        if let Some(read) = self.reads.get(p, offset) {
            if *read != value {
                let d = format!("partition {p} offset {offset}: acknowledged {value:?} but a consumer read {read:?} there");
                self.violate(ACKED_WRITE_LOST, now, d);
            } else {
                self.read_acked.insert(p, offset, ());
            }
        }
        self.acked_at.insert(p, offset, value.clone());
        self.acked.entry(p).or_default().kept.push(Acked {
            offset,
            value,
            epoch,
        });
    }

    /// A broker became leader of `tp` at `epoch` with its log ending at `start`: offsets
    /// from `start` on belong to that epoch.
    pub fn on_became_leader(&mut self, tp: &TopicPartition, epoch: LeaderEpoch, start: Offset) {
        if tp.topic == crate::topic::TOPIC {
            let p = tp.partition;
            self.note_epoch(p, epoch);
            self.epoch_start.entry((p, epoch)).or_insert(start);
        }
        // The first leader to take office at or after an unclean election's epoch holds the
        // log that election chose: the uncleanly elected broker itself, or, if it failed
        // before taking office, the one a later election picked from the ISR that unclean
        // election left (elected cleanly from it, but no better off).
        let forfeited: Vec<(TopicPartition, LeaderEpoch)> = self
            .unclean
            .iter()
            .filter(|(t, e)| t == tp && *e <= epoch)
            .cloned()
            .collect();
        if !forfeited.is_empty() {
            for k in &forfeited {
                self.unclean.remove(k);
            }
            // The unclean leader's log is the truth from here on. Where it departs from
            // the committed log is known only once its log is read (the next audit of a
            // replica holding it): until then such replicas are not compared. `start` is
            // the log end after the leader's epoch marker: the marker itself is new.
            self.unclean_pending
                .insert(tp.clone(), (epoch, start.saturating_sub(1)));
            // From its marker on the records are new: a reader that reads them there has
            // not changed a record, whoever read the discarded one before.
            if tp.topic == crate::topic::TOPIC {
                self.forget_reads_from(tp.partition, start.saturating_sub(1));
            }
        }
    }

    /// The controller elected a leader from outside the ISR (unclean election enabled):
    /// acknowledged records may be lost (acked-write-lost reports them), but replicas must
    /// still converge on the new leader's log.
    pub fn on_unclean_election(&mut self, tp: &TopicPartition, epoch: LeaderEpoch) {
        self.unclean.insert((tp.clone(), epoch));
        self.unclean_elections += 1;
    }

    /// Whether the controller ever elected `tp`'s leader uncleanly in this run.
    fn had_unclean_election(&self, tp: &TopicPartition) -> bool {
        self.unclean.iter().any(|(t, _)| t == tp)
            || self.unclean_pending.contains_key(tp)
            || self.unclean_floor.contains_key(tp)
    }

    /// A broker sent a successful produce response for offsets `base..=last` at `epoch`.
    ///
    /// A deposed leader may still answer, late, for records its successor already holds
    /// (they were replicated before the successor was elected). What must never happen is
    /// two brokers acknowledging the same offsets: an acknowledgement at epoch e for an
    /// offset at or past the start of a newer epoch, or two brokers acknowledging at one
    /// epoch.
    pub fn on_broker_ack(
        &mut self,
        now: SimTime,
        broker: NodeId,
        p: u32,
        epoch: LeaderEpoch,
        last: Offset,
    ) {
        if let Some(((_, newer), start)) = self
            .epoch_start
            .range((p, epoch + 1)..(p + 1, 0))
            .find(|(_, &s)| s <= last)
        {
            let d = format!("partition {p}: broker {broker} acknowledged offset {last} at epoch {epoch}, but epoch {newer} began at offset {start}: two leaders acknowledged the same offsets");
            self.violate(SPLIT_BRAIN, now, d);
        }
        match self.acking.get(&(p, epoch)).copied() {
            Some(b) if b != broker => {
                let d = format!("partition {p}: brokers {b} and {broker} both acknowledged writes at epoch {epoch}");
                self.violate(SPLIT_BRAIN, now, d);
            }
            Some(_) => {}
            None => {
                self.acking.insert((p, epoch), broker);
            }
        }
    }

    /// A leader announced a high watermark.
    pub fn on_leader_hw(
        &mut self,
        now: SimTime,
        broker: NodeId,
        tp: &TopicPartition,
        epoch: LeaderEpoch,
        hw: Offset,
    ) {
        if tp.topic == crate::topic::TOPIC {
            self.note_epoch(tp.partition, epoch);
        }
        let leader_hw = &mut self.partition_mut(tp).leader_hw;
        match leader_hw.get(&broker).copied() {
            Some((e, prev)) if e == epoch && hw < prev => {
                let d = format!("partition {}: leader {broker} moved its HW back from {prev} to {hw} within epoch {epoch}", part(tp));
                self.violate(HW_REGRESSION, now, d);
            }
            Some((e, prev)) if e == epoch && hw <= prev => {}
            Some((e, _)) if e > epoch => {}
            _ => {
                leader_hw.insert(broker, (epoch, hw));
            }
        }
    }

    fn note_epoch(&mut self, p: u32, epoch: LeaderEpoch) {
        let e = self.epochs.entry(p).or_insert(0);
        if epoch > *e {
            self.leader_changes += (epoch - *e) as u64;
            *e = epoch;
        }
    }

    /// A broker served records to a consumer while its HW was `hw`.
    pub fn on_served(
        &mut self,
        now: SimTime,
        broker: NodeId,
        p: u32,
        batches: &[RecordBatch],
        hw: Offset,
    ) {
        for b in batches {
            if b.next_offset() > hw && !b.records.is_empty() {
                let d = format!("partition {p}: broker {broker} served offsets {}..{} to a consumer with its HW at {hw}", b.base_offset, b.next_offset());
                self.violate(DIRTY_READ, now, d);
            }
        }
    }

    /// A consumer received the record `value` at `offset`.
    pub fn on_read(&mut self, now: SimTime, p: u32, offset: Offset, value: Text, from: NodeId) {
        let first = match self.reads.get(p, offset) {
            Some(prev) if *prev != value => {
                let d = format!("partition {p} offset {offset}: read {prev:?} earlier, now {value:?} from broker {from}");
                self.violate(RECORD_CHANGED, now, d);
                false
            }
            Some(_) => false,
            None => true,
        };
        if let Some(acked) = self.acked_at.get(p, offset) {
            if *acked == value {
                self.read_acked.insert(p, offset, ());
            } else {
                let d = format!("partition {p} offset {offset}: acknowledged {acked:?} but broker {from} served {value:?}");
                self.violate(ACKED_WRITE_LOST, now, d);
            }
        }
        self.txn_on_read(now, p, offset);
        // Kept after the checks above: the value moves in, not a copy of it.
        if first {
            self.reads.insert(p, offset, value);
        }
    }

    /// The acknowledged records of partition `p`, by offset.
    pub fn acked_records(&self, p: u32) -> Vec<(Offset, Text)> {
        self.acked_at
            .iter()
            .filter(|((q, _), _)| *q == p)
            .map(|((_, o), v)| (o, v.clone()))
            .collect()
    }

    /// End of run: liveness. `leaderless` lists partitions without a serving leader;
    /// `destroyed` the leaderless partitions where the injected faults destroyed every copy
    /// of some acknowledged record (no replica can recover them, so their partition is not
    /// judged: the report names them instead).
    pub fn finish_liveness(
        &mut self,
        now: SimTime,
        leaderless: &[u32],
        destroyed: &BTreeSet<u32>,
        bound: SimTime,
    ) {
        let leaderless: Vec<u32> = leaderless
            .iter()
            .copied()
            .filter(|p| !destroyed.contains(p))
            .collect();
        if !leaderless.is_empty() {
            let d = format!(
                "partitions {leaderless:?} have no serving leader {} after the last fault healed",
                crate::time::Human(bound)
            );
            self.violate(LIVENESS, now, d);
        }
        let unread: Vec<((u32, Offset), &Text)> = self
            .acked_at
            .iter()
            .filter(|((p, o), _)| !self.read_acked.contains(*p, *o) && !destroyed.contains(p))
            .collect();
        if let Some(((p, o), value)) = unread.first() {
            let d = format!(
                "{} acknowledged records not read back {} after the last fault healed (first: partition {p} offset {o} {:?})",
                unread.len(),
                crate::time::Human(bound),
                value
            );
            self.violate(LIVENESS, now, d);
        }
    }

    /// End of run: `stuck` lists (partition, follower, leader) for followers that are up,
    /// online and following a serving leader, but not in its ISR.
    pub fn finish_replication(
        &mut self,
        now: SimTime,
        stuck: &[(u32, NodeId, NodeId)],
        bound: SimTime,
    ) {
        if let Some((p, f, l)) = stuck.first() {
            let d = format!(
                "partition {p}: follower {f} is not back in leader {l}'s ISR {} after the last fault healed ({} such replicas)",
                crate::time::Human(bound),
                stuck.len()
            );
            self.violate(UNDER_REPLICATED, now, d);
        }
    }

    /// Acknowledged records never read back at their offset.
    pub fn unread(&self) -> u64 {
        self.acked_at.len() as u64 - self.read_acked.len() as u64
    }

    /// Records the checker result of the client history.
    pub fn history_failed(&mut self, now: SimTime, detail: String) {
        self.violate(HISTORY, now, detail);
    }
}

#[cfg(test)]
mod tests;
