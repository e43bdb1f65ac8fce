//! Property tests over random schedules of the small world: consumers joining, crashing,
//! closing, being cut off and healed, coordinator failovers with some unacknowledged appends
//! surviving, slow appends, and explicit resets. `World::check` asserts after every message
//! that no partition has two owners, that committed offsets never go backwards except by an
//! explicit reset, and that every acknowledged commit stays visible; at the end, once healed,
//! every record has been processed at least once.

use super::harness::S;
use super::world::*;
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
    ]
}

fn assignor(a: u8) -> AssignorKind {
    [
        AssignorKind::Range,
        AssignorKind::RoundRobin,
        AssignorKind::CooperativeSticky,
    ][a as usize % 3]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_schedules_keep_group_invariants(kind in 0u8..3, ops in prop::collection::vec(op(), 1..25)) {
        let mut w = World::new(4, 30);
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
                    let mode = if m { AppMode::Auto } else { AppMode::CommitAfterProcess };
                    let c = w.consumer_config(kind, mode);
                    w.add(c, mode);
                }
                Op::Add(_) => {}
                Op::Crash(i) => w.crash(i as usize % n),
                Op::Close(i) => w.close(i as usize % n),
                Op::Cut(i) => w.cut[i as usize % n] = true,
                Op::Heal(i) => w.cut[i as usize % n] = false,
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
        for c in w.cut.iter_mut() {
            *c = false;
        }
        w.ack_delay_steps = 0;
        let live = w.consumers.iter().any(|c| c.as_ref().is_some_and(|c| !matches!(c.phase(), MemberPhase::Closed | MemberPhase::Failed(_))));
        if !live {
            let c = w.consumer_config(kind, AppMode::Auto);
            w.add(c, AppMode::Auto);
        }
        w.run(60 * S);
        prop_assert!(w.all_processed(), "processed {:?}", w.processed.iter().map(|(t, s)| (t.to_string(), s.len())).collect::<Vec<_>>());
        prop_assert!(w.stable_generation().is_some());
        // Finally every identity ever held replays a commit: only current ones get through.
        for z in 0..w.identities.len() {
            w.zombie_commit(z, &TopicPartition::new(TOPIC, (z % 4) as u32));
        }
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
    ) {
        let kind = assignor(kind);
        let mut w = World::new(3, 400);
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
        w.run(30 * S);
        for (tp, o) in before {
            prop_assert!(w.committed()[&tp] >= o || w.reset_to.contains_key(&tp));
        }
    }
}
