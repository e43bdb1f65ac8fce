//! The transaction invariants (issue 52), judged in `--workload txn` runs only, from the
//! simulator's ground truth: what the transactional clients began, were told and wrote
//! ([`TxnObs`]), what brokers served to read_committed consumers, what consumers read, and
//! each partition's final committed log (its data batches and markers).
//!
//! - `txn-aborted-read`: a read_committed consumer never returns a record that the
//!   committed log's marker aborts.
//! - `txn-lso`: the last stable offset never passes an open transaction (a record served
//!   to read_committed must have its marker below the serving leader's HW at that moment)
//!   and never goes back (per broker process and leader epoch).
//! - `txn-torn`: the committed logs never decide one client transaction both ways (some of
//!   its records committed, others aborted, on one partition or across several).
//! - `txn-fenced-write`: once a newer instance of a transactional id is initialised, an
//!   older one never writes or commits at an identity that is not older than the newer's.
//! - `txn-marker-misapplied`: a marker closes records of its own transaction only: never
//!   records of two client transactions at once, never records whose transaction the
//!   client was told ended the other way.

use super::*;
use crate::client_step::TxnObs;
use skein_core::controller::ProducerIdAndEpoch;
use skein_core::txn::TxnResult;

/// One client transaction: (instance index, sequence number within that instance).
type TxnKey = (u32, u64);

/// What the client knows of one transaction.
#[derive(Default)]
struct ClientTxn {
    /// The transactional id (for messages).
    id: String,
    /// Told by the coordinator (the EndTxn answer); `None`: unknown (fenced, crashed, run
    /// ended).
    outcome: Option<TxnResult>,
}

/// One transactional client instance.
struct Instance {
    id: String,
    producer: Option<ProducerIdAndEpoch>,
    /// When its current (or last) transaction began.
    began: SimTime,
}

/// The newest initialised instance of a transactional id.
#[derive(Clone, Copy)]
struct Newest {
    index: u32,
    producer: ProducerIdAndEpoch,
    at: SimTime,
}

/// How the final committed log decided one transactional record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Closed by the marker at this offset with this result.
    Closed { marker: Offset, result: TxnResult },
    /// No marker after it: its transaction is still open.
    Open,
}

/// One transactional data record of a final log.
#[derive(Clone, Debug)]
pub(crate) struct LogRecord {
    pub value: Text,
    pub producer_id: u64,
    pub fate: Fate,
}

/// A served transactional batch: the least HW of its leader when it was served.
#[derive(Clone, Copy)]
struct Served {
    producer_id: u64,
    hw: Offset,
    broker: NodeId,
    at: SimTime,
}

/// The transaction invariants' state of one run.
#[derive(Default)]
pub struct TxnTrack {
    /// Every client transaction begun, by key.
    txns: BTreeMap<TxnKey, ClientTxn>,
    /// Which client transaction wrote each value.
    by_value: BTreeMap<Text, TxnKey>,
    /// Per instance index: its transactional id, identity and current transaction.
    instances: BTreeMap<u32, Instance>,
    /// Per transactional id: its newest initialised instance.
    newest: BTreeMap<String, Newest>,
    /// Per (broker, partition): the last LSO it served, at which leader epoch.
    lso: BTreeMap<(NodeId, u32), (LeaderEpoch, Offset)>,
    /// Per (partition, batch base offset): the served transactional batch with the least
    /// HW (the one most likely served before its marker was committed).
    served: BTreeMap<(u32, Offset), Served>,
    /// When each (partition, offset) was first read by a read_committed consumer.
    read_at: BTreeMap<(u32, Offset), SimTime>,
    /// Per partition: its final committed log's transactional records, by offset.
    fates: BTreeMap<u32, BTreeMap<Offset, LogRecord>>,
    /// Per partition: the markers of its final log and the record offsets each closed.
    markers: BTreeMap<u32, Vec<MarkerSpan>>,
}

impl Checker {
    /// Judges the transaction invariants in this run (a txn workload run).
    pub fn enable_txn(&mut self) {
        self.txn = Some(Box::default());
    }

    /// Whether the transaction invariants are judged in this run.
    pub fn txn_enabled(&self) -> bool {
        self.txn.is_some()
    }

    /// What a transactional client saw or did.
    pub fn on_txn_obs(&mut self, now: SimTime, obs: TxnObs) {
        let Some(t) = self.txn.as_mut() else {
            return;
        };
        let mut found = None;
        match obs {
            TxnObs::Begin {
                index,
                id,
                seq,
                values,
            } => {
                for v in values {
                    t.by_value.insert(v, (index, seq));
                }
                let i = t.instances.entry(index).or_insert_with(|| Instance {
                    id: id.clone(),
                    producer: None,
                    began: now,
                });
                i.began = now;
                t.txns.insert((index, seq), ClientTxn { id, outcome: None });
            }
            TxnObs::Initialized {
                index,
                id,
                producer,
            } => {
                let i = t.instances.entry(index).or_insert_with(|| Instance {
                    id: id.clone(),
                    producer: None,
                    began: 0,
                });
                i.producer = Some(producer);
                t.newest.insert(
                    id,
                    Newest {
                        index,
                        producer,
                        at: now,
                    },
                );
            }
            TxnObs::Written {
                index,
                p,
                base_offset,
            } => {
                found = t.fenced_act(index, false, || {
                    format!("wrote to partition {p} at offset {base_offset}")
                });
            }
            TxnObs::Ended {
                index,
                seq,
                result,
                producer,
            } => {
                if result == TxnResult::Commit {
                    found =
                        t.fenced_act(index, true, || format!("committed its transaction {seq}"));
                }
                if let Some(x) = t.txns.get_mut(&(index, seq)) {
                    x.outcome = Some(result);
                }
                if let Some(i) = t.instances.get_mut(&index) {
                    i.producer = Some(producer);
                }
            }
        }
        if let Some(d) = found {
            self.violate(TXN_FENCED_WRITE, now, d);
        }
    }

    /// A broker answered a read_committed fetch of partition `p` with `recs`.
    pub fn on_txn_served(
        &mut self,
        now: SimTime,
        broker: NodeId,
        p: u32,
        recs: &skein_core::message::ConsumerRecords,
    ) {
        let Some(t) = self.txn.as_mut() else {
            return;
        };
        let (lso, hw, epoch) = (
            recs.last_stable_offset,
            recs.high_watermark,
            recs.leader_epoch,
        );
        let mut found = Vec::new();
        if lso > hw {
            found.push(format!(
                "partition {p}: broker {broker} at epoch {epoch} reported its LSO at {lso}, past its HW {hw}"
            ));
        }
        match t.lso.get(&(broker, p)).copied() {
            Some((e, prev)) if e == epoch && lso < prev => found.push(format!(
                "partition {p}: broker {broker} moved its LSO back from {prev} to {lso} within epoch {epoch}"
            )),
            Some((e, _)) if e > epoch => {}
            _ => {
                t.lso.insert((broker, p), (epoch, lso));
            }
        }
        for b in &recs.batches {
            let Some(info) = b.producer.as_ref() else {
                continue;
            };
            if !b.is_transactional() || b.is_control() || b.records.is_empty() {
                continue;
            }
            let s = t.served.entry((p, b.base_offset)).or_insert(Served {
                producer_id: info.producer_id,
                hw,
                broker,
                at: now,
            });
            if hw < s.hw {
                *s = Served {
                    producer_id: info.producer_id,
                    hw,
                    broker,
                    at: now,
                };
            }
        }
        for d in found {
            self.violate(TXN_LSO, now, d);
        }
    }

    /// A consumer read offset `o` of partition `p` (when, for the violation's time).
    pub(super) fn txn_on_read(&mut self, now: SimTime, p: u32, o: Offset) {
        if let Some(t) = self.txn.as_mut() {
            t.read_at.entry((p, o)).or_insert(now);
        }
    }

    /// A broker process restarted: its LSO is judged afresh.
    pub(super) fn txn_on_broker_restart(&mut self, broker: NodeId) {
        if let Some(t) = self.txn.as_mut() {
            t.lso.retain(|(b, _), _| *b != broker);
        }
    }

    /// End of run: partition `p`'s final committed log (its leader's, below the HW).
    /// Not judged after an unclean election, which may replace committed records.
    pub fn finish_txn_log(&mut self, p: u32, batches: &[RecordBatch], below: Offset) {
        if self.had_unclean_election(&TopicPartition::new(crate::topic::TOPIC, p)) {
            return;
        }
        let Some(t) = self.txn.as_mut() else {
            return;
        };
        let (fates, markers) = log_fates(batches, below);
        t.fates.insert(p, fates);
        t.markers.insert(p, markers);
    }

    /// End of run: judges the transaction invariants against the final logs given by
    /// [`Checker::finish_txn_log`].
    pub fn finish_txn(&mut self, now: SimTime) {
        let Some(t) = self.txn.take() else {
            return;
        };
        // (invariant, when it happened, what): reads and serves at their time, the final
        // logs' findings at the end.
        let mut found: Vec<Finding> = Vec::new();
        // txn-aborted-read and reads of transactions never decided.
        for ((p, o), value) in self.reads.iter() {
            let Some(r) = t.fates.get(&p).and_then(|f| f.get(&o)) else {
                continue;
            };
            let at = t.read_at.get(&(p, o)).copied().unwrap_or(now);
            match r.fate {
                Fate::Closed {
                    marker,
                    result: TxnResult::Abort,
                } => found.push((
                    TXN_ABORTED_READ,
                    at,
                    format!(
                        "partition {p} offset {o}: a read_committed consumer read {value:?} of producer {}, aborted by the marker at offset {marker}{}",
                        r.producer_id,
                        t.describe(&r.value)
                    ),
                )),
                Fate::Open => found.push((
                    TXN_LSO,
                    at,
                    format!(
                        "partition {p} offset {o}: a read_committed consumer read {value:?} of producer {}, whose transaction never got a marker{}",
                        r.producer_id,
                        t.describe(&r.value)
                    ),
                )),
                Fate::Closed { .. } => {}
            }
        }
        // txn-lso: served before its marker was committed.
        for ((p, base), s) in &t.served {
            let Some(f) = t.fates.get(p) else { continue };
            let Some(r) = f.get(base) else { continue };
            let marker = match r.fate {
                Fate::Closed { marker, .. } => Some(marker),
                Fate::Open => None,
            };
            if marker.is_none_or(|m| m >= s.hw) {
                let m = marker.map_or("no marker".to_string(), |m| {
                    format!("its marker at offset {m}")
                });
                found.push((
                    TXN_LSO,
                    s.at,
                    format!(
                        "partition {p}: broker {} served offset {base} of producer {}'s open transaction to read_committed at {} with its HW at {} ({m} was not committed): the LSO passed an open transaction",
                        s.broker,
                        s.producer_id,
                        crate::time::Human(s.at),
                        s.hw
                    ),
                ));
            }
        }
        found.extend(t.judge_final_logs(now));
        found.sort_by_key(|f| f.1);
        for (inv, at, d) in found {
            self.violate(inv, at, d);
        }
    }
}

impl TxnTrack {
    /// txn-marker-misapplied and txn-torn, from the final logs alone (and what the clients
    /// were told): found at the end of the run.
    fn judge_final_logs(&self, now: SimTime) -> Vec<Finding> {
        let t = self;
        let mut found: Vec<Finding> = Vec::new();
        // txn-marker-misapplied: a marker's records belong to one client transaction, which
        // ended as the marker says.
        for (p, markers) in &t.markers {
            let fates = &t.fates[p];
            for (m, result, pid, closed) in markers {
                let keys: BTreeSet<TxnKey> = closed
                    .iter()
                    .filter_map(|o| t.by_value.get(&fates.get(o)?.value).copied())
                    .collect();
                if keys.len() > 1 {
                    let names: Vec<String> = keys.iter().map(|k| t.name(*k)).collect();
                    found.push((
                        TXN_MARKER_MISAPPLIED,
                        now,
                        format!(
                            "partition {p}: the {result:?} marker at offset {m} (producer {pid}) closed records of {} transactions at once: {}",
                            keys.len(),
                            names.join(", ")
                        ),
                    ));
                    continue;
                }
                for k in keys {
                    let told = t.txns.get(&k).and_then(|x| x.outcome);
                    if told.is_some_and(|o| o != *result) {
                        found.push((
                            TXN_MARKER_MISAPPLIED,
                            now,
                            format!(
                                "partition {p}: the {result:?} marker at offset {m} (producer {pid}) closed the records of {}, which its client was told ended {:?}: a marker of another transaction",
                                t.name(k),
                                told.expect("some")
                            ),
                        ));
                    }
                }
            }
        }
        // txn-torn: one client transaction decided both ways.
        let mut decided: BTreeMap<TxnKey, (Vec<String>, Vec<String>)> = BTreeMap::new();
        for (p, fates) in &t.fates {
            for (o, r) in fates {
                let (Fate::Closed { result, .. }, Some(k)) = (r.fate, t.by_value.get(&r.value))
                else {
                    continue;
                };
                let e = decided.entry(*k).or_default();
                let at = format!("partition {p} offset {o} ({})", r.value);
                match result {
                    TxnResult::Commit => e.0.push(at),
                    TxnResult::Abort => e.1.push(at),
                }
            }
        }
        for (k, (committed, aborted)) in decided {
            if !committed.is_empty() && !aborted.is_empty() {
                found.push((
                    TXN_TORN,
                    now,
                    format!(
                        "{} is torn: committed at {}, aborted at {}",
                        t.name(k),
                        committed.join(", "),
                        aborted.join(", ")
                    ),
                ));
            }
        }
        found
    }

    /// txn-fenced-write: instance `index` wrote or committed (`what`); a violation if a
    /// newer instance of its transactional id was initialised (before) at an identity not
    /// newer than its own. A write counts only in a transaction begun after that: the
    /// answer to one begun before may arrive late for a write appended in time. A commit
    /// always counts: one decided before the takeover bumped the epoch (KIP-890 part 2), so
    /// the newer instance's identity is newer.
    fn fenced_act(
        &self,
        index: u32,
        commit: bool,
        what: impl FnOnce() -> String,
    ) -> Option<String> {
        let i = self.instances.get(&index)?;
        let (id, mine) = (&i.id, i.producer?);
        let n = self.newest.get(id)?;
        let unfenced = n.index != index
            && (commit || i.began > n.at)
            && n.producer.producer_id == mine.producer_id
            && n.producer.producer_epoch <= mine.producer_epoch;
        unfenced.then(|| {
            format!(
                "transactional id {id}: instance t{index} (producer {} epoch {}) {} after instance t{} was initialised at epoch {} at {}: a fenced epoch wrote or committed",
                mine.producer_id,
                mine.producer_epoch,
                what(),
                n.index,
                n.producer.producer_epoch,
                crate::time::Human(n.at)
            )
        })
    }

    /// How reports name a client transaction.
    fn name(&self, k: TxnKey) -> String {
        let id = self.txns.get(&k).map_or("?", |x| x.id.as_str());
        let told = match self.txns.get(&k).and_then(|x| x.outcome) {
            Some(TxnResult::Commit) => "committed",
            Some(TxnResult::Abort) => "aborted",
            None => "outcome unknown",
        };
        format!("transaction {} of instance t{} ({id}, {told})", k.1, k.0)
    }

    /// ", written by <transaction>" for a value a client wrote.
    fn describe(&self, value: &Text) -> String {
        self.by_value
            .get(value)
            .map_or(String::new(), |k| format!(", written by {}", self.name(*k)))
    }
}

/// A finding: (invariant, when it happened, what).
type Finding = (&'static str, SimTime, String);

/// A marker of a final log: (offset, result, producer id, offsets of the records it closed).
type MarkerSpan = (Offset, TxnResult, u64, Vec<Offset>);

/// The fate of every transactional data record of a committed log (batches below `below`,
/// in offset order), and its markers with what each closed: a marker closes every record
/// of its producer since that producer's previous marker, as the partition's producer state
/// does.
pub(crate) fn log_fates(
    batches: &[RecordBatch],
    below: Offset,
) -> (BTreeMap<Offset, LogRecord>, Vec<MarkerSpan>) {
    let mut fates = BTreeMap::new();
    let mut markers = Vec::new();
    let mut open: BTreeMap<u64, Vec<Offset>> = BTreeMap::new();
    for b in batches {
        if b.next_offset() > below {
            break;
        }
        if let Some(m) = b.as_txn_marker() {
            let closed = open.remove(&m.producer_id).unwrap_or_default();
            for o in &closed {
                if let Some(r) = fates.get_mut(o) {
                    let r: &mut LogRecord = r;
                    r.fate = Fate::Closed {
                        marker: b.base_offset,
                        result: m.result,
                    };
                }
            }
            markers.push((b.base_offset, m.result, m.producer_id, closed));
            continue;
        }
        let Some(info) = b.producer.as_ref() else {
            continue;
        };
        if !b.is_transactional() || b.is_control() {
            continue;
        }
        let mine = open.entry(info.producer_id).or_default();
        for (o, r) in b.iter_offsets() {
            let value = r
                .value
                .as_deref()
                .map(crate::topic::value_of)
                .unwrap_or_default();
            fates.insert(
                o,
                LogRecord {
                    value,
                    producer_id: info.producer_id,
                    fate: Fate::Open,
                },
            );
            mine.push(o);
        }
    }
    (fates, markers)
}
