// The graph view's pure logic: what a scope answer means for the crumbs, the info line, a node's
// look and tooltip, the fit transform, and what a state change asks the view to redo.
// No DOM here: these run in node unit tests (tests/web/js/graph-state.test.mjs).
import { kindLabel } from '../../kinds.js';

export const PAGE = 300;
export const NODE_H = 42, GROUP_H = 44, SCOPE_H = 52;

/** The kind a scope or group is drawn in: its most frequent, 'other' only when nothing else. */
export function dominantKind(kinds) {
  let best = 'other', n = -1;
  for (const [k, v] of Object.entries(kinds || {})) if (v > n || (v === n && k !== 'other')) { best = k; n = v; }
  return best;
}

/** The crumbs of a scope path before the server has answered: root, then each level. */
export function pathParents(path) {
  const out = [{ name: 'root', path: '' }];
  let acc = '';
  for (const p of (path ? path.split('/') : [])) {
    acc = acc ? `${acc}/${p}` : p;
    out.push({ name: p, path: acc });
  }
  return out;
}

/** Crumbs to draw: root › … › the last three levels when the path is deeper than five. */
export function crumbParts(parents) {
  if (parents.length <= 5) return parents;
  const hidden = parents.slice(1, parents.length - 3);
  return [parents[0], { name: '…', path: hidden[hidden.length - 1].path, title: hidden.map((p) => p.name).join(' › ') },
    ...parents.slice(parents.length - 3)];
}

/** Watchpoint hits and code-line nodes among the children shown. */
export function childMarks(items) {
  const hits = items.reduce((a, x) => a + (x.marks.hit || 0), 0);
  const line = items.reduce((a, x) => a + (x.marks.forward || 0) + (x.marks.backward || 0), 0);
  return { hits, line };
}

/** Whether the children need a pager, and the begin of the previous and next pages. */
export function pagerOf(children) {
  return { needed: children.total > children.end - children.begin, prev: Math.max(0, children.begin - PAGE),
    next: children.end, first: children.begin === 0, last: children.end >= children.total };
}

/** The structure of a scope answer: a new key means a new layout. */
export function structKey(d) {
  return `${d.path}|${d.children.begin}|${d.children.items.map((c) => c.id).join('\n')}|${d.edges.length}`;
}

/** SVG path of an edge through its points: a cubic for two points, quadratics through bends. */
export function edgePath(pts) {
  if (pts.length === 2) {
    const [[x0, y0], [x1, y1]] = pts;
    const my = (y0 + y1) / 2;
    return `M${x0},${y0} C${x0},${my} ${x1},${my} ${x1},${y1}`;
  }
  let d = `M${pts[0][0]},${pts[0][1]}`;
  for (let i = 1; i < pts.length - 1; i++) {
    const [x, y] = pts[i];
    const [nx, ny] = pts[i + 1];
    d += ` Q${x},${y} ${(x + nx) / 2},${(y + ny) / 2}`;
  }
  const last = pts[pts.length - 1];
  return `${d} L${last[0]},${last[1]}`;
}

/** Where an edge's count label sits: the middle of a straight edge, else its middle point. */
export function edgeLabelAt(points) {
  if (points.length === 2) return [(points[0][0] + points[1][0]) / 2, (points[0][1] + points[1][1]) / 2];
  return points[Math.floor(points.length / 2)];
}

export function edgeWidth(count) { return Math.min(5, 1.2 + Math.log2(count) * 0.7); }

export function childLabel(c) { return c ? (c.type === 'scope' ? c.name + '/' : c.name) : '?'; }

/** The kind a child is drawn in. */
export function childKind(c) { return c.type === 'node' ? c.kind : dominantKind(c.kinds); }

/** CSS classes of a drawn child. */
export function nodeClasses(c, selectedNode) {
  const cls = ['gnode', `t-${c.type}`, `k-${childKind(c)}`];
  if (c.marks.hit) cls.push('has-hit');
  if (c.marks.forward) cls.push('hl-forward');
  if (c.marks.backward) cls.push('hl-backward');
  if (c.type === 'node' && c.id === selectedNode) cls.push('selected');
  return cls;
}

/** The second line of a child: node count, group size and op, or op and kind. */
export function nodeSubtitle(c, fmtCount = String) {
  if (c.type === 'scope') return `${fmtCount(c.count)} node${c.count === 1 ? '' : 's'}`;
  if (c.type === 'group') return `${c.count} × ${c.op_type}`;
  return c.name.startsWith(c.op_type) ? kindLabel(c.kind) : `${c.op_type} · ${kindLabel(c.kind)}`;
}

/** The text the width of a child is measured on, besides its name. */
export function sizeSubtitle(c) {
  return c.type === 'group' ? `${c.count} × ${c.op_type}` : `${c.op_type} · ${c.kind}`;
}

/** The hover text of a child. */
export function tooltipLines(c, { iteration, line }) {
  const lines = [c.type === 'node' ? c.node : c.path];
  if (c.type === 'node') lines.push(`${c.op_type} · ${kindLabel(c.kind)}`);
  else lines.push(Object.entries(c.kinds).map(([k, v]) => `${v} ${kindLabel(k)}`).join(', '));
  if (c.marks.hit) lines.push(`${c.marks.hit} watchpoint hit(s) in iteration ${iteration}`);
  if (c.marks.forward || c.marks.backward) lines.push(`line ${line}: ${c.marks.forward || 0} forward, ${c.marks.backward || 0} backward`);
  lines.push(c.type === 'node' ? 'click to inspect' : 'click to open');
  return lines.join('\n');
}

/** The state change of a click on a child: select a node, open a scope or group. */
export function openPatch(c) {
  if (c.type === 'node') return { node: c.id };
  // A chain of single-child scopes opens in one click (to its only node, selected).
  const patch = { scope: c.open || c.path };
  if (c.select) patch.node = c.select;
  return patch;
}

/** The scale and offset that fit a layout in a box of width x height, under the top bar and
 * above the legend. Too tall or too wide to read when fitted, it keeps a readable scale (0.8:
 * 12 px labels stay about 10 px) and starts at its top (the first nodes in execution order). */
export function fitTransform(lay, width, height, legendH) {
  const W = Math.max(width, 200);
  const top = 44, bottom = legendH + 24;
  const H = Math.max(height - top - bottom, 120);
  const k = Math.max(0.8, Math.min(1.25, (W - 80) / Math.max(lay.width, 1), H / Math.max(lay.height, 1)));
  return {
    k, x: lay.width * k <= W - 40 ? (W - lay.width * k) / 2 : 40, y: top + Math.max(0, (H - lay.height * k) / 2),
    overflows: lay.height * k > H,
  };
}

/** What a change of the shared state asks of the graph view. */
export function updatePlan(changed, watchCount, overlayOn = false) {
  const has = (...keys) => keys.some((k) => changed.has(k));
  const structural = has('dump', 'rank', 'graph', 'scope', 'framework');
  const reload = structural || has('line', 'watch', 'overlay', 'vsRank', 'vsDump')
    || (changed.has('iteration') && (watchCount > 0 || overlayOn));
  return { structural, reload, resetPage: has('dump', 'rank', 'graph'), reveal: changed.has('node'),
    lineChip: changed.has('line'), framework: changed.has('framework'),
    picker: has('dump', 'rank', 'overlay', 'vsRank', 'vsDump') };
}

/** A search text that names a code location (FILE:LINE) rather than a node. */
export function isLocation(q) { return /:\d+$/.test(q); }

/** FILE:LINE shortened to the file's base name. */
export function shortLoc(loc) {
  const i = loc.lastIndexOf(':');
  const file = loc.slice(0, i), line = loc.slice(i + 1);
  const b = file.replace(/\\/g, '/').split('/').pop();
  return `${b}:${line}`;
}
