//! End to end on loopback: controller + 3 brokers in process, RF 3, acks=all.

mod common;

use common::TestCluster;
use skein_core::controller::TopicConfig;
use skein_core::message::{Acks, OffsetSpec};
use skein_core::types::TopicPartition;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_and_consume_1000_records_rf3_acks_all() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let tc = TestCluster::start(3).await;
        let mut client = tc.client();
        let config = TopicConfig {
            partitions: 1,
            replication_factor: 3,
            min_insync_replicas: 2,
            ..TopicConfig::default()
        };
        client.create_topic("events", config).await.unwrap();
        // The topic reaches the brokers with their next heartbeat; produce retries until then.
        let tp = TopicPartition::new("events", 0);
        let mut acked = Vec::new(); // (offset, value)
        for batch in 0..10 {
            let values: Vec<Vec<u8>> = (0..100)
                .map(|i| format!("record-{}", batch * 100 + i).into_bytes())
                .collect();
            let p = client
                .produce(&tp, values.clone(), Acks::All)
                .await
                .unwrap();
            let base = p.base_offset.expect("acks=all returns an offset");
            acked.extend(
                values
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| (base + i as u64, v)),
            );
        }
        assert_eq!(acked.len(), 1000);
        for w in acked.windows(2) {
            assert!(
                w[1].0 == w[0].0 + 1,
                "offsets not contiguous: {} then {}",
                w[0].0,
                w[1].0
            );
        }
        // Every replica is in the ISR and the partition has a leader.
        let parts = client.topic_metadata("events").await.unwrap();
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].replicas.len(), 3);
        assert!(parts[0].leader.is_some());

        // Consume everything from the earliest offset.
        let mut at = client.list_offset(&tp, OffsetSpec::Earliest).await.unwrap();
        let hw = client.list_offset(&tp, OffsetSpec::Latest).await.unwrap();
        assert!(
            hw > acked.last().unwrap().0,
            "high watermark {hw} covers every acked record"
        );
        let mut consumed = Vec::new();
        while consumed.len() < acked.len() {
            let (records, _) = client.fetch(&tp, at, 64 << 10).await.unwrap();
            if records.is_empty() {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            for (offset, value) in records {
                assert!(offset >= at, "offset {offset} went backwards from {at}");
                at = offset + 1;
                consumed.push((offset, value.expect("records carry values")));
            }
        }
        assert_eq!(
            consumed, acked,
            "consumed exactly the acknowledged records, in order"
        );
        tc.stop().await;
    })
    .await
    .expect("test finished within 120 s");
}
