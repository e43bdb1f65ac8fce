//! A Kafka wire-protocol listener, so real Kafka clients (kcat, librdkafka, ...) produce
//! to and consume from a Skein broker. Each broker with a `kafka_listener` in its peer-list
//! entry serves it; every Kafka request is translated to the same Skein requests a Skein
//! client sends ([`skein_core::message`]) and handed to the local state machine, whose
//! answers are translated back. The protocol's encode/decode (every message at every
//! version, record batch v2 with CRC-32C) is the `kafka-protocol` crate's; this module
//! owns framing, the version table, translation and error codes. What is supported per
//! API and version: docs/kafka.md.
//!
//! One task per connection handles requests in order, one at a time (Kafka requires
//! answers in request order on a connection). A frame that cannot be decoded (bad size,
//! unknown api key or version, truncated or malformed body) closes that connection with
//! a logged reason; nothing a client sends panics the broker.

mod admin;
pub mod codec;
mod errors;
mod fetch;
/// Fuzz harness ([`crate::fuzzing`]); not an API.
pub(crate) mod fuzz;
mod group_tools;
mod groups;
mod guard;
mod metadata;
mod offsets;
mod produce;
pub mod records;
mod session;
mod txn;
pub mod versions;

use crate::config::{ClusterAddresses, ValidNodeConfig};
use crate::runtime::{LocalBroker, StartError};
use bytes::Bytes;
use codec::{decode_request, encode_response, read_frame, Body, Request};
use kafka_protocol::messages::ApiKey;
use session::Session;
use skein_core::types::NodeId;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What every Kafka connection of this broker shares.
pub struct Ctx {
    pub node: NodeId,
    pub cluster: Arc<ClusterAddresses>,
    pub(crate) local: LocalBroker,
    pub max_frame: u32,
}

/// Binds `addr` and serves Kafka there until shutdown; returns the accept task and the
/// bound address.
pub(crate) async fn start(
    addr: SocketAddr,
    node: NodeId,
    cfg: &ValidNodeConfig,
    local: LocalBroker,
    shutdown: watch::Receiver<bool>,
) -> Result<(JoinHandle<()>, SocketAddr), StartError> {
    let listen_err = |e: std::io::Error| StartError::Listen {
        addr,
        reason: e.to_string(),
    };
    let listener = TcpListener::bind(addr).await.map_err(listen_err)?;
    let bound = listener.local_addr().map_err(listen_err)?;
    let ctx = Arc::new(Ctx {
        node,
        cluster: Arc::new(cfg.cluster.clone()),
        local,
        max_frame: cfg.max_frame_bytes,
    });
    tracing::info!(%bound, "kafka listener started");
    Ok((tokio::spawn(accept_loop(listener, ctx, shutdown)), bound))
}

async fn accept_loop(listener: TcpListener, ctx: Arc<Ctx>, shutdown: watch::Receiver<bool>) {
    crate::runtime::accept_connections(listener, "kafka", shutdown, move |stream, peer, sd| {
        serve(stream, peer, ctx.clone(), sd)
    })
    .await
}

/// One Kafka connection: frames in, answers out, until the client leaves, sends
/// something undecodable, or the node stops.
async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    ctx: Arc<Ctx>,
    mut shutdown: watch::Receiver<bool>,
) {
    let (mut rd, mut wr) = crate::net::split(stream);
    let max = ctx.max_frame;
    let mut session = Session::new(ctx);
    tracing::debug!(%peer, "kafka: connection open");
    loop {
        let frame = tokio::select! {
            _ = shutdown.changed() => return,
            f = read_frame(&mut rd, max) => f,
        };
        let request = match frame.map(|f| f.map(decode_request)) {
            Ok(None) => return,
            Ok(Some(Ok(r))) => r,
            Ok(Some(Err(e))) | Err(e) => {
                if let codec::CodecError::Io(io) = &e {
                    tracing::debug!(%peer, error = %io, "kafka: connection lost");
                } else {
                    tracing::warn!(%peer, reason = %e, "kafka: closing connection: bad input");
                }
                return;
            }
        };
        let answer = match respond(&mut session, request).await {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(%peer, error = %e, "kafka: cannot encode a response; closing");
                return;
            }
        };
        if let Some(bytes) = answer {
            if wr.write_all(&bytes).await.is_err() || wr.flush().await.is_err() {
                return;
            }
        }
    }
}

/// Handles one request; Ok(None) when Kafka sends no answer (produce with acks = 0).
async fn respond(s: &mut Session, req: Request) -> anyhow::Result<Option<Bytes>> {
    let version = req.header.request_api_version;
    let corr = req.header.correlation_id;
    let bytes = match req.body {
        Body::ApiVersions(_) => {
            let resp = versions::api_versions_response(errors::NONE);
            encode_response(ApiKey::ApiVersions, version, corr, &resp)?
        }
        Body::ApiVersionsTooNew => {
            let resp = versions::api_versions_response(errors::unsupported_version());
            encode_response(ApiKey::ApiVersions, 0, corr, &resp)?
        }
        Body::Metadata(r) => {
            let resp = metadata::handle(s, r, version).await;
            encode_response(ApiKey::Metadata, version, corr, &resp)?
        }
        Body::Produce(r) => match produce::handle(s, r).await {
            Some(resp) => encode_response(ApiKey::Produce, version, corr, &resp)?,
            None => return Ok(None),
        },
        Body::Fetch(r) => {
            let resp = fetch::handle(s, r).await;
            encode_response(ApiKey::Fetch, version, corr, &resp)?
        }
        Body::ListOffsets(r) => {
            let resp = offsets::handle(s, r, version).await;
            encode_response(ApiKey::ListOffsets, version, corr, &resp)?
        }
        Body::CreateTopics(r) => {
            let resp = admin::handle(s, r).await;
            encode_response(ApiKey::CreateTopics, version, corr, &resp)?
        }
        Body::DeleteTopics(r) => {
            let resp = admin::delete_topics(s, r).await;
            encode_response(ApiKey::DeleteTopics, version, corr, &resp)?
        }
        Body::DescribeConfigs(r) => {
            let resp = admin::describe_configs(s, r).await;
            encode_response(ApiKey::DescribeConfigs, version, corr, &resp)?
        }
        Body::InitProducerId(r) => {
            let resp = match r.transactional_id.as_ref().map(|id| id.0.to_string()) {
                Some(id) => txn::init_producer_id(s, id, &r).await,
                None => admin::init_producer_id(s, r).await,
            };
            encode_response(ApiKey::InitProducerId, version, corr, &resp)?
        }
        body @ (Body::AddPartitionsToTxn(_)
        | Body::AddOffsetsToTxn(_)
        | Body::EndTxn(_)
        | Body::TxnOffsetCommit(_)) => txn_request(s, body, version, corr).await?,
        body => group_request(s, body, version, corr).await?,
    };
    Ok(Some(bytes))
}

/// The transaction APIs (FindCoordinator and InitProducerId aside).
async fn txn_request(
    s: &mut Session,
    body: Body,
    version: i16,
    corr: i32,
) -> anyhow::Result<Bytes> {
    Ok(match body {
        Body::AddPartitionsToTxn(r) => {
            let resp = txn::add_partitions(s, r).await;
            encode_response(ApiKey::AddPartitionsToTxn, version, corr, &resp)?
        }
        Body::AddOffsetsToTxn(r) => {
            let resp = txn::add_offsets(s, r).await;
            encode_response(ApiKey::AddOffsetsToTxn, version, corr, &resp)?
        }
        Body::EndTxn(r) => {
            let resp = txn::end_txn(s, r).await;
            encode_response(ApiKey::EndTxn, version, corr, &resp)?
        }
        Body::TxnOffsetCommit(r) => {
            let resp = txn::txn_offset_commit(s, r).await;
            encode_response(ApiKey::TxnOffsetCommit, version, corr, &resp)?
        }
        other => anyhow::bail!("not a transaction request: {other:?}"),
    })
}

/// The consumer-group APIs and the group tooling.
async fn group_request(
    s: &mut Session,
    body: Body,
    version: i16,
    corr: i32,
) -> anyhow::Result<Bytes> {
    Ok(match body {
        Body::FindCoordinator(r) => {
            let resp = groups::find_coordinator(s, r).await;
            encode_response(ApiKey::FindCoordinator, version, corr, &resp)?
        }
        Body::JoinGroup(r) => {
            let resp = groups::join_group(s, r, version).await;
            encode_response(ApiKey::JoinGroup, version, corr, &resp)?
        }
        Body::SyncGroup(r) => {
            let resp = groups::sync_group(s, r).await;
            encode_response(ApiKey::SyncGroup, version, corr, &resp)?
        }
        Body::Heartbeat(r) => {
            let resp = groups::heartbeat(s, r).await;
            encode_response(ApiKey::Heartbeat, version, corr, &resp)?
        }
        Body::LeaveGroup(r) => {
            let resp = groups::leave_group(s, r, version).await;
            encode_response(ApiKey::LeaveGroup, version, corr, &resp)?
        }
        Body::OffsetCommit(r) => {
            let resp = groups::offset_commit(s, r).await;
            encode_response(ApiKey::OffsetCommit, version, corr, &resp)?
        }
        Body::OffsetFetch(r) => {
            let resp = groups::offset_fetch(s, r, version).await;
            encode_response(ApiKey::OffsetFetch, version, corr, &resp)?
        }
        Body::ListGroups(_) => {
            let resp = group_tools::list_groups(s).await;
            encode_response(ApiKey::ListGroups, version, corr, &resp)?
        }
        Body::DescribeGroups(r) => {
            let resp = group_tools::describe_groups(s, r).await;
            encode_response(ApiKey::DescribeGroups, version, corr, &resp)?
        }
        Body::DeleteGroups(r) => {
            let resp = group_tools::delete_groups(s, r).await;
            encode_response(ApiKey::DeleteGroups, version, corr, &resp)?
        }
        Body::OffsetDelete(r) => {
            let resp = group_tools::offset_delete(s, r).await;
            encode_response(ApiKey::OffsetDelete, version, corr, &resp)?
        }
        other => anyhow::bail!("not a group request: {other:?}"),
    })
}
