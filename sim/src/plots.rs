//! What `skein sim run --plots DIR` adds to a history's report directory
//! (`skein_jepsen::plot::write_dir`): the run's faults as spans with their resolved targets
//! (from the viewer's recorder, which watches the trace and changes nothing in it), the
//! history processes named by the clients they belong to, and the invariant violations as
//! marks at their simulated time.

use crate::config::{SimConfig, Workload};
use crate::faults::{ClientRef, Fault, MessageSender, NodeRef};
use crate::net::Partition;
use crate::report::SimReport;
use crate::time::SimTime;
use crate::topic::process_id;
use crate::viewer::Recorder;
use skein_jepsen::plot::{Mark, ReportInput, Shade};
use skein_jepsen::{check, CheckOptions, Event};
use std::collections::BTreeMap;

fn node(n: &NodeRef) -> String {
    match n {
        NodeRef::Broker(b) => format!("broker {b}"),
        NodeRef::Controller(c) => format!("controller {}", c.0.max(1)),
        NodeRef::LeaderOf(l) => format!("leader of {}", l.0),
    }
}

fn client(c: &ClientRef) -> String {
    match c {
        ClientRef::Producer(n) => format!("producer {n}"),
        ClientRef::Consumer(n) => format!("consumer {n}"),
    }
}

fn nodes(ns: &[NodeRef]) -> String {
    ns.iter().map(node).collect::<Vec<_>>().join(",")
}

/// What a fault struck, in words: `broker 2`, `broker 1,broker 2 | broker 3`, `member 1`.
pub fn target(f: &Fault) -> String {
    match f {
        Fault::Crash { node: n, .. }
        | Fault::Restart { node: n }
        | Fault::Pause { node: n, .. }
        | Fault::ClockJump { node: n, .. }
        | Fault::ClockStall { node: n, .. }
        | Fault::ClockSkew { node: n, .. }
        | Fault::BitFlip { node: n }
        | Fault::ReadErrors { node: n, .. }
        | Fault::DiskFull { node: n, .. }
        | Fault::SlowDisk { node: n, .. }
        | Fault::EndDiskFault { node: n, .. } => node(n),
        Fault::Partition { shape, .. } => match shape {
            Partition::RandomHalves => "random halves".into(),
            Partition::Split { a, b } => format!("{} | {}", nodes(a), nodes(b)),
            Partition::Isolate { node: n } => node(n),
            Partition::Bridge { node: n } => format!("bridge {}", node(n)),
            Partition::OneWay { from } => format!("from {}", node(from)),
        },
        Fault::Clog { from, to, .. } => format!("{}->{}", node(from), node(to)),
        Fault::MemberCrash { member, .. }
        | Fault::MemberRestart { member }
        | Fault::MemberPause { member, .. }
        | Fault::MemberIsolate { member, .. } => format!("member {member}"),
        Fault::CoordinatorCrash { .. } => "group coordinator".into(),
        Fault::TxnCoordinatorCrash {
            transactional_id, ..
        } => format!("coordinator of {transactional_id}"),
        Fault::ClientPause { client: c, .. }
        | Fault::ClientCrash { client: c, .. }
        | Fault::ClientRestart { client: c }
        | Fault::ClientIsolate { client: c, .. }
        | Fault::ClientTakeover { client: c } => client(c),
        Fault::Message { kind, from, .. } => {
            let from = match from {
                MessageSender::Node(n) => node(n),
                MessageSender::Client(c) => client(c),
                MessageSender::TxnCoordinator(id) => format!("coordinator of {id}"),
            };
            format!("{kind:?} from {from}")
        }
        Fault::Heal | Fault::EndPartition { .. } => String::new(),
    }
}

/// Whether a fault only ends others (it gets no span of its own).
fn is_end(f: &Fault) -> bool {
    matches!(
        f,
        Fault::Restart { .. }
            | Fault::Heal
            | Fault::EndPartition { .. }
            | Fault::EndDiskFault { .. }
            | Fault::MemberRestart { .. }
            | Fault::ClientRestart { .. }
            | Fault::ClientTakeover { .. }
    )
}

/// Whether `later` ends `f` (a restart of what it crashed, a heal of a partition).
fn ends(f: &Fault, later: &Fault) -> bool {
    match (f, later) {
        (Fault::Crash { node: a, .. }, Fault::Restart { node: b }) => a == b,
        (Fault::MemberCrash { member: a, .. }, Fault::MemberRestart { member: b }) => a == b,
        (Fault::ClientCrash { client: a, .. }, Fault::ClientRestart { client: b }) => a == b,
        (Fault::Partition { .. }, Fault::Heal | Fault::EndPartition { .. }) => true,
        _ => false,
    }
}

/// The run's faults as spans: from when each struck to when it ended (its own duration, the
/// restart or heal that ended it, or the final heal); instant faults as instants.
pub fn fault_shades(rec: &Recorder) -> Vec<Shade> {
    let last = rec.final_heal.unwrap_or(rec.end);
    let mut out = Vec::new();
    for (i, m) in rec.faults.iter().enumerate() {
        let f = &m.fault;
        if is_end(f) {
            continue;
        }
        let after = |d: Option<SimTime>| d.map(|d| m.at + d);
        let end = match f {
            Fault::Crash { restart_after, .. }
            | Fault::MemberCrash { restart_after, .. }
            | Fault::ClientCrash { restart_after, .. }
            | Fault::Partition {
                duration: restart_after,
                ..
            } => after(*restart_after).or_else(|| {
                rec.faults[i + 1..]
                    .iter()
                    .find(|l| ends(f, &l.fault))
                    .map(|l| l.at)
            }),
            Fault::CoordinatorCrash { restart_after, .. }
            | Fault::TxnCoordinatorCrash { restart_after, .. } => after(*restart_after),
            Fault::MemberPause { duration, .. } => Some(m.at + duration),
            _ => m.end,
        };
        let end = match f {
            // Ends only at the final heal (or never): drawn to it.
            Fault::Crash { .. }
            | Fault::MemberCrash { .. }
            | Fault::ClientCrash { .. }
            | Fault::Partition { .. }
            | Fault::CoordinatorCrash { .. }
            | Fault::TxnCoordinatorCrash { .. } => end.unwrap_or(last.max(m.at)),
            _ => end.unwrap_or(m.at),
        };
        out.push(Shade {
            start: m.at,
            end: end.max(m.at),
            kind: m.name.to_string(),
            target: target(f),
        });
    }
    out
}

/// Every history process the run's clients can use, named by its client: `producer 1 to
/// sim-0`, `consumer 2 of sim-1`, `group member 1 of sim-2`, `group member 1 (commits)`.
///
/// A client started again as a new client (`restarts`: new id, first id; a client crash's
/// restart or a producer's takeover) keeps its role's name, numbered: `producer 2 to sim-0
/// (instance 2)`.
pub fn roles(cfg: &SimConfig, restarts: &[(u64, u64)]) -> BTreeMap<u64, String> {
    let mut out = BTreeMap::new();
    let parts = 0..cfg.partitions;
    let t = crate::topic::TOPIC;
    let mut id = 1u64;
    for i in 1..=cfg.producers {
        match cfg.workload {
            Workload::Plain => {
                for p in parts.clone() {
                    out.insert(process_id(id, p), format!("producer {i} to {t}-{p}"));
                }
            }
            Workload::Txn => {
                out.insert(process_id(id, 0), format!("producer {i} (transactional)"));
            }
        }
        id += 1;
    }
    for i in 1..=cfg.consumers {
        for p in parts.clone() {
            out.insert(process_id(id, p), format!("consumer {i} of {t}-{p}"));
        }
        id += 1;
    }
    for i in 1..=cfg.group_members {
        for p in parts.clone() {
            out.insert(process_id(id, p), format!("group member {i} of {t}-{p}"));
        }
        out.insert(
            crate::group_client::commit_process(id),
            format!("group member {i} (commits)"),
        );
        id += 1;
    }
    if cfg.workload == Workload::Txn {
        for i in 1..=cfg.pipelines {
            out.insert(process_id(id, 0), format!("pipeline {i}"));
            id += 1;
        }
    }
    let mut instances: BTreeMap<u64, u32> = BTreeMap::new();
    for &(new, first) in restarts {
        let n = instances.entry(first).or_insert(1);
        *n += 1;
        let named: Vec<(u64, String)> = out
            .range(process_id(first, 0)..process_id(first + 1, 0))
            .map(|(&p, name)| (p - process_id(first, 0), format!("{name} (instance {n})")))
            .collect();
        for (offset, name) in named {
            out.insert(process_id(new, 0) + offset, name);
        }
    }
    out
}

/// The run's invariant violations, each a mark at its simulated time.
pub fn violation_marks(report: &SimReport) -> Vec<Mark> {
    report
        .violations
        .iter()
        .map(|v| Mark {
            label: v.invariant.to_string(),
            indexes: Vec::new(),
            at: Some(v.at),
        })
        .collect()
}

/// Writes the report directory of a run (`skein_jepsen::plot::write_dir`) from its history
/// `events`, its report and the recorder that watched it; `files`: more files to link.
/// Returns the names of the files written.
pub fn write_report(
    dir: &std::path::Path,
    events: &[Event],
    title: &str,
    cfg: &SimConfig,
    report: &SimReport,
    rec: &Recorder,
    files: Vec<(String, String)>,
) -> std::io::Result<Vec<String>> {
    // The checker's examples to mark on the timeline (the run judged the same history).
    let checked = check(events, &CheckOptions::default());
    let shades = fault_shades(rec);
    let mut verdict = if report.passed() {
        "PASS: every invariant held".to_string()
    } else {
        format!("FAIL: {}", report.failed_invariants().join(", "))
    };
    verdict.push_str(&format!("\n\n{report}"));
    if let Some(h) = &report.history_summary {
        verdict.push_str("\nhistory check:\n");
        verdict.push_str(h);
    }
    skein_jepsen::plot::write_dir(
        dir,
        &ReportInput {
            title: title.to_string(),
            events,
            shades: &shades,
            time_label: "simulated time (s)",
            roles: roles(cfg, &report.client_restarts),
            report: Some(&checked),
            verdict,
            valid: report.passed(),
            marks: violation_marks(report),
            files,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restarted_client_keeps_its_role_numbered_by_instance() {
        let cfg = SimConfig {
            producers: 2,
            consumers: 1,
            partitions: 2,
            group_members: 0,
            ..SimConfig::default()
        };
        // Producer 2 (client 2) restarts as client 4, then again as client 5.
        let r = roles(&cfg, &[(4, 2), (5, 2)]);
        assert_eq!(r[&process_id(2, 1)], "producer 2 to sim-1");
        assert_eq!(r[&process_id(4, 0)], "producer 2 to sim-0 (instance 2)");
        assert_eq!(r[&process_id(5, 1)], "producer 2 to sim-1 (instance 3)");
        assert_eq!(r[&process_id(3, 0)], "consumer 1 of sim-0");
        assert!(!r.contains_key(&process_id(6, 0)));
    }
}
