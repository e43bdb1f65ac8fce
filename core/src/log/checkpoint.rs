//! Small text checkpoint files (leader-epoch cache, recovery point). The epoch cache is
//! written whole with `write_atomic`, a trailing CRC line catching bit rot; the recovery
//! point is a journal of CRC-checked lines, one appended per flush. See docs/format.md.

use super::crc::{crc32, crc32_short};

const VERSION: u32 = 1;

/// Encodes `lines` as a checkpoint of the given kind.
pub(crate) fn encode(kind: &str, lines: &[String]) -> Vec<u8> {
    let mut s = format!("skein-{kind} v{VERSION}\n{}\n", lines.len());
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    let crc = crc32(s.as_bytes());
    s.push_str(&format!("crc {crc:08x}\n"));
    s.into_bytes()
}

/// The recovery-point journal's first line (format v2 of `recovery-point-checkpoint`).
const RP_JOURNAL_HEADER: &str = "skein-recovery-point v2\n";

/// One recovery-point journal line: `<offset> <crc32 of the offset's text, hex>\n`.
pub(crate) fn encode_rp_line(rp: u64) -> RpLine {
    // Written out by hand into a stack buffer, not with `format!` into a `Vec`: every flush
    // appends a line (~1,000 instructions each through `fmt`, then ~350 with a `Vec`, of a
    // simulation's flushes; docs/PERFORMANCE.md).
    let mut digits = [0u8; 20];
    let num = crate::types::decimal_digits(rp, &mut digits);
    let crc = crc32_short(num);
    let mut line = RpLine {
        buf: [0; RP_LINE_MAX],
        len: num.len() + 10,
    };
    line.buf[..num.len()].copy_from_slice(num);
    line.buf[num.len()] = b' ';
    line.buf[num.len() + 1..num.len() + 9].copy_from_slice(&hex8(crc));
    line.buf[num.len() + 9] = b'\n';
    line
}

/// `x` as eight lowercase hex digits (`{x:08x}`), computed on all digits at once: a digit
/// at a time through a table was a quarter of [`encode_rp_line`].
fn hex8(x: u32) -> [u8; 8] {
    // Spread the nibbles one per byte, the least significant in the lowest byte.
    let mut v = u64::from(x);
    v = (v | (v << 16)) & 0x0000_ffff_0000_ffff;
    v = (v | (v << 8)) & 0x00ff_00ff_00ff_00ff;
    v = (v | (v << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    // 1 in each byte whose nibble is 10 or more (no byte carries into the next).
    let letter = ((v + 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101;
    // '0' + n, plus ('a' - '0' - 10) for a letter; the most significant digit first.
    (v + 0x3030_3030_3030_3030 + letter * u64::from(b'a' - b'0' - 10)).to_be_bytes()
}

/// The longest journal line: 20 digits, a space, 8 hex digits, a newline.
const RP_LINE_MAX: usize = 30;

/// A journal line ([`encode_rp_line`]), held without an allocation.
pub(crate) struct RpLine {
    buf: [u8; RP_LINE_MAX],
    len: usize,
}

impl std::ops::Deref for RpLine {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// A fresh recovery-point journal holding `rp`, to be written with `write_atomic`.
pub(crate) fn encode_rp_journal(rp: u64) -> Vec<u8> {
    let mut out = RP_JOURNAL_HEADER.as_bytes().to_vec();
    out.extend_from_slice(&encode_rp_line(rp));
    out
}

/// The recovery point a `recovery-point-checkpoint` file records. v2 (a journal: each
/// flush appends and syncs one line; see docs/format.md): the last complete line with a
/// valid CRC wins, so a line torn by a crash during its append falls back to the one
/// before, which was durable before anything it covers was acknowledged. v1 (one value
/// written with `write_atomic`), as older data directories hold it, is still read.
pub(crate) fn decode_recovery_point(bytes: &[u8]) -> Result<u64, String> {
    let Some(body) = bytes.strip_prefix(RP_JOURNAL_HEADER.as_bytes()) else {
        return decode("recovery-point", bytes)?
            .first()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| "bad recovery point".to_string());
    };
    body.split_inclusive(|b| *b == b'\n')
        .rev()
        .find_map(|line| {
            let text = std::str::from_utf8(line.strip_suffix(b"\n")?).ok()?;
            let (num, crc) = text.split_once(' ')?;
            let crc = u32::from_str_radix(crc, 16).ok()?;
            (crc32(num.as_bytes()) == crc)
                .then(|| num.parse::<u64>().ok())
                .flatten()
        })
        .ok_or_else(|| "no valid entry in the recovery-point journal".to_string())
}

/// Decodes a checkpoint, returning its lines or a reason it is unusable.
pub(crate) fn decode(kind: &str, bytes: &[u8]) -> Result<Vec<String>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    let body_end = text
        .trim_end_matches('\n')
        .rfind('\n')
        .map(|i| i + 1)
        .ok_or("missing crc line")?;
    let (body, crc_line) = text.split_at(body_end);
    let stored = crc_line
        .trim_end()
        .strip_prefix("crc ")
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .ok_or("bad crc line")?;
    let computed = crc32(body.as_bytes());
    if stored != computed {
        return Err(format!(
            "CRC mismatch: stored {stored:08x}, computed {computed:08x}"
        ));
    }
    let mut lines = body.lines();
    let header = lines.next().ok_or("empty")?;
    if header != format!("skein-{kind} v{VERSION}") {
        return Err(format!("unexpected header {header:?}"));
    }
    let n: usize = lines
        .next()
        .and_then(|l| l.parse().ok())
        .ok_or("bad entry count")?;
    let out: Vec<String> = lines.map(str::to_string).collect();
    if out.len() != n {
        return Err(format!("entry count says {n}, found {}", out.len()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_rejects_damage() {
        let enc = encode("x", &["1 2".into(), "3 4".into()]);
        assert_eq!(decode("x", &enc).unwrap(), vec!["1 2", "3 4"]);
        assert!(decode("y", &enc).is_err());
        for i in 0..enc.len() {
            let mut bad = enc.clone();
            bad[i] ^= 0x04;
            assert!(decode("x", &bad).is_err(), "flip at byte {i} not caught");
        }
        assert!(decode("x", b"").is_err());
        assert!(decode("x", &enc[..enc.len() - 3]).is_err());
        assert!(decode("x", &[0xff, 0xfe, 0x00]).is_err());
    }

    #[test]
    fn rp_line_is_the_documented_text() {
        for rp in [0, 7, 10, 99, 12_345, u64::from(u32::MAX) + 1, u64::MAX] {
            let num = rp.to_string();
            let crc = crc32(num.as_bytes());
            let want = format!("{num} {crc:08x}\n");
            assert_eq!(
                String::from_utf8(encode_rp_line(rp).to_vec()).unwrap(),
                want
            );
        }
    }

    #[test]
    fn hex8_is_the_format_text() {
        let mut x = 0x9e37_79b9u32;
        for edge in [0, 9, 10, 15, 16, 0xa0, 0x0f0f_0f0f, 0xf0f0_f0f0, u32::MAX] {
            assert_eq!(hex8(edge).to_vec(), format!("{edge:08x}").into_bytes());
        }
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            assert_eq!(hex8(x).to_vec(), format!("{x:08x}").into_bytes());
        }
    }

    #[test]
    fn recovery_point_journal_takes_the_last_valid_line() {
        let mut j = encode_rp_journal(5);
        j.extend_from_slice(&encode_rp_line(9));
        j.extend_from_slice(&encode_rp_line(12));
        assert_eq!(decode_recovery_point(&j), Ok(12));
        // A line torn by a crash during its append: the one before wins.
        for cut in 1..encode_rp_line(40).len() {
            // (up to and including a line that lacks only its newline)
            let mut torn = j.clone();
            torn.extend_from_slice(&encode_rp_line(40)[..cut]);
            assert_eq!(decode_recovery_point(&torn), Ok(12), "cut at {cut}");
        }
        // A flipped bit in the last line is caught by its CRC.
        let mut bad = j.clone();
        let at = bad.len() - 3;
        bad[at] ^= 0x01;
        assert_eq!(decode_recovery_point(&bad), Ok(9));
        // Header only, or a damaged header: unusable (the whole log is validated).
        assert!(decode_recovery_point(b"skein-recovery-point v2\n").is_err());
        assert!(decode_recovery_point(b"skein-recovery-point v3\n5 00000000\n").is_err());
        // v1 files of older data directories are still read.
        assert_eq!(
            decode_recovery_point(&encode("recovery-point", &["77".into()])),
            Ok(77)
        );
    }
}
