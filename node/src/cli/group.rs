//! `skein group describe G`: a consumer group as its coordinator holds it (state,
//! generation, members and their assignment) with committed offsets and lag (the
//! partition's high watermark minus the committed offset).

use super::common::{client, runtime, ClusterArg};
use skein_core::message::OffsetSpec;
use skein_core::types::TopicPartition;
use std::collections::BTreeSet;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct GroupArgs {
    #[command(subcommand)]
    pub command: GroupCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum GroupCommand {
    /// Members, generation, assignment, committed offsets and lag of a consumer group.
    Describe {
        group: String,
        #[command(flatten)]
        cluster: ClusterArg,
    },
}

pub fn run(args: GroupArgs) -> anyhow::Result<ExitCode> {
    super::common::init_tracing("warn");
    let GroupCommand::Describe { group, cluster } = args.command;
    let mut c = client(&cluster)?;
    runtime()?.block_on(async move {
        let (coordinator, d) = c.describe_group(&group).await?;
        println!(
            "group {}  state {}  generation {}  coordinator broker {}  protocol {}  leader {}",
            d.group_id,
            d.state,
            d.generation,
            coordinator,
            d.protocol.as_deref().unwrap_or("-"),
            d.leader.as_deref().unwrap_or("-"),
        );
        if d.state == "Dead" {
            println!("(no such group: nobody joined it and it has no committed offsets)");
            return Ok(ExitCode::SUCCESS);
        }
        println!("members: {}", d.members.len());
        for m in &d.members {
            let parts: Vec<String> = m.assignment.iter().map(|t| t.to_string()).collect();
            println!(
                "  {}{}  assigned: {}",
                m.member_id,
                m.group_instance_id
                    .as_deref()
                    .map(|i| format!(" (instance {i})"))
                    .unwrap_or_default(),
                if parts.is_empty() {
                    "-".into()
                } else {
                    parts.join(", ")
                }
            );
        }
        // Every partition that is assigned or has a committed offset.
        let mut tps: BTreeSet<TopicPartition> = d.offsets.keys().cloned().collect();
        tps.extend(d.members.iter().flat_map(|m| m.assignment.iter().cloned()));
        println!(
            "{:<32} {:>12} {:>12} {:>10}  owner",
            "partition", "committed", "end (HW)", "lag"
        );
        for tp in tps {
            let committed = d.offsets.get(&tp).map(|o| o.offset);
            let hw = c.list_offset(&tp, OffsetSpec::Latest).await.ok();
            let lag = match (committed, hw) {
                (Some(c), Some(h)) => h.saturating_sub(c).to_string(),
                (None, Some(h)) => format!("{h}*"),
                _ => "?".into(),
            };
            let owner = d
                .members
                .iter()
                .find(|m| m.assignment.contains(&tp))
                .map_or("-", |m| m.member_id.as_str());
            println!(
                "{:<32} {:>12} {:>12} {:>10}  {owner}",
                tp.to_string(),
                committed.map_or("-".into(), |c| c.to_string()),
                hw.map_or("?".into(), |h| h.to_string()),
                lag,
            );
        }
        println!("(* no committed offset: lag counted from offset 0; ? = leader unreachable)");
        Ok(ExitCode::SUCCESS)
    })
}
