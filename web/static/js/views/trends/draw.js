// The trends view's drawings: a decimated curve (min/max band and mean line, spikes marked, drag or
// wheel to zoom) and a tensors x steps heatmap on a canvas. Their arithmetic is in ./state.js.
import { h, s, fmt } from '../../dom.js';
import { bandPath, bandRuns, bucketAt, colorOf, dragRange, extent, heatCell, scale, spikeNear } from './state.js';
import { axis } from '../../ticks.js';

const PAD = { l: 60, r: 30, t: 10, b: 24 };

function axes(el, X, Y, x0, x1, y0, y1, W, H, log) {
  const ya = axis(y0, y1, 4, { log });
  ya.labels.forEach((label, i) => {
    el.append(s('line', { x1: PAD.l, x2: PAD.l + W, y1: Y(ya.at[i]), y2: Y(ya.at[i]), class: 'grid' }));
    el.append(s('text', { x: PAD.l - 6, y: Y(ya.at[i]) + 3, 'text-anchor': 'end', class: 'tick' }, label));
  });
  const xa = axis(x0, x1, 8, { integer: true });
  xa.labels.forEach((label, i) => {
    el.append(s('text', { x: X(xa.at[i]), y: PAD.t + H + 16, 'text-anchor': 'middle', class: 'tick' }, label));
  });
}

/**
 * A curve of decimated buckets ``c`` ({x, min, max, mean, start, stop}). Options: ``log`` (log10 y),
 * ``spikes`` ([{step, ...}] marked; ``onSpike(spike)`` on a click), ``onZoom({start, stop})`` after a drag,
 * ``onWheel(step, factor)`` on the wheel, ``label`` (aria).
 */
export function curveChart(c, { width = 900, height = 200, log = false, spikes = [], onSpike = null, onZoom = null,
  onWheel = null, label = 'curve', selected = null } = {}) {
  const el = s('svg', { class: 'chart trends-chart', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': label });
  const tr = (v) => (typeof v !== 'number' ? null : log ? (v > 0 ? Math.log10(v) : null) : v);
  const ext = extent([c.min, c.max], log);
  if (!ext || !c.x.length) {
    el.append(s('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle', class: 'chart-empty' }, c.x.length ? 'no finite values' : 'no steps in this range'));
    return el;
  }
  const W = width - PAD.l - PAD.r, H = height - PAD.t - PAD.b;
  const x0 = c.start, x1 = Math.max(c.stop + 1, c.start + 1);
  const X = scale(x0, x1, PAD.l, PAD.l + W), Y = scale(ext[0], ext[1], PAD.t + H, PAD.t);
  axes(el, X, Y, x0, x1, ext[0], ext[1], W, H, log);
  const runs = bandRuns(c.x, c.min.map(tr), c.max.map(tr));
  el.append(s('path', { class: 'curve-band', d: bandPath(runs, X, Y, Math.max(1, W / (x1 - x0))) }));
  el.append(s('path', { class: 'curve-mean', d: meanPath(c.x, c.mean.map(tr), X, Y) }));
  for (const sp of spikes) el.append(spikeMark(sp, X(sp.step), PAD.t, H, sp === selected, onSpike));
  // a click (no drag) near a spike picks it: markers are thin
  const near = (step) => { const sp = spikeNear(spikes, step, (x1 - x0) / 100); if (sp && onSpike) onSpike(sp); };
  if (onZoom) dragZoom(el, X, PAD.t, H, width, onZoom, near);
  hoverReadout(el, c, X, PAD.t, H, width);
  if (onWheel) {
    el.addEventListener('wheel', (ev) => {
      ev.preventDefault();
      onWheel(X.invert(svgX(el, ev, width)), ev.deltaY > 0 ? 1.5 : 1 / 1.5);
    }, { passive: false });
  }
  return el;
}

// Under the pointer: a line and the bucket's steps, min, max and mean, written at the plot's top right.
function hoverReadout(el, c, X, top, H, width) {
  const line = s('line', { class: 'hover-line', y1: top, y2: top + H, visibility: 'hidden' });
  const text = s('text', { class: 'tick hover-text', x: width - PAD.r, y: top + 10, 'text-anchor': 'end' });
  el.append(line, text);
  el.addEventListener('mousemove', (ev) => {
    const i = bucketAt(c.x, X.invert(svgX(el, ev, width)));
    if (i < 0) return;
    const last = i + 1 < c.x.length ? c.x[i + 1] - 1 : c.stop;
    line.setAttribute('x1', X(c.x[i])); line.setAttribute('x2', X(c.x[i])); line.setAttribute('visibility', 'visible');
    const steps = last > c.x[i] ? `steps ${fmt(c.x[i])}–${fmt(last)}` : `step ${fmt(c.x[i])}`;
    text.textContent = c.min[i] === c.max[i] ? `${steps}: ${fmt(c.max[i])}` : `${steps}: min ${fmt(c.min[i])}, max ${fmt(c.max[i])}, mean ${fmt(c.mean[i])}`;
  });
  el.addEventListener('mouseleave', () => { line.setAttribute('visibility', 'hidden'); text.textContent = ''; });
}

function meanPath(xs, ys, X, Y) {
  let d = '', pen = false;
  xs.forEach((x, i) => {
    const y = ys[i];
    if (typeof y !== 'number' || !Number.isFinite(y)) { pen = false; return; }
    d += `${pen ? 'L' : 'M'}${X(x).toFixed(1)},${Y(y).toFixed(1)}`;
    pen = true;
  });
  return d;
}

function spikeMark(sp, x, top, H, selected, onSpike) {
  const g = s('g', { class: `spike-marker${selected ? ' sel' : ''}`, 'data-step': sp.step, tabindex: 0, role: 'button',
    'aria-label': `loss spike at step ${sp.step}` });
  g.append(s('rect', { x: x - 5, y: top, width: 10, height: H, class: 'spike-hit', fill: '#000', 'fill-opacity': 0 }));   // a thin line is hard to hit
  g.append(s('line', { x1: x, x2: x, y1: top, y2: top + H, class: 'spike-line' }));
  g.append(s('path', { d: `M${x - 6},${top}L${x + 6},${top}L${x},${top + 9}Z`, class: 'spike-head' }));
  g.append(s('title', {}, `loss spike at step ${sp.step}: ${fmt(sp.loss)} (baseline ${fmt(sp.baseline)}, z ${fmt(sp.z, 3)})\nclick: its causes`));
  const pick = (ev) => { ev.stopPropagation(); if (onSpike) onSpike(sp); };
  g.addEventListener('click', pick);
  g.addEventListener('mousedown', (ev) => ev.stopPropagation());
  g.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') pick(ev); });
  return g;
}

function svgX(el, ev, width) {
  const r = el.getBoundingClientRect();
  return (ev.clientX - r.left) * (width / r.width);
}

// Drag across the plot to zoom to the steps under the drag; the selection shows while dragging.
function dragZoom(el, X, top, H, width, onZoom, onClick) {
  let from = null;
  const sel = s('rect', { class: 'zoom-sel', x: 0, y: top, width: 0, height: H, visibility: 'hidden' });
  el.append(sel);
  el.addEventListener('mousedown', (ev) => { from = svgX(el, ev, width); ev.preventDefault(); });
  el.addEventListener('mousemove', (ev) => {
    if (from === null) return;
    const x = svgX(el, ev, width);
    sel.setAttribute('x', Math.min(from, x)); sel.setAttribute('width', Math.abs(x - from)); sel.setAttribute('visibility', 'visible');
  });
  const end = (ev) => {
    if (from === null) return;
    const x = svgX(el, ev, width);
    const r = dragRange(from, x, X.invert);
    from = null;
    sel.setAttribute('visibility', 'hidden');
    if (r) onZoom(r); else onClick(X.invert(x));
  };
  el.addEventListener('mouseup', end);
  el.addEventListener('mouseleave', () => { from = null; sel.setAttribute('visibility', 'hidden'); });
}

/** The tensors x step buckets heatmap (rows grouped by layer); ``onRow(tensor)`` on a click,
 * ``onWheel(step, factor)`` on the wheel (zoom around the bucket under the pointer). */
export function heatCanvas(heat, { width = 900, onRow = null, onWheel = null } = {}) {
  const rows = heat.rows.length, cols = heat.x.length;
  const H = Math.min(480, Math.max(60, rows * 14));
  const canvas = h('canvas', { class: 'trends-heat-canvas', width, height: H, style: { width: `${width}px`, height: `${H}px`, cursor: 'pointer' } });
  const c2d = canvas.getContext('2d');
  c2d.fillStyle = '#f1f3f5';
  c2d.fillRect(0, 0, width, H);
  const cw = width / Math.max(1, cols), rh = H / Math.max(1, rows);
  heat.values.forEach((row, i) => row.forEach((v, j) => {
    const col = colorOf(v, heat.lo, heat.hi);
    if (!col) return;
    c2d.fillStyle = col;
    c2d.fillRect(j * cw, i * rh, Math.ceil(cw), Math.ceil(rh));
  }));
  c2d.strokeStyle = '#ffffff';
  for (const g of heat.groups.slice(1)) { c2d.beginPath(); c2d.moveTo(0, g.start * rh); c2d.lineTo(width, g.start * rh); c2d.stroke(); }
  const names = h('div', { class: 'trends-heat-rows small mono', style: { height: `${H}px` } },
    rh >= 9 ? heat.rows.map((r, i) => h('div', { class: 'trends-heat-row', title: `${r.name} (${r.role}, layer ${r.layer})`,
      style: { top: `${i * rh}px`, height: `${rh}px`, lineHeight: `${rh}px` } }, r.name))
      : heat.groups.map((g) => h('div', { class: 'trends-heat-row trends-heat-group', title: `layer ${g.name}: ${g.count} tensors`,
        style: { top: `${g.start * rh}px`, height: `${Math.max(10, g.count * rh)}px`, lineHeight: '10px' } }, g.count * rh >= 10 ? g.name : '')));
  const tip = h('div', { class: 'heat-tip small mono' }, 'hover a cell; click a row for its curve');
  canvas.addEventListener('mousemove', (ev) => {
    const cell = heatCell(heat, ev.offsetX, ev.offsetY, canvas.clientWidth || width, H);
    if (cell) tip.textContent = `${cell.tensor} · steps from ${cell.step}: ${heat.agg} ${heat.stat}${heat.log ? ' (log10)' : ''} = ${fmt(cell.value)}`;
  });
  canvas.addEventListener('click', (ev) => {
    const cell = heatCell(heat, ev.offsetX, ev.offsetY, canvas.clientWidth || width, H);
    if (cell && onRow) onRow(cell.tensor);
  });
  canvas.addEventListener('wheel', (ev) => {
    const cell = heatCell(heat, ev.offsetX, ev.offsetY, canvas.clientWidth || width, H);
    if (!cell || !onWheel) return;
    ev.preventDefault();
    onWheel(cell.step, ev.deltaY > 0 ? 1.5 : 1 / 1.5);
  }, { passive: false });
  const legend = h('div', { class: 'trends-heat-legend small muted' }, `${heat.agg} ${heat.stat}${heat.log ? ' (log10 of the magnitude)' : ''}: `,
    h('span', { class: 'swatch', style: { background: colorOf(heat.lo, heat.lo, heat.hi) } }), ` ${fmt(heat.lo)} to `,
    h('span', { class: 'swatch', style: { background: colorOf(heat.hi, heat.lo, heat.hi) } }), ` ${fmt(heat.hi)}; grey: no value`);
  return h('div', { class: 'trends-heat' }, h('div', { class: 'trends-heat-wrap' }, names, canvas), legend, tip);
}
