//! `skein admin stats [--broker ADDR]`: each broker's metrics snapshot: per hosted
//! partition its role, leader epoch, log start/end, HW, ISR and lag; per message kind the
//! requests received, the recent rate and answer latencies (p50/p99/p99.9/max).
//!
//! Lag: on a leader, records not yet committed (log end - HW); on a follower (when every
//! broker is asked), how far its log end is behind the leader's.

use super::common::{load_cluster, runtime, ClusterArg};
use anyhow::Context;
use skein_core::types::{NodeId, TopicPartition};
use skein_node::client::Conn;
use skein_node::frame::DEFAULT_MAX_FRAME;
use skein_node::stats::StatsSnapshot;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct AdminArgs {
    #[command(subcommand)]
    pub command: AdminCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum AdminCommand {
    /// Metrics of every broker (or of one, or of the controller, with `--broker ADDR`).
    Stats {
        /// Ask only the node at this address (a broker or the controller).
        #[arg(long)]
        broker: Option<SocketAddr>,
        /// Print the snapshots as JSON (one object per line) instead of tables.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cluster: ClusterArg,
    },
}

pub fn run(args: AdminArgs) -> anyhow::Result<ExitCode> {
    super::common::init_tracing("warn");
    let AdminCommand::Stats {
        broker,
        json,
        cluster,
    } = args.command;
    let targets: Vec<SocketAddr> = match broker {
        Some(a) => vec![a],
        None => load_cluster(&cluster.cluster)?
            .brokers
            .iter()
            .map(|(_, a)| *a)
            .collect(),
    };
    runtime()?.block_on(async move {
        let mut snaps = Vec::new();
        let mut failed = 0;
        for addr in targets {
            let res = async {
                let mut conn = Conn::connect(addr, DEFAULT_MAX_FRAME).await?;
                conn.stats(Duration::from_secs(5)).await
            }
            .await;
            match res {
                Ok(s) => snaps.push((addr, s)),
                Err(e) => {
                    failed += 1;
                    eprintln!("error: {addr}: {e}");
                }
            }
        }
        if json {
            for (_, s) in &snaps {
                println!("{}", serde_json::to_string(s).context("encoding stats")?);
            }
        } else {
            print_tables(&snaps);
        }
        anyhow::ensure!(
            failed == 0 || !snaps.is_empty(),
            "no node answered: is the cluster up (`skein cluster up`)? check --cluster or --broker"
        );
        Ok(if failed == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    })
}

fn print_tables(snaps: &[(SocketAddr, StatsSnapshot)]) {
    // The leaders' log ends, to show followers' lag.
    let mut leader_end: BTreeMap<TopicPartition, u64> = BTreeMap::new();
    for (_, s) in snaps {
        for p in s.partitions.iter().filter(|p| p.role == "leader") {
            leader_end.insert(p.tp.clone(), p.log_end_offset);
        }
    }
    for (addr, s) in snaps {
        let who = s
            .node
            .map_or("controller".to_string(), |n: NodeId| format!("broker {n}"));
        println!(
            "== {who} at {addr}, up {:.1} s",
            s.uptime_ms as f64 / 1000.0
        );
        if !s.partitions.is_empty() {
            println!(
                "  {:<28} {:<14} {:>5} {:>10} {:>10} {:>10} {:>8}  isr",
                "partition", "role", "epoch", "start", "LEO", "HW", "lag"
            );
            for p in &s.partitions {
                let lag = if p.role == "leader" {
                    (p.log_end_offset - p.high_watermark.min(p.log_end_offset)).to_string()
                } else {
                    leader_end.get(&p.tp).map_or("?".into(), |e| {
                        e.saturating_sub(p.log_end_offset).to_string()
                    })
                };
                let isr = if p.isr.is_empty() {
                    "-".to_string()
                } else {
                    format!("{:?}", p.isr)
                };
                println!(
                    "  {:<28} {:<14} {:>5} {:>10} {:>10} {:>10} {:>8}  {isr}",
                    p.tp.to_string(),
                    p.role,
                    p.leader_epoch,
                    p.log_start_offset,
                    p.log_end_offset,
                    p.high_watermark,
                    lag
                );
            }
        }
        println!(
            "  {:<22} {:>10} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9}",
            "requests", "count", "recent/s", "answered", "p50 us", "p99 us", "p99.9 us", "max us"
        );
        for r in &s.requests {
            println!(
                "  {:<22} {:>10} {:>9.1} {:>10} {:>9} {:>9} {:>9} {:>9}",
                r.kind,
                r.count,
                r.recent_per_sec,
                r.answered,
                r.p50_us,
                r.p99_us,
                r.p999_us,
                r.max_us
            );
        }
    }
}
