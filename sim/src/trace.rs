//! The trace: every event of a run folded into one hash, and optionally written as JSON lines.
//!
//! The hash is 64-bit FNV-1a (offset basis 0xcbf29ce484222325, prime 0x100000001b3) over a
//! fixed little-endian encoding of each event's fields. FNV-1a is tiny, specified, and the same
//! on every platform; it is not cryptographic, which a determinism check does not need.
//! Two runs with the same seed and flags must give the same hash; a differing hash means the
//! run diverged somewhere, and `--trace` on both pinpoints the first differing line.
//!
//! The same events also reach an optional [`Recorder`] (the HTML viewer's, see
//! [`crate::viewer`]) as structured [`Fields`]: messages with their send time and fate,
//! faults, process starts and stops, replica states after each broker step, the client
//! history, violations. Fields are not hashed: each is a function of the hashed events and
//! the seed (what a step did to a replica, which message the network dropped), so hashing
//! them would detect nothing new, and the pinned hashes stay valid whether or not a viewer
//! watches the run.

use crate::fields::Fields;
use crate::fnv::{Fnv1a, FnvRun};
use crate::time::SimTime;
use crate::viewer::Recorder;
use serde::Serialize;
use std::io::Write;

/// An in-memory trace or history sink whose bytes can be read back after the run (tests,
/// tools): clones share one buffer, so pass a clone to `run` and keep the original.
#[derive(Clone, Debug, Default)]
pub struct MemorySink(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl MemorySink {
    /// Everything written so far, as text (trace and history lines are UTF-8 JSON).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.borrow()).into_owned()
    }
}

impl Write for MemorySink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A place in the tracer's cache of precomputed kind-and-node hashes
/// ([`Tracer::event_named`]); each hot call site owns one, below [`NAME_SLOTS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameSlot(pub usize);

/// Slots in the tracer's cache of kind-and-node runs.
pub const NAME_SLOTS: usize = 32;

/// One traced event, as written to `--trace` files.
#[derive(Debug, Clone, Serialize)]
pub struct TraceLine<'a> {
    pub time: u64,
    pub seq: u64,
    pub kind: &'a str,
    pub node: &'a str,
    pub detail: &'a str,
}

/// Folds events into the hash; writes them as JSON lines when a sink is set, and passes
/// their fields to the recorder when one is set.
pub struct Tracer {
    hash: Fnv1a,
    /// Per [`NameSlot`]: the kind and node it was first used with, and their run.
    names: Vec<Option<(&'static str, &'static str, FnvRun)>>,
    events: u64,
    sink: Option<Box<dyn Write>>,
    sink_error: Option<std::io::Error>,
    recorder: Option<Box<Recorder>>,
}

impl Default for Tracer {
    fn default() -> Self {
        Self::new(None)
    }
}

impl Tracer {
    pub fn new(sink: Option<Box<dyn Write>>) -> Self {
        Self {
            hash: Fnv1a::default(),
            names: vec![None; NAME_SLOTS],
            events: 0,
            sink,
            sink_error: None,
            recorder: None,
        }
    }

    /// Also passes every event's fields to `recorder`.
    pub fn with_recorder(mut self, recorder: Option<Recorder>) -> Self {
        self.recorder = recorder.map(Box::new);
        self
    }

    /// Whether a recorder watches (callers skip building fields otherwise).
    pub fn recording(&self) -> bool {
        self.recorder.is_some()
    }

    /// The structured fields of the event at `time` (not hashed; see the module doc).
    pub fn fields(&mut self, time: SimTime, fields: Fields<'_>) {
        if let Some(r) = self.recorder.as_mut() {
            r.record(time, &fields);
        }
    }

    /// The recorder, once the run is over.
    pub fn take_recorder(&mut self) -> Option<Recorder> {
        self.recorder.take().map(|b| *b)
    }

    /// Whether a sink is attached (callers skip formatting details otherwise).
    pub fn verbose(&self) -> bool {
        self.sink.is_some()
    }

    /// Records one event. `words` are hashed (cheap, always); `detail` is called only when
    /// a trace file is being written. Inlined: at each call site `kind` and `node` are
    /// constants, so their hashing unrolls (out of line it was a byte loop, 4% of a run).
    #[inline(always)]
    pub fn event(
        &mut self,
        time: u64,
        seq: u64,
        kind: &str,
        node: &str,
        words: &[u64],
        detail: impl FnOnce() -> String,
    ) {
        self.hash.u64(time);
        self.hash.u64(seq);
        self.hash.str(kind);
        self.hash.str(node);
        self.finish_event((time, seq, kind, node), words, detail);
    }

    /// [`Self::event`] for the hot call sites, whose kind and node come from a small fixed
    /// set: their hash is precomputed once per `slot` ([`FnvRun`]), the same bits.
    /// A slot keeps the names it was first used with (debug builds assert they stay).
    #[inline(always)]
    pub fn event_named(
        &mut self,
        slot: NameSlot,
        time: u64,
        seq: u64,
        (kind, node): (&'static str, &'static str),
        words: &[u64],
        detail: impl FnOnce() -> String,
    ) {
        self.hash.u64(time);
        self.hash.u64(seq);
        match self.names.get_mut(slot.0) {
            Some(Some((k, n, run))) => {
                debug_assert!(
                    *k == kind && *n == node,
                    "trace name slot {} holds {k}/{n}, used for {kind}/{node}",
                    slot.0
                );
                self.hash.run(run);
            }
            Some(cache) => {
                let run = FnvRun::of_names(kind, node);
                self.hash.run(&run);
                *cache = Some((kind, node, run));
            }
            None => {
                self.hash.str(kind);
                self.hash.str(node);
            }
        }
        self.finish_event((time, seq, kind, node), words, detail);
    }

    /// The rest of an event, once its head (time, sequence number, kind, node) is hashed:
    /// its words, the count, the trace file's line.
    #[inline(always)]
    fn finish_event(
        &mut self,
        (time, seq, kind, node): (u64, u64, &str, &str),
        words: &[u64],
        detail: impl FnOnce() -> String,
    ) {
        self.events += 1;
        for &w in words {
            self.hash.u64(w);
        }
        if let Some(sink) = self.sink.as_mut() {
            if self.sink_error.is_none() {
                let detail = detail();
                let line = TraceLine {
                    time,
                    seq,
                    kind,
                    node,
                    detail: &detail,
                };
                let res = serde_json::to_writer(&mut *sink, &line)
                    .map_err(std::io::Error::from)
                    .and_then(|_| sink.write_all(b"\n"));
                if let Err(e) = res {
                    self.sink_error = Some(e);
                }
            }
        }
    }

    pub fn hash(&self) -> u64 {
        self.hash.finish()
    }

    pub fn events(&self) -> u64 {
        self.events
    }

    /// Flushes the sink; reports the first write error, if any.
    pub fn finish(&mut self) -> std::io::Result<()> {
        if let Some(e) = self.sink_error.take() {
            return Err(e);
        }
        if let Some(s) = self.sink.as_mut() {
            s.flush()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_events_hash_like_plain_events() {
        let (mut plain, mut named) = (Tracer::default(), Tracer::default());
        let names = [
            ("deliver", "Fetch"),
            ("tick", ""),
            ("deliver", "ProduceResponse"),
        ];
        for i in 0..300u64 {
            let (kind, node) = names[(i % 3) as usize];
            let slot = NameSlot(if i % 7 == 0 {
                NAME_SLOTS + 1
            } else {
                (i % 3) as usize
            });
            plain.event(i * 1000, i, kind, node, &[i, 3], String::new);
            named.event_named(slot, i * 1000, i, (kind, node), &[i, 3], String::new);
            assert_eq!(plain.hash(), named.hash(), "event {i}");
        }
        assert_eq!(plain.events(), named.events());
    }

    #[test]
    fn tracer_hash_depends_on_every_field() {
        let run = |t: u64, w: u64| {
            let mut tr = Tracer::default();
            tr.event(t, 0, "deliver", "n1", &[w], String::new);
            tr.hash()
        };
        assert_eq!(run(1, 2), run(1, 2));
        assert_ne!(run(1, 2), run(1, 3));
        assert_ne!(run(1, 2), run(2, 2));
    }

    #[test]
    fn tracer_writes_json_lines() {
        let buf = MemorySink::default();
        let mut tr = Tracer::new(Some(Box::new(buf.clone())));
        tr.event(5, 1, "tick", "n2", &[], || "x".into());
        tr.finish().unwrap();
        let text = buf.text();
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["kind"], "tick");
        assert_eq!(v["time"], 5);
    }
}
