//! The `skein` command line. Each subcommand lives in its own module under `cli/`.

use clap::{Parser, Subcommand};

mod cli;
mod memory;

/// mimalloc instead of the system allocator: allocation and freeing were ~20% of a
/// simulation's instructions (docs/PERFORMANCE.md), and the broker allocates per request.
#[global_allocator]
static GLOBAL: memory::Allocator = memory::Allocator;

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
    /// Run one broker or the controller (`--config FILE`).
    Node(cli::node::NodeArgs),
    /// Start or stop a local cluster of processes on 127.0.0.1.
    Cluster(cli::cluster::ClusterArgs),
    /// Create, list and describe topics.
    Topic(cli::topic::TopicArgs),
    /// Write stdin lines to a topic, one record each.
    Produce(cli::produce::ProduceArgs),
    /// Print a topic's committed records (alone, or as a member of a consumer group).
    Consume(cli::consume::ConsumeArgs),
    /// Inspect consumer groups.
    Group(cli::group::GroupArgs),
    /// Operator views of a running cluster (metrics snapshot per broker).
    Admin(cli::admin::AdminArgs),
    /// Measure produce / consume throughput and latency against a running cluster.
    Bench(cli::bench::BenchArgs),
    /// Test a real local cluster under real faults (kill -9, pause, partition) and check it.
    Jepsen(cli::jepsen::JepsenArgs),
}

fn main() -> std::process::ExitCode {
    if cfg!(madsim) {
        // Built for the simulation tests (RUSTFLAGS="--cfg madsim"): sockets, clocks and
        // tasks are madsim's, which only exist inside a simulation; no real processes.
        eprintln!("error: this skein was built with --cfg madsim (simulation tests only); build it without that RUSTFLAGS");
        return std::process::ExitCode::from(2);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim(args) => cli::sim::run(args),
        Command::Check(args) => cli::check::run(args),
        Command::Node(args) => cli::node::run(args),
        Command::Cluster(args) => cli::cluster::run(args),
        Command::Topic(args) => cli::topic::run(args),
        Command::Produce(args) => cli::produce::run(args),
        Command::Consume(args) => cli::consume::run(args),
        Command::Group(args) => cli::group::run(args),
        Command::Admin(args) => cli::admin::run(args),
        Command::Bench(args) => cli::bench::run(args),
        Command::Jepsen(args) => cli::jepsen::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::from(2)
        }
    }
}
