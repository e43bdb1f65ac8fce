//! `skein check HISTORY.jsonl`: judge a client history (filled in by the checker work).

use clap::Args;
use std::process::ExitCode;

#[derive(Args)]
pub struct CheckArgs {}

pub fn run(_args: CheckArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("the checker is not built yet")
}
