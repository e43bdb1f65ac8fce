//! Simulated time and human durations ("60s", "250ms", "1m30s").

use std::fmt;

/// Simulated time and durations, in nanoseconds (the same unit as `skein_core::Nanos`).
pub type SimTime = u64;

pub const MICROS: u64 = 1_000;
pub const MILLIS: u64 = 1_000_000;
pub const SECS: u64 = 1_000_000_000;

/// A duration that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad duration {input:?}: {reason} (expected e.g. 60s, 250ms, 1m30s, 5000us, 10ns)")]
pub struct DurationError {
    pub input: String,
    pub reason: &'static str,
}

/// Parses `"1m30s"`, `"250ms"`, `"60"` (seconds) into nanoseconds.
pub fn parse_duration(input: &str) -> Result<SimTime, DurationError> {
    let err = |reason| DurationError {
        input: input.to_string(),
        reason,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(SECS))
            .ok_or(err("too large"));
    }
    let mut total: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or(err("a number needs a unit"))?;
        if digits == 0 {
            return Err(err("expected a number"));
        }
        let number: f64 = rest[..digits].parse().map_err(|_| err("bad number"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "µs" => MICROS,
            "ms" => MILLIS,
            "s" => SECS,
            "m" | "min" => 60 * SECS,
            "h" => 3600 * SECS,
            _ => return Err(err("unknown unit")),
        };
        rest = &rest[unit_len..];
        let part = number * unit as f64;
        if !part.is_finite() || part > 1e19 {
            return Err(err("too large"));
        }
        total = total.checked_add(part as u64).ok_or(err("too large"))?;
    }
    Ok(total)
}

/// Formats nanoseconds the way humans read them: `12.345s`, `250ms`, `17us`.
pub struct Human(pub SimTime);

impl fmt::Display for Human {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.0;
        if t >= SECS {
            write!(f, "{}.{:03}s", t / SECS, (t % SECS) / MILLIS)
        } else if t >= MILLIS {
            write!(f, "{}ms", t / MILLIS)
        } else if t >= MICROS {
            write!(f, "{}us", t / MICROS)
        } else {
            write!(f, "{t}ns")
        }
    }
}

/// Formats a duration so that [`parse_duration`] reads it back exactly (for replay commands).
pub fn format_duration(t: SimTime) -> String {
    if t.is_multiple_of(SECS) {
        format!("{}s", t / SECS)
    } else if t.is_multiple_of(MILLIS) {
        format!("{}ms", t / MILLIS)
    } else if t.is_multiple_of(MICROS) {
        format!("{}us", t / MICROS)
    } else {
        format!("{t}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("60s").unwrap(), 60 * SECS);
        assert_eq!(parse_duration("60").unwrap(), 60 * SECS);
        assert_eq!(parse_duration("250ms").unwrap(), 250 * MILLIS);
        assert_eq!(parse_duration("1m30s").unwrap(), 90 * SECS);
        assert_eq!(parse_duration("1.5s").unwrap(), 1500 * MILLIS);
        assert_eq!(parse_duration("10ns").unwrap(), 10);
        assert!(parse_duration("").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("3").is_ok());
    }

    #[test]
    fn format_round_trips() {
        for t in [0, 7, 3 * MICROS, 250 * MILLIS, 60 * SECS, 1_234_567] {
            assert_eq!(parse_duration(&format_duration(t)).unwrap(), t);
        }
        assert_eq!(Human(1_500 * MILLIS).to_string(), "1.500s");
    }
}
