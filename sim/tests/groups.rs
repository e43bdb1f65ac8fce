//! Seeded simulations with a consumer group: members crash, pause (zombies) and rebalance
//! while brokers fail; every group invariant must hold, runs replay exactly, and the bug
//! zoo's `no-generation-fencing` is caught.

mod common;

use common::{default_seed_passes, run, scenario_config};
use skein_core::group::AssignorKind;
use skein_sim::config::SimConfig;
use skein_sim::group_invariants::{GROUP_ACKED_COMMIT_LOST, GROUP_OFFSET_REGRESSION, NAMES};
use skein_sim::modes::CommitMode;
use skein_sim::report::Verdict;
use skein_sim::time::SECS;
use skein_sim::trace::MemorySink;

/// A short faulty run with three members and member faults weighted up, varied by seed over
/// both commit modes, the three assignors and static or dynamic membership.
fn short(seed: u64) -> SimConfig {
    let mut c = common::short(seed);
    c.group_members = 3;
    c.group_commit = if seed.is_multiple_of(2) {
        CommitMode::Sync
    } else {
        CommitMode::Async
    };
    c.group_assignor = [
        AssignorKind::Range,
        AssignorKind::RoundRobin,
        AssignorKind::CooperativeSticky,
    ][(seed % 3) as usize];
    // Static membership on half the seeds: a restarted member rejoins under its instance
    // id, without a rebalance if its session has not expired.
    c.group_static = seed % 4 >= 2;
    c.rates.member_crash = 8;
    c.rates.member_pause = 8;
    c
}

#[test]
fn group_seeds_with_member_and_broker_faults_pass() {
    let mut failures = Vec::new();
    let (mut member_faults, mut commits, mut loads) = (0, 0, 0);
    for seed in 0..30 {
        let c = short(seed);
        let r = run(&c);
        member_faults +=
            r.faults.get("member-crash").unwrap_or(&0) + r.faults.get("member-pause").unwrap_or(&0);
        let g = r.group.clone().expect("group stats");
        commits += g.commits;
        loads += g.coordinator_loads;
        for name in NAMES {
            if matches!(r.verdict(name), Some(Verdict::Skipped { .. })) && *name != NAMES[1] {
                failures.push(format!("seed {seed}: {name} was not checked"));
            }
        }
        if !r.passed() || g.processed == 0 {
            failures.push(format!(
                "seed {seed} ({:?}, {:?}): {:?}\n{r}",
                c.group_commit,
                c.group_assignor,
                r.failed_invariants()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // Not vacuous: members were hit, commits acknowledged, coordinators (re)loaded.
    assert!(member_faults >= 20, "only {member_faults} member faults");
    assert!(commits >= 30 * 10, "only {commits} commits");
    assert!(loads >= 30, "only {loads} coordinator loads");
}

/// Auto-commit members (Kafka's `enable.auto.commit`): the consumer commits from `poll`
/// what earlier polls returned, and before revoking partitions in a rebalance, which may
/// come while the application is still processing a batch. Every group check must hold:
/// in particular no commit covers a record not yet processed (`group-unprocessed-commit`),
/// which committing the position (records handed over but still in processing) at a
/// revocation broke: seeds 193 and 207 of this shape failed so (2 of 300 seeds; all 300
/// pass now).
#[test]
fn auto_commit_group_seeds_pass() {
    let mut failures = Vec::new();
    let mut commits = 0;
    for seed in (0..20).chain([193, 207]) {
        let c = SimConfig {
            group_commit: CommitMode::Auto,
            ..short(seed)
        };
        let r = run(&c);
        commits += r.group.as_ref().map_or(0, |g| g.commits);
        if !r.passed() {
            failures.push(format!("seed {seed}: {r}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        commits > 100,
        "auto-commit committed only {commits} times in 22 runs"
    );
}

/// Group members cut off from the brokers (`member-isolate`, weight 0 in the default mix):
/// an isolated member keeps processing what it polled while its session lapses and its
/// partitions move; it must stop in time and none of its late commits may count. Over both
/// user commit modes and auto-commit.
#[test]
fn isolated_members_stop_in_time() {
    let mut failures = Vec::new();
    let mut isolations = 0;
    for seed in 0..15 {
        let mut c = SimConfig {
            group_commit: [CommitMode::Sync, CommitMode::Async, CommitMode::Auto]
                [(seed % 3) as usize],
            ..short(seed)
        };
        c.rates.member_isolate = 24;
        let r = run(&c);
        isolations += r.faults.get("member-isolate").copied().unwrap_or(0);
        if !r.passed() {
            failures.push(format!("seed {seed}: {r}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        isolations >= 10,
        "only {isolations} member isolations in 15 runs"
    );
}

#[test]
fn group_runs_replay_exactly() {
    for seed in [3, 4] {
        let c = SimConfig {
            duration: 4 * SECS,
            liveness: SECS,
            ..short(seed)
        };
        let (a, b) = (run(&c), run(&c));
        assert_eq!(a.trace_hash, b.trace_hash, "seed {seed}");
        assert_eq!(a.group, b.group, "seed {seed}");
    }
}

#[test]
fn the_zombie_commit_is_refused_and_nothing_goes_back() {
    let c = scenario_config("zombie-consumer-commit.toml", 1);
    let history = MemorySink::default();
    let r = skein_sim::run(&c, None, Some(Box::new(history.clone()))).expect("the run starts");
    assert!(r.passed(), "{r}");
    let g = r.group.clone().expect("group stats");
    assert!(g.commits > 50, "{r}");
    // Member 1 is client 4 (two producers, one consumer first); its commits are process
    // 4999. It froze at 3 s for 2.5 s: its commit right after waking must have been refused.
    let text = history.text();
    let refused = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .filter(|e| e["process"] == 4999 && e["f"] == "commit" && e["type"] == "fail")
        .filter(|e| e["time"].as_u64().is_some_and(|t| t >= 5 * SECS + SECS / 2))
        .count();
    assert!(refused >= 1, "the zombie never committed after waking\n{r}");
}

#[test]
fn no_generation_fencing_is_caught_by_the_zombie_scenario() {
    for seed in 1..=3 {
        let mut c = scenario_config("zombie-consumer-commit.toml", seed);
        c.bugs = vec!["no-generation-fencing".into()];
        let r = run(&c);
        assert!(
            r.failed_invariants().contains(&GROUP_OFFSET_REGRESSION),
            "seed {seed}: {r}"
        );
    }
}

#[test]
fn a_random_sweep_finds_no_generation_fencing() {
    // Default shape and fault rates, no scenario: random member pauses make zombies.
    let found = (1..=6).find(|&seed| {
        let c = SimConfig {
            seed,
            bugs: vec!["no-generation-fencing".into()],
            ..SimConfig::default()
        };
        run(&c)
            .failed_invariants()
            .contains(&GROUP_OFFSET_REGRESSION)
    });
    assert!(found.is_some(), "no seed in 1..=6 caught the bug");
}

#[test]
fn acknowledged_commits_survive_a_coordinator_failover_mid_rebalance() {
    for seed in [1, 2] {
        let r = run(&scenario_config(
            "coordinator-failover-during-rebalance.toml",
            seed,
        ));
        assert!(r.passed(), "seed {seed}: {r}");
        let g = r.group.clone().expect("group stats");
        assert!(
            g.coordinator_loads >= 2,
            "seed {seed}: no failover seen: {r}"
        );
        assert!(g.commits > 50 && g.member_crashes == 1, "seed {seed}: {r}");
        assert_eq!(
            r.verdict(GROUP_ACKED_COMMIT_LOST),
            Some(&Verdict::Pass),
            "seed {seed}"
        );
    }
}

/// Seed 361 of the default sweep (60 s, every fault kind): a bit flip corrupted broker 2's
/// copy of `__consumer_offsets` just before broker 2 became its leader. The coordinator's
/// load read failed and was retried on every pump, so it answered
/// `CoordinatorLoadInProgress` for the rest of the run and the group owned nothing
/// (`group-partition-unowned`). A failed load read now takes the log offline like any failed
/// read. Since peer repair (a damaged batch refilled from another replica) the run goes
/// another way from its first bit flip at 3.1 s, and no longer damages a coordinator's log:
/// the path is pinned by core's
/// `a_new_coordinator_whose_offsets_log_is_damaged_is_repaired_from_a_peer`; the seed still
/// passes.
#[test]
fn seed_361_passes() {
    default_seed_passes(361);
}

/// Seed 3836 of the 10,000-seed default sweep: broker 1 became leader of a
/// `__consumer_offsets` partition while its disk was full, so its epoch marker was refused.
/// Without a batch of its epoch the HW could not pass the epoch start, and nobody writes to
/// `__consumer_offsets` before its coordinator has loaded, which waits for the HW: the
/// coordinator answered `CoordinatorLoadInProgress` to the end (`group-partition-unowned`;
/// seeds 5156, 8836 and 9344 the same). The leader now retries its marker.
#[test]
fn a_refused_epoch_marker_is_written_again() {
    for seed in [3836, 5156] {
        default_seed_passes(seed);
    }
}

/// Seed 7177 of the 10,000-seed default sweep: a broker alive but stalled after the final heal
/// (a slow disk's backlog) got the group leader's partition-count lookup three times in a row,
/// each a 0.8 s request timeout and a new generation, and the group's partitions were unowned
/// 3.42 s after the heal (bound 3.3 s). The leader asks its coordinator now.
#[test]
fn the_leader_asks_its_coordinator_for_partition_counts() {
    default_seed_passes(7177);
}
