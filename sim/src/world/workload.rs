//! The workload: producers, consumers and group members stepped with a client context,
//! their outputs routed (acknowledgements and reads to the checks, messages to the
//! network), their timers, and the admin client that creates the topic.

use super::{Client, Ev, World, ADMIN};
use crate::client::Producer;
use crate::client_step::{Ctx, CursorObs};
use crate::config::SimConfig;
use crate::fields::Fields;
use crate::group_client::GroupMember;
use crate::time::{SimTime, MICROS, MILLIS};
use crate::topic::TOPIC;
use crate::txn_client::TxnClient;
use skein_core::client::{Route, Truncation};
use skein_core::controller::{ControllerError, ControllerRequest, ControllerResponse, TopicConfig};
use skein_core::group::{coordinator_partition, CONSUMER_OFFSETS_TOPIC};
use skein_core::message::{Address, Message};
use skein_core::{NodeId, TopicPartition};

/// A producer of the workload: client `client`, writing values "p{index}-N" from `start_at`
/// at its share of the produce rate, until the run's quiet tail.
pub(super) fn producer(cfg: &SimConfig, client: u64, index: u32, start_at: SimTime) -> Producer {
    // After the final heal: new values for a third of the window, new batches for half
    // of it; the rest lets retries finish and consumers catch up for the liveness check.
    let heal = cfg.faults_end();
    let stop_producing = heal + (cfg.duration - heal) / 3;
    let stop_dispatch = heal + (cfg.duration - heal) / 2;
    let acks = cfg.acks;
    Producer::new(
        client,
        index,
        cfg.partitions,
        acks,
        cfg.idempotent,
        cfg.produce_rate / cfg.producers.max(1) as f64,
        start_at,
        stop_producing,
        stop_dispatch,
    )
    .compressing(cfg.compression.then_some(cfg.seed))
}

/// A transactional producer of the txn workload: client `client`, transactional id
/// `txn_id`, values "t{index}-N", from `start_at` until the run's quiet tail (as the
/// plain producers stop producing new values).
pub(super) fn txn_client(
    cfg: &SimConfig,
    client: u64,
    index: u32,
    txn_id: String,
    start_at: SimTime,
) -> TxnClient {
    let heal = cfg.faults_end();
    let stop = heal + (cfg.duration - heal) / 3;
    let rng = crate::rng::substream(cfg.seed, crate::rng::Subsystem::Workload, 2000 + client);
    TxnClient::new(client, index, txn_id, cfg.partitions, rng, start_at, stop)
        .keeping_epoch(cfg.txn_keep_epoch)
        .aborting_in_flight(cfg.txn_abort_in_flight)
}

/// Read-process-write pipeline `index` (1-based) of the txn workload at client `client`,
/// processing from `start_at` until the run's quiet tail (as the producers stop).
pub(super) fn pipeline(
    cfg: &SimConfig,
    client: u64,
    index: u32,
    start_at: SimTime,
) -> crate::txn_pipeline::Pipeline {
    let heal = cfg.faults_end();
    let stop = heal + (cfg.duration - heal) / 3;
    let rng = crate::rng::substream(cfg.seed, crate::rng::Subsystem::Workload, 3000 + client);
    crate::txn_pipeline::Pipeline::new(
        client,
        index,
        cfg.group_id.clone(),
        cfg.partitions,
        rng,
        start_at,
        stop,
    )
}

impl World {
    /// A client's timer fired: nothing if a newer timer replaced it or the client is down,
    /// re-queued while the client is paused, else the client ticks.
    pub(super) fn client_timer(&mut self, now: SimTime, seq: u64, client: usize, gen: u64) {
        let cs = &mut self.clients[client];
        if cs.timer_gen != gen || cs.down {
            return;
        }
        if cs.paused_until > now {
            let t = cs.paused_until;
            cs.timer_at = Some(t);
            self.q.push(t, Ev::ClientTimer { client, gen });
            return;
        }
        self.tracer.event_named(
            super::name_slots::CLIENT_TIMER,
            now,
            seq,
            ("client-timer", ""),
            &[client as u64],
            String::new,
        );
        self.clients[client].timer_at = None;
        self.client_step(client, now, None);
    }

    pub(super) fn client_step(
        &mut self,
        idx: usize,
        now: SimTime,
        msg: Option<(Address, Message)>,
    ) {
        self.with_client(idx, now, |client, ctx| match (client, msg) {
            (Client::Producer(p), Some((_, m))) => p.handle(m, ctx),
            (Client::Producer(p), None) => p.tick(ctx),
            (Client::Consumer(c), Some((from, m))) => c.handle(from, m, ctx),
            (Client::Consumer(c), None) => c.tick(ctx),
            (Client::Member(m), Some((from, msg))) => m.handle(from, msg, ctx),
            (Client::Member(m), None) => m.tick(ctx),
            (Client::Txn(t), Some((_, m))) => t.handle(m, ctx),
            (Client::Txn(t), None) => t.tick(ctx),
            (Client::Pipeline(x), Some((from, m))) => x.handle(from, m, ctx),
            (Client::Pipeline(x), None) => x.tick(ctx),
        });
        self.note_fenced(idx, now);
        self.reschedule_client(idx, now);
    }

    /// Runs `f` on client `idx` with a client context at `now`, then takes in what it
    /// produced (`absorb_client_out`): the one way the world steps a client.
    pub(super) fn with_client(
        &mut self,
        idx: usize,
        now: SimTime,
        f: impl FnOnce(&mut Client, &mut Ctx<'_>),
    ) {
        // The client writes into `self.out` in place: taken and put back, the whole
        // `ClientOut` was copied twice and a spare one dropped per step.
        let mut ctx = Ctx::new(
            now,
            &mut self.history,
            &mut self.work_rng,
            &mut self.out,
            &self.cfg,
        );
        f(&mut self.clients[idx].client, &mut ctx);
        self.absorb_client_out(idx, now);
    }

    /// A new producer instance at client `client` (a restart or a takeover), starting now.
    pub(super) fn new_producer(&mut self, client: u64, now: SimTime) -> Producer {
        let index = self.next_producer_index;
        self.next_producer_index += 1;
        producer(&self.cfg, client, index, now)
    }

    /// A new transactional client at client `client` with transactional id `txn_id` (a
    /// restart or a takeover), starting now, with a new value prefix.
    pub(super) fn new_txn_client(
        &mut self,
        client: u64,
        txn_id: String,
        now: SimTime,
    ) -> TxnClient {
        let index = self.next_producer_index;
        self.next_producer_index += 1;
        txn_client(&self.cfg, client, index, txn_id, now)
    }

    /// Routes what a client step produced: acknowledgements and reads to the checks, group
    /// observations to the group checks, a pause to the client's slot, messages out
    /// (`self.out`, left empty with its allocations kept).
    pub(super) fn absorb_client_out(&mut self, idx: usize, now: SimTime) {
        let from = Address::Client(idx as u64 + 1);
        self.history_to_tracer();
        let out = &mut self.out;
        for (p, o, v, e) in out.acked.drain(..) {
            if let Some(g) = self.group.as_mut() {
                g.on_known(p, o);
            }
            self.checker.on_client_ack(now, p, o, v, e);
        }
        for (p, o, v, b) in out.read.drain(..) {
            if let Some(g) = self.group.as_mut() {
                g.on_known(p, o);
            }
            self.checker.on_read(now, p, o, v, b);
        }
        let client = idx as u64 + 1;
        for obs in out.cursor.drain(..) {
            match obs {
                CursorObs::Polled {
                    p,
                    to,
                    records,
                    epoch,
                    ..
                } => self.checker.on_consumer_poll(client, p, to, records, epoch),
                CursorObs::Truncated { p, truncation: t } => {
                    let seq = self.q.len() as u64;
                    truncation_seen(&mut self.tracer, &mut self.checker, now, seq, client, p, &t)
                }
                CursorObs::Start { p, at } => self.checker.on_consumer_start(client, p, at),
                CursorObs::Stop { p } => self.checker.on_consumer_stop(client, p),
            }
        }
        for obs in out.txn.drain(..) {
            self.checker.on_txn_obs(now, obs);
        }
        for obs in out.group.drain(..) {
            if let Some(g) = self.group.as_mut() {
                g.on_obs(&mut self.checker, now, obs);
            }
        }
        if let Some(d) = out.pause.take() {
            self.pause_client(idx, now, d);
        }
        // Taken for the loop (sending needs all of `self`), put back for its allocation.
        let mut sends = std::mem::take(&mut self.out.sends);
        for (to, m) in sends.drain(..) {
            if let Message::Produce(r) = &m {
                self.produce_sizes
                    .insert((idx as u64 + 1, r.correlation), r.batch.record_count());
            }
            self.send(now, from, to, m);
        }
        self.out.sends = sends;
    }

    pub(super) fn pause_client(&mut self, idx: usize, now: SimTime, d: SimTime) {
        let seq = self.q.len() as u64;
        self.tracer
            .event(now, seq, "member-paused", "", &[idx as u64, d], || {
                format!("client {}: paused for {}", idx + 1, crate::time::Human(d))
            });
        self.tracer.fields(
            now,
            Fields::ClientPaused {
                client: idx as u64 + 1,
                duration: d,
            },
        );
        let cs = &mut self.clients[idx];
        cs.paused_until = cs.paused_until.max(now + d);
    }

    /// Runs `f` on group member `member` (1-based) with a client context, then routes what
    /// it produced and re-arms its timer.
    pub(super) fn with_member(
        &mut self,
        member: u32,
        now: SimTime,
        f: impl FnOnce(&mut GroupMember, &mut Ctx<'_>),
    ) {
        let Some(&idx) = member
            .checked_sub(1)
            .and_then(|i| self.members.get(i as usize))
        else {
            return;
        };
        self.with_client(idx, now, |client, ctx| {
            if let Client::Member(m) = client {
                f(m, ctx);
            }
        });
        self.reschedule_client(idx, now);
    }

    /// The broker currently leading the group's `__consumer_offsets` partition, as the
    /// controller knows it.
    pub(super) fn group_coordinator_broker(&self) -> Option<NodeId> {
        let image = self.metadata_view()?;
        let n = image.topic(CONSUMER_OFFSETS_TOPIC)?.config.partitions;
        let tp = TopicPartition::new(
            CONSUMER_OFFSETS_TOPIC,
            coordinator_partition(&self.cfg.group_id, n),
        );
        image.partition(&tp)?.leader
    }

    pub(super) fn reschedule_client(&mut self, idx: usize, now: SimTime) {
        let cs = &mut self.clients[idx];
        let Some(t) = cs.client.next_wake().filter(|_| !cs.down) else {
            cs.timer_gen += 1;
            cs.timer_at = None;
            return;
        };
        let at = t.max(now + MICROS);
        if cs.timer_at == Some(at) {
            return;
        }
        cs.timer_gen += 1;
        cs.timer_at = Some(at);
        let gen = cs.timer_gen;
        self.q.push(at, Ev::ClientTimer { client: idx, gen });
    }

    /// The topics the admin client creates, in order: the workload's, then the txn
    /// workload's pipeline outputs (same configuration).
    pub(super) fn admin_topics(&self) -> Vec<&'static str> {
        let mut topics = vec![TOPIC];
        if self.cfg.workload == crate::config::Workload::Txn && self.cfg.pipelines > 0 {
            topics.extend(crate::txn_pipeline::OUTPUT_TOPICS);
        }
        topics
    }

    /// The admin client: creates the topic (retrying until the controller says it exists).
    pub(super) fn admin(&mut self, now: SimTime, msg: Option<Message>) {
        if self.topic_created {
            return;
        }
        if let Some(Message::ControllerResponse(resp)) = msg {
            if let Some(asked) = self.admin_asked.take() {
                if self.admin_router.on_answer(asked, &resp) == Route::AskNow {
                    self.admin_sent = None;
                    self.q.push(now, Ev::Admin);
                    return;
                }
            }
            if let ControllerResponse::CreateTopic { result, .. } = *resp {
                match result {
                    Ok(_) | Err(ControllerError::TopicAlreadyExists { .. }) => {
                        if self.admin_topic + 1 < self.admin_topics().len() {
                            // The next topic (the pipelines' outputs), at once.
                            self.admin_topic += 1;
                            self.admin_sent = None;
                            self.q.push(now, Ev::Admin);
                        } else {
                            self.topic_created = true;
                        }
                    }
                    Err(_) => {
                        self.admin_sent = None;
                        self.q.push(now + 200 * MILLIS, Ev::Admin);
                    }
                }
            }
            return;
        }
        if msg.is_some() {
            return;
        }
        if self.admin_sent.is_some_and(|t| now < t + 500 * MILLIS) {
            return;
        }
        self.admin_sent = Some(now);
        // Core's routing: a request that got no answer moves to the next controller; a
        // NotController answer was given to the router above.
        if let Some(asked) = self.admin_asked.take() {
            self.admin_router.on_no_answer(asked);
        }
        let to = self.admin_router.target();
        self.admin_asked = Some(to);
        let controller = Address::Controller(to);
        let config = TopicConfig {
            partitions: self.cfg.partitions,
            replication_factor: self.cfg.replication_factor as u16,
            min_insync_replicas: self.cfg.min_insync_replicas as u16,
            unclean_leader_election: self.cfg.unclean_leader_election,
            unclean_recovery_strategy: self.cfg.unclean_recovery_strategy,
            ..TopicConfig::default()
        };
        self.send(
            now,
            Address::Client(ADMIN),
            controller,
            Message::ControllerRequest(ControllerRequest::CreateTopic {
                name: self.admin_topics()[self.admin_topic].to_string(),
                config,
                assignment: None,
            }),
        );
        self.q.push(now + 500 * MILLIS, Ev::Admin);
    }
}

/// Consumer `client` reported a truncation in partition `p`: traced and checked. Rare, so
/// out of line (kept out of the hot client step's code).
#[cold]
#[inline(never)]
fn truncation_seen(
    tracer: &mut crate::trace::Tracer,
    checker: &mut crate::invariants::Checker,
    now: SimTime,
    seq: u64,
    client: u64,
    p: u32,
    t: &Truncation,
) {
    tracing::info!(client, partition = p, "{t}");
    tracer.event(
        now,
        seq,
        "truncation-detected",
        "",
        &[client, p as u64, t.from, t.to],
        || format!("client {client} partition {p}: {t}"),
    );
    checker.on_consumer_truncation(client, p, t);
}
