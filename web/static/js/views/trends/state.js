// Pure logic of the trends view (step ranges, zoom, scales, colours, hit tests). No DOM: tested by
// tests/web/js/trends-state.test.mjs.

/** A step range clamped to the run's [first, last], at least ``minSpan`` steps wide (null: the whole run). */
export function clampRange(range, first, last, minSpan = 4) {
  if (!range) return { start: first, stop: last };
  let start = Math.round(Math.max(first, Math.min(range.start, range.stop)));
  let stop = Math.round(Math.min(last, Math.max(range.start, range.stop)));
  if (stop - start < minSpan) {
    const mid = (start + stop) / 2, half = Math.min(minSpan, last - first) / 2;
    start = Math.max(first, Math.round(mid - half));
    stop = Math.min(last, start + Math.round(2 * half));
    start = Math.max(first, stop - Math.round(2 * half));
  }
  return { start, stop };
}

/** The range after a wheel step at ``at`` (a step): ``factor`` < 1 zooms in around it, > 1 out. */
export function wheelZoom(range, at, factor, first, last) {
  const lo = at - (at - range.start) * factor;
  const hi = at + (range.stop - at) * factor;
  return clampRange({ start: lo, stop: hi }, first, last);
}

/** The step range a drag from pixel ``x0`` to ``x1`` selects (null when under ``minPx`` wide: a click). */
export function dragRange(x0, x1, toStep, minPx = 4) {
  if (Math.abs(x1 - x0) < minPx) return null;
  const a = toStep(Math.min(x0, x1)), b = toStep(Math.max(x0, x1));
  return { start: Math.floor(a), stop: Math.ceil(b) };
}

/** Whether a range is the whole run. */
export function isWhole(range, first, last) {
  return !range || (range.start <= first && range.stop >= last);
}

/** A linear scale from [d0, d1] onto [r0, r1] (a zero-width domain maps to the middle), with its inverse. */
export function scale(d0, d1, r0, r1) {
  const k = d1 === d0 ? 0 : (r1 - r0) / (d1 - d0);
  const f = (v) => (k ? r0 + (v - d0) * k : (r0 + r1) / 2);
  f.invert = (p) => (k ? d0 + (p - r0) / k : d0);
  return f;
}

/** [lo, hi] of the finite numbers of some arrays (with ``log``: of the positive ones), padded 5%; null: none. */
export function extent(arrays, log = false) {
  let lo = Infinity, hi = -Infinity;
  for (const a of arrays) for (const v of a || []) {
    if (typeof v !== 'number' || !Number.isFinite(v) || (log && v <= 0)) continue;
    const y = log ? Math.log10(v) : v;
    if (y < lo) lo = y;
    if (y > hi) hi = y;
  }
  if (lo > hi) return null;
  if (lo === hi) { const d = Math.abs(lo) * 0.1 || 1; return [lo - d, hi + d]; }
  const pad = (hi - lo) * 0.05;
  return [lo - pad, hi + pad];
}

/** The buckets' [x, lo, hi] runs, broken at a bucket with no value: each is one filled band of a curve. */
export function bandRuns(xs, mins, maxs) {
  const runs = [];
  let run = [];
  xs.forEach((x, i) => {
    const a = mins[i], b = maxs[i];
    if (typeof a !== 'number' || typeof b !== 'number') { if (run.length) runs.push(run); run = []; return; }
    run.push([x, a, b]);
  });
  if (run.length) runs.push(run);
  return runs;
}

/** SVG path of a min/max band (a bucket one step wide is drawn ``w`` pixels wide, so a lone spike shows). */
export function bandPath(runs, X, Y, w = 1) {
  let d = '';
  for (const run of runs) {
    const top = run.map(([x, , b]) => `${X(x).toFixed(1)},${Y(b).toFixed(1)}`);
    const bottom = run.slice().reverse().map(([x, a]) => `${(X(x) + (run.length === 1 ? w : 0)).toFixed(1)},${Y(a).toFixed(1)}`);
    d += `M${top.join('L')}L${bottom.join('L')}Z`;
  }
  return d;
}

const STOPS = [[0, [68, 1, 84]], [0.25, [59, 82, 139]], [0.5, [33, 145, 140]], [0.75, [94, 201, 98]], [1, [253, 231, 37]]];

/** A viridis-like colour of ``v`` in [lo, hi] ('' for a missing value). */
export function colorOf(v, lo, hi) {
  if (typeof v !== 'number' || !Number.isFinite(v)) return '';
  const t = hi > lo ? Math.min(1, Math.max(0, (v - lo) / (hi - lo))) : 0.5;
  let i = 1;
  while (i < STOPS.length - 1 && STOPS[i][0] < t) i++;
  const [t0, c0] = STOPS[i - 1], [t1, c1] = STOPS[i];
  const u = (t - t0) / (t1 - t0);
  const c = c0.map((x, k) => Math.round(x + (c1[k] - x) * u));
  return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
}

/** The heatmap cell under a pixel: {row, column, tensor, step, value} or null. */
export function heatCell(heat, px, py, width, height) {
  const rows = heat.rows.length, cols = heat.x.length;
  if (!rows || !cols || px < 0 || py < 0 || px >= width || py >= height) return null;
  const row = Math.floor((py * rows) / height), column = Math.floor((px * cols) / width);
  return { row, column, tensor: heat.rows[row].name, step: heat.x[column], value: heat.values[row][column] };
}

/** The spike nearest a step, within ``tolerance`` steps; null when none is that near. */
export function spikeNear(spikes, step, tolerance) {
  let best = null;
  for (const sp of spikes) {
    const d = Math.abs(sp.step - step);
    if (d <= tolerance && (!best || d < Math.abs(best.step - step))) best = sp;
  }
  return best;
}

/** The graph view's state that opens a cause's tensor at the spike's nearest deep capture (null: none). */
export function deepTarget(spike, cause, rank) {
  if (!spike || !spike.deep) return null;
  return { view: 'graph', rank, graph: spike.deep.graph, iteration: spike.deep.iteration, node: cause ? cause.node ?? null : null,
    io: 'output', slot: 0, scope: '' };
}

/** The index of the bucket holding ``step`` (the last whose first step is at or before it; -1: before all). */
export function bucketAt(xs, step) {
  let lo = 0, hi = xs.length - 1, found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] <= step) { found = mid; lo = mid + 1; } else hi = mid - 1;
  }
  return found;
}
