//! Simulated clients: idempotent acks=all producers and partition-reading consumers.
//!
//! Clients are small state machines like the nodes: the world hands them messages and
//! time, they return messages to send, and they record what they did in the history. What
//! to do with an answer is core's client (`skein_core::client`, the code `skein produce`
//! runs): the leader cache, the produce retry policy, the fetch cursor. This file keeps the
//! workload, timing and history. A producer writes unique values ("p3-17"), follows
//! metadata to each partition's leader, keeps one batch in flight per partition and retries
//! it on retriable errors and timeouts with the same producer id, epoch and sequence (so a
//! retry is never written twice); after a lost sequence the leader confirmed, it re-stamps
//! its batches under a new epoch and sends them again. A consumer is assigned every
//! partition and polls each one's leader by offset.
//!
//! History processes are per (client, partition) so that each process has at most one
//! operation in flight, as Jepsen's model of a process expects.

use crate::client_step::Ctx;
use crate::rng::{between, exponential};
use crate::slots::PartitionSlots;
use crate::time::{SimTime, MILLIS, SECS};
use crate::topic::{tp, TOPIC, TOPIC_TEXT};
use rand::Rng;
use skein_core::client::{
    ControllerRouter, ControllerView, FetchCursor, ProduceClient, ProduceStep, Route, TopicLeaders,
};
use skein_core::controller::{ControllerRequest, ControllerResponse, MetadataDelta};
use skein_core::log::{Codec, RecordBatch};
use skein_core::message::*;
use skein_core::{LeaderEpoch, NodeId, Offset};
use skein_jepsen::{
    AssignValue, EventType, Function, PollValue, PolledRecord, SendValue, Text, Value,
};
use std::sync::Arc;

mod consumer;

pub use consumer::Consumer;

/// Wall-clock origin of simulated record timestamps (2026-01-01T00:00:00Z), so timestamps
/// look like real ones.
pub(crate) const EPOCH_MS: i64 = 1_767_225_600_000;

/// How long a producer or consumer waits for a broker's answer to a produce or fetch before
/// it counts the request as lost and sends it again (the simulated network drops silently).
pub(crate) const DATA_REQUEST_TIMEOUT: SimTime = SECS;
/// How long a leader may wait for replication before answering RequestTimedOut.
const PRODUCE_TIMEOUT: SimTime = 500 * MILLIS;
/// Most records a producer puts in one batch.
const MAX_BATCH_RECORDS: usize = 16;
pub(crate) const RETRY_BACKOFF: SimTime = 50 * MILLIS;
pub(crate) const METADATA_TIMEOUT: SimTime = 500 * MILLIS;
pub(crate) const METADATA_MIN_INTERVAL: SimTime = 50 * MILLIS;
pub(crate) const POLL_INTERVAL: SimTime = 20 * MILLIS;

/// A send's history value, with the producer's acks level (what its acknowledgement means).
fn sent(p: u32, value: Text, acks: Acks) -> SendValue {
    SendValue::new(TOPIC_TEXT, p, value).with_acks(match acks {
        Acks::None => skein_jepsen::AckPromise::None,
        Acks::Leader => skein_jepsen::AckPromise::Leader,
        Acks::All => skein_jepsen::AckPromise::All,
    })
}

/// Leaders of the simulator's topic as a client last heard of them: core's
/// [`TopicLeaders`] (the cache the real clients use), refreshed on this client's timing.
pub(crate) fn topic_leaders(partitions: u32) -> TopicLeaders {
    TopicLeaders::new(TOPIC, partitions, METADATA_TIMEOUT, METADATA_MIN_INTERVAL)
}

/// Sends a metadata request if one is due (a leader of the topic is unknown, or the cache
/// was marked stale): the host's one choice, a random broker to ask.
pub(crate) fn poll_metadata(meta: &mut TopicLeaders, corr: &mut u64, ctx: &mut Ctx<'_>) {
    if let Some(req) = meta.poll_refresh(ctx.now, *corr + 1) {
        *corr += 1;
        let to = ctx.rng.gen_range(1..=ctx.brokers);
        ctx.out
            .sends
            .push((Address::Node(to), Message::Metadata(req)));
    }
}

/// The value a producer writes: `p{index}-{n}`, built without `format!` (one per record
/// produced; `format!` was ~870 instructions of it). A `Text` holds up to 24 bytes inline,
/// so the value and its copies (history, acknowledgements, reads, the checks' records)
/// need no allocation.
fn value_text(index: u32, n: u64) -> Text {
    let (mut a, mut b) = ([0u8; 20], [0u8; 20]);
    // Digits as bytes: each UTF-8 check (`decimal`'s, then the whole value's) cost about
    // as much as writing the digits.
    let (i, n) = (
        skein_core::types::decimal_digits(index.into(), &mut a),
        skein_core::types::decimal_digits(n, &mut b),
    );
    // Gathered on the stack, then one copy into the inline form (`Text`'s own `push_str`
    // costs more per call than the whole copy).
    let mut out = [0u8; 42];
    let len = 2 + i.len() + n.len();
    out[0] = b'p';
    out[1..1 + i.len()].copy_from_slice(i);
    out[1 + i.len()] = b'-';
    out[2 + i.len()..len].copy_from_slice(n);
    debug_assert!(out[..len].is_ascii());
    // SAFETY: 'p', '-' and decimal digits are ASCII, so valid UTF-8.
    Text::new(unsafe { std::str::from_utf8_unchecked(&out[..len]) })
}

struct InFlight {
    values: Vec<Text>,
    /// Shared with the idempotent producer's copy kept for retries.
    batch: Arc<RecordBatch>,
    /// Correlation of the latest attempt, once sent.
    corr: Option<u64>,
    sent_at: SimTime,
    /// The broker the latest attempt went to.
    sent_to: NodeId,
    /// When to (re)send; `None` while waiting for a response or a leader check.
    send_at: Option<SimTime>,
    /// A sequence error waiting for the controller's word on who leads (the answer).
    checking: Option<Result<ProduceAck, ProduceError>>,
}

/// A producer: core's [`ProduceClient`] decides, this keeps timing and history.
pub struct Producer {
    pub client: u64,
    index: u32,
    partitions: u32,
    acks: Acks,
    idempotent: bool,
    producer: ProduceClient,
    init_sent: Option<SimTime>,
    /// Which controller to ask (core's policy: follow hints, else the next in turn).
    /// Made at the first request, when the world's controller count is at hand.
    router: Option<ControllerRouter>,
    /// The controller each kind of controller request last went to, until it answers.
    init_asked: Option<NodeId>,
    view_asked: Option<NodeId>,
    meta: TopicLeaders,
    /// The controller's view, pulled when a sequence error needs its word.
    view: ControllerView,
    view_sent: Option<SimTime>,
    corr: u64,
    produced: u64,
    mean_gap: SimTime,
    next_send: SimTime,
    /// Stop creating new values at this time (retries continue).
    stop_at: SimTime,
    /// Stop sending new batches at this time (values still queued are dropped, never sent).
    stop_dispatch: SimTime,
    /// Values waiting for their partition's in-flight batch to finish.
    queued: PartitionSlots<std::collections::VecDeque<Text>>,
    in_flight: PartitionSlots<InFlight>,
    fenced: bool,
    /// With compression on: the seed each batch's codec is drawn from (a hash of it, the
    /// client and the batch's number, so no other draw of the run's RNG moves).
    compress_seed: Option<u64>,
    batches: u64,
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
            producer: if idempotent {
                ProduceClient::idempotent()
            } else {
                ProduceClient::plain()
            },
            init_sent: None,
            router: None,
            init_asked: None,
            view_asked: None,
            meta: topic_leaders(partitions),
            view: ControllerView::new(),
            view_sent: None,
            corr: 0,
            produced: 0,
            mean_gap,
            next_send: start_at,
            stop_at,
            stop_dispatch,
            queued: PartitionSlots::default(),
            in_flight: PartitionSlots::default(),
            fenced: false,
            compress_seed: None,
            batches: 0,
            sends: 0,
            acked: 0,
        }
    }

    /// This producer storing its batches compressed, each with a codec (none included)
    /// drawn from `seed` (`None`: never compressed).
    pub fn compressing(self, seed: Option<u64>) -> Self {
        Self {
            compress_seed: seed,
            ..self
        }
    }

    /// `batch` with the codec drawn for this producer's next batch (unchanged when
    /// compression is off).
    fn with_codec(&mut self, batch: RecordBatch) -> RecordBatch {
        let Some(seed) = self.compress_seed else {
            return batch;
        };
        self.batches += 1;
        // splitmix64's finaliser over seed, client and batch number.
        let mut z =
            seed ^ self.client.rotate_left(32) ^ self.batches.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        batch.with_codec(Codec::ALL[(z % Codec::ALL.len() as u64) as usize])
    }

    fn ready(&self) -> bool {
        !self.fenced && self.producer.ready()
    }

    /// Records a history event for every value of `values`.
    fn record(&self, ctx: &mut Ctx<'_>, p: u32, values: &[Text], kind: EventType) {
        for v in values {
            ctx.event(
                self.client,
                p,
                kind,
                Function::Send,
                Value::Send(sent(p, v.clone(), self.acks)),
            );
        }
    }

    /// The producer id and epoch in use (idempotent producers, once initialised).
    pub fn producer_id(&self) -> Option<skein_core::controller::ProducerIdAndEpoch> {
        self.producer.producer()
    }

    /// Whether a broker has fenced this producer (a newer epoch of its id exists).
    pub fn is_fenced(&self) -> bool {
        self.fenced
    }

    /// Takes over another instance's producer identity, as a restarted instance with the
    /// same identity does (KIP-360): adopt its id and move to the next epoch, which fences
    /// the old instance at every partition this one writes to.
    pub fn take_over(&mut self, id: skein_core::controller::ProducerIdAndEpoch) {
        let _ = self.producer.take_over(id);
    }

    /// Timers: new values, init, metadata, resends, timeouts.
    pub fn tick(&mut self, ctx: &mut Ctx<'_>) {
        self.poll_init(ctx);
        while self.next_send <= ctx.now && self.next_send < self.stop_at && !self.fenced {
            self.produced += 1;
            let value = value_text(self.index, self.produced);
            let p = ctx.rng.gen_range(0..self.partitions);
            self.queued.get_or_default(p).push_back(value);
            self.next_send += exponential(ctx.rng, self.mean_gap).max(1);
        }
        // Request timeouts: the same batch (same sequence) goes again.
        let mut timed_out = false;
        for (p, f) in self.in_flight.iter_mut() {
            let waiting = f.send_at.is_none() && f.checking.is_none();
            if waiting && ctx.now >= f.sent_at + DATA_REQUEST_TIMEOUT {
                if let Ok(b) = self.producer.resend(&self.meta.tp(p), &f.batch) {
                    f.batch = Arc::new(b);
                }
                f.send_at = Some(ctx.now);
                f.corr = None;
                timed_out = true;
            }
        }
        if timed_out {
            self.meta.invalidate();
        }
        self.poll_view(ctx);
        poll_metadata(&mut self.meta, &mut self.corr, ctx);
        self.dispatch(ctx);
    }

    /// Asks the controller for its view while a leader check waits for it.
    fn poll_view(&mut self, ctx: &mut Ctx<'_>) {
        let checking = self.in_flight.values().any(|f| f.checking.is_some());
        let due = self
            .view_sent
            .is_none_or(|t| ctx.now >= t + METADATA_TIMEOUT);
        if checking && due {
            self.view_sent = Some(ctx.now);
            let req = Message::ControllerRequest(self.view.request());
            let to = self.ask_controller(self.view_asked, ctx);
            self.view_asked = Some(to);
            ctx.out.sends.push((Address::Controller(to), req));
        }
    }

    /// An idempotent producer without its id asks the controller for one.
    fn poll_init(&mut self, ctx: &mut Ctx<'_>) {
        if self.idempotent
            && self.producer.producer().is_none()
            && self
                .init_sent
                .is_none_or(|t| ctx.now >= t + METADATA_TIMEOUT)
        {
            self.init_sent = Some(ctx.now);
            let to = self.ask_controller(self.init_asked, ctx);
            self.init_asked = Some(to);
            ctx.out.sends.push((
                Address::Controller(to),
                Message::ControllerRequest(ControllerRequest::InitProducerId),
            ));
        }
    }

    /// The controller to send a request to; `unanswered`: the one the previous request of
    /// the same kind went to, if it never answered (the router then moves on).
    fn ask_controller(&mut self, unanswered: Option<NodeId>, ctx: &Ctx<'_>) -> NodeId {
        let router = self
            .router
            .get_or_insert_with(|| ControllerRouter::new(ctx.controllers));
        if let Some(asked) = unanswered {
            router.on_no_answer(asked);
        }
        router.target()
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
            if !self.in_flight.contains_key(p) {
                let values: Vec<Text> = match self.queued.get_mut(p) {
                    Some(q) if !q.is_empty() => {
                        let n = q.len().min(MAX_BATCH_RECORDS);
                        q.drain(..n).collect()
                    }
                    _ => continue,
                };
                let now_ms = EPOCH_MS + (ctx.now / MILLIS) as i64;
                let bytes = values.iter().map(|v| v.as_bytes().to_vec());
                let batch = self.with_codec(RecordBatch::from_values(now_ms, bytes));
                self.record(ctx, p, &values, EventType::Invoke);
                let Ok(batch) = self.producer.prepare_shared(&self.meta.tp(p), batch) else {
                    self.record(ctx, p, &values, EventType::Fail);
                    continue;
                };
                self.sends += values.len() as u64;
                self.in_flight.insert(
                    p,
                    InFlight {
                        values,
                        batch,
                        corr: None,
                        sent_at: ctx.now,
                        sent_to: 0,
                        send_at: Some(ctx.now),
                        checking: None,
                    },
                );
            }
            let f = self.in_flight.get_mut(p).expect("just checked");
            // Due first: most batches are waiting for an answer.
            if f.send_at.is_none_or(|t| t > ctx.now) {
                continue;
            }
            let Some(leader) = self.meta.leader(p) else {
                continue;
            };
            self.corr += 1;
            f.corr = Some(self.corr);
            f.sent_at = ctx.now;
            f.sent_to = leader;
            f.send_at = None;
            // Encoded at each send, as the producer stamped it last. Short text values
            // in at most MAX_BATCH_RECORDS records are far below the format's 4 GiB
            // limit.
            let req =
                ProduceClient::request(self.corr, tp(p), self.acks, PRODUCE_TIMEOUT, &f.batch)
                    .expect("a simulated batch encodes");
            ctx.out
                .sends
                .push((Address::Node(leader), Message::from(req)));
            if self.acks == Acks::None {
                // Fire and forget: the outcome is unknown.
                let f = self.in_flight.remove(p).expect("present");
                self.producer.forget(&self.meta.tp(p), &f.batch);
                self.record(ctx, p, &f.values, EventType::Info);
            }
        }
    }

    pub fn handle(&mut self, msg: Message, ctx: &mut Ctx<'_>) {
        match msg {
            Message::MetadataResponse(r) => self.meta.learn(&r),
            Message::ControllerResponse(resp) => self.on_controller(*resp, ctx),
            Message::ProduceResponse(r) => self.on_produce_response(r, ctx),
            _ => {}
        }
        self.poll_init(ctx);
        self.poll_view(ctx);
        poll_metadata(&mut self.meta, &mut self.corr, ctx);
        self.dispatch(ctx);
    }

    /// A controller's answer: first to the router (which follows a `NotController` hint),
    /// then to the request's owner.
    fn on_controller(&mut self, resp: ControllerResponse, ctx: &mut Ctx<'_>) {
        let asked = match resp {
            ControllerResponse::InitProducerId(_) => self.init_asked.take(),
            ControllerResponse::Metadata(_) => self.view_asked.take(),
            _ => None,
        };
        if let Some(from) = asked {
            let router = self
                .router
                .get_or_insert_with(|| ControllerRouter::new(ctx.controllers));
            // (Metadata is answered by any controller: only InitProducerId is refused.)
            if router.on_answer(from, &resp) == Route::AskNow {
                self.init_sent = None;
            }
        }
        match resp {
            ControllerResponse::InitProducerId(Ok(id)) if self.producer.producer().is_none() => {
                self.producer.init(id)
            }
            ControllerResponse::Metadata(delta) => self.on_view(&delta, ctx),
            _ => {}
        }
    }

    /// Every in-flight batch's outcome is unknown: each of its values goes into the
    /// history as an `info` send and is never resent.
    fn abandon_in_flight(&mut self, ctx: &mut Ctx<'_>) {
        for (p, f) in std::mem::take(&mut self.in_flight) {
            self.record(ctx, p, &f.values, EventType::Info);
        }
    }

    fn on_produce_response(&mut self, r: ProduceResponse, ctx: &mut Ctx<'_>) {
        let p = r.tp.partition;
        let Some(f) = self.in_flight.get(p) else {
            return;
        };
        if f.corr != Some(r.correlation) {
            return; // an answer to an attempt we gave up on
        }
        // An answer for a batch no longer in flight (a late duplicate) changes nothing.
        if let Ok(step) = self.producer.on_answer(&r.tp, &f.batch, &r.result) {
            let epoch = r.result.as_ref().map_or(0, |a| a.leader_epoch);
            self.apply(p, step, r.result, epoch, ctx);
        }
    }

    /// One page of the controller's view; once caught up, the waiting leader checks end.
    fn on_view(&mut self, delta: &MetadataDelta, ctx: &mut Ctx<'_>) {
        if self.view_sent.is_none() {
            return;
        }
        match self.view.apply(delta) {
            Ok(true) => self.view_sent = None,
            Ok(false) => {
                // More pages: ask for the next one now.
                self.view_sent = Some(ctx.now);
                let req = Message::ControllerRequest(self.view.request());
                let to = self.ask_controller(None, ctx);
                self.view_asked = Some(to);
                ctx.out.sends.push((Address::Controller(to), req));
                return;
            }
            Err(_) => {
                // Not a continuation of what we have (a duplicate page): start over.
                self.view = ControllerView::new();
                self.view_sent = None;
                return;
            }
        }
        let waiting: Vec<u32> = (self.in_flight.iter())
            .filter(|(_, f)| f.checking.is_some())
            .map(|(p, _)| p)
            .collect();
        for p in waiting {
            // An earlier step of this loop may have settled this batch already: an epoch
            // bump re-stamps and resends every batch in flight (its check is moot), a fence
            // abandons them all.
            let Some(f) = self.in_flight.get_mut(p) else {
                continue;
            };
            let Some(result) = f.checking.take() else {
                continue;
            };
            let (leader, epoch) = self.view.leader(&tp(p)).unwrap_or((None, 0));
            self.meta
                .with_cache(|c| c.learn_leader(&tp(p), leader, epoch));
            let by_leader = leader == Some(f.sent_to);
            // An error: no longer in flight; the request timeout sends it again.
            let step = self
                .producer
                .on_leader_checked(&tp(p), &f.batch, &result, by_leader);
            if let Ok(step) = step {
                self.apply(p, step, result, epoch, ctx);
            }
        }
    }

    /// Carries out core's decision for partition `p`'s batch.
    fn apply(
        &mut self,
        p: u32,
        step: ProduceStep,
        result: Result<ProduceAck, ProduceError>,
        epoch: LeaderEpoch,
        ctx: &mut Ctx<'_>,
    ) {
        match step {
            ProduceStep::Acked { base_offset, .. } => {
                let f = self.in_flight.remove(p).expect("present");
                self.acked += f.values.len() as u64;
                // The batch as the leader placed it: one record per value, in order.
                for ((offset, _), v) in f.batch.offsets_at(base_offset).zip(f.values) {
                    ctx.event(
                        self.client,
                        p,
                        EventType::Ok,
                        Function::Send,
                        Value::Send(sent(p, v.clone(), self.acks).at(offset)),
                    );
                    if self.acks == Acks::All {
                        ctx.out.acked.push((p, offset, v, epoch));
                    }
                }
            }
            ProduceStep::Resend {
                batch,
                refresh_metadata,
            } => {
                if refresh_metadata {
                    self.meta.invalidate();
                }
                let f = self.in_flight.get_mut(p).expect("present");
                f.batch = Arc::new(batch);
                f.corr = None;
                f.send_at = Some(ctx.now + RETRY_BACKOFF + between(ctx.rng, 0, RETRY_BACKOFF));
            }
            ProduceStep::CheckLeader => {
                let f = self.in_flight.get_mut(p).expect("present");
                f.corr = None;
                f.send_at = None;
                f.checking = Some(result);
            }
            ProduceStep::EpochBumped { resend } => {
                // Every batch in flight goes again, re-stamped under the new epoch.
                for (t, batch) in resend {
                    if let Some(f) = self.in_flight.get_mut(t.partition) {
                        f.batch = Arc::new(batch);
                        f.corr = None;
                        f.checking = None;
                        f.send_at = Some(ctx.now);
                    }
                }
            }
            ProduceStep::Failed(_) => {
                // Certainly not written.
                let f = self.in_flight.remove(p).expect("present");
                self.record(ctx, p, &f.values, EventType::Fail);
            }
            ProduceStep::Fenced(_) => {
                self.fenced = true;
                self.abandon_in_flight(ctx);
            }
        }
    }

    pub fn next_wake(&self) -> Option<SimTime> {
        // The earliest time, and whether there is one (a plain minimum: asked after every
        // step, the `Option` updates cost more).
        let (mut t, mut any) = (SimTime::MAX, false);
        let mut at = |x: SimTime| {
            t = t.min(x);
            any = true;
        };
        if self.idempotent && self.producer.producer().is_none() {
            at(self.init_sent.map_or(0, |s| s + METADATA_TIMEOUT));
        }
        if self.next_send < self.stop_at && !self.fenced {
            at(self.next_send);
        }
        for (p, f) in self.in_flight.iter() {
            match f.send_at {
                // Without a known leader the metadata wake-up below covers it.
                Some(s) if self.ready() && self.meta.leader(p).is_some() => at(s),
                Some(_) => {}
                None if f.checking.is_some() => {
                    at(self.view_sent.map_or(0, |s| s + METADATA_TIMEOUT))
                }
                None => at(f.sent_at + DATA_REQUEST_TIMEOUT),
            }
        }
        if self.ready()
            && self.queued.iter().any(|(p, q)| {
                !q.is_empty() && !self.in_flight.contains_key(p) && self.meta.leader(p).is_some()
            })
        {
            at(0);
        }
        if let Some(m) = self.meta.next_refresh() {
            at(m);
        }
        any.then_some(t)
    }

    /// Ends the run: what is still in flight has an unknown outcome; what was never sent
    /// was never invoked.
    pub fn finish(&mut self, ctx: &mut Ctx<'_>) {
        self.abandon_in_flight(ctx);
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.len() + self.queued.values().map(|q| q.len()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn value_text_is_the_formatted_value() {
        for (i, n) in [(0, 0), (1, 9), (3, 10), (12, 123_456), (u32::MAX, u64::MAX)] {
            assert_eq!(super::value_text(i, n), format!("p{i}-{n}"));
        }
    }
}
