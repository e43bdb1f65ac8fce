//! One `[[fault]]` entry: its kind, target and timings checked field by field, as a
//! scheduled [`Fault`].

use super::raw::{fields_of, Ctx, RawFault};
use super::ScenarioError;
use crate::faults::{
    ClientRef, Fault, LeaderOf, MessageAction, MessageKind, MessageSender, NodeRef, Scheduled,
    Unsynced,
};
use crate::net::Partition;
use crate::time::SimTime;
use std::ops::Range;
use toml::Spanned;

/// Parses entry `i` of the file's `[[fault]]` list; `brokers` and `partitions` (when the
/// file sets them) bound the node and partition numbers it may name.
pub(super) fn parse_fault(
    cx: &Ctx<'_>,
    i: usize,
    f: &Spanned<RawFault>,
    brokers: Option<u32>,
    partitions: Option<u32>,
) -> Result<Scheduled, ScenarioError> {
    let e = Entry {
        cx,
        i,
        span: f.span(),
        f: f.get_ref(),
        brokers,
        partitions,
    };
    let f = e.f;
    let at = cx.dur(&f.at, &e.field("at"))?;
    let kind = f.kind.get_ref().as_str();
    e.refuse_fields_not_taken(kind)?;
    let fault = match kind {
        "crash" => Fault::Crash {
            node: e.need_node(&f.node, "node")?,
            power_loss: f.power_loss.unwrap_or(false),
            unsynced: e.unsynced()?,
            restart_after: e.opt_pos_dur(&f.restart_after, "restart_after")?,
        },
        "restart" => Fault::Restart {
            node: e.need_node(&f.node, "node")?,
        },
        "pause" => Fault::Pause {
            node: e.need_node(&f.node, "node")?,
            duration: e.need_dur(&f.duration, "duration")?,
        },
        "clock-jump" => Fault::ClockJump {
            node: e.need_node(&f.node, "node")?,
            forward: e.need_dur(&f.forward, "forward")?,
        },
        "clock-stall" => Fault::ClockStall {
            node: e.need_node(&f.node, "node")?,
            duration: e.need_dur(&f.duration, "duration")?,
        },
        "clock-skew" => Fault::ClockSkew {
            node: e.need_node(&f.node, "node")?,
            ppm: e.ppm()?,
        },
        "partition" => e.partition()?,
        "heal" => Fault::Heal,
        "clog" => Fault::Clog {
            from: e.need_node(&e.node_from()?, "from")?,
            to: e.need_node(&f.to, "to")?,
            duration: e.need_dur(&f.duration, "duration")?,
        },
        "bit-flip" => Fault::BitFlip {
            node: e.need_node(&f.node, "node")?,
        },
        "read-errors" => Fault::ReadErrors {
            node: e.need_node(&f.node, "node")?,
            duration: e.need_dur(&f.duration, "duration")?,
        },
        "disk-full" => Fault::DiskFull {
            node: e.need_node(&f.node, "node")?,
            duration: e.need_dur(&f.duration, "duration")?,
        },
        "slow-disk" => Fault::SlowDisk {
            node: e.need_node(&f.node, "node")?,
            latency: e.need_dur(&f.latency, "latency")?,
            duration: e.need_dur(&f.duration, "duration")?,
        },
        "member-crash" => Fault::MemberCrash {
            member: e.need_member()?,
            restart_after: e.opt_pos_dur(&f.restart_after, "restart_after")?,
        },
        "member-restart" => Fault::MemberRestart {
            member: e.need_member()?,
        },
        "member-pause" => Fault::MemberPause {
            member: e.need_member()?,
            duration: e.need_dur(&f.duration, "duration")?,
        },
        "member-isolate" => Fault::MemberIsolate {
            member: e.need_member()?,
            duration: e.need_dur(&f.duration, "duration")?,
        },
        "coordinator-crash" if f.transactional_id.is_none() => Fault::CoordinatorCrash {
            power_loss: f.power_loss.unwrap_or(false),
            unsynced: e.unsynced()?,
            restart_after: e.opt_pos_dur(&f.restart_after, "restart_after")?,
        },
        "coordinator-crash" | "txn-coordinator-crash" => Fault::TxnCoordinatorCrash {
            transactional_id: e.need_transactional_id(kind)?,
            power_loss: f.power_loss.unwrap_or(false),
            unsynced: e.unsynced()?,
            restart_after: e.opt_pos_dur(&f.restart_after, "restart_after")?,
        },
        "message-delay" | "message-duplicate" | "message-drop" => e.message_fault(kind)?,
        "client-pause" => e.client_pause(kind)?,
        "client-crash" => Fault::ClientCrash {
            client: e.need_client(kind)?,
            restart_after: e.opt_pos_dur(&f.restart_after, "restart_after")?,
        },
        "client-restart" => Fault::ClientRestart {
            client: e.need_client(kind)?,
        },
        "client-isolate" => Fault::ClientIsolate {
            client: e.need_client(kind)?,
            duration: e.need_dur(&f.duration, "duration")?,
        },
        other => {
            return Err(cx.err(
                Some(f.kind.span()),
                &e.field("kind"),
                format!("unknown fault kind {other:?}; expected crash, restart, pause, clock-jump, clock-stall, clock-skew, partition, heal, clog, bit-flip, read-errors, disk-full, slow-disk, member-crash, member-restart, member-pause, coordinator-crash, txn-coordinator-crash, client-pause, client-crash, client-restart, client-isolate, message-delay, message-duplicate or message-drop"),
            ))
        }
    };
    Ok(Scheduled { at, fault })
}

/// One `[[fault]]` entry being parsed: the raw entry, where it is, and the cluster's shape
/// as far as the file gives it.
struct Entry<'a> {
    cx: &'a Ctx<'a>,
    i: usize,
    span: Range<usize>,
    f: &'a RawFault,
    brokers: Option<u32>,
    partitions: Option<u32>,
}

impl Entry<'_> {
    /// The field's name in errors: `fault[i].name`.
    fn field(&self, name: &str) -> String {
        format!("fault[{}].{name}", self.i)
    }

    /// An error about the whole entry (a missing field).
    fn missing(&self, name: &str, msg: impl Into<String>) -> ScenarioError {
        self.cx.err(Some(self.span.clone()), &self.field(name), msg)
    }

    /// A field the kind does not take would be silently ignored: refuse it by name.
    fn refuse_fields_not_taken(&self, kind: &str) -> Result<(), ScenarioError> {
        let f = self.f;
        let takes = fields_of(kind);
        if takes.is_empty() && kind != "heal" {
            return Ok(()); // an unknown kind: refused by name later
        }
        if let Some((name, sp)) = f.present().into_iter().find(|(n, _)| !takes.contains(n)) {
            return Err(self.cx.err(
                Some(sp),
                &self.field(name),
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
            return Err(self.missing("power_loss", format!("`{kind}` does not take `power_loss`")));
        }
        Ok(())
    }

    /// A node the cluster has: broker ids from 1 up to the brokers, partitions of "the
    /// leader of p" below the partitions (when the file says how many).
    fn check_node(&self, n: &Spanned<NodeRef>, name: &str) -> Result<NodeRef, ScenarioError> {
        let cx = self.cx;
        match (*n.get_ref(), self.brokers) {
            (NodeRef::Broker(0), _) => {
                Err(cx.err(Some(n.span()), &self.field(name), "broker ids start at 1"))
            }
            (NodeRef::Broker(id), Some(b)) if id > b => Err(cx.err(
                Some(n.span()),
                &self.field(name),
                format!("broker {id} does not exist (the cluster has {b})"),
            )),
            (NodeRef::LeaderOf(LeaderOf(p)), _) if self.partitions.is_some_and(|n| p >= n) => {
                Err(cx.err(
                    Some(n.span()),
                    &self.field(name),
                    format!(
                        "partition {p} does not exist (the topic has {})",
                        self.partitions.unwrap_or(0)
                    ),
                ))
            }
            (node, _) => Ok(node),
        }
    }

    fn need_node(
        &self,
        v: &Option<Spanned<NodeRef>>,
        name: &str,
    ) -> Result<NodeRef, ScenarioError> {
        match v {
            Some(n) => self.check_node(n, name),
            None => Err(self.missing(name, format!("`{}` needs `{name}`", self.f.kind.get_ref()))),
        }
    }

    fn opt_pos_dur(
        &self,
        v: &Option<Spanned<String>>,
        name: &str,
    ) -> Result<Option<SimTime>, ScenarioError> {
        v.as_ref()
            .map(|d| self.cx.positive_dur(d, &self.field(name)))
            .transpose()
    }

    fn need_dur(&self, v: &Option<Spanned<String>>, name: &str) -> Result<SimTime, ScenarioError> {
        match v {
            Some(d) => self.cx.positive_dur(d, &self.field(name)),
            None => Err(self.missing(name, format!("`{}` needs `{name}`", self.f.kind.get_ref()))),
        }
    }

    /// What a power loss keeps (`unsynced`, only with `power_loss = true`).
    fn unsynced(&self) -> Result<Unsynced, ScenarioError> {
        let f = self.f;
        match &f.unsynced {
            None => Ok(Unsynced::Random),
            Some(u) if f.power_loss != Some(true) => Err(self.cx.err(
                Some(u.span()),
                &self.field("unsynced"),
                "`unsynced` says what a power loss keeps: it needs `power_loss = true`",
            )),
            Some(u) => Unsynced::from_name(u.get_ref()).ok_or_else(|| {
                self.cx.err(
                    Some(u.span()),
                    &self.field("unsynced"),
                    format!(
                        "expected one of {}, found {:?}",
                        Unsynced::NAMES.join(", "),
                        u.get_ref()
                    ),
                )
            }),
        }
    }

    fn need_client(&self, kind: &str) -> Result<ClientRef, ScenarioError> {
        self.f.client.as_ref().map(|c| *c.get_ref()).ok_or_else(|| {
            self.missing(
                "client",
                format!("`{kind}` needs `client` (\"producer:N\" or \"consumer:N\")"),
            )
        })
    }

    fn need_member(&self) -> Result<u32, ScenarioError> {
        match &self.f.member {
            Some(m) if *m.get_ref() == 0 => Err(self.cx.err(
                Some(m.span()),
                &self.field("member"),
                "group members are numbered from 1",
            )),
            Some(m) => Ok(*m.get_ref()),
            None => Err(self.missing(
                "member",
                format!("`{}` needs `member`", self.f.kind.get_ref()),
            )),
        }
    }

    /// A clock skew's `ppm`. A clock at half speed or less, or over twice as fast, is no
    /// skew: the clock model would clamp it silently.
    fn ppm(&self) -> Result<i64, ScenarioError> {
        match &self.f.ppm {
            None => Err(self.missing("ppm", "`clock-skew` needs `ppm`")),
            Some(p) if !(-500_000..=1_000_000).contains(p.get_ref()) => Err(self.cx.err(
                Some(p.span()),
                &self.field("ppm"),
                format!(
                    "{} is out of range: a skew is within -500000..=1000000 ppm",
                    p.get_ref()
                ),
            )),
            Some(p) => Ok(*p.get_ref()),
        }
    }

    /// A `partition`: its shape and the fields that shape takes (others are refused).
    fn partition(&self) -> Result<Fault, ScenarioError> {
        let f = self.f;
        let shape_name = f.shape.as_ref().ok_or_else(|| {
            self.missing(
                "shape",
                "`partition` needs `shape` (halves, split, isolate, bridge, one-way)",
            )
        })?;
        let shape = match shape_name.get_ref().as_str() {
            "halves" => Partition::RandomHalves,
            "isolate" => Partition::Isolate {
                node: self.need_node(&f.node, "node")?,
            },
            "bridge" => Partition::Bridge {
                node: self.need_node(&f.node, "node")?,
            },
            "one-way" => Partition::OneWay {
                from: self.need_node(&self.node_from()?.or(f.node.clone()), "from")?,
            },
            "split" => self.split()?,
            other => {
                return Err(self.cx.err(
                    Some(shape_name.span()),
                    &self.field("shape"),
                    format!(
                    "unknown shape {other:?}; expected halves, split, isolate, bridge or one-way"
                ),
                ))
            }
        };
        // Fields of other shapes would be ignored: refuse them.
        let shape_fields: &[&str] = match shape_name.get_ref().as_str() {
            "halves" => &[],
            "isolate" | "bridge" => &["node"],
            "one-way" => &["from", "node"],
            _ => &["a", "b"],
        };
        if let Some((name, sp)) = f
            .present()
            .into_iter()
            .find(|(n, _)| ["node", "from", "a", "b"].contains(n) && !shape_fields.contains(n))
        {
            return Err(self.cx.err(
                Some(sp),
                &self.field(name),
                format!("shape {:?} does not take `{name}`", shape_name.get_ref()),
            ));
        }
        Ok(Fault::Partition {
            shape,
            duration: self.opt_pos_dur(&f.duration, "duration")?,
        })
    }

    /// A `split` partition's two groups `a` and `b`: disjoint, neither empty.
    fn split(&self) -> Result<Partition<NodeRef>, ScenarioError> {
        let f = self.f;
        let group = |v: &Option<Spanned<Vec<NodeRef>>>,
                     name: &str|
         -> Result<Vec<NodeRef>, ScenarioError> {
            let v = v
                .as_ref()
                .ok_or_else(|| self.missing(name, "`split` needs groups `a` and `b`"))?;
            v.get_ref()
                .iter()
                .map(|n| self.check_node(&Spanned::new(v.span(), *n), name))
                .collect()
        };
        let (a, b) = (group(&f.a, "a")?, group(&f.b, "b")?);
        if let Some(both) = a.iter().find(|n| b.contains(n)) {
            return Err(self.cx.err(
                f.b.as_ref().map(|b| b.span()),
                &self.field("b"),
                format!("{both} is in both groups `a` and `b`"),
            ));
        }
        if a.is_empty() || b.is_empty() {
            return Err(self.missing(
                if a.is_empty() { "a" } else { "b" },
                "a split needs a node on each side",
            ));
        }
        Ok(Partition::Split { a, b })
    }

    /// A `client-pause`, optionally replaced (a producer only, before the pause ends).
    fn client_pause(&self, kind: &str) -> Result<Fault, ScenarioError> {
        let f = self.f;
        let client = self.need_client(kind)?;
        let duration = self.need_dur(&f.duration, "duration")?;
        let replaced_after = self.opt_pos_dur(&f.replaced_after, "replaced_after")?;
        if let (Some(r), Some(sp)) = (replaced_after, f.replaced_after.as_ref()) {
            if !matches!(client, ClientRef::Producer(_)) {
                return Err(self.cx.err(
                    Some(sp.span()),
                    &self.field("replaced_after"),
                    "only a producer has an identity a replacement can take over",
                ));
            }
            if r >= duration {
                return Err(self.cx.err(
                    Some(sp.span()),
                    &self.field("replaced_after"),
                    "the replacement must start while the producer is still paused (before `duration` ends)",
                ));
            }
        }
        Ok(Fault::ClientPause {
            client,
            duration,
            replaced_after,
        })
    }

    /// `from` as a node (for `clog` and `partition`): a broker id, "controller" or
    /// "leader[:P]".
    fn node_from(&self) -> Result<Option<Spanned<NodeRef>>, ScenarioError> {
        let Some(v) = &self.f.from else {
            return Ok(None);
        };
        let node: NodeRef = v
            .get_ref()
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| {
                self.cx
                    .err(Some(v.span()), &self.field("from"), e.message().trim())
            })?;
        Ok(Some(Spanned::new(v.span(), node)))
    }

    fn need_transactional_id(&self, kind: &str) -> Result<String, ScenarioError> {
        match &self.f.transactional_id {
            Some(id) if id.get_ref().is_empty() => Err(self.cx.err(
                Some(id.span()),
                &self.field("transactional_id"),
                "must not be empty",
            )),
            Some(id) => Ok(id.get_ref().clone()),
            None => Err(self.missing(
                "transactional_id",
                format!("`{kind}` needs `transactional_id` (in the txn workload, \"txn-N\" is producer N's)"),
            )),
        }
    }

    /// A message fault: `message` (one of [`MessageKind::NAMES`]), `from` (who sends it)
    /// and, to delay or duplicate, `delay`.
    fn message_fault(&self, kind: &str) -> Result<Fault, ScenarioError> {
        let f = self.f;
        let action = MessageAction::from_kind(kind).expect("a message fault kind");
        let accepted = || MessageKind::NAMES.join(", ");
        let message = match &f.message {
            None => {
                return Err(self.missing(
                    "message",
                    format!("`{kind}` needs `message`, one of {}", accepted()),
                ))
            }
            Some(m) => MessageKind::from_name(m.get_ref()).ok_or_else(|| {
                self.cx.err(
                    Some(m.span()),
                    &self.field("message"),
                    format!(
                        "unknown message kind {:?}; expected one of {}",
                        m.get_ref(),
                        accepted()
                    ),
                )
            })?,
        };
        const SENDERS: &str = "a broker id, \"controller\", \"leader\" / \"leader:P\", \"producer:N\", \"consumer:N\" or \"coordinator:<transactional id>\"";
        let from = match &f.from {
            None => return Err(self.missing("from", format!("`{kind}` needs `from`: {SENDERS}"))),
            Some(v) => {
                let parsed = match v.get_ref() {
                    toml::Value::Integer(b) => u32::try_from(*b)
                        .ok()
                        .map(|b| MessageSender::Node(NodeRef::Broker(b))),
                    toml::Value::String(s) => MessageSender::parse(s),
                    _ => None,
                };
                let from = parsed.ok_or_else(|| {
                    self.cx.err(
                        Some(v.span()),
                        &self.field("from"),
                        format!("expected {SENDERS}, found {}", v.get_ref()),
                    )
                })?;
                if let MessageSender::Node(n) = from {
                    MessageSender::Node(self.check_node(&Spanned::new(v.span(), n), "from")?)
                } else {
                    from
                }
            }
        };
        let delay = match action {
            MessageAction::Drop => 0,
            MessageAction::Delay | MessageAction::Duplicate => self.need_dur(&f.delay, "delay")?,
        };
        Ok(Fault::Message {
            action,
            kind: message,
            from,
            delay,
        })
    }
}
