//! peer-bench: the workload of `skein bench produce` (node/src/cli/bench.rs) against NATS
//! JetStream and Redis Streams, for bench/compare.sh.
//!
//! Same semantics as Skein's bench, so the three figures compare: `--producers` concurrent
//! producers, each its own connection, one batch of `--batch` records of `--record-size`
//! bytes in flight each, batch i going to partition (i + producer) mod `--partitions`, until
//! `--records` are acknowledged. With `--rate` the producers pace themselves to that many
//! records/s in total and a batch's latency counts from when it was *due* (no coordinated
//! omission). Latencies per batch in an HDR histogram of microseconds, printed in the same
//! two lines as `skein bench produce`.
//!
//! What "a batch acknowledged" means per peer:
//! - NATS: B JetStream publishes pipelined on the connection, then every PubAck awaited
//!   (JetStream has no multi-record publish; a PubAck comes once the stream's quorum stored it).
//!   A "partition" is one R3 stream (`STREAM-k`, subject `STREAM.k`): like Skein's
//!   partitions, each stream has its own leader, spread over the servers.
//! - Redis: one pipeline of B `XADD key * v PAYLOAD` and `WAIT replicas timeout`, answered
//!   when the primary has written (and, with `appendfsync always`, fsynced) the XADDs and
//!   `replicas` replicas have received them. A "partition" is a stream key `KEY-k` (one
//!   primary serves them all: Redis has no per-key leaders without Redis Cluster).

use anyhow::{bail, ensure, Context};
use bytes::Bytes;
use clap::Parser;
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

#[derive(Parser, Debug)]
#[command(about = "The `skein bench produce` workload against NATS JetStream or Redis Streams")]
struct Args {
    #[command(subcommand)]
    system: System,
}

#[derive(clap::Args, Debug, Clone)]
struct Workload {
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    #[arg(long, default_value_t = 100)]
    record_size: usize,
    /// Records per batch.
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// Concurrent producers (each its own connection), one batch in flight each.
    #[arg(long, default_value_t = 4)]
    producers: usize,
    /// Target records/s over all producers (default: as fast as possible).
    #[arg(long)]
    rate: Option<u64>,
    /// Streams (NATS) or stream keys (Redis) that batches go to round-robin.
    #[arg(long, default_value_t = 3)]
    partitions: usize,
    /// How long one batch may take before the run fails.
    #[arg(long, default_value_t = 30)]
    timeout_secs: u64,
}

#[derive(clap::Subcommand, Debug)]
enum System {
    /// NATS JetStream: creates R`--replicas` file streams if missing, then produces.
    Nats {
        /// Comma-separated server URLs, e.g. nats://127.0.0.1:4222,nats://127.0.0.1:4223
        #[arg(long)]
        servers: String,
        #[arg(long, default_value = "bench")]
        stream: String,
        #[arg(long, default_value_t = 3)]
        replicas: usize,
        #[command(flatten)]
        w: Workload,
    },
    /// Redis Streams: XADD pipelines followed by WAIT on the primary.
    Redis {
        /// The primary, e.g. redis://127.0.0.1:6379
        #[arg(long)]
        url: String,
        #[arg(long, default_value = "bench")]
        key: String,
        /// Replicas that must have a batch (`WAIT N`) before it counts as acknowledged.
        #[arg(long, default_value_t = 2)]
        replicas: usize,
        #[command(flatten)]
        w: Workload,
    },
}

/// One producer's connection.
enum Producer {
    Nats {
        js: async_nats::jetstream::Context,
        subjects: Arc<Vec<String>>,
    },
    Redis {
        conn: redis::aio::MultiplexedConnection,
        keys: Arc<Vec<String>>,
        replicas: usize,
        wait_ms: u64,
    },
}

impl Producer {
    /// Sends `n` records to `part` and returns once the whole batch is acknowledged.
    async fn send_batch(&mut self, part: usize, n: usize, payload: &Bytes) -> anyhow::Result<()> {
        match self {
            Producer::Nats { js, subjects } => {
                let subject = &subjects[part];
                let mut acks = Vec::with_capacity(n);
                for _ in 0..n {
                    acks.push(js.publish(subject.clone(), payload.clone()).await?);
                }
                for ack in acks {
                    ack.await?;
                }
            }
            Producer::Redis {
                conn,
                keys,
                replicas,
                wait_ms,
            } => {
                let mut pipe = redis::pipe();
                for _ in 0..n {
                    pipe.cmd("XADD")
                        .arg(&keys[part])
                        .arg("*")
                        .arg("v")
                        .arg(&payload[..])
                        .ignore();
                }
                pipe.cmd("WAIT").arg(*replicas).arg(*wait_ms);
                let (acked,): (usize,) = pipe.query_async(conn).await?;
                ensure!(
                    acked >= *replicas,
                    "WAIT {replicas}: only {acked} replica(s) acknowledged within {wait_ms} ms"
                );
            }
        }
        Ok(())
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // Two worker threads, as `skein bench produce` (node/src/cli/common.rs `runtime`).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run(args.system))
}

async fn run(system: System) -> anyhow::Result<()> {
    let (w, producers) = match system {
        System::Nats {
            servers,
            stream,
            replicas,
            w,
        } => {
            check(&w)?;
            let p = nats_setup(&servers, &stream, replicas, &w).await?;
            (w, p)
        }
        System::Redis {
            url,
            key,
            replicas,
            w,
        } => {
            check(&w)?;
            let p = redis_setup(&url, &key, replicas, &w).await?;
            (w, p)
        }
    };
    produce(&w, producers).await
}

fn check(w: &Workload) -> anyhow::Result<()> {
    ensure!(
        w.batch > 0 && w.producers > 0 && w.partitions > 0,
        "--batch, --producers and --partitions must be > 0"
    );
    ensure!(w.rate != Some(0), "--rate must be > 0");
    Ok(())
}

/// Retries `f` every 250 ms for up to `secs` (servers elect leaders after start-up).
async fn retry<T, F, Fut>(what: &str, secs: u64, mut f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let started = Instant::now();
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if started.elapsed() > Duration::from_secs(secs) => {
                return Err(e).context(format!("{what}: still failing after {secs} s"))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

async fn nats_setup(
    servers: &str,
    stream: &str,
    replicas: usize,
    w: &Workload,
) -> anyhow::Result<Vec<Producer>> {
    use async_nats::jetstream::{self, stream::Config, stream::StorageType};
    let addrs: Vec<async_nats::ServerAddr> = servers
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .with_context(|| format!("bad server URL {s:?}"))
        })
        .collect::<anyhow::Result<_>>()?;
    ensure!(!addrs.is_empty(), "--servers is empty");
    let timeout = Duration::from_secs(w.timeout_secs);
    let subjects: Vec<String> = (0..w.partitions).map(|k| format!("{stream}.{k}")).collect();
    let mut producers = Vec::new();
    for p in 0..w.producers {
        // Producer p connects to server p mod n first, so connections spread over the cluster.
        let mut order = addrs.clone();
        order.rotate_left(p % addrs.len());
        let client = async_nats::ConnectOptions::new()
            .retain_servers_order()
            .connect(order)
            .await
            .with_context(|| format!("cannot connect to NATS at {servers}"))?;
        let js = jetstream::ContextBuilder::new()
            .timeout(timeout)
            .max_ack_inflight(w.batch.max(5_000))
            .build(client);
        if p == 0 {
            // Short API timeouts while setting up: a request sent before the meta leader
            // is elected gets no answer, and is simply asked again.
            let setup = jetstream::ContextBuilder::new()
                .timeout(Duration::from_secs(2))
                .build(js.client());
            let js = &setup;
            for (k, subject) in subjects.iter().enumerate() {
                let config = Config {
                    name: format!("{stream}-{k}"),
                    subjects: vec![subject.clone()],
                    num_replicas: replicas,
                    storage: StorageType::File,
                    ..Default::default()
                };
                retry("create stream", 60, || async {
                    js.get_or_create_stream(config.clone()).await?;
                    Ok(())
                })
                .await?;
                // One acknowledged publish per stream: its leader is elected and serving
                // before the clock starts (not counted in the figures).
                retry("first publish", 60, || async {
                    js.publish(subject.clone(), Bytes::from_static(b"warm-up"))
                        .await?
                        .await?;
                    Ok(())
                })
                .await?;
            }
            eprintln!(
                "nats: {} file stream(s) {stream}-0.. with {replicas} replicas",
                w.partitions
            );
        }
        producers.push(Producer::Nats {
            js,
            subjects: Arc::new(subjects.clone()),
        });
    }
    Ok(producers)
}

async fn redis_setup(
    url: &str,
    key: &str,
    replicas: usize,
    w: &Workload,
) -> anyhow::Result<Vec<Producer>> {
    let client = redis::Client::open(url).with_context(|| format!("bad Redis URL {url:?}"))?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(w.timeout_secs)));
    let keys: Arc<Vec<String>> =
        Arc::new((0..w.partitions).map(|k| format!("{key}-{k}")).collect());
    let wait_ms = w.timeout_secs * 1000;
    let mut producers = Vec::new();
    for p in 0..w.producers {
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .with_context(|| format!("cannot connect to Redis at {url}"))?;
        if p == 0 {
            // The replicas must be attached before the clock starts: WAIT on an empty
            // write set answers at once with the replicas the primary knows.
            retry("replicas attached", 30, || {
                let mut conn = conn.clone();
                async move {
                    let n: usize = redis::cmd("WAIT")
                        .arg(replicas)
                        .arg(1000)
                        .query_async(&mut conn)
                        .await?;
                    if n < replicas {
                        bail!("{n} of {replicas} replicas attached");
                    }
                    Ok(())
                }
            })
            .await?;
            eprintln!("redis: {replicas} replica(s) attached; WAIT timeout {wait_ms} ms");
        }
        // Fail now, not mid-run, if the connection is unusable.
        let _: String = redis::cmd("PING").query_async(&mut conn).await?;
        producers.push(Producer::Redis {
            conn,
            keys: keys.clone(),
            replicas,
            wait_ms,
        });
    }
    Ok(producers)
}

fn histogram() -> Histogram<u64> {
    // Microseconds, up to an hour, 3 significant digits (as `skein bench`).
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

/// The loop of `skein bench produce`'s `produce`: a shared batch counter, pacing from the
/// start, latency from when a batch was due.
async fn produce(w: &Workload, producers: Vec<Producer>) -> anyhow::Result<()> {
    let batches = w.records.div_ceil(w.batch as u64);
    let next_batch = Arc::new(AtomicU64::new(0));
    let payload = Bytes::from(vec![b'x'; w.record_size]);
    let interval = w
        .rate
        .map(|r| Duration::from_secs_f64(w.batch as f64 / r as f64));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (p, mut producer) in producers.into_iter().enumerate() {
        let (next_batch, payload, w) = (next_batch.clone(), payload.clone(), w.clone());
        tasks.push(tokio::spawn(async move {
            let mut h = histogram();
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
                let part = (i as usize + p) % w.partitions;
                tokio::time::timeout(
                    Duration::from_secs(w.timeout_secs),
                    producer.send_batch(part, w.batch, &payload),
                )
                .await
                .with_context(|| format!("batch {i}: no acknowledgement in {} s", w.timeout_secs))?
                .with_context(|| format!("batch {i} to partition {part}"))?;
                let _ = h.record((due.elapsed().as_micros() as u64).max(1));
                sent += w.batch as u64;
            }
            anyhow::Ok((sent, h))
        }));
    }
    let mut total = 0u64;
    let mut h = histogram();
    for t in tasks {
        let (sent, th) = t.await.context("producer task panicked")??;
        total += sent;
        h.add(&th).expect("same bounds");
    }
    let secs = started.elapsed().as_secs_f64();
    report(total, w.record_size, secs, &h);
    Ok(())
}

/// The two lines of `skein bench produce` (node/src/cli/bench.rs `report`), word for word,
/// so compare.sh parses every system's output the same way.
fn report(records: u64, record_size: usize, secs: f64, h: &Histogram<u64>) {
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "produce: {records} records of {record_size} B in {secs:.2} s: {:.0} records/s, {:.1} MB/s",
        records as f64 / secs,
        records as f64 * record_size as f64 / secs / 1e6
    );
    println!(
        "produce latency per batch ({} batches): p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms",
        h.len(),
        ms(0.5),
        ms(0.99),
        ms(0.999),
        h.max() as f64 / 1000.0
    );
}
