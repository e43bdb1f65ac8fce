//! A simulated transactional producer: core's [`TransactionalProducer`] driven like an
//! application drives Kafka's (`init_transactions`, then `begin_transaction`, `send`,
//! `commit_transaction` or `abort_transaction`, over and over).
//!
//! The application's loop: begin; write 1-3 records (unique values `t{index}-{n}`) to 1-2
//! partitions, one batch per partition; then commit at once (the producer waits for the
//! writes itself), or, with probability [`ABORT_PROBABILITY`], wait until every write is
//! acknowledged and abort on purpose, so aborted records really sit in the log for the
//! read_committed consumers to skip. An abortable error aborts the transaction; a fatal one
//! (fenced by a newer instance of the same transactional id, or refused for good) makes a
//! new producer instance that initialises again, as an application restarts its producer.
//!
//! History: one process per client (`process_id(client, 0)`), one `txn` operation per
//! transaction: `invoke` at begin with its sends (no offsets), then `ok` (committed), `fail`
//! (aborted) or `info` (outcome unknown: fenced or crashed mid-transaction, or the run
//! ended) with the sends and the offsets acknowledged.
//!
//! Requests are routed by core's `txn_producer::route`, as on a real node: `LeaderOf`
//! through the client's metadata cache (no leader known: answered `NotLeader` at once),
//! `Node` as named, `AnyBroker` to a random broker; each under the client's own wire
//! correlation (a new producer instance restarts its numbering, and answers to the old one
//! must not reach it).

use crate::client::{poll_metadata, topic_leaders, DATA_REQUEST_TIMEOUT, RETRY_BACKOFF};
use crate::client_step::{Ctx, TxnObs};
use crate::rng::between;
use crate::time::{SimTime, MILLIS};
use crate::topic::{process_id, tp, TOPIC_TEXT};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use skein_core::client::txn_producer::{
    self, from_message, TransactionalProducer, TxnProducerConfig, TxnProducerEvent,
    TxnProducerOutput, TxnProducerRequest, TxnProducerResponse, TxnProducerState,
};
use skein_core::client::{Destination, Resolved, TopicLeaders};
use skein_core::log::RecordBatch;
use skein_core::message::{Address, Message};
use skein_core::txn::TxnResult;
use skein_jepsen::{EventType, Function, SendValue, Text, TxnValue, Value};
use std::collections::BTreeMap;

/// Share of transactions the application aborts on purpose.
pub const ABORT_PROBABILITY: f64 = 0.2;
/// `transaction.timeout.ms`: scaled down like the brokers' timeouts, so a transaction left
/// open by a crashed producer is aborted by its coordinator well within a run.
pub const TRANSACTION_TIMEOUT_MS: u32 = 3_000;
/// Pause between one transaction's end and the next one's begin.
const THINK_MIN: SimTime = 5 * MILLIS;
const THINK_MAX: SimTime = 40 * MILLIS;
/// Wire requests unanswered this long are forgotten (the producer has its own, shorter
/// request timeout; this only bounds memory).
const FORGET_AFTER: SimTime = 10 * DATA_REQUEST_TIMEOUT;

/// What the application is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum App {
    /// `init_transactions` under way (or due at `start_at`).
    Initializing,
    /// Ready; the next transaction begins at this time.
    Idle { next_begin: SimTime },
    /// A transaction is open and its end has been asked for (commit or abort), or, for an
    /// abort on purpose, will be once every write is acknowledged.
    Open,
    /// The run's producing window is over: no more transactions.
    Done,
}

/// The transaction in progress, as the history will tell it.
struct OpenTxn {
    sends: Vec<SendValue>,
    /// Its number within this instance (the transaction invariants' name for it).
    seq: u64,
    /// The application decided to abort (on purpose or after an abortable error).
    abort: bool,
    /// commit() or abort() has been called.
    ending: bool,
}

/// One simulated transactional producer.
pub struct TxnClient {
    pub client: u64,
    /// The value prefix's number (`t{index}-N`): unique per instance.
    pub index: u32,
    transactional_id: String,
    producer: Option<TransactionalProducer>,
    rng: ChaCha8Rng,
    meta: TopicLeaders,
    partitions: u32,
    wire: u64,
    /// Wire correlation -> (the producer's correlation, when sent).
    pending: BTreeMap<u64, (u64, SimTime)>,
    app: App,
    txn: Option<OpenTxn>,
    next_value: u64,
    start_at: SimTime,
    /// No transaction begins after this (the run's quiet tail).
    stop_at: SimTime,
    pub committed: u64,
    pub aborted: u64,
    pub unknown: u64,
    /// Producer instances made after a fatal error (fenced, most often).
    pub reinits: u64,
    /// A newer process took this client's transactional id over (a takeover): once fenced,
    /// this one stops, as a fenced application closes its producer (two live instances
    /// re-initialising would fence each other forever).
    superseded: bool,
    pub sends: u64,
    /// Transactions begun by this instance.
    begun: u64,
    /// An old client (EndTxn before v5: `TxnProducerConfig::keep_epoch`): no KIP-890 part 2
    /// epoch bump at its transactions' ends.
    keep_epoch: bool,
    /// Aborts a transaction chosen to abort as soon as its writes left (see
    /// `SimConfig::txn_abort_in_flight`).
    abort_in_flight: bool,
}

impl TxnClient {
    pub fn new(
        client: u64,
        index: u32,
        transactional_id: String,
        partitions: u32,
        rng: ChaCha8Rng,
        start_at: SimTime,
        stop_at: SimTime,
    ) -> Self {
        let mut c = Self {
            client,
            index,
            transactional_id,
            producer: None,
            rng,
            meta: topic_leaders(partitions),
            partitions,
            wire: 0,
            pending: BTreeMap::new(),
            app: App::Initializing,
            txn: None,
            next_value: 0,
            start_at,
            stop_at,
            committed: 0,
            aborted: 0,
            unknown: 0,
            reinits: 0,
            superseded: false,
            sends: 0,
            begun: 0,
            keep_epoch: false,
            abort_in_flight: false,
        };
        c.producer = Some(c.new_producer());
        c
    }

    /// Makes this client abort without waiting for its writes (see `abort_in_flight`).
    pub fn aborting_in_flight(mut self, yes: bool) -> Self {
        self.abort_in_flight = yes;
        self
    }

    /// Makes this client an old one (see `keep_epoch`), from its current producer instance on.
    pub fn keeping_epoch(mut self, keep: bool) -> Self {
        if keep {
            self.keep_epoch = true;
            self.producer = Some(self.new_producer());
        }
        self
    }

    pub fn transactional_id(&self) -> &str {
        &self.transactional_id
    }

    /// A newer process now holds this client's transactional id ([`TxnClient::superseded`]).
    pub fn supersede(&mut self) {
        self.superseded = true;
    }

    fn new_producer(&self) -> TransactionalProducer {
        let mut config = TxnProducerConfig::new(self.transactional_id.as_str());
        config.transaction_timeout_ms = TRANSACTION_TIMEOUT_MS;
        config.retry_backoff = RETRY_BACKOFF;
        config.request_timeout = DATA_REQUEST_TIMEOUT;
        config.produce_timeout = 500 * MILLIS;
        config.keep_epoch = self.keep_epoch;
        TransactionalProducer::new(config)
    }

    fn process(&self) -> u64 {
        process_id(self.client, 0)
    }

    pub fn tick(&mut self, ctx: &mut Ctx<'_>) {
        if self.producer.is_none() {
            return;
        }
        let now = ctx.now;
        self.pending.retain(|_, (_, at)| *at + FORGET_AFTER > now);
        if let Some(p) = self.producer.as_mut() {
            p.handle_timeout(now);
        }
        self.after(ctx);
    }

    pub fn handle(&mut self, msg: Message, ctx: &mut Ctx<'_>) {
        if self.producer.is_none() {
            return; // crashed: nobody listens on this address
        }
        if let Message::MetadataResponse(r) = &msg {
            self.meta.learn(r);
        } else if let Some((wire, response)) = from_message(msg) {
            if let Some((corr, _)) = self.pending.remove(&wire) {
                if let TxnProducerResponse::Produce(Err(_)) = &response {
                    // Most produce errors say the leader moved: ask again where it is.
                    self.meta.invalidate();
                }
                let p = self.producer.as_mut().expect("up");
                p.step(ctx.now, corr, response);
            }
        }
        self.after(ctx);
    }

    /// After the producer handled something: the application's next step, the producer's
    /// requests out, its events into the history.
    fn after(&mut self, ctx: &mut Ctx<'_>) {
        for _ in 0..16 {
            self.app_step(ctx);
            let outs = match self.producer.as_mut() {
                Some(p) => p.poll_outputs(),
                None => break,
            };
            if outs.is_empty() {
                break;
            }
            let mut immediate = Vec::new();
            for o in outs {
                match o {
                    TxnProducerOutput::Send {
                        to,
                        correlation,
                        request,
                    } => {
                        if let Some(r) = self.route(to, correlation, request, ctx) {
                            immediate.push((correlation, r));
                        }
                    }
                    TxnProducerOutput::Event(e) => self.on_event(e, ctx),
                }
            }
            if let Some(p) = self.producer.as_mut() {
                for (corr, r) in immediate {
                    p.step(ctx.now, corr, r);
                }
            }
        }
        poll_metadata(
            &mut self.meta,
            &mut self.wire,
            &mut Ctx {
                now: ctx.now,
                history: ctx.history,
                rng: &mut self.rng,
                out: ctx.out,
                brokers: ctx.brokers,
                controllers: ctx.controllers,
            },
        );
    }

    /// The application's loop: init, begin and write, then end the transaction.
    fn app_step(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        let Some(p) = self.producer.as_mut() else {
            return;
        };
        match self.app {
            App::Initializing => {
                if *p.state() == TxnProducerState::Uninitialized && now >= self.start_at {
                    // Refused only when already initialising: nothing to do then.
                    let _ = p.init(now);
                }
            }
            App::Idle { next_begin } if now >= self.stop_at => {
                let _ = next_begin;
                self.app = App::Done;
            }
            App::Idle { next_begin } if now >= next_begin => self.begin(ctx),
            App::Open => self.maybe_end(now),
            App::Idle { .. } | App::Done => {}
        }
    }

    /// Begins a transaction and writes 1-3 records to 1-2 partitions.
    fn begin(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        let p = self.producer.as_mut().expect("up");
        if p.begin().is_err() {
            // Not ready after all (an error arrived with the last answer): wait for events.
            self.app = App::Idle {
                next_begin: now + THINK_MAX,
            };
            return;
        }
        let n_parts = if self.partitions > 1 && self.rng.gen_bool(0.5) {
            2
        } else {
            1
        };
        let first = self.rng.gen_range(0..self.partitions);
        let second =
            (first + 1 + self.rng.gen_range(0..self.partitions.max(2) - 1)) % self.partitions;
        let parts: Vec<u32> = if n_parts == 2 && second != first {
            vec![first, second]
        } else {
            vec![first]
        };
        let records = self.rng.gen_range(parts.len()..=3);
        let abort = self.rng.gen_bool(ABORT_PROBABILITY);
        // Values per partition, round robin: every chosen partition gets at least one.
        let mut by_part: BTreeMap<u32, Vec<Text>> = BTreeMap::new();
        let mut sends = Vec::with_capacity(records);
        for i in 0..records {
            let part = parts[i % parts.len()];
            self.next_value += 1;
            let value = Text::new(format!("t{}-{}", self.index, self.next_value));
            by_part.entry(part).or_default().push(value.clone());
            sends.push(SendValue::new(TOPIC_TEXT, part, value));
        }
        // Sends in the order written: per partition, in value order.
        sends.sort_by_key(|s| s.partition);
        ctx.history.push(
            now,
            self.process(),
            EventType::Invoke,
            Function::Txn,
            Value::Txn(Box::new(self.txn_value(&sends))),
        );
        let ts = crate::client::EPOCH_MS + (now / MILLIS) as i64;
        let p = self.producer.as_mut().expect("up");
        for (part, values) in by_part {
            let batch = RecordBatch::from_values(ts, values.iter().map(|v| v.as_bytes().to_vec()));
            self.sends += values.len() as u64;
            // Refused only if the transaction cannot take writes any more: its events
            // (abortable, fatal) end it.
            let _ = p.send(now, tp(part), batch);
        }
        self.begun += 1;
        ctx.out.txn.push(TxnObs::Begin {
            index: self.index,
            id: self.transactional_id.clone(),
            seq: self.begun,
            values: sends.iter().map(|s| s.value.clone()).collect(),
        });
        self.txn = Some(OpenTxn {
            seq: self.begun,
            sends,
            abort,
            ending: false,
        });
        self.app = App::Open;
        self.maybe_end(now);
    }

    /// Ends the open transaction when it is time: commit at once, abort once every write
    /// is acknowledged (so the aborted records are in the log).
    fn maybe_end(&mut self, now: SimTime) {
        let (Some(t), Some(p)) = (self.txn.as_mut(), self.producer.as_mut()) else {
            return;
        };
        if t.ending {
            return;
        }
        let written = t.sends.iter().all(|s| s.offset.is_some());
        let abortable = matches!(p.state(), TxnProducerState::AbortableError(_));
        if t.abort || abortable {
            if written || abortable || (self.abort_in_flight && p.all_sent()) {
                t.abort = true;
                t.ending = p.abort(now).is_ok();
            }
        } else {
            t.ending = p.commit(now).is_ok();
        }
    }

    fn txn_value(&self, sends: &[SendValue]) -> TxnValue {
        let mut v = TxnValue {
            id: Some(Text::new(&self.transactional_id)),
            ..TxnValue::default()
        };
        for s in sends {
            v = v.send(s.clone());
        }
        v
    }

    fn on_event(&mut self, e: TxnProducerEvent, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        match e {
            TxnProducerEvent::Initialized(producer) => {
                ctx.out.txn.push(TxnObs::Initialized {
                    index: self.index,
                    id: self.transactional_id.clone(),
                    producer,
                });
                self.app = App::Idle { next_begin: now };
            }
            TxnProducerEvent::Written {
                tp,
                base_offset,
                records,
            } => {
                ctx.out.txn.push(TxnObs::Written {
                    index: self.index,
                    p: tp.partition,
                    base_offset,
                });
                if let Some(t) = self.txn.as_mut() {
                    let mine = t
                        .sends
                        .iter_mut()
                        .filter(|s| s.partition == tp.partition && s.offset.is_none());
                    for (i, s) in mine.take(records as usize).enumerate() {
                        s.offset = Some(base_offset + i as u64);
                    }
                }
            }
            TxnProducerEvent::OffsetsSent { .. } => {}
            TxnProducerEvent::Completed { result, producer } => {
                if let Some(t) = self.txn.as_ref() {
                    ctx.out.txn.push(TxnObs::Ended {
                        index: self.index,
                        seq: t.seq,
                        result,
                        producer,
                    });
                }
                let kind = match result {
                    TxnResult::Commit => {
                        self.committed += 1;
                        EventType::Ok
                    }
                    TxnResult::Abort => {
                        self.aborted += 1;
                        EventType::Fail
                    }
                };
                self.complete(now, kind, ctx);
                let think = between(&mut self.rng, THINK_MIN, THINK_MAX);
                self.app = App::Idle {
                    next_begin: now + think,
                };
            }
            TxnProducerEvent::Abortable(_) | TxnProducerEvent::CommitFailed(_) => {
                // Only abort is allowed now.
                if let Some(t) = self.txn.as_mut() {
                    t.abort = true;
                    t.ending = false;
                }
            }
            TxnProducerEvent::Fatal(_) => {
                // Fenced (a newer instance took the transactional id) or refused for good:
                // nobody here knows how the open transaction ends.
                if self.txn.is_some() {
                    self.unknown += 1;
                    self.complete(now, EventType::Info, ctx);
                }
                if self.superseded {
                    self.app = App::Done;
                    return;
                }
                self.reinits += 1;
                self.producer = Some(self.new_producer());
                self.pending.clear();
                self.app = if now >= self.stop_at {
                    App::Done
                } else {
                    App::Initializing
                };
            }
        }
    }

    /// The open transaction's completion in the history.
    fn complete(&mut self, now: SimTime, kind: EventType, ctx: &mut Ctx<'_>) {
        let Some(t) = self.txn.take() else {
            return;
        };
        debug_assert!(
            kind != EventType::Ok || t.sends.iter().all(|s| s.offset.is_some()),
            "a committed transaction's writes were all acknowledged"
        );
        let value = self.txn_value(&t.sends);
        ctx.history.push(
            now,
            self.process(),
            kind,
            Function::Txn,
            Value::Txn(Box::new(value)),
        );
    }

    /// Sends a producer request by core's routing ([`txn_producer::route`]); `Some(answer)`
    /// if it fails before leaving (no leader known).
    fn route(
        &mut self,
        to: Destination,
        correlation: u64,
        request: TxnProducerRequest,
        ctx: &mut Ctx<'_>,
    ) -> Option<TxnProducerResponse> {
        let node = match self.meta.with_cache(|c| txn_producer::route(&to, c)) {
            Resolved::AnyBroker => self.rng.gen_range(1..=ctx.brokers),
            Resolved::Node(n) => n,
            Resolved::NoLeader(answer) => return Some(answer),
        };
        self.wire += 1;
        let p = self.producer.as_ref().expect("up");
        let Ok(msg) = p.to_message(self.wire, &request) else {
            // Only an unencodable batch: the producer's timeout gives up on it.
            return None;
        };
        self.pending.insert(self.wire, (correlation, ctx.now));
        ctx.out.sends.push((Address::Node(node), msg));
        None
    }

    /// The process dies (a client fault) or the run ends: the open transaction's outcome
    /// is unknown.
    pub fn finish(&mut self, ctx: &mut Ctx<'_>) {
        if self.txn.is_some() {
            self.unknown += 1;
            self.complete(ctx.now, EventType::Info, ctx);
        }
        self.app = App::Done;
    }

    /// The process dies: nothing of it is left.
    pub fn crash(&mut self, ctx: &mut Ctx<'_>) {
        self.finish(ctx);
        self.producer = None;
        self.pending.clear();
    }

    pub fn next_wake(&self) -> Option<SimTime> {
        let p = self.producer.as_ref()?;
        let mut t: Option<SimTime> = p.poll_timeout();
        let mut at = |x: SimTime| t = Some(t.map_or(x, |t| t.min(x)));
        match self.app {
            App::Initializing if *p.state() == TxnProducerState::Uninitialized => at(self.start_at),
            App::Idle { next_begin } => at(next_begin.min(self.stop_at)),
            App::Initializing | App::Open | App::Done => {}
        }
        if let Some(m) = self.meta.next_refresh() {
            at(m);
        }
        t
    }
}
