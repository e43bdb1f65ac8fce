//! `skein jepsen run`: a real local cluster under real faults, judged by the checker.
//!
//! Data flow: pick free ports; start a proxy link for every pair of nodes that talk (each
//! broker dials the controller and every other broker), write one config per node naming
//! its peers by their proxy ports (its own entry keeps its real port, where it listens);
//! start the nodes as child processes (a guard kills them all on drop, panic and Ctrl-C
//! included); create an RF-3 topic; run producers (acks=all, idempotent) and a consumer
//! that record every operation in `D/history.jsonl`, while the nemesis plays the seeded
//! schedule (`skein_jepsen::nemesis`); heal, wait for the ISR to be whole, read every
//! partition to its end, check the history (`--final-reads`), draw the plots and exit 0 if
//! valid, 1 if not (2 on a harness error), like `skein check`.

use super::common::runtime;
use anyhow::{bail, Context};
use skein_core::controller::{ControllerError, TopicConfig};
use skein_core::message::Acks as WireAcks;
use skein_core::types::TopicPartition;
use skein_jepsen::nemesis::{schedule, NemesisKind, Target, Window};
use skein_jepsen::plot::{self, Shade};
use skein_jepsen::proxy::Proxy;
use skein_jepsen::{
    check, read_history, Acks, CheckOptions, EventType, Function, HistoryWriter, PollValue,
    PolledRecord, SendValue, Value, DEFAULT_MAX_EXAMPLES,
};
use skein_node::client::{Client, ClientError, ClientOptions};
use skein_node::config::{BrokerEntry, ClusterConfig, FsyncPolicy, NodeConfig, Role, Tuning};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOPIC: &str = "jepsen";
const BROKERS: u32 = 3;

#[derive(clap::Args, Debug)]
pub struct JepsenArgs {
    #[command(subcommand)]
    pub command: JepsenCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum JepsenCommand {
    /// Start a local cluster, run clients under faults, and check the history.
    Run(RunArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// How long the workload runs under faults (e.g. 20s, 2m, 90).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub time: Duration,
    /// Faults to inject: comma-separated among kill, pause, partition (or all, none).
    #[arg(long, default_value = "kill,pause,partition")]
    pub nemesis: String,
    /// Sends per second per producer.
    #[arg(long, default_value_t = 20.0)]
    pub rate: f64,
    /// Seed of the fault schedule.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output directory (created; must be empty): history, plots, node logs and data.
    #[arg(long, default_value = "./jepsen")]
    pub dir: PathBuf,
    /// Time between the starts of two faults.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Number of producer processes.
    #[arg(long, default_value_t = 2)]
    pub producers: u64,
    /// Bug zoo: switch a historical bug back on in every node (repeatable; names as
    /// `skein sim run --bug`), to see the harness catch it on real processes.
    #[arg(long = "bug", value_name = "NAME")]
    pub bugs: Vec<String>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 20s, 500ms, 2m)"))?;
    if !(v * mult).is_finite() || v * mult <= 0.0 || v * mult > 86_400.0 {
        return Err(format!("{s:?}: a duration must be between 1 ms and 24 h"));
    }
    Ok(Duration::from_secs_f64(v * mult))
}

pub fn run(args: JepsenArgs) -> anyhow::Result<ExitCode> {
    super::common::init_tracing("warn");
    match args.command {
        JepsenCommand::Run(a) => run_test(a),
    }
}

/// The node processes; dropping it kills every one (SIGKILL also ends a SIGSTOPped one).
struct Nodes {
    dir: PathBuf,
    exe: PathBuf,
    names: Vec<String>,
    children: Vec<Option<Child>>,
}

impl Nodes {
    fn spawn(&mut self, i: usize) -> anyhow::Result<()> {
        let name = &self.names[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{name}.log")))?;
        let child = Command::new(&self.exe)
            .arg("node")
            .arg("--config")
            .arg(self.dir.join(format!("{name}.toml")))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .env(
                "RUST_LOG",
                std::env::var("SKEIN_NODE_LOG").unwrap_or_else(|_| "info".into()),
            )
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start {name}"))?;
        self.children[i] = Some(child);
        Ok(())
    }

    fn pid(&self, i: usize) -> Option<u32> {
        self.children[i].as_ref().map(|c| c.id())
    }

    fn kill9(&mut self, i: usize) {
        if let Some(mut c) = self.children[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn signal(&self, i: usize, sig: &str) {
        if let Some(pid) = self.pid(i) {
            let _ = Command::new("kill")
                .arg(format!("-{sig}"))
                .arg(pid.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }

    /// A node that exited on its own (not killed by the nemesis).
    fn exited(&mut self) -> Option<String> {
        for (i, c) in self.children.iter_mut().enumerate() {
            if let Some(c) = c {
                if let Ok(Some(status)) = c.try_wait() {
                    return Some(format!("{} exited ({status})", self.names[i]));
                }
            }
        }
        None
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for i in 0..self.children.len() {
            self.kill9(i);
        }
    }
}

/// The history file, shared by the client tasks; times are ns since the run started.
struct Recorder {
    writer: HistoryWriter<std::io::BufWriter<std::fs::File>>,
    start: Instant,
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

type Shared = Arc<Mutex<Recorder>>;

fn rec(r: &Shared, process: u64, kind: EventType, f: Function, value: Value) {
    r.lock()
        .expect("recorder lock")
        .record(process, kind, f, value)
}

fn free_ports(n: usize) -> anyhow::Result<Vec<std::net::SocketAddr>> {
    let ls: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .context("cannot pick free ports on 127.0.0.1")?;
    Ok(ls
        .iter()
        .map(|l| l.local_addr())
        .collect::<Result<_, _>>()?)
}

fn client_options() -> ClientOptions {
    ClientOptions {
        request_timeout: Duration::from_secs(2),
        retry_for: Duration::from_secs(4),
        retry_backoff: Duration::from_millis(100),
        ..ClientOptions::default()
    }
}

#[allow(clippy::too_many_lines)] // split pending: predates the lint
fn run_test(args: RunArgs) -> anyhow::Result<ExitCode> {
    let kinds = NemesisKind::parse_list(&args.nemesis).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(
        args.rate > 0.0 && args.rate <= 10_000.0,
        "--rate must be in (0, 10000]"
    );
    anyhow::ensure!(
        (1..=16).contains(&args.producers),
        "--producers must be 1..16"
    );
    // Checked before anything starts: a misspelt bug must not cost a whole run.
    skein_core::replica::Bugs::from_names(&args.bugs)?;
    let bugs = &args.bugs;
    let dir = &args.dir;
    if dir.exists() && std::fs::read_dir(dir)?.next().is_some() {
        bail!(
            "{} is not empty: give each run a new --dir (it keeps the history, plots, logs and data)",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let dir = dir.canonicalize()?;

    // Nodes: 0 = controller, 1..=3 brokers. Real listeners, and a proxy link per dialling pair.
    let mut names = vec!["controller".to_string()];
    names.extend((1..=BROKERS).map(|id| format!("broker-{id}")));
    let real = free_ports(names.len())?;
    let mut proxy = Proxy::new();
    let mut configs = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let cluster = if i == 0 {
            real_cluster(&real)
        } else {
            let controller = proxy.add_link(name, &names[0], real[0])?;
            let mut brokers = Vec::new();
            for id in 1..=BROKERS as usize {
                let address = if id == i {
                    real[id]
                } else {
                    proxy.add_link(name, &names[id], real[id])?
                };
                brokers.push(BrokerEntry {
                    id: id as u32,
                    address: address.to_string(),
                    kafka_listener: None,
                });
            }
            ClusterConfig {
                controller: Some(controller.to_string()),
                controllers: Vec::new(),
                brokers,
            }
        };
        let cfg = NodeConfig {
            role: if i == 0 {
                Role::Controller
            } else {
                Role::Broker
            },
            node_id: (i > 0).then_some(i as u32),
            data_dir: dir.join(name),
            fsync: FsyncPolicy::Always,
            fsync_interval_ms: 50,
            max_frame_bytes: skein_node::frame::DEFAULT_MAX_FRAME,
            // Faster failure detection than the defaults, so short runs see recoveries.
            tuning: Tuning {
                session_timeout_ms: Some(3000),
                heartbeat_interval_ms: Some(300),
                replica_lag_time_max_ms: Some(3000),
            },
            bugs: bugs.to_vec(),
            cluster,
        };
        cfg.validate()?;
        std::fs::write(dir.join(format!("{name}.toml")), cfg.to_toml())?;
        configs.push(cfg);
    }
    let client_cluster = real_cluster(&real);
    std::fs::write(
        dir.join("cluster.toml"),
        toml::to_string(&client_cluster).context("cluster config")?,
    )?;
    let mut nodes = Nodes {
        dir: dir.clone(),
        exe: std::env::current_exe().context("cannot find the skein executable")?,
        names: names.clone(),
        children: (0..names.len()).map(|_| None).collect(),
    };
    for i in 0..names.len() {
        nodes.spawn(i)?;
    }
    let windows = schedule(
        args.seed,
        &kinds,
        names.len(),
        args.time.as_millis() as u64,
        args.interval.as_millis() as u64,
    );
    println!(
        "jepsen: cluster in {} (controller + {BROKERS} brokers, each peer link through the proxy)",
        dir.display()
    );
    for w in &windows {
        println!("  scheduled: {w}");
    }
    let nodes = Arc::new(Mutex::new(nodes));
    let proxy = Arc::new(proxy);
    let rt = runtime()?;
    // Bound the whole run: start-up, workload, recovery and final reads.
    let limit = args.time + Duration::from_secs(120);
    let outcome = rt.block_on(async {
        let work = workload(&args, &dir, &client_cluster, &windows, &nodes, &proxy);
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::time::timeout(limit, work) => match r {
                Ok(r) => r,
                Err(_) => bail!("the run did not finish within {limit:?}"),
            },
            _ = tokio::signal::ctrl_c() => bail!("interrupted"),
            _ = term.recv() => bail!("terminated"),
        }
    });
    // Every node goes, whatever happened (the guard does the same on panic).
    drop(rt);
    drop(nodes);
    let shades = match outcome {
        Ok(s) => s,
        Err(e) => {
            eprintln!("jepsen: the run failed: {e:#}");
            eprintln!(
                "  logs and data kept in {}; replay: {}",
                dir.display(),
                replay(&args)
            );
            return Ok(ExitCode::from(2));
        }
    };
    judge(&args, &dir, &shades)
}

fn real_cluster(real: &[std::net::SocketAddr]) -> ClusterConfig {
    ClusterConfig {
        controller: Some(real[0].to_string()),
        controllers: Vec::new(),
        brokers: (1..real.len())
            .map(|id| BrokerEntry {
                id: id as u32,
                address: real[id].to_string(),
                kafka_listener: None,
            })
            .collect(),
    }
}

fn replay(args: &RunArgs) -> String {
    let bugs: String = args.bugs.iter().map(|b| format!(" --bug {b}")).collect();
    format!(
        "skein jepsen run --time {}s --nemesis {} --rate {} --seed {} --interval {}s --producers {}{bugs} --dir NEW_DIR",
        args.time.as_secs_f64(),
        args.nemesis,
        args.rate,
        args.seed,
        args.interval.as_secs_f64(),
        args.producers
    )
}

/// Starts the clients and the nemesis, heals, waits and reads everything; returns the fault
/// windows as they happened.
async fn workload(
    args: &RunArgs,
    dir: &Path,
    cluster: &ClusterConfig,
    windows: &[Window],
    nodes: &Arc<Mutex<Nodes>>,
    proxy: &Arc<Proxy>,
) -> anyhow::Result<Vec<Shade>> {
    let cluster = cluster.validate()?;
    let mut admin = Client::new(cluster.clone(), client_options());
    let started = Instant::now();
    loop {
        if let Some(e) = nodes.lock().expect("nodes").exited() {
            bail!("{e} during start-up; see its log in {}", dir.display());
        }
        let mut ready = 0;
        for id in 1..=BROKERS {
            match admin.broker_metadata(id).await {
                Ok(m) if m.brokers.len() == BROKERS as usize => ready += 1,
                _ => break,
            }
        }
        if ready == BROKERS {
            break;
        }
        if started.elapsed() > Duration::from_secs(30) {
            bail!("brokers did not all register within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let config = TopicConfig {
        partitions: 1,
        replication_factor: BROKERS as u16,
        min_insync_replicas: 2,
        ..TopicConfig::default()
    };
    match admin.create_topic(TOPIC, config).await {
        Ok(_) | Err(ClientError::Controller(ControllerError::TopicAlreadyExists { .. })) => {}
        Err(e) => return Err(e).context("cannot create the test topic"),
    }
    let tp = TopicPartition::new(TOPIC, 0);
    wait_healthy(&mut admin, &tp, Duration::from_secs(30)).await?;

    let file = std::fs::File::create(dir.join("history.jsonl"))?;
    let recorder: Shared = Arc::new(Mutex::new(Recorder {
        writer: HistoryWriter::new(std::io::BufWriter::new(file)),
        start: Instant::now(),
    }));
    let stop = Arc::new(AtomicBool::new(false));
    let next_process = Arc::new(AtomicU64::new(args.producers + 1));
    let mut tasks = Vec::new();
    for p in 0..args.producers {
        tasks.push(tokio::spawn(producer(
            p,
            cluster.clone(),
            tp.clone(),
            args.rate,
            recorder.clone(),
            stop.clone(),
            next_process.clone(),
        )));
    }
    tasks.push(tokio::spawn(consumer(
        args.producers,
        cluster.clone(),
        tp.clone(),
        recorder.clone(),
        stop.clone(),
    )));
    let shades = nemesis(windows, &mut admin, &tp, nodes, proxy, &recorder, args.time).await?;
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        let _ = t.await;
    }
    // Recovery: every fault is undone by now; wait for a leader and a whole ISR.
    wait_healthy(&mut admin, &tp, Duration::from_secs(60))
        .await
        .context("the cluster did not recover after the faults were healed")?;
    final_reads(
        next_process.fetch_add(1, Ordering::SeqCst),
        &cluster,
        &tp,
        &recorder,
    )
    .await?;
    recorder
        .lock()
        .expect("recorder lock")
        .writer
        .flush()
        .context("cannot write the history")?;
    Ok(shades)
}

/// Waits until the partition has a leader and all replicas in its ISR.
async fn wait_healthy(
    admin: &mut Client,
    tp: &TopicPartition,
    limit: Duration,
) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        if let Ok(parts) = admin.topic_metadata(&tp.topic).await {
            if parts
                .iter()
                .any(|p| p.tp == *tp && p.leader.is_some() && p.isr.len() == BROKERS as usize)
            {
                return Ok(());
            }
        }
        if started.elapsed() > limit {
            bail!("partition {tp} has no leader with a full ISR after {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One producer: acks=all, idempotent; a send that errs is `info` (it may have been
/// written), and the process is then replaced by a new one with a new producer id, as
/// Jepsen does with crashed processes.
async fn producer(
    first: u64,
    cluster: skein_node::config::Cluster,
    tp: TopicPartition,
    rate: f64,
    r: Shared,
    stop: Arc<AtomicBool>,
    next_process: Arc<AtomicU64>,
) {
    let period = Duration::from_secs_f64(1.0 / rate);
    let mut process = first;
    let mut seq = 0u64;
    let mut client: Option<Client> = None;
    while !stop.load(Ordering::SeqCst) {
        let c = match client.as_mut() {
            Some(c) => c,
            None => {
                let mut c = Client::new(cluster.clone(), client_options());
                if c.enable_idempotence().await.is_err() {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
                client.insert(c)
            }
        };
        let value = format!("{process}-{seq}");
        seq += 1;
        let mut send = SendValue::new(TOPIC, 0, value.as_str());
        send.acks = Some(Acks::All);
        rec(
            &r,
            process,
            EventType::Invoke,
            Function::Send,
            Value::Send(send.clone()),
        );
        let t = Instant::now();
        match c
            .produce(&tp, vec![value.into_bytes()], WireAcks::All)
            .await
        {
            Ok(p) => match p.base_offset {
                Some(o) => {
                    send.offset = Some(o);
                    rec(
                        &r,
                        process,
                        EventType::Ok,
                        Function::Send,
                        Value::Send(send),
                    );
                }
                None => rec(
                    &r,
                    process,
                    EventType::Info,
                    Function::Send,
                    Value::Send(send),
                ),
            },
            Err(_) => {
                rec(
                    &r,
                    process,
                    EventType::Info,
                    Function::Send,
                    Value::Send(send),
                );
                process = next_process.fetch_add(1, Ordering::SeqCst);
                seq = 0;
                client = None;
            }
        }
        if let Some(rest) = period.checked_sub(t.elapsed()) {
            tokio::time::sleep(rest).await;
        }
    }
}

fn polled(records: Vec<(u64, Option<Vec<u8>>)>) -> Vec<PolledRecord> {
    records
        .into_iter()
        .map(|(offset, v)| PolledRecord {
            topic: TOPIC.into(),
            partition: 0,
            offset,
            value: String::from_utf8_lossy(&v.unwrap_or_default())
                .as_ref()
                .into(),
        })
        .collect()
}

/// A consumer following the partition from offset 0. A fetch that errs is a `fail` poll:
/// a fetch changes nothing and reported nothing, and the next one starts at the same place.
async fn consumer(
    process: u64,
    cluster: skein_node::config::Cluster,
    tp: TopicPartition,
    r: Shared,
    stop: Arc<AtomicBool>,
) {
    let mut client = Client::new(cluster, client_options());
    let mut position = 0;
    while !stop.load(Ordering::SeqCst) {
        rec(&r, process, EventType::Invoke, Function::Poll, Value::Null);
        match client.fetch_next(&tp, position, 256 * 1024).await {
            Ok(f) => {
                let empty = f.records.is_empty();
                position = f.next_offset;
                let records = polled(f.records);
                rec(
                    &r,
                    process,
                    EventType::Ok,
                    Function::Poll,
                    Value::Poll(PollValue { records }),
                );
                if empty {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            Err(_) => {
                rec(&r, process, EventType::Fail, Function::Poll, Value::Null);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// After recovery: one new process reads the partition from 0 to its high watermark.
async fn final_reads(
    process: u64,
    cluster: &skein_node::config::Cluster,
    tp: &TopicPartition,
    r: &Shared,
) -> anyhow::Result<()> {
    let mut client = Client::new(cluster.clone(), client_options());
    let mut position = 0;
    let started = Instant::now();
    loop {
        rec(r, process, EventType::Invoke, Function::Poll, Value::Null);
        match client.fetch_next(tp, position, 1 << 20).await {
            Ok(f) => {
                let done = f.next_offset >= f.high_watermark;
                position = f.next_offset;
                let records = polled(f.records);
                rec(
                    r,
                    process,
                    EventType::Ok,
                    Function::Poll,
                    Value::Poll(PollValue { records }),
                );
                if done {
                    return Ok(());
                }
            }
            Err(e) => {
                rec(r, process, EventType::Fail, Function::Poll, Value::Null);
                if started.elapsed() > Duration::from_secs(30) {
                    return Err(e).context("final reads failed for 30 s");
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Plays the schedule; returns the windows as they happened (times on the history's clock).
async fn nemesis(
    windows: &[Window],
    admin: &mut Client,
    tp: &TopicPartition,
    nodes: &Arc<Mutex<Nodes>>,
    proxy: &Arc<Proxy>,
    r: &Shared,
    total: Duration,
) -> anyhow::Result<Vec<Shade>> {
    let origin = r.lock().expect("recorder lock").start;
    let mut shades = Vec::new();
    let mut log = std::fs::File::create(nodes.lock().expect("nodes").dir.join("nemesis.jsonl"))?;
    for w in windows {
        sleep_until(origin + Duration::from_millis(w.start_ms)).await;
        let i = match w.target {
            Target::Node(i) => i,
            Target::Leader => match admin.topic_metadata(&tp.topic).await {
                Ok(parts) => parts
                    .iter()
                    .find(|p| p.tp == *tp)
                    .and_then(|p| p.leader)
                    .map_or(1, |l| l as usize),
                Err(_) => 1,
            },
        };
        let name = nodes.lock().expect("nodes").names[i].clone();
        let start = origin.elapsed().as_nanos() as u64;
        {
            let mut n = nodes.lock().expect("nodes");
            match w.kind {
                NemesisKind::Kill => n.kill9(i),
                NemesisKind::Pause => n.signal(i, "STOP"),
                NemesisKind::Partition => {
                    for other in n.names.iter().filter(|o| **o != name) {
                        proxy.set_cut(&name, other, true);
                    }
                }
                NemesisKind::Slow | NemesisKind::Lossy => {
                    let d = w.kind.degrade().expect("a link nemesis");
                    for other in n.names.iter().filter(|o| **o != name) {
                        proxy.set_degrade(&name, other, d);
                    }
                }
            }
        }
        let label = format!("{} {name}", w.kind.name());
        println!("  {:>6.1}s  {label}", start as f64 / 1e9);
        sleep_until(origin + Duration::from_millis(w.end_ms)).await;
        {
            let mut n = nodes.lock().expect("nodes");
            match w.kind {
                NemesisKind::Kill => n.spawn(i)?,
                NemesisKind::Pause => n.signal(i, "CONT"),
                NemesisKind::Partition | NemesisKind::Slow | NemesisKind::Lossy => proxy.heal_all(),
            }
            if let Some(e) = n.exited() {
                bail!("{e} (not by the nemesis)");
            }
        }
        let end = origin.elapsed().as_nanos() as u64;
        println!("  {:>6.1}s  healed {name}", end as f64 / 1e9);
        writeln!(
            log,
            "{}",
            serde_json::json!({"kind": w.kind.name(), "node": name, "start": start, "end": end})
        )?;
        shades.push(Shade { start, end, label });
    }
    sleep_until(origin + total).await;
    Ok(shades)
}

async fn sleep_until(t: Instant) {
    tokio::time::sleep_until(t.into()).await
}

/// Checks the history, writes the report and plots, prints the verdict.
fn judge(args: &RunArgs, dir: &Path, shades: &[Shade]) -> anyhow::Result<ExitCode> {
    let path = dir.join("history.jsonl");
    let file = std::fs::File::open(&path)?;
    let events = read_history(std::io::BufReader::new(file))
        .with_context(|| format!("bad history {}", path.display()))?;
    let report = check(
        &events,
        &CheckOptions {
            final_reads: true,
            strict: false,
            max_examples: DEFAULT_MAX_EXAMPLES,
        },
    );
    let text = report.to_string();
    std::fs::write(dir.join("report.txt"), &text)?;
    std::fs::write(
        dir.join("report.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    let ops = plot::operations(&events);
    std::fs::write(dir.join("latency.svg"), plot::latency_svg(&ops, shades))?;
    std::fs::write(dir.join("rate.svg"), plot::rate_svg(&ops, shades))?;
    std::fs::write(
        dir.join("timeline.html"),
        plot::timeline_html(
            &format!("skein jepsen run, seed {}", args.seed),
            &ops,
            shades,
        ),
    )?;
    println!("{text}");
    println!(
        "jepsen: {} events, {} faults; outputs in {} (history.jsonl, report.txt, latency.svg, rate.svg, timeline.html, nemesis.jsonl, node logs)",
        events.len(),
        shades.len(),
        dir.display()
    );
    if report.valid {
        println!("jepsen: PASS");
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "jepsen: FAIL (node logs and data dirs kept in {})",
            dir.display()
        );
        println!("  re-check: skein check {} --final-reads", path.display());
        println!("  replay:   {}", replay(args));
        Ok(ExitCode::from(1))
    }
}
