//! A small builder for hand-written histories: each call appends the events of one operation
//! with the next indexes, on topic "t".
#![allow(dead_code)]

use skein_jepsen::{
    check, AckPromise, AssignValue, CheckOptions, CommitOffset, CommitValue, Event, EventType,
    Function, PollValue, PolledRecord, Report, SendValue, SubscribeValue, Value,
};

#[derive(Default)]
pub struct H {
    pub events: Vec<Event>,
}

impl H {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, process: u64, kind: EventType, f: Function, value: Value) -> u64 {
        let index = self.events.len() as u64;
        self.events
            .push(Event::new(index, index * 10, process, kind, f, value));
        index
    }

    /// An acknowledged send: invoke then ok at `offset`. Returns the ok's index.
    pub fn send(&mut self, process: u64, partition: u32, value: &str, offset: u64) -> u64 {
        let v = SendValue::new("t", partition, value);
        self.push(
            process,
            EventType::Invoke,
            Function::Send,
            Value::Send(v.clone()),
        );
        self.push(
            process,
            EventType::Ok,
            Function::Send,
            Value::Send(v.at(offset)),
        )
    }

    /// An acknowledged send with an explicit acks level. Returns the ok's index.
    pub fn send_acks(
        &mut self,
        process: u64,
        partition: u32,
        value: &str,
        offset: u64,
        acks: AckPromise,
    ) -> u64 {
        let v = SendValue::new("t", partition, value).with_acks(acks);
        self.push(
            process,
            EventType::Invoke,
            Function::Send,
            Value::Send(v.clone()),
        );
        self.push(
            process,
            EventType::Ok,
            Function::Send,
            Value::Send(v.at(offset)),
        )
    }

    /// A send completed with `kind` (info or fail): no offset known.
    pub fn send_unacked(&mut self, process: u64, partition: u32, value: &str, kind: EventType) {
        let v = SendValue::new("t", partition, value);
        self.push(
            process,
            EventType::Invoke,
            Function::Send,
            Value::Send(v.clone()),
        );
        self.push(process, kind, Function::Send, Value::Send(v));
    }

    /// An ok poll returning `records` as (partition, offset, value). Returns the ok's index.
    pub fn poll(&mut self, process: u64, records: &[(u32, u64, &str)]) -> u64 {
        self.push(process, EventType::Invoke, Function::Poll, Value::Null);
        let records = records
            .iter()
            .map(|&(p, o, v)| PolledRecord::new("t", p, o, v))
            .collect();
        self.push(
            process,
            EventType::Ok,
            Function::Poll,
            Value::Poll(PollValue { records }),
        )
    }

    /// A poll that timed out.
    pub fn poll_info(&mut self, process: u64) {
        self.push(process, EventType::Invoke, Function::Poll, Value::Null);
        self.push(process, EventType::Info, Function::Poll, Value::Null);
    }

    /// A poll completed with `kind` that still reports `records`. Returns the completion.
    pub fn poll_as(&mut self, process: u64, kind: EventType, records: &[(u32, u64, &str)]) -> u64 {
        self.push(process, EventType::Invoke, Function::Poll, Value::Null);
        let records = records
            .iter()
            .map(|&(p, o, v)| PolledRecord::new("t", p, o, v))
            .collect();
        self.push(
            process,
            kind,
            Function::Poll,
            Value::Poll(PollValue { records }),
        )
    }

    /// An assign completed with `kind`, keeping the positions of `kept` (ok only).
    pub fn assign_as(&mut self, process: u64, kind: EventType, partitions: &[u32], kept: &[u32]) {
        let v = AssignValue {
            partitions: partitions.iter().map(|&p| ("t".into(), p)).collect(),
            kept: kept.iter().map(|&p| ("t".into(), p)).collect(),
        };
        self.push(
            process,
            EventType::Invoke,
            Function::Assign,
            Value::Assign(v.clone()),
        );
        self.push(process, kind, Function::Assign, Value::Assign(v));
    }

    /// A subscribe completed with `kind`.
    pub fn subscribe_as(&mut self, process: u64, kind: EventType) {
        let v = SubscribeValue {
            group: "g".into(),
            topics: vec!["t".into()],
        };
        self.push(
            process,
            EventType::Invoke,
            Function::Subscribe,
            Value::Subscribe(v.clone()),
        );
        self.push(process, kind, Function::Subscribe, Value::Subscribe(v));
    }

    /// A group commit of `offset` for partition 0 of group "g": invoke, then `ok`. Returns
    /// the ok's index.
    pub fn commit(&mut self, process: u64, offset: u64, generation: Option<u32>) -> u64 {
        self.commit_invoke(process);
        self.commit_ok(process, offset, generation)
    }

    pub fn commit_invoke(&mut self, process: u64) -> u64 {
        self.push(process, EventType::Invoke, Function::Commit, Value::Null)
    }

    pub fn commit_ok(&mut self, process: u64, offset: u64, generation: Option<u32>) -> u64 {
        let v = CommitValue {
            group: "g".into(),
            offsets: vec![CommitOffset {
                topic: "t".into(),
                partition: 0,
                offset,
            }],
            generation,
        };
        self.push(process, EventType::Ok, Function::Commit, Value::Commit(v))
    }

    pub fn assign(&mut self, process: u64, partitions: &[u32]) {
        let v = AssignValue {
            partitions: partitions.iter().map(|&p| ("t".into(), p)).collect(),
            ..AssignValue::default()
        };
        self.push(
            process,
            EventType::Invoke,
            Function::Assign,
            Value::Assign(v.clone()),
        );
        self.push(process, EventType::Ok, Function::Assign, Value::Assign(v));
    }

    pub fn subscribe(&mut self, process: u64) {
        let v = SubscribeValue {
            group: "g".into(),
            topics: vec!["t".into()],
        };
        self.push(
            process,
            EventType::Invoke,
            Function::Subscribe,
            Value::Subscribe(v.clone()),
        );
        self.push(
            process,
            EventType::Ok,
            Function::Subscribe,
            Value::Subscribe(v),
        );
    }

    pub fn crash(&mut self, process: u64) {
        self.push(process, EventType::Info, Function::Crash, Value::Null);
    }

    pub fn check(&self) -> Report {
        check(&self.events, &CheckOptions::default())
    }

    pub fn check_final(&self) -> Report {
        check(&self.events, &CheckOptions::default().final_reads(true))
    }

    pub fn check_strict(&self) -> Report {
        check(&self.events, &CheckOptions::default().strict(true))
    }
}
