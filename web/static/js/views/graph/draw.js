// The graph view's SVG: a scope level's edges, their counts and its children, drawn from a scope
// answer and its layout. Clicks are handed to the caller (onOpen); nothing here changes state.
import { put, s, fmt } from '../../dom.js';
import { kinds, kindColor, kindLabel } from '../../kinds.js';
import {
  NODE_H, ROW_H, attachedRows, boxHeight, childKind, childLabel, drawnExtent, edgePath, edgeWidth, nodeClasses,
  nodeOverhang, nodeSubtitle, sizeSubtitle, tooltipLines,
} from './state.js';
import { childHeat } from './overlay.js';
import { placeLabels } from './labels.js';

const FONT_B = '600 12px system-ui, "Liberation Sans", "DejaVu Sans", sans-serif';
const FONT_S = '600 13px system-ui, "Liberation Sans", "DejaVu Sans", sans-serif';
const FONT_SUB = '11px sans-serif';
const FONT_TAG = '600 10px sans-serif';      // the edges' labels, the line pill and the value tag (graph.css)
const FONT_ROW = '10.5px system-ui, "Liberation Sans", "DejaVu Sans", sans-serif';   // an attached row (graph.css .gattach text)
const LABEL_H = 12;                          // an edge label's box: 10 px text and its halo

let measureCtx = null;       // made on first use: importing this module touches no document
function textWidth(text, font) {
  measureCtx ||= document.createElement('canvas').getContext('2d');
  measureCtx.font = font;
  return measureCtx.measureText(text).width;
}

/** The text cut with an ellipsis to fit max pixels. */
function fit(text, max, font) {
  if (textWidth(text, font) <= max) return text;
  let lo = 0, hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (textWidth(text.slice(0, mid) + '…', font) <= max) lo = mid; else hi = mid - 1;
  }
  return text.slice(0, lo) + '…';
}

/** [width, height] a child is laid out with. */
export function sizeOf(c) {
  if (c.type === 'scope') return [Math.min(270, Math.max(160, textWidth(c.name, FONT_S) + 44)), boxHeight(c)];
  let w = Math.max(textWidth(c.name, FONT_B), textWidth(c.ghost ? nodeSubtitle(c) : sizeSubtitle(c), FONT_SUB)) + 34;
  for (const r of attachedRows(c).rows) w = Math.max(w, textWidth(r.name, FONT_ROW) + textWidth(r.type, FONT_ROW) + 58);
  return [Math.min(c.attached && c.attached.length ? 280 : 240, Math.max(118, w)), boxHeight(c)];
}

/** The arrow marker and the shadow filter every drawing uses. */
export function graphDefs() {
  return s('defs', {},
    s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 9, markerHeight: 9, markerUnits: 'userSpaceOnUse', orient: 'auto-start-reverse' },
      s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow-head' })),
    s('filter', { id: 'shadow', x: '-10%', y: '-10%', width: '130%', height: '140%' },
      s('feDropShadow', { dx: 0, dy: 1, stdDeviation: 1.2, 'flood-color': '#101828', 'flood-opacity': 0.12 })));
}

/** Draw a scope level into the (cleared) viewport group; its drawn box [x0, y0, x1, y1] (for Fit). */
export function drawScene(viewport, data, lay, view) {
  const byId = new Map(data.children.items.map((c) => [c.id, c]));
  if (!data.children.items.length) {
    put(viewport, s('text', { x: 0, y: 0, class: 'chart-empty' }, 'This scope has no visible children (try “Routing ops”).'));
  }
  const eg = s('g', { class: 'edges' });
  const lg = s('g', { class: 'edge-labels' });   // drawn after the nodes: a count never hides under one
  const types = new Map(data.edges.map((e) => [`${e.source}\n${e.target}`, e.type || '']));
  const ghosts = new Set(data.edges.filter((e) => e.ghost).map((e) => `${e.source}\n${e.target}`));
  const labels = [];
  for (const e of lay.edges) {
    const type = types.get(`${e.source}\n${e.target}`) || '';
    put(eg, s('path', { d: edgePath(e.points), class: ghosts.has(`${e.source}\n${e.target}`) ? 'edge edge-ghost' : 'edge', 'stroke-width': edgeWidth(e.count), 'marker-end': 'url(#arrow)' },
      s('title', {}, `${e.count} edge${e.count > 1 ? 's' : ''}: ${childLabel(byId.get(e.source))} → ${childLabel(byId.get(e.target))}${type ? `\n${type}` : ''}`)));
    const text = [e.count > 1 ? `${e.count}×` : '', type].filter(Boolean).join(' ');
    if (text) labels.push({ text, type, points: e.points, w: textWidth(text, FONT_TAG), h: LABEL_H });
  }
  const labelBoxes = placeLabels(labels, lay.nodes);
  labels.forEach((l, i) => {
    const b = labelBoxes[i];
    put(lg, s('text', { x: b[0], y: b[3] - 3, class: l.type ? 'edge-count edge-type' : 'edge-count' }, l.text));
  });
  const ng = s('g', { class: 'nodes' });
  const overhangs = new Map();
  for (const n of lay.nodes) {
    const c = byId.get(n.id);
    if (c) put(ng, drawNode(c, n, view, overhangs));
  }
  put(viewport, eg, ng, lg);
  return drawnExtent(lay, overhangs, labelBoxes);
}

/** One child: body, kind strip, name and subtitle, kind bar (scopes), ports, line pill, hit badge;
 * how far it reaches beyond its body goes into `overhangs`. */
function drawNode(c, n, view, overhangs) {
  const hits = c.marks.hit || 0;
  const heat = childHeat(c, view.overlay);
  const g = s('g', { class: nodeClasses(c, view.selected).join(' ') + (heat ? (heat.fill ? ' ov-on' : ' ov-none') : ''),
    transform: `translate(${n.x},${n.y})`, 'data-id': c.id, 'data-type': c.type, tabindex: 0, role: 'button' });
  if (heat && heat.t !== undefined) g.dataset.heat = heat.t.toFixed(4);
  put(g, s('title', {}, tooltipLines(c, view) + (heat ? `\n${heat.title}` : '')));
  if (c.marks.forward || c.marks.backward) put(g, s('rect', { class: 'halo', x: -5, y: -5, width: n.w + 10, height: n.h + 10, rx: 12 }));
  if (c.type === 'group') {
    put(g, s('rect', { class: 'stack2', x: 6, y: 6, width: n.w, height: n.h, rx: 7 }));
    put(g, s('rect', { class: 'stack1', x: 3, y: 3, width: n.w, height: n.h, rx: 7 }));
  }
  put(g, s('rect', { class: 'body', width: n.w, height: n.h, rx: c.type === 'scope' ? 10 : 7, filter: 'url(#shadow)',
    style: heat && heat.fill ? `fill:${heat.fill}` : undefined }));
  if (c.type !== 'scope') {
    put(g, s('path', { class: 'strip', d: `M7,0 H4 Q0,0 0,4 V${n.h - 4} Q0,${n.h} 4,${n.h} H7 Z`, fill: kindColor(childKind(c)) }));
  }
  const scope = c.type === 'scope';
  if (c.attached && c.attached.length) drawRows(g, c, n, view);
  const textX = scope ? 12 : 14;
  const maxW = n.w - textX - (hits ? 20 : 10);
  put(g, s('text', { class: 'n-title', x: textX, y: scope ? 20 : 17 }, fit(c.name, maxW, scope ? FONT_S : FONT_B)));
  put(g, s('text', { class: 'n-sub', x: textX, y: scope ? 36 : 32 }, fit(nodeSubtitle(c, fmt), maxW, FONT_SUB)));
  if (scope) drawKindBar(g, c, n);
  const pillW = drawMarks(g, c, n);
  const tagW = heat && heat.text ? drawHeatValue(g, n, heat.text) : 0;
  overhangs.set(c.id, nodeOverhang(c, n, { pillW, tagW }));
  g.addEventListener('click', (e) => { e.stopPropagation(); view.onOpen(c); });
  g.addEventListener('keydown', (e) => { if (e.key === 'Enter') g.dispatchEvent(new MouseEvent('click')); });
  return g;
}

/** A node's rows: each weight or constant it reads, by name and value type, under its title; a row
 * selects its own node and shows that node's hits and overlay colour; the last may say "+N more". */
function drawRows(g, c, n, view) {
  const { rows, more } = attachedRows(c);
  put(g, s('line', { class: 'a-sep', x1: 7, x2: n.w, y1: NODE_H, y2: NODE_H }));
  rows.forEach((r, i) => {
    const y = NODE_H + 2 + i * ROW_H;
    const heat = childHeat({ id: r.node, type: 'node' }, view.overlay);
    const row = s('g', { class: `gattach k-${r.kind}${r.node === view.selected ? ' selected' : ''}${r.marks.hit ? ' has-hit' : ''}`,
      transform: `translate(7,${y})`, 'data-id': r.node, 'data-kind': r.kind, tabindex: 0, role: 'button' });
    if (heat && heat.t !== undefined) row.dataset.heat = heat.t.toFixed(4);
    put(row, s('title', {}, `${r.node}\n${r.op_type} · ${kindLabel(r.kind)}${r.type ? ` · ${r.type}` : ''}` +
      `${r.marks.hit ? `\n${r.marks.hit} watchpoint hit(s) in iteration ${view.iteration}` : ''}${heat ? `\n${heat.title}` : ''}\nclick to inspect`));
    const w = n.w - 11;
    put(row, s('rect', { class: 'a-body', x: 0, y: 0, width: w, height: ROW_H - 2, rx: 4,
      style: heat && heat.fill ? `fill:${heat.fill}` : undefined }));
    put(row, s('rect', { class: 'a-kind', x: 4, y: 4, width: 7, height: 7, rx: 2, fill: kindColor(r.kind) }));
    const hitW = r.marks.hit ? 16 : 0;
    // the type whole when the name leaves it room, else the name cut first, down to half the row
    const room = Math.max(w * 0.45, w - 29 - hitW - textWidth(r.name, FONT_ROW));
    const typeW = r.type ? Math.min(textWidth(r.type, FONT_ROW), room) : 0;
    put(row, s('text', { class: 'a-name', x: 15, y: 11.5 }, fit(r.name, w - 15 - 14 - typeW - hitW, FONT_ROW)));
    if (r.type) put(row, s('text', { class: 'a-type', x: w - 4 - hitW, y: 11.5, 'text-anchor': 'end' }, fit(r.type, typeW, FONT_ROW)));
    if (r.marks.hit) {
      put(row, s('circle', { class: 'hit-badge', cx: w - 8, cy: (ROW_H - 2) / 2, r: 6 }));
      put(row, s('text', { class: 'hit-text a-hit', x: w - 8, y: (ROW_H - 2) / 2 + 3.5, 'text-anchor': 'middle' }, r.marks.hit > 9 ? '9+' : String(r.marks.hit)));
    }
    row.addEventListener('click', (e) => { e.stopPropagation(); view.onOpen({ type: 'node', id: r.node }); });
    row.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.stopPropagation(); row.dispatchEvent(new MouseEvent('click')); } });
    put(g, row);
  });
  if (more) {
    put(g, s('text', { class: 'a-more', x: 22, y: NODE_H + 2 + rows.length * ROW_H + 11.5 },
      `+${more} more (inputs in the inspector)`));
  }
}

/** A scope's kind distribution bar and its open arrow. */
function drawKindBar(g, c, n) {
  const total = Object.values(c.kinds).reduce((a, b) => a + b, 0) || 1;
  let x = 12;
  const W = n.w - 24;
  for (const k of kinds()) {
    const v = c.kinds[k] || 0;
    if (!v) continue;
    const w = (v / total) * W;
    put(g, s('rect', { x, y: n.h - 10, width: Math.max(w, 1.5), height: 4, fill: kindColor(k) }, s('title', {}, `${v} ${kindLabel(k)}`)));
    x += w;
  }
  put(g, s('text', { class: 'n-open', x: n.w - 14, y: 21, 'text-anchor': 'middle' }, '›'));
}

/** Ports to outside the scope, the code line's pill and the watchpoint hit badge; the pill's width. */
function drawMarks(g, c, n) {
  if (c.external_in) put(g, s('circle', { class: 'port', cx: n.w / 2, cy: 0, r: 3 },
    s('title', {}, `${c.external_in} input${c.external_in > 1 ? 's' : ''} from outside this scope`)));
  if (c.external_out) put(g, s('circle', { class: 'port', cx: n.w / 2, cy: n.h, r: 3 },
    s('title', {}, `${c.external_out} output${c.external_out > 1 ? 's' : ''} used outside this scope`)));
  const fwd = c.marks.forward || 0, bwd = c.marks.backward || 0, hits = c.marks.hit || 0;
  let pillW = 0;
  if (fwd || bwd) {
    const txt = [fwd ? `fwd ${fwd}` : '', bwd ? `bwd ${bwd}` : ''].filter(Boolean).join(' · ');
    const w = pillW = textWidth(txt, FONT_TAG) + 12;
    put(g, s('rect', { class: 'pill', x: 8, y: -8, width: w, height: 15, rx: 7.5 }));
    put(g, s('text', { class: 'pill-text', x: 8 + w / 2, y: 3, 'text-anchor': 'middle' }, txt));
  }
  if (hits) {
    put(g, s('circle', { class: 'hit-badge', cx: n.w - 2, cy: 2, r: 9 }));
    put(g, s('text', { class: 'hit-text', x: n.w - 2, y: 5.5, 'text-anchor': 'middle' }, hits > 99 ? '99+' : String(hits)));
  }
  return pillW;
}

/** The overlay's value of a child, in a tag on its lower right corner; the tag's width. */
function drawHeatValue(g, n, text) {
  const w = textWidth(text, FONT_TAG) + 10;
  put(g, s('rect', { class: 'ov-tag', x: n.w - w - 6, y: n.h - 7, width: w, height: 14, rx: 7 }));
  put(g, s('text', { class: 'ov-tag-text', x: n.w - 6 - w / 2, y: n.h + 3.5, 'text-anchor': 'middle' }, text));
  return w;
}
