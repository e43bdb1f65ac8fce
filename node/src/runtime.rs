//! The node runtime: a broker or the controller on real sockets, files and timers.
//!
//! Tasks: one accept loop; per inbound connection a reader (decodes frames and forwards
//! them, tagged with the peer's address, to the state machine) and a writer; per peer this
//! node sends to (brokers: the controller and every other broker) one outbound task that
//! dials on demand and also reads what comes back on that connection; and a single task
//! owning the state machine (core's node driver, `skein_core::node::Node`), fed by an mpsc
//! channel and woken at its `poll_timeout`. Messages
//! that cannot be delivered (peer down, queue full) are dropped and logged: the state
//! machines are built for lossy networks and retry.

use crate::config::{FsyncPolicy, NodeKind, ValidNodeConfig};
use crate::file_storage::FileStorage;
use crate::frame::{read_frame, write_frame, Frame, FrameError, Goodbye, Hello, Peer};
use crate::net::{ReadHalf as OwnedReadHalf, WriteHalf as OwnedWriteHalf};
use crate::stats::Metrics;
use skein_core::broker::{Broker, BrokerConfig, BrokerEvent};
use skein_core::controller::{Controller, ControllerConfig, QuorumConfig, QuorumController};
use skein_core::log::{Storage, StorageError};
use skein_core::message::{Address, Message};
use skein_core::node::{ControllerNode, FlushGate, Machine as _, Node, NodeOutput};
use skein_core::raft::RaftConfig;
use skein_core::replica::Event as ReplicaEvent;
use skein_core::types::Nanos;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Queue depth per connection and for the state machine's inbox.
const QUEUE: usize = 4096;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// After a failed dial, messages to that peer are dropped for this long.
const REDIAL_BACKOFF: Duration = Duration::from_millis(200);
/// On SIGTERM a broker waits at most this long for the controller to move its
/// leaderships away (controlled shutdown) before it syncs its logs and exits anyway.
pub const CONTROLLED_SHUTDOWN_WAIT: Duration = Duration::from_secs(5);
/// `flush_interval` with `fsync = always` (see `broker_config`).
const GROUP_COMMIT: Nanos = 1;

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}: {reason} (is another node running there?)")]
    Listen { addr: SocketAddr, reason: String },
    #[error("cannot open storage in {dir}: {reason}")]
    Storage { dir: String, reason: String },
    #[error("cannot start the broker: {0}")]
    Broker(String),
    #[error("cannot start the controller: {0}")]
    Controller(String),
}

/// File storage honouring the fsync policy: with `FsyncPolicy::Never`, `sync` is a no-op
/// (atomic writes, truncations and removals stay durable: they carry metadata).
#[derive(Clone, Debug)]
pub struct PolicyStorage {
    inner: FileStorage,
    sync: bool,
}

impl PolicyStorage {
    pub fn new(inner: FileStorage, policy: FsyncPolicy) -> Self {
        Self {
            inner,
            sync: policy != FsyncPolicy::Never,
        }
    }
}

impl Storage for PolicyStorage {
    fn list(&self, dir: &str) -> Result<Vec<String>, StorageError> {
        self.inner.list(dir)
    }
    fn exists(&self, path: &str) -> bool {
        self.inner.exists(path)
    }
    fn len(&self, path: &str) -> Result<u64, StorageError> {
        self.inner.len(path)
    }
    fn read_at(&mut self, path: &str, pos: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        self.inner.read_at(path, pos, buf)
    }
    fn append(&mut self, path: &str, data: &[u8]) -> Result<(), StorageError> {
        self.inner.append(path, data)
    }
    fn sync(&mut self, path: &str) -> Result<(), StorageError> {
        if self.sync {
            self.inner.sync(path)
        } else {
            Ok(())
        }
    }
    fn truncate(&mut self, path: &str, len: u64) -> Result<(), StorageError> {
        self.inner.truncate(path, len)
    }
    fn remove(&mut self, path: &str) -> Result<(), StorageError> {
        self.inner.remove(path)
    }
    fn write_atomic(&mut self, path: &str, data: &[u8]) -> Result<(), StorageError> {
        self.inner.write_atomic(path, data)
    }
}

/// Broker tunables derived from the node config.
pub fn broker_config(cfg: &ValidNodeConfig) -> BrokerConfig {
    let d = BrokerConfig::default();
    let ms = |v: Option<u64>, default: Nanos| v.map_or(default, |ms| ms * 1_000_000);
    BrokerConfig {
        flush_interval: match cfg.fsync {
            FsyncPolicy::Interval => cfg.fsync_interval_ms * 1_000_000,
            // Group commit: the leader's fsync is due 1 ns after an append, and the state
            // machine task ticks after every burst of inputs before it routes any reply
            // but replication traffic (`HostedNode::route_replication`, by core's
            // `FlushGate`), so one fsync covers
            // all the appends of a burst and no acknowledgement (not even acks=1) leaves
            // before it.
            FsyncPolicy::Always => GROUP_COMMIT,
            FsyncPolicy::Never => 0,
        },
        heartbeat_interval: ms(cfg.tuning.heartbeat_interval_ms, d.heartbeat_interval),
        replica_lag_time_max: ms(cfg.tuning.replica_lag_time_max_ms, d.replica_lag_time_max),
        cleaner_interval: ms(cfg.tuning.cleaner_interval_ms, d.cleaner_interval),
        // The node's clock starts at 0 when it opens (right after this), and producers
        // stamp records with the wall clock: without this the cleaner would find every
        // record younger than min.compaction.lag.ms (in the future) and never clean.
        wall_clock_at_zero_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64),
        log: skein_core::log::LogConfig {
            segment_bytes: cfg.tuning.segment_bytes.unwrap_or(d.log.segment_bytes),
            ..d.log.clone()
        },
        bugs: cfg.bugs,
        controllers: cfg.cluster.controller_ids(),
        // With a quorum (as in the simulator), a broker cut off from the active controller
        // stops acknowledging before the controller fences it: its lease is two thirds of
        // the controller's session timeout. A single controller keeps the brokers as they
        // were (no lease).
        session_timeout: cfg
            .cluster
            .is_quorum()
            .then(|| controller_config(cfg).session_timeout / 3 * 2),
        ..d
    }
}

/// Controller tunables derived from the node config.
pub fn controller_config(cfg: &ValidNodeConfig) -> ControllerConfig {
    let d = ControllerConfig {
        bugs: cfg.bugs,
        ..ControllerConfig::default()
    };
    match cfg.tuning.session_timeout_ms {
        Some(ms) => ControllerConfig {
            session_timeout: ms * 1_000_000,
            restart_grace: ms * 1_000_000,
            ..d
        },
        None => d,
    }
}

/// A quorum controller's configuration: the Raft voters are the cluster's controller ids.
fn quorum_config(cfg: &ValidNodeConfig, id: u32) -> QuorumConfig {
    let raft = RaftConfig {
        // Election jitter must differ between the voters.
        seed: 0x9e37_79b9_7f4a_7c15 ^ u64::from(id),
        bugs: cfg.bugs.raft,
        ..RaftConfig::new(id, cfg.cluster.controller_ids())
    }
    .retrying_votes();
    QuorumConfig {
        controller: controller_config(cfg),
        raft,
        ..QuorumConfig::new(id, Vec::new())
    }
}

/// One input for the state machine task, with when its frame was decoded.
#[derive(Debug)]
struct Inbound {
    from: Address,
    input: Input,
    at: Instant,
}

#[derive(Debug)]
enum Input {
    Msg(Message),
    /// `skein admin stats`: answered by the task from its metrics and the replicas' views.
    Stats,
}

/// Where outgoing messages go: dialled peers first, else the inbound connection that
/// introduced itself as that address.
struct Router {
    outbound: BTreeMap<Address, mpsc::Sender<Frame>>,
    inbound: Mutex<BTreeMap<Address, (u64, mpsc::Sender<Frame>)>>,
    next_conn: AtomicU64,
}

impl Router {
    fn send(&self, to: Address, msg: Message) {
        self.send_frame(to, Frame::Msg(msg))
    }

    fn send_frame(&self, to: Address, frame: Frame) {
        let tx = match self.outbound.get(&to) {
            Some(tx) => Some(tx.clone()),
            None => self
                .inbound
                .lock()
                .expect("router lock")
                .get(&to)
                .map(|(_, tx)| tx.clone()),
        };
        match tx {
            Some(tx) => {
                if let Err(e) = tx.try_send(frame) {
                    tracing::debug!(%to, error = %e, "dropping message: queue full or closed");
                }
            }
            None => tracing::debug!(%to, "dropping message: no connection"),
        }
    }
}

/// The local broker as the Kafka listener (crate::kafka) sees it: each Kafka connection
/// becomes a client of the state machine, as if it had dialled in and said Hello, but
/// without a socket in between.
#[derive(Clone)]
pub(crate) struct LocalBroker {
    router: Arc<Router>,
    inbox: mpsc::Sender<Inbound>,
}

impl LocalBroker {
    /// A new client address whose replies arrive on the returned connection.
    pub(crate) fn connect(&self) -> LocalConn {
        let n = self.router.next_conn.fetch_add(1, Ordering::Relaxed);
        let addr = Address::Client(n);
        let (tx, rx) = mpsc::channel(QUEUE);
        self.router
            .inbound
            .lock()
            .expect("router lock")
            .insert(addr, (n, tx));
        LocalConn {
            addr,
            rx,
            broker: self.clone(),
        }
    }
}

/// One Kafka connection's line to the state machine; unregisters itself when dropped.
pub(crate) struct LocalConn {
    addr: Address,
    rx: mpsc::Receiver<Frame>,
    broker: LocalBroker,
}

impl LocalConn {
    /// Hands `msg` to the state machine; false when the node is stopping.
    pub(crate) async fn send(&self, msg: Message) -> bool {
        let input = Input::Msg(msg);
        let (from, at) = (self.addr, Instant::now());
        self.broker
            .inbox
            .send(Inbound { from, input, at })
            .await
            .is_ok()
    }

    /// The next message the state machine sent to this client (None: node stopping).
    pub(crate) async fn recv(&mut self) -> Option<Message> {
        loop {
            match self.rx.recv().await? {
                Frame::Msg(m) => return Some(m),
                other => tracing::debug!(frame = %describe(&other), "kafka: frame ignored"),
            }
        }
    }
}

impl Drop for LocalConn {
    fn drop(&mut self) {
        let mut inbound = self.broker.router.inbound.lock().expect("router lock");
        inbound.remove(&self.addr);
    }
}

/// A running node.
pub struct NodeHandle {
    pub local_addr: SocketAddr,
    kafka_addr: Option<SocketAddr>,
    shutdown: watch::Sender<bool>,
    machine: JoinHandle<()>,
    tasks: Vec<JoinHandle<()>>,
}

impl NodeHandle {
    /// Stops the node: the state machine task syncs and exits, then every connection.
    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        let _ = self.machine.await;
        for t in self.tasks {
            t.abort();
        }
    }

    /// Resolves when the state machine task has ended (it only ends on shutdown).
    pub fn is_finished(&self) -> bool {
        self.machine.is_finished()
    }

    /// Where this broker serves the Kafka protocol (None: it does not).
    pub fn kafka_addr(&self) -> Option<SocketAddr> {
        self.kafka_addr
    }
}

/// The node's state machine for its role, opened (and recovered) from `storage`.
fn open_machine(
    cfg: &ValidNodeConfig,
    storage: PolicyStorage,
    now: Nanos,
) -> Result<(Peer, HostedNode), StartError> {
    Ok(match cfg.role {
        NodeKind::Broker => {
            let id = cfg.node_id.expect("validated: brokers have an id");
            let (broker, reports) = Broker::open(id, broker_config(cfg), storage, now)
                .map_err(|e| StartError::Broker(e.to_string()))?;
            for (tp, summary) in reports {
                tracing::info!(%tp, ?summary, "recovered partition log");
            }
            (
                Peer::Node(id),
                HostedNode::new(Node::Broker(Box::new(broker))),
            )
        }
        NodeKind::Controller if cfg.cluster.is_quorum() => {
            let id = cfg
                .node_id
                .expect("validated: quorum controllers have an id");
            let controller = QuorumController::open(storage, quorum_config(cfg, id), now)
                .map_err(|e| StartError::Controller(e.to_string()))?;
            (
                Peer::Controller(id),
                HostedNode::new(Node::Controller(ControllerNode::Quorum(Box::new(
                    controller,
                )))),
            )
        }
        NodeKind::Controller => {
            let controller = Controller::open(storage, controller_config(cfg), now)
                .map_err(|e| StartError::Controller(e.to_string()))?;
            (
                Peer::Controller(1),
                HostedNode::new(Node::Controller(ControllerNode::Single(Box::new(
                    controller,
                )))),
            )
        }
    })
}

/// Who this node dials: brokers dial every controller and every other broker; quorum
/// controllers dial each other (Raft); a single controller dials nobody.
fn dial_list(cfg: &ValidNodeConfig, me: Peer) -> Vec<(Address, SocketAddr)> {
    let controllers = cfg
        .cluster
        .controllers
        .iter()
        .map(|(c, a)| (Address::Controller(*c), *a));
    match me {
        Peer::Node(id) => controllers
            .chain(
                cfg.cluster
                    .brokers
                    .iter()
                    .filter(|(b, _)| *b != id)
                    .map(|(b, a)| (Address::Node(*b), *a)),
            )
            .collect(),
        Peer::Controller(id) if cfg.cluster.is_quorum() => controllers
            .filter(|(c, _)| *c != Address::Controller(id))
            .collect(),
        _ => Vec::new(),
    }
}

/// Starts a node. `listener`, if given, is used instead of binding `cfg.listen` (tests
/// bind port 0 first to learn free ports).
pub async fn start(
    cfg: ValidNodeConfig,
    listener: Option<TcpListener>,
) -> Result<NodeHandle, StartError> {
    let listener = match listener {
        Some(l) => l,
        None => TcpListener::bind(cfg.listen)
            .await
            .map_err(|e| StartError::Listen {
                addr: cfg.listen,
                reason: e.to_string(),
            })?,
    };
    let local_addr = listener.local_addr().map_err(|e| StartError::Listen {
        addr: cfg.listen,
        reason: e.to_string(),
    })?;
    let storage = FileStorage::new(&cfg.data_dir).map_err(|e| StartError::Storage {
        dir: cfg.data_dir.display().to_string(),
        reason: e.to_string(),
    })?;
    let storage = PolicyStorage::new(storage, cfg.fsync);
    let (shutdown, shutdown_rx) = watch::channel(false);
    let (inbox_tx, inbox_rx) = mpsc::channel::<Inbound>(QUEUE);
    let clock = Clock(Instant::now());
    let max = cfg.max_frame_bytes;
    let mut tasks = Vec::new();

    let (me, machine) = open_machine(&cfg, storage, clock.now())?;
    let mut outbound = BTreeMap::new();
    let peers = dial_list(&cfg, me);
    for (addr, sock) in peers {
        let (tx, rx) = mpsc::channel(QUEUE);
        outbound.insert(addr, tx);
        tasks.push(tokio::spawn(outbound_task(
            me,
            addr,
            sock,
            rx,
            inbox_tx.clone(),
            max,
        )));
    }
    let router = Arc::new(Router {
        outbound,
        inbound: Mutex::new(BTreeMap::new()),
        next_conn: AtomicU64::new(1),
    });
    let kafka_addr = match (me, cfg.kafka_listen) {
        (Peer::Node(id), Some(addr)) => {
            let local = LocalBroker {
                router: router.clone(),
                inbox: inbox_tx.clone(),
            };
            let (task, bound) =
                crate::kafka::start(addr, id, &cfg, local, shutdown_rx.clone()).await?;
            tasks.push(task);
            Some(bound)
        }
        _ => None,
    };
    tasks.push(tokio::spawn(accept_loop(
        listener,
        router.clone(),
        inbox_tx,
        max,
        shutdown_rx.clone(),
    )));
    tracing::info!(role = ?cfg.role, node = ?cfg.node_id, %local_addr, fsync = ?cfg.fsync, "node started");
    let machine = tokio::spawn(run_machine(machine, clock, inbox_rx, router, shutdown_rx));
    Ok(NodeHandle {
        local_addr,
        kafka_addr,
        shutdown,
        machine,
        tasks,
    })
}

#[derive(Clone, Copy)]
struct Clock(Instant);

impl Clock {
    fn now(&self) -> Nanos {
        self.0.elapsed().as_nanos() as Nanos
    }
    fn instant(&self, at: Nanos) -> Instant {
        self.0 + Duration::from_nanos(at)
    }
}

/// The node's state machine (core's [`skein_core::node::Machine`]) as this process hosts
/// it, plus what only a real process does with it: logging, metrics, shutdown. The gate
/// holds the current burst's outputs that wait for its group-commit flush (see
/// `route_replication`).
struct HostedNode(Node<PolicyStorage>, FlushGate);

impl HostedNode {
    fn new(node: Node<PolicyStorage>) -> Self {
        HostedNode(node, FlushGate::default())
    }

    fn handle(&mut self, now: Nanos, from: Address, msg: Message) {
        let name = msg.name();
        if !self.0.step(now, from, msg) {
            // Clients may ask the controller for metadata with the broker message too.
            tracing::debug!(%from, msg = name, "node ignores message");
        }
    }

    /// Sends what of the burst may leave before its group-commit flush runs (replication
    /// traffic between brokers: core's `NodeOutput::waits_for_flush` says which, and why),
    /// and holds every other output for `route`. The follower's append and fsync so
    /// overlap the leader's instead of following it (issue 22: one flush, not two, on a
    /// batch's path); acknowledgements (acks=1 included) still wait for the flush.
    fn route_replication(&mut self, router: &Router, metrics: &mut Metrics) {
        let mut outs = self.0.poll_outputs();
        self.1.before_flush(&mut outs);
        for out in outs {
            emit(out, router, metrics);
        }
    }

    /// Sends what was held for the flush, then everything since, in order.
    fn route(&mut self, router: &Router, metrics: &mut Metrics) {
        let mut outs = self.0.poll_outputs();
        self.1.after_flush(&mut outs);
        for out in outs {
            emit(out, router, metrics);
        }
    }

    /// Starts a broker's controlled shutdown (the controller has nothing to hand over).
    fn begin_shutdown(&mut self, now: Nanos) {
        if let Some(b) = self.0.broker_mut() {
            b.begin_controlled_shutdown(now);
        }
    }

    fn ready_to_stop(&self) -> bool {
        match self.0.broker() {
            Some(b) => b.ready_to_stop(),
            None => true,
        }
    }

    /// Makes the broker's logs durable before exit: with an fsync interval, runs the
    /// pending flushes now (their outputs are discarded), then fsyncs every log and
    /// writes the HW checkpoint.
    fn shut_down(&mut self, now: Nanos) {
        if let Some(b) = self.0.broker_mut() {
            let flush = b.config().flush_interval;
            if flush > 0 {
                b.handle_timeout(now + flush);
            }
            match b.shutdown_phase() {
                Some(skein_core::broker::ShutdownPhase::Ready { remaining }) => {
                    tracing::info!(
                        still_led = ?remaining,
                        "controlled shutdown: leaderships handed over"
                    )
                }
                phase => tracing::warn!(
                    ?phase,
                    "controlled shutdown did not finish in time; stopping anyway"
                ),
            }
            let failed = b.sync_all();
            if !failed.is_empty() {
                tracing::error!(?failed, "cannot sync these partition logs before exit");
            }
            let _ = b.poll_outputs();
        }
    }

    fn stats(&self, metrics: &Metrics) -> crate::stats::StatsSnapshot {
        match self.0.broker() {
            Some(b) => metrics.snapshot(Some(b.id()), &b.views()),
            None => metrics.snapshot(None, &[]),
        }
    }
}

fn log_broker_event(e: &BrokerEvent) {
    match e {
        BrokerEvent::Replica(ev) => match ev {
            // Leadership, truncation and ISR changes are what an operator wants to see.
            ReplicaEvent::BecameLeader { .. }
            | ReplicaEvent::BecameFollower { .. }
            | ReplicaEvent::Truncated { .. }
            | ReplicaEvent::IsrConfirmed { .. } => tracing::info!(event = ?ev, "replica"),
            ReplicaEvent::LogError { .. } => tracing::error!(event = ?ev, "replica"),
            _ => tracing::debug!(event = ?ev, "replica"),
        },
        BrokerEvent::MetadataApplied { offset } => tracing::debug!(offset, "metadata applied"),
        BrokerEvent::MetadataError { error } => tracing::error!(%error, "metadata error"),
        BrokerEvent::LogOpenFailed { tp, error } => {
            tracing::error!(%tp, %error, "partition log failed to open")
        }
        other => tracing::info!(event = ?other, "broker"),
    }
}

/// The single owner of the state machine. On shutdown a broker first hands its
/// leaderships over (controlled shutdown, bounded by `CONTROLLED_SHUTDOWN_WAIT`) while
/// still serving, then syncs its logs.
async fn run_machine(
    mut machine: HostedNode,
    clock: Clock,
    mut inbox: mpsc::Receiver<Inbound>,
    router: Arc<Router>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut metrics = Metrics::new(clock.0);
    let mut stop_by: Option<Instant> = None;
    machine.route(&router, &mut metrics);
    loop {
        if stop_by.is_some_and(|by| machine.ready_to_stop() || Instant::now() >= by) {
            break;
        }
        let deadline = machine.0.poll_timeout().map(|t| clock.instant(t));
        let deadline = match (deadline, stop_by) {
            (Some(d), Some(by)) => Some(d.min(by)),
            (d, by) => d.or(by),
        };
        tokio::select! {
            biased;
            _ = shutdown.changed(), if stop_by.is_none() => {
                tracing::info!("stopping: controlled shutdown");
                stop_by = Some(Instant::now() + CONTROLLED_SHUTDOWN_WAIT);
                machine.begin_shutdown(clock.now());
            }
            _ = sleep_until_opt(deadline) => machine.0.handle_timeout(clock.now()),
            input = inbox.recv() => match input {
                Some(first) => {
                    let mut next = Some(first);
                    let mut taken = 0;
                    // Take what is already queued before routing, so replies batch up.
                    while let Some(Inbound { from, input, at }) = next.take() {
                        match input {
                            Input::Msg(msg) => {
                                metrics.received(from, &msg, at);
                                let sync = (machine.0.broker().is_none()
                                    && matches!(msg, Message::ControllerRequest(_)))
                                .then(|| msg.name());
                                machine.handle(clock.now(), from, msg);
                                if let Some(name) = sync {
                                    metrics.answered_now(name, at);
                                }
                            }
                            Input::Stats => {
                                let snap = machine.stats(&metrics);
                                router.send_frame(from, Frame::Stats(Box::new(snap)));
                            }
                        }
                        taken += 1;
                        if taken < 256 {
                            next = inbox.try_recv().ok();
                        }
                    }
                    // Run what fell due (the group-commit fsync) before any reply leaves,
                    // but let followers start on the burst's records meanwhile.
                    machine.route_replication(&router, &mut metrics);
                    machine.0.handle_timeout(clock.now());
                }
                None => break,
            },
        }
        machine.route(&router, &mut metrics);
    }
    machine.shut_down(clock.now());
    tracing::info!("state machine stopped");
}

/// Sends one output of the state machine, or logs it.
fn emit(out: NodeOutput, router: &Router, metrics: &mut Metrics) {
    match out {
        NodeOutput::Send { to, msg } => {
            metrics.sending(to, &msg);
            router.send(to, msg)
        }
        NodeOutput::Broker(e) => log_broker_event(&e),
        NodeOutput::Controller(e) => tracing::info!(event = ?e, "controller"),
        // Operators (and the kill -9 test) find the active controller here.
        NodeOutput::RoleChanged {
            active,
            term,
            leader,
        } => tracing::info!(active, term, ?leader, "controller quorum role changed"),
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

async fn accept_loop(
    listener: TcpListener,
    router: Arc<Router>,
    inbox: mpsc::Sender<Inbound>,
    max: u32,
    shutdown: watch::Receiver<bool>,
) {
    accept_connections(
        listener,
        "skein",
        shutdown,
        move |stream, peer, shutdown| {
            let (router, inbox) = (router.clone(), inbox.clone());
            async move { inbound_conn(stream, peer, router, inbox, max, shutdown).await }
        },
    )
    .await
}

/// Accepts connections until shutdown, each served by its own task from `serve`; an
/// accept error (e.g. out of file descriptors) is logged and retried after a pause. The
/// one accept loop of the node's listeners (`protocol` names which, in logs).
pub(crate) async fn accept_connections<F, Fut>(
    listener: TcpListener,
    protocol: &'static str,
    mut shutdown: watch::Receiver<bool>,
    serve: F,
) where
    F: Fn(TcpStream, SocketAddr, watch::Receiver<bool>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            res = listener.accept() => match res {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(serve(stream, peer, shutdown.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, protocol, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}

/// One accepted connection: a Hello, then messages until the peer leaves or misbehaves.
async fn inbound_conn(
    stream: TcpStream,
    sock: SocketAddr,
    router: Arc<Router>,
    inbox: mpsc::Sender<Inbound>,
    max: u32,
    mut shutdown: watch::Receiver<bool>,
) {
    let (mut rd, wr) = crate::net::split(stream);
    let mut wr = BufWriter::new(wr);
    let first = tokio::select! {
        _ = shutdown.changed() => return,
        r = tokio::time::timeout(Duration::from_secs(10), read_frame(&mut rd, max)) => r,
    };
    let addr = match first {
        Ok(Ok(Some(Frame::Hello(Hello { from })))) => match from {
            Peer::Node(n) => Address::Node(n),
            Peer::Controller(c) => Address::Controller(c),
            Peer::Client => Address::Client(router.next_conn.fetch_add(1, Ordering::Relaxed)),
        },
        Ok(Ok(None)) => return,
        Ok(Ok(Some(other))) => {
            let reason = format!(
                "protocol error: expected Hello first, got {}",
                describe(&other)
            );
            return refuse(&mut wr, sock, None, &reason, max).await;
        }
        Ok(Err(e)) => return refuse(&mut wr, sock, None, &e.to_string(), max).await,
        Err(_) => return refuse(&mut wr, sock, None, "no Hello within 10 s", max).await,
    };
    let conn = router.next_conn.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = mpsc::channel(QUEUE);
    router
        .inbound
        .lock()
        .expect("router lock")
        .insert(addr, (conn, tx.clone()));
    tracing::debug!(%sock, peer = %addr, "connection open");
    let writer = tokio::spawn(write_loop(wr, rx, max));
    let reason = read_loop(&mut rd, addr, &inbox, max, &mut shutdown).await;
    {
        let mut inbound = router.inbound.lock().expect("router lock");
        if inbound.get(&addr).is_some_and(|(c, _)| *c == conn) {
            inbound.remove(&addr);
        }
    }
    if let Some(e) = &reason {
        tracing::warn!(%sock, peer = %addr, reason = %e, "closing connection: bad input");
        let _ = tx
            .send(Frame::Goodbye(Goodbye {
                reason: e.to_string(),
            }))
            .await;
    }
    drop(tx);
    // The writer ends once the router's copy of the sender is gone too.
    let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
}

fn describe(frame: &Frame) -> String {
    match frame {
        Frame::Hello(_) => "Hello".into(),
        Frame::Goodbye(g) => format!("Goodbye({})", g.reason),
        Frame::Msg(m) => m.name().into(),
        Frame::StatsRequest => "StatsRequest".into(),
        Frame::Stats(_) => "Stats".into(),
    }
}

async fn refuse(
    wr: &mut BufWriter<OwnedWriteHalf>,
    sock: SocketAddr,
    peer: Option<Address>,
    reason: &str,
    max: u32,
) {
    tracing::warn!(%sock, ?peer, %reason, "closing connection: bad input");
    let bye = Frame::Goodbye(Goodbye {
        reason: reason.to_string(),
    });
    let _ = write_frame(wr, &bye, max).await;
    let _ = wr.flush().await;
    let _ = wr.shutdown().await;
}

/// Forwards frames to the state machine. Returns the reason for a bad-input close.
async fn read_loop(
    rd: &mut OwnedReadHalf,
    from: Address,
    inbox: &mpsc::Sender<Inbound>,
    max: u32,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<FrameError> {
    loop {
        let frame = tokio::select! {
            _ = shutdown.changed() => return None,
            f = read_frame(rd, max) => f,
        };
        match frame {
            Ok(Some(Frame::Msg(msg))) => {
                let input = Input::Msg(msg);
                let at = Instant::now();
                if inbox.send(Inbound { from, input, at }).await.is_err() {
                    return None; // node stopping
                }
            }
            Ok(Some(Frame::StatsRequest)) => {
                let (input, at) = (Input::Stats, Instant::now());
                if inbox.send(Inbound { from, input, at }).await.is_err() {
                    return None;
                }
            }
            Ok(Some(Frame::Stats(_))) => {
                tracing::debug!(peer = %from, "unsolicited stats frame ignored");
            }
            Ok(Some(Frame::Goodbye(g))) => {
                tracing::info!(peer = %from, reason = %g.reason, "peer said goodbye");
                return None;
            }
            Ok(Some(Frame::Hello(_))) => {
                return Some(FrameError::Undecodable {
                    kind: crate::frame::kind::HELLO,
                    reason: "a second Hello on one connection".into(),
                })
            }
            Ok(None) => return None,
            Err(FrameError::Io(e)) => {
                tracing::debug!(peer = %from, error = %e, "connection lost");
                return None;
            }
            Err(e) => return Some(e),
        }
    }
}

async fn write_loop(mut wr: BufWriter<OwnedWriteHalf>, mut rx: mpsc::Receiver<Frame>, max: u32) {
    while let Some(frame) = rx.recv().await {
        let mut next = Some(frame);
        // Write everything queued, then flush once.
        while let Some(f) = next {
            match write_frame(&mut wr, &f, max).await {
                Ok(()) => {}
                Err(crate::frame::EncodeError::Io(_)) => return,
                Err(e) => tracing::error!(error = %e, "cannot send frame; dropped"),
            }
            next = rx.try_recv().ok();
        }
        if wr.flush().await.is_err() {
            return;
        }
    }
    let _ = wr.flush().await;
    let _ = wr.shutdown().await;
}

/// Dials `sock` when there is something to send; what the peer sends back on that
/// connection goes to the state machine as coming from `addr`.
async fn outbound_task(
    me: Peer,
    addr: Address,
    sock: SocketAddr,
    mut rx: mpsc::Receiver<Frame>,
    inbox: mpsc::Sender<Inbound>,
    max: u32,
) {
    let mut conn: Option<(BufWriter<OwnedWriteHalf>, JoinHandle<()>)> = None;
    let mut dial_after = Instant::now();
    while let Some(frame) = rx.recv().await {
        if conn
            .as_ref()
            .is_some_and(|(_, reader)| reader.is_finished())
        {
            conn = None; // the peer closed: dial again
        }
        if conn.is_none() {
            if Instant::now() < dial_after {
                continue;
            }
            match dial(me, sock, max).await {
                Ok((rd, wr)) => {
                    tracing::debug!(peer = %addr, %sock, "connected");
                    let inbox = inbox.clone();
                    let reader = tokio::spawn(async move {
                        let mut rd = rd;
                        let (_keep, mut never) = watch::channel(false);
                        if let Some(e) = read_loop(&mut rd, addr, &inbox, max, &mut never).await {
                            tracing::warn!(peer = %addr, reason = %e, "closing connection: bad input");
                        }
                    });
                    conn = Some((wr, reader));
                }
                Err(e) => {
                    tracing::debug!(peer = %addr, %sock, error = %e, "cannot connect; dropping");
                    dial_after = Instant::now() + REDIAL_BACKOFF;
                    continue;
                }
            }
        }
        let (wr, _) = conn.as_mut().expect("connected above");
        let mut next = Some(frame);
        let mut ok = true;
        while let Some(f) = next {
            if write_frame(wr, &f, max).await.is_err() {
                ok = false;
                break;
            }
            next = rx.try_recv().ok();
        }
        if !ok || wr.flush().await.is_err() {
            if let Some((_, reader)) = conn.take() {
                reader.abort();
            }
        }
    }
    if let Some((_, reader)) = conn {
        reader.abort();
    }
}

async fn dial(
    me: Peer,
    sock: SocketAddr,
    max: u32,
) -> std::io::Result<(OwnedReadHalf, BufWriter<OwnedWriteHalf>)> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(sock))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))??;
    stream.set_nodelay(true)?;
    let (rd, wr) = crate::net::split(stream);
    let mut wr = BufWriter::new(wr);
    write_frame(&mut wr, &Frame::Hello(Hello { from: me }), max)
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    wr.flush().await?;
    Ok((rd, wr))
}

/// Runs a node until SIGTERM or ctrl-c, then stops it gracefully.
pub async fn run_until_signal(cfg: ValidNodeConfig) -> Result<(), StartError> {
    let handle = start(cfg, None).await?;
    wait_for_signal().await;
    tracing::info!("shutdown signal received; stopping");
    handle.stop().await;
    tracing::info!("stopped");
    Ok(())
}

#[cfg(not(madsim))]
async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// madsim has no Unix signals: its `Handle::send_ctrl_c(node)` stands in for SIGTERM.
#[cfg(madsim)]
async fn wait_for_signal() {
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{BrokerEntry, ClusterConfig, NodeConfig, Tuning};

    fn cfg(dir: &std::path::Path, fsync: FsyncPolicy, tuning: Tuning) -> ValidNodeConfig {
        NodeConfig {
            role: NodeKind::Broker,
            node_id: Some(1),
            data_dir: dir.to_path_buf(),
            fsync,
            fsync_interval_ms: 40,
            max_frame_bytes: crate::frame::DEFAULT_MAX_FRAME,
            tuning,
            bugs: Vec::new(),
            cluster: ClusterConfig {
                controller: Some("127.0.0.1:9000".into()),
                controllers: Vec::new(),
                brokers: vec![BrokerEntry {
                    id: 1,
                    address: "127.0.0.1:9001".into(),
                    kafka_listener: None,
                }],
            },
        }
        .validate()
        .unwrap()
    }

    #[test]
    fn config_reaches_the_state_machines() {
        let dir = tempfile::tempdir().unwrap();
        let d = BrokerConfig::default();
        let always = broker_config(&cfg(dir.path(), FsyncPolicy::Always, Tuning::default()));
        assert_eq!(always.flush_interval, GROUP_COMMIT);
        assert_eq!(always.heartbeat_interval, d.heartbeat_interval);
        let interval = broker_config(&cfg(dir.path(), FsyncPolicy::Interval, Tuning::default()));
        assert_eq!(interval.flush_interval, 40_000_000);
        let tuning = Tuning {
            session_timeout_ms: Some(3000),
            heartbeat_interval_ms: Some(100),
            replica_lag_time_max_ms: Some(2000),
            segment_bytes: Some(4096),
            cleaner_interval_ms: Some(50),
        };
        let c = cfg(dir.path(), FsyncPolicy::Always, tuning);
        let b = broker_config(&c);
        assert_eq!(b.heartbeat_interval, 100_000_000);
        assert_eq!(b.log.segment_bytes, 4096);
        assert_eq!(b.cleaner_interval, 50_000_000);
        assert_eq!(always.log, d.log, "unset tuning keeps the core defaults");
        assert_eq!(always.cleaner_interval, d.cleaner_interval);
        assert_eq!(b.replica_lag_time_max, 2_000_000_000);
        let ctl = controller_config(&c);
        assert_eq!(ctl.session_timeout, 3_000_000_000);
        assert_eq!(ctl.restart_grace, 3_000_000_000);
    }

    #[test]
    fn never_policy_skips_only_sync() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = PolicyStorage::new(FileStorage::new(dir.path()).unwrap(), FsyncPolicy::Never);
        s.append("d/f", b"abc").unwrap();
        s.sync("d/f").unwrap();
        s.write_atomic("meta", b"m").unwrap();
        assert_eq!(s.read_all("d/f").unwrap(), b"abc");
        assert_eq!(s.read_all("meta").unwrap(), b"m");
        assert!(!s.sync);
        assert!(
            PolicyStorage::new(FileStorage::new(dir.path()).unwrap(), FsyncPolicy::Interval).sync
        );
    }
}
