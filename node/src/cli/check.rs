//! `skein check HISTORY.jsonl [--final-reads] [--strict] [--serializable] [--json]`: judge a
//! client history, its transactions (`txn` operations) included.
//!
//! Exit codes: 0 the history is valid, 1 anomalies were found, 2 the input could not be read
//! (the message names the file and line).

use anyhow::Context;
use clap::Args;
use skein_jepsen::{check, read_history, CheckOptions, DEFAULT_MAX_EXAMPLES};
use std::fs::File;
use std::io::{self, BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct CheckArgs {
    /// History to check: JSON Lines as described in docs/history.md (`-` for standard input).
    pub history: PathBuf,
    /// The history ends with reads to the end of every partition, so acknowledged sends that
    /// were never read (`unseen`) are anomalies.
    #[arg(long)]
    pub final_reads: bool,
    /// Jepsen's policies: a history that proves nothing (no acknowledged send, or no record
    /// read) and a read of a value no send carried are anomalies.
    #[arg(long)]
    pub strict: bool,
    /// Transactions: dependency cycles (G0, G1c, G-single, G2) are anomalies. Kafka promises
    /// atomic commits and read_committed visibility, not serializability, so by default
    /// they are counted and explained but do not fail the history (docs/history.md, "Transactions").
    #[arg(long)]
    pub serializable: bool,
    /// Print the report as one JSON document instead of the human summary.
    #[arg(long)]
    pub json: bool,
    /// Examples kept per anomaly.
    #[arg(long, default_value_t = DEFAULT_MAX_EXAMPLES)]
    pub max_examples: usize,
}

pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let stdin = args.history.as_os_str() == "-";
    let name = if stdin {
        "<standard input>".to_string()
    } else {
        args.history.display().to_string()
    };
    let events = if stdin {
        read_history(io::stdin().lock())
    } else {
        let file = File::open(&args.history).with_context(|| format!("cannot open {name}"))?;
        read_history(BufReader::with_capacity(1 << 20, file))
    }
    .with_context(|| format!("bad history {name}"))?;
    tracing::debug!(events = events.len(), "history read");
    let options = CheckOptions {
        final_reads: args.final_reads,
        strict: args.strict,
        max_examples: args.max_examples,
    };
    let mut report = check(&events, &options);
    report.set_serializable(args.serializable);
    let mut out = io::stdout().lock();
    let text = if args.json {
        let mut json = serde_json::to_string_pretty(&report).context("cannot encode the report")?;
        json.push('\n');
        json
    } else {
        report.to_string()
    };
    let written = out.write_all(text.as_bytes());
    match written.and_then(|()| out.flush()) {
        Ok(()) => {}
        // `skein check ... | head` is fine.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        Err(e) => return Err(e).context("cannot write the report"),
    }
    Ok(if report.valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
