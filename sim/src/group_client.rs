//! Simulated consumer-group members: the real `skein-core` [`GroupConsumer`] driven like an
//! application would drive it, commit-after-process.
//!
//! The member's loop: `poll` the consumer; if it returned records (one `ok` poll per
//! partition in the history), *process* them, which takes simulated time; when processing is
//! done, report them processed (to the group invariants) and commit the consumer's positions — `commit_sync` (wait for the answer before polling again) or
//! `commit_async` (poll on at once). Meanwhile every request the consumer emits is routed to
//! a broker and its answer handed back by core's translation (`skein_core::client::
//! group_wire`, the one `skein consume --group` uses), under the member's own wire
//! correlation ids.
//!
//! Faults: a member can crash (its consumer state is gone; it restarts as a new member) and
//! be paused. A pause strikes while the member processes a batch — the worst moment: when
//! it wakes, the application finishes the batch and commits it *before* the consumer has
//! noticed that its session expired, so the commit carries the old generation (a zombie).
//! Only the coordinator's fencing keeps that commit out.
//!
//! What the member saw goes to the world as [`GroupObs`] for the group invariants
//! (`crate::group_invariants`).

use crate::client::{poll_metadata, topic_leaders, POLL_INTERVAL};
use crate::client_step::{Ctx, CursorObs, GroupObs};
use crate::modes::CommitMode;
use crate::slots::PartitionSlots;
use crate::time::{SimTime, MICROS, MILLIS, SECS};
use crate::topic::{process_id, tp, TOPIC, TOPIC_TEXT};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use skein_core::client::group_wire;
use skein_core::client::take_records;
use skein_core::client::{
    CommitError, CommitId, ConsumedRecord, ConsumerConfig, ConsumerEvent, ConsumerOutput,
    ConsumerRequest, ConsumerResponse, Destination, GroupConsumer, MemberPhase, OffsetReset,
};
use skein_core::client::{Resolved, TopicLeaders};
use skein_core::group::{AssignorKind, GenerationId, GroupRequest, GroupResponse};
use skein_core::message::{Address, ConsumerRecords, Message};
use skein_core::{NodeId, Offset, TopicPartition};
use skein_jepsen::{
    AssignValue, CommitOffset, CommitValue, EventType, Function, PollValue, PolledRecord,
    SubscribeValue, Text, Value,
};
use std::collections::BTreeMap;
use std::rc::Rc;

mod events;

/// Client-side group timing, scaled down from Kafka's defaults like the brokers' timeouts.
pub const SESSION_TIMEOUT: SimTime = SECS;
pub const REBALANCE_TIMEOUT: SimTime = SECS;
/// How long a group member waits for its coordinator's answer. A crashed coordinator
/// answers nothing (no connection resets in the simulated network): requests to it end by
/// this timeout (a parked join by this plus the rebalance timeout).
pub const COORDINATOR_REQUEST_TIMEOUT: SimTime = 800 * MILLIS;
/// After the last fault heals, every partition must have an owner again within this long:
/// a join lost with a dead coordinator times out, the members rejoin the new one, whose
/// rebalance waits at most a session for members that do not come back.
pub const SETTLE_BOUND: SimTime =
    COORDINATOR_REQUEST_TIMEOUT + REBALANCE_TIMEOUT + SESSION_TIMEOUT + 500 * MILLIS;
pub const HEARTBEAT_INTERVAL: SimTime = 200 * MILLIS;
/// Processing a polled batch takes this long, plus [`PROCESS_PER_RECORD`] per record.
pub const PROCESS_BASE: SimTime = 5 * MILLIS;
pub const PROCESS_PER_RECORD: SimTime = 200 * MICROS;
/// Request-tracking entries older than this are forgotten (the consumer has its own, shorter
/// timeouts; this only bounds memory).
const FORGET_AFTER: SimTime = 10 * SECS;

/// `auto.commit.interval.ms` of [`CommitMode::Auto`] members: short, so a 60 s run
/// commits often enough for the group checks to bite.
pub const AUTO_COMMIT_INTERVAL: SimTime = 500 * MILLIS;

enum App {
    /// Poll when `next_poll` comes.
    Idle { next_poll: SimTime },
    /// Processing polled records until `done_at`.
    Processing {
        records: BTreeMap<u32, Vec<(Offset, Text)>>,
        done_at: SimTime,
    },
    /// Waiting for the answer to a `commit_sync`.
    Committing { id: CommitId, since: SimTime },
}

struct Pending {
    consumer_corr: u64,
    wire: group_wire::Pending,
    /// For an OffsetFetch, the partitions it asked for.
    offset_fetch: Option<Vec<u32>>,
    /// For a partition fetch, the offset it starts at.
    fetch_from: Option<Offset>,
    sent_at: SimTime,
}

/// One simulated group member.
pub struct GroupMember {
    pub client: u64,
    /// 1-based member number (what `member = N` in a scenario names).
    pub index: u32,
    group: String,
    partitions: u32,
    mode: CommitMode,
    assignor: AssignorKind,
    /// Static membership: a stable `group.instance.id` (`member-N`), so a restart within the
    /// session rejoins without a rebalance.
    static_membership: bool,
    consumer: Option<GroupConsumer>,
    subscribed: bool,
    /// The member's own stream (broker picks), so members never disturb the producers'.
    rng: ChaCha8Rng,
    meta: TopicLeaders,
    wire: u64,
    pending: BTreeMap<u64, Pending>,
    app: App,
    /// A pause waiting for the next batch to strike.
    pause_armed: Option<SimTime>,
    /// The broker that last served each partition (for read checks). This and the other
    /// per-partition maps below are asked on every fetch answer or step: slots by
    /// partition number, not ordered maps.
    served: PartitionSlots<NodeId>,
    /// User commits invoked and not yet completed, with the generation they were made in.
    open_commits: BTreeMap<CommitId, Option<GenerationId>>,
    /// Last position seen below the known committed offset, per partition (reset detection).
    reset_seen: PartitionSlots<Offset>,
    /// The bug zoo's `consumer-ignores-truncation`, for its consumer's cursors.
    ignore_truncation: bool,
    /// Where this member's fetch cursor was after its last fetch or truncation, per
    /// partition (a fetch from elsewhere starts a new stint for consumer-skipped-records).
    cursor_at: PartitionSlots<Offset>,
    /// The consumer's outputs being handled (kept between steps: drained into a fresh
    /// `Vec` after every step, they were regrown each time).
    outs: Vec<ConsumerOutput>,
    /// The owned partitions last reported in a [`GroupObs::Member`], and the list being
    /// built after a step (kept to reuse its allocation): a new shared list only when the
    /// two differ.
    owned: Rc<[u32]>,
    owned_now: Vec<u32>,
    pub records: u64,
    pub commits_ok: u64,
    pub crashes: u64,
}

/// A consumed record's value as the checks and the history keep it.
fn consumed_value(r: &ConsumedRecord) -> Text {
    r.value
        .as_deref()
        .map(crate::topic::value_of)
        .unwrap_or_default()
}

/// What a fetch answer the consumer no longer awaits would have given a reader at `at`
/// (rare: the consumer timed the request out), for consumer-skipped-records.
#[cold]
#[inline(never)]
fn unawaited_reads(at: Offset, recs: &ConsumerRecords) -> Vec<(Offset, Text)> {
    take_records(
        at,
        &recs.batches,
        recs.high_watermark,
        recs.next_offset,
        &recs.aborted,
    )
    .records
    .into_iter()
    .map(|(o, _, rec)| {
        let v = rec.value.as_deref().unwrap_or_default();
        (o, crate::topic::value_of(v))
    })
    .collect()
}

/// History process of a member's commits (its partitions use `process_id(client, p)`).
pub fn commit_process(client: u64) -> u64 {
    process_id(client, 999)
}

impl GroupMember {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: u64,
        index: u32,
        group: String,
        partitions: u32,
        mode: CommitMode,
        assignor: AssignorKind,
        static_membership: bool,
        rng: ChaCha8Rng,
    ) -> Self {
        let mut m = Self {
            client,
            index,
            group,
            partitions,
            mode,
            assignor,
            static_membership,
            consumer: None,
            subscribed: false,
            rng,
            meta: topic_leaders(partitions),
            wire: 0,
            pending: BTreeMap::new(),
            app: App::Idle { next_poll: 0 },
            pause_armed: None,
            served: PartitionSlots::default(),
            open_commits: BTreeMap::new(),
            reset_seen: PartitionSlots::default(),
            cursor_at: PartitionSlots::default(),
            ignore_truncation: false,
            outs: Vec::new(),
            owned: Rc::new([]),
            owned_now: Vec::new(),
            records: 0,
            commits_ok: 0,
            crashes: 0,
        };
        m.consumer = Some(m.new_consumer());
        m
    }

    /// The bug zoo's `consumer-ignores-truncation` (this and every restarted consumer).
    pub fn ignoring_truncation(mut self, ignore: bool) -> Self {
        self.ignore_truncation = ignore;
        self.consumer = Some(self.new_consumer());
        self
    }

    fn new_consumer(&self) -> GroupConsumer {
        let mut c = ConsumerConfig::new(self.group.clone());
        c.session_timeout = SESSION_TIMEOUT;
        c.rebalance_timeout = REBALANCE_TIMEOUT;
        c.heartbeat_interval = HEARTBEAT_INTERVAL;
        c.assignors = vec![self.assignor];
        if self.static_membership {
            c.instance_id = Some(format!("member-{}", self.index));
        }
        c.auto_commit_interval = (self.mode == CommitMode::Auto).then_some(AUTO_COMMIT_INTERVAL);
        c.reset = OffsetReset::Earliest;
        c.retry_backoff = 50 * MILLIS;
        c.request_timeout = COORDINATOR_REQUEST_TIMEOUT;
        c.fetch_idle_backoff = POLL_INTERVAL;
        c.max_poll_records = 64;
        c.fetch_max_bytes = 64 * 1024;
        c.max_buffered_records = 256;
        c.metadata_max_age = SECS;
        GroupConsumer::new(c)
            .expect("the simulator's consumer configuration is valid")
            .ignoring_truncation(self.ignore_truncation)
    }

    pub fn is_up(&self) -> bool {
        self.consumer.is_some()
    }

    /// Whether the member is in the middle of processing a batch.
    pub fn processing(&self) -> bool {
        matches!(self.app, App::Processing { .. })
    }

    /// A pause of `d`: strikes now if the member is processing a batch, else when it starts
    /// the next one. Returns `Some(d)` if it strikes now.
    pub fn arm_pause(&mut self, d: SimTime) -> Option<SimTime> {
        if self.processing() {
            Some(d)
        } else {
            self.pause_armed = Some(d);
            None
        }
    }

    /// Forgets a pause that has not struck yet (everything heals).
    pub fn disarm_pause(&mut self) {
        self.pause_armed = None;
    }

    pub fn tick(&mut self, ctx: &mut Ctx<'_>) {
        if self.consumer.is_none() {
            return;
        }
        let now = ctx.now;
        if !self.subscribed {
            self.subscribed = true;
            ctx.history.push(
                now,
                commit_process(self.client),
                EventType::Ok,
                Function::Subscribe,
                Value::Subscribe(SubscribeValue {
                    group: self.group.as_str().into(),
                    topics: vec![TOPIC.into()],
                }),
            );
            self.consumer_mut().subscribe(now, &[TOPIC]);
        }
        self.app_due(ctx);
        self.pending.retain(|_, p| p.sent_at + FORGET_AFTER > now);
        if let Some(c) = self.consumer.as_mut() {
            c.handle_timeout(now);
        }
        self.after(ctx);
    }

    pub fn handle(&mut self, from: Address, msg: Message, ctx: &mut Ctx<'_>) {
        if self.consumer.is_none() {
            return; // crashed: nobody listens on this address
        }
        self.app_due(ctx);
        self.on_answer(from, msg, ctx);
        self.after(ctx);
    }

    /// A broker's answer, back to the consumer through core's translation.
    fn on_answer(&mut self, from: Address, msg: Message, ctx: &mut Ctx<'_>) {
        let Some(p) = (msg.response_correlation()).and_then(|c| self.pending.remove(&c)) else {
            // The member's own leader refresh (or an answer it gave up on).
            if let Message::MetadataResponse(r) = &msg {
                self.meta.learn(r);
            }
            return;
        };
        let response = match &msg {
            Message::GroupResponse { response, .. } => Some(&**response),
            _ => None,
        };
        if let (Some(parts), Some(GroupResponse::OffsetFetch(Ok(map)))) =
            (&p.offset_fetch, response)
        {
            let offsets = parts
                .iter()
                .map(|&q| (q, map.get(&tp(q)).map(|o| o.offset)))
                .collect();
            ctx.out.group.push(GroupObs::Fetched {
                sent_at: p.sent_at,
                offsets,
            });
        }
        let from = match from {
            Address::Node(n) => Some(n),
            _ => None,
        };
        if let (Message::ConsumerFetchResponse(r), Some(n)) = (&msg, from) {
            self.served.insert(r.tp.partition, n);
        }
        // A fetch answer the consumer's cursor will take (it starts where the cursor is):
        // what it reads, for consumer-skipped-records. When the consumer awaits the answer,
        // it takes exactly those records into its buffer, where they are read after it
        // (one walk of the answer, the consumer's); otherwise they are taken here.
        let polled = match (&msg, p.fetch_from) {
            (Message::ConsumerFetchResponse(r), Some(at)) if r.tp.topic == TOPIC => {
                let c = self.consumer.as_ref().expect("the member is up");
                match &r.result {
                    Ok(recs) if c.fetch_position(&r.tp) == Some(at) => {
                        let read = if c.awaits(p.consumer_corr) {
                            None
                        } else {
                            Some(unawaited_reads(at, recs))
                        };
                        Some((r.tp.partition, at, read, recs.leader_epoch))
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        let r = self.meta.answer(p.wire, from, msg);
        if let Some(r) = r {
            self.consumer_mut().step(ctx.now, p.consumer_corr, r);
        }
        if let Some((part, at, read, epoch)) = polled {
            if self.cursor_at.get(part) != Some(&at) {
                // A new stint: assigned, reset or sought since this member last read here.
                ctx.out.cursor.push(CursorObs::Start { p: part, at });
            }
            let consumer = self.consumer.as_ref().expect("the member is up");
            let (to, buffered) = consumer.buffered_from(&self.meta.tp(part), at);
            let records =
                read.unwrap_or_else(|| buffered.map(|r| (r.offset, consumed_value(r))).collect());
            let to = to.unwrap_or(at);
            self.cursor_at.insert(part, to);
            ctx.out.cursor.push(CursorObs::Polled {
                p: part,
                from: at,
                to,
                records,
                epoch,
            });
        }
    }

    fn consumer_mut(&mut self) -> &mut GroupConsumer {
        self.consumer.as_mut().expect("the member is up")
    }

    /// Processing finished: report the batch as processed and commit after it.
    fn app_due(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        let due = matches!(self.app, App::Processing { done_at, .. } if now >= done_at);
        if !due {
            if let App::Committing { since, .. } = self.app {
                // A sync commit always completes (retried up to the request timeout); this
                // only guards the loop against a consumer that never answers.
                if now >= since + FORGET_AFTER {
                    self.app = App::Idle { next_poll: now };
                }
            }
            return;
        }
        let App::Processing { records, .. } =
            std::mem::replace(&mut self.app, App::Idle { next_poll: now })
        else {
            unreachable!("checked above");
        };
        for (p, recs) in records {
            self.records += recs.len() as u64;
            ctx.out.group.push(GroupObs::Processed {
                p,
                offsets: recs.iter().map(|(o, _)| *o).collect(),
            });
        }
        let c = self.consumer.as_mut().expect("up");
        let generation = c.generation();
        let id = match self.mode {
            CommitMode::Sync => c.commit_sync(now),
            CommitMode::Async => c.commit_async(now),
            // The next poll commits (the consumer's auto-commit).
            CommitMode::Auto => return,
        };
        self.open_commits.insert(id, generation);
        ctx.history.push(
            now,
            commit_process(self.client),
            EventType::Invoke,
            Function::Commit,
            Value::Null,
        );
        if self.mode == CommitMode::Sync {
            self.app = App::Committing { id, since: now };
        }
    }

    /// After the consumer handled something: poll if due, route its requests, report.
    fn after(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        // Taken once for the whole loop (putting it back costs a drop call).
        let mut outs = std::mem::take(&mut self.outs);
        for _ in 0..16 {
            if let App::Idle { next_poll } = self.app {
                if now >= next_poll {
                    let recs = self.consumer_mut().poll(now);
                    if recs.is_empty() {
                        self.app = App::Idle {
                            next_poll: now + POLL_INTERVAL,
                        };
                    } else {
                        self.begin_processing(recs, ctx);
                    }
                }
            }
            self.consumer_mut().poll_outputs_into(&mut outs);
            if outs.is_empty() {
                break;
            }
            let mut immediate = Vec::new();
            for o in outs.drain(..) {
                match o {
                    ConsumerOutput::Send {
                        to,
                        correlation,
                        request,
                    } => {
                        if let Some(r) = self.route(to, correlation, request, ctx) {
                            immediate.push((correlation, r));
                        }
                    }
                    ConsumerOutput::Event(e) => self.on_event(e, ctx),
                }
            }
            for (corr, r) in immediate {
                self.consumer_mut().step(now, corr, r);
            }
        }
        self.outs = outs;
        poll_metadata(
            &mut self.meta,
            &mut self.wire,
            &mut Ctx {
                now,
                history: ctx.history,
                rng: &mut self.rng,
                out: ctx.out,
                brokers: ctx.brokers,
                controllers: ctx.controllers,
            },
        );
        let c = self.consumer.as_ref().expect("up");
        self.owned_now.clear();
        for (t, pos, committed) in c.assigned_offsets() {
            if t.topic != TOPIC {
                continue;
            }
            let p = t.partition;
            self.owned_now.push(p);
            if let (Some(pos), Some(committed)) = (pos, committed) {
                if pos < committed && self.reset_seen.get(p) != Some(&pos) {
                    self.reset_seen.insert(p, pos);
                    ctx.out.group.push(GroupObs::Reset { p, to: pos });
                }
            }
        }
        if *self.owned != self.owned_now[..] {
            self.owned = self.owned_now[..].into();
        }
        // Ownership is claimed for a generation once the member is Stable in it: while it
        // joins or syncs the next one it still holds what the last one gave it (cooperative
        // members keep it through the rebalance), and a generation whose sync never
        // completed — e.g. lost with its coordinator, its number reused by the next — gave
        // nobody anything.
        let stable = *c.phase() == MemberPhase::Stable;
        ctx.out.group.push(GroupObs::Member {
            member: self.index,
            state: Some((c.generation().filter(|_| stable), self.owned.clone())),
        });
    }

    fn begin_processing(&mut self, recs: Vec<ConsumedRecord>, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        let n = recs.len() as u64;
        let mut by_p: BTreeMap<u32, Vec<(Offset, Text)>> = BTreeMap::new();
        for r in recs {
            let value = consumed_value(&r);
            let p = r.tp.partition;
            let from = self.served.get(p).copied().unwrap_or(0);
            ctx.out.read.push((p, r.offset, value.clone(), from));
            by_p.entry(p).or_default().push((r.offset, value));
        }
        // The history shows the read at once (invoke and ok): a rebalance during the
        // processing must come after it there. Processing itself is for the invariants.
        for (&p, recs) in &by_p {
            let process = process_id(self.client, p);
            ctx.history
                .push(now, process, EventType::Invoke, Function::Poll, Value::Null);
            let polled = recs
                .iter()
                .map(|(o, v)| PolledRecord::new(TOPIC_TEXT, p, *o, v.clone()))
                .collect();
            ctx.history.push(
                now,
                process,
                EventType::Ok,
                Function::Poll,
                Value::Poll(PollValue { records: polled }),
            );
        }
        self.app = App::Processing {
            records: by_p,
            done_at: now + PROCESS_BASE + n * PROCESS_PER_RECORD,
        };
        if let Some(d) = self.pause_armed.take() {
            ctx.out.pause = Some(d);
        }
    }

    /// Sends a consumer request; `Some(answer)` if it fails before leaving (no leader known).
    fn route(
        &mut self,
        to: Destination,
        correlation: u64,
        request: ConsumerRequest,
        ctx: &mut Ctx<'_>,
    ) -> Option<ConsumerResponse> {
        let route = self.meta.route(&to, &request);
        let addr = match route {
            Resolved::AnyBroker => Address::Node(self.rng.gen_range(1..=ctx.brokers)),
            Resolved::Node(n) => Address::Node(n),
            Resolved::NoLeader(answer) => return Some(answer),
        };
        self.wire += 1;
        let w = self.wire;
        let offset_fetch = match &request {
            ConsumerRequest::Group(GroupRequest::OffsetFetch(f)) => {
                f.partitions.as_ref().map(|ps| {
                    ps.iter()
                        .filter(|t| t.topic == TOPIC)
                        .map(|t| t.partition)
                        .collect()
                })
            }
            _ => None,
        };
        let fetch_from = match &request {
            ConsumerRequest::Fetch { offset, .. } => Some(*offset),
            _ => None,
        };
        let (msg, wire) = group_wire::to_message(w, request);
        self.pending.insert(
            w,
            Pending {
                consumer_corr: correlation,
                wire,
                offset_fetch,
                fetch_from,
                sent_at: ctx.now,
            },
        );
        ctx.out.sends.push((addr, msg));
        None
    }

    /// The member's process dies: everything it had in memory is gone.
    pub fn crash(&mut self, ctx: &mut Ctx<'_>) {
        if self.consumer.is_none() {
            return;
        }
        self.end_open_ops(ctx);
        self.consumer = None;
        self.pending.clear();
        self.pause_armed = None;
        self.reset_seen.clear();
        for (p, _) in std::mem::take(&mut self.cursor_at) {
            ctx.out.cursor.push(CursorObs::Stop { p });
        }
        self.app = App::Idle { next_poll: 0 };
        self.crashes += 1;
        for p in 0..self.partitions {
            ctx.event(
                self.client,
                p,
                EventType::Info,
                Function::Crash,
                Value::Null,
            );
        }
        ctx.out.group.push(GroupObs::Member {
            member: self.index,
            state: None,
        });
    }

    /// A crashed member starts again: a new consumer, a new member id, a new subscription.
    pub fn restart(&mut self) {
        if self.consumer.is_some() {
            return;
        }
        self.consumer = Some(self.new_consumer());
        self.subscribed = false;
    }

    pub fn finish(&mut self, ctx: &mut Ctx<'_>) {
        self.end_open_ops(ctx);
        self.app = App::Idle { next_poll: 0 };
    }

    pub fn next_wake(&self) -> Option<SimTime> {
        let c = self.consumer.as_ref()?;
        // A plain minimum and whether there is one (see `Producer::next_wake`).
        let (mut t, mut any) = (SimTime::MAX, false);
        let mut at = |x: SimTime| {
            t = t.min(x);
            any = true;
        };
        if !self.subscribed {
            at(0);
        }
        if let Some(x) = c.poll_timeout() {
            at(x);
        }
        match &self.app {
            App::Idle { next_poll } if c.has_assignment() => at(*next_poll),
            App::Idle { .. } => {}
            App::Processing { done_at, .. } => at(*done_at),
            App::Committing { since, .. } => at(since + FORGET_AFTER),
        }
        if let Some(m) = self.meta.next_refresh() {
            at(m);
        }
        any.then_some(t)
    }
}
