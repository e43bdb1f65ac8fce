//! Fuzz harnesses of the edges where untrusted bytes come in (docs/fuzzing.md): one
//! function per target, called by the cargo-fuzz targets (tests/fuzz) and by the smoke
//! test that runs the kept corpus and a seeded mutation loop in CI
//! (node/tests/fuzz_smoke.rs), so both check the same properties. Not an API.
//!
//! [`Meter`] is a global allocator that counts the bytes live on the calling thread, so a
//! harness can bound what decoding one input allocates; a program that does not install
//! it measures nothing (the bound then holds trivially).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

pub use crate::frame::fuzz::skein_frame;
pub use crate::kafka::fuzz::kafka_request;
pub use skein_core::log::fuzz::segment_recovery;

/// A harness: one input, checked; a panic is a failure.
pub type Harness = fn(&[u8]);

/// Every target: its name (the directory of its corpus) and its harness.
pub const TARGETS: &[(&str, Harness)] = &[
    ("kafka_request", kafka_request),
    ("skein_frame", skein_frame),
    ("segment_recovery", segment_recovery),
];

thread_local! {
    /// Bytes allocated and not yet freed by this thread, and the most seen since reset.
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, counting per thread (see the module comment).
pub struct Meter;

fn grow(n: usize) {
    // try_with: a thread being torn down has no counters left; it is not measured.
    let _ = LIVE.try_with(|l| {
        let now = l.get().wrapping_add(n);
        l.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

fn shrink(n: usize) {
    let _ = LIVE.try_with(|l| l.set(l.get().wrapping_sub(n)));
}

// SAFETY: every call is passed to `System` unchanged; the counters only add and subtract.
unsafe impl GlobalAlloc for Meter {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grow(layout.size());
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grow(layout.size());
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrink(layout.size());
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grow(new_size);
        let p = System.realloc(ptr, layout, new_size);
        shrink(layout.size());
        p
    }
}

/// Runs `f`, returning its result and the most bytes it had allocated at once on this
/// thread beyond what was live before (0 unless [`Meter`] is the global allocator).
pub fn peak_alloc<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let r = f();
    (r, PEAK.with(Cell::get).saturating_sub(base))
}

/// Panics when `f` allocates more than `limit` bytes at once: a decoder sized a buffer
/// from a count or length it had not checked against the input.
pub fn bounded<R>(what: &str, limit: usize, f: impl FnOnce() -> R) -> R {
    let (r, peak) = peak_alloc(f);
    assert!(
        peak <= limit,
        "{what} allocated {peak} bytes at once (limit {limit})"
    );
    r
}

/// Polls a future that cannot wait (its reader is a byte slice) to its end.
pub fn ready<F: Future>(f: F) -> F::Output {
    fn noop(_: *const ()) {}
    fn clone(p: *const ()) -> RawWaker {
        RawWaker::new(p, &VTABLE)
    }
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: the vtable's functions ignore the data pointer, which is never read.
    let waker = unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) };
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a read from a byte slice waited"),
    }
}
