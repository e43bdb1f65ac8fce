//! `skein cluster up|down`: a local cluster of separate processes on 127.0.0.1.
//!
//! `up` writes one config per node plus `cluster.toml` into the directory, starts the
//! controller (or with `--controllers 3|5`, a Raft quorum `controller-1..N`) and brokers as child processes of this executable (`skein node --config`,
//! each in its own process group, logging to `<name>.log`), records them in `cluster.pid`
//! and waits until every broker has registered. `down` sends SIGTERM to each, waits, and
//! falls back to SIGKILL. `restart NODE` starts one node again from its config (after a
//! crash or `kill -9`) and records its new pid.

use super::common::{free_ports, runtime, signal};
use anyhow::{bail, Context};
use skein_node::client::{Client, ClientOptions};
use skein_node::config::{
    BrokerEntry, ClusterConfig, ControllerEntry, FsyncPolicy, NodeConfig, NodeKind,
};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct ClusterArgs {
    #[command(subcommand)]
    pub command: ClusterCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum ClusterCommand {
    /// Start the controller(s) and N brokers.
    Up {
        #[arg(long, default_value_t = 3)]
        brokers: u32,
        /// Controllers: 3 (the default) or 5 for a Raft quorum that survives the loss of 1
        /// or 2 of them, or 1 for a single controller, a single point of failure
        /// (docs/controller.md).
        #[arg(long, default_value_t = 3)]
        controllers: u32,
        #[arg(long, default_value = "./data")]
        dir: PathBuf,
        /// First port (the controllers; brokers follow, then the brokers' Kafka listeners).
        /// Default: free ports picked by the OS.
        #[arg(long)]
        base_port: Option<u16>,
        #[arg(long, value_enum, default_value = "always")]
        fsync: FsyncPolicy,
        /// How long to wait for every broker to register.
        #[arg(long, default_value_t = 30)]
        wait_secs: u64,
    },
    /// Start one node of the cluster in DIR again, with its config and data dir as `up`
    /// wrote them (e.g. after it crashed or was killed); a running node is first stopped
    /// gracefully. Updates DIR/cluster.pid, so `down` stops the new process.
    Restart {
        /// `controller` (or `controller-N` in a quorum) or `broker-N`.
        node: String,
        #[arg(long, default_value = "./data")]
        dir: PathBuf,
        /// How long to wait for a restarted broker to answer.
        #[arg(long, default_value_t = 30)]
        wait_secs: u64,
    },
    /// Stop the cluster started in DIR.
    Down {
        #[arg(long, default_value = "./data")]
        dir: PathBuf,
    },
}

pub fn run(args: ClusterArgs) -> anyhow::Result<ExitCode> {
    super::common::init_tracing("warn");
    match args.command {
        ClusterCommand::Up {
            brokers,
            controllers,
            dir,
            base_port,
            fsync,
            wait_secs,
        } => up(
            (controllers, brokers),
            &dir,
            base_port,
            fsync,
            Duration::from_secs(wait_secs),
        ),
        ClusterCommand::Restart {
            node,
            dir,
            wait_secs,
        } => restart(&node, &dir, Duration::from_secs(wait_secs)),
        ClusterCommand::Down { dir } => down(&dir),
    }
}

const PID_FILE: &str = "cluster.pid";

/// The cluster file `up` writes: controllers, then brokers, then the brokers' Kafka
/// listeners on consecutive `ports`. One controller keeps the single `controller` form.
fn cluster_config(controllers: u32, brokers: u32, ports: &[u16]) -> ClusterConfig {
    let at = |i: u32| format!("127.0.0.1:{}", ports[i as usize]);
    let (controller, list) = if controllers == 1 {
        (Some(at(0)), Vec::new())
    } else {
        let list = (1..=controllers)
            .map(|id| ControllerEntry {
                id,
                address: at(id - 1),
            })
            .collect();
        (None, list)
    };
    ClusterConfig {
        controller,
        controllers: list,
        brokers: (1..=brokers)
            .map(|id| BrokerEntry {
                id,
                address: at(controllers + id - 1),
                kafka_listener: Some(at(controllers + brokers + id - 1)),
            })
            .collect(),
    }
}

/// The node names `up` gives the controllers: `controller` alone, else `controller-N`.
fn controller_names(controllers: u32) -> Vec<(String, Option<u32>)> {
    if controllers == 1 {
        return vec![("controller".to_string(), None)];
    }
    (1..=controllers)
        .map(|id| (format!("controller-{id}"), Some(id)))
        .collect()
}

fn up(
    (controllers, brokers): (u32, u32),
    dir: &Path,
    base_port: Option<u16>,
    fsync: FsyncPolicy,
    wait: Duration,
) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        (1..=64).contains(&brokers),
        "--brokers must be between 1 and 64"
    );
    anyhow::ensure!(
        [1, 3, 5].contains(&controllers),
        "--controllers must be 1, 3 or 5 (a quorum of 2 or 4 survives no more failures than one of 1 or 3)"
    );
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", dir.display()))?;
    if let Some(live) = read_pids(&dir)?
        .into_iter()
        .find(|(_, pid)| alive(*pid) && is_our_node(*pid, &dir))
    {
        bail!(
            "a cluster is already running in {} ({} is pid {}); stop it with `skein cluster down --dir {}`",
            dir.display(), live.0, live.1, dir.display()
        );
    }
    // The controllers, the brokers, then each broker's Kafka listener.
    let n = (2 * brokers + controllers) as usize;
    let ports: Vec<u16> = match base_port {
        Some(p) => {
            anyhow::ensure!(
                p != 0 && u32::from(p) + n as u32 <= u32::from(u16::MAX),
                "--base-port {p} leaves no room for {n} ports"
            );
            (0..n as u16).map(|i| p + i).collect()
        }
        None => free_ports(n)?,
    };
    let cluster = cluster_config(controllers, brokers, &ports);
    let cluster_file = dir.join("cluster.toml");
    std::fs::write(
        &cluster_file,
        toml::to_string(&cluster).context("cluster config")?,
    )?;
    let mut nodes: Vec<(String, NodeKind, Option<u32>)> = controller_names(controllers)
        .into_iter()
        .map(|(name, id)| (name, NodeKind::Controller, id))
        .collect();
    nodes.extend((1..=brokers).map(|id| (format!("broker-{id}"), NodeKind::Broker, Some(id))));
    let exe = std::env::current_exe().context("cannot find the skein executable")?;
    let mut pids = Vec::new();
    for (name, role, node_id) in &nodes {
        let cfg = NodeConfig {
            role: *role,
            node_id: *node_id,
            data_dir: dir.join(name),
            fsync,
            fsync_interval_ms: 50,
            max_frame_bytes: skein_node::frame::DEFAULT_MAX_FRAME,
            tuning: Default::default(),
            bugs: Vec::new(),
            cluster: cluster.clone(),
        };
        cfg.validate()?;
        std::fs::write(dir.join(format!("{name}.toml")), cfg.to_toml())?;
        pids.push((name.clone(), spawn_node(&exe, &dir, name)?));
        write_pids(&dir, &pids)?;
    }
    // Wait until every broker registered and is unfenced.
    let result = runtime()?.block_on(async {
        let mut client = Client::new(cluster.validate()?, ClientOptions::default());
        let started = Instant::now();
        let spinner =
            super::common::spinner(&format!("waiting for {brokers} broker(s) to register"));
        loop {
            if let Some((name, _)) = pids.iter().find(|(_, pid)| !alive(*pid)) {
                bail!(
                    "{name} exited during start-up; see {}",
                    dir.join(format!("{name}.log")).display()
                );
            }
            // Ready when every broker answers and its own (caught-up) image shows every
            // broker live: the controller's image alone may still show a previous run.
            let mut ready = 0;
            for id in 1..=brokers {
                match client.broker_metadata(id).await {
                    Ok(m) if m.brokers.len() == brokers as usize => ready += 1,
                    _ => break,
                }
            }
            spinner.set_message(format!("{ready}/{brokers} broker(s) ready"));
            if ready == brokers {
                spinner.finish_and_clear();
                return Ok(());
            }
            if started.elapsed() > wait {
                bail!(
                    "brokers did not all register within {wait:?}; see the logs in {}",
                    dir.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    if let Err(e) = result {
        let _ = down(&dir);
        return Err(e);
    }
    print_up(&dir, &cluster, &pids, &cluster_file);
    Ok(ExitCode::SUCCESS)
}

/// What `up` prints: where every node listens, the Kafka bootstrap servers, and what to try.
fn print_up(dir: &Path, cluster: &ClusterConfig, pids: &[(String, u32)], cluster_file: &Path) {
    let brokers = cluster.brokers.len();
    let controllers = pids.len() - brokers;
    println!(
        "cluster up in {} ({controllers} controller(s), {brokers} broker(s))",
        dir.display()
    );
    let addrs = cluster
        .controller
        .iter()
        .cloned()
        .chain(cluster.controllers.iter().map(|c| c.address.clone()));
    for (addr, (name, pid)) in addrs.zip(pids) {
        println!("  {name:<12}  {addr}  (pid {pid})");
    }
    for (b, (_, pid)) in cluster.brokers.iter().zip(&pids[controllers..]) {
        println!("  broker {}    {}  (pid {})", b.id, b.address, pid);
    }
    let bootstrap: Vec<&str> = cluster
        .brokers
        .iter()
        .filter_map(|b| b.kafka_listener.as_deref())
        .collect();
    // One line, easy to grep for: the Kafka clients' bootstrap.servers (docs/kafka.md).
    println!("kafka bootstrap servers: {}", bootstrap.join(","));
    let cf = cluster_file.display();
    println!("try:");
    println!(
        "  skein topic create t --partitions 1 -r {} --cluster {cf}",
        brokers.min(3)
    );
    println!("  seq 10 | skein produce --topic t --cluster {cf}");
    println!("  skein consume --topic t --from-beginning --max 10 --cluster {cf}");
    println!("  kcat -b {} -L", bootstrap.join(","));
    println!("  skein cluster down --dir {}", dir.display());
}

/// Starts `skein node --config DIR/NAME.toml` in its own process group, logging
/// (appending) to DIR/NAME.log; returns its pid.
fn spawn_node(exe: &Path, dir: &Path, name: &str) -> anyhow::Result<u32> {
    let log = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into());
    Ok(start_node(exe, dir, name, &log)?.id())
}

/// The one way a node process is started (here and by `skein jepsen run`): `skein node
/// --config DIR/NAME.toml` in its own process group (a signal to the caller's group does
/// not reach it), output appended to DIR/NAME.log, `RUST_LOG=rust_log`.
pub(super) fn start_node(
    exe: &Path,
    dir: &Path,
    name: &str,
    rust_log: &str,
) -> anyhow::Result<std::process::Child> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{name}.log")))?;
    Command::new(exe)
        .arg("node")
        .arg("--config")
        .arg(dir.join(format!("{name}.toml")))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .env("RUST_LOG", rust_log)
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start {name}"))
}

/// `cluster restart NODE`: the node's config and data dir are those `up` wrote, so it
/// recovers its logs and rejoins; its new pid replaces the old one in the pid file.
fn restart(node: &str, dir: &Path, wait: Duration) -> anyhow::Result<ExitCode> {
    let dir = &dir
        .canonicalize()
        .with_context(|| format!("no cluster directory {}", dir.display()))?;
    let mut pids = read_pids(dir)?;
    let Some(slot) = pids.iter().position(|(n, _)| n == node) else {
        let names: Vec<&str> = pids.iter().map(|(n, _)| n.as_str()).collect();
        bail!(
            "no node {node:?} in {} (nodes: {})",
            dir.join(PID_FILE).display(),
            names.join(", ")
        );
    };
    let old = pids[slot].1;
    if alive(old) && is_our_node(old, dir) {
        stop_pid(node, old);
    }
    let exe = std::env::current_exe().context("cannot find the skein executable")?;
    let pid = spawn_node(&exe, dir, node)?;
    pids[slot].1 = pid;
    write_pids(dir, &pids)?;
    let cfg = NodeConfig::load(&dir.join(format!("{node}.toml")))?;
    let cluster = ClusterConfig::load(&dir.join("cluster.toml"))?;
    runtime()?.block_on(async {
        let mut client = Client::new(cluster, ClientOptions::default());
        let started = Instant::now();
        loop {
            if !alive(pid) {
                bail!(
                    "{node} exited during start-up; see {}",
                    dir.join(format!("{node}.log")).display()
                );
            }
            let up = match (cfg.role, cfg.node_id) {
                (NodeKind::Broker, Some(id)) => client.broker_metadata(id).await.is_ok(),
                _ => client.cluster_image().await.is_ok(),
            };
            if up {
                return Ok(());
            }
            if started.elapsed() > wait {
                bail!(
                    "{node} did not answer within {wait:?}; see {}",
                    dir.join(format!("{node}.log")).display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })?;
    println!("restarted {node} (pid {pid})");
    Ok(ExitCode::SUCCESS)
}

/// SIGTERM, up to 10 s for a graceful stop, then SIGKILL.
fn stop_pid(name: &str, pid: u32) {
    signal(pid, "TERM");
    // Brokers hand their leaderships over first (controlled shutdown, <= 5 s).
    let spinner = super::common::spinner(&format!("stopping {name} (pid {pid})"));
    let t = Instant::now();
    while alive(pid) && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    spinner.finish_and_clear();
    if alive(pid) {
        eprintln!("{name} (pid {pid}) did not stop within 10 s; killing it");
        signal(pid, "KILL");
    }
}

fn read_pids(dir: &Path) -> anyhow::Result<Vec<(String, u32)>> {
    let path = dir.join(PID_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (name, pid) = l
                .split_once(' ')
                .with_context(|| format!("{}: bad line {l:?}", path.display()))?;
            Ok((name.to_string(), pid.trim().parse()?))
        })
        .collect()
}

fn write_pids(dir: &Path, pids: &[(String, u32)]) -> anyhow::Result<()> {
    let text: String = pids.iter().map(|(n, p)| format!("{n} {p}\n")).collect();
    std::fs::write(dir.join(PID_FILE), text)?;
    Ok(())
}

/// Whether `pid` runs (a zombie does not count).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

/// Whether `pid` is a `skein node` process of this cluster directory (guards against a
/// recycled pid: `down` never signals anything else).
fn is_our_node(pid: u32, dir: &Path) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    args.iter().any(|a| a == "node")
        && args
            .iter()
            .any(|a| Path::new(a).parent() == Some(dir) && a.ends_with(".toml"))
}

fn down(dir: &Path) -> anyhow::Result<ExitCode> {
    let dir = &dir
        .canonicalize()
        .with_context(|| format!("no cluster directory {}", dir.display()))?;
    let pids = read_pids(dir)?;
    if pids.is_empty() {
        bail!("no cluster recorded in {} (no {PID_FILE})", dir.display());
    }
    // Brokers first, the controller last, so brokers can still talk to it while stopping.
    for (name, pid) in pids.iter().rev() {
        if alive(*pid) && !is_our_node(*pid, dir) {
            eprintln!(
                "pid {pid} ({name}) is no longer a skein node of {}; leaving it alone",
                dir.display()
            );
            continue;
        }
        if alive(*pid) {
            stop_pid(name, *pid);
            println!("stopped {name} (pid {pid})");
        }
    }
    std::fs::remove_file(dir.join(PID_FILE))?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Top {
        #[command(flatten)]
        cluster: ClusterArgs,
    }

    fn controllers_of(args: &[&str]) -> u32 {
        let top = Top::try_parse_from(args).expect("parses");
        match top.cluster.command {
            ClusterCommand::Up { controllers, .. } => controllers,
            other => panic!("not up: {other:?}"),
        }
    }

    /// No single point of failure by default: a quorum of three, one only when asked.
    #[test]
    fn cluster_up_starts_three_controllers_unless_told() {
        assert_eq!(controllers_of(&["skein", "up"]), 3);
        assert_eq!(controllers_of(&["skein", "up", "--controllers", "1"]), 1);
    }
}
