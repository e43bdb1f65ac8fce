#![cfg(not(madsim))] // real sockets and processes; the madsim flavour runs tests/ instead
//! A Kafka consumer whose per-partition byte limit is smaller than a batch (8 KB here;
//! the limit is a client setting, e.g. kafkajs's `maxBytesPerPartition`) reads every
//! record: from offset 0, where the partition's leader-epoch marker sits, and across a
//! leader change, which writes a new marker (docs/kafka.md, "Offsets and markers").
//! Before the marker went out as a Kafka control batch, the listener answered such a
//! fetch with no records and no way past the marker, forever.
//!
//! The client is hand-made from `kafka-protocol` (Produce v8, Fetch v11, Metadata v8), so
//! each answer is checked as sent; kcat (librdkafka) with the same limits reads the same
//! records when it is installed (`SKEIN_REQUIRE_KCAT=1` makes it required).

mod common;

use bytes::{Bytes, BytesMut};
use common::kafka::{exchange, listeners as kafka_listeners};
use common::procs::{cluster_up, create_topic, kill9_leader, text, Cleanup};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, MetadataRequest, MetadataResponse, ProduceRequest,
    ProduceResponse, TopicName,
};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

const LIMIT: i32 = 8192;
/// Records per produced batch, and their value size: one batch is ~15 KB, above LIMIT.
const PER_BATCH: usize = 5;
const VALUE: usize = 3000;

/// The leader of t-0 (id, Kafka address) as some live broker sees it.
fn leader(listeners: &BTreeMap<i32, String>) -> Option<(i32, String)> {
    let req = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(TopicName("t".into())))
    ]));
    for addr in listeners.values() {
        let m: Option<MetadataResponse> = exchange(addr, ApiKey::Metadata, 8, &req);
        let id = m.and_then(|m| {
            let p = m.topics.first()?.partitions.first()?;
            (p.error_code == 0).then_some(p.leader_id.0)
        });
        if let Some(addr) = id.and_then(|id| listeners.get(&id)) {
            return Some((id.unwrap(), addr.clone()));
        }
    }
    None
}

/// One acks=all batch of PER_BATCH records `tag-i`, retried until a leader takes it.
fn produce(listeners: &BTreeMap<i32, String>, tag: &str) {
    let records: Vec<Record> = (0..PER_BATCH)
        .map(|i| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder keeps records in one batch only while offset - sequence stays
            // the same (node/src/kafka/records.rs): -1, 0, 1, ... make one ~15 KB batch.
            sequence: i as i32 - 1,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::from(format!("{tag}-{i}-{}", "x".repeat(VALUE)))),
            headers: Default::default(),
            delete_horizon: false,
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options).unwrap();
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName("t".into()))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(buf.freeze()))])]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Some((_, addr)) = leader(listeners) {
            let r: Option<ProduceResponse> = exchange(&addr, ApiKey::Produce, 8, &req);
            let code = r.map(|r| r.responses[0].partition_responses[0].error_code);
            if code == Some(0) {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("batch {tag} not acknowledged within 60 s");
}

/// What a Kafka client does with a fetch answer: skips control batches (moving past
/// them), keeps the records at or past its position; returns the values read and the
/// next position.
fn consume(records: Bytes, mut position: i64, out: &mut Vec<String>) -> i64 {
    let mut bytes = records;
    let sets = RecordBatchDecoder::decode_all(&mut bytes).unwrap();
    for set in sets {
        for r in set.records {
            if r.offset < position {
                continue;
            }
            position = r.offset + 1;
            if !r.control {
                let v = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default());
                out.push(v.split('-').take(2).collect::<Vec<_>>().join("-"));
            }
        }
    }
    position
}

/// Fetches t-0 from `position` with LIMIT per partition and per response until `want`
/// values are read (failing after 40 s without them); returns the next position.
fn read_until(
    listeners: &BTreeMap<i32, String>,
    mut position: i64,
    want: usize,
    out: &mut Vec<String>,
) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut answers = 0;
    while out.len() < want {
        assert!(
            Instant::now() < deadline,
            "stuck at offset {position}: {} of {want} records after {answers} answers",
            out.len()
        );
        let Some((_, addr)) = leader(listeners) else {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        };
        let req = FetchRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_max_wait_ms(100)
            .with_min_bytes(1)
            .with_max_bytes(LIMIT)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName("t".into()))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(position)
                    .with_partition_max_bytes(LIMIT)])]);
        let r: Option<FetchResponse> = exchange(&addr, ApiKey::Fetch, 11, &req);
        let Some(p) = r.map(|r| r.responses[0].partitions[0].clone()) else {
            continue;
        };
        answers += 1;
        if p.error_code != 0 {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        position = consume(p.records.unwrap_or_default(), position, out);
    }
    position
}

fn expected(tags: &[&str]) -> Vec<String> {
    tags.iter()
        .flat_map(|t| (0..PER_BATCH).map(move |i| format!("{t}-{i}")))
        .collect()
}

#[test]
fn a_small_fetch_limit_reads_every_record_from_offset_0_and_across_a_leader_change() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cleanup = Cleanup::new(&tmp.path().join("data"));
    let cf = cluster_up(&mut cleanup, &["--brokers", "3"], Duration::from_secs(60));
    create_topic(&cf, "t", Duration::from_secs(60));
    let listeners = kafka_listeners(&cf);
    produce(&listeners, "a");
    produce(&listeners, "b");
    let mut read = Vec::new();
    // Offset 0 is the first leader's marker; each data batch is above the limit.
    let position = read_until(&listeners, 0, 2 * PER_BATCH, &mut read);
    assert_eq!(read, expected(&["a", "b"]));
    assert_eq!(position, 1 + 2 * PER_BATCH as i64, "offsets start at 1");

    // A new leader writes its marker at the log end, where this reader stands.
    let (victim, _, _) = kill9_leader(&cf, &cleanup.dir);
    let victim = victim as i32;
    let deadline = Instant::now() + Duration::from_secs(60);
    while leader(&listeners).is_none_or(|(id, _)| id == victim) {
        assert!(Instant::now() < deadline, "no new leader for t-0");
        std::thread::sleep(Duration::from_millis(200));
    }
    produce(&listeners, "c");
    read_until(&listeners, position, 3 * PER_BATCH, &mut read);
    assert_eq!(read, expected(&["a", "b", "c"]));

    // librdkafka with the same limits, when installed.
    if let Some(values) = kcat_read(&listeners, victim) {
        assert_eq!(values, expected(&["a", "b", "c"]));
    }
}

/// kcat -C with 8 KB fetch limits from the beginning to the end; None (skip) without kcat
/// unless SKEIN_REQUIRE_KCAT=1.
fn kcat_read(listeners: &BTreeMap<i32, String>, dead: i32) -> Option<Vec<String>> {
    common::up::kcat_or_skip()?;
    let bootstrap: Vec<&str> = listeners
        .iter()
        .filter(|(id, _)| **id != dead)
        .map(|(_, a)| a.as_str())
        .collect();
    let mut cmd = Command::new("kcat");
    cmd.args(["-b", &bootstrap.join(","), "-C", "-t", "t", "-p", "0"])
        .args(["-o", "beginning", "-e", "-q", "-f", "%s\\n"])
        .args([
            "-X",
            "fetch.max.bytes=8192",
            "-X",
            "max.partition.fetch.bytes=8192",
        ])
        // (librdkafka wants fetch.max.bytes >= message.max.bytes.)
        .args([
            "-X",
            "message.max.bytes=8192",
            "-X",
            "receive.message.max.bytes=100000",
        ]);
    let out = common::run_with_stdin(cmd, b"", Duration::from_secs(60));
    assert!(out.status.success(), "kcat: {}", text(&out.stderr));
    let values = text(&out.stdout)
        .lines()
        .map(|l| l.split('-').take(2).collect::<Vec<_>>().join("-"))
        .collect();
    Some(values)
}
