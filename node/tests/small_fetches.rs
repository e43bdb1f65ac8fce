#![cfg(not(madsim))] // real sockets; the madsim flavour runs tests/ instead
//! Skein's own consumer with a byte limit below a batch's size (8 KB, batches of ~15 KB)
//! reads every record: from offset 0, where the first leader's epoch marker sits, and
//! across a leader change, which writes a new marker where the reader stands. The broker
//! says where to go on (`next_offset`) and returns a read's first batch whole (KIP-74's
//! rule), so neither a marker nor a large batch holds the reader (docs/kafka.md, "Offsets
//! and markers", for the Kafka listener's side of the same issue).

mod common;

use common::{create_durable_topic, TestCluster};
use skein_core::message::Acks;
use skein_core::types::TopicPartition;
use skein_node::client::Client;
use std::time::{Duration, Instant};

const LIMIT: usize = 8192;

async fn produce(client: &mut Client, tp: &TopicPartition, tag: &str) {
    let values = (0..5)
        .map(|i| format!("{tag}-{i}-{}", "x".repeat(3000)).into_bytes())
        .collect();
    client.produce(tp, values, Acks::All).await.unwrap();
}

/// Fetches from `at` with LIMIT until `want` values are read; returns the next offset.
async fn read(
    client: &mut Client,
    tp: &TopicPartition,
    mut at: u64,
    want: usize,
    out: &mut Vec<String>,
) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    while out.len() < want {
        assert!(
            Instant::now() < deadline,
            "stuck at {at} with {} of {want}",
            out.len()
        );
        let f = client.fetch_next(tp, at, LIMIT).await.unwrap();
        for (_, v) in f.records {
            let v = String::from_utf8(v.unwrap()).unwrap();
            out.push(v.split('-').take(2).collect::<Vec<_>>().join("-"));
        }
        at = f.next_offset;
    }
    at
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_max_bytes_reads_every_record_from_offset_0_and_across_a_leader_change() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let mut tc = TestCluster::start(3).await;
        let mut client = tc.client();
        create_durable_topic(&mut client, "s", 1).await;
        let tp = TopicPartition::new("s", 0);
        produce(&mut client, &tp, "a").await;
        produce(&mut client, &tp, "b").await;
        let mut got = Vec::new();
        let at = read(&mut client, &tp, 0, 10, &mut got).await;
        assert_eq!(at, 11, "the marker at 0, then two batches of 5");
        let leader = client.topic_metadata("s").await.unwrap()[0].leader.unwrap();
        tc.stop_broker(leader).await;
        produce(&mut client, &tp, "c").await;
        read(&mut client, &tp, at, 15, &mut got).await;
        let want: Vec<String> = ["a", "b", "c"]
            .iter()
            .flat_map(|t| (0..5).map(move |i| format!("{t}-{i}")))
            .collect();
        assert_eq!(got, want);
        tc.stop().await;
    })
    .await
    .expect("test finished within 120 s");
}
