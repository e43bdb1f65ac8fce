//! The workload's clients: producers, one consumer per partition and the final reads, each
//! recording its operations in the shared history (`D/history.jsonl`).

use super::TOPIC;
use anyhow::Context;
use skein_core::message::Acks;
use skein_core::txn::IsolationLevel;
use skein_core::types::TopicPartition;
use skein_jepsen::{
    AckPromise, EventType, Function, HistoryWriter, Isolation, PollRead, PollValue, PolledRecord,
    SendValue, TxnValue, Value,
};
use skein_node::client::{Client, ClientError, ClientOptions};
use skein_node::config::ClusterAddresses;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The history file, shared by the client tasks; times are ns since the run started.
pub struct Recorder {
    pub writer: HistoryWriter<std::io::BufWriter<std::fs::File>>,
    pub start: Instant,
}

impl Recorder {
    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
    fn record(&mut self, process: u64, kind: EventType, f: Function, value: Value) {
        let t = self.now();
        if let Err(e) = self.writer.write(t, process, kind, f, value) {
            tracing::error!(error = %e, "cannot write the history");
        }
    }
}

pub type Shared = Arc<Mutex<Recorder>>;

pub fn rec(r: &Shared, process: u64, kind: EventType, f: Function, value: Value) {
    r.lock()
        .expect("recorder lock")
        .record(process, kind, f, value)
}

pub fn client_options() -> ClientOptions {
    ClientOptions {
        request_timeout: Duration::from_secs(2),
        retry_for: Duration::from_secs(4),
        retry_backoff: Duration::from_millis(100),
        ..ClientOptions::default()
    }
}

/// What every client task shares.
#[derive(Clone)]
pub struct Ctx {
    pub cluster: ClusterAddresses,
    pub recorder: Shared,
    pub stop: Arc<AtomicBool>,
    pub next_process: Arc<AtomicU64>,
    /// What each history process is (`producer 1`, `group member 2 of jepsen-0`), for the
    /// timeline's rows.
    pub roles: Arc<Mutex<BTreeMap<u64, String>>>,
}

impl Ctx {
    /// Names history process `process` by its role.
    pub fn name(&self, process: u64, role: String) {
        self.roles.lock().expect("roles lock").insert(process, role);
    }
}

/// One producer: acks=all, idempotent, its n-th value sent to partition n mod the
/// partition count; a send that errs is `info` (it may have been written), and the process
/// is then replaced by a new one with a new producer id, as Jepsen does with crashed
/// processes.
pub async fn producer(first: u64, tps: Vec<TopicPartition>, rate: f64, ctx: Ctx) {
    let period = Duration::from_secs_f64(1.0 / rate);
    let r = &ctx.recorder;
    let mut process = first;
    let role = format!("producer {}", first + 1);
    ctx.name(process, role.clone());
    let mut seq = 0u64;
    let mut client: Option<Client> = None;
    while !ctx.stop.load(Ordering::SeqCst) {
        let c = match client.as_mut() {
            Some(c) => c,
            None => {
                let mut c = Client::new(ctx.cluster.clone(), client_options());
                if c.enable_idempotence().await.is_err() {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
                client.insert(c)
            }
        };
        let tp = &tps[(seq % tps.len() as u64) as usize];
        let value = format!("{process}-{seq}");
        seq += 1;
        let mut send = SendValue::new(TOPIC, tp.partition, value.as_str());
        send.acks = Some(AckPromise::All);
        let send_event = |kind, send: &SendValue| {
            rec(r, process, kind, Function::Send, Value::Send(send.clone()))
        };
        send_event(EventType::Invoke, &send);
        let t = Instant::now();
        match c.produce(tp, vec![value.into_bytes()], Acks::All).await {
            Ok(p) => {
                send.offset = p.base_offset;
                let kind = if p.base_offset.is_some() {
                    EventType::Ok
                } else {
                    EventType::Info
                };
                send_event(kind, &send);
            }
            Err(_) => {
                send_event(EventType::Info, &send);
                process = ctx.next_process.fetch_add(1, Ordering::SeqCst);
                ctx.name(process, role.clone());
                seq = 0;
                client = None;
            }
        }
        if let Some(rest) = period.checked_sub(t.elapsed()) {
            tokio::time::sleep(rest).await;
        }
    }
}

fn polled(partition: u32, records: Vec<(u64, Option<Vec<u8>>)>) -> Vec<PolledRecord> {
    records
        .into_iter()
        .map(|(offset, v)| PolledRecord {
            topic: TOPIC.into(),
            partition,
            offset,
            value: String::from_utf8_lossy(&v.unwrap_or_default())
                .as_ref()
                .into(),
        })
        .collect()
}

/// A consumer following one partition from offset 0. A fetch that errs is a `fail` poll:
/// a fetch changes nothing and reported nothing, and the next one starts at the same place.
pub async fn consumer(process: u64, tp: TopicPartition, isolation: IsolationLevel, ctx: Ctx) {
    let r = &ctx.recorder;
    let mut client = Client::new(ctx.cluster.clone(), client_options());
    client.set_isolation(isolation);
    let mut position = 0;
    while !ctx.stop.load(Ordering::SeqCst) {
        match poll(&mut client, r, process, &tp, position, 256 * 1024).await {
            Ok(p) => {
                position = p.next;
                if p.read == 0 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// One recorded poll of `tp` from `position`: the invocation, then an `ok` poll with the
/// records read or a `fail` (a failed fetch changes nothing and reports nothing). A
/// read_committed client's poll is a `txn` holding one poll micro-operation whose `end`
/// is the last stable offset, as the transactional checker wants (docs/history.md).
async fn poll(
    client: &mut Client,
    r: &Shared,
    process: u64,
    tp: &TopicPartition,
    position: u64,
    max_bytes: usize,
) -> Result<Polled, ClientError> {
    let committed = client.isolation() == IsolationLevel::ReadCommitted;
    let (f, empty) = if committed {
        let v = TxnValue::new(Isolation::ReadCommitted).poll(Vec::new());
        (Function::Txn, Value::Txn(Box::new(v)))
    } else {
        (Function::Poll, Value::Null)
    };
    rec(r, process, EventType::Invoke, f, empty.clone());
    match client.fetch_next(tp, position, max_bytes).await {
        Ok(fetched) => {
            let p = Polled {
                next: fetched.next_offset,
                high_watermark: fetched.high_watermark,
                end: if committed {
                    fetched.last_stable_offset
                } else {
                    fetched.high_watermark
                },
                read: fetched.records.len(),
            };
            let records = polled(tp.partition, fetched.records);
            let value = if committed {
                let mut read = PollRead::new(TOPIC, tp.partition).end(p.end);
                read.records = records.into_iter().map(|r| (r.offset, r.value)).collect();
                let v = TxnValue::new(Isolation::ReadCommitted).poll(vec![read]);
                Value::Txn(Box::new(v))
            } else {
                Value::Poll(PollValue { records })
            };
            rec(r, process, EventType::Ok, f, value);
            Ok(p)
        }
        Err(e) => {
            rec(r, process, EventType::Fail, f, empty);
            Err(e)
        }
    }
}

/// Where a [`poll`] left the reader.
struct Polled {
    next: u64,
    high_watermark: u64,
    /// Where this reader's view ends: the high watermark, or for read_committed the last
    /// stable offset.
    end: u64,
    read: usize,
}

/// After recovery: a new process per partition reads it from 0 to its high watermark (for
/// read_committed, until the last stable offset has reached it: open transactions time
/// out and are aborted by their coordinators meanwhile).
pub async fn final_reads(
    tps: &[TopicPartition],
    isolation: IsolationLevel,
    ctx: &Ctx,
) -> anyhow::Result<()> {
    for tp in tps {
        let process = ctx.next_process.fetch_add(1, Ordering::SeqCst);
        ctx.name(process, format!("final reads of {tp}"));
        final_read(process, tp, isolation, ctx)
            .await
            .with_context(|| format!("final reads of {tp}"))?;
    }
    Ok(())
}

async fn final_read(
    process: u64,
    tp: &TopicPartition,
    isolation: IsolationLevel,
    ctx: &Ctx,
) -> anyhow::Result<()> {
    let r = &ctx.recorder;
    let mut client = Client::new(ctx.cluster.clone(), client_options());
    client.set_isolation(isolation);
    let mut position = 0;
    let started = Instant::now();
    loop {
        match poll(&mut client, r, process, tp, position, 1 << 20).await {
            Ok(p) => {
                position = p.next;
                if p.next >= p.high_watermark {
                    return Ok(());
                }
                if p.read == 0 && p.end < p.high_watermark {
                    // Held at an open transaction's first offset until it ends.
                    if started.elapsed() > Duration::from_secs(60) {
                        anyhow::bail!(
                            "the last stable offset stayed at {} below the high watermark {} for 60 s",
                            p.end,
                            p.high_watermark
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
            Err(e) => {
                if started.elapsed() > Duration::from_secs(30) {
                    return Err(e).context("final reads failed for 30 s");
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
