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

use crate::faults::Fault;
use crate::invariants::Violation;
use crate::time::SimTime;
use crate::viewer::Recorder;
use serde::Serialize;
use skein_core::broker::BrokerEvent;
use skein_core::controller::ControllerEvent;
use skein_core::message::{Address, Message};
use skein_core::replica::ReplicaView;
use skein_core::NodeId;
use std::io::Write;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

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

/// 64-bit FNV-1a.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Self(FNV_OFFSET)
    }
}

impl Fnv1a {
    #[inline]
    pub fn bytes(&mut self, data: &[u8]) {
        // Eight bytes per turn of the loop where it can (a turn per byte paid the loop's
        // count and branch on each; messages' names are hashed on every delivery).
        let mut h = self.0;
        let mut chunks = data.chunks_exact(8);
        for chunk in &mut chunks {
            for &b in chunk {
                h = (h ^ b as u64).wrapping_mul(FNV_PRIME);
            }
        }
        for &b in chunks.remainder() {
            h = (h ^ b as u64).wrapping_mul(FNV_PRIME);
        }
        self.0 = h;
    }

    /// The eight little-endian bytes of `v` (as `bytes(&v.to_le_bytes())`), spelled out:
    /// every traced event hashes several words, and a loop over a slice here was not
    /// always unrolled.
    ///
    /// A zero byte only multiplies the state by the prime (`h ^ 0 == h`), so a run of `k`
    /// zero bytes is one multiply by P^k. Most words have zero high bytes (node, client
    /// and message numbers; sequence numbers below 2^32; times below 2^40 ns, 18 minutes;
    /// an address code, `kind << 32 | number`, has only bytes 0 and 4): their zero bytes
    /// are folded into one or two multiplies.
    #[inline]
    pub fn u64(&mut self, v: u64) {
        #[inline(always)]
        fn byte(h: u64, b: u64) -> u64 {
            (h ^ (b & 0xff)).wrapping_mul(FNV_PRIME)
        }
        let mut h = self.0;
        if v < 256 {
            h = byte(h, v).wrapping_mul(PRIME_POW[7]);
        } else if v & 0xffff_ff00_ffff_ff00 == 0 {
            h = byte(h, v).wrapping_mul(PRIME_POW[3]);
            h = byte(h, v >> 32).wrapping_mul(PRIME_POW[3]);
        } else if v >> 32 == 0 {
            h = byte(h, v);
            h = byte(h, v >> 8);
            h = byte(h, v >> 16);
            h = byte(h, v >> 24).wrapping_mul(PRIME_POW[4]);
        } else {
            h = byte(h, v);
            h = byte(h, v >> 8);
            h = byte(h, v >> 16);
            h = byte(h, v >> 24);
            h = byte(h, v >> 32);
            if v >> 40 == 0 {
                h = h.wrapping_mul(PRIME_POW[3]);
            } else {
                h = byte(h, v >> 40);
                h = byte(h, v >> 48);
                h = byte(h, v >> 56);
            }
        }
        self.0 = h;
    }

    #[inline]
    pub fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.bytes(s.as_bytes());
    }

    pub fn finish(&self) -> u64 {
        self.0
    }

    /// Hashes the bytes `run` was built from, in one step (the same result as `bytes`).
    #[inline]
    pub fn run(&mut self, run: &FnvRun) {
        let low = self.0 & 0xff;
        self.0 = (self.0 - low)
            .wrapping_mul(run.mul)
            .wrapping_add(run.table[low as usize]);
    }
}

/// FNV-1a over a fixed byte string, precomputed so it costs one multiply and one lookup
/// whatever the string's length.
///
/// Byte-wise FNV-1a is a chain of dependent multiplies (~4 cycles a byte), and every
/// traced event hashes its kind and node names: ~30 of a delivery's ~70 hashed bytes, a few
/// percent of a run's wall time. An XOR with a byte changes only the low 8 bits, and the
/// low 8 bits of a product depend only on the low 8 bits of its factors, so for a state
/// h = 256a + l, hashing k fixed bytes gives 256a·P^k + G(l) (mod 2^64), where G(l) is
/// the hash of the same bytes from the state l: a table of 256 entries.
#[derive(Clone, Debug)]
pub struct FnvRun {
    /// P^k for the k bytes.
    mul: u64,
    /// G(l): the hash of the bytes started from state l.
    table: [u64; 256],
}

/// P^k for k = 0..8: hashing k zero bytes multiplies the state by P^k ([`Fnv1a::u64`]).
const PRIME_POW: [u64; 9] = {
    let mut p = [1u64; 9];
    let mut k = 1;
    while k < 9 {
        p[k] = p[k - 1].wrapping_mul(FNV_PRIME);
        k += 1;
    }
    p
};

impl FnvRun {
    /// A `const fn`, so a constant's run can be computed by the compiler.
    pub const fn of(bytes: &[u8]) -> Self {
        let mut mul = 1u64;
        let mut i = 0;
        while i < bytes.len() {
            mul = mul.wrapping_mul(FNV_PRIME);
            i += 1;
        }
        let mut table = [0u64; 256];
        let mut low = 0;
        while low < 256 {
            let mut h = low as u64;
            let mut i = 0;
            while i < bytes.len() {
                h = (h ^ bytes[i] as u64).wrapping_mul(FNV_PRIME);
                i += 1;
            }
            table[low] = h;
            low += 1;
        }
        Self { mul, table }
    }

    /// The run of `str(kind)` then `str(node)`, as [`Tracer::event`] hashes them.
    fn of_names(kind: &str, node: &str) -> Self {
        let mut bytes = Vec::with_capacity(16 + kind.len() + node.len());
        for s in [kind, node] {
            bytes.extend_from_slice(&(s.len() as u64).to_le_bytes());
            bytes.extend_from_slice(s.as_bytes());
        }
        Self::of(&bytes)
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

/// What happened to a delivered message at its destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Handed to the destination's state machine.
    Handled,
    /// Cut by a partition that started while it was in flight.
    Partitioned,
    /// Its destination crashed (or restarted) since it was sent, or is down.
    Dead,
}

/// The structured side of a traced event, for the viewer (not hashed; see the module doc).
pub enum Fields<'a> {
    /// A message arrived (`duplicate`: the network's second copy).
    Deliver {
        from: Address,
        to: Address,
        sent: SimTime,
        duplicate: bool,
        arrival: Arrival,
        msg: &'a Message,
    },
    /// The network dropped a message when it was sent (`partitioned`: a cut link, else lost).
    Dropped {
        from: Address,
        to: Address,
        partitioned: bool,
        msg: &'a Message,
    },
    /// A fault fired (targets resolved).
    Fault(&'a Fault),
    /// The links a partition fault cut, both directions listed.
    Blocked(&'a [(Address, Address)]),
    /// A node's process started (`up`) or died.
    Process {
        node: Address,
        up: bool,
    },
    /// A client's process was paused for `duration`.
    ClientPaused {
        client: u64,
        duration: SimTime,
    },
    /// Every replica a broker holds, after one of its steps.
    Replicas {
        node: NodeId,
        views: &'a [ReplicaView],
    },
    BrokerEvent {
        node: NodeId,
        event: &'a BrokerEvent,
    },
    ControllerEvent(&'a ControllerEvent),
    /// One client history event (docs/history.md).
    History(&'a skein_jepsen::Event),
    Violation(&'a Violation),
    /// Everything heals (the end of the fault window).
    FinalHeal,
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
    fn fnv1a_known_vectors() {
        // Published FNV-1a 64 test vectors.
        let mut h = Fnv1a::default();
        assert_eq!(h.finish(), 0xcbf29ce484222325);
        h.bytes(b"a");
        assert_eq!(h.finish(), 0xaf63dc4c8601ec8c);
        let mut h = Fnv1a::default();
        h.bytes(b"foobar");
        assert_eq!(h.finish(), 0x85944171f73967e8);
    }

    #[test]
    fn bytes_hashes_like_the_byte_loop() {
        // Against FNV-1a written byte by byte, at lengths around the 8-byte chunks.
        let data: Vec<u8> = (0..40u32).map(|i| (i * 37 + 11) as u8).collect();
        for len in 0..data.len() {
            let mut reference = FNV_OFFSET;
            for &b in &data[..len] {
                reference = (reference ^ b as u64).wrapping_mul(FNV_PRIME);
            }
            let mut h = Fnv1a::default();
            h.bytes(&data[..len]);
            assert_eq!(h.finish(), reference, "length {len}");
        }
    }

    /// A precomputed run hashes like the bytes, from any state (the low byte is what the
    /// table is indexed by; the rest is carried by the multiply).
    #[test]
    fn a_run_hashes_like_its_bytes_from_any_state() {
        let strings: [&[u8]; 5] = [b"", b"d", b"deliver", b"ConsumerFetchResponse", &[0xff; 40]];
        let mut state = 0x0123_4567_89ab_cdefu64;
        for s in strings {
            let run = FnvRun::of(s);
            for i in 0..2000u64 {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(i | 1);
                let (mut a, mut b) = (Fnv1a(state), Fnv1a(state));
                a.bytes(s);
                b.run(&run);
                assert_eq!(a.finish(), b.finish(), "{:?} from {state:#x}", s);
            }
        }
    }

    /// The named path gives the bits of the plain one, first use (building the run) and
    /// later, and a slot out of range still hashes right.
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
    fn u64_hashes_its_little_endian_bytes() {
        // Every shape the fast paths tell apart, at and around their edges, from
        // several states: one byte, bytes 0 and 4 only (address codes), below 2^32,
        // below 2^40, the rest.
        let mut values = vec![
            0,
            1,
            7,
            0xfe,
            0xff,
            0x100,
            0x1ff,
            1 << 32,
            (1 << 32) | 5,
            (3 << 32) | 0xff,
            (0xff << 32) | 0xff,
            (1 << 32) | 0x100,
            (1 << 40) | 1,
            0xffff_ffff,
            1 << 32 | 1 << 8,
            (1 << 40) - 1,
            1 << 40,
            0x0123_4567_89ab_cdef,
            u64::MAX,
            1 << 63,
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..4000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Random values of every byte length, and random address-code shapes.
            values.push(x >> (i % 64));
            values.push((x >> 56) << 32 | (x & 0xff));
        }
        for v in values {
            for start in [FNV_OFFSET, 0, 0xff, 0x0123_4567_89ab_cd00, u64::MAX] {
                let (mut a, mut b) = (Fnv1a(start), Fnv1a(start));
                a.u64(v);
                b.bytes(&v.to_le_bytes());
                assert_eq!(a.finish(), b.finish(), "{v:#x} from {start:#x}");
            }
        }
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
