// The run viewer (inlined into the page; no network, no libraries).
//
// The page carries one JSON object (the <script id="data"> element, written by
// sim/src/viewer/mod.rs): numeric columns as little-endian base64, everything else as JSON.
// This script decodes it once, then draws the window of time in view as SVG: every message
// as an arrow when few are in view, per-lane density bins (plus every lost, cut or failed
// message) when many are. State lives in `view`; `render()` redraws from it, and the URL's
// hash mirrors it so a view can be shared (#t=12.5,13.1&tp=test/0&sel=v0).
'use strict';
(function () {
  const status = document.getElementById('status');
  const errors = [];
  function fail(msg) {
    errors.push(String(msg));
    status.dataset.errors = String(errors.length);
    status.dataset.lastError = String(msg);
  }
  window.addEventListener('error', (e) => fail(e.message));
  window.addEventListener('unhandledrejection', (e) => fail(e.reason));
  const started = performance.now();

  // ---- data ---------------------------------------------------------------------------
  const D = JSON.parse(document.getElementById('data').textContent);
  const NONE = 4294967295;
  function bytes(s) {
    const b = atob(s);
    const u = new Uint8Array(b.length);
    for (let i = 0; i < b.length; i++) u[i] = b.charCodeAt(i);
    return u;
  }
  const u8 = (s) => bytes(s);
  const u16 = (s) => new Uint16Array(bytes(s).buffer);
  const u32 = (s) => new Uint32Array(bytes(s).buffer);

  const LOST = 1, PARTITIONED = 2, CUT = 4, DEAD = 8, DUP = 16, ERROR = 32, LATE_TXN = 64;
  const SPECIAL = LOST | PARTITIONED | CUT | DEAD | ERROR | LATE_TXN;
  const M = {
    n: D.msgs.n, sent: u32(D.msgs.sent), recv: u32(D.msgs.recv), from: u8(D.msgs.from),
    to: u8(D.msgs.to), kind: u8(D.msgs.kind), flags: u8(D.msgs.flags), tp: u16(D.msgs.tp),
    a: u32(D.msgs.a), b: u32(D.msgs.b), c: u32(D.msgs.c), text: new Map(D.msgs.text),
    // EndTxn / WriteTxnMarkers that arrived in a later transaction: index -> [sent in, arrived in].
    late: new Map((D.msgs.late || []).map(([i, own, cur]) => [i, [own, cur]])),
  };
  let maxLatency = 0;
  for (let i = 0; i < M.n; i++) maxLatency = Math.max(maxLatency, M.recv[i] - M.sent[i]);
  // What a, b and c mean per message kind (sim/src/viewer/record.rs fills them).
  const MSG_FIELDS = {
    Fetch: ['fetch offset', 'current leader epoch', "follower's HW"],
    FetchResponse: ['leader LEO', 'leader epoch', 'leader HW'],
    Produce: ['records', 'correlation', null],
    ProduceResponse: ['base offset', 'leader epoch', 'correlation'],
    ConsumerFetch: ['offset', 'correlation', 'current leader epoch'],
    ConsumerFetchResponse: ['records', 'HW', 'correlation'],
    WriteTxnMarkers: ['producer id', 'producer epoch', 'coordinator epoch'],
  };
  // The transaction protocol's messages, labelled on their arrows when few are drawn.
  const TXN_KIND = /Txn|InitProducerId|FindCoordinator\(txn\)/;

  const H = D.history;
  const hist = {
    n: H.n, at: u32(H.at), lane: u8(H.lane), kind: u8(H.kind), f: u8(H.f),
    process: u32(H.process), partition: u32(H.partition), a: u32(H.a), b: u32(H.b), text: H.text,
  };
  // Operations: an invoke paired with its process's next completion (docs/history.md).
  const ops = [];
  {
    const open = new Map();
    for (let i = 0; i < hist.n; i++) {
      const p = hist.process[i];
      if (hist.kind[i] === 0) {
        open.set(p, ops.length);
        ops.push({ lane: hist.lane[i], process: p, f: H.fs[hist.f[i]], start: hist.at[i], end: D.end, result: 'open', inv: i, done: -1 });
      } else if (open.has(p)) {
        const o = ops[open.get(p)];
        o.end = Math.max(hist.at[i], o.start);
        o.result = ['invoke', 'ok', 'fail', 'info'][hist.kind[i]];
        o.done = i;
        open.delete(p);
      } else {
        ops.push({ lane: hist.lane[i], process: p, f: H.fs[hist.f[i]], start: hist.at[i], end: hist.at[i], result: ['invoke', 'ok', 'fail', 'info'][hist.kind[i]], inv: -1, done: i });
      }
    }
    ops.sort((x, y) => x.start - y.start);
  }
  const opsMaxLen = ops.reduce((m, o) => Math.max(m, o.end - o.start), 0);

  // Spans on lanes: processes down, pauses, faults with a duration, partitions.
  const spans = [];
  {
    const downSince = new Map();
    for (const [t, lane, up] of D.procs) {
      if (!up) downSince.set(lane, t);
      else if (downSince.has(lane)) {
        spans.push({ cls: 'down', lane, from: downSince.get(lane), to: t, text: 'process down' });
        downSince.delete(lane);
      }
    }
    for (const [lane, t] of downSince) spans.push({ cls: 'down', lane, from: t, to: D.end, text: 'process down' });
    for (const [t, lane, d] of D.pauses) spans.push({ cls: 'client-pause', lane, from: t, to: t + d, text: 'client paused' });
    const heals = D.faults.filter((f) => f[1] === 'heal').map((f) => f[0]);
    if (D.finalHeal != null) heals.push(D.finalHeal);
    heals.sort((x, y) => x - y);
    D.faults.forEach((f, i) => {
      const [t, name, lanes, end] = f;
      if (name === 'partition') return; // drawn from the cut links below
      if (end == null) return;
      const cls = ['read-errors', 'disk-full', 'slow-disk'].includes(name) ? 'disk' : name;
      for (const lane of lanes) spans.push({ cls, lane, from: t, to: end, text: name, fault: i });
    });
    D.partitions.forEach(([t, pairs]) => {
      const fi = D.faults.findIndex((f) => f[1] === 'partition' && f[0] === t);
      let end = fi >= 0 ? D.faults[fi][3] : null;
      if (end == null) end = heals.find((h) => h > t);
      if (end == null) end = D.end;
      // Shade the side that is cut off: the lanes that lost the most links (an isolated
      // node, or both sides of an even split).
      const degree = new Map();
      for (const [a, b] of pairs) { degree.set(a, (degree.get(a) || 0) + 1); degree.set(b, (degree.get(b) || 0) + 1); }
      const most = Math.max(0, ...degree.values());
      const lanes = [...degree].filter(([, d]) => d === most).map(([l]) => l);
      const text = 'cut: ' + pairs.filter(([a, b]) => a < b).map(([a, b]) => D.lanes[a].name + ' | ' + D.lanes[b].name).join(', ');
      for (const lane of lanes) spans.push({ cls: 'partition', lane, from: t, to: end, text, fault: fi });
    });
  }
  const instantFaults = D.faults.map((f, i) => ({ i, at: f[0], name: f[1], lanes: f[2], end: f[3], text: f[4] }));

  // Replica states per partition: decoded on first use.
  const replicaCache = new Map();
  function replicasOf(tp) {
    if (replicaCache.has(tp)) return replicaCache.get(tp);
    const rows = D.replicas.filter((r) => r.tp === tp).map((r) => {
      const c = r.cols.map(u32);
      return { node: r.node, t: c[0], role: c[1], epoch: c[2], leo: c[3], hw: c[4], flushed: c[5], isr: c[6], maxIsr: c[7], lso: c[8] || c[4] };
    });
    rows.sort((x, y) => x.node - y.node);
    replicaCache.set(tp, rows);
    return rows;
  }
  const ROLES = ['follower', 'leader', 'offline', 'down'];
  function isrText(mask) {
    const out = [];
    for (let b = 0; b < 32; b++) if (mask & (1 << b)) out.push(b);
    return '{' + out.join(',') + '}';
  }

  // Transactions (sim/src/viewer/record.rs): each transactional id's coordinator states as
  // spans (a state lasts until the id's next one), and the markers partition leaders
  // appended, with what each closed and whose transaction it was.
  const TX = D.txns || { ids: [], stateNames: [], states: [], markers: [] };
  const txnSpans = [];
  {
    const lastOf = new Map();
    TX.states.forEach((s, i) => {
      const [t, id] = s;
      if (lastOf.has(id)) txnSpans[lastOf.get(id)].to = t;
      lastOf.set(id, txnSpans.length);
      txnSpans.push({ i, id, from: t, to: D.end, state: TX.stateNames[s[2]], pid: s[3], epoch: s[4], node: s[5], cepoch: s[6], number: s[7], parts: s[8] });
    });
  }
  const MARKER_OWN = 0, MARKER_LATE = 1, MARKER_WRONG = 2;
  const markers = TX.markers.map((m, i) => ({ i, at: m[0], tp: m[1], node: m[2], offset: m[3], commit: m[4], pid: m[5], epoch: m[6], partEpoch: m[7], cepoch: m[8], closedFrom: m[9], sent: m[10], id: m[11], own: m[12], current: m[13], verdict: m[14] }));
  const wrongMarkers = markers.filter((m) => m.verdict === MARKER_WRONG);
  const TXN_COLORS = { Empty: '#d1d5db', Ongoing: '#3b82f6', PrepareCommit: '#86efac', CompleteCommit: '#16a34a', PrepareAbort: '#fca5a5', CompleteAbort: '#dc2626', PrepareEpochFence: '#f59e0b', Dead: '#111827' };
  const txnDark = (st) => ['Empty', 'PrepareCommit', 'PrepareAbort'].includes(st);
  // The span of transaction `number` of id `id` in state `state` (or any state), if recorded.
  const txnSpanOf = (id, number, pred) => txnSpans.find((sp) => sp.id === id && sp.number === number && (!pred || pred(sp)));
  function markerTitle(m) {
    const what = (m.commit ? 'COMMIT' : 'ABORT') + ` marker at ${D.tps[m.tp]} offset ${m.offset}, producer ${m.pid} epoch ${m.epoch}`;
    if (m.verdict === MARKER_WRONG) return what + ` — LANDED ON A LATER TRANSACTION: sent for T#${m.own}, closed T#${m.current}'s records from offset ${m.closedFrom}`;
    if (m.verdict === MARKER_LATE) return what + ` — late (T#${m.own} was over), closed nothing`;
    return what;
  }

  // ---- view state ---------------------------------------------------------------------
  const view = { t0: 0, t1: Math.max(D.end, 1), tp: 0, onlyTp: false, hiddenKinds: new Set(), hiddenLanes: new Set(), sel: null };
  const LABEL_W = 118, RIGHT = 12, AXIS_H = 26;
  const laneH = (l) => (['controller', 'broker'].includes(D.lanes[l].role) ? 30 : 22);

  // ---- formatting ---------------------------------------------------------------------
  function fmtT(us) {
    if (us == null || us === NONE) return '-';
    return (us / 1e6).toFixed(6).replace(/(\d{3})(\d{3})$/, '$1 $2') + ' s';
  }
  function fmtDur(us) {
    if (us < 1000) return us + ' µs';
    if (us < 1e6) return (us / 1000).toFixed(us < 1e4 ? 2 : 1) + ' ms';
    return (us / 1e6).toFixed(3) + ' s';
  }
  const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
  const num = (v) => (v === NONE ? '-' : String(v));
  const PALETTE = ['#2563eb', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#be185d', '#4d7c0f', '#b91c1c', '#1e40af', '#a16207', '#0f766e', '#6d28d9', '#c2410c', '#334155', '#15803d', '#7e22ce'];
  const kindColor = (k) => PALETTE[k % PALETTE.length];
  const nodeColor = (n) => PALETTE[(n * 3) % PALETTE.length];

  // ---- layout -------------------------------------------------------------------------
  let layout = null;
  function computeLayout() {
    const width = Math.max(600, document.getElementById('diagram-box').clientWidth || 1000);
    const y = new Map();
    let top = AXIS_H;
    D.lanes.forEach((l, i) => {
      if (view.hiddenLanes.has(i)) return;
      y.set(i, { top, mid: top + laneH(i) / 2, h: laneH(i) });
      top += laneH(i);
    });
    layout = { width, height: top + 6, y };
  }
  const X = (t) => LABEL_W + ((t - view.t0) / (view.t1 - view.t0)) * (layout.width - LABEL_W - RIGHT);
  const T = (x) => view.t0 + ((x - LABEL_W) / (layout.width - LABEL_W - RIGHT)) * (view.t1 - view.t0);
  const clampX = (x) => Math.max(LABEL_W, Math.min(layout.width - RIGHT, x));

  function lowerBound(arr, v, n) {
    let lo = 0, hi = n;
    while (lo < hi) { const m = (lo + hi) >> 1; if (arr[m] < v) lo = m + 1; else hi = m; }
    return lo;
  }

  function msgVisible(i) {
    if (view.hiddenKinds.has(M.kind[i])) return false;
    if (!layout.y.has(M.from[i]) || !layout.y.has(M.to[i])) return false;
    if (view.onlyTp && M.tp[i] !== view.tp) return false;
    return true;
  }

  // ---- the space-time diagram ---------------------------------------------------------
  const DETAIL_LIMIT = 2500;
  const SPECIAL_LIMIT = 300;
  const OP_LIMIT = 3000;
  function axis(out, width, height) {
    const span = view.t1 - view.t0;
    const steps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 2e7, 6e7];
    const step = steps.find((s) => span / s <= (width - LABEL_W) / 90) || 6e7;
    out.push('<g class="axis">');
    for (let t = Math.ceil(view.t0 / step) * step; t <= view.t1; t += step) {
      const x = X(t);
      out.push(`<line x1="${x}" y1="${AXIS_H - 4}" x2="${x}" y2="${height}"/><text x="${x + 2}" y="12">${esc(step >= 1e6 ? (t / 1e6) + ' s' : step >= 1e3 ? (t / 1e3) + ' ms' : t + ' µs')}</text>`);
    }
    out.push('</g>');
  }

  function renderDiagram() {
    const { width, height, y } = layout;
    const out = [];
    out.push(`<svg xmlns="http://www.w3.org/2000/svg" id="diagram" width="${width}" height="${height}">`);
    out.push('<defs><marker id="arrow" viewBox="0 0 6 6" refX="6" refY="3" markerWidth="5" markerHeight="5" orient="auto-start-reverse"><path d="M0,0 L6,3 L0,6 z" fill="context-stroke"/></marker>' +
      '<pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#7c3aed" opacity=".08"/><line x1="0" y1="0" x2="0" y2="6" stroke="#7c3aed" stroke-width="2" opacity=".35"/></pattern>' +
      `<clipPath id="plot"><rect x="${LABEL_W}" y="0" width="${width - LABEL_W - RIGHT}" height="${height}"/></clipPath></defs>`);
    let alt = false;
    for (const [i, l] of y) {
      const lane = D.lanes[i];
      out.push(`<g class="lane" data-lane="${i}" data-role="${lane.role}"><rect class="lane-bg${alt ? ' alt' : ''}" x="0" y="${l.top}" width="${width}" height="${l.h}"/>` +
        `<text class="lane-label ${lane.role}" x="6" y="${l.mid}">${esc(lane.name)}</text></g>`);
      alt = !alt;
    }
    axis(out, width, height);
    out.push('<g clip-path="url(#plot)">');
    // Spans: processes down, pauses, faults with durations, partitions.
    let drawnSpans = 0;
    spans.forEach((s, si) => {
      if (s.to < view.t0 || s.from > view.t1 || !y.has(s.lane)) return;
      const l = y.get(s.lane);
      const x1 = clampX(X(s.from)), x2 = clampX(X(s.to));
      out.push(`<rect class="fault ${s.cls === 'down' ? 'down' : s.cls}" data-span="${si}" x="${x1}" y="${l.top + 1}" width="${Math.max(1, x2 - x1)}" height="${l.h - 2}"><title>${esc(s.text)}</title></rect>`);
      drawnSpans++;
    });
    // History operations on the client lanes, one sub-row per process; when too many are in
    // view, one bin per 3 px per lane coloured by its worst outcome (fail, info, ok).
    let drawnOps = 0;
    const oLo = lowerBoundBy(ops, view.t0 - opsMaxLen, (o) => o.start);
    const inView = [];
    for (let k = oLo; k < ops.length && ops[k].start <= view.t1; k++) {
      const o = ops[k];
      if (o.end >= view.t0 && y.has(o.lane)) inView.push(k);
    }
    const OP_ROWS = 6;
    if (inView.length <= OP_LIMIT) {
      for (const k of inView) {
        const o = ops[k], l = y.get(o.lane);
        const row = (o.process % 1000) % OP_ROWS;
        const h = (l.h - 4) / OP_ROWS;
        const x1 = clampX(X(o.start)), x2 = clampX(X(o.end));
        out.push(`<rect class="op ${o.result}" data-op="${k}" x="${x1}" y="${l.top + 2 + row * h}" width="${Math.max(1.5, x2 - x1)}" height="${Math.max(1, h - 0.5)}"/>`);
        drawnOps++;
      }
    } else {
      const RANK = { ok: 1, open: 2, info: 3, fail: 4 };
      const bins = new Map();
      for (const k of inView) {
        const o = ops[k];
        const key = o.lane * 100000 + Math.floor(clampX(X(o.start)) / 3);
        const b = bins.get(key);
        if (!b) bins.set(key, { k, n: 1 }); else { b.n++; if (RANK[o.result] > RANK[ops[b.k].result]) b.k = k; }
      }
      for (const [key, b] of bins) {
        const l = y.get(Math.floor(key / 100000));
        out.push(`<rect class="op ${ops[b.k].result}" data-op="${b.k}" x="${(key % 100000) * 3}" y="${l.top + 3}" width="3" height="${l.h - 6}"><title>${b.n} operations</title></rect>`);
        drawnOps++;
      }
    }
    // Messages.
    const lo = lowerBound(M.sent, view.t0 - maxLatency, M.n);
    const hi = lowerBound(M.sent, view.t1 + 1, M.n);
    const vis = [];
    for (let i = lo; i < hi; i++) {
      if (M.recv[i] < view.t0) continue;
      if (msgVisible(i)) vis.push(i);
    }
    let mode, drawn = 0;
    const drawMsg = (i) => {
      const f = M.flags[i];
      const a = y.get(M.from[i]), b = y.get(M.to[i]);
      const x1 = X(M.sent[i]);
      let cls = 'msg';
      if (f & LOST) cls += ' lost'; if (f & PARTITIONED) cls += ' partitioned'; if (f & CUT) cls += ' cut';
      if (f & DEAD) cls += ' dead'; if (f & DUP) cls += ' dup'; if (f & ERROR) cls += ' error'; if (f & LATE_TXN) cls += ' late-txn';
      if (view.sel && view.sel.type === 'm' && view.sel.i === i) cls += ' selected';
      const color = kindColor(M.kind[i]);
      if (f & (LOST | PARTITIONED)) {
        // Dropped at the sender: a short stub towards the destination, ended by a cross.
        const dx = 10, dy = (b.mid - a.mid) * 0.25;
        const x2 = x1 + dx, y2 = a.mid + dy;
        out.push(`<line class="${cls}" data-m="${i}" x1="${x1}" y1="${a.mid}" x2="${x2}" y2="${y2}" stroke="${color}"/>` +
          `<path class="lost-x" d="M${x2 - 3},${y2 - 3}L${x2 + 3},${y2 + 3}M${x2 - 3},${y2 + 3}L${x2 + 3},${y2 - 3}"/>`);
      } else {
        out.push(`<line class="${cls}" data-m="${i}" x1="${x1}" y1="${a.mid}" x2="${X(M.recv[i])}" y2="${b.mid}" stroke="${color}" marker-end="url(#arrow)"/>`);
      }
      drawn++;
    };
    if (vis.length <= DETAIL_LIMIT) {
      mode = 'detail';
      for (const i of vis) drawMsg(i);
      // The transaction protocol's requests named on their arrows, when they can be read.
      const txnMsgs = vis.filter((i) => TXN_KIND.test(D.kinds[M.kind[i]]) && !(M.flags[i] & (LOST | PARTITIONED)));
      if (txnMsgs.length <= 150) {
        // Requests only (an answer reads off its request), and none over another label.
        const placed = [];
        for (const i of txnMsgs) {
          let label = D.kinds[M.kind[i]];
          if (label.endsWith('Response')) continue;
          const a = y.get(M.from[i]), b = y.get(M.to[i]);
          if (label === 'WriteTxnMarkers') label += ` ${(M.text.get(i) || '').toLowerCase()} e${M.b[i]}`;
          const x = (X(M.sent[i]) + X(M.recv[i])) / 2 + 2, ym = (a.mid + b.mid) / 2;
          const w = label.length * 5;
          if (placed.some(([px, py, pw]) => Math.abs(py - ym) < 10 && x < px + pw && px < x + w)) continue;
          placed.push([x, ym, w]);
          out.push(`<text class="msg-label" x="${x}" y="${ym}">${esc(label)}</text>`);
        }
      }
    } else {
      // Too many to draw one by one: message density per sending lane in 3 px bins,
      // darker where more is sent; every lost, cut or failed message is still drawn.
      mode = 'aggregate';
      const BIN = 3;
      const specials = vis.filter((i) => M.flags[i] & SPECIAL);
      const drawSpecials = specials.length <= SPECIAL_LIMIT;
      const bins = new Map();
      const bad = new Map();
      for (const i of vis) {
        const key = M.from[i] * 100000 + Math.floor(X(M.sent[i]) / BIN);
        if (M.flags[i] & SPECIAL) {
          if (!drawSpecials) bad.set(key, (bad.get(key) || 0) | M.flags[i]);
          continue;
        }
        bins.set(key, (bins.get(key) || 0) + 1);
      }
      let maxBin = 1;
      for (const v of bins.values()) maxBin = Math.max(maxBin, v);
      for (const [key, count] of bins) {
        const l = y.get(Math.floor(key / 100000)), bx = (key % 100000) * BIN;
        const op = (0.15 + 0.85 * Math.sqrt(count / maxBin)).toFixed(2);
        out.push(`<rect class="bin" x="${bx}" y="${l.mid - 3}" width="${BIN}" height="6" fill="#475569" fill-opacity="${op}"><title>${count} messages sent</title></rect>`);
      }
      // Lost, cut and failed messages: a mark above the lane per bin where any was sent.
      for (const [key, f] of bad) {
        const l = y.get(Math.floor(key / 100000)), bx = (key % 100000) * BIN;
        const color = f & (LOST | LATE_TXN) ? '#c0262d' : f & (PARTITIONED | CUT) ? '#7c3aed' : f & ERROR ? '#d97706' : '#555';
        out.push(`<rect class="bin bad" x="${bx}" y="${l.top + 2}" width="${BIN}" height="4" fill="${color}"/>`);
      }
      if (drawSpecials) for (const i of specials) drawMsg(i);
    }
    // Instant faults: a triangle on each lane they strike.
    let drawnMarks = 0;
    for (const f of instantFaults) {
      if (f.at < view.t0 || f.at > view.t1) continue;
      const x = X(f.at);
      const lanes = f.lanes.filter((l) => y.has(l));
      if (lanes.length === 0) lanes.push(-1);
      for (const lane of lanes) {
        const top = lane >= 0 ? y.get(lane).top : AXIS_H;
        out.push(`<path class="fault-mark ${esc(f.name)}" data-fault="${f.i}" d="M${x - 5},${top} L${x + 5},${top} L${x},${top + 9} z"><title>${esc(f.name)}</title></path>`);
        drawnMarks++;
      }
    }
    // Broker and controller events.
    const notesInView = [];
    D.notes.forEach((n, i) => { if (n[0] >= view.t0 && n[0] <= view.t1 && y.has(n[1])) notesInView.push(i); });
    const labelNotes = notesInView.length <= 80;
    const lastNoteLabel = new Map();
    notesInView.forEach((idx) => {
      const n = D.notes[idx];
      const x = X(n[0]), l = y.get(n[1]);
      const yb = l.top + l.h - 5;
      out.push(`<path class="note" data-note="${idx}" fill="${noteColor(n[2])}" d="M${x},${yb - 5} L${x + 4},${yb} L${x},${yb + 5} L${x - 4},${yb} z"><title>${esc(n[2])}</title></path>`);
      if (labelNotes && x - (lastNoteLabel.get(n[1]) || -1e9) > 60) {
        lastNoteLabel.set(n[1], x);
        out.push(`<text class="note-label" x="${x + 5}" y="${yb - 2}">${esc(noteLabel(n))}</text>`);
      }
    });
    // Final heal and violations across every lane.
    if (D.finalHeal != null && D.finalHeal >= view.t0 && D.finalHeal <= view.t1) {
      const x = X(D.finalHeal);
      out.push(`<g class="final-heal"><line x1="${x}" y1="${AXIS_H}" x2="${x}" y2="${height}"/><text x="${x + 3}" y="${AXIS_H - 2}">final heal</text></g>`);
    }
    let lastLabel = -1e9;
    D.violations.forEach((v, vi) => {
      if (v[0] < view.t0 || v[0] > view.t1) return;
      const x = X(v[0]);
      const label = x - lastLabel > 140 ? `<text x="${x + 3}" y="${AXIS_H + 12}">${esc(v[1])}</text>` : '';
      if (label) lastLabel = x;
      out.push(`<g class="violation" data-violation="${vi}"><line x1="${x}" y1="${AXIS_H}" x2="${x}" y2="${height}"/>${label}<title>${esc(v[1] + ': ' + v[2])}</title></g>`);
    });
    if (view.sel) {
      const t = selTime(view.sel);
      if (t != null && t >= view.t0 && t <= view.t1) out.push(`<line class="cursor" x1="${X(t)}" y1="${AXIS_H}" x2="${X(t)}" y2="${height}"/>`);
    }
    out.push('</g></svg>');
    document.getElementById('diagram-box').innerHTML = out.join('');
    rebindDiagram();
    const modeText = mode === 'detail'
      ? `${vis.length} messages in view, each drawn as an arrow`
      : `${vis.length} messages in view: density per sending lane (zoom in below ${DETAIL_LIMIT} to see arrows); lost, cut and failed ones drawn`;
    document.getElementById('mode').textContent = modeText + ` · ${drawnOps} operations · ${drawnSpans} fault spans · ${drawnMarks} fault marks`;
    Object.assign(status.dataset, { mode, visibleMsgs: String(vis.length), drawnMsgs: String(drawn), drawnOps: String(drawnOps), drawnSpans: String(drawnSpans), drawnMarks: String(drawnMarks) });
  }
  function lowerBoundBy(arr, v, key) {
    let lo = 0, hi = arr.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (key(arr[m]) < v) lo = m + 1; else hi = m; }
    return lo;
  }
  const NOTE_COLORS = { BecameLeader: '#2563eb', BecameFollower: '#93c5fd', Truncated: '#d97706', TruncatedBelowHW: '#c0262d', IsrProposed: '#a855f7', IsrConfirmed: '#7c3aed', LogError: '#ef4444', LogFailed: '#c0262d', LogRecovered: '#16a34a', LeaderChanged: '#2563eb', UncleanLeaderElection: '#c0262d', BrokerFenced: '#6b7280', BrokerUnfenced: '#16a34a' };
  const noteColor = (w) => NOTE_COLORS[w] || '#64748b';
  function noteLabel(n) {
    const m = /epoch:? (\d+)/.exec(n[3]);
    const short = { BecameLeader: 'leader', BecameFollower: 'follower', IsrConfirmed: 'isr', IsrProposed: 'isr?', Truncated: 'truncate', LeaderChanged: 'elect' }[n[2]] || n[2];
    return short + (m ? ' e' + m[1] : '');
  }

  // ---- the transactions panel ---------------------------------------------------------
  // One row per transactional id: its coordinator's durable state as coloured spans
  // (labelled T#n and the producer epoch), and below them the markers partition leaders
  // appended for its producer id (up: commit, down: abort; outlined with "!" when the
  // marker closed a later transaction's records than its own).
  function renderTxns() {
    const box = document.getElementById('txns-box');
    if (!TX.ids.length) { box.innerHTML = ''; return; }
    const width = layout.width, ROW = 18, TICKS = 12, TOP = 22;
    const height = TOP + TX.ids.length * (ROW + TICKS + 4) + 4;
    const out = [`<svg xmlns="http://www.w3.org/2000/svg" id="txns" width="${width}" height="${height}">`];
    out.push(`<defs><clipPath id="plot3"><rect x="${LABEL_W}" y="0" width="${width - LABEL_W - RIGHT}" height="${height}"/></clipPath></defs>`);
    out.push(`<text class="chart-label" x="6" y="14">transactions: coordinator state per transactional id (T#n = its n-th transaction, e = producer epoch); markers appended below (▲ commit, ▼ abort, ! = landed on a later transaction)</text>`);
    let drawnStates = 0, drawnMarkers = 0;
    const seen = new Set();
    TX.ids.forEach((name, id) => {
      const y0 = TOP + id * (ROW + TICKS + 4);
      out.push(`<g class="txn-row" data-txn-id="${esc(name)}"><text class="lane-label" x="6" y="${y0 + ROW / 2}">${esc(name)}</text></g>`);
      out.push('<g clip-path="url(#plot3)">');
      for (let k = 0; k < txnSpans.length; k++) {
        const sp = txnSpans[k];
        if (sp.id !== id || sp.to < view.t0 || sp.from > view.t1) continue;
        const x1 = clampX(X(sp.from)), x2 = clampX(X(sp.to));
        const sel = view.sel && view.sel.type === 'x' && view.sel.i === k ? ' selected' : '';
        out.push(`<rect class="txn-state${sel}" data-txn="${k}" data-state="${sp.state}" x="${x1}" y="${y0}" width="${Math.max(1, x2 - x1)}" height="${ROW}" fill="${TXN_COLORS[sp.state] || '#999'}"><title>${esc(`${name}: ${sp.state} T#${sp.number} pid ${sp.pid} e${sp.epoch}`)}</title></rect>`);
        if (x2 - x1 > 46) out.push(`<text class="txn-label${txnDark(sp.state) ? ' dark' : ''}" x="${x1 + 3}" y="${y0 + ROW / 2}">${esc((x2 - x1 > 120 ? sp.state + ' ' : '') + 'T#' + sp.number + ' e' + sp.epoch)}</text>`);
        seen.add(sp.state);
        drawnStates++;
      }
      const ty = y0 + ROW + 2;
      for (const m of markers) {
        if (m.id !== id || m.at < view.t0 || m.at > view.t1) continue;
        const x = X(m.at);
        const cls = `txn-marker ${m.commit ? 'commit' : 'abort'}${m.verdict === MARKER_LATE ? ' late' : ''}${m.verdict === MARKER_WRONG ? ' wrong' : ''}${view.sel && view.sel.type === 'k' && view.sel.i === m.i ? ' selected' : ''}`;
        const d = m.commit ? `M${x - 4},${ty + TICKS - 2} L${x + 4},${ty + TICKS - 2} L${x},${ty} z` : `M${x - 4},${ty} L${x + 4},${ty} L${x},${ty + TICKS - 2} z`;
        out.push(`<path class="${cls}" data-marker="${m.i}" d="${d}"><title>${esc(markerTitle(m))}</title></path>`);
        if (m.verdict === MARKER_WRONG) out.push(`<text class="wrong-label" x="${x + 5}" y="${ty + TICKS - 2}">! T#${m.own}→T#${m.current}</text>`);
        drawnMarkers++;
      }
      out.push('</g>');
    });
    out.push('</svg>');
    box.innerHTML = out.join('');
    document.getElementById('txns').addEventListener('click', (e) => {
      const el = e.target.closest('[data-txn],[data-marker]');
      if (!el) return;
      if (el.dataset.txn) select({ type: 'x', i: +el.dataset.txn }); else select({ type: 'k', i: +el.dataset.marker });
    });
    Object.assign(status.dataset, { txnIds: String(TX.ids.length), txnStatesDrawn: String(drawnStates), txnStatesSeen: [...seen].sort().join(','), markersDrawn: String(drawnMarkers), wrongMarkers: String(wrongMarkers.length) });
  }

  // ---- the partition panel ------------------------------------------------------------
  function renderReplicas() {
    const width = layout.width;
    const rows = replicasOf(view.tp);
    const ROW = 20, CHART = 150, TOP = 22;
    const height = TOP + rows.length * (ROW + 2) + CHART + 30;
    const out = [`<svg xmlns="http://www.w3.org/2000/svg" id="replicas" width="${width}" height="${height}">`];
    out.push(`<defs><clipPath id="plot2"><rect x="${LABEL_W}" y="0" width="${width - LABEL_W - RIGHT}" height="${height}"/></clipPath></defs>`);
    out.push(`<text class="chart-label" x="6" y="14">partition ${esc(D.tps[view.tp] || '?')}: leader, epoch, ISR (above${TX.ids.length ? "; markers as ticks on their leader's band" : ''}); HW solid, LEO dashed${TX.ids.length ? ', LSO dotted (leaders)' : ''}, per replica (below)</text>`);
    let lo = Infinity, hi = -Infinity;
    rows.forEach((r, ri) => {
      const y0 = TOP + ri * (ROW + 2);
      out.push(`<text class="lane-label" x="6" y="${y0 + ROW / 2}">broker ${r.node}</text>`);
      out.push('<g clip-path="url(#plot2)">');
      const n = r.t.length;
      const start = Math.max(0, lowerBound(r.t, view.t0, n) - 1);
      for (let k = start; k < n && r.t[k] <= view.t1; k++) {
        const t1 = k + 1 < n ? r.t[k + 1] : D.end;
        const x1 = clampX(X(r.t[k])), x2 = clampX(X(t1));
        const role = ROLES[r.role[k] & 0xff] || 'follower';
        if (x2 - x1 >= 0.5 || k === start) {
          out.push(`<rect class="band ${role}" data-rep="${ri}:${k}" x="${x1}" y="${y0}" width="${Math.max(1, x2 - x1)}" height="${ROW}"/>`);
          if (x2 - x1 > 70) {
            const label = role === 'leader' ? `leader e${r.epoch[k]} isr ${isrText(r.isr[k])}` : role === 'follower' ? `follows ${r.role[k] >> 8} e${r.epoch[k]}` : role;
            out.push(`<text class="band-label${role === 'follower' ? ' dark' : ''}" x="${x1 + 3}" y="${y0 + ROW / 2}">${esc(label)}</text>`);
          }
        }
        if (r.role[k] % 256 < 2) {
          if (r.hw[k] !== NONE) { lo = Math.min(lo, r.hw[k]); hi = Math.max(hi, r.hw[k]); }
          if (r.leo[k] !== NONE) { lo = Math.min(lo, r.leo[k]); hi = Math.max(hi, r.leo[k]); }
          if (TX.ids.length && r.role[k] % 256 === 1 && r.lso[k] !== NONE) lo = Math.min(lo, r.lso[k]);
        }
      }
      // Markers this replica appended as leader: a tick across its band.
      for (const m of markers) {
        if (m.tp !== view.tp || m.node !== r.node || m.at < view.t0 || m.at > view.t1) continue;
        const x = X(m.at);
        const cls = `txn-marker ${m.commit ? 'commit' : 'abort'}${m.verdict === MARKER_WRONG ? ' wrong' : ''}${view.sel && view.sel.type === 'k' && view.sel.i === m.i ? ' selected' : ''}`;
        out.push(`<rect class="${cls}" data-marker="${m.i}" x="${x - 1.5}" y="${y0 - 1}" width="3" height="${ROW + 2}"><title>${esc(markerTitle(m))}</title></rect>`);
        if (m.verdict === MARKER_WRONG) out.push(`<text class="wrong-label" x="${x + 3}" y="${y0 + ROW - 3}">!</text>`);
      }
      out.push('</g>');
    });
    const cy = TOP + rows.length * (ROW + 2) + 8;
    out.push(`<rect class="chart-bg" x="${LABEL_W}" y="${cy}" width="${width - LABEL_W - RIGHT}" height="${CHART}"/>`);
    if (lo === Infinity) { lo = 0; hi = 1; }
    if (hi === lo) hi = lo + 1;
    const Y = (v) => cy + CHART - ((v - lo) / (hi - lo)) * (CHART - 8) - 4;
    out.push(`<text class="chart-label" x="6" y="${cy + 10}">offset ${hi}</text><text class="chart-label" x="6" y="${cy + CHART}">offset ${lo}</text>`);
    out.push('<g clip-path="url(#plot2)">');
    rows.forEach((r) => {
      // The LSO only in runs with transactions (elsewhere it is the HW).
      const lines = TX.ids.length ? [[r.hw, 'hw'], [r.leo, 'leo'], [r.lso, 'lso']] : [[r.hw, 'hw'], [r.leo, 'leo']];
      for (const [col, cls] of lines) {
        const pts = [];
        const n = r.t.length;
        const start = Math.max(0, lowerBound(r.t, view.t0, n) - 1);
        let lastX = -1;
        for (let k = start; k < n && r.t[k] <= view.t1; k++) {
          // The LSO is the leader's (readers read there); a follower's would only repeat its HW.
          const off = (r.role[k] & 0xff) >= 2 || (cls === 'lso' && (r.role[k] & 0xff) !== 1);
          if (col[k] === NONE || off) { if (pts.length) { emit(pts, cls, r.node); pts.length = 0; } continue; }
          const x = clampX(X(r.t[k]));
          const yv = Y(col[k]).toFixed(1);
          if (pts.length) pts.push(`${x.toFixed(1)},${pts[pts.length - 1].split(',')[1]}`);
          if (x - lastX >= 0.5 || k + 1 >= n || r.t[k + 1] > view.t1) { pts.push(`${x.toFixed(1)},${yv}`); lastX = x; } else pts[pts.length - 1] = `${x.toFixed(1)},${yv}`;
        }
        if (pts.length) {
          pts.push(`${clampX(X(Math.min(view.t1, D.end))).toFixed(1)},${pts[pts.length - 1].split(',')[1]}`);
          emit(pts, cls, r.node);
        }
      }
    });
    function emit(pts, cls, node) { out.push(`<polyline class="${cls}" stroke="${nodeColor(node)}" points="${pts.join(' ')}"/>`); }
    // Markers at their offset, where the leader's LEO steps over them.
    for (const m of markers) {
      if (m.tp !== view.tp || m.at < view.t0 || m.at > view.t1 || m.offset < lo || m.offset > hi) continue;
      const x = X(m.at), yv = Y(m.offset);
      out.push(`<path class="txn-marker ${m.commit ? 'commit' : 'abort'}${m.verdict === MARKER_WRONG ? ' wrong' : ''}" data-marker="${m.i}" d="M${x},${yv - 5} L${x + 4},${yv} L${x},${yv + 5} L${x - 4},${yv} z"><title>${esc(markerTitle(m))}</title></path>`);
    }
    out.push('</g>');
    let lx = LABEL_W;
    rows.forEach((r) => {
      out.push(`<line x1="${lx}" y1="${cy + CHART + 16}" x2="${lx + 18}" y2="${cy + CHART + 16}" stroke="${nodeColor(r.node)}" stroke-width="2"/><text class="chart-label" x="${lx + 22}" y="${cy + CHART + 20}">broker ${r.node}</text>`);
      lx += 90;
    });
    out.push('</svg>');
    document.getElementById('replicas-box').innerHTML = out.join('');
    document.getElementById('replicas').addEventListener('click', (e) => {
      const mk = e.target.closest('[data-marker]');
      if (mk) { select({ type: 'k', i: +mk.dataset.marker }); return; }
      const el = e.target.closest('[data-rep]');
      if (el) { const [ri, k] = el.dataset.rep.split(':').map(Number); select({ type: 'r', tp: view.tp, ri, k }); }
    });
  }

  // ---- selection and details ----------------------------------------------------------
  function selTime(s) {
    switch (s.type) {
      case 'm': return M.sent[s.i];
      case 'f': return D.faults[s.i][0];
      case 'n': return D.notes[s.i][0];
      case 'o': return ops[s.i].start;
      case 'v': return D.violations[s.i][0];
      case 's': return spans[s.i].from;
      case 'r': return replicasOf(s.tp)[s.ri].t[s.k];
      case 'k': return markers[s.i].at;
      case 'x': return txnSpans[s.i].from;
      default: return null;
    }
  }
  function row(k, v) { return `<tr><td>${esc(k)}</td><td>${esc(v)}</td></tr>`; }
  function showDetails() {
    const box = document.getElementById('details');
    const s = view.sel;
    if (!s) { box.innerHTML = '<p class="hint">Click a message, fault, event, operation, replica band or violation to see its fields. Drag to pan, wheel to zoom.</p>'; return; }
    let title = '', rows = '';
    if (s.type === 'm') {
      const i = s.i, kind = D.kinds[M.kind[i]], f = M.flags[i];
      title = 'message ' + kind;
      const fate = [];
      if (f & LOST) fate.push('lost by the network'); if (f & PARTITIONED) fate.push('dropped: link cut by a partition');
      if (f & CUT) fate.push('cut by a partition while in flight'); if (f & DEAD) fate.push('destination down or restarted');
      if (f & DUP) fate.push("the network's duplicate copy"); if (f & ERROR) fate.push('an error answer');
      if (f & LATE_TXN) { const [own, cur] = M.late.get(i) || ['?', '?']; fate.push(`ARRIVED IN A LATER TRANSACTION: sent during T#${own}, arrived during T#${cur} of its transactional id`); }
      rows += row('from', D.lanes[M.from[i]].name) + row('to', D.lanes[M.to[i]].name) + row('sent', fmtT(M.sent[i]));
      if (!(f & (LOST | PARTITIONED))) rows += row('arrived', fmtT(M.recv[i]) + ' (after ' + fmtDur(M.recv[i] - M.sent[i]) + ')');
      rows += row('fate', fate.length ? fate.join('; ') : 'delivered');
      if (M.tp[i] !== 65535) rows += row('partition', D.tps[M.tp[i]]);
      const names = MSG_FIELDS[kind];
      if (names) [M.a[i], M.b[i], M.c[i]].forEach((v, k) => { if (names[k] && v !== NONE) rows += row(names[k], num(v)); });
      if (M.text.has(i)) rows += row('fields', M.text.get(i));
    } else if (s.type === 'f') {
      const [t, name, lanes, end, text] = D.faults[s.i];
      title = 'fault ' + name;
      rows = row('at', fmtT(t)) + (end != null ? row('until', fmtT(end)) : '') + row('strikes', lanes.map((l) => D.lanes[l].name).join(', ') || '(resolved when it fires)') + row('fields', text);
    } else if (s.type === 's') {
      const sp = spans[s.i];
      title = sp.cls === 'down' ? 'process down' : 'fault span ' + sp.cls;
      rows = row('lane', D.lanes[sp.lane].name) + row('from', fmtT(sp.from)) + row('to', fmtT(sp.to)) + row('lasted', fmtDur(sp.to - sp.from)) + row('what', sp.text);
      if (sp.fault != null && sp.fault >= 0) rows += row('fault', D.faults[sp.fault][4]);
    } else if (s.type === 'n') {
      const [t, lane, what, text] = D.notes[s.i];
      title = D.lanes[lane].name + ': ' + what;
      rows = row('at', fmtT(t)) + row('event', text);
    } else if (s.type === 'o') {
      const o = ops[s.i];
      title = 'operation ' + o.f + ' (' + o.result + ')';
      rows = row('client', D.lanes[o.lane].name) + row('process', o.process) + row('invoked', fmtT(o.start)) + row('completed', o.done >= 0 ? fmtT(o.end) + ' (after ' + fmtDur(o.end - o.start) + ')' : 'never');
      for (const [label, h] of [['invoke', o.inv], ['completion', o.done]]) {
        if (h < 0) continue;
        if (hist.partition[h] !== NONE) rows += row(label + ' partition', hist.partition[h]);
        if (hist.a[h] !== NONE) rows += row(label + (o.f === 'send' ? ' offset' : ' first offset'), hist.a[h]);
        if (hist.b[h] !== NONE) rows += row(label + ' last offset', hist.b[h]);
        if (hist.text[h]) rows += row(label + ' value', hist.text[h]);
      }
    } else if (s.type === 'v') {
      const [t, inv, detail] = D.violations[s.i];
      title = 'violation: ' + inv;
      rows = row('at', fmtT(t)) + row('detail', detail);
    } else if (s.type === 'r') {
      const r = replicasOf(s.tp)[s.ri], k = s.k;
      title = `replica ${D.tps[s.tp]} on broker ${r.node}`;
      const role = ROLES[r.role[k] & 0xff];
      rows = row('from', fmtT(r.t[k])) + row('until', fmtT(k + 1 < r.t.length ? r.t[k + 1] : D.end)) + row('role', role + (role === 'follower' ? ' of broker ' + (r.role[k] >> 8) : ''));
      rows += row('leader epoch', r.epoch[k]) + row('LEO', num(r.leo[k])) + row('HW', num(r.hw[k])) + (TX.ids.length ? row('LSO', num(r.lso[k])) : '') + row('flushed', num(r.flushed[k]));
      if (role === 'leader') rows += row('ISR', isrText(r.isr[k])) + row('maximal ISR', isrText(r.maxIsr[k]));
    } else if (s.type === 'x') {
      const sp = txnSpans[s.i], name = TX.ids[sp.id];
      title = `transaction ${name}: ${sp.state}`;
      rows = row('from', fmtT(sp.from)) + row('until', fmtT(sp.to)) + row('lasted', fmtDur(sp.to - sp.from));
      rows += row('transaction', 'T#' + sp.number + ' of ' + name) + row('producer id', sp.pid) + row('producer epoch', sp.epoch);
      rows += row('coordinator', `broker ${sp.node}, coordinator epoch ${sp.cepoch}`) + row('partitions', sp.parts || '-');
      const its = markers.filter((m) => m.id === sp.id && m.own === sp.number);
      if (its.length) rows += row('its markers', its.map((m) => `${m.commit ? 'commit' : 'abort'} ${D.tps[m.tp]}@${m.offset} e${m.epoch}${m.verdict === MARKER_WRONG ? ' (landed on T#' + m.current + ')' : m.verdict === MARKER_LATE ? ' (late, closed nothing)' : ''}`).join('; '));
      const onIt = markers.filter((m) => m.id === sp.id && m.current === sp.number && m.verdict === MARKER_WRONG);
      if (onIt.length) rows += row('closed by an earlier transaction\'s marker', onIt.map((m) => `${D.tps[m.tp]}@${m.offset} (T#${m.own}'s ${m.commit ? 'commit' : 'abort'}, e${m.epoch})`).join('; '));
    } else if (s.type === 'k') {
      const m = markers[s.i], name = m.id != null ? TX.ids[m.id] : '?';
      title = `${m.commit ? 'COMMIT' : 'ABORT'} marker on ${D.tps[m.tp]}`;
      rows = row('appended', fmtT(m.at) + ` by broker ${m.node} (leader), at offset ${m.offset}`);
      rows += row('WriteTxnMarkers sent', m.sent != null ? fmtT(m.sent) + ' (in flight ' + fmtDur(m.at - m.sent) + ')' : 'handed over inside the coordinator\'s broker');
      rows += row('transactional id', name) + row('producer id', m.pid) + row('marker producer epoch', m.epoch);
      rows += row("partition's producer epoch before", m.partEpoch == null ? 'none (producer unknown here)' : m.partEpoch) + row('coordinator epoch', m.cepoch);
      rows += row('closed', m.closedFrom != null ? `the open transaction from offset ${m.closedFrom} (records ${m.closedFrom}..${m.offset - 1})` : 'nothing (no transaction of this producer open here)');
      const own = m.id != null ? txnSpanOf(m.id, m.own, (sp) => sp.state === (m.commit ? 'PrepareCommit' : 'PrepareAbort')) : null;
      const cur = m.id != null ? txnSpans.filter((sp) => sp.id === m.id && sp.from <= m.at).pop() : null;
      if (own) rows += row('its transaction', `T#${m.own}: ${own.state} at epoch ${own.epoch} from ${fmtT(own.from)}`);
      if (cur) rows += row('the id when it landed', `T#${cur.number}: ${cur.state} at epoch ${cur.epoch}`);
      const verdict = { 0: 'its own transaction', 1: `late: T#${m.own} was already over; it closed nothing`, 2: `LANDED ON A LATER TRANSACTION: sent for T#${m.own}, it closed T#${m.current}'s records (KAFKA-17754's shape)`, 3: 'unknown (no coordinator state seen for this producer id)' }[m.verdict];
      rows += row('verdict', verdict);
    }
    box.innerHTML = `<h3>${esc(title)}</h3><table>${rows}</table>`;
  }
  function select(s, center) {
    view.sel = s;
    if (center) {
      const t = selTime(s), w = view.t1 - view.t0;
      if (t < view.t0 || t > view.t1) { view.t0 = Math.max(0, t - w / 2); view.t1 = view.t0 + w; }
    }
    showDetails();
    render();
  }

  // ---- step to the next / previous event of a kind ------------------------------------
  const stepKinds = [];
  {
    const add = (label, key, times) => { if (times.length) stepKinds.push({ label, key, times }); };
    add('violation', 'v', D.violations.map((v, i) => [v[0], { type: 'v', i }]));
    const faultNames = [...new Set(D.faults.map((f) => f[1]))].sort();
    for (const name of faultNames) add('fault: ' + name, 'f:' + name, D.faults.map((f, i) => [f[0], { type: 'f', i }]).filter((x) => D.faults[x[1].i][1] === name));
    const noteNames = [...new Set(D.notes.map((n) => n[2]))].sort();
    for (const name of noteNames) add('event: ' + name, 'n:' + name, D.notes.map((n, i) => [n[0], { type: 'n', i }]).filter((x) => D.notes[x[1].i][2] === name));
    add('marker on a later transaction', 'k:wrong', wrongMarkers.map((m) => [m.at, { type: 'k', i: m.i }]));
    add('marker: commit', 'k:commit', markers.filter((m) => m.commit).map((m) => [m.at, { type: 'k', i: m.i }]));
    add('marker: abort', 'k:abort', markers.filter((m) => !m.commit).map((m) => [m.at, { type: 'k', i: m.i }]));
    for (const st of TX.stateNames) add('transaction: ' + st, 'x:' + st, txnSpans.map((sp, k) => [sp.from, { type: 'x', i: k }]).filter((x) => txnSpans[x[1].i].state === st));
    for (const res of ['fail', 'info']) add('operation: ' + res, 'o:' + res, ops.map((o, i) => [o.start, { type: 'o', i }]).filter((x) => ops[x[1].i].result === res));
    D.kinds.forEach((k, ki) => {
      const times = [];
      for (let i = 0; i < M.n; i++) if (M.kind[i] === ki) times.push([M.sent[i], { type: 'm', i }]);
      add('message: ' + k, 'm:' + k, times);
    });
    for (const [label, flag] of [['lost', LOST], ['cut by partition', PARTITIONED | CUT], ['error answer', ERROR], ['arriving in a later transaction', LATE_TXN]]) {
      const times = [];
      for (let i = 0; i < M.n; i++) if (M.flags[i] & flag) times.push([M.sent[i], { type: 'm', i }]);
      add('message ' + label, 'mf:' + label, times);
    }
    for (const s of stepKinds) s.times.sort((x, y) => x[0] - y[0]);
  }
  function step(dir) {
    const sk = stepKinds[document.getElementById('step-kind').selectedIndex];
    if (!sk) return;
    const cur = view.sel ? selTime(view.sel) : (dir > 0 ? view.t0 - 1 : view.t1 + 1);
    let pick = null;
    if (dir > 0) pick = sk.times.find((x) => x[0] > cur || (x[0] === cur && view.sel && !sameSel(x[1], view.sel) && isAfter(sk, x[1], view.sel)));
    else for (let k = sk.times.length - 1; k >= 0; k--) { if (sk.times[k][0] < cur) { pick = sk.times[k]; break; } }
    if (pick) select(pick[1], true);
  }
  const sameSel = (a, b) => a.type === b.type && a.i === b.i;
  function isAfter(sk, a, b) {
    const ia = sk.times.findIndex((x) => sameSel(x[1], a)), ib = sk.times.findIndex((x) => sameSel(x[1], b));
    return ib < 0 || ia > ib;
  }

  // ---- interaction --------------------------------------------------------------------
  function zoom(factor, atT) {
    const span = Math.max(20, Math.min(D.end * 1.2 + 1, (view.t1 - view.t0) * factor));
    const t = atT == null ? (view.t0 + view.t1) / 2 : atT;
    const frac = (t - view.t0) / (view.t1 - view.t0);
    view.t0 = t - frac * span;
    view.t1 = view.t0 + span;
    render();
  }
  function pan(dt) { view.t0 += dt; view.t1 += dt; render(); }
  let drag = null;
  function rebindDiagram() {
    const svg = document.getElementById('diagram');
    svg.addEventListener('wheel', (e) => { e.preventDefault(); zoom(e.deltaY > 0 ? 1.25 : 0.8, T(e.offsetX)); }, { passive: false });
    svg.addEventListener('mousedown', (e) => { drag = { x: e.clientX, t0: view.t0, t1: view.t1, moved: false }; svg.classList.add('dragging'); });
    svg.addEventListener('click', (e) => {
      if (drag && drag.moved) return;
      const el = e.target.closest('[data-m],[data-fault],[data-note],[data-op],[data-violation],[data-span]');
      if (!el) return;
      const d = el.dataset;
      if (d.m) select({ type: 'm', i: +d.m }); else if (d.fault) select({ type: 'f', i: +d.fault });
      else if (d.note) select({ type: 'n', i: +d.note }); else if (d.op) select({ type: 'o', i: +d.op });
      else if (d.violation) select({ type: 'v', i: +d.violation }); else if (d.span) select({ type: 's', i: +d.span });
    });
  }
  window.addEventListener('mousemove', (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x;
    if (Math.abs(dx) > 2) drag.moved = true;
    const dt = (dx / (layout.width - LABEL_W - RIGHT)) * (drag.t1 - drag.t0);
    view.t0 = drag.t0 - dt; view.t1 = drag.t1 - dt;
    scheduleRender();
  });
  window.addEventListener('mouseup', () => {
    const svg = document.getElementById('diagram');
    if (svg) svg.classList.remove('dragging');
    setTimeout(() => { drag = null; }, 0);
  });
  window.addEventListener('keydown', (e) => {
    if (e.target.tagName === 'INPUT' || e.target.tagName === 'SELECT') return;
    const w = view.t1 - view.t0;
    switch (e.key) {
      case '+': case '=': zoom(0.5); break;
      case '-': zoom(2); break;
      case '0': fit(); break;
      case 'ArrowLeft': pan(-w / 5); break;
      case 'ArrowRight': pan(w / 5); break;
      case 'n': step(1); break;
      case 'p': step(-1); break;
      case 'Escape': view.sel = null; showDetails(); render(); break;
      default: return;
    }
    e.preventDefault();
  });
  function fit() { view.t0 = 0; view.t1 = Math.max(D.end, 1); render(); }
  let pending = false;
  function scheduleRender() { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; render(); }); } }

  // ---- the URL's hash mirrors the view ------------------------------------------------
  function readHash() {
    const h = new URLSearchParams(location.hash.slice(1));
    if (h.has('t')) {
      const [a, b] = h.get('t').split(',').map(Number);
      if (isFinite(a) && isFinite(b) && b > a) { view.t0 = a * 1e6; view.t1 = b * 1e6; }
    }
    if (h.has('tp')) { const i = D.tps.indexOf(h.get('tp')); if (i >= 0) view.tp = i; }
    if (h.has('only-tp')) view.onlyTp = true;
    const sel = h.get('sel');
    if (sel) {
      const m = /^([mfnovskx])(\d+)$/.exec(sel);
      if (m) view.sel = { type: m[1], i: +m[2] };
      // `sel=wrong-marker`: the first marker that closed a later transaction, on its partition.
      if (sel === 'wrong-marker' && wrongMarkers.length) {
        const w = wrongMarkers[0];
        view.sel = { type: 'k', i: w.i };
        if (!h.has('tp')) view.tp = w.tp;
        if (!h.has('t')) { view.t0 = Math.max(0, (w.sent != null ? w.sent : w.at) - 5e5); view.t1 = w.at + 2e5; }
      }
      if (sel === 'violation' && D.violations.length) {
        view.sel = { type: 'v', i: 0 };
        const t = D.violations[0][0];
        if (!h.has('t')) { view.t0 = Math.max(0, t - 2e6); view.t1 = t + 5e5; }
      }
    }
  }
  function writeHash() {
    const p = [`t=${(view.t0 / 1e6).toFixed(6)},${(view.t1 / 1e6).toFixed(6)}`, `tp=${encodeURIComponent(D.tps[view.tp] || '')}`];
    if (view.onlyTp) p.push('only-tp');
    if (view.sel && view.sel.type !== 'r') p.push(`sel=${view.sel.type}${view.sel.i}`);
    history.replaceState(null, '', '#' + p.join('&'));
  }

  // ---- page furniture -----------------------------------------------------------------
  function furniture() {
    const v = document.getElementById('verdict');
    v.textContent = D.verdict;
    v.className = 'verdict ' + (D.verdict === 'PASS' ? 'pass' : 'fail');
    document.getElementById('facts').textContent =
      `seed ${D.seed} · trace hash ${D.hash} · ${D.events.toLocaleString('en')} simulated events · ${fmtDur(D.end)} simulated · ${M.n.toLocaleString('en')} messages · ${ops.length.toLocaleString('en')} client operations · ${D.faults.length} faults` +
      (D.failed.length ? ' · failed: ' + D.failed.join(', ') : '');
    const vb = document.getElementById('violations');
    // One link per violated invariant: its first violation, with the count.
    const firstOf = new Map();
    D.violations.forEach((v, i) => { if (!firstOf.has(v[1])) firstOf.set(v[1], { i, n: 0 }); firstOf.get(v[1]).n++; });
    vb.innerHTML = [...firstOf].map(([inv, { i, n }]) => `<a data-v="${i}" title="${esc(D.violations[i][2])}">${esc(inv)} ×${n}, first at ${fmtT(D.violations[i][0])}</a>`).join('') +
      (D.violations.length ? ' <span class="hint">(step through every one with “violation”)</span>' : '');
    vb.addEventListener('click', (e) => {
      const a = e.target.closest('[data-v]');
      if (!a) return;
      const t = D.violations[+a.dataset.v][0];
      view.t0 = Math.max(0, t - 2e6); view.t1 = t + 5e5;
      select({ type: 'v', i: +a.dataset.v });
    });
    const tpSel = document.getElementById('tp');
    // The workload's partitions first, then the internal ones; natural order within each.
    const order = D.tps.map((t, i) => i).sort((a, b) => {
      const ia = D.tps[a].startsWith('__'), ib = D.tps[b].startsWith('__');
      return ia !== ib ? (ia ? 1 : -1) : D.tps[a].localeCompare(D.tps[b], 'en', { numeric: true });
    });
    tpSel.innerHTML = order.map((i) => `<option value="${i}">${esc(D.tps[i])}</option>`).join('');
    // Start on the partition the first violation names, else the first of the workload.
    const named = D.violations.length ? order.find((i) => new RegExp('\\b' + D.tps[i].replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '\\b').test(D.violations[0][2])) : undefined;
    let byNumber;
    const pm = D.violations.length ? /partition (\d+)/.exec(D.violations[0][2]) : null;
    if (pm) byNumber = order.find((i) => !D.tps[i].startsWith('__') && D.tps[i].endsWith('-' + pm[1]));
    view.tp = named !== undefined ? named : byNumber !== undefined ? byNumber : (order.length ? order[0] : 0);
    tpSel.addEventListener('change', () => { view.tp = +tpSel.value; render(); });
    const only = document.getElementById('only-tp');
    only.addEventListener('change', () => { view.onlyTp = only.checked; render(); });
    const kinds = document.getElementById('kinds');
    kinds.innerHTML = D.kinds.map((k, i) => `<label><input type="checkbox" data-kind="${i}" checked> <span class="swatch" style="background:${kindColor(i)}"></span>${esc(k)}</label>`).join('');
    kinds.addEventListener('change', (e) => { const k = +e.target.dataset.kind; if (e.target.checked) view.hiddenKinds.delete(k); else view.hiddenKinds.add(k); render(); });
    const lt = document.getElementById('lane-toggles');
    lt.innerHTML = D.lanes.map((l, i) => `<label><input type="checkbox" data-lane="${i}" checked> ${esc(l.name)}</label>`).join('');
    lt.addEventListener('change', (e) => { const l = +e.target.dataset.lane; if (e.target.checked) view.hiddenLanes.delete(l); else view.hiddenLanes.add(l); render(); });
    const sk = document.getElementById('step-kind');
    sk.innerHTML = stepKinds.map((s) => `<option>${esc(s.label)} (${s.times.length})</option>`).join('');
    document.getElementById('prev').addEventListener('click', () => step(-1));
    document.getElementById('next').addEventListener('click', () => step(1));
    document.getElementById('fit').addEventListener('click', fit);
    document.getElementById('zoom-in').addEventListener('click', () => zoom(0.5));
    document.getElementById('zoom-out').addEventListener('click', () => zoom(2));
    document.getElementById('legend').innerHTML =
      D.kinds.map((k, i) => `<span><span class="swatch" style="background:${kindColor(i)}"></span>${esc(k)}</span>`).join('') +
      '<span>dashed red ×: lost · purple dashed: cut by a partition · orange: error answer · dotted: destination down · grey band: process down · hatched: partition · triangles: faults · diamonds: broker/controller events · bars on client lanes: operations (green ok, red fail, orange info)</span>' +
      (TX.ids.length ? '<span class="txn-legend">transactions: ' + TX.stateNames.filter((st) => txnSpans.some((sp) => sp.state === st)).map((st) => `<span class="swatch" style="background:${TXN_COLORS[st]};height:8px"></span>${esc(st)}`).join(' ') +
        ' · markers: <span class="swatch" style="background:#16a34a;height:8px"></span>commit <span class="swatch" style="background:#dc2626;height:8px"></span>abort, faded: late (closed nothing), outlined with !: landed on a later transaction · thick red arrow: an EndTxn or WriteTxnMarkers arriving in a later transaction than it was sent in · partition panel: LSO dotted</span>' : '');
    window.addEventListener('resize', scheduleRender);
  }

  function render() {
    computeLayout();
    document.getElementById('tp').value = String(view.tp);
    document.getElementById('only-tp').checked = view.onlyTp;
    document.getElementById('window').textContent = `${fmtT(Math.max(0, view.t0))} – ${fmtT(view.t1)} (${fmtDur(view.t1 - view.t0)})`;
    renderDiagram();
    renderTxns();
    renderReplicas();
    writeHash();
  }

  try {
    furniture();
    readHash();
    render();
    showDetails();
    status.dataset.lanes = String(D.lanes.length);
    status.dataset.loadMs = String(Math.round(performance.now() - started));
    status.dataset.ready = '1';
  } catch (e) {
    fail(e && e.stack ? e.stack : e);
    throw e;
  }
})();
