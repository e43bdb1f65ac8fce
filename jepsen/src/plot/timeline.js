// The timeline (inlined into timeline.html; no network, no libraries). The page carries
// one JSON object (<script id="data">, written by jepsen/src/plot/timeline.rs): rows of
// operations [start s, end s, function, outcome, invoke index, completion index] (a row is
// one role: processes of that role that never overlapped share it), faults
// and violation marks. render() draws the window in view from `view`; the URL hash keeps it.
'use strict';
(function () {
  const status = document.getElementById('status');
  let errors = 0;
  function fail(msg) {
    errors += 1;
    status.dataset.errors = String(errors);
    status.dataset.lastError = String(msg);
  }
  window.addEventListener('error', (e) => fail(e.message));

  const D = JSON.parse(document.getElementById('data').textContent);
  const NAME_W = 220;
  const KINDS = ['ok', 'fail', 'info'];
  const chart = document.getElementById('chart');
  const view = { t0: 0, t1: Math.max(D.tMax, 0.001), showFolded: false };
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.font = '10px sans-serif';
  const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/"/g, '&quot;');
  const fmt = (t) => (Math.round(t * 1000) / 1000).toString();

  // Which operations the violations name, by history index (invoke or completion).
  const marked = new Map();
  D.marks.forEach((m, i) => m.indexes.forEach((x) => marked.set(x, i)));
  function markOf(op) {
    if (marked.has(op[4])) return marked.get(op[4]);
    if (marked.has(op[5])) return marked.get(op[5]);
    return -1;
  }
  // Each mark's time span: its operations', or its own instant.
  const markSpan = D.marks.map((m, i) => {
    let lo = m.at === null ? Infinity : m.at;
    let hi = m.at === null ? -Infinity : m.at;
    for (const r of D.rows) for (const op of r.ops) {
      if (markOf(op) === i) { lo = Math.min(lo, op[0]); hi = Math.max(hi, op[1]); }
    }
    return lo <= hi ? [lo, hi] : null;
  });

  function trackWidth() { return Math.max(200, chart.clientWidth - NAME_W - 4); }
  function x(t) { return (t - view.t0) / (view.t1 - view.t0) * trackWidth(); }
  function inView(a, b) { return b >= view.t0 && a <= view.t1; }

  function niceStep(span, n) {
    const raw = span / n;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  function axis() {
    const w = trackWidth();
    const step = niceStep(view.t1 - view.t0, Math.max(2, Math.floor(w / 90)));
    let h = '<div id="axis"><div class="name label">' + esc(D.timeLabel) + '</div><div class="track" style="left:' + NAME_W + 'px;width:' + w + 'px">';
    for (let t = Math.ceil(view.t0 / step) * step; t <= view.t1 + 1e-9; t += step) {
      const px = x(t);
      if (px < 15 || px > w - 15) continue;
      h += '<span class="tick label" style="left:' + px.toFixed(1) + 'px">' + fmt(t) + '</span>';
    }
    return h + '</div></div>';
  }

  // Labels of one lane, left to right, each where its span starts unless the previous
  // label is still there: then right after it, if still inside its span; else none.
  function placeLabels(items, w) {
    let end = -Infinity;
    const out = [];
    for (const it of items) {
      const lw = ctx.measureText(it.text).width + 2;
      const at = Math.max(it.x0 + 2, end + 6);
      if (at <= Math.max(it.x1, it.x0 + 2) && at + lw <= w) {
        out.push({ at: at, text: it.text });
        end = at + lw;
      }
    }
    return out;
  }

  function faultLanes(stats) {
    const kinds = [];
    for (const f of D.faults) if (!kinds.includes(f.kind)) kinds.push(f.kind);
    const w = trackWidth();
    let h = '';
    for (const k of kinds) {
      const spans = D.faults.filter((f) => f.kind === k && inView(f.start, f.end))
        .sort((a, b) => a.start - b.start);
      const items = spans.map((f) => ({ x0: Math.max(0, x(f.start)), x1: Math.min(w, x(f.end)), text: f.target }));
      h += '<div class="lane" data-kind="' + esc(k) + '"><div class="name label" title="' + esc(k) + '">' + esc(k) + '</div><div class="track" style="left:' + NAME_W + 'px;width:' + w + 'px">';
      for (const it of items) {
        stats.spans += 1;
        const f = spans[items.indexOf(it)];
        h += '<div class="span" style="left:' + it.x0.toFixed(1) + 'px;width:' + Math.max(2, it.x1 - it.x0).toFixed(1) + 'px" title="' + esc(k + ' ' + f.target + ' (' + fmt(f.start) + ' s to ' + fmt(f.end) + ' s)') + '"></div>';
      }
      for (const l of placeLabels(items.filter((it) => it.text), w)) {
        stats.labels += 1;
        h += '<span class="span-label label" style="left:' + l.at.toFixed(1) + 'px">' + esc(l.text) + '</span>';
      }
      h += '</div></div>';
      stats.lanes += 1;
    }
    if (D.marks.length) {
      const items = [];
      D.marks.forEach((m, i) => {
        const s = markSpan[i];
        // A label sits at its marker or not at all (the marker's operations keep the name on hover).
        if (s && inView(s[0], s[1])) items.push({ x0: Math.max(0, x(s[0])), x1: Math.max(0, x(s[0])), text: m.label });
      });
      h += '<div class="lane" data-kind="violation"><div class="name label">violations</div><div class="track" style="left:' + NAME_W + 'px;width:' + w + 'px">';
      items.sort((a, b) => a.x0 - b.x0);
      for (const l of placeLabels(items, w)) {
        stats.marks += 1;
        h += '<span class="mark-label label" style="left:' + l.at.toFixed(1) + 'px">' + esc(l.text) + '</span>';
      }
      h += '</div></div>';
    }
    return h;
  }

  function rowHtml(r, ops, stats) {
    const w = trackWidth();
    let h = '<div class="row"><div class="name label" title="' + esc(r.name + ' (process' + (r.processes.length > 1 ? 'es ' : ' ') + r.processes.join(', ') + ')') + '">' + esc(r.name) + '</div><div class="track" style="left:' + NAME_W + 'px;width:' + w + 'px">';
    for (const op of ops) {
      const a = Math.max(0, x(op[0]));
      const b = Math.min(w, x(op[1]));
      const kind = KINDS[op[3]];
      const m = markOf(op);
      const color = kind === 'fail' ? '#ffc9c9' : D.fcolors[op[2]];
      const tip = D.fnames[op[2]] + ' ' + kind + ' #' + op[4] + '-#' + op[5] + ', ' + fmt(op[0]) + ' s, ' + fmt((op[1] - op[0]) * 1000) + ' ms' + (m >= 0 ? ' - ' + D.marks[m].label : '');
      h += '<div class="op ' + kind + (m >= 0 ? ' viol' : '') + '" style="left:' + a.toFixed(1) + 'px;width:' + Math.max(1, b - a).toFixed(1) + 'px;background-color:' + color + '" title="' + esc(tip) + '"></div>';
      stats.ops += 1;
    }
    return h + '</div></div>';
  }

  function overlays(top, height) {
    const w = trackWidth();
    let h = '';
    for (const f of D.faults) {
      if (!inView(f.start, f.end)) continue;
      const a = Math.max(0, x(f.start));
      const b = Math.min(w, x(f.end));
      h += '<div class="band" style="left:' + (NAME_W + a).toFixed(1) + 'px;width:' + Math.max(2, b - a).toFixed(1) + 'px;top:' + top + 'px;height:' + height + 'px"></div>';
    }
    markSpan.forEach((s) => {
      if (!s || !inView(s[0], s[0])) return;
      h += '<div class="vline" style="left:' + (NAME_W + x(s[0])).toFixed(1) + 'px;top:' + top + 'px;height:' + height + 'px"></div>';
    });
    return h;
  }

  function render() {
    const stats = { rows: 0, folded: 0, ops: 0, lanes: 0, spans: 0, labels: 0, marks: 0 };
    let h = axis() + faultLanes(stats);
    const folded = [];
    let rows = '';
    for (const r of D.rows) {
      const ops = r.ops.filter((op) => inView(op[0], op[1]));
      if (!ops.length && !view.showFolded) { folded.push(r.name); continue; }
      stats.rows += 1;
      rows += rowHtml(r, ops, stats);
    }
    stats.folded = folded.length;
    h += '<div id="rows">' + rows + '</div>';
    if (folded.length) {
      h += '<div class="folded">' + folded.length + ' row(s) with no operation in view folded: ' + esc(folded.slice(0, 12).join(', ')) + (folded.length > 12 ? ', ...' : '') + ' <button id="unfold">show them</button></div>';
    } else if (view.showFolded) {
      h += '<div class="folded"><button id="unfold">fold empty rows</button></div>';
    }
    h += '<div id="sel"></div>';
    chart.innerHTML = h;
    const rowsEl = document.getElementById('rows');
    const top = document.getElementById('axis').offsetHeight;
    chart.insertAdjacentHTML('beforeend', overlays(top, rowsEl.offsetTop + rowsEl.offsetHeight - top));
    const unfold = document.getElementById('unfold');
    if (unfold) unfold.onclick = () => { view.showFolded = !view.showFolded; render(); };
    document.getElementById('window').textContent = fmt(view.t0) + ' s to ' + fmt(view.t1) + ' s of ' + fmt(D.tMax) + ' s';
    Object.assign(status.dataset, {
      rows: String(stats.rows), folded: String(stats.folded), ops: String(stats.ops),
      lanes: String(stats.lanes), spans: String(stats.spans), labels: String(stats.labels),
      marks: String(stats.marks), t0: fmt(view.t0), t1: fmt(view.t1),
    });
    const hash = '#t=' + fmt(view.t0) + '-' + fmt(view.t1);
    if (location.hash !== hash) history.replaceState(null, '', hash);
  }

  function zoomTo(t0, t1) {
    const min = 0.002;
    if (t1 - t0 < min) { const m = (t0 + t1) / 2; t0 = m - min / 2; t1 = m + min / 2; }
    view.t0 = Math.max(0, t0);
    view.t1 = Math.min(Math.max(D.tMax, 0.001), t1);
    render();
  }
  function zoomBy(f, at) {
    const c = at === undefined ? (view.t0 + view.t1) / 2 : at;
    zoomTo(c - (c - view.t0) * f, c + (view.t1 - c) * f);
  }
  function toViolation() {
    const s = markSpan.find((m) => m);
    if (!s) return false;
    const pad = Math.max(0.5, (s[1] - s[0]) * 0.25);
    zoomTo(s[0] - pad, s[1] + pad);
    return true;
  }

  document.getElementById('fit').onclick = () => zoomTo(0, D.tMax);
  document.getElementById('zoom-in').onclick = () => zoomBy(0.5);
  document.getElementById('zoom-out').onclick = () => zoomBy(2);
  const vb = document.getElementById('to-violation');
  vb.disabled = !markSpan.some((m) => m);
  vb.onclick = toViolation;
  function timeAt(clientX) {
    const r = chart.getBoundingClientRect();
    return view.t0 + (clientX - r.left - NAME_W) / trackWidth() * (view.t1 - view.t0);
  }
  chart.addEventListener('wheel', (e) => {
    e.preventDefault();
    zoomBy(e.deltaY > 0 ? 1.25 : 0.8, timeAt(e.clientX));
  }, { passive: false });
  let drag = null;
  chart.addEventListener('mousedown', (e) => { drag = e.clientX; });
  window.addEventListener('mousemove', (e) => {
    const sel = document.getElementById('sel');
    if (drag === null || !sel) return;
    const r = chart.getBoundingClientRect();
    sel.style.display = 'block';
    sel.style.left = (Math.min(drag, e.clientX) - r.left) + 'px';
    sel.style.width = Math.abs(e.clientX - drag) + 'px';
  });
  window.addEventListener('mouseup', (e) => {
    if (drag === null) return;
    const a = drag;
    drag = null;
    if (Math.abs(e.clientX - a) > 5) zoomTo(timeAt(Math.min(a, e.clientX)), timeAt(Math.max(a, e.clientX)));
    else { const sel = document.getElementById('sel'); if (sel) sel.style.display = 'none'; }
  });
  window.addEventListener('resize', render);

  let legend = '';
  const used = new Set();
  for (const r of D.rows) for (const op of r.ops) used.add(op[2]);
  [...used].sort().forEach((f) => { legend += '<span class="label"><span class="sw" style="background:' + D.fcolors[f] + '"></span>' + esc(D.fnames[f]) + '</span>'; });
  legend += '<span class="label"><span class="sw op info" style="position:static;display:inline-block;background-color:#1c7ed6"></span>info (unknown)</span>';
  legend += '<span class="label"><span class="sw" style="background:#ffc9c9;outline:1px solid #c92a2a"></span>fail</span>';
  legend += '<span class="label"><span class="sw" style="background:#fa5252;opacity:.6"></span>fault</span>';
  if (D.marks.length) legend += '<span class="label"><span class="sw" style="outline:2px solid #000"></span>named by a violation</span>';
  document.getElementById('legend').innerHTML = legend;

  const m = /t=([0-9.]+)-([0-9.]+)/.exec(location.hash);
  if (/sel=violation/.test(location.hash) && toViolation()) { /* zoomed */ }
  else if (m) zoomTo(parseFloat(m[1]), parseFloat(m[2]));
  else render();
  status.dataset.ready = '1';
})();
