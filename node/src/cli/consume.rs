//! `skein consume --topic t`: print committed records (one value per line).

use super::common::{client, runtime, ClusterArg};
use skein_core::message::OffsetSpec;
use skein_core::types::TopicPartition;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;
use tokio::time::Instant;

#[derive(clap::Args, Debug)]
pub struct ConsumeArgs {
    #[arg(long)]
    pub topic: String,
    /// Start at each partition's earliest offset (default: only new records).
    #[arg(long)]
    pub from_beginning: bool,
    /// Stop after this many records.
    #[arg(long)]
    pub max: Option<u64>,
    /// Only this partition (default: all).
    #[arg(long)]
    pub partition: Option<u32>,
    /// Stop when no new record arrived for this long (default: keep waiting).
    #[arg(long)]
    pub idle_exit_ms: Option<u64>,
    /// Prefix each value with `topic-partition@offset<TAB>`.
    #[arg(long)]
    pub print_offsets: bool,
    #[command(flatten)]
    pub cluster: ClusterArg,
}

pub fn run(args: ConsumeArgs) -> anyhow::Result<ExitCode> {
    super::common::init_tracing("warn");
    let mut c = client(&args.cluster)?;
    runtime()?.block_on(async move {
        let mut parts: Vec<u32> = c
            .wait_topic(&args.topic)
            .await?
            .iter()
            .map(|p| p.tp.partition)
            .filter(|p| args.partition.is_none_or(|want| *p == want))
            .collect();
        parts.sort();
        anyhow::ensure!(
            !parts.is_empty(),
            "topic {} has no partition {:?}",
            args.topic,
            args.partition
        );
        let spec = if args.from_beginning {
            OffsetSpec::Earliest
        } else {
            OffsetSpec::Latest
        };
        let mut positions = Vec::new();
        for p in parts {
            let tp = TopicPartition::new(&args.topic, p);
            let at = c.list_offset(&tp, spec).await?;
            positions.push((tp, at));
        }
        let mut printed = 0u64;
        let mut last_progress = Instant::now();
        let stdout = std::io::stdout();
        loop {
            let mut progressed = false;
            for (tp, at) in positions.iter_mut() {
                let (records, _hw) = c.fetch(tp, *at, 1 << 20).await?;
                let mut out = stdout.lock();
                for (offset, value) in records {
                    if args.max.is_some_and(|m| printed >= m) {
                        break;
                    }
                    let text = value
                        .map(|v| String::from_utf8_lossy(&v).into_owned())
                        .unwrap_or_default();
                    if args.print_offsets {
                        writeln!(out, "{tp}@{offset}\t{text}")?;
                    } else {
                        writeln!(out, "{text}")?;
                    }
                    *at = offset + 1;
                    printed += 1;
                    progressed = true;
                }
                out.flush()?;
            }
            if args.max.is_some_and(|m| printed >= m) {
                break;
            }
            if progressed {
                last_progress = Instant::now();
            } else {
                if args
                    .idle_exit_ms
                    .is_some_and(|ms| last_progress.elapsed() >= Duration::from_millis(ms))
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        eprintln!("consumed {printed} record(s) from {}", args.topic);
        Ok(ExitCode::SUCCESS)
    })
}
