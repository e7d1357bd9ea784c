// Graph pane: the children of one scope, laid out in a worker, drawn as SVG with pan and zoom.
// Scopes and folded groups open on click; nodes select; marks show watchpoint hits of the
// current iteration and the nodes of the chosen code line.
// Split by job: graph/state.js (pure logic), graph/draw.js (the SVG), graph/search.js (the search
// box), graph/layout-run.js (the worker); this module builds the pane and wires its events.
import { api } from '../api.js';
import { state, set, ctx } from '../state.js';
import { put, h, s, clear, debounce, errorBox, toast, kindSwatch } from '../dom.js';
import { kinds } from '../kinds.js';
import { createInspector } from '../components/inspector.js';
import { createPanZoom } from '../components/panzoom.js';
import { startWorker, runLayout } from './graph/layout-run.js';
import { drawScene, graphDefs, sizeOf } from './graph/draw.js';
import { createSearch } from './graph/search.js';
import { createMinimap, createPicker, renderScale } from './graph/overlay.js';
import { overlayArgs } from './graph/overlay-state.js';
import {
  childMarks, childShowing, crumbFoldMax, crumbParts, fitTransform, openPatch, pagerOf, pathParents, shortLoc, structKey,
  triageOffer, updatePlan, withNeighbours,
} from './graph/state.js';
import { centreOn } from './graph/overlay-state.js';
import { waitTriage } from './triage.js';
import { useTriageWatchpoints } from './triage/cards.js';


export function mount(root) {
  startWorker();
  const g = buildPane();
  put(root, g.el);
  g.inspector = createInspector(g.inspectorEl, { context: 'graph' });
  g.pz = createPanZoom(g.svg, g.viewport);
  g.mini = createMinimap(g.canvas);
  const apply = g.pz.apply;
  g.pz.apply = () => { apply(); g.mini.sync(g); };
  Object.assign(g, { data: null, lay: null, structKey: null, begin: 0, loadSeq: 0 });
  wireEvents(g);
  renderLineChip(g);
  load(g).then(() => { if (state.node) reveal(g); });
  g.inspector.render();
  return {
    update: (changed) => update(g, changed),
    destroy() {
      g.destroyed = true; g.inspector.destroy(); g.pz.destroy(); window.removeEventListener('resize', g.onResize);
      g.controlsSeen.disconnect();
      document.removeEventListener('pointerdown', g.onPointer); document.removeEventListener('keydown', g.onKey);
    },
  };
}

// -- building the pane --------------------------------------------------------------------------
function buildPane() {
  const g = {
    crumbs: h('div', { class: 'crumbs' }),
    lineChip: h('span', { class: 'line-chip', hidden: true }),
    fwToggle: h('input', { type: 'checkbox', checked: state.framework }),
    svg: s('svg', { class: 'graph-svg' }),
    viewport: s('g', { class: 'viewport' }),
    overlay: h('div', { class: 'graph-overlay', hidden: true }),
    info: h('div', { class: 'graph-info' }),
    offer: h('span', { class: 'triage-offer', hidden: true }),
    pager: h('div', { class: 'graph-pager', hidden: true }),
    scaleEl: h('div', { class: 'legend-overlay', hidden: true }),
    picker: createPicker(),
    inspectorEl: h('aside', { class: 'inspector' }),
  };
  g.legendBox = buildLegend(g.scaleEl);
  put(g.svg, graphDefs(), g.viewport);
  const zoomBox = h('div', { class: 'seg zoom-box' },
    h('button', { title: 'Zoom out', onclick: () => g.pz.zoomBy(1 / 1.25) }, '−'),
    h('button', { title: 'Fit to view', onclick: () => fitView(g) }, 'Fit'),
    h('button', { title: 'Zoom in', onclick: () => g.pz.zoomBy(1.25) }, '+'));
  const canvas = g.canvas = h('div', { class: 'graph-canvas' }, g.svg, g.overlay, h('div', { class: 'graph-top' }, g.info, g.lineChip),
    g.pager, g.legendBox, zoomBox);
  const toolbar = h('div', { class: 'graph-toolbar' },
    g.crumbs,
    createSearch(),
    g.picker,
    h('label', { class: 'toggle', title: 'Show the nodes that only route values (edges are drawn through them when hidden)' },
      g.fwToggle, 'Routing ops'),
    buildExport());
  g.el = h('div', { class: 'graph-view' }, h('div', { class: 'graph-main' }, toolbar, canvas), g.inspectorEl);
  return g;
}

function buildLegend(scaleEl) {
  const box = h('div', { class: 'graph-legend' },
    h('button', { class: 'legend-toggle', title: 'Hide or show the legend', onclick: () => box.classList.toggle('collapsed') }, 'Legend'),
    scaleEl,
    h('div', { class: 'legend-title' }, 'Node kinds'),
    h('div', { class: 'legend-grid' }, kinds().map(kindSwatch)),
    h('div', { class: 'legend-marks' },
      h('span', {}, h('i', { class: 'lg-hit' }, '!'), 'watchpoint hit (this iteration)'),
      h('span', {}, h('i', { class: 'lg-line' }), 'made by the chosen code line'),
      h('span', {}, h('i', { class: 'lg-scope' }), 'scope / folded group (click to open)')),
    h('div', { class: 'legend-hint' }, 'Drag or scroll to pan · Ctrl+scroll to zoom'));
  return box;
}

// Export: this scope level as drawn here (every child, not only the page shown) as a file.
// DOT always; SVG and PNG only when the server has Graphviz (it says so in /api/export/formats).
function buildExport() {
  const format = h('select', { class: 'input export-format', 'aria-label': 'export format',
    title: 'DOT is Graphviz text; SVG and PNG need Graphviz on the server' }, h('option', { value: 'dot' }, 'DOT'));
  const button = h('button', { class: 'btn btn-small export-btn', onclick: () => exportScope(button, format.value),
    title: 'Download this scope level (every child, folded as shown) as a graph file' }, 'Export');
  api.exportFormats().then((f) => {
    for (const x of f.formats) if (x !== 'dot') put(format, h('option', { value: x }, x.toUpperCase()));
    if (!f.graphviz) format.title = 'SVG and PNG need Graphviz (the `dot` program) on the server';
  }).catch(() => { /* DOT stays available */ });
  return h('div', { class: 'export-box' }, format, button);
}

async function exportScope(button, format) {
  button.disabled = true;
  try {
    const { blob, filename } = await api.exportScope({ dump: state.dump, rank: state.rank, graph: state.graph,
      scope: state.scope, framework: state.framework, format });
    const a = h('a', { href: URL.createObjectURL(blob), download: filename, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 30000);
  } catch (e) {
    toast(`Export failed: ${e.message}`, 'error');
  } finally {
    button.disabled = false;
  }
}

// -- events -------------------------------------------------------------------------------------
function wireEvents(g) {
  g.fwToggle.addEventListener('change', () => set({ framework: g.fwToggle.checked }));
  // A resized window refits the level, unless the user has panned or zoomed since it was drawn.
  g.onResize = debounce(() => { renderCrumbs(g); if (!g.pz.userMoved) fitView(g); }, 120);
  window.addEventListener('resize', g.onResize);
  // The controls beside the crumbs grow after the first drawing (the colouring's second select, the
  // export formats): the crumbs are fitted again to the room left.
  g.controlsSeen = new ResizeObserver(debounce(() => renderCrumbs(g), 30));
  for (const el of g.crumbs.parentElement.children) if (el !== g.crumbs) g.controlsSeen.observe(el);
  // the crumbs' menu closes on a click elsewhere or Escape
  g.onPointer = (e) => { if (g.crumbMenu && !e.target.closest('.crumb-menu, .crumb.folded')) closeCrumbMenu(g); };
  g.onKey = (e) => { if (e.key === 'Escape') closeCrumbMenu(g); };
  document.addEventListener('pointerdown', g.onPointer);
  document.addEventListener('keydown', g.onKey);
}

function openChild(g, c) {
  if (g.pz.suppressClick) return;
  if (c.type !== 'node') g.begin = 0;
  set(openPatch(c));
}

function update(g, changed) {
  const plan = updatePlan(changed, ctx.watchCount, !!state.overlay);
  if (plan.framework) g.fwToggle.checked = state.framework;
  if (plan.picker) g.picker.refresh();
  if (plan.lineChip) renderLineChip(g);
  if (plan.resetPage) g.begin = 0;
  if (plan.reload) {
    load(g, { relayout: plan.structural }).then(() => { if (plan.reveal) reveal(g); else markSelection(g); });
  } else if (plan.reveal) {
    markSelection(g);
    reveal(g);
  }
  g.inspector.update(changed);
}

// -- data ---------------------------------------------------------------------------------------
async function load(g, { relayout = true } = {}) {
  const seq = ++g.loadSeq;
  // A level entered with a node chosen (a finding, a search, a link) draws that node's neighbours from
  // outside the level; reloads of the same level keep it, so the layout does not move under the user.
  if (relayout) g.focus = state.node;
  renderCrumbs(g);
  g.overlay.hidden = false;
  g.overlay.textContent = 'Loading…';
  let d;
  try {
    d = await api.scope({ dump: state.dump, rank: state.rank, graph: state.graph, path: state.scope,
      iteration: ctx.watchCount || state.overlay ? state.iteration : null, line: state.line, framework: state.framework,
      begin: g.begin, end: null, overlay: overlayArgs(state), focus: g.focus || null });
  } catch (e) {
    if (seq !== g.loadSeq) return;
    if (e.status === 404 && state.scope) {        // a scope of another graph or rank: the nearest one it has
      set({ scope: state.scope.split('/').slice(0, -1).join('/') }, { push: false });
      return;
    }
    put(clear(g.overlay), errorBox(e));
    return;
  }
  if (seq !== g.loadSeq) return;
  g.data = d = withNeighbours(d);
  renderScale(g.scaleEl, d);       // before the fit: the legend's height is part of it
  const key = structKey(d);
  if (key !== g.structKey || relayout || !g.lay) {
    if (!await relayoutScope(g, d, key, seq)) return;
  } else {
    draw(g);
  }
  g.overlay.hidden = true;
  renderCrumbs(g);
  renderInfo(g);
  g.mini.draw(g);
}

/** Lay out and draw a new scope answer; false when it failed or a newer load took over. */
async function relayoutScope(g, d, key, seq) {
  const items = d.children.items;
  const sizes = items.map(sizeOf);
  g.overlay.textContent = items.length > 150 ? `Laying out ${items.length} nodes…` : 'Laying out…';
  const t0 = performance.now();
  let lay;
  try {
    lay = await runLayout(items.map((c, i) => ({ id: c.id, w: sizes[i][0], h: sizes[i][1] })),
      d.edges.map((e) => ({ source: e.source, target: e.target, count: e.count })));
  } catch (e) {
    if (seq === g.loadSeq) put(clear(g.overlay), errorBox(e));
    return false;
  }
  if (seq !== g.loadSeq) return false;
  g.lay = lay;
  g.lay.ms = performance.now() - t0;
  const same = g.structKey && g.structKey.split('|')[0] === d.path;
  g.structKey = key;
  draw(g);
  if (!same) { g.pz.userMoved = false; fitView(g); centreFocus(g); } else g.pz.apply();
  return true;
}

/** The focused node in the middle of the canvas, at the scale Fit chose. */
function centreFocus(g) {
  const id = childShowing(g.data.children.items, g.focus);
  const n = id && g.lay.nodes.find((x) => x.id === id);
  if (!n) return;
  const r = g.svg.getBoundingClientRect();
  g.pz.tf = centreOn(n.x + n.w / 2, n.y + n.h / 2, g.pz.tf.k, r.width, r.height);
  g.pz.apply();
}

// A reveal of a node chosen elsewhere (search, code view, hit list): open the scope that shows it.
async function reveal(g) {
  if (!state.node) return;
  if (g.data && childShowing(g.data.children.items, state.node)) { markSelection(g); return; }
  try {
    const d = await api.node({ dump: state.dump, rank: state.rank, graph: state.graph, node: state.node,
      iteration: state.iteration, framework: state.framework });
    if (d.place !== state.scope) { g.begin = 0; set({ scope: d.place }, { push: false }); }
  } catch (e) { /* the inspector shows the error */ }
}

// -- rendering ----------------------------------------------------------------------------------
function fitView(g) {
  if (!g.lay) return;
  const r = g.svg.getBoundingClientRect();
  const collapsed = g.legendBox.classList.contains('collapsed');
  // only the part of the drawing the legend covers (none where it is a strip under the drawing)
  const legendH = Math.max(0, r.bottom - g.legendBox.getBoundingClientRect().top);
  const t = fitTransform(g.lay, r.width, r.height, legendH, g.extent);
  // A level too big to fit at a readable scale: the legend folds away so it covers no node.
  if (t.overflows && !collapsed) { g.legendBox.classList.add('collapsed'); fitView(g); return; }
  g.pz.tf = { x: t.x, y: t.y, k: t.k };
  g.pz.apply();
}

function draw(g) {
  clear(g.viewport);
  if (!g.data || !g.lay) return;
  g.extent = drawScene(g.viewport, g.data, g.lay, { selected: state.node, iteration: state.iteration, line: state.line,
    overlay: g.data.overlay, onOpen: (c) => openChild(g, c) });
}

function markSelection(g) {
  for (const el of g.viewport.querySelectorAll('.gnode.selected, .gattach.selected')) el.classList.remove('selected');
  if (!state.node) return;
  for (const el of g.viewport.querySelectorAll('.gnode.t-node, .gattach')) {
    if (el.dataset.id === state.node) el.classList.add('selected');
  }
}

// The crumbs: every level when the row has room; else the levels after the root fold into '…', the
// outermost first, until the row fits; else they take a row of their own and fold again. The scope and
// its parent are never folded, and the scope's name is never cut.
function renderCrumbs(g) {
  closeCrumbMenu(g);
  const parents = g.data && g.data.path === state.scope ? g.data.parents : pathParents(state.scope);
  const fits = () => g.crumbs.scrollWidth <= g.crumbs.clientWidth;
  const foldToFit = () => {
    for (let hide = 0; hide <= crumbFoldMax(parents.length); hide++) {
      drawCrumbs(g, crumbParts(parents, hide));
      if (fits()) return true;
    }
    return false;
  };
  g.crumbs.classList.remove('tight', 'tighter');
  g.crumbs.parentElement.classList.remove('crumbs-own-row');
  if (foldToFit()) return;
  // The controls beside them (search, colour, export) leave too little room: the crumbs take a row of
  // their own, so the scope's name is never cut; only then do the levels above it shrink.
  g.crumbs.parentElement.classList.add('crumbs-own-row');
  if (foldToFit()) return;
  g.crumbs.classList.add('tight');
  if (!fits()) g.crumbs.classList.add('tighter');
}

function drawCrumbs(g, parts) {
  const graph = ctx.graphs.find((x) => x.graph === state.graph);
  put(clear(g.crumbs), parts.map((p, i) => {
    const last = i === parts.length - 1;
    const role = last ? ' current' : i === parts.length - 2 && i > 0 ? ' parent' : p.levels ? ' folded' : '';
    const open = p.levels ? (e) => { e.preventDefault(); toggleCrumbMenu(g, e.currentTarget, p.levels); }
      : (e) => { e.preventDefault(); g.begin = 0; set({ scope: p.path }); };
    const crumb = h(last ? 'span' : 'a', {
      class: `crumb${role}`, href: last ? undefined : '#', title: p.title || p.path || 'graph root',
      'aria-haspopup': p.levels ? 'menu' : undefined, onclick: last ? undefined : open,
    }, i === 0 ? (graph ? `graph ${graph.graph}` : 'root') : p.name);
    return i ? [h('span', { class: 'crumb-sep' }, '›'), crumb] : crumb;
  }));
}

// The '…' crumb lists the levels it folds, outermost first: one click opens any of them.
function toggleCrumbMenu(g, crumb, levels) {
  const wasOpen = !!g.crumbMenu;
  closeCrumbMenu(g);
  if (wasOpen) return;
  const menu = h('div', { class: 'crumb-menu', role: 'menu' }, levels.map((l, i) => h('a', {
    href: '#', class: 'crumb-menu-item', role: 'menuitem', title: l.path, style: { paddingLeft: `${10 + 12 * i}px` },
    onclick: (e) => { e.preventDefault(); closeCrumbMenu(g); g.begin = 0; set({ scope: l.path }); },
  }, l.name)));
  const at = crumb.getBoundingClientRect(), box = g.canvas.getBoundingClientRect();
  menu.style.left = `${Math.max(4, at.left - box.left)}px`;
  g.canvas.append(menu);
  g.crumbMenu = menu;
}

function closeCrumbMenu(g) {
  if (g.crumbMenu) { g.crumbMenu.remove(); g.crumbMenu = null; }
}

function renderInfo(g) {
  if (!g.data) return;
  const c = g.data.children;
  const { hits, line } = childMarks(c.items);
  const sep = () => h('span', { class: 'sep' }, '·');
  put(clear(g.info),
    h('span', {}, `${c.total} ${c.total === 1 ? 'child' : 'children'}`),
    sep(), h('span', {}, `${g.data.edges.length} edge groups`),
    g.data.neighbours && g.data.neighbours.items.length
      ? [sep(), h('span', { class: 'neighbours-note', title: 'The chosen node\'s inputs and readers outside this level (dashed): click one to open its level' },
        `${g.data.neighbours.items.length} neighbour${g.data.neighbours.items.length > 1 ? 's' : ''} outside`)] : null,
    g.lay ? [sep(), h('span', { class: 'faint' }, `layout ${g.lay.ms.toFixed(0)} ms`)] : null,
    hits ? [sep(), h('span', { class: 'chip hit' }, `${hits} hit${hits > 1 ? 's' : ''} here`)] : null,
    line ? [sep(), h('span', { class: 'chip fwd' }, `${line} from line`)] : null,
    g.offer);
  renderPager(g, c);
  offerTriage(g);
}

/** The triage of the dump, asked once per dump while the pane lives (null: not known, failed or given
 * up; asked again when the pane is opened again), not at every level or replay step. */
function triageOf(g, dump) {
  if (g.triage && g.triage.dump === dump) return g.triage.result;
  const alive = () => state.dump === dump && !ctx.watchCount && !g.destroyed;
  // only a triage the server knows or is working out: opening the graph starts no scan that would
  // compete with drawing it (the landing page, the triage, starts one)
  const result = waitTriage(dump, () => {}, alive, { start: false }).catch(() => null);
  g.triage = { dump, result };
  return result;
}

// With no watchpoint (the user removed them all) the graph draws no hit badge, though the triage may have
// found problems: the info line says so and offers the triage's watchpoints back.
async function offerTriage(g) {
  const dump = state.dump;
  g.offer.hidden = true;
  if (ctx.watchCount) return;
  const result = await triageOf(g, dump);
  const offer = triageOffer(ctx.watchCount, result, ctx.watchSource);
  if (!offer || state.dump !== dump || g.destroyed) return;
  const button = h('button', { class: 'btn btn-small', title: `Use the triage's ${offer.preset} watchpoints again: their hits show on the graph`,
    onclick: async () => { button.disabled = true; if (!await useTriageWatchpoints()) button.disabled = false; } },
  'Watch these');
  put(clear(g.offer), h('span', { class: 'sep' }, '·'), h('span', {}, offer.text), button);
  g.offer.hidden = false;
}

function renderPager(g, c) {
  const p = pagerOf(c);
  g.pager.hidden = !p.needed;
  if (!p.needed) return;
  const go = (begin) => { g.begin = begin; load(g); };
  put(clear(g.pager),
    h('button', { class: 'btn btn-small', disabled: p.first, onclick: () => go(p.prev) }, '‹ Prev'),
    h('span', {}, `children ${c.begin + 1}–${c.end} of ${c.total}`),
    h('button', { class: 'btn btn-small', disabled: p.last, onclick: () => go(p.next) }, 'Next ›'));
}

function renderLineChip(g) {
  g.lineChip.hidden = !state.line;
  if (!state.line) return;
  put(clear(g.lineChip), h('span', { class: 'lc-label' }, 'Line'), h('code', {}, shortLoc(state.line)),
    h('button', { class: 'lc-x', title: 'Clear the line highlight', onclick: () => set({ line: null }) }, '×'));
}
