//! The evidence beyond `ok` sends and polls (issue 20): what indeterminate polls and sends
//! show, what failed assigns do not do, aborted and future reads, the strict policies, acks
//! levels and group commits. Each finding comes with the smallest history that shows it and
//! a near-identical twin that must pass.

mod common;

use common::H;
use skein_jepsen::{
    check, AckPromise, AnomalyKind, CheckOptions, EventType, Function, Report, SendValue, Value,
};

fn assert_only(report: &Report, kind: AnomalyKind) {
    assert_eq!(report.found(), vec![kind], "report:\n{report}");
    assert!(!report.valid);
}

fn assert_valid(report: &Report) {
    assert!(report.valid, "expected a valid history, got:\n{report}");
}

// ---- 2. Records of indeterminate polls are evidence. ----

#[test]
fn info_poll_records_show_inconsistent_offsets() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    let p = h.poll_as(2, EventType::Info, &[(0, 0, "b")]);
    let r = h.check();
    assert_only(&r, AnomalyKind::InconsistentOffsets);
    assert_eq!(r.inconsistent_offsets.examples[0].values[1].index, p);
}

#[test]
fn info_poll_twin_reading_what_was_sent_passes() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.poll_as(2, EventType::Info, &[(0, 0, "a")]);
    assert_valid(&h.check_final());
}

#[test]
fn fail_poll_records_show_a_duplicate() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.poll_as(2, EventType::Fail, &[(0, 3, "a")]);
    assert_only(&h.check(), AnomalyKind::Duplicate);
}

#[test]
fn fail_poll_twin_at_the_acknowledged_offset_passes() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.poll_as(2, EventType::Fail, &[(0, 0, "a")]);
    assert_valid(&h.check_final());
}

fn abc() -> H {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.send(1, 0, "b", 1);
    h.send(1, 0, "c", 2);
    h
}

#[test]
fn info_poll_records_show_a_poll_skip_against_the_position() {
    let mut h = abc();
    h.poll(2, &[(0, 0, "a")]);
    h.poll_as(2, EventType::Info, &[(0, 2, "c")]);
    let r = h.check();
    // b is also never read below a higher read: a lost write too.
    assert!(r.found().contains(&AnomalyKind::PollSkip), "{r}");
    assert_eq!(r.poll_skip.examples[0].skipped, vec![1]);
}

#[test]
fn info_poll_twin_continuing_from_the_position_passes() {
    let mut h = abc();
    h.poll(2, &[(0, 0, "a")]);
    h.poll_as(2, EventType::Info, &[(0, 1, "b"), (0, 2, "c")]);
    assert_valid(&h.check_final());
}

#[test]
fn a_fail_poll_does_not_move_the_position_an_ok_poll_does() {
    // The fail poll's b@1 follows a@0; the next ok poll reads b@1 again, which follows a@0
    // too, since the fail poll did not move the consumer.
    let run = |middle: EventType| {
        let mut h = abc();
        h.poll(2, &[(0, 0, "a")]);
        h.poll_as(2, middle, &[(0, 1, "b")]);
        h.poll(2, &[(0, 1, "b"), (0, 2, "c")]);
        h.check_final()
    };
    assert_valid(&run(EventType::Fail));
    assert_only(&run(EventType::Ok), AnomalyKind::NonmonotonicPoll);
}

#[test]
fn a_value_only_an_info_poll_saw_is_not_lost() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.send(1, 0, "b", 1);
    h.poll_as(2, EventType::Info, &[(0, 0, "a")]);
    h.poll(3, &[(0, 1, "b")]);
    assert_valid(&h.check_final());
    // Twin without the info poll: a is lost.
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.send(1, 0, "b", 1);
    h.poll(3, &[(0, 1, "b")]);
    assert_only(&h.check(), AnomalyKind::LostWrite);
}

// ---- 3. Failed assigns and subscribes change nothing; kept partitions keep positions. ----

fn skip_across(between: impl FnOnce(&mut H)) -> Report {
    let mut h = abc();
    h.poll(3, &[(0, 1, "b")]);
    h.assign(2, &[0]);
    h.poll(2, &[(0, 0, "a")]);
    between(&mut h);
    h.poll(2, &[(0, 2, "c")]);
    h.check_final()
}

#[test]
fn a_skip_across_a_failed_assign_is_a_skip() {
    assert_only(
        &skip_across(|h| h.assign_as(2, EventType::Fail, &[0], &[])),
        AnomalyKind::PollSkip,
    );
    assert_only(
        &skip_across(|h| h.subscribe_as(2, EventType::Fail)),
        AnomalyKind::PollSkip,
    );
}

#[test]
fn twins_a_skip_across_an_ok_or_info_assign_or_subscribe_passes() {
    assert_valid(&skip_across(|h| h.assign_as(2, EventType::Ok, &[0], &[])));
    assert_valid(&skip_across(|h| {
        h.assign_as(2, EventType::Info, &[0], &[0])
    }));
    assert_valid(&skip_across(|h| h.subscribe_as(2, EventType::Ok)));
    assert_valid(&skip_across(|h| h.subscribe_as(2, EventType::Info)));
}

#[test]
fn a_skip_across_an_assign_that_kept_the_partition_is_a_skip() {
    assert_only(
        &skip_across(|h| h.assign_as(2, EventType::Ok, &[0, 1], &[0])),
        AnomalyKind::PollSkip,
    );
    // Twin: it kept only partition 1; partition 0 starts afresh.
    assert_valid(&skip_across(|h| {
        h.assign_as(2, EventType::Ok, &[0, 1], &[1])
    }));
}

#[test]
fn an_assign_keeping_a_partition_it_does_not_list_is_bad_input() {
    let line = r#"{"index":0,"time":0,"process":1,"type":"ok","f":"assign","value":{"partitions":[["t",0]],"kept":[["t",1]]}}"#;
    let err = skein_jepsen::read_history(line.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("does not list"), "{err}");
}

// ---- 4. Indeterminate sends, once placed by a read, are ordered too. ----

#[test]
fn an_info_send_read_below_the_previous_acknowledged_send_is_nonmonotonic() {
    let mut h = H::new();
    let a = h.send(1, 0, "a", 1);
    h.send_unacked(1, 0, "b", EventType::Info);
    let b = a + 2;
    h.poll(2, &[(0, 0, "b"), (0, 1, "a")]);
    let r = h.check_final();
    assert_only(&r, AnomalyKind::NonmonotonicSend);
    assert_eq!(
        r.example_indexes(AnomalyKind::NonmonotonicSend),
        vec![vec![a, b]]
    );
    assert_eq!(r.nonmonotonic_send.examples[0].after.offset, 0);
}

#[test]
fn info_send_twins_in_order_or_never_read_pass() {
    // The info send first: it may well sit below.
    let mut h = H::new();
    h.send_unacked(1, 0, "b", EventType::Info);
    h.send(1, 0, "a", 1);
    h.poll(2, &[(0, 0, "b"), (0, 1, "a")]);
    assert_valid(&h.check_final());
    // Read above the acknowledged send.
    let mut h = H::new();
    h.send(1, 0, "a", 1);
    h.send_unacked(1, 0, "b", EventType::Info);
    h.send(9, 0, "x", 0);
    h.poll(2, &[(0, 0, "x"), (0, 1, "a"), (0, 2, "b")]);
    assert_valid(&h.check_final());
}

#[test]
fn an_acknowledged_send_below_a_placed_info_send_is_nonmonotonic() {
    let mut h = H::new();
    h.send_unacked(1, 0, "b", EventType::Info);
    h.send(1, 0, "a", 0);
    h.poll(2, &[(0, 0, "a"), (0, 1, "b")]);
    assert_only(&h.check_final(), AnomalyKind::NonmonotonicSend);
}

// ---- 5. Aborted read (G1a). ----

#[test]
fn aborted_read_found() {
    let mut h = H::new();
    h.send_unacked(1, 0, "a", EventType::Fail);
    let p = h.poll(2, &[(0, 0, "a")]);
    let r = h.check_final();
    assert_only(&r, AnomalyKind::AbortedRead);
    assert_eq!(
        r.example_indexes(AnomalyKind::AbortedRead),
        vec![vec![1, p]]
    );
    assert_eq!(AnomalyKind::AbortedRead.jepsen_name(), Some("G1a"));
}

#[test]
fn aborted_read_twin_info_send_passes() {
    let mut h = H::new();
    h.send_unacked(1, 0, "a", EventType::Info);
    h.poll(2, &[(0, 0, "a")]);
    assert_valid(&h.check_final());
}

// ---- 6. Real-time order: a read completes before its value's send was invoked. ----

fn invoke_send(h: &mut H, process: u64, value: &str) {
    h.push(
        process,
        EventType::Invoke,
        Function::Send,
        Value::Send(SendValue::new("t", 0, value)),
    );
}

fn ok_send(h: &mut H, process: u64, value: &str, offset: u64) {
    h.push(
        process,
        EventType::Ok,
        Function::Send,
        Value::Send(SendValue::new("t", 0, value).at(offset)),
    );
}

#[test]
fn future_read_found() {
    let mut h = H::new();
    let p = h.poll(2, &[(0, 0, "a")]);
    invoke_send(&mut h, 1, "a");
    ok_send(&mut h, 1, "a", 0);
    let r = h.check_final();
    assert_only(&r, AnomalyKind::FutureRead);
    assert_eq!(
        r.example_indexes(AnomalyKind::FutureRead),
        vec![vec![p + 1, p]]
    );
}

#[test]
fn future_read_twin_send_invoked_before_the_poll_completes_passes() {
    let mut h = H::new();
    invoke_send(&mut h, 1, "a");
    h.poll(2, &[(0, 0, "a")]);
    ok_send(&mut h, 1, "a", 0);
    assert_valid(&h.check_final());
}

// ---- 7. Strict policies. ----

#[test]
fn empty_history_is_an_anomaly_only_when_strict() {
    let r = check(&[], &CheckOptions::default());
    assert_valid(&r);
    assert_eq!(r.empty_history.count, 1);
    assert_only(
        &check(&[], &CheckOptions::default().strict(true)),
        AnomalyKind::EmptyHistory,
    );
    // Sends only, no read: proves nothing either.
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    assert_only(&h.check_strict(), AnomalyKind::EmptyHistory);
}

#[test]
fn empty_history_twin_with_a_send_and_its_read_passes_strict() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.poll(2, &[(0, 0, "a")]);
    assert_valid(&h.check_strict());
}

#[test]
fn unsent_read_is_an_anomaly_only_when_strict() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.poll(2, &[(0, 0, "a"), (0, 1, "z")]);
    let r = h.check();
    assert_valid(&r);
    assert_eq!(r.unsent_read.count, 1);
    let r = h.check_strict();
    assert_only(&r, AnomalyKind::UnsentRead);
    assert_eq!(r.unsent_read.examples[0].value.as_str(), "z");
}

#[test]
fn unsent_read_twin_with_its_send_passes_strict() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.send_unacked(1, 0, "z", EventType::Info);
    h.poll(2, &[(0, 0, "a"), (0, 1, "z")]);
    assert_valid(&h.check_strict());
}

// ---- Acks levels: what acks=1 allows. ----

#[test]
fn an_acks_1_write_lost_is_allowed_an_acks_all_one_is_not() {
    let run = |acks: AckPromise| {
        let mut h = H::new();
        h.send_acks(1, 0, "a", 0, acks);
        h.send(1, 0, "b", 1);
        h.poll(2, &[(0, 1, "b")]);
        h.check_final()
    };
    let r = run(AckPromise::Leader);
    assert_valid(&r);
    assert_eq!(r.acks_1_loss.count, 1, "{r}");
    assert_eq!(r.acks_1_loss.examples[0].excuses, AnomalyKind::LostWrite);
    assert_only(&run(AckPromise::All), AnomalyKind::LostWrite);
}

#[test]
fn an_acks_1_offset_overwritten_is_allowed_two_reads_disagreeing_are_not() {
    let mut h = H::new();
    h.send_acks(1, 0, "a", 0, AckPromise::Leader);
    h.send_acks(3, 0, "b", 0, AckPromise::Leader);
    h.poll(2, &[(0, 0, "b")]);
    let r = h.check_final();
    assert_valid(&r);
    assert_eq!(
        r.acks_1_loss.count, 2,
        "inconsistent offset and the lost a: {r}"
    );
    // Twin: a second read sees a at offset 0; reads are not acks=1 promises.
    h.poll(4, &[(0, 0, "a")]);
    assert!(h
        .check_final()
        .found()
        .contains(&AnomalyKind::InconsistentOffsets));
}

#[test]
fn an_acks_1_send_out_of_order_is_allowed_unless_reads_confirm_it() {
    let mut h = H::new();
    h.send_acks(1, 0, "a", 1, AckPromise::Leader);
    h.send_acks(1, 0, "b", 0, AckPromise::Leader);
    h.poll(2, &[(0, 0, "b")]);
    let r = h.check();
    assert_valid(&r);
    assert!(
        r.acks_1_loss
            .examples
            .iter()
            .any(|w| w.excuses == AnomalyKind::NonmonotonicSend),
        "{r}"
    );
    // Twin: reads confirm both acknowledgements, so the order is a real violation.
    h.poll(3, &[(0, 0, "b"), (0, 1, "a")]);
    assert_only(&h.check(), AnomalyKind::NonmonotonicSend);
}

#[test]
fn an_acks_1_offset_alone_does_not_make_a_skip() {
    let run = |acks: AckPromise| {
        let mut h = H::new();
        h.send(1, 0, "a", 0);
        h.send_acks(1, 0, "b", 1, acks);
        h.send(1, 0, "c", 2);
        h.poll(2, &[(0, 0, "a"), (0, 2, "c")]);
        h.check()
    };
    let r = run(AckPromise::Leader);
    assert_valid(&r);
    assert_eq!(r.int_poll_skip.count, 0);
    assert!(run(AckPromise::All)
        .found()
        .contains(&AnomalyKind::IntPollSkip));
}

#[test]
fn an_unread_acks_1_send_with_final_reads_is_allowed() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.send_acks(1, 0, "b", 1, AckPromise::Leader);
    h.poll(2, &[(0, 0, "a")]);
    let r = h.check_final();
    assert_valid(&r);
    assert_eq!(r.acks_1_loss.examples[0].excuses, AnomalyKind::Unseen);
    // Twin: acks=all, never read with final reads: unseen.
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.send_acks(1, 0, "b", 1, AckPromise::All);
    h.poll(2, &[(0, 0, "a")]);
    assert_only(&h.check_final(), AnomalyKind::Unseen);
}

// ---- Group commits: committed offsets never go back. ----

#[test]
fn commit_regression_found() {
    let mut h = H::new();
    let high = h.commit(5, 10, Some(1));
    let low = h.commit(6, 4, Some(2));
    let r = h.check();
    assert_only(&r, AnomalyKind::CommitRegression);
    let c = &r.commit_regression.examples[0];
    assert_eq!(
        (
            c.before.index,
            c.before.offset,
            c.after.index,
            c.after.offset
        ),
        (high, 10, low, 4)
    );
    assert_eq!(
        (c.before.generation, c.after.generation),
        (Some(1), Some(2))
    );
}

#[test]
fn commit_regression_twins_concurrent_or_outside_a_generation_pass() {
    // The lower commit was invoked before the higher one completed: no order between them.
    let mut h = H::new();
    h.commit_invoke(6);
    h.commit(5, 10, Some(1));
    h.commit_ok(6, 4, Some(1));
    assert_valid(&h.check());
    // An operator's reset (no generation) may move it back, and members go on from there.
    let mut h = H::new();
    h.commit(5, 10, Some(1));
    h.commit(7, 4, None);
    h.commit(6, 5, Some(2));
    assert_valid(&h.check());
    // Going forward is fine.
    let mut h = H::new();
    h.commit(5, 4, Some(1));
    h.commit(6, 10, Some(2));
    assert_valid(&h.check());
}
