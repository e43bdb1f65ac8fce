//! The group consumer's requests and answers on the wire: one translation for every host.
//!
//! [`GroupConsumer`](crate::client::GroupConsumer) speaks in [`ConsumerRequest`] /
//! [`ConsumerResponse`] to abstract [`Destination`]s; a host resolves the destination with
//! [`route`] (a partition's leader from its [`LeaderCache`]), sends the [`Message`] that
//! [`to_message`] builds under the consumer's correlation id, keeps the [`Pending`] it
//! returns, and turns the broker's answer back with [`from_message`], which also teaches the
//! cache what the answer says about leaders.

use super::LeaderCache;
use crate::client::{ConsumerRequest, ConsumerResponse, Destination, Resolved};
use crate::message::{
    ConsumerFetchError, ConsumerFetchRequest, ListOffsetsRequest, Message, MetadataRequest,
};
use crate::types::{NodeId, TopicPartition};
use std::collections::BTreeMap;

/// A consumer request in flight, to turn its answer back into a [`ConsumerResponse`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pending {
    Group,
    Metadata { topics: Vec<String> },
    ListOffsets { tp: TopicPartition },
    Fetch { tp: TopicPartition },
}

/// Resolves `to` for `request`: no leader known is answered as the broker would
/// (`NotLeader`, no hint), so the consumer backs off and asks again.
pub fn route(
    to: &Destination,
    request: &ConsumerRequest,
    leaders: &mut LeaderCache,
) -> Resolved<ConsumerResponse> {
    to.resolve(leaders, || {
        let e = ConsumerFetchError::NotLeader {
            leader: None,
            leader_epoch: 0,
        };
        match request {
            ConsumerRequest::ListOffsets { .. } => ConsumerResponse::ListOffsets(Err(e)),
            _ => ConsumerResponse::Fetch(Err(e)),
        }
    })
}

/// The wire message for `request`, under `correlation`, and what to remember of it.
pub fn to_message(correlation: u64, request: ConsumerRequest) -> (Message, Pending) {
    match request {
        ConsumerRequest::Group(request) => (Message::group(correlation, request), Pending::Group),
        ConsumerRequest::Metadata { topics } => (
            Message::Metadata(MetadataRequest {
                correlation,
                topics: Some(topics.clone()),
            }),
            Pending::Metadata { topics },
        ),
        ConsumerRequest::ListOffsets {
            tp,
            spec,
            isolation,
        } => (
            Message::ListOffsets(ListOffsetsRequest {
                correlation,
                tp: tp.clone(),
                spec,
                isolation,
            }),
            Pending::ListOffsets { tp },
        ),
        ConsumerRequest::Fetch {
            tp,
            offset,
            max_bytes,
            last_fetched_epoch,
            isolation,
        } => (
            Message::ConsumerFetch(ConsumerFetchRequest {
                correlation,
                tp: tp.clone(),
                offset,
                max_bytes,
                current_leader_epoch: None,
                last_fetched_epoch,
                isolation,
            }),
            Pending::Fetch { tp },
        ),
    }
}

/// The consumer's view of broker `from`'s answer `msg` to the request `pending` (`None`: an
/// answer of another kind, dropped; the consumer times the request out). Leaders named or
/// refused by the answer go into `leaders`.
pub fn from_message(
    pending: Pending,
    from: Option<NodeId>,
    msg: Message,
    leaders: &mut LeaderCache,
) -> Option<ConsumerResponse> {
    Some(match (pending, msg) {
        (Pending::Group, Message::GroupResponse { response, .. }) => {
            ConsumerResponse::Group(*response)
        }
        (Pending::Metadata { topics }, Message::MetadataResponse(m)) => {
            leaders.learn(&m);
            let mut counts: BTreeMap<String, u32> = BTreeMap::new();
            for p in &m.partitions {
                if topics.contains(&p.tp.topic) {
                    *counts.entry(p.tp.topic.clone()).or_default() += 1;
                }
            }
            ConsumerResponse::Metadata { topics: counts }
        }
        (Pending::ListOffsets { tp }, Message::ListOffsetsResponse(r)) => {
            if let Err(e) = &r.result {
                leaders.on_fetch_error(&tp, from, e);
            }
            ConsumerResponse::ListOffsets(r.result.map(|l| l.map(|l| l.offset)))
        }
        (Pending::Fetch { tp }, Message::ConsumerFetchResponse(r)) => {
            if let Err(e) = &r.result {
                leaders.on_fetch_error(&tp, from, e);
            }
            ConsumerResponse::Fetch(r.result)
        }
        _ => return None,
    })
}
