//! `skein consume --topic t`: print committed records (one value per line). With
//! `--group g` the partitions are shared with the group's other members (core's
//! `GroupConsumer` on [`skein_node::group_client::GroupClient`]) and the position of every
//! printed record is committed after it is printed (at least once: a crash between
//! printing and committing prints those records again in the next owner).

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
    /// Consume as a member of this consumer group: partitions are assigned by the group,
    /// and positions are committed after printing. Without a committed offset a partition
    /// starts at the high watermark, or at the earliest offset with `--from-beginning`.
    #[arg(long)]
    pub group: Option<String>,
    /// With --group: how partitions are shared out (every member must offer the same).
    #[arg(long, value_enum, default_value_t = AssignorArg::Range)]
    pub assignor: AssignorArg,
    /// With --group: static membership (`group.instance.id`): a member that restarts
    /// within the session timeout gets its partitions back without a rebalance.
    #[arg(long)]
    pub instance_id: Option<String>,
    /// `read_committed`: stop at each partition's last stable offset and skip aborted
    /// transactions' records; `read_uncommitted` (default): everything below the high
    /// watermark, records of open and aborted transactions included.
    #[arg(long, value_enum, default_value_t = IsolationArg::ReadUncommitted)]
    pub isolation: IsolationArg,
    #[command(flatten)]
    pub cluster: ClusterArg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum IsolationArg {
    #[value(name = "read_uncommitted")]
    ReadUncommitted,
    #[value(name = "read_committed")]
    ReadCommitted,
}

impl From<IsolationArg> for skein_core::txn::IsolationLevel {
    fn from(a: IsolationArg) -> Self {
        match a {
            IsolationArg::ReadUncommitted => Self::ReadUncommitted,
            IsolationArg::ReadCommitted => Self::ReadCommitted,
        }
    }
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum AssignorArg {
    Range,
    #[value(name = "roundrobin")]
    RoundRobin,
    #[value(name = "cooperative-sticky")]
    CooperativeSticky,
}

pub fn run(args: ConsumeArgs) -> anyhow::Result<ExitCode> {
    super::common::init_tracing("warn");
    anyhow::ensure!(
        args.group.is_some() || args.instance_id.is_none(),
        "--instance-id needs --group"
    );
    if let Some(group) = args.group.clone() {
        anyhow::ensure!(
            args.partition.is_none(),
            "--partition and --group exclude each other: the group assigns partitions"
        );
        return run_group(args, group);
    }
    let mut c = client(&args.cluster)?;
    c.set_isolation(args.isolation.into());
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
                let fetched = c.fetch_next(tp, *at, 1 << 20).await?;
                let mut out = stdout.lock();
                let mut took_all = true;
                if let Some(t) = &fetched.truncation {
                    // An unclean election cut the log under us: read on from where it diverged.
                    eprintln!("{tp}: {t}");
                    *at = t.to;
                }
                for (offset, value) in fetched.records {
                    if args.max.is_some_and(|m| printed >= m) {
                        took_all = false;
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
                if took_all {
                    // Past leader-epoch markers, which hold no records to print.
                    *at = (*at).max(fetched.next_offset);
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

fn run_group(args: ConsumeArgs, group: String) -> anyhow::Result<ExitCode> {
    use skein_core::client::ConsumerEvent;
    use skein_node::group_client::GroupClient;
    use std::collections::BTreeMap;

    let mut c = client(&args.cluster)?;
    let cluster = c.cluster().clone();
    runtime()?.block_on(async move {
        // A topic the controller does not know fails here with a clear error.
        c.wait_topic(&args.topic).await?;
        let mut gc = GroupClient::new(cluster, member_config(&args, &group))?;
        gc.subscribe(&[args.topic.as_str()]).await;
        let stdout = std::io::stdout();
        let mut printed = 0u64;
        let mut to_commit: BTreeMap<TopicPartition, u64> = BTreeMap::new();
        let mut last_progress = Instant::now();
        let mut last_commit = Instant::now();
        let mut last_error: Option<String> = None;
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        loop {
            let records = tokio::select! {
                r = gc.poll(Duration::from_millis(100)) => r?,
                _ = &mut ctrl_c => break,
            };
            for e in gc.take_events() {
                if let Some(e) = report_event(&group, e) {
                    last_error = Some(e);
                }
            }
            if !records.is_empty() {
                let mut out = stdout.lock();
                for r in records {
                    if args.max.is_some_and(|m| printed >= m) {
                        break;
                    }
                    let text = r
                        .value
                        .map(|v| String::from_utf8_lossy(&v).into_owned())
                        .unwrap_or_default();
                    if args.print_offsets {
                        writeln!(out, "{}@{}\t{text}", r.tp, r.offset)?;
                    } else {
                        writeln!(out, "{text}")?;
                    }
                    to_commit.insert(r.tp.clone(), r.offset + 1);
                    printed += 1;
                }
                out.flush()?;
                last_progress = Instant::now();
            }
            // Commit what was printed, at most every 200 ms.
            if !to_commit.is_empty() && last_commit.elapsed() >= Duration::from_millis(200) {
                gc.commit(std::mem::take(&mut to_commit)).await;
                last_commit = Instant::now();
            }
            if args.max.is_some_and(|m| printed >= m) {
                break;
            }
            if args
                .idle_exit_ms
                .is_some_and(|ms| last_progress.elapsed() >= Duration::from_millis(ms))
            {
                break;
            }
        }
        // Final commit of everything printed, then leave the group.
        let mut committed = true;
        if !to_commit.is_empty() {
            let id = gc.commit(to_commit).await;
            committed = gc
                .run_until(Duration::from_secs(15), |_, events| {
                    events.iter().any(
                        |e| matches!(e, ConsumerEvent::CommitCompleted { id: i, .. } if *i == id),
                    )
                })
                .await;
            for e in gc.take_events() {
                if let ConsumerEvent::CommitCompleted { id: i, result } = e {
                    if i == id {
                        if let Err(e) = result {
                            committed = false;
                            last_error = Some(e.to_string());
                        }
                    }
                }
            }
        }
        gc.close().await;
        eprintln!(
            "consumed {printed} record(s) from {} as group {group}",
            args.topic
        );
        if !committed {
            anyhow::bail!(
                "the last positions of group {group} were not committed ({}): the next \
                 member will print those records again; check that the brokers are up \
                 (`skein group describe {group}`)",
                last_error.unwrap_or_else(|| "no answer from the coordinator".into())
            );
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// The group member `skein consume --group` runs: explicit commits after printing, and
/// timeouts for an interactive tool.
fn member_config(args: &ConsumeArgs, group: &str) -> skein_core::client::ConsumerConfig {
    use skein_core::client::{ConsumerConfig, OffsetReset};
    use skein_core::group::AssignorKind;
    const MS: u64 = 1_000_000;
    let mut config = ConsumerConfig::new(group.to_string());
    config.session_timeout = 10_000 * MS;
    config.rebalance_timeout = 10_000 * MS;
    config.heartbeat_interval = 1_000 * MS;
    config.request_timeout = 12_000 * MS;
    config.metadata_max_age = 10_000 * MS;
    // Commits are explicit: after printing.
    config.auto_commit_interval = None;
    config.assignors = vec![match args.assignor {
        AssignorArg::Range => AssignorKind::Range,
        AssignorArg::RoundRobin => AssignorKind::RoundRobin,
        AssignorArg::CooperativeSticky => AssignorKind::CooperativeSticky,
    }];
    config.instance_id = args.instance_id.clone();
    config.isolation = args.isolation.into();
    config.reset = if args.from_beginning {
        OffsetReset::Earliest
    } else {
        OffsetReset::Latest
    };
    config
}

/// Tells the user about a group event on stderr; returns a failed commit's error.
fn report_event(group: &str, e: skein_core::client::ConsumerEvent) -> Option<String> {
    use skein_core::client::ConsumerEvent;
    match e {
        ConsumerEvent::PartitionsAssigned {
            generation,
            partitions,
        } => eprintln!(
            "group {group}: generation {generation}, assigned {}",
            list(&partitions)
        ),
        ConsumerEvent::PartitionsRevoked { partitions } => {
            eprintln!("group {group}: revoked {}", list(&partitions));
        }
        ConsumerEvent::PartitionsLost { partitions } => eprintln!(
            "group {group}: lost {} (generation gone; rejoining)",
            list(&partitions)
        ),
        ConsumerEvent::Truncated { tp, truncation } => {
            eprintln!("group {group}: {tp}: {truncation}");
        }
        ConsumerEvent::CommitCompleted { result: Err(e), .. } => {
            tracing::warn!(error = %e, "commit failed; the next commit carries the positions again");
            return Some(e.to_string());
        }
        _ => {}
    }
    None
}

fn list(tps: &[TopicPartition]) -> String {
    if tps.is_empty() {
        return "nothing".into();
    }
    tps.iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
