// Ranks pane: every rank of the dump with its iterations and sizes, a selector, and Compare: the
// results of debugger.compare.compare_ranks (via /api/compare) against a base rank.
import { api } from '../api.js';
import { state, set, ctx } from '../state.js';
import { pagesFor, visibleRange } from './ranks/state.js';
import { put, h, clear, fmt, fmtBytes, errorBox, kindDot, debounce } from '../dom.js';
import { kindsIn, kindColor, kindLabel } from '../kinds.js';
import { tensorLabel } from '../hits.js';

export function mount(root) {
  const page = h('div', { class: 'page' });
  put(root, page);
  let seq = 0;

  async function render() {
    const my = ++seq;
    clear(page);
    const d = ctx.dumps.find((x) => x.id === state.dump) || ctx.dumps[0];
    const ids = d ? d.ranks : [];
    if (my !== seq) return;
    const compareBody = h('div', { class: 'card-body' });
    const allToggle = h('input', { type: 'checkbox' });
    const baseSel = h('select', { class: 'input', 'aria-label': 'base rank' }, ids.map((x) => h('option', { value: x }, `rank ${x}`)));
    put(page, rankList(ids.length),
      h('div', { class: 'card compare-card' },
        h('div', { class: 'card-head' }, h('h2', {}, 'Compare ranks'), h('span', { class: 'muted' }, 'data-parallel invariants'), h('span', { class: 'spacer' }),
          h('label', { class: 'toggle' }, allToggle, 'every pair'),
          h('span', { class: 'muted' }, 'base'), baseSel,
          h('button', { class: 'btn btn-accent', disabled: ids.length < 2, onclick: () => runCompare(compareBody, parseInt(baseSel.value, 10), allToggle.checked) }, 'Compare')),
        compareBody));
    put(compareBody, h('div', { class: 'note' }, ids.length < 2
      ? 'This dump has one rank: there is nothing to compare.'
      : 'Compares every rank with the base rank under data-parallel invariants: parameters equal, all-reduce outputs equal.'));
  }

  async function runCompare(body, base, all) {
    put(clear(body), h('div', { class: 'muted' }, 'Comparing…'));
    try {
      const r = await api.compare(state.dump, base, all);
      put(clear(body), compareView(r, all));
    } catch (e) {
      put(clear(body), h('div', { class: 'note' }, e.status === 501 ? `Not available: ${e.message}.` : e.message));
    }
  }

  render();
  return { update(changed) { if (changed.has('dump') || changed.has('rank')) render(); } };
}

const ROW = 34, PAGE = 100, VIEW = 440;
const SORTS = [['rank', 'rank'], ['problems', 'problems first'], ['hits', 'most hits'], ['divergent', 'most divergent'], ['warnings', 'most warnings']];

// The ranks, virtualised: only the rows in sight (and a few more) are in the DOM; the server filters
// (rank, host, group), sorts and pages them (/api/ranks?q=&sort=&begin=: 100 rows from begin).
function rankList(count) {
  const pages = new Map();
  let total = count, q = '', sort = 'rank', gen = 0;
  const spacer = h('div', { class: 'rank-spacer', style: { position: 'relative', height: `${total * ROW}px` } });
  const scroller = h('div', { class: 'rank-scroll', style: { height: `${VIEW}px`, overflowY: 'auto', position: 'relative' } }, spacer);
  const counter = h('span', { class: 'muted rank-count' }, `${count} in this dump`);
  const search = h('input', { class: 'input rank-search', type: 'search', placeholder: 'rank, host or group', 'aria-label': 'search ranks' });
  const sortSel = h('select', { class: 'input rank-sort', 'aria-label': 'sort ranks' }, SORTS.map(([v, l]) => h('option', { value: v }, l)));
  const reset = () => { gen++; pages.clear(); scroller.scrollTop = 0; draw(); };
  search.addEventListener('input', debounce(() => { q = search.value; reset(); }, 200));
  sortSel.addEventListener('change', () => { sort = sortSel.value; reset(); });
  async function fetchPage(p, my) {
    pages.set(p, null);
    try {
      const r = await api.rankPage({ dump: state.dump, q, sort, begin: p * PAGE });
      if (my !== gen) return;
      pages.set(p, r.items);
      total = r.total;
      spacer.style.height = `${total * ROW}px`;
      counter.textContent = q ? `${fmt(r.total)} of ${fmt(r.count)} match` : `${fmt(r.count)} in this dump${r.triaged ? '' : ' (problems once the triage is done)'}`;
      draw();
    } catch (e) { if (my === gen) put(clear(spacer), errorBox(e)); }
  }
  function draw() {
    const [first, last] = visibleRange(scroller.scrollTop, VIEW, ROW, total);
    for (const p of pagesFor(first, last, PAGE)) if (!pages.has(p)) fetchPage(p, gen);
    clear(spacer);
    for (let i = first; i < last; i++) {
      const x = (pages.get(Math.floor(i / PAGE)) || [])[i % PAGE];
      put(spacer, x ? rankRow(x, i) : h('div', { class: 'rank-row faint', style: { top: `${i * ROW}px` } }, '…'));
    }
  }
  scroller.addEventListener('scroll', () => requestAnimationFrame(draw));
  draw();
  return h('div', { class: 'card ranks-card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Ranks'), counter,
    h('span', { class: 'spacer' }), search, h('span', { class: 'muted' }, 'sort'), sortSel), scroller);
}

function rankRow(x, i) {
  const sel = x.rank === state.rank;
  return h('div', { class: `rank-row clickable${sel ? ' sel' : ''}`, 'data-rank': x.rank, style: { top: `${i * ROW}px` }, onclick: () => set({ rank: x.rank }) },
    h('b', { class: 'rank-name' }, `rank ${x.rank}`),
    h('span', { class: 'faint small rank-group' }, [x.group, x.host].filter(Boolean).join(' · ')),
    h('span', { class: 'small' }, itRange(x.iterations)),
    h('span', { class: 'num small rank-size' }, x.saved === 'statistics' ? `${fmt(x.tensor_files)} tensors · statistics only`
      : `${fmt(x.tensor_files)} files · ${fmtBytes(x.tensor_bytes)}`),
    h('span', { class: 'rank-problems' }, x.hits ? problemChip(x, 'hit', `${fmt(x.hits)} hits`) : null,
      x.divergent ? problemChip(x, 'divergent', `${fmt(x.divergent)} divergent`) : null,
      x.warnings ? h('span', { class: 'chip warn' }, `${fmt(x.warnings)} warnings`) : null),
    kindBar(x.nodes_by_kind),
    sel ? h('span', { class: 'chip' }, 'selected') : h('button', { class: 'btn btn-small' }, 'Select'));
}

/** A rank's hits or divergence: a click opens its first problem's tensor in the graph at that rank and
 * iteration (``x.first``, from the triage's heatmap), not just the rank. */
function problemChip(x, cls, text) {
  const f = x.first;
  if (!f) return h('span', { class: `chip ${cls}` }, text);
  return h('span', { class: `chip ${cls} clickable`, title: `${f.node}\nclick: show it on rank ${x.rank} at iteration ${f.iteration} in the graph`,
    onclick: (e) => { e.stopPropagation(); set({ view: 'graph', rank: x.rank, iteration: f.iteration, graph: f.graph, node: f.node, io: f.io, slot: f.slot, scope: '' }); } }, text);
}

function itRange(its) {
  if (!its.length) return '—';
  const contiguous = its[its.length - 1] - its[0] === its.length - 1;
  return contiguous ? `${its[0]}–${its[its.length - 1]} (${its.length})` : `${its.length}: ${its.slice(0, 8).join(', ')}${its.length > 8 ? '…' : ''}`;
}

export function kindBar(kinds) {
  const total = Object.values(kinds || {}).reduce((a, b) => a + b, 0) || 1;
  return h('div', { class: 'kind-bar', title: Object.entries(kinds).map(([k, v]) => `${v} ${kindLabel(k)}`).join('\n') },
    kindsIn(kinds).map((k) => h('i', { style: { width: `${(kinds[k] / total) * 100}%`, background: kindColor(k) } })));
}

const GRADE = { pass: 'ok', warning: 'warn', error: 'hit' };

// The `tdbg compare --json` object: totals, per-iteration counts, the first divergence, the pairs.
function compareView(r, all) {
  const res = r.result, sm = res.summary;
  const metric = (label, v, cls = '') => h('div', { class: `cmp-metric ${cls}` }, h('b', {}, fmt(v)), h('span', {}, label));
  const pairRow = (p) => h('tr', { class: 'clickable', title: `${p.node}\nclick: show rank ${p.a.rank} at iteration ${p.iteration} in the graph`,
    onclick: () => set({ view: 'graph', rank: p.a.rank, graph: p.graph, iteration: p.iteration, node: p.node, io: p.io, slot: p.slot }) },
  h('td', { class: 'num' }, p.iteration), h('td', {}, `rank ${p.a.rank}`),
  h('td', {}, kindDot(p.kind), ' ', h('span', { class: 'mono' }, tensorLabel({ ...p, io: null }))),
  h('td', { class: 'mono' }, `${p.io}:${p.slot}`),
  h('td', {}, h('span', { class: `chip ${GRADE[p.grade] || ''}` }, p.grade), p.counted ? '' : h('span', { class: 'faint' }, ' (may differ)')),
  h('td', { class: 'num' }, p.metrics ? fmt(p.metrics.cosine, 6) : '—'),
  h('td', { class: 'num' }, p.metrics ? fmt(p.metrics.max_abs_err) : '—'),
  h('td', { class: 'small muted' }, p.reason || ''));
  const fd = res.first_divergence;
  return h('div', { class: 'stack cmp' },
    h('div', { class: 'cmp-metrics' }, metric('pairs', sm.pairs), metric('identical', sm.identical), metric('pass', sm.pass, 'ok'),
      metric('warning', sm.warning, sm.warning ? 'warn' : ''), metric('error', sm.error, sm.error ? 'bad' : ''),
      metric('counted errors', sm.counted_errors, sm.counted_errors ? 'bad' : ''), metric('missing', sm.missing)),
    h('div', { class: fd ? 'error-box' : 'note' }, fd
      ? [h('b', {}, 'First divergence: '), `iteration ${fd.iteration}, rank ${fd.a.rank} vs ${fd.b.rank}: `, h('code', {}, tensorLabel(fd)), ` (${fd.reason || fd.grade})`]
      : sm.nothing_compared ? `Nothing compared: ${sm.nothing_compared}.`   // no pair is no evidence of agreement
      : `No divergence: every invariant tensor of rank${res.ranks.length > 1 ? 's' : ''} ${res.ranks.join(', ')} agrees with base rank ${res.base} in iterations ${res.iterations.join(', ')}.`),
    h('table', { class: 'tbl' }, h('thead', {}, h('tr', {}, ['iteration', 'pairs', 'pass', 'warning', 'error', 'counted errors'].map((c, i) => h('th', { class: i ? 'num' : '' }, c)))),
      h('tbody', {}, sm.iterations.map((x) => h('tr', {}, h('td', {}, x.iteration), h('td', { class: 'num' }, x.pairs), h('td', { class: 'num' }, x.pass),
        h('td', { class: 'num' }, x.warning), h('td', { class: 'num' }, x.error), h('td', { class: 'num' }, x.counted_errors))))),
    h('h3', {}, all ? `Pairs (${r.pairs.total})` : `Warning and error pairs, worst first (${r.pairs.total})`),
    r.pairs.total ? h('div', { class: 'values-wrap' }, h('table', { class: 'tbl' },
      h('thead', {}, h('tr', {}, ['iter', 'rank', 'tensor', 'io', 'grade', 'cosine', 'max abs err', 'reason'].map((c) => h('th', {}, c)))),
      h('tbody', {}, r.pairs.items.map(pairRow))))
      : h('div', { class: 'muted' }, 'None. Tick “every pair” to list the passing ones too.'),
    r.pairs.total > r.pairs.items.length ? h('div', { class: 'muted small' }, `showing ${r.pairs.items.length} of ${r.pairs.total}`) : null,
    res.warnings.length ? h('ul', { class: 'warn-list' }, res.warnings.map((w) => h('li', { class: 'small mono' }, w))) : null);
}
