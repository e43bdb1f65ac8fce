//! Simulated clients: idempotent acks=all producers and partition-reading consumers.
//!
//! Clients are small state machines like the nodes: the world hands them messages and
//! time, they return messages to send, and they record what they did in the history. A
//! producer writes unique values ("p3-17"), follows metadata to each partition's leader,
//! keeps one batch in flight per partition and retries it on retriable errors and timeouts
//! with the same producer id, epoch and sequence (so a retry is never written twice). A
//! consumer is assigned every partition and polls each one's leader by offset.
//!
//! History processes are per (client, partition) so that each process has at most one
//! operation in flight, as Jepsen's model of a process expects.

use crate::history::History;
use crate::rng::{between, exponential};
use crate::time::{SimTime, MILLIS, SECS};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use skein_core::controller::{ControllerRequest, ControllerResponse};
use skein_core::log::RecordBatch;
use skein_core::message::*;
use skein_core::producer::{Completion, IdempotentProducer, ProduceOutcome};
use skein_core::{LeaderEpoch, NodeId, Offset, TopicPartition};
use skein_jepsen::{AssignValue, EventType, Function, PollValue, PolledRecord, SendValue, Value};
use std::collections::BTreeMap;

/// The topic every simulated client uses.
pub const TOPIC: &str = "sim";

/// Wall-clock origin of simulated record timestamps (2026-01-01T00:00:00Z), so timestamps
/// look like real ones.
const EPOCH_MS: i64 = 1_767_225_600_000;

pub(crate) const REQUEST_TIMEOUT: SimTime = SECS;
/// How long a leader may wait for replication before answering RequestTimedOut.
const PRODUCE_TIMEOUT: SimTime = 500 * MILLIS;
/// Most records a producer puts in one batch.
const MAX_BATCH_RECORDS: usize = 16;
pub(crate) const RETRY_BACKOFF: SimTime = 50 * MILLIS;
const METADATA_TIMEOUT: SimTime = 500 * MILLIS;
const METADATA_MIN_INTERVAL: SimTime = 50 * MILLIS;
pub(crate) const POLL_INTERVAL: SimTime = 20 * MILLIS;

/// A send's history value, with the producer's acks level (what its acknowledgement means).
fn sent(p: u32, value: &str, acks: Acks) -> SendValue {
    SendValue::new(TOPIC, p, value).with_acks(match acks {
        Acks::None => skein_jepsen::Acks::None,
        Acks::Leader => skein_jepsen::Acks::Leader,
        Acks::All => skein_jepsen::Acks::All,
    })
}

/// History process id of a client's work on one partition.
pub fn process_id(client: u64, partition: u32) -> u64 {
    client * 1000 + partition as u64
}

/// The client a history process id belongs to (the inverse of [`process_id`]).
pub fn client_of_process(process: u64) -> u64 {
    process / 1000
}

/// What a client step produced besides history.
#[derive(Default)]
pub struct ClientOut {
    pub sends: Vec<(Address, Message)>,
    /// Acknowledged acks=all records: (partition, offset, value, leader epoch).
    pub acked: Vec<(u32, Offset, String, LeaderEpoch)>,
    /// Records read: (partition, offset, value, served by).
    pub read: Vec<(u32, Offset, String, NodeId)>,
    /// What group members saw, for the group invariants.
    pub group: Vec<crate::group_client::GroupObs>,
    /// A group member asks to be paused for this long from now (a pause fault striking).
    pub pause: Option<SimTime>,
}

/// Shared context of one client step.
pub struct Ctx<'a> {
    pub now: SimTime,
    pub history: &'a mut History,
    pub rng: &'a mut ChaCha8Rng,
    pub out: &'a mut ClientOut,
    pub brokers: u32,
}

/// Leaders as the client last heard of them.
#[derive(Default)]
pub(crate) struct MetaCache {
    leaders: BTreeMap<u32, (Option<NodeId>, LeaderEpoch)>,
    pending: Option<(u64, SimTime)>,
    stale: bool,
    last_request: Option<SimTime>,
}

impl MetaCache {
    pub(crate) fn leader(&self, p: u32) -> Option<NodeId> {
        self.leaders.get(&p).and_then(|l| l.0)
    }

    pub(crate) fn invalidate(&mut self) {
        self.stale = true;
    }

    /// Sends a metadata request if one is due.
    pub(crate) fn poll(&mut self, corr: &mut u64, ctx: &mut Ctx<'_>, partitions: u32) {
        if let Some((_, sent)) = self.pending {
            if ctx.now < sent + METADATA_TIMEOUT {
                return;
            }
            self.pending = None;
        }
        let missing = (0..partitions).any(|p| self.leader(p).is_none());
        if !(self.stale || missing) {
            return;
        }
        if let Some(last) = self.last_request {
            if ctx.now < last + METADATA_MIN_INTERVAL {
                return;
            }
        }
        *corr += 1;
        let to = ctx.rng.gen_range(1..=ctx.brokers);
        self.pending = Some((*corr, ctx.now));
        self.last_request = Some(ctx.now);
        self.stale = false;
        ctx.out.sends.push((
            Address::Node(to),
            Message::Metadata(MetadataRequest {
                correlation: *corr,
                topics: Some(vec![TOPIC.to_string()]),
            }),
        ));
    }

    pub(crate) fn on_response(&mut self, r: &MetadataResponse) {
        if self.pending.map(|(c, _)| c) == Some(r.correlation) {
            self.pending = None;
        }
        for pm in &r.partitions {
            if pm.tp.topic != TOPIC {
                continue;
            }
            let e = self.leaders.entry(pm.tp.partition).or_insert((None, 0));
            // Never step back to an older view from a lagging broker.
            if pm.leader_epoch >= e.1 {
                *e = (pm.leader, pm.leader_epoch);
            }
        }
    }

    pub(crate) fn next_wake(&self, partitions: u32) -> Option<SimTime> {
        if let Some((_, sent)) = self.pending {
            return Some(sent + METADATA_TIMEOUT);
        }
        let missing = (0..partitions).any(|p| self.leader(p).is_none());
        if self.stale || missing {
            Some(self.last_request.map_or(0, |l| l + METADATA_MIN_INTERVAL))
        } else {
            None
        }
    }
}

pub(crate) fn tp(p: u32) -> TopicPartition {
    TopicPartition::new(TOPIC, p)
}

struct InFlight {
    values: Vec<String>,
    batch: RecordBatch,
    /// Correlation of the latest attempt, once sent.
    corr: Option<u64>,
    sent_at: SimTime,
    /// When to (re)send; `None` while waiting for a response.
    send_at: Option<SimTime>,
}

/// An idempotent producer.
pub struct Producer {
    pub client: u64,
    index: u32,
    partitions: u32,
    acks: Acks,
    idempotent: bool,
    idem: IdempotentProducer,
    init_sent: Option<SimTime>,
    meta: MetaCache,
    corr: u64,
    produced: u64,
    mean_gap: SimTime,
    next_send: SimTime,
    /// Stop creating new values at this time (retries continue).
    stop_at: SimTime,
    /// Stop sending new batches at this time (values still queued are dropped, never sent).
    stop_dispatch: SimTime,
    /// Values waiting for their partition's in-flight batch to finish.
    queued: BTreeMap<u32, std::collections::VecDeque<String>>,
    in_flight: BTreeMap<u32, InFlight>,
    fenced: bool,
    pub sends: u64,
    pub acked: u64,
}

impl Producer {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: u64,
        index: u32,
        partitions: u32,
        acks: Acks,
        idempotent: bool,
        rate: f64,
        start_at: SimTime,
        stop_at: SimTime,
        stop_dispatch: SimTime,
    ) -> Self {
        let mean_gap = if rate > 0.0 {
            (SECS as f64 / rate) as SimTime
        } else {
            SimTime::MAX / 4
        };
        Self {
            client,
            index,
            partitions,
            acks,
            idempotent,
            idem: IdempotentProducer::new(),
            init_sent: None,
            meta: MetaCache::default(),
            corr: 0,
            produced: 0,
            mean_gap,
            next_send: start_at,
            stop_at,
            stop_dispatch,
            queued: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            fenced: false,
            sends: 0,
            acked: 0,
        }
    }

    fn ready(&self) -> bool {
        !self.fenced && (!self.idempotent || self.idem.producer().is_some())
    }

    /// The producer id and epoch in use (idempotent producers, once initialised).
    pub fn producer_id(&self) -> Option<skein_core::controller::ProducerIdAndEpoch> {
        self.idem.producer()
    }

    /// Whether a broker has fenced this producer (a newer epoch of its id exists).
    pub fn is_fenced(&self) -> bool {
        self.fenced
    }

    /// Takes over another instance's producer identity, as a restarted instance with the
    /// same identity does (KIP-360): adopt its id and move to the next epoch, which fences
    /// the old instance at every partition this one writes to.
    pub fn take_over(&mut self, id: skein_core::controller::ProducerIdAndEpoch) {
        self.idem.init(id);
        let _ = self.idem.bump_epoch();
    }

    /// Timers: new values, init, metadata, resends, timeouts.
    pub fn tick(&mut self, ctx: &mut Ctx<'_>) {
        if self.idempotent
            && self.idem.producer().is_none()
            && self
                .init_sent
                .is_none_or(|t| ctx.now >= t + METADATA_TIMEOUT)
        {
            self.init_sent = Some(ctx.now);
            ctx.out.sends.push((
                Address::Controller,
                Message::ControllerRequest(ControllerRequest::InitProducerId),
            ));
        }
        while self.next_send <= ctx.now && self.next_send < self.stop_at && !self.fenced {
            self.produced += 1;
            let value = format!("p{}-{}", self.index, self.produced);
            let p = ctx.rng.gen_range(0..self.partitions);
            self.queued.entry(p).or_default().push_back(value);
            self.next_send += exponential(ctx.rng, self.mean_gap).max(1);
        }
        // Request timeouts: resend the same batch.
        for (p, f) in self.in_flight.iter_mut() {
            if f.send_at.is_none() && ctx.now >= f.sent_at + REQUEST_TIMEOUT {
                f.send_at = Some(ctx.now);
                f.corr = None;
                let _ = p;
                self.meta.invalidate();
            }
        }
        self.meta.poll(&mut self.corr, ctx, self.partitions);
        self.dispatch(ctx);
    }

    fn dispatch(&mut self, ctx: &mut Ctx<'_>) {
        if !self.ready() {
            return;
        }
        if ctx.now >= self.stop_dispatch {
            // Never invoked, so nothing to record in the history.
            self.queued.clear();
        }
        for p in 0..self.partitions {
            if !self.in_flight.contains_key(&p) {
                let values: Vec<String> = match self.queued.get_mut(&p) {
                    Some(q) if !q.is_empty() => {
                        let n = q.len().min(MAX_BATCH_RECORDS);
                        q.drain(..n).collect()
                    }
                    _ => continue,
                };
                let now_ms = EPOCH_MS + (ctx.now / MILLIS) as i64;
                let bytes = values.iter().map(|v| v.clone().into_bytes());
                let mut batch = RecordBatch::from_values(now_ms, bytes);
                let process = process_id(self.client, p);
                for v in &values {
                    ctx.history.push(
                        ctx.now,
                        process,
                        EventType::Invoke,
                        Function::Send,
                        Value::Send(sent(p, v, self.acks)),
                    );
                }
                if self.idempotent {
                    match self.idem.stamp(&tp(p), batch) {
                        Ok(b) => batch = b,
                        Err(_) => {
                            for v in &values {
                                ctx.history.push(
                                    ctx.now,
                                    process,
                                    EventType::Fail,
                                    Function::Send,
                                    Value::Send(sent(p, v, self.acks)),
                                );
                            }
                            continue;
                        }
                    }
                }
                self.sends += values.len() as u64;
                self.in_flight.insert(
                    p,
                    InFlight {
                        values,
                        batch,
                        corr: None,
                        sent_at: ctx.now,
                        send_at: Some(ctx.now),
                    },
                );
            }
            let Some(leader) = self.meta.leader(p) else {
                continue;
            };
            let f = self.in_flight.get_mut(&p).expect("just checked");
            if f.send_at.is_some_and(|t| t <= ctx.now) {
                self.corr += 1;
                f.corr = Some(self.corr);
                f.sent_at = ctx.now;
                f.send_at = None;
                ctx.out.sends.push((
                    Address::Node(leader),
                    Message::Produce(ProduceRequest {
                        correlation: self.corr,
                        tp: tp(p),
                        acks: self.acks,
                        timeout: PRODUCE_TIMEOUT,
                        batch: f.batch.clone(),
                    }),
                ));
                if self.acks == Acks::None {
                    // Fire and forget: the outcome is unknown.
                    let f = self.in_flight.remove(&p).expect("present");
                    if self.idempotent {
                        let seq = f.batch.producer.map_or(0, |i| i.base_sequence);
                        let _ = self.idem.on_response(
                            &tp(p),
                            seq,
                            ProduceOutcome::Appended { base_offset: 0 },
                        );
                    }
                    for v in &f.values {
                        ctx.history.push(
                            ctx.now,
                            process_id(self.client, p),
                            EventType::Info,
                            Function::Send,
                            Value::Send(sent(p, v, self.acks)),
                        );
                    }
                }
            }
        }
    }

    pub fn handle(&mut self, msg: Message, ctx: &mut Ctx<'_>) {
        match msg {
            Message::MetadataResponse(r) => self.meta.on_response(&r),
            Message::ControllerResponse(ControllerResponse::InitProducerId(Ok(id)))
                if self.idem.producer().is_none() =>
            {
                self.idem.init(id)
            }
            Message::ProduceResponse(r) => self.on_produce_response(r, ctx),
            _ => {}
        }
        self.meta.poll(&mut self.corr, ctx, self.partitions);
        self.dispatch(ctx);
    }

    /// Give up every in-flight batch: its outcome is unknown (it may have been written), so
    /// each of its values goes into the history as an `info` send and is never resent.
    fn abandon_in_flight(&mut self, ctx: &mut Ctx<'_>) {
        for (p, f) in std::mem::take(&mut self.in_flight) {
            for v in &f.values {
                ctx.history.push(
                    ctx.now,
                    process_id(self.client, p),
                    EventType::Info,
                    Function::Send,
                    Value::Send(sent(p, v, self.acks)),
                );
            }
        }
    }

    fn on_produce_response(&mut self, r: ProduceResponse, ctx: &mut Ctx<'_>) {
        let p = r.tp.partition;
        let Some(f) = self.in_flight.get(&p) else {
            return;
        };
        if f.corr != Some(r.correlation) {
            return; // an answer to an attempt we gave up on
        }
        let seq = f.batch.producer.map_or(0, |i| i.base_sequence);
        let outcome = match &r.result {
            Ok(ack) if ack.duplicate => ProduceOutcome::Duplicate {
                base_offset: ack.base_offset,
            },
            Ok(ack) => ProduceOutcome::Appended {
                base_offset: ack.base_offset,
            },
            Err(ProduceError::OutOfOrderSequence(_)) => ProduceOutcome::OutOfOrderSequence,
            Err(ProduceError::UnknownProducerId(_)) => ProduceOutcome::UnknownProducerId,
            Err(ProduceError::InvalidProducerEpoch(_)) => ProduceOutcome::InvalidProducerEpoch,
            Err(ProduceError::InvalidRecord(_)) => {
                // Refused as malformed: certainly not written.
                let f = self.in_flight.remove(&p).expect("present");
                for v in &f.values {
                    ctx.history.push(
                        ctx.now,
                        process_id(self.client, p),
                        EventType::Fail,
                        Function::Send,
                        Value::Send(sent(p, v, self.acks)),
                    );
                }
                return;
            }
            Err(ProduceError::NotLeader { .. } | ProduceError::UnknownTopicOrPartition) => {
                self.meta.invalidate();
                ProduceOutcome::Retriable
            }
            Err(_) => ProduceOutcome::Retriable,
        };
        let completion = if self.idempotent {
            match self.idem.on_response(&r.tp, seq, outcome) {
                Ok(c) => c,
                Err(_) => return,
            }
        } else {
            match outcome {
                ProduceOutcome::Appended { base_offset }
                | ProduceOutcome::Duplicate { base_offset } => Completion::Acked {
                    base_offset,
                    duplicate: false,
                },
                _ => Completion::Retry(f.batch.clone()),
            }
        };
        match completion {
            Completion::Acked { base_offset, .. } => {
                let f = self.in_flight.remove(&p).expect("present");
                self.acked += f.values.len() as u64;
                let epoch = r.result.as_ref().map(|a| a.leader_epoch).unwrap_or(0);
                for (i, v) in f.values.into_iter().enumerate() {
                    let offset = base_offset + i as u64;
                    ctx.history.push(
                        ctx.now,
                        process_id(self.client, p),
                        EventType::Ok,
                        Function::Send,
                        Value::Send(sent(p, &v, self.acks).at(offset)),
                    );
                    if self.acks == Acks::All {
                        ctx.out.acked.push((p, offset, v, epoch));
                    }
                }
            }
            Completion::Retry(batch) => {
                let f = self.in_flight.get_mut(&p).expect("present");
                f.batch = batch;
                f.corr = None;
                f.send_at = Some(ctx.now + RETRY_BACKOFF + between(ctx.rng, 0, RETRY_BACKOFF));
            }
            Completion::NeedsEpochBump => {
                // Every in-flight batch's outcome becomes unknown; they are not resent (a
                // resend could write a value twice), new values continue under the new epoch.
                let _ = self.idem.bump_epoch();
                self.abandon_in_flight(ctx);
            }
            Completion::Fenced => {
                self.fenced = true;
                self.abandon_in_flight(ctx);
            }
        }
    }

    pub fn next_wake(&self) -> Option<SimTime> {
        let mut t: Option<SimTime> = None;
        let mut at = |x: SimTime| t = Some(t.map_or(x, |t| t.min(x)));
        if self.idempotent && self.idem.producer().is_none() {
            at(self.init_sent.map_or(0, |s| s + METADATA_TIMEOUT));
        }
        if self.next_send < self.stop_at && !self.fenced {
            at(self.next_send);
        }
        for (p, f) in &self.in_flight {
            match f.send_at {
                // Without a known leader the metadata wake-up below covers it.
                Some(s) if self.ready() && self.meta.leader(*p).is_some() => at(s),
                Some(_) => {}
                None => at(f.sent_at + REQUEST_TIMEOUT),
            }
        }
        if self.ready()
            && self.queued.iter().any(|(p, q)| {
                !q.is_empty() && !self.in_flight.contains_key(p) && self.meta.leader(*p).is_some()
            })
        {
            at(0);
        }
        if let Some(m) = self.meta.next_wake(self.partitions) {
            at(m);
        }
        t
    }

    /// Ends the run: what is still in flight has an unknown outcome; what was never sent
    /// was never invoked.
    pub fn finish(&mut self, ctx: &mut Ctx<'_>) {
        for (p, f) in std::mem::take(&mut self.in_flight) {
            for v in &f.values {
                ctx.history.push(
                    ctx.now,
                    process_id(self.client, p),
                    EventType::Info,
                    Function::Send,
                    Value::Send(sent(p, v, self.acks)),
                );
            }
        }
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.len() + self.queued.values().map(|q| q.len()).sum::<usize>()
    }
}

struct Poll {
    corr: u64,
    sent_at: SimTime,
}

/// A consumer assigned every partition of the topic.
pub struct Consumer {
    pub client: u64,
    partitions: u32,
    meta: MetaCache,
    corr: u64,
    assigned: bool,
    positions: BTreeMap<u32, Offset>,
    next_poll: BTreeMap<u32, SimTime>,
    polls: BTreeMap<u32, Poll>,
    pub records: u64,
}

impl Consumer {
    pub fn new(client: u64, partitions: u32) -> Self {
        Self {
            client,
            partitions,
            meta: MetaCache::default(),
            corr: 0,
            assigned: false,
            positions: (0..partitions).map(|p| (p, 0)).collect(),
            next_poll: (0..partitions).map(|p| (p, 0)).collect(),
            polls: BTreeMap::new(),
            records: 0,
        }
    }

    pub fn tick(&mut self, ctx: &mut Ctx<'_>) {
        if !self.assigned {
            self.assigned = true;
            for p in 0..self.partitions {
                ctx.history.push(
                    ctx.now,
                    process_id(self.client, p),
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
            if let Some(poll) = self.polls.get(&p) {
                if ctx.now >= poll.sent_at + REQUEST_TIMEOUT {
                    self.polls.remove(&p);
                    ctx.history.push(
                        ctx.now,
                        process_id(self.client, p),
                        EventType::Info,
                        Function::Poll,
                        Value::Null,
                    );
                    self.meta.invalidate();
                }
            }
        }
        self.meta.poll(&mut self.corr, ctx, self.partitions);
        self.send_polls(ctx);
    }

    fn send_polls(&mut self, ctx: &mut Ctx<'_>) {
        for p in 0..self.partitions {
            if self.polls.contains_key(&p) || self.next_poll[&p] > ctx.now {
                continue;
            }
            let Some(leader) = self.meta.leader(p) else {
                continue;
            };
            self.corr += 1;
            self.polls.insert(
                p,
                Poll {
                    corr: self.corr,
                    sent_at: ctx.now,
                },
            );
            ctx.history.push(
                ctx.now,
                process_id(self.client, p),
                EventType::Invoke,
                Function::Poll,
                Value::Null,
            );
            ctx.out.sends.push((
                Address::Node(leader),
                Message::ConsumerFetch(ConsumerFetchRequest {
                    correlation: self.corr,
                    tp: tp(p),
                    offset: self.positions[&p],
                    max_bytes: 64 * 1024,
                    current_leader_epoch: None,
                }),
            ));
        }
    }

    pub fn handle(&mut self, from: Address, msg: Message, ctx: &mut Ctx<'_>) {
        match msg {
            Message::MetadataResponse(r) => self.meta.on_response(&r),
            Message::ConsumerFetchResponse(r) => self.on_fetch(from, r, ctx),
            _ => {}
        }
        self.meta.poll(&mut self.corr, ctx, self.partitions);
        self.send_polls(ctx);
    }

    fn on_fetch(&mut self, from: Address, r: ConsumerFetchResponse, ctx: &mut Ctx<'_>) {
        let p = r.tp.partition;
        if self.polls.get(&p).map(|x| x.corr) != Some(r.correlation) {
            return;
        }
        self.polls.remove(&p);
        let process = process_id(self.client, p);
        let served_by = match from {
            Address::Node(n) => n,
            _ => 0,
        };
        match r.result {
            Ok(recs) => {
                let pos = self.positions[&p];
                let mut out = Vec::new();
                let mut next = pos;
                for b in &recs.batches {
                    if b.is_control() {
                        next = next.max(b.next_offset());
                        continue;
                    }
                    for (offset, rec) in b.data_records() {
                        if offset < pos {
                            continue;
                        }
                        let value = rec
                            .value
                            .as_deref()
                            .map(|v| String::from_utf8_lossy(v).into_owned())
                            .unwrap_or_default();
                        out.push(PolledRecord::new(TOPIC, p, offset, value.as_str()));
                        ctx.out.read.push((p, offset, value, served_by));
                        next = next.max(offset + 1);
                    }
                }
                self.records += out.len() as u64;
                self.positions.insert(p, next);
                let delay = if next > pos { 0 } else { POLL_INTERVAL };
                self.next_poll.insert(p, ctx.now + delay);
                ctx.history.push(
                    ctx.now,
                    process,
                    EventType::Ok,
                    Function::Poll,
                    Value::Poll(PollValue { records: out }),
                );
            }
            Err(e) => {
                ctx.history.push(
                    ctx.now,
                    process,
                    EventType::Fail,
                    Function::Poll,
                    Value::Null,
                );
                match e {
                    ConsumerFetchError::OffsetOutOfRange {
                        offset,
                        log_start_offset,
                        ..
                    } if offset < log_start_offset => {
                        // Records were deleted by retention: skip to the log start.
                        self.positions.insert(p, log_start_offset);
                    }
                    ConsumerFetchError::OffsetOutOfRange { .. }
                    | ConsumerFetchError::Storage(_) => {}
                    _ => self.meta.invalidate(),
                }
                self.next_poll.insert(p, ctx.now + RETRY_BACKOFF);
            }
        }
    }

    pub fn next_wake(&self) -> Option<SimTime> {
        let mut t = self.meta.next_wake(self.partitions);
        let mut at = |x: SimTime| t = Some(t.map_or(x, |t: SimTime| t.min(x)));
        if !self.assigned {
            at(0);
        }
        for p in 0..self.partitions {
            match self.polls.get(&p) {
                Some(poll) => at(poll.sent_at + REQUEST_TIMEOUT),
                None if self.meta.leader(p).is_some() => at(self.next_poll[&p]),
                None => {}
            }
        }
        t
    }

    pub fn finish(&mut self, ctx: &mut Ctx<'_>) {
        for p in std::mem::take(&mut self.polls).into_keys() {
            ctx.history.push(
                ctx.now,
                process_id(self.client, p),
                EventType::Info,
                Function::Poll,
                Value::Null,
            );
        }
    }

    /// Next offset this consumer will read in partition `p`.
    pub fn position(&self, p: u32) -> Offset {
        self.positions.get(&p).copied().unwrap_or(0)
    }
}
