//! `skein check HISTORY.jsonl [--final-reads] [--strict] [--serializable] [--json]`: judge a
//! client history, its transactions (`txn` operations) included.
//!
//! Exit codes: 0 the history is valid, 1 anomalies were found, 2 the input could not be read
//! (the message names the file and line).

use anyhow::Context;
use clap::Args;
use skein_jepsen::plot::{self, ReportInput};
use skein_jepsen::{check, read_history, CheckOptions, Event, Report, DEFAULT_MAX_EXAMPLES};
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
    /// Also draw the history into DIR (created): latency, quantiles, rate, unseen, lag,
    /// the timeline (the anomalies' operations marked) and index.html linking them.
    #[arg(long, value_name = "DIR")]
    pub plots: Option<PathBuf>,
    /// Fault windows to draw under the plots: a `nemesis.jsonl` of `skein jepsen run`
    /// (one JSON object a line: kind, start, end in ns, and label or node). Needs --plots.
    #[arg(long, value_name = "FILE", requires = "plots")]
    pub faults: Option<PathBuf>,
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
    if let Some(dir) = &args.plots {
        write_plots(&args, dir, &name, &events, &report)?;
    }
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

/// `--plots DIR`: the report directory of this history (and of `--faults`, if given).
fn write_plots(
    args: &CheckArgs,
    dir: &std::path::Path,
    name: &str,
    events: &[Event],
    report: &Report,
) -> anyhow::Result<()> {
    let shades = match &args.faults {
        None => Vec::new(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --faults {}", path.display()))?;
            plot::read_faults(&text)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("bad --faults file {}", path.display()))?
        }
    };
    let mut files = Vec::new();
    if let Some(f) = &args.faults {
        files.push((
            f.display().to_string(),
            "the fault windows drawn".to_string(),
        ));
    }
    let written = plot::write_dir(
        dir,
        &ReportInput {
            title: format!("skein check {name}"),
            events,
            shades: &shades,
            time_label: "time (s)",
            roles: Default::default(),
            report: Some(report),
            verdict: report.to_string(),
            valid: report.valid,
            marks: Vec::new(),
            files,
        },
    )
    .with_context(|| format!("cannot write the plots into --plots {}", dir.display()))?;
    eprintln!(
        "wrote {} files into {} (open index.html)",
        written.len(),
        dir.display()
    );
    Ok(())
}
