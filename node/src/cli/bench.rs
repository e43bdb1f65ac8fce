//! `skein bench produce|consume`: throughput and latency against a running cluster.
//!
//! produce: `--producers` concurrent clients (each its own connections) send batches of
//! `--batch` records of `--record-size` bytes round-robin over the topic's partitions,
//! one batch in flight per client, until `--records` are acknowledged. With `--rate` the
//! clients pace themselves to that many records/s in total and a batch's latency counts
//! from when it was *due* (so a stall is not hidden: no coordinated omission).
//! consume: one client per partition reads from the earliest offset until `--records`
//! (default: everything below the HW at start) are read.
//! Latencies are per request (a batch or a fetch), recorded in an HDR histogram.

use super::common::{load_cluster, runtime, ClusterArg};
use super::produce::AcksArg;
use anyhow::Context;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use skein_core::controller::{ControllerError, TopicConfig};
use skein_core::log::Codec;
use skein_core::message::{Acks, OffsetSpec};
use skein_core::types::TopicPartition;
use skein_node::client::{Client, ClientError, ClientOptions};
use skein_node::config::ClusterAddresses;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
}

#[derive(clap::Args, Debug, Clone)]
pub struct Common {
    /// Topic to use; created (RF `-r`, min.insync 2 when RF >= 3) if missing.
    #[arg(long, default_value = "bench")]
    pub topic: String,
    #[arg(long, default_value_t = 3)]
    pub partitions: u32,
    #[arg(long, short = 'r', default_value_t = 3)]
    pub replication_factor: u16,
    #[command(flatten)]
    pub cluster: ClusterArg,
}

#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// Produce records and report records/s, MB/s and per-batch latency percentiles.
    Produce {
        #[arg(long, default_value_t = 1_000_000)]
        records: u64,
        #[arg(long, default_value_t = 100)]
        record_size: usize,
        #[arg(long, value_enum, default_value_t = AcksArg::All)]
        acks: AcksArg,
        /// Records per batch (one produce request).
        #[arg(long, default_value_t = 1000)]
        batch: usize,
        /// Concurrent producer clients, one batch in flight each.
        #[arg(long, default_value_t = 4)]
        producers: usize,
        /// Target records/s over all producers (default: as fast as possible).
        #[arg(long)]
        rate: Option<u64>,
        /// Store each batch compressed: none, gzip, snappy, lz4 or zstd.
        #[arg(long, default_value = "none")]
        compression: Codec,
        /// Idempotent producers (producer id and sequence numbers; retries never write
        /// twice): the baseline to compare `--transactional` with.
        #[arg(long)]
        idempotent: bool,
        /// Transactional producers (one transactional id each, `bench-N`): batches go into
        /// a transaction committed every `--commit-interval-ms`; commit latencies are
        /// reported too. Needs --acks all.
        #[arg(long, conflicts_with = "idempotent")]
        transactional: bool,
        #[arg(long, default_value_t = 100, requires = "transactional")]
        commit_interval_ms: u64,
        #[command(flatten)]
        common: Common,
    },
    /// Read a topic from the start and report records/s, MB/s and fetch latencies.
    Consume {
        /// Stop after this many records (default: everything below the HW at start).
        #[arg(long)]
        records: Option<u64>,
        /// Bytes per fetch request.
        #[arg(long, default_value_t = 4 << 20)]
        fetch_bytes: usize,
        #[command(flatten)]
        common: Common,
    },
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    super::common::init_tracing("warn");
    runtime()?.block_on(async move {
        match args.command {
            BenchCommand::Produce {
                records,
                record_size,
                acks,
                batch,
                producers,
                rate,
                compression,
                idempotent,
                transactional,
                commit_interval_ms,
                common,
            } => {
                anyhow::ensure!(
                    batch > 0 && producers > 0,
                    "--batch and --producers must be > 0"
                );
                anyhow::ensure!(
                    !transactional || Acks::from(acks) == Acks::All,
                    "--transactional needs --acks all"
                );
                let mode = match (idempotent, transactional) {
                    (_, true) => Mode::Transactional {
                        commit_every: Duration::from_millis(commit_interval_ms.max(1)),
                    },
                    (true, false) => Mode::Idempotent,
                    (false, false) => Mode::Plain,
                };
                anyhow::ensure!(
                    Acks::from(acks) != Acks::None,
                    "--acks 0 has no acknowledgements to time: use all or 1"
                );
                let (cluster, parts) = prepare(&common).await?;
                produce(
                    cluster,
                    parts,
                    records,
                    record_size,
                    acks.into(),
                    batch,
                    producers,
                    rate,
                    compression,
                    mode,
                )
                .await
            }
            BenchCommand::Consume {
                records,
                fetch_bytes,
                common,
            } => {
                let (cluster, parts) = prepare(&common).await?;
                consume(cluster, parts, records, fetch_bytes).await
            }
        }
    })
}

fn options() -> ClientOptions {
    ClientOptions {
        request_timeout: Duration::from_secs(10),
        retry_for: Duration::from_secs(30),
        ..ClientOptions::default()
    }
}

/// Creates the topic if needed; returns the cluster and the topic's partitions.
async fn prepare(common: &Common) -> anyhow::Result<(ClusterAddresses, Vec<TopicPartition>)> {
    let cluster = load_cluster(&common.cluster.cluster)?;
    let mut c = Client::new(cluster.clone(), options());
    let config = TopicConfig {
        partitions: common.partitions,
        replication_factor: common.replication_factor,
        min_insync_replicas: if common.replication_factor >= 3 { 2 } else { 1 },
        ..TopicConfig::default()
    };
    match c.create_topic(&common.topic, config).await {
        Ok(_) => {
            eprintln!(
                "created topic {} ({} partitions, RF {})",
                common.topic, common.partitions, common.replication_factor
            );
            // Every broker serves it before producing starts: a transaction coordinator
            // that has not heard of it yet refuses AddPartitionsToTxn for it.
            let within = Duration::from_secs(10);
            let (_, failed) =
                (c.wait_topic_on_brokers(&common.topic, common.partitions, within)).await;
            for (id, why) in failed {
                eprintln!("broker {id} does not serve {} yet: {why}", common.topic);
            }
        }
        Err(ClientError::Controller(ControllerError::TopicAlreadyExists { .. })) => {}
        Err(e) => return Err(e).context(format!("cannot create topic {}", common.topic)),
    }
    let mut parts: Vec<TopicPartition> = c
        .wait_topic(&common.topic)
        .await?
        .into_iter()
        .map(|p| p.tp)
        .collect();
    parts.sort();
    Ok((cluster, parts))
}

fn histogram() -> Histogram<u64> {
    // Microseconds, up to an hour, 3 significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

fn bar(total: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(total);
    pb.set_style(
        ProgressStyle::with_template(&format!(
            "{what} [{{elapsed_precise}}] {{bar:40}} {{pos}}/{{len}} records ({{per_sec}}, eta {{eta}})"
        ))
        .expect("valid template"),
    );
    pb
}

/// What kind of producer `bench produce` runs.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Plain,
    Idempotent,
    Transactional { commit_every: Duration },
}

/// One producer task's results: records acknowledged, per-batch latencies, and (for
/// transactional producers) commit latencies.
type TaskResult = (u64, Histogram<u64>, Histogram<u64>);

#[allow(clippy::too_many_arguments)]
async fn produce(
    cluster: ClusterAddresses,
    parts: Vec<TopicPartition>,
    records: u64,
    record_size: usize,
    acks: Acks,
    batch: usize,
    producers: usize,
    rate: Option<u64>,
    compression: Codec,
    mode: Mode,
) -> anyhow::Result<ExitCode> {
    let batches = records.div_ceil(batch as u64);
    let next_batch = Arc::new(AtomicU64::new(0));
    let pb = bar(batches * batch as u64, "produce");
    let started = Instant::now();
    // Pacing: batch i is due at i * (batch / rate) seconds.
    let interval = rate.map(|r| Duration::from_secs_f64(batch as f64 / r.max(1) as f64));
    let mut tasks = Vec::new();
    for p in 0..producers {
        let (cluster, parts, next_batch, pb) = (
            cluster.clone(),
            parts.clone(),
            next_batch.clone(),
            pb.clone(),
        );
        let work = Work {
            next_batch,
            batches,
            batch,
            record_size,
            started,
            interval,
            pb,
        };
        if let Mode::Transactional { commit_every } = mode {
            let id = format!("bench-{p}");
            tasks.push(tokio::spawn(txn_task(
                cluster,
                id,
                parts,
                work,
                compression,
                commit_every,
            )));
            continue;
        }
        let Work {
            next_batch,
            batches,
            batch,
            record_size,
            started,
            interval,
            pb,
        } = work;
        tasks.push(tokio::spawn(async move {
            let mut c = Client::new(cluster, options());
            c.set_compression(compression);
            if matches!(mode, Mode::Idempotent) {
                c.enable_idempotence().await?;
            }
            let mut h = histogram();
            let payload = vec![b'x'; record_size];
            let mut sent = 0u64;
            loop {
                let i = next_batch.fetch_add(1, Ordering::Relaxed);
                if i >= batches {
                    break;
                }
                let due = match interval {
                    Some(iv) => {
                        let due = started + iv.mul_f64(i as f64);
                        tokio::time::sleep_until(due).await;
                        due
                    }
                    None => Instant::now(),
                };
                let tp = &parts[(i as usize + p) % parts.len()];
                let values = vec![payload.clone(); batch];
                c.produce(tp, values, acks)
                    .await
                    .with_context(|| format!("batch {i} to {tp}"))?;
                let _ = h.record((due.elapsed().as_micros() as u64).max(1));
                sent += batch as u64;
                pb.inc(batch as u64);
            }
            anyhow::Ok((sent, h, histogram()))
        }));
    }
    let mut total = 0u64;
    let mut h = histogram();
    let mut commits = histogram();
    for t in tasks {
        let (sent, th, tc): TaskResult = t.await.context("producer task panicked")??;
        total += sent;
        h.add(&th).expect("same bounds");
        commits.add(&tc).expect("same bounds");
    }
    let secs = started.elapsed().as_secs_f64();
    pb.finish_and_clear();
    report("produce", total, record_size, secs, &h, "batch");
    if matches!(mode, Mode::Transactional { .. }) {
        let ms = |q: f64| commits.value_at_quantile(q) as f64 / 1000.0;
        println!(
            "commit latency ({} transactions): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            commits.len(),
            ms(0.5),
            ms(0.99),
            commits.max() as f64 / 1000.0
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The batches the producer tasks share out, and how they are paced.
struct Work {
    next_batch: Arc<AtomicU64>,
    batches: u64,
    batch: usize,
    record_size: usize,
    started: Instant,
    interval: Option<Duration>,
    pb: ProgressBar,
}

/// One transactional producer: batches (one in flight, as the other modes) into a
/// transaction that commits once `commit_every` has passed since it began, and at the end.
/// A batch's latency runs until it is acknowledged (written, not yet committed).
async fn txn_task(
    cluster: ClusterAddresses,
    id: String,
    parts: Vec<TopicPartition>,
    w: Work,
    compression: Codec,
    commit_every: Duration,
) -> anyhow::Result<TaskResult> {
    use skein_core::client::txn_producer::TxnProducerConfig;
    use skein_core::log::RecordBatch;
    use skein_node::txn_client::TxnClient;
    const WAIT: Duration = Duration::from_secs(30);
    let mut config = TxnProducerConfig::new(id.clone());
    // The next transaction's AddPartitionsToTxn meets CONCURRENT_TRANSACTIONS while the
    // last one's markers are being written; Kafka's producer retries that after 20 ms
    // rather than its general backoff, and so does the benchmark.
    config.retry_backoff = Duration::from_millis(20).as_nanos() as u64;
    let mut txn = TxnClient::new(cluster, config);
    txn.init(WAIT)
        .await
        .with_context(|| format!("init_transactions for {id}"))?;
    let (mut h, mut commits) = (histogram(), histogram());
    let payload = vec![b'x'; w.record_size];
    let mut sent = 0u64;
    let mut open: Option<Instant> = None;
    let mut in_txn = 0u64;
    loop {
        let i = w.next_batch.fetch_add(1, Ordering::Relaxed);
        if i >= w.batches {
            break;
        }
        let due = match w.interval {
            Some(iv) => {
                let due = w.started + iv.mul_f64(i as f64);
                tokio::time::sleep_until(due).await;
                due
            }
            None => Instant::now(),
        };
        if open.is_none() {
            txn.begin()?;
            open = Some(Instant::now());
        }
        let tp = parts[i as usize % parts.len()].clone();
        let values = (0..w.batch).map(|_| payload.clone());
        let b = RecordBatch::from_values(0, values).with_codec(compression);
        txn.send(tp.clone(), b)
            .await
            .with_context(|| format!("batch {i} to {tp}"))?;
        txn.wait_written(WAIT)
            .await
            .with_context(|| format!("batch {i} to {tp}"))?;
        let _ = h.record((due.elapsed().as_micros() as u64).max(1));
        in_txn += w.batch as u64;
        if open.is_some_and(|t| t.elapsed() >= commit_every) {
            sent += commit(&mut txn, &mut commits, &mut open, &mut in_txn).await?;
        }
        w.pb.inc(w.batch as u64);
    }
    if open.is_some() {
        sent += commit(&mut txn, &mut commits, &mut open, &mut in_txn).await?;
    }
    Ok((sent, h, commits))
}

/// Commits the open transaction; returns its records.
async fn commit(
    txn: &mut skein_node::txn_client::TxnClient,
    commits: &mut Histogram<u64>,
    open: &mut Option<Instant>,
    in_txn: &mut u64,
) -> anyhow::Result<u64> {
    let t = Instant::now();
    txn.commit(Duration::from_secs(30))
        .await
        .context("commit_transaction")?;
    let _ = commits.record((t.elapsed().as_micros() as u64).max(1));
    *open = None;
    Ok(std::mem::take(in_txn))
}

async fn consume(
    cluster: ClusterAddresses,
    parts: Vec<TopicPartition>,
    records: Option<u64>,
    fetch_bytes: usize,
) -> anyhow::Result<ExitCode> {
    // What to read per partition: [earliest, HW at start), shared out if --records is less.
    let mut c = Client::new(cluster.clone(), options());
    let mut ranges = Vec::new();
    for tp in &parts {
        let start = c.list_offset(tp, OffsetSpec::Earliest).await?;
        let end = c.list_offset(tp, OffsetSpec::Latest).await?;
        ranges.push((tp.clone(), start, end));
    }
    let available: u64 = ranges.iter().map(|(_, s, e)| e - s).sum();
    anyhow::ensure!(
        available > 0,
        "topic {} is empty: run `skein bench produce --topic {}` first",
        parts[0].topic,
        parts[0].topic
    );
    let want = records.unwrap_or(available).min(available);
    if records.is_some_and(|r| r > available) {
        eprintln!("only {available} records below the high watermarks; reading those");
    }
    let pb = bar(want, "consume");
    let started = Instant::now();
    let mut tasks = Vec::new();
    let mut left = want;
    for (i, (tp, start, end)) in ranges.into_iter().enumerate() {
        let remaining_parts = (parts.len() - i) as u64;
        let share = (left / remaining_parts).max(left.min(1)).min(end - start);
        left -= share;
        let (cluster, pb) = (cluster.clone(), pb.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = Client::new(cluster, options());
            let mut h = histogram();
            let (mut at, stop) = (start, start + share);
            let mut got = 0u64;
            let mut bytes = 0u64;
            while at < stop {
                let before = got;
                let t = Instant::now();
                let fetched = c.fetch_next(&tp, at, fetch_bytes).await?;
                let _ = h.record((t.elapsed().as_micros() as u64).max(1));
                at = at.max(fetched.next_offset.min(stop));
                for (offset, value) in fetched.records {
                    if offset >= stop {
                        break;
                    }
                    at = offset + 1;
                    got += 1;
                    bytes += value.map_or(0, |v| v.len() as u64);
                }
                pb.inc(got - before);
            }
            anyhow::Ok((got, bytes, h))
        }));
    }
    let mut total = 0u64;
    let mut bytes = 0u64;
    let mut h = histogram();
    for t in tasks {
        let (got, b, th) = t.await.context("consumer task panicked")??;
        total += got;
        bytes += b;
        h.add(&th).expect("same bounds");
    }
    let secs = started.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let size = bytes.checked_div(total).unwrap_or(0) as usize;
    report("consume", total, size, secs, &h, "fetch");
    Ok(ExitCode::SUCCESS)
}

fn report(what: &str, records: u64, record_size: usize, secs: f64, h: &Histogram<u64>, per: &str) {
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "{what}: {records} records of {record_size} B in {secs:.2} s: {:.0} records/s, {:.1} MB/s",
        records as f64 / secs,
        records as f64 * record_size as f64 / secs / 1e6
    );
    println!(
        "{what} latency per {per} ({} {per}es): p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms",
        h.len(),
        ms(0.5),
        ms(0.99),
        ms(0.999),
        h.max() as f64 / 1000.0
    );
}
