//! An in-process cluster on ephemeral 127.0.0.1 ports in a temp dir, for tests.

#![allow(dead_code)]

pub mod kafka;
pub mod procs;
pub mod up;

use skein_core::controller::TopicConfig;
use skein_core::message::{Acks, OffsetSpec};
use skein_core::types::TopicPartition;
use skein_node::client::{Client, ClientOptions};
use skein_node::config::{
    BrokerEntry, ClusterAddresses, ClusterConfig, FsyncPolicy, NodeConfig, NodeKind, Tuning,
};
use skein_node::runtime::{start, NodeHandle};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::net::TcpListener;

pub struct TestCluster {
    pub cluster: ClusterAddresses,
    pub controller: Option<NodeHandle>,
    pub brokers: Vec<NodeHandle>,
    /// Broker configs, index = id - 1 (to restart them).
    pub configs: Vec<skein_node::config::ValidNodeConfig>,
    pub dir: tempfile::TempDir,
}

impl TestCluster {
    /// Controller plus `n` brokers, every broker registered and unfenced on return.
    pub async fn start(n: u32) -> Self {
        Self::start_with(n, FsyncPolicy::Always).await
    }

    /// Like `start`, with the given fsync policy on every node.
    pub async fn start_with(n: u32, fsync: FsyncPolicy) -> Self {
        // Short sessions so a stopped broker is fenced (and its leadership moved) fast.
        let tuning = Tuning {
            session_timeout_ms: Some(3000),
            heartbeat_interval_ms: Some(250),
            replica_lag_time_max_ms: None,
            ..Tuning::default()
        };
        Self::start_tuned(n, fsync, tuning).await
    }

    /// Like `start_with`, with the given tuning on every node.
    pub async fn start_tuned(n: u32, fsync: FsyncPolicy, tuning: Tuning) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut listeners = Vec::new();
        for _ in 0..=n {
            listeners.push(TcpListener::bind("127.0.0.1:0").await.unwrap());
        }
        let addr = |i: usize| listeners[i].local_addr().unwrap().to_string();
        let cluster_cfg = ClusterConfig {
            controller: Some(addr(0)),
            controllers: Vec::new(),
            brokers: (1..=n)
                .map(|id| BrokerEntry {
                    id,
                    address: addr(id as usize),
                    kafka_listener: None,
                })
                .collect(),
        };
        let cluster = cluster_cfg.validate().unwrap();
        let mut handles = Vec::new();
        let mut configs = Vec::new();
        for (i, listener) in listeners.into_iter().enumerate() {
            let (role, node_id, name) = match i {
                0 => (NodeKind::Controller, None, "controller".to_string()),
                i => (NodeKind::Broker, Some(i as u32), format!("broker-{i}")),
            };
            let cfg = NodeConfig {
                role,
                node_id,
                data_dir: dir.path().join(name),
                fsync,
                fsync_interval_ms: 50,
                max_frame_bytes: skein_node::frame::DEFAULT_MAX_FRAME,
                tuning: tuning.clone(),
                bugs: Vec::new(),
                cluster: cluster_cfg.clone(),
            }
            .validate()
            .unwrap();
            if node_id.is_some() {
                configs.push(cfg.clone());
            }
            handles.push(start(cfg, Some(listener)).await.unwrap());
        }
        let controller = handles.remove(0);
        let tc = Self {
            cluster,
            controller: Some(controller),
            brokers: handles,
            configs,
            dir,
        };
        let mut client = tc.client();
        tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                if let Ok(image) = client.cluster_image().await {
                    if image.unfenced_brokers().len() == n as usize {
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .expect("brokers register within 30 s");
        tc
    }

    pub fn client(&self) -> Client {
        Client::new(
            self.cluster.clone(),
            ClientOptions {
                request_timeout: Duration::from_secs(5),
                retry_for: Duration::from_secs(20),
                ..ClientOptions::default()
            },
        )
    }

    /// Stops broker `id` gracefully (SIGTERM path); returns once it has stopped.
    pub async fn stop_broker(&mut self, id: u32) {
        let idx = (id - 1) as usize;
        let placeholder = self.brokers.remove(idx);
        placeholder.stop().await;
    }

    /// Starts broker `id` again on the same address and data dir (after `stop_broker`).
    pub async fn restart_broker(&mut self, id: u32) {
        let idx = (id - 1) as usize;
        let cfg = self.configs[idx].clone();
        // The old listener is closed once the stopped node's tasks are gone; retry briefly.
        for attempt in 0.. {
            match start(cfg.clone(), None).await {
                Ok(h) => {
                    self.brokers.insert(idx, h);
                    return;
                }
                Err(e) if attempt < 50 => {
                    eprintln!("restart broker {id}: {e}; retrying");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("cannot restart broker {id}: {e}"),
            }
        }
    }

    pub async fn stop(mut self) {
        for b in self.brokers.drain(..) {
            b.stop().await;
        }
        if let Some(c) = self.controller.take() {
            c.stop().await;
        }
    }
}

/// Creates `name` with `partitions` partitions, replication factor 3 and
/// min.insync.replicas 2: the durable topic shape of the in-process tests (acks=all needs
/// two copies).
pub async fn create_durable_topic(client: &mut Client, name: &str, partitions: u32) {
    let config = TopicConfig {
        partitions,
        replication_factor: 3,
        min_insync_replicas: 2,
        ..TopicConfig::default()
    };
    client.create_topic(name, config).await.unwrap();
}

/// Produces `values` as one batch with `acks`; returns `(offset, value)` of each record.
pub async fn produce_values(
    client: &mut Client,
    tp: &TopicPartition,
    values: Vec<Vec<u8>>,
    acks: Acks,
) -> Vec<(u64, Vec<u8>)> {
    let p = client.produce(tp, values.clone(), acks).await.unwrap();
    let base = p.base_offset.expect("acks=all returns an offset");
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| (base + i as u64, v))
        .collect()
}

/// Reads `tp` from its earliest offset through offset `last`, waiting for records that
/// are not there yet; offsets only go forward.
pub async fn read_through(
    client: &mut Client,
    tp: &TopicPartition,
    last: u64,
) -> BTreeMap<u64, Vec<u8>> {
    let mut at = client.list_offset(tp, OffsetSpec::Earliest).await.unwrap();
    let mut seen = BTreeMap::new();
    while at <= last {
        let (records, _) = client.fetch(tp, at, 64 << 10).await.unwrap();
        if records.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        for (offset, value) in records {
            assert!(offset >= at, "offset {offset} went backwards from {at}");
            at = offset + 1;
            seen.insert(offset, value.expect("records carry values"));
        }
    }
    seen
}

/// Runs `cmd` with `stdin` to completion; killed (`kill -9`) and a panic after `limit`.
/// For tests that drive the `skein` binary or real Kafka tools as processes.
pub fn run_with_stdin(
    mut cmd: std::process::Command,
    stdin: &[u8],
    limit: Duration,
) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let mut input = child.stdin.take().expect("piped");
    let data = stdin.to_vec();
    std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("the child ran"),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .arg("-9")
                .arg(pid.to_string())
                .status();
            panic!("{cmd:?} did not finish within {limit:?}");
        }
    }
}
