//! `skein produce --transactional-id ID`: stdin lines written in transactions by core's
//! transactional producer (hosted by [`skein_node::txn_client::TxnClient`]). Each
//! transaction takes `--transaction-size` lines (or the whole input), batched per
//! partition, and is committed (or, with `--abort`, aborted); offsets are printed only
//! for committed transactions, after the commit, since only then are they readable
//! under `read_committed`.

use super::common::{load_cluster, runtime};
use super::produce::{stdin_lines, AcksArg, ProduceArgs};
use skein_core::client::txn_producer::TxnProducerConfig;
use skein_core::log::RecordBatch;
use skein_core::types::TopicPartition;
use skein_node::client::{Client, ClientOptions};
use skein_node::txn_client::TxnClient;
use std::process::ExitCode;
use std::time::Duration;
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::mpsc::Receiver;
use tokio::time::Instant;

/// How long one commit, abort or init may take before the command gives up.
const END_WAIT: Duration = Duration::from_secs(60);

pub fn run(args: ProduceArgs) -> anyhow::Result<ExitCode> {
    let id = args
        .transactional_id
        .clone()
        .expect("checked by the caller");
    anyhow::ensure!(!id.is_empty(), "--transactional-id must not be empty");
    anyhow::ensure!(
        matches!(args.acks, AcksArg::All),
        "--transactional-id needs --acks all (a transaction's writes are acknowledged by \
         every in-sync replica before it commits)"
    );
    anyhow::ensure!(
        !args.no_idempotence,
        "--transactional-id and --no-idempotence exclude each other: a transactional \
         producer is idempotent"
    );
    let cluster = load_cluster(&args.cluster.cluster)?;
    let mut c = Client::new(cluster.clone(), ClientOptions::default());
    let mut rx = stdin_lines();
    runtime()?.block_on(async move {
        let partitions = super::produce::partitions_of(&mut c, &args).await?;
        let mut config = TxnProducerConfig::new(id.clone());
        config.transaction_timeout_ms = args.transaction_timeout_ms;
        let mut txn = TxnClient::new(cluster, config);
        let p = txn
            .init(END_WAIT)
            .await
            .map_err(|e| anyhow::anyhow!("init_transactions for {id:?} failed: {e}"))?;
        eprintln!(
            "transactional id {id:?}: producer id {} epoch {}",
            p.producer_id, p.producer_epoch
        );
        let now_ms = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0)
        };
        let mut next = 0usize;
        let (mut committed, mut aborted, mut records) = (0u64, 0u64, 0u64);
        let mut done = false;
        while !done {
            // One transaction: it begins with its first line; its lines go out in batches
            // (full, or stdin quiet for --linger-ms) while it is open.
            let first = match rx.recv().await {
                Some(l) => l?,
                None => break,
            };
            txn.begin()?;
            let mut n = 0usize;
            let mut batch = vec![first.into_bytes()];
            loop {
                let full = args.transaction_size > 0 && n + batch.len() >= args.transaction_size;
                if batch.len() < args.batch && !full {
                    let quiet = Instant::now() + Duration::from_millis(args.linger_ms);
                    match next_line(&mut rx, &mut txn, Some(quiet)).await {
                        Line::Text(l) => {
                            batch.push(l?.into_bytes());
                            continue;
                        }
                        Line::End => done = true,
                        Line::Quiet => {} // send what there is
                    }
                }
                if !batch.is_empty() {
                    let pick = super::produce::pick(&args, &mut next);
                    let tp = TopicPartition::new(&args.topic, partitions[pick % partitions.len()]);
                    let key = args.key.as_ref().map(|k| k.as_bytes().to_vec());
                    n += batch.len();
                    let keyed = batch.drain(..).map(|v| (key.clone(), Some(v)));
                    let b = RecordBatch::new(now_ms(), keyed).with_codec(args.compression);
                    txn.send(tp, b).await?;
                }
                if done || (args.transaction_size > 0 && n >= args.transaction_size) {
                    break;
                }
                match next_line(&mut rx, &mut txn, None).await {
                    Line::Text(l) => batch.push(l?.into_bytes()),
                    Line::End | Line::Quiet => {
                        done = true;
                        break;
                    }
                }
            }
            if args.abort {
                // Written first, so the aborted records really sit in the log (skipped by
                // read_committed readers, read by read_uncommitted ones).
                txn.wait_written(END_WAIT).await?;
                txn.abort(END_WAIT).await.map_err(|e| {
                    anyhow::anyhow!("aborting a transaction of {n} record(s) failed: {e}")
                })?;
                aborted += 1;
                eprintln!("aborted a transaction of {n} record(s)");
                continue;
            }
            let written = match txn.commit(END_WAIT).await {
                Ok(w) => w,
                Err(e) => {
                    let _ = txn.abort(END_WAIT).await;
                    anyhow::bail!(
                        "a transaction of {n} record(s) did not commit: {e}\n{records} \
                         record(s) in {committed} earlier transaction(s) were committed; \
                         this transaction's records are not visible to read_committed \
                         readers. Check that the brokers are up (`skein admin stats`), \
                         then send the remaining lines again"
                    );
                }
            };
            committed += 1;
            records += n as u64;
            print_offsets(&written, args.quiet);
        }
        eprintln!(
            "{committed} transaction(s) committed ({records} record(s)), {aborted} aborted, \
             as {id:?} to {}",
            args.topic
        );
        Ok(ExitCode::SUCCESS)
    })
}

/// What stdin gave.
enum Line {
    Text(std::io::Result<String>),
    /// End of input.
    End,
    /// Nothing before the deadline.
    Quiet,
}

/// The next stdin line, driving the producer while none is there (its requests and
/// acknowledgements go on while the transaction waits for input).
async fn next_line(
    rx: &mut Receiver<std::io::Result<String>>,
    txn: &mut TxnClient,
    deadline: Option<Instant>,
) -> Line {
    loop {
        match rx.try_recv() {
            Ok(l) => return Line::Text(l),
            Err(TryRecvError::Disconnected) => return Line::End,
            Err(TryRecvError::Empty) => {}
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Line::Quiet;
        }
        let step = Duration::from_millis(5);
        let step = deadline.map_or(step, |d| step.min(d - now));
        txn.drive(step).await;
    }
}

/// The offsets of a committed transaction's batches: one line per record, or per batch.
fn print_offsets(written: &[(TopicPartition, u64, u32)], quiet: bool) {
    for (tp, base, count) in written {
        if quiet {
            println!("{tp}: offsets {base}..={}", base + *count as u64 - 1);
        } else {
            for i in 0..*count as u64 {
                println!("{tp}@{}", base + i);
            }
        }
    }
}
