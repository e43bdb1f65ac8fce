//! The transactional workload (`skein jepsen run --workload txn`): transactional producers
//! (core's `TransactionalProducer` on real connections, `TxnClient`) write 1-3 records to
//! 1-2 partitions per transaction and commit, or abort on purpose (one in five, drawn from
//! the run's seed); the consumers and the final reads are read_committed. Every
//! transaction is one `txn` operation in the history: `invoke` with its sends, then `ok`
//! (committed, every send with its offset), `fail` (aborted) or `info` (the outcome is
//! unknown: the producer timed out or was fenced; the next instance of the same
//! transactional id fences it, and the coordinator aborts it if it was still open).

use super::clients::{rec, Ctx};
use super::TOPIC;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skein_core::client::txn_producer::TxnProducerConfig;
use skein_core::log::RecordBatch;
use skein_core::types::TopicPartition;
use skein_jepsen::{AckPromise, EventType, Function, Isolation, SendValue, TxnValue, Value};
use skein_node::txn_client::{TxnClient, TxnHostError};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// `transaction.timeout.ms`: short, so a transaction a killed coordinator or a fenced
/// producer left open is aborted well before the final reads give up on it.
const TRANSACTION_TIMEOUT_MS: u32 = 5_000;
/// How long one init, commit or abort may take before its outcome is called unknown.
const CALL_WAIT: Duration = Duration::from_secs(8);
/// Share of transactions aborted on purpose.
const ABORT_SHARE: f64 = 0.2;

fn new_client(ctx: &Ctx, id: &str) -> TxnClient {
    let mut config = TxnProducerConfig::new(id);
    config.transaction_timeout_ms = TRANSACTION_TIMEOUT_MS;
    config.request_timeout = 2_000_000_000;
    config.produce_timeout = 2_000_000_000;
    TxnClient::new(ctx.cluster.clone(), config)
}

fn txn_value(id: &str, sends: &[SendValue]) -> Value {
    let mut v = TxnValue::new(Isolation::ReadCommitted);
    v.id = Some(id.into());
    for s in sends {
        v = v.send(s.clone());
    }
    Value::Txn(Box::new(v))
}

/// Transactional producer `index` (transactional id `jepsen-txn-{index}`), first as
/// process `first`; `rate` transactions per second.
pub async fn producer(
    index: u64,
    first: u64,
    tps: Vec<TopicPartition>,
    rate: f64,
    seed: u64,
    ctx: Ctx,
) {
    let period = Duration::from_secs_f64(1.0 / rate);
    let id = format!("jepsen-txn-{index}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (0x7478_6e00 + index));
    let r = &ctx.recorder;
    let mut process = first;
    let role = format!("producer {} ({id})", index + 1);
    ctx.name(process, role.clone());
    let mut seq = 0u64;
    let mut client: Option<TxnClient> = None;
    while !ctx.stop.load(Ordering::SeqCst) {
        let t = Instant::now();
        let c = match client.as_mut() {
            Some(c) => c,
            None => {
                let mut c = new_client(&ctx, &id);
                if c.init(CALL_WAIT).await.is_err() {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
                client.insert(c)
            }
        };
        // This transaction's sends: 1-3 records over 1-2 partitions.
        let parts = rng.gen_range(1..=2usize.min(tps.len()));
        let first_part = rng.gen_range(0..tps.len());
        let mut sends: Vec<SendValue> = (0..rng.gen_range(1..=3usize))
            .map(|j| {
                let tp = &tps[(first_part + j % parts) % tps.len()];
                let value = format!("{process}-{seq}-{j}");
                let mut s = SendValue::new(TOPIC, tp.partition, value.as_str());
                s.acks = Some(AckPromise::All);
                s
            })
            .collect();
        seq += 1;
        let abort = rng.gen_bool(ABORT_SHARE);
        rec(
            r,
            process,
            EventType::Invoke,
            Function::Txn,
            txn_value(&id, &sends),
        );
        let outcome = run_one(c, &sends, abort).await;
        let kind = match outcome {
            Ok(Some(offsets)) => {
                for (s, o) in sends.iter_mut().zip(offsets) {
                    s.offset = Some(o);
                }
                EventType::Ok
            }
            Ok(None) => EventType::Fail,
            Err(e) => {
                tracing::info!(error = %e, process, "transaction outcome unknown; new producer instance");
                EventType::Info
            }
        };
        rec(r, process, kind, Function::Txn, txn_value(&id, &sends));
        if kind == EventType::Info {
            // A new instance of the same transactional id: its init fences this one.
            process = ctx.next_process.fetch_add(1, Ordering::SeqCst);
            ctx.name(process, role.clone());
            seq = 0;
            client = None;
        }
        if let Some(rest) = period.checked_sub(t.elapsed()) {
            tokio::time::sleep(rest).await;
        }
    }
}

/// One transaction: `Some(offsets)` (in send order) if it committed, `None` if it was
/// aborted (on purpose or after an abortable error), `Err` if its outcome is unknown.
async fn run_one(
    c: &mut TxnClient,
    sends: &[SendValue],
    abort: bool,
) -> Result<Option<Vec<u64>>, TxnHostError> {
    c.begin()?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    for s in sends {
        let tp = TopicPartition::new(TOPIC, s.partition);
        let batch = RecordBatch::from_values(now_ms, [s.value.as_bytes().to_vec()]);
        if let Err(e) = c.send(tp, batch).await {
            return abort_after(c, e).await;
        }
    }
    if abort {
        // Written first, so the aborted records really are in the log for readers to skip.
        if let Err(e) = c.wait_written(CALL_WAIT).await {
            return abort_after(c, e).await;
        }
        c.abort(CALL_WAIT).await?;
        return Ok(None);
    }
    let written = match c.commit(CALL_WAIT).await {
        Ok(w) => w,
        Err(e) => return abort_after(c, e).await,
    };
    // Each send is a batch of one record; a partition's batches are acknowledged at
    // increasing offsets in the order they were sent.
    let mut by_part: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for (tp, base, _) in written {
        by_part.entry(tp.partition).or_default().push(base);
    }
    for offsets in by_part.values_mut() {
        offsets.sort_unstable();
        offsets.reverse();
    }
    let offsets = sends
        .iter()
        .map(|s| by_part.get_mut(&s.partition).and_then(Vec::pop))
        .collect::<Option<Vec<u64>>>();
    match offsets {
        Some(o) => Ok(Some(o)),
        None => Err(TxnHostError::Abortable(
            "committed, but an acknowledgement is missing".into(),
        )),
    }
}

/// After `e`: an abortable error is aborted (a certain `fail`); anything else leaves the
/// outcome unknown.
async fn abort_after(c: &mut TxnClient, e: TxnHostError) -> Result<Option<Vec<u64>>, TxnHostError> {
    match e {
        TxnHostError::Abortable(_) => {
            c.abort(CALL_WAIT).await?;
            Ok(None)
        }
        e => Err(e),
    }
}
