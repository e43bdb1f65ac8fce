//! Who runs where in a jepsen run: the node list (controllers first, then brokers), their
//! real listeners, and each node's configuration, which names every peer by the port of the
//! proxy link `me -> peer` (its own entry keeps its real port, where it listens). A node's
//! address in the config is only where the others dial it and nodes identify each other by
//! their Hello, so per-node peer lists put every node-to-node connection behind the proxy
//! without root.

use anyhow::Context;
use skein_core::types::NodeId;
use skein_jepsen::nemesis::Topology;
use skein_jepsen::proxy::Proxy;
use skein_node::config::{
    BrokerEntry, ClusterConfig, ControllerEntry, FsyncPolicy, NodeConfig, NodeKind, Tuning,
};
use std::net::SocketAddr;
use std::path::Path;

pub struct Layout {
    pub controllers: u32,
    pub brokers: u32,
    /// `controller` (alone) or `controller-1..N`, then `broker-1..M`.
    pub names: Vec<String>,
    /// Where each node listens.
    pub real: Vec<SocketAddr>,
    /// The `real` ports, held bound until [`Layout::release_ports`]: the proxy links bind
    /// port 0 in between, and the OS would otherwise hand one of them a node's port.
    reserved: Vec<std::net::TcpListener>,
}

impl Layout {
    pub fn new(controllers: u32, brokers: u32) -> anyhow::Result<Self> {
        let mut names: Vec<String> = if controllers == 1 {
            vec!["controller".to_string()]
        } else {
            (1..=controllers)
                .map(|id| format!("controller-{id}"))
                .collect()
        };
        names.extend((1..=brokers).map(|id| format!("broker-{id}")));
        let reserved = crate::cli::common::reserve_ports(names.len())?;
        let real = crate::cli::common::listener_ports(&reserved)?
            .into_iter()
            .map(|port| SocketAddr::from(([127, 0, 0, 1], port)))
            .collect();
        Ok(Self {
            controllers,
            brokers,
            names,
            real,
            reserved,
        })
    }

    /// Frees the nodes' ports for the nodes to listen on (after the proxy links are open).
    pub fn release_ports(&mut self) {
        self.reserved.clear();
    }

    pub fn topology(&self) -> Topology {
        Topology {
            nodes: self.names.len(),
            controllers: self.controllers as usize,
        }
    }

    pub fn controller_index(&self, id: NodeId) -> usize {
        (id as usize)
            .saturating_sub(1)
            .min(self.controllers as usize - 1)
    }

    pub fn broker_index(&self, id: NodeId) -> usize {
        (self.controllers + id.clamp(1, self.brokers) - 1) as usize
    }

    /// The cluster with node `j` at `address[j]`.
    fn cluster(&self, address: &[SocketAddr]) -> ClusterConfig {
        let c = self.controllers as usize;
        let (controller, controllers) = if c == 1 {
            (Some(address[0].to_string()), Vec::new())
        } else {
            let list = (0..c)
                .map(|j| ControllerEntry {
                    id: j as u32 + 1,
                    address: address[j].to_string(),
                })
                .collect();
            (None, list)
        };
        ClusterConfig {
            controller,
            controllers,
            brokers: (c..self.names.len())
                .map(|j| BrokerEntry {
                    id: (j - c) as u32 + 1,
                    address: address[j].to_string(),
                    kafka_listener: None,
                })
                .collect(),
        }
    }

    /// The real addresses: what clients use (`D/cluster.toml`).
    pub fn client_cluster(&self) -> ClusterConfig {
        self.cluster(&self.real)
    }

    /// Writes `D/<node>.toml` for every node, each naming its peers by a proxy link of its
    /// own (a full mesh: every node could dial every other; the unused links cost an idle
    /// listener).
    pub fn write_configs(
        &self,
        dir: &Path,
        proxy: &mut Proxy,
        bugs: &[String],
    ) -> anyhow::Result<()> {
        for (i, name) in self.names.iter().enumerate() {
            let mut address = self.real.clone();
            for (j, peer) in self.names.iter().enumerate().filter(|(j, _)| *j != i) {
                address[j] = proxy
                    .add_link(name, peer, self.real[j])
                    .with_context(|| format!("cannot open the proxy link {name} -> {peer}"))?;
            }
            let c = self.controllers as usize;
            let (role, node_id) = match i {
                _ if i >= c => (NodeKind::Broker, Some((i - c) as u32 + 1)),
                _ if c == 1 => (NodeKind::Controller, None),
                _ => (NodeKind::Controller, Some(i as u32 + 1)),
            };
            let cfg = NodeConfig {
                role,
                node_id,
                data_dir: dir.join(name),
                fsync: FsyncPolicy::Always,
                fsync_interval_ms: 50,
                max_frame_bytes: skein_node::frame::DEFAULT_MAX_FRAME,
                // Faster failure detection than the defaults, so short runs see recoveries.
                tuning: Tuning {
                    session_timeout_ms: Some(3000),
                    heartbeat_interval_ms: Some(300),
                    replica_lag_time_max_ms: Some(3000),
                    ..Tuning::default()
                },
                bugs: bugs.to_vec(),
                cluster: self.cluster(&address),
            };
            cfg.validate()?;
            std::fs::write(dir.join(format!("{name}.toml")), cfg.to_toml())?;
        }
        Ok(())
    }
}
