//! Tests of scenario parsing: good files, and errors that name file, line and field.

use super::*;
use crate::faults::{ClientRef, Fault, LeaderOf, NodeRef, Unsynced};
use crate::time::SECS;

const GOOD: &str = r#"
name = "zombie"
description = "isolate a broker"
[cluster]
brokers = 3
partitions = 2
[workload]
producers = 1
acks = "all"
[run]
duration = "20s"
liveness = "5s"
[[fault]]
at = "5s"
kind = "partition"
shape = "isolate"
node = 1
duration = "3s"
[[fault]]
at = "2s"
kind = "crash"
node = "controller"
power_loss = true
restart_after = "1s"
[expect]
verdict = "pass"
"#;

#[test]
fn parses_a_scenario() {
    let sc = Scenario::parse("good.toml", GOOD).unwrap();
    assert_eq!(sc.brokers, Some(3));
    assert_eq!(sc.duration, Some(20 * SECS));
    assert_eq!(sc.acks, Some(Acks::All));
    assert_eq!(sc.schedule.len(), 2);
    assert_eq!(sc.schedule[0].at, 2 * SECS, "sorted by time");
    assert_eq!(
        sc.schedule[0].fault,
        Fault::Crash {
            node: NodeRef::CONTROLLER,
            power_loss: true,
            unsynced: Unsynced::Random,
            restart_after: Some(SECS)
        }
    );
    assert_eq!(sc.expect, Some(Expect::Pass));
}

fn err(text: &str) -> ScenarioError {
    Scenario::parse("bad.toml", text).unwrap_err()
}

#[test]
fn parses_the_group_workload_and_member_faults() {
    let text = "[workload]\ngroup_members = 3\ngroup_id = \"g\"\ngroup_commit = \"async\"\ngroup_assignor = \"cooperative-sticky\"\n[[fault]]\nat = \"1s\"\nkind = \"member-pause\"\nmember = 2\nduration = \"2s\"\n[[fault]]\nat = \"2s\"\nkind = \"coordinator-crash\"\npower_loss = true\n[[fault]]\nat = \"3s\"\nkind = \"member-crash\"\nmember = 1\nrestart_after = \"1s\"\n";
    let sc = Scenario::parse("g.toml", text).unwrap();
    assert_eq!(sc.group_members, Some(3));
    assert_eq!(sc.group_id.as_deref(), Some("g"));
    assert_eq!(sc.group_commit, Some(crate::modes::CommitMode::Async));
    assert_eq!(
        sc.group_assignor,
        Some(skein_core::group::AssignorKind::CooperativeSticky)
    );
    assert_eq!(
        sc.schedule[0].fault,
        Fault::MemberPause {
            member: 2,
            duration: 2 * SECS
        }
    );
    assert_eq!(
        sc.schedule[1].fault,
        Fault::CoordinatorCrash {
            power_loss: true,
            unsynced: Unsynced::Random,
            restart_after: None
        }
    );
    assert_eq!(
        sc.schedule[2].fault,
        Fault::MemberCrash {
            member: 1,
            restart_after: Some(SECS)
        }
    );
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"member-pause\"\nduration = \"1s\"\n");
    assert_eq!(e.field.as_deref(), Some("fault[0].member"));
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"member-crash\"\nmember = 0\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(4), Some("fault[0].member"))
    );
    let e = err("[workload]\ngroup_commit = \"sometimes\"\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(2), Some("workload.group_commit"))
    );
    let e = err("[workload]\ngroup_assignor = \"sticky\"\n");
    assert_eq!(e.field.as_deref(), Some("workload.group_assignor"));
    // A member the workload does not have is a configuration error naming it.
    let mut c = crate::config::SimConfig::default();
    c.apply_scenario(&sc);
    c.group_members = 1;
    assert!(c.validate().unwrap_err().contains("group member 2"));
}

#[test]
fn errors_name_file_line_and_field() {
    let e = err("[cluster]\nbrokers = 3\n\n[[fault]]\nat = \"1s\"\nkind = \"crash\"\nnode = 7\n");
    assert_eq!(
        (e.file.as_str(), e.line, e.field.as_deref()),
        ("bad.toml", Some(7), Some("fault[0].node"))
    );
    assert!(
        e.to_string()
            .starts_with("bad.toml:7: field `fault[0].node`"),
        "{e}"
    );

    let e = err("[[fault]]\nat = \"soon\"\nkind = \"heal\"\n");
    assert_eq!((e.line, e.field.as_deref()), (Some(2), Some("fault[0].at")));

    let e = err("[[fault]]\nat = \"1s\"\nkind = \"meteor\"\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(3), Some("fault[0].kind"))
    );

    let e = err("[cluster]\nbrokerz = 3\n");
    assert_eq!((e.line, e.field.as_deref()), (Some(2), Some("brokerz")));

    let e = err("[workload]\nacks = 2\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(2), Some("workload.acks"))
    );

    let e = err("[[fault]]\nat = \"1s\"\nkind = \"pause\"\nnode = 1\n");
    assert_eq!(e.field.as_deref(), Some("fault[0].duration"));

    let e = err("[expect]\nverdict = \"fail\"\ninvariant = \"nope\"\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(3), Some("expect.invariant"))
    );

    let e = err("[cluster]\nbrokers = 2\nreplication_factor = 3\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(3), Some("cluster.replication_factor"))
    );

    let e = err("[network]\ndrop = 1.5\n");
    assert_eq!(e.field.as_deref(), Some("network.drop"));

    let e = err("this is not toml");
    assert_eq!(e.line, Some(1));
}

#[test]
fn version_expectations_and_leader_targets() {
    let sc = Scenario::parse(
        "v.toml",
        "version = 1\n[cluster]\npartitions = 2\n[[fault]]\nat = \"1s\"\nkind = \"crash\"\nnode = \"leader:1\"\n[[fault]]\nat = \"2s\"\nkind = \"partition\"\nshape = \"isolate\"\nnode = \"leader\"\n[expect]\nverdict = \"fail\"\nfail = [\"acked-write-lost\"]\nhold = [\"replica-divergence\"]\n",
    )
    .unwrap();
    assert_eq!(sc.version, Some(1));
    assert_eq!(
        sc.schedule[0].fault,
        Fault::Crash {
            node: NodeRef::LeaderOf(LeaderOf(1)),
            power_loss: false,
            unsynced: Unsynced::Random,
            restart_after: None
        }
    );
    assert!(sc.schedule[1].fault.names_a_leader());
    let e = sc.expect.unwrap();
    assert!(e.met_by(&["acked-write-lost", "history"]));
    assert!(!e.met_by(&["acked-write-lost", "replica-divergence"]));
    assert!(!e.met_by(&[]));
    assert_eq!(
        e.to_string(),
        "fail (acked-write-lost), hold (replica-divergence)"
    );
    // One invariant alone keeps the old meaning.
    let sc = Scenario::parse(
        "o.toml",
        "[expect]\nverdict = \"fail\"\ninvariant = \"liveness\"\n",
    )
    .unwrap();
    assert_eq!(
        sc.expect,
        Some(Expect::Fail {
            invariant: "liveness".into()
        })
    );

    let e = err("version = 9\n");
    assert_eq!((e.line, e.field.as_deref()), (Some(1), Some("version")));
    let e = err("[cluster]\npartitions = 2\n[[fault]]\nat = \"1s\"\nkind = \"crash\"\nnode = \"leader:2\"\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(6), Some("fault[0].node"))
    );
    let e = err("[expect]\nverdict = \"fail\"\nfail = [\"liveness\"]\nhold = [\"liveness\"]\n");
    assert_eq!(e.field.as_deref(), Some("expect.hold"));
    let e = err("[expect]\nverdict = \"fail\"\nhold = [\"nope\"]\n");
    assert_eq!((e.line, e.field.as_deref()), (Some(3), Some("expect.hold")));
    let e = err("[expect]\nverdict = \"pass\"\nhold = [\"liveness\"]\n");
    assert_eq!(e.field.as_deref(), Some("expect.hold"));
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"crash\"\nnode = \"leeder\"\n");
    assert_eq!(e.line, Some(4), "{e}");
}

#[test]
fn may_allows_without_requiring() {
    let sc = Scenario::parse(
        "m.toml",
        "[expect]\nverdict = \"pass\"\nmay = [\"acked-write-lost\", \"history\"]\n",
    )
    .unwrap();
    let e = sc.expect.unwrap();
    assert_eq!(
        e,
        Expect::PassExcept {
            may: vec!["acked-write-lost".into(), "history".into()]
        }
    );
    assert!(e.met_by(&[]));
    assert!(e.met_by(&["acked-write-lost"]));
    assert!(e.met_by(&["history", "acked-write-lost"]));
    assert!(!e.met_by(&["acked-write-lost", "replica-divergence"]));
    assert!(e.failing().is_empty());
    assert_eq!(e.to_string(), "pass, may fail (acked-write-lost, history)");
    // With "fail", unlisted invariants are unconstrained anyway: `may` states intent.
    let sc = Scenario::parse(
        "m.toml",
        "[expect]\nverdict = \"fail\"\nfail = [\"liveness\"]\nhold = [\"dirty-read\"]\nmay = [\"history\"]\n",
    )
    .unwrap();
    let e = sc.expect.unwrap();
    assert!(e.met_by(&["liveness"]) && e.met_by(&["liveness", "history", "hw-regression"]));
    assert!(!e.met_by(&["history"]) && !e.met_by(&["liveness", "dirty-read"]));
    // One list per invariant; names must exist.
    let e = err("[expect]\nverdict = \"fail\"\nfail = [\"liveness\"]\nmay = [\"liveness\"]\n");
    assert_eq!((e.line, e.field.as_deref()), (Some(4), Some("expect.may")));
    let e = err("[expect]\nverdict = \"fail\"\ninvariant = \"liveness\"\nmay = [\"liveness\"]\n");
    assert_eq!(e.field.as_deref(), Some("expect.may"));
    let e = err("[expect]\nverdict = \"pass\"\nmay = [\"sometimes\"]\n");
    assert_eq!((e.line, e.field.as_deref()), (Some(3), Some("expect.may")));
}

#[test]
fn parses_client_faults_and_unsynced() {
    let text = "[workload]\nproducers = 2\nconsumers = 1\n[[fault]]\nat = \"1s\"\nkind = \"client-pause\"\nclient = \"producer:2\"\nduration = \"3s\"\nreplaced_after = \"1s\"\n[[fault]]\nat = \"2s\"\nkind = \"client-crash\"\nclient = \"consumer:1\"\nrestart_after = \"500ms\"\n[[fault]]\nat = \"3s\"\nkind = \"client-isolate\"\nclient = \"producer:1\"\nduration = \"1s\"\n[[fault]]\nat = \"4s\"\nkind = \"crash\"\nnode = 1\npower_loss = true\nunsynced = \"lose-all\"\n[[fault]]\nat = \"5s\"\nkind = \"client-restart\"\nclient = \"consumer:1\"\n";
    let sc = Scenario::parse("c.toml", text).unwrap();
    assert_eq!(
        sc.schedule[0].fault,
        Fault::ClientPause {
            client: ClientRef::Producer(2),
            duration: 3 * SECS,
            replaced_after: Some(SECS)
        }
    );
    assert_eq!(
        sc.schedule[1].fault,
        Fault::ClientCrash {
            client: ClientRef::Consumer(1),
            restart_after: Some(SECS / 2)
        }
    );
    assert_eq!(
        sc.schedule[2].fault,
        Fault::ClientIsolate {
            client: ClientRef::Producer(1),
            duration: SECS
        }
    );
    assert_eq!(
        sc.schedule[3].fault,
        Fault::Crash {
            node: NodeRef::Broker(1),
            power_loss: true,
            unsynced: Unsynced::LoseAll,
            restart_after: None
        }
    );
    let mut c = crate::config::SimConfig::default();
    c.apply_scenario(&sc);
    c.validate().unwrap();
    // A client the workload does not have is named, before the run.
    c.consumers = 0;
    let e = c.validate().unwrap_err();
    assert!(e.contains("consumer:1 does not exist"), "{e}");

    let e = err("[[fault]]\nat = \"1s\"\nkind = \"client-pause\"\nclient = \"broker:1\"\nduration = \"1s\"\n");
    assert_eq!(e.line, Some(4), "{e}");
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"client-pause\"\nduration = \"1s\"\n");
    assert_eq!(e.field.as_deref(), Some("fault[0].client"));
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"client-pause\"\nclient = \"consumer:1\"\nduration = \"2s\"\nreplaced_after = \"1s\"\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(6), Some("fault[0].replaced_after"))
    );
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"client-pause\"\nclient = \"producer:1\"\nduration = \"2s\"\nreplaced_after = \"2s\"\n");
    assert_eq!(e.field.as_deref(), Some("fault[0].replaced_after"));
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"crash\"\nnode = 1\nunsynced = \"torn\"\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(5), Some("fault[0].unsynced"))
    );
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"crash\"\nnode = 1\npower_loss = true\nunsynced = \"half\"\n");
    assert!(e.message.contains("lose-all"), "{e}");
}

#[test]
fn nonsense_is_refused_by_name() {
    // A field the kind does not take.
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"crash\"\nnode = 1\nduration = \"2s\"\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(5), Some("fault[0].duration"))
    );
    assert!(
        e.message.contains("`crash` does not take `duration`"),
        "{e}"
    );
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"heal\"\nnode = 1\n");
    assert_eq!(e.field.as_deref(), Some("fault[0].node"));
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"pause\"\nnode = 1\nduration = \"1s\"\npower_loss = true\n");
    assert_eq!(e.field.as_deref(), Some("fault[0].power_loss"));
    // A field of another shape.
    let e = err(
        "[[fault]]\nat = \"1s\"\nkind = \"partition\"\nshape = \"isolate\"\nnode = 1\na = [2]\n",
    );
    assert_eq!((e.line, e.field.as_deref()), (Some(6), Some("fault[0].a")));
    // Zero durations.
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"pause\"\nnode = 1\nduration = \"0s\"\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(5), Some("fault[0].duration"))
    );
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"crash\"\nnode = 1\nrestart_after = \"0ms\"\n");
    assert_eq!(e.field.as_deref(), Some("fault[0].restart_after"));
    let e = err("[[fault]]\nat = \"-1s\"\nkind = \"heal\"\n");
    assert_eq!(e.field.as_deref(), Some("fault[0].at"));
    // A split with a node on both sides; a skew the clock would clamp.
    let e = err(
        "[[fault]]\nat = \"1s\"\nkind = \"partition\"\nshape = \"split\"\na = [1, 2]\nb = [2, 3]\n",
    );
    assert_eq!(e.field.as_deref(), Some("fault[0].b"));
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"clock-skew\"\nnode = 1\nppm = -900000\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(5), Some("fault[0].ppm"))
    );
    // A restart past the final heal (20s - 1.25 * 4s = 15s), at its line.
    let e = err("[run]\nduration = \"20s\"\nliveness = \"4s\"\n[[fault]]\nat = \"1s\"\nkind = \"heal\"\n[[fault]]\nat = \"12s\"\nkind = \"crash\"\nnode = 2\nrestart_after = \"4s\"\n");
    assert_eq!((e.line, e.field.as_deref()), (Some(7), Some("fault[1]")));
    assert!(
        e.message
            .contains("restart_after 4.000s ends it at 16.000s, after the final heal at 15.000s"),
        "{e}"
    );
    // A fault after the end of the run never fires.
    let e = err(
        "[run]\nduration = \"20s\"\nliveness = \"4s\"\n[[fault]]\nat = \"25s\"\nkind = \"heal\"\n",
    );
    assert!(e.message.contains("after the run ends"), "{e}");
    // Without a duration in the file, the check waits for the run's shape.
    let sc = Scenario::parse(
        "late.toml",
        "[[fault]]\nat = \"12s\"\nkind = \"crash\"\nnode = 2\nrestart_after = \"4s\"\n",
    )
    .unwrap();
    let mut c = crate::config::SimConfig::default();
    c.apply_scenario(&sc);
    assert!(c.validate().is_ok(), "60 s run, final heal at 35 s");
    c.duration = 20 * SECS;
    c.liveness = 4 * SECS;
    assert!(c.validate().unwrap_err().contains("restart_after"));
    // A broker the default cluster lacks: an error, not a panic in the world.
    let sc = Scenario::parse(
        "b.toml",
        "[[fault]]\nat = \"1s\"\nkind = \"bit-flip\"\nnode = 5\n",
    )
    .unwrap();
    let mut c = crate::config::SimConfig::default();
    c.apply_scenario(&sc);
    assert!(c
        .validate()
        .unwrap_err()
        .contains("broker 5 does not exist"));
}

#[test]
fn raft_max_entries_per_append_is_read_checked_and_applied() {
    let sc = Scenario::parse(
        "fig8.toml",
        "[cluster]\ncontrollers = 3\nraft_max_entries_per_append = 1\n",
    )
    .unwrap();
    assert_eq!(sc.raft_max_entries_per_append, Some(1));
    let mut c = crate::config::SimConfig::default();
    assert_eq!(c.raft_max_entries_per_append, 64, "Raft's own default");
    c.apply_scenario(&sc);
    assert_eq!(c.raft_max_entries_per_append, 1);
    // A file that does not set it keeps the default.
    let mut d = crate::config::SimConfig::default();
    d.apply_scenario(&Scenario::parse("good.toml", GOOD).unwrap());
    assert_eq!(d.raft_max_entries_per_append, 64);
    let e = err("[cluster]\nraft_max_entries_per_append = 0\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(2), Some("cluster.raft_max_entries_per_append"))
    );
}

#[test]
fn workload_kind_is_read_checked_and_applied() {
    use crate::modes::Workload;
    let sc = Scenario::parse("t.toml", "[workload]\nkind = \"txn\"\nproducers = 1\n").unwrap();
    assert_eq!(sc.workload, Some(Workload::Txn));
    let mut c = crate::config::SimConfig::default();
    assert_eq!(c.workload, Workload::Plain, "the default workload is plain");
    c.apply_scenario(&sc);
    assert_eq!(c.workload, Workload::Txn);
    // Scenarios get group members only when they ask: a txn scenario is valid as it is.
    assert_eq!(c.validate(), Ok(()));
    c.group_members = 1;
    assert!(
        c.validate().is_err(),
        "the txn workload has no group members yet"
    );

    let e = err("[workload]\nkind = \"batch\"\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(2), Some("workload.kind"))
    );
}

#[test]
fn parses_message_faults_and_txn_coordinator_crashes() {
    use crate::faults::{MessageAction, MessageKind, MessageSender};
    let text = "[workload]\nkind = \"txn\"\nproducers = 2\n[[fault]]\nat = \"1s\"\nkind = \"message-delay\"\nmessage = \"end-txn\"\nfrom = \"producer:1\"\ndelay = \"2s\"\n[[fault]]\nat = \"2s\"\nkind = \"message-duplicate\"\nmessage = \"txn-marker\"\nfrom = \"coordinator:txn-2\"\ndelay = \"300ms\"\n[[fault]]\nat = \"3s\"\nkind = \"message-drop\"\nmessage = \"txn-produce\"\nfrom = 2\n[[fault]]\nat = \"4s\"\nkind = \"coordinator-crash\"\ntransactional_id = \"txn-1\"\nrestart_after = \"1s\"\n[[fault]]\nat = \"5s\"\nkind = \"txn-coordinator-crash\"\ntransactional_id = \"txn-2\"\n";
    let sc = Scenario::parse("m.toml", text).unwrap();
    assert_eq!(
        sc.schedule[0].fault,
        Fault::Message {
            action: MessageAction::Delay,
            kind: MessageKind::EndTxn,
            from: MessageSender::Client(ClientRef::Producer(1)),
            delay: 2 * SECS
        }
    );
    assert_eq!(
        sc.schedule[1].fault,
        Fault::Message {
            action: MessageAction::Duplicate,
            kind: MessageKind::TxnMarker,
            from: MessageSender::TxnCoordinator("txn-2".into()),
            delay: 300 * crate::time::MILLIS
        }
    );
    assert_eq!(
        sc.schedule[2].fault,
        Fault::Message {
            action: MessageAction::Drop,
            kind: MessageKind::TxnProduce,
            from: MessageSender::Node(NodeRef::Broker(2)),
            delay: 0
        }
    );
    assert_eq!(
        sc.schedule[3].fault,
        Fault::TxnCoordinatorCrash {
            transactional_id: "txn-1".into(),
            power_loss: false,
            unsynced: Unsynced::Random,
            restart_after: Some(SECS)
        }
    );
    assert!(matches!(
        &sc.schedule[4].fault,
        Fault::TxnCoordinatorCrash { transactional_id, restart_after: None, .. } if transactional_id == "txn-2"
    ));
    let mut c = crate::config::SimConfig::default();
    c.apply_scenario(&sc);
    c.validate().unwrap();
    // A client sender the workload lacks is named before the run.
    c.producers = 0;
    assert!(c
        .validate()
        .unwrap_err()
        .contains("producer:1 does not exist"));
    // Every fault survives the shrinker's scenario writer.
    for s in &sc.schedule {
        let body = crate::shrink::scenario_file::fault_toml(s).expect("written");
        let again = Scenario::parse("w.toml", &body).unwrap();
        assert_eq!(again.schedule[0].fault, s.fault, "{body}");
    }
}

#[test]
fn message_fault_errors_name_the_field_and_the_accepted_values() {
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"message-delay\"\nmessage = \"commit\"\nfrom = \"producer:1\"\ndelay = \"1s\"\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(4), Some("fault[0].message"))
    );
    assert!(
        e.message.contains("\"commit\"")
            && e.message.contains(
                "any, init-producer-id, add-partitions, add-offsets, end-txn, txn-offset-commit, txn-marker, txn-produce"
            ),
        "{e}"
    );
    let e = err(
        "[[fault]]\nat = \"1s\"\nkind = \"message-delay\"\nfrom = \"producer:1\"\ndelay = \"1s\"\n",
    );
    assert_eq!(e.field.as_deref(), Some("fault[0].message"));
    assert!(e.message.contains("end-txn"), "{e}");
    let e = err(
        "[[fault]]\nat = \"1s\"\nkind = \"message-delay\"\nmessage = \"end-txn\"\ndelay = \"1s\"\n",
    );
    assert_eq!(e.field.as_deref(), Some("fault[0].from"));
    assert!(
        e.message.contains("\"coordinator:<transactional id>\""),
        "{e}"
    );
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"message-delay\"\nmessage = \"end-txn\"\nfrom = \"producer:1\"\n");
    assert_eq!(e.field.as_deref(), Some("fault[0].delay"));
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"message-duplicate\"\nmessage = \"end-txn\"\nfrom = \"somebody\"\ndelay = \"1s\"\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(5), Some("fault[0].from"))
    );
    let e = err("[cluster]\nbrokers = 3\n[[fault]]\nat = \"1s\"\nkind = \"message-drop\"\nmessage = \"txn-marker\"\nfrom = 4\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(7), Some("fault[0].from"))
    );
    // A drop holds nothing: `delay` is refused, by name.
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"message-drop\"\nmessage = \"end-txn\"\nfrom = \"producer:1\"\ndelay = \"1s\"\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(6), Some("fault[0].delay"))
    );
    // `message` belongs to message faults only; `from` of a clog is still a node.
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"crash\"\nnode = 1\nmessage = \"end-txn\"\n");
    assert_eq!(e.field.as_deref(), Some("fault[0].message"));
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"clog\"\nfrom = \"producer:1\"\nto = 2\nduration = \"1s\"\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(4), Some("fault[0].from"))
    );
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"txn-coordinator-crash\"\n");
    assert_eq!(e.field.as_deref(), Some("fault[0].transactional_id"));
    let e = err("[[fault]]\nat = \"1s\"\nkind = \"coordinator-crash\"\ntransactional_id = \"\"\n");
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(4), Some("fault[0].transactional_id"))
    );
}

#[test]
fn faults_table_sets_the_message_weight() {
    // Random message faults are opted into like `controller_bridge`: 0 unless set.
    let sc = Scenario::parse("m.toml", "[faults]\nper_second = 1.0\nmessage = 3\n").unwrap();
    let rates = sc.rates.expect("rates");
    assert_eq!(
        (rates.message, rates.crash),
        (3, FaultRates::default().crash)
    );
    let sc = Scenario::parse("d.toml", "[faults]\nper_second = 1.0\n").unwrap();
    assert_eq!(sc.rates.expect("rates").message, 0);
}
