//! 64-bit FNV-1a (offset basis 0xcbf29ce484222325, prime 0x100000001b3): the trace hash
//! and the invariants' record digests. Tiny, specified, and the same on every platform; not
//! cryptographic, which a determinism check does not need. A ground-floor module: it
//! imports nothing from the crate.

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

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

    /// The run of `str(kind)` then `str(node)`, as `Tracer::event` hashes them.
    pub(crate) fn of_names(kind: &str, node: &str) -> Self {
        let mut bytes = Vec::with_capacity(16 + kind.len() + node.len());
        for s in [kind, node] {
            bytes.extend_from_slice(&(s.len() as u64).to_le_bytes());
            bytes.extend_from_slice(s.as_bytes());
        }
        Self::of(&bytes)
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
}
