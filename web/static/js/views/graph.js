// Graph pane: the children of one scope, laid out in a worker, drawn as SVG with pan and zoom.
// Scopes and folded groups open on click; nodes select; marks show watchpoint hits of the
// current iteration and the nodes of the chosen code line.
import { api } from '../api.js';
import { state, set, ctx } from '../state.js';
import { put, h, s, clear, KIND_COLORS, KIND_LABELS, KINDS, debounce, errorBox, fmt, toast } from '../dom.js';
import { layout as layoutInline } from '../layout.js';
import { createInspector } from '../inspector.js';

const NODE_H = 42, GROUP_H = 44, SCOPE_H = 52;
const PAGE = 300;

let worker = null;
let jobId = 0;
const pending = new Map();
// Started as soon as the view mounts, so the worker's script loads while the first scope is fetched.
function startWorker() {
  if (worker === null) {
    try {
      worker = new Worker('/static/js/layout-worker.js', { type: 'module' });
      worker.onmessage = (ev) => {
        const p = pending.get(ev.data.id);
        if (!p) return;
        pending.delete(ev.data.id);
        if (ev.data.error) p.reject(new Error(ev.data.error)); else p.resolve(ev.data.result);
      };
      worker.onerror = () => { worker = false; for (const p of pending.values()) p.fallback(); pending.clear(); };
    } catch { worker = false; }
  }
}

// A level of a few nodes lays out in well under a millisecond: inline, it does not wait for the
// worker to start (a module worker takes 50-200 ms to load on a first page).
const INLINE_LAYOUT_MAX = 40;
function runLayout(nodes, edges) {
  if (nodes.length <= INLINE_LAYOUT_MAX) return Promise.resolve(layoutInline(nodes, edges));
  startWorker();
  if (!worker) return Promise.resolve(layoutInline(nodes, edges));
  const id = ++jobId;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { pending.delete(id); reject(new Error('layout took longer than 20 s')); }, 20000);
    pending.set(id, {
      resolve: (r) => { clearTimeout(timer); resolve(r); },
      reject: (e) => { clearTimeout(timer); reject(e); },
      fallback: () => { clearTimeout(timer); resolve(layoutInline(nodes, edges)); },
    });
    worker.postMessage({ id, nodes, edges });
  });
}

const measureCtx = document.createElement('canvas').getContext('2d');
function textWidth(text, font) { measureCtx.font = font; return measureCtx.measureText(text).width; }
const FONT_B = '600 12px system-ui, "Liberation Sans", "DejaVu Sans", sans-serif';
const FONT_S = '600 13px system-ui, "Liberation Sans", "DejaVu Sans", sans-serif';

function fit(text, max, font) {
  if (textWidth(text, font) <= max) return text;
  let lo = 0, hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (textWidth(text.slice(0, mid) + '…', font) <= max) lo = mid; else hi = mid - 1;
  }
  return text.slice(0, lo) + '…';
}

function dominantKind(kinds) {
  let best = 'other', n = -1;
  for (const [k, v] of Object.entries(kinds || {})) if (v > n || (v === n && k !== 'other')) { best = k; n = v; }
  return best;
}

function sizeOf(c) {
  if (c.type === 'scope') return [Math.min(270, Math.max(160, textWidth(c.name, FONT_S) + 44)), SCOPE_H];
  const sub = c.type === 'group' ? `${c.count} × ${c.op_type}` : `${c.op_type} · ${c.kind}`;
  const w = Math.max(textWidth(c.name, FONT_B), textWidth(sub, '11px sans-serif')) + 34;
  return [Math.min(240, Math.max(118, w)), c.type === 'group' ? GROUP_H : NODE_H];
}

export function mount(root) {
  startWorker();
  const crumbs = h('div', { class: 'crumbs' });
  const searchInput = h('input', { type: 'search', class: 'search-input', placeholder: 'Search nodes or FILE:LINE',
    'aria-label': 'search nodes' });
  const results = h('div', { class: 'search-results', hidden: true });
  const lineChip = h('span', { class: 'line-chip', hidden: true });
  const fwToggle = h('input', { type: 'checkbox', checked: state.framework });
  const svg = s('svg', { class: 'graph-svg' });
  const defs = s('defs', {},
    s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 9, markerHeight: 9, markerUnits: 'userSpaceOnUse', orient: 'auto-start-reverse' },
      s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow-head' })),
    s('filter', { id: 'shadow', x: '-10%', y: '-10%', width: '130%', height: '140%' },
      s('feDropShadow', { dx: 0, dy: 1, stdDeviation: 1.2, 'flood-color': '#101828', 'flood-opacity': 0.12 })));
  const viewport = s('g', { class: 'viewport' });
  put(svg, defs, viewport);
  const overlay = h('div', { class: 'graph-overlay', hidden: true });
  const info = h('div', { class: 'graph-info' });
  const pager = h('div', { class: 'graph-pager', hidden: true });
  const legendBox = h('div', { class: 'graph-legend' },
    h('button', { class: 'legend-toggle', title: 'Hide or show the legend', onclick: () => legendBox.classList.toggle('collapsed') }, 'Legend'),
    h('div', { class: 'legend-title' }, 'Node kinds'),
    h('div', { class: 'legend-grid' }, KINDS.map((k) => h('span', {}, h('i', { style: { background: KIND_COLORS[k] } }), KIND_LABELS[k]))),
    h('div', { class: 'legend-marks' },
      h('span', {}, h('i', { class: 'lg-hit' }, '!'), 'watchpoint hit (this iteration)'),
      h('span', {}, h('i', { class: 'lg-line' }), 'made by the chosen code line'),
      h('span', {}, h('i', { class: 'lg-scope' }), 'scope / folded group (click to open)')),
    h('div', { class: 'legend-hint' }, 'Drag or scroll to pan · Ctrl+scroll to zoom'));
  const canvas = h('div', { class: 'graph-canvas' }, svg, overlay, h('div', { class: 'graph-top' }, info, lineChip), pager, legendBox);
  const inspectorEl = h('aside', { class: 'inspector' });
  // Export: this scope level as drawn here (every child, not only the page shown) as a file.
  // DOT always; SVG and PNG only when the server has Graphviz (it says so in /api/export/formats).
  const exportFmt = h('select', { class: 'input export-format', 'aria-label': 'export format',
    title: 'DOT is Graphviz text; SVG and PNG need Graphviz on the server' }, h('option', { value: 'dot' }, 'DOT'));
  const exportBtn = h('button', { class: 'btn btn-small export-btn', onclick: () => doExport(),
    title: 'Download this scope level (every child, folded as shown) as a graph file' }, 'Export');
  const exportBox = h('div', { class: 'export-box' }, exportFmt, exportBtn);
  api.exportFormats().then((f) => {
    for (const x of f.formats) if (x !== 'dot') put(exportFmt, h('option', { value: x }, x.toUpperCase()));
    if (!f.graphviz) exportFmt.title = 'SVG and PNG need Graphviz (the `dot` program) on the server';
  }).catch(() => { /* DOT stays available */ });
  async function doExport() {
    exportBtn.disabled = true;
    try {
      const { blob, filename } = await api.exportScope({ dump: state.dump, rank: state.rank, graph: state.graph,
        scope: state.scope, framework: state.framework, format: exportFmt.value });
      const a = h('a', { href: URL.createObjectURL(blob), download: filename, hidden: true });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 30000);
    } catch (e) {
      toast(`Export failed: ${e.message}`, 'error');
    } finally {
      exportBtn.disabled = false;
    }
  }
  const toolbar = h('div', { class: 'graph-toolbar' },
    crumbs,
    h('div', { class: 'search-box' }, searchInput, results),
    h('label', { class: 'toggle', title: 'Show the nodes that only route values (edges are drawn through them when hidden)' },
      fwToggle, 'Routing ops'),
    exportBox,
  );
  const zoomBox = h('div', { class: 'seg zoom-box' },
    h('button', { title: 'Zoom out', onclick: () => zoomBy(1 / 1.25) }, '−'),
    h('button', { title: 'Fit to view', onclick: () => fitView() }, 'Fit'),
    h('button', { title: 'Zoom in', onclick: () => zoomBy(1.25) }, '+'));
  canvas.append(zoomBox);
  const view = h('div', { class: 'graph-view' },
    h('div', { class: 'graph-main' }, toolbar, canvas), inspectorEl);
  put(root, view);

  const inspector = createInspector(inspectorEl, { context: 'graph' });

  // -- pan and zoom ------------------------------------------------------------------------
  const tf = { x: 0, y: 0, k: 1 };
  let lay = null;
  const apply = () => viewport.setAttribute('transform', `translate(${tf.x},${tf.y}) scale(${tf.k})`);
  // Fit the page of children; a layout too tall or too wide to read when fitted keeps a readable
  // scale (0.8: 12 px labels stay about 10 px) and starts at its top (the first nodes in execution
  // order), to be panned.
  function fitView() {
    if (!lay) return;
    const r = svg.getBoundingClientRect();
    const W = Math.max(r.width, 200);
    const legendH = legendBox.classList.contains('collapsed') ? 30 : legendBox.getBoundingClientRect().height;
    const top = 44, bottom = legendH + 24;
    const H = Math.max(r.height - top - bottom, 120);
    const k = Math.min(1.25, (W - 80) / Math.max(lay.width, 1), H / Math.max(lay.height, 1));
    tf.k = Math.max(0.8, k);
    // A level too big to fit at a readable scale: the legend folds away so it covers no node.
    if (lay.height * tf.k > H && !legendBox.classList.contains('collapsed')) { legendBox.classList.add('collapsed'); fitView(); return; }
    tf.x = lay.width * tf.k <= W - 40 ? (W - lay.width * tf.k) / 2 : 40;
    tf.y = top + Math.max(0, (H - lay.height * tf.k) / 2);
    apply();
  }
  function zoomBy(f, cx, cy) {
    const r = svg.getBoundingClientRect();
    cx = cx ?? r.width / 2; cy = cy ?? r.height / 2;
    userMoved = true;
    const k2 = Math.min(3, Math.max(0.05, tf.k * f));
    tf.x = cx - (cx - tf.x) * (k2 / tf.k);
    tf.y = cy - (cy - tf.y) * (k2 / tf.k);
    tf.k = k2;
    apply();
  }
  // Scroll pans; ctrl+scroll (and a trackpad pinch) zooms around the pointer.
  svg.addEventListener('wheel', (e) => {
    e.preventDefault();
    if (e.ctrlKey || e.metaKey) {
      const r = svg.getBoundingClientRect();
      zoomBy(Math.exp(-e.deltaY * 0.004), e.clientX - r.left, e.clientY - r.top);
    } else {
      tf.x -= e.shiftKey ? e.deltaY : e.deltaX;
      tf.y -= e.shiftKey ? 0 : e.deltaY;
      apply();
    }
  }, { passive: false });
  let drag = null;
  svg.addEventListener('pointerdown', (e) => {
    if (e.button !== 0) return;
    drag = { x: e.clientX, y: e.clientY, tx: tf.x, ty: tf.y, moved: false };
  });
  window.addEventListener('pointermove', (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (!drag.moved && Math.hypot(dx, dy) < 4) return;
    if (!drag.moved) { drag.moved = true; userMoved = true; svg.classList.add('panning'); }
    tf.x = drag.tx + dx; tf.y = drag.ty + dy;
    apply();
  });
  window.addEventListener('pointerup', () => {
    if (drag && drag.moved) { svg.classList.remove('panning'); suppressClick = true; setTimeout(() => { suppressClick = false; }, 0); }
    drag = null;
  });
  let suppressClick = false;
  // A resized window refits the level, unless the user has panned or zoomed since it was drawn.
  let userMoved = false;
  svg.addEventListener('wheel', () => { userMoved = true; }, { passive: true });
  const onResize = debounce(() => { if (!userMoved) fitView(); }, 120);
  window.addEventListener('resize', onResize);

  // -- data --------------------------------------------------------------------------------
  let data = null;           // last scope answer
  let structKey = null;
  let begin = 0;
  let loadSeq = 0;

  async function load({ relayout = true } = {}) {
    const seq = ++loadSeq;
    renderCrumbs();
    overlay.hidden = false;
    overlay.textContent = 'Loading…';
    let d;
    try {
      d = await api.scope({ dump: state.dump, rank: state.rank, graph: state.graph, path: state.scope,
        iteration: ctx.watchCount ? state.iteration : null, line: state.line, framework: state.framework,
        begin, end: null });
    } catch (e) {
      if (seq !== loadSeq) return;
      if (e.status === 404 && state.scope) {        // a scope of another graph or rank: go to the root
        set({ scope: '' }, { push: false });
        return;
      }
      overlay.hidden = false;
      put(clear(overlay), errorBox(e));
      return;
    }
    if (seq !== loadSeq) return;
    data = d;
    const key = `${d.path}|${d.children.begin}|${d.children.items.map((c) => c.id).join('\n')}|${d.edges.length}`;
    if (key !== structKey || relayout || !lay) {
      const items = d.children.items;
      const sizes = items.map(sizeOf);
      overlay.textContent = items.length > 150 ? `Laying out ${items.length} nodes…` : 'Laying out…';
      const t0 = performance.now();
      let l;
      try {
        l = await runLayout(items.map((c, i) => ({ id: c.id, w: sizes[i][0], h: sizes[i][1] })),
          d.edges.map((e) => ({ source: e.source, target: e.target, count: e.count })));
      } catch (e) {
        if (seq !== loadSeq) return;
        put(clear(overlay), errorBox(e));
        return;
      }
      if (seq !== loadSeq) return;
      lay = l;
      lay.ms = performance.now() - t0;
      const same = structKey && structKey.split('|')[0] === d.path;
      structKey = key;
      draw();
      if (!same) { userMoved = false; fitView(); } else apply();
    } else {
      draw();
    }
    overlay.hidden = true;
    renderInfo();
  }

  function renderCrumbs() {
    clear(crumbs);
    let parts = data && data.path === state.scope ? data.parents : pathParents(state.scope);
    if (parts.length > 5) {   // root › … › the last three levels
      const hidden = parts.slice(1, parts.length - 3);
      parts = [parts[0], { name: '…', path: hidden[hidden.length - 1].path, title: hidden.map((p) => p.name).join(' › ') },
        ...parts.slice(parts.length - 3)];
    }
    parts.forEach((p, i) => {
      if (i) put(crumbs, h('span', { class: 'crumb-sep' }, '›'));
      const last = i === parts.length - 1;
      put(crumbs, h(last ? 'span' : 'a', {
        class: `crumb${last ? ' current' : ''}`, href: last ? undefined : '#', title: p.title || p.path || 'graph root',
        onclick: last ? undefined : (e) => { e.preventDefault(); begin = 0; set({ scope: p.path }); },
      }, i === 0 ? (graphLabel()) : p.name));
    });
  }
  function graphLabel() {
    const g = ctx.graphs.find((x) => x.graph === state.graph);
    return g ? `graph ${g.graph}` : 'root';
  }

  function renderInfo() {
    if (!data) return;
    const c = data.children;
    const hits = c.items.reduce((a, x) => a + (x.marks.hit || 0), 0);
    const lineN = c.items.reduce((a, x) => a + (x.marks.forward || 0) + (x.marks.backward || 0), 0);
    put(clear(info), 
      h('span', {}, `${c.total} ${c.total === 1 ? 'child' : 'children'}`),
      h('span', { class: 'sep' }, '·'), h('span', {}, `${data.edges.length} edge groups`),
      lay ? [h('span', { class: 'sep' }, '·'), h('span', { class: 'faint' }, `layout ${lay.ms.toFixed(0)} ms`)] : null,
      hits ? [h('span', { class: 'sep' }, '·'), h('span', { class: 'chip hit' }, `${hits} hit${hits > 1 ? 's' : ''} here`)] : null,
      lineN ? [h('span', { class: 'sep' }, '·'), h('span', { class: 'chip fwd' }, `${lineN} from line`)] : null);
    if (c.total > c.end - c.begin) {
      pager.hidden = false;
      put(clear(pager), 
        h('button', { class: 'btn btn-small', disabled: c.begin === 0, onclick: () => { begin = Math.max(0, c.begin - PAGE); load(); } }, '‹ Prev'),
        h('span', {}, `children ${c.begin + 1}–${c.end} of ${c.total}`),
        h('button', { class: 'btn btn-small', disabled: c.end >= c.total, onclick: () => { begin = c.end; load(); } }, 'Next ›'));
    } else pager.hidden = true;
  }

  // -- drawing -----------------------------------------------------------------------------
  function edgePath(pts) {
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
    d += ` L${last[0]},${last[1]}`;
    return d;
  }

  function draw() {
    clear(viewport);
    if (!data || !lay) return;
    const byId = new Map(data.children.items.map((c) => [c.id, c]));
    if (!data.children.items.length) {
      put(viewport, s('text', { x: 0, y: 0, class: 'chart-empty' }, 'This scope has no visible children (try “Routing ops”).'));
    }
    const eg = s('g', { class: 'edges' });
    const lg = s('g', { class: 'edge-labels' });   // drawn after the nodes: a count never hides under one
    for (const e of lay.edges) {
      const wdt = Math.min(5, 1.2 + Math.log2(e.count) * 0.7);
      const p = s('path', { d: edgePath(e.points), class: 'edge', 'stroke-width': wdt, 'marker-end': 'url(#arrow)' });
      put(p, s('title', {}, `${e.count} edge${e.count > 1 ? 's' : ''}: ${label(byId.get(e.source))} → ${label(byId.get(e.target))}`));
      put(eg, p);
      if (e.count > 1) {
        const mid = e.points[Math.floor(e.points.length / 2)];
        const a = e.points.length === 2 ? [(e.points[0][0] + e.points[1][0]) / 2, (e.points[0][1] + e.points[1][1]) / 2] : mid;
        put(lg, s('text', { x: a[0] + 4, y: a[1] + 3, class: 'edge-count' }, String(e.count)));
      }
    }
    put(viewport, eg);
    const ng = s('g', { class: 'nodes' });
    for (const n of lay.nodes) {
      const c = byId.get(n.id);
      if (c) put(ng, drawNode(c, n));
    }
    put(viewport, ng, lg);
  }

  function label(c) { return c ? (c.type === 'scope' ? c.name + '/' : c.name) : '?'; }

  function drawNode(c, n) {
    const kind = c.type === 'node' ? c.kind : dominantKind(c.kinds);
    const color = KIND_COLORS[kind] || KIND_COLORS.other;
    const hits = c.marks.hit || 0;
    const fwd = c.marks.forward || 0, bwd = c.marks.backward || 0;
    const selected = c.type === 'node' && c.id === state.node;
    const cls = ['gnode', `t-${c.type}`, `k-${kind}`];
    if (hits) cls.push('has-hit');
    if (fwd) cls.push('hl-forward');
    if (bwd) cls.push('hl-backward');
    if (selected) cls.push('selected');
    const g = s('g', { class: cls.join(' '), transform: `translate(${n.x},${n.y})`, 'data-id': c.id, 'data-type': c.type,
      tabindex: 0, role: 'button' });
    put(g, s('title', {}, tooltip(c)));
    if (fwd || bwd) put(g, s('rect', { class: 'halo', x: -5, y: -5, width: n.w + 10, height: n.h + 10, rx: 12 }));
    if (c.type === 'group') {
      put(g, s('rect', { class: 'stack2', x: 6, y: 6, width: n.w, height: n.h, rx: 7 }));
      put(g, s('rect', { class: 'stack1', x: 3, y: 3, width: n.w, height: n.h, rx: 7 }));
    }
    put(g, s('rect', { class: 'body', width: n.w, height: n.h, rx: c.type === 'scope' ? 10 : 7, filter: 'url(#shadow)' }));
    if (c.type !== 'scope') {
      put(g, s('path', { class: 'strip', d: `M7,0 H4 Q0,0 0,4 V${n.h - 4} Q0,${n.h} 4,${n.h} H7 Z`, fill: color }));
    }
    const textX = c.type === 'scope' ? 12 : 14;
    const maxW = n.w - textX - (hits ? 20 : 10);
    const title = c.type === 'scope' ? c.name : c.name;
    put(g, s('text', { class: 'n-title', x: textX, y: c.type === 'scope' ? 20 : 17 }, fit(title, maxW, c.type === 'scope' ? FONT_S : FONT_B)));
    let sub;
    if (c.type === 'scope') sub = `${fmt(c.count)} node${c.count === 1 ? '' : 's'}`;
    else if (c.type === 'group') sub = `${c.count} × ${c.op_type}`;
    else sub = c.name.startsWith(c.op_type) ? KIND_LABELS[c.kind] : `${c.op_type} · ${KIND_LABELS[c.kind]}`;
    put(g, s('text', { class: 'n-sub', x: textX, y: c.type === 'scope' ? 36 : 32 }, fit(sub, maxW, '11px sans-serif')));
    if (c.type === 'scope') {
      // kind distribution bar
      const total = Object.values(c.kinds).reduce((a, b) => a + b, 0) || 1;
      let x = 12;
      const W = n.w - 24;
      for (const k of KINDS) {
        const v = c.kinds[k] || 0;
        if (!v) continue;
        const w = (v / total) * W;
        put(g, s('rect', { x, y: n.h - 10, width: Math.max(w, 1.5), height: 4, fill: KIND_COLORS[k] },
          s('title', {}, `${v} ${KIND_LABELS[k]}`)));
        x += w;
      }
      put(g, s('text', { class: 'n-open', x: n.w - 14, y: 21, 'text-anchor': 'middle' }, '›'));
    }
    if (c.external_in) put(g, s('circle', { class: 'port', cx: n.w / 2, cy: 0, r: 3 },
      s('title', {}, `${c.external_in} input${c.external_in > 1 ? 's' : ''} from outside this scope`)));
    if (c.external_out) put(g, s('circle', { class: 'port', cx: n.w / 2, cy: n.h, r: 3 },
      s('title', {}, `${c.external_out} output${c.external_out > 1 ? 's' : ''} used outside this scope`)));
    if (fwd || bwd) {
      const txt = [fwd ? `fwd ${fwd}` : '', bwd ? `bwd ${bwd}` : ''].filter(Boolean).join(' · ');
      const w = textWidth(txt, '600 10px sans-serif') + 12;
      put(g, s('rect', { class: 'pill', x: 8, y: -8, width: w, height: 15, rx: 7.5 }));
      put(g, s('text', { class: 'pill-text', x: 8 + w / 2, y: 3, 'text-anchor': 'middle' }, txt));
    }
    if (hits) {
      put(g, s('circle', { class: 'hit-badge', cx: n.w - 2, cy: 2, r: 9 }));
      put(g, s('text', { class: 'hit-text', x: n.w - 2, y: 5.5, 'text-anchor': 'middle' }, hits > 99 ? '99+' : String(hits)));
    }
    g.addEventListener('click', (e) => {
      e.stopPropagation();
      if (suppressClick) return;
      if (c.type === 'node') set({ node: c.id });
      else {
        // A chain of single-child scopes opens in one click (to its only node, selected).
        begin = 0;
        const patch = { scope: c.open || c.path };
        if (c.select) patch.node = c.select;
        set(patch);
      }
    });
    g.addEventListener('keydown', (e) => { if (e.key === 'Enter') g.dispatchEvent(new MouseEvent('click')); });
    return g;
  }

  function tooltip(c) {
    const lines = [c.type === 'node' ? c.node : c.path];
    if (c.type === 'node') lines.push(`${c.op_type} · ${KIND_LABELS[c.kind]}`);
    else lines.push(Object.entries(c.kinds).map(([k, v]) => `${v} ${KIND_LABELS[k] || k}`).join(', '));
    if (c.marks.hit) lines.push(`${c.marks.hit} watchpoint hit(s) in iteration ${state.iteration}`);
    if (c.marks.forward || c.marks.backward) lines.push(`line ${state.line}: ${c.marks.forward || 0} forward, ${c.marks.backward || 0} backward`);
    lines.push(c.type === 'node' ? 'click to inspect' : 'click to open');
    return lines.join('\n');
  }

  function markSelection() {
    for (const el of viewport.querySelectorAll('.gnode.selected')) el.classList.remove('selected');
    if (!state.node) return;
    for (const el of viewport.querySelectorAll('.gnode')) if (el.dataset.id === state.node) el.classList.add('selected');
  }

  // -- search ------------------------------------------------------------------------------
  let searchSeq = 0;
  const doSearch = debounce(async () => {
    const q = searchInput.value.trim();
    const seq = ++searchSeq;
    if (!q) { results.hidden = true; return; }
    clear(results);
    results.hidden = false;
    put(results, h('div', { class: 'sr-note' }, 'Searching…'));
    try {
      if (/:\d+$/.test(q)) {
        const r = await api.codeNodes({ dump: state.dump, rank: state.rank, location: q });
        if (seq !== searchSeq) return;
        clear(results);
        const mine = r.items.filter((n) => n.graph === state.graph);
        const fw = mine.filter((n) => n.direction === 'forward').length;
        put(results, h('div', { class: 'sr-item sr-line', onclick: () => chooseLine(q, mine) },
          h('b', {}, `Highlight ${q}`), h('span', { class: 'muted' }, ` ${fw} forward, ${mine.length - fw} backward node${mine.length === 1 ? '' : 's'}`)));
        if (!r.files.length) put(results, h('div', { class: 'sr-note' }, 'No source file of this dump matches.'));
        for (const n of mine.slice(0, 40)) put(results, resultItem(n, () => { set({ line: q, node: n.node, scope: n.place }); close(); }));
      } else {
        const r = await api.search({ dump: state.dump, rank: state.rank, graph: state.graph, q, framework: state.framework });
        if (seq !== searchSeq) return;
        clear(results);
        if (!r.total) put(results, h('div', { class: 'sr-note' }, `No node name contains “${q}”.`));
        for (const n of r.items.slice(0, 60)) put(results, resultItem(n, () => { set({ node: n.node, scope: n.place }); close(); }));
        if (r.total > 60) put(results, h('div', { class: 'sr-note' }, `${r.total - 60} more; refine the search.`));
      }
    } catch (e) {
      if (seq !== searchSeq) return;
      put(clear(results), h('div', { class: 'sr-note error' }, e.message));
    }
  }, 180);
  function resultItem(n, onPick) {
    return h('div', { class: 'sr-item', onclick: onPick, title: n.node },
      h('i', { class: 'kdot', style: { background: KIND_COLORS[n.kind] } }),
      h('span', { class: 'sr-name' }, n.name),
      n.direction ? h('span', { class: `chip ${n.direction === 'forward' ? 'fwd' : 'bwd'}` }, n.direction === 'forward' ? 'fwd' : 'bwd') : null,
      h('span', { class: 'sr-scope' }, n.scope || '(root)'));
  }
  function chooseLine(q, nodes) {
    const first = nodes.find((n) => n.direction === 'forward') || nodes[0];
    if (first) set({ line: q, node: first.node, scope: first.place });
    else set({ line: q });
    close();
  }
  function close() { results.hidden = true; searchInput.blur(); }
  searchInput.addEventListener('input', doSearch);
  searchInput.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') {
      const first = results.querySelector('.sr-item');
      if (first) first.click(); else doSearch();
    } else if (e.key === 'Escape') close();
  });
  document.addEventListener('click', (e) => { if (!results.contains(e.target) && e.target !== searchInput) results.hidden = true; });

  function renderLineChip() {
    if (!state.line) { lineChip.hidden = true; return; }
    lineChip.hidden = false;
    put(clear(lineChip), h('span', { class: 'lc-label' }, 'Line'), h('code', {}, shortLoc(state.line)),
      h('button', { class: 'lc-x', title: 'Clear the line highlight', onclick: () => set({ line: null }) }, '×'));
  }

  fwToggle.addEventListener('change', () => set({ framework: fwToggle.checked }));

  // -- reveal a node chosen elsewhere (search, code view, hit list) ----------------------
  async function reveal() {
    if (!state.node) return;
    if (data && data.children.items.some((c) => c.id === state.node)) { markSelection(); return; }
    try {
      const d = await api.node({ dump: state.dump, rank: state.rank, graph: state.graph, node: state.node,
        iteration: state.iteration, framework: state.framework });
      if (d.place !== state.scope) { begin = 0; set({ scope: d.place }, { push: false }); }
    } catch (e) { /* the inspector shows the error */ }
  }

  renderLineChip();
  load().then(() => { if (state.node) reveal(); });
  inspector.render();

  return {
    update(changed) {
      if (changed.has('framework')) fwToggle.checked = state.framework;
      if (changed.has('line')) renderLineChip();
      const structural = ['dump', 'rank', 'graph', 'scope', 'framework'].some((k) => changed.has(k));
      if (['dump', 'rank', 'graph'].some((k) => changed.has(k))) begin = 0;
      if (structural || changed.has('line') || (changed.has('iteration') && ctx.watchCount) || changed.has('watch')) {
        load({ relayout: structural }).then(() => { if (changed.has('node')) reveal(); else markSelection(); });
      } else if (changed.has('node')) {
        markSelection();
        reveal();
      }
      inspector.update(changed);
    },
    destroy() { inspector.destroy(); window.removeEventListener('resize', onResize); },
  };
}

function pathParents(path) {
  const out = [{ name: 'root', path: '' }];
  let acc = '';
  for (const p of (path ? path.split('/') : [])) {
    acc = acc ? `${acc}/${p}` : p;
    out.push({ name: p, path: acc });
  }
  return out;
}

export function shortLoc(loc) {
  const i = loc.lastIndexOf(':');
  const file = loc.slice(0, i), line = loc.slice(i + 1);
  const b = file.replace(/\\/g, '/').split('/').pop();
  return `${b}:${line}`;
}
