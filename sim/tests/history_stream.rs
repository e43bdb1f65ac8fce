//! The history check fed event by event as a run records them (issue 53: a long run keeps
//! no history in memory) finds what the whole-history check finds: on runs where bug-zoo
//! bugs lose acknowledged writes, the run's verdict is the one `skein check` gives the
//! history the run wrote.

mod common;

use common::scenario_config;
use skein_jepsen::{check, read_history, CheckOptions};
use skein_sim::report::Verdict;
use skein_sim::trace::MemorySink as Buf;

/// Runs `file` at `seed` with `bug` on, writing the history; returns the run's history
/// summary and the whole-history checker's report on the history it wrote.
fn both_ways(file: &str, seed: u64, bug: &str) -> (Option<String>, skein_jepsen::Report) {
    let mut c = scenario_config(file, seed);
    c.bugs = vec![bug.to_string()];
    let history = Buf::default();
    let r = skein_sim::run(&c, None, Some(Box::new(history.clone()))).expect("the run starts");
    let events = read_history(history.text().as_bytes()).expect("the history reads back");
    assert_eq!(r.work.history_events, events.len() as u64);
    // The run checks with final reads when liveness was judged and held.
    let liveness = r.verdicts.iter().find(|(n, _)| *n == "liveness");
    let final_reads = matches!(liveness, Some((_, Verdict::Pass)));
    let whole = check(&events, &CheckOptions::default().final_reads(final_reads));
    (r.history_summary, whole)
}

#[test]
fn the_streamed_check_finds_what_the_whole_history_check_finds() {
    let mut found = 0;
    for (file, seed, bug) in [
        (
            "kip101-new-follower-truncates-then-leader-dies.toml",
            1,
            "truncate-to-hw",
        ),
        ("zombie-leader-partition.toml", 1, "ack-before-isr"),
        ("isr-lost-unclean-off.toml", 1, "elect-out-of-isr"),
        ("kip966-last-replica-unflushed.toml", 24, "fsync-after-ack"),
    ] {
        let (summary, whole) = both_ways(file, seed, bug);
        match summary {
            Some(s) => {
                assert_eq!(
                    s,
                    whole.to_string(),
                    "{bug}: streamed and whole-history reports"
                );
                assert!(!whole.valid);
                found += 1;
            }
            None => assert!(
                whole.valid,
                "{bug}: the streamed check passed a history the whole-history check fails:\n{whole}"
            ),
        }
    }
    assert!(
        found > 0,
        "no bug run failed the history check: the test proves nothing"
    );
}
