//! The client side of the protocol: admin calls to the controller, produce and consume
//! against partition leaders, following leader changes through broker metadata.
//!
//! A [`Conn`] is one TCP connection with at most one request in flight, so a reply is the
//! next frame whose correlation id matches. [`Client`] keeps one `Conn` per node and
//! drives core's sans-I/O client (`skein_core::client`: leader cache, produce retry policy,
//! fetch cursor), the same code the simulator's clients run; this file holds the sockets,
//! the waiting and the retry deadline (see [`Client::produce`]).

use crate::config::ClusterAddresses;
use crate::frame::{read_frame, write_frame, Frame, FrameError, Hello, Peer, DEFAULT_MAX_FRAME};
use crate::net::{ReadHalf as OwnedReadHalf, WriteHalf as OwnedWriteHalf};
use skein_core::client::{
    ControllerRouter, ControllerView, FetchCursor, LeaderCache, ProduceClient, ProduceStep, Route,
    Truncation,
};
use skein_core::controller::{
    ControllerError, ControllerRequest, ControllerResponse, MetadataImage, TopicConfig,
};
use skein_core::log::{Codec, EncodeError, RecordBatch};
use skein_core::message::*;
use skein_core::producer::ProducerError;
use skein_core::types::{LeaderEpoch, NodeId, Offset, TopicPartition};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// What went wrong on the client side.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "cannot connect to {addr}: {reason} (is the node running? `skein cluster up` starts one)"
    )]
    Connect { addr: SocketAddr, reason: String },
    #[error("connection to {addr} failed: {reason}")]
    Io { addr: SocketAddr, reason: String },
    #[error("bad frame from {addr}: {error}")]
    Frame { addr: SocketAddr, error: FrameError },
    #[error("{addr} closed the connection: {reason}")]
    Goodbye { addr: SocketAddr, reason: String },
    #[error("no answer from {addr} within {timeout:?}")]
    Timeout { addr: SocketAddr, timeout: Duration },
    #[error("unexpected reply from {addr}: {what}")]
    Unexpected { addr: SocketAddr, what: String },
    #[error("controller refused: {0}")]
    Controller(#[from] ControllerError),
    #[error("unknown topic {0:?} (create it with `skein topic create {0}`)")]
    UnknownTopic(String),
    #[error("{tp}: no leader available after retrying for {waited:?}: {last}")]
    NoLeader {
        tp: TopicPartition,
        waited: Duration,
        last: String,
    },
    #[error("produce to {tp} failed: {error}")]
    Produce {
        tp: TopicPartition,
        error: ProduceError,
    },
    #[error("cannot encode a batch for {tp}: {error}")]
    Encode {
        tp: TopicPartition,
        error: EncodeError,
    },
    #[error("fetch from {tp} failed: {error}")]
    Fetch {
        tp: TopicPartition,
        error: ConsumerFetchError,
    },
    #[error("broker {0} is not in the cluster file")]
    UnknownBroker(NodeId),
    #[error("controller {0} is not in the cluster config")]
    UnknownController(NodeId),
    #[error("idempotent producer: {0}")]
    Producer(#[from] ProducerError),
    #[error("group coordinator refused: {0}")]
    Group(skein_core::group::GroupError),
    #[error(
        "no coordinator for group {group:?} after {waited:?}: {last} (are all brokers up? \
         `skein topic describe __consumer_offsets` shows its leaders)"
    )]
    NoCoordinator {
        group: String,
        waited: Duration,
        last: String,
    },
}

/// One connection, one request at a time.
/// A record to produce: key and value, each optional (no value: a tombstone).
pub type KeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);

pub struct Conn {
    addr: SocketAddr,
    rd: OwnedReadHalf,
    wr: BufWriter<OwnedWriteHalf>,
    max: u32,
}

impl Conn {
    pub async fn connect(addr: SocketAddr, max: u32) -> Result<Self, ClientError> {
        let connect_err = |reason: String| ClientError::Connect { addr, reason };
        let stream = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr))
            .await
            .map_err(|_| connect_err("timed out".into()))?
            .map_err(|e| connect_err(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        let (rd, wr) = crate::net::split(stream);
        let mut conn = Self {
            addr,
            rd,
            wr: BufWriter::new(wr),
            max,
        };
        conn.send_frame(&Frame::Hello(Hello { from: Peer::Client }))
            .await?;
        Ok(conn)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    async fn send_frame(&mut self, frame: &Frame) -> Result<(), ClientError> {
        let io = |reason: String| ClientError::Io {
            addr: self.addr,
            reason,
        };
        write_frame(&mut self.wr, frame, self.max)
            .await
            .map_err(|e| io(e.to_string()))?;
        self.wr.flush().await.map_err(|e| io(e.to_string()))
    }

    pub async fn send(&mut self, msg: Message) -> Result<(), ClientError> {
        self.send_frame(&Frame::Msg(msg)).await
    }

    /// The next message; a Goodbye or a closed connection is an error.
    pub async fn recv(&mut self, timeout: Duration) -> Result<Message, ClientError> {
        let addr = self.addr;
        let frame = tokio::time::timeout(timeout, read_frame(&mut self.rd, self.max))
            .await
            .map_err(|_| ClientError::Timeout { addr, timeout })?;
        match frame {
            Ok(Some(Frame::Msg(m))) => Ok(m),
            Ok(Some(Frame::Goodbye(g))) => Err(ClientError::Goodbye {
                addr,
                reason: g.reason,
            }),
            Ok(Some(Frame::Hello(_) | Frame::StatsRequest | Frame::Stats(_))) => {
                Err(ClientError::Unexpected {
                    addr,
                    what: "a runtime frame where a message was expected".into(),
                })
            }
            Ok(None) => Err(ClientError::Io {
                addr,
                reason: "connection closed".into(),
            }),
            Err(FrameError::Io(reason)) => Err(ClientError::Io { addr, reason }),
            Err(error) => Err(ClientError::Frame { addr, error }),
        }
    }
}

impl Conn {
    /// The node's metrics snapshot (`skein admin stats`).
    pub async fn stats(
        &mut self,
        timeout: Duration,
    ) -> Result<crate::stats::StatsSnapshot, ClientError> {
        self.send_frame(&Frame::StatsRequest).await?;
        let addr = self.addr;
        let frame = tokio::time::timeout(timeout, read_frame(&mut self.rd, self.max))
            .await
            .map_err(|_| ClientError::Timeout { addr, timeout })?;
        match frame {
            Ok(Some(Frame::Stats(s))) => Ok(*s),
            Ok(Some(Frame::Goodbye(g))) => Err(ClientError::Goodbye {
                addr,
                reason: g.reason,
            }),
            Ok(Some(other)) => Err(ClientError::Unexpected {
                addr,
                what: format!("{other:?}"),
            }),
            Ok(None) => Err(ClientError::Io {
                addr,
                reason: "connection closed".into(),
            }),
            Err(FrameError::Io(reason)) => Err(ClientError::Io { addr, reason }),
            Err(error) => Err(ClientError::Frame { addr, error }),
        }
    }
}

/// What [`Client::fetch_next`] returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    /// Committed records: (offset, value), in offset order.
    pub records: Vec<(Offset, Option<Vec<u8>>)>,
    pub high_watermark: Offset,
    /// The partition's last stable offset: the end of what a read_committed reader may
    /// see (the high watermark when no transaction is open).
    pub last_stable_offset: Offset,
    /// Where the next fetch starts (past the records and any leader-epoch markers).
    pub next_offset: Offset,
    /// The log was truncated under the reader (an unclean election) and it moved back to
    /// the divergence point before reading `records` (KIP-320; core's fetch cursor).
    pub truncation: Option<Truncation>,
}

/// Client tunables.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Wait for one reply.
    pub request_timeout: Duration,
    /// Keep retrying retriable failures (no leader, connection lost) for this long.
    pub retry_for: Duration,
    pub retry_backoff: Duration,
    pub max_frame: u32,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(10),
            retry_for: Duration::from_secs(30),
            retry_backoff: Duration::from_millis(100),
            max_frame: DEFAULT_MAX_FRAME,
        }
    }
}

/// A producer / consumer / admin client of one cluster.
pub struct Client {
    cluster: ClusterAddresses,
    opts: ClientOptions,
    brokers: BTreeMap<NodeId, Conn>,
    /// The connection to the controller last asked, and its id.
    controller: Option<(NodeId, Conn)>,
    /// Which controller to ask: core's routing (the simulated clients use the same), which
    /// follows `NotController` hints and otherwise takes the controllers in turn.
    router: ControllerRouter,
    /// Partition leaders (core's cache, the one the simulator's clients use too).
    leaders: LeaderCache,
    /// The controller's metadata, pulled incrementally (admin calls, leader checks).
    view: ControllerView,
    next_correlation: u64,
    /// Stamps and judges produced batches (core's retry policy). Idempotent after
    /// `enable_idempotence`: batches carry producer id, epoch and sequence, so a retried
    /// batch the leader already has is answered as a duplicate, not written twice.
    producer: ProduceClient,
    /// Per partition, the reader's place and the epoch of the last batch it read (core's
    /// cursor), so each fetch lets the leader detect a log truncated under the reader.
    cursors: BTreeMap<TopicPartition, FetchCursor>,
    /// The codec produced batches are stored with (`set_compression`).
    compression: Codec,
    /// What fetches and `Latest` offsets see (`set_isolation`).
    isolation: skein_core::txn::IsolationLevel,
}

/// Acknowledgement of one produced batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Produced {
    /// Offset of the first record (None for acks = 0: nothing is acknowledged).
    pub base_offset: Option<Offset>,
    pub count: usize,
}

impl Client {
    pub fn new(cluster: ClusterAddresses, opts: ClientOptions) -> Self {
        Self {
            router: ControllerRouter::new(cluster.controllers.len() as u32),
            cluster,
            opts,
            brokers: BTreeMap::new(),
            controller: None,
            // The real client refreshes on demand (`leader(tp, true)`), not on a schedule.
            leaders: LeaderCache::new(0, 0),
            view: ControllerView::new(),
            next_correlation: 1,
            producer: ProduceClient::plain(),
            cursors: BTreeMap::new(),
            compression: Codec::None,
            isolation: Default::default(),
        }
    }

    pub fn cluster(&self) -> &ClusterAddresses {
        &self.cluster
    }

    /// Batches produced from now on are stored compressed with `codec` (the records
    /// section of each batch, docs/format.md); consumers decode them whatever the codec.
    pub fn set_compression(&mut self, codec: Codec) {
        self.compression = codec;
    }

    /// Reads from now on under `isolation`: `ReadCommitted` stops at each partition's last
    /// stable offset (also what `Latest` means) and drops aborted transactions' records.
    pub fn set_isolation(&mut self, isolation: skein_core::txn::IsolationLevel) {
        if isolation != self.isolation {
            self.cursors.clear();
        }
        self.isolation = isolation;
    }

    /// What reads see (`set_isolation`).
    pub fn isolation(&self) -> skein_core::txn::IsolationLevel {
        self.isolation
    }

    fn correlation(&mut self) -> u64 {
        self.next_correlation += 1;
        self.next_correlation
    }

    /// One request to the controller and its reply. With a controller quorum, the request
    /// goes to the active controller: a `NotController` answer moves it to the hinted
    /// controller, no answer (or no hint) to the next one (core's `ControllerRouter`), for
    /// up to `retry_for`. With a single controller, one attempt.
    pub async fn controller_request(
        &mut self,
        req: ControllerRequest,
    ) -> Result<ControllerResponse, ClientError> {
        let n = self.cluster.controllers.len() as u32;
        if n <= 1 {
            return self.controller_request_to(1, req).await;
        }
        let started = Instant::now();
        loop {
            let id = self.router.target();
            let res = self.controller_request_to(id, req.clone()).await;
            let route = match &res {
                Ok(resp) => self.router.on_answer(id, resp),
                Err(_) => {
                    self.router.on_no_answer(id);
                    Route::AskLater
                }
            };
            if route == Route::Answered || started.elapsed() >= self.opts.retry_for {
                return res;
            }
            tracing::debug!(
                controller = id,
                ?route,
                "controller request: trying another"
            );
            if route == Route::AskLater {
                // Every controller may be mid-election: do not spin.
                tokio::time::sleep(self.opts.retry_backoff).await;
            }
        }
    }

    /// The active controller of the quorum (1 with a single controller): the one that acts
    /// on a request instead of refusing it with `NotController`. Metadata reads do not tell
    /// (every controller serves them), so it asks to delete a topic that does not exist:
    /// the active controller answers that it does not know it and writes nothing, the
    /// others refuse. The jepsen harness asks it to aim faults at the active controller.
    pub async fn active_controller(&mut self) -> Result<NodeId, ClientError> {
        const PROBE: &str = "__skein-active-controller-probe";
        let resp = self
            .controller_request(ControllerRequest::DeleteTopic { name: PROBE.into() })
            .await?;
        match (&self.controller, resp.not_controller()) {
            (Some((id, _)), None) => Ok(*id),
            _ => Err(ClientError::Unexpected {
                addr: self.cluster.first_controller(),
                what: format!("no controller acted as the active one: {resp:?}"),
            }),
        }
    }

    /// One request to controller `id` and its reply.
    async fn controller_request_to(
        &mut self,
        id: NodeId,
        req: ControllerRequest,
    ) -> Result<ControllerResponse, ClientError> {
        if self.controller.as_ref().is_none_or(|(c, _)| *c != id) {
            self.controller = None;
            let addr = self
                .cluster
                .controller(id)
                .ok_or(ClientError::UnknownController(id))?;
            self.controller = Some((id, Conn::connect(addr, self.opts.max_frame).await?));
        }
        let timeout = self.opts.request_timeout;
        let (_, conn) = self.controller.as_mut().expect("connected above");
        let res = async {
            conn.send(Message::ControllerRequest(req)).await?;
            loop {
                match conn.recv(timeout).await? {
                    Message::ControllerResponse(r) => return Ok(*r),
                    other => tracing::debug!(?other, "ignoring non-controller reply"),
                }
            }
        }
        .await;
        if res.is_err() {
            self.controller = None;
        }
        res
    }

    /// The controller's whole metadata image (pulled in pages; later calls pull only what
    /// changed since).
    pub async fn cluster_image(&mut self) -> Result<MetadataImage, ClientError> {
        loop {
            let resp = self.controller_request(self.view.request()).await?;
            let ControllerResponse::Metadata(delta) = resp else {
                return Err(ClientError::Unexpected {
                    addr: self.cluster.first_controller(),
                    what: format!("{resp:?}"),
                });
            };
            match self.view.apply(&delta) {
                Ok(true) => return Ok(self.view.image().clone()),
                Ok(false) => {}
                Err(e) => {
                    self.view = ControllerView::new();
                    return Err(ClientError::Unexpected {
                        addr: self.cluster.first_controller(),
                        what: format!("metadata that does not apply: {e}"),
                    });
                }
            }
        }
    }

    /// Asks the controller for a producer id; from now on `produce` is idempotent (use
    /// with acks = all: only then is the leader's duplicate detection backed by the ISR).
    pub async fn enable_idempotence(&mut self) -> Result<(), ClientError> {
        let resp = self
            .controller_request(ControllerRequest::InitProducerId)
            .await?;
        match resp {
            ControllerResponse::InitProducerId(result) => {
                self.producer.init(result?);
                Ok(())
            }
            other => Err(self.unexpected_from_controller(&other)),
        }
    }

    pub fn is_idempotent(&self) -> bool {
        self.producer.is_idempotent()
    }

    pub async fn create_topic(
        &mut self,
        name: &str,
        config: TopicConfig,
    ) -> Result<u64, ClientError> {
        let resp = self
            .controller_request(ControllerRequest::CreateTopic {
                name: name.to_string(),
                config,
                assignment: None,
            })
            .await?;
        match resp {
            ControllerResponse::CreateTopic { result, .. } => Ok(result?),
            other => Err(self.unexpected_from_controller(&other)),
        }
    }

    pub async fn delete_topic(&mut self, name: &str) -> Result<(), ClientError> {
        let resp = self
            .controller_request(ControllerRequest::DeleteTopic {
                name: name.to_string(),
            })
            .await?;
        match resp {
            ControllerResponse::DeleteTopic { result, .. } => Ok(result?),
            other => Err(self.unexpected_from_controller(&other)),
        }
    }

    /// Ok while a partition-leader retry loop started at `started` may go on; after
    /// `retry_for`, NoLeader with the last reason.
    fn no_leader_yet(
        &self,
        tp: &TopicPartition,
        started: Instant,
        last: String,
    ) -> Result<(), ClientError> {
        if started.elapsed() < self.opts.retry_for {
            return Ok(());
        }
        Err(ClientError::NoLeader {
            tp: tp.clone(),
            waited: started.elapsed(),
            last,
        })
    }

    /// A reply of the wrong kind from broker `id`.
    fn unexpected_from_broker(&self, id: NodeId, reply: &Message) -> ClientError {
        match self.cluster.broker(id) {
            Some(addr) => ClientError::Unexpected {
                addr,
                what: format!("{reply:?}"),
            },
            None => ClientError::UnknownBroker(id),
        }
    }

    /// A reply of the wrong kind from the controller.
    fn unexpected_from_controller(&self, reply: &impl std::fmt::Debug) -> ClientError {
        ClientError::Unexpected {
            addr: self.cluster.first_controller(),
            what: format!("{reply:?}"),
        }
    }

    /// Sends `msg` to broker `id` and waits for the reply with the same correlation.
    async fn broker_request(&mut self, id: NodeId, msg: Message) -> Result<Message, ClientError> {
        let want = msg.request_correlation();
        let timeout = self.opts.request_timeout;
        let conn = self.broker_conn(id).await?;
        let res = async {
            conn.send(msg).await?;
            loop {
                let reply = conn.recv(timeout).await?;
                if reply.response_correlation() == want {
                    return Ok(reply);
                }
            }
        }
        .await;
        if res.is_err() {
            self.brokers.remove(&id);
        }
        res
    }

    async fn broker_conn(&mut self, id: NodeId) -> Result<&mut Conn, ClientError> {
        if !self.brokers.contains_key(&id) {
            let addr = self
                .cluster
                .broker(id)
                .ok_or(ClientError::UnknownBroker(id))?;
            let conn = Conn::connect(addr, self.opts.max_frame).await?;
            self.brokers.insert(id, conn);
        }
        Ok(self.brokers.get_mut(&id).expect("inserted above"))
    }

    /// A group request to broker `id`; its answer.
    pub async fn group_request(
        &mut self,
        id: NodeId,
        request: skein_core::group::GroupRequest,
    ) -> Result<skein_core::group::GroupResponse, ClientError> {
        let correlation = self.correlation();
        let msg = Message::group(correlation, request);
        match self.broker_request(id, msg).await? {
            Message::GroupResponse { response, .. } => Ok(*response),
            other => Err(self.unexpected_from_broker(id, &other)),
        }
    }

    /// Describes group `group_id`: finds its coordinator (retrying while
    /// `__consumer_offsets` is being created or loaded), then asks it.
    pub async fn describe_group(
        &mut self,
        group_id: &str,
    ) -> Result<(NodeId, skein_core::group::GroupDescription), ClientError> {
        use skein_core::group::{GroupError, GroupRequest, GroupResponse};
        let started = Instant::now();
        let ids: Vec<NodeId> = self.cluster.brokers.iter().map(|(id, _)| *id).collect();
        let mut i = 0;
        loop {
            let any = ids[i % ids.len()];
            i += 1;
            let find = GroupRequest::FindCoordinator {
                group_id: group_id.to_string(),
            };
            let last = match self.group_request(any, find).await {
                Ok(GroupResponse::FindCoordinator(Ok(info))) => {
                    let describe = GroupRequest::DescribeGroup {
                        group_id: group_id.to_string(),
                    };
                    match self.group_request(info.node, describe).await {
                        Ok(GroupResponse::DescribeGroup(Ok(d))) => return Ok((info.node, d)),
                        Ok(GroupResponse::DescribeGroup(Err(e))) if e.is_retriable() => {
                            e.to_string()
                        }
                        Ok(GroupResponse::DescribeGroup(Err(e))) => {
                            return Err(ClientError::Group(e))
                        }
                        Ok(other) => format!("unexpected reply {other:?}"),
                        Err(e) => e.to_string(),
                    }
                }
                Ok(GroupResponse::FindCoordinator(Err(e @ GroupError::InvalidGroupId))) => {
                    return Err(ClientError::Group(e))
                }
                Ok(GroupResponse::FindCoordinator(Err(e))) => e.to_string(),
                Ok(other) => format!("unexpected reply {other:?}"),
                Err(e) => e.to_string(),
            };
            if started.elapsed() >= self.opts.retry_for {
                return Err(ClientError::NoCoordinator {
                    group: group_id.to_string(),
                    waited: started.elapsed(),
                    last,
                });
            }
            tokio::time::sleep(self.opts.retry_backoff).await;
        }
    }

    /// Broker `id`'s own view of the cluster (all topics).
    pub async fn broker_metadata(&mut self, id: NodeId) -> Result<MetadataResponse, ClientError> {
        let correlation = self.correlation();
        let req = Message::Metadata(MetadataRequest {
            correlation,
            topics: None,
        });
        match self.broker_request(id, req).await? {
            Message::MetadataResponse(m) => Ok(m),
            other => Err(self.unexpected_from_broker(id, &other)),
        }
    }

    /// Partition metadata for `topic` from the first broker that answers.
    pub async fn topic_metadata(
        &mut self,
        topic: &str,
    ) -> Result<Vec<PartitionMetadata>, ClientError> {
        let ids: Vec<NodeId> = self.cluster.brokers.iter().map(|(id, _)| *id).collect();
        let mut last = None;
        for id in ids {
            let correlation = self.correlation();
            let req = Message::Metadata(MetadataRequest {
                correlation,
                topics: Some(vec![topic.to_string()]),
            });
            match self.broker_request(id, req).await {
                Ok(Message::MetadataResponse(m)) => {
                    if !m.unknown_topics.is_empty() {
                        last = Some(ClientError::UnknownTopic(topic.to_string()));
                        continue; // this broker's image may lag
                    }
                    self.leaders.learn(&m);
                    return Ok(m.partitions);
                }
                Ok(other) => {
                    last = Some(ClientError::Unexpected {
                        addr: self.cluster.broker(id).expect("listed"),
                        what: format!("{other:?}"),
                    })
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(ClientError::UnknownTopic(topic.to_string())))
    }

    /// Whether the controllers know `topic`. A quorum's followers serve metadata reads
    /// from their committed records, which may lag the active controller's by a Raft
    /// heartbeat, so each controller is asked in turn before the answer is no.
    async fn controllers_know(&mut self, topic: &str) -> Result<bool, ClientError> {
        for _ in 0..self.cluster.controllers.len() {
            if self.cluster_image().await?.topic(topic).is_some() {
                return Ok(true);
            }
            self.router.move_on();
        }
        Ok(false)
    }

    /// Partition metadata for `topic`, waiting (up to `retry_for`) while the brokers have
    /// not yet heard of a topic the controller knows (it reaches them with their next
    /// heartbeat). A topic the controller does not know either fails at once.
    pub async fn wait_topic(&mut self, topic: &str) -> Result<Vec<PartitionMetadata>, ClientError> {
        let started = Instant::now();
        loop {
            match self.topic_metadata(topic).await {
                Ok(parts) => return Ok(parts),
                Err(ClientError::UnknownTopic(t)) => {
                    let known = self.controllers_know(topic).await?;
                    if !known || started.elapsed() >= self.opts.retry_for {
                        return Err(ClientError::UnknownTopic(t));
                    }
                }
                Err(e) if started.elapsed() >= self.opts.retry_for => return Err(e),
                Err(e) => tracing::debug!(error = %e, "metadata: retrying"),
            }
            tokio::time::sleep(self.opts.retry_backoff).await;
        }
    }

    /// Waits (up to `within`) until every broker that answers serves `topic` with a
    /// leader for each of its `partitions`. A broker learns of a new topic with its next
    /// heartbeat; until then it answers "unknown topic", and clients that ask it (librdkafka
    /// among them) may drop a topic they were already producing to. Returns the brokers
    /// that serve it and, for each that does not, why.
    pub async fn wait_topic_on_brokers(
        &mut self,
        topic: &str,
        partitions: u32,
        within: Duration,
    ) -> (Vec<NodeId>, Vec<(NodeId, String)>) {
        let started = Instant::now();
        let mut waiting: Vec<NodeId> = self.cluster.brokers.iter().map(|(id, _)| *id).collect();
        let (mut ready, mut failed) = (Vec::new(), Vec::new());
        while !waiting.is_empty() {
            let mut left = Vec::new();
            for id in waiting {
                let correlation = self.correlation();
                let req = Message::Metadata(MetadataRequest {
                    correlation,
                    topics: Some(vec![topic.to_string()]),
                });
                let why = match self.broker_request(id, req).await {
                    Ok(Message::MetadataResponse(m)) => {
                        let led = m
                            .partitions
                            .iter()
                            .filter(|p| p.tp.topic == topic && p.leader.is_some())
                            .count();
                        if led == partitions as usize {
                            ready.push(id);
                            continue;
                        }
                        if m.unknown_topics.is_empty() {
                            format!("{led} of {partitions} partitions have a leader")
                        } else {
                            "topic not known yet".to_string()
                        }
                    }
                    Ok(other) => format!("unexpected answer {other:?}"),
                    // Down or unreachable: not worth waiting for.
                    Err(e) => {
                        failed.push((id, e.to_string()));
                        continue;
                    }
                };
                if started.elapsed() >= within {
                    failed.push((id, why));
                } else {
                    left.push(id);
                }
            }
            waiting = left;
            if !waiting.is_empty() {
                tokio::time::sleep(self.opts.retry_backoff).await;
            }
        }
        ready.sort_unstable();
        failed.sort_unstable();
        (ready, failed)
    }

    /// Partition metadata, retried until it names a leader.
    async fn leader(&mut self, tp: &TopicPartition, refresh: bool) -> Result<NodeId, String> {
        if !refresh {
            if let Some(l) = self.leaders.leader(tp) {
                return Ok(l);
            }
        }
        match self.topic_metadata(&tp.topic).await {
            Ok(parts) => match parts.iter().find(|p| &p.tp == tp) {
                Some(p) => p.leader.ok_or_else(|| format!("{tp} has no leader yet")),
                None => Err(format!("{tp}: no such partition")),
            },
            Err(e) => Err(e.to_string()),
        }
    }

    /// Produces `values` as one batch. Retries (refreshing metadata) while the partition
    /// has no reachable leader, the leader moved, or the ISR is too small, up to
    /// `retry_for`. A lost connection or timeout after sending is retried too: with
    /// `enable_idempotence` the retry carries the same sequence and the leader answers a
    /// duplicate with the original offset (exactly once per batch); without it a record
    /// may be written twice (at least once). Never lost silently: a final failure is an
    /// error.
    pub async fn produce(
        &mut self,
        tp: &TopicPartition,
        values: Vec<Vec<u8>>,
        acks: Acks,
    ) -> Result<Produced, ClientError> {
        self.produce_keyed(tp, None, values, acks).await
    }

    /// `produce` with every record carrying `key`.
    pub async fn produce_keyed(
        &mut self,
        tp: &TopicPartition,
        key: Option<&[u8]>,
        values: Vec<Vec<u8>>,
        acks: Acks,
    ) -> Result<Produced, ClientError> {
        let keyed = values
            .into_iter()
            .map(|v| (key.map(<[u8]>::to_vec), Some(v)))
            .collect();
        self.produce_records(tp, keyed, acks).await
    }

    /// `produce` of `(key, value)` records ([`KeyValue`]), each key and value optional: a keyed record
    /// without a value is a tombstone on a compacted topic (docs/compaction.md).
    pub async fn produce_records(
        &mut self,
        tp: &TopicPartition,
        records: Vec<KeyValue>,
        acks: Acks,
    ) -> Result<Produced, ClientError> {
        let count = records.len();
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        let batch = RecordBatch::new(now_ms, records).with_codec(self.compression);
        let mut batch = self.producer.prepare(tp, batch)?;
        let started = Instant::now();
        let mut refresh = false;
        let mut skip_refresh = false;
        loop {
            let last = match self.leader(tp, refresh).await {
                Err(e) => e,
                Ok(leader) => {
                    let correlation = self.correlation();
                    // Encoded as stamped now (a retry may carry a new epoch).
                    let timeout = self.opts.request_timeout.as_nanos() as u64;
                    let req =
                        ProduceClient::request(correlation, tp.clone(), acks, timeout, &batch)
                            .map(Message::from)
                            .map_err(|error| ClientError::Encode {
                                tp: tp.clone(),
                                error,
                            })?;
                    if acks == Acks::None {
                        // Fire and forget: only a failure to hand the batch to a live
                        // connection is retried (nothing was sent then).
                        let sent = match self.broker_conn(leader).await {
                            Ok(conn) => conn.send(req).await,
                            Err(e) => Err(e),
                        };
                        match sent {
                            Ok(()) => {
                                return Ok(Produced {
                                    base_offset: None,
                                    count,
                                })
                            }
                            Err(e) => {
                                self.brokers.remove(&leader);
                                e.to_string()
                            }
                        }
                    } else {
                        match self.broker_request(leader, req).await {
                            Ok(Message::ProduceResponse(r)) => {
                                let mut step = self.producer.on_answer(tp, &batch, &r.result)?;
                                if step == ProduceStep::CheckLeader {
                                    // The controller decides whether the answering broker
                                    // leads (a deposed one answers from a stale log).
                                    let trusted = match self.controller_leader(tp).await {
                                        Ok(Some((Some(l), _))) if l == leader => true,
                                        Ok(Some((l, epoch))) => {
                                            self.leaders.learn_leader(tp, l, epoch);
                                            skip_refresh = true;
                                            false
                                        }
                                        _ => false,
                                    };
                                    step = self
                                        .producer
                                        .on_leader_checked(tp, &batch, &r.result, trusted)?;
                                }
                                match self.on_produce_step(tp, &mut batch, step, &r.result)? {
                                    Ok(base_offset) => {
                                        return Ok(Produced {
                                            base_offset: Some(base_offset),
                                            count,
                                        })
                                    }
                                    Err(reason) => reason,
                                }
                            }
                            Ok(other) => {
                                self.resend(tp, &mut batch)?;
                                format!("unexpected reply {other:?}")
                            }
                            Err(e) => {
                                // Outcome unknown: the same batch (same sequence) goes again.
                                self.resend(tp, &mut batch)?;
                                e.to_string()
                            }
                        }
                    }
                }
            };
            tracing::debug!(%tp, reason = %last, "produce: retrying");
            self.no_leader_yet(tp, started, last)?;
            // The controller just named the leader: use it rather than a broker's view.
            refresh = !std::mem::take(&mut skip_refresh);
            tokio::time::sleep(self.opts.retry_backoff).await;
        }
    }

    /// Marks a batch as sent again without an answer (same sequence when idempotent).
    fn resend(&mut self, tp: &TopicPartition, batch: &mut RecordBatch) -> Result<(), ClientError> {
        *batch = self.producer.resend(tp, batch)?;
        Ok(())
    }

    /// The partition's leader and epoch according to the controller (None: no such
    /// partition).
    async fn controller_leader(
        &mut self,
        tp: &TopicPartition,
    ) -> Result<Option<(Option<NodeId>, LeaderEpoch)>, ClientError> {
        self.cluster_image().await?;
        Ok(self.view.leader(tp))
    }

    /// Carries out core's decision on a produce answer: `Ok(Ok(offset))` done,
    /// `Ok(Err(reason))` send `batch` again (possibly re-stamped), `Err` give up.
    fn on_produce_step(
        &mut self,
        tp: &TopicPartition,
        batch: &mut RecordBatch,
        step: ProduceStep,
        result: &Result<ProduceAck, ProduceError>,
    ) -> Result<Result<Offset, String>, ClientError> {
        let fail = |error: ProduceError| ClientError::Produce {
            tp: tp.clone(),
            error,
        };
        match step {
            ProduceStep::Acked { base_offset, .. } => Ok(Ok(base_offset)),
            ProduceStep::Resend { batch: b, .. } => {
                *batch = b;
                Ok(Err(match result {
                    Err(e) => e.to_string(),
                    Ok(_) => format!("{result:?}"),
                }))
            }
            ProduceStep::EpochBumped { resend } => {
                tracing::warn!(%tp, answer = ?result, "leader lost this producer's sequence state: new epoch, the batch is sent again and may be written twice");
                // This client has one batch in flight: the one for `tp`.
                let (_, b) = (resend.into_iter().find(|(t, _)| t == tp)).ok_or_else(|| {
                    fail(ProduceError::OutOfOrderSequence(
                        "sequence state lost and no batch in flight".into(),
                    ))
                })?;
                *batch = b;
                Ok(Err("producer epoch bumped after a lost sequence".into()))
            }
            ProduceStep::CheckLeader => Err(fail(ProduceError::OutOfOrderSequence(
                "a sequence error left unchecked".into(),
            ))),
            ProduceStep::Failed(e) | ProduceStep::Fenced(e) => Err(fail(e)),
        }
    }

    /// Committed records of `tp` from `offset` on (possibly none yet), retrying leader
    /// changes. Returns the records (offset, value) and the high watermark. A reader that
    /// follows a partition should use [`Client::fetch_next`], which also says where to go on.
    pub async fn fetch(
        &mut self,
        tp: &TopicPartition,
        offset: Offset,
        max_bytes: usize,
    ) -> Result<(Vec<(Offset, Option<Vec<u8>>)>, Offset), ClientError> {
        let f = self.fetch_next(tp, offset, max_bytes).await?;
        Ok((f.records, f.high_watermark))
    }

    /// Like [`Client::fetch`], with the offset the next fetch should start at: past every
    /// batch read, leader-epoch markers included, so a reader is never held at a marker.
    /// A reader that keeps fetching at the `next_offset` it was given carries the epoch of
    /// what it read (KIP-320): if an unclean election truncated the log under it, it moves
    /// back to the divergence point, reads from there and says so in `truncation`.
    pub async fn fetch_next(
        &mut self,
        tp: &TopicPartition,
        offset: Offset,
        max_bytes: usize,
    ) -> Result<Fetched, ClientError> {
        let started = Instant::now();
        let mut refresh = false;
        let mut cursor = match self.cursors.remove(tp) {
            Some(c) if c.position() == offset => c,
            _ => FetchCursor::new(offset).with_isolation(self.isolation),
        };
        let mut truncation = None;
        loop {
            let last = match self.leader(tp, refresh).await {
                Err(e) => e,
                Ok(leader) => {
                    let req = cursor.request(self.correlation(), tp.clone(), max_bytes);
                    match self
                        .broker_request(leader, Message::ConsumerFetch(req))
                        .await
                    {
                        Ok(Message::ConsumerFetchResponse(r)) => match r.result {
                            Ok(recs) => {
                                let taken = cursor.take(&recs);
                                let out = (taken.records.into_iter())
                                    .map(|(o, _, r)| (o, r.value.clone()))
                                    .collect();
                                let next_offset = cursor.position();
                                self.cursors.insert(tp.clone(), cursor);
                                return Ok(Fetched {
                                    records: out,
                                    high_watermark: recs.high_watermark,
                                    last_stable_offset: recs.last_stable_offset,
                                    next_offset,
                                    truncation,
                                });
                            }
                            Err(e @ ConsumerFetchError::DivergingEpoch { .. }) => {
                                if let Some(t) = cursor.on_error(&e) {
                                    tracing::warn!(%tp, "{t}");
                                    truncation = Some(t);
                                }
                                continue; // the cursor moved: fetch again at once
                            }
                            Err(
                                e @ (ConsumerFetchError::NotLeader { .. }
                                | ConsumerFetchError::FencedLeaderEpoch { .. }
                                | ConsumerFetchError::UnknownLeaderEpoch { .. }
                                | ConsumerFetchError::UnknownTopicOrPartition),
                            ) => e.to_string(),
                            Err(error) => {
                                return Err(ClientError::Fetch {
                                    tp: tp.clone(),
                                    error,
                                })
                            }
                        },
                        Ok(other) => format!("unexpected reply {other:?}"),
                        Err(e) => e.to_string(),
                    }
                }
            };
            self.no_leader_yet(tp, started, last)?;
            refresh = true;
            tokio::time::sleep(self.opts.retry_backoff).await;
        }
    }

    /// Earliest offset (`OffsetSpec::Earliest`) or the high watermark (`Latest`).
    pub async fn list_offset(
        &mut self,
        tp: &TopicPartition,
        spec: OffsetSpec,
    ) -> Result<Offset, ClientError> {
        let started = Instant::now();
        let mut refresh = false;
        loop {
            let last = match self.leader(tp, refresh).await {
                Err(e) => e,
                Ok(leader) => {
                    let correlation = self.correlation();
                    let req = Message::ListOffsets(ListOffsetsRequest {
                        correlation,
                        tp: tp.clone(),
                        spec,
                        isolation: self.isolation,
                    });
                    match self.broker_request(leader, req).await {
                        Ok(Message::ListOffsetsResponse(r)) => match r.result {
                            Ok(Some(l)) => return Ok(l.offset),
                            Ok(None) => return Ok(0),
                            Err(e) => e.to_string(),
                        },
                        Ok(other) => format!("unexpected reply {other:?}"),
                        Err(e) => e.to_string(),
                    }
                }
            };
            self.no_leader_yet(tp, started, last)?;
            refresh = true;
            tokio::time::sleep(self.opts.retry_backoff).await;
        }
    }
}
