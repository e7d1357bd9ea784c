// Tensor pane: statistics (current, previous iteration, difference), histogram, statistics across
// all iterations, and values as a table or heat map of a slice such as [0, :, :], capped.
// Pure logic in tensor/state.js; each card here is drawn by its own function.
import { api } from '../api.js';
import { state, set, ctx } from '../state.js';
import { put, h, clear, fmt, fmtBytes, shape, kindChip, errorBox, empty } from '../dom.js';
import { kindColor } from '../kinds.js';
import { histogram, lineChart, heatmap } from '../charts.js';
import { ranksCard } from './tensor/ranks-card.js';
import { chooseTensor, defaultSlice, shardNote, statColumns, tableShape, valuesOf } from './tensor/state.js';

const STATS = [['min', 'min'], ['max', 'max'], ['mean', 'mean'], ['abs_mean', 'abs mean'], ['std', 'std'], ['l2norm', 'L2 norm'],
  ['count', 'count'], ['nan', 'NaN'], ['pos_inf', '+Inf'], ['neg_inf', '−Inf'], ['zeros', 'zeros'], ['positives', '> 0'], ['negatives', '< 0']];
const SERIES = [['max', '#e03131'], ['min', '#1c7ed6'], ['mean', '#2f9e44'], ['abs_mean', '#f08c00'], ['std', '#9c36b5'], ['l2norm', '#495057']];

// The user's choices outlive the pane: they hold when the pane is opened again.
const prefs = { series: new Set(['min', 'max', 'mean']), log: false, mode: 'table', which: 'current' };

export function mount(root) {
  const v = { page: h('div', { class: 'page tensor-page' }), seq: 0 };
  put(root, v.page);
  render(v);
  return {
    update(changed) {
      if (['node', 'iteration', 'dump', 'rank', 'graph', 'io', 'slot', 'slice'].some((k) => changed.has(k))) render(v);
    },
    destroy() { v.seq++; },
  };
}

async function render(v) {
  const my = ++v.seq;
  const alive = () => my === v.seq;
  clear(v.page);
  if (!state.node) {
    put(v.page, h('div', { class: 'card' }, empty('No tensor chosen', 'Select a node in the Graph or Code view, then open its tensor here.')));
    return;
  }
  let node;
  try {
    node = await api.node({ dump: state.dump, rank: state.rank, graph: state.graph, node: state.node, iteration: state.iteration });
  } catch (e) { if (alive()) put(v.page, errorBox(e)); return; }
  if (!alive()) return;
  const cur = chooseTensor(node.tensors, state.io, state.slot);
  put(v.page, headCard(node, cur));
  if (!cur) {
    put(v.page, h('div', { class: 'card' }, empty(`Not dumped in iteration ${state.iteration}`,
      node.iterations.length ? `This node has tensors in iterations ${node.iterations.join(', ')}.` : 'This node has no tensor files.')));
    return;
  }
  const q = { dump: state.dump, rank: state.rank, graph: state.graph, node: node.node, io: cur.io, slot: cur.slot, iteration: state.iteration };
  const valuesCard = h('div', { class: 'card span-2' });
  const manyRanks = (ctx.dumps.find((x) => x.id === state.dump) || { ranks: [] }).ranks.length > 1;
  put(v.page, h('div', { class: 'tensor-grid' }, ...statsCards(q, cur, alive), historyCard(q, alive),
    manyRanks ? ranksCard(q, alive) : null, valuesCard));
  drawValues(valuesCard, q, cur, alive);
}

function headCard(node, cur) {
  const tensorSelect = h('select', { class: 'input', 'aria-label': 'tensor',
    onchange: (e) => { const [io, slot] = e.target.value.split(':'); set({ io, slot: parseInt(slot, 10) }, { push: false }); } },
  node.tensors.map((t) => h('option', { value: `${t.io}:${t.slot}`, disabled: !t.dumped,
    selected: cur && t.io === cur.io && t.slot === cur.slot }, `${t.io} ${t.slot}  ${shape(t.shape)} ${t.dtype || ''}${t.dumped ? '' : ' (not dumped)'}`)));
  return h('div', { class: 'tensor-head card' },
    h('div', { class: 'th-main' },
      h('div', { class: 'th-title' }, h('i', { class: 'kbar', style: { background: kindColor(node.kind) } }), h('h1', {}, node.name),
        h('span', { class: 'chip op' }, node.op_type), kindChip(node.kind)),
      h('div', { class: 'mono muted th-full' }, node.node)),
    h('div', { class: 'th-controls' }, h('label', { class: 'muted' }, 'Tensor '), tensorSelect,
      h('button', { class: 'btn', onclick: () => set({ view: 'graph', scope: node.place }) }, 'Show in graph'),
      cur && cur.has_values !== false ? h('a', { class: 'btn', download: '', href: api.npyUrl({ dump: state.dump, rank: state.rank, graph: state.graph, node: node.node,
        io: cur.io, slot: cur.slot, iteration: state.iteration }) }, 'Download .npy') : null));
}

/** The statistics card (current, previous, difference) and the histogram card, filled when the server answers. */
function statsCards(q, cur, alive) {
  const body = h('div', { class: 'card-body stats-body' }, h('span', { class: 'muted' }, 'Computing…'));
  const note = shardNote(cur.shards, state.rank);     // a sharded parameter is shown whole
  const statsCard = h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Statistics'),
    h('span', { class: 'muted' }, `${shape(cur.shape)} ${cur.dtype} · ${fmtBytes(cur.bytes)} · iteration ${state.iteration}`)),
  note ? h('div', { class: 'muted small shard-note' }, note) : null, body);
  const histBox = h('div', { class: 'card-body hist-body' });
  const histCard = h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Histogram'), h('span', { class: 'muted' }, 'finite values')),
    histBox);
  // a statistics-only tensor has no values to take a difference of: not asked (no 404 to log)
  const diff = cur.has_values === false ? Promise.resolve(null) : api.diff({ ...q, slice: null }).catch((e) => ({ error: e }));
  Promise.all([api.tensor(q), diff]).then(([t, d]) => {
    if (!alive()) return;
    // a statistics-only dump stores no values to draw (the histogram is null), which is not "no finite values"
    put(clear(histBox), t.histogram === null
      ? h('p', { class: 'muted pad' }, 'No values stored: this dump holds statistics only.')
      : histogram(t.histogram, { width: Math.max(320, histBox.clientWidth - 32), height: 300, color: '#4c6ef5' }));
    const cols = statColumns(t.stats, d);
    put(clear(body), h('table', { class: 'tbl stats-table' },
      h('thead', {}, h('tr', {}, h('th', {}, 'statistic'), cols.map(([c]) => h('th', { class: 'num' }, c)))),
      h('tbody', {}, STATS.map(([k, label]) => h('tr', { class: ['nan', 'pos_inf', 'neg_inf'].includes(k) && t.stats[k] ? 'bad-row' : '' },
        h('td', {}, label), cols.map(([, st]) => h('td', { class: 'num', 'data-stat': k }, fmt(st ? st[k] : null))))))),
    cols.length > 1 ? null : h('div', { class: 'muted small' }, d && d.error ? d.error.message : d && d.reason ? d.reason : ''));
  }).catch((e) => { if (alive()) put(clear(body), errorBox(e)); });
  return [statsCard, histCard];
}

/** Statistics across iterations, as chosen series on a line chart (click: go to that iteration). */
function historyCard(q, alive) {
  const card = h('div', { class: 'card span-2' });
  const draw = (items) => {
    const chips = h('div', { class: 'series-chips' }, SERIES.map(([k, color]) => h('button', {
      class: `series-chip${prefs.series.has(k) ? ' on' : ''}`, style: { '--c': color },
      onclick: () => { if (prefs.series.has(k)) prefs.series.delete(k); else prefs.series.add(k); draw(items); } },
    h('i', {}), k.replace('_', ' '))),
    h('label', { class: 'toggle' }, h('input', { type: 'checkbox', checked: prefs.log, onchange: (e) => { prefs.log = e.target.checked; draw(items); } }), 'log scale'));
    const series = SERIES.filter(([k]) => prefs.series.has(k)).map(([k, color]) => ({ name: k, color,
      points: items.map((it) => ({ x: it.iteration, y: it.stats ? it.stats[k] : null })) }));
    put(clear(card), h('div', { class: 'card-head' }, h('h2', {}, 'Across iterations'),
      h('span', { class: 'muted' }, `${items.length} iteration${items.length > 1 ? 's' : ''} · click to jump`), h('span', { class: 'spacer' }), chips),
    h('div', { class: 'card-body' }, lineChart(series, { width: Math.max(400, card.clientWidth - 34), height: 240, marker: state.iteration, log: prefs.log,
      onPick: (x) => set({ iteration: x }) })));
  };
  put(card, h('div', { class: 'card-head' }, h('h2', {}, 'Across iterations')), h('div', { class: 'card-body muted' }, 'Loading…'));
  api.history(q).then((r) => { if (alive()) draw(r.items); }).catch((e) => { if (alive()) put(clear(card), errorBox(e)); });
  return card;
}

async function drawValues(card, q, cur, alive) {
  const sliceInput = h('input', { type: 'text', class: 'mono slice-input', value: state.slice || '', placeholder: defaultSlice(cur.shape),
    'aria-label': 'slice' });
  const body = h('div', { class: 'card-body values-body' }, h('span', { class: 'muted' }, 'Loading…'));
  const seg = (opts, key) => h('div', { class: 'seg' }, opts.map(([v, label]) => h('button', { class: prefs[key] === v ? 'on' : '',
    onclick: () => { prefs[key] = v; drawValues(card, q, cur, alive); } }, label)));
  put(clear(card), h('div', { class: 'card-head' }, h('h2', {}, 'Values'),
    h('form', { class: 'row', onsubmit: (e) => { e.preventDefault(); set({ slice: sliceInput.value.trim() || null }, { push: false }); } },
      h('span', { class: 'muted' }, `${shape(cur.shape)} →`), sliceInput, h('button', { class: 'btn', type: 'submit' }, 'Slice')),
    h('span', { class: 'spacer' }),
    seg([['current', 'Current'], ['previous', 'Previous'], ['difference', 'Difference']], 'which'),
    seg([['table', 'Table'], ['heat', 'Heat map']], 'mode')), body);
  if (cur.has_values === false) {    // said, not asked: the server would answer 404
    put(clear(body), h('p', { class: 'muted no-values' }, 'No values stored: this dump holds statistics only.'));
    return;
  }
  let got;
  try {
    const r = prefs.which === 'current' ? await api.values({ ...q, slice: state.slice }) : await api.diff({ ...q, slice: state.slice });
    if (r.available === false) { if (alive()) put(clear(body), h('p', { class: 'muted no-earlier' }, r.reason)); return; }
    got = valuesOf(prefs.which, r);
  } catch (e) { if (alive()) put(clear(body), errorBox(e)); return; }
  if (!alive()) return;
  const { sel, note } = got;
  const hover = h('span', { class: 'hover-val mono' });
  put(clear(body), h('div', { class: 'values-info muted' }, note, ` · shape ${shape(sel.shape)}`,
    sel.truncated ? h('span', { class: 'chip warn' }, `showing ${sel.shown.join(' × ')} (capped)`) : null, hover));
  if (!Array.isArray(sel.values)) put(body, h('div', { class: 'scalar mono' }, fmt(sel.values, 8)));
  else if (prefs.mode === 'heat') {
    put(body, heatmap(sel.values, { min: sel.min, max: sel.max, onHover: (i, j, val) => {
      hover.textContent = i === null ? '' : `[${i}, ${j}] = ${fmt(val, 7)}`;
    } }));
  } else put(body, valueTable(sel.values));
}

function valueTable(values) {
  const t = tableShape(values);
  const table = h('table', { class: 'tbl values-table' },
    h('thead', {}, h('tr', {}, h('th', {}, ''), Array.from({ length: t.cols }, (_, j) => h('th', { class: 'num' }, j)))),
    h('tbody', {}, t.rows.map((r, i) => h('tr', {}, h('th', { class: 'num' }, i),
      r.map((v) => h('td', { class: `num${typeof v === 'string' ? ' bad' : v === 0 ? ' zero' : ''}` }, fmt(v, 5)))))));
  const wrap = h('div', { class: 'values-wrap' }, table);
  if (t.cut) put(wrap, h('div', { class: 'muted small pad' }, `Table shows ${t.shownRows} × ${t.cols}; use the heat map or a narrower slice for the rest.`));
  return wrap;
}
