//! The client history, in skein-jepsen's format (docs/history.md), passed on as it is
//! recorded: to the history checker (fed event by event, so a long run does not hold its
//! history in memory), to the `--history` file (written as it goes), and to the viewer's
//! recorder when one watches the trace. Nothing else keeps it: with `--no-history-check`
//! and neither a file nor a viewer, an event costs its counters only.

use crate::config::SimConfig;
use crate::time::SECS;
use skein_jepsen::{
    CheckOptions, Event, EventType, Function, HistoryWriter, Report, StreamChecker, Value,
};
use std::io::Write;

/// Events in the order they happened (simulated time, then event order).
pub struct History {
    /// Events recorded so far; the next event's index.
    len: u64,
    /// What [`History::for_run`] estimated a run would record.
    estimate: u64,
    /// The history checker, fed as events are recorded (`None` with `--no-history-check`).
    check: Option<StreamChecker>,
    /// The `--history` file, written as events are recorded.
    out: Option<HistoryWriter<Box<dyn Write>>>,
    /// The first error writing `out` (reported at the end of the run).
    out_error: Option<std::io::Error>,
    /// Whether events are kept in `pending` for the trace's recorder.
    record: bool,
    /// Events the recorder has not taken yet.
    pending: Vec<Event>,
    sends_failed: u64,
    sends_info: u64,
}

impl History {
    /// An empty history for a run of `cfg`; `record`: a recorder (the viewer) takes its
    /// events as they come ([`History::take_pending`]).
    ///
    /// The estimate of the events a run records: per produce request an invoke and a
    /// completion; per reader (consumer or group member) an invoke and a completion per
    /// poll, about one poll per two requests plus ~50 idle polls a second; a quarter more
    /// for crashes, assignments and commits. (Measured: 3.9 events per request at `sim
    /// bench`'s 1,000 requests/s with 2 producers and 4 readers; the estimate is 5.5.)
    pub fn for_run(cfg: &SimConfig, record: bool) -> Self {
        let secs = cfg.duration.div_ceil(SECS) as f64;
        let rate = cfg.produce_rate.max(0.0);
        let readers = f64::from(cfg.consumers + cfg.group_members);
        let estimate = secs * (2.0 * rate + readers * (rate / 2.0 + 100.0)) * 1.25;
        Self {
            len: 0,
            estimate: estimate as u64,
            check: cfg
                .check_history
                .then(|| StreamChecker::new(&CheckOptions::default())),
            out: None,
            out_error: None,
            record,
            pending: Vec::new(),
            sends_failed: 0,
            sends_info: 0,
        }
    }

    /// Writes every event recorded from now on to `out`, as JSON Lines.
    pub fn write_to(&mut self, out: Box<dyn Write>) {
        self.out = Some(HistoryWriter::new(out));
    }

    /// What a run of this shape was estimated to record (an estimate that errs high: the
    /// tests hold it to that).
    pub fn estimate(&self) -> u64 {
        self.estimate
    }

    /// Records an event; returns its index.
    pub fn push(
        &mut self,
        time: u64,
        process: u64,
        kind: EventType,
        f: Function,
        value: Value,
    ) -> u64 {
        let index = self.len;
        self.len += 1;
        if f == Function::Send {
            match kind {
                EventType::Fail => self.sends_failed += 1,
                EventType::Info => self.sends_info += 1,
                _ => {}
            }
        }
        if self.check.is_none() && self.out.is_none() && !self.record {
            return index;
        }
        let mut event = Event::new(index, time, process, kind, f, value);
        if let Some(check) = self.check.as_mut() {
            check.push(&event);
        }
        if let Some(out) = self.out.as_mut() {
            if let Err(e) = out.write_event(&mut event) {
                self.out_error.get_or_insert(e);
                self.out = None;
            }
        }
        if self.record {
            self.pending.push(event);
        }
        index
    }

    /// The events the recorder has not taken yet (none unless it records).
    pub fn take_pending(&mut self) -> std::vec::Drain<'_, Event> {
        self.pending.drain(..)
    }

    /// Events recorded.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sends that failed, and sends whose outcome is unknown.
    pub fn send_outcomes(&self) -> (u64, u64) {
        (self.sends_failed, self.sends_info)
    }

    /// The history checker's report (`None` if it was off); `final_reads`: the run ended
    /// with reads to the end of every partition.
    pub fn check(&mut self, final_reads: bool) -> Option<Report> {
        let mut check = self.check.take()?;
        check.set_final_reads(final_reads);
        Some(check.finish())
    }

    /// Flushes the `--history` file; the first error writing it, if any.
    pub fn finish_output(&mut self) -> std::io::Result<()> {
        if let Some(e) = self.out_error.take() {
            return Err(e);
        }
        match self.out.as_mut() {
            Some(out) => out.flush(),
            None => Ok(()),
        }
    }
}
