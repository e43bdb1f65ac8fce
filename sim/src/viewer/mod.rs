//! The run viewer: one self-contained HTML file (script and styles inlined, no network)
//! showing a run as a space-time diagram: a lane per node and client, messages as arrows,
//! faults as shaded spans, each partition's leader/epoch/ISR/LEO/HW per replica, the
//! client history and the violated invariants.
//!
//! Data flow: the world's [`Tracer`](crate::trace::Tracer) passes each event's structured
//! fields to a [`Recorder`] (the same events that make the trace hash: no second path
//! through the simulator); [`write_html`] encodes what it kept (numeric columns as
//! little-endian base64, the rest as JSON) into `page.html` with `viewer.js` and
//! `viewer.css`, which draw it on a canvas (aggregated when zoomed out, every arrow when
//! zoomed in).

mod record;

pub use record::{
    MarkerMark, Recorder, TxnMark, LATE_TXN, MARKER_LATE, MARKER_OWN, MARKER_UNKNOWN,
    MARKER_WRONG_TXN, TXN_STATES,
};

use crate::report::SimReport;
use serde_json::{json, Value};
use std::io::Write;

const PAGE: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("viewer.js");
const STYLE: &str = include_str!("viewer.css");

/// Standard base64 (RFC 4648, with padding).
fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        s.push(T[(n >> 18) as usize & 63] as char);
        s.push(T[(n >> 12) as usize & 63] as char);
        s.push(if c.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        s.push(if c.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
    s
}

fn col_u32(v: impl Iterator<Item = u32>) -> String {
    base64(&v.flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
}

fn col_u16(v: &[u16]) -> String {
    base64(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
}

/// Times in the page: microseconds, as u32 (71 minutes of simulated time).
fn us(t: u64) -> u32 {
    (t / 1_000).min(u32::MAX as u64) as u32
}

/// The page's data: everything the recorder kept, plus the report's summary.
fn data(rec: &Recorder, report: &SimReport, title: &str) -> Value {
    let m = &rec.msgs;
    // Messages sorted by send time, so the page finds a time window by binary search.
    let mut order: Vec<usize> = (0..m.sent.len()).collect();
    order.sort_by_key(|&i| (m.sent[i], i));
    let mut rank = vec![0u32; order.len()];
    for (r, &i) in order.iter().enumerate() {
        rank[i] = r as u32;
    }
    let pick8 = |c: &[u8]| base64(&order.iter().map(|&i| c[i]).collect::<Vec<u8>>());
    let pick32 = |c: &[u32]| col_u32(order.iter().map(|&i| c[i]));
    let mut texts: Vec<(u32, &str)> = m
        .text
        .iter()
        .map(|(i, t)| (rank[*i as usize], t.as_str()))
        .collect();
    texts.sort();
    let mut late: Vec<(u32, u32, u32)> = m
        .late
        .iter()
        .map(|&(i, own, current)| (rank[i as usize], own, current))
        .collect();
    late.sort();
    let replicas: Vec<Value> = rec
        .replicas
        .iter()
        .map(|((tp, node), states)| {
            let cols: Vec<Vec<u32>> = vec![
                states.iter().map(|s| us(s.0)).collect(),
                states
                    .iter()
                    .map(|s| s.1.role as u32 | (s.1.leader as u32) << 8)
                    .collect(),
                states.iter().map(|s| s.1.epoch).collect(),
                states.iter().map(|s| s.1.leo).collect(),
                states.iter().map(|s| s.1.hw).collect(),
                states.iter().map(|s| s.1.flushed).collect(),
                states.iter().map(|s| s.1.isr).collect(),
                states.iter().map(|s| s.1.max_isr).collect(),
                states.iter().map(|s| s.1.lso).collect(),
            ];
            json!({"tp": tp, "node": node,
                   "cols": cols.into_iter().map(|c| col_u32(c.into_iter())).collect::<Vec<_>>()})
        })
        .collect();
    json!({
        "title": title,
        "seed": report.seed,
        "hash": format!("{:016x}", report.trace_hash),
        "events": report.events,
        "verdict": if report.failed_invariants().is_empty() { "PASS" } else { "FAIL" },
        "failed": report.failed_invariants(),
        "end": us(rec.end),
        "finalHeal": rec.final_heal.map(us),
        "lanes": rec.lanes.iter().map(|l| json!({"name": l.name, "role": l.role})).collect::<Vec<_>>(),
        "tps": rec.tps.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
        "kinds": rec.kinds,
        "msgs": {
            "n": m.sent.len(),
            "sent": col_u32(order.iter().map(|&i| us(m.sent[i]))),
            "recv": col_u32(order.iter().map(|&i| us(m.recv[i]))),
            "from": pick8(&m.from),
            "to": pick8(&m.to),
            "kind": pick8(&m.kind),
            "flags": pick8(&m.flags),
            "tp": col_u16(&order.iter().map(|&i| m.tp[i]).collect::<Vec<_>>()),
            "a": pick32(&m.a),
            "b": pick32(&m.b),
            "c": pick32(&m.c),
            "text": texts,
            "late": late,
        },
        "replicas": replicas,
        "faults": rec.faults.iter().map(|f| json!([us(f.at), f.name, f.lanes, f.end.map(us), f.text])).collect::<Vec<_>>(),
        "procs": rec.procs.iter().map(|p| json!([us(p.0), p.1, p.2])).collect::<Vec<_>>(),
        "pauses": rec.pauses.iter().map(|p| json!([us(p.0), p.1, us(p.2)])).collect::<Vec<_>>(),
        "partitions": rec.partitions.iter().map(|p| json!([us(p.0), p.1])).collect::<Vec<_>>(),
        "notes": rec.notes.iter().map(|n| json!([us(n.at), n.lane, n.what, n.text])).collect::<Vec<_>>(),
        "history": history(rec),
        "txns": txns(rec),
        "violations": rec.violations.iter().map(|v| json!([us(v.at), v.invariant, v.detail])).collect::<Vec<_>>(),
    })
}

/// The transactions: each id's coordinator states, and the markers partition leaders
/// appended (with what each closed), as rows (a run holds a few thousand at most).
fn txns(rec: &Recorder) -> Value {
    json!({
        "ids": rec.txn_ids,
        "stateNames": record::TXN_STATES,
        "states": rec.txn_states.iter().map(|s| json!([
            us(s.at), s.id, s.state, s.producer_id, s.epoch, s.node, s.coordinator_epoch,
            s.number, s.partitions,
        ])).collect::<Vec<_>>(),
        "markers": rec.markers.iter().map(|m| json!([
            us(m.at), m.tp, m.node, m.offset, m.commit, m.producer_id, m.epoch,
            m.partition_epoch, m.coordinator_epoch, m.closed_from, m.sent.map(us), m.id,
            m.own, m.current, m.verdict,
        ])).collect::<Vec<_>>(),
    })
}

/// The client history as columns (it is the largest part after the messages).
fn history(rec: &Recorder) -> Value {
    let h = &rec.history;
    let mut fs: Vec<&str> = Vec::new();
    let f: Vec<u8> = h
        .iter()
        .map(|e| match fs.iter().position(|&x| x == e.f) {
            Some(i) => i as u8,
            None => {
                fs.push(e.f);
                fs.len() as u8 - 1
            }
        })
        .collect();
    json!({
        "n": h.len(),
        "fs": fs,
        "at": col_u32(h.iter().map(|e| us(e.at))),
        "lane": base64(&h.iter().map(|e| e.lane).collect::<Vec<u8>>()),
        "kind": base64(&h.iter().map(|e| e.kind).collect::<Vec<u8>>()),
        "f": base64(&f),
        "process": col_u32(h.iter().map(|e| e.process)),
        "partition": col_u32(h.iter().map(|e| e.partition)),
        "a": col_u32(h.iter().map(|e| e.a)),
        "b": col_u32(h.iter().map(|e| e.b)),
        "text": h.iter().map(|e| e.text.as_str()).collect::<Vec<_>>(),
    })
}

/// Writes the viewer page for a recorded run.
pub fn write_html(
    rec: &Recorder,
    report: &SimReport,
    title: &str,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    // JSON inside <script>: "</" must not close the element.
    let json = data(rec, report, title).to_string().replace("</", "<\\/");
    let esc = title.replace('&', "&amp;").replace('<', "&lt;");
    let page = PAGE
        .replace("{{TITLE}}", &esc)
        .replace("{{STYLE}}", STYLE)
        .replace("{{SCRIPT}}", SCRIPT);
    let (head, tail) = page
        .split_once("{{DATA}}")
        .expect("page.html has a {{DATA}} slot");
    out.write_all(head.as_bytes())?;
    out.write_all(json.as_bytes())?;
    out.write_all(tail.as_bytes())?;
    out.flush()
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_known_vectors() {
        assert_eq!(super::base64(b""), "");
        assert_eq!(super::base64(b"f"), "Zg==");
        assert_eq!(super::base64(b"fo"), "Zm8=");
        assert_eq!(super::base64(b"foobar"), "Zm9vYmFy");
    }
}
