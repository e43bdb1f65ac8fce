#![cfg(not(madsim))] // real sockets and processes; the madsim flavour runs tests/ instead
//! The leader stops (graceful shutdown) while a producer keeps writing with acks=all: the
//! client follows the new leader through metadata, the broker comes back and catches up,
//! and every acknowledged record is there at its acknowledged offset.

mod common;

use common::{create_durable_topic, produce_values, read_through, TestCluster};
use skein_core::message::Acks;
use skein_core::types::TopicPartition;
use std::collections::BTreeMap;
use std::time::Duration;

/// One acks=all batch of 50; returns (offset, value) of each record.
async fn produce(
    client: &mut skein_node::client::Client,
    tp: &TopicPartition,
    round: usize,
) -> Vec<(u64, Vec<u8>)> {
    let values: Vec<Vec<u8>> = (0..50)
        .map(|i| format!("r{round}-{i}").into_bytes())
        .collect();
    produce_values(client, tp, values, Acks::All).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_follows_leader_change_and_no_acked_record_is_lost() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let mut tc = TestCluster::start(3).await;
        let mut client = tc.client();
        create_durable_topic(&mut client, "f", 1).await;
        client.enable_idempotence().await.unwrap();
        let tp = TopicPartition::new("f", 0);
        let mut acked: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        for round in 0..4 {
            acked.extend(produce(&mut client, &tp, round).await);
        }
        let leader = client.topic_metadata("f").await.unwrap()[0].leader.unwrap();
        tc.stop_broker(leader).await;
        // The stopping leader hands its leadership to another ISR member (controlled
        // shutdown); the producer follows it through metadata.
        for round in 4..8 {
            acked.extend(produce(&mut client, &tp, round).await);
        }
        let new_leader = client.topic_metadata("f").await.unwrap()[0].leader.unwrap();
        assert_ne!(new_leader, leader, "leadership moved");
        tc.restart_broker(leader).await;
        for round in 8..10 {
            acked.extend(produce(&mut client, &tp, round).await);
        }
        assert_eq!(acked.len(), 500);

        // The restarted broker rejoins the ISR.
        let rejoined = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let parts = client.topic_metadata("f").await.unwrap();
                if parts[0].isr.contains(&leader) {
                    return parts[0].clone();
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .expect("restarted broker rejoins the ISR");
        assert_eq!(rejoined.isr.len(), 3);

        // Every acknowledged record is readable at its offset with its value.
        let last = *acked.keys().last().unwrap();
        let seen = read_through(&mut client, &tp, last).await;
        for (offset, value) in &acked {
            assert_eq!(
                seen.get(offset),
                Some(value),
                "acked record at {offset} lost or changed"
            );
        }
        tc.stop().await;
    })
    .await
    .expect("test finished within 120 s");
}
