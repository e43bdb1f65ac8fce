//! `skein topic create|list|describe|delete`: admin calls to the controller.

use super::common::{client, runtime, ClusterArg};
use anyhow::bail;
use skein_core::controller::{TopicConfig, UncleanRecoveryStrategy};
use skein_node::topic_configs;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct TopicArgs {
    #[command(subcommand)]
    pub command: TopicCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum TopicCommand {
    /// Create a topic.
    Create {
        name: String,
        #[arg(long, default_value_t = 1)]
        partitions: u32,
        #[arg(long, short = 'r', default_value_t = 1)]
        replication_factor: u16,
        /// acks=all produce is refused while the ISR is smaller than this.
        #[arg(long, default_value_t = 1)]
        min_insync_replicas: u16,
        /// Allow electing a leader outside the ISR (may lose acknowledged records).
        #[arg(long)]
        unclean_leader_election: bool,
        /// KIP-966's unclean.recovery.strategy: what the controller does when no ISR or
        /// ELR member can lead: none, balanced (ask every replica, elect only without
        /// losing what any replica knew committed) or aggressive (elect the best at once).
        #[arg(long, default_value = "balanced")]
        unclean_recovery_strategy: UncleanRecoveryStrategy,
        #[arg(long)]
        retention_ms: Option<i64>,
        /// A topic config by Kafka's name, as `kafka-topics.sh --config`; repeatable:
        /// cleanup.policy (delete, compact, compact,delete), delete.retention.ms,
        /// min.compaction.lag.ms, min.cleanable.dirty.ratio, retention.ms, retention.bytes,
        /// min.insync.replicas, unclean.leader.election.enable, unclean.recovery.strategy.
        /// Applied after the flags above.
        #[arg(long = "config", value_name = "KEY=VALUE")]
        configs: Vec<String>,
        #[command(flatten)]
        cluster: ClusterArg,
    },
    /// List topics.
    List {
        #[command(flatten)]
        cluster: ClusterArg,
    },
    /// Delete a topic (its data is removed from every broker).
    Delete {
        name: String,
        #[command(flatten)]
        cluster: ClusterArg,
    },
    /// Show a topic's partitions: leader, epochs, replicas, ISR.
    Describe {
        name: String,
        #[command(flatten)]
        cluster: ClusterArg,
    },
}

pub fn run(args: TopicArgs) -> anyhow::Result<ExitCode> {
    super::common::init_tracing("warn");
    runtime()?.block_on(async {
        match args.command {
            TopicCommand::Create {
                name,
                partitions,
                replication_factor,
                min_insync_replicas,
                unclean_leader_election,
                unclean_recovery_strategy,
                retention_ms,
                configs,
                cluster,
            } => {
                let mut c = client(&cluster)?;
                let brokers = c.cluster().brokers.len();
                if usize::from(replication_factor) > brokers {
                    bail!(
                        "replication factor {replication_factor} is above the broker count {brokers} of {}",
                        cluster.cluster.display()
                    );
                }
                let mut config = TopicConfig {
                    partitions,
                    replication_factor,
                    min_insync_replicas,
                    unclean_leader_election,
                    unclean_recovery_strategy,
                    retention_ms,
                    retention_bytes: None,
                    ..TopicConfig::default()
                };
                for pair in &configs {
                    topic_configs::parse_pair(pair)
                        .and_then(|(k, v)| topic_configs::apply(&mut config, &k, &v))
                        .map_err(|e| anyhow::anyhow!("--config {pair}: {e}"))?;
                }
                if let Err(reason) = config.validate() {
                    bail!("invalid topic config: {reason}");
                }
                let policy = config.cleanup_policy.name();
                let id = c.create_topic(&name, config).await?;
                println!("created topic {name} (id {id}): {partitions} partition(s), replication factor {replication_factor}, min.insync.replicas {min_insync_replicas}, cleanup.policy {policy}");
                // Return once the brokers serve it, so that a client started next does
                // not meet a broker that has not heard of it yet.
                let within = std::time::Duration::from_secs(30);
                let (ready, failed) = c.wait_topic_on_brokers(&name, partitions, within).await;
                if !ready.is_empty() {
                    let ids: Vec<String> = ready.iter().map(ToString::to_string).collect();
                    println!("served with leaders by broker(s) {}", ids.join(","));
                }
                for (id, why) in failed {
                    eprintln!("warning: broker {id} does not serve {name} yet: {why}");
                }
            }
            TopicCommand::Delete { name, cluster } => {
                client(&cluster)?.delete_topic(&name).await?;
                println!("deleted topic {name}");
            }
            TopicCommand::List { cluster } => {
                let image = client(&cluster)?.cluster_image().await?;
                for t in image.topics.values() {
                    println!(
                        "{}\tpartitions={}\treplication_factor={}\tmin_insync_replicas={}",
                        t.name, t.config.partitions, t.config.replication_factor, t.config.min_insync_replicas
                    );
                }
            }
            TopicCommand::Describe { name, cluster } => {
                let image = client(&cluster)?.cluster_image().await?;
                let Some(t) = image.topic(&name) else {
                    bail!("unknown topic {name:?} (see `skein topic list`)");
                };
                println!(
                    "topic {} (id {}): partitions={} replication_factor={} min_insync_replicas={} unclean_leader_election={} unclean_recovery_strategy={} cleanup.policy={}",
                    t.name, t.topic_id, t.config.partitions, t.config.replication_factor,
                    t.config.min_insync_replicas, t.config.unclean_leader_election,
                    t.config.unclean_recovery_strategy.name(), t.config.cleanup_policy.name()
                );
                if t.config.cleanup_policy.compacts() {
                    println!(
                        "  delete.retention.ms={} min.compaction.lag.ms={} min.cleanable.dirty.ratio={}",
                        t.config.delete_retention_ms,
                        t.config.min_compaction_lag_ms,
                        topic_configs::ratio_text(t.config.min_cleanable_dirty_ratio_permille)
                    );
                }
                for (p, s) in &t.partitions {
                    let leader = s.leader.map_or("none".to_string(), |l| l.to_string());
                    println!(
                        "  {}-{p}\tleader={leader}\tleader_epoch={}\tpartition_epoch={}\treplicas={:?}\tisr={:?}",
                        t.name, s.leader_epoch, s.partition_epoch, s.replicas, s.isr
                    );
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
