// Pure logic of the 1,000-rank views (band, heatmap, virtualised Ranks list). No DOM: tested by
// tests/web/js/rankviews-state.test.mjs.

/** The y range a band chart needs: its min/max envelope and the outliers' finite values. */
export function bandExtent(band) {
  const ys = [...band.min, ...band.max];
  for (const o of band.outliers) for (const [, y] of o.points) ys.push(y);
  const fin = ys.filter((y) => typeof y === 'number' && Number.isFinite(y));
  if (!fin.length) return null;
  let lo = Math.min(...fin), hi = Math.max(...fin);
  if (lo === hi) { const d = Math.abs(lo) * 0.1 || 1; lo -= d; hi += d; }
  return [lo, hi];
}

/** SVG path of the area between two series (null breaks the area). */
export function areaPath(xs, lower, upper, X, Y) {
  let d = '';
  let run = [];
  const flush = () => {
    if (!run.length) return;
    d += `M${run.map((i) => `${X(xs[i]).toFixed(1)},${Y(upper[i]).toFixed(1)}`).join('L')}`;
    d += `L${run.slice().reverse().map((i) => `${X(xs[i]).toFixed(1)},${Y(lower[i]).toFixed(1)}`).join('L')}Z`;
    run = [];
  };
  xs.forEach((_, i) => { if (lower[i] === null || upper[i] === null) flush(); else run.push(i); });
  flush();
  return d;
}

/** The heatmap cell under a point: {rank, iteration} or null (canvas of width x height pixels). */
export function cellAt(heat, px, py, width, height) {
  const rows = heat.rows.length, cols = heat.iterations.length;
  if (!rows || !cols || px < 0 || py < 0 || px >= width || py >= height) return null;
  const i = Math.floor((py * rows) / height), j = Math.floor((px * cols) / width);
  return { rank: heat.rows[i], iteration: heat.iterations[j], row: i, column: j };
}

/** The tensor a heatmap cell opens ({graph, node, io, slot}: its divergent tensor, else its first hit's),
 * null when the server named none (a triage of an older server). */
export function cellTensor(heat, row, column) {
  const found = (heat.opens || []).find((o) => o[0] === row && o[1] === column);
  return found ? heat.tensors[found[2]] || null : null;
}

/** Where a click on a heatmap cell goes: the graph at the cell's rank and iteration, focused on the
 * cell's tensor (not the graph's root, which says nothing of what diverged). */
export function cellTarget(heat, cell) {
  const t = cellTensor(heat, cell.row, cell.column);
  const at = { view: 'graph', rank: cell.rank, iteration: cell.iteration, scope: '' };
  return t ? { ...at, graph: t.graph, node: t.node, io: t.io, slot: t.slot } : { ...at, node: null };
}

/** The group a heatmap row belongs to. */
export function groupOf(heat, row) {
  return heat.groups.find((g) => row >= g.start && row < g.start + g.count) || null;
}

/** Rows of a virtual list to draw: [first, last) with ``overscan`` rows either side. */
export function visibleRange(scrollTop, viewHeight, rowHeight, total, overscan = 6) {
  const first = Math.max(0, Math.floor(scrollTop / rowHeight) - overscan);
  const last = Math.min(total, Math.ceil((scrollTop + viewHeight) / rowHeight) + overscan);
  return [first, Math.max(first, last)];
}

/** Which pages (of ``size`` rows) cover [first, last). */
export function pagesFor(first, last, size) {
  const out = [];
  for (let p = Math.floor(first / size); p * size < last; p++) out.push(p);
  return out;
}

/** Ranks (or iterations) as runs ("0–2, 5, 7–999"), at most ``max`` runs then "… (N ranks)": 1,000
 * ranks stay one short line. */
export function rankRanges(ranks, max = 8, unit = 'ranks') {
  const xs = [...new Set(ranks)].sort((a, b) => a - b);
  const runs = [];
  for (const x of xs) {
    const last = runs[runs.length - 1];
    if (last && x === last[1] + 1) last[1] = x; else runs.push([x, x]);
  }
  const text = runs.slice(0, max).map(([a, b]) => (a === b ? String(a) : `${a}–${b}`)).join(', ');
  return runs.length > max ? `${text}, … (${xs.length} ${unit})` : text;
}
