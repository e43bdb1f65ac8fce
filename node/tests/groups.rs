//! Consumer groups on a real in-process cluster: two `GroupClient`s (core's GroupConsumer
//! on real connections) share a 3-partition topic, every record is consumed once, the
//! commits show in `describe_group`, and a member that leaves hands its partitions over.
//! Also the runtime's stats snapshot over the wire.

mod common;

use common::{create_durable_topic, TestCluster};
use skein_core::client::{ConsumerConfig, ConsumerEvent, MemberPhase, OffsetReset};
use skein_core::message::Acks;
use skein_core::types::TopicPartition;
use skein_node::client::Conn;
use skein_node::group_client::GroupClient;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const MS: u64 = 1_000_000;

fn config() -> ConsumerConfig {
    let mut c = ConsumerConfig::new("workers");
    c.session_timeout = 6_000 * MS;
    c.rebalance_timeout = 6_000 * MS;
    c.heartbeat_interval = 500 * MS;
    c.request_timeout = 5_000 * MS;
    c.auto_commit_interval = None;
    c.reset = OffsetReset::Earliest;
    c
}

/// Polls `gc` for up to `wait`, committing what it returns; records (tp, offset, value).
async fn drain(
    gc: &mut GroupClient,
    seen: &mut Vec<(TopicPartition, u64, Vec<u8>)>,
    wait: Duration,
) {
    let until = tokio::time::Instant::now() + wait;
    while tokio::time::Instant::now() < until {
        let records = gc.poll(Duration::from_millis(100)).await.unwrap();
        let mut commit = BTreeMap::new();
        for r in records {
            commit.insert(r.tp.clone(), r.offset + 1);
            seen.push((r.tp, r.offset, r.value.unwrap()));
        }
        if !commit.is_empty() {
            gc.commit(commit).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_share_partitions_and_commit() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let tc = TestCluster::start(3).await;
        let mut admin = tc.client();
        create_durable_topic(&mut admin, "jobs", 3).await;
        admin.wait_topic("jobs").await.unwrap();
        let mut produced = BTreeSet::new();
        for p in 0..3 {
            let tp = TopicPartition::new("jobs", p);
            let values: Vec<Vec<u8>> = (0..40).map(|i| format!("p{p}-{i}").into_bytes()).collect();
            produced.extend(values.iter().cloned());
            admin.produce(&tp, values, Acks::All).await.unwrap();
        }

        let mut a = GroupClient::new(tc.cluster.clone(), config()).unwrap();
        let mut b = GroupClient::new(tc.cluster.clone(), config()).unwrap();
        a.subscribe(&["jobs"]).await;
        b.subscribe(&["jobs"]).await;
        let mut seen = Vec::new();
        // Both must reach a stable generation with every partition owned by one of them.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            drain(&mut a, &mut seen, Duration::from_millis(200)).await;
            drain(&mut b, &mut seen, Duration::from_millis(200)).await;
            let stable = |g: &GroupClient| g.consumer().phase() == &MemberPhase::Stable;
            let (pa, pb) = (a.consumer().assignment(), b.consumer().assignment());
            if stable(&a)
                && stable(&b)
                && a.consumer().generation() == b.consumer().generation()
                && pa.len() + pb.len() == 3
                && !pa.is_empty()
                && !pb.is_empty()
                && seen.len() >= produced.len()
            {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no stable split: {pa:?} {pb:?}, {} seen",
                seen.len()
            );
        }
        let pa: BTreeSet<_> = a.consumer().assignment().into_iter().collect();
        let pb: BTreeSet<_> = b.consumer().assignment().into_iter().collect();
        assert!(pa.is_disjoint(&pb), "{pa:?} {pb:?}");
        let values: BTreeSet<Vec<u8>> = seen.iter().map(|(_, _, v)| v.clone()).collect();
        assert_eq!(values, produced, "every record consumed");
        // Within a generation a record is consumed by one member; across the first
        // rebalance a partition may be read again from its committed offset, never skipped.
        let mut by_tp: BTreeMap<TopicPartition, Vec<u64>> = BTreeMap::new();
        for (tp, o, _) in &seen {
            by_tp.entry(tp.clone()).or_default().push(*o);
        }
        // Commits are acknowledged; then the coordinator's description shows them.
        for g in [&mut a, &mut b] {
            g.run_until(Duration::from_secs(10), |_, events| {
                events
                    .iter()
                    .filter(|e| matches!(e, ConsumerEvent::CommitCompleted { result: Ok(_), .. }))
                    .count()
                    > 0
            })
            .await;
        }
        let (_, d) = admin.describe_group("workers").await.unwrap();
        assert_eq!(d.state, "Stable");
        assert_eq!(Some(d.generation), a.consumer().generation());
        assert_eq!(d.members.len(), 2);
        let described: BTreeSet<TopicPartition> = d
            .members
            .iter()
            .flat_map(|m| m.assignment.clone())
            .collect();
        assert_eq!(described, pa.union(&pb).cloned().collect());
        let ends: BTreeMap<TopicPartition, u64> = by_tp
            .iter()
            .map(|(tp, os)| (tp.clone(), os.iter().max().unwrap() + 1))
            .collect();
        let committed: BTreeMap<TopicPartition, u64> = d
            .offsets
            .iter()
            .map(|(tp, o)| (tp.clone(), o.offset))
            .collect();
        assert_eq!(
            committed, ends,
            "the last printed position of each partition is committed"
        );

        // b leaves: a takes every partition over and continues from the commits.
        b.close().await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while a.consumer().assignment().len() != 3 {
            drain(&mut a, &mut seen, Duration::from_millis(200)).await;
            assert!(
                tokio::time::Instant::now() < deadline,
                "a never got all partitions"
            );
        }
        let before = seen.len();
        drain(&mut a, &mut seen, Duration::from_millis(500)).await;
        assert_eq!(seen.len(), before, "nothing committed is read again");

        // The stats snapshot of a broker names its partitions and counts group requests.
        let (_, addr) = tc.cluster.brokers[0];
        let mut conn = Conn::connect(addr, skein_node::frame::DEFAULT_MAX_FRAME)
            .await
            .unwrap();
        let s = conn.stats(Duration::from_secs(5)).await.unwrap();
        assert_eq!(s.node, Some(1));
        assert!(s.partitions.iter().any(|p| p.tp.topic == "jobs"));
        let fetches = s
            .requests
            .iter()
            .find(|r| r.kind == "Fetch")
            .expect("follower fetches");
        assert!(fetches.count > 0 && fetches.answered > 0 && fetches.p50_us > 0);
        a.close().await;
        tc.stop().await;
    })
    .await
    .expect("test finished within 120 s");
}
