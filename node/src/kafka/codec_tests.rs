use super::*;
use crate::kafka::records::encode_batches;
use crate::kafka::versions::SUPPORTED;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;
use proptest::prelude::*;
use skein_core::log::RecordBatch;

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str("t"))
}

fn records() -> Bytes {
    let batch = RecordBatch::from_values(1, [b"v".to_vec()]);
    encode_batches(&[batch]).unwrap()
}

/// ListGroups, DescribeGroups, DeleteGroups, OffsetDelete.
fn group_tool_sample(api: ApiKey, version: i16) -> Bytes {
    let groups = vec![GroupId(StrBytes::from_static_str("g"))];
    match api {
        ApiKey::ListGroups => frame(api, version, &ListGroupsRequest::default()),
        ApiKey::DescribeGroups => frame(
            api,
            version,
            &DescribeGroupsRequest::default().with_groups(groups),
        ),
        ApiKey::DeleteGroups => frame(
            api,
            version,
            &DeleteGroupsRequest::default().with_groups_names(groups),
        ),
        _ => {
            let t = OffsetDeleteRequestTopic::default()
                .with_name(topic())
                .with_partitions(vec![OffsetDeleteRequestPartition::default()]);
            let g = GroupId(StrBytes::from_static_str("g"));
            let r = OffsetDeleteRequest::default()
                .with_group_id(g)
                .with_topics(vec![t]);
            frame(api, version, &r)
        }
    }
}

/// The transaction APIs, as librdkafka sends them (one topic, two partitions).
fn txn_sample(api: ApiKey, version: i16) -> Bytes {
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{ProducerId, TransactionalId};
    let id = TransactionalId(StrBytes::from_static_str("tx"));
    let group = GroupId(StrBytes::from_static_str("g"));
    match api {
        ApiKey::AddPartitionsToTxn => {
            let t = AddPartitionsToTxnTopic::default()
                .with_name(topic())
                .with_partitions(vec![0, 1]);
            let r = AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(id)
                .with_v3_and_below_producer_id(ProducerId(4))
                .with_v3_and_below_producer_epoch(1)
                .with_v3_and_below_topics(vec![t]);
            frame(api, version, &r)
        }
        ApiKey::AddOffsetsToTxn => {
            let r = AddOffsetsToTxnRequest::default()
                .with_transactional_id(id)
                .with_producer_id(ProducerId(4))
                .with_group_id(group);
            frame(api, version, &r)
        }
        ApiKey::EndTxn => {
            let r = EndTxnRequest::default()
                .with_transactional_id(id)
                .with_producer_id(ProducerId(4))
                .with_committed(true);
            frame(api, version, &r)
        }
        ApiKey::TxnOffsetCommit => {
            let p = TxnOffsetCommitRequestPartition::default()
                .with_partition_index(1)
                .with_committed_offset(5)
                .with_committed_metadata(Some(StrBytes::from_static_str("x")));
            let t = TxnOffsetCommitRequestTopic::default()
                .with_name(topic())
                .with_partitions(vec![p]);
            let r = TxnOffsetCommitRequest::default()
                .with_transactional_id(id)
                .with_group_id(group)
                .with_producer_id(ProducerId(4))
                .with_topics(vec![t]);
            frame(api, version, &r)
        }
        other => panic!("no sample for {other:?}"),
    }
}

/// A frame (without size prefix) as a client would send it.
fn frame<M: Encodable>(api: ApiKey, version: i16, body: &M) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("test")));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, api.request_header_version(version))
        .unwrap();
    body.encode(&mut buf, version).unwrap();
    buf.freeze()
}

/// The topic-admin requests: CreateTopics and DeleteTopics of one topic, DescribeConfigs
/// of a topic with a key filter and a broker with none.
fn admin_sample(api: ApiKey, version: i16) -> Bytes {
    match api {
        ApiKey::CreateTopics => {
            let t = CreatableTopic::default()
                .with_name(topic())
                .with_num_partitions(3);
            frame(
                api,
                version,
                &CreateTopicsRequest::default().with_topics(vec![t]),
            )
        }
        ApiKey::DeleteTopics => frame(
            api,
            version,
            &kafka_protocol::messages::DeleteTopicsRequest::default()
                .with_topic_names(vec![topic()])
                .with_timeout_ms(5_000),
        ),
        _ => describe_configs_sample(version),
    }
}

fn describe_configs_sample(version: i16) -> Bytes {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    let named = DescribeConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_static_str("t"))
        .with_configuration_keys(Some(vec![StrBytes::from_static_str("retention.ms")]));
    let all = DescribeConfigsResource::default()
        .with_resource_type(4)
        .with_resource_name(StrBytes::from_static_str("1"));
    frame(
        ApiKey::DescribeConfigs,
        version,
        &kafka_protocol::messages::DescribeConfigsRequest::default()
            .with_resources(vec![named, all])
            .with_include_synonyms(true),
    )
}

/// A request of `api` at `version` with one topic and one partition wherever it has lists.
fn sample(api: ApiKey, version: i16) -> Bytes {
    match api {
        ApiKey::ApiVersions => frame(api, version, &ApiVersionsRequest::default()),
        ApiKey::Metadata => {
            let t = MetadataRequestTopic::default().with_name(Some(topic()));
            frame(
                api,
                version,
                &MetadataRequest::default().with_topics(Some(vec![t])),
            )
        }
        ApiKey::Produce => {
            let p = PartitionProduceData::default().with_records(Some(records()));
            let t = TopicProduceData::default()
                .with_name(topic())
                .with_partition_data(vec![p]);
            let req = ProduceRequest::default()
                .with_acks(-1)
                .with_topic_data(vec![t]);
            frame(api, version, &req)
        }
        ApiKey::Fetch => {
            let p = FetchPartition::default().with_fetch_offset(5);
            let t = FetchTopic::default()
                .with_topic(topic())
                .with_partitions(vec![p]);
            frame(api, version, &FetchRequest::default().with_topics(vec![t]))
        }
        ApiKey::ListOffsets => {
            let p = ListOffsetsPartition::default().with_timestamp(-2);
            let t = ListOffsetsTopic::default()
                .with_name(topic())
                .with_partitions(vec![p]);
            frame(
                api,
                version,
                &ListOffsetsRequest::default().with_topics(vec![t]),
            )
        }
        ApiKey::CreateTopics | ApiKey::DeleteTopics | ApiKey::DescribeConfigs => {
            admin_sample(api, version)
        }
        ApiKey::InitProducerId => frame(
            api,
            version,
            &kafka_protocol::messages::InitProducerIdRequest::default()
                .with_transaction_timeout_ms(60_000),
        ),
        ApiKey::FindCoordinator => frame(
            api,
            version,
            &FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g")),
        ),
        ApiKey::JoinGroup => {
            let p = JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str("range"))
                .with_metadata(Bytes::from_static(&[
                    0, 0, 0, 0, 0, 1, 0, 1, b't', 255, 255, 255, 255,
                ]));
            let req = JoinGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_session_timeout_ms(10_000)
                .with_protocol_type(StrBytes::from_static_str("consumer"))
                .with_protocols(vec![p]);
            frame(api, version, &req)
        }
        ApiKey::SyncGroup => {
            let a = SyncGroupRequestAssignment::default()
                .with_member_id(StrBytes::from_static_str("m"))
                .with_assignment(Bytes::from_static(&[0, 0, 0, 0, 0, 0, 255, 255, 255, 255]));
            let req = SyncGroupRequest::default()
                .with_generation_id(1)
                .with_assignments(vec![a]);
            frame(api, version, &req)
        }
        ApiKey::Heartbeat => frame(api, version, &HeartbeatRequest::default()),
        ApiKey::LeaveGroup if version >= 3 => {
            let m = MemberIdentity::default().with_member_id(StrBytes::from_static_str("m"));
            frame(
                api,
                version,
                &LeaveGroupRequest::default().with_members(vec![m]),
            )
        }
        ApiKey::LeaveGroup => frame(
            api,
            version,
            &LeaveGroupRequest::default().with_member_id(StrBytes::from_static_str("m")),
        ),
        ApiKey::OffsetCommit => {
            let p = OffsetCommitRequestPartition::default()
                .with_committed_offset(5)
                .with_committed_metadata(Some(StrBytes::from_static_str("x")));
            let t = OffsetCommitRequestTopic::default()
                .with_name(topic())
                .with_partitions(vec![p]);
            frame(
                api,
                version,
                &OffsetCommitRequest::default().with_topics(vec![t]),
            )
        }
        ApiKey::OffsetFetch => {
            let t = OffsetFetchRequestTopic::default()
                .with_name(topic())
                .with_partition_indexes(vec![0, 1]);
            frame(
                api,
                version,
                &OffsetFetchRequest::default().with_topics(Some(vec![t])),
            )
        }
        ApiKey::ListGroups
        | ApiKey::DescribeGroups
        | ApiKey::DeleteGroups
        | ApiKey::OffsetDelete => group_tool_sample(api, version),
        // The transaction APIs (and a panic for an API without a sample).
        _ => txn_sample(api, version),
    }
}

#[test]
fn every_advertised_version_decodes() {
    for (api, lo, hi) in SUPPORTED {
        for v in *lo..=*hi {
            let req =
                decode_request(sample(*api, v)).unwrap_or_else(|e| panic!("{api:?} v{v}: {e}"));
            assert_eq!(req.header.correlation_id, 7);
            let ok = matches!(
                (api, &req.body),
                (ApiKey::ApiVersions, Body::ApiVersions(_))
                    | (ApiKey::Metadata, Body::Metadata(_))
                    | (ApiKey::Produce, Body::Produce(_))
                    | (ApiKey::Fetch, Body::Fetch(_))
                    | (ApiKey::ListOffsets, Body::ListOffsets(_))
                    | (ApiKey::CreateTopics, Body::CreateTopics(_))
                    | (ApiKey::DeleteTopics, Body::DeleteTopics(_))
                    | (ApiKey::DescribeConfigs, Body::DescribeConfigs(_))
                    | (ApiKey::InitProducerId, Body::InitProducerId(_))
                    | (ApiKey::FindCoordinator, Body::FindCoordinator(_))
                    | (ApiKey::JoinGroup, Body::JoinGroup(_))
                    | (ApiKey::SyncGroup, Body::SyncGroup(_))
                    | (ApiKey::Heartbeat, Body::Heartbeat(_))
                    | (ApiKey::LeaveGroup, Body::LeaveGroup(_))
                    | (ApiKey::OffsetCommit, Body::OffsetCommit(_))
                    | (ApiKey::OffsetFetch, Body::OffsetFetch(_))
                    | (ApiKey::ListGroups, Body::ListGroups(_))
                    | (ApiKey::DescribeGroups, Body::DescribeGroups(_))
                    | (ApiKey::DeleteGroups, Body::DeleteGroups(_))
                    | (ApiKey::OffsetDelete, Body::OffsetDelete(_))
                    | (ApiKey::AddPartitionsToTxn, Body::AddPartitionsToTxn(_))
                    | (ApiKey::AddOffsetsToTxn, Body::AddOffsetsToTxn(_))
                    | (ApiKey::EndTxn, Body::EndTxn(_))
                    | (ApiKey::TxnOffsetCommit, Body::TxnOffsetCommit(_))
            );
            assert!(ok, "{api:?} v{v}: {:?}", req.body);
        }
    }
}

#[test]
fn unknown_keys_and_versions_are_refused() {
    let mut f = sample(ApiKey::Metadata, 1).to_vec();
    f[..2].copy_from_slice(&999i16.to_be_bytes());
    assert!(matches!(
        decode_request(Bytes::from(f)),
        Err(CodecError::UnknownApiKey(999))
    ));
    let f = frame(ApiKey::Fetch, 12, &FetchRequest::default());
    assert!(matches!(
        decode_request(f),
        Err(CodecError::UnsupportedVersion { .. })
    ));
    // AlterConfigs exists in Kafka but not here: refused by name, so the log says so.
    let mut f = sample(ApiKey::Metadata, 1).to_vec();
    f[..2].copy_from_slice(&(ApiKey::AlterConfigs as i16).to_be_bytes());
    let e = decode_request(Bytes::from(f)).unwrap_err();
    assert!(
        matches!(e, CodecError::UnsupportedApi(ApiKey::AlterConfigs)),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "AlterConfigs (api key 33) is not served here (see ApiVersions)"
    );
    // A newer ApiVersions is answered (in v0), not refused.
    let f = frame(ApiKey::ApiVersions, 4, &ApiVersionsRequest::default());
    assert!(matches!(
        decode_request(f).unwrap().body,
        Body::ApiVersionsTooNew
    ));
}

#[test]
fn truncated_and_trailing_bodies_are_refused() {
    let f = sample(ApiKey::Produce, 8);
    for cut in [f.len() - 1, f.len() - 20, 12] {
        let e = decode_request(f.slice(..cut)).unwrap_err();
        assert!(matches!(e, CodecError::Body { .. }), "cut {cut}: {e}");
    }
    let mut long = f.to_vec();
    long.push(0);
    assert!(decode_request(Bytes::from(long)).is_err());
}

/// The decoder would size a Vec from these counts before reading an element (and abort
/// the process when the allocation fails): the guard refuses them first.
#[test]
fn impossible_counts_are_refused_before_decoding() {
    // Metadata v1 whose topic count is i32::MAX.
    let mut f = frame(ApiKey::Metadata, 1, &MetadataRequest::default()).to_vec();
    let n = f.len();
    f[n - 4..].copy_from_slice(&i32::MAX.to_be_bytes());
    let e = decode_request(Bytes::from(f)).unwrap_err().to_string();
    assert!(e.contains("array count 2147483647"), "{e}");
    // A record batch whose record count is i32::MAX (CRC left wrong: the guard runs first).
    let mut recs = records().to_vec();
    recs[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    let e = super::super::guard::check_records(&recs)
        .unwrap_err()
        .to_string();
    assert!(e.contains("record count"), "{e}");
    // A record claiming i32::MAX headers.
    let mut recs = records().to_vec();
    let last = recs.len() - 1;
    recs[last] = 0xfe; // zigzag varint: large positive, continuation bit set...
    recs.extend_from_slice(&[0xff, 0xff, 0xff, 0x0f]);
    assert!(super::super::guard::check_records(&recs).is_err());
}

/// The transaction APIs' arrays: a partition count or a topic count the frame cannot
/// hold is refused before the decoder reserves for it; the fields read back as sent.
#[test]
fn transaction_frames_are_walked_and_read() {
    // AddPartitionsToTxn v2 ends with the partition array: [count, 0, 1].
    let mut f = txn_sample(ApiKey::AddPartitionsToTxn, 2).to_vec();
    let n = f.len();
    f[n - 12..n - 8].copy_from_slice(&i32::MAX.to_be_bytes());
    let e = decode_request(Bytes::from(f)).unwrap_err().to_string();
    assert!(e.contains("array count 2147483647"), "{e}");
    // TxnOffsetCommit v2's topic count sits right after the epoch.
    let good = txn_sample(ApiKey::TxnOffsetCommit, 2);
    let Body::TxnOffsetCommit(r) = decode_request(good.clone()).unwrap().body else {
        panic!("not a TxnOffsetCommit")
    };
    assert_eq!(
        (r.producer_id.0, r.topics[0].partitions[0].committed_offset),
        (4, 5)
    );
    let at = good.len() - (2 + 1 + 4 + 4 + 8 + 4 + 2 + 1) - 4;
    let mut f = good.to_vec();
    f[at..at + 4].copy_from_slice(&(-7i32).to_be_bytes());
    assert!(decode_request(Bytes::from(f)).is_err());
    let Body::EndTxn(r) = decode_request(txn_sample(ApiKey::EndTxn, 1)).unwrap().body else {
        panic!("not an EndTxn")
    };
    assert!(r.committed);
    // The flexible versions are not served: refused by version, not misread.
    let f = frame(ApiKey::EndTxn, 3, &EndTxnRequest::default());
    assert!(matches!(
        decode_request(f),
        Err(CodecError::UnsupportedVersion { .. })
    ));
}

#[test]
fn responses_carry_size_and_correlation() {
    let resp = crate::kafka::versions::api_versions_response(0);
    let bytes = encode_response(ApiKey::ApiVersions, 3, 42, &resp).unwrap();
    let size = i32::from_be_bytes(bytes[..4].try_into().unwrap());
    assert_eq!(size as usize, bytes.len() - 4);
    assert_eq!(i32::from_be_bytes(bytes[4..8].try_into().unwrap()), 42);
    let mut body = bytes.slice(8..);
    let back = kafka_protocol::messages::ApiVersionsResponse::decode(&mut body, 3).unwrap();
    assert_eq!(back.api_keys.len(), SUPPORTED.len());
}

fn samples() -> Vec<Bytes> {
    SUPPORTED
        .iter()
        .flat_map(|(api, lo, hi)| (*lo..=*hi).map(move |v| sample(*api, v)))
        .collect()
}

proptest! {
    /// Random bytes: an error or a request, never a panic (or an abort).
    #[test]
    fn random_frames_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_request(Bytes::from(bytes));
    }

    /// Valid frames with bytes overwritten, cut or extended: likewise.
    #[test]
    fn mutated_frames_never_panic(
        which in any::<prop::sample::Index>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        tail in proptest::collection::vec(any::<u8>(), 0..16),
    ) {
        let all = samples();
        let mut f = all[which.index(all.len())].to_vec();
        for (at, b) in edits {
            let i = at.index(f.len());
            f[i] = b;
        }
        let _ = decode_request(Bytes::from(f.clone()));
        f.truncate(cut.index(f.len() + 1));
        f.extend_from_slice(&tail);
        let _ = decode_request(Bytes::from(f));
    }
}
