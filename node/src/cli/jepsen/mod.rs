//! `skein jepsen run`: a real local cluster under real faults, judged by the checker.
//!
//! Data flow: pick free ports; start a proxy link for every ordered pair of nodes and write
//! one config per node naming its peers by their proxy ports (`layout`); start the nodes
//! (controllers, 1 or a quorum, and 3 brokers) as child processes (a guard kills them all
//! on drop, panic and Ctrl-C included); create an RF-3 topic; run producers (acks=all,
//! idempotent) and a consumer per partition that record every operation in
//! `D/history.jsonl` (`clients`), while the nemesis plays the seeded schedule
//! (`skein_jepsen::nemesis`), resolving roles (partition leader, active controller) when
//! each fault starts; heal, wait for every ISR to be whole, read every partition to its
//! end, check the history (`--final-reads`), draw the plots and exit 0 if valid, 1 if not
//! (2 on a harness error), like `skein check`.

mod clients;
mod group;
mod layout;
mod txn;

use super::common::runtime;
use anyhow::{bail, Context};
use clients::{client_options, Ctx, Recorder};
use layout::Layout;
use skein_core::controller::{ControllerError, TopicConfig};
use skein_core::types::TopicPartition;
use skein_jepsen::nemesis::{schedule, NemesisKind, Target, Window};
use skein_jepsen::plot::{self, Shade};
use skein_jepsen::proxy::Proxy;
use skein_jepsen::{check, read_history, CheckOptions, HistoryWriter, DEFAULT_MAX_EXAMPLES};
use skein_node::client::{Client, ClientError};
use skein_node::config::ClusterAddresses;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitCode};
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
    /// Faults to inject: comma-separated among kill, pause, partition, link, halves, slow,
    /// lossy (or all, none).
    #[arg(long, default_value = "kill,pause,partition")]
    pub nemesis: String,
    /// Controllers: 1, or a Raft quorum of 3 or 5 (the nemeses strike them too, the active
    /// one included).
    #[arg(long, default_value_t = 3)]
    pub controllers: u32,
    /// Partitions of the test topic (each read to its end and checked).
    #[arg(long, default_value_t = 1)]
    pub partitions: u32,
    /// Consumer-group members: each joins group `jepsen`, polls and commits what it read;
    /// the history records their assignments, rebalances and commits.
    #[arg(long, default_value_t = 2)]
    pub group_members: u32,
    /// Sends per second per producer.
    #[arg(long, default_value_t = 20.0)]
    pub rate: f64,
    /// Seed of the fault schedule (and of the group members' lifetimes).
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
    /// `plain`: idempotent producers, a consumer per partition and group members.
    /// `txn`: transactional producers (--rate transactions/s each, one in five aborted on
    /// purpose) and read_committed consumers; no group members. The same checker judges
    /// both (with its transactional classes for `txn`).
    #[arg(long, value_enum, default_value_t = Workload::Plain)]
    pub workload: Workload,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    Plain,
    Txn,
}

impl Workload {
    fn isolation(self) -> skein_core::txn::IsolationLevel {
        match self {
            Workload::Plain => skein_core::txn::IsolationLevel::ReadUncommitted,
            Workload::Txn => skein_core::txn::IsolationLevel::ReadCommitted,
        }
    }
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
        let log = std::env::var("SKEIN_NODE_LOG").unwrap_or_else(|_| "info".into());
        let child = super::cluster::start_node(&self.exe, &self.dir, name, &log)?;
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
            super::common::signal(pid, sig);
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

fn check_args(args: &RunArgs) -> anyhow::Result<Vec<NemesisKind>> {
    let kinds = NemesisKind::parse_list(&args.nemesis).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(
        args.rate > 0.0 && args.rate <= 10_000.0,
        "--rate must be in (0, 10000]"
    );
    anyhow::ensure!(
        (1..=16).contains(&args.producers),
        "--producers must be 1..16"
    );
    anyhow::ensure!(
        [1, 3, 5].contains(&args.controllers),
        "--controllers must be 1, 3 or 5 (a quorum of 2 or 4 survives no more failures than one of 1 or 3)"
    );
    anyhow::ensure!(
        (1..=16).contains(&args.partitions),
        "--partitions must be 1..16"
    );
    anyhow::ensure!(args.group_members <= 8, "--group-members must be 0..8");
    // Checked before anything starts: a misspelt bug must not cost a whole run.
    skein_core::bugs::Bugs::from_names(&args.bugs)?;
    Ok(kinds)
}

fn run_test(args: RunArgs) -> anyhow::Result<ExitCode> {
    let kinds = check_args(&args)?;
    let dir = &args.dir;
    if dir.exists() && std::fs::read_dir(dir)?.next().is_some() {
        bail!(
            "{} is not empty: give each run a new --dir (it keeps the history, plots, logs and data)",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let dir = dir.canonicalize()?;

    // Real listeners, and a proxy link per ordered pair of nodes.
    let mut layout = Layout::new(args.controllers, BROKERS)?;
    let mut proxy = Proxy::new();
    layout.write_configs(&dir, &mut proxy, &args.bugs)?;
    layout.release_ports();
    let client_cluster = layout.client_cluster();
    std::fs::write(
        dir.join("cluster.toml"),
        toml::to_string(&client_cluster).context("cluster config")?,
    )?;
    let mut nodes = Nodes {
        dir: dir.clone(),
        exe: std::env::current_exe().context("cannot find the skein executable")?,
        names: layout.names.clone(),
        children: (0..layout.names.len()).map(|_| None).collect(),
    };
    for i in 0..layout.names.len() {
        nodes.spawn(i)?;
    }
    let windows = schedule(
        args.seed,
        &kinds,
        layout.topology(),
        args.time.as_millis() as u64,
        args.interval.as_millis() as u64,
    );
    println!(
        "jepsen: cluster in {} ({} controller(s) + {BROKERS} brokers, each peer link through the proxy; topic {TOPIC} with {} partition(s))",
        dir.display(),
        args.controllers,
        args.partitions,
    );
    for (i, name) in layout.names.iter().enumerate() {
        println!("  node #{i}: {name}");
    }
    for w in &windows {
        println!("  scheduled: {w}");
    }
    let nodes = Arc::new(Mutex::new(nodes));
    let rt = runtime()?;
    // Bound the whole run: start-up, workload, recovery and final reads.
    let limit = args.time + Duration::from_secs(120);
    let outcome = rt.block_on(async {
        let cluster = client_cluster.validate()?;
        let harness = Harness {
            layout: &layout,
            nodes: &nodes,
            proxy: &proxy,
        };
        let work = workload(&args, &dir, cluster, &windows, &harness);
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
    let (shades, roles) = match outcome {
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
    judge(&args, &dir, &shades, roles)
}

fn replay(args: &RunArgs) -> String {
    let bugs: String = args.bugs.iter().map(|b| format!(" --bug {b}")).collect();
    format!(
        "skein jepsen run --time {}s --nemesis {} --rate {} --seed {} --interval {}s --producers {} --controllers {} --partitions {} --group-members {} --workload {}{bugs} --dir NEW_DIR",
        args.time.as_secs_f64(),
        args.nemesis,
        args.rate,
        args.seed,
        args.interval.as_secs_f64(),
        args.producers,
        args.controllers,
        args.partitions,
        args.group_members,
        match args.workload {
            Workload::Plain => "plain",
            Workload::Txn => "txn",
        },
    )
}

/// What the nemesis acts on: the node list, the processes and the proxy.
struct Harness<'a> {
    layout: &'a Layout,
    nodes: &'a Arc<Mutex<Nodes>>,
    proxy: &'a Proxy,
}

/// Waits until every broker registered and sees every broker.
async fn wait_brokers(admin: &mut Client, h: &Harness<'_>, dir: &Path) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        if let Some(e) = h.nodes.lock().expect("nodes").exited() {
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
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(30) {
            bail!("brokers did not all register within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// History processes by role, as the clients named them.
type Roles = std::collections::BTreeMap<u64, String>;

/// Starts the clients and the nemesis, heals, waits and reads everything; returns the fault
/// windows as they happened and the processes' roles.
async fn workload(
    args: &RunArgs,
    dir: &Path,
    cluster: ClusterAddresses,
    windows: &[Window],
    h: &Harness<'_>,
) -> anyhow::Result<(Vec<Shade>, Roles)> {
    let mut admin = Client::new(cluster.clone(), client_options());
    wait_brokers(&mut admin, h, dir).await?;
    let config = TopicConfig {
        partitions: args.partitions,
        replication_factor: BROKERS as u16,
        min_insync_replicas: 2,
        ..TopicConfig::default()
    };
    match admin.create_topic(TOPIC, config).await {
        Ok(_) | Err(ClientError::Controller(ControllerError::TopicAlreadyExists { .. })) => {}
        Err(e) => return Err(e).context("cannot create the test topic"),
    }
    let tps: Vec<TopicPartition> = (0..args.partitions)
        .map(|p| TopicPartition::new(TOPIC, p))
        .collect();
    wait_healthy(&mut admin, &tps, Duration::from_secs(30)).await?;

    let file = std::fs::File::create(dir.join("history.jsonl"))?;
    let ctx = Ctx {
        cluster,
        recorder: Arc::new(Mutex::new(Recorder {
            writer: HistoryWriter::new(std::io::BufWriter::new(file)),
            start: Instant::now(),
        })),
        stop: Arc::new(AtomicBool::new(false)),
        // Producers are processes 0..P, consumers P..P+N; group members, replacements and
        // final reads take theirs from here on.
        next_process: Arc::new(AtomicU64::new(args.producers + u64::from(args.partitions))),
        roles: Default::default(),
    };
    let mut tasks = Vec::new();
    for p in 0..args.producers {
        let (tps, ctx) = (tps.clone(), ctx.clone());
        tasks.push(match args.workload {
            Workload::Plain => tokio::spawn(clients::producer(p, tps, args.rate, ctx)),
            Workload::Txn => tokio::spawn(txn::producer(p, p, tps, args.rate, args.seed, ctx)),
        });
    }
    let isolation = args.workload.isolation();
    for (i, tp) in tps.iter().enumerate() {
        let process = args.producers + i as u64;
        ctx.name(process, format!("consumer of {tp}"));
        let consumer = clients::consumer(process, tp.clone(), isolation, ctx.clone());
        tasks.push(tokio::spawn(consumer));
    }
    let members = match args.workload {
        Workload::Plain => args.group_members,
        Workload::Txn => 0,
    };
    for index in 0..members {
        let member = group::member(index, args.seed, args.partitions, ctx.clone());
        tasks.push(tokio::spawn(member));
    }
    let origin = ctx.recorder.lock().expect("recorder lock").start;
    let shades = nemesis(windows, &mut admin, &tps, h, origin, args.time).await?;
    ctx.stop.store(true, Ordering::SeqCst);
    for t in tasks {
        let _ = t.await;
    }
    // Recovery: every fault is undone by now; wait for leaders and whole ISRs.
    wait_healthy(&mut admin, &tps, Duration::from_secs(60))
        .await
        .context("the cluster did not recover after the faults were healed")?;
    clients::final_reads(&tps, isolation, &ctx).await?;
    ctx.recorder
        .lock()
        .expect("recorder lock")
        .writer
        .flush()
        .context("cannot write the history")?;
    let roles = ctx.roles.lock().expect("roles lock").clone();
    Ok((shades, roles))
}

/// Waits until every partition has a leader and all replicas in its ISR.
async fn wait_healthy(
    admin: &mut Client,
    tps: &[TopicPartition],
    limit: Duration,
) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let mut sick = tps.first().cloned();
        if let Ok(parts) = admin.topic_metadata(TOPIC).await {
            sick = tps
                .iter()
                .find(|tp| {
                    !parts.iter().any(|p| {
                        p.tp == **tp && p.leader.is_some() && p.isr.len() == BROKERS as usize
                    })
                })
                .cloned();
        }
        let Some(sick) = sick else {
            return Ok(());
        };
        if started.elapsed() > limit {
            bail!("partition {sick} has no leader with a full ISR after {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A window's target resolved to nodes: the one it strikes, or the links it cuts or
/// degrades (both ways), and how the timeline labels it.
struct Strike {
    node: usize,
    links: Vec<(usize, usize)>,
    label: String,
}

/// The node holding a role now: the leader of partition `k mod N`, the active controller
/// (the one that acts on controller requests). If the cluster does not answer, the first
/// broker / controller.
async fn resolve_one(
    t: &Target,
    k: usize,
    admin: &mut Client,
    tps: &[TopicPartition],
    layout: &Layout,
) -> usize {
    match t {
        Target::Node(i) => *i,
        Target::Leader => {
            let tp = &tps[k % tps.len()];
            let leader = match admin.topic_metadata(TOPIC).await {
                Ok(parts) => parts.iter().find(|p| p.tp == *tp).and_then(|p| p.leader),
                Err(_) => None,
            };
            layout.broker_index(leader.unwrap_or(1))
        }
        Target::ActiveController => {
            let active = admin.active_controller().await.unwrap_or(1);
            layout.controller_index(active)
        }
        Target::Link(..) | Target::Side(_) => unreachable!("not a single node: {t}"),
    }
}

async fn resolve(
    w: &Window,
    k: usize,
    admin: &mut Client,
    tps: &[TopicPartition],
    layout: &Layout,
) -> Strike {
    let n = layout.names.len();
    let name = |i: usize| layout.names[i].clone();
    let kind = w.kind.name();
    let across = |side: &[usize]| -> Vec<(usize, usize)> {
        side.iter()
            .flat_map(|&a| (0..n).filter(|b| !side.contains(b)).map(move |b| (a, b)))
            .collect()
    };
    match &w.target {
        Target::Link(first, second) => {
            let a = Box::pin(resolve_one(first, k, admin, tps, layout)).await;
            let b = if *second == a { (a + 1) % n } else { *second };
            Strike {
                node: a,
                links: vec![(a, b)],
                label: format!("{kind} {}<->{}", name(a), name(b)),
            }
        }
        Target::Side(side) => {
            let names: Vec<String> = side.iter().map(|&i| name(i)).collect();
            Strike {
                node: side.first().copied().unwrap_or(0),
                links: across(side),
                label: format!("{kind} {} | rest", names.join(",")),
            }
        }
        t => {
            let i = resolve_one(t, k, admin, tps, layout).await;
            Strike {
                node: i,
                links: if w.kind.is_network() {
                    across(&[i])
                } else {
                    Vec::new()
                },
                label: format!("{kind} {}", name(i)),
            }
        }
    }
}

/// Starts a fault.
fn strike(kind: NemesisKind, s: &Strike, h: &Harness<'_>) {
    let names = &h.layout.names;
    match kind {
        NemesisKind::Kill => h.nodes.lock().expect("nodes").kill9(s.node),
        NemesisKind::Pause => h.nodes.lock().expect("nodes").signal(s.node, "STOP"),
        NemesisKind::Partition | NemesisKind::Link | NemesisKind::Halves => {
            for &(a, b) in &s.links {
                h.proxy.set_cut(&names[a], &names[b], true);
            }
        }
        NemesisKind::Slow | NemesisKind::Lossy => {
            let d = kind.degrade().expect("a link nemesis");
            for &(a, b) in &s.links {
                h.proxy.set_degrade(&names[a], &names[b], d);
            }
        }
    }
}

/// Undoes a fault; fails if a node exited without the nemesis killing it.
fn undo(kind: NemesisKind, s: &Strike, h: &Harness<'_>) -> anyhow::Result<()> {
    let mut n = h.nodes.lock().expect("nodes");
    match kind {
        NemesisKind::Kill => n.spawn(s.node)?,
        NemesisKind::Pause => n.signal(s.node, "CONT"),
        _ => h.proxy.heal_all(),
    }
    if let Some(e) = n.exited() {
        bail!("{e} (not by the nemesis)");
    }
    Ok(())
}

/// Plays the schedule; returns the windows as they happened (times on the history's clock).
async fn nemesis(
    windows: &[Window],
    admin: &mut Client,
    tps: &[TopicPartition],
    h: &Harness<'_>,
    origin: Instant,
    total: Duration,
) -> anyhow::Result<Vec<Shade>> {
    let mut shades = Vec::new();
    let mut log = std::fs::File::create(h.nodes.lock().expect("nodes").dir.join("nemesis.jsonl"))?;
    for (k, w) in windows.iter().enumerate() {
        sleep_until(origin + Duration::from_millis(w.start_ms)).await;
        let s = resolve(w, k, admin, tps, h.layout).await;
        let start = origin.elapsed().as_nanos() as u64;
        strike(w.kind, &s, h);
        println!("  {:>6.1}s  {}", start as f64 / 1e9, s.label);
        sleep_until(origin + Duration::from_millis(w.end_ms)).await;
        undo(w.kind, &s, h)?;
        let end = origin.elapsed().as_nanos() as u64;
        println!("  {:>6.1}s  healed {}", end as f64 / 1e9, s.label);
        let name = |i: usize| h.layout.names[i].as_str();
        let links: Vec<[&str; 2]> = s.links.iter().map(|&(a, b)| [name(a), name(b)]).collect();
        writeln!(
            log,
            "{}",
            serde_json::json!({
                "kind": w.kind.name(),
                "target": w.target.to_string(),
                "node": name(s.node),
                "links": links,
                "start": start,
                "end": end,
                "label": s.label,
            })
        )?;
        // The label is "<kind> <target>": the kind names the fault lane.
        let target = s
            .label
            .strip_prefix(w.kind.name())
            .unwrap_or(&s.label)
            .trim()
            .to_string();
        shades.push(Shade {
            start,
            end,
            kind: w.kind.name().to_string(),
            target,
        });
    }
    sleep_until(origin + total).await;
    Ok(shades)
}

async fn sleep_until(t: Instant) {
    tokio::time::sleep_until(t.into()).await
}

/// Checks the history, writes the report and plots, prints the verdict.
fn judge(args: &RunArgs, dir: &Path, shades: &[Shade], roles: Roles) -> anyhow::Result<ExitCode> {
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
    let mut files = vec![
        (
            "history.jsonl".to_string(),
            "the client history (skein check D/history.jsonl --final-reads re-judges it)"
                .to_string(),
        ),
        ("report.txt".into(), "the checker's report".into()),
        ("report.json".into(), "the same, as JSON".into()),
        (
            "nemesis.jsonl".into(),
            "one line per fault: kind, target, node, links, start and end (ns)".into(),
        ),
        ("cluster.toml".into(), "the nodes' addresses".into()),
    ];
    let mut logs: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".log"))
        .collect();
    logs.sort();
    files.extend(logs.into_iter().map(|l| (l, "node log".to_string())));
    plot::write_dir(
        dir,
        &plot::ReportInput {
            title: replay(args).replace(" --dir NEW_DIR", ""),
            events: &events,
            shades,
            time_label: "time (s)",
            roles,
            report: Some(&report),
            verdict: text.clone(),
            valid: report.valid,
            marks: Vec::new(),
            files,
        },
    )
    .with_context(|| format!("cannot write the plots into {}", dir.display()))?;
    println!("{text}");
    println!(
        "jepsen: {} events, {} faults; outputs in {} (index.html links them: history.jsonl, report.txt, latency.svg, latency-quantiles.svg, rate.svg, unseen.svg, lag.svg, timeline.html, nemesis.jsonl, node logs)",
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
