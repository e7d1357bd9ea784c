// The 1,000-rank views' drawings: a band chart (min-max, quartiles, median, outlier ranks named) and
// a rank x iteration heatmap on a canvas. Their arithmetic is in ./state.js.
import { h, s, fmt } from '../../dom.js';
import { areaPath, bandExtent, cellAt, cellTarget, cellTensor, groupOf } from './state.js';
import { leftPad } from '../../charts.js';
import { axis } from '../../ticks.js';

const PAD = { l: 52, r: 64, t: 10, b: 26 };
const OUTLIER_COLORS = ['#e03131', '#e8590c', '#ae3ec9', '#c2255c', '#f08c00', '#1098ad'];

/** A band chart of ``band`` (debugger.views.ranks.band); ``onRank(rank, iteration)`` on an outlier's click. */
export function bandChart(band, { width = 520, height = 240, marker = null, onRank = null, onPick = null } = {}) {
  const el = s('svg', { class: 'chart band-chart', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img',
    'aria-label': `band of ${band.ranks} ranks` });
  const ext = bandExtent(band);
  const xs = band.iterations;
  if (!ext || !xs.length) {
    el.append(s('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle', class: 'chart-empty' }, 'no finite values'));
    return el;
  }
  let [y0, y1] = ext;
  const pad = (y1 - y0) * 0.06; y0 -= pad; y1 += pad;
  let x0 = xs[0], x1 = xs[xs.length - 1];
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  const ya = axis(y0, y1, 4);
  const L = leftPad(ya.labels);
  const W = width - L - PAD.r, H = height - PAD.t - PAD.b;
  const X = (v) => L + ((v - x0) / (x1 - x0)) * W;
  const Y = (v) => PAD.t + H - ((v - y0) / (y1 - y0)) * H;
  ya.at.forEach((t, i) => {
    el.append(s('line', { x1: L, x2: L + W, y1: Y(t), y2: Y(t), class: 'grid' }));
    el.append(s('text', { x: L - 6, y: Y(t) + 3, 'text-anchor': 'end', class: 'tick' }, ya.labels[i]));
  });
  const xa = axis(xs[0], xs[xs.length - 1], 10, { integer: true });
  xa.labels.forEach((label, i) => el.append(s('text', { x: X(xa.at[i]), y: height - 8, 'text-anchor': 'middle', class: 'tick' }, label)));
  if (marker !== null && marker !== undefined) el.append(s('line', { x1: X(marker), x2: X(marker), y1: PAD.t, y2: PAD.t + H, class: 'marker' }));
  el.append(s('path', { class: 'band-range', d: areaPath(xs, band.min, band.max, X, Y), fill: '#4c6ef5', 'fill-opacity': 0.12 }));
  el.append(s('path', { class: 'band-iqr', d: areaPath(xs, band.q1, band.q3, X, Y), fill: '#4c6ef5', 'fill-opacity': 0.3 }));
  el.append(s('path', { class: 'band-median', d: linePath(xs.map((x, i) => [x, band.median[i]]), X, Y), fill: 'none', stroke: '#3b5bdb', 'stroke-width': 2 }));
  const taken = [];   // label positions so far: ranks ending at one place get stacked names
  band.outliers.forEach((o, k) => el.append(outlierMark(o, OUTLIER_COLORS[k % OUTLIER_COLORS.length], X, Y, PAD.t + H, onRank, taken)));
  if (onPick) {
    el.addEventListener('click', (ev) => {
      if (ev.target.closest('.band-outlier')) return;
      const r = el.getBoundingClientRect();
      const vx = x0 + (((ev.clientX - r.left) * (width / r.width) - L) / W) * (x1 - x0);
      onPick(xs.reduce((a, b) => (Math.abs(b - vx) < Math.abs(a - vx) ? b : a)));
    });
  }
  return el;
}

function linePath(points, X, Y) {
  let d = '', pen = false;
  for (const [x, y] of points) {
    if (typeof y !== 'number' || !Number.isFinite(y)) { pen = false; continue; }
    d += `${pen ? 'L' : 'M'}${X(x).toFixed(1)},${Y(y).toFixed(1)}`;
    pen = true;
  }
  return d;
}

// An outlier rank: its line, its points (a non-finite value drawn as a cross on the axis) and its name.
function outlierMark(o, color, X, Y, floor, onRank, taken) {
  const g = s('g', { class: 'band-outlier', 'data-rank': o.rank });
  g.append(s('path', { d: linePath(o.points, X, Y), fill: 'none', stroke: color, 'stroke-width': 1.5, 'stroke-dasharray': '4 2' }));
  let last = null;
  for (const [x, y] of o.points) {
    const bad = typeof y !== 'number';
    const cy = bad ? floor - 4 : Y(y);
    const mark = bad ? s('text', { x: X(x), y: cy, 'text-anchor': 'middle', fill: color, class: 'band-nan' }, '✕')
      : s('circle', { cx: X(x), cy, r: 3.5, fill: color });
    mark.append(s('title', {}, `rank ${o.rank} @ iteration ${x}: ${bad ? 'NaN/Inf' : fmt(y)}\nclick: open rank ${o.rank}`));
    mark.addEventListener('click', (ev) => { ev.stopPropagation(); if (onRank) onRank(o.rank, x); });
    g.append(mark);
    last = [X(x), cy];
  }
  if (last) {
    let y = last[1] + 3;
    while (taken.some(([tx, ty]) => Math.abs(tx - last[0]) < 40 && Math.abs(ty - y) < 11)) y -= 12;
    taken.push([last[0], y]);
    g.append(s('text', { x: last[0] + 6, y, fill: color, class: 'band-label' }, `rank ${o.rank}`));
  }
  g.addEventListener('click', () => onRank && onRank(o.rank, o.iterations[0] ?? o.points[0]?.[0]));
  return g;
}

/** The rank x iteration heatmap on a canvas: red = hits, purple = divergence; ``onCell(target)`` with the
 * state a click opens (cellTarget: the cell's tensor at its rank and iteration). */
export function heatCanvas(heat, { width = 520, height = null, onCell = null } = {}) {
  const rows = heat.rows.length, cols = heat.iterations.length;
  const H = height || Math.min(600, Math.max(120, rows * 4));
  const wrap = h('div', { class: 'heat-wrap', style: { position: 'relative', paddingLeft: '104px' } });
  const canvas = h('canvas', { class: 'rank-heat', width, height: H, style: { width: `${width}px`, height: `${H}px`, cursor: 'crosshair' } });
  const c2d = canvas.getContext('2d');
  c2d.fillStyle = '#f1f3f5';
  c2d.fillRect(0, 0, width, H);
  const cw = width / Math.max(1, cols), rh = H / Math.max(1, rows);
  const maxHits = Math.max(1, ...heat.cells.map((c) => c[2]));
  c2d.strokeStyle = '#ced4da';   // group borders first: a marked cell stays visible on one
  for (const g of heat.groups.slice(1)) { c2d.beginPath(); c2d.moveTo(0, g.start * rh); c2d.lineTo(width, g.start * rh); c2d.stroke(); }
  for (const [i, j, hits, div] of heat.cells) {
    c2d.fillStyle = div ? '#7048e8' : `rgba(224, 49, 49, ${0.35 + (0.65 * hits) / maxHits})`;
    const tall = Math.max(3, rh);   // a row under a pixel high (1,000 ranks) still shows its mark
    c2d.fillRect(j * cw, Math.max(0, (i + 0.5) * rh - tall / 2), Math.max(1, cw - (cw > 3 ? 1 : 0)), tall);
  }
  for (const g of heat.groups) {
    wrap.append(h('div', { class: 'heat-group small muted', style: { position: 'absolute', left: '0', width: '100px', top: `${g.start * rh}px`, overflow: 'hidden', whiteSpace: 'nowrap' } }, g.name));
  }
  const tip = h('div', { class: 'heat-tip small mono' }, 'hover a cell');
  canvas.addEventListener('mousemove', (ev) => {
    const cell = cellAt(heat, ev.offsetX, ev.offsetY, width, H);
    if (!cell) return;
    const found = heat.cells.find((c) => c[0] === cell.row && c[1] === cell.column);
    const t = cellTensor(heat, cell.row, cell.column);
    tip.textContent = `rank ${cell.rank} (${groupOf(heat, cell.row)?.name || ''}), iteration ${cell.iteration}: ${found ? `${found[2]} hit(s), ${found[3]} divergent` : 'nothing'}${t ? `; click: ${t.node}` : ''}`;
  });
  canvas.addEventListener('click', (ev) => {
    const cell = cellAt(heat, ev.offsetX, ev.offsetY, width, H);
    if (cell && onCell) onCell(cellTarget(heat, cell));
  });
  wrap.append(canvas);
  return h('div', { class: 'heat-block' }, wrap, tip);
}
