//! History events: the JSON Lines format of `docs/history.md` as typed serde values.
//!
//! One [`Event`] per line. The shape of `value` depends on `f` (and, for `ok` sends and polls,
//! on `type`), so `Event` deserialises by hand: the `f` field picks the value's type, and a
//! `value` that arrives before `f` is buffered and converted afterwards. Unknown fields are
//! ignored so the format can grow without breaking old checkers.

use compact_str::CompactString;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

pub use crate::txn_value::{Isolation, MicroOp, PollRead, PollValueTxn, TxnValue};

/// Version of the history format described in `docs/history.md`. Version 2 added optional
/// fields (`acks` on sends, `kept` on assigns, `generation` on commits); a version-1 history
/// reads and is judged exactly as before.
pub const FORMAT_VERSION: u32 = 2;

/// Position of an event in its history (0-based when written by [`crate::HistoryWriter`]).
pub type Index = u64;
/// Nanoseconds since an arbitrary origin, simulated or real.
pub type Nanos = u64;
/// A client (process) id.
pub type Process = u64;
/// Record offset in a partition.
pub type Offset = u64;
/// Partition number within a topic.
pub type Partition = u32;
/// Topic names and record values are short strings: stored inline up to 24 bytes, so a
/// history in memory stays close to the size of its file.
pub type Text = CompactString;

/// Jepsen's completion types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventType {
    /// The operation started.
    Invoke,
    /// The operation happened.
    Ok,
    /// The operation certainly did not happen.
    Fail,
    /// Unknown whether the operation happened (e.g. a timeout).
    Info,
}

/// The operation an event belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Function {
    Send,
    Poll,
    Assign,
    Subscribe,
    Commit,
    /// The process restarted; its consumer position and producer state are forgotten.
    Crash,
    /// A transaction: micro-operations (sends, polls, offset commits) that commit or abort
    /// together (`docs/history.md`, "Transactions").
    Txn,
}

/// One line of a history.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    pub index: Index,
    pub time: Nanos,
    pub process: Process,
    #[serde(rename = "type")]
    pub kind: EventType,
    pub f: Function,
    pub value: Value,
}

/// The typed `value` of an event; which variant is allowed depends on `f`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Value {
    /// JSON `null`: poll invocations, crashes, and completions that carry nothing.
    Null,
    Send(SendValue),
    Poll(PollValue),
    Assign(AssignValue),
    Subscribe(SubscribeValue),
    Commit(CommitValue),
    /// Boxed: transactions are rare next to sends and polls, and an event stays small.
    Txn(Box<TxnValue>),
}

/// `send` value: what to write where; `offset` is set on `ok` completions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendValue {
    pub topic: Text,
    pub partition: Partition,
    pub value: Text,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<Offset>,
    /// The producer's acks setting; absent means unknown, judged as `all`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acks: Option<AckPromise>,
}

/// A producer's `acks` setting: what an acknowledgement promised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AckPromise {
    /// `acks=0`: nothing (the producer does not wait).
    None,
    /// `acks=1`: the leader appended the record; it may be lost with the leader.
    Leader,
    /// `acks=all` (`-1`): every in-sync replica has it; it must never be lost.
    All,
}

impl AckPromise {
    /// As written in histories: `"all"`, `"1"` or `"0"`.
    pub fn name(self) -> &'static str {
        match self {
            AckPromise::None => "0",
            AckPromise::Leader => "1",
            AckPromise::All => "all",
        }
    }

    /// Reads the forms Kafka configurations use: `"all"`, `"-1"`, `"1"`, `"0"`.
    pub fn parse(s: &str) -> Option<AckPromise> {
        Some(match s {
            "all" | "-1" => AckPromise::All,
            "1" => AckPromise::Leader,
            "0" => AckPromise::None,
            _ => return None,
        })
    }
}

impl Serialize for AckPromise {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for AckPromise {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct AcksVisitor;
        impl Visitor<'_> for AcksVisitor {
            type Value = AckPromise;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(r#"acks: "all", "1", "0" (or -1, 1, 0)"#)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<AckPromise, E> {
                AckPromise::parse(v).ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<AckPromise, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<AckPromise, E> {
                self.visit_str(&v.to_string())
            }
        }
        d.deserialize_any(AcksVisitor)
    }
}

/// `poll` ok value: the records in the order the client received them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PollValue {
    pub records: Vec<PolledRecord>,
}

/// One record returned by a poll.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolledRecord {
    pub topic: Text,
    pub partition: Partition,
    pub offset: Offset,
    pub value: Text,
}

/// `assign` value: the partitions the consumer now reads, as `[topic, partition]` pairs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssignValue {
    pub partitions: Vec<(Text, Partition)>,
    /// Partitions (among `partitions`) whose consumer position the assignment kept: the
    /// consumer goes on from where it was. Absent: every position starts afresh.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<(Text, Partition)>,
}

/// `subscribe` value: the consumer group and its topics.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscribeValue {
    pub group: Text,
    pub topics: Vec<Text>,
}

/// `commit` value: offsets committed for a group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitValue {
    pub group: Text,
    pub offsets: Vec<CommitOffset>,
    /// The group generation the member committed in; absent for commits outside a
    /// generation (an operator's or a manually assigned consumer's), which are not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u32>,
}

/// One committed offset (the next offset to read, as in Kafka).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitOffset {
    pub topic: Text,
    pub partition: Partition,
    pub offset: Offset,
}

impl Event {
    pub fn new(
        index: Index,
        time: Nanos,
        process: Process,
        kind: EventType,
        f: Function,
        value: Value,
    ) -> Self {
        Self {
            index,
            time,
            process,
            kind,
            f,
            value,
        }
    }

    /// The send value, if this is a send carrying one.
    pub fn send(&self) -> Option<&SendValue> {
        match &self.value {
            Value::Send(v) if self.f == Function::Send => Some(v),
            _ => None,
        }
    }

    /// The transaction's value, if this is a txn carrying one.
    pub fn txn(&self) -> Option<&TxnValue> {
        match &self.value {
            Value::Txn(t) if self.f == Function::Txn => Some(t),
            _ => None,
        }
    }

    /// The polled records, if this is a poll carrying them.
    pub fn records(&self) -> Option<&[PolledRecord]> {
        match &self.value {
            Value::Poll(v) if self.f == Function::Poll => Some(&v.records),
            _ => None,
        }
    }

    /// Checks the rules the format places on values beyond their JSON shape.
    pub fn validate(&self) -> Result<(), String> {
        let ok_value = match (self.f, &self.value) {
            (_, Value::Null) => {
                !(self.kind == EventType::Ok
                    && matches!(self.f, Function::Send | Function::Poll | Function::Txn))
            }
            (Function::Send, Value::Send(v)) => self.kind != EventType::Ok || v.offset.is_some(),
            (Function::Txn, Value::Txn(t)) => return t.validate(self.kind),
            (Function::Assign, Value::Assign(a)) => {
                if let Some(k) = a.kept.iter().find(|k| !a.partitions.contains(k)) {
                    return Err(format!(
                        "assign keeps partition [{:?}, {}] that it does not list in partitions",
                        k.0.as_str(),
                        k.1
                    ));
                }
                true
            }
            (Function::Poll, Value::Poll(_))
            | (Function::Subscribe, Value::Subscribe(_))
            | (Function::Commit, Value::Commit(_)) => true,
            _ => false,
        };
        if ok_value {
            return Ok(());
        }
        Err(match (self.kind, self.f) {
            (EventType::Ok, Function::Send) => {
                "an ok send needs a value with topic, partition, value and offset".to_string()
            }
            (EventType::Ok, Function::Poll) => "an ok poll needs a value with records".to_string(),
            (EventType::Ok, Function::Txn) => "an ok txn needs a value with ops".to_string(),
            (_, f) => format!("value does not fit f = {}", f.name()),
        })
    }
}

impl EventType {
    pub fn name(self) -> &'static str {
        match self {
            EventType::Invoke => "invoke",
            EventType::Ok => "ok",
            EventType::Fail => "fail",
            EventType::Info => "info",
        }
    }
}

impl Function {
    pub fn name(self) -> &'static str {
        match self {
            Function::Send => "send",
            Function::Poll => "poll",
            Function::Assign => "assign",
            Function::Subscribe => "subscribe",
            Function::Commit => "commit",
            Function::Crash => "crash",
            Function::Txn => "txn",
        }
    }
}

impl SendValue {
    pub fn new(topic: impl Into<Text>, partition: Partition, value: impl Into<Text>) -> Self {
        Self {
            topic: topic.into(),
            partition,
            value: value.into(),
            offset: None,
            acks: None,
        }
    }

    pub fn at(mut self, offset: Offset) -> Self {
        self.offset = Some(offset);
        self
    }

    pub fn with_acks(mut self, acks: AckPromise) -> Self {
        self.acks = Some(acks);
        self
    }
}

impl PolledRecord {
    pub fn new(
        topic: impl Into<Text>,
        partition: Partition,
        offset: Offset,
        value: impl Into<Text>,
    ) -> Self {
        Self {
            topic: topic.into(),
            partition,
            offset,
            value: value.into(),
        }
    }
}

// ---- Deserialisation: `f` decides the type of `value`. ----

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Field {
    Index,
    Time,
    Process,
    Type,
    F,
    Value,
    #[serde(other)]
    Other,
}

/// Deserialises a `value` for a known `f`: `null` is always accepted (validation decides later).
struct ValueSeed(Function);

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Ok(match self.0 {
            Function::Send => Option::<SendValue>::deserialize(d)?.map_or(Value::Null, Value::Send),
            Function::Poll => Option::<PollValue>::deserialize(d)?.map_or(Value::Null, Value::Poll),
            Function::Assign => {
                Option::<AssignValue>::deserialize(d)?.map_or(Value::Null, Value::Assign)
            }
            Function::Subscribe => {
                Option::<SubscribeValue>::deserialize(d)?.map_or(Value::Null, Value::Subscribe)
            }
            Function::Commit => {
                Option::<CommitValue>::deserialize(d)?.map_or(Value::Null, Value::Commit)
            }
            Function::Txn => {
                Option::<TxnValue>::deserialize(d)?.map_or(Value::Null, |t| Value::Txn(Box::new(t)))
            }
            Function::Crash => {
                // A crash carries no meaning in its value; accept anything.
                IgnoredAny::deserialize(d)?;
                Value::Null
            }
        })
    }
}

enum PendingValue {
    Absent,
    Typed(Value),
    /// `value` came before `f`: kept as generic JSON until `f` is known.
    Raw(serde_json::Value),
}

struct EventVisitor;

impl<'de> Visitor<'de> for EventVisitor {
    type Value = Event;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a history event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Event, A::Error> {
        let mut index = None;
        let mut time = None;
        let mut process = None;
        let mut kind = None;
        let mut f: Option<Function> = None;
        let mut value = PendingValue::Absent;
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Index => set(&mut index, "index", map.next_value()?)?,
                Field::Time => set(&mut time, "time", map.next_value()?)?,
                Field::Process => set(&mut process, "process", map.next_value()?)?,
                Field::Type => set(&mut kind, "type", map.next_value()?)?,
                Field::F => set(&mut f, "f", map.next_value()?)?,
                Field::Value => {
                    if !matches!(value, PendingValue::Absent) {
                        return Err(de::Error::duplicate_field("value"));
                    }
                    value = match f {
                        Some(func) => PendingValue::Typed(map.next_value_seed(ValueSeed(func))?),
                        None => PendingValue::Raw(map.next_value()?),
                    };
                }
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let f = f.ok_or_else(|| de::Error::missing_field("f"))?;
        let value = match value {
            // An absent value reads as null; validation rejects it where a value is needed.
            PendingValue::Absent => Value::Null,
            PendingValue::Typed(v) => v,
            PendingValue::Raw(raw) => ValueSeed(f)
                .deserialize(raw)
                .map_err(|e| de::Error::custom(format!("invalid value: {e}")))?,
        };
        let event = Event {
            index: index.ok_or_else(|| de::Error::missing_field("index"))?,
            time: time.ok_or_else(|| de::Error::missing_field("time"))?,
            process: process.ok_or_else(|| de::Error::missing_field("process"))?,
            kind: kind.ok_or_else(|| de::Error::missing_field("type"))?,
            f,
            value,
        };
        event.validate().map_err(de::Error::custom)?;
        Ok(event)
    }
}

fn set<T, E: de::Error>(slot: &mut Option<T>, name: &'static str, v: T) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::duplicate_field(name));
    }
    *slot = Some(v);
    Ok(())
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EventVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory per event matters (the checker holds the whole history): keep an eye on it.
    #[test]
    fn event_sizes() {
        assert!(
            std::mem::size_of::<Event>() <= 112,
            "{}",
            std::mem::size_of::<Event>()
        );
        assert!(std::mem::size_of::<PolledRecord>() <= 64);
        eprintln!(
            "Event {} bytes, PolledRecord {} bytes",
            std::mem::size_of::<Event>(),
            std::mem::size_of::<PolledRecord>()
        );
    }
}
