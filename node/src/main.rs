//! The `skein` command line. Each subcommand lives in its own module under `cli/`.

use clap::{Parser, Subcommand};

mod cli;

#[derive(Parser)]
#[command(
    name = "skein",
    version,
    about = "Skein: a Kafka-style replicated log, its simulator and its checker"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Seeded, deterministic fault simulations of a whole cluster.
    Sim(cli::sim::SimArgs),
    /// Judge a client history (JSON Lines) for Kafka-style anomalies.
    Check(cli::check::CheckArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim(args) => cli::sim::run(args),
        Command::Check(args) => cli::check::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::from(2)
        }
    }
}
