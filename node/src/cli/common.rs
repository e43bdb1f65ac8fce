//! Helpers shared by the client subcommands.

use anyhow::Context;
use skein_node::client::{Client, ClientOptions};
use skein_node::config::ClusterConfig;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `--cluster FILE`: a cluster file (as written by `skein cluster up`) or any node config.
#[derive(clap::Args, Debug, Clone)]
pub struct ClusterArg {
    /// Cluster file listing the controller and brokers (`skein cluster up` writes
    /// DIR/cluster.toml; a node's config file works too).
    #[arg(long, default_value = "./data/cluster.toml")]
    pub cluster: PathBuf,
}

pub fn client(arg: &ClusterArg) -> anyhow::Result<Client> {
    let cluster = load_cluster(&arg.cluster)?;
    Ok(Client::new(cluster, ClientOptions::default()))
}

pub fn load_cluster(path: &Path) -> anyhow::Result<skein_node::config::ClusterAddresses> {
    Ok(ClusterConfig::load(path)?)
}

/// A tokio runtime for one command.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// Logs to stderr, filtered by RUST_LOG (default `default`).
pub fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// A spinner on stderr for a wait of unknown length (hidden when stderr is not a terminal,
/// so scripts and logs stay clean).
pub fn spinner(msg: &str) -> indicatif::ProgressBar {
    let pb = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        indicatif::ProgressBar::new_spinner()
    } else {
        indicatif::ProgressBar::hidden()
    };
    pb.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed}] {prefix}: {msg}")
            .expect("valid template"),
    );
    pb.set_prefix(msg.to_string());
    pb.enable_steady_tick(std::time::Duration::from_millis(120));
    pb
}

/// `n` distinct free TCP ports on 127.0.0.1 (each listener is held until all are picked).
pub fn free_ports(n: usize) -> anyhow::Result<Vec<u16>> {
    let listeners = reserve_ports(n)?;
    listener_ports(&listeners)
}

/// `n` listeners on distinct free ports of 127.0.0.1, for a caller that must keep the OS
/// from handing those ports to its own next `bind(port 0)` before it releases them.
pub fn reserve_ports(n: usize) -> anyhow::Result<Vec<std::net::TcpListener>> {
    (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .context("cannot pick free ports on 127.0.0.1")
}

/// The ports `listeners` hold.
pub fn listener_ports(listeners: &[std::net::TcpListener]) -> anyhow::Result<Vec<u16>> {
    Ok(listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<_, _>>()?)
}

/// Sends signal `sig` (`TERM`, `KILL`, `STOP`, ...) to process `pid` through `kill`;
/// best effort (a process already gone is no error).
pub fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}
