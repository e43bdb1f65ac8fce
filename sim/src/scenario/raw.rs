//! The TOML shape of a scenario file (serde's view, with spans for error lines), the
//! context that turns a span into a file:line error, and reading the `[cluster]`,
//! `[workload]` and `[network]` sections into a [`Scenario`].

use super::{Scenario, ScenarioError};
use crate::faults::{ClientRef, FaultRates, NodeRef};
use crate::modes::Acks;
use crate::net::NetConfig;
use crate::time::{parse_duration, SimTime};
use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScenario {
    pub(super) version: Option<Spanned<u32>>,
    pub(super) name: Option<String>,
    pub(super) description: Option<String>,
    pub(super) seed: Option<u64>,
    pub(super) cluster: Option<RawCluster>,
    pub(super) workload: Option<RawWorkload>,
    pub(super) run: Option<RawRun>,
    pub(super) network: Option<RawNetwork>,
    pub(super) faults: Option<FaultRates>,
    #[serde(default)]
    pub(super) fault: Vec<Spanned<RawFault>>,
    pub(super) expect: Option<Spanned<RawExpect>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCluster {
    pub(super) brokers: Option<Spanned<u32>>,
    pub(super) controllers: Option<Spanned<u32>>,
    pub(super) raft_max_entries_per_append: Option<Spanned<u32>>,
    pub(super) partitions: Option<Spanned<u32>>,
    pub(super) replication_factor: Option<Spanned<u32>>,
    pub(super) min_insync_replicas: Option<Spanned<u32>>,
    pub(super) unclean_leader_election: Option<bool>,
    pub(super) unclean_recovery_strategy: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWorkload {
    pub(super) producers: Option<u32>,
    pub(super) consumers: Option<u32>,
    pub(super) produce_rate: Option<Spanned<f64>>,
    pub(super) acks: Option<Spanned<toml::Value>>,
    pub(super) idempotent: Option<bool>,
    pub(super) compression: Option<bool>,
    pub(super) group_members: Option<u32>,
    pub(super) group_id: Option<Spanned<String>>,
    pub(super) group_commit: Option<Spanned<String>>,
    pub(super) group_assignor: Option<Spanned<String>>,
    pub(super) group_static: Option<bool>,
    /// "plain" or "txn".
    pub(super) kind: Option<Spanned<String>>,
    /// Read-process-write pipelines (txn workload).
    pub(super) pipelines: Option<u32>,
    /// Old transactional clients (no KIP-890 part 2 epoch bump; txn workload).
    pub(super) txn_keep_epoch: Option<bool>,
    /// Applications abort without waiting for their writes (txn workload).
    pub(super) txn_abort_in_flight: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRun {
    pub(super) duration: Option<Spanned<String>>,
    pub(super) liveness: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNetwork {
    pub(super) latency_min: Option<Spanned<String>>,
    pub(super) latency_mean_extra: Option<Spanned<String>>,
    pub(super) latency_max: Option<Spanned<String>>,
    pub(super) drop: Option<Spanned<f64>>,
    pub(super) duplicate: Option<Spanned<f64>>,
    pub(super) reorder: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpect {
    pub(super) verdict: Spanned<String>,
    pub(super) invariant: Option<Spanned<String>>,
    pub(super) fail: Option<Spanned<Vec<String>>>,
    pub(super) hold: Option<Spanned<Vec<String>>>,
    pub(super) may: Option<Spanned<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub(super) struct RawFault {
    pub(super) at: Spanned<String>,
    pub(super) kind: Spanned<String>,
    pub(super) node: Option<Spanned<NodeRef>>,
    /// A node for `clog` and `partition`; for message faults also a client or
    /// "coordinator:<transactional id>" (read per kind, see `fault.rs`).
    pub(super) from: Option<Spanned<toml::Value>>,
    pub(super) to: Option<Spanned<NodeRef>>,
    pub(super) a: Option<Spanned<Vec<NodeRef>>>,
    pub(super) b: Option<Spanned<Vec<NodeRef>>>,
    pub(super) shape: Option<Spanned<String>>,
    pub(super) power_loss: Option<bool>,
    pub(super) restart_after: Option<Spanned<String>>,
    pub(super) duration: Option<Spanned<String>>,
    pub(super) forward: Option<Spanned<String>>,
    pub(super) latency: Option<Spanned<String>>,
    pub(super) ppm: Option<Spanned<i64>>,
    pub(super) member: Option<Spanned<u32>>,
    pub(super) client: Option<Spanned<ClientRef>>,
    pub(super) unsynced: Option<Spanned<String>>,
    pub(super) replaced_after: Option<Spanned<String>>,
    /// Message faults: which kind of message (`MessageKind::NAMES`).
    pub(super) message: Option<Spanned<String>>,
    /// Message faults: how long the message (or its copy) is held.
    pub(super) delay: Option<Spanned<String>>,
    /// `coordinator-crash` / `txn-coordinator-crash`: whose transaction coordinator.
    pub(super) transactional_id: Option<Spanned<String>>,
}

impl RawFault {
    /// The optional fields this entry sets, with their spans (for "does not take" errors).
    pub(super) fn present(&self) -> Vec<(&'static str, std::ops::Range<usize>)> {
        let mut v = Vec::new();
        macro_rules! p {
            ($($f:ident),*) => { $( if let Some(x) = &self.$f { v.push((stringify!($f), x.span())); } )* };
        }
        p!(
            node,
            from,
            to,
            a,
            b,
            shape,
            restart_after,
            duration,
            forward,
            latency,
            ppm,
            member,
            client,
            unsynced,
            replaced_after,
            message,
            delay,
            transactional_id
        );
        v
    }
}

/// The optional fields each fault kind takes (`at` and `kind` always).
pub(super) fn fields_of(kind: &str) -> &'static [&'static str] {
    match kind {
        "crash" => &["node", "power_loss", "unsynced", "restart_after"],
        "restart" | "bit-flip" => &["node"],
        "pause" | "clock-stall" | "read-errors" | "disk-full" => &["node", "duration"],
        "clock-jump" => &["node", "forward"],
        "clock-skew" => &["node", "ppm"],
        "partition" => &["shape", "node", "from", "a", "b", "duration"],
        "heal" => &[],
        "clog" => &["from", "to", "duration"],
        "slow-disk" => &["node", "latency", "duration"],
        "member-crash" => &["member", "restart_after"],
        "member-restart" => &["member"],
        "member-pause" => &["member", "duration"],
        "coordinator-crash" => &[
            "power_loss",
            "unsynced",
            "restart_after",
            "transactional_id",
        ],
        "txn-coordinator-crash" => &[
            "transactional_id",
            "power_loss",
            "unsynced",
            "restart_after",
        ],
        "message-delay" | "message-duplicate" => &["message", "from", "delay"],
        "message-drop" => &["message", "from"],
        "client-pause" => &["client", "duration", "replaced_after"],
        "client-crash" => &["client", "restart_after"],
        "client-restart" => &["client"],
        "client-isolate" => &["client", "duration"],
        _ => &[],
    }
}

/// Line number (1-based) of a byte offset.
pub(super) fn line_of(text: &str, pos: usize) -> usize {
    text.as_bytes()[..pos.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

pub(super) struct Ctx<'a> {
    pub(super) file: &'a str,
    pub(super) text: &'a str,
}

impl Ctx<'_> {
    pub(super) fn err(
        &self,
        span: Option<std::ops::Range<usize>>,
        field: &str,
        msg: impl Into<String>,
    ) -> ScenarioError {
        ScenarioError {
            file: self.file.to_string(),
            line: span.map(|s| line_of(self.text, s.start)),
            field: Some(field.to_string()),
            message: msg.into(),
        }
    }

    pub(super) fn dur(&self, v: &Spanned<String>, field: &str) -> Result<SimTime, ScenarioError> {
        parse_duration(v.get_ref()).map_err(|e| self.err(Some(v.span()), field, e.to_string()))
    }

    /// A duration that must be more than zero (how long a fault lasts, a restart delay).
    pub(super) fn positive_dur(
        &self,
        v: &Spanned<String>,
        field: &str,
    ) -> Result<SimTime, ScenarioError> {
        match self.dur(v, field)? {
            0 => Err(self.err(Some(v.span()), field, "must be longer than zero")),
            d => Ok(d),
        }
    }

    pub(super) fn opt_dur(
        &self,
        v: &Option<Spanned<String>>,
        field: &str,
    ) -> Result<Option<SimTime>, ScenarioError> {
        v.as_ref().map(|v| self.dur(v, field)).transpose()
    }

    pub(super) fn prob(
        &self,
        v: &Option<Spanned<f64>>,
        field: &str,
        default: f64,
    ) -> Result<f64, ScenarioError> {
        match v {
            None => Ok(default),
            Some(v) if (0.0..=1.0).contains(v.get_ref()) => Ok(*v.get_ref()),
            Some(v) => Err(self.err(Some(v.span()), field, "a probability must be within 0..=1")),
        }
    }
}

impl RawCluster {
    /// Checks the `[cluster]` section and sets it on `sc`.
    pub(super) fn apply(self, cx: &Ctx<'_>, sc: &mut Scenario) -> Result<(), ScenarioError> {
        let c = self;
        let positive =
            |v: &Option<Spanned<u32>>, field: &str| -> Result<Option<u32>, ScenarioError> {
                match v {
                    Some(v) if *v.get_ref() == 0 => {
                        Err(cx.err(Some(v.span()), field, "must be at least 1"))
                    }
                    Some(v) => Ok(Some(*v.get_ref())),
                    None => Ok(None),
                }
            };
        sc.brokers = positive(&c.brokers, "cluster.brokers")?;
        sc.controllers = match &c.controllers {
            Some(v) if ![1, 3, 5].contains(v.get_ref()) => {
                return Err(cx.err(
                    Some(v.span()),
                    "cluster.controllers",
                    "must be 1, 3 or 5 (a Raft quorum of an odd size)",
                ))
            }
            v => v.as_ref().map(|v| *v.get_ref()),
        };
        sc.raft_max_entries_per_append = positive(
            &c.raft_max_entries_per_append,
            "cluster.raft_max_entries_per_append",
        )?
        .map(|n| n as usize);
        sc.partitions = positive(&c.partitions, "cluster.partitions")?;
        sc.replication_factor = positive(&c.replication_factor, "cluster.replication_factor")?;
        sc.min_insync_replicas = positive(&c.min_insync_replicas, "cluster.min_insync_replicas")?;
        sc.unclean_leader_election = c.unclean_leader_election;
        if let Some(s) = &c.unclean_recovery_strategy {
            let parsed = s.get_ref().parse().map_err(|e: String| {
                cx.err(Some(s.span()), "cluster.unclean_recovery_strategy", e)
            })?;
            sc.unclean_recovery_strategy = Some(parsed);
        }
        if let (Some(rf), Some(b)) = (&c.replication_factor, sc.brokers) {
            if *rf.get_ref() > b {
                return Err(cx.err(
                    Some(rf.span()),
                    "cluster.replication_factor",
                    format!("{} exceeds the {b} brokers", rf.get_ref()),
                ));
            }
        }
        Ok(())
    }
}

impl RawWorkload {
    /// Checks the `[workload]` section and sets it on `sc`.
    pub(super) fn apply(self, cx: &Ctx<'_>, sc: &mut Scenario) -> Result<(), ScenarioError> {
        let w = self;
        sc.producers = w.producers;
        sc.consumers = w.consumers;
        if let Some(r) = w.produce_rate {
            if !(*r.get_ref() >= 0.0 && r.get_ref().is_finite()) {
                return Err(cx.err(
                    Some(r.span()),
                    "workload.produce_rate",
                    "must be a finite number >= 0",
                ));
            }
            sc.produce_rate = Some(*r.get_ref());
        }
        sc.idempotent = w.idempotent;
        sc.compression = w.compression;
        sc.group_members = w.group_members;
        sc.group_static = w.group_static;
        sc.pipelines = w.pipelines;
        sc.txn_keep_epoch = w.txn_keep_epoch;
        sc.txn_abort_in_flight = w.txn_abort_in_flight;
        if let Some(k) = w.kind {
            sc.workload = Some(crate::modes::Workload::from_name(k.get_ref()).ok_or_else(
                || {
                    cx.err(
                        Some(k.span()),
                        "workload.kind",
                        "must be \"plain\" or \"txn\"",
                    )
                },
            )?);
        }
        if let Some(g) = w.group_id {
            if g.get_ref().is_empty() {
                return Err(cx.err(Some(g.span()), "workload.group_id", "must not be empty"));
            }
            sc.group_id = Some(g.into_inner());
        }
        if let Some(m) = w.group_commit {
            sc.group_commit = Some(crate::modes::CommitMode::from_name(m.get_ref()).ok_or_else(
                || {
                    cx.err(
                        Some(m.span()),
                        "workload.group_commit",
                        format!(
                            "expected \"sync\", \"async\" or \"auto\", found {:?}",
                            m.get_ref()
                        ),
                    )
                },
            )?);
        }
        if let Some(a) = w.group_assignor {
            sc.group_assignor = Some(
                skein_core::group::AssignorKind::from_name(a.get_ref()).ok_or_else(|| {
                    cx.err(
                        Some(a.span()),
                        "workload.group_assignor",
                        format!("expected \"range\", \"roundrobin\" or \"cooperative-sticky\", found {:?}", a.get_ref()),
                    )
                })?,
            );
        }
        if let Some(a) = w.acks {
            sc.acks = Some(match a.get_ref() {
                toml::Value::Integer(0) => Acks::None,
                toml::Value::Integer(1) => Acks::Leader,
                toml::Value::String(s) if s == "all" || s == "-1" => Acks::All,
                other => {
                    return Err(cx.err(
                        Some(a.span()),
                        "workload.acks",
                        format!("expected 0, 1 or \"all\", found {other}"),
                    ))
                }
            });
        }
        Ok(())
    }
}

impl RawNetwork {
    /// The `[network]` section as a network config (defaults for what it leaves out).
    pub(super) fn config(&self, cx: &Ctx<'_>) -> Result<NetConfig, ScenarioError> {
        let n = self;
        let d = NetConfig::default();
        Ok(NetConfig {
            latency_min: cx
                .opt_dur(&n.latency_min, "network.latency_min")?
                .unwrap_or(d.latency_min),
            latency_mean_extra: cx
                .opt_dur(&n.latency_mean_extra, "network.latency_mean_extra")?
                .unwrap_or(d.latency_mean_extra),
            latency_max: cx
                .opt_dur(&n.latency_max, "network.latency_max")?
                .unwrap_or(d.latency_max),
            drop: cx.prob(&n.drop, "network.drop", d.drop)?,
            duplicate: cx.prob(&n.duplicate, "network.duplicate", d.duplicate)?,
            reorder: cx.prob(&n.reorder, "network.reorder", d.reorder)?,
        })
    }
}
