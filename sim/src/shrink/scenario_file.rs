//! Writing a shrunk run's configuration as a scenario file ([`scenario_toml`]): every
//! setting the run depends on and its exact fault schedule, in the format `scenario` reads.

use crate::config::SimConfig;
use crate::faults::{Fault, NodeRef, Scheduled, Unsynced};
use crate::net::Partition;
use crate::time::{format_duration, SimTime};
use std::fmt::Write as _;

fn node(n: &NodeRef) -> String {
    match n {
        NodeRef::Broker(id) => id.to_string(),
        // `controller` (the active one) or `controller:K`, as scenario files spell them.
        NodeRef::Controller(c) => format!("\"{c}\""),
        NodeRef::LeaderOf(l) => format!("\"{l}\""),
    }
}

fn nodes(v: &[NodeRef]) -> String {
    let parts: Vec<String> = v.iter().map(node).collect();
    format!("[{}]", parts.join(", "))
}

fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The fields a crash of a node or of a coordinator shares: power loss and what survives
/// of unsynced data (when not the default), the automatic restart.
fn crash_fields(
    o: &mut String,
    power_loss: bool,
    unsynced: Unsynced,
    restart_after: Option<SimTime>,
) {
    if power_loss {
        o.push_str("power_loss = true\n");
        if unsynced != Unsynced::Random {
            let _ = writeln!(o, "unsynced = \"{}\"", unsynced.name());
        }
    }
    if let Some(r) = restart_after {
        let _ = writeln!(o, "restart_after = \"{}\"", format_duration(r));
    }
}

/// The fault weights and limits that differ from the defaults (a `--swarm` seed's mix, a
/// `--fault-weights` shape), written out so the file says which mix found the failure.
/// The random schedule they drew is already explicit (`per_second = 0`), so they change
/// nothing on replay: the file replays without `--swarm`.
fn weights_toml(o: &mut String, rates: &crate::faults::FaultRates) {
    let d = crate::faults::FaultRates::default();
    let kinds = crate::faults::FaultRates::KINDS.iter();
    for ((k, w), dw) in kinds.zip(rates.weights()).zip(d.weights()) {
        if w != dw {
            let _ = writeln!(o, "{} = {w}", k.replace('-', "_"));
        }
    }
    if rates.max_down != d.max_down {
        let _ = writeln!(o, "max_down = {}", rates.max_down);
    }
    if rates.max_duration_ms != d.max_duration_ms {
        let _ = writeln!(o, "max_duration_ms = {}", rates.max_duration_ms);
    }
}

/// One `[[fault]]` entry; `None` for internal faults no file can name.
pub(crate) fn fault_toml(s: &Scheduled) -> Option<String> {
    let mut o = format!("[[fault]]\nat = \"{}\"\n", format_duration(s.at));
    let d = |t: &SimTime| format!("\"{}\"", format_duration(*t));
    let kind = |o: &mut String, k: &str| {
        let _ = writeln!(o, "kind = \"{k}\"");
    };
    match &s.fault {
        Fault::Crash {
            node: n,
            power_loss,
            unsynced,
            restart_after,
        } => {
            kind(&mut o, "crash");
            let _ = writeln!(o, "node = {}", node(n));
            crash_fields(&mut o, *power_loss, *unsynced, *restart_after);
        }
        // Kinds named as `Fault::name` names them, with a node (and a duration).
        Fault::Restart { node: n } | Fault::BitFlip { node: n } => {
            kind(&mut o, s.fault.name());
            let _ = writeln!(o, "node = {}", node(n));
        }
        Fault::Pause { node: n, duration }
        | Fault::ClockStall { node: n, duration }
        | Fault::ReadErrors { node: n, duration }
        | Fault::DiskFull { node: n, duration } => {
            kind(&mut o, s.fault.name());
            let _ = writeln!(o, "node = {}\nduration = {}", node(n), d(duration));
        }
        Fault::ClockJump { node: n, forward } => {
            kind(&mut o, "clock-jump");
            let _ = writeln!(o, "node = {}\nforward = {}", node(n), d(forward));
        }
        Fault::ClockSkew { node: n, ppm } => {
            kind(&mut o, "clock-skew");
            let _ = writeln!(o, "node = {}\nppm = {ppm}", node(n));
        }
        Fault::Partition { shape, duration } => {
            kind(&mut o, "partition");
            match shape {
                Partition::RandomHalves => o.push_str("shape = \"halves\"\n"),
                Partition::Split { a, b } => {
                    let _ = writeln!(o, "shape = \"split\"\na = {}\nb = {}", nodes(a), nodes(b));
                }
                Partition::Isolate { node: n } => {
                    let _ = writeln!(o, "shape = \"isolate\"\nnode = {}", node(n));
                }
                Partition::Bridge { node: n } => {
                    let _ = writeln!(o, "shape = \"bridge\"\nnode = {}", node(n));
                }
                Partition::OneWay { from } => {
                    let _ = writeln!(o, "shape = \"one-way\"\nfrom = {}", node(from));
                }
            }
            if let Some(t) = duration {
                let _ = writeln!(o, "duration = {}", d(t));
            }
        }
        Fault::Heal => kind(&mut o, "heal"),
        Fault::Clog { from, to, duration } => {
            kind(&mut o, "clog");
            let _ = writeln!(
                o,
                "from = {}\nto = {}\nduration = {}",
                node(from),
                node(to),
                d(duration)
            );
        }
        Fault::SlowDisk {
            node: n,
            latency,
            duration,
        } => {
            kind(&mut o, "slow-disk");
            let _ = writeln!(
                o,
                "node = {}\nlatency = {}\nduration = {}",
                node(n),
                d(latency),
                d(duration)
            );
        }
        f @ (Fault::MemberCrash { .. }
        | Fault::MemberRestart { .. }
        | Fault::MemberPause { .. }
        | Fault::MemberIsolate { .. }
        | Fault::CoordinatorCrash { .. }
        | Fault::ClientPause { .. }
        | Fault::ClientCrash { .. }
        | Fault::ClientRestart { .. }
        | Fault::ClientIsolate { .. }
        | Fault::TxnCoordinatorCrash { .. }
        | Fault::Message { .. }) => group_or_client_fault_toml(&mut o, f),
        Fault::EndDiskFault { .. } | Fault::EndPartition { .. } | Fault::ClientTakeover { .. } => {
            return None
        }
    }
    Some(o)
}

/// The body of a `[[fault]]` entry for a group member, coordinator or client fault.
fn group_or_client_fault_toml(o: &mut String, f: &Fault) {
    let d = |t: &SimTime| format!("\"{}\"", format_duration(*t));
    let kind = |o: &mut String, k: &str| {
        let _ = writeln!(o, "kind = \"{k}\"");
    };
    match f {
        Fault::MemberCrash {
            member,
            restart_after,
        } => {
            kind(o, "member-crash");
            let _ = writeln!(o, "member = {member}");
            if let Some(r) = restart_after {
                let _ = writeln!(o, "restart_after = {}", d(r));
            }
        }
        Fault::MemberRestart { member } => {
            kind(o, "member-restart");
            let _ = writeln!(o, "member = {member}");
        }
        Fault::MemberPause { member, duration } | Fault::MemberIsolate { member, duration } => {
            kind(o, f.name());
            let _ = writeln!(o, "member = {member}\nduration = {}", d(duration));
        }
        Fault::CoordinatorCrash {
            power_loss,
            unsynced,
            restart_after,
        } => {
            kind(o, "coordinator-crash");
            crash_fields(o, *power_loss, *unsynced, *restart_after);
        }
        Fault::ClientPause {
            client,
            duration,
            replaced_after,
        } => {
            kind(o, "client-pause");
            let _ = writeln!(o, "client = \"{client}\"\nduration = {}", d(duration));
            if let Some(r) = replaced_after {
                let _ = writeln!(o, "replaced_after = {}", d(r));
            }
        }
        Fault::ClientCrash {
            client,
            restart_after,
        } => {
            kind(o, "client-crash");
            let _ = writeln!(o, "client = \"{client}\"");
            if let Some(r) = restart_after {
                let _ = writeln!(o, "restart_after = {}", d(r));
            }
        }
        Fault::ClientRestart { client } => {
            kind(o, "client-restart");
            let _ = writeln!(o, "client = \"{client}\"");
        }
        Fault::ClientIsolate { client, duration } => {
            kind(o, "client-isolate");
            let _ = writeln!(o, "client = \"{client}\"\nduration = {}", d(duration));
        }
        Fault::TxnCoordinatorCrash {
            transactional_id,
            power_loss,
            unsynced,
            restart_after,
        } => {
            kind(o, "coordinator-crash");
            let _ = writeln!(o, "transactional_id = {}", quote(transactional_id));
            crash_fields(o, *power_loss, *unsynced, *restart_after);
        }
        Fault::Message {
            action,
            kind: message,
            from,
            delay,
        } => {
            kind(o, action.kind());
            let _ = writeln!(
                o,
                "message = \"{}\"\nfrom = {}",
                message.name(),
                quote(&from.to_string())
            );
            if *action != crate::faults::MessageAction::Drop {
                let _ = writeln!(o, "delay = {}", d(delay));
            }
        }
        _ => unreachable!("fault_toml passes only group, client and message faults"),
    }
}

/// `cfg` as a scenario file: every setting the run depends on, written out (random faults
/// off, the exact schedule), expecting `invariant` to fail. The disk model and history
/// checking are not part of the format: they must be left at their defaults.
pub fn scenario_toml(cfg: &SimConfig, name: &str, description: &str, invariant: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "version = 1\nname = {}", quote(name));
    let _ = writeln!(o, "description = {}", quote(description));
    let _ = writeln!(o, "seed = {}", cfg.seed);
    let _ = writeln!(
        o,
        "\n[cluster]\nbrokers = {}\ncontrollers = {}\nraft_max_entries_per_append = {}\npartitions = {}\nreplication_factor = {}\nmin_insync_replicas = {}\nunclean_leader_election = {}",
        cfg.brokers,
        cfg.controllers,
        cfg.raft_max_entries_per_append,
        cfg.partitions,
        cfg.replication_factor,
        cfg.min_insync_replicas,
        cfg.unclean_leader_election
    );
    let _ = writeln!(
        o,
        "unclean_recovery_strategy = {}",
        quote(&cfg.unclean_recovery_strategy.name().to_ascii_lowercase())
    );
    let acks = match cfg.acks {
        crate::modes::Acks::None => "0",
        crate::modes::Acks::Leader => "1",
        crate::modes::Acks::All => "\"all\"",
    };
    let _ = writeln!(
        o,
        "\n[workload]\nproducers = {}\nconsumers = {}\nproduce_rate = {}\nacks = {acks}\nidempotent = {}",
        cfg.producers, cfg.consumers, cfg.produce_rate, cfg.idempotent
    );
    if cfg.compression {
        let _ = writeln!(o, "compression = true");
    }
    if cfg.workload == crate::modes::Workload::Txn {
        // A shrunk txn run stays one, with its pipelines.
        let _ = writeln!(o, "kind = \"txn\"\npipelines = {}", cfg.pipelines);
        if cfg.txn_keep_epoch {
            let _ = writeln!(o, "txn_keep_epoch = true");
        }
        if cfg.txn_abort_in_flight {
            let _ = writeln!(o, "txn_abort_in_flight = true");
        }
    }
    if cfg.group_members > 0 {
        let commit = cfg.group_commit.name();
        let _ = writeln!(
            o,
            "group_members = {}\ngroup_id = {}\ngroup_commit = \"{commit}\"\ngroup_assignor = \"{}\"\ngroup_static = {}",
            cfg.group_members,
            quote(&cfg.group_id),
            cfg.group_assignor.name(),
            cfg.group_static
        );
    }
    let _ = writeln!(
        o,
        "\n[run]\nduration = \"{}\"\nliveness = \"{}\"",
        format_duration(cfg.duration),
        format_duration(cfg.liveness)
    );
    let n = &cfg.network;
    let _ = writeln!(
        o,
        "\n[network]\nlatency_min = \"{}\"\nlatency_mean_extra = \"{}\"\nlatency_max = \"{}\"\ndrop = {}\nduplicate = {}\nreorder = {}",
        format_duration(n.latency_min),
        format_duration(n.latency_mean_extra),
        format_duration(n.latency_max),
        n.drop,
        n.duplicate,
        n.reorder
    );
    o.push_str("\n[faults]\nper_second = 0\n");
    weights_toml(&mut o, &cfg.rates);
    for s in &cfg.schedule {
        if let Some(f) = fault_toml(s) {
            o.push('\n');
            o.push_str(&f);
        }
    }
    let _ = writeln!(
        o,
        "\n[expect]\nverdict = \"fail\"\ninvariant = {}",
        quote(invariant)
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::ClientRef;
    use crate::faults::{LeaderOf as Leader, NodeRef::*};
    use crate::scenario::Scenario;
    use crate::time::{MILLIS, SECS};

    /// One fault of every kind that strikes nodes or the network (each node shape, each
    /// partition shape).
    fn node_faults() -> Vec<Fault> {
        let c = NodeRef::CONTROLLER;
        vec![
            Fault::Crash {
                node: Broker(1),
                power_loss: true,
                unsynced: Unsynced::Random,
                restart_after: Some(1_500 * MILLIS),
            },
            Fault::Crash {
                node: Broker(2),
                power_loss: true,
                unsynced: Unsynced::Torn,
                restart_after: None,
            },
            Fault::Crash {
                node: LeaderOf(Leader(2)),
                power_loss: false,
                unsynced: Unsynced::Random,
                restart_after: None,
            },
            Fault::Restart { node: c },
            Fault::Pause {
                node: Broker(2),
                duration: 123_456_789,
            },
            Fault::ClockJump {
                node: Broker(3),
                forward: SECS,
            },
            Fault::ClockStall {
                node: Broker(3),
                duration: 7 * MILLIS,
            },
            Fault::ClockSkew {
                node: Broker(1),
                ppm: -150_000,
            },
            Fault::Partition {
                shape: Partition::RandomHalves,
                duration: Some(SECS),
            },
            Fault::Partition {
                shape: Partition::Split {
                    a: vec![Broker(1), c],
                    b: vec![Broker(2), Broker(3)],
                },
                duration: None,
            },
            Fault::Partition {
                shape: Partition::Isolate { node: Broker(2) },
                duration: Some(2 * SECS),
            },
            // A quorum member by number (the leader nemesis' target): `controller:K`, not
            // the active controller.
            Fault::Partition {
                shape: Partition::Isolate {
                    node: Controller(crate::faults::ControllerTag(2)),
                },
                duration: Some(2 * SECS),
            },
            Fault::Partition {
                shape: Partition::Bridge { node: Broker(1) },
                duration: Some(SECS),
            },
            Fault::Partition {
                shape: Partition::OneWay { from: Broker(3) },
                duration: Some(SECS),
            },
            Fault::Heal,
            Fault::Clog {
                from: Broker(1),
                to: c,
                duration: SECS,
            },
            Fault::BitFlip { node: Broker(2) },
            Fault::ReadErrors {
                node: Broker(1),
                duration: SECS,
            },
            Fault::DiskFull {
                node: Broker(3),
                duration: SECS,
            },
            Fault::SlowDisk {
                node: Broker(1),
                latency: 40 * MILLIS,
                duration: 4 * SECS,
            },
        ]
    }

    /// One fault of every kind that strikes group members, the coordinator or clients.
    fn group_and_client_faults() -> Vec<Fault> {
        vec![
            Fault::MemberCrash {
                member: 1,
                restart_after: Some(SECS),
            },
            Fault::MemberRestart { member: 2 },
            Fault::MemberPause {
                member: 3,
                duration: 2 * SECS,
            },
            Fault::CoordinatorCrash {
                power_loss: true,
                unsynced: Unsynced::LoseAll,
                restart_after: None,
            },
            Fault::ClientPause {
                client: ClientRef::Producer(1),
                duration: 2 * SECS,
                replaced_after: Some(SECS),
            },
            Fault::ClientCrash {
                client: ClientRef::Consumer(1),
                restart_after: Some(SECS),
            },
            Fault::ClientRestart {
                client: ClientRef::Producer(1),
            },
            Fault::ClientIsolate {
                client: ClientRef::Consumer(2),
                duration: SECS,
            },
        ]
    }

    #[test]
    fn every_fault_kind_survives_writing_and_reading_back() {
        let mut faults = node_faults();
        faults.extend(group_and_client_faults());
        let cfg = SimConfig {
            seed: 42,
            duration: 15 * SECS,
            liveness: 4 * SECS,
            partitions: 3,
            producers: 1,
            consumers: 3,
            produce_rate: 12.5,
            unclean_leader_election: true,
            group_members: 3,
            group_id: "g \"1\"".into(),
            group_commit: crate::modes::CommitMode::Async,
            group_assignor: skein_core::group::AssignorKind::CooperativeSticky,
            group_static: true,
            random_faults: false,
            schedule: faults
                .into_iter()
                .enumerate()
                .map(|(i, fault)| Scheduled {
                    at: SECS + i as u64 * 100 * MILLIS + 7,
                    fault,
                })
                .collect(),
            ..SimConfig::default()
        };
        let text = scenario_toml(&cfg, "all \"kinds\"", "every fault\nkind", "liveness");
        let sc = Scenario::parse("written.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let mut back = SimConfig {
            seed: 42,
            ..SimConfig::default()
        };
        back.apply_scenario(&sc);
        assert_eq!(back.schedule, cfg.schedule);
        assert!(!back.random_faults);
        assert_eq!(
            (
                back.duration,
                back.liveness,
                back.partitions,
                back.producers,
                back.consumers
            ),
            (
                cfg.duration,
                cfg.liveness,
                cfg.partitions,
                cfg.producers,
                cfg.consumers
            )
        );
        assert_eq!(back.produce_rate, cfg.produce_rate);
        assert_eq!(back.network, cfg.network);
        assert!(back.unclean_leader_election);
        assert_eq!(
            (
                back.group_members,
                &back.group_id,
                back.group_commit,
                back.group_assignor,
                back.group_static
            ),
            (
                cfg.group_members,
                &cfg.group_id,
                cfg.group_commit,
                cfg.group_assignor,
                cfg.group_static
            )
        );
        assert_eq!(sc.name.as_deref(), Some("all \"kinds\""));
        assert_eq!(
            sc.expect,
            Some(crate::scenario::Expect::Fail {
                invariant: "liveness".into()
            })
        );
    }
}
