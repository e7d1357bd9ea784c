// The graph's overlay controls: the "Colour by" picker (with the rank or dump a difference is taken
// against), the legend's scale, and the minimap of a level larger than the view.
import { api } from '../../api.js';
import { state, set, ctx } from '../../state.js';
import { put, h, s, clear } from '../../dom.js';
import { kindColor } from '../../kinds.js';
import { childKind } from './state.js';
import {
  centreOn, defaultVsRank, heatColor, legendGradient, noneAbove, scaleEnds, scaleT, shortValue, spills, viewRect, worstChild,
} from './overlay-state.js';

let metrics = null;       // GET /api/overlays, asked once

/** The "Colour by" picker; ``box.refresh()`` redraws it for the current dump and rank. */
export function createPicker() {
  const metric = h('select', { class: 'input overlay-select', 'aria-label': 'colour by',
    title: 'Colour the nodes by a number at this iteration; a scope takes its worst node' });
  const vs = h('select', { class: 'input overlay-vs', 'aria-label': 'compare with', hidden: true });
  metric.addEventListener('change', () => set(pickPatch(metric.value)));
  vs.addEventListener('change', () => set(state.overlay === 'rank_diff'
    ? { vsRank: parseInt(vs.value, 10) } : { vsDump: vs.value }));
  const box = h('label', { class: 'overlay-box' }, h('span', { class: 'muted' }, 'Colour'), metric, vs);
  box.refresh = () => fillPicker(metric, vs);
  (metrics ? Promise.resolve() : api.overlays().then((m) => { metrics = m.items; })).then(box.refresh)
    .catch(() => { box.hidden = true; });
  return box;
}

function ranksOfDump() {
  const d = ctx.dumps.find((x) => x.id === state.dump);
  return d ? d.ranks : [];
}

function pickPatch(name) {
  if (!name) return { overlay: null, vsRank: null, vsDump: null };
  if (name === 'rank_diff') return { overlay: name, vsRank: state.vsRank ?? defaultVsRank(ranksOfDump(), state.rank), vsDump: null };
  if (name === 'run_diff') {
    const other = ctx.dumps.find((x) => x.id !== state.dump);
    return { overlay: name, vsDump: state.vsDump || (other ? other.id : null), vsRank: null };
  }
  return { overlay: name, vsRank: null, vsDump: null };
}

function fillPicker(metric, vs) {
  if (!metrics) return;
  const ranks = ranksOfDump();
  const usable = (m) => (m.needs === 'rank' ? ranks.length > 1 : m.needs === 'run' ? ctx.dumps.length > 1 : true);
  put(clear(metric), h('option', { value: '' }, 'nothing'),
    metrics.map((m) => h('option', { value: m.name, disabled: !usable(m), title: m.about, selected: m.name === state.overlay },
      m.needs ? `${m.label}…` : m.label)));
  metric.value = state.overlay || '';
  vs.hidden = !(state.overlay === 'rank_diff' || state.overlay === 'run_diff');
  if (state.overlay === 'rank_diff') {
    put(clear(vs), ranks.filter((r) => r !== state.rank).map((r) => h('option', { value: r }, `rank ${r}`)));
    vs.value = String(state.vsRank);
  } else if (state.overlay === 'run_diff') {
    put(clear(vs), ctx.dumps.filter((d) => d.id !== state.dump).map((d) => h('option', { value: d.id }, d.id)));
    vs.value = state.vsDump || '';
  }
}

/** The legend's overlay section for a scope answer (empty when no overlay is drawn). */
export function renderScale(el, data) {
  clear(el);
  const o = data && data.overlay;
  el.hidden = !o;
  if (!o) return;
  const title = h('div', { class: 'legend-title' }, `Colour: ${o.label}${vsText()}`);
  if (o.missing || o.pending) {
    put(el, title, h('div', { class: 'ov-note' }, o.missing || `iteration ${o.iteration} is still being written: its numbers come once it is complete`));
    return;
  }
  const ends = scaleEnds(o);
  const worst = worstChild(data.children.items, o);
  put(el, title,
    ends ? h('div', { class: 'ov-scale' }, h('span', { class: 'ov-lo' }, ends.lo),
      h('i', { class: 'ov-bar', style: { background: legendGradient() } }), h('span', { class: 'ov-hi' }, ends.hi),
      ends.log ? h('span', { class: 'faint' }, 'log scale') : null)
      : h('div', { class: 'ov-note' }, o.note || noneAbove(o.label, o.iteration)),
    h('div', { class: 'ov-note' }, h('i', { class: 'ov-none' }), 'no value (does not apply, or not dumped)'),
    worst ? h('div', { class: 'ov-worst' }, 'Worst here: ', h('b', {}, worst.name), ` ${shortValue(worst.value, o.share)}`) : null);
}

function vsText() {
  if (state.overlay === 'rank_diff') return ` (vs rank ${state.vsRank})`;
  if (state.overlay === 'run_diff') return ` (vs ${state.vsDump})`;
  return '';
}

/** The fill and value text of one child under the overlay (null: no overlay drawn). */
export function childHeat(c, overlay) {
  if (!overlay || overlay.missing || overlay.pending) return null;
  const o = overlay.children[c.id];
  if (!o) return { fill: null, text: null, title: `${overlay.label}: no value` };
  const t = scaleT(o.value, overlay.scale);
  const where = c.type === 'node' ? '' : ` (worst: ${o.node})`;
  return { fill: heatColor(t), t, text: shortValue(o.value, overlay.share),
    title: `${overlay.label}: ${shortValue(o.value, overlay.share)}${where}` };
}

// -- minimap ----------------------------------------------------------------------------------------
const MINI_W = 180, MINI_H = 120;

/** A minimap in ``canvas`` following ``g.pz``; ``mini.draw(g)`` after each layout, ``mini.sync(g)`` after each move. */
export function createMinimap(canvas) {
  const svg = s('svg', { class: 'minimap', width: MINI_W, height: MINI_H, 'aria-label': 'minimap', style: 'display:none' });
  const nodes = s('g', {});
  const view = s('rect', { class: 'mini-view' });
  put(svg, nodes, view);
  canvas.append(svg);
  const mini = { svg, k: 1, ox: 0, oy: 0 };
  mini.draw = (g) => drawMini(mini, nodes, g);
  mini.sync = (g) => syncMini(mini, view, g);
  svg.addEventListener('click', (e) => {
    if (!mini.g) return;
    const r = svg.getBoundingClientRect();
    const px = (e.clientX - r.left - mini.ox) / mini.k, py = (e.clientY - r.top - mini.oy) / mini.k;
    const c = mini.g.svg.getBoundingClientRect();
    mini.g.pz.tf = centreOn(px, py, mini.g.pz.tf.k, c.width, c.height);
    mini.g.pz.userMoved = true;
    mini.g.pz.apply();
  });
  return mini;
}

function drawMini(mini, group, g) {
  clear(group);
  mini.g = g;
  if (!g.lay || !g.data) return;
  mini.k = Math.min((MINI_W - 8) / Math.max(g.lay.width, 1), (MINI_H - 8) / Math.max(g.lay.height, 1));
  mini.ox = (MINI_W - g.lay.width * mini.k) / 2;
  mini.oy = (MINI_H - g.lay.height * mini.k) / 2;
  const byId = new Map(g.data.children.items.map((c) => [c.id, c]));
  for (const n of g.lay.nodes) {
    const c = byId.get(n.id);
    if (!c) continue;
    const heat = childHeat(c, g.data.overlay);
    put(group, s('rect', { x: mini.ox + n.x * mini.k, y: mini.oy + n.y * mini.k, width: Math.max(1.5, n.w * mini.k),
      height: Math.max(1.5, n.h * mini.k), fill: heat ? (heat.fill || '#e9ecef') : kindColor(childKind(c)) }));
  }
  syncMini(mini, null, g);
}

function syncMini(mini, viewEl, g) {
  const view = viewEl || mini.svg.querySelector('.mini-view');
  const c = g.svg.getBoundingClientRect();
  const shown = spills(g.lay, g.pz.tf, c.width, c.height);
  mini.svg.style.display = shown ? '' : 'none';     // an SVG element has no `hidden` property
  if (!shown) return;
  const v = viewRect(g.pz.tf, c.width, c.height);
  view.setAttribute('x', mini.ox + v.x * mini.k);
  view.setAttribute('y', mini.oy + v.y * mini.k);
  view.setAttribute('width', v.w * mini.k);
  view.setAttribute('height', v.h * mini.k);
}
