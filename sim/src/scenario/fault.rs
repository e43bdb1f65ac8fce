//! One `[[fault]]` entry: its kind, target and timings checked field by field, as a
//! scheduled [`Fault`].

use super::raw::{fields_of, Ctx, RawFault};
use super::ScenarioError;
use crate::faults::{ClientRef, Fault, LeaderOf, NodeRef, Scheduled, Unsynced};
use crate::net::Partition;
use crate::time::SimTime;
use toml::Spanned;

#[allow(clippy::too_many_lines)] // split pending: predates the lint
pub(super) fn parse_fault(
    cx: &Ctx<'_>,
    i: usize,
    f: &Spanned<RawFault>,
    brokers: Option<u32>,
    partitions: Option<u32>,
) -> Result<Scheduled, ScenarioError> {
    let span = f.span();
    let f = f.get_ref();
    let field = |name: &str| format!("fault[{i}].{name}");
    let at = cx.dur(&f.at, &field("at"))?;
    let check_node = |n: &Spanned<NodeRef>, name: &str| -> Result<NodeRef, ScenarioError> {
        match (*n.get_ref(), brokers) {
            (NodeRef::Broker(0), _) => {
                Err(cx.err(Some(n.span()), &field(name), "broker ids start at 1"))
            }
            (NodeRef::Broker(id), Some(b)) if id > b => Err(cx.err(
                Some(n.span()),
                &field(name),
                format!("broker {id} does not exist (the cluster has {b})"),
            )),
            (NodeRef::LeaderOf(LeaderOf(p)), _) if partitions.is_some_and(|n| p >= n) => Err(cx
                .err(
                    Some(n.span()),
                    &field(name),
                    format!(
                        "partition {p} does not exist (the topic has {})",
                        partitions.unwrap_or(0)
                    ),
                )),
            (node, _) => Ok(node),
        }
    };
    let need_node = |v: &Option<Spanned<NodeRef>>, name: &str| -> Result<NodeRef, ScenarioError> {
        match v {
            Some(n) => check_node(n, name),
            None => Err(cx.err(
                Some(span.clone()),
                &field(name),
                format!("`{}` needs `{name}`", f.kind.get_ref()),
            )),
        }
    };
    let kind = f.kind.get_ref().as_str();
    // A field the kind does not take would be silently ignored: refuse it by name.
    let takes = fields_of(kind);
    if !takes.is_empty() || kind == "heal" {
        if let Some((name, sp)) = f.present().into_iter().find(|(n, _)| !takes.contains(n)) {
            return Err(cx.err(
                Some(sp),
                &field(name),
                format!(
                    "`{kind}` does not take `{name}`; it takes {}",
                    if takes.is_empty() {
                        "no fields besides `at`".to_string()
                    } else {
                        takes
                            .iter()
                            .map(|t| format!("`{t}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ),
            ));
        }
        if f.power_loss.is_some() && !takes.contains(&"power_loss") {
            return Err(cx.err(
                Some(span.clone()),
                &field("power_loss"),
                format!("`{kind}` does not take `power_loss`"),
            ));
        }
    }
    let opt_pos_dur =
        |v: &Option<Spanned<String>>, name: &str| -> Result<Option<SimTime>, ScenarioError> {
            v.as_ref()
                .map(|d| cx.positive_dur(d, &field(name)))
                .transpose()
        };
    let unsynced = || -> Result<Unsynced, ScenarioError> {
        match &f.unsynced {
            None => Ok(Unsynced::Random),
            Some(u) if f.power_loss != Some(true) => Err(cx.err(
                Some(u.span()),
                &field("unsynced"),
                "`unsynced` says what a power loss keeps: it needs `power_loss = true`",
            )),
            Some(u) => Unsynced::from_name(u.get_ref()).ok_or_else(|| {
                cx.err(
                    Some(u.span()),
                    &field("unsynced"),
                    format!(
                        "expected one of {}, found {:?}",
                        Unsynced::NAMES.join(", "),
                        u.get_ref()
                    ),
                )
            }),
        }
    };
    let need_client = || -> Result<ClientRef, ScenarioError> {
        f.client.as_ref().map(|c| *c.get_ref()).ok_or_else(|| {
            cx.err(
                Some(span.clone()),
                &field("client"),
                format!("`{kind}` needs `client` (\"producer:N\" or \"consumer:N\")"),
            )
        })
    };
    let need_dur = |v: &Option<Spanned<String>>, name: &str| -> Result<SimTime, ScenarioError> {
        match v {
            Some(d) => cx.positive_dur(d, &field(name)),
            None => Err(cx.err(
                Some(span.clone()),
                &field(name),
                format!("`{}` needs `{name}`", f.kind.get_ref()),
            )),
        }
    };
    let need_member = || -> Result<u32, ScenarioError> {
        match &f.member {
            Some(m) if *m.get_ref() == 0 => Err(cx.err(
                Some(m.span()),
                &field("member"),
                "group members are numbered from 1",
            )),
            Some(m) => Ok(*m.get_ref()),
            None => Err(cx.err(
                Some(span.clone()),
                &field("member"),
                format!("`{}` needs `member`", f.kind.get_ref()),
            )),
        }
    };
    let fault = match kind {
        "crash" => Fault::Crash {
            node: need_node(&f.node, "node")?,
            power_loss: f.power_loss.unwrap_or(false),
            unsynced: unsynced()?,
            restart_after: opt_pos_dur(&f.restart_after, "restart_after")?,
        },
        "restart" => Fault::Restart { node: need_node(&f.node, "node")? },
        "pause" => Fault::Pause {
            node: need_node(&f.node, "node")?,
            duration: need_dur(&f.duration, "duration")?,
        },
        "clock-jump" => Fault::ClockJump {
            node: need_node(&f.node, "node")?,
            forward: need_dur(&f.forward, "forward")?,
        },
        "clock-stall" => Fault::ClockStall {
            node: need_node(&f.node, "node")?,
            duration: need_dur(&f.duration, "duration")?,
        },
        "clock-skew" => Fault::ClockSkew {
            node: need_node(&f.node, "node")?,
            ppm: match &f.ppm {
                None => return Err(cx.err(Some(span.clone()), &field("ppm"), "`clock-skew` needs `ppm`")),
                // A clock at half speed or less, or over twice as fast, is no skew: the
                // clock model would clamp it silently.
                Some(p) if !(-500_000..=1_000_000).contains(p.get_ref()) => return Err(cx.err(
                    Some(p.span()),
                    &field("ppm"),
                    format!("{} is out of range: a skew is within -500000..=1000000 ppm", p.get_ref()),
                )),
                Some(p) => *p.get_ref(),
            },
        },
        "partition" => {
            let shape_name = f.shape.as_ref().ok_or_else(|| cx.err(Some(span.clone()), &field("shape"), "`partition` needs `shape` (halves, split, isolate, bridge, one-way)"))?;
            let shape = match shape_name.get_ref().as_str() {
                "halves" => Partition::RandomHalves,
                "isolate" => Partition::Isolate { node: need_node(&f.node, "node")? },
                "bridge" => Partition::Bridge { node: need_node(&f.node, "node")? },
                "one-way" => Partition::OneWay { from: need_node(&f.from.clone().or(f.node.clone()), "from")? },
                "split" => {
                    let group = |v: &Option<Spanned<Vec<NodeRef>>>, name: &str| -> Result<Vec<NodeRef>, ScenarioError> {
                        let v = v.as_ref().ok_or_else(|| cx.err(Some(span.clone()), &field(name), "`split` needs groups `a` and `b`"))?;
                        v.get_ref().iter().map(|n| check_node(&Spanned::new(v.span(), *n), name)).collect()
                    };
                    let (a, b) = (group(&f.a, "a")?, group(&f.b, "b")?);
                    if let Some(both) = a.iter().find(|n| b.contains(n)) {
                        return Err(cx.err(f.b.as_ref().map(|b| b.span()), &field("b"), format!("{both} is in both groups `a` and `b`")));
                    }
                    if a.is_empty() || b.is_empty() {
                        return Err(cx.err(Some(span.clone()), &field(if a.is_empty() { "a" } else { "b" }), "a split needs a node on each side"));
                    }
                    Partition::Split { a, b }
                }
                other => return Err(cx.err(Some(shape_name.span()), &field("shape"), format!("unknown shape {other:?}; expected halves, split, isolate, bridge or one-way"))),
            };
            // Fields of other shapes would be ignored: refuse them.
            let shape_fields: &[&str] = match shape_name.get_ref().as_str() {
                "halves" => &[],
                "isolate" | "bridge" => &["node"],
                "one-way" => &["from", "node"],
                _ => &["a", "b"],
            };
            if let Some((name, sp)) = f.present().into_iter().find(|(n, _)| {
                ["node", "from", "a", "b"].contains(n) && !shape_fields.contains(n)
            }) {
                return Err(cx.err(Some(sp), &field(name), format!("shape {:?} does not take `{name}`", shape_name.get_ref())));
            }
            Fault::Partition {
                shape,
                duration: opt_pos_dur(&f.duration, "duration")?,
            }
        }
        "heal" => Fault::Heal,
        "clog" => Fault::Clog {
            from: need_node(&f.from, "from")?,
            to: need_node(&f.to, "to")?,
            duration: need_dur(&f.duration, "duration")?,
        },
        "bit-flip" => Fault::BitFlip { node: need_node(&f.node, "node")? },
        "read-errors" => Fault::ReadErrors {
            node: need_node(&f.node, "node")?,
            duration: need_dur(&f.duration, "duration")?,
        },
        "disk-full" => Fault::DiskFull {
            node: need_node(&f.node, "node")?,
            duration: need_dur(&f.duration, "duration")?,
        },
        "slow-disk" => Fault::SlowDisk {
            node: need_node(&f.node, "node")?,
            latency: need_dur(&f.latency, "latency")?,
            duration: need_dur(&f.duration, "duration")?,
        },
        "member-crash" => Fault::MemberCrash {
            member: need_member()?,
            restart_after: opt_pos_dur(&f.restart_after, "restart_after")?,
        },
        "member-restart" => Fault::MemberRestart { member: need_member()? },
        "member-pause" => Fault::MemberPause {
            member: need_member()?,
            duration: need_dur(&f.duration, "duration")?,
        },
        "coordinator-crash" => Fault::CoordinatorCrash {
            power_loss: f.power_loss.unwrap_or(false),
            unsynced: unsynced()?,
            restart_after: opt_pos_dur(&f.restart_after, "restart_after")?,
        },
        "client-pause" => {
            let client = need_client()?;
            let duration = need_dur(&f.duration, "duration")?;
            let replaced_after = opt_pos_dur(&f.replaced_after, "replaced_after")?;
            if let (Some(r), Some(sp)) = (replaced_after, f.replaced_after.as_ref()) {
                if !matches!(client, ClientRef::Producer(_)) {
                    return Err(cx.err(Some(sp.span()), &field("replaced_after"), "only a producer has an identity a replacement can take over"));
                }
                if r >= duration {
                    return Err(cx.err(Some(sp.span()), &field("replaced_after"), "the replacement must start while the producer is still paused (before `duration` ends)"));
                }
            }
            Fault::ClientPause { client, duration, replaced_after }
        }
        "client-crash" => Fault::ClientCrash {
            client: need_client()?,
            restart_after: opt_pos_dur(&f.restart_after, "restart_after")?,
        },
        "client-restart" => Fault::ClientRestart { client: need_client()? },
        "client-isolate" => Fault::ClientIsolate {
            client: need_client()?,
            duration: need_dur(&f.duration, "duration")?,
        },
        other => {
            return Err(cx.err(
                Some(f.kind.span()),
                &field("kind"),
                format!("unknown fault kind {other:?}; expected crash, restart, pause, clock-jump, clock-stall, clock-skew, partition, heal, clog, bit-flip, read-errors, disk-full, slow-disk, member-crash, member-restart, member-pause, coordinator-crash, client-pause, client-crash, client-restart or client-isolate"),
            ))
        }
    };
    Ok(Scheduled { at, fault })
}
