//! What a fault can hit: a node ([`NodeRef`]: a broker, a controller, or the leader of a
//! partition when the fault fires) or a client ([`ClientRef`]), and their spellings in
//! scenario files.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A node a fault can hit: a broker by id, the controller, or whichever broker leads a
/// partition when the fault fires (resolved by the world; never seen by the network or disks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NodeRef {
    Broker(u32),
    Controller(ControllerTag),
    LeaderOf(LeaderOf),
}

/// The spelling of "the leader of partition p" in scenario files: `"leader"` (partition 0)
/// or `"leader:P"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaderOf(pub u32);

impl LeaderOf {
    /// Parses `leader` or `leader:P`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.strip_prefix("leader")? {
            "" => Some(LeaderOf(0)),
            rest => rest.strip_prefix(':')?.trim().parse().ok().map(LeaderOf),
        }
    }
}

impl fmt::Display for LeaderOf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "leader:{}", self.0)
    }
}

impl Serialize for LeaderOf {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for LeaderOf {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        LeaderOf::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "expected a broker id, \"controller\", \"leader\" or \"leader:P\", found {s:?}"
            ))
        })
    }
}

/// The spelling of a controller in scenario files: `"controller"` (the active controller
/// when the fault fires, or controller 1 while there is none; with a single controller,
/// that one) or `"controller:K"` (controller K of a quorum, 1-based). 0 is the active one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ControllerTag(pub u32);

impl ControllerTag {
    /// Parses `controller` or `controller:K` (K >= 1).
    pub fn parse(s: &str) -> Option<Self> {
        match s.strip_prefix("controller")? {
            "" => Some(ControllerTag(0)),
            rest => rest
                .strip_prefix(':')?
                .trim()
                .parse()
                .ok()
                .filter(|&k| k >= 1)
                .map(ControllerTag),
        }
    }
}

impl fmt::Display for ControllerTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => write!(f, "controller"),
            k => write!(f, "controller:{k}"),
        }
    }
}

impl Serialize for ControllerTag {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ControllerTag {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ControllerTag::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "expected \"controller\" or \"controller:K\" (K from 1), found {s:?}"
            ))
        })
    }
}

impl NodeRef {
    /// The active controller (or controller 1 while there is none).
    pub const CONTROLLER: NodeRef = NodeRef::Controller(ControllerTag(0));
}

/// A client a fault can hit: `"producer:N"` or `"consumer:N"` (1-based, in the order the
/// workload creates them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClientRef {
    Producer(u32),
    Consumer(u32),
}

impl ClientRef {
    /// Parses `producer:N` or `consumer:N` (N >= 1).
    pub fn parse(s: &str) -> Option<Self> {
        let (kind, n) = s.split_once(':')?;
        let n: u32 = n.trim().parse().ok().filter(|&n| n >= 1)?;
        match kind.trim() {
            "producer" => Some(ClientRef::Producer(n)),
            "consumer" => Some(ClientRef::Consumer(n)),
            _ => None,
        }
    }
}

impl fmt::Display for ClientRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientRef::Producer(n) => write!(f, "producer:{n}"),
            ClientRef::Consumer(n) => write!(f, "consumer:{n}"),
        }
    }
}

impl<'de> Deserialize<'de> for ClientRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ClientRef::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "expected \"producer:N\" or \"consumer:N\" (N from 1), found {s:?}"
            ))
        })
    }
}

impl fmt::Display for NodeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeRef::Broker(id) => write!(f, "broker-{id}"),
            NodeRef::Controller(c) => write!(f, "{c}"),
            NodeRef::LeaderOf(l) => write!(f, "{l}"),
        }
    }
}
