//! cargo-fuzz target: skein_node::fuzzing::skein_frame (properties there; docs/fuzzing.md).
#![no_main]

use skein_node::fuzzing::{skein_frame, Meter};

/// Counts allocations, so the harness can bound what one input makes the decoder hold.
#[global_allocator]
static METER: Meter = Meter;

libfuzzer_sys::fuzz_target!(|data: &[u8]| skein_frame(data));
