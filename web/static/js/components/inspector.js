// Node panel: kind, op type, tensors of the current iteration with statistics and a histogram,
// watchpoint hits, inputs and consumers, and the source stack (user frames first). A component
// of the graph pane and the code pane: createInspector(el) gives {render, update, destroy}.
// Each section is a function of the node's answer; the panel keeps only which node it shows.
import { api } from '../api.js';
import { state, set } from '../state.js';
import { put, h, clear, fmt, fmtBytes, shape, kindChip, kindDot, errorBox, basename, shortName } from '../dom.js';
import { hasColor, kindColor } from '../kinds.js';
import { histogram } from '../charts.js';
import { hitText } from '../hits.js';

const STAT_TILES = [['min', 'min'], ['max', 'max'], ['mean', 'mean'], ['abs_mean', 'abs mean'], ['std', 'std'], ['count', 'count']];

export function statTiles(st) {
  const tiles = h('div', { class: 'stat-tiles' }, STAT_TILES.map(([k, label]) =>
    h('div', { class: 'stat-tile', 'data-stat': k }, h('span', { class: 'st-label' }, label), h('span', { class: 'st-value' }, fmt(st[k])))));
  const flags = h('div', { class: 'stat-flags' },
    flag('NaN', st.nan, 'bad'), flag('+Inf', st.pos_inf, 'bad'), flag('−Inf', st.neg_inf, 'bad'),
    flag('zeros', st.zeros, st.count && st.zeros === st.count ? 'warn' : ''),
    st.positives !== undefined ? flag('> 0', st.positives, '') : null,
    st.negatives !== undefined ? flag('< 0', st.negatives, '') : null);
  return h('div', {}, tiles, flags);
}
function flag(label, n, cls) {
  return h('span', { class: `stat-flag ${n ? cls : 'zero'}`, 'data-flag': label }, h('b', {}, fmt(n)), ' ', label);
}

/** The tensor the panel details: the chosen io:slot when dumped, else the first dumped output, else any. */
export function currentTensor(tensors, io, slot) {
  const t = tensors.find((x) => x.io === io && x.slot === slot && x.dumped);
  return t || tensors.find((x) => x.io === 'output' && x.dumped) || tensors.find((x) => x.dumped) || null;
}

/** The histogram colour of a kind: its own, but a neutral blue for 'other' and unknown kinds. */
export function histogramColor(kind) {
  return hasColor(kind) && kind !== 'other' ? kindColor(kind) : '#4c6ef5';
}

export function createInspector(el, { context = 'graph' } = {}) {
  const p = { el, context, seq: 0, detail: null, showFramework: false };
  return {
    render: () => render(p),
    update(changed) {
      if (['node', 'iteration', 'dump', 'rank', 'graph', 'watch'].some((k) => changed.has(k))) render(p);
      else if ((changed.has('io') || changed.has('slot') || changed.has('framework')) && p.detail) draw(p);
    },
    destroy() { p.seq++; },
  };
}

async function render(p) {
  const my = ++p.seq;
  if (!state.node) {
    p.detail = null;
    put(clear(p.el), h('div', { class: 'insp-empty' },
      h('div', { class: 'insp-empty-icon' }, '◎'),
      h('b', {}, 'No node selected'),
      h('p', {}, p.context === 'graph'
        ? 'Click a node to see its tensors, statistics and the code that created it. Click a scope to open it.'
        : 'Choose a node of the line to inspect it.')));
    return;
  }
  p.el.classList.add('loading');
  let d;
  try {
    d = await api.node({ dump: state.dump, rank: state.rank, graph: state.graph, node: state.node,
      iteration: state.iteration, framework: state.framework });
  } catch (e) {
    if (my !== p.seq) return;
    p.el.classList.remove('loading');
    put(clear(p.el), e.status === 404 ? missingNode() : h('div', { class: 'insp-section' }, errorBox(e)));
    return;
  }
  if (my !== p.seq) return;
  p.detail = d;
  p.el.classList.remove('loading');
  draw(p);
}

// The replay opened another graph (its iteration ran that one) and the selected node is not in it.
function missingNode() {
  return h('div', { class: 'insp-empty insp-missing' },
    h('b', {}, `Not in graph ${state.graph}`),
    h('p', {}, `${state.node} is not a node of graph ${state.graph}, which ran iteration ${state.iteration}. `
      + 'Step to an iteration of the node\'s own graph, or pick another node.'),
    h('button', { class: 'btn btn-small', onclick: () => set({ node: null }) }, 'Clear selection'));
}

function draw(p) {
  const d = p.detail;
  const cur = currentTensor(d.tensors, state.io, state.slot);
  put(clear(p.el), headSection(d, p.context), hitsSection(d), tensorsSection(d, cur),
    cur ? statsSection(d, cur, p) : null, ioSection(d),
    stackSection(d, p.showFramework, () => { p.showFramework = !p.showFramework; draw(p); }));
}

function section(title, children, cls = null) {
  return h('section', { class: `insp-section${cls ? ' sec-' + cls : ''}` }, h('h3', {}, title), children);
}

function headSection(d, context) {
  return h('div', { class: 'insp-head' },
    h('div', { class: 'insp-title' }, h('i', { class: 'kbar', style: { background: kindColor(d.kind) } }),
      h('span', { class: 'insp-name', title: d.node }, d.name)),
    h('div', { class: 'insp-chips' }, h('span', { class: 'chip op' }, d.op_type), kindChip(d.kind),
      h('span', { class: 'chip' }, d.is_backward ? 'backward' : 'forward'),
      d.param && d.param !== d.node ? h('span', { class: 'chip', title: 'parameter' }, `⟂ ${d.param}`) : null,
      d.execution_index !== null ? h('span', { class: 'chip', title: 'position in execution order' }, `#${d.execution_index}`) : null),
    h('div', { class: 'insp-full mono', title: 'full name' }, d.node),
    context !== 'graph' ? h('div', { class: 'row' },
      h('button', { class: 'btn btn-small', onclick: () => set({ view: 'graph', node: d.node, scope: d.place }) }, 'Show in graph')) : null);
}

function hitsSection(d) {
  if (!d.hits || !d.hits.length) return null;
  return section(`Watchpoint hits in iteration ${state.iteration}`, h('div', { class: 'hit-list' },
    d.hits.map((x) => h('div', { class: 'hit-row' },
      h('span', { class: 'chip hit' }, x.watchpoint), h('span', { class: 'mono' }, `${x.io}:${x.slot}`),
      h('span', { class: 'muted' }, hitText(x))))), 'hits');
}

/** The tensors of this iteration; a dumped one selects on click. */
function tensorsSection(d, cur) {
  const rows = d.tensors.map((t) => {
    const sel = cur && t.io === cur.io && t.slot === cur.slot;
    return h('tr', { class: `${t.dumped ? 'clickable' : 'not-dumped'}${sel ? ' sel' : ''}`,
      onclick: t.dumped ? () => set({ io: t.io, slot: t.slot }, { push: false }) : undefined,
      title: t.io === 'input' && t.source ? `from ${t.source}` : '' },
    h('td', {}, h('span', { class: `io io-${t.io}` }, t.io === 'input' ? 'in' : 'out'), ' ', t.slot),
    h('td', { class: 'mono' }, shape(t.shape)),
    h('td', { class: 'mono muted' }, t.dtype || '—'),
    h('td', { class: 'num muted' }, t.dumped ? fmtBytes(t.bytes) : 'not dumped'));
  });
  const itemsNote = d.iterations.length ? `dumped in ${d.iterations.length} iteration${d.iterations.length > 1 ? 's' : ''}` : 'never dumped';
  return section(`Tensors · iteration ${state.iteration ?? '–'}`, [
    d.tensors.length ? h('table', { class: 'tbl tbl-compact' },
      h('thead', {}, h('tr', {}, h('th', {}, 'io'), h('th', {}, 'shape'), h('th', {}, 'dtype'), h('th', { class: 'num' }, 'size'))),
      h('tbody', {}, rows)) : h('div', { class: 'muted' }, 'No tensor files for this node in this iteration.'),
    h('div', { class: 'faint small' }, itemsNote)], 'tensors');
}

/** Statistics and histogram of the current tensor, filled in when the server answers. */
function statsSection(d, cur, p) {
  const statsBox = h('div', { class: 'stats-box' }, h('div', { class: 'muted' }, 'Computing statistics…'));
  const q = { dump: state.dump, rank: state.rank, graph: state.graph, node: d.node, io: cur.io, slot: cur.slot, iteration: state.iteration };
  const my = p.seq;
  api.tensor(q).then((t) => {
    if (my !== p.seq) return;
    // a statistics-only dump stores no values to draw (the histogram is null), which is not "no finite values"
    put(clear(statsBox), statTiles(t.stats), t.histogram === null
      ? h('div', { class: 'muted small hist-none' }, 'No histogram: this dump holds statistics only.')
      : [h('div', { class: 'hist-title' }, 'Histogram of finite values'),
        histogram(t.histogram, { width: 372, height: 130, color: histogramColor(d.kind) })]);
  }).catch((e) => { if (my === p.seq) put(clear(statsBox), errorBox(e)); });
  return section(`Statistics · ${cur.io} ${cur.slot}`, [statsBox,
    h('div', { class: 'row insp-actions' },
      h('button', { class: 'btn btn-small btn-accent', onclick: () => set({ view: 'tensor', io: cur.io, slot: cur.slot }) }, 'Values, history & compare →'),
      // a statistics-only tensor has no values to download: said, not offered as a link that answers 404
      cur.has_values === false
        ? h('span', { class: 'muted small no-npy' }, 'No .npy: statistics only')
        : h('a', { class: 'btn btn-small', href: api.npyUrl(q), download: '' }, 'Download .npy'))], 'stats');
}

function ioSection(d) {
  const ins = d.inputs.filter((i) => i.node);
  if (!ins.length && !d.consumers.length) return null;
  const go = (node) => (e) => { e.preventDefault(); set({ node, io: 'output', slot: 0 }); };
  return section('Inputs and consumers', h('div', { class: 'io-lists' },
    ins.length ? h('div', {}, h('div', { class: 'sub-title' }, `Inputs (${ins.length})`), h('ul', { class: 'link-list' },
      ins.map((i) => h('li', {}, h('span', { class: 'slot' }, i.slot), kindDot(i.kind),
        h('a', { href: '#', title: i.node, onclick: go(i.node) }, i.name),
        i.op_type ? h('span', { class: 'faint' }, ` ${i.op_type}`) : null)))) : null,
    d.consumers.length ? h('div', {}, h('div', { class: 'sub-title' }, `Consumers (${d.consumers.length})`), h('ul', { class: 'link-list' },
      d.consumers.slice(0, 50).map((c) => h('li', {}, h('a', { href: '#', title: c, onclick: go(c) }, shortName(c)))))) : null), 'io');
}

/** The source stack: user frames, then framework frames behind a button. */
function stackSection(d, showFramework, onToggle) {
  const user = d.stack.filter((f) => !f.is_framework);
  const fw = d.stack.filter((f) => f.is_framework);
  const n = `${fw.length} framework frame${fw.length > 1 ? 's' : ''}`;
  const frames = h('div', { class: 'frames' }, user.map(frameEl),
    fw.length ? h('button', { class: 'btn btn-ghost btn-small', onclick: onToggle }, showFramework ? `Hide ${n}` : `Show ${n}`) : null,
    showFramework ? fw.map(frameEl) : null);
  return section('Stack', d.stack.length ? frames : h('div', { class: 'muted' }, 'The graph records no source for this node.'), 'stack');
}

function frameEl(f) {
  const active = state.file === f.file && state.line === `${f.file}:${f.line}`;
  return h('div', { class: `frame${f.is_framework ? ' fw' : ''}${f.forward_candidate ? ' cand' : ''}${active ? ' active' : ''}`,
    title: `${f.file}:${f.line}${f.forward_candidate ? ' (forward node candidate)' : ''}\nclick: open this line and the other nodes it created`,
    onclick: () => set({ view: 'code', file: f.file, line: `${f.file}:${f.line}` }) },
  h('div', { class: 'frame-loc' }, h('span', { class: 'frame-file' }, basename(f.file)), h('span', { class: 'frame-line' }, `:${f.line}`),
    f.forward_candidate ? h('span', { class: 'chip bwd' }, 'forward candidate') : null),
  f.code ? h('code', { class: 'frame-code' }, f.code) : null);
}
