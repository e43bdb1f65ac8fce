//! Tests of the random schedules and the rates' weights.

use super::*;
use crate::rng::{stream, Subsystem};
use crate::time::{MILLIS, SECS};

/// The default weights at `per_second` faults a second.
fn rates_at(per_second: f64) -> FaultRates {
    FaultRates {
        per_second,
        ..FaultRates::default()
    }
}

/// `draw(seed)` is a schedule of the seed: the same again for seed 1, another for seed 2,
/// and not nearly empty. Returns seed 1's.
fn seeded_and_varied(draw: impl Fn(u64) -> Vec<Scheduled>) -> Vec<Scheduled> {
    let a = draw(1);
    assert_eq!(a, draw(1));
    assert_ne!(a, draw(2));
    assert!(a.len() >= 5, "{a:?}");
    a
}

#[test]
fn client_schedules_are_seeded_bounded_one_at_a_time_and_varied() {
    let rates = rates_at(4.0);
    let draw = |seed| {
        random_client_schedule(
            &rates,
            2,
            1,
            SECS,
            30 * SECS,
            &mut stream(seed, Subsystem::Faults),
        )
    };
    seeded_and_varied(draw);
    let mut busy_until = 0;
    let mut kinds = std::collections::BTreeSet::new();
    let mut replaced = 0;
    for seed in 0..10 {
        busy_until = 0;
        for s in draw(seed) {
            assert!((SECS..30 * SECS).contains(&s.at));
            let (client, d) = match &s.fault {
                Fault::ClientCrash {
                    client,
                    restart_after: Some(d),
                } => (*client, *d),
                Fault::ClientPause {
                    client,
                    duration,
                    replaced_after,
                } => {
                    if let Some(r) = replaced_after {
                        assert!(matches!(client, ClientRef::Producer(_)));
                        assert!(*r < *duration);
                        replaced += 1;
                    }
                    (*client, *duration)
                }
                Fault::ClientIsolate { client, duration } => (*client, *duration),
                other => panic!("{other:?}"),
            };
            assert!(matches!(
                client,
                ClientRef::Producer(1 | 2) | ClientRef::Consumer(1)
            ));
            assert!(s.at >= busy_until, "two clients faulted at once");
            busy_until = s.at + d;
            kinds.insert(s.fault.name());
        }
    }
    let _ = busy_until;
    assert_eq!(kinds.len(), 3, "{kinds:?}");
    assert!(replaced > 0);
    let mut off = rates.clone();
    off.set_weights("client-crash=0,client-pause=0,client-isolate=0")
        .unwrap();
    assert!(
        random_client_schedule(&off, 2, 1, 0, 30 * SECS, &mut stream(1, Subsystem::Faults))
            .is_empty()
    );
}

#[test]
fn random_schedules_are_seeded_bounded_and_varied() {
    let rates = FaultRates::default();
    let a = random_schedule(
        &rates,
        3,
        1,
        SECS,
        30 * SECS,
        &mut stream(9, Subsystem::Faults),
    );
    let b = random_schedule(
        &rates,
        3,
        1,
        SECS,
        30 * SECS,
        &mut stream(9, Subsystem::Faults),
    );
    let c = random_schedule(
        &rates,
        3,
        1,
        SECS,
        30 * SECS,
        &mut stream(10, Subsystem::Faults),
    );
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert!(a.len() >= 4, "{}", a.len());
    assert!(a.iter().all(|s| (SECS..30 * SECS).contains(&s.at)));
    assert!(a.windows(2).all(|w| w[0].at <= w[1].at));
    let none = random_schedule(
        &FaultRates::scaled(0.0),
        3,
        1,
        0,
        30 * SECS,
        &mut stream(9, Subsystem::Faults),
    );
    assert!(none.is_empty());
    let mut names = std::collections::BTreeSet::new();
    for seed in 0..30 {
        for s in random_schedule(
            &rates,
            3,
            1,
            0,
            30 * SECS,
            &mut stream(seed, Subsystem::Faults),
        ) {
            names.insert(s.fault.name());
        }
    }
    assert!(names.len() >= 12, "{names:?}");
}

#[test]
fn weights_parse_and_steer_the_schedule() {
    let mut r = FaultRates::default();
    r.set_weights("crash=0, power-loss=0,pause=0,controller-crash=0,clock=0,clog=0,bit-flip=0,read-errors=0,disk-full=0,slow-disk=0").unwrap();
    assert!(r.set_weights("meteor=3").unwrap_err().contains("meteor"));
    assert!(r.set_weights("crash").is_err());
    let s = random_schedule(&r, 3, 1, 0, 30 * SECS, &mut stream(1, Subsystem::Faults));
    assert!(!s.is_empty());
    assert!(s.iter().all(|f| f.fault.name() == "partition"), "{s:?}");
}

#[test]
fn member_schedules_are_seeded_bounded_and_one_member_at_a_time() {
    let rates = rates_at(4.0);
    let draw = |seed| {
        random_member_schedule(
            &rates,
            3,
            SECS,
            30 * SECS,
            &mut stream(seed, Subsystem::Faults),
        )
    };
    let a = seeded_and_varied(draw);
    let mut busy_until = 0;
    let mut kinds = std::collections::BTreeSet::new();
    for s in &a {
        assert!((SECS..30 * SECS).contains(&s.at));
        let (member, d) = match &s.fault {
            Fault::MemberCrash {
                member,
                restart_after: Some(d),
            } => (*member, *d),
            Fault::MemberPause { member, duration } => (*member, *duration),
            other => panic!("{other:?}"),
        };
        assert!((1..=3).contains(&member));
        assert!(s.at >= busy_until, "two members down at once");
        busy_until = s.at + d;
        kinds.insert(s.fault.name());
    }
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    // No members, or member weights 0: nothing.
    assert!(
        random_member_schedule(&rates, 0, 0, 30 * SECS, &mut stream(1, Subsystem::Faults))
            .is_empty()
    );
    let mut off = rates.clone();
    off.set_weights("member-crash=0,member-pause=0").unwrap();
    assert!(
        random_member_schedule(&off, 3, 0, 30 * SECS, &mut stream(1, Subsystem::Faults)).is_empty()
    );
}

#[test]
fn max_down_is_respected() {
    let rates = rates_at(5.0);
    for seed in 0..20 {
        let s = random_schedule(
            &rates,
            3,
            1,
            0,
            20 * SECS,
            &mut stream(seed, Subsystem::Faults),
        );
        let mut intervals: Vec<(SimTime, SimTime)> = Vec::new();
        for f in &s {
            let d = match &f.fault {
                Fault::Crash {
                    node: NodeRef::Broker(_),
                    restart_after: Some(d),
                    ..
                } => *d,
                Fault::Pause { duration, .. } => *duration,
                _ => continue,
            };
            assert!(
                intervals.iter().all(|&(a, b)| !(a <= f.at && f.at < b)),
                "seed {seed}"
            );
            intervals.push((f.at, f.at + d));
        }
    }
}

#[test]
fn controller_bridges_split_the_other_controllers_and_need_a_quorum() {
    let mut r = rates_at(4.0);
    r.set_weights("crash=0,power-loss=0,pause=0,controller-crash=0,clock=0,partition=0,clog=0,bit-flip=0,read-errors=0,disk-full=0,slow-disk=0,controller-bridge=1").unwrap();
    let draw = |controllers, seed| {
        random_schedule(
            &r,
            3,
            controllers,
            SECS,
            30 * SECS,
            &mut stream(seed, Subsystem::Faults),
        )
    };
    // One controller has no quorum to split: nothing is drawn.
    assert!(draw(1, 1).is_empty());
    for controllers in [3, 5] {
        let s = seeded_and_varied(|seed| draw(controllers, seed));
        for f in &s {
            let Fault::Partition {
                shape: Partition::Split { a, b },
                duration: Some(d),
            } = &f.fault
            else {
                panic!("not a controller bridge: {f:?}");
            };
            assert!((100 * MILLIS..=5 * SECS).contains(d), "{f:?}");
            // The halves: every controller but one, none twice, none a broker.
            let mut all: Vec<u32> = a
                .iter()
                .chain(b)
                .map(|n| match n {
                    NodeRef::Controller(ControllerTag(k)) if *k >= 1 => *k,
                    other => panic!("{other:?} in a controller bridge"),
                })
                .collect();
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len() as u32, controllers - 1, "{f:?}");
            assert_eq!(a.len(), (controllers as usize - 1) / 2, "{f:?}");
            assert_eq!(b.len(), (controllers as usize - 1) / 2, "{f:?}");
        }
    }
}

#[test]
fn max_duration_caps_every_random_fault() {
    let mut r = rates_at(4.0);
    let uncapped = random_schedule(&r, 3, 3, SECS, 30 * SECS, &mut stream(1, Subsystem::Faults));
    r.max_duration_ms = 300;
    let s = random_schedule(&r, 3, 3, SECS, 30 * SECS, &mut stream(1, Subsystem::Faults));
    assert!(s.len() >= 20, "{s:?}");
    let longest = |s: &[Scheduled]| {
        s.iter()
            .filter_map(|f| match &f.fault {
                Fault::Crash { restart_after, .. } => *restart_after,
                Fault::Pause { duration, .. }
                | Fault::Clog { duration, .. }
                | Fault::ClockStall { duration, .. }
                | Fault::ReadErrors { duration, .. }
                | Fault::DiskFull { duration, .. }
                | Fault::SlowDisk { duration, .. } => Some(*duration),
                Fault::Partition { duration, .. } => *duration,
                _ => None,
            })
            .max()
            .expect("faults with lengths")
    };
    assert!(longest(&uncapped) > 300 * MILLIS);
    assert!(longest(&s) <= 300 * MILLIS, "{s:?}");
}

#[test]
fn message_schedules_are_off_by_default_seeded_bounded_and_varied() {
    // Weight 0 by default: nothing drawn, so no seed's run changes.
    let draw_with = |rates: &FaultRates, producers, seed| {
        random_message_schedule(
            rates,
            producers,
            SECS,
            30 * SECS,
            &mut stream(seed, Subsystem::Faults),
        )
    };
    assert!(draw_with(&rates_at(4.0), 2, 1).is_empty());
    let mut rates = rates_at(4.0);
    rates.set_weights("message=3").unwrap();
    // No transactional producers (the plain workload): nothing either.
    assert!(draw_with(&rates, 0, 1).is_empty());
    seeded_and_varied(|seed| draw_with(&rates, 2, seed));
    let mut kinds = std::collections::BTreeSet::new();
    let mut actions = std::collections::BTreeSet::new();
    let mut drawn = 0;
    for seed in 0..10 {
        for s in draw_with(&rates, 2, seed) {
            assert!((SECS..30 * SECS).contains(&s.at));
            let Fault::Message {
                action,
                kind,
                from,
                delay,
            } = s.fault
            else {
                panic!("{:?}", s.fault)
            };
            assert!((500 * MILLIS..=2_500 * MILLIS).contains(&delay), "{delay}");
            assert!(action != MessageAction::Drop);
            // Markers come from a transactional id's coordinator, the rest from producers.
            match (&kind, &from) {
                (MessageKind::TxnMarker, MessageSender::TxnCoordinator(id)) => {
                    assert!(id == "txn-1" || id == "txn-2", "{id}")
                }
                (_, MessageSender::Client(ClientRef::Producer(1 | 2))) => {
                    assert_ne!(kind, MessageKind::TxnMarker)
                }
                other => panic!("{other:?}"),
            }
            kinds.insert(kind.name());
            actions.insert(action.kind());
            drawn += 1;
        }
    }
    assert_eq!(kinds.len(), RANDOM_MESSAGE_KINDS.len(), "{kinds:?}");
    assert_eq!(actions.len(), 2, "{actions:?}");
    // At their weight's share against the broker weights (3 of 22) of 4 a second, over
    // 29 s and 10 seeds: about 158.
    assert!((100..250).contains(&drawn), "{drawn}");
}
