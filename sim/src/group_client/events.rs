//! What a group member makes of its consumer's events: partitions assigned and revoked,
//! commits begun and completed, fencing, as history events and observations for the group
//! invariants.

use super::*;

impl GroupMember {
    fn assign_event(&self, ctx: &mut Ctx<'_>, p: u32, owned: bool) {
        ctx.event(
            self.client,
            p,
            EventType::Ok,
            Function::Assign,
            Value::Assign(AssignValue {
                partitions: if owned {
                    vec![(TOPIC.into(), p)]
                } else {
                    Vec::new()
                },
                ..AssignValue::default()
            }),
        );
    }

    pub(super) fn on_event(&mut self, e: ConsumerEvent, ctx: &mut Ctx<'_>) {
        let sim_parts = |v: &[TopicPartition]| -> Vec<u32> {
            v.iter()
                .filter(|t| t.topic == TOPIC)
                .map(|t| t.partition)
                .collect()
        };
        match e {
            ConsumerEvent::PartitionsAssigned { partitions, .. } => {
                for p in sim_parts(&partitions) {
                    self.assign_event(ctx, p, true);
                }
            }
            ConsumerEvent::PartitionsRevoked { partitions }
            | ConsumerEvent::PartitionsLost { partitions } => {
                for p in sim_parts(&partitions) {
                    self.assign_event(ctx, p, false);
                    self.reset_seen.remove(p);
                    self.cursor_at.remove(p);
                    ctx.out.cursor.push(CursorObs::Stop { p });
                }
            }
            ConsumerEvent::CommitCompleted { id, result } => {
                let Some(generation) = self.open_commits.remove(&id) else {
                    return;
                };
                if let App::Committing { id: waiting, .. } = self.app {
                    if waiting == id {
                        self.app = App::Idle { next_poll: ctx.now };
                    }
                }
                let (kind, value) = match result {
                    Ok(map) => {
                        self.commits_ok += 1;
                        let offsets: Vec<(u32, Offset)> = map
                            .iter()
                            .filter(|(t, _)| t.topic == TOPIC)
                            .map(|(t, o)| (t.partition, *o))
                            .collect();
                        let value = Value::Commit(CommitValue {
                            group: self.group.as_str().into(),
                            offsets: offsets
                                .iter()
                                .map(|&(partition, offset)| CommitOffset {
                                    topic: TOPIC.into(),
                                    partition,
                                    offset,
                                })
                                .collect(),
                            generation,
                        });
                        if !offsets.is_empty() {
                            ctx.out.group.push(GroupObs::CommitAcked {
                                member: self.index,
                                offsets,
                            });
                        }
                        (EventType::Ok, value)
                    }
                    // Refused before it left, or by the coordinator's fencing: not applied.
                    Err(CommitError::RebalanceInProgress | CommitError::NotOwned(_)) => {
                        (EventType::Fail, Value::Null)
                    }
                    Err(CommitError::Group(g)) if !g.is_retriable() => {
                        (EventType::Fail, Value::Null)
                    }
                    // Timed out or lost with its coordinator: it may have been written.
                    Err(_) => (EventType::Info, Value::Null),
                };
                ctx.history.push(
                    ctx.now,
                    commit_process(self.client),
                    kind,
                    Function::Commit,
                    value,
                );
            }
            ConsumerEvent::CommitStarted { id, .. } => self.on_commit_started(id, ctx),
            ConsumerEvent::Truncated { tp: t, truncation } => {
                if t.topic == TOPIC {
                    self.cursor_at.insert(t.partition, truncation.to);
                    ctx.out.cursor.push(CursorObs::Truncated {
                        p: t.partition,
                        truncation,
                    });
                }
            }
            ConsumerEvent::NoOffset { .. } | ConsumerEvent::Fatal(_) => {
                tracing::warn!(member = self.index, ?e, "group member stopped or idle");
            }
        }
    }

    /// A commit the consumer began itself (auto-commit, or before revoking): recorded like
    /// a user commit, invoked now and completed by its `CommitCompleted`.
    fn on_commit_started(&mut self, id: CommitId, ctx: &mut Ctx<'_>) {
        let generation = self.consumer.as_ref().and_then(|c| c.generation());
        self.open_commits.insert(id, generation);
        ctx.history.push(
            ctx.now,
            commit_process(self.client),
            EventType::Invoke,
            Function::Commit,
            Value::Null,
        );
    }

    /// Operations in flight end with an unknown outcome.
    pub(super) fn end_open_ops(&mut self, ctx: &mut Ctx<'_>) {
        for _ in std::mem::take(&mut self.open_commits) {
            ctx.history.push(
                ctx.now,
                commit_process(self.client),
                EventType::Info,
                Function::Commit,
                Value::Null,
            );
        }
    }
}
