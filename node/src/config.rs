//! Node and cluster configuration: TOML files (serde) plus command-line overrides, checked
//! once at start so a bad port, an unusable data directory or a node id missing from the
//! peer list is reported before anything listens or writes.
//!
//! ```toml
//! role = "broker"            # or "controller"
//! node_id = 1                # a broker's id in [[cluster.brokers]], or a controller's id
//!                            # in [[cluster.controllers]] (optional with one controller)
//! data_dir = "./data/broker-1"
//! fsync = "always"           # "always" | "interval" | "never" (never: unsafe for acks=all)
//! fsync_interval_ms = 50     # with fsync = "interval"
//!
//! [cluster]
//! controller = "127.0.0.1:9100"       # one controller (its id is 1), or a Raft quorum:
//! # [[cluster.controllers]]           # ids 1..=N, each with its address (instead of
//! # id = 1                            # `controller`; docs/controller.md)
//! # address = "127.0.0.1:9100"
//! [[cluster.brokers]]
//! id = 1
//! address = "127.0.0.1:9101"
//! kafka_listener = "127.0.0.1:9201"   # optional: Kafka wire protocol (docs/kafka.md)
//! ```

use crate::frame::DEFAULT_MAX_FRAME;
use serde::{Deserialize, Serialize};
use skein_core::types::NodeId;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    Broker,
    Controller,
}

/// When partition logs are fsynced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum FsyncPolicy {
    /// After every append, before the leader counts it (the safe default).
    #[default]
    Always,
    /// At most `fsync_interval_ms` after an append. A follower still fsyncs before it
    /// fetches again, so acks=all stays durable on the ISR; acks=1 may lose the window.
    Interval,
    /// Never: the OS decides. UNSAFE for acks=all: a machine crash can lose acknowledged
    /// records on every replica at once. For benchmarks and throwaway clusters only.
    Never,
}

/// One broker of the peer list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokerEntry {
    pub id: NodeId,
    pub address: String,
    /// Where this broker serves the Kafka wire protocol (docs/kafka.md), if it does. In the
    /// shared peer list, not in the node's own table, because every broker advertises every
    /// other broker's Kafka address in its Metadata answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka_listener: Option<String>,
}

/// One controller of a quorum's list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControllerEntry {
    pub id: NodeId,
    pub address: String,
}

/// Where everybody listens. Shared by nodes and clients. The controllers are either one
/// `controller` address (id 1) or a `controllers` list (ids 1..=N): exactly one of the two.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub controllers: Vec<ControllerEntry>,
    pub brokers: Vec<BrokerEntry>,
}

fn default_fsync_interval() -> u64 {
    50
}
fn default_max_frame() -> u32 {
    DEFAULT_MAX_FRAME
}

/// Optional timing knobs (milliseconds); unset ones keep the core defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tuning {
    /// Controller: a broker silent this long is fenced (default 6000). Also the grace a
    /// restarted controller gives brokers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_timeout_ms: Option<u64>,
    /// Broker: heartbeat (and metadata pull) period (default 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_interval_ms: Option<u64>,
    /// Broker: a follower not caught up for this long leaves the ISR (default 10000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_lag_time_max_ms: Option<u64>,
    /// Broker: roll a partition's active segment before it exceeds this many bytes
    /// (Kafka's `log.segment.bytes`; default 1 GiB). Only sealed segments are compacted,
    /// so tests of the cleaner shorten it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_bytes: Option<u64>,
    /// Broker: how often the log cleaner runs on the hosted compacted logs (Kafka's
    /// `log.cleaner.backoff.ms`; default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleaner_interval_ms: Option<u64>,
}

/// A node's configuration file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    pub role: NodeKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<NodeId>,
    pub data_dir: PathBuf,
    #[serde(default)]
    pub fsync: FsyncPolicy,
    #[serde(default = "default_fsync_interval")]
    pub fsync_interval_ms: u64,
    #[serde(default = "default_max_frame")]
    pub max_frame_bytes: u32,
    #[serde(default)]
    pub tuning: Tuning,
    /// Bug zoo only: historical bugs switched back on in this node's core (names as
    /// `skein sim run --bug`, e.g. `bugs = ["ack-before-isr"]`), so `skein jepsen run --bug`
    /// can show the harness catching them on real processes. Empty in every real config.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bugs: Vec<String>,
    pub cluster: ClusterConfig,
}

/// A checked cluster: parsed addresses, distinct ids and addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterAddresses {
    /// The controllers, by id: `[(1, addr)]` for a single controller, else a Raft quorum
    /// whose ids are exactly 1..=N (the ids core's clients try in turn).
    pub controllers: Vec<(NodeId, SocketAddr)>,
    /// Sorted by id.
    pub brokers: Vec<(NodeId, SocketAddr)>,
    /// Kafka listeners of the brokers that have one, sorted by id.
    pub kafka: Vec<(NodeId, SocketAddr)>,
}

impl ClusterAddresses {
    /// Controller `id`'s address.
    pub fn controller(&self, id: NodeId) -> Option<SocketAddr> {
        self.controllers
            .iter()
            .find(|(c, _)| *c == id)
            .map(|(_, a)| *a)
    }

    /// Controller 1's address (where errors about "the controller" point).
    pub fn first_controller(&self) -> SocketAddr {
        self.controllers[0].1
    }

    /// Whether the controllers run as a Raft quorum (more than one), as the simulator
    /// does: a single controller keeps its own metadata log and brokers hold no lease.
    pub fn is_quorum(&self) -> bool {
        self.controllers.len() > 1
    }

    /// The controller ids (1..=N).
    pub fn controller_ids(&self) -> Vec<NodeId> {
        self.controllers.iter().map(|(c, _)| *c).collect()
    }

    pub fn broker(&self, id: NodeId) -> Option<SocketAddr> {
        self.brokers.iter().find(|(b, _)| *b == id).map(|(_, a)| *a)
    }

    /// Broker `id`'s Kafka listener, if it has one.
    pub fn kafka_listener(&self, id: NodeId) -> Option<SocketAddr> {
        self.kafka.iter().find(|(b, _)| *b == id).map(|(_, a)| *a)
    }
}

/// A checked node configuration, ready to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidNodeConfig {
    pub role: NodeKind,
    /// The broker id, or the controller id (None: the single controller, id 1).
    pub node_id: Option<NodeId>,
    pub listen: SocketAddr,
    /// Where this broker serves the Kafka wire protocol (its peer-list entry's
    /// `kafka_listener`); None: it does not.
    pub kafka_listen: Option<SocketAddr>,
    pub data_dir: PathBuf,
    pub fsync: FsyncPolicy,
    pub fsync_interval_ms: u64,
    pub max_frame_bytes: u32,
    pub tuning: Tuning,
    /// The bug-zoo flags from `bugs` (all off unless the file names some).
    pub bugs: skein_core::bugs::Bugs,
    pub cluster: ClusterAddresses,
}

/// What is wrong with a configuration.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("invalid config file {path}: {reason}")]
    Parse { path: String, reason: String },
    #[error("{what}: bad address {address:?}: {reason} (expected HOST:PORT, e.g. 127.0.0.1:9101)")]
    BadAddress {
        what: String,
        address: String,
        reason: String,
    },
    #[error("the cluster lists no brokers: add at least one [[cluster.brokers]] entry")]
    NoBrokers,
    #[error("broker id {id} appears twice in the peer list")]
    DuplicateBroker { id: NodeId },
    #[error("address {address} is used by two nodes of the peer list")]
    DuplicateAddress { address: SocketAddr },
    #[error("role = \"broker\" needs node_id (one of the peer list's ids: {known:?})")]
    MissingNodeId { known: Vec<NodeId> },
    #[error("node_id {id} is not in the peer list (known broker ids: {known:?})")]
    UnknownNodeId { id: NodeId, known: Vec<NodeId> },
    #[error("the cluster names no controller: set `controller = \"HOST:PORT\"` or list [[cluster.controllers]] entries")]
    NoController,
    #[error("the cluster sets both `controller` and [[cluster.controllers]]: keep one")]
    BothControllerForms,
    #[error("controller ids must be exactly 1..={n} (got {got:?})")]
    BadControllerIds { n: usize, got: Vec<NodeId> },
    #[error(
        "role = \"controller\" in a quorum needs node_id (one of the controller ids {known:?})"
    )]
    MissingControllerId { known: Vec<NodeId> },
    #[error("node_id {id} is not a controller of the cluster (controller ids: {known:?})")]
    UnknownControllerId { id: NodeId, known: Vec<NodeId> },
    #[error("data_dir {path}: {reason}")]
    DataDir { path: String, reason: String },
    #[error("fsync_interval_ms must be at least 1 with fsync = \"interval\"")]
    ZeroFsyncInterval,
    #[error("tuning.{field} must be at least 1 ms")]
    ZeroTuning { field: &'static str },
    #[error(
        "tuning.heartbeat_interval_ms {heartbeat} must be below the session timeout {session} ms"
    )]
    HeartbeatNotBelowSession { heartbeat: u64, session: u64 },
    #[error("max_frame_bytes {got} must be between 4096 and {max}")]
    BadMaxFrame { got: u32, max: u32 },
    #[error("bugs: {0}")]
    UnknownBug(#[from] skein_core::bugs::UnknownBug),
}

/// Parses `HOST:PORT` with a clear reason when it is not one.
pub fn parse_address(what: &str, address: &str) -> Result<SocketAddr, ConfigError> {
    let bad = |reason: String| ConfigError::BadAddress {
        what: what.to_string(),
        address: address.to_string(),
        reason,
    };
    let (host, port) = address
        .rsplit_once(':')
        .ok_or_else(|| bad("no port".into()))?;
    let port: u16 = match port.parse::<u64>() {
        Ok(0) => return Err(bad("port 0 is not allowed (pick a fixed port)".into())),
        Ok(p) if p <= u64::from(u16::MAX) => p as u16,
        Ok(p) => return Err(bad(format!("port {p} is out of range 1-65535"))),
        Err(_) => return Err(bad(format!("port {port:?} is not a number"))),
    };
    let ip = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .map_err(|_| bad(format!("host {host:?} is not an IP address")))?;
    Ok(SocketAddr::new(ip, port))
}

impl ClusterConfig {
    pub fn validate(&self) -> Result<ClusterAddresses, ConfigError> {
        let controllers = self.validate_controllers()?;
        if self.brokers.is_empty() {
            return Err(ConfigError::NoBrokers);
        }
        let mut ids = BTreeSet::new();
        let mut addrs = BTreeSet::new();
        for (_, a) in &controllers {
            if !addrs.insert(*a) {
                return Err(ConfigError::DuplicateAddress { address: *a });
            }
        }
        let mut brokers = Vec::new();
        let mut kafka = Vec::new();
        for b in &self.brokers {
            let addr = parse_address(&format!("broker {}", b.id), &b.address)?;
            if !ids.insert(b.id) {
                return Err(ConfigError::DuplicateBroker { id: b.id });
            }
            if !addrs.insert(addr) {
                return Err(ConfigError::DuplicateAddress { address: addr });
            }
            brokers.push((b.id, addr));
            if let Some(k) = &b.kafka_listener {
                let what = format!("broker {} kafka_listener", b.id);
                let k = parse_address(&what, k)?;
                if !addrs.insert(k) {
                    return Err(ConfigError::DuplicateAddress { address: k });
                }
                kafka.push((b.id, k));
            }
        }
        brokers.sort();
        kafka.sort();
        Ok(ClusterAddresses {
            controllers,
            brokers,
            kafka,
        })
    }

    /// The controllers by id: the single `controller` as id 1, or the list, whose ids must
    /// be 1..=N (clients try them in turn by id, as core's `client::ControllerRouter`).
    fn validate_controllers(&self) -> Result<Vec<(NodeId, SocketAddr)>, ConfigError> {
        match (&self.controller, self.controllers.is_empty()) {
            (Some(_), false) => Err(ConfigError::BothControllerForms),
            (None, true) => Err(ConfigError::NoController),
            (Some(a), true) => Ok(vec![(1, parse_address("cluster.controller", a)?)]),
            (None, false) => {
                let mut out = Vec::new();
                for c in &self.controllers {
                    let what = format!("controller {}", c.id);
                    out.push((c.id, parse_address(&what, &c.address)?));
                }
                out.sort();
                let got: Vec<NodeId> = out.iter().map(|(id, _)| *id).collect();
                let n = out.len();
                if got.iter().copied().ne(1..=n as NodeId) {
                    return Err(ConfigError::BadControllerIds { n, got });
                }
                Ok(out)
            }
        }
    }

    /// Reads a cluster file: either a bare cluster (`controller`, `[[brokers]]`) or a node
    /// config (its `[cluster]` table).
    pub fn load(path: &Path) -> Result<ClusterAddresses, ConfigError> {
        let text = read(path)?;
        let value: toml::Table = parse(path, &text)?;
        let table = match value.get("cluster") {
            Some(toml::Value::Table(t)) => t.clone(),
            _ => value,
        };
        let cfg: ClusterConfig =
            toml::Value::Table(table)
                .try_into()
                .map_err(|e: toml::de::Error| ConfigError::Parse {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?;
        cfg.validate()
    }
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

fn parse<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::Parse {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

/// Creates the directory if needed and proves it readable and writable.
pub fn check_data_dir(dir: &Path) -> Result<(), ConfigError> {
    let err = |reason: String| ConfigError::DataDir {
        path: dir.display().to_string(),
        reason,
    };
    std::fs::create_dir_all(dir).map_err(|e| err(format!("cannot create: {e}")))?;
    std::fs::read_dir(dir).map_err(|e| err(format!("not readable: {e}")))?;
    let probe = dir.join(".skein-write-probe");
    std::fs::write(&probe, b"probe").map_err(|e| err(format!("not writable: {e}")))?;
    std::fs::remove_file(&probe).map_err(|e| err(format!("cannot remove probe file: {e}")))?;
    Ok(())
}

impl NodeConfig {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        parse(path, &read(path)?)
    }

    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a NodeConfig always serializes")
    }

    /// Checks everything that can be checked before starting (creates the data dir).
    pub fn validate(&self) -> Result<ValidNodeConfig, ConfigError> {
        let cluster = self.cluster.validate()?;
        let known: Vec<NodeId> = cluster.brokers.iter().map(|(id, _)| *id).collect();
        let listen = match (self.role, self.node_id) {
            (NodeKind::Broker, None) => return Err(ConfigError::MissingNodeId { known }),
            (NodeKind::Broker, Some(id)) => cluster
                .broker(id)
                .ok_or(ConfigError::UnknownNodeId { id, known })?,
            (NodeKind::Controller, None) if cluster.is_quorum() => {
                let known = cluster.controller_ids();
                return Err(ConfigError::MissingControllerId { known });
            }
            (NodeKind::Controller, None) => cluster.first_controller(),
            (NodeKind::Controller, Some(id)) => {
                cluster
                    .controller(id)
                    .ok_or_else(|| ConfigError::UnknownControllerId {
                        id,
                        known: cluster.controller_ids(),
                    })?
            }
        };
        if self.fsync == FsyncPolicy::Interval && self.fsync_interval_ms == 0 {
            return Err(ConfigError::ZeroFsyncInterval);
        }
        if !(4096..=(256 << 20)).contains(&self.max_frame_bytes) {
            return Err(ConfigError::BadMaxFrame {
                got: self.max_frame_bytes,
                max: 256 << 20,
            });
        }
        let t = &self.tuning;
        for (field, v) in [
            ("session_timeout_ms", t.session_timeout_ms),
            ("heartbeat_interval_ms", t.heartbeat_interval_ms),
            ("replica_lag_time_max_ms", t.replica_lag_time_max_ms),
            ("segment_bytes", t.segment_bytes),
            ("cleaner_interval_ms", t.cleaner_interval_ms),
        ] {
            if v == Some(0) {
                return Err(ConfigError::ZeroTuning { field });
            }
        }
        let session = t.session_timeout_ms.unwrap_or(6000);
        let heartbeat = t.heartbeat_interval_ms.unwrap_or(500);
        if heartbeat >= session {
            return Err(ConfigError::HeartbeatNotBelowSession { heartbeat, session });
        }
        let bugs = skein_core::bugs::Bugs::from_names(&self.bugs)?;
        check_data_dir(&self.data_dir)?;
        let kafka_listen = match self.role {
            NodeKind::Broker => self.node_id.and_then(|id| cluster.kafka_listener(id)),
            NodeKind::Controller => None,
        };
        Ok(ValidNodeConfig {
            role: self.role,
            node_id: self.node_id,
            listen,
            kafka_listen,
            data_dir: self.data_dir.clone(),
            fsync: self.fsync,
            fsync_interval_ms: self.fsync_interval_ms,
            max_frame_bytes: self.max_frame_bytes,
            tuning: self.tuning.clone(),
            bugs,
            cluster,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> ClusterConfig {
        ClusterConfig {
            controller: Some("127.0.0.1:9100".into()),
            controllers: Vec::new(),
            brokers: (1..=3)
                .map(|id| BrokerEntry {
                    id,
                    address: format!("127.0.0.1:{}", 9100 + id),
                    kafka_listener: None,
                })
                .collect(),
        }
    }

    fn broker(dir: &Path, id: NodeId) -> NodeConfig {
        NodeConfig {
            role: NodeKind::Broker,
            node_id: Some(id),
            data_dir: dir.to_path_buf(),
            fsync: FsyncPolicy::Always,
            fsync_interval_ms: 50,
            max_frame_bytes: DEFAULT_MAX_FRAME,
            tuning: Tuning::default(),
            bugs: Vec::new(),
            cluster: cluster(),
        }
    }

    #[test]
    fn tuning_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = broker(dir.path(), 1);
        cfg.tuning.heartbeat_interval_ms = Some(0);
        assert_eq!(
            cfg.validate().unwrap_err(),
            ConfigError::ZeroTuning {
                field: "heartbeat_interval_ms"
            }
        );
        cfg.tuning.heartbeat_interval_ms = Some(3000);
        cfg.tuning.session_timeout_ms = Some(2000);
        assert!(matches!(
            cfg.validate(),
            Err(ConfigError::HeartbeatNotBelowSession { .. })
        ));
        cfg.tuning.heartbeat_interval_ms = Some(200);
        let path = dir.path().join("t.toml");
        std::fs::write(&path, cfg.to_toml()).unwrap();
        assert_eq!(NodeConfig::load(&path).unwrap(), cfg);
        assert!(cfg.validate().is_ok());
    }

    #[test]
    fn good_config_round_trips_through_toml() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = broker(dir.path(), 2);
        let path = dir.path().join("b.toml");
        std::fs::write(&path, cfg.to_toml()).unwrap();
        let back = NodeConfig::load(&path).unwrap();
        assert_eq!(back, cfg);
        let v = back.validate().unwrap();
        assert_eq!(v.listen, "127.0.0.1:9102".parse().unwrap());
        assert_eq!(ClusterConfig::load(&path).unwrap(), v.cluster);
    }

    #[test]
    fn bad_ports_are_named() {
        for (addr, needle) in [
            ("127.0.0.1:99999", "out of range"),
            ("127.0.0.1:0", "port 0"),
            ("127.0.0.1", "no port"),
            ("127.0.0.1:http", "not a number"),
            ("localhost:80", "not an IP"),
        ] {
            let e = parse_address("x", addr).unwrap_err().to_string();
            assert!(e.contains(needle), "{addr}: {e}");
        }
        assert_eq!(
            parse_address("x", "[::1]:5").unwrap(),
            "[::1]:5".parse().unwrap()
        );
    }

    #[test]
    fn unknown_and_missing_node_ids() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = broker(dir.path(), 7);
        assert_eq!(
            cfg.validate().unwrap_err(),
            ConfigError::UnknownNodeId {
                id: 7,
                known: vec![1, 2, 3]
            }
        );
        cfg.node_id = None;
        assert!(matches!(
            cfg.validate(),
            Err(ConfigError::MissingNodeId { .. })
        ));
        cfg.role = NodeKind::Controller;
        assert!(cfg.validate().is_ok());
    }

    #[test]
    fn kafka_listeners_are_parsed_and_kept_distinct() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = broker(dir.path(), 2);
        cfg.cluster.brokers[1].kafka_listener = Some("127.0.0.1:9202".into());
        let path = dir.path().join("k.toml");
        std::fs::write(&path, cfg.to_toml()).unwrap();
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .contains("kafka_listener = \"127.0.0.1:9202\""));
        let v = NodeConfig::load(&path).unwrap().validate().unwrap();
        assert_eq!(v.kafka_listen, Some("127.0.0.1:9202".parse().unwrap()));
        assert_eq!(v.cluster.kafka_listener(1), None);
        // Another broker's validated config has no listener of its own.
        let mut other = cfg.clone();
        other.node_id = Some(1);
        assert_eq!(other.validate().unwrap().kafka_listen, None);
        // A Kafka port clashing with a node's port, or unparsable, is refused.
        cfg.cluster.brokers[1].kafka_listener = Some("127.0.0.1:9101".into());
        assert!(matches!(
            cfg.validate(),
            Err(ConfigError::DuplicateAddress { .. })
        ));
        cfg.cluster.brokers[1].kafka_listener = Some("127.0.0.1:x".into());
        let e = cfg.validate().unwrap_err().to_string();
        assert!(e.contains("broker 2 kafka_listener"), "{e}");
    }

    #[test]
    fn duplicates_and_empty_peer_lists() {
        let mut c = cluster();
        c.brokers[1].id = 1;
        assert_eq!(
            c.validate().unwrap_err(),
            ConfigError::DuplicateBroker { id: 1 }
        );
        let mut c = cluster();
        c.brokers[1].address = c.controller.clone().unwrap();
        assert!(matches!(
            c.validate(),
            Err(ConfigError::DuplicateAddress { .. })
        ));
        let mut c = cluster();
        c.brokers.clear();
        assert_eq!(c.validate().unwrap_err(), ConfigError::NoBrokers);
    }

    fn quorum(ids: &[NodeId]) -> ClusterConfig {
        ClusterConfig {
            controller: None,
            controllers: ids
                .iter()
                .map(|&id| ControllerEntry {
                    id,
                    address: format!("127.0.0.1:{}", 9000 + id),
                })
                .collect(),
            ..cluster()
        }
    }

    #[test]
    fn controller_quorum_configs() {
        let dir = tempfile::tempdir().unwrap();
        // Listed out of order: sorted by id, and the node listens at its own entry.
        let mut cfg = broker(dir.path(), 1);
        cfg.cluster = quorum(&[3, 1, 2]);
        cfg.role = NodeKind::Controller;
        cfg.node_id = Some(2);
        let path = dir.path().join("q.toml");
        std::fs::write(&path, cfg.to_toml()).unwrap();
        assert_eq!(NodeConfig::load(&path).unwrap(), cfg);
        let v = cfg.validate().unwrap();
        assert_eq!(v.listen, "127.0.0.1:9002".parse().unwrap());
        assert_eq!(v.kafka_listen, None);
        assert_eq!(v.cluster.controller_ids(), vec![1, 2, 3]);
        assert!(v.cluster.is_quorum());
        assert_eq!(ClusterConfig::load(&path).unwrap(), v.cluster);
        // A quorum member must say which one it is, and be one.
        cfg.node_id = None;
        assert_eq!(
            cfg.validate().unwrap_err(),
            ConfigError::MissingControllerId {
                known: vec![1, 2, 3]
            }
        );
        cfg.node_id = Some(4);
        assert!(matches!(
            cfg.validate(),
            Err(ConfigError::UnknownControllerId { id: 4, .. })
        ));
        // The single form is controller 1: node_id may be left out or be 1.
        let mut single = broker(dir.path(), 1);
        single.role = NodeKind::Controller;
        single.node_id = Some(1);
        assert!(!single.validate().unwrap().cluster.is_quorum());
        single.node_id = Some(2);
        assert!(single.validate().is_err());
    }

    #[test]
    fn inconsistent_controller_lists_are_refused() {
        for (ids, needle) in [
            (&[1, 2, 2][..], "exactly 1..=3"),
            (&[2, 3][..], "exactly 1..=2"),
            (&[0][..], "exactly 1..=1"),
        ] {
            let e = quorum(ids).validate().unwrap_err().to_string();
            assert!(e.contains(needle), "{ids:?}: {e}");
        }
        let both = ClusterConfig {
            controller: Some("127.0.0.1:9100".into()),
            ..quorum(&[1, 2, 3])
        };
        assert_eq!(
            both.validate().unwrap_err(),
            ConfigError::BothControllerForms
        );
        let none = ClusterConfig {
            controller: None,
            ..cluster()
        };
        assert_eq!(none.validate().unwrap_err(), ConfigError::NoController);
        let mut clash = quorum(&[1, 2, 3]);
        clash.controllers[2].address = clash.controllers[0].address.clone();
        assert!(matches!(
            clash.validate(),
            Err(ConfigError::DuplicateAddress { .. })
        ));
        let mut clash = quorum(&[1, 2]);
        clash.brokers[0].address = clash.controllers[1].address.clone();
        assert!(matches!(
            clash.validate(),
            Err(ConfigError::DuplicateAddress { .. })
        ));
        let mut bad = quorum(&[1, 2]);
        bad.controllers[1].address = "127.0.0.1:x".into();
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("controller 2"), "{e}");
    }

    #[test]
    fn unwritable_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain-file");
        std::fs::write(&file, b"x").unwrap();
        let cfg = broker(&file.join("sub"), 1);
        let e = cfg.validate().unwrap_err();
        assert!(matches!(e, ConfigError::DataDir { .. }), "{e}");
    }

    #[test]
    fn unknown_fields_and_bad_values_are_parse_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        let mut text = broker(dir.path(), 1).to_toml();
        text = text.replace("fsync = \"always\"", "fsync = \"sometimes\"");
        std::fs::write(&path, &text).unwrap();
        let e = NodeConfig::load(&path).unwrap_err().to_string();
        assert!(e.contains("sometimes"), "{e}");
        std::fs::write(&path, format!("colour = 1\n{text}")).unwrap();
        assert!(matches!(
            NodeConfig::load(&path),
            Err(ConfigError::Parse { .. })
        ));
        assert!(matches!(
            NodeConfig::load(&dir.path().join("missing.toml")),
            Err(ConfigError::Read { .. })
        ));
    }
}
