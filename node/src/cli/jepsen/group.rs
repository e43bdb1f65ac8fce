//! Consumer-group members: each joins group `jepsen` on the test topic, polls, and commits
//! what it read after each non-empty poll. The history records them the way the
//! simulator's members do (`sim/src/group_client/events.rs`), so the checker judges real
//! and simulated groups alike: one process per member for its subscribe and commits (each
//! commit in the generation it was made in), and one per (member, partition) for its
//! polls and assignments, where a rebalance shows as an `assign` of `[]` (revoked or lost)
//! and a later `assign` of the partition (its position restarts from the committed offset).

use super::clients::{rec, Ctx};
use super::TOPIC;
use skein_core::client::{CommitError, CommitId, ConsumerConfig, ConsumerEvent, OffsetReset};
use skein_core::types::TopicPartition;
use skein_jepsen::nemesis::mix;
use skein_jepsen::{
    AssignValue, CommitOffset, CommitValue, EventType, Function, PollValue, PolledRecord,
    SubscribeValue, Value,
};
use skein_node::group_client::GroupClient;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub const GROUP: &str = "jepsen";
const MS: u64 = 1_000_000;

fn config() -> ConsumerConfig {
    let mut c = ConsumerConfig::new(GROUP);
    c.session_timeout = 6_000 * MS;
    c.rebalance_timeout = 6_000 * MS;
    c.heartbeat_interval = 500 * MS;
    c.request_timeout = 3_000 * MS;
    c.auto_commit_interval = None;
    c.reset = OffsetReset::Earliest;
    c
}

struct Member {
    ctx: Ctx,
    /// Its commit process; partition `p`'s process is `base + 1 + p`.
    base: u64,
    /// Commits in flight and the generation each was made in.
    open: BTreeMap<CommitId, Option<u32>>,
}

/// How long incarnation `n` of member `index` lives: 8 to 16 s, drawn from the run's seed.
fn lifetime(seed: u64, index: u32, n: u32) -> Duration {
    let z = mix(seed ^ (u64::from(index) << 32 | u64::from(n)));
    Duration::from_millis(8_000 + z % 8_000)
}

/// Member `index` until the workload stops: a succession of incarnations, each a new
/// member with new history processes, living [`lifetime`]; then the even ones leave the
/// group (LeaveGroup: an immediate rebalance) and the odd ones crash (connections dropped,
/// nothing sent: the coordinator rebalances when the session times out, and the
/// partitions wait until then). Either way the next owner of a partition resumes from its
/// committed offset, so rebalances and commits across generations happen in every run.
pub async fn member(index: u32, seed: u64, partitions: u32, ctx: Ctx) {
    let mut n = 0;
    while !ctx.stop.load(Ordering::SeqCst) {
        let until = tokio::time::Instant::now() + lifetime(seed, index, n);
        incarnation(index, partitions, until, n % 2 == 0, &ctx).await;
        n += 1;
    }
}

/// One member: joins, polls and commits until `until` or the end of the workload, then
/// leaves (`leave`, or at the end) or crashes.
async fn incarnation(
    index: u32,
    partitions: u32,
    until: tokio::time::Instant,
    leave: bool,
    ctx: &Ctx,
) {
    let base = ctx
        .next_process
        .fetch_add(u64::from(partitions) + 1, Ordering::SeqCst);
    // Named by the member's slot: its incarnations share the slot's timeline rows.
    ctx.name(base, format!("group member {}", index + 1));
    for p in 0..partitions {
        let role = format!("group member {} of {TOPIC}-{p}", index + 1);
        ctx.name(base + 1 + u64::from(p), role);
    }
    let mut gc = match GroupClient::new(ctx.cluster.clone(), config()) {
        Ok(gc) => gc,
        Err(e) => {
            tracing::error!(error = %e, "cannot start a group member");
            tokio::time::sleep_until(until).await;
            return;
        }
    };
    let mut m = Member {
        ctx: ctx.clone(),
        base,
        open: BTreeMap::new(),
    };
    let subscribe = Value::Subscribe(SubscribeValue {
        group: GROUP.into(),
        topics: vec![TOPIC.into()],
    });
    rec(
        &m.ctx.recorder,
        base,
        EventType::Ok,
        Function::Subscribe,
        subscribe,
    );
    gc.subscribe(&[TOPIC]).await;
    let stopped = || ctx.stop.load(Ordering::SeqCst);
    while !stopped() && tokio::time::Instant::now() < until {
        if !m.poll_and_commit(&mut gc).await {
            break;
        }
    }
    if leave || stopped() {
        let generation = gc.consumer().generation();
        gc.close().await;
        m.on_events(gc.take_events(), generation);
    }
    // Commits still in flight (or of a crashed member): they may or may not have happened.
    for _ in std::mem::take(&mut m.open) {
        let r = &m.ctx.recorder;
        rec(r, base, EventType::Info, Function::Commit, Value::Null);
    }
}

impl Member {
    /// One poll, recorded per partition, and a commit of what it returned; false when the
    /// consumer stopped for good.
    async fn poll_and_commit(&mut self, gc: &mut GroupClient) -> bool {
        let polled = gc.poll(Duration::from_millis(100)).await;
        // What happened while polling (a rebalance, commit answers) came before the
        // records it returns.
        self.on_events(gc.take_events(), gc.consumer().generation());
        let records = match polled {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "a group member stopped");
                return false;
            }
        };
        let mut by_p: BTreeMap<u32, Vec<PolledRecord>> = BTreeMap::new();
        let mut commit = BTreeMap::new();
        for r in records.into_iter().filter(|r| r.tp.topic == TOPIC) {
            let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default());
            let p = r.tp.partition;
            by_p.entry(p)
                .or_default()
                .push(PolledRecord::new(TOPIC, p, r.offset, value.as_ref()));
            commit.insert(r.tp.clone(), r.offset + 1);
        }
        for (p, records) in by_p {
            let process = self.base + 1 + u64::from(p);
            let r = &self.ctx.recorder;
            rec(r, process, EventType::Invoke, Function::Poll, Value::Null);
            let value = Value::Poll(PollValue { records });
            rec(r, process, EventType::Ok, Function::Poll, value);
        }
        if !commit.is_empty() {
            self.commit(gc, commit).await;
        }
        true
    }

    async fn commit(&mut self, gc: &mut GroupClient, offsets: BTreeMap<TopicPartition, u64>) {
        let generation = gc.consumer().generation();
        self.record_commit_invoke();
        let id = gc.commit(offsets).await;
        self.open.insert(id, generation);
    }

    /// A commit's `invoke` in the history: ours, or the consumer's own before revoking.
    fn record_commit_invoke(&self) {
        let r = &self.ctx.recorder;
        rec(
            r,
            self.base,
            EventType::Invoke,
            Function::Commit,
            Value::Null,
        );
    }

    fn assign(&self, partitions: &[TopicPartition], owned: bool) {
        for tp in partitions.iter().filter(|t| t.topic == TOPIC) {
            let value = Value::Assign(AssignValue {
                partitions: if owned {
                    vec![(TOPIC.into(), tp.partition)]
                } else {
                    Vec::new()
                },
                ..AssignValue::default()
            });
            let process = self.base + 1 + u64::from(tp.partition);
            rec(
                &self.ctx.recorder,
                process,
                EventType::Ok,
                Function::Assign,
                value,
            );
        }
    }

    /// `generation`: the member's generation now (a commit the consumer starts itself is
    /// made in it).
    fn on_events(&mut self, events: Vec<ConsumerEvent>, now_in: Option<u32>) {
        for e in events {
            match e {
                ConsumerEvent::PartitionsAssigned { partitions, .. } => {
                    self.assign(&partitions, true)
                }
                ConsumerEvent::PartitionsRevoked { partitions }
                | ConsumerEvent::PartitionsLost { partitions } => self.assign(&partitions, false),
                ConsumerEvent::CommitCompleted { id, result } => {
                    let Some(generation) = self.open.remove(&id) else {
                        continue;
                    };
                    let (kind, value) = match result {
                        Ok(map) => (
                            EventType::Ok,
                            Value::Commit(CommitValue {
                                group: GROUP.into(),
                                offsets: map
                                    .iter()
                                    .filter(|(t, _)| t.topic == TOPIC)
                                    .map(|(t, o)| CommitOffset {
                                        topic: TOPIC.into(),
                                        partition: t.partition,
                                        offset: *o,
                                    })
                                    .collect(),
                                generation,
                            }),
                        ),
                        // Refused before it left, or fenced by the coordinator: not applied.
                        Err(CommitError::RebalanceInProgress | CommitError::NotOwned(_)) => {
                            (EventType::Fail, Value::Null)
                        }
                        Err(CommitError::Group(g)) if !g.is_retriable() => {
                            (EventType::Fail, Value::Null)
                        }
                        // Timed out or lost with its coordinator: it may have been written.
                        Err(_) => (EventType::Info, Value::Null),
                    };
                    rec(&self.ctx.recorder, self.base, kind, Function::Commit, value);
                }
                ConsumerEvent::CommitStarted { id, .. } => {
                    // The consumer's own commit (before revoking): recorded like ours.
                    self.open.insert(id, now_in);
                    self.record_commit_invoke();
                }
                _ => {}
            }
        }
    }
}
