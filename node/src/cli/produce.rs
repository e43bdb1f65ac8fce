//! `skein produce --topic t`: one record per stdin line, batched, offsets printed.

use super::common::{client, runtime, ClusterArg};
use skein_core::log::Codec;
use skein_core::message::Acks;
use skein_core::types::TopicPartition;
use std::io::BufRead;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum AcksArg {
    /// Wait until every in-sync replica has the record durably.
    All,
    /// Wait for the leader's append only.
    #[value(name = "1")]
    One,
    /// Do not wait at all (nothing acknowledged, no offsets printed).
    #[value(name = "0")]
    Zero,
}

impl From<AcksArg> for Acks {
    fn from(a: AcksArg) -> Self {
        match a {
            AcksArg::All => Acks::All,
            AcksArg::One => Acks::Leader,
            AcksArg::Zero => Acks::None,
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct ProduceArgs {
    #[arg(long)]
    pub topic: String,
    #[arg(long, value_enum, default_value = "all")]
    pub acks: AcksArg,
    /// Key of every record; without --partition it also picks the partition
    /// (CRC-32 of the key modulo the partition count), so one key stays in order.
    #[arg(long)]
    pub key: Option<String>,
    /// Partition to write to (default: by --key, else batches round-robin).
    #[arg(long)]
    pub partition: Option<u32>,
    /// Most records per batch.
    #[arg(long, default_value_t = 500)]
    pub batch: usize,
    /// Wait this long for more lines before sending a partial batch.
    #[arg(long, default_value_t = 10)]
    pub linger_ms: u64,
    /// Plain (at-least-once) producer even with acks=all. By default acks=all uses an
    /// idempotent producer: retried batches are never written twice.
    #[arg(long)]
    pub no_idempotence: bool,
    /// Print one summary line per batch instead of one offset per record.
    #[arg(long)]
    pub quiet: bool,
    /// Store each batch compressed: none, gzip, snappy, lz4 or zstd (Kafka's codecs).
    #[arg(long, default_value = "none")]
    pub compression: Codec,
    /// Write in transactions under this `transactional.id` (KIP-98): records become
    /// visible to `read_committed` readers only when their transaction commits. Starting
    /// fences any older producer with the same id and ends its open transaction.
    #[arg(long)]
    pub transactional_id: Option<String>,
    /// With --transactional-id: lines per transaction (0: the whole input is one
    /// transaction, committed at end of input).
    #[arg(long, default_value_t = 0, requires = "transactional_id")]
    pub transaction_size: usize,
    /// With --transactional-id: abort every transaction instead of committing it (the
    /// records stay in the log, skipped by `read_committed` readers).
    #[arg(long, requires = "transactional_id")]
    pub abort: bool,
    /// With --transactional-id: `transaction.timeout.ms`; the coordinator aborts a
    /// transaction left open longer.
    #[arg(long, default_value_t = 60_000, requires = "transactional_id")]
    pub transaction_timeout_ms: u32,
    #[command(flatten)]
    pub cluster: ClusterArg,
}

pub fn run(args: ProduceArgs) -> anyhow::Result<ExitCode> {
    super::common::init_tracing("warn");
    anyhow::ensure!(args.batch >= 1, "--batch must be at least 1");
    if args.transactional_id.is_some() {
        return super::produce_txn::run(args);
    }
    let mut c = client(&args.cluster)?;
    c.set_compression(args.compression);
    // Lines are batched here: a batch goes out when full or when stdin has been quiet for
    // `linger_ms`.
    let mut rx = stdin_lines();
    runtime()?.block_on(async move {
        let partitions = partitions_of(&mut c, &args).await?;
        let acks: Acks = args.acks.into();
        if acks == Acks::All && !args.no_idempotence {
            c.enable_idempotence().await?;
        }
        let mut next = 0usize;
        let mut total = 0usize;
        let mut done = false;
        let progress = super::common::spinner(&format!("producing to {}", args.topic));
        while !done {
            let mut batch = Vec::new();
            while batch.len() < args.batch {
                let line = if batch.is_empty() {
                    rx.recv().await
                } else {
                    match tokio::time::timeout(Duration::from_millis(args.linger_ms), rx.recv())
                        .await
                    {
                        Ok(l) => l,
                        Err(_) => break,
                    }
                };
                match line {
                    Some(l) => batch.push(l?.into_bytes()),
                    None => {
                        done = true;
                        break;
                    }
                }
            }
            if batch.is_empty() {
                continue;
            }
            let pick = pick(&args, &mut next);
            let tp = TopicPartition::new(&args.topic, partitions[pick % partitions.len()]);
            let n = batch.len();
            let key = args.key.as_deref().map(str::as_bytes);
            let produced = c.produce_keyed(&tp, key, batch, acks).await.map_err(|e| {
                progress.finish_and_clear();
                anyhow::anyhow!(
                    "{e}\n{total} record(s) before this batch were acknowledged; this \
                         batch of {n} was not (after a timeout it may still have been written) \
                         and the lines after it were not sent. Check that the brokers are up \
                         (`skein admin stats`) and the partition has a leader (`skein topic \
                         describe {}`), then send the remaining lines again",
                    args.topic
                )
            })?;
            total += n;
            progress.set_message(format!("{total} record(s) sent"));
            match produced.base_offset {
                Some(base) if args.quiet => {
                    println!("{tp}: offsets {base}..={}", base + n as u64 - 1)
                }
                Some(base) => {
                    for i in 0..n as u64 {
                        println!("{tp}@{}", base + i);
                    }
                }
                None => println!("{tp}: sent {n} record(s) with acks=0 (not acknowledged)"),
            }
        }
        progress.finish_and_clear();
        eprintln!("produced {total} record(s) to {}", args.topic);
        Ok(ExitCode::SUCCESS)
    })
}

/// Lines of stdin, read on a blocking thread.
pub(super) fn stdin_lines() -> tokio::sync::mpsc::Receiver<std::io::Result<String>> {
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<String>>(4096);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            if tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The partitions a produce writes to: `--partition`, else every partition of the topic.
pub(super) async fn partitions_of(
    c: &mut skein_node::client::Client,
    args: &ProduceArgs,
) -> anyhow::Result<Vec<u32>> {
    let partitions: Vec<u32> = match args.partition {
        Some(p) => vec![p],
        None => {
            let mut ps: Vec<u32> = c
                .wait_topic(&args.topic)
                .await?
                .iter()
                .map(|p| p.tp.partition)
                .collect();
            ps.sort();
            ps
        }
    };
    anyhow::ensure!(
        !partitions.is_empty(),
        "topic {} has no partitions",
        args.topic
    );
    Ok(partitions)
}

/// Which of the partitions the next batch goes to (an index, taken modulo their count):
/// by the key's CRC-32 with `--key` (and no `--partition`), else round-robin.
pub(super) fn pick(args: &ProduceArgs, next: &mut usize) -> usize {
    match (&args.key, args.partition) {
        (Some(k), None) => crc32fast::hash(k.as_bytes()) as usize,
        _ => {
            *next += 1;
            *next - 1
        }
    }
}
