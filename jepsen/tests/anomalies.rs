//! One hand-written history per anomaly that must be found, each with near-twins that must
//! pass (the same shape with the one thing that makes it legal).

mod common;

use common::H;
use skein_jepsen::{check, AnomalyKind, CheckOptions, EventType, Report};

fn assert_only(report: &Report, kind: AnomalyKind) {
    assert_eq!(report.found(), vec![kind], "report:\n{report}");
    assert!(!report.valid);
}

fn assert_valid(report: &Report) {
    assert!(report.valid, "expected a valid history, got:\n{report}");
    assert!(report.found().is_empty());
}

#[test]
fn lost_write_found() {
    let mut h = H::new();
    let a = h.send(1, 0, "a", 0);
    h.send(1, 0, "b", 1);
    let p = h.poll(2, &[(0, 1, "b")]);
    let r = h.check();
    assert_only(&r, AnomalyKind::LostWrite);
    assert_eq!(r.lost_write.count, 1);
    let m = &r.lost_write.examples[0];
    assert_eq!((m.send_index, m.offset, m.value.as_str()), (a, 0, "a"));
    let highest = m.highest_read.as_ref().unwrap();
    assert_eq!((highest.index, highest.offset), (p, 1));
    assert_eq!(r.example_indexes(AnomalyKind::LostWrite), vec![vec![a]]);
}

#[test]
fn lost_write_twin_read_passes() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.send(1, 0, "b", 1);
    h.poll(2, &[(0, 0, "a"), (0, 1, "b")]);
    assert_valid(&h.check_final());
}

#[test]
fn lost_write_twin_info_send_may_not_have_happened() {
    let mut h = H::new();
    h.send_unacked(1, 0, "a", EventType::Info);
    h.send(1, 0, "b", 1);
    h.poll(2, &[(0, 1, "b")]);
    assert_valid(&h.check_final());
}

#[test]
fn lost_write_twin_value_read_elsewhere_is_not_lost() {
    // Read at another offset: a duplicate/inconsistency matter, but not a loss.
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.send(1, 0, "b", 1);
    h.poll(2, &[(0, 1, "b"), (0, 2, "a")]);
    let r = h.check();
    assert_eq!(r.count(AnomalyKind::LostWrite), 0, "{r}");
    assert_eq!(r.count(AnomalyKind::Duplicate), 1, "{r}");
}

#[test]
fn duplicate_found_within_a_partition() {
    let mut h = H::new();
    let s = h.send(1, 0, "a", 0);
    let p = h.poll(2, &[(0, 0, "a"), (0, 1, "a")]);
    let r = h.check();
    assert_only(&r, AnomalyKind::Duplicate);
    let d = &r.duplicate.examples[0];
    assert_eq!(d.value.as_str(), "a");
    let places: Vec<(u64, u64)> = d.places.iter().map(|p| (p.offset, p.index)).collect();
    assert_eq!(places, vec![(0, s), (1, p)]);
}

#[test]
fn duplicate_found_across_partitions() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.poll(2, &[(0, 0, "a")]);
    h.poll(3, &[(1, 0, "a")]);
    assert_only(&h.check(), AnomalyKind::Duplicate);
}

#[test]
fn duplicate_twin_same_offset_read_twice_passes() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.poll(2, &[(0, 0, "a")]);
    h.poll(3, &[(0, 0, "a")]);
    assert_valid(&h.check_final());
}

#[test]
fn inconsistent_offsets_read_versus_send() {
    let mut h = H::new();
    let s = h.send(1, 0, "a", 0);
    let p = h.poll(2, &[(0, 0, "b")]);
    let r = h.check();
    assert_only(&r, AnomalyKind::InconsistentOffsets);
    let i = &r.inconsistent_offsets.examples[0];
    assert_eq!(i.offset, 0);
    let seen: Vec<(&str, u64)> = i
        .values
        .iter()
        .map(|v| (v.value.as_str(), v.index))
        .collect();
    assert_eq!(seen, vec![("a", s), ("b", p)]);
}

#[test]
fn inconsistent_offsets_read_versus_read() {
    let mut h = H::new();
    h.poll(2, &[(0, 5, "x")]);
    h.poll(3, &[(0, 5, "y")]);
    assert_only(&h.check(), AnomalyKind::InconsistentOffsets);
}

#[test]
fn inconsistent_offsets_twin_consistent_read_passes() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.poll(2, &[(0, 0, "a")]);
    h.poll(3, &[(0, 0, "a")]);
    assert_valid(&h.check_final());
}

#[test]
fn inconsistent_offsets_two_acknowledgements_at_one_offset() {
    // No log holds both: one of the acknowledgements is wrong, whether or not anyone reads.
    let mut h = H::new();
    let a = h.send(1, 0, "a", 0);
    let b = h.send(3, 0, "b", 0);
    let r = h.check();
    assert_only(&r, AnomalyKind::InconsistentOffsets);
    assert_eq!(
        r.example_indexes(AnomalyKind::InconsistentOffsets),
        vec![vec![a, b]]
    );
}

#[test]
fn inconsistent_offsets_twins_two_sends_at_two_offsets_or_one_unknown_pass() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.send(3, 0, "b", 1);
    let r = h.check();
    assert_valid(&r);
    assert_eq!(r.unseen.count, 2);

    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.send_unacked(3, 0, "b", EventType::Info);
    assert_valid(&h.check());
}

fn two_then_back(reset: impl FnOnce(&mut H)) -> (H, u64, u64) {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.send(1, 0, "b", 1);
    h.assign(2, &[0]);
    let first = h.poll(2, &[(0, 0, "a"), (0, 1, "b")]);
    reset(&mut h);
    let second = h.poll(2, &[(0, 1, "b")]);
    (h, first, second)
}

#[test]
fn nonmonotonic_poll_found() {
    let (h, first, second) = two_then_back(|_| {});
    let r = h.check();
    assert_only(&r, AnomalyKind::NonmonotonicPoll);
    let s = &r.nonmonotonic_poll.examples[0];
    assert_eq!((s.process, s.before.index, s.before.offset), (2, first, 1));
    assert_eq!(
        (s.after.index, s.after.offset, s.after.value.as_str()),
        (second, 1, "b")
    );
}

#[test]
fn nonmonotonic_poll_twins_with_a_reset_pass() {
    assert_valid(&two_then_back(|h| h.assign(2, &[0])).0.check_final());
    assert_valid(&two_then_back(|h| h.subscribe(2)).0.check_final());
    assert_valid(&two_then_back(|h| h.crash(2)).0.check_final());
    assert_valid(&two_then_back(|h| h.poll_info(2)).0.check_final());
}

#[test]
fn nonmonotonic_poll_twin_other_process_passes() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.poll(2, &[(0, 0, "a")]);
    h.poll(3, &[(0, 0, "a")]);
    assert_valid(&h.check_final());
}

fn skip_over_one(middle: impl FnOnce(&mut H), reset: impl FnOnce(&mut H)) -> H {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    middle(&mut h);
    h.send(1, 0, "c", 2);
    h.poll(2, &[(0, 0, "a")]);
    reset(&mut h);
    h.poll(2, &[(0, 2, "c")]);
    h
}

#[test]
fn poll_skip_found() {
    let h = skip_over_one(
        |h| {
            h.send(1, 0, "b", 1);
        },
        |_| {},
    );
    let r = h.check();
    // "b" is also never read below a higher read offset: a lost write too.
    assert!(r.found().contains(&AnomalyKind::PollSkip), "{r}");
    let s = &r.poll_skip.examples[0];
    assert_eq!((s.before.offset, s.after.offset), (0, 2));
    assert_eq!((s.skipped_count, s.skipped.clone()), (1, vec![1]));
}

#[test]
fn poll_skip_found_when_offset_known_from_another_read() {
    let h = skip_over_one(
        |h| {
            h.send_unacked(1, 0, "b", EventType::Info);
            h.poll(3, &[(0, 1, "b")]);
        },
        |_| {},
    );
    assert_only(&h.check_final(), AnomalyKind::PollSkip);
}

#[test]
fn poll_skip_twins_pass() {
    let known_b = |h: &mut H| {
        h.send(1, 0, "b", 1);
        h.poll(3, &[(0, 1, "b")]);
    };
    // Same skip with an assign (or crash) between the polls.
    assert_valid(&skip_over_one(known_b, |h| h.assign(2, &[0])).check_final());
    assert_valid(&skip_over_one(known_b, |h| h.crash(2)).check_final());
    // Offset 1 not known to hold a record: its send may not have happened.
    assert_valid(
        &skip_over_one(|h| h.send_unacked(1, 0, "b", EventType::Info), |_| {}).check_final(),
    );
    assert_valid(
        &skip_over_one(|h| h.send_unacked(1, 0, "b", EventType::Fail), |_| {}).check_final(),
    );
}

#[test]
fn int_nonmonotonic_poll_found() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.send(1, 0, "b", 1);
    let p = h.poll(2, &[(0, 0, "a"), (0, 1, "b"), (0, 0, "a")]);
    let r = h.check();
    assert_only(&r, AnomalyKind::IntNonmonotonicPoll);
    assert_eq!(
        r.example_indexes(AnomalyKind::IntNonmonotonicPoll),
        vec![vec![p, p]]
    );
}

#[test]
fn int_nonmonotonic_poll_twin_interleaved_partitions_pass() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.send(1, 0, "b", 1);
    h.send(1, 1, "x", 0);
    h.poll(2, &[(0, 0, "a"), (1, 0, "x"), (0, 1, "b")]);
    assert_valid(&h.check_final());
}

#[test]
fn int_poll_skip_found() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.send(1, 0, "b", 1);
    h.send(1, 0, "c", 2);
    h.poll(3, &[(0, 1, "b")]);
    let p = h.poll(2, &[(0, 0, "a"), (0, 2, "c")]);
    let r = h.check_final();
    assert_only(&r, AnomalyKind::IntPollSkip);
    let s = &r.int_poll_skip.examples[0];
    assert_eq!((s.before.index, s.after.index, s.skipped_count), (p, p, 1));
}

#[test]
fn int_poll_skip_twin_unknown_offset_passes() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.send_unacked(1, 0, "b", EventType::Info);
    h.send(1, 0, "c", 2);
    h.poll(2, &[(0, 0, "a"), (0, 2, "c")]);
    assert_valid(&h.check_final());
}

#[test]
fn nonmonotonic_send_found() {
    let mut h = H::new();
    let first = h.send(1, 0, "a", 1);
    let second = h.send(1, 0, "b", 0);
    h.poll(2, &[(0, 0, "b"), (0, 1, "a")]);
    let r = h.check_final();
    assert_only(&r, AnomalyKind::NonmonotonicSend);
    assert_eq!(
        r.example_indexes(AnomalyKind::NonmonotonicSend),
        vec![vec![first, second]]
    );
}

#[test]
fn nonmonotonic_send_twins_pass() {
    // Different processes, or different partitions, or a crash between.
    let mut h = H::new();
    h.send(1, 0, "a", 1);
    h.send(3, 0, "b", 0);
    h.poll(2, &[(0, 0, "b"), (0, 1, "a")]);
    assert_valid(&h.check_final());

    let mut h = H::new();
    h.send(1, 0, "a", 1);
    h.send(1, 1, "b", 0);
    h.poll(2, &[(0, 1, "a"), (1, 0, "b")]);
    assert_valid(&h.check_final());

    let mut h = H::new();
    h.send(1, 0, "a", 1);
    h.crash(1);
    h.send(1, 0, "b", 0);
    h.poll(2, &[(0, 0, "b"), (0, 1, "a")]);
    assert_valid(&h.check_final());
}

#[test]
fn unseen_is_an_anomaly_only_with_final_reads() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    let b = h.send(1, 0, "b", 1);
    h.poll(2, &[(0, 0, "a")]);
    let r = h.check();
    assert_valid(&r);
    assert_eq!(r.unseen.count, 1);
    assert_eq!(r.unseen.examples[0].send_index, b);
    let r = h.check_final();
    assert_only(&r, AnomalyKind::Unseen);
}

#[test]
fn unseen_twin_read_at_the_end_passes() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.send(1, 0, "b", 1);
    h.poll(2, &[(0, 0, "a")]);
    h.poll(2, &[(0, 1, "b")]);
    let r = h.check_final();
    assert_valid(&r);
    assert_eq!(r.unseen.count, 0);
}

#[test]
fn examples_are_capped_and_the_earliest() {
    let mut h = H::new();
    let mut sends = Vec::new();
    for i in 0..20 {
        sends.push(h.send(1, 0, &format!("v{i}"), i));
    }
    h.poll(2, &[(0, 20, "last")]);
    let r = h.check();
    assert_eq!(r.lost_write.count, 20);
    let shown: Vec<u64> = r.lost_write.examples.iter().map(|m| m.send_index).collect();
    assert_eq!(shown, sends[..8].to_vec());
    let r = check(
        &h.events,
        &CheckOptions {
            max_examples: 2,
            ..CheckOptions::default()
        },
    );
    assert_eq!((r.lost_write.count, r.lost_write.examples.len()), (20, 2));
}

#[test]
fn report_json_uses_jepsen_names_and_round_trips() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.send(1, 0, "b", 1);
    h.poll(2, &[(0, 1, "b")]);
    let r = h.check();
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["valid"], false);
    assert_eq!(json["lost-write"]["count"], 1);
    assert_eq!(json["lost-write"]["examples"][0]["value"], "a");
    assert_eq!(json["poll-skip"]["count"], 0);
    let back: Report = serde_json::from_value(json).unwrap();
    assert_eq!(back, r);
    let summary = r.to_string();
    assert!(summary.starts_with("INVALID"), "{summary}");
    assert!(summary.contains("lost-write examples:"), "{summary}");
    assert!(summary.contains("value \"a\""), "{summary}");
}

#[test]
fn empty_history_is_valid() {
    assert_valid(&check(&[], &CheckOptions::default().final_reads(true)));
}

#[test]
fn sparse_offsets_are_checked_too() {
    // Offsets far apart take the comparison-sort path instead of the counting sort.
    let big = 1u64 << 40;
    let mut h = H::new();
    h.send(1, 0, "a", 3);
    h.send(1, 0, "b", big);
    h.send(1, 0, "c", 2 * big);
    h.poll(2, &[(0, big, "x"), (0, 3, "a")]);
    h.poll(3, &[(0, 2 * big, "c")]);
    let r = h.check();
    assert_eq!(r.inconsistent_offsets.count, 1, "{r}");
    assert_eq!(r.inconsistent_offsets.examples[0].offset, big);
    assert_eq!(r.int_nonmonotonic_poll.count, 1, "{r}");
    assert_eq!(r.lost_write.count, 1, "{r}");
    assert_eq!(r.lost_write.examples[0].value.as_str(), "b");
    assert_eq!(r.duplicate.count, 0, "{r}");
}

#[test]
fn extreme_offsets_do_not_overflow() {
    let mut h = H::new();
    h.poll(2, &[(0, u64::MAX, "a"), (0, u64::MAX, "a"), (0, 0, "b")]);
    h.poll(2, &[(0, u64::MAX - 1, "c")]);
    h.send(1, 0, "d", u64::MAX);
    let r = h.check();
    assert_eq!(r.int_nonmonotonic_poll.count, 2, "{r}");
    // 0 -> MAX-1 is a gap, but no offset inside it is known to hold a record.
    assert_eq!(r.poll_skip.count, 0, "{r}");
    assert_eq!(r.inconsistent_offsets.count, 1, "{r}");
}

#[test]
fn long_lists_inside_an_example_are_capped_but_counted() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    for i in 0..20 {
        h.poll(2 + i, &[(0, 0, &format!("x{i}")), (0, 100 + i, "a")]);
    }
    let r = h.check();
    let i = &r.inconsistent_offsets.examples[0];
    assert_eq!((i.value_count, i.values.len()), (21, 8));
    assert_eq!(i.values[0].value.as_str(), "a");
    let d = &r.duplicate.examples[0];
    assert_eq!((d.place_count, d.places.len()), (21, 8));
}
