//! Fault lanes: under a plot, one lane per fault kind, each fault a span from its start to
//! its end with its target (node, link, client) on hover; a target is also written beside
//! its span when there is room, and never on top of another label (a label that does not
//! fit is left to the hover).

use super::Shade;
use crate::history::Nanos;

/// Font size of lane text, in px.
pub const FONT: f64 = 10.0;
/// Horizontal room kept free between two labels of a lane.
pub const GAP: f64 = 4.0;

/// A conservative width of `text` in px at `font` px in a sans-serif face (wider than the
/// widest common glyph mix, so estimated boxes that do not overlap never overlap drawn).
pub fn text_width(text: &str, font: f64) -> f64 {
    text.chars().count() as f64 * font * 0.62
}

/// One fault placed on its lane: pixels from `x0` to `x1`, its label at `label_x` if it got
/// one, cut to `label` when the whole target did not fit before the right edge.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub x0: f64,
    pub x1: f64,
    pub label_x: Option<f64>,
    pub label: String,
    /// Index of the shade in the input.
    pub shade: usize,
}

/// One lane: a fault kind and its faults, in start order.
#[derive(Clone, Debug, PartialEq)]
pub struct Lane {
    pub kind: String,
    pub spans: Vec<Span>,
}

/// Packs `shades` into lanes by kind (lanes in order of each kind's first fault), mapping
/// times to pixels with `x`; labels stay left of `right`.
pub fn pack(shades: &[Shade], x: impl Fn(Nanos) -> f64, right: f64) -> Vec<Lane> {
    let mut order: Vec<usize> = (0..shades.len()).collect();
    order.sort_by_key(|&i| (shades[i].start, shades[i].end, i));
    let mut lanes: Vec<Lane> = Vec::new();
    // Per lane, where its last label ends.
    let mut ends: Vec<f64> = Vec::new();
    for i in order {
        let s = &shades[i];
        let lane = match lanes.iter().position(|l| l.kind == s.kind) {
            Some(k) => k,
            None => {
                lanes.push(Lane {
                    kind: s.kind.clone(),
                    spans: Vec::new(),
                });
                ends.push(f64::NEG_INFINITY);
                lanes.len() - 1
            }
        };
        let (x0, x1) = (x(s.start), x(s.end.max(s.start)));
        // As close to the span's start as the previous label allows, but not past its end;
        // cut short (at least 6 characters and an ellipsis) if the right edge comes first.
        let at = (x0 + 2.0).max(ends[lane] + GAP);
        let room = ((right - at) / (FONT * 0.62)).floor().max(0.0) as usize;
        let label = if s.target.chars().count() <= room || room < 7 {
            s.target.clone()
        } else {
            super::frame::short(&s.target, room)
        };
        let w = text_width(&label, FONT);
        let label_x =
            (!label.is_empty() && at <= x1.max(x0 + 2.0) && at + w <= right).then_some(at);
        if let Some(lx) = label_x {
            ends[lane] = lx + w;
        }
        lanes[lane].spans.push(Span {
            x0,
            x1,
            label_x,
            label,
            shade: i,
        });
    }
    lanes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shade(kind: &str, target: &str, start: u64, end: u64) -> Shade {
        Shade {
            start,
            end,
            kind: kind.into(),
            target: target.into(),
        }
    }

    /// No two labels of a lane overlap, every label starts inside its span (or right after
    /// the previous label, still inside), and none runs past the right edge.
    fn assert_no_overlap(lanes: &[Lane], right: f64) {
        for lane in lanes {
            let mut boxes: Vec<(f64, f64)> = lane
                .spans
                .iter()
                .filter_map(|s| s.label_x.map(|x| (x, x + text_width(&s.label, FONT))))
                .collect();
            boxes.sort_by(|a, b| a.0.total_cmp(&b.0));
            for w in boxes.windows(2) {
                assert!(
                    w[0].1 + GAP <= w[1].0 + 1e-9,
                    "overlap in {}: {w:?}",
                    lane.kind
                );
            }
            for b in &boxes {
                assert!(b.1 <= right + 1e-9, "past the edge: {b:?}");
            }
            for s in &lane.spans {
                if let Some(x) = s.label_x {
                    assert!(x >= s.x0 && x <= s.x1.max(s.x0 + 2.0), "{s:?}");
                }
            }
        }
    }

    #[test]
    fn one_lane_per_kind_labels_never_overlap() {
        // Dense faults: many start within a label's width of each other.
        let mut shades = Vec::new();
        for k in 0..200u64 {
            let kind = ["kill", "partition", "pause"][(k % 3) as usize];
            shades.push(shade(kind, &format!("broker-{}", k % 5), k * 7, k * 7 + 20));
        }
        shades.push(shade("link", "controller-2<->broker-3", 10, 1000));
        let x = |t: u64| t as f64;
        let lanes = pack(&shades, x, 1500.0);
        let kinds: Vec<&str> = lanes.iter().map(|l| l.kind.as_str()).collect();
        assert_eq!(
            kinds,
            ["kill", "partition", "link", "pause"],
            "by first fault"
        );
        assert_eq!(lanes.iter().map(|l| l.spans.len()).sum::<usize>(), 201);
        assert_no_overlap(&lanes, 1500.0);
        // Some labels had to give way, some were placed.
        let placed = lanes
            .iter()
            .flat_map(|l| &l.spans)
            .filter(|s| s.label_x.is_some())
            .count();
        assert!(placed > 10 && placed < 201, "placed {placed}");
    }

    #[test]
    fn sparse_faults_all_get_labels_and_instant_ones_a_place() {
        let shades = vec![
            shade("kill", "broker-1", 0, 100),
            shade("kill", "broker-2", 300, 400),
            shade("bit-flip", "broker-3", 500, 500),
        ];
        let lanes = pack(&shades, |t| t as f64, 1000.0);
        assert!(lanes
            .iter()
            .flat_map(|l| &l.spans)
            .all(|s| s.label_x.is_some()));
        assert_no_overlap(&lanes, 1000.0);
        // A label that would run past the right edge is cut short, or dropped when not even
        // a few characters fit.
        let edge = vec![
            shade("kill", "a-long-target-name-of-a-node", 900, 950),
            shade("pause", "a-long-target-name", 990, 1000),
        ];
        let lanes = pack(&edge, |t| t as f64, 1000.0);
        assert_eq!(lanes[0].spans[0].label, "a-long-target-…");
        assert!(lanes[0].spans[0].label_x.is_some());
        assert_eq!(lanes[1].spans[0].label_x, None);
        assert_no_overlap(&lanes, 1000.0);
    }
}
