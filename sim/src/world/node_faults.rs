//! Applying faults to brokers, the controller, the network, disks and group members
//! (client faults are in `client_faults`): resolving "the leader of p", crashes (with
//! power loss) and restarts, pauses, clock faults, partitions and clogs, disk faults and
//! their ends, and the final heal.

use super::{Ev, Slot, World};
use crate::clock::NodeClock;
use crate::disk::SimDisk;
use crate::faults::{ControllerTag, DiskFaultKind, Fault, LeaderOf, NodeRef, Unsynced};
use crate::fields::Fields;
use crate::net::Partition;
use crate::time::SimTime;
use rand::Rng;
use skein_core::message::Address;
use skein_core::node::Machine as _;

/// The controller id a resolved controller target names ("the controller" of a single
/// controller is controller 1; with a quorum it is resolved before a fault applies).
fn ctl_id(tag: ControllerTag) -> skein_core::NodeId {
    tag.0.max(1)
}

pub(super) fn node_addr(n: NodeRef) -> Address {
    match n {
        NodeRef::Broker(id) => Address::Node(id),
        NodeRef::Controller(c) => Address::Controller(ctl_id(c)),
        NodeRef::LeaderOf(_) => unreachable!("fault targets are resolved before they apply"),
    }
}

impl World {
    /// A scheduled fault strikes: its targets are resolved (skipped if "the leader of p"
    /// has no leader now), it is traced, counted and placed in the atlas (ends, heals and
    /// restarts are not counted), then applied.
    pub(super) fn strike(&mut self, now: SimTime, seq: u64, f: Fault) {
        let Some(f) = self.resolve_targets(f) else {
            self.tracer.event(now, seq, "fault-skipped", "", &[], || {
                "its partition has no leader".to_string()
            });
            return;
        };
        let name = f.name();
        self.tracer
            .event(now, seq, "fault", name, &[], || format!("{f:?}"));
        self.tracer.fields(now, Fields::Fault(&f));
        if !matches!(
            f,
            Fault::EndDiskFault { .. }
                | Fault::Heal
                | Fault::EndPartition { .. }
                | Fault::Restart { .. }
                | Fault::MemberRestart { .. }
                | Fault::ClientRestart { .. }
                | Fault::ClientTakeover { .. }
        ) {
            *self.fault_counts.entry(name).or_default() += 1;
            let (role, moment) = self.atlas_moment(&f);
            self.atlas.strike(name, role, moment);
        }
        self.apply_fault(now, f);
    }

    pub(super) fn apply_fault(&mut self, now: SimTime, f: Fault) {
        if let Fault::ClockJump {
            node: NodeRef::Broker(b),
            ..
        }
        | Fault::ClockStall {
            node: NodeRef::Broker(b),
            ..
        }
        | Fault::ClockSkew {
            node: NodeRef::Broker(b),
            ..
        } = f
        {
            self.clock_faulted.insert(b);
        }
        match f {
            Fault::Crash {
                node,
                power_loss,
                unsynced,
                restart_after,
            } => {
                self.crash(now, node, power_loss.then_some(unsynced));
                if let Some(d) = restart_after {
                    self.q.push(now + d, Ev::Fault(Fault::Restart { node }));
                }
            }
            Fault::Restart { node } => self.restart(now, node),
            Fault::MemberCrash {
                member,
                restart_after,
            } => self.member_crash(now, member, restart_after),
            Fault::MemberRestart { member } => {
                self.with_member(member, now, |m, _| m.restart());
            }
            Fault::MemberPause { member, duration } => self.member_pause(now, member, duration),
            Fault::MemberIsolate { member, duration } => {
                if let Some(&idx) = member
                    .checked_sub(1)
                    .and_then(|i| self.members.get(i as usize))
                {
                    self.isolate_client(idx, now, duration);
                }
            }
            f @ (Fault::CoordinatorCrash { .. }
            | Fault::TxnCoordinatorCrash { .. }
            | Fault::Message { .. }) => self.apply_coordinator_or_message_fault(now, f),
            f @ (Fault::ClientPause { .. }
            | Fault::ClientCrash { .. }
            | Fault::ClientRestart { .. }
            | Fault::ClientIsolate { .. }
            | Fault::ClientTakeover { .. }) => self.apply_client_fault(now, f),
            Fault::Pause { node, duration } => {
                self.with_slot(node, |s| {
                    s.paused_until = s.paused_until.max(now + duration)
                });
            }
            Fault::ClockJump { node, forward } => {
                self.with_slot(node, |s| s.clock.jump_forward(now, forward));
                self.refresh_timer(now, node);
            }
            Fault::ClockStall { node, duration } => {
                self.with_slot(node, |s| s.clock.stall(now, duration));
                self.refresh_timer(now, node);
            }
            Fault::ClockSkew { node, ppm } => {
                self.with_slot(node, |s| s.clock.set_skew(now, ppm));
                self.refresh_timer(now, node);
            }
            Fault::Partition { shape, duration } => self.partition(now, &shape, duration),
            Fault::Heal => self.net.heal(),
            Fault::EndPartition { id } => self.net.unblock(id),
            Fault::Clog { from, to, duration } => {
                self.net
                    .clog(node_addr(from), node_addr(to), now + duration)
            }
            Fault::BitFlip { node } => self.bit_flip(node),
            Fault::ReadErrors { node, duration } => {
                self.disk_of(node).mem().set_read_error(None, true);
                self.end_disk_fault_at(now + duration, node, DiskFaultKind::ReadErrors);
            }
            Fault::DiskFull { node, duration } => {
                // A few KiB of room are left, so the write that fills the disk is torn.
                let room = self.disk_rng.gen_range(0..=4096);
                let d = self.disk_of(node);
                d.mem().set_capacity(Some(d.mem().used_bytes() + room));
                self.end_disk_fault_at(now + duration, node, DiskFaultKind::Full);
            }
            Fault::SlowDisk {
                node,
                latency,
                duration,
            } => {
                self.disk_of(node).set_slow(latency);
                self.end_disk_fault_at(now + duration, node, DiskFaultKind::Slow);
            }
            Fault::EndDiskFault { node, what } => {
                let d = self.disk_of(node);
                match what {
                    DiskFaultKind::ReadErrors => d.mem().set_read_error(None, false),
                    DiskFaultKind::Full => d.mem().set_capacity(None),
                    DiskFaultKind::Slow => d.set_slow(0),
                }
            }
        }
    }

    /// Group member `member` (1-based) crashes, and restarts `restart_after` later.
    fn member_crash(&mut self, now: SimTime, member: u32, restart_after: Option<SimTime>) {
        // A dead process is not paused any more; it restarts unpaused.
        if let Some(&idx) = member
            .checked_sub(1)
            .and_then(|i| self.members.get(i as usize))
        {
            self.clients[idx].paused_until = self.clients[idx].paused_until.min(now);
        }
        self.with_member(member, now, |m, ctx| m.crash(ctx));
        if let Some(d) = restart_after {
            self.q
                .push(now + d, Ev::Fault(Fault::MemberRestart { member }));
        }
    }

    /// Group member `member` (1-based) arms a pause; if it strikes now, its slot pauses.
    fn member_pause(&mut self, now: SimTime, member: u32, duration: SimTime) {
        let mut strike = None;
        self.with_member(member, now, |m, _| strike = m.arm_pause(duration));
        if let (Some(d), Some(&idx)) = (
            strike,
            member
                .checked_sub(1)
                .and_then(|i| self.members.get(i as usize)),
        ) {
            self.pause_client(idx, now, d);
        }
    }

    /// A coordinator crash (the group's or a transactional id's) or a message fault.
    fn apply_coordinator_or_message_fault(&mut self, now: SimTime, f: Fault) {
        match f {
            Fault::CoordinatorCrash {
                power_loss,
                unsynced,
                restart_after,
            } => {
                let target = self.group_coordinator_broker();
                let what = format!("the group coordinator is {target:?}");
                self.coordinator_crash(
                    now,
                    target,
                    what,
                    power_loss.then_some(unsynced),
                    restart_after,
                )
            }
            Fault::TxnCoordinatorCrash {
                transactional_id,
                power_loss,
                unsynced,
                restart_after,
            } => {
                let target = self.txn_coordinator_broker(&transactional_id);
                let what =
                    format!("the transaction coordinator of {transactional_id:?} is {target:?}");
                self.coordinator_crash(
                    now,
                    target,
                    what,
                    power_loss.then_some(unsynced),
                    restart_after,
                )
            }
            Fault::Message {
                action,
                kind,
                from,
                delay,
            } => self.arm_message_fault(now, (action, kind, from, delay)),
            _ => unreachable!("only coordinator and message faults are passed here"),
        }
    }

    /// The coordinating broker `target` (the group's, as the controller knows it, or a
    /// transactional id's) crashes, if there is one, and restarts `restart_after` later.
    fn coordinator_crash(
        &mut self,
        now: SimTime,
        target: Option<skein_core::NodeId>,
        what: String,
        power_loss: Option<Unsynced>,
        restart_after: Option<SimTime>,
    ) {
        let seq = self.q.len() as u64;
        self.tracer.event(
            now,
            seq,
            "coordinator-crash",
            "",
            &[target.unwrap_or(0) as u64],
            || what,
        );
        if let Some(id) = target {
            let node = NodeRef::Broker(id);
            self.crash(now, node, power_loss);
            if let Some(d) = restart_after {
                self.q.push(now + d, Ev::Fault(Fault::Restart { node }));
            }
        }
    }

    /// Every node a fault can hit: the brokers, then the controllers (with a single one,
    /// "the controller", as it always was named).
    pub(super) fn all_nodes(&self) -> Vec<NodeRef> {
        let brokers = (1..=self.cfg.brokers).map(NodeRef::Broker);
        if self.cfg.controllers == 1 {
            return brokers.chain([NodeRef::CONTROLLER]).collect();
        }
        brokers
            .chain((1..=self.cfg.controllers).map(|k| NodeRef::Controller(ControllerTag(k))))
            .collect()
    }

    /// Blocks the links of a partition of that shape among the brokers and the controllers;
    /// a timed partition ends on its own, others stay in force.
    fn partition(&mut self, now: SimTime, shape: &Partition<NodeRef>, duration: Option<SimTime>) {
        let nodes = self.all_nodes();
        let links: Vec<(Address, Address)> = shape
            .blocked_links(&nodes, &mut self.net_rng)
            .into_iter()
            .map(|(a, b)| (node_addr(a), node_addr(b)))
            .collect();
        self.tracer.fields(now, Fields::Blocked(&links));
        let id = self.net.block(links.into_iter().collect());
        if let Some(d) = duration {
            self.q.push(now + d, Ev::Fault(Fault::EndPartition { id }));
        }
    }

    /// Flips one random bit of one random non-empty log file on the node's disk.
    fn bit_flip(&mut self, node: NodeRef) {
        let disk = self.disk_of(node).clone();
        let files: Vec<(String, u64, u64)> = disk
            .mem()
            .files()
            .into_iter()
            .filter(|(p, len, _)| p.ends_with(".log") && *len > 0)
            .collect();
        if !files.is_empty() {
            let (path, len, _) = &files[self.disk_rng.gen_range(0..files.len())];
            let pos = self.disk_rng.gen_range(0..*len);
            let bit = self.disk_rng.gen_range(0..8u8);
            disk.mem().flip_bit(path, pos, bit);
        }
    }

    /// Queues the end of a disk fault.
    fn end_disk_fault_at(&mut self, at: SimTime, node: NodeRef, what: DiskFaultKind) {
        self.q
            .push(at, Ev::Fault(Fault::EndDiskFault { node, what }));
    }

    pub(super) fn disk_of(&self, node: NodeRef) -> &SimDisk {
        match node {
            NodeRef::Broker(id) => {
                &self
                    .brokers
                    .get(id)
                    .expect("fault names a broker that exists")
                    .disk
            }
            NodeRef::Controller(c) => {
                &self
                    .controllers
                    .get(&ctl_id(c))
                    .expect("fault names a controller that exists")
                    .disk
            }
            NodeRef::LeaderOf(_) => unreachable!("fault targets are resolved before they apply"),
        }
    }

    /// Replaces "the leader of partition p" in a fault by that broker (`None` if the
    /// partition has no leader now: the fault is skipped) and, with a controller quorum,
    /// "the controller" by the active one (controller 1 while there is none; for a restart,
    /// the first controller that is down).
    pub(super) fn resolve_targets(&self, f: Fault) -> Option<Fault> {
        let quorum = self.cfg.controllers > 1;
        if !f.names_a_leader() && !quorum {
            return Some(f);
        }
        let controller = match &f {
            _ if !quorum => None,
            Fault::Restart { .. } => self
                .controllers
                .iter()
                .find(|(_, s)| s.machine.is_none())
                .map(|(&id, _)| id),
            _ => Some(self.active_or_first_controller()),
        };
        f.map_nodes(|n| match n {
            NodeRef::LeaderOf(LeaderOf(p)) => self.leader_of(p).map(NodeRef::Broker),
            NodeRef::Controller(ControllerTag(0)) => {
                Some(controller.map_or(n, |k| NodeRef::Controller(ControllerTag(k))))
            }
            n => Some(n),
        })
    }

    pub(super) fn with_slot(&mut self, node: NodeRef, f: impl FnOnce(&mut Slot<()>)) {
        // Apply the same closure to either slot type through their shared fields.
        let mut tmp: Slot<()> = Slot::new(self.disk_of(node).clone());
        let copy_in = |tmp: &mut Slot<()>, clock: &NodeClock, paused: SimTime| {
            tmp.clock = clock.clone();
            tmp.paused_until = paused;
        };
        match node {
            NodeRef::LeaderOf(_) => {} // resolved before faults apply
            NodeRef::Broker(id) => {
                let Some(s) = self.brokers.get_mut(id) else {
                    return;
                };
                copy_in(&mut tmp, &s.clock, s.paused_until);
                f(&mut tmp);
                s.clock = tmp.clock;
                s.paused_until = tmp.paused_until;
            }
            NodeRef::Controller(c) => {
                let Some(s) = self.controllers.get_mut(&ctl_id(c)) else {
                    return;
                };
                copy_in(&mut tmp, &s.clock, s.paused_until);
                f(&mut tmp);
                s.clock = tmp.clock;
                s.paused_until = tmp.paused_until;
            }
        }
    }

    /// Re-derives a node's timer after its clock changed.
    pub(super) fn refresh_timer(&mut self, now: SimTime, node: NodeRef) {
        let (addr, next) = match node {
            NodeRef::LeaderOf(_) => return, // resolved before faults apply
            NodeRef::Broker(id) => (
                Address::Node(id),
                self.brokers
                    .get(id)
                    .and_then(|s| s.machine.as_ref())
                    .and_then(|b| b.poll_timeout()),
            ),
            NodeRef::Controller(c) => {
                let id = ctl_id(c);
                (
                    Address::Controller(id),
                    self.controllers
                        .get(&id)
                        .and_then(|s| s.machine.as_ref())
                        .and_then(|c| c.poll_timeout()),
                )
            }
        };
        if next.is_some() {
            self.set_node_timer(addr, now, next);
        }
    }

    /// Crashes a node; with `power_loss`, its disk's unsynced data goes as it says.
    pub(super) fn crash(&mut self, now: SimTime, node: NodeRef, power_loss: Option<Unsynced>) {
        let rng = &mut self.disk_rng;
        let (disk, was_up) = match node {
            NodeRef::LeaderOf(_) => return, // resolved before faults apply
            NodeRef::Broker(id) => {
                let Some(s) = self.brokers.get_mut(id) else {
                    return;
                };
                let up = s.stop();
                if let Some(g) = self.group.as_mut() {
                    g.on_broker_down(id);
                }
                (s.disk.clone(), up)
            }
            NodeRef::Controller(c) => {
                let Some(s) = self.controllers.get_mut(&ctl_id(c)) else {
                    return;
                };
                let up = s.stop();
                (s.disk.clone(), up)
            }
        };
        if was_up {
            self.tracer.fields(
                now,
                Fields::Process {
                    node: node_addr(node),
                    up: false,
                },
            );
        }
        if let (true, Some(unsynced)) = (was_up, power_loss) {
            // Each file keeps its synced prefix and, of what follows, what `unsynced` says:
            // nothing, a torn part, all of it (page cache flushed in time), or per file one
            // of the three at random.
            let mut lost = 0u64;
            disk.mem().crash(|f| {
                let keep = unsynced.keep(f.synced_len, f.len, &mut *rng);
                lost += f.len - keep;
                keep
            });
            let seq = self.q.len() as u64;
            self.tracer
                .event(now, seq, "disk-lost", &node.to_string(), &[lost], || {
                    format!("{node}: power loss dropped {lost} unsynced bytes")
                });
        }
        let _ = disk.take_latency();
    }

    pub(super) fn restart(&mut self, now: SimTime, node: NodeRef) {
        match node {
            NodeRef::LeaderOf(_) => {} // resolved before faults apply
            NodeRef::Broker(id) => {
                if self.brokers.get(id).is_some_and(|s| s.machine.is_none()) {
                    self.start_broker(id, now);
                }
            }
            NodeRef::Controller(c) => {
                let id = ctl_id(c);
                let down = self
                    .controllers
                    .get(&id)
                    .is_some_and(|s| s.machine.is_none());
                if down {
                    if let Err(e) = self.start_controller(id, now) {
                        let seq = self.q.len() as u64;
                        let name = node.to_string();
                        self.tracer
                            .event(now, seq, "start-failed", &name, &[], || e);
                    }
                }
            }
        }
    }

    /// Everything heals: the network, paused nodes, disk faults; crashed nodes restart.
    pub(super) fn final_heal(&mut self, now: SimTime) {
        self.net.heal();
        // Message loss, duplication and reordering are faults too: they end here.
        self.net.config.drop = 0.0;
        self.net.config.duplicate = 0.0;
        self.net.config.reorder = 0.0;
        for n in self.all_nodes() {
            self.with_slot(n, |s| s.paused_until = s.paused_until.min(now));
            let d = self.disk_of(n).clone();
            d.mem().set_read_error(None, false);
            d.mem().set_capacity(None);
            d.set_slow(0);
            self.restart(now, n);
        }
        for i in 0..self.clients.len() {
            let cs = &mut self.clients[i];
            cs.paused_until = cs.paused_until.min(now);
            if cs.down {
                self.restart_client(i, now);
            }
        }
        for member in 1..=self.members.len() as u32 {
            self.with_member(member, now, |m, _| {
                m.disarm_pause();
                m.restart();
            });
        }
        self.healed_at = self.healed_at.max(now);
    }
}
