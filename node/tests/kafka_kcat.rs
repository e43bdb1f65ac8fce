#![cfg(not(madsim))] // real sockets and processes; the madsim flavour runs tests/ instead
//! The Kafka listener (node/src/kafka, docs/kafka.md) with real processes on loopback:
//! `skein cluster up` (controller + 3 brokers, each with a Kafka port), then
//! - raw frames: a bad size, an unknown api key, a truncated and a garbled body each close
//!   only their own connection (with the reason in the broker's log) while ApiVersions,
//!   CreateTopics and Metadata keep working on fresh connections;
//! - kcat (librdkafka): `-L` lists the 3 brokers and the topic, `-P` writes 10,000 records
//!   (acks=all) and `-C -e` reads all of them back in order; Skein's own consumer reads the
//!   same records; a keyed produce over 3 partitions comes back per key in order.
//! - consumer groups: `kcat -G` reads everything and commits the ends; a confluent-kafka
//!   group of two (eager and cooperative-sticky) shares the partitions, rebalances when
//!   one closes, and commits every record exactly once between them.
//!
//! kcat comes from Debian (`apt-get install kcat`; `.ci/run` installs it and sets
//! `SKEIN_REQUIRE_KCAT=1`, which turns a missing kcat into a failure instead of a skip).

mod common;

use common::up::{kcat_or_skip, kcat_run, require_confluent, run, skein, text, RunningCluster};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    MetadataRequest, MetadataResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const RECORDS: usize = 10_000;

// ---------------------------------------------------------------------------------------
// Raw frames
// ---------------------------------------------------------------------------------------

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

fn request<M: Encodable>(api: ApiKey, version: i16, corr: i32, body: &M) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(corr)
        .with_client_id(Some(StrBytes::from_static_str("raw")));
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header
        .encode(&mut buf, api.request_header_version(version))
        .unwrap();
    body.encode(&mut buf, version).unwrap();
    let n = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&n.to_be_bytes());
    buf.to_vec()
}

/// Sends `frame` and reads one response body (after checking its correlation id).
fn exchange<R: Decodable>(s: &mut TcpStream, api: ApiKey, version: i16, frame: &[u8]) -> R {
    s.write_all(frame).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    let mut body = Bytes::from(body);
    let header = ResponseHeader::decode(&mut body, api.response_header_version(version)).unwrap();
    let corr = i32::from_be_bytes(frame[8..12].try_into().unwrap());
    assert_eq!(header.correlation_id, corr);
    let resp = R::decode(&mut body, version).unwrap();
    assert!(!body.has_remaining(), "{api:?} v{version}: trailing bytes");
    resp
}

/// True when the broker closed the connection (EOF) after `bytes`.
fn closed_after(addr: &str, bytes: &[u8], half_close: bool) -> bool {
    let mut s = connect(addr);
    s.write_all(bytes).unwrap();
    if half_close {
        s.shutdown(std::net::Shutdown::Write).unwrap();
    }
    let mut buf = [0u8; 64];
    matches!(s.read(&mut buf), Ok(0))
}

#[test]
fn bad_frames_close_only_their_connection() {
    let c = RunningCluster::up();
    let addr = c.kafka_addrs()[0].clone();
    let versions = request(ApiKey::ApiVersions, 0, 1, &ApiVersionsRequest::default());

    // A negative size, an oversized one, an unknown api key, a truncated body (the client
    // half-closes mid-frame), a garbled body (Metadata v1 whose topic count is i32::MAX).
    let mut unknown = versions.clone();
    unknown[4..6].copy_from_slice(&999i16.to_be_bytes());
    let mut garbled = request(ApiKey::Metadata, 1, 2, &MetadataRequest::default());
    let n = garbled.len();
    garbled[n - 4..].copy_from_slice(&i32::MAX.to_be_bytes());
    let mut truncated = request(ApiKey::Metadata, 1, 3, &MetadataRequest::default());
    truncated[..4].copy_from_slice(&100i32.to_be_bytes());
    for (what, frame, half) in [
        ("negative size", (-5i32).to_be_bytes().to_vec(), false),
        ("oversized", (i32::MAX).to_be_bytes().to_vec(), false),
        ("unknown api key", unknown, false),
        ("truncated body", truncated, true),
        ("garbled body", garbled, false),
    ] {
        assert!(closed_after(&addr, &frame, half), "{what}: still open");
    }
    let logs = c.logs();
    for reason in [
        "frame size -5 is negative",
        "exceeds the limit",
        "unknown api key 999",
        "connection closed in the middle of a frame",
        "array count 2147483647",
    ] {
        assert!(logs.contains(reason), "no {reason:?} in the broker logs");
    }

    // The broker still serves: ApiVersions (v0 and v3), CreateTopics, Metadata.
    let mut s = connect(&addr);
    let v: ApiVersionsResponse = exchange(&mut s, ApiKey::ApiVersions, 0, &versions);
    assert_eq!(v.error_code, 0);
    let produce = v
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::Produce as i16);
    // Announced from v0 (librdkafka's compression check), served from v3 (versions.rs).
    assert_eq!(
        produce.map(|k| (k.min_version, k.max_version)),
        Some((0, 8))
    );
    let v3 = request(ApiKey::ApiVersions, 3, 4, &ApiVersionsRequest::default());
    let v: ApiVersionsResponse = exchange(&mut s, ApiKey::ApiVersions, 3, &v3);
    // 20 before transactions, and the four transaction APIs (versions.rs).
    assert_eq!(v.api_keys.len(), 24);

    let topic = TopicName(StrBytes::from_static_str("made-by-kafka"));
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic.clone())
            .with_num_partitions(3)
            .with_replication_factor(2)]);
    let frame = request(ApiKey::CreateTopics, 4, 5, &create);
    let r: CreateTopicsResponse = exchange(&mut s, ApiKey::CreateTopics, 4, &frame);
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
    let r: CreateTopicsResponse = exchange(&mut s, ApiKey::CreateTopics, 4, &frame);
    assert_eq!(
        r.topics[0].error_code, 36,
        "second create: TOPIC_ALREADY_EXISTS"
    );

    let meta = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(topic)),
        MetadataRequestTopic::default().with_name(Some(TopicName("nope".into()))),
    ]));
    let frame = request(ApiKey::Metadata, 8, 6, &meta);
    // CreateTopics answered once every broker served the topic: no broker lags now.
    for other in c.kafka_addrs() {
        let mut o = connect(&other);
        let m: MetadataResponse = exchange(&mut o, ApiKey::Metadata, 8, &frame);
        let led = m
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .filter(|p| p.leader_id.0 > 0)
            .count();
        assert_eq!(led, 3, "{other} right after CreateTopics: {m:?}");
    }
    let m: MetadataResponse = exchange(&mut s, ApiKey::Metadata, 8, &frame);
    assert_eq!(m.brokers.len(), 3);
    let made = m
        .topics
        .iter()
        .find(|t| t.error_code == 0)
        .expect("created topic");
    assert_eq!(made.partitions.len(), 3);
    assert!(made.partitions.iter().all(|p| p.replica_nodes.len() == 2));
    let nope = m
        .topics
        .iter()
        .find(|t| t.error_code != 0)
        .expect("unknown topic");
    assert_eq!(nope.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
}

// ---------------------------------------------------------------------------------------
// kcat
// ---------------------------------------------------------------------------------------

#[test]
fn kcat_lists_produces_and_consumes_10k_records() {
    let Some(kcat) = kcat_or_skip() else {
        return;
    };
    let c = RunningCluster::up();
    let b = c.bootstrap.clone();
    c.skein(&[
        "topic",
        "create",
        "t",
        "--partitions",
        "1",
        "-r",
        "3",
        "--min-insync-replicas",
        "2",
    ]);
    c.skein(&["topic", "create", "keyed", "--partitions", "3", "-r", "3"]);

    // The brokers learn of new topics from the controller within a heartbeat or so.
    let mut list = String::new();
    for _ in 0..100 {
        list = kcat_run(&kcat, &b, &["-L", "-m", "30"], b"");
        if list.contains("with 3 partitions")
            && list.contains("with 1 partitions")
            && !list.contains("leader -1")
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(list.contains(" 3 brokers:"), "{list}");
    for addr in c.kafka_addrs() {
        assert!(list.contains(&format!("at {addr}")), "{addr} not in {list}");
    }
    assert!(list.contains("topic \"t\" with 1 partitions"), "{list}");
    assert!(list.contains("topic \"keyed\" with 3 partitions"), "{list}");
    assert!(
        list.contains("replicas: ") && list.contains("isrs: "),
        "{list}"
    );

    let lines: Vec<String> = (0..RECORDS).map(|i| format!("record-{i}")).collect();
    let input = lines.join("\n") + "\n";
    let produce = ["-P", "-t", "t", "-p", "0", "-X", "acks=all"];
    kcat_run(&kcat, &b, &produce, input.as_bytes());
    let consume = ["-C", "-t", "t", "-p", "0", "-o", "beginning", "-e", "-q"];
    let got = kcat_run(&kcat, &b, &consume, b"");
    let got: Vec<&str> = got.lines().collect();
    assert_eq!(got.len(), RECORDS, "kcat read {} records", got.len());
    assert!(got.iter().zip(&lines).all(|(g, l)| g == l), "out of order");

    // What kcat wrote is what Skein's own consumer reads.
    let n = RECORDS.to_string();
    let skein_read = c.skein(&["consume", "--topic", "t", "--from-beginning", "--max", &n]);
    assert_eq!(skein_read.lines().collect::<Vec<_>>(), got);

    // The last 5 by offset (ListOffsets latest), with key/offset formatting.
    let tail = kcat_run(
        &kcat,
        &b,
        &["-C", "-t", "t", "-o", "-5", "-e", "-q", "-f", "%o %s\n"],
        b"",
    );
    let tail: Vec<&str> = tail.lines().collect();
    assert_eq!(tail.len(), 5, "{tail:?}");
    assert!(
        tail[4].ends_with(&format!("record-{}", RECORDS - 1)),
        "{tail:?}"
    );

    // Keyed records over 3 partitions (three leaders): per key, in order.
    let keyed: String = (0..3000).map(|i| format!("k{}:{i}\n", i % 7)).collect();
    kcat_run(
        &kcat,
        &b,
        &["-P", "-t", "keyed", "-K", ":", "-X", "acks=all"],
        keyed.as_bytes(),
    );
    let out = kcat_run(
        &kcat,
        &b,
        &[
            "-C",
            "-t",
            "keyed",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%k %s\n",
        ],
        b"",
    );
    let mut per_key: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for line in out.lines() {
        let (k, v) = line.split_once(' ').unwrap();
        per_key
            .entry(k.to_string())
            .or_default()
            .push(v.parse().unwrap());
    }
    assert_eq!(per_key.len(), 7);
    assert_eq!(per_key.values().map(Vec::len).sum::<usize>(), 3000);
    for (k, vs) in &per_key {
        assert!(vs.windows(2).all(|w| w[0] < w[1]), "{k} out of order");
    }
}

/// Waits until every partition of `topic` has a leader in kcat's view.
fn wait_for_leaders(kcat: &Path, b: &str, topic: &str, partitions: usize) {
    for _ in 0..100 {
        let list = kcat_run(kcat, b, &["-L", "-t", topic, "-m", "30"], b"");
        if list.contains(&format!("with {partitions} partitions")) && !list.contains("leader -1") {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{topic} has no leaders");
}

/// The committed offset of every partition of `group` per `skein group describe`.
fn committed(c: &RunningCluster, group: &str, topic: &str) -> BTreeMap<String, (u64, u64)> {
    let out = c.skein(&["group", "describe", group]);
    out.lines()
        .filter(|l| l.starts_with(&format!("{topic}-")))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let num = |s: &str| {
                s.trim_end_matches('*')
                    .parse()
                    .unwrap_or_else(|_| panic!("{l}"))
            };
            (f[0].to_string(), (num(f[1]), num(f[2])))
        })
        .collect()
}

/// `kcat -G` (librdkafka's balanced consumer: FindCoordinator, JoinGroup, SyncGroup,
/// Heartbeat, OffsetFetch, OffsetCommit, LeaveGroup) reads every record of a 3-partition
/// topic and commits the end of each partition; a second run of the same group reads only
/// what was written after.
#[test]
fn kcat_balanced_consumer_group_reads_everything_and_commits() {
    let Some(kcat) = kcat_or_skip() else {
        return;
    };
    let c = RunningCluster::up();
    let b = c.bootstrap.clone();
    let made = c.skein(&["topic", "create", "grp", "--partitions", "3", "-r", "3"]);
    assert!(made.contains("by broker(s) 1,2,3"), "{made}");
    // Each broker on its own: librdkafka drops the topic, and fails the records it holds
    // for it, if any broker it asks has not heard of the topic yet.
    for addr in c.kafka_addrs() {
        wait_for_leaders(&kcat, &addr, "grp", 3);
    }
    let first: String = (0..3000).map(|i| format!("k{}:{i}\n", i % 7)).collect();
    let produce = ["-P", "-t", "grp", "-K", ":", "-X", "acks=all"];
    kcat_run(&kcat, &b, &produce, first.as_bytes());

    // No `-o`: with -G, kcat would seek every assigned partition there, committed or not.
    let group = [
        "-G",
        "kg",
        "grp",
        "-X",
        "auto.offset.reset=earliest",
        "-e",
        "-q",
        "-f",
        "%s\n",
    ];
    let read = |kcat: &Path| -> Vec<u32> {
        let out = kcat_run(kcat, &b, &group, b"");
        let mut v: Vec<u32> = out.lines().map(|l| l.parse().unwrap()).collect();
        v.sort_unstable();
        v
    };
    let got = read(&kcat);
    assert!(
        got == (0..3000).collect::<Vec<_>>(),
        "first run read {} records",
        got.len()
    );
    let offsets = committed(&c, "kg", "grp");
    assert_eq!(offsets.len(), 3, "{offsets:?}");
    assert!(
        offsets.values().all(|(done, end)| done == end && *end > 0),
        "committed != end: {offsets:?}"
    );

    let second: String = (3000..3500).map(|i| format!("k{}:{i}\n", i % 7)).collect();
    kcat_run(&kcat, &b, &produce, second.as_bytes());
    let got = read(&kcat);
    let (lo, hi) = (got.first(), got.last());
    assert!(
        got == (3000..3500).collect::<Vec<_>>(),
        "second run read {} records, {lo:?}..{hi:?}",
        got.len()
    );
    let offsets = committed(&c, "kg", "grp");
    assert!(
        offsets.values().all(|(done, end)| done == end),
        "{offsets:?}"
    );
}

// ---------------------------------------------------------------------------------------
// confluent-kafka (Python, librdkafka)
// ---------------------------------------------------------------------------------------

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/kafka/confluent_idempotent.py"
);

/// A cluster with topic `idem`: 2 partitions, RF 3, min.insync.replicas 2.
fn idem_cluster() -> RunningCluster {
    let c = RunningCluster::up();
    c.skein(&[
        "topic",
        "create",
        "idem",
        "--partitions",
        "2",
        "-r",
        "3",
        "--min-insync-replicas",
        "2",
    ]);
    c
}

/// Checks the script's JSON: `n` records acknowledged, and read back exactly the
/// acknowledged (partition, offset, value) set (no loss, no duplicate), offsets increasing
/// per partition, each key on one partition in produce order.
fn check_idempotent_run(stdout: &str, n: usize) {
    let v: serde_json::Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let rows = |k: &str| -> Vec<(u64, u64, String)> {
        v[k].as_array()
            .unwrap_or_else(|| panic!("no {k} in {v}"))
            .iter()
            .map(|r| {
                (
                    r[0].as_u64().unwrap(),
                    r[1].as_u64().unwrap(),
                    r[2].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let (mut acked, read) = (rows("acked"), rows("read"));
    assert_eq!(acked.len(), n, "acknowledged");
    acked.sort();
    let mut sorted = read.clone();
    sorted.sort();
    assert_eq!(sorted.len(), read.len());
    assert_eq!(sorted, acked, "read back != acknowledged");
    for p in 0..2 {
        let offs: Vec<u64> = read.iter().filter(|r| r.0 == p).map(|r| r.1).collect();
        assert!(
            offs.windows(2).all(|w| w[0] < w[1]),
            "partition {p} out of order"
        );
    }
    let mut per_key: BTreeMap<u64, (u64, Vec<u64>)> = BTreeMap::new();
    for (p, _, val) in &read {
        let i: u64 = val[1..].parse().unwrap();
        let e = per_key.entry(i % 10).or_insert((*p, Vec::new()));
        assert_eq!(e.0, *p, "key k{} on two partitions", i % 10);
        e.1.push(i);
    }
    for (k, (_, is)) in per_key {
        assert!(is.windows(2).all(|w| w[0] < w[1]), "key k{k} out of order");
    }
}

/// Runs `skein check` on the history the script wrote (SKEIN_HISTORY): the clients' own
/// record of what was acknowledged and read must pass the same checker as a simulated run.
fn check_history(path: &Path) {
    let out = skein().arg("check").arg(path).output().unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "skein check {}: {stdout}\n{}",
        path.display(),
        text(&out.stderr)
    );
    assert!(stdout.starts_with("VALID"), "{stdout}");
}

#[test]
fn confluent_kafka_idempotent_producer_and_assigned_consumer() {
    if !require_confluent() {
        return;
    }
    let c = idem_cluster();
    let n = 3000;
    let history = c.dir.join("history.jsonl");
    let mut cmd = Command::new("python3");
    cmd.args([SCRIPT, &c.bootstrap, "idem", &n.to_string()])
        .env("SKEIN_HISTORY", &history);
    let out = run(cmd, b"", Duration::from_secs(180));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    check_idempotent_run(&stdout, n);
    check_history(&history);
}

/// The leader of idem-0 per `skein topic describe`.
fn leader_of_idem_0(c: &RunningCluster) -> u32 {
    let out = c.skein(&["topic", "describe", "idem"]);
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("idem-0\t"))
        .unwrap_or_else(|| panic!("no idem-0 in {out}"));
    let leader = line.split('\t').find_map(|f| f.strip_prefix("leader="));
    leader
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("{line}"))
}

#[test]
fn confluent_kafka_idempotent_producer_survives_leader_kill9() {
    use std::io::{BufRead, BufReader};
    if !require_confluent() {
        return;
    }
    let c = idem_cluster();
    let n = 6000;
    let history = c.dir.join("history.jsonl");
    let mut child = Command::new("python3")
        .args([SCRIPT, &c.bootstrap, "idem", &n.to_string(), "pause"])
        .env("SKEIN_HISTORY", &history)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap_or_default());
        }
    });
    let half = rx.recv_timeout(Duration::from_secs(120));
    assert_eq!(half.as_deref(), Ok("HALF"), "first half not delivered");
    // kill -9 the leader of idem-0 between the halves; the second half must find the new
    // leader (NOT_LEADER_OR_FOLLOWER / lost connection -> metadata -> retry).
    let leader = leader_of_idem_0(&c);
    let pids = std::fs::read_to_string(c.dir.join("cluster.pid")).unwrap();
    let pid = pids
        .lines()
        .find_map(|l| l.strip_prefix(&format!("broker-{leader} ")))
        .unwrap_or_else(|| panic!("no broker-{leader} in {pids}"))
        .trim()
        .to_string();
    assert!(Command::new("kill")
        .args(["-9", &pid])
        .status()
        .unwrap()
        .success());
    stdin.write_all(b"go\n").unwrap();
    stdin.flush().unwrap();
    let result = rx.recv_timeout(Duration::from_secs(240));
    let _ = child.kill();
    let _ = child.wait();
    let result = result.expect("no result from the producer/consumer");
    check_idempotent_run(&result, n);
    check_history(&history);
    assert_ne!(
        leader_of_idem_0(&c),
        leader,
        "leadership moved off the killed broker"
    );
}

const ADMIN_SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/kafka/confluent_admin.py"
);

/// confluent-kafka's AdminClient: CreateTopics with two configs, DescribeConfigs shows them
/// (and the untouched ones as defaults), an unknown topic is UNKNOWN_TOPIC_OR_PART, and
/// DeleteTopics removes the topic from the metadata.
#[test]
fn confluent_kafka_admin_describes_configs_and_deletes_a_topic() {
    if !require_confluent() {
        return;
    }
    let c = RunningCluster::up();
    let mut cmd = Command::new("python3");
    cmd.args([ADMIN_SCRIPT, &c.bootstrap, "adm"]);
    let out = run(cmd, b"", Duration::from_secs(120));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let v: serde_json::Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let configs = &v["configs"];
    assert_eq!(configs["retention.ms"][0], "3600000", "{v}");
    assert_eq!(configs["retention.ms"][1], false, "set, not a default: {v}");
    assert_eq!(configs["min.insync.replicas"][0], "2", "{v}");
    assert_eq!(configs["unclean.leader.election.enable"][0], "false", "{v}");
    assert_eq!(
        configs["unclean.leader.election.enable"][1], true,
        "a default: {v}"
    );
    assert_eq!(configs["retention.bytes"][0], "-1", "{v}");
    assert_eq!(v["missing"], "UNKNOWN_TOPIC_OR_PART", "{v}");
    assert_eq!(v["deleted"], true);
    assert_eq!(v["listed_after_delete"], false, "{v}");
    let described = c.skein(&["topic", "list"]);
    assert!(
        !described
            .lines()
            .any(|l| l.split_whitespace().next() == Some("adm")),
        "{described}"
    );
}

const KAFKA_PYTHON_SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/kafka/kafka_python_offsets.py"
);

/// kafka-python (pure Python, independent of librdkafka) reads offsets: beginning and end
/// offsets (ListOffsets) agree with what its acks=all producer wrote, it reads every record
/// back from the beginning in order per partition, and a committed offset reads back.
/// Skipped with a message without the module, unless SKEIN_REQUIRE_KAFKA_PYTHON=1.
#[test]
fn kafka_python_reads_offsets() {
    let have = Command::new("python3")
        .args(["-c", "import kafka"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have {
        assert!(
            std::env::var("SKEIN_REQUIRE_KAFKA_PYTHON").as_deref() != Ok("1"),
            "SKEIN_REQUIRE_KAFKA_PYTHON=1 but python3 cannot import kafka (pip install kafka-python)"
        );
        eprintln!("kafka-python test skipped: no kafka module (pip install kafka-python)");
        return;
    }
    let c = RunningCluster::up();
    let n: u64 = 400;
    let mut cmd = Command::new("python3");
    cmd.args([KAFKA_PYTHON_SCRIPT, &c.bootstrap, "kp", &n.to_string()]);
    let out = run(cmd, b"", Duration::from_secs(120));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let v: serde_json::Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let read = v["read"].as_array().unwrap();
    assert_eq!(read.len() as u64, n, "{v}");
    for p in 0..2u64 {
        let rows: Vec<(u64, String)> = read
            .iter()
            .filter(|r| r[0] == p)
            .map(|r| (r[1].as_u64().unwrap(), r[2].as_str().unwrap().to_string()))
            .collect();
        assert_eq!(rows.len() as u64, n / 2, "partition {p}");
        assert!(
            rows.windows(2).all(|w| w[0].0 < w[1].0),
            "partition {p} offsets"
        );
        let values: Vec<String> = (0..n)
            .filter(|i| i % 2 == p)
            .map(|i| format!("v{i}"))
            .collect();
        let got: Vec<String> = rows.iter().map(|r| r.1.clone()).collect();
        assert_eq!(got, values, "partition {p} values in produce order");
        // The end offset is one past the last record (the log also holds the leader's
        // epoch marker, so offsets are not 0..n/2).
        assert_eq!(v["end"][p as usize], rows.last().unwrap().0 + 1, "{v}");
        assert_eq!(v["beginning"][p as usize], 0, "{v}");
    }
    assert_eq!(
        v["committed"][0], v["committed"][1],
        "committed offset read back: {v}"
    );
}

const GROUP_SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/kafka/confluent_group.py"
);

/// A confluent-kafka consumer group of two (subscribe) over 4 partitions: both hold
/// partitions while both are in, B takes all of them after A closes, and every record is
/// committed by exactly one of them (node/tests/kafka/confluent_group.py). Eager
/// rebalancing (librdkafka's default range,roundrobin).
#[test]
fn confluent_kafka_group_of_two_shares_and_rebalances() {
    if require_confluent() {
        group_of_two("range,roundrobin");
    }
}

/// The same with cooperative-sticky (incremental rebalancing, KIP-429): the owned
/// partitions in each member's subscription survive the translation to Skein's and back.
#[test]
fn confluent_kafka_cooperative_sticky_group_of_two() {
    if require_confluent() {
        group_of_two("cooperative-sticky");
    }
}

fn group_of_two(strategy: &str) {
    let c = RunningCluster::up();
    c.skein(&["topic", "create", "shared", "--partitions", "4", "-r", "3"]);
    let n = 1200;
    let mut cmd = Command::new("python3");
    cmd.args([
        GROUP_SCRIPT,
        &c.bootstrap,
        "shared",
        "4",
        &n.to_string(),
        "g2",
        strategy,
    ]);
    let out = run(cmd, b"", Duration::from_secs(200));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    let ids = |who: &str| -> Vec<u64> {
        v["read"][who]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect()
    };
    let (a, b) = (ids("A"), ids("B"));
    assert!(
        !a.is_empty() && !b.is_empty(),
        "A {} B {}",
        a.len(),
        b.len()
    );
    assert_eq!(v["shared"], true, "never both held partitions: {stdout}");
    assert_eq!(
        v["held"]["B"].as_array().unwrap().len(),
        4,
        "B after A left: {stdout}"
    );
    let mut all: Vec<u64> = a.iter().chain(&b).copied().collect();
    all.sort_unstable();
    let dups = all.windows(2).filter(|w| w[0] == w[1]).count();
    assert_eq!(dups, 0, "records committed by both consumers");
    assert!(
        all == (0..n as u64).collect::<Vec<_>>(),
        "{} records of {n}",
        all.len()
    );
    // After both closed, the group's committed offsets are the ends of the partitions.
    let offsets = committed(&c, "g2", "shared");
    assert_eq!(offsets.len(), 4, "{offsets:?}");
    assert!(
        offsets.values().all(|(done, end)| done == end),
        "{offsets:?}"
    );
}
