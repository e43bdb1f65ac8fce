//! CreateTopics, DeleteTopics, DescribeConfigs and InitProducerId, forwarded to Skein's
//! controller through the ordinary Skein client (the controller speaks no Kafka; any broker
//! accepts the request, see `metadata`'s controller id). Understood configs: those of
//! `crate::topic_configs::SUPPORTED` (min.insync.replicas, retention.*, unclean.*,
//! cleanup.policy, delete.retention.ms, min.compaction.lag.ms, min.cleanable.dirty.ratio);
//! others, and bad values, are refused (INVALID_CONFIG) and not described.

use super::errors;
use super::session::Session;
use crate::client::{Client, ClientOptions};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    DescribeConfigsRequest, DescribeConfigsResponse, InitProducerIdRequest, InitProducerIdResponse,
    ProducerId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use skein_core::controller::{ControllerRequest, ControllerResponse, TopicConfig};
use std::time::Duration;

/// A Skein client for one admin request to the controller.
fn admin_client(s: &Session, timeout: Duration) -> Client {
    Client::new(
        (*s.ctx.cluster).clone(),
        ClientOptions {
            request_timeout: timeout,
            ..ClientOptions::default()
        },
    )
}

/// An idempotent producer's id: a fresh one from the controller (epoch 0), as Skein's own
/// producer gets. A transactional id goes to its coordinator instead (`txn`); a
/// re-initialisation
/// with the old id and epoch (v3+, not offered) would bump the epoch in Kafka.
pub async fn init_producer_id(
    s: &mut Session,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let resp = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    debug_assert!(req.transactional_id.is_none(), "routed to the coordinator");
    let mut client = admin_client(s, Duration::from_secs(5));
    let result = match client
        .controller_request(ControllerRequest::InitProducerId)
        .await
    {
        Ok(ControllerResponse::InitProducerId(r)) => r.map_err(crate::client::ClientError::from),
        Ok(other) => Err(crate::client::ClientError::Unexpected {
            addr: s.ctx.cluster.first_controller(),
            what: format!("{other:?}"),
        }),
        Err(e) => Err(e),
    };
    match result {
        Ok(id) => match (
            i64::try_from(id.producer_id),
            i16::try_from(id.producer_epoch),
        ) {
            (Ok(pid), Ok(epoch)) => resp
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch),
            _ => resp.with_error_code(ResponseError::UnknownServerError.code()),
        },
        Err(e) => {
            tracing::debug!(error = %e, "kafka: InitProducerId failed");
            resp.with_error_code(errors::admin(&e))
        }
    }
}

pub async fn handle(s: &mut Session, req: CreateTopicsRequest) -> CreateTopicsResponse {
    let timeout = Duration::from_millis(u64::try_from(req.timeout_ms).unwrap_or(0).max(1000));
    let mut client = admin_client(s, timeout);
    let live = s.ctx.cluster.brokers.len();
    let mut resp = CreateTopicsResponse::default();
    let mut created = Vec::new();
    for topic in &req.topics {
        let mut out = CreatableTopicResult::default()
            .with_name(topic.name.clone())
            .with_num_partitions(-1)
            .with_replication_factor(-1);
        match plan(topic, live) {
            Err(reason) => {
                out.error_code = ResponseError::InvalidConfig.code();
                out.error_message = Some(StrBytes::from_string(reason));
            }
            Ok((config, assignment)) => {
                out.num_partitions = config.partitions as i32;
                out.replication_factor = config.replication_factor as i16;
                if !req.validate_only {
                    let name = topic.name.0.to_string();
                    let request = ControllerRequest::CreateTopic {
                        name,
                        config,
                        assignment,
                    };
                    let result = match client.controller_request(request).await {
                        Ok(ControllerResponse::CreateTopic { result, .. }) => {
                            result.map(|_| ()).map_err(crate::client::ClientError::from)
                        }
                        Ok(other) => Err(crate::client::ClientError::Unexpected {
                            addr: s.ctx.cluster.first_controller(),
                            what: format!("{other:?}"),
                        }),
                        Err(e) => Err(e),
                    };
                    match result {
                        Ok(()) => {
                            created.push((topic.name.0.to_string(), out.num_partitions as u32))
                        }
                        Err(e) => {
                            out.error_code = errors::admin(&e);
                            out.error_message = Some(StrBytes::from_string(e.to_string()));
                        }
                    }
                }
            }
        }
        resp.topics.push(out);
    }
    // As Kafka does within the request's timeout: answer once the brokers serve the new
    // topics, so that the client's next Metadata request, to whichever broker, finds them
    // (librdkafka drops a topic that a lagging broker calls unknown). A timeout of 0 asks
    // not to wait. One deadline for all of them.
    if req.timeout_ms > 0 {
        let deadline = tokio::time::Instant::now() + timeout;
        for (name, partitions) in created {
            let within = deadline.saturating_duration_since(tokio::time::Instant::now());
            let (_, late) = client
                .wait_topic_on_brokers(&name, partitions, within)
                .await;
            for (id, why) in late {
                tracing::debug!(topic = %name, broker = id, %why, "kafka: created topic not served yet");
            }
        }
    }
    resp
}

type Assignment = Option<Vec<Vec<u32>>>;

/// The Skein topic config and replica assignment a CreatableTopic asks for.
fn plan(topic: &CreatableTopic, brokers: usize) -> Result<(TopicConfig, Assignment), String> {
    let mut config = TopicConfig::default();
    let assignment = if topic.assignments.is_empty() {
        config.partitions = if topic.num_partitions > 0 {
            topic.num_partitions as u32
        } else {
            1
        };
        config.replication_factor = if topic.replication_factor > 0 {
            topic.replication_factor as u16
        } else {
            brokers.min(3) as u16
        };
        None
    } else {
        let mut parts: Vec<_> = topic.assignments.iter().collect();
        parts.sort_by_key(|a| a.partition_index);
        let lists: Vec<Vec<u32>> = parts
            .iter()
            .map(|a| a.broker_ids.iter().map(|b| b.0.max(0) as u32).collect())
            .collect();
        config.partitions = lists.len() as u32;
        config.replication_factor = lists.first().map_or(1, |l| l.len() as u16);
        Some(lists)
    };
    for c in &topic.configs {
        let value = c.value.as_ref().map(|v| v.to_string()).unwrap_or_default();
        crate::topic_configs::apply(&mut config, c.name.as_str(), &value)
            .map_err(|e| e.to_string())?;
    }
    Ok((config, assignment))
}

/// DeleteTopics v1-3: each named topic deleted through the controller, one result each.
pub async fn delete_topics(s: &mut Session, req: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let timeout = Duration::from_millis(u64::try_from(req.timeout_ms).unwrap_or(0).max(1000));
    let mut client = admin_client(s, timeout);
    let mut resp = DeleteTopicsResponse::default();
    for name in &req.topic_names {
        let mut out = DeletableTopicResult::default().with_name(Some(name.clone()));
        if let Err(e) = client.delete_topic(name.0.as_str()).await {
            out.error_code = errors::admin(&e);
            out.error_message = Some(StrBytes::from_string(e.to_string()));
        }
        resp.responses.push(out);
    }
    resp
}

/// Kafka's ConfigResource types.
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// Kafka's ConfigSource values.
const SOURCE_DYNAMIC_TOPIC: i8 = 1;
const SOURCE_DEFAULT: i8 = 5;
/// Kafka's ConfigType values (DescribeConfigs v3).
const TYPE_BOOLEAN: i8 = 1;
const TYPE_STRING: i8 = 2;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;
const TYPE_DOUBLE: i8 = 6;
const TYPE_LIST: i8 = 7;

/// One described config: (name, value, Kafka type, whether it differs from the default).
type Described = (&'static str, String, i8, bool);

/// The Kafka names and values of the topic configs Skein has (those CreateTopics
/// accepts), and whether each one was set rather than left at Skein's default.
fn topic_configs(c: &TopicConfig) -> Vec<Described> {
    let d = TopicConfig::default();
    vec![
        (
            "min.insync.replicas",
            c.min_insync_replicas.to_string(),
            TYPE_INT,
            c.min_insync_replicas != d.min_insync_replicas,
        ),
        (
            "retention.ms",
            c.retention_ms.unwrap_or(-1).to_string(),
            TYPE_LONG,
            c.retention_ms != d.retention_ms,
        ),
        (
            "retention.bytes",
            c.retention_bytes
                .map_or(-1, |b| i64::try_from(b).unwrap_or(i64::MAX))
                .to_string(),
            TYPE_LONG,
            c.retention_bytes != d.retention_bytes,
        ),
        (
            "unclean.leader.election.enable",
            c.unclean_leader_election.to_string(),
            TYPE_BOOLEAN,
            c.unclean_leader_election != d.unclean_leader_election,
        ),
        (
            "unclean.recovery.strategy",
            c.unclean_recovery_strategy.name().to_string(),
            TYPE_STRING,
            c.unclean_recovery_strategy != d.unclean_recovery_strategy,
        ),
        (
            "cleanup.policy",
            c.cleanup_policy.name().to_string(),
            TYPE_LIST,
            c.cleanup_policy != d.cleanup_policy,
        ),
        (
            "delete.retention.ms",
            c.delete_retention_ms.to_string(),
            TYPE_LONG,
            c.delete_retention_ms != d.delete_retention_ms,
        ),
        (
            "min.compaction.lag.ms",
            c.min_compaction_lag_ms.to_string(),
            TYPE_LONG,
            c.min_compaction_lag_ms != d.min_compaction_lag_ms,
        ),
        (
            "min.cleanable.dirty.ratio",
            crate::topic_configs::ratio_text(c.min_cleanable_dirty_ratio_permille),
            TYPE_DOUBLE,
            c.min_cleanable_dirty_ratio_permille != d.min_cleanable_dirty_ratio_permille,
        ),
    ]
}

/// DescribeConfigs v1-3, minimal: a topic's Skein configs from the controller's image
/// (read-only here: there is no AlterConfigs); a broker has no described configs (an empty
/// list, no error), any other resource type is refused with INVALID_REQUEST.
pub async fn describe_configs(
    s: &mut Session,
    req: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let needs_image = req
        .resources
        .iter()
        .any(|r| r.resource_type == RESOURCE_TOPIC);
    let image = if needs_image {
        Some(
            admin_client(s, Duration::from_secs(5))
                .cluster_image()
                .await,
        )
    } else {
        None
    };
    let mut resp = DescribeConfigsResponse::default();
    for r in &req.resources {
        let mut out = DescribeConfigsResult::default()
            .with_resource_type(r.resource_type)
            .with_resource_name(r.resource_name.clone());
        let wanted = |name: &str| {
            r.configuration_keys
                .as_ref()
                .is_none_or(|keys| keys.iter().any(|k| k.as_str() == name))
        };
        match (r.resource_type, &image) {
            (RESOURCE_BROKER, _) => {}
            (RESOURCE_TOPIC, Some(Err(e))) => {
                out.error_code = errors::admin(e);
                out.error_message = Some(StrBytes::from_string(e.to_string()));
            }
            (RESOURCE_TOPIC, Some(Ok(image))) => match image.topic(r.resource_name.as_str()) {
                None => {
                    out.error_code = ResponseError::UnknownTopicOrPartition.code();
                    out.error_message = Some(StrBytes::from_string(format!(
                        "unknown topic {}",
                        r.resource_name.as_str()
                    )));
                }
                Some(topic) => {
                    for (name, value, config_type, set) in topic_configs(&topic.config) {
                        if !wanted(name) {
                            continue;
                        }
                        out.configs.push(
                            DescribeConfigsResourceResult::default()
                                .with_name(StrBytes::from_static_str(name))
                                .with_value(Some(StrBytes::from_string(value)))
                                .with_read_only(true)
                                .with_config_source(if set {
                                    SOURCE_DYNAMIC_TOPIC
                                } else {
                                    SOURCE_DEFAULT
                                })
                                .with_config_type(config_type),
                        );
                    }
                }
            },
            _ => {
                out.error_code = errors::invalid_request();
                out.error_message = Some(StrBytes::from_string(format!(
                    "resource type {} is not described by Skein (topics: 2, brokers: 4)",
                    r.resource_type
                )));
            }
        }
        resp.results.push(out);
    }
    resp
}
