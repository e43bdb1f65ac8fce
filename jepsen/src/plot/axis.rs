//! Axes: a logarithmic one with a tick at every decade (latencies span 0.1 ms to seconds,
//! and one outlier must not flatten the rest), and a linear one with "nice" ticks.

/// A logarithmic axis over whole decades: `lo` and `hi` are powers of ten.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogAxis {
    pub lo: f64,
    pub hi: f64,
}

impl LogAxis {
    /// The smallest span of whole decades holding every positive value of `values`
    /// (non-positive values are drawn at the floor); at least one decade.
    pub fn covering(values: impl IntoIterator<Item = f64>) -> LogAxis {
        let (mut min, mut max) = (f64::INFINITY, 0.0f64);
        for v in values.into_iter().filter(|v| *v > 0.0 && v.is_finite()) {
            min = min.min(v);
            max = max.max(v);
        }
        if max == 0.0 {
            return LogAxis { lo: 1.0, hi: 10.0 };
        }
        let lo = 10f64.powf(min.log10().floor());
        let mut hi = 10f64.powf(max.log10().ceil());
        if hi <= lo {
            hi = lo * 10.0;
        }
        LogAxis { lo, hi }
    }

    /// Where `v` falls, from 0 (at `lo`) to 1 (at `hi`); clamped.
    pub fn fraction(&self, v: f64) -> f64 {
        if v <= self.lo {
            return 0.0;
        }
        ((v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())).clamp(0.0, 1.0)
    }

    /// One tick per decade, `lo` and `hi` included.
    pub fn decades(&self) -> Vec<f64> {
        let (a, b) = (
            self.lo.log10().round() as i32,
            self.hi.log10().round() as i32,
        );
        (a..=b).map(|e| 10f64.powi(e)).collect()
    }

    /// The 2x and 5x ticks between decades (unlabelled gridlines).
    pub fn minor(&self) -> Vec<f64> {
        let d = self.decades();
        d.iter()
            .take(d.len().saturating_sub(1))
            .flat_map(|&t| [2.0 * t, 5.0 * t])
            .collect()
    }
}

/// A tick label for a latency in milliseconds: `0.1 ms`, `10 ms`, `1 s`.
pub fn ms_label(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{} s", trim(ms / 1000.0))
    } else {
        format!("{} ms", trim(ms))
    }
}

/// A number without a trailing `.0`, at most 3 decimals.
pub fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// A step of 1, 2 or 5 times a power of ten, giving about `n` steps over `0..max`.
pub fn nice_step(max: f64, n: usize) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let raw = max / n.max(1) as f64;
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let k = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    k * p
}

/// A linear axis from 0 up to a whole number of nice steps covering `max`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinAxis {
    pub max: f64,
    pub step: f64,
}

impl LinAxis {
    pub fn covering(max: f64, n: usize) -> LinAxis {
        let step = nice_step(max, n);
        let max = ((max / step).ceil() * step).max(step);
        LinAxis { max, step }
    }

    pub fn fraction(&self, v: f64) -> f64 {
        (v / self.max).clamp(0.0, 1.0)
    }

    pub fn ticks(&self) -> Vec<f64> {
        let n = (self.max / self.step).round() as usize;
        (0..=n).map(|i| i as f64 * self.step).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_axis_ticks_every_decade_around_the_data() {
        let a = LogAxis::covering([0.35, 12.0, 1900.0, 0.0]);
        assert_eq!((a.lo, a.hi), (0.1, 10_000.0));
        let d = a.decades();
        assert_eq!(d.len(), 6, "0.1, 1, 10, 100, 1000, 10000: {d:?}");
        for w in d.windows(2) {
            assert!((w[1] / w[0] - 10.0).abs() < 1e-9, "a decade apart: {d:?}");
        }
        // Decades are evenly spaced on the axis: the point of a log scale.
        let f: Vec<f64> = d.iter().map(|&t| a.fraction(t)).collect();
        for (i, x) in f.iter().enumerate() {
            assert!((x - i as f64 / 5.0).abs() < 1e-9, "{f:?}");
        }
        assert_eq!(a.fraction(0.0), 0.0, "zero sits on the floor");
        assert_eq!(a.minor().len(), 10);
        // One value: one decade.
        let one = LogAxis::covering([100.0]);
        assert_eq!((one.lo, one.hi), (100.0, 1000.0));
        assert_eq!(LogAxis::covering([]).decades(), vec![1.0, 10.0]);
    }

    #[test]
    fn labels_and_linear_ticks() {
        assert_eq!(ms_label(0.1), "0.1 ms");
        assert_eq!(ms_label(100.0), "100 ms");
        assert_eq!(ms_label(10_000.0), "10 s");
        assert_eq!(nice_step(97.0, 5), 20.0);
        assert_eq!(nice_step(0.9, 5), 0.2);
        let a = LinAxis::covering(97.0, 5);
        assert_eq!(a.ticks(), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert!(a.max >= 97.0);
    }
}
