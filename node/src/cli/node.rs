//! `skein node --config FILE`: run one broker or the controller until SIGTERM / ctrl-c.

use super::common::{init_tracing, runtime};
use skein_node::config::{FsyncPolicy, NodeConfig};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct NodeArgs {
    /// Node configuration (TOML; see docs/node.md).
    #[arg(long)]
    pub config: PathBuf,
    /// Override `node_id`.
    #[arg(long)]
    pub node_id: Option<u32>,
    /// Override `data_dir`.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Override `fsync` (`never` is unsafe for acks=all).
    #[arg(long, value_enum)]
    pub fsync: Option<FsyncPolicy>,
}

pub fn run(args: NodeArgs) -> anyhow::Result<ExitCode> {
    init_tracing("info");
    let mut cfg = NodeConfig::load(&args.config)?;
    if let Some(id) = args.node_id {
        cfg.node_id = Some(id);
    }
    if let Some(dir) = args.data_dir {
        cfg.data_dir = dir;
    }
    if let Some(f) = args.fsync {
        cfg.fsync = f;
    }
    let cfg = cfg.validate()?;
    if cfg.fsync == FsyncPolicy::Never {
        tracing::warn!("fsync = never: acknowledged (acks=all) records can be lost on a crash");
    }
    runtime()?.block_on(skein_node::runtime::run_until_signal(cfg))?;
    Ok(ExitCode::SUCCESS)
}
