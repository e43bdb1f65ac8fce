//! Consumer-group members: each joins group `jepsen` on the test topic, polls, and commits
//! what it read after each non-empty poll. The history records them the way the
//! simulator's members do (`sim/src/group_client/events.rs`), so the checker judges real
//! and simulated groups alike: one process per member for its subscribe and commits (each
//! commit in the generation it was made in), and one per (member, partition) for its
//! polls and assignments, where a rebalance shows as an `assign` of `[]` (revoked or lost)
//! and a later `assign` of the partition (its position restarts from the committed offset).

use super::clients::{rec, Ctx};
use super::TOPIC;
use skein_core::group::{CommitError, CommitId, ConsumerConfig, ConsumerEvent, OffsetReset};
use skein_core::types::TopicPartition;
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

/// One member, from joining until the workload stops (then it leaves the group).
pub async fn member(partitions: u32, ctx: Ctx) {
    let base = ctx
        .next_process
        .fetch_add(u64::from(partitions) + 1, Ordering::SeqCst);
    let mut gc = match GroupClient::new(ctx.cluster.clone(), config()) {
        Ok(gc) => gc,
        Err(e) => {
            tracing::error!(error = %e, "cannot start a group member");
            return;
        }
    };
    let mut m = Member {
        ctx,
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
    while !m.ctx.stop.load(Ordering::SeqCst) {
        let polled = gc.poll(Duration::from_millis(100)).await;
        // What happened while polling (a rebalance, commit answers) came before the
        // records it returns.
        m.on_events(gc.take_events(), gc.consumer().generation());
        let records = match polled {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "a group member stopped");
                break;
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
            let process = base + 1 + u64::from(p);
            let r = &m.ctx.recorder;
            rec(r, process, EventType::Invoke, Function::Poll, Value::Null);
            let value = Value::Poll(PollValue { records });
            rec(r, process, EventType::Ok, Function::Poll, value);
        }
        if !commit.is_empty() {
            m.commit(&mut gc, commit).await;
        }
    }
    let generation = gc.consumer().generation();
    gc.close().await;
    m.on_events(gc.take_events(), generation);
    // Commits still in flight: they may or may not have happened.
    for _ in std::mem::take(&mut m.open) {
        let r = &m.ctx.recorder;
        rec(r, base, EventType::Info, Function::Commit, Value::Null);
    }
}

impl Member {
    async fn commit(&mut self, gc: &mut GroupClient, offsets: BTreeMap<TopicPartition, u64>) {
        let generation = gc.consumer().generation();
        let r = &self.ctx.recorder;
        rec(
            r,
            self.base,
            EventType::Invoke,
            Function::Commit,
            Value::Null,
        );
        let id = gc.commit(offsets).await;
        self.open.insert(id, generation);
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
                    let r = &self.ctx.recorder;
                    rec(
                        r,
                        self.base,
                        EventType::Invoke,
                        Function::Commit,
                        Value::Null,
                    );
                }
                _ => {}
            }
        }
    }
}
