// dashboard.js - the master's live dashboard (index.html). Polls v1/status every POLL_MS, keeps the last
// HISTORY_MS of each group's rates in the page, and draws the peers, each group's ring in ring order, the
// operations in flight with their collective kinds and ages, the counters by kind, and charts of reduced bytes
// and revisions per second. Plain DOM and SVG; the only request it makes is v1/status, relative to the admin port
// that served the page.
'use strict';

const POLL_MS = 1000;
const FETCH_TIMEOUT_MS = 5000;
const HISTORY_MS = 5 * 60 * 1000;
const STALE_OP_MS = 10000; // an operation in flight longer than this is marked
const LATE_HEARTBEAT_MS = 3000; // a peer silent longer than this is marked
const SVG_NS = 'http://www.w3.org/2000/svg'; // a namespace name, not fetched
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2'];

// group id -> [{t, revs, bytes}], oldest first; revs and bytes are null where the rate was unknown or the
// master did not answer (a gap in the chart).
const history = new Map();
let lastAnswer = 0;

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

function row(cells, cls) {
  const tr = el('tr', cls);
  for (const c of cells) tr.append(c instanceof Node ? wrap(c) : el('td', '', String(c)));
  return tr;
}

function wrap(node) {
  const td = el('td');
  td.append(node);
  return td;
}

const prefix = (uuid) => uuid.slice(0, 8);
const color = (group) => COLORS[group % COLORS.length];
const stateClass = (state) => 'state-' + String(state).replace(/[^A-Za-z0-9_-]/g, '');

// "850ms", "4.2s", "37s", "3m 05s", "2h 07m"
function fmtAge(ms) {
  if (ms < 1000) return Math.round(ms) + 'ms';
  const s = ms / 1000;
  if (s < 10) return s.toFixed(1) + 's';
  if (s < 60) return Math.floor(s) + 's';
  const m = Math.floor(s / 60);
  if (m < 60) return m + 'm ' + String(Math.floor(s % 60)).padStart(2, '0') + 's';
  return Math.floor(m / 60) + 'h ' + String(m % 60).padStart(2, '0') + 'm';
}

// Decimal units, as `pccl status` prints them: "19.2 MB".
function fmtBytes(b) {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let u = 0;
  for (; b >= 1000 && u < units.length - 1; u++) b /= 1000;
  return (u === 0 ? Math.round(b) : b.toFixed(1)) + ' ' + units[u];
}

function fmtRevs(r) {
  return (r >= 100 ? r.toFixed(0) : r >= 10 ? r.toFixed(1) : r.toFixed(2)) + ' rev/s';
}

function record(status, t) {
  const seen = new Set();
  for (const g of status.groups) {
    seen.add(g.id);
    if (!history.has(g.id)) history.set(g.id, []);
    history.get(g.id).push({t, revs: g.revisions_per_s, bytes: g.reduced_bytes_per_s});
  }
  for (const [id, samples] of history) {
    if (!seen.has(id)) samples.push({t, revs: null, bytes: null});
  }
  trim(t);
}

function gap(t) {
  for (const samples of history.values()) samples.push({t, revs: null, bytes: null});
  trim(t);
}

function trim(t) {
  for (const [id, samples] of history) {
    while (samples.length && samples[0].t < t - HISTORY_MS) samples.shift();
    if (!samples.some((s) => s.revs !== null || s.bytes !== null)) history.delete(id);
  }
}

function niceCeil(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

// One line a group over the last HISTORY_MS, broken where a sample is null.
function drawChart(chart, key, fmt, now) {
  const W = 600, H = 180, left = 72, right = 12, top = 12, bottom = 24;
  const pw = W - left - right, ph = H - top - bottom;
  let max = 0;
  for (const samples of history.values())
    for (const s of samples) if (s[key] !== null && s[key] > max) max = s[key];
  max = niceCeil(max);
  const x = (t) => left + ((t - (now - HISTORY_MS)) / HISTORY_MS) * pw;
  const y = (v) => top + ph - (v / max) * ph;
  const parts = [];
  for (const f of [0, 0.5, 1]) {
    parts.push(svg('line', {class: 'grid', x1: left, x2: W - right, y1: y(f * max), y2: y(f * max)}));
    const label = svg('text', {class: 'axis', x: left - 6, y: y(f * max) + 4, 'text-anchor': 'end'});
    label.textContent = fmt(f * max);
    parts.push(label);
  }
  const minutes = HISTORY_MS / 60000;
  for (let m = 0; m <= minutes; m++) {
    const label = svg('text', {class: 'axis', x: x(now - (minutes - m) * 60000), y: H - 6, 'text-anchor': 'middle'});
    label.textContent = m === minutes ? 'now' : '-' + (minutes - m) + ' min';
    parts.push(label);
  }
  let any = false;
  for (const [id, samples] of history) {
    let d = '', open = false;
    for (const s of samples) {
      if (s[key] === null) {
        open = false;
        continue;
      }
      d += (open ? ' L' : ' M') + x(s.t).toFixed(1) + ' ' + y(s[key]).toFixed(1);
      if (!open) d += ' h0.01'; // a lone sample shows as a dot (round caps)
      open = true;
      any = true;
    }
    if (d) parts.push(svg('path', {class: 'series', 'data-group': id, d: d.trim(), stroke: color(id)}));
  }
  if (!any) {
    const note = svg('text', {class: 'empty', x: left + pw / 2, y: top + ph / 2, 'text-anchor': 'middle'});
    note.textContent = 'no rates yet: the master has them a second or two after a group starts';
    parts.push(note);
  }
  chart.replaceChildren(...parts);
}

// A square of the group's colour, as its line in the charts.
function swatch(group) {
  const s = svg('svg', {class: 'swatch', viewBox: '0 0 10 10'});
  s.append(svg('rect', {width: 10, height: 10, fill: color(group)}));
  return s;
}

function drawLegend() {
  const items = [];
  for (const id of [...history.keys()].sort((a, b) => a - b)) {
    const item = el('span', 'item');
    item.append(swatch(id), document.createTextNode(' group ' + id));
    items.push(item);
  }
  document.getElementById('legend').replaceChildren(...items);
}

// The ring in ring order, clockwise from the top: a circle a peer, an arrow from each to its successor.
function drawRing(group, peersByUuid) {
  const W = 340, H = 260, cx = W / 2, cy = H / 2, R = 80;
  const n = group.ring.length;
  const node = n > 1 ? Math.max(4, Math.min(14, ((Math.PI * R) / n) * 0.5)) : 14;
  const root = svg('svg', {class: 'ring', viewBox: `0 0 ${W} ${H}`, 'data-group': group.id, role: 'img'});
  root.setAttribute('aria-label', `ring of group ${group.id}: ${n} peers`);
  const marker = svg('marker', {id: 'arrow-' + group.id, viewBox: '0 0 8 8', refX: 7, refY: 4,
    markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse'});
  marker.append(svg('path', {class: 'arrowhead', d: 'M0,0 L8,4 L0,8 z'}));
  const defs = svg('defs');
  defs.append(marker);
  root.append(defs, svg('circle', {class: 'guide', cx, cy, r: R}));
  const angle = (i) => -Math.PI / 2 + (2 * Math.PI * i) / n;
  const at = (a, r) => [cx + r * Math.cos(a), cy + r * Math.sin(a)];
  if (n > 1) {
    const gapAngle = (node + 4) / R;
    for (let i = 0; i < n; i++) {
      const [x1, y1] = at(angle(i) + gapAngle, R);
      const [x2, y2] = at(angle(i + 1) - gapAngle, R);
      root.append(svg('path', {class: 'link', d: `M${x1.toFixed(1)} ${y1.toFixed(1)} A${R} ${R} 0 0 1 ` +
        `${x2.toFixed(1)} ${y2.toFixed(1)}`, 'marker-end': `url(#arrow-${group.id})`}));
    }
  }
  group.ring.forEach((uuid, i) => {
    const p = peersByUuid.get(uuid);
    const [x, y] = at(angle(i), R);
    const late = p && p.last_heartbeat_ms_ago > LATE_HEARTBEAT_MS ? ' late' : '';
    const c = svg('circle', {class: 'ring-peer ' + stateClass(p ? p.state : 'unknown') + late, 'data-uuid': uuid,
      cx: x.toFixed(1), cy: y.toFixed(1), r: node.toFixed(1)});
    const title = svg('title');
    title.textContent = p ? `${uuid}${p.name ? ' "' + p.name + '"' : ''}\n${p.address}:${p.p2p_port}\n${p.state}, revision ${p.revision}, ` +
      `last heard ${fmtAge(p.last_heartbeat_ms_ago)} ago` : uuid;
    c.append(title);
    const a = angle(i), cos = Math.cos(a);
    const [lx, ly] = at(a, R + node + 6);
    const label = svg('text', {class: 'label', x: lx.toFixed(1), y: (ly + 4 + 6 * Math.sin(a)).toFixed(1),
      'text-anchor': cos > 0.3 ? 'start' : cos < -0.3 ? 'end' : 'middle'});
    label.textContent = prefix(uuid);
    root.append(c, label);
  });
  return root;
}

function drawGroups(status, peersByUuid) {
  const cards = status.groups.map((g) => {
    const card = el('div', 'group');
    const h = el('h3', '', ' group ' + g.id);
    h.prepend(swatch(g.id));
    const facts = el('dl');
    const fact = (k, v, cls, id) => {
      const dd = el('dd', cls, v);
      if (id) dd.id = id;
      facts.append(el('dt', '', k), dd);
    };
    fact('revision', g.last_revision === null ? 'none yet' : String(g.last_revision), 'revision');
    const known = g.revisions_per_s !== null && g.reduced_bytes_per_s !== null;
    fact('rate', known ? `${fmtRevs(g.revisions_per_s)}, ${fmtBytes(g.reduced_bytes_per_s)}/s reduced` :
      'measuring', known ? 'rate' : 'rate unknown', 'rate-' + g.id);
    fact('ring', g.ring.map(prefix).join(' \u2192 ') || 'empty');
    const kinds = Object.entries(g.collectives_by_kind || {}).filter(([, k]) => k.completed > 0)
      .map(([name, k]) => `${name} ${k.completed}`);
    fact('completed', `${g.collectives_completed} collectives${kinds.length ? ' (' + kinds.join(', ') + ')' : ''}, ` +
      `${fmtBytes(g.reduced_bytes)} reduced`, 'completed');
    fact('in flight', String(g.operations.length));
    card.append(h, drawRing(g, peersByUuid), facts);
    return card;
  });
  if (!cards.length) cards.push(el('p', 'empty', 'No group has a ring yet: peers are waiting to be accepted.'));
  document.getElementById('groups').replaceChildren(...cards);
}

// Replaces the rows of table id; one row saying `empty` across all columns when there are none.
function fillTable(id, rows, empty) {
  const table = document.getElementById(id);
  if (!rows.length) {
    const td = el('td', 'empty', empty);
    td.colSpan = table.tHead.rows[0].cells.length;
    rows = [el('tr')];
    rows[0].append(td);
  }
  table.tBodies[0].replaceChildren(...rows);
}

function drawOperations(status) {
  const ops = [];
  for (const g of status.groups) for (const o of g.operations) ops.push([String(g.id), o]);
  for (const o of status.run_operations) ops.push(['run-wide', o]);
  ops.sort((a, b) => b[1].age_ms - a[1].age_ms);
  const rows = ops.map(([where, o]) => row([where, o.kind, o.collective_kind || '', o.tag === null ? '' : o.tag, o.state,
    o.op_seq === null ? '' : o.op_seq, `${o.members}: ${o.member_uuids.map(prefix).join(' ')}`, fmtAge(o.age_ms)],
  'op' + (o.age_ms > STALE_OP_MS ? ' stale' : '')));
  fillTable('operations', rows, 'none');
}

// How a peer is reached (docs/nat.md): unreachable by a direct dial, and its edges that were punched or relayed.
function natText(p) {
  const parts = [];
  if (p.reachable === false) parts.push('unreachable');
  for (const e of p.edges || []) if (e.kind !== 'direct') parts.push(`${e.kind} with ${prefix(e.peer)}`);
  return parts.length ? parts.join(', ') : (p.reachable === true ? 'direct' : '-');
}

function drawPeers(status) {
  const peers = [...status.peers].sort((a, b) => a.group - b.group || a.uuid.localeCompare(b.uuid));
  const rows = peers.map((p) => {
    const id = el('code', '', prefix(p.uuid));
    id.title = p.uuid;
    return row([id, p.name || '-', `${p.address}:${p.p2p_port}`, p.group, p.phase, p.state, p.revision,
      fmtAge(p.last_heartbeat_ms_ago), natText(p)], 'peer ' + stateClass(p.state) +
      (p.last_heartbeat_ms_ago > LATE_HEARTBEAT_MS ? ' late' : ''));
  });
  fillTable('peers', rows, 'no peers');
}

function drawCounters(status) {
  const c = status.counters;
  const items = [
    ['collectives completed', c.collectives_completed], ['collectives aborted', c.collectives_aborted],
    ['collectives rejected', c.collectives_rejected],
    ['shared-state syncs', c.syncs], ['peers kicked', c.peers_kicked],
    ['control packets in', c.control_packets_received], ['control bytes out', fmtBytes(c.control_bytes_sent)],
  ];
  // One line a collective kind that ran or was refused.
  for (const [name, k] of Object.entries(c.collectives_by_kind || {})) {
    if (k.completed + k.aborted + k.rejected === 0) continue;
    items.push([name, `${k.completed} completed, ${k.aborted} aborted, ${k.rejected} rejected, ${fmtBytes(k.bytes)}`]);
  }
  // The algorithms the completed ones ran (the master's choice, docs/algorithms.md).
  const algos = Object.entries(c.collectives_by_algorithm || {}).filter(([, n]) => n > 0).map(([a, n]) => `${a} ${n}`);
  if (algos.length) items.push(['by algorithm', algos.join(', ')]);
  const nodes = [];
  for (const [k, v] of items) nodes.push(el('dt', '', k), el('dd', '', String(v)));
  document.getElementById('counters').replaceChildren(...nodes);
}

function drawHeader(status) {
  const accepted = status.peers.filter((p) => p.phase === 'accepted').length;
  const count = (n, what) => `${n} ${what}${n === 1 ? '' : 's'}`;
  document.getElementById('summary').textContent = `pccl ${status.version}, control port ${status.master_port}, ` +
    `up ${fmtAge(status.uptime_ms)}: ${count(status.peers.length, 'peer')} (${accepted} accepted), ` +
    count(status.groups.length, 'group');
  const health = document.getElementById('health');
  const oldest = status.oldest_operation_age_ms;
  health.textContent = oldest > STALE_OP_MS ? `oldest operation in flight: ${fmtAge(oldest)}` : 'ok';
  health.className = 'health ' + (oldest > STALE_OP_MS ? 'warn' : 'ok');
  document.body.classList.remove('down');
}

function drawCharts(now) {
  drawChart(document.getElementById('chart-bytes'), 'bytes', (v) => fmtBytes(v) + '/s', now);
  const revs = (v) => (v >= 10 || v === 0 ? v.toFixed(0) : v.toFixed(1));
  drawChart(document.getElementById('chart-revisions'), 'revs', revs, now);
  drawLegend();
}

function render(status, now) {
  const peersByUuid = new Map(status.peers.map((p) => [p.uuid, p]));
  drawHeader(status);
  drawGroups(status, peersByUuid);
  drawOperations(status);
  drawPeers(status);
  drawCounters(status);
  drawCharts(now);
}

function unreachable(err, now) {
  gap(now);
  drawCharts(now);
  const since = lastAnswer ? `, last answer ${fmtAge(now - lastAnswer)} ago` : '';
  document.getElementById('summary').textContent = `master unreachable (${err.message || err}${since})`;
  const health = document.getElementById('health');
  health.textContent = 'unreachable';
  health.className = 'health down';
  document.body.classList.add('down');
}

async function fetchStatus() {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), FETCH_TIMEOUT_MS);
  try {
    const r = await fetch('v1/status', {cache: 'no-store', signal: ctl.signal});
    if (!r.ok) throw new Error('HTTP ' + r.status);
    return await r.json();
  } finally {
    clearTimeout(timer);
  }
}

// The next poll is set before drawing, so that a page that fails to draw one document still draws the next.
async function poll() {
  let status = null;
  try {
    status = await fetchStatus();
  } catch (err) {
    unreachable(err, Date.now());
  }
  setTimeout(poll, POLL_MS);
  if (status) {
    const now = Date.now();
    lastAnswer = now;
    record(status, now);
    render(status, now);
  }
}

document.getElementById('history-minutes').textContent = String(HISTORY_MS / 60000);
poll();
