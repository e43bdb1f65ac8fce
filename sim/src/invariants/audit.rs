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

        if view.role == ReplicaRole::Leader {
            self.note_presumed_leader(now, broker, view);
        }
        if tp.topic != crate::topic::TOPIC {
            return;
        }
        let p = tp.partition;
        let floor = self.note_log_start(p, broker, view);
        if view.role != ReplicaRole::Leader {
            return;
        }
        self.note_epoch(p, view.leader_epoch);
        self.on_leader_hw(now, broker, tp, view.leader_epoch, view.high_watermark);
        // How far this leader (this broker, process and epoch) was checked: kept per
        // broker, so that two brokers both presuming leadership (a deposed one not told
        // yet) each go on from where they were instead of starting again from the first
        // acknowledged record at every alternation (a read of the whole log per audit).
        let (e, mut n) = self
            .leader_checked
            .get(&(p, broker))
            .copied()
            .unwrap_or((view.leader_epoch, 0));
        if e != view.leader_epoch {
            n = 0;
        }
        let Some(acked) = self.acked.get_mut(&p) else {
            self.leader_checked
                .insert((p, broker), (view.leader_epoch, n));
            return;
        };
        acked.prune(floor);
        n = n.max(acked.first_kept());
        // The acknowledged records this leader must hold and has not been checked for: up
        // to the first one acknowledged by a newer epoch (a deposed leader need not have
        // what its successors acknowledged).
        let pending = acked.from(n);
        let pending = &pending[..pending
            .iter()
            .take_while(|a| a.epoch <= view.leader_epoch)
            .count()];
        // Below its log start retention deleted them (only runs with retention have a
        // log start above 0): not required of this leader. An acknowledged record deleted
        // before anyone read it still fails `liveness`, which wants every one read back.
        let start = view.log_start_offset;
        let mut missing: Vec<String> = Vec::new();
        if !pending.is_empty() {
            // One read for all of them: a log read costs the length of the range.
            let lo = pending
                .iter()
                .map(|a| a.offset)
                .filter(|o| *o >= start)
                .min()
                .unwrap_or(start);
            let hi = pending
                .iter()
                .map(|a| a.offset + 1)
                .max()
                .unwrap_or(0)
                .min(view.log_end_offset);
            let read_now;
            let batches: &[RecordBatch] = if hi > lo {
                match &seen {
                    Some((f, b, batches)) if *f <= lo && hi <= *b => batches,
                    _ => match read(lo, hi) {
                        Ok(batches) => {
                            read_now = batches;
                            &read_now
                        }
                        // Unreadable now (an injected read error): try again at the next audit.
                        Err(_) => return,
                    },
                }
            } else {
                &[]
            };
            // Values only: the records' digests are replica-divergence's business.
            let held = ByOffset::new(
                batches
                    .iter()
                    .flat_map(RecordBatch::iter_offsets)
                    .filter(|(o, _)| lo <= *o && *o < hi)
                    .map(|(o, r)| (o, r.value.as_deref()))
                    .collect(),
            );
            for a in pending.iter().filter(|a| a.offset >= start) {
                if a.offset >= view.log_end_offset {
                    missing.push(format!(
                        "offset {} ({:?}) is past its log end {}",
                        a.offset, a.value, view.log_end_offset
                    ));
                    continue;
                }
                match held.get(a.offset) {
                    Some(Some(v)) if v == a.value.as_bytes() => {}
                    Some(v) => missing.push(format!(
                        "offset {} holds {:?}, not {:?}",
                        a.offset,
                        v.map(String::from_utf8_lossy),
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
            .insert((p, broker), (view.leader_epoch, n));
        if let Some(first) = missing.first() {
            let d = format!("partition {p}: leader {broker} at epoch {}: acknowledged record lost: {first} ({} lost)", view.leader_epoch, missing.len());
            self.violate(ACKED_WRITE_LOST, now, d);
        }
    }

    /// Records `broker`'s log start of partition `p`; returns the least log start of every
    /// replica of `p` (below it no replica holds anything any more), 0 while some replica
    /// has not been seen yet.
    fn note_log_start(&mut self, p: u32, broker: NodeId, view: &ReplicaView) -> Offset {
        self.log_starts.insert((p, broker), view.log_start_offset);
        let mut floor = Offset::MAX;
        for r in view.replicas.iter().chain(std::iter::once(&broker)) {
            match self.log_starts.get(&(p, *r)) {
                Some(s) => floor = floor.min(*s),
                None => return 0,
            }
        }
        floor
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
        let comparable = self.comparable_below(view);
        let judge_epochs = !self.had_unclean_election(tp);
        let st = self.partition_mut(tp);
        let mut from = st
            .verified
            .get(&broker)
            .copied()
            .unwrap_or(0)
            .max(view.log_start_offset);
        if view.log_end_offset < from {
            from = view.log_end_offset; // truncated: re-verify what comes back
        }
        let hw = comparable.max(from);
        let mut seen: Option<(Offset, Offset, Vec<RecordBatch>)> = None;
        // (first differing offset, how many differ), and fenced-producer-write's findings.
        let mut bad: Option<(Offset, usize)> = None;
        let mut zombies = Vec::new();
        if hw > from {
            if let Ok(batches) = read(from, hw) {
                // Each record in range is digested and compared (or committed) as it comes:
                // no list of them is built.
                let mut upto = from;
                let mut any = false;
                for b in &batches {
                    let h = batch_digest(b);
                    for (o, r) in b.iter_offsets() {
                        if o < from || o >= hw {
                            continue;
                        }
                        let d = record_digest_from(h, r);
                        match st.committed.get(o) {
                            Some(c) if *c != d => {
                                let (_, n) = bad.get_or_insert((o, 0));
                                *n += 1;
                            }
                            Some(_) => {}
                            None => {
                                st.committed.insert(o, d);
                            }
                        }
                        upto = upto.max(o + 1);
                        any = true;
                    }
                }
                if judge_epochs {
                    zombies =
                        producer_epochs(&mut st.producer_epochs, broker, tp, &batches, from, hw);
                }
                let read_from = from;
                from = if any { upto } else { from };
                seen = Some((read_from, hw, batches));
            }
        }
        st.verified.insert(broker, from);
        if let Some((o, n)) = bad {
            let d = format!("partition {}: broker {broker} holds a different record at offset {o} below its HW {hw} ({n} offsets differ)", part(tp));
            self.violate(REPLICA_DIVERGENCE, now, d);
        }
        for d in zombies {
            self.violate(FENCED_PRODUCER_WRITE, now, d);
        }
        seen
    }
}

/// fenced-producer-write over the batches of `[from, below)` a broker holds below its HW:
/// each producer id's epoch must not go back along the log. Returns the violations found.
fn producer_epochs(
    epochs: &mut BTreeMap<u64, (u16, Offset)>,
    broker: NodeId,
    tp: &TopicPartition,
    batches: &[RecordBatch],
    from: Offset,
    below: Offset,
) -> Vec<String> {
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
    zombies
}
