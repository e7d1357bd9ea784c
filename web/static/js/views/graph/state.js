// The graph view's pure logic: what a scope answer means for the crumbs, the info line, a node's
// look and tooltip, the fit transform, and what a state change asks the view to redo.
// No DOM here: these run in node unit tests (tests/web/js/graph-state.test.mjs).
import { kindLabel } from '../../kinds.js';

export const PAGE = 300;
export const NODE_H = 42, GROUP_H = 44, SCOPE_H = 52;
export const ROW_H = 17, ROWS_MAX = 4;     // a node's rows of attached weights and constants

/** The attached rows a node draws (its weights and constants, as Netron draws initializers): the first
 * ROWS_MAX, and how many more a "+N more" row stands for. */
export function attachedRows(c) {
  const all = (c && c.attached) || [];
  const shown = all.length > ROWS_MAX ? all.slice(0, ROWS_MAX - 1) : all;
  return { rows: shown, more: all.length - shown.length };
}

/** The height of a child's box: a node grows a row per attached input it draws. */
export function boxHeight(c) {
  if (c.type === 'scope') return SCOPE_H;
  if (c.type === 'group') return GROUP_H;
  const { rows, more } = attachedRows(c);
  const n = rows.length + (more ? 1 : 0);
  return n ? NODE_H + 2 + n * ROW_H + 8 : NODE_H;     // 8: room for the overlay's value tag
}

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

/** Crumbs to draw, with the `hide` levels after the root folded into one '…' crumb (a row too narrow
 * for every level folds its middle first); the scope and its parent are never folded. */
export function crumbParts(parents, hide = 0) {
  const n = Math.max(0, Math.min(hide, crumbFoldMax(parents.length)));
  if (!n) return parents;
  const hidden = parents.slice(1, 1 + n);
  const deepest = hidden[hidden.length - 1];
  return [parents[0], { name: '…', path: deepest.path, title: deepest.path,
    levels: hidden.map((p) => ({ name: p.name, path: p.path })) },
    ...parents.slice(1 + n)];
}

/** How many middle crumbs a path of `count` levels (root included) can fold at most. */
export function crumbFoldMax(count) { return Math.max(0, count - 3); }

/** Watchpoint hits and code-line nodes among the children shown. */
export function childMarks(items) {
  const hits = items.reduce((a, x) => a + (x.marks.hit || 0), 0);
  const line = items.reduce((a, x) => a + (x.marks.forward || 0) + (x.marks.backward || 0), 0);
  return { hits, line };
}

/** What the info line offers when the user's list is empty and the triage found problems (the graph then
 * draws no hit badge for them): its words and the preset to watch again; null otherwise (the triage's own
 * list in use: its hits fill in when it is done). */
export function triageOffer(watchCount, triage, source = { from: 'user' }) {
  if (source && source.from === 'triage') return null;
  if (watchCount || !triage || !triage.findings || !triage.findings.length) return null;
  const n = triage.findings.length;
  return { text: `No watchpoint set · triage found ${n} problem${n === 1 ? '' : 's'}:`, preset: triage.preset };
}

/** Whether the children need a pager, and the begin of the previous and next pages. */
export function pagerOf(children) {
  return { needed: children.total > children.end - children.begin, prev: Math.max(0, children.begin - PAGE),
    next: children.end, first: children.begin === 0, last: children.end >= children.total };
}

/** A scope answer with the focused node's neighbours from outside the level (its `neighbours`) drawn
 * as children of their own (`ghost`) and joined to it by edges. */
export function withNeighbours(d) {
  if (!d.neighbours || !d.neighbours.items.length) return d;
  const ghosts = d.neighbours.items.map((n) => ({ ...n, ghost: true, marks: {} }));
  return { ...d, children: { ...d.children, items: d.children.items.concat(ghosts) },
    edges: d.edges.concat(d.neighbours.edges.map((e) => ({ ...e, ghost: true }))) };
}

/** The id of the child that shows node `id`: the child itself, or the node whose rows list it. */
export function childShowing(items, id) {
  if (!id) return null;
  const c = items.find((x) => x.id === id && !x.ghost) || items.find((x) => (x.attached || []).some((r) => r.node === id));
  return c ? c.id : null;
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
  if (c.ghost) cls.push('t-ghost');
  return cls;
}

/** The second line of a child: node count, group size and op, or op and kind; for a neighbour from
 * outside the level, where it is. */
export function nodeSubtitle(c, fmtCount = String) {
  if (c.ghost) return `${c.side === 'in' ? 'input from' : 'read in'} ${c.scope || 'root'}`;
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
  if (c.ghost) return `${c.node}\n${c.op_type} · ${kindLabel(c.kind)}\noutside this level: click to open ${c.place || 'the root'}`;
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
  if (c.ghost) return { scope: c.place, node: c.id };
  if (c.type === 'node') return { node: c.id };
  // A chain of single-child scopes opens in one click (to its only node, selected).
  const patch = { scope: c.open || c.path };
  if (c.select) patch.node = c.select;
  return patch;
}

/** How far a child's drawing reaches beyond its body box, [left, top, right, bottom] px: the halo of
 * a code line's nodes, a group's stacked rectangles, the hit badge, the line pill, the ports and the
 * overlay's value tag. `pillW` and `tagW` are the measured widths of the pill and the tag (0: none). */
export function nodeOverhang(c, n, { pillW = 0, tagW = 0 } = {}) {
  const o = [0, 0, 0, 0];
  const reach = (l, t, r, b) => { o[0] = Math.max(o[0], l); o[1] = Math.max(o[1], t); o[2] = Math.max(o[2], r); o[3] = Math.max(o[3], b); };
  if (c.marks.forward || c.marks.backward) reach(5, 5, 5, 5);
  if (c.type === 'group') reach(0, 0, 6, 6);                     // the stack: two rectangles 3 and 6 px off
  if (c.external_in) reach(0, 3, 0, 0);
  if (c.external_out) reach(0, 0, 0, 3);
  if (c.marks.hit) reach(0, 7, 7, 0);                            // a badge of radius 9 at (w - 2, 2)
  if (pillW) reach(0, 8, Math.max(0, 8 + pillW - n.w), 0);
  if (tagW) reach(Math.max(0, tagW + 6 - n.w), 0, 0, 7);
  return o;
}

/** The box [x0, y0, x1, y1] of everything drawn: each node's box grown by its overhang (a Map of
 * id to [l, t, r, b]), and extra boxes such as the edges' labels. */
export function drawnExtent(lay, overhangs = new Map(), boxes = []) {
  let x0 = 0, y0 = 0, x1 = lay.width, y1 = lay.height;
  for (const n of lay.nodes) {
    const [l, t, r, b] = overhangs.get(n.id) || [0, 0, 0, 0];
    x0 = Math.min(x0, n.x - l); y0 = Math.min(y0, n.y - t);
    x1 = Math.max(x1, n.x + n.w + r); y1 = Math.max(y1, n.y + n.h + b);
  }
  for (const [bx0, by0, bx1, by1] of boxes) {
    x0 = Math.min(x0, bx0); y0 = Math.min(y0, by0); x1 = Math.max(x1, bx1); y1 = Math.max(y1, by1);
  }
  return [x0, y0, x1, y1];
}

/** The scale and offset that fit a drawing (its box `extent`, the layout's own box by default) in
 * a box of width x height, under the top bar and above the legend. Too tall or too wide to read
 * when fitted, it keeps a readable scale (0.8: 12 px labels stay about 10 px) and starts at its top
 * (the first nodes in execution order) and, when wider than the box, 40 px from its left edge. */
export function fitTransform(lay, width, height, legendH, extent = [0, 0, lay.width, lay.height]) {
  const [x0, y0, x1, y1] = extent;
  const ew = x1 - x0, eh = y1 - y0;
  const W = Math.max(width, 200);
  const top = 44, bottom = legendH + 24;
  const H = Math.max(height - top - bottom, 120);
  const k = Math.max(0.8, Math.min(1.25, (W - 80) / Math.max(ew, 1), H / Math.max(eh, 1)));
  return {
    // centred while it fits with 8 px to spare each side, else 40 px in from the left
    k, x: (ew * k <= W - 16 ? (W - ew * k) / 2 : 40) - x0 * k, y: top + Math.max(0, (H - eh * k) / 2) - y0 * k,
    overflows: eh * k > H,
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
