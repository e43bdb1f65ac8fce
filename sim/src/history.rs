//! The client history, in skein-jepsen's format (docs/history.md), kept in memory so the
//! checker can run at the end and optionally written out as JSON Lines.

use skein_jepsen::{Event, EventType, Function, HistoryWriter, Value};
use std::io::Write;

/// Events in the order they happened (simulated time, then event order).
#[derive(Default)]
pub struct History {
    events: Vec<Event>,
}

impl History {
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
