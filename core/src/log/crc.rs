//! CRC-32 (the IEEE polynomial of zlib and `crc32fast`), as every checksum of the log
//! uses it: batches, checkpoints and recovery-point lines. Besides hashing bytes, it
//! gives the one piece of CRC algebra the log needs: how a difference between two CRCs
//! carries through bytes both strings share ([`shift_difference`]), which lets a leader
//! restamp a large batch's header without hashing its records again.
//!
//! Bits are reflected, as in zlib: bit 31 of a `u32` is the coefficient of x^0.

/// The reflected CRC-32 polynomial (x^32 + x^26 + ... + 1 without its x^32 term).
const POLY: u32 = 0xedb8_8320;

/// x^0, the polynomial 1, in the reflected representation.
const ONE: u32 = 1 << 31;

/// The CRC-32 of `bytes` (`crc32fast`: vectorised, for batches).
#[inline]
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// [`crc32`] a byte at a time through [`TABLE`]: for the few bytes of a recovery-point
/// line `crc32fast`'s setup costs more than the bytes.
pub fn crc32_short(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c = TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// The CRC register after one byte whose low bits are `i` went through it: the bit-by-bit
/// division, eight steps, done once per byte value (zlib's `crc_table[0]`).
const TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = step(c);
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// One bit of polynomial division: the register times x, reduced.
const fn step(c: u32) -> u32 {
    if c & 1 != 0 {
        (c >> 1) ^ POLY
    } else {
        c >> 1
    }
}

/// `a * b` modulo the CRC polynomial, both reflected (zlib's `multmodp`).
const fn mul(a: u32, mut b: u32) -> u32 {
    let mut m = ONE;
    let mut p = 0u32;
    while m != 0 {
        if a & m != 0 {
            p ^= b;
        }
        m >>= 1;
        b = step(b);
    }
    p
}

/// `X2N[k]` = x^(2^k) modulo the CRC polynomial (zlib's `x2n_table`).
const X2N: [u32; 32] = {
    let mut t = [0u32; 32];
    t[0] = ONE >> 1; // x^1
    let mut k = 1;
    while k < 32 {
        t[k] = mul(t[k - 1], t[k - 1]);
        k += 1;
    }
    t
};

/// x^(8n) modulo the CRC polynomial: the product of x^(2^k) over the set bits k of 8n.
fn x_to_8n(n: usize) -> u32 {
    let mut x = ONE;
    let mut bits = (n as u64) << 3;
    let mut k = 0;
    while bits != 0 {
        if bits & 1 != 0 {
            x = mul(X2N[k & 31], x);
        }
        bits >>= 1;
        k += 1;
    }
    x
}

/// What a difference `d` between the CRC-32s of two equally long byte strings becomes
/// once both are followed by the same `n` bytes. CRC-32 is affine over GF(2), so the
/// shared bytes drop out and the difference is only multiplied by x^(8n): about a
/// thousand instructions whatever `n`, against a pass over `n` bytes.
pub fn shift_difference(d: u32, n: usize) -> u32 {
    mul(x_to_8n(n), d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CRC-32 as defined: the bytes, least significant bit first, divided one bit at a
    /// time, the register starting all ones and inverted at the end.
    fn by_definition(bytes: &[u8]) -> u32 {
        let mut c = !0u32;
        for &b in bytes {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0xedb8_8320
                } else {
                    c >> 1
                };
            }
        }
        !c
    }

    /// A deterministic byte string of length `n` (an LCG: no randomness in tests).
    fn bytes(n: usize, seed: u32) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (x >> 16) as u8
            })
            .collect()
    }

    #[test]
    fn both_hashes_are_the_definition() {
        assert_eq!(
            by_definition(b"123456789"),
            0xcbf4_3926,
            "the CRC-32 check value"
        );
        for n in (0..300).chain([1000, 4096, 10_000]) {
            let b = bytes(n, n as u32);
            let want = by_definition(&b);
            assert_eq!(crc32(&b), want, "crc32, {n} bytes");
            assert_eq!(crc32_short(&b), want, "crc32_short, {n} bytes");
        }
    }

    #[test]
    fn the_table_is_eight_steps_of_division() {
        for i in 0..256u32 {
            let mut c = i;
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            }
            assert_eq!(TABLE[i as usize], c, "entry {i}");
        }
    }

    /// `mul` is the ring's product: 1 is its unit, it commutes, and x^(2^k) squared is
    /// x^(2^(k+1)); multiplying by x is one step of division.
    #[test]
    fn mul_is_multiplication_modulo_the_polynomial() {
        let xs: Vec<u32> = bytes(64, 7)
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        for &a in &xs {
            assert_eq!(mul(ONE, a), a);
            assert_eq!(mul(ONE >> 1, a), step(a), "times x");
            for &b in &xs {
                assert_eq!(mul(a, b), mul(b, a));
            }
        }
        for k in 0..31 {
            assert_eq!(mul(X2N[k], X2N[k]), X2N[k + 1], "k {k}");
        }
    }

    /// The property the leader relies on: for equally long `a` and `b` followed by the same
    /// `tail`, the difference of the CRCs is the shifted difference of the heads' CRCs.
    #[test]
    fn a_difference_shifts_through_shared_bytes() {
        for (head, tail) in [(0, 0), (1, 1), (40, 7), (40, 4096), (17, 9000), (3, 70_000)] {
            let a = bytes(head, 1);
            let b = bytes(head, 2);
            let t = bytes(tail, 3);
            let (at, bt) = ([&a[..], &t].concat(), [&b[..], &t].concat());
            assert_eq!(
                crc32(&at) ^ crc32(&bt),
                shift_difference(crc32(&a) ^ crc32(&b), tail),
                "head {head}, tail {tail}"
            );
        }
    }
}
