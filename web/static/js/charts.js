// Histogram, line plot across iterations, and heat map: plain SVG and canvas, no library.
import { h, s, fmt } from './dom.js';
import { axis, labelRoom, niceTicks } from './ticks.js';

const PAD = { l: 52, r: 12, t: 10, b: 26 };

/** The left padding of a chart whose y axis has ``labels``: the widest fits. */
export function leftPad(labels) {
  return Math.max(PAD.l, labelRoom(labels));
}

/** Bars of ``{edges, counts}``. */
export function histogram(hist, { width = 360, height = 150, color = '#4c6ef5' } = {}) {
  const el = s('svg', { class: 'chart', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img',
    'aria-label': 'histogram' });
  if (!hist || !hist.counts || !hist.counts.length) {
    el.append(s('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle', class: 'chart-empty' }, 'no finite values'));
    return el;
  }
  const { edges, counts } = hist;
  const W = width - PAD.l - PAD.r, H = height - PAD.t - PAD.b;
  const maxC = Math.max(...counts, 1);
  const bw = W / counts.length;
  el.append(s('line', { x1: PAD.l, x2: PAD.l + W, y1: PAD.t + H, y2: PAD.t + H, class: 'axis' }));
  for (const t of niceTicks(0, maxC, 3, { integer: true })) {
    const y = PAD.t + H - (t / maxC) * H;
    el.append(s('line', { x1: PAD.l, x2: PAD.l + W, y1: y, y2: y, class: 'grid' }));
    el.append(s('text', { x: PAD.l - 6, y: y + 3, 'text-anchor': 'end', class: 'tick' }, fmt(t)));
  }
  counts.forEach((c, i) => {
    const bh = (c / maxC) * H;
    const r = s('rect', { x: PAD.l + i * bw + 0.5, y: PAD.t + H - bh, width: Math.max(bw - 1, 0.5), height: bh,
      fill: color, rx: 1 });
    r.append(s('title', {}, `[${fmt(edges[i])}, ${fmt(edges[i + 1])}): ${c}`));
    el.append(r);
  });
  const lo = edges[0], hi = edges[edges.length - 1];
  el.append(s('text', { x: PAD.l, y: height - 8, 'text-anchor': 'start', class: 'tick' }, fmt(lo, 4)));
  el.append(s('text', { x: PAD.l + W / 2, y: height - 8, 'text-anchor': 'middle', class: 'tick' }, fmt((lo + hi) / 2, 4)));
  el.append(s('text', { x: PAD.l + W, y: height - 8, 'text-anchor': 'end', class: 'tick' }, fmt(hi, 4)));
  return el;
}

/**
 * Lines over iterations. ``series``: [{name, color, points: [{x, y}]}] (y null = gap).
 * ``marker``: the x to mark (current iteration); ``onPick(x)`` when the plot is clicked.
 */
export function lineChart(series, { width = 520, height = 200, marker = null, onPick = null, log = false } = {}) {
  const el = s('svg', { class: 'chart', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img',
    'aria-label': 'statistics across iterations' });
  const tr = (y) => (log ? (y > 0 ? Math.log10(y) : null) : y);
  const xs = [], ys = [];
  for (const se of series) for (const p of se.points) {
    xs.push(p.x);
    const y = typeof p.y === 'number' ? tr(p.y) : null;
    if (y !== null && Number.isFinite(y)) ys.push(y);
  }
  if (!xs.length || !ys.length) {
    el.append(s('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle', class: 'chart-empty' },
      log ? 'no positive values to plot on a log scale' : 'no values'));
    return el;
  }
  let x0 = Math.min(...xs), x1 = Math.max(...xs);
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  let y0 = Math.min(...ys), y1 = Math.max(...ys);
  if (y0 === y1) { const d = Math.abs(y0) * 0.1 || 1; y0 -= d; y1 += d; }
  const pad = (y1 - y0) * 0.06;
  y0 -= pad; y1 += pad;
  const ya = axis(y0, y1, 4, { log });
  const L = leftPad(ya.labels);
  const W = width - L - PAD.r, H = height - PAD.t - PAD.b;
  const X = (v) => L + ((v - x0) / (x1 - x0)) * W;
  const Y = (v) => PAD.t + H - ((v - y0) / (y1 - y0)) * H;
  ya.at.forEach((t, i) => {
    el.append(s('line', { x1: L, x2: L + W, y1: Y(t), y2: Y(t), class: 'grid' }));
    el.append(s('text', { x: L - 6, y: Y(t) + 3, 'text-anchor': 'end', class: 'tick tick-y' }, ya.labels[i]));
  });
  const uniq = [...new Set(xs)].sort((a, b) => a - b);
  const xa = axis(uniq[0], uniq[uniq.length - 1], 10, { integer: true });
  xa.labels.forEach((label, i) => {
    el.append(s('text', { x: X(xa.at[i]), y: height - 8, 'text-anchor': 'middle', class: 'tick tick-x' }, label));
  });
  el.append(s('line', { x1: L, x2: L + W, y1: PAD.t + H, y2: PAD.t + H, class: 'axis' }));
  if (marker !== null && marker !== undefined) {
    el.append(s('line', { x1: X(marker), x2: X(marker), y1: PAD.t, y2: PAD.t + H, class: 'marker' }));
  }
  for (const se of series) {
    let d = '';
    let pen = false;
    for (const p of se.points) {
      const y = typeof p.y === 'number' ? tr(p.y) : null;
      if (y === null || !Number.isFinite(y)) { pen = false; continue; }
      d += `${pen ? 'L' : 'M'}${X(p.x).toFixed(1)},${Y(y).toFixed(1)}`;
      pen = true;
    }
    el.append(s('path', { d, fill: 'none', stroke: se.color, 'stroke-width': 2, 'stroke-linejoin': 'round' }));
    for (const p of se.points) {
      const y = typeof p.y === 'number' ? tr(p.y) : null;
      if (y === null || !Number.isFinite(y)) continue;
      const c = s('circle', { cx: X(p.x), cy: Y(y), r: p.x === marker ? 4.5 : 3, fill: p.x === marker ? se.color : 'white',
        stroke: se.color, 'stroke-width': 2 });
      c.append(s('title', {}, `${se.name} @ iteration ${p.x}: ${fmt(p.y)}`));
      el.append(c);
    }
  }
  if (onPick) {
    el.style.cursor = 'pointer';
    el.addEventListener('click', (ev) => {
      const r = el.getBoundingClientRect();
      const vx = x0 + ((ev.clientX - r.left) * (width / r.width) - L) / W * (x1 - x0);
      let best = uniq[0];
      for (const u of uniq) if (Math.abs(u - vx) < Math.abs(best - vx)) best = u;
      onPick(best);
    });
  }
  return el;
}

// Colour maps: diverging blue-white-red around zero, else a sequential viridis-like ramp.
const SEQ = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
const DIV = [[33, 102, 172], [146, 197, 222], [247, 247, 247], [244, 165, 130], [178, 24, 43]];
function ramp(stops, t) {
  t = Math.min(1, Math.max(0, t));
  const f = t * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(f));
  const u = f - i;
  return stops[i].map((c, k) => Math.round(c + (stops[i + 1][k] - c) * u));
}

/** A heat map of a 2-D (or 1-D) array of numbers (or "NaN"/"Inf"/"-Inf"). */
export function heatmap(values, { min, max, maxWidth = 900, maxHeight = 520, onHover = null } = {}) {
  const rows = Array.isArray(values[0]) ? values : [values];
  const R = rows.length, C = rows[0] ? rows[0].length : 0;
  const cell = Math.max(2, Math.min(48, Math.floor(maxWidth / Math.max(C, 1)), Math.floor(maxHeight / Math.max(R, 1))));
  const canvas = h('canvas', { class: 'heatmap', width: C * cell, height: R * cell });
  const g = canvas.getContext('2d');
  const lo = min ?? 0, hi = max ?? 1;
  const diverging = lo < 0 && hi > 0;
  const flat = !(hi > lo);     // one value everywhere (an all-zero difference): neutral, not a colour
  const m = Math.max(Math.abs(lo), Math.abs(hi)) || 1;
  for (let i = 0; i < R; i++) {
    for (let j = 0; j < C; j++) {
      const v = rows[i][j];
      let rgb;
      if (typeof v === 'string') rgb = v === 'NaN' ? [255, 0, 200] : [0, 0, 0];
      else if (flat) rgb = DIV[2];
      else if (diverging) rgb = ramp(DIV, (v / m + 1) / 2);
      else rgb = ramp(SEQ, hi > lo ? (v - lo) / (hi - lo) : 0.5);
      g.fillStyle = `rgb(${rgb[0]},${rgb[1]},${rgb[2]})`;
      g.fillRect(j * cell, i * cell, cell, cell);
    }
  }
  if (onHover) {
    canvas.addEventListener('mousemove', (ev) => {
      const r = canvas.getBoundingClientRect();
      const j = Math.floor((ev.clientX - r.left) / (r.width / C)), i = Math.floor((ev.clientY - r.top) / (r.height / R));
      if (i >= 0 && i < R && j >= 0 && j < C) onHover(i, j, rows[i][j]);
    });
    canvas.addEventListener('mouseleave', () => onHover(null));
  }
  const scale = h('div', { class: 'heat-scale' },
    h('span', {}, fmt(diverging ? -m : lo, 4)),
    h('i', { style: { background: `linear-gradient(90deg, ${(diverging ? DIV : SEQ).map((c) => `rgb(${c})`).join(',')})` } }),
    h('span', {}, fmt(diverging ? m : hi, 4)),
    h('span', { class: 'muted' }, diverging ? 'diverging around 0' : ''),
    h('span', { class: 'heat-key' }, h('i', { style: { background: 'rgb(255,0,200)' } }), 'NaN'),
    h('span', { class: 'heat-key' }, h('i', { style: { background: '#000' } }), '±Inf'));
  return h('div', { class: 'heat-wrap' }, canvas, scale);
}
