//! Metadata: the local broker's image (brokers, leaders, replicas, ISR) with every broker
//! named by its Kafka listener. Brokers without a Kafka listener are left out; partitions
//! led by one of them then show that leader id, and the client's produce to it fails
//! until the leader moves (docs/kafka.md).

use super::errors;
use super::session::Session;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use skein_core::message::{self, Message, PartitionMetadata};
use std::collections::BTreeMap;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(5);

pub async fn handle(s: &mut Session, req: MetadataRequest, version: i16) -> MetadataResponse {
    let topics: Option<Vec<String>> = match req.topics {
        // v0 has no null: an empty list means every topic.
        Some(t) if version == 0 && t.is_empty() => None,
        Some(t) => Some(
            t.into_iter()
                .filter_map(|t| t.name.map(|n| n.0.to_string()))
                .collect(),
        ),
        None => None,
    };
    let correlation = s.correlation();
    let request = Message::Metadata(message::MetadataRequest {
        correlation,
        topics,
    });
    let me = s.ctx.node;
    let mut resp = MetadataResponse::default()
        .with_cluster_id(Some(StrBytes::from_static_str("skein")))
        // Skein's controller speaks no Kafka: admin requests sent "to the controller"
        // come to any broker, which forwards them.
        .with_controller_id(BrokerId(me as i32));
    let Some(Message::MetadataResponse(m)) = s.call(request, TIMEOUT).await else {
        tracing::debug!("kafka: no metadata answer from the local broker");
        // No topics at all rather than an error per topic: librdkafka takes a topic
        // error with no partitions as the topic's end and fails every record it holds
        // for it, where a reply that leaves a topic out changes nothing and it asks
        // again.
        resp.brokers = brokers(s, &[me]);
        return resp;
    };
    resp.brokers = brokers(s, &m.brokers);
    let mut by_topic: BTreeMap<String, Vec<PartitionMetadata>> = BTreeMap::new();
    for p in m.partitions {
        by_topic.entry(p.tp.topic.clone()).or_default().push(p);
    }
    for (name, mut parts) in by_topic {
        parts.sort_by_key(|p| p.tp.partition);
        let internal = name.starts_with("__");
        resp.topics.push(
            MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(name))))
                .with_is_internal(internal)
                .with_partitions(parts.iter().map(partition).collect()),
        );
    }
    for t in m.unknown_topics {
        resp.topics.push(topic_error(t, errors::unknown_topic()));
    }
    resp
}

fn brokers(s: &Session, ids: &[u32]) -> Vec<MetadataResponseBroker> {
    let mut ids = ids.to_vec();
    if !ids.contains(&s.ctx.node) {
        ids.push(s.ctx.node);
    }
    ids.sort_unstable();
    ids.into_iter()
        .filter_map(|id| {
            let addr = s.ctx.cluster.kafka_listener(id)?;
            Some(
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(id as i32))
                    .with_host(StrBytes::from_string(addr.ip().to_string()))
                    .with_port(i32::from(addr.port())),
            )
        })
        .collect()
}

fn ids(v: &[u32]) -> Vec<BrokerId> {
    v.iter().map(|id| BrokerId(*id as i32)).collect()
}

fn partition(p: &PartitionMetadata) -> MetadataResponsePartition {
    let (error, leader) = match p.leader {
        Some(l) => (errors::NONE, l as i32),
        None => (errors::leader_not_available(), -1),
    };
    MetadataResponsePartition::default()
        .with_error_code(error)
        .with_partition_index(p.tp.partition as i32)
        .with_leader_id(BrokerId(leader))
        .with_leader_epoch(p.leader_epoch as i32)
        .with_replica_nodes(ids(&p.replicas))
        .with_isr_nodes(ids(&p.isr))
}

fn topic_error(name: String, code: i16) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(code)
        .with_name(Some(TopicName(StrBytes::from_string(name))))
}
