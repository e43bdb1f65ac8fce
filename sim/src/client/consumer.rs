//! The simulated consumer: assigned every partition of the topic, it polls each one's
//! leader by offset through core's fetch cursor and records what it read in the history.
//!
//! A read_committed consumer (the transactional workload's, [`Consumer::read_committed`])
//! asks for committed records only and records each poll as a one-poll `txn` operation
//! with the last stable offset the fetch reported as its `end`, so the history checker
//! judges aborted and intermediate reads and torn transactions.

use super::*;
use crate::client_step::CursorObs;
use crate::topic::{process_id, value_of};
use skein_core::txn::IsolationLevel;
use skein_jepsen::{Isolation, PollRead, TxnValue};

struct Poll {
    corr: u64,
    sent_at: SimTime,
}

/// A consumer assigned every partition of the topic.
pub struct Consumer {
    pub client: u64,
    partitions: u32,
    meta: TopicLeaders,
    corr: u64,
    assigned: bool,
    /// Per partition, by number (0..partitions): asked about on every step and wake-up,
    /// so slots rather than maps.
    cursors: Vec<FetchCursor>,
    next_poll: Vec<SimTime>,
    polls: Vec<Option<Poll>>,
    /// Reads committed records only (`isolation.level=read_committed`).
    read_committed: bool,
    pub records: u64,
}

impl Consumer {
    /// `ignore_truncation`: the bug zoo's `consumer-ignores-truncation`.
    pub fn new(client: u64, partitions: u32, ignore_truncation: bool) -> Self {
        let cursor = FetchCursor::new(0).ignoring_truncation(ignore_truncation);
        Self {
            client,
            partitions,
            meta: topic_leaders(partitions),
            corr: 0,
            assigned: false,
            cursors: vec![cursor; partitions as usize],
            next_poll: vec![0; partitions as usize],
            polls: (0..partitions).map(|_| None).collect(),
            read_committed: false,
            records: 0,
        }
    }

    /// This consumer reads committed records only, and its polls are `txn` operations in
    /// the history.
    pub fn read_committed(mut self) -> Self {
        self.read_committed = true;
        for c in &mut self.cursors {
            *c = c.clone().with_isolation(IsolationLevel::ReadCommitted);
        }
        self
    }

    /// A poll's history event: a plain `poll`, or for a read_committed consumer a `txn`
    /// holding one poll (`reads`: what it returned, with the fetch's last stable offset).
    fn poll_event(
        &self,
        kind: EventType,
        p: u32,
        read: Option<(Vec<(Offset, Text)>, Offset)>,
    ) -> (Function, Value) {
        if !self.read_committed {
            let value = match read {
                Some((records, _)) => Value::Poll(PollValue {
                    records: records
                        .into_iter()
                        .map(|(o, v)| PolledRecord::new(TOPIC_TEXT, p, o, v))
                        .collect(),
                }),
                None => Value::Null,
            };
            return (Function::Poll, value);
        }
        let mut r = PollRead::new(TOPIC_TEXT, p);
        if let Some((records, end)) = read {
            r.records = records;
            r.end = Some(end);
        }
        let reads = if kind == EventType::Ok {
            vec![r]
        } else {
            Vec::new()
        };
        let value = TxnValue::new(Isolation::ReadCommitted).poll(reads);
        (Function::Txn, Value::Txn(Box::new(value)))
    }

    fn record_poll(
        &self,
        ctx: &mut Ctx<'_>,
        kind: EventType,
        p: u32,
        read: Option<(Vec<(Offset, Text)>, Offset)>,
    ) {
        let (f, value) = self.poll_event(kind, p, read);
        ctx.event(self.client, p, kind, f, value);
    }

    pub fn tick(&mut self, ctx: &mut Ctx<'_>) {
        if !self.assigned {
            self.assigned = true;
            for p in 0..self.partitions {
                ctx.event(
                    self.client,
                    p,
                    EventType::Ok,
                    Function::Assign,
                    Value::Assign(AssignValue {
                        partitions: vec![(TOPIC.into(), p)],
                        ..AssignValue::default()
                    }),
                );
            }
        }
        for p in 0..self.partitions {
            if let Some(poll) = &self.polls[p as usize] {
                if ctx.now >= poll.sent_at + DATA_REQUEST_TIMEOUT {
                    self.polls[p as usize] = None;
                    self.record_poll(ctx, EventType::Info, p, None);
                    self.meta.invalidate();
                }
            }
        }
        poll_metadata(&mut self.meta, &mut self.corr, ctx);
        self.send_polls(ctx);
    }

    fn send_polls(&mut self, ctx: &mut Ctx<'_>) {
        for p in 0..self.partitions {
            if self.polls[p as usize].is_some() || self.next_poll[p as usize] > ctx.now {
                continue;
            }
            let Some(leader) = self.meta.leader(p) else {
                continue;
            };
            self.corr += 1;
            self.polls[p as usize] = Some(Poll {
                corr: self.corr,
                sent_at: ctx.now,
            });
            self.record_poll(ctx, EventType::Invoke, p, None);
            ctx.out.sends.push((
                Address::Node(leader),
                Message::ConsumerFetch(self.cursors[p as usize].request(
                    self.corr,
                    tp(p),
                    64 * 1024,
                )),
            ));
        }
    }

    pub fn handle(&mut self, from: Address, msg: Message, ctx: &mut Ctx<'_>) {
        match msg {
            Message::MetadataResponse(r) => self.meta.learn(&r),
            Message::ConsumerFetchResponse(r) => self.on_fetch(from, *r, ctx),
            _ => {}
        }
        poll_metadata(&mut self.meta, &mut self.corr, ctx);
        self.send_polls(ctx);
    }

    fn on_fetch(&mut self, from: Address, r: ConsumerFetchResponse, ctx: &mut Ctx<'_>) {
        let p = r.tp.partition;
        let Some(slot) = self.polls.get_mut(p as usize) else {
            return;
        };
        if slot.as_ref().map(|x| x.corr) != Some(r.correlation) {
            return;
        }
        *slot = None;
        let process = process_id(self.client, p);
        let served_by = match from {
            Address::Node(n) => n,
            _ => 0,
        };
        match r.result {
            Ok(recs) => {
                let cursor = &mut self.cursors[p as usize];
                let pos = cursor.position();
                let taken = cursor.take(&recs);
                let mut out = Vec::with_capacity(taken.records.len());
                let mut read = Vec::with_capacity(taken.records.len());
                for (offset, _, rec) in taken.records {
                    let value = rec.value.as_deref().map(value_of).unwrap_or_default();
                    out.push(PolledRecord::new(TOPIC_TEXT, p, offset, value.clone()));
                    read.push((offset, value.clone()));
                    ctx.out.read.push((p, offset, value, served_by));
                }
                let next = cursor.position();
                self.records += out.len() as u64;
                let delay = if next > pos { 0 } else { POLL_INTERVAL };
                self.next_poll[p as usize] = ctx.now + delay;
                if self.read_committed {
                    // consumer-skipped-records does not judge read_committed consumers: they
                    // step over aborted records and markers by design (the history checker's
                    // G1a and torn-transaction judge what they read instead).
                    let (f, value) =
                        self.poll_event(EventType::Ok, p, Some((read, recs.last_stable_offset)));
                    ctx.history.push(ctx.now, process, EventType::Ok, f, value);
                } else {
                    ctx.out.cursor.push(CursorObs::Polled {
                        p,
                        from: pos,
                        to: next,
                        records: read,
                        epoch: recs.leader_epoch,
                    });
                    ctx.history.push(
                        ctx.now,
                        process,
                        EventType::Ok,
                        Function::Poll,
                        Value::Poll(PollValue { records: out }),
                    );
                }
            }
            Err(e) => {
                let (f, value) = self.poll_event(EventType::Fail, p, None);
                ctx.history
                    .push(ctx.now, process, EventType::Fail, f, value);
                // A truncation (the cursor moved back to the divergence point) or records
                // deleted by retention (it moved to the log start): core's cursor decides.
                if let Some(cursor) = self.cursors.get_mut(p as usize) {
                    let before = cursor.position();
                    if let Some(truncation) = cursor.on_error(&e) {
                        ctx.out.cursor.push(CursorObs::Truncated { p, truncation });
                    } else if cursor.position() > before {
                        // Retention deleted what it was to read next: it starts again at
                        // the leader's log start, and what lies below was nobody's to read
                        // (another replica, not trimmed yet, may still hold it at the end).
                        let at = cursor.position();
                        ctx.out.cursor.push(CursorObs::Start { p, at });
                    }
                }
                let from = Some(served_by).filter(|n| *n != 0);
                self.meta.with_cache(|c| c.on_fetch_error(&r.tp, from, &e));
                self.next_poll[p as usize] = ctx.now + RETRY_BACKOFF;
            }
        }
    }

    pub fn next_wake(&self) -> Option<SimTime> {
        // A plain minimum and whether there is one (see `Producer::next_wake`).
        let first = self.meta.next_refresh();
        let (mut t, mut any) = (first.unwrap_or(SimTime::MAX), first.is_some());
        let mut at = |x: SimTime| {
            t = t.min(x);
            any = true;
        };
        if !self.assigned {
            at(0);
        }
        // The per-partition slots side by side (all `partitions` long): asked after every
        // step, indexing each by number cost a bounds check apiece.
        let slots = self.polls.iter().zip(&self.next_poll);
        for ((poll, next), leader) in slots.zip(self.meta.leaders()) {
            match poll {
                Some(poll) => at(poll.sent_at + DATA_REQUEST_TIMEOUT),
                None if leader.is_some() => at(*next),
                None => {}
            }
        }
        any.then_some(t)
    }

    pub fn finish(&mut self, ctx: &mut Ctx<'_>) {
        for p in 0..self.partitions {
            if self.polls[p as usize].take().is_none() {
                continue;
            }
            self.record_poll(ctx, EventType::Info, p, None);
        }
    }

    /// Next offset this consumer will read in partition `p`.
    pub fn position(&self, p: u32) -> Offset {
        self.cursors
            .get(p as usize)
            .map_or(0, FetchCursor::position)
    }
}
