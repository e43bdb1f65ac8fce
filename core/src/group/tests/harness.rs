//! Drive one `GroupCoordinator` with raw requests; its `__consumer_offsets` partition is a
//! `Vec<RecordBatch>`, appends complete when the test says so (in log order).

use crate::group::*;
use crate::log::RecordBatch;
use crate::txn::TxnResult;
use crate::types::{Nanos, Offset, TopicPartition};
use std::collections::{BTreeMap, VecDeque};

pub const MS: Nanos = 1_000_000;
pub const S: Nanos = 1_000 * MS;
pub const SESSION: Nanos = 10 * S;
pub const REBALANCE: Nanos = 20 * S;

pub fn config() -> GroupConfig {
    GroupConfig {
        min_session_timeout: S,
        max_session_timeout: 60 * S,
        initial_rebalance_delay: 3 * S,
        max_group_size: 100,
        max_metadata_bytes: 64,
        no_generation_fencing: false,
        txn_offsets_visible_early: false,
    }
}

pub struct Harness {
    pub now: Nanos,
    pub node: u32,
    pub epoch: u32,
    pub coord: GroupCoordinator,
    pub log: Vec<RecordBatch>,
    pub unacked: VecDeque<(AppendId, Offset)>,
    pub auto_ack: bool,
    pub replies: Vec<(ClientId, CorrelationId, GroupResponse)>,
    next_corr: CorrelationId,
    /// The configuration of every coordinator instance (failovers keep it).
    config: GroupConfig,
}

impl Harness {
    pub fn new() -> Self {
        Self::with_config(config())
    }

    pub fn with_config(config: GroupConfig) -> Self {
        let mut coord = GroupCoordinator::new(1, 0, 1, config.clone());
        coord.load(0, 1, &[]).expect("empty load");
        Self {
            now: 0,
            node: 1,
            epoch: 1,
            coord,
            log: Vec::new(),
            unacked: VecDeque::new(),
            auto_ack: true,
            replies: Vec::new(),
            next_corr: 1,
            config,
        }
    }

    pub fn log_end(&self) -> Offset {
        self.log.last().map(|b| b.next_offset()).unwrap_or(0)
    }

    pub fn pump(&mut self) {
        loop {
            let out = self.coord.poll_outputs();
            if out.is_empty() {
                break;
            }
            for o in out {
                match o {
                    CoordinatorOutput::Respond {
                        to,
                        correlation,
                        response,
                    } => self.replies.push((to, correlation, response)),
                    CoordinatorOutput::Committed { .. } => {}
                    CoordinatorOutput::Append {
                        id,
                        partition,
                        leader_epoch,
                        records,
                        producer,
                    } => {
                        assert_eq!(partition, 0);
                        assert_eq!(leader_epoch, self.epoch);
                        let base = self.log_end();
                        // As the broker writes it: a TxnOffsetCommit is a transactional
                        // batch of its producer.
                        let batch = match producer {
                            Some(p) => RecordBatch::of_records(0, records)
                                .with_producer(Some(crate::log::ProducerInfo {
                                    producer_id: p.producer_id,
                                    producer_epoch: p.producer_epoch,
                                    base_sequence: TXN_OFFSETS_SEQUENCE,
                                }))
                                .transactional(),
                            None => RecordBatch::of_records(0, records),
                        };
                        self.log.push(batch.at(base).in_epoch(leader_epoch));
                        self.unacked.push_back((id, base));
                    }
                }
            }
            if self.auto_ack {
                self.ack_all();
            }
        }
    }

    pub fn ack_all(&mut self) {
        while let Some((id, base)) = self.unacked.pop_front() {
            self.coord.append_completed(self.now, id, Ok(base));
        }
        self.pump();
    }

    pub fn fail_appends(&mut self, e: AppendError) {
        while let Some((id, _)) = self.unacked.pop_front() {
            self.coord.append_completed(self.now, id, Err(e.clone()));
        }
        self.pump();
    }

    /// Send a request; returns its correlation id.
    pub fn send(&mut self, client: ClientId, req: GroupRequest) -> CorrelationId {
        let c = self.next_corr;
        self.next_corr += 1;
        self.coord.step(self.now, client, c, req);
        self.pump();
        c
    }

    /// Take the response to `corr`, if it has been sent.
    pub fn take(&mut self, corr: CorrelationId) -> Option<GroupResponse> {
        let i = self.replies.iter().position(|(_, c, _)| *c == corr)?;
        Some(self.replies.remove(i).2)
    }

    pub fn call(&mut self, client: ClientId, req: GroupRequest) -> GroupResponse {
        let c = self.send(client, req);
        self.take(c).expect("immediate response")
    }

    /// OffsetFetch of every partition, its read barrier (and so every append before it)
    /// acknowledged.
    pub fn fetch(&mut self, client: ClientId) -> GroupResponse {
        let c = self.send(client, fetch_all());
        self.ack_all();
        self.take(c).expect("answered once the barrier is durable")
    }

    pub fn advance(&mut self, dt: Nanos) {
        self.now += dt;
        self.coord.handle_timeout(self.now);
        self.pump();
    }

    /// Hand the partition to a fresh coordinator instance (another broker) that loads the log.
    pub fn failover(&mut self) -> LoadSummary {
        self.coord.unload();
        self.pump();
        self.unacked.clear();
        self.node += 1;
        self.epoch += 1;
        self.coord = GroupCoordinator::new(self.node, 0, 1, self.config.clone());
        let s = self
            .coord
            .load(self.now, self.epoch, &self.log)
            .expect("load");
        self.pump();
        s
    }

    /// `producer_id`'s transaction marker appended and committed: the log holds it and the
    /// coordinator hears of it, as the broker tells it.
    pub fn marker(&mut self, producer_id: u64, producer_epoch: u16, result: TxnResult) {
        let base = self.log_end();
        let marker = crate::log::TxnMarker {
            producer_id,
            producer_epoch,
            result,
            coordinator_epoch: 1,
        };
        self.log.push(
            RecordBatch::txn_marker(marker, 0)
                .at(base)
                .in_epoch(self.epoch),
        );
        self.coord.complete_txn(producer_id, result);
        self.pump();
    }

    pub fn view(&self) -> GroupView {
        self.coord.group(GROUP).expect("group exists")
    }
}

pub const GROUP: &str = "g";

/// Commit sequence numbers for scripted members: increasing, like a real consumer's.
static COMMIT_SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

pub fn protocols(topics: &[&str], names: &[&str]) -> Vec<ProtocolMetadata> {
    names
        .iter()
        .map(|n| ProtocolMetadata {
            name: n.to_string(),
            subscription: Subscription {
                topics: topics.iter().map(|t| t.to_string()).collect(),
                ..Default::default()
            },
        })
        .collect()
}

pub fn join(member: Option<&str>, instance: Option<&str>) -> GroupRequest {
    GroupRequest::JoinGroup(JoinGroupRequest {
        group_id: GROUP.into(),
        member_id: member.map(String::from),
        group_instance_id: instance.map(String::from),
        session_timeout: SESSION,
        rebalance_timeout: REBALANCE,
        protocol_type: CONSUMER_PROTOCOL_TYPE.into(),
        protocols: protocols(&["t"], &["range"]),
    })
}

pub fn sync(
    member: &str,
    generation: u32,
    a: BTreeMap<MemberId, MemberAssignment>,
) -> GroupRequest {
    GroupRequest::SyncGroup(SyncGroupRequest {
        group_id: GROUP.into(),
        generation,
        member_id: member.into(),
        group_instance_id: None,
        assignments: a,
    })
}

pub fn heartbeat(member: &str, generation: u32) -> GroupRequest {
    GroupRequest::Heartbeat(HeartbeatRequest {
        group_id: GROUP.into(),
        generation,
        member_id: member.into(),
        group_instance_id: None,
    })
}

pub fn leave(member: &str) -> GroupRequest {
    GroupRequest::LeaveGroup(LeaveGroupRequest {
        group_id: GROUP.into(),
        member_id: member.into(),
        group_instance_id: None,
    })
}

pub fn commit(member: &str, generation: u32, offsets: &[(u32, Offset)]) -> GroupRequest {
    GroupRequest::OffsetCommit(OffsetCommitRequest {
        group_id: GROUP.into(),
        committer: Committer::Member {
            member_id: member.into(),
            generation,
            group_instance_id: None,
            sequence: COMMIT_SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        },
        offsets: offsets
            .iter()
            .map(|(p, o)| (TopicPartition::new("t", *p), OffsetAndMetadata::new(*o)))
            .collect(),
    })
}

pub fn fetch_all() -> GroupRequest {
    GroupRequest::OffsetFetch(OffsetFetchRequest {
        group_id: GROUP.into(),
        partitions: None,
        require_stable: true,
    })
}

pub fn offsets_of(resp: GroupResponse) -> BTreeMap<u32, Offset> {
    match resp {
        GroupResponse::OffsetFetch(Ok(m)) => m
            .into_iter()
            .map(|(tp, o)| (tp.partition, o.offset))
            .collect(),
        other => panic!("expected offsets, got {other:?}"),
    }
}

/// Join as a new dynamic member: first answer is MemberIdRequired, rejoin with that id.
/// Returns (member id, correlation of the parked join).
pub fn join_new(h: &mut Harness, client: ClientId) -> (MemberId, CorrelationId) {
    let id = match h.call(client, join(None, None)) {
        GroupResponse::JoinGroup(Err(GroupError::MemberIdRequired(id))) => id,
        other => panic!("expected MemberIdRequired, got {other:?}"),
    };
    let c = h.send(client, join(Some(&id), None));
    (id, c)
}

pub fn join_ok(r: Option<GroupResponse>) -> JoinGroupResponse {
    match r {
        Some(GroupResponse::JoinGroup(Ok(j))) => j,
        other => panic!("expected a join response, got {other:?}"),
    }
}

pub fn sync_ok(r: Option<GroupResponse>) -> Vec<u32> {
    match r {
        Some(GroupResponse::SyncGroup(Ok(a))) => {
            a.partitions.iter().map(|tp| tp.partition).collect()
        }
        other => panic!("expected an assignment, got {other:?}"),
    }
}

/// The leader's range assignment of `t` (6 partitions) over the join response's members.
pub fn leader_assignment(j: &JoinGroupResponse) -> BTreeMap<MemberId, MemberAssignment> {
    let members = j
        .members
        .iter()
        .map(|m| (m.member_id.clone(), AssignorMember::from(&m.subscription)))
        .collect();
    let topics: TopicPartitions = [("t".to_string(), 6)].into();
    range(&members, &topics)
        .into_iter()
        .map(|(m, s)| {
            (
                m,
                MemberAssignment {
                    partitions: s.into_iter().collect(),
                },
            )
        })
        .collect()
}

/// Complete a join round whose join responses are `joins` (client, correlation): every
/// member syncs, the leader with a range assignment. Returns member id -> partitions.
pub fn complete_round(
    h: &mut Harness,
    joins: &[(ClientId, CorrelationId)],
) -> (u32, BTreeMap<MemberId, Vec<u32>>) {
    let resps: Vec<(ClientId, JoinGroupResponse)> = joins
        .iter()
        .map(|(cl, c)| (*cl, join_ok(h.take(*c))))
        .collect();
    let generation = resps[0].1.generation;
    assert!(resps.iter().all(|(_, j)| j.generation == generation));
    let mut syncs = Vec::new();
    for (cl, j) in resps.iter().filter(|(_, j)| !j.is_leader()) {
        syncs.push((
            j.member_id.clone(),
            h.send(*cl, sync(&j.member_id, generation, BTreeMap::new())),
        ));
    }
    let (lcl, lj) = resps
        .iter()
        .find(|(_, j)| j.is_leader())
        .expect("one leader");
    assert_eq!(lj.members.len(), joins.len());
    syncs.push((
        lj.member_id.clone(),
        h.send(*lcl, sync(&lj.member_id, generation, leader_assignment(lj))),
    ));
    let out = syncs
        .into_iter()
        .map(|(m, c)| (m, sync_ok(h.take(c))))
        .collect();
    (generation, out)
}

/// Three members A, B, C (clients 1, 2, 3) in a stable generation 1.
pub fn three_members(h: &mut Harness) -> Vec<MemberId> {
    let (a, ca) = join_new(h, 1);
    let (b, cb) = join_new(h, 2);
    let (c, cc) = join_new(h, 3);
    // The initial delay holds the first generation until everyone is in.
    assert!(h.take(ca).is_none());
    h.advance(3 * S);
    let (generation, assigned) = complete_round(h, &[(1, ca), (2, cb), (3, cc)]);
    assert_eq!(generation, 1);
    let all: Vec<u32> = {
        let mut v: Vec<u32> = assigned.values().flatten().copied().collect();
        v.sort();
        v
    };
    assert_eq!(all, vec![0, 1, 2, 3, 4, 5]);
    vec![a, b, c]
}
