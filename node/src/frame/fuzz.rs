//! Fuzz harness of Skein's frame decoder (see [`crate::fuzzing`]).

use super::{decode, encode, raw_frame, read_frame, Frame};
use crate::fuzzing::{bounded, ready};

/// The payload limit the harness decodes with: small, so that a decoder trusting a
/// length inside the payload shows up against [`ALLOC_LIMIT`].
const MAX: u32 = 64 << 10;
/// Most bytes decoding one frame may hold at once: the frame (at most `MAX`), its decoded
/// form, and serde's preallocation of a sequence (at most 1 MiB, whatever its length
/// prefix says) for the one sequence being read when the input runs out.
const ALLOC_LIMIT: usize = 4 << 20;

/// Reads `data` as: a mode byte, then either (even mode) a byte stream read frame by frame
/// as a connection reads it, or (odd mode) a kind byte and a payload, framed with a
/// correct CRC so that the payload decoder is reached. Every frame that decodes
/// re-encodes to bytes that decode to the same frame.
pub fn skein_frame(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        return stream(rest);
    }
    let Some((&kind, payload)) = rest.split_first() else {
        return;
    };
    let frame = raw_frame(kind, payload);
    if let Ok((f, used)) = bounded("decoding a frame", ALLOC_LIMIT, || decode(&frame, MAX)) {
        assert_eq!(used, frame.len(), "decode used part of one frame");
        round_trip(&f);
    }
}

/// Frames back to back: [`read_frame`] (the connection's reader) and [`decode`] (the
/// buffer decoder) agree on each, until the first that fails.
fn stream(mut rest: &[u8]) {
    loop {
        let whole = rest;
        let decoded = bounded("decoding a frame", ALLOC_LIMIT, || decode(whole, MAX));
        let read = bounded("reading a frame", ALLOC_LIMIT, || {
            ready(read_frame(&mut rest, MAX))
        });
        match (decoded, read) {
            (Ok((f, used)), Ok(Some(g))) => {
                assert_eq!(f, g, "decode and read_frame differ");
                assert_eq!(
                    whole.len() - rest.len(),
                    used,
                    "they used different lengths"
                );
                round_trip(&f);
            }
            (Err(_), Err(_) | Ok(None)) => return,
            (d, r) => panic!("decode gave {d:?} but read_frame {r:?}"),
        }
    }
}

/// encode then decode gives the frame back. Compared as encoded bytes: a metrics
/// snapshot may hold a NaN rate, which is not equal to itself.
fn round_trip(f: &Frame) {
    let bytes = encode(f, MAX).expect("a decoded frame re-encodes within the limit");
    let (again, used) = decode(&bytes, MAX).expect("a re-encoded frame decodes");
    assert_eq!(used, bytes.len());
    let bytes2 = encode(&again, MAX).expect("encodes again");
    assert_eq!(bytes, bytes2, "decode(encode(frame)) is another frame");
}
