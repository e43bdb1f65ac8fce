//! A fast path for reading the common events: sends and polls as `HistoryWriter` writes them.
//!
//! serde_json through the generic `Event` visitor reads ~100 MB/s; the checker's budget is a
//! million events a second. This parser handles the frequent shapes (any field order and
//! whitespace, no escapes, no extra fields) and gives up, returning `None`, on anything else:
//! the caller then parses the line with serde, which is the authority on every result and
//! every error message. So the fast path only has to be right when it says yes; a
//! differential test checks that it agrees with serde whenever it does.

use crate::history::{
    AckPromise, Event, EventType, Function, Partition, PollValue, PolledRecord, SendValue, Text,
    Value,
};

/// Parses one line, or `None` if the line is anything but a plain, valid send/poll/crash.
pub(crate) fn parse_line(line: &[u8]) -> Option<Event> {
    // One UTF-8 check per line; strings are then sliced at ASCII quotes, always boundaries.
    let text = std::str::from_utf8(line).ok()?;
    let mut p = Parser {
        s: text,
        b: line,
        i: 0,
    };
    let event = p.event()?;
    p.ws();
    if p.i != line.len() {
        return None;
    }
    Some(event)
}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.i) {
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        if self.peek()? == c {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    /// A string without escapes or control characters, as valid UTF-8.
    fn str(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        loop {
            let c = *self.b.get(self.i)?;
            match c {
                b'"' => break,
                b'\\' | 0..=0x1f => return None,
                _ => self.i += 1,
            }
        }
        let s = self.s.get(start..self.i)?;
        self.i += 1;
        Some(s)
    }

    fn text(&mut self) -> Option<Text> {
        self.str().map(Text::new)
    }

    /// A non-negative integer as JSON writes it (no sign, no leading zero, no fraction).
    fn u64(&mut self) -> Option<u64> {
        self.ws();
        let start = self.i;
        let mut n: u64 = 0;
        while let Some(&c) = self.b.get(self.i) {
            if !c.is_ascii_digit() {
                break;
            }
            n = n.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
            self.i += 1;
        }
        let digits = self.i - start;
        if digits == 0 || (digits > 1 && self.b[start] == b'0') {
            return None;
        }
        if matches!(self.b.get(self.i), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(n)
    }

    fn u32(&mut self) -> Option<Partition> {
        Partition::try_from(self.u64()?).ok()
    }

    fn null(&mut self) -> Option<()> {
        self.ws();
        if self.b[self.i..].starts_with(b"null") {
            self.i += 4;
            Some(())
        } else {
            None
        }
    }

    /// Calls `field` for each key of an object; stops at its end.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let key = self.str()?;
            self.eat(b':')?;
            field(self, key)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn event(&mut self) -> Option<Event> {
        let mut index = None;
        let mut time = None;
        let mut process = None;
        let mut kind = None;
        let mut f = None;
        let mut value = None;
        self.object(|p, key| {
            match key {
                "index" => once(&mut index, p.u64()?),
                "time" => once(&mut time, p.u64()?),
                "process" => once(&mut process, p.u64()?),
                "type" => once(&mut kind, event_type(p.str()?)?),
                "f" => once(&mut f, function(p.str()?)?),
                // The value's type depends on f; an early value is left to serde.
                "value" => once(&mut value, p.value(f?)?),
                _ => None,
            }
        })?;
        let event = Event {
            index: index?,
            time: time?,
            process: process?,
            kind: kind?,
            f: f?,
            value: value?,
        };
        event.validate().ok()?;
        Some(event)
    }

    fn value(&mut self, f: Function) -> Option<Value> {
        if self.peek()? == b'n' {
            self.null()?;
            return Some(Value::Null);
        }
        match f {
            Function::Send => self.send().map(Value::Send),
            Function::Poll => self.poll().map(Value::Poll),
            _ => None,
        }
    }

    fn send(&mut self) -> Option<SendValue> {
        let (mut topic, mut partition, mut value, mut offset) = (None, None, None, None);
        let mut acks = None;
        self.object(|p, key| match key {
            "topic" => once(&mut topic, p.text()?),
            "partition" => once(&mut partition, p.u32()?),
            "value" => once(&mut value, p.text()?),
            "offset" => once(&mut offset, p.u64()?),
            // The string forms only; numbers are left to serde.
            "acks" => once(&mut acks, AckPromise::parse(p.str()?)?),
            _ => None,
        })?;
        Some(SendValue {
            topic: topic?,
            partition: partition?,
            value: value?,
            offset,
            acks,
        })
    }

    fn poll(&mut self) -> Option<PollValue> {
        let mut records = None;
        self.object(|p, key| match key {
            "records" => once(&mut records, p.records()?),
            _ => None,
        })?;
        Some(PollValue { records: records? })
    }

    fn records(&mut self) -> Option<Vec<PolledRecord>> {
        self.eat(b'[')?;
        let mut records = Vec::new();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(records);
        }
        loop {
            records.push(self.record()?);
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(records);
                }
                _ => return None,
            }
        }
    }

    fn record(&mut self) -> Option<PolledRecord> {
        let (mut topic, mut partition, mut offset, mut value) = (None, None, None, None);
        self.object(|p, key| match key {
            "topic" => once(&mut topic, p.text()?),
            "partition" => once(&mut partition, p.u32()?),
            "offset" => once(&mut offset, p.u64()?),
            "value" => once(&mut value, p.text()?),
            _ => None,
        })?;
        Some(PolledRecord {
            topic: topic?,
            partition: partition?,
            offset: offset?,
            value: value?,
        })
    }
}

/// Sets a field seen for the first time; a duplicate key is left to serde's error.
fn once<T>(slot: &mut Option<T>, v: T) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(v);
    Some(())
}

fn event_type(s: &str) -> Option<EventType> {
    Some(match s {
        "invoke" => EventType::Invoke,
        "ok" => EventType::Ok,
        "fail" => EventType::Fail,
        "info" => EventType::Info,
        _ => return None,
    })
}

fn function(s: &str) -> Option<Function> {
    Some(match s {
        "send" => Function::Send,
        "poll" => Function::Poll,
        "assign" => Function::Assign,
        "subscribe" => Function::Subscribe,
        "commit" => Function::Commit,
        "crash" => Function::Crash,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{AssignValue, Process};
    use proptest::prelude::*;

    fn serde(line: &[u8]) -> Option<Event> {
        serde_json::from_slice(line).ok()
    }

    #[test]
    fn parses_what_the_writer_writes() {
        let events = [
            Event::new(
                0,
                1,
                2,
                EventType::Invoke,
                Function::Send,
                Value::Send(SendValue::new("t", 3, "2-17")),
            ),
            Event::new(
                1,
                2,
                2,
                EventType::Ok,
                Function::Send,
                Value::Send(
                    SendValue::new("t", 3, "2-17")
                        .at(9)
                        .with_acks(AckPromise::Leader),
                ),
            ),
            Event::new(2, 3, 4, EventType::Invoke, Function::Poll, Value::Null),
            Event::new(
                3,
                4,
                4,
                EventType::Ok,
                Function::Poll,
                Value::Poll(PollValue {
                    records: vec![
                        PolledRecord::new("t", 3, 9, "2-17"),
                        PolledRecord::new("tö", 0, 0, "x"),
                    ],
                }),
            ),
            Event::new(4, 5, 4, EventType::Info, Function::Crash, Value::Null),
        ];
        for e in events {
            let line = serde_json::to_vec(&e).unwrap();
            assert_eq!(parse_line(&line), Some(e));
        }
    }

    #[test]
    fn gives_up_on_what_it_does_not_handle() {
        for line in [
            r#"{"index":0,"time":1,"process":2,"type":"ok","f":"assign","value":{"partitions":[["t",0]]}}"#,
            r#"{"value":null,"index":0,"time":1,"process":2,"type":"invoke","f":"poll"}"#,
            r#"{"index":0,"time":1,"process":2,"type":"invoke","f":"poll","value":null,"extra":1}"#,
            r#"{"index":0,"time":1,"process":2,"type":"invoke","f":"send","value":{"topic":"t\"","partition":0,"value":"v"}}"#,
            r#"{"index":01,"time":1,"process":2,"type":"invoke","f":"poll","value":null}"#,
            r#"{"index":1.5,"time":1,"process":2,"type":"invoke","f":"poll","value":null}"#,
            r#"{"index":1,"time":1,"process":2,"type":"ok","f":"poll","value":null}"#,
            r#"{"index":1,"time":1,"process":2,"type":"invoke","f":"poll","value":null} x"#,
            r#"{"index":1,"index":1,"time":1,"process":2,"type":"invoke","f":"poll","value":null}"#,
            r#"{"index":1,"time":1,"process":2,"type":"invoke","f":"poll","value":nul"#,
            r#"{"index":1,"time":1,"process":99999999999999999999,"type":"invoke","f":"poll","value":null}"#,
        ] {
            assert_eq!(parse_line(line.as_bytes()), None, "{line}");
        }
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9-]{0,30}",
            any::<String>(),
            Just("q\"uote\\".to_string()),
        ]
    }

    fn event() -> impl Strategy<Value = Event> {
        let kind = prop_oneof![
            Just(EventType::Invoke),
            Just(EventType::Ok),
            Just(EventType::Fail),
            Just(EventType::Info)
        ];
        let record = (text(), any::<u32>(), any::<u64>(), text())
            .prop_map(|(t, p, o, v)| PolledRecord::new(t, p, o, v));
        let value = prop_oneof![
            Just((Function::Poll, Value::Null)),
            Just((Function::Crash, Value::Null)),
            (text(), any::<u32>(), text(), any::<Option<u64>>(), 0..4u8).prop_map(
                |(t, p, v, o, a)| {
                    let mut s = SendValue::new(t, p, v);
                    s.offset = o;
                    s.acks = [
                        None,
                        Some(AckPromise::None),
                        Some(AckPromise::Leader),
                        Some(AckPromise::All),
                    ][a as usize];
                    (Function::Send, Value::Send(s))
                }
            ),
            prop::collection::vec(record, 0..4)
                .prop_map(|records| (Function::Poll, Value::Poll(PollValue { records }))),
            (text(), any::<u32>()).prop_map(|(t, p)| (
                Function::Assign,
                Value::Assign(AssignValue {
                    partitions: vec![(t.into(), p)],
                    ..AssignValue::default()
                })
            )),
        ];
        (any::<u64>(), any::<u64>(), any::<Process>(), kind, value)
            .prop_map(|(i, t, p, k, (f, v))| Event::new(i, t, p, k, f, v))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Whenever the fast path accepts a line, serde reads the same event from it.
        #[test]
        fn agrees_with_serde(e in event(), cut in any::<prop::sample::Index>(), byte in any::<u8>(), pretty in any::<bool>()) {
            let line = if pretty { serde_json::to_vec_pretty(&e).unwrap() } else { serde_json::to_vec(&e).unwrap() };
            if let Some(fast) = parse_line(&line) {
                prop_assert_eq!(Some(fast.clone()), serde(&line));
                prop_assert_eq!(fast, e);
            }
            // A corrupted line: if the fast path still says yes, serde must agree exactly.
            let mut bad = line.clone();
            let at = cut.index(bad.len());
            bad[at] = byte;
            if let Some(fast) = parse_line(&bad) {
                prop_assert_eq!(Some(fast), serde(&bad));
            }
            let truncated = &line[..at];
            if let Some(fast) = parse_line(truncated) {
                prop_assert_eq!(Some(fast), serde(truncated));
            }
        }
    }
}
