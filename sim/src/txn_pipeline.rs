//! A simulated read-process-write pipeline (KIP-447, exactly-once): a consumer-group member
//! reading the workload's topic read_committed, and a transactional producer writing what
//! it derives from each input record to two output topics, with the input offsets
//! committed in the same transaction — core's [`GroupConsumer`] and
//! [`TransactionalProducer`] driven as a Kafka Streams-like application drives its
//! consumer and producer.
//!
//! The application's loop: `poll`; if records came back, `begin`, one derived record per
//! input record to each of [`OUTPUT_TOPICS`] (same partition number as the input; value
//! `r{index}-{n}@{in_partition}:{in_offset}`, unique per write, naming its input), then
//! `send_offsets(group, generation, member, positions)` and `commit`, or, with probability
//! [`ABORT_PROBABILITY`], wait until every write is acknowledged and `abort` on purpose.
//! After an abort, an abortable error, a fatal one (fenced: a new producer instance
//! initialises again) or a revocation of its partitions mid-transaction, the application
//! rewinds to the group's committed offsets ([`GroupConsumer::rewind_to_committed`], which
//! waits for a transaction still completing), as Kafka's `resetToLastCommittedPositions`.
//!
//! History: one process per pipeline (`process_id(client, 0)`), one `txn` operation per
//! transaction (`isolation: read_committed`): `invoke` at begin with its poll (the records
//! read, per partition), its sends and its `send-offsets`; then `ok`, `fail` or `info` with
//! the sends' acknowledged offsets. Every assignment change is an `assign` event of the
//! process (its consumer positions start again there).

use crate::client::{poll_metadata, DATA_REQUEST_TIMEOUT, POLL_INTERVAL, RETRY_BACKOFF};
use crate::client::{METADATA_MIN_INTERVAL, METADATA_TIMEOUT};
use crate::client_step::Ctx;
use crate::group_client::{COORDINATOR_REQUEST_TIMEOUT, HEARTBEAT_INTERVAL};
use crate::group_client::{REBALANCE_TIMEOUT, SESSION_TIMEOUT};
use crate::time::{SimTime, MILLIS, SECS};
use crate::topic::{process_id, TOPIC, TOPIC_TEXT};
use crate::txn_client::{ABORT_PROBABILITY, TRANSACTION_TIMEOUT_MS};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use skein_core::client::group_wire;
use skein_core::client::txn_producer::{
    self, from_message, TransactionalProducer, TxnProducerConfig, TxnProducerEvent,
    TxnProducerOutput, TxnProducerRequest, TxnProducerResponse, TxnProducerState,
};
use skein_core::client::{
    ConsumedRecord, ConsumerConfig, ConsumerEvent, ConsumerOutput, ConsumerRequest,
    ConsumerResponse, Destination, GroupConsumer, OffsetReset, Resolved, TopicLeaders,
};
use skein_core::group::{AssignorKind, OffsetAndMetadata};
use skein_core::log::RecordBatch;
use skein_core::message::{Address, Message};
use skein_core::txn::{IsolationLevel, TxnResult};
use skein_core::{Offset, TopicPartition};
use skein_jepsen::{
    AssignValue, CommitOffset, CommitValue, EventType, Function, Isolation, PollRead, SendValue,
    Text, TxnValue, Value,
};
use std::collections::BTreeMap;

/// The topics every pipeline writes its derived records to (created by the admin client
/// in the txn workload, with the input topic's partition count).
pub const OUTPUT_TOPICS: [&str; 2] = ["sim-out-b", "sim-out-c"];
/// Records one poll hands the application at most: one transaction's input.
const MAX_POLL_RECORDS: usize = 16;
/// Wire requests unanswered this long are forgotten (both machines have their own,
/// shorter timeouts; this only bounds memory).
const FORGET_AFTER: SimTime = 10 * SECS;

/// The value a pipeline writes for input record `(partition, offset)`: unique per write
/// (`r{index}-{n}`), then the input it derives from.
pub fn output_value(index: u32, n: u64, partition: u32, offset: Offset) -> Text {
    Text::new(format!("r{index}-{n}@{partition}:{offset}"))
}

/// The input record an output value names (`None`: not a pipeline's value).
pub fn parse_output(value: &str) -> Option<(u32, Offset)> {
    let (_, input) = value.rsplit_once('@')?;
    let (p, o) = input.split_once(':')?;
    Some((p.parse().ok()?, o.parse().ok()?))
}

/// What the application is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum App {
    /// `init_transactions` under way (or due at `start_at`).
    Initializing,
    /// Ready; polls when `next_poll` comes.
    Idle { next_poll: SimTime },
    /// A transaction is open (see [`OpenTxn`]).
    Open,
    /// The run's processing window is over.
    Done,
}

/// The transaction in progress, as the history will tell it.
struct OpenTxn {
    value: TxnValue,
    /// Indexes of the send micro-ops in `value.ops`, per output partition, in write order.
    sends: BTreeMap<TopicPartition, Vec<usize>>,
    /// Abort (on purpose, after an abortable error, or its partitions were revoked).
    abort: bool,
    /// Abort without waiting for the writes (a revocation: the input is no longer ours).
    urgent: bool,
    /// commit() or abort() has been called.
    ending: bool,
    /// The assignment changed while the transaction was open: the positions the consumer
    /// looked up meanwhile may predate this transaction's offsets (a member that lost its
    /// partitions and rejoined the same generation fetched them before its own
    /// TxnOffsetCommit landed), so they are looked up again once it ends.
    moved: bool,
}

impl OpenTxn {
    fn written(&self) -> bool {
        self.value
            .ops
            .iter()
            .all(|op| !matches!(op, skein_jepsen::MicroOp::Send(s) if s.offset.is_none()))
    }
}

/// Whose request a wire correlation is.
enum Pending {
    Consumer {
        corr: u64,
        wire: group_wire::Pending,
        sent_at: SimTime,
    },
    Producer {
        corr: u64,
        sent_at: SimTime,
    },
}

impl Pending {
    fn sent_at(&self) -> SimTime {
        match self {
            Pending::Consumer { sent_at, .. } | Pending::Producer { sent_at, .. } => *sent_at,
        }
    }
}

/// One simulated read-process-write pipeline.
pub struct Pipeline {
    pub client: u64,
    /// 1-based pipeline number, the value prefix's (`r{index}-N`).
    pub index: u32,
    group: String,
    transactional_id: String,
    consumer: GroupConsumer,
    producer: TransactionalProducer,
    subscribed: bool,
    rng: ChaCha8Rng,
    /// Leaders of the input topic (the consumer's routing) and of each output topic.
    input: TopicLeaders,
    outputs: Vec<TopicLeaders>,
    wire: u64,
    pending: BTreeMap<u64, Pending>,
    app: App,
    txn: Option<OpenTxn>,
    next_value: u64,
    start_at: SimTime,
    /// No transaction begins after this (the run's quiet tail).
    stop_at: SimTime,
    pub committed: u64,
    pub aborted: u64,
    pub unknown: u64,
    pub reinits: u64,
    /// Input records processed by committed transactions.
    pub processed: u64,
}

impl Pipeline {
    pub fn new(
        client: u64,
        index: u32,
        group: String,
        partitions: u32,
        rng: ChaCha8Rng,
        start_at: SimTime,
        stop_at: SimTime,
    ) -> Self {
        let leaders =
            |t: &str| TopicLeaders::new(t, partitions, METADATA_TIMEOUT, METADATA_MIN_INTERVAL);
        let transactional_id = format!("rpw-{index}");
        Self {
            client,
            index,
            consumer: new_consumer(&group),
            producer: new_producer(&transactional_id),
            group,
            transactional_id,
            subscribed: false,
            rng,
            input: leaders(TOPIC),
            outputs: OUTPUT_TOPICS.iter().map(|t| leaders(t)).collect(),
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
            processed: 0,
        }
    }

    fn process(&self) -> u64 {
        process_id(self.client, 0)
    }

    pub fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        if !self.subscribed && now >= self.start_at {
            self.subscribed = true;
            self.consumer.subscribe(now, &[TOPIC]);
        }
        self.pending.retain(|_, p| p.sent_at() + FORGET_AFTER > now);
        self.consumer.handle_timeout(now);
        self.producer.handle_timeout(now);
        self.after(ctx);
    }

    pub fn handle(&mut self, from: Address, msg: Message, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        let node = match from {
            Address::Node(n) => Some(n),
            _ => None,
        };
        match msg
            .response_correlation()
            .and_then(|c| self.pending.remove(&c))
        {
            Some(Pending::Consumer { corr, wire, .. }) => {
                if let Some(r) = self.input.answer(wire, node, msg) {
                    self.consumer.step(now, corr, r);
                }
            }
            Some(Pending::Producer { corr, .. }) => {
                if let Some((_, response)) = from_message(msg) {
                    if let skein_core::client::txn_producer::TxnProducerResponse::Produce(Err(_)) =
                        &response
                    {
                        // Most produce errors say the leader moved: ask again.
                        for o in &mut self.outputs {
                            o.invalidate();
                        }
                    }
                    self.producer.step(now, corr, response);
                }
            }
            None => {
                // A leader refresh of one of the topics (or an answer given up on).
                if let Message::MetadataResponse(r) = &msg {
                    self.input.learn(r);
                    for o in &mut self.outputs {
                        o.learn(r);
                    }
                }
            }
        }
        self.after(ctx);
    }

    /// After either machine handled something: the application's next step, both
    /// machines' requests out, their events handled.
    fn after(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        for _ in 0..16 {
            self.app_step(ctx);
            let mut busy = false;
            let mut immediate = Vec::new();
            for o in self.consumer.poll_outputs() {
                busy = true;
                match o {
                    ConsumerOutput::Send {
                        to,
                        correlation,
                        request,
                    } => {
                        if let Some(r) = self.route_consumer(to, correlation, request, ctx) {
                            immediate.push((correlation, r));
                        }
                    }
                    ConsumerOutput::Event(e) => self.on_consumer_event(e, ctx),
                }
            }
            for (corr, r) in immediate {
                self.consumer.step(now, corr, r);
            }
            let mut immediate = Vec::new();
            for o in self.producer.poll_outputs() {
                busy = true;
                match o {
                    TxnProducerOutput::Send {
                        to,
                        correlation,
                        request,
                    } => {
                        if let Some(r) = self.route_producer(to, correlation, request, ctx) {
                            immediate.push((correlation, r));
                        }
                    }
                    TxnProducerOutput::Event(e) => self.on_producer_event(e, ctx),
                }
            }
            for (corr, r) in immediate {
                self.producer.step(now, corr, r);
            }
            if !busy {
                break;
            }
        }
        let mut rng_ctx = Ctx {
            now,
            history: ctx.history,
            rng: &mut self.rng,
            out: ctx.out,
            brokers: ctx.brokers,
            controllers: ctx.controllers,
        };
        poll_metadata(&mut self.input, &mut self.wire, &mut rng_ctx);
        for o in &mut self.outputs {
            poll_metadata(o, &mut self.wire, &mut rng_ctx);
        }
    }

    /// The application's loop: init, then poll and process each batch in a transaction.
    fn app_step(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        match self.app {
            App::Initializing => {
                if *self.producer.state() == TxnProducerState::Uninitialized && now >= self.start_at
                {
                    let _ = self.producer.init(now);
                }
            }
            App::Idle { .. } if now >= self.stop_at => self.app = App::Done,
            App::Idle { next_poll } if now >= next_poll => {
                let recs = self.consumer.poll(now);
                if recs.is_empty() {
                    self.app = App::Idle {
                        next_poll: now + POLL_INTERVAL,
                    };
                } else {
                    self.begin(recs, ctx);
                }
            }
            App::Open => self.maybe_end(now),
            App::Idle { .. } | App::Done => {}
        }
    }

    /// One transaction for the polled `recs`: the derived writes, the input positions.
    fn begin(&mut self, recs: Vec<ConsumedRecord>, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        if self.producer.begin().is_err() {
            // Not ready after all (an error came with the last answer): what was polled
            // is read again from the committed offsets.
            self.consumer.rewind_to_committed(now);
            self.app = App::Idle {
                next_poll: now + POLL_INTERVAL,
            };
            return;
        }
        let mut value = TxnValue::new(Isolation::ReadCommitted);
        value.id = Some(Text::new(&self.transactional_id));
        // The poll, per input partition in offset order.
        let mut reads: BTreeMap<u32, PollRead> = BTreeMap::new();
        for r in &recs {
            let v = r
                .value
                .as_deref()
                .map(crate::topic::value_of)
                .unwrap_or_default();
            reads
                .entry(r.tp.partition)
                .or_insert_with(|| PollRead::new(TOPIC_TEXT, r.tp.partition))
                .records
                .push((r.offset, v));
        }
        value = value.poll(reads.into_values().collect());
        // The derived records, one batch per output partition.
        let mut batches: BTreeMap<TopicPartition, Vec<Text>> = BTreeMap::new();
        for r in &recs {
            for topic in OUTPUT_TOPICS {
                self.next_value += 1;
                let v = output_value(self.index, self.next_value, r.tp.partition, r.offset);
                batches
                    .entry(TopicPartition::new(topic, r.tp.partition))
                    .or_default()
                    .push(v);
            }
        }
        let mut sends: BTreeMap<TopicPartition, Vec<usize>> = BTreeMap::new();
        for (tp, values) in &batches {
            for v in values {
                sends.entry(tp.clone()).or_default().push(value.ops.len());
                value = value.send(SendValue::new(tp.topic.as_str(), tp.partition, v.clone()));
            }
        }
        // The input positions: the next offset to read of every partition polled.
        let mut offsets = BTreeMap::new();
        for r in &recs {
            if let Some(pos) = self.consumer.position(&r.tp) {
                offsets.insert(r.tp.clone(), OffsetAndMetadata::new(pos));
            }
        }
        value = value.send_offsets(CommitValue {
            group: self.group.as_str().into(),
            offsets: offsets
                .iter()
                .map(|(tp, o)| CommitOffset {
                    topic: tp.topic.as_str().into(),
                    partition: tp.partition,
                    offset: o.offset,
                })
                .collect(),
            generation: self.consumer.generation(),
        });
        ctx.history.push(
            now,
            self.process(),
            EventType::Invoke,
            Function::Txn,
            Value::Txn(Box::new(value.clone())),
        );
        let ts = crate::client::EPOCH_MS + (now / MILLIS) as i64;
        for (tp, values) in batches {
            let batch = RecordBatch::from_values(ts, values.iter().map(|v| v.as_bytes().to_vec()));
            // Refused only if the transaction cannot take writes any more: its events end it.
            let _ = self.producer.send(now, tp, batch);
        }
        let generation = self.consumer.generation();
        let member = self.consumer.member_id().cloned();
        let _ = self
            .producer
            .send_offsets(now, self.group.as_str(), generation, member, offsets);
        self.txn = Some(OpenTxn {
            value,
            sends,
            abort: self.rng.gen_bool(ABORT_PROBABILITY),
            urgent: false,
            ending: false,
            moved: false,
        });
        self.app = App::Open;
        self.maybe_end(now);
    }

    /// Ends the open transaction when it is time: commit at once; abort on purpose once
    /// every write is acknowledged (so the aborted records are in the log), at once after
    /// an abortable error or a revocation.
    fn maybe_end(&mut self, now: SimTime) {
        let Some(t) = self.txn.as_mut() else {
            return;
        };
        if t.ending {
            return;
        }
        let abortable = matches!(self.producer.state(), TxnProducerState::AbortableError(_));
        if t.abort || abortable {
            if t.written() || abortable || t.urgent {
                t.abort = true;
                t.ending = self.producer.abort(now).is_ok();
            }
        } else {
            t.ending = self.producer.commit(now).is_ok();
        }
    }

    fn on_producer_event(&mut self, e: TxnProducerEvent, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        match e {
            TxnProducerEvent::Initialized(_) => {
                self.app = App::Idle { next_poll: now };
            }
            TxnProducerEvent::Written {
                tp,
                base_offset,
                records,
            } => {
                if let Some(t) = self.txn.as_mut() {
                    let idxs = t.sends.get(&tp).cloned().unwrap_or_default();
                    let ops = &t.value.ops;
                    let mine: Vec<usize> = idxs
                        .into_iter()
                        .filter(|&i| {
                            matches!(&ops[i], skein_jepsen::MicroOp::Send(s) if s.offset.is_none())
                        })
                        .take(records as usize)
                        .collect();
                    for (k, i) in mine.into_iter().enumerate() {
                        if let skein_jepsen::MicroOp::Send(s) = &mut t.value.ops[i] {
                            s.offset = Some(base_offset + k as u64);
                        }
                    }
                }
            }
            TxnProducerEvent::OffsetsSent { .. } => {}
            TxnProducerEvent::Completed { result, .. } => {
                let kind = match result {
                    TxnResult::Commit => {
                        self.committed += 1;
                        if let Some(t) = &self.txn {
                            self.processed += polled_count(&t.value);
                            if t.moved {
                                self.consumer.rewind_to_committed(now);
                            }
                        }
                        EventType::Ok
                    }
                    TxnResult::Abort => {
                        self.aborted += 1;
                        // What it read is processed again, from the committed offsets.
                        self.consumer.rewind_to_committed(now);
                        EventType::Fail
                    }
                };
                self.complete(now, kind, ctx);
                self.app = App::Idle { next_poll: now };
            }
            TxnProducerEvent::Abortable(_) | TxnProducerEvent::CommitFailed(_) => {
                if let Some(t) = self.txn.as_mut() {
                    t.abort = true;
                    t.ending = false;
                }
            }
            TxnProducerEvent::Fatal(_) => {
                // Fenced (the transaction timed out and its coordinator bumped the epoch)
                // or refused for good: nobody here knows how the transaction ended. A new
                // instance initialises (ending it), then the input is read again from the
                // committed offsets.
                if self.txn.is_some() {
                    self.unknown += 1;
                    self.complete(now, EventType::Info, ctx);
                }
                self.consumer.rewind_to_committed(now);
                self.reinits += 1;
                self.producer = new_producer(&self.transactional_id);
                self.pending
                    .retain(|_, p| matches!(p, Pending::Consumer { .. }));
                self.app = if now >= self.stop_at {
                    App::Done
                } else {
                    App::Initializing
                };
            }
        }
    }

    fn on_consumer_event(&mut self, e: ConsumerEvent, ctx: &mut Ctx<'_>) {
        match e {
            ConsumerEvent::PartitionsAssigned { .. }
            | ConsumerEvent::PartitionsRevoked { .. }
            | ConsumerEvent::PartitionsLost { .. } => {
                if let Some(t) = self.txn.as_mut() {
                    t.moved = true;
                    // The input is no longer ours: the open transaction must not commit
                    // (the group coordinator would refuse its offsets anyway).
                    if !t.ending && !matches!(e, ConsumerEvent::PartitionsAssigned { .. }) {
                        t.abort = true;
                        t.urgent = true;
                    }
                }
                // The history's consumer positions start again (docs/history.md).
                let partitions = self
                    .consumer
                    .assignment()
                    .into_iter()
                    .map(|t| (t.topic.as_str().into(), t.partition))
                    .collect();
                ctx.history.push(
                    ctx.now,
                    self.process(),
                    EventType::Ok,
                    Function::Assign,
                    Value::Assign(AssignValue {
                        partitions,
                        ..AssignValue::default()
                    }),
                );
            }
            ConsumerEvent::NoOffset { .. } | ConsumerEvent::Fatal(_) => {
                tracing::warn!(
                    pipeline = self.index,
                    ?e,
                    "pipeline consumer stopped or idle"
                );
            }
            ConsumerEvent::CommitCompleted { .. }
            | ConsumerEvent::CommitStarted { .. }
            | ConsumerEvent::Truncated { .. } => {}
        }
    }

    /// The open transaction's completion in the history.
    fn complete(&mut self, now: SimTime, kind: EventType, ctx: &mut Ctx<'_>) {
        let Some(t) = self.txn.take() else {
            return;
        };
        debug_assert!(
            kind != EventType::Ok || t.written(),
            "a committed transaction's writes were all acknowledged"
        );
        ctx.history.push(
            now,
            self.process(),
            kind,
            Function::Txn,
            Value::Txn(Box::new(t.value)),
        );
    }

    /// Sends a consumer request; `Some(answer)` if it fails before leaving (no leader).
    fn route_consumer(
        &mut self,
        to: Destination,
        correlation: u64,
        request: ConsumerRequest,
        ctx: &mut Ctx<'_>,
    ) -> Option<ConsumerResponse> {
        let addr = match self.input.route(&to, &request) {
            Resolved::AnyBroker => Address::Node(self.rng.gen_range(1..=ctx.brokers)),
            Resolved::Node(n) => Address::Node(n),
            Resolved::NoLeader(answer) => return Some(answer),
        };
        self.wire += 1;
        let (msg, wire) = group_wire::to_message(self.wire, request);
        self.pending.insert(
            self.wire,
            Pending::Consumer {
                corr: correlation,
                wire,
                sent_at: ctx.now,
            },
        );
        ctx.out.sends.push((addr, msg));
        None
    }

    /// Sends a producer request by core's routing ([`txn_producer::route`]); `Some(answer)`
    /// if it fails before leaving (no leader known).
    fn route_producer(
        &mut self,
        to: Destination,
        correlation: u64,
        request: TxnProducerRequest,
        ctx: &mut Ctx<'_>,
    ) -> Option<TxnProducerResponse> {
        let leaders = match &to {
            Destination::LeaderOf(tp) => {
                let i = OUTPUT_TOPICS.iter().position(|t| *t == tp.topic);
                // The producer writes the output topics only.
                &mut self.outputs[i?]
            }
            // Coordinator requests: any of the caches resolves them the same way.
            _ => &mut self.outputs[0],
        };
        let node = match leaders.with_cache(|c| txn_producer::route(&to, c)) {
            Resolved::AnyBroker => self.rng.gen_range(1..=ctx.brokers),
            Resolved::Node(n) => n,
            Resolved::NoLeader(answer) => return Some(answer),
        };
        self.wire += 1;
        let Ok(msg) = self.producer.to_message(self.wire, &request) else {
            return None; // only an unencodable batch: the producer's timeout gives up on it
        };
        self.pending.insert(
            self.wire,
            Pending::Producer {
                corr: correlation,
                sent_at: ctx.now,
            },
        );
        ctx.out.sends.push((Address::Node(node), msg));
        None
    }

    /// The run ends: the open transaction's outcome is unknown.
    pub fn finish(&mut self, ctx: &mut Ctx<'_>) {
        if self.txn.is_some() {
            self.unknown += 1;
            self.complete(ctx.now, EventType::Info, ctx);
        }
        self.app = App::Done;
    }

    pub fn next_wake(&self) -> Option<SimTime> {
        let (mut t, mut any) = (SimTime::MAX, false);
        let mut at = |x: SimTime| {
            t = t.min(x);
            any = true;
        };
        if !self.subscribed {
            at(self.start_at);
        }
        if let Some(x) = self.consumer.poll_timeout() {
            at(x);
        }
        if let Some(x) = self.producer.poll_timeout() {
            at(x);
        }
        match self.app {
            App::Initializing if *self.producer.state() == TxnProducerState::Uninitialized => {
                at(self.start_at)
            }
            App::Idle { next_poll } if self.consumer.has_assignment() => {
                at(next_poll.min(self.stop_at))
            }
            App::Idle { .. } => at(self.stop_at),
            App::Initializing | App::Open | App::Done => {}
        }
        for m in std::iter::once(&self.input).chain(&self.outputs) {
            if let Some(x) = m.next_refresh() {
                at(x);
            }
        }
        any.then_some(t)
    }
}

/// Input records a transaction's polls returned.
fn polled_count(v: &TxnValue) -> u64 {
    v.ops
        .iter()
        .map(|op| match op {
            skein_jepsen::MicroOp::Poll(p) => p.reads.iter().map(|r| r.records.len() as u64).sum(),
            _ => 0,
        })
        .sum()
}

/// The pipeline's group member: read_committed, no auto-commit (offsets commit with the
/// transactions), timing as the simulator's other members.
fn new_consumer(group: &str) -> GroupConsumer {
    let mut c = ConsumerConfig::new(group);
    c.session_timeout = SESSION_TIMEOUT;
    c.rebalance_timeout = REBALANCE_TIMEOUT;
    c.heartbeat_interval = HEARTBEAT_INTERVAL;
    c.assignors = vec![AssignorKind::Range];
    c.auto_commit_interval = None;
    c.reset = OffsetReset::Earliest;
    c.retry_backoff = 50 * MILLIS;
    c.request_timeout = COORDINATOR_REQUEST_TIMEOUT;
    c.fetch_idle_backoff = POLL_INTERVAL;
    c.max_poll_records = MAX_POLL_RECORDS;
    c.fetch_max_bytes = 64 * 1024;
    c.max_buffered_records = 256;
    c.metadata_max_age = SECS;
    c.isolation = IsolationLevel::ReadCommitted;
    GroupConsumer::new(c).expect("the simulator's consumer configuration is valid")
}

fn new_producer(transactional_id: &str) -> TransactionalProducer {
    let mut config = TxnProducerConfig::new(transactional_id);
    config.transaction_timeout_ms = TRANSACTION_TIMEOUT_MS;
    config.retry_backoff = RETRY_BACKOFF;
    config.request_timeout = DATA_REQUEST_TIMEOUT;
    config.produce_timeout = 500 * MILLIS;
    TransactionalProducer::new(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_value_names_its_input() {
        let v = output_value(3, 41, 5, 1234);
        assert_eq!(v.as_str(), "r3-41@5:1234");
        assert_eq!(parse_output(v.as_str()), Some((5, 1234)));
        assert_eq!(parse_output("t1-2"), None);
        assert_eq!(parse_output("r1-2@x:3"), None);
    }
}
