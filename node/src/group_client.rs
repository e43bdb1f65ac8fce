//! An async host for core's sans-I/O [`GroupConsumer`]: it turns the consumer's
//! [`ConsumerOutput::Send`]s into frames to brokers, feeds the answers back with
//! `step`, and runs its `handle_timeout` at `poll_timeout`. The application (`skein consume
//! --group`) calls [`GroupClient::poll`] for records and commits what it has processed.
//!
//! One pipelined connection per broker (the consumer has several requests in flight: a
//! JoinGroup parked at the coordinator must not hold up fetches or heartbeats); every
//! connection's reader forwards what arrives to one channel, and answers are matched to
//! requests by correlation id (the consumer's own ids; a connection is this client's
//! alone). Routing (`LeaderOf(tp)` through core's leader cache), the request/answer
//! translation and what an answer teaches the cache are core's (`skein_core::client::
//! group_wire`), shared with the simulator. A lost connection loses its requests: the
//! consumer times them out and retries.

use crate::config::ClusterAddresses;
use crate::frame::{read_frame, write_frame, Frame, Hello, Peer, DEFAULT_MAX_FRAME};
use crate::net::WriteHalf as OwnedWriteHalf;
use skein_core::client::group_wire::{self, Route};
use skein_core::client::LeaderCache;
use skein_core::client::{
    ConsumedRecord, ConsumerConfig, ConsumerEvent, ConsumerOutput, ConsumerRequest, Destination,
    GroupConsumer,
};
use skein_core::message::*;
use skein_core::types::{Nanos, NodeId, TopicPartition};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Correlation ids the host uses for its own metadata refreshes (the consumer's ids are
/// small counters).
const HOST_CORRELATION: u64 = 1 << 62;
/// A leader refresh unanswered this long is sent again.
const METADATA_TIMEOUT: Nanos = 2_000_000_000;
/// Leader refreshes at most this often.
const METADATA_MIN_INTERVAL: Nanos = 100_000_000;

/// What went wrong hosting the consumer.
#[derive(Debug, thiserror::Error)]
pub enum GroupClientError {
    #[error("invalid consumer configuration: {0}")]
    Config(String),
    #[error(
        "the group consumer stopped: {0} (another consumer may use the same \
         --instance-id, or the members' assignors differ)"
    )]
    Fatal(String),
}

struct BrokerConn {
    wr: BufWriter<OwnedWriteHalf>,
    reader: JoinHandle<()>,
}

/// What a request in flight was, to turn its answer into a `ConsumerResponse`.
#[derive(Clone, Debug)]
enum Pending {
    Consumer(group_wire::Pending),
    /// The host's own leader refresh.
    Refresh,
}

/// A `GroupConsumer` on real connections.
pub struct GroupClient {
    cluster: ClusterAddresses,
    consumer: GroupConsumer,
    started: Instant,
    conns: BTreeMap<NodeId, BrokerConn>,
    /// Brokers that could not be dialled, and until when they are skipped.
    down_until: BTreeMap<NodeId, Instant>,
    answers_tx: mpsc::Sender<(NodeId, Message)>,
    answers: mpsc::Receiver<(NodeId, Message)>,
    pending: BTreeMap<u64, Pending>,
    /// Partition leaders (core's cache, shared with the simulator's members).
    leaders: LeaderCache,
    /// Topics whose leaders the consumer asked for.
    topics: BTreeSet<String>,
    next_any: usize,
    next_refresh: u64,
    events: Vec<ConsumerEvent>,
}

/// A dropped client closes its connections (no LeaveGroup: that is `close`); the group
/// coordinator notices the member gone when its session times out, as with a crash.
impl Drop for GroupClient {
    fn drop(&mut self) {
        for c in self.conns.values() {
            c.reader.abort();
        }
    }
}

impl GroupClient {
    pub fn new(
        cluster: ClusterAddresses,
        config: ConsumerConfig,
    ) -> Result<Self, GroupClientError> {
        let consumer =
            GroupConsumer::new(config).map_err(|e| GroupClientError::Config(e.to_string()))?;
        let (answers_tx, answers) = mpsc::channel(1024);
        Ok(Self {
            cluster,
            consumer,
            started: Instant::now(),
            conns: BTreeMap::new(),
            down_until: BTreeMap::new(),
            answers_tx,
            answers,
            pending: BTreeMap::new(),
            leaders: LeaderCache::new(METADATA_TIMEOUT, METADATA_MIN_INTERVAL),
            topics: BTreeSet::new(),
            next_any: 0,
            next_refresh: HOST_CORRELATION,
            events: Vec::new(),
        })
    }

    fn now(&self) -> Nanos {
        self.started.elapsed().as_nanos() as Nanos
    }

    pub fn consumer(&self) -> &GroupConsumer {
        &self.consumer
    }

    /// Subscribe and start joining.
    pub async fn subscribe(&mut self, topics: &[&str]) {
        let now = self.now();
        self.consumer.subscribe(now, topics);
        self.flush().await;
    }

    /// Events since the last call (assignments, revocations, commit results).
    pub fn take_events(&mut self) -> Vec<ConsumerEvent> {
        std::mem::take(&mut self.events)
    }

    /// Records ready now, or after waiting up to `wait` for answers and timers.
    pub async fn poll(&mut self, wait: Duration) -> Result<Vec<ConsumedRecord>, GroupClientError> {
        let until = Instant::now() + wait;
        loop {
            let now = self.now();
            let records = self.consumer.poll(now);
            self.flush().await;
            if let Some(fatal) = self.events.iter().find_map(|e| match e {
                ConsumerEvent::Fatal(e) => Some(e.to_string()),
                _ => None,
            }) {
                return Err(GroupClientError::Fatal(fatal));
            }
            if !records.is_empty() || Instant::now() >= until {
                return Ok(records);
            }
            self.wait_once(until).await;
        }
    }

    /// Commit explicit positions (each the next offset to read), retried by the consumer
    /// until its request timeout; the result arrives as a `CommitCompleted` event.
    pub async fn commit(&mut self, offsets: BTreeMap<TopicPartition, u64>) -> u64 {
        let now = self.now();
        let id = self.consumer.commit_offsets(now, offsets, true);
        self.flush().await;
        id
    }

    /// Runs the consumer (answers, timers) until `done` says so or `wait` passed; returns
    /// whether `done` said so.
    pub async fn run_until(
        &mut self,
        wait: Duration,
        mut done: impl FnMut(&GroupConsumer, &[ConsumerEvent]) -> bool,
    ) -> bool {
        let until = Instant::now() + wait;
        loop {
            if done(&self.consumer, &self.events) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            self.wait_once(until).await;
        }
    }

    /// Leave the group (LeaveGroup is sent; its answer awaited briefly).
    pub async fn close(&mut self) {
        let now = self.now();
        self.consumer.close(now);
        self.flush().await;
        let group_pending = |c: &Self| {
            (c.pending.values()).any(|p| matches!(p, Pending::Consumer(group_wire::Pending::Group)))
        };
        let until = Instant::now() + Duration::from_secs(2);
        while group_pending(self) && Instant::now() < until {
            self.wait_once(until).await;
        }
        for (_, c) in std::mem::take(&mut self.conns) {
            c.reader.abort();
        }
    }

    /// Waits for one answer or the consumer's next timer (at most until `until`).
    async fn wait_once(&mut self, until: Instant) {
        let timer = self
            .consumer
            .poll_timeout()
            .map(|t| self.started + Duration::from_nanos(t))
            .map_or(until, |t| t.min(until));
        // Poll again soon even without a timer: buffered records may wait for `poll`.
        let timer = timer.min(Instant::now() + Duration::from_millis(50));
        tokio::select! {
            answer = self.answers.recv() => {
                if let Some((from, msg)) = answer {
                    self.on_answer(from, msg);
                    while let Ok((from, msg)) = self.answers.try_recv() {
                        self.on_answer(from, msg);
                    }
                }
            }
            _ = tokio::time::sleep_until(timer) => {
                let now = self.now();
                self.consumer.handle_timeout(now);
            }
        }
        self.flush().await;
    }

    /// Sends everything the consumer wants sent; keeps its events; refreshes leaders when
    /// the cache asks for it.
    async fn flush(&mut self) {
        loop {
            let outputs = self.consumer.poll_outputs();
            if outputs.is_empty() {
                break;
            }
            for out in outputs {
                match out {
                    ConsumerOutput::Event(e) => self.events.push(e),
                    ConsumerOutput::Send {
                        to,
                        correlation,
                        request,
                    } => self.send(to, correlation, request).await,
                }
            }
        }
        self.refresh_leaders().await;
    }

    async fn send(&mut self, to: Destination, correlation: u64, request: ConsumerRequest) {
        if let Destination::LeaderOf(tp) = &to {
            self.topics.insert(tp.topic.clone());
        }
        let node = match group_wire::route(&to, &request, &mut self.leaders) {
            Route::AnyBroker => self.any_broker(),
            Route::Node(n) => Some(n),
            Route::NoLeader(answer) => {
                // Answered at once; the consumer retries after its backoff, by when the
                // refresh this asked for may have found the leader.
                let now = self.now();
                self.consumer.step(now, correlation, answer);
                return;
            }
        };
        let (msg, pending) = group_wire::to_message(correlation, request);
        let Some(node) = node else {
            return; // no broker reachable: the consumer times the request out and retries
        };
        if self.write(node, msg).await {
            self.pending.insert(correlation, Pending::Consumer(pending));
        }
    }

    async fn refresh_leaders(&mut self) {
        let now = self.now();
        let topics: Vec<String> = self.topics.iter().cloned().collect();
        let Some(req) = self
            .leaders
            .poll_refresh(now, self.next_refresh, &topics, false)
        else {
            return;
        };
        self.next_refresh += 1;
        let correlation = req.correlation;
        if let Some(node) = self.any_broker() {
            if self.write(node, Message::Metadata(req)).await {
                self.pending.insert(correlation, Pending::Refresh);
            }
        }
    }

    /// A broker not known to be down, round-robin.
    fn any_broker(&mut self) -> Option<NodeId> {
        let n = self.cluster.brokers.len();
        let now = Instant::now();
        for i in 0..n {
            let (id, _) = self.cluster.brokers[(self.next_any + i) % n];
            if self.down_until.get(&id).is_none_or(|t| now >= *t) {
                self.next_any = (self.next_any + i + 1) % n;
                return Some(id);
            }
        }
        self.cluster.brokers.first().map(|(id, _)| *id)
    }

    /// Writes one message to `node`, dialling first if needed. False if it did not go out.
    async fn write(&mut self, node: NodeId, msg: Message) -> bool {
        if self
            .conns
            .get(&node)
            .is_some_and(|c| c.reader.is_finished())
        {
            self.conns.remove(&node);
        }
        if !self.conns.contains_key(&node) {
            let Some(addr) = self.cluster.broker(node) else {
                tracing::warn!(node, "broker not in the cluster file");
                return false;
            };
            match dial(node, addr, self.answers_tx.clone()).await {
                Ok(c) => {
                    self.conns.insert(node, c);
                    self.down_until.remove(&node);
                }
                Err(e) => {
                    tracing::debug!(node, %addr, error = %e, "cannot connect");
                    self.down_until
                        .insert(node, Instant::now() + Duration::from_millis(500));
                    return false;
                }
            }
        }
        let c = self.conns.get_mut(&node).expect("dialled above");
        let ok = write_frame(&mut c.wr, &Frame::Msg(msg), DEFAULT_MAX_FRAME)
            .await
            .is_ok()
            && c.wr.flush().await.is_ok();
        if !ok {
            if let Some(c) = self.conns.remove(&node) {
                c.reader.abort();
            }
        }
        ok
    }

    fn on_answer(&mut self, from: NodeId, msg: Message) {
        let now = self.now();
        let Some(correlation) = msg.response_correlation() else {
            return;
        };
        let Some(pending) = self.pending.remove(&correlation) else {
            return;
        };
        let pending = match (pending, msg) {
            (Pending::Consumer(p), msg) => (p, msg),
            (Pending::Refresh, Message::MetadataResponse(m)) => return self.leaders.learn(&m),
            (Pending::Refresh, _) => return,
        };
        let (pending, msg) = pending;
        let name = msg.name();
        match group_wire::from_message(pending, Some(from), msg, &mut self.leaders) {
            Some(response) => self.consumer.step(now, correlation, response),
            None => tracing::debug!(msg = name, "answer of an unexpected kind dropped"),
        }
    }
}

async fn dial(
    node: NodeId,
    addr: SocketAddr,
    answers: mpsc::Sender<(NodeId, Message)>,
) -> std::io::Result<BrokerConn> {
    let stream = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))??;
    let _ = stream.set_nodelay(true);
    let (mut rd, wr) = crate::net::split(stream);
    let mut wr = BufWriter::new(wr);
    write_frame(
        &mut wr,
        &Frame::Hello(Hello { from: Peer::Client }),
        DEFAULT_MAX_FRAME,
    )
    .await
    .map_err(|e| std::io::Error::other(e.to_string()))?;
    wr.flush().await?;
    let reader = tokio::spawn(async move {
        loop {
            match read_frame(&mut rd, DEFAULT_MAX_FRAME).await {
                Ok(Some(Frame::Msg(m))) => {
                    if answers.send((node, m)).await.is_err() {
                        return;
                    }
                }
                Ok(Some(Frame::Goodbye(g))) => {
                    tracing::warn!(node, reason = %g.reason, "broker closed the connection");
                    return;
                }
                Ok(Some(_)) => {}
                Ok(None) => return,
                Err(e) => {
                    tracing::debug!(node, error = %e, "connection lost");
                    return;
                }
            }
        }
    });
    Ok(BrokerConn { wr, reader })
}
