//! The ApiVersions table: exactly the APIs and versions this listener implements.
//!
//! Lower bounds are what the translation needs (Produce v3 / Fetch v4: record batch v2;
//! ListOffsets v1: one offset per partition, no v0 offset arrays). Upper bounds are the
//! last non-flexible version of each API (ApiVersions aside): every frame is walked by
//! `guard` before it is decoded, and those layouts are the ones it knows. librdkafka 2.x
//! asks for ApiVersions v3 first and then uses the highest version both sides support, so
//! it works with these as with any Kafka broker from 2.0 to 2.3 (docs/kafka.md).

use kafka_protocol::messages::api_versions_response::{ApiVersion, ApiVersionsResponse};
use kafka_protocol::messages::ApiKey;

/// (api, min version, max version), in api-key order.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 8),
    (ApiKey::Fetch, 4, 11),
    (ApiKey::ListOffsets, 1, 5),
    (ApiKey::Metadata, 0, 8),
    (ApiKey::OffsetCommit, 2, 7),
    (ApiKey::OffsetFetch, 1, 5),
    (ApiKey::FindCoordinator, 0, 2),
    (ApiKey::JoinGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 3),
    (ApiKey::LeaveGroup, 0, 3),
    (ApiKey::SyncGroup, 0, 3),
    (ApiKey::DescribeGroups, 0, 4),
    (ApiKey::ListGroups, 0, 2),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 4),
    (ApiKey::DeleteTopics, 1, 3),
    (ApiKey::DescribeConfigs, 1, 3),
    (ApiKey::InitProducerId, 0, 1),
    (ApiKey::AddPartitionsToTxn, 0, 2),
    (ApiKey::AddOffsetsToTxn, 0, 2),
    (ApiKey::EndTxn, 0, 2),
    (ApiKey::TxnOffsetCommit, 0, 2),
    (ApiKey::DeleteGroups, 0, 1),
    (ApiKey::OffsetDelete, 0, 0),
];

/// The supported version range of `api`, if it is implemented at all.
pub fn range(api: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED
        .iter()
        .find(|(a, _, _)| *a == api)
        .map(|(_, lo, hi)| (*lo, *hi))
}

pub fn supported(api: ApiKey, version: i16) -> bool {
    range(api).is_some_and(|(lo, hi)| (lo..=hi).contains(&version))
}

/// The minimum version announced for `api`. Produce's is 0, as Kafka before 4.0 announced:
/// librdkafka up to 2.11.0 uses gzip, snappy or lz4 only if the broker supports Produce
/// somewhere in [0, 0] (`rd_kafka_msgset_writer_select_MsgVersion`) and otherwise sends
/// those batches uncompressed without a word. Produce v0-2 (message sets, which cannot
/// carry record batch v2) are still refused as unsupported versions when sent.
fn announced_min(api: ApiKey, lo: i16) -> i16 {
    if api == ApiKey::Produce {
        0
    } else {
        lo
    }
}

/// The ApiVersions answer: `error_code` 0, or UNSUPPORTED_VERSION when the client asked
/// for an ApiVersions version above ours (it then retries with one from the list).
pub fn api_versions_response(error_code: i16) -> ApiVersionsResponse {
    let api_keys = SUPPORTED
        .iter()
        .map(|(api, lo, hi)| {
            ApiVersion::default()
                .with_api_key(*api as i16)
                .with_min_version(announced_min(*api, *lo))
                .with_max_version(*hi)
        })
        .collect();
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(api_keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_within_what_the_crate_can_encode() {
        for (api, lo, hi) in SUPPORTED {
            let crate_range = api.valid_versions();
            assert!(crate_range.min <= *lo && *hi <= crate_range.max, "{api:?}");
            assert!(lo <= hi);
            // Non-flexible (the guard's layouts), ApiVersions aside.
            if *api != ApiKey::ApiVersions {
                assert_eq!(api.request_header_version(*hi), 1, "{api:?}");
            }
        }
        assert!(supported(ApiKey::Fetch, 11));
        assert!(!supported(ApiKey::Fetch, 12));
        assert!(supported(ApiKey::JoinGroup, 5));
        assert!(!supported(ApiKey::JoinGroup, 6));
        assert!(supported(ApiKey::DeleteTopics, 3));
        assert!(!supported(ApiKey::DeleteTopics, 0));
        assert!(!supported(ApiKey::DeleteTopics, 4));
        assert!(!supported(ApiKey::DescribeConfigs, 0));
        assert!(!supported(ApiKey::AlterConfigs, 0));
        assert!(supported(ApiKey::ListGroups, 2) && !supported(ApiKey::ListGroups, 3));
        assert!(supported(ApiKey::DescribeGroups, 4));
        assert!(!supported(ApiKey::DescribeGroups, 5));
        assert!(supported(ApiKey::DeleteGroups, 1) && !supported(ApiKey::DeleteGroups, 2));
        assert!(supported(ApiKey::OffsetDelete, 0));
        // The transaction APIs up to their last non-flexible version.
        for api in [
            ApiKey::AddPartitionsToTxn,
            ApiKey::AddOffsetsToTxn,
            ApiKey::EndTxn,
            ApiKey::TxnOffsetCommit,
        ] {
            assert!(supported(api, 2) && !supported(api, 3), "{api:?}");
        }
        assert!(!supported(ApiKey::WriteTxnMarkers, 0));
        // Produce is announced from v0 (librdkafka's compression check) but served from v3.
        let produce = api_versions_response(0)
            .api_keys
            .into_iter()
            .find(|k| k.api_key == ApiKey::Produce as i16)
            .unwrap();
        assert_eq!((produce.min_version, produce.max_version), (0, 8));
        assert!(!supported(ApiKey::Produce, 2) && supported(ApiKey::Produce, 3));
    }
}
