#![cfg(not(madsim))] // real sockets and processes; the madsim flavour runs tests/ instead
//! Compression through the Kafka listener (docs/kafka.md) and Skein's own producer, with
//! real processes on loopback (`skein cluster up`, 3 brokers):
//! - kcat (librdkafka) produces with `-z gzip|snappy|lz4|zstd` and reads every record
//!   back in order; Skein's own consumer reads the same; the partition's segment files
//!   hold far fewer bytes than the records (stored compressed);
//! - `skein produce --compression CODEC` writes batches that kcat and `skein consume` read;
//! - confluent-kafka (`compression.type`, each codec) produces and consumes every record;
//! - a produce naming codec 5-7 gets UNSUPPORTED_COMPRESSION_TYPE (76) and a log line.
//!
//! kcat and confluent-kafka as in kafka_kcat.rs: skipped when missing unless
//! SKEIN_REQUIRE_KCAT=1 / SKEIN_REQUIRE_CONFLUENT=1 (`.ci/run` sets both).

mod common;

use common::up::{kcat_or_skip, kcat_run, require_confluent, run, text, RunningCluster};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const CODECS: [&str; 4] = ["gzip", "snappy", "lz4", "zstd"];

/// What these tests ask of the cluster beyond [`RunningCluster`].
trait CompressionCluster {
    fn create(&self, topic: &str);
    fn segment_bytes(&self, topic: &str) -> u64;
}

impl CompressionCluster for RunningCluster {
    fn create(&self, topic: &str) {
        self.skein_in(
            &["topic", "create", topic, "--partitions", "1", "-r", "3"],
            b"",
        );
    }

    /// Bytes in the segment files of partition `topic`-0, per copy (each replica holds
    /// the same bytes).
    fn segment_bytes(&self, topic: &str) -> u64 {
        let (mut total, mut copies) = (0, 0);
        let mut stack = vec![self.dir.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if !p.is_dir() {
                    continue;
                }
                // Partition directories are `<topic>-<partition>.<topic id>`.
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if name.starts_with(&format!("{topic}-0.")) {
                    copies += 1;
                    total += log_files_len(&p);
                } else {
                    stack.push(p);
                }
            }
        }
        assert!(
            copies > 0,
            "no {topic}-0 directory under {}",
            self.dir.display()
        );
        total / copies
    }
}

fn log_files_len(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// Waits until kcat's metadata shows `topic` with a leader.
fn wait_for_leader(kcat: &Path, b: &str, topic: &str) {
    for _ in 0..100 {
        let list = kcat_run(kcat, b, &["-L", "-t", topic, "-m", "30"], b"");
        if list.contains("with 1 partitions") && !list.contains("leader -1") {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{topic} never got a leader");
}

/// Compressible lines: a shared shape and padding.
fn lines(tag: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("{tag}-{i:06}-{}", "x".repeat(100)))
        .collect()
}

fn kcat_read_all(kcat: &Path, b: &str, topic: &str) -> Vec<String> {
    let consume = ["-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q"];
    let got = kcat_run(kcat, b, &consume, b"");
    got.lines().map(str::to_string).collect()
}

#[test]
fn kcat_and_skeins_producer_round_trip_every_codec_stored_compressed() {
    let Some(kcat) = kcat_or_skip() else {
        return;
    };
    let c = RunningCluster::up();
    let b = c.bootstrap.clone();
    let n = 3000;
    for codec in CODECS {
        // kcat's batches: compressed by librdkafka, stored as Skein batches with the codec.
        let topic = format!("k-{codec}");
        c.create(&topic);
        wait_for_leader(&kcat, &b, &topic);
        let want = lines(codec, n);
        let input = want.join("\n") + "\n";
        let produce = ["-P", "-t", &topic, "-p", "0", "-z", codec, "-X", "acks=all"];
        kcat_run(&kcat, &b, &produce, input.as_bytes());
        assert_eq!(kcat_read_all(&kcat, &b, &topic), want, "kcat -z {codec}");
        let max = n.to_string();
        let ours = c.skein_in(
            &[
                "consume",
                "--topic",
                &topic,
                "--from-beginning",
                "--max",
                &max,
            ],
            b"",
        );
        assert_eq!(
            ours.lines().collect::<Vec<_>>(),
            want,
            "skein consume {codec}"
        );
        let plain: usize = want.iter().map(|l| l.len() + 28).sum();
        let stored = c.segment_bytes(&topic);
        assert!(
            stored < plain as u64 / 4,
            "{codec}: {stored} bytes on disk for {plain} bytes of records"
        );

        // Skein's producer compressing: kcat reads the batches re-encoded with the codec.
        let topic = format!("s-{codec}");
        c.create(&topic);
        wait_for_leader(&kcat, &b, &topic);
        c.skein_in(
            &[
                "produce",
                "--topic",
                &topic,
                "--compression",
                codec,
                "--quiet",
            ],
            input.as_bytes(),
        );
        assert_eq!(
            kcat_read_all(&kcat, &b, &topic),
            want,
            "skein --compression {codec}"
        );
        assert!(
            c.segment_bytes(&topic) < plain as u64 / 4,
            "{codec} stored compressed"
        );
    }
}

#[test]
fn confluent_kafka_round_trips_every_compression_type() {
    if !require_confluent() {
        return;
    }
    let c = RunningCluster::up();
    for codec in CODECS {
        c.create(&format!("cc-{codec}"));
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/kafka/confluent_compression.py"
    );
    let n = 2000;
    let mut cmd = Command::new("python3");
    cmd.args([script, &c.bootstrap, "cc", &n.to_string()])
        .args(CODECS);
    let out = run(cmd, b"", Duration::from_secs(240));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let v: serde_json::Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    for codec in CODECS {
        let want: Vec<String> = (0..n)
            .map(|i| format!("{codec}-{i:06}-{}", "x".repeat(100)))
            .collect();
        let got = |k: &str| -> Vec<String> {
            v[codec][k]
                .as_array()
                .unwrap_or_else(|| panic!("no {codec}.{k} in {stdout}"))
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(got("acked").len(), n, "{codec}: acknowledged");
        assert_eq!(got("read"), want, "{codec}: read back in order");
    }
}

/// CRC-32C (Castagnoli), bitwise: the checksum of Kafka's v2 batches.
fn crc32c(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82f6_3b78
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// One uncompressed Kafka batch with its codec bits set to `id` (and a CRC that checks).
fn batch_with_codec(id: u8) -> Bytes {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(Bytes::from_static(b"v")),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, [&record], &options).unwrap();
    buf[22] |= id;
    let crc = crc32c(&buf[21..]);
    buf[17..21].copy_from_slice(&crc.to_be_bytes());
    buf.freeze()
}

fn produce_frame(topic: &str, records: Bytes, corr: i32) -> Vec<u8> {
    let version = 8;
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Produce as i16)
        .with_request_api_version(version)
        .with_correlation_id(corr)
        .with_client_id(Some(StrBytes::from_static_str("raw")));
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header
        .encode(&mut buf, ApiKey::Produce.request_header_version(version))
        .unwrap();
    req.encode(&mut buf, version).unwrap();
    let n = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&n.to_be_bytes());
    buf.to_vec()
}

fn produce_error(addr: &str, topic: &str, records: Bytes, corr: i32) -> i16 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(&produce_frame(topic, records, corr)).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    let mut body = Bytes::from(body);
    let version = 8;
    let header =
        ResponseHeader::decode(&mut body, ApiKey::Produce.response_header_version(version))
            .unwrap();
    assert_eq!(header.correlation_id, corr);
    let resp = ProduceResponse::decode(&mut body, version).unwrap();
    assert!(!body.has_remaining());
    resp.responses[0].partition_responses[0].error_code
}

#[test]
fn an_unknown_codec_is_unsupported_compression_type_76() {
    let c = RunningCluster::up();
    c.create("u");
    let addrs: Vec<&str> = c.bootstrap.split(',').collect();
    // Any broker decodes the records before routing them, so every listener answers so.
    for (i, id) in [5u8, 6, 7].into_iter().enumerate() {
        let code = produce_error(addrs[i % addrs.len()], "u", batch_with_codec(id), i as i32);
        assert_eq!(code, 76, "codec {id}");
    }
    // The same batch with a Kafka codec bit pattern that is valid but a payload that is
    // not compressed: damage, CORRUPT_MESSAGE (2).
    assert_eq!(produce_error(addrs[0], "u", batch_with_codec(1), 9), 2);
    let logs = c.logs();
    assert!(
        logs.contains("unsupported compression codec") && logs.contains("codec 5"),
        "no log line naming the codec"
    );
}
