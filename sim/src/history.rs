//! The client history, in skein-jepsen's format (docs/history.md), kept in memory so the
//! checker can run at the end and optionally written out as JSON Lines.

use crate::config::SimConfig;
use crate::time::SECS;
use skein_jepsen::{Event, EventType, Function, HistoryWriter, Value};
use std::io::Write;

/// The most events [`History::for_run`] reserves room for up front (~100 MiB of address
/// space); a longer history grows as usual.
const MAX_RESERVED_EVENTS: usize = 1 << 20;

/// Events in the order they happened (simulated time, then event order).
#[derive(Default)]
pub struct History {
    events: Vec<Event>,
    /// Events [`History::for_run`] asked room for.
    reserved: usize,
}

impl History {
    /// An empty history with room reserved for what a run of `cfg` is likely to record:
    /// per produce request an invoke and a completion; per reader (consumer or group
    /// member) an invoke and a completion per poll, about one poll per two requests plus
    /// ~50 idle polls a second; a quarter more for crashes, assignments and commits.
    /// (Measured: 3.9 events per request at `sim bench`'s 1,000 requests/s with 2 producers
    /// and 4 readers; the estimate is 5.5.) Grown push by push, the history was the
    /// simulation's largest allocation (~24 MB in `sim bench`'s 60 s), and each doubling
    /// copied it into fresh pages (a sixth of the bench's page faults). Room reserved and
    /// never written is address space only, so the estimate errs high; a failed
    /// reservation is no error.
    pub fn for_run(cfg: &SimConfig) -> Self {
        let secs = cfg.duration.div_ceil(SECS) as f64;
        let rate = cfg.produce_rate.max(0.0);
        let readers = f64::from(cfg.consumers + cfg.group_members);
        let estimate = secs * (2.0 * rate + readers * (rate / 2.0 + 100.0)) * 1.25;
        let reserved = (estimate as usize).min(MAX_RESERVED_EVENTS);
        let mut events = Vec::new();
        let _ = events.try_reserve_exact(reserved);
        Self { events, reserved }
    }

    /// Events room was asked for up front (the estimate, whether or not the allocator gave
    /// it): a longer history had to grow.
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// Appends an event; returns its index.
    pub fn push(
        &mut self,
        time: u64,
        process: u64,
        kind: EventType,
        f: Function,
        value: Value,
    ) -> u64 {
        let index = self.events.len() as u64;
        self.events
            .push(Event::new(index, time, process, kind, f, value));
        index
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Writes the history as JSON Lines (indexes as assigned here).
    pub fn write_to(&mut self, out: Box<dyn Write>) -> std::io::Result<()> {
        let mut w = HistoryWriter::new(out);
        for e in self.events.iter_mut() {
            w.write_event(e)?;
        }
        w.flush()
    }
}
