#![cfg(not(madsim))] // real sockets; the madsim flavour runs tests/ instead
//! Log compaction on a real (in-process, loopback) cluster (issue 55, docs/compaction.md):
//! a topic created with Kafka's `cleanup.policy=compact` refuses a keyless record with
//! Kafka's message, and once the brokers' cleaners have run over its sealed segments a
//! consumer from the start sees the latest value (or tombstone) of every key at the offset
//! it was written at, in order, and no longer sees the superseded records of the first
//! segment. Small segments and a fast cleaner come from the node tuning.

mod common;

use common::TestCluster;
use skein_core::controller::TopicConfig;
use skein_core::message::{Acks, OffsetSpec};
use skein_core::types::TopicPartition;
use skein_node::client::Client;
use skein_node::config::{FsyncPolicy, Tuning};
use skein_node::topic_configs;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const KEYS: usize = 5;
const ROUNDS: usize = 6;

type Written = BTreeMap<u64, (String, Option<Vec<u8>>)>;

/// Every record of `tp` from its earliest offset up to the high watermark, in order.
async fn read_all(client: &mut Client, tp: &TopicPartition) -> BTreeMap<u64, Option<Vec<u8>>> {
    let mut at = client.list_offset(tp, OffsetSpec::Earliest).await.unwrap();
    let mut seen = BTreeMap::new();
    loop {
        let f = client.fetch_next(tp, at, 64 << 10).await.unwrap();
        for (offset, value) in f.records {
            assert!(offset >= at, "offset {offset} went backwards from {at}");
            seen.insert(offset, value);
        }
        if f.next_offset >= f.high_watermark || f.next_offset == at {
            return seen;
        }
        at = f.next_offset;
    }
}

/// Produces one record (acks=all); returns it with its offset.
async fn put(
    client: &mut Client,
    tp: &TopicPartition,
    key: &str,
    value: Option<Vec<u8>>,
) -> (u64, (String, Option<Vec<u8>>)) {
    let record = (Some(key.as_bytes().to_vec()), value.clone());
    let p = client
        .produce_records(tp, vec![record], Acks::All)
        .await
        .unwrap();
    let offset = p.base_offset.expect("acks=all returns an offset");
    (offset, (key.to_string(), value))
}

/// Keyed updates of every key in rounds, one batch each, then a tombstone of key 0 and a
/// few records of another key, so the rounds sit in sealed segments below the HW.
async fn write(client: &mut Client, tp: &TopicPartition) -> Written {
    let mut written = Written::new();
    for round in 0..ROUNDS {
        for k in 0..KEYS {
            let value = format!("k{k}=r{round} {}", "x".repeat(100)).into_bytes();
            let (o, r) = put(client, tp, &format!("k{k}"), Some(value)).await;
            written.insert(o, r);
        }
    }
    let (o, r) = put(client, tp, "k0", None).await;
    written.insert(o, r);
    for i in 0..12 {
        let value = format!("tail{i} {}", "y".repeat(100)).into_bytes();
        let (o, r) = put(client, tp, "tail", Some(value)).await;
        written.insert(o, r);
    }
    written
}

/// The offset of the latest record of every key.
fn latest(written: &Written) -> BTreeMap<&str, u64> {
    written.iter().map(|(o, (k, _))| (k.as_str(), *o)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_topic_keeps_the_latest_value_of_every_key_at_its_offset() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let tuning = Tuning {
            session_timeout_ms: Some(3000),
            heartbeat_interval_ms: Some(250),
            segment_bytes: Some(1024),
            cleaner_interval_ms: Some(50),
            ..Tuning::default()
        };
        let tc = TestCluster::start_tuned(3, FsyncPolicy::Always, tuning).await;
        let mut client = tc.client();
        let mut config = TopicConfig {
            partitions: 1,
            replication_factor: 3,
            min_insync_replicas: 2,
            ..TopicConfig::default()
        };
        for (k, v) in [
            ("cleanup.policy", "compact"),
            ("delete.retention.ms", "3600000"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ] {
            topic_configs::apply(&mut config, k, v).unwrap();
        }
        client.create_topic("changelog", config).await.unwrap();
        client.wait_topic("changelog").await.unwrap();
        let tp = TopicPartition::new("changelog", 0);

        let keyless = client
            .produce(&tp, vec![b"no key".to_vec()], Acks::All)
            .await;
        let err = keyless.expect_err("a keyless record on a compacted topic is refused");
        assert!(
            err.to_string()
                .contains("Compacted topic cannot accept message without key"),
            "{err}"
        );

        let written = write(&mut client, &tp).await;
        let latest = latest(&written);
        let first_round: Vec<u64> = written.keys().copied().take(KEYS).collect();

        // Wait for the cleaners: the first round (all superseded) disappears.
        let started = Instant::now();
        let read = loop {
            let read = read_all(&mut client, &tp).await;
            if first_round.iter().all(|o| !read.contains_key(o)) {
                break read;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the cleaner did not remove the first round: {} of {} records left",
                read.len(),
                written.len()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };

        // Offsets unchanged: every record read is the one written at that offset.
        for (offset, value) in &read {
            let (_, wrote) = written
                .get(offset)
                .unwrap_or_else(|| panic!("offset {offset} was never written"));
            assert_eq!(value, wrote, "offset {offset} changed");
        }
        // The latest record of every key is there, the tombstone of k0 included
        // (delete.retention.ms is an hour).
        for (key, offset) in &latest {
            assert!(
                read.contains_key(offset),
                "latest of {key} at {offset} lost"
            );
        }
        assert_eq!(read[&latest["k0"]], None, "k0's tombstone is kept");
        assert!(read.len() < written.len(), "nothing was compacted away");
        tc.stop().await;
    })
    .await
    .expect("test timed out");
}
