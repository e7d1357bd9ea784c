// Tensor pane: statistics (current, previous iteration, difference), histogram, statistics across
// all iterations, and values as a table or heat map of a slice such as [0, :, :], capped.
import { api } from '../api.js';
import { state, set, ctx } from '../state.js';
import { put, h, clear, fmt, fmtBytes, shape, kindChip, errorBox, empty } from '../dom.js';
import { kindColor } from '../kinds.js';
import { histogram, lineChart, heatmap } from '../charts.js';

const STATS = [['min', 'min'], ['max', 'max'], ['mean', 'mean'], ['abs_mean', 'abs mean'], ['std', 'std'], ['l2norm', 'L2 norm'],
  ['count', 'count'], ['nan', 'NaN'], ['pos_inf', '+Inf'], ['neg_inf', '−Inf'], ['zeros', 'zeros'], ['positives', '> 0'], ['negatives', '< 0']];
const SERIES = [['max', '#e03131'], ['min', '#1c7ed6'], ['mean', '#2f9e44'], ['abs_mean', '#f08c00'], ['std', '#9c36b5'], ['l2norm', '#495057']];

let chosenSeries = new Set(['min', 'max', 'mean']);
let logScale = false;
let mode = 'table';          // table | heat
let which = 'current';       // current | previous | difference

export function mount(root) {
  const page = h('div', { class: 'page tensor-page' });
  put(root, page);
  let seq = 0;

  async function render() {
    const my = ++seq;
    clear(page);
    if (!state.node) {
      put(page, h('div', { class: 'card' }, empty('No tensor chosen', 'Select a node in the Graph or Code view, then open its tensor here.')));
      return;
    }
    let node;
    try {
      node = await api.node({ dump: state.dump, rank: state.rank, graph: state.graph, node: state.node, iteration: state.iteration });
    } catch (e) { if (my === seq) put(page, errorBox(e)); return; }
    if (my !== seq) return;
    const dumped = node.tensors.filter((t) => t.dumped);
    let cur = dumped.find((t) => t.io === state.io && t.slot === state.slot) || dumped.find((t) => t.io === 'output') || dumped[0];
    const tensorSelect = h('select', { class: 'input', 'aria-label': 'tensor',
      onchange: (e) => { const [io, slot] = e.target.value.split(':'); set({ io, slot: parseInt(slot, 10) }, { push: false }); } },
    node.tensors.map((t) => h('option', { value: `${t.io}:${t.slot}`, disabled: !t.dumped,
      selected: cur && t.io === cur.io && t.slot === cur.slot }, `${t.io} ${t.slot}  ${shape(t.shape)} ${t.dtype || ''}${t.dumped ? '' : ' (not dumped)'}`)));
    put(page, h('div', { class: 'tensor-head card' },
      h('div', { class: 'th-main' },
        h('div', { class: 'th-title' }, h('i', { class: 'kbar', style: { background: kindColor(node.kind) } }), h('h1', {}, node.name),
          h('span', { class: 'chip op' }, node.op_type), kindChip(node.kind)),
        h('div', { class: 'mono muted th-full' }, node.node)),
      h('div', { class: 'th-controls' }, h('label', { class: 'muted' }, 'Tensor '), tensorSelect,
        h('button', { class: 'btn', onclick: () => set({ view: 'graph', scope: node.place }) }, 'Show in graph'),
        cur && cur.has_values !== false ? h('a', { class: 'btn', download: '', href: api.npyUrl({ dump: state.dump, rank: state.rank, graph: state.graph, node: node.node,
          io: cur.io, slot: cur.slot, iteration: state.iteration }) }, 'Download .npy') : null)));
    if (!cur) {
      put(page, h('div', { class: 'card' }, empty(`Not dumped in iteration ${state.iteration}`,
        node.iterations.length ? `This node has tensors in iterations ${node.iterations.join(', ')}.` : 'This node has no tensor files.')));
      return;
    }
    const q = { dump: state.dump, rank: state.rank, graph: state.graph, node: node.node, io: cur.io, slot: cur.slot, iteration: state.iteration };
    const statsCard = h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Statistics'),
      h('span', { class: 'muted' }, `${shape(cur.shape)} ${cur.dtype} · ${fmtBytes(cur.bytes)} · iteration ${state.iteration}`)),
    h('div', { class: 'card-body stats-body' }, h('span', { class: 'muted' }, 'Computing…')));
    const histCard = h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Histogram'), h('span', { class: 'muted' }, 'finite values')),
      h('div', { class: 'card-body hist-body' }));
    const histBox = histCard.querySelector('.hist-body');
    const histoCard = h('div', { class: 'card span-2' });
    const valuesCard = h('div', { class: 'card span-2' });
    put(page, h('div', { class: 'tensor-grid' }, statsCard, histCard, histoCard, valuesCard));

    // statistics: current, previous, difference
    const body = statsCard.querySelector('.stats-body');
    Promise.all([api.tensor(q), api.diff({ ...q, slice: null }).catch((e) => ({ error: e }))]).then(([t, d]) => {
      if (my !== seq) return;
      // a statistics-only dump stores no values to draw (the histogram is null), which is not "no finite values"
      put(clear(histBox), t.histogram === null
        ? h('p', { class: 'muted pad' }, 'No values stored: this dump holds statistics only.')
        : histogram(t.histogram, { width: Math.max(320, histBox.clientWidth - 32), height: 300, color: '#4c6ef5' }));
      const hasPrev = d && !d.error;
      const cols = hasPrev ? [['current', t.stats], [`previous (it ${d.previous_iteration})`, d.stats.previous], ['difference', d.stats.difference]]
        : [['current', t.stats]];
      put(clear(body), h('table', { class: 'tbl stats-table' },
        h('thead', {}, h('tr', {}, h('th', {}, 'statistic'), cols.map(([c]) => h('th', { class: 'num' }, c)))),
        h('tbody', {}, STATS.map(([k, label]) => h('tr', { class: ['nan', 'pos_inf', 'neg_inf'].includes(k) && t.stats[k] ? 'bad-row' : '' },
          h('td', {}, label), cols.map(([, st]) => h('td', { class: 'num', 'data-stat': k }, fmt(st ? st[k] : null))))))),
      hasPrev ? null : h('div', { class: 'muted small' }, d && d.error ? d.error.message : ''));
    }).catch((e) => { if (my === seq) put(clear(body), errorBox(e)); });

    // across iterations
    const drawHistory = (items) => {
      clear(histoCard);
      const chips = h('div', { class: 'series-chips' }, SERIES.map(([k, color]) => h('button', {
        class: `series-chip${chosenSeries.has(k) ? ' on' : ''}`, style: { '--c': color },
        onclick: () => { if (chosenSeries.has(k)) chosenSeries.delete(k); else chosenSeries.add(k); drawHistory(items); } },
      h('i', {}), k.replace('_', ' '))),
      h('label', { class: 'toggle' }, h('input', { type: 'checkbox', checked: logScale, onchange: (e) => { logScale = e.target.checked; drawHistory(items); } }), 'log scale'));
      const series = SERIES.filter(([k]) => chosenSeries.has(k)).map(([k, color]) => ({ name: k, color,
        points: items.map((it) => ({ x: it.iteration, y: it.stats ? it.stats[k] : null })) }));
      put(histoCard, h('div', { class: 'card-head' }, h('h2', {}, 'Across iterations'),
        h('span', { class: 'muted' }, `${items.length} iteration${items.length > 1 ? 's' : ''} · click to jump`), h('span', { class: 'spacer' }), chips),
      h('div', { class: 'card-body' }, lineChart(series, { width: Math.max(400, histoCard.clientWidth - 34), height: 240, marker: state.iteration, log: logScale,
        onPick: (x) => set({ iteration: x }) })));
    };
    put(histoCard, h('div', { class: 'card-head' }, h('h2', {}, 'Across iterations')), h('div', { class: 'card-body muted' }, 'Loading…'));
    api.history(q).then((r) => { if (my === seq) drawHistory(r.items); }).catch((e) => { if (my === seq) put(clear(histoCard), errorBox(e)); });

    // values
    drawValues(valuesCard, q, cur, my);
  }

  async function drawValues(card, q, cur, my) {
    clear(card);
    const sliceInput = h('input', { type: 'text', class: 'mono slice-input', value: state.slice || '', placeholder: defaultSlice(cur.shape),
      'aria-label': 'slice' });
    const body = h('div', { class: 'card-body values-body' }, h('span', { class: 'muted' }, 'Loading…'));
    const seg = (opts, get, setv) => h('div', { class: 'seg' }, opts.map(([v, label]) => h('button', { class: get() === v ? 'on' : '',
      onclick: () => { setv(v); drawValues(card, q, cur, my); } }, label)));
    put(card, h('div', { class: 'card-head' }, h('h2', {}, 'Values'),
      h('form', { class: 'row', onsubmit: (e) => { e.preventDefault(); set({ slice: sliceInput.value.trim() || null }, { push: false }); } },
        h('span', { class: 'muted' }, `${shape(cur.shape)} →`), sliceInput, h('button', { class: 'btn', type: 'submit' }, 'Slice')),
      h('span', { class: 'spacer' }),
      seg([['current', 'Current'], ['previous', 'Previous'], ['difference', 'Difference']], () => which, (v) => { which = v; }),
      seg([['table', 'Table'], ['heat', 'Heat map']], () => mode, (v) => { mode = v; })), body);
    let sel, note = '';
    try {
      if (which === 'current') {
        const r = await api.values({ ...q, slice: state.slice });
        sel = r; note = `slice ${r.slice}`;
      } else {
        const r = await api.diff({ ...q, slice: state.slice });
        sel = r[which];
        note = `slice ${r.slice} · ${which === 'previous' ? `iteration ${r.previous_iteration}` : `iteration ${r.iteration} − ${r.previous_iteration}`}`;
      }
    } catch (e) { if (my === seq) put(clear(body), errorBox(e)); return; }
    if (my !== seq) return;
    clear(body);
    const info = h('div', { class: 'values-info muted' }, note, ` · shape ${shape(sel.shape)}`,
      sel.truncated ? h('span', { class: 'chip warn' }, `showing ${sel.shown.join(' × ')} (capped)`) : null,
      h('span', { class: 'hover-val mono' }));
    put(body, info);
    const values = sel.values;
    if (!Array.isArray(values)) { put(body, h('div', { class: 'scalar mono' }, fmt(values, 8))); return; }
    const hover = info.querySelector('.hover-val');
    if (mode === 'heat') {
      put(body, heatmap(values, { min: sel.min, max: sel.max, onHover: (i, j, v) => {
        hover.textContent = i === null ? '' : `[${i}, ${j}] = ${fmt(v, 7)}`;
      } }));
    } else {
      put(body, valueTable(values));
    }
  }

  render();
  return {
    update(changed) {
      if (['node', 'iteration', 'dump', 'rank', 'graph', 'io', 'slot'].some((k) => changed.has(k))) render();
      else if (changed.has('slice')) render();
    },
    destroy() { seq++; },
  };
}

function defaultSlice(sh) {
  if (!sh || sh.length === 0) return '[]';
  if (sh.length === 1) return '[:]';
  return `[${[...Array(sh.length - 2).fill('0'), ':', ':'].join(', ')}]`;
}

function valueTable(values) {
  const rows = Array.isArray(values[0]) ? values : [values];
  const C = rows[0] ? rows[0].length : 0;
  const maxRows = 400, maxCols = 60;
  const table = h('table', { class: 'tbl values-table' },
    h('thead', {}, h('tr', {}, h('th', {}, ''), Array.from({ length: Math.min(C, maxCols) }, (_, j) => h('th', { class: 'num' }, j)))),
    h('tbody', {}, rows.slice(0, maxRows).map((r, i) => h('tr', {}, h('th', { class: 'num' }, i),
      r.slice(0, maxCols).map((v) => h('td', { class: `num${typeof v === 'string' ? ' bad' : v === 0 ? ' zero' : ''}` }, fmt(v, 5)))))));
  const wrap = h('div', { class: 'values-wrap' }, table);
  if (rows.length > maxRows || C > maxCols) {
    put(wrap, h('div', { class: 'muted small pad' }, `Table shows ${Math.min(rows.length, maxRows)} × ${Math.min(C, maxCols)}; use the heat map or a narrower slice for the rest.`));
  }
  return wrap;
}
