//! Latency quantiles per time window, as Jepsen's `latency-quantiles` plot draws them.

/// The quantiles drawn, with their names.
pub const QUANTILES: [(f64, &str); 4] = [(0.5, "p50"), (0.95, "p95"), (0.99, "p99"), (1.0, "max")];

/// The nearest-rank quantile `q` (0 < q <= 1) of `sorted` (ascending): the smallest value
/// with at least `q` of the values at or below it. `None` when empty.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}

/// One window's quantiles: the window's start (s) and one value per [`QUANTILES`] entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    pub start: f64,
    pub values: [f64; 4],
}

/// Groups `(time s, latency)` samples into windows of `width` seconds from 0 and returns
/// the quantiles of each non-empty window, in time order.
pub fn windows(samples: &[(f64, f64)], width: f64) -> Vec<Window> {
    let mut buckets: std::collections::BTreeMap<u64, Vec<f64>> = Default::default();
    for &(t, v) in samples {
        buckets
            .entry((t.max(0.0) / width) as u64)
            .or_default()
            .push(v);
    }
    buckets
        .into_iter()
        .map(|(k, mut vs)| {
            vs.sort_by(f64::total_cmp);
            let mut values = [0.0; 4];
            for (slot, (q, _)) in values.iter_mut().zip(QUANTILES) {
                *slot = quantile(&vs, q).expect("non-empty bucket");
            }
            Window {
                start: k as f64 * width,
                values,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain definition: the smallest value v with #{x <= v} >= q * n.
    fn by_definition(values: &[f64], q: f64) -> f64 {
        let n = values.len() as f64;
        let mut candidates: Vec<f64> = values
            .iter()
            .copied()
            .filter(|v| values.iter().filter(|x| *x <= v).count() as f64 >= q * n)
            .collect();
        candidates.sort_by(f64::total_cmp);
        candidates[0]
    }

    #[test]
    fn quantiles_match_the_plain_definition() {
        // A fixed pseudo-random spread with repeats and an outlier.
        let mut state = 12345u64;
        for n in [1usize, 2, 3, 7, 10, 99, 100, 101, 1000] {
            let mut values: Vec<f64> = (0..n)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((state >> 33) % 50) as f64
                })
                .collect();
            values.push(1900.0);
            let mut sorted = values.clone();
            sorted.sort_by(f64::total_cmp);
            for (q, name) in QUANTILES {
                assert_eq!(
                    quantile(&sorted, q),
                    Some(by_definition(&values, q)),
                    "{name} of {n}+1 values"
                );
            }
            assert_eq!(quantile(&sorted, 1.0), Some(1900.0), "max is the outlier");
        }
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn windows_split_by_time() {
        let samples = [(0.1, 1.0), (0.9, 3.0), (1.5, 10.0), (3.2, 5.0), (3.3, 7.0)];
        let w = windows(&samples, 1.0);
        assert_eq!(w.len(), 3, "window 2 is empty and left out");
        assert_eq!(w[0].start, 0.0);
        assert_eq!(w[0].values, [1.0, 3.0, 3.0, 3.0]);
        assert_eq!(w[1].values, [10.0; 4]);
        assert_eq!(w[2].start, 3.0);
        assert_eq!(w[2].values[0], 5.0);
        assert_eq!(w[2].values[3], 7.0);
    }
}
