#![cfg(not(madsim))] // real sockets and processes; the madsim flavour runs tests/ instead
//! OffsetCommit/OffsetFetch edge cases as Kafka answers them, and the group tooling APIs
//! (ListGroups, DescribeGroups, DeleteGroups, OffsetDelete), against `skein cluster up`:
//! with a hand-made `kafka-protocol` client (each code checked as sent), and with
//! confluent-kafka's AdminClient (`node/tests/kafka/confluent_group_tools.py`; skipped
//! without the module unless SKEIN_REQUIRE_CONFLUENT=1). docs/kafka.md lists the rules.

mod common;

use bytes::{BufMut, BytesMut};
use common::kafka::{coordinator, exchange, listeners};
use common::procs::{cluster_up, run, text, Cleanup};
use kafka_protocol::messages::consumer_protocol_subscription::ConsumerProtocolSubscription;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn group(v: &str) -> GroupId {
    GroupId(s(v))
}

/// An OffsetCommit v7 of `(topic, partition, offset)`s; its codes by (topic, partition).
fn commit(
    addr: &str,
    g: &str,
    generation: i32,
    member: &str,
    offsets: &[(&str, i32, i64)],
) -> BTreeMap<(String, i32), i16> {
    let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for (t, p, o) in offsets {
        topics.entry(t).or_default().push(
            OffsetCommitRequestPartition::default()
                .with_partition_index(*p)
                .with_committed_offset(*o)
                .with_committed_metadata(Some(s("meta"))),
        );
    }
    let req = OffsetCommitRequest::default()
        .with_group_id(group(g))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member))
        .with_topics(
            topics
                .into_iter()
                .map(|(t, ps)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(s(t)))
                        .with_partitions(ps)
                })
                .collect(),
        );
    // A coordinator still loading (right after __consumer_offsets is made) says so with
    // COORDINATOR_LOAD_IN_PROGRESS; clients retry.
    let mut r: OffsetCommitResponse;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        r = exchange(addr, ApiKey::OffsetCommit, 7, &req).unwrap();
        let loading = r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .any(|p| p.error_code == 14);
        if !loading || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    r.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| ((t.name.0.to_string(), p.partition_index), p.error_code))
        })
        .collect()
}

/// Every committed offset of `g` (OffsetFetch v5, topics null), with its metadata.
fn fetch_all(addr: &str, g: &str) -> BTreeMap<(String, i32), (i64, String)> {
    let req = OffsetFetchRequest::default()
        .with_group_id(group(g))
        .with_topics(None);
    let r: OffsetFetchResponse = exchange(addr, ApiKey::OffsetFetch, 5, &req).unwrap();
    assert_eq!(r.error_code, 0);
    r.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                let meta = p
                    .metadata
                    .as_ref()
                    .map(|m| m.to_string())
                    .unwrap_or_default();
                (
                    (t.name.0.to_string(), p.partition_index),
                    (p.committed_offset, meta),
                )
            })
        })
        .collect()
}

fn key(t: &str, p: i32) -> (String, i32) {
    (t.to_string(), p)
}

/// The groups every broker lists (ListGroups v2), by id: protocol type.
fn list_all(listeners: &BTreeMap<i32, String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for addr in listeners.values() {
        let r: ListGroupsResponse =
            exchange(addr, ApiKey::ListGroups, 2, &ListGroupsRequest::default()).unwrap();
        assert_eq!(r.error_code, 0);
        for g in r.groups {
            out.insert(g.group_id.0.to_string(), g.protocol_type.to_string());
        }
    }
    out
}

fn describe(addr: &str, g: &str) -> describe_groups_response::DescribedGroup {
    let req = DescribeGroupsRequest::default().with_groups(vec![group(g)]);
    let r: DescribeGroupsResponse = exchange(addr, ApiKey::DescribeGroups, 4, &req).unwrap();
    r.groups.into_iter().next().unwrap()
}

fn offset_delete(addr: &str, g: &str, t: &str, parts: &[i32]) -> OffsetDeleteResponse {
    let req = OffsetDeleteRequest::default()
        .with_group_id(group(g))
        .with_topics(vec![OffsetDeleteRequestTopic::default()
            .with_name(TopicName(s(t)))
            .with_partitions(
                parts
                    .iter()
                    .map(|p| OffsetDeleteRequestPartition::default().with_partition_index(*p))
                    .collect(),
            )]);
    exchange(addr, ApiKey::OffsetDelete, 0, &req).unwrap()
}

fn delete_groups(addr: &str, gs: &[&str]) -> Vec<i16> {
    let req =
        DeleteGroupsRequest::default().with_groups_names(gs.iter().map(|g| group(g)).collect());
    let r: DeleteGroupsResponse = exchange(addr, ApiKey::DeleteGroups, 1, &req).unwrap();
    r.results.iter().map(|r| r.error_code).collect()
}

/// One member joins `g` subscribed to `topic` and, as its leader, takes every partition;
/// returns (member id, generation).
fn join_alone(addr: &str, g: &str, topic: &str, partitions: i32) -> (String, i32) {
    let mut sub = BytesMut::new();
    sub.put_i16(0);
    ConsumerProtocolSubscription::default()
        .with_topics(vec![s(topic)])
        .encode(&mut sub, 0)
        .unwrap();
    let join = JoinGroupRequest::default()
        .with_group_id(group(g))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(sub.freeze())]);
    let j: JoinGroupResponse = exchange(addr, ApiKey::JoinGroup, 5, &join).unwrap();
    assert_eq!(j.error_code, 0, "{j:?}");
    let mut a = BytesMut::new();
    a.put_i16(0);
    consumer_protocol_assignment::ConsumerProtocolAssignment::default()
        .with_assigned_partitions(vec![consumer_protocol_assignment::TopicPartition::default(
        )
        .with_topic(TopicName(s(topic)))
        .with_partitions((0..partitions).collect())])
        .encode(&mut a, 0)
        .unwrap();
    let sync = SyncGroupRequest::default()
        .with_group_id(group(g))
        .with_generation_id(j.generation_id)
        .with_member_id(j.member_id.clone())
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(j.member_id.clone())
            .with_assignment(a.freeze())]);
    let r: SyncGroupResponse = exchange(addr, ApiKey::SyncGroup, 3, &sync).unwrap();
    assert_eq!(r.error_code, 0);
    (j.member_id.to_string(), j.generation_id)
}

fn leave(addr: &str, g: &str, member: &str) {
    let req = LeaveGroupRequest::default()
        .with_group_id(group(g))
        .with_member_id(s(member));
    let r: LeaveGroupResponse = exchange(addr, ApiKey::LeaveGroup, 2, &req).unwrap();
    assert_eq!(r.error_code, 0);
}

#[test]
fn offset_commit_edge_cases_and_group_tooling_answer_as_kafka() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cleanup = Cleanup::new(&tmp.path().join("data"));
    let cf = cluster_up(&mut cleanup, &["--brokers", "3"], Duration::from_secs(60));
    let args = [
        "topic",
        "create",
        "gt",
        "--partitions",
        "2",
        "-r",
        "3",
        "--cluster",
        &cf,
    ];
    let out = run(&args, Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ls = listeners(&cf);
    let at = coordinator(&ls, "simple");

    // A simple commit (generation -1): stored; a negative offset means "no position";
    // unknown topics and partitions get UNKNOWN_TOPIC_OR_PARTITION, the rest goes in.
    let codes = commit(&at, "simple", -1, "", &[("gt", 0, 5), ("gt", 1, 8)]);
    assert!(codes.values().all(|c| *c == 0), "{codes:?}");
    let codes = commit(
        &at,
        "simple",
        -1,
        "",
        &[("gt", 1, -1), ("gt", 9, 3), ("nope", 0, 1)],
    );
    assert_eq!(codes[&key("gt", 1)], 0, "a -1 commit is taken: {codes:?}");
    assert_eq!(codes[&key("gt", 9)], 3);
    assert_eq!(codes[&key("nope", 0)], 3);
    let all = fetch_all(&at, "simple");
    assert_eq!(
        all.get(&key("gt", 0)),
        Some(&(5, "meta".to_string())),
        "{all:?}"
    );
    assert_eq!(
        all.get(&key("gt", 1)),
        None,
        "reset by the -1 commit: {all:?}"
    );
    // -2 too; and Kafka ignores the member id of a generation -1 commit.
    let codes = commit(&at, "simple", -1, "some-tool", &[("gt", 0, -2)]);
    assert_eq!(codes[&key("gt", 0)], 0);
    assert!(fetch_all(&at, "simple").is_empty());
    commit(&at, "simple", -1, "", &[("gt", 0, 5), ("gt", 1, 6)]);
    // A member commit to a group nobody joined, or of a made-up generation: refused.
    let other = coordinator(&ls, "nobody-joined");
    let codes = commit(&other, "nobody-joined", 3, "m-1", &[("gt", 0, 1)]);
    assert_eq!(codes[&key("gt", 0)], 25, "UNKNOWN_MEMBER_ID");

    // ListGroups (per broker) and DescribeGroups.
    let listed = list_all(&ls);
    assert_eq!(
        listed.get("simple").map(String::as_str),
        Some(""),
        "{listed:?}"
    );
    let d = describe(&at, "simple");
    assert_eq!((d.error_code, d.group_state.as_str()), (0, "Empty"));
    assert_eq!(d.protocol_type.as_str(), "");
    let dead = describe(&coordinator(&ls, "nobody"), "nobody");
    assert_eq!((dead.error_code, dead.group_state.as_str()), (0, "Dead"));

    // OffsetDelete: unknown group, unknown partition, then gt-0 goes.
    let elsewhere = coordinator(&ls, "nobody");
    assert_eq!(
        offset_delete(&elsewhere, "nobody", "gt", &[0]).error_code,
        69
    );
    let r = offset_delete(&at, "simple", "gt", &[0, 7]);
    assert_eq!(r.error_code, 0);
    let codes: Vec<i16> = r.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(codes, [0, 3], "gt-0 deleted, gt-7 unknown");
    assert_eq!(
        fetch_all(&at, "simple").keys().collect::<Vec<_>>(),
        [&key("gt", 1)]
    );

    // With a member subscribed to gt: no OffsetDelete of gt, no DeleteGroups.
    let (member, generation) = join_alone(&at, "simple", "gt", 2);
    let d = describe(&at, "simple");
    assert_eq!(d.group_state.as_str(), "Stable");
    assert_eq!(
        (d.protocol_type.as_str(), d.protocol_data.as_str()),
        ("consumer", "range")
    );
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.members[0].member_id.as_str(), member);
    assert!(!d.members[0].member_assignment.is_empty());
    let r = offset_delete(&at, "simple", "gt", &[1]);
    assert_eq!(
        r.topics[0].partitions[0].error_code, 86,
        "GROUP_SUBSCRIBED_TO_TOPIC"
    );
    assert_eq!(delete_groups(&at, &["simple"]), [68], "NON_EMPTY_GROUP");
    // A generation -1 commit while it has a member: UNKNOWN_MEMBER_ID, as Kafka.
    let codes = commit(&at, "simple", -1, "", &[("gt", 1, 9)]);
    assert_eq!(codes[&key("gt", 1)], 25);
    // The member itself may reset (kafkajs after OFFSET_OUT_OF_RANGE), and is fenced.
    let codes = commit(&at, "simple", generation + 1, &member, &[("gt", 1, -1)]);
    assert_eq!(codes[&key("gt", 1)], 22, "ILLEGAL_GENERATION");
    let codes = commit(&at, "simple", generation, &member, &[("gt", 1, -1)]);
    assert_eq!(codes[&key("gt", 1)], 0);
    assert!(fetch_all(&at, "simple").is_empty());
    leave(&at, "simple", &member);

    // Empty again: DeleteGroups takes it (and says GROUP_ID_NOT_FOUND for a stranger).
    commit(&at, "simple", -1, "", &[("gt", 0, 4)]);
    assert_eq!(delete_groups(&at, &["simple"]), [0]);
    assert_eq!(delete_groups(&at, &["simple"]), [69]);
    assert!(!list_all(&ls).contains_key("simple"));
    assert!(fetch_all(&at, "simple").is_empty());
}

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/kafka/confluent_group_tools.py"
);

/// confluent-kafka's AdminClient (librdkafka): list, describe, list offsets, delete.
#[test]
fn confluent_kafka_admin_lists_describes_and_deletes_groups() {
    if !common::up::require_confluent() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut cleanup = Cleanup::new(&tmp.path().join("data"));
    let cf = cluster_up(&mut cleanup, &["--brokers", "3"], Duration::from_secs(60));
    let args = [
        "topic",
        "create",
        "ct",
        "--partitions",
        "2",
        "-r",
        "3",
        "--cluster",
        &cf,
    ];
    let out = run(&args, Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let bootstrap: Vec<String> = listeners(&cf).into_values().collect();
    let mut cmd = Command::new("python3");
    cmd.args([SCRIPT, &bootstrap.join(","), "ct"]);
    let out = common::run_with_stdin(cmd, b"", Duration::from_secs(180));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let v: serde_json::Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(v["listed"], true, "{v}");
    assert_eq!(v["described_state"], "EMPTY", "{v}");
    assert_eq!(v["live_state"], "STABLE", "{v}");
    assert_eq!(v["live_members"], 1, "{v}");
    assert_eq!(v["live_assigned"], 2, "{v}");
    assert_eq!(v["delete_live"], "NON_EMPTY_GROUP", "{v}");
    assert_eq!(
        v["offsets"],
        serde_json::json!([[0, 16], [1, 16]]),
        "the ends: {v}"
    );
    assert_eq!(v["deleted"], true, "{v}");
    assert_eq!(v["listed_after_delete"], false, "{v}");
    assert_eq!(v["delete_again"], "GROUP_ID_NOT_FOUND", "{v}");
}
