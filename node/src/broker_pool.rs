//! The connections a hosted core client machine talks through: one pipelined connection
//! per broker, dialled on first use, whose readers forward every answer to one channel;
//! brokers that could not be dialled are skipped for a while; partition leaders come from
//! core's [`LeaderCache`], refreshed with the pool's own metadata requests.
//!
//! The group member ([`crate::group_client`]) and the transactional producer
//! ([`crate::txn_client`]) are both sans-I/O machines of core: each host turns the machine's
//! sends into [`BrokerPool::write`]s and feeds what [`BrokerPool::recv_until`] returns back
//! into it. A lost connection loses its requests: the machine times them out and retries.

use crate::config::ClusterAddresses;
use crate::frame::{read_frame, write_frame, Frame, Hello, Peer, DEFAULT_MAX_FRAME};
use crate::net::WriteHalf as OwnedWriteHalf;
use skein_core::client::LeaderCache;
use skein_core::message::Message;
use skein_core::types::{Nanos, NodeId};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Correlation ids the pool uses for its own metadata refreshes (the machines' ids are
/// small counters).
const POOL_CORRELATION: u64 = 1 << 62;
/// A leader refresh unanswered this long is sent again.
const METADATA_TIMEOUT: Nanos = 2_000_000_000;
/// Leader refreshes at most this often.
const METADATA_MIN_INTERVAL: Nanos = 100_000_000;
/// A broker that could not be dialled is skipped this long.
const DOWN_FOR: Duration = Duration::from_millis(500);

struct BrokerConn {
    wr: BufWriter<OwnedWriteHalf>,
    reader: JoinHandle<()>,
}

/// Connections to a cluster's brokers, and where partition leaders are.
pub struct BrokerPool {
    cluster: ClusterAddresses,
    started: Instant,
    conns: BTreeMap<NodeId, BrokerConn>,
    /// Brokers that could not be dialled, and until when they are skipped.
    down_until: BTreeMap<NodeId, Instant>,
    answers_tx: mpsc::Sender<(NodeId, Message)>,
    answers: mpsc::Receiver<(NodeId, Message)>,
    /// Partition leaders (core's cache, shared with the simulator's clients).
    pub leaders: LeaderCache,
    /// Topics whose leaders the machine asked for.
    topics: BTreeSet<String>,
    next_any: usize,
    next_refresh: u64,
    refreshing: BTreeSet<u64>,
}

/// A dropped pool closes its connections.
impl Drop for BrokerPool {
    fn drop(&mut self) {
        for c in self.conns.values() {
            c.reader.abort();
        }
    }
}

impl BrokerPool {
    pub fn new(cluster: ClusterAddresses) -> Self {
        let (answers_tx, answers) = mpsc::channel(1024);
        Self {
            cluster,
            started: Instant::now(),
            conns: BTreeMap::new(),
            down_until: BTreeMap::new(),
            answers_tx,
            answers,
            leaders: LeaderCache::new(METADATA_TIMEOUT, METADATA_MIN_INTERVAL),
            topics: BTreeSet::new(),
            next_any: 0,
            next_refresh: POOL_CORRELATION,
            refreshing: BTreeSet::new(),
        }
    }

    /// The machine's clock: nanoseconds since the pool was made.
    pub fn now(&self) -> Nanos {
        self.started.elapsed().as_nanos() as Nanos
    }

    /// The wall-clock instant of machine time `t`.
    pub fn instant(&self, t: Nanos) -> Instant {
        self.started + Duration::from_nanos(t)
    }

    /// Keep the leaders of `topic`'s partitions known.
    pub fn watch_topic(&mut self, topic: &str) {
        if !self.topics.contains(topic) {
            self.topics.insert(topic.to_string());
        }
    }

    /// A broker not known to be down, round-robin.
    pub fn any_broker(&mut self) -> Option<NodeId> {
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
    pub async fn write(&mut self, node: NodeId, msg: Message) -> bool {
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
                    self.down_until.insert(node, Instant::now() + DOWN_FOR);
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

    /// Sends a leader refresh if the cache asks for one.
    pub async fn refresh_leaders(&mut self) {
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
                self.refreshing.insert(correlation);
            }
        }
    }

    /// The next answer for the machine, waiting at most until `until` (None: nothing came).
    /// The pool's own refresh answers are taken in on the way.
    pub async fn recv_until(&mut self, until: Instant) -> Option<(NodeId, Message)> {
        loop {
            let got = tokio::select! {
                a = self.answers.recv() => a,
                _ = tokio::time::sleep_until(until) => None,
            };
            let (from, msg) = got?;
            if let Some(answer) = self.take_own(from, msg) {
                return Some(answer);
            }
        }
    }

    /// An answer already waiting, without blocking.
    pub fn try_recv(&mut self) -> Option<(NodeId, Message)> {
        while let Ok((from, msg)) = self.answers.try_recv() {
            if let Some(answer) = self.take_own(from, msg) {
                return Some(answer);
            }
        }
        None
    }

    /// Learns from the pool's refresh answers; hands back everything else.
    fn take_own(&mut self, from: NodeId, msg: Message) -> Option<(NodeId, Message)> {
        match msg {
            Message::MetadataResponse(m) if self.refreshing.remove(&m.correlation) => {
                self.leaders.learn(&m);
                None
            }
            msg => Some((from, msg)),
        }
    }

    /// Closes every connection.
    pub fn close(&mut self) {
        for (_, c) in std::mem::take(&mut self.conns) {
            c.reader.abort();
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
