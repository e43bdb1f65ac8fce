//! Random fault schedules drawn from the seed's fault streams: broker, controller, network
//! and disk faults; group member faults; producer and consumer faults. Each keeps its faults
//! inside `[start, end)` and respects the rates' limits on how much is down at once.

use super::{
    ClientRef, ControllerTag, Fault, FaultRates, MessageAction, MessageKind, MessageSender,
    NodeRef, Scheduled, Unsynced,
};
use crate::net::Partition;
use crate::rng::{between, chance, exponential};
use crate::time::{SimTime, MILLIS, SECS};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Draws a random schedule for brokers `1..=brokers` and `controllers` controller nodes
/// within `[start, end)`. With one controller, a controller fault is a crash (half of them
/// power losses) of it; with a quorum, a crash, power loss or pause of the active one or of
/// a given one (at most one controller down at a time, so a majority stays), and partitions
/// take controllers one by one. The single-controller draws are exactly those of before
/// quorums existed, so its seeds keep their schedules.
pub fn random_schedule(
    rates: &FaultRates,
    brokers: u32,
    controllers: u32,
    start: SimTime,
    end: SimTime,
    rng: &mut ChaCha8Rng,
) -> Vec<Scheduled> {
    let mut out = Vec::new();
    if rates.per_second <= 0.0 || end <= start || brokers == 0 {
        return out;
    }
    let mean_gap = (SECS as f64 / rates.per_second) as u64;
    let kinds: [(u32, u8); 12] = [
        (rates.crash, 0),
        (rates.power_loss, 1),
        (rates.controller_crash, 2),
        (rates.pause, 3),
        (rates.clock, 4),
        (rates.partition, 5),
        (rates.clog, 6),
        (rates.bit_flip, 7),
        (rates.read_errors, 8),
        (rates.disk_full, 9),
        (rates.slow_disk, 10),
        // Weight 0 by default: a kind that is never picked consumes no draws, so every
        // existing seed keeps its schedule.
        (rates.controller_bridge, 11),
    ];
    let total: u32 = kinds.iter().map(|k| k.0).sum();
    if total == 0 {
        return out;
    }
    // Sim time until which each broker is down (crashed or paused), to respect max_down.
    let mut down_until: Vec<SimTime> = vec![0; brokers as usize + 1];
    let mut controller_down_until: SimTime = 0;
    let mut t = start;
    loop {
        t += exponential(rng, mean_gap).max(MILLIS);
        if t >= end {
            break;
        }
        let mut pick = rng.gen_range(0..total);
        let mut kind = 0;
        for &(w, k) in &kinds {
            if pick < w {
                kind = k;
                break;
            }
            pick -= w;
        }
        let node_id = rng.gen_range(1..=brokers);
        let node = NodeRef::Broker(node_id);
        // Durations stay within the time left and the rates' cap on fault lengths.
        let remaining = (end - t).min(rates.max_duration());
        let short =
            |rng: &mut ChaCha8Rng, lo: u64, hi: u64| between(rng, lo, hi.min(remaining.max(lo)));
        let down_now = down_until.iter().filter(|&&u| u > t).count() as u32;
        let fault = match kind {
            0 | 1 | 3 => {
                if down_until[node_id as usize] > t || down_now >= rates.max_down.max(1) {
                    continue;
                }
                if kind == 3 {
                    let d = short(rng, 50 * MILLIS, 3 * SECS);
                    down_until[node_id as usize] = t + d;
                    Fault::Pause { node, duration: d }
                } else {
                    let d = short(rng, 100 * MILLIS, 5 * SECS);
                    down_until[node_id as usize] = t + d;
                    Fault::Crash {
                        node,
                        power_loss: kind == 1,
                        unsynced: Unsynced::Random,
                        restart_after: Some(d),
                    }
                }
            }
            2 => {
                if controller_down_until > t {
                    continue;
                }
                let d = short(rng, 100 * MILLIS, 4 * SECS);
                controller_down_until = t + d;
                if controllers > 1 {
                    // 0: whichever is active when it strikes.
                    let node = NodeRef::Controller(ControllerTag(rng.gen_range(0..=controllers)));
                    match rng.gen_range(0..3) {
                        0 => Fault::Pause { node, duration: d },
                        k => Fault::Crash {
                            node,
                            power_loss: k == 2,
                            unsynced: Unsynced::Random,
                            restart_after: Some(d),
                        },
                    }
                } else {
                    Fault::Crash {
                        node: NodeRef::CONTROLLER,
                        power_loss: chance(rng, 0.5),
                        unsynced: Unsynced::Random,
                        restart_after: Some(d),
                    }
                }
            }
            11 => {
                if controllers < 3 {
                    continue;
                }
                controller_bridge(controllers, remaining, rng)
            }
            _ => draw_stateless(kind, node, (brokers, controllers), remaining, rng),
        };
        out.push(Scheduled { at: t, fault });
    }
    out
}

/// A partition of the controller quorum (3 or more controllers) with one controller as the
/// bridge: the others split into two halves (as even as they come) that cannot talk to each
/// other, while the bridge and every broker still reach everyone. Neither half is a
/// majority without the bridge, so both can ask it for votes: the shape of a double vote
/// (`vote-not-persisted`). Lasts 100 ms to 5 s, like [`random_schedule`]'s partitions.
fn controller_bridge(controllers: u32, remaining: SimTime, rng: &mut ChaCha8Rng) -> Fault {
    let bridge = rng.gen_range(1..=controllers);
    let mut others: Vec<NodeRef> = (1..=controllers)
        .filter(|&k| k != bridge)
        .map(|k| NodeRef::Controller(ControllerTag(k)))
        .collect();
    others.shuffle(rng);
    let b = others.split_off(others.len() / 2);
    let hi = (5 * SECS).min(remaining.max(100 * MILLIS));
    Fault::Partition {
        shape: Partition::Split { a: others, b },
        duration: Some(between(rng, 100 * MILLIS, hi)),
    }
}

/// A broker fault of `kind` 4..=10 of [`random_schedule`] (clock, partition, clog, disk)
/// at `node`: the kinds that need no bookkeeping of who is down. Durations stay within
/// `remaining`, the time left in the fault window.
fn draw_stateless(
    kind: u8,
    node: NodeRef,
    (brokers, controllers): (u32, u32),
    remaining: SimTime,
    rng: &mut ChaCha8Rng,
) -> Fault {
    let short =
        |rng: &mut ChaCha8Rng, lo: u64, hi: u64| between(rng, lo, hi.min(remaining.max(lo)));
    match kind {
        4 => match rng.gen_range(0..3) {
            0 => Fault::ClockJump {
                node,
                forward: between(rng, 10 * MILLIS, 10 * SECS),
            },
            1 => Fault::ClockStall {
                node,
                duration: short(rng, 10 * MILLIS, 2 * SECS),
            },
            _ => Fault::ClockSkew {
                node,
                ppm: rng.gen_range(-200_000..=200_000),
            },
        },
        5 => {
            let mut with_ctl: Vec<NodeRef> = (1..=brokers).map(NodeRef::Broker).collect();
            if controllers > 1 {
                with_ctl.extend((1..=controllers).map(|k| NodeRef::Controller(ControllerTag(k))));
            } else {
                with_ctl.push(NodeRef::CONTROLLER);
            }
            let shape = match rng.gen_range(0..4) {
                0 => Partition::RandomHalves,
                1 => Partition::Isolate {
                    node: *with_ctl.choose(rng).expect("nodes"),
                },
                2 => Partition::Bridge { node },
                _ => Partition::OneWay { from: node },
            };
            Fault::Partition {
                shape,
                duration: Some(short(rng, 100 * MILLIS, 5 * SECS)),
            }
        }
        6 => {
            let mut other = NodeRef::Broker(rng.gen_range(1..=brokers));
            if other == node {
                other = NodeRef::CONTROLLER;
            }
            Fault::Clog {
                from: node,
                to: other,
                duration: short(rng, 10 * MILLIS, 3 * SECS),
            }
        }
        7 => Fault::BitFlip { node },
        8 => Fault::ReadErrors {
            node,
            duration: short(rng, 10 * MILLIS, 2 * SECS),
        },
        9 => Fault::DiskFull {
            node,
            duration: short(rng, 10 * MILLIS, 2 * SECS),
        },
        _ => Fault::SlowDisk {
            node,
            latency: between(rng, MILLIS, 50 * MILLIS),
            duration: short(rng, 100 * MILLIS, 3 * SECS),
        },
    }
}

/// Draws group member faults (crashes and pauses) for members `1..=members` within
/// `[start, end)`, from a stream of their own, so adding members never changes a seed's
/// broker fault schedule. They come at the share of `per_second` their weights have among
/// all the weights, at most one member down at a time.
pub fn random_member_schedule(
    rates: &FaultRates,
    members: u32,
    start: SimTime,
    end: SimTime,
    rng: &mut ChaCha8Rng,
) -> Vec<Scheduled> {
    let member_weight = rates.member_crash + rates.member_pause + rates.member_isolate;
    let broker_weight = rates.broker_weight();
    if rates.per_second <= 0.0 || end <= start || members == 0 || member_weight == 0 {
        return Vec::new();
    }
    let per_second =
        rates.per_second * member_weight as f64 / (member_weight + broker_weight) as f64;
    one_at_a_time(per_second, start, end, rng, |rng, remaining| {
        let member = rng.gen_range(1..=members);
        let pick = rng.gen_range(0..member_weight);
        let d = fault_length(rng, remaining);
        let fault = if pick < rates.member_crash {
            Fault::MemberCrash {
                member,
                restart_after: Some(d),
            }
        } else if pick < rates.member_crash + rates.member_pause {
            Fault::MemberPause {
                member,
                duration: d,
            }
        } else {
            Fault::MemberIsolate {
                member,
                duration: d,
            }
        };
        (d, fault)
    })
}

/// Draws producer and consumer faults (crash, pause, isolation) for `producers` producers
/// and `consumers` consumers within `[start, end)`, from a stream of their own (like
/// [`random_member_schedule`]), so a seed's broker and member faults are unchanged by it.
/// They come at the share of `per_second` their weights have against the broker weights,
/// at most one client faulted at a time. A third of producer pauses are replaced (the
/// paused producer wakes a zombie that the brokers must fence).
pub fn random_client_schedule(
    rates: &FaultRates,
    producers: u32,
    consumers: u32,
    start: SimTime,
    end: SimTime,
    rng: &mut ChaCha8Rng,
) -> Vec<Scheduled> {
    let weight = rates.client_crash + rates.client_pause + rates.client_isolate;
    let clients = producers + consumers;
    if rates.per_second <= 0.0 || end <= start || clients == 0 || weight == 0 {
        return Vec::new();
    }
    let per_second = rates.per_second * weight as f64 / (weight + rates.broker_weight()) as f64;
    one_at_a_time(per_second, start, end, rng, |rng, remaining| {
        let n = rng.gen_range(0..clients);
        let client = if n < producers {
            ClientRef::Producer(n + 1)
        } else {
            ClientRef::Consumer(n - producers + 1)
        };
        let pick = rng.gen_range(0..weight);
        let d = fault_length(rng, remaining);
        let replace = chance(rng, 1.0 / 3.0);
        let fault = if pick < rates.client_crash {
            Fault::ClientCrash {
                client,
                restart_after: Some(d),
            }
        } else if pick < rates.client_crash + rates.client_pause {
            Fault::ClientPause {
                client,
                duration: d,
                replaced_after: (replace && matches!(client, ClientRef::Producer(_)))
                    .then_some(d / 2),
            }
        } else {
            Fault::ClientIsolate {
                client,
                duration: d,
            }
        };
        (d, fault)
    })
}

/// How long a member or client fault lasts: 50 ms to 3 s, within the `remaining` run.
fn fault_length(rng: &mut ChaCha8Rng, remaining: SimTime) -> SimTime {
    between(rng, 50 * MILLIS, (3 * SECS).min(remaining.max(50 * MILLIS)))
}

/// Faults at `per_second` (exponential gaps, at least 1 ms) within `[start, end)`, at most
/// one lasting at a time: `draw` picks the next fault and its length from the time left;
/// one drawn while the last still lasts is dropped, its draws made all the same (so the
/// stream does not depend on which are kept).
fn one_at_a_time(
    per_second: f64,
    start: SimTime,
    end: SimTime,
    rng: &mut ChaCha8Rng,
    mut draw: impl FnMut(&mut ChaCha8Rng, SimTime) -> (SimTime, Fault),
) -> Vec<Scheduled> {
    let mean_gap = (SECS as f64 / per_second) as u64;
    let mut out = Vec::new();
    let mut t = start;
    let mut busy_until: SimTime = 0;
    loop {
        t += exponential(rng, mean_gap).max(MILLIS);
        if t >= end {
            break;
        }
        let (d, fault) = draw(rng, end - t);
        if busy_until > t {
            continue;
        }
        busy_until = t + d;
        out.push(Scheduled { at: t, fault });
    }
    out
}

/// The message kinds a random message fault picks from (uniformly): the transaction
/// protocol's requests whose late arrival KIP-890 is about, and the offsets a
/// read-process-write transaction sends. Appending a kind redraws every seed's message faults.
pub const RANDOM_MESSAGE_KINDS: [MessageKind; 6] = [
    MessageKind::TxnMarker,
    MessageKind::EndTxn,
    MessageKind::AddPartitions,
    MessageKind::TxnProduce,
    MessageKind::AddOffsets,
    MessageKind::TxnOffsetCommit,
];

/// Draws random message faults (the `message` weight) for a txn workload of `producers`
/// transactional producers (transactional ids `txn-1..=txn-N`) within `[start, end)`, from
/// a stream of their own (like [`random_client_schedule`]), at the share of `per_second`
/// their weight has against the broker weights. Each arms a one-shot fault on the next
/// message of a random kind of [`RANDOM_MESSAGE_KINDS`] from a random sender: a producer
/// (`producer:N`), or for markers the transaction coordinator of `txn-N` (resolved when it
/// is armed). The message is held back (half of them) or duplicated, for 0.5-2.5 s: past
/// the clients' and the coordinator's request timeouts (1 s), so the late copy can land
/// after its sender retried and moved on to the next transaction (KAFKA-17754's shape).
/// Armed faults strike whenever their message comes, which may be after `end`.
pub fn random_message_schedule(
    rates: &FaultRates,
    producers: u32,
    start: SimTime,
    end: SimTime,
    rng: &mut ChaCha8Rng,
) -> Vec<Scheduled> {
    if rates.per_second <= 0.0 || end <= start || producers == 0 || rates.message == 0 {
        return Vec::new();
    }
    let per_second =
        rates.per_second * rates.message as f64 / (rates.message + rates.broker_weight()) as f64;
    let mean_gap = (SECS as f64 / per_second) as u64;
    let mut out = Vec::new();
    let mut t = start;
    loop {
        t += exponential(rng, mean_gap).max(MILLIS);
        if t >= end {
            break;
        }
        let kinds: &[MessageKind] = if rates.message_kinds.is_empty() {
            &RANDOM_MESSAGE_KINDS
        } else {
            &rates.message_kinds
        };
        let kind = kinds[rng.gen_range(0..kinds.len())];
        let n = rng.gen_range(1..=producers);
        let from = match kind {
            MessageKind::TxnMarker => MessageSender::TxnCoordinator(format!("txn-{n}")),
            _ => MessageSender::Client(ClientRef::Producer(n)),
        };
        let action = if chance(rng, 0.5) {
            MessageAction::Delay
        } else {
            MessageAction::Duplicate
        };
        let delay = between(rng, 500 * MILLIS, 2_500 * MILLIS);
        out.push(Scheduled {
            at: t,
            fault: Fault::Message {
                action,
                kind,
                from,
                delay,
            },
        });
    }
    out
}
