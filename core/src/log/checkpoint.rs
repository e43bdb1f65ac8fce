//! Small text checkpoint files (leader-epoch cache, recovery point), written with
//! `write_atomic`. A trailing CRC line catches bit rot; see docs/format.md.

const VERSION: u32 = 1;

/// Encodes `lines` as a checkpoint of the given kind.
pub(crate) fn encode(kind: &str, lines: &[String]) -> Vec<u8> {
    let mut s = format!("skein-{kind} v{VERSION}\n{}\n", lines.len());
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    let crc = crc32fast::hash(s.as_bytes());
    s.push_str(&format!("crc {crc:08x}\n"));
    s.into_bytes()
}

/// [`encode`] of the one line `value`, without the intermediate strings: the recovery
/// point is written on every flush.
pub(crate) fn encode_number(kind: &str, value: u64) -> Vec<u8> {
    use std::fmt::Write;
    let mut s = String::with_capacity(kind.len() + 48);
    s.push_str("skein-");
    s.push_str(kind);
    let _ = write!(s, " v{VERSION}\n1\n{value}\n");
    let crc = crc32fast::hash(s.as_bytes());
    let _ = writeln!(s, "crc {crc:08x}");
    s.into_bytes()
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
    let computed = crc32fast::hash(body.as_bytes());
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
        for v in [0, 7, u64::MAX] {
            assert_eq!(encode_number("rp", v), encode("rp", &[v.to_string()]));
        }
    }
}
