//! Property tests over random schedules of the small world: consumers joining, crashing,
//! closing, being cut off and healed, coordinator failovers with some unacknowledged appends
//! surviving, slow appends, and explicit resets. `World::check` asserts after every message
//! that no partition has two owners, that committed offsets never go backwards except by an
//! explicit reset, and that every acknowledged commit stays visible; at the end, once healed,
//! every record has been processed at least once.

use super::harness::{self, Harness, MS, S};
use super::world::*;
use crate::client::*;
use crate::group::records;
use crate::group::*;
use crate::types::TopicPartition;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Run(u8),
    Add(bool),
    Crash(u8),
    Close(u8),
    Cut(u8),
    Heal(u8),
    Failover(u8),
    AckDelay(u8),
    Reset(u8, u8),
    Zombie(u8, u8),
    /// Start a static member with instance id `s{k % 3}` unless a live process holds it
    /// (static membership trusts that the previous holder is dead).
    AddStatic(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u8..40).prop_map(Op::Run),
        2 => any::<bool>().prop_map(Op::Add),
        1 => any::<u8>().prop_map(Op::Crash),
        1 => any::<u8>().prop_map(Op::Close),
        1 => any::<u8>().prop_map(Op::Cut),
        1 => any::<u8>().prop_map(Op::Heal),
        1 => (0u8..3).prop_map(Op::Failover),
        1 => (0u8..4).prop_map(Op::AckDelay),
        1 => (0u8..4, 0u8..30).prop_map(|(p, o)| Op::Reset(p, o)),
        2 => (any::<u8>(), 0u8..4).prop_map(|(z, p)| Op::Zombie(z, p)),
        2 => any::<u8>().prop_map(Op::AddStatic),
    ]
}

fn assignor(a: u8) -> AssignorKind {
    [
        AssignorKind::Range,
        AssignorKind::RoundRobin,
        AssignorKind::CooperativeSticky,
    ][a as usize % 3]
}

/// One random schedule (also called by the regression tests below with inputs proptest found).
fn run_schedule(kind: u8, ops: Vec<Op>, seed: u64, delay_pct: u32, loss: u32) {
    let mut w = World::new(4, 30);
    use rand::SeedableRng;
    w.faults = Some((
        rand_chacha::ChaCha8Rng::seed_from_u64(seed),
        delay_pct,
        loss,
    ));
    // One assignor per run: members must share a protocol.
    let kind = assignor(kind);
    let c = w.consumer_config(kind, AppMode::Auto);
    w.add(c, AppMode::Auto);
    for op in ops {
        let n = w.consumers.len();
        match op {
            Op::Run(steps) => {
                for _ in 0..steps as u32 * 4 {
                    w.step();
                }
            }
            Op::Add(m) if n < 5 => {
                let mode = if m {
                    AppMode::Auto
                } else {
                    AppMode::CommitAfterProcess
                };
                let c = w.consumer_config(kind, mode);
                w.add(c, mode);
            }
            Op::Add(_) => {}
            Op::AddStatic(k) if n < 6 => {
                let inst = format!("s{}", k % 3);
                // A process still shutting down holds its instance id too.
                let held = (0..n).any(|i| {
                    w.consumers[i].as_ref().is_some_and(|c| {
                        !matches!(c.phase(), MemberPhase::Closed | MemberPhase::Failed(_))
                            && w.instance_of(i) == Some(inst.as_str())
                    })
                });
                if !held {
                    let mut c = w.consumer_config(kind, AppMode::Auto);
                    c.instance_id = Some(inst);
                    w.add(c, AppMode::Auto);
                }
            }
            Op::AddStatic(_) => {}
            Op::Crash(i) => w.crash(i as usize % n),
            Op::Close(i) => w.close(i as usize % n),
            Op::Cut(i) => w.cut(i as usize % n, true),
            Op::Heal(i) => w.cut(i as usize % n, false),
            Op::Failover(k) => w.failover(k as usize),
            Op::AckDelay(d) => w.ack_delay_steps = d as u32,
            Op::Zombie(z, p) => w.zombie_commit(z as usize, &TopicPartition::new(TOPIC, p as u32)),
            Op::Reset(p, o) => {
                // Only accepted while the group is empty; either way invariants hold.
                w.admin_reset(&TopicPartition::new(TOPIC, p as u32), o as u64);
            }
        }
        w.flush();
    }
    // Heal everything and make sure one consumer is alive, then let the group settle.
    w.net.cut.clear();
    w.ack_delay_steps = 0;
    w.faults = None;
    let live = (0..w.consumers.len()).any(|i| {
        !w.closing[i]
            && w.consumers[i]
                .as_ref()
                .is_some_and(|c| !matches!(c.phase(), MemberPhase::Closed | MemberPhase::Failed(_)))
    });
    if !live {
        let c = w.consumer_config(kind, AppMode::Auto);
        w.add(c, AppMode::Auto);
    }
    w.run(60 * S);
    assert!(
        w.all_processed(),
        "processed {:?}",
        w.processed
            .iter()
            .map(|(t, s)| (t.to_string(), s.len()))
            .collect::<Vec<_>>()
    );
    assert!(
        w.stable_generation().is_some(),
        "group {:?}; consumers {:?}",
        w.coord.group(super::harness::GROUP),
        w.consumers
            .iter()
            .map(|c| c.as_ref().map(|c| (
                c.phase().clone(),
                c.member_id().cloned(),
                c.coordinator()
            )))
            .collect::<Vec<_>>()
    );
    // Finally every identity ever held replays a commit: only current ones get through.
    for z in 0..w.identities.len() {
        w.zombie_commit(z, &TopicPartition::new(TOPIC, (z % 4) as u32));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_schedules_keep_group_invariants(
        kind in 0u8..3,
        ops in prop::collection::vec(op(), 1..25),
        seed in any::<u64>(),
        delay_pct in 0u32..30,
        loss in 0u32..30,
    ) {
        run_schedule(kind, ops, seed, delay_pct, loss);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, failure_persistence: None, ..ProptestConfig::default() })]

    /// Commit-heavy schedules with failovers that keep a random part of the unacknowledged
    /// appends, slow appends and zombie replays: committed offsets never go backwards except
    /// by explicit reset, and acknowledged commits always survive (`World::check`).
    #[test]
    fn committed_offsets_never_go_backwards(
        kind in 0u8..3,
        ops in prop::collection::vec((1u8..30, 0u8..3, 0u8..4, any::<u8>()), 1..12),
        seed in any::<u64>(),
        delay_pct in 0u32..30,
    ) {
        let kind = assignor(kind);
        let mut w = World::new(3, 400);
        use rand::SeedableRng;
        w.faults = Some((rand_chacha::ChaCha8Rng::seed_from_u64(seed), delay_pct, 10));
        for _ in 0..3 {
            let c = w.consumer_config(kind, AppMode::CommitAfterProcess);
            w.add(c, AppMode::CommitAfterProcess);
        }
        for (steps, keep, delay, zombie) in ops {
            w.ack_delay_steps = delay as u32;
            for _ in 0..steps as u32 * 4 {
                w.step();
            }
            w.zombie_commit(zombie as usize, &TopicPartition::new(TOPIC, zombie as u32 % 3));
            w.failover(keep as usize);
        }
        let before = w.committed();
        w.ack_delay_steps = 0;
        w.faults = None;
        w.run(30 * S);
        for (tp, o) in before {
            prop_assert!(w.committed()[&tp] >= o || w.reset_to.contains_key(&tp));
        }
    }
}

#[derive(Clone, Debug)]
enum Raw {
    Join(u8, bool),
    Sync(u8, u8, bool),
    Heartbeat(u8, u8),
    Leave(u8),
    Commit(u8, u8, u8, u8),
    Fetch,
    Advance(u16),
    Ack,
    Fail,
    Failover,
}

fn raw() -> impl Strategy<Value = Raw> {
    prop_oneof![
        3 => (any::<u8>(), any::<bool>()).prop_map(|(m, s)| Raw::Join(m, s)),
        2 => (any::<u8>(), 0u8..4, any::<bool>()).prop_map(|(m, g, a)| Raw::Sync(m, g, a)),
        2 => (any::<u8>(), 0u8..4).prop_map(|(m, g)| Raw::Heartbeat(m, g)),
        1 => any::<u8>().prop_map(Raw::Leave),
        2 => (any::<u8>(), 0u8..4, 0u8..6, any::<u8>()).prop_map(|(m, g, p, o)| Raw::Commit(m, g, p, o)),
        1 => Just(Raw::Fetch),
        2 => (1u16..15_000).prop_map(Raw::Advance),
        2 => Just(Raw::Ack),
        1 => Just(Raw::Fail),
        1 => Just(Raw::Failover),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// Arbitrary, mostly nonsensical request sequences (unknown ids, wrong generations,
    /// conflicting assignments, failed appends, failovers): the coordinator never panics, its
    /// debug invariants hold, every request gets exactly one answer unless it is parked, and
    /// what OffsetFetch shows is always the latest *durable* commit per partition.
    #[test]
    fn coordinator_survives_arbitrary_requests(ops in prop::collection::vec(raw(), 1..60)) {
        let mut h = Harness::new();
        h.auto_ack = false;
        let mut ids: Vec<String> = vec!["ghost".into()];
        // Mostly the newest ids and the current generation, so requests often make sense.
        let pick = |ids: &Vec<String>, m: u8| {
            let k = if m < 200 { ids.len() - 1 - (m as usize % ids.len().min(4)) } else { m as usize % ids.len() };
            ids[k].clone()
        };
        for op in ops {
            let current = h.coord.group(harness::GROUP).map(|g| g.generation).unwrap_or(0);
            let generation = |g: u8| match g {
                0 | 1 => current,
                2 => current.saturating_sub(1),
                _ => current + 1,
            };
            let client = 1;
            match op {
                Raw::Join(m, fresh) => {
                    let member = if fresh { None } else { Some(pick(&ids, m)) };
                    let instance = (m % 4 == 0).then(|| format!("i{}", m % 3));
                    let c = h.send(client, harness::join(member.as_deref(), instance.as_deref()));
                    if let Some(GroupResponse::JoinGroup(r)) = h.take(c) {
                        match r {
                            Err(GroupError::MemberIdRequired(id)) => ids.push(id),
                            Ok(j) => ids.push(j.member_id),
                            Err(_) => {}
                        }
                    }
                }
                Raw::Sync(m, g, assign) => {
                    let members: Vec<String> = h
                        .coord
                        .group(harness::GROUP)
                        .map(|v| v.members.into_keys().collect())
                        .unwrap_or_default();
                    let a = if assign {
                        // Sometimes valid (one partition each), sometimes a partition twice.
                        members.iter().enumerate().map(|(i, id)| (id.clone(), MemberAssignment {
                            partitions: vec![TopicPartition::new(TOPIC, if g == 3 { 0 } else { i as u32 })],
                        })).collect()
                    } else {
                        Default::default()
                    };
                    let leader = h.coord.group(harness::GROUP).and_then(|v| v.leader);
                    let who = match (assign, leader) {
                        (true, Some(l)) => l,
                        _ => pick(&ids, m),
                    };
                    h.send(client, harness::sync(&who, generation(g), a));
                }
                Raw::Heartbeat(m, g) => {
                    let r = h.call(client, harness::heartbeat(&pick(&ids, m), generation(g)));
                    prop_assert!(matches!(r, GroupResponse::Heartbeat(_)));
                }
                Raw::Leave(m) => {
                    h.call(client, harness::leave(&pick(&ids, m)));
                }
                Raw::Commit(m, g, p, o) => {
                    h.send(client, harness::commit(&pick(&ids, m), generation(g), &[(p as u32, o as u64)]));
                }
                Raw::Fetch => {
                    // Answered now (a refusal) or once its read barrier is durable.
                    let c = h.send(client, harness::fetch_all());
                    if let Some(r) = h.take(c) {
                        prop_assert!(matches!(r, GroupResponse::OffsetFetch(_)));
                    }
                }
                Raw::Advance(ms) => h.advance(ms as u64 * MS),
                Raw::Ack => h.ack_all(),
                Raw::Fail => {
                    // Failed appends leave records in the log that never became durable:
                    // a real leader would truncate them, so drop them here too.
                    let first = h.unacked.front().map(|(_, base)| *base);
                    h.fail_appends(AppendError::Timeout);
                    if let Some(base) = first {
                        h.log.retain(|b| b.base_offset < base);
                    }
                }
                Raw::Failover => {
                    // Unacknowledged appends are lost with the old leader here.
                    let first = h.unacked.front().map(|(_, base)| *base);
                    if let Some(base) = first {
                        h.log.retain(|b| b.base_offset < base);
                    }
                    h.failover();
                }
            }
            // Durable state == what the coordinator shows (unacknowledged batches excluded).
            let durable_end = h.unacked.front().map(|(_, b)| *b).unwrap_or(u64::MAX);
            let durable: Vec<_> = h.log.iter().filter(|b| b.base_offset < durable_end).cloned().collect();
            let mut expect = std::collections::BTreeMap::new();
            for (_, r) in records::latest_per_key(&durable).unwrap() {
                if let Some(records::GroupRecord::Offset { tp, value: Some(v), .. }) = records::decode_record(&r).unwrap() {
                    expect.insert(tp, v.offset);
                }
            }
            let shown: std::collections::BTreeMap<_, _> = h
                .coord
                .group(harness::GROUP)
                .map(|g| g.offsets.into_iter().map(|(tp, o)| (tp, o.offset)).collect())
                .unwrap_or_default();
            prop_assert_eq!(shown, expect);
        }
        // Every reply went to the one client; nothing is answered twice.
        let mut seen = std::collections::BTreeSet::new();
        for (_, corr, _) in &h.replies {
            prop_assert!(seen.insert(*corr), "request {} answered twice", corr);
        }
    }
}

#[test]
fn regression_coordinator_timeout_after_cuts() {
    use Op::*;
    run_schedule(
        0,
        vec![Cut(0), Add(false), Run(24), Cut(19), Run(17)],
        14375847517842277947,
        0,
        0,
    );
}

#[test]
fn regression_zombie_rewind_after_admin_reset() {
    use Op::*;
    let ops = vec![
        Failover(0),
        Reset(3, 1),
        Crash(0),
        Add(true),
        Run(14),
        Run(35),
        Zombie(29, 3),
    ];
    run_schedule(0, ops, 10297006069411795518, 5, 25);
}

#[test]
fn regression_liveness_after_cut_failover_close() {
    use Op::*;
    let ops = vec![
        Crash(0),
        Add(false),
        Run(2),
        Cut(85),
        Failover(0),
        Add(true),
        Run(20),
        Close(29),
        Crash(7),
    ];
    run_schedule(0, ops, 4468871068002204369, 19, 0);
}

#[test]
fn regression_late_commit_answer_after_reassignment() {
    use Op::*;
    let ops = vec![
        Crash(0),
        Run(1),
        Reset(3, 0),
        Crash(0),
        Add(false),
        Run(21),
        Add(false),
        Run(2),
    ];
    run_schedule(0, ops, 6247237663804496841, 16, 0);
}
