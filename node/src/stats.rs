//! Metrics of one node, kept by the runtime and served as a [`StatsSnapshot`] to
//! `skein admin stats` (frame kinds `STATS` / `STATS_RESPONSE`, see `docs/protocol.md`).
//!
//! The state machine task counts every message it takes in, by kind, and measures the
//! latency of each request it answers: from the moment the connection's reader decoded the
//! frame to the moment the answer (matched by destination and correlation id) was handed
//! to that connection's writer — queueing in the inbox, handling, and for acks=all
//! produces the wait for replication. Latencies go into one HDR histogram per kind
//! (microseconds, 2 significant digits), so a snapshot's percentiles cost a few KiB.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use skein_core::message::{Acks, Address, Message};
use skein_core::replica::{ReplicaRole, ReplicaView};
use skein_core::types::{LeaderEpoch, NodeId, Offset, TopicPartition};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// Requests waiting for an answer longer than this are forgotten (never answered).
const PENDING_TTL: Duration = Duration::from_secs(60);
const PENDING_PRUNE_AT: usize = 65_536;
/// Window of the "recent" request rate.
const RECENT: Duration = Duration::from_secs(10);

/// One partition replica as the hosting broker sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionStats {
    pub tp: TopicPartition,
    /// "leader", "follower of N" or "offline".
    pub role: String,
    pub leader_epoch: LeaderEpoch,
    pub log_start_offset: Offset,
    pub log_end_offset: Offset,
    pub high_watermark: Offset,
    /// Leaders: the confirmed ISR. Followers: empty (only the leader knows it).
    pub isr: Vec<NodeId>,
    pub replicas: Vec<NodeId>,
}

impl PartitionStats {
    fn from_view(v: &ReplicaView) -> Self {
        Self {
            tp: v.tp.clone(),
            role: match v.role {
                ReplicaRole::Leader => "leader".into(),
                ReplicaRole::Follower { leader } => format!("follower of {leader}"),
                ReplicaRole::Offline => "offline".into(),
            },
            leader_epoch: v.leader_epoch,
            log_start_offset: v.log_start_offset,
            log_end_offset: v.log_end_offset,
            high_watermark: v.high_watermark,
            isr: v.isr.clone(),
            replicas: v.replicas.clone(),
        }
    }
}

/// Counts and latencies of one message kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestStats {
    pub kind: String,
    /// Messages of this kind received since start.
    pub count: u64,
    /// Received in the last 10 s, per second.
    pub recent_per_sec: f64,
    /// Answered requests (the latencies below are over these).
    pub answered: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

/// What `skein admin stats` prints for one node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    /// Broker id; `None` for the controller.
    pub node: Option<NodeId>,
    pub uptime_ms: u64,
    pub partitions: Vec<PartitionStats>,
    pub requests: Vec<RequestStats>,
}

struct KindStats {
    count: u64,
    /// Counts per second bucket of the recent window: (second since start, count).
    recent: Vec<(u64, u64)>,
    latency: Histogram<u64>,
}

impl KindStats {
    fn new() -> Self {
        Self {
            count: 0,
            recent: Vec::new(),
            latency: Histogram::new_with_bounds(1, 3_600_000_000, 2).expect("valid bounds"),
        }
    }
}

/// The runtime's counters (owned by the state machine task, so no locking).
pub struct Metrics {
    started: Instant,
    kinds: BTreeMap<&'static str, KindStats>,
    /// (who asked, correlation) -> (kind, when received).
    pending: BTreeMap<(Address, u64), (&'static str, Instant)>,
}

impl Metrics {
    pub fn new(started: Instant) -> Self {
        Self {
            started,
            kinds: BTreeMap::new(),
            pending: BTreeMap::new(),
        }
    }

    fn kind(&mut self, name: &'static str) -> &mut KindStats {
        self.kinds.entry(name).or_insert_with(KindStats::new)
    }

    /// A message from `from`, decoded at `at`.
    pub fn received(&mut self, from: Address, msg: &Message, at: Instant) {
        let name = msg.name();
        let second = at.saturating_duration_since(self.started).as_secs();
        let k = self.kind(name);
        k.count += 1;
        match k.recent.last_mut() {
            Some((s, n)) if *s == second => *n += 1,
            _ => {
                k.recent.push((second, 1));
                let keep = RECENT.as_secs() + 1;
                if k.recent.len() as u64 > keep {
                    k.recent.remove(0);
                }
            }
        }
        if let Some(c) = request_correlation(msg) {
            if self.pending.len() >= PENDING_PRUNE_AT {
                self.pending
                    .retain(|_, (_, t)| at.saturating_duration_since(*t) < PENDING_TTL);
            }
            self.pending.insert((from, c), (name, at));
        }
    }

    /// A request answered synchronously (controller requests carry no correlation id).
    pub fn answered_now(&mut self, name: &'static str, received: Instant) {
        let us = received.elapsed().as_micros() as u64;
        let _ = self.kind(name).latency.record(us.max(1));
    }

    /// A message about to be sent to `to`: if it answers a pending request, record the
    /// request's latency.
    pub fn sending(&mut self, to: Address, msg: &Message) {
        let Some(c) = msg.response_correlation() else {
            return;
        };
        if let Some((name, at)) = self.pending.remove(&(to, c)) {
            self.answered_now(name, at);
        }
    }

    pub fn snapshot(&self, node: Option<NodeId>, views: &[ReplicaView]) -> StatsSnapshot {
        let now = Instant::now();
        let second = now.saturating_duration_since(self.started).as_secs();
        let window = RECENT.as_secs();
        let requests = self
            .kinds
            .iter()
            .map(|(name, k)| {
                let recent: u64 = k
                    .recent
                    .iter()
                    .filter(|(s, _)| *s + window > second)
                    .map(|(_, n)| n)
                    .sum();
                let h = &k.latency;
                let q = |q: f64| {
                    if h.is_empty() {
                        0
                    } else {
                        h.value_at_quantile(q)
                    }
                };
                RequestStats {
                    kind: name.to_string(),
                    count: k.count,
                    recent_per_sec: recent as f64 / window as f64,
                    answered: h.len(),
                    p50_us: q(0.5),
                    p99_us: q(0.99),
                    p999_us: q(0.999),
                    max_us: if h.is_empty() { 0 } else { h.max() },
                }
            })
            .collect();
        StatsSnapshot {
            node,
            uptime_ms: now.saturating_duration_since(self.started).as_millis() as u64,
            partitions: views.iter().map(PartitionStats::from_view).collect(),
            requests,
        }
    }
}

/// Correlation id of a request that gets an answer (acks=0 produces get none).
fn request_correlation(msg: &Message) -> Option<u64> {
    match msg {
        Message::Produce(r) if r.acks == Acks::None => None,
        _ => msg.request_correlation(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skein_core::message::{MetadataRequest, MetadataResponse};

    #[test]
    fn counts_and_matches_answers() {
        let t0 = Instant::now();
        let mut m = Metrics::new(t0);
        let req = |c| {
            Message::Metadata(MetadataRequest {
                correlation: c,
                topics: None,
            })
        };
        let resp = |c| {
            Message::MetadataResponse(MetadataResponse {
                correlation: c,
                brokers: vec![],
                partitions: vec![],
                unknown_topics: vec![],
            })
        };
        m.received(Address::Client(1), &req(7), t0);
        m.received(Address::Client(2), &req(7), t0);
        // An answer to another client with the same correlation does not match client 1.
        m.sending(Address::Client(3), &resp(7));
        m.sending(Address::Client(1), &resp(7));
        m.sending(Address::Client(1), &resp(7)); // a duplicate answer counts once
        let s = m.snapshot(Some(1), &[]);
        assert_eq!(s.node, Some(1));
        assert_eq!(s.requests.len(), 1);
        let r = &s.requests[0];
        assert_eq!((r.kind.as_str(), r.count, r.answered), ("Metadata", 2, 1));
        assert!(r.recent_per_sec > 0.0);
        assert!(r.p50_us >= 1 && r.p50_us <= r.max_us);
        assert_eq!(m.pending.len(), 1, "client 2 still waits");
    }
}
