//! The per-replica audit: each pass reads every replica's view and its log below the HW,
//! and judges it against the committed log and every acknowledged write
//! ([`Checker::audit`]), including that no producer's epoch goes back along the log.

use super::*;

impl Checker {
    /// Checks one replica: its HW within its log (valid-high-watermark); that it lists
    /// itself in its ISR if it leads (leader-in-isr); its log below its HW against the
    /// committed log (replica-divergence); if it leads the simulator's topic, that it holds
    /// every acknowledged record (of its epoch or older) at its offset. Audit the replicas
    /// presuming leadership first in each pass (`begin_audit`): their HWs bound
    /// [`Checker::strong_isr`].
    pub fn audit(&mut self, now: SimTime, broker: NodeId, view: &ReplicaView, read: LogReader<'_>) {
        let tp = &view.tp;
        self.check_hw_range(now, broker, view);
        self.reconcile_unclean(broker, view, read);
        // What this pass read of the log, `[lo, hi)` and its batches: the acknowledged-write
        // check below reuses it when its range lies within (the log cannot change between).
        let seen = self.check_divergence(now, broker, view, read);

        if view.role == Role::Leader {
            self.note_presumed_leader(now, broker, view);
        }
        if tp.topic != crate::client::TOPIC {
            return;
        }
        let p = tp.partition;
        if view.role != Role::Leader {
            return;
        }
        self.note_epoch(p, view.leader_epoch);
        self.on_leader_hw(now, broker, tp, view.leader_epoch, view.high_watermark);
        let (b, e, mut n) =
            self.leader_checked
                .get(&p)
                .copied()
                .unwrap_or((broker, view.leader_epoch, 0));
        if (b, e) != (broker, view.leader_epoch) {
            n = 0;
        }
        let Some(acked) = self.acked.get(&p) else {
            self.leader_checked
                .insert(p, (broker, view.leader_epoch, n));
            return;
        };
        // The acknowledged records this leader must hold and has not been checked for: up
        // to the first one acknowledged by a newer epoch (a deposed leader need not have
        // what its successors acknowledged).
        let pending: Vec<&Acked> = acked[n..]
            .iter()
            .take_while(|a| a.epoch <= view.leader_epoch)
            .collect();
        let mut missing: Vec<String> = Vec::new();
        if !pending.is_empty() {
            // One read for all of them: a log read costs the length of the range.
            let lo = pending.iter().map(|a| a.offset).min().unwrap_or(0);
            let hi = pending
                .iter()
                .map(|a| a.offset + 1)
                .max()
                .unwrap_or(0)
                .min(view.log_end_offset);
            let held: BTreeMap<Offset, Option<Vec<u8>>> = if hi > lo {
                let batches = match seen.filter(|(f, b, _)| *f <= lo && hi <= *b) {
                    Some((_, _, batches)) => batches,
                    None => match read(lo, hi) {
                        Ok(batches) => batches,
                        // Unreadable now (an injected read error): try again at the next audit.
                        Err(_) => return,
                    },
                };
                records_in(&batches, lo, hi)
                    .into_iter()
                    .map(|(o, _, v)| (o, v.map(<[u8]>::to_vec)))
                    .collect()
            } else {
                BTreeMap::new()
            };
            for a in &pending {
                if a.offset >= view.log_end_offset {
                    missing.push(format!(
                        "offset {} ({:?}) is past its log end {}",
                        a.offset, a.value, view.log_end_offset
                    ));
                    continue;
                }
                match held.get(&a.offset) {
                    Some(Some(v)) if v.as_slice() == a.value.as_bytes() => {}
                    Some(v) => missing.push(format!(
                        "offset {} holds {:?}, not {:?}",
                        a.offset,
                        v.as_deref().map(String::from_utf8_lossy),
                        a.value
                    )),
                    None => missing.push(format!(
                        "offset {} ({:?}) is not in its log",
                        a.offset, a.value
                    )),
                }
            }
            n += pending.len();
        }
        self.leader_checked
            .insert(p, (broker, view.leader_epoch, n));
        if let Some(first) = missing.first() {
            let d = format!("partition {p}: leader {broker} at epoch {}: acknowledged record lost: {first} ({} lost)", view.leader_epoch, missing.len());
            self.violate(ACKED_WRITE_LOST, now, d);
        }
    }

    /// replica-divergence (and fenced-producer-write) on `view`'s log from where it was last
    /// verified up to its comparable HW; moves the verified cursor. Returns what it read:
    /// `[from, below)` and its batches.
    fn check_divergence(
        &mut self,
        now: SimTime,
        broker: NodeId,
        view: &ReplicaView,
        read: LogReader<'_>,
    ) -> Option<(Offset, Offset, Vec<RecordBatch>)> {
        let tp = &view.tp;
        let key = (broker, tp.clone());
        let mut from = self
            .verified
            .get(&key)
            .copied()
            .unwrap_or(0)
            .max(view.log_start_offset);
        if view.log_end_offset < from {
            from = view.log_end_offset; // truncated: re-verify what comes back
        }
        let hw = self.comparable_below(view).max(from);
        let mut seen: Option<(Offset, Offset, Vec<RecordBatch>)> = None;
        if hw > from {
            if let Ok(batches) = read(from, hw) {
                let recs = records_in(&batches, from, hw);
                let mut upto = from;
                let committed = self.committed.entry(tp.clone()).or_default();
                let mut bad = Vec::new();
                for (o, d, _) in &recs {
                    match committed.get(*o) {
                        Some(c) if c != d => bad.push(*o),
                        Some(_) => {}
                        None => {
                            committed.insert(*o, *d);
                        }
                    }
                    upto = upto.max(o + 1);
                }
                if let Some(o) = bad.first() {
                    let d = format!("partition {}: broker {broker} holds a different record at offset {o} below its HW {hw} ({} offsets differ)", part(tp), bad.len());
                    self.violate(REPLICA_DIVERGENCE, now, d);
                }
                self.check_producer_epochs(now, broker, tp, &batches, from, hw);
                let read_from = from;
                from = if recs.is_empty() { from } else { upto };
                seen = Some((read_from, hw, batches));
            }
        }
        self.verified.insert(key, from);
        seen
    }

    /// fenced-producer-write over the batches of `[from, below)` a broker holds below its
    /// HW: each producer id's epoch must not go back along the log.
    fn check_producer_epochs(
        &mut self,
        now: SimTime,
        broker: NodeId,
        tp: &TopicPartition,
        batches: &[RecordBatch],
        from: Offset,
        below: Offset,
    ) {
        if self.had_unclean_election(tp) {
            return;
        }
        if !self.producer_epochs.contains_key(tp) {
            self.producer_epochs.insert(tp.clone(), BTreeMap::new());
        }
        let epochs = self.producer_epochs.get_mut(tp).expect("inserted above");
        let mut zombies = Vec::new();
        for b in batches {
            let Some(p) = &b.producer else { continue };
            if b.last_offset() < from || b.base_offset >= below || b.records.is_empty() {
                continue;
            }
            match epochs.get_mut(&p.producer_id) {
                None => {
                    epochs.insert(p.producer_id, (p.producer_epoch, b.base_offset));
                }
                Some((epoch, at)) if p.producer_epoch > *epoch => {
                    *epoch = p.producer_epoch;
                    *at = b.base_offset;
                }
                Some((epoch, at)) if p.producer_epoch == *epoch => *at = (*at).min(b.base_offset),
                Some((epoch, at)) => {
                    // Only a batch after the newer epoch's first one is a zombie write; one
                    // before it was written while its epoch was still current.
                    if b.base_offset > *at {
                        zombies.push(format!(
                            "partition {}: broker {broker} holds at offset {} a batch of producer {} at epoch {}, after epoch {} began at offset {}: a fenced producer's write was appended",
                            part(tp),
                            b.base_offset,
                            p.producer_id,
                            p.producer_epoch,
                            epoch,
                            at
                        ));
                    }
                }
            }
        }
        for d in zombies {
            self.violate(FENCED_PRODUCER_WRITE, now, d);
        }
    }
}
