//! `skein sim ...`: seeded fault simulations (filled in by the simulator work).

use clap::Args;
use std::process::ExitCode;

#[derive(Args)]
pub struct SimArgs {}

pub fn run(_args: SimArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("the simulator is not built yet")
}
