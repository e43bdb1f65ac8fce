#![cfg(madsim)]
//! The real node runtime inside madsim: a Raft quorum of three controllers and three
//! brokers, each a simulated madsim node running `skein_node::runtime::start` (the very code
//! `skein node` runs), and clients running `skein_node::client::Client`, all on madsim's
//! simulated TCP and clock.
//!
//! One test, run once per seed (`MADSIM_TEST_SEED`, `MADSIM_TEST_NUM`): an RF 3 topic with
//! min.insync.replicas 2; an idempotent acks=all producer writes unique values while a
//! nemesis kills and restarts nodes (brokers and controllers, the active one included when
//! the draw falls on it), clogs single links and partitions one node (a broker or a
//! controller) away from everybody; then the faults heal and a consumer reads every
//! partition to its end. Every send and poll goes into a history in the format of
//! `docs/history.md`, and `skein_jepsen::check` (with final reads) must find no anomaly.
//!
//! Storage is the runtime's real `FileStorage`, one temp dir per node (under /dev/shm when
//! it exists). madsim only kills a
//! node's tasks at await points, and file writes are synchronous calls between them, so a
//! kill here loses nothing written (synced or not) and tears nothing: disk faults are the
//! job of Skein's own simulator (`skein sim`), which runs the same state machines on a
//! fault-injecting disk.
//!
//! Seeds 47, 61, 65, 84 and 91 (among others) caught the idempotent producer writing a batch
//! twice after a deposed leader's sequence error (fixed in `Client::produce`, see
//! docs/node.md), so CI's seeds 1..=100 keep that fixed.
//!
//! Run: `MADSIM_TEST_SEED=1 MADSIM_TEST_NUM=100 RUSTFLAGS="--cfg madsim"
//! CARGO_TARGET_DIR=target/madsim cargo test -p skein-tests` (README, "Testing").

use madsim::net::NetSim;
use madsim::rand::{thread_rng, Rng};
use madsim::runtime::{Handle, NodeHandle};
use skein_core::controller::TopicConfig;
use skein_core::message::Acks;
use skein_core::types::TopicPartition;
use skein_jepsen::{
    check, CheckOptions, Event, EventType, Function, PollValue, PolledRecord, SendValue, Value,
};
use skein_node::client::{Client, ClientOptions};
use skein_node::config::{
    BrokerEntry, ClusterAddresses, ClusterConfig, ControllerEntry, FsyncPolicy, NodeConfig,
    NodeKind,
};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::{sleep, Instant};

const BROKERS: u32 = 3;
/// A Raft quorum: one controller down or cut off at a time leaves a majority.
const CONTROLLERS: u32 = 3;
const PARTITIONS: u32 = 2;
const TOPIC: &str = "t";
/// Simulated seconds of produce under faults.
const FAULT_SECS: u64 = 40;
/// Records per produce batch.
const BATCH: usize = 4;

/// Simulated addresses: madsim's network lives in memory, nothing reaches the OS.
fn ip(last: u8) -> IpAddr {
    IpAddr::from([10, 0, 0, last])
}
fn controller_ip(id: u32) -> IpAddr {
    ip(id as u8)
}
fn broker_ip(id: u32) -> IpAddr {
    ip(10 + id as u8)
}

/// Where the nodes' data dirs go: tmpfs when there is one. The state machines make
/// thousands of atomic (fsynced) metadata writes per run, and on a real disk those syncs,
/// useless under madsim, would be most of the wall-clock time.
fn data_root() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    let builder = tempfile::Builder::new()
        .prefix("skein-madsim-")
        .tempdir_in(shm);
    match builder {
        Ok(dir) if shm.is_dir() => dir,
        _ => tempfile::tempdir().expect("temp dir"),
    }
}

/// The history all clients append to, in (simulated) real-time order.
#[derive(Clone)]
struct History {
    events: Arc<Mutex<Vec<Event>>>,
    origin: Instant,
}

impl History {
    fn record(&self, process: u64, kind: EventType, f: Function, value: Value) {
        let mut events = self.events.lock().unwrap();
        let index = events.len() as u64;
        let time = self.origin.elapsed().as_nanos() as u64;
        events.push(Event::new(index, time, process, kind, f, value));
    }
}

fn cluster_config() -> ClusterConfig {
    ClusterConfig {
        controller: None,
        controllers: (1..=CONTROLLERS)
            .map(|id| ControllerEntry {
                id,
                address: SocketAddr::new(controller_ip(id), 9000).to_string(),
            })
            .collect(),
        brokers: (1..=BROKERS)
            .map(|id| BrokerEntry {
                id,
                address: SocketAddr::new(broker_ip(id), 9000).to_string(),
                kafka_listener: None,
            })
            .collect(),
    }
}

fn client(cluster: &ClusterAddresses) -> Client {
    Client::new(
        cluster.clone(),
        ClientOptions {
            request_timeout: Duration::from_secs(2),
            retry_for: Duration::from_secs(8),
            retry_backoff: Duration::from_millis(100),
            ..ClientOptions::default()
        },
    )
}

/// A simulated node running the real runtime with its own data dir; a restart (madsim
/// re-runs `init`) opens the same dir, so the node recovers its logs as after a crash.
fn server_node(
    name: &str,
    ip: IpAddr,
    role: NodeKind,
    id: Option<u32>,
    dir: &std::path::Path,
) -> NodeHandle {
    let cfg = NodeConfig {
        role,
        node_id: id,
        data_dir: dir.join(name),
        // A madsim kill loses no file data (see the top of this file), so an fsync would
        // only cost wall-clock time; `never` skips just the sync calls, the state machines
        // run exactly as with `always` (flush interval 0 for both).
        fsync: FsyncPolicy::Never,
        fsync_interval_ms: 50,
        max_frame_bytes: skein_node::frame::DEFAULT_MAX_FRAME,
        tuning: skein_node::config::Tuning {
            session_timeout_ms: Some(3000),
            heartbeat_interval_ms: Some(250),
            replica_lag_time_max_ms: Some(2000),
            ..skein_node::config::Tuning::default()
        },
        bugs: Vec::new(),
        cluster: cluster_config(),
    }
    .validate()
    .expect("valid node config");
    Handle::current()
        .create_node()
        .name(name)
        .ip(ip)
        .init(move || {
            let cfg = cfg.clone();
            async move {
                // The old listener of a killed node is released with it; retry briefly anyway.
                let mut tries = 0;
                let node = loop {
                    match skein_node::runtime::start(cfg.clone(), None).await {
                        Ok(node) => break node,
                        Err(e) if tries < 20 => {
                            tries += 1;
                            tracing::warn!(error = %e, "start failed; retrying");
                            sleep(Duration::from_millis(100)).await;
                        }
                        Err(e) => panic!("node cannot start: {e}"),
                    }
                };
                // Runs until madsim kills the node (which drops every task of it).
                std::future::pending::<()>().await;
                drop(node);
            }
        })
        .build()
}

/// Produces unique values `p<process>-<n>` round-robin over the partitions until `stop`,
/// idempotently with acks=all. A batch that finally fails is `info` (it may or may not
/// have been written), followed by a `crash`: the producer starts over with a new id.
async fn produce(cluster: ClusterAddresses, history: History, process: u64, stop: Arc<AtomicBool>) {
    let mut n = 0u64;
    let mut batch_no = 0u32;
    'session: while !stop.load(Ordering::Relaxed) {
        let mut c = client(&cluster);
        if c.enable_idempotence().await.is_err() {
            sleep(Duration::from_millis(500)).await;
            continue;
        }
        while !stop.load(Ordering::Relaxed) {
            let tp = TopicPartition::new(TOPIC, batch_no % PARTITIONS);
            batch_no += 1;
            let values: Vec<String> = (0..BATCH)
                .map(|_| {
                    n += 1;
                    format!("p{process}-{n}")
                })
                .collect();
            let send = |v: &str| {
                SendValue::new(TOPIC, tp.partition, v).with_acks(skein_jepsen::AckPromise::All)
            };
            let result = c
                .produce(
                    &tp,
                    values.iter().map(|v| v.clone().into_bytes()).collect(),
                    Acks::All,
                )
                .await;
            // One process does one operation at a time: an invoke/completion pair per record,
            // recorded when the batch completes.
            match result {
                Ok(p) => {
                    let base = p.base_offset.expect("acks=all acknowledges an offset");
                    for (i, v) in values.iter().enumerate() {
                        let ok = send(v).at(base + i as u64);
                        history.record(
                            process,
                            EventType::Invoke,
                            Function::Send,
                            Value::Send(send(v)),
                        );
                        history.record(process, EventType::Ok, Function::Send, Value::Send(ok));
                    }
                }
                Err(e) => {
                    tracing::info!(error = %e, "produce failed; restarting the producer");
                    for v in &values {
                        history.record(
                            process,
                            EventType::Invoke,
                            Function::Send,
                            Value::Send(send(v)),
                        );
                        history.record(
                            process,
                            EventType::Info,
                            Function::Send,
                            Value::Send(send(v)),
                        );
                    }
                    history.record(process, EventType::Info, Function::Crash, Value::Null);
                    continue 'session;
                }
            }
        }
    }
}

/// Reads every partition from offset 0 until it reaches the high watermark and the
/// highest acknowledged offset, recording each poll.
async fn consume_all(
    cluster: ClusterAddresses,
    history: History,
    process: u64,
    acked_end: BTreeMap<u32, u64>,
) -> u64 {
    let mut c = client(&cluster);
    let partitions: Vec<(skein_jepsen::Text, u32)> =
        (0..PARTITIONS).map(|p| (TOPIC.into(), p)).collect();
    history.record(
        process,
        EventType::Ok,
        Function::Assign,
        Value::Assign(skein_jepsen::AssignValue {
            partitions,
            ..Default::default()
        }),
    );
    let mut read = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    for p in 0..PARTITIONS {
        let tp = TopicPartition::new(TOPIC, p);
        let want = acked_end.get(&p).copied().unwrap_or(0);
        let mut at = 0;
        loop {
            assert!(
                Instant::now() < deadline,
                "{tp}: read only to {at}, acknowledged up to {want}"
            );
            history.record(process, EventType::Invoke, Function::Poll, Value::Null);
            match c.fetch_next(&tp, at, 1 << 20).await {
                Ok(fetched) => {
                    let hw = fetched.high_watermark;
                    let next = fetched.next_offset;
                    let records = fetched.records;
                    let records: Vec<PolledRecord> = records
                        .into_iter()
                        .map(|(o, v)| {
                            let v = String::from_utf8(v.unwrap_or_default()).expect("utf-8 values");
                            PolledRecord::new(TOPIC, p, o, v)
                        })
                        .collect();
                    // Past the records and any leader-epoch markers the broker read
                    // (brokers leave those out). Skipping real records here would show
                    // up as lost writes or unseen sends in the check.
                    assert!(
                        next >= at,
                        "{tp}: next offset {next} below the fetch offset {at}"
                    );
                    at = next;
                    read += records.len() as u64;
                    history.record(
                        process,
                        EventType::Ok,
                        Function::Poll,
                        Value::Poll(PollValue { records }),
                    );
                    if at >= hw && at >= want {
                        break;
                    }
                }
                Err(e) => {
                    // Unknown what was consumed: the checker forgets this process's position.
                    tracing::info!(error = %e, "poll failed");
                    history.record(process, EventType::Info, Function::Poll, Value::Null);
                    sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }
    read
}

/// Kills and restarts nodes, clogs links and partitions one node away, for `FAULT_SECS`;
/// leaves every node running and every link open. One fault at a time, so a majority of the
/// controllers and of each partition's replicas is always up.
async fn nemesis(servers: &[NodeHandle], client_node: &NodeHandle) -> [u32; 5] {
    let handle = Handle::current();
    let net = NetSim::current();
    let started = Instant::now();
    let mut rng = thread_rng();
    // Per kind: kill, crash-restart, clog link, partition, clog node.
    let mut faults = [0u32; 5];
    while started.elapsed() < Duration::from_secs(FAULT_SECS) {
        sleep(Duration::from_millis(rng.gen_range(300..2000))).await;
        let kind = rng.gen_range(0..5);
        faults[kind] += 1;
        match kind {
            0 => {
                // Crash a broker or a controller, bring it back later.
                let victim = &servers[rng.gen_range(0..servers.len())];
                tracing::info!(node = %victim.id(), "nemesis: kill");
                handle.kill(victim.id());
                sleep(Duration::from_millis(rng.gen_range(500..5000))).await;
                tracing::info!(node = %victim.id(), "nemesis: restart");
                handle.restart(victim.id());
            }
            1 => {
                // Crash and restart at once. (`restart` alone would keep the old
                // sockets bound in madsim 0.2.34: only `kill` releases them.)
                let victim = &servers[rng.gen_range(0..servers.len())];
                tracing::info!(node = %victim.id(), "nemesis: crash-restart");
                handle.kill(victim.id());
                handle.restart(victim.id());
            }
            2 => {
                // One direction of one link (server to server, or client to server).
                let a = rng.gen_range(0..=servers.len());
                let b = rng.gen_range(0..servers.len());
                let src = if a == servers.len() {
                    client_node.id()
                } else {
                    servers[a].id()
                };
                let dst = servers[b].id();
                if src != dst {
                    tracing::info!(%src, %dst, "nemesis: clog link");
                    net.clog_link(src, dst);
                    sleep(Duration::from_millis(rng.gen_range(500..4000))).await;
                    net.unclog_link(src, dst);
                }
            }
            3 => {
                // Partition one node (a broker or a controller) from everybody else, both
                // directions.
                let victim = servers[rng.gen_range(0..servers.len())].id();
                let others: Vec<_> = servers
                    .iter()
                    .map(|s| s.id())
                    .chain([client_node.id()])
                    .filter(|n| *n != victim)
                    .collect();
                tracing::info!(node = %victim, "nemesis: partition");
                for o in &others {
                    net.clog_link(victim, *o);
                    net.clog_link(*o, victim);
                }
                sleep(Duration::from_millis(rng.gen_range(1000..6000))).await;
                for o in &others {
                    net.unclog_link(victim, *o);
                    net.unclog_link(*o, victim);
                }
            }
            _ => {
                // A whole node cut off (in and out), e.g. a paused VM's network.
                let victim = servers[rng.gen_range(0..servers.len())].id();
                tracing::info!(node = %victim, "nemesis: clog node");
                net.clog_node(victim);
                sleep(Duration::from_millis(rng.gen_range(500..4000))).await;
                net.unclog_node(victim);
            }
        }
    }
    tracing::info!(?faults, "nemesis: healed");
    faults
}

#[madsim::test]
async fn cluster_survives_kills_clogs_and_partitions() {
    if std::env::var_os("RUST_LOG").is_some() {
        // Logs of every node, tagged with the madsim node and simulated time.
        madsim::runtime::init_logger();
    }
    let seed = Handle::current().seed();
    let dir = data_root();
    let cluster = cluster_config().validate().expect("valid cluster");
    let mut servers: Vec<NodeHandle> = (1..=CONTROLLERS)
        .map(|id| {
            server_node(
                &format!("controller-{id}"),
                controller_ip(id),
                NodeKind::Controller,
                Some(id),
                dir.path(),
            )
        })
        .collect();
    for id in 1..=BROKERS {
        servers.push(server_node(
            &format!("broker-{id}"),
            broker_ip(id),
            NodeKind::Broker,
            Some(id),
            dir.path(),
        ));
    }
    let client_node = Handle::current()
        .create_node()
        .name("client")
        .ip(ip(100))
        .build();
    let history = History {
        events: Arc::new(Mutex::new(Vec::new())),
        origin: Instant::now(),
    };

    // Wait for every broker, create the topic, wait until the brokers serve it.
    let setup = cluster.clone();
    client_node
        .spawn(async move {
            let mut c = client(&setup);
            loop {
                if let Ok(image) = c.cluster_image().await {
                    if image.unfenced_brokers().len() == BROKERS as usize {
                        break;
                    }
                }
                sleep(Duration::from_millis(100)).await;
            }
            let config = TopicConfig {
                partitions: PARTITIONS,
                replication_factor: 3,
                min_insync_replicas: 2,
                unclean_leader_election: false,
                retention_ms: None,
                retention_bytes: None,
                ..TopicConfig::default()
            };
            c.create_topic(TOPIC, config).await.expect("create topic");
            c.wait_topic(TOPIC)
                .await
                .expect("topic reaches the brokers");
        })
        .await
        .expect("setup");

    let stop = Arc::new(AtomicBool::new(false));
    let producer = client_node.spawn(produce(cluster.clone(), history.clone(), 1, stop.clone()));
    let faults = nemesis(&servers, &client_node).await;
    stop.store(true, Ordering::Relaxed);
    producer.await.expect("producer");

    // Highest acknowledged offset + 1 per partition: the consumer must read at least that far.
    let mut acked_end = BTreeMap::new();
    for e in history.events.lock().unwrap().iter() {
        if let (EventType::Ok, Some(s)) = (e.kind, e.send()) {
            let end = acked_end.entry(s.partition).or_insert(0);
            *end = (*end).max(s.offset.expect("ok send has an offset") + 1);
        }
    }
    let read = client_node
        .spawn(consume_all(cluster.clone(), history.clone(), 2, acked_end))
        .await
        .expect("consumer");

    let events = history.events.lock().unwrap().clone();
    let report = check(
        &events,
        &CheckOptions {
            final_reads: true,
            ..CheckOptions::default()
        },
    );
    if !report.valid || std::env::var_os("SKEIN_MADSIM_HISTORY").is_some() {
        let path = std::env::temp_dir().join(format!("skein-madsim-{seed}.jsonl"));
        let mut w = skein_jepsen::HistoryWriter::new(std::fs::File::create(&path).unwrap());
        for e in &events {
            let mut e = e.clone();
            w.write_event(&mut e).unwrap();
        }
        eprintln!("seed {seed}: history written to {}", path.display());
    }
    assert!(
        report.valid,
        "seed {seed}: the checker found anomalies:\n{report}"
    );
    let stats = &report.stats;
    eprintln!(
        "seed {seed}: faults [kill, crash-restart, clog link, partition, clog node] = {faults:?}; \
         {} sends ok, {} info, {read} records read",
        stats.sends_ok, stats.sends_info
    );
    // The faults must not have stopped all progress: a history with nothing in it proves
    // nothing.
    assert!(
        stats.sends_ok >= 100,
        "seed {seed}: only {} acknowledged sends",
        stats.sends_ok
    );
    assert!(
        read >= stats.sends_ok,
        "seed {seed}: read {read} of {} acknowledged",
        stats.sends_ok
    );
}
