//! The JSON Lines format: writing, reading back, extra fields, and bad input naming its line.

mod common;

use common::H;
use skein_jepsen::{
    read_history, CommitOffset, CommitValue, Event, EventType, Function, HistoryError,
    HistoryReader, HistoryWriter, SendValue, Value,
};

const SAMPLE: &str = r#"{"index": 0, "time": 100, "process": 3, "type": "invoke", "f": "send", "value": {"topic": "t", "partition": 0, "value": "3-17"}}
{"index": 1, "time": 120034, "process": 3, "type": "ok", "f": "send", "value": {"topic": "t", "partition": 0, "value": "3-17", "offset": 42}}
{"index": 2, "time": 130000, "process": 4, "type": "invoke", "f": "poll", "value": null}
{"index": 3, "time": 140000, "process": 4, "type": "ok", "f": "poll", "value": {"records": [{"topic": "t", "partition": 0, "offset": 42, "value": "3-17"}]}}
{"index": 4, "time": 150000, "process": 4, "type": "invoke", "f": "assign", "value": {"partitions": [["t", 0], ["t", 1]]}}
{"index": 5, "time": 150001, "process": 5, "type": "ok", "f": "subscribe", "value": {"group": "g", "topics": ["t"]}}
{"index": 6, "time": 150002, "process": 5, "type": "ok", "f": "commit", "value": {"group": "g", "offsets": [{"topic": "t", "partition": 0, "offset": 43}]}}
{"index": 7, "time": 150003, "process": 5, "type": "info", "f": "crash", "value": null}
"#;

#[test]
fn reads_every_kind_of_event() {
    let events = read_history(SAMPLE.as_bytes()).unwrap();
    assert_eq!(events.len(), 8);
    assert_eq!(
        events[1],
        Event::new(
            1,
            120034,
            3,
            EventType::Ok,
            Function::Send,
            Value::Send(SendValue::new("t", 0, "3-17").at(42))
        )
    );
    assert_eq!(events[3].records().unwrap()[0].offset, 42);
    match &events[4].value {
        Value::Assign(a) => assert_eq!(a.partitions, vec![("t".into(), 0), ("t".into(), 1)]),
        other => panic!("{other:?}"),
    }
    match &events[6].value {
        Value::Commit(c) => assert_eq!(
            c,
            &CommitValue {
                group: "g".into(),
                offsets: vec![CommitOffset {
                    topic: "t".into(),
                    partition: 0,
                    offset: 43
                }],
                ..CommitValue::default()
            }
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        (events[7].f, &events[7].value),
        (Function::Crash, &Value::Null)
    );
}

#[test]
fn writer_assigns_indexes_and_round_trips() {
    let mut h = H::new();
    h.send(1, 0, "a", 0);
    h.send_unacked(1, 1, "b", EventType::Info);
    h.poll(2, &[(0, 0, "a")]);
    h.poll_info(2);
    h.assign(2, &[0, 1]);
    h.subscribe(3);
    h.crash(3);
    let mut writer = HistoryWriter::new(Vec::new());
    for event in &h.events {
        let mut e = event.clone();
        e.index = 999; // the writer decides
        let index = writer.write_event(&mut e).unwrap();
        assert_eq!(index, event.index);
        assert_eq!(&e, event);
    }
    let last = writer
        .write(7, 9, EventType::Info, Function::Crash, Value::Null)
        .unwrap();
    assert_eq!(last, h.events.len() as u64);
    assert_eq!(writer.next_index(), last + 1);
    let bytes = writer.into_inner().unwrap();
    let text = String::from_utf8(bytes).unwrap();
    assert_eq!(text.lines().count() as u64, last + 1);
    let back = read_history(text.as_bytes()).unwrap();
    assert_eq!(&back[..h.events.len()], &h.events[..]);
    assert_eq!(back[last as usize].process, 9);
}

#[test]
fn extra_fields_are_ignored_and_field_order_is_free() {
    let text = r#"{"value": {"topic": "t", "partition": 0, "value": "v", "offset": 1, "key": "k"}, "f": "send", "type": "ok", "process": 1, "time": 5, "index": 0, "node": "n1", "extra": [1, {"a": null}]}

{"index": 1, "time": 6, "process": 1, "type": "info", "f": "crash", "value": {"why": "kill -9"}}
"#;
    let events = read_history(text.as_bytes()).unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].send().unwrap().offset, Some(1));
    assert_eq!(events[1].value, Value::Null);
}

fn error_of(text: &str) -> HistoryError {
    match read_history(text.as_bytes()) {
        Ok(events) => panic!("expected an error, read {events:?}"),
        Err(e) => e,
    }
}

fn bad_line_3(third: &str) -> String {
    let lines: Vec<&str> = SAMPLE.lines().collect();
    format!("{}\n{}\n{third}\n{}\n", lines[0], lines[1], lines[3])
}

#[test]
fn malformed_json_names_the_line() {
    let e = error_of(&bad_line_3(r#"{"index": 2, "time": 1, "process": 4, "#));
    assert_eq!(e.line(), 3);
    let msg = e.to_string();
    assert!(msg.starts_with("line 3"), "{msg}");
    assert!(
        !msg.contains("line 1"),
        "serde's own line numbers must not leak: {msg}"
    );
    let e = error_of(&bad_line_3("not json at all"));
    assert_eq!(e.line(), 3, "{e}");
}

#[test]
fn missing_field_names_the_line_and_field() {
    let e = error_of(&bad_line_3(
        r#"{"index": 2, "time": 1, "type": "invoke", "f": "poll", "value": null}"#,
    ));
    let msg = e.to_string();
    assert!(msg.starts_with("line 3"), "{msg}");
    assert!(msg.contains("missing field `process`"), "{msg}");
}

#[test]
fn wrong_types_name_the_line() {
    for bad in [
        r#"{"index": "two", "time": 1, "process": 4, "type": "invoke", "f": "poll", "value": null}"#,
        r#"{"index": 2, "time": 1, "process": -4, "type": "invoke", "f": "poll", "value": null}"#,
        r#"{"index": 2, "time": 1, "process": 4, "type": "done", "f": "poll", "value": null}"#,
        r#"{"index": 2, "time": 1, "process": 4, "type": "invoke", "f": "read", "value": null}"#,
        r#"{"index": 2, "time": 1, "process": 4, "type": "ok", "f": "poll", "value": {"records": [{"topic": "t", "partition": 0, "offset": "42", "value": "v"}]}}"#,
        r#"{"index": 2, "time": 1, "process": 4, "type": "ok", "f": "poll", "value": [1, 2]}"#,
        r#"{"value": {"records": 7}, "index": 2, "time": 1, "process": 4, "type": "ok", "f": "poll"}"#,
        r#"[1, 2, 3]"#,
    ] {
        let e = error_of(&bad_line_3(bad));
        assert_eq!(e.line(), 3, "{bad}: {e}");
        assert!(matches!(e, HistoryError::Malformed { .. }), "{bad}: {e}");
    }
}

#[test]
fn values_that_do_not_fit_are_errors() {
    for (bad, needle) in [
        (
            r#"{"index": 2, "time": 1, "process": 4, "type": "ok", "f": "send", "value": {"topic": "t", "partition": 0, "value": "v"}}"#,
            "offset",
        ),
        (
            r#"{"index": 2, "time": 1, "process": 4, "type": "ok", "f": "poll", "value": null}"#,
            "records",
        ),
        (
            r#"{"index": 2, "time": 1, "process": 4, "type": "ok", "f": "poll"}"#,
            "records",
        ),
    ] {
        let msg = error_of(&bad_line_3(bad)).to_string();
        assert!(msg.starts_with("line 3"), "{msg}");
        assert!(msg.contains(needle), "{msg}");
    }
}

#[test]
fn duplicate_fields_are_errors() {
    let e = error_of(&bad_line_3(
        r#"{"index": 2, "index": 3, "time": 1, "process": 4, "type": "invoke", "f": "poll", "value": null}"#,
    ));
    assert!(e.to_string().contains("duplicate field `index`"), "{e}");
}

#[test]
fn indexes_must_increase() {
    let lines: Vec<&str> = SAMPLE.lines().collect();
    let text = format!("{}\n{}\n{}\n", lines[0], lines[1], lines[0]);
    let e = error_of(&text);
    assert!(matches!(e, HistoryError::Invalid { line: 3, .. }), "{e}");
}

#[test]
fn reader_stops_after_the_first_error() {
    let text = bad_line_3("{");
    let items: Vec<_> = HistoryReader::new(text.as_bytes()).collect();
    assert_eq!(items.len(), 3);
    assert!(items[..2].iter().all(|r| r.is_ok()));
    assert!(items[2].is_err());
}

#[test]
fn invalid_utf8_is_an_error_naming_the_line() {
    let mut bytes = SAMPLE.lines().next().unwrap().as_bytes().to_vec();
    bytes.push(b'\n');
    bytes.extend_from_slice(b"{\"index\": 1, \"time\": 1, \"process\": 1, \"type\": \"ok\", \"f\": \"send\", \"value\": {\"topic\": \"\xff\", \"partition\": 0, \"value\": \"v\", \"offset\": 0}}\n");
    let e = read_history(&bytes[..]).unwrap_err();
    assert_eq!(e.line(), 2, "{e}");
}

#[test]
fn writer_refuses_events_the_reader_would_reject() {
    let mut w = HistoryWriter::new(Vec::new());
    let no_offset = Value::Send(SendValue::new("t", 0, "v"));
    let err = w
        .write(1, 1, EventType::Ok, Function::Send, no_offset)
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("offset"), "{err}");
    let err = w
        .write(1, 1, EventType::Ok, Function::Poll, Value::Null)
        .unwrap_err();
    assert!(err.to_string().contains("records"), "{err}");
    assert_eq!(w.next_index(), 0);
    assert!(w.into_inner().unwrap().is_empty());
}
