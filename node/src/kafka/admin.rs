//! CreateTopics, forwarded to Skein's controller through the ordinary Skein client (the
//! controller speaks no Kafka; any broker accepts the request, see `metadata`'s
//! controller id). Understood configs: min.insync.replicas, retention.ms,
//! retention.bytes, unclean.leader.election.enable; others are refused (INVALID_CONFIG).

use super::errors;
use super::session::Session;
use crate::client::{Client, ClientOptions};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use skein_core::controller::{ControllerRequest, ControllerResponse, TopicConfig};
use std::time::Duration;

pub async fn handle(s: &mut Session, req: CreateTopicsRequest) -> CreateTopicsResponse {
    let timeout = Duration::from_millis(u64::try_from(req.timeout_ms).unwrap_or(0).max(1000));
    let mut client = Client::new(
        (*s.ctx.cluster).clone(),
        ClientOptions {
            request_timeout: timeout,
            ..ClientOptions::default()
        },
    );
    let live = s.ctx.cluster.brokers.len();
    let mut resp = CreateTopicsResponse::default();
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
                            addr: s.ctx.cluster.controller,
                            what: format!("{other:?}"),
                        }),
                        Err(e) => Err(e),
                    };
                    if let Err(e) = result {
                        out.error_code = errors::admin(&e);
                        out.error_message = Some(StrBytes::from_string(e.to_string()));
                    }
                }
            }
        }
        resp.topics.push(out);
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
        let bad = |_| format!("{} = {value:?} is not a number", c.name);
        match c.name.as_str() {
            "min.insync.replicas" => config.min_insync_replicas = value.parse().map_err(bad)?,
            "retention.ms" => {
                let ms: i64 = value.parse().map_err(bad)?;
                config.retention_ms = (ms >= 0).then_some(ms);
            }
            "retention.bytes" => {
                let b: i64 = value.parse().map_err(bad)?;
                config.retention_bytes = u64::try_from(b).ok();
            }
            "unclean.leader.election.enable" => {
                config.unclean_leader_election = value == "true";
            }
            other => return Err(format!("config {other} is not supported by Skein")),
        }
    }
    Ok((config, assignment))
}
