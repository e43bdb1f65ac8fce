//! The frame every plot shares: title, a time axis in seconds, a y axis (log or linear),
//! faults as faint bands behind the data, a legend to the right of the plot (never over the
//! data) and the fault lanes under the time axis.
//!
//! Elements carry classes a reader's tools (and the browser test) can find: `axis-x`,
//! `axis-y`, `legend`, `lane` (with `data-kind`), `fault-span`, `lane-name`, `span-label`.

use super::axis::{ms_label, trim, LinAxis, LogAxis};
use super::lanes::{self, pack};
use super::{escape, Shade};
use std::fmt::Write;

pub const W: f64 = 1000.0;
pub const LEFT: f64 = 130.0;
/// The plot's right edge; the legend lives right of it.
pub const RIGHT: f64 = 820.0;
pub const TOP: f64 = 44.0;
pub const PLOT_H: f64 = 300.0;
pub const BOTTOM: f64 = TOP + PLOT_H;
const LANE_H: f64 = 16.0;
/// Lanes start this far under the plot (room for tick labels and the axis title).
const LANES_AT: f64 = 50.0;

/// What every plot of one history shares: its length, its time axis's name and its faults.
#[derive(Clone, Debug)]
pub struct Chart {
    /// Seconds from the history's origin to its last event or fault end.
    pub t_max: f64,
    /// `time (s)`, or `simulated time (s)` for a simulator's history.
    pub time_label: String,
    pub shades: Vec<Shade>,
}

/// How a legend entry is drawn.
pub enum Swatch {
    /// A point marker (`#ok`, `#info`, `#fail`) in a colour.
    Marker(&'static str, &'static str),
    /// A line in a colour and dash pattern (`""` solid).
    Line(&'static str, &'static str),
}

pub struct Frame<'a> {
    chart: &'a Chart,
    t_max: f64,
    pub svg: String,
}

/// Point markers by outcome: ok a dot, info a triangle, fail a cross; coloured by `color`.
const MARKERS: &str = r#"<defs><circle id="ok" r="2.2" fill="currentColor"/><path id="info" d="M0,-3 L2.8,2 L-2.8,2 Z" fill="currentColor"/><path id="fail" d="M-2.4,-2.4 L2.4,2.4 M-2.4,2.4 L2.4,-2.4" stroke="currentColor" stroke-width="1.4"/></defs>"#;

impl<'a> Frame<'a> {
    pub fn new(chart: &'a Chart, title: &str, subtitle: &str) -> Frame<'a> {
        let t_max = chart.t_max.max(1e-3);
        let lanes = lane_count(&chart.shades);
        let h = BOTTOM + LANES_AT + LANE_H * lanes.max(1) as f64 + 14.0;
        let mut svg = String::new();
        let _ = write!(
            svg,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" font-family="sans-serif" font-size="11">{MARKERS}<rect width="100%" height="100%" fill="white"/><text class="title" x="{LEFT}" y="18" font-size="15" font-weight="bold">{}</text><text class="subtitle" x="{LEFT}" y="34" fill="#495057">{}</text>"##,
            escape(title),
            escape(subtitle)
        );
        let mut f = Frame { chart, t_max, svg };
        f.bands();
        f.time_axis();
        f
    }

    pub fn x(&self, t: f64) -> f64 {
        LEFT + (RIGHT - LEFT) * (t / self.t_max).clamp(0.0, 1.0)
    }

    pub fn x_ns(&self, t: u64) -> f64 {
        self.x(t as f64 / 1e9)
    }

    /// Pixel height of `fraction` (0 bottom, 1 top).
    pub fn y(&self, fraction: f64) -> f64 {
        BOTTOM - PLOT_H * fraction
    }

    /// Faults as faint bands over the plot, so data and faults line up by eye.
    fn bands(&mut self) {
        for s in &self.chart.shades {
            let (x0, x1) = (self.x_ns(s.start), self.x_ns(s.end.max(s.start)));
            let _ = write!(
                self.svg,
                r##"<rect class="fault-band" x="{x0:.1}" y="{TOP}" width="{:.1}" height="{PLOT_H}" fill="#fa5252" fill-opacity="0.07"/>"##,
                (x1 - x0).max(1.0)
            );
        }
    }

    fn time_axis(&mut self) {
        let axis = LinAxis::covering(self.t_max, 10);
        let mut g = String::new();
        let _ = write!(
            g,
            r#"<g class="axis-x"><line x1="{LEFT}" y1="{BOTTOM}" x2="{RIGHT}" y2="{BOTTOM}" stroke="black"/>"#
        );
        for t in axis.ticks().into_iter().filter(|t| *t <= self.t_max + 1e-9) {
            let x = self.x(t);
            let _ = write!(
                g,
                r#"<line x1="{x:.1}" y1="{BOTTOM}" x2="{x:.1}" y2="{}" stroke="black"/><text class="tick" x="{x:.1}" y="{}" text-anchor="middle">{}</text>"#,
                BOTTOM + 4.0,
                BOTTOM + 15.0,
                trim(t)
            );
        }
        let _ = write!(
            g,
            r#"<text class="axis-title" x="{}" y="{}" text-anchor="middle">{}</text></g>"#,
            (LEFT + RIGHT) / 2.0,
            BOTTOM + 31.0,
            escape(&self.chart.time_label)
        );
        self.svg.push_str(&g);
    }

    fn y_title(&mut self, title: &str) {
        let (x, y) = (16.0, TOP + PLOT_H / 2.0);
        let _ = write!(
            self.svg,
            r#"<text class="axis-title" x="{x}" y="{y}" transform="rotate(-90 {x} {y})" text-anchor="middle">{}</text>"#,
            escape(title)
        );
    }

    /// A log y axis: a labelled gridline per decade, faint ones at 2x and 5x.
    pub fn log_y(&mut self, axis: &LogAxis, title: &str) {
        self.svg.push_str(r#"<g class="axis-y">"#);
        for t in axis.minor() {
            let y = self.y(axis.fraction(t));
            let _ = write!(
                self.svg,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{RIGHT}" y2="{y:.1}" stroke="#f1f3f5"/>"##
            );
        }
        for t in axis.decades() {
            let y = self.y(axis.fraction(t));
            let _ = write!(
                self.svg,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{RIGHT}" y2="{y:.1}" stroke="#dee2e6"/><text class="tick" x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT - 5.0,
                y + 4.0,
                ms_label(t)
            );
        }
        let _ = write!(
            self.svg,
            r#"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{BOTTOM}" stroke="black"/></g>"#
        );
        self.y_title(title);
    }

    /// A linear y axis from 0.
    pub fn lin_y(&mut self, axis: &LinAxis, title: &str) {
        self.svg.push_str(r#"<g class="axis-y">"#);
        for t in axis.ticks() {
            let y = self.y(axis.fraction(t));
            let _ = write!(
                self.svg,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{RIGHT}" y2="{y:.1}" stroke="#e9ecef"/><text class="tick" x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT - 5.0,
                y + 4.0,
                trim(t)
            );
        }
        let _ = write!(
            self.svg,
            r#"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{BOTTOM}" stroke="black"/></g>"#
        );
        self.y_title(title);
    }

    /// The legend, right of the plot, one entry per line.
    pub fn legend(&mut self, entries: &[(String, Swatch)]) {
        let x = RIGHT + 14.0;
        self.svg.push_str(r#"<g class="legend">"#);
        for (i, (label, swatch)) in entries.iter().enumerate() {
            let y = TOP + 8.0 + 15.0 * i as f64;
            match swatch {
                Swatch::Marker(id, c) => {
                    let _ = write!(
                        self.svg,
                        r#"<use href="{id}" x="{}" y="{y}" color="{c}"/>"#,
                        x + 6.0
                    );
                }
                Swatch::Line(c, dash) => {
                    let _ = write!(
                        self.svg,
                        r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{c}" stroke-width="2" stroke-dasharray="{dash}"/>"#,
                        x + 16.0
                    );
                }
            }
            let _ = write!(
                self.svg,
                r#"<text class="legend-label" x="{}" y="{}">{}</text>"#,
                x + 22.0,
                y + 4.0,
                escape(label)
            );
        }
        self.svg.push_str("</g>");
    }

    /// The fault lanes, then the closing tag.
    pub fn finish(mut self) -> String {
        let top = BOTTOM + LANES_AT;
        let shades = &self.chart.shades;
        let packed = pack(shades, |t| self.x_ns(t), RIGHT);
        let mut g = String::from(r#"<g class="lanes">"#);
        if packed.is_empty() {
            let _ = write!(
                g,
                r##"<text class="lane-name" x="{}" y="{}" text-anchor="end" fill="#868e96">no faults</text>"##,
                LEFT - 5.0,
                top + 11.0
            );
        }
        for (k, lane) in packed.iter().enumerate() {
            let y = top + LANE_H * k as f64;
            let _ = write!(
                g,
                r##"<g class="lane" data-kind="{kind}"><rect x="{LEFT}" y="{y}" width="{}" height="{}" fill="{}"/><text class="lane-name" x="{}" y="{}" text-anchor="end" font-size="{}" fill="#c92a2a"><title>{kind}</title>{}</text>"##,
                RIGHT - LEFT,
                LANE_H - 1.0,
                if k % 2 == 0 { "#f8f9fa" } else { "#ffffff" },
                LEFT - 5.0,
                y + 11.0,
                lanes::FONT,
                escape(&short(&lane.kind, 18)),
                kind = escape(&lane.kind),
            );
            for s in &lane.spans {
                let shade = &shades[s.shade];
                let _ = write!(
                    g,
                    r##"<rect class="fault-span" x="{:.1}" y="{}" width="{:.1}" height="{}" fill="#fa5252" fill-opacity="0.55"><title>{} {} ({}s to {}s)</title></rect>"##,
                    s.x0,
                    y + 2.0,
                    (s.x1 - s.x0).max(2.0),
                    LANE_H - 5.0,
                    escape(&shade.kind),
                    escape(&shade.target),
                    trim(shade.start as f64 / 1e9),
                    trim(shade.end as f64 / 1e9),
                );
                if let Some(lx) = s.label_x {
                    let _ = write!(
                        g,
                        r##"<text class="span-label" x="{lx:.1}" y="{}" font-size="{}" fill="#212529">{}</text>"##,
                        y + 11.0,
                        lanes::FONT,
                        escape(&s.label)
                    );
                }
            }
            g.push_str("</g>");
        }
        g.push_str("</g>");
        self.svg.push_str(&g);
        self.svg.push_str("</svg>\n");
        self.svg
    }
}

fn lane_count(shades: &[Shade]) -> usize {
    let kinds: std::collections::BTreeSet<&str> = shades.iter().map(|s| s.kind.as_str()).collect();
    kinds.len()
}

/// `s` cut to `n` characters, with an ellipsis when cut.
pub fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}
