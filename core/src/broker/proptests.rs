//! Random interleavings of messages between three brokers and the controller — with loss,
//! duplication, reordering, network partitions and crashes that lose unsynced data —
//! checked against the replication invariants after every step:
//!
//! 1. committed records (below any HW a leader announced) never change, and every later
//!    leader (higher epoch) holds them;
//! 2. any two replicas agree on every offset below both their HWs;
//! 3. a leader's HW never goes backwards within its epoch (per process incarnation);
//! 4. every acks=all acknowledged write is on every later leader, and after healing
//!    everything the cluster converges with all of them present.

use super::tests::{batch, broker_config, tp, World, MS};
use super::*;
use crate::testing::Delivery as _;
use crate::types::LeaderEpoch;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Action {
    /// Advance time, tick everything and deliver the whole queue (a calm network moment).
    Step(u8),
    Advance(u8),
    Deliver(u16),
    DeliverAll,
    Drop(u16),
    Duplicate(u16),
    Produce(NodeId, u8),
    Crash(NodeId),
    Restart(NodeId),
    Isolate(NodeId),
    Heal,
    CrashController,
    RestartController,
}

fn action() -> impl Strategy<Value = Action> {
    let node = 1..=3u32;
    prop_oneof![
        6 => (1..60u8).prop_map(Action::Step),
        3 => (1..100u8).prop_map(Action::Advance),
        6 => any::<u16>().prop_map(Action::Deliver),
        2 => Just(Action::DeliverAll),
        2 => any::<u16>().prop_map(Action::Drop),
        1 => any::<u16>().prop_map(Action::Duplicate),
        // Node 0: whichever broker currently leads.
        6 => (0..=3u32, 0..3u8).prop_map(|(n, a)| Action::Produce(n, a)),
        1 => node.clone().prop_map(Action::Crash),
        2 => node.clone().prop_map(Action::Restart),
        1 => node.prop_map(Action::Isolate),
        1 => Just(Action::Heal),
        1 => Just(Action::CrashController),
        1 => Just(Action::RestartController),
    ]
}

type Content = (LeaderEpoch, Vec<u8>);

/// offset -> (batch epoch, value) of a broker's log below `below`.
fn log_map(w: &mut World, id: NodeId, below: Offset) -> BTreeMap<Offset, Content> {
    let Some(b) = w.brokers.get_mut(&id) else {
        return BTreeMap::new();
    };
    let Some(v) = b.replica_view(&tp()) else {
        return BTreeMap::new();
    };
    let below = below.min(v.log_end_offset);
    let mut out = BTreeMap::new();
    for batch in b
        .read_records(&tp(), v.log_start_offset, below)
        .expect("read")
    {
        for (off, r) in batch.iter_offsets() {
            out.insert(
                off,
                (
                    batch.partition_leader_epoch,
                    r.value.clone().unwrap_or_default(),
                ),
            );
        }
    }
    out
}

#[derive(Default)]
struct Checker {
    /// offset -> (content, earliest leader epoch that announced it committed)
    committed: BTreeMap<Offset, (Content, LeaderEpoch)>,
    /// (node, incarnation, epoch) -> highest HW seen while leader
    leader_hw: BTreeMap<(NodeId, u64, LeaderEpoch), Offset>,
    /// acks=all acknowledged: (offset, value, acking leader epoch)
    acked: Vec<(Offset, Vec<u8>, LeaderEpoch)>,
    seen_events: usize,
    seen_inbox: usize,
}

impl Checker {
    fn check(&mut self, w: &mut World) -> Result<(), TestCaseError> {
        // Newly announced HWs: their prefix is committed.
        let events: Vec<(NodeId, BrokerEvent)> = w.events[self.seen_events..].to_vec();
        self.seen_events = w.events.len();
        for (id, e) in events {
            if let BrokerEvent::Replica(crate::replica::Event::HighWatermark {
                leader_epoch,
                high_watermark,
                ..
            }) = e
            {
                if !w.brokers.contains_key(&id) {
                    continue;
                }
                for (off, content) in log_map(w, id, high_watermark) {
                    match self.committed.get(&off) {
                        Some((c, _)) => prop_assert_eq!(
                            c,
                            &content,
                            "committed offset {} changed (announced by {} at epoch {})",
                            off,
                            id,
                            leader_epoch
                        ),
                        None => {
                            self.committed.insert(off, (content, leader_epoch));
                        }
                    }
                }
            }
        }
        // acks=all acknowledgements.
        let inbox: Vec<(u64, Message)> = w.inbox[self.seen_inbox..].to_vec();
        self.seen_inbox = w.inbox.len();
        for (_, m) in inbox {
            if let Message::ProduceResponse(ProduceResponse {
                result: Ok(ack),
                correlation,
                ..
            }) = m
            {
                if let Some(v) = w.acks_all.get(&correlation) {
                    self.acked
                        .push((ack.base_offset, v.clone(), ack.leader_epoch));
                }
            }
        }
        let ids: Vec<NodeId> = w.brokers.keys().copied().collect();
        let views: Vec<(NodeId, ReplicaView, u64)> = ids
            .iter()
            .filter_map(|&id| {
                let b = &w.brokers[&id];
                b.replica_view(&tp()).map(|v| (id, v, b.incarnation()))
            })
            .collect();
        let mut logs = BTreeMap::new();
        for (id, v, _) in &views {
            logs.insert(*id, log_map(w, *id, v.log_end_offset));
        }
        for (id, v, inc) in &views {
            let log = &logs[id];
            if v.role == ReplicaRole::Leader {
                // 3. HW monotonic within an epoch.
                let key = (*id, *inc, v.leader_epoch);
                let prev = self.leader_hw.get(&key).copied().unwrap_or(0);
                prop_assert!(
                    v.high_watermark >= prev,
                    "leader {} epoch {} HW went back {} -> {}",
                    id,
                    v.leader_epoch,
                    prev,
                    v.high_watermark
                );
                self.leader_hw.insert(key, v.high_watermark);
                // 1. Committed records are on every later leader.
                for (off, (content, epoch)) in &self.committed {
                    if *epoch <= v.leader_epoch {
                        prop_assert_eq!(
                            log.get(off),
                            Some(content),
                            "leader {} (epoch {}) lacks committed offset {}",
                            id,
                            v.leader_epoch,
                            off
                        );
                    }
                }
                // 4. So are acknowledged writes.
                for (off, value, epoch) in &self.acked {
                    if *epoch <= v.leader_epoch {
                        prop_assert_eq!(
                            log.get(off).map(|c| &c.1),
                            Some(value),
                            "leader {} (epoch {}) lacks acked offset {}",
                            id,
                            v.leader_epoch,
                            off
                        );
                    }
                }
            }
        }
        // 2. Agreement below both HWs.
        for (a, va, _) in &views {
            for (b, vb, _) in &views {
                if a >= b {
                    continue;
                }
                let below = va.high_watermark.min(vb.high_watermark);
                for off in 0..below {
                    prop_assert_eq!(
                        logs[a].get(&off),
                        logs[b].get(&off),
                        "nodes {} and {} disagree at offset {} below HW {}",
                        a,
                        b,
                        off,
                        below
                    );
                }
            }
        }
        Ok(())
    }
}

fn apply(w: &mut World, a: &Action, next_value: &mut u64, down: &mut BTreeSet<NodeId>) {
    match a {
        Action::Step(ms) => {
            w.now += *ms as Nanos * MS;
            w.tick_all();
            w.deliver_all();
        }
        Action::Advance(ms) => {
            w.now += *ms as Nanos * MS;
            w.tick_all();
        }
        Action::Deliver(k) | Action::Drop(k) | Action::Duplicate(k) if !w.net.queue.is_empty() => {
            let i = *k as usize % w.net.queue.len();
            match a {
                Action::Deliver(_) => {
                    let (f, t, m) = w.net.queue.remove(i).expect("index in range");
                    w.deliver(f, t, m);
                }
                Action::Drop(_) => {
                    w.net.queue.remove(i);
                }
                _ => {
                    let copy = w.net.queue[i].clone();
                    w.net.queue.push_back(copy);
                }
            }
        }
        Action::Deliver(_) | Action::Drop(_) | Action::Duplicate(_) => {}
        Action::DeliverAll => w.deliver_all(),
        Action::Produce(n, acks) => {
            let n = &if *n == 0 { w.leader().unwrap_or(1) } else { *n };
            if w.brokers.contains_key(n) {
                *next_value += 1;
                let value = format!("v{next_value}");
                let acks = [Acks::None, Acks::Leader, Acks::All][*acks as usize];
                let c = w.send_produce(*n, acks, batch(&value));
                if acks == Acks::All {
                    w.acks_all.insert(c, value.into_bytes());
                }
            }
        }
        Action::Crash(n) => {
            if w.brokers.contains_key(n) {
                w.crash(*n);
                down.insert(*n);
            }
        }
        Action::Restart(n) => {
            if down.remove(n) {
                w.start(*n);
            }
        }
        Action::Isolate(n) => w.isolate(Address::Node(*n)),
        Action::Heal => w.net.cut.clear(),
        Action::CrashController => {
            if w.controller().is_some() {
                w.crash_controller();
            }
        }
        Action::RestartController => {
            if w.controller().is_none() {
                w.restart_controller();
            }
        }
    }
}

/// Case count: modest by default (cargo test stays fast); `SKEIN_PROPTEST_CASES=N` for a soak.
fn cases() -> u32 {
    std::env::var("SKEIN_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(96)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn replication_invariants_hold_under_random_faults(
        min_insync in 1..=2u16,
        flush_ms in prop_oneof![3 => Just(0u64), 1 => 1..10u64],
        actions in proptest::collection::vec(action(), 1..250)
    ) {
        let config = BrokerConfig {
            flush_interval: flush_ms * MS,
            ..broker_config()
        };
        let mut w = World::new(&[1, 2, 3], config);
        w.run(100 * MS);
        w.create_topic(3, min_insync);
        let mut checker = Checker::default();
        let mut next_value = 0;
        let mut down = BTreeSet::new();
        for a in &actions {
            apply(&mut w, a, &mut next_value, &mut down);
            checker.check(&mut w)?;
        }
        // Heal everything and let the cluster settle.
        w.net.cut.clear();
        if w.controller().is_none() {
            w.restart_controller();
        }
        for n in std::mem::take(&mut down) {
            w.start(n);
        }
        let settled = w.run_until(6000 * MS, |w| {
            w.leader().is_some_and(|l| w.view(l).isr.len() == 3)
                && w.brokers.values().all(|b| {
                    b.replica_view(&tp()).is_some_and(|v| v.high_watermark == v.log_end_offset)
                })
        });
        checker.check(&mut w)?;
        prop_assert!(settled, "cluster did not converge: {:?}", w.brokers.values().map(|b| b.replica_view(&tp())).collect::<Vec<_>>());
        let l = w.leader().expect("leader");
        let final_log = log_map(&mut w, l, Offset::MAX);
        for (off, value, _) in &checker.acked {
            prop_assert_eq!(final_log.get(off).map(|c| &c.1), Some(value), "acked offset {} lost", off);
        }
        for id in [1, 2, 3] {
            prop_assert_eq!(&log_map(&mut w, id, Offset::MAX), &final_log, "node {} differs", id);
        }
        if std::env::var("SKEIN_PROPTEST_STATS").is_ok() {
            eprintln!("actions {} acked {} committed {} epoch {} t {}ms", actions.len(), checker.acked.len(), checker.committed.len(), w.view(l).leader_epoch, w.now / MS);
        }
    }
}
