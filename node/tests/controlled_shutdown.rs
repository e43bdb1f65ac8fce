//! Controlled shutdown: a leader told to stop (the SIGTERM path) hands its leadership to
//! another ISR member before it exits, while a producer keeps writing with acks=all; every
//! acknowledged record survives. Sessions are long (60 s), so a leadership seen moved right
//! after the stop returns can only have been handed over, not taken by a session timeout.

mod common;

use common::{create_durable_topic, produce_values, read_through, TestCluster};
use skein_core::message::Acks;
use skein_core::types::TopicPartition;
use skein_node::config::{FsyncPolicy, Tuning};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_hands_over_before_exit_and_no_acked_record_is_lost() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let tuning = Tuning {
            session_timeout_ms: Some(60_000),
            heartbeat_interval_ms: Some(250),
            replica_lag_time_max_ms: None,
            ..Tuning::default()
        };
        let mut tc = TestCluster::start_tuned(3, FsyncPolicy::Always, tuning).await;
        let mut admin = tc.client();
        create_durable_topic(&mut admin, "cs", 2).await;
        let parts = admin.wait_topic("cs").await.unwrap();
        let tp = TopicPartition::new("cs", 0);
        // Wait until the partition has a leader and its full ISR.
        let leader = loop {
            let parts = admin.topic_metadata("cs").await.unwrap();
            let p = parts.iter().find(|p| p.tp == tp).unwrap();
            if let (Some(l), 3) = (p.leader, p.isr.len()) {
                break l;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(parts.len(), 2);

        // A producer writing acks=all (idempotent) batches all along.
        let stop = Arc::new(AtomicBool::new(false));
        let mut producer = tc.client();
        producer.enable_idempotence().await.unwrap();
        let task = {
            let stop = stop.clone();
            let tp = tp.clone();
            tokio::spawn(async move {
                let mut acked: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
                let mut round = 0;
                while !stop.load(Ordering::Relaxed) || round < 10 {
                    let values: Vec<Vec<u8>> = (0..20)
                        .map(|i| format!("cs{round}-{i}").into_bytes())
                        .collect();
                    // acks=all produce succeeds across the hand-over.
                    acked.extend(produce_values(&mut producer, &tp, values, Acks::All).await);
                    round += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                acked
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        tc.stop_broker(leader).await;

        // Right after the stop returned, the controller already shows the hand-over: the
        // stopped broker leads nothing it shared and is in no ISR.
        let image = admin.cluster_image().await.unwrap();
        for p in 0..2 {
            let state = image.partition(&TopicPartition::new("cs", p)).unwrap();
            assert_ne!(
                state.leader,
                Some(leader),
                "cs-{p} still led by the stopped broker"
            );
            assert!(state.leader.is_some(), "cs-{p} has a leader");
            assert!(!state.isr.contains(&leader), "cs-{p}: ISR {:?}", state.isr);
        }
        assert!(
            image.is_unfenced(leader),
            "not fenced by a session timeout: the move was the controlled shutdown"
        );

        tokio::time::sleep(Duration::from_millis(300)).await;
        stop.store(true, Ordering::Relaxed);
        let acked = task.await.unwrap();
        assert!(acked.len() >= 200);

        // Every acknowledged record is readable at its offset, none twice.
        let mut reader = tc.client();
        let last = *acked.keys().last().unwrap();
        let seen = read_through(&mut reader, &tp, last).await;
        for (offset, value) in &acked {
            assert_eq!(seen.get(offset), Some(value), "acked record at {offset}");
        }
        let mut values: Vec<&Vec<u8>> = seen.values().collect();
        values.sort();
        values.dedup();
        assert_eq!(values.len(), seen.len(), "no record written twice");

        // Restarted, the broker is eligible again and rejoins the ISR.
        tc.restart_broker(leader).await;
        tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let parts = admin.topic_metadata("cs").await.unwrap();
                if parts.iter().all(|p| p.isr.contains(&leader)) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .expect("restarted broker rejoins the ISRs");
        tc.stop().await;
    })
    .await
    .expect("test finished within 120 s");
}
