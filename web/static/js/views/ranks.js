// Ranks pane: every rank of the dump with its iterations and sizes, a selector, and Compare: the
// results of debugger.compare.compare_ranks (via /api/compare) against a base rank.
import { api } from '../api.js';
import { state, set } from '../state.js';
import { put, h, clear, fmt, fmtBytes, errorBox, kindDot } from '../dom.js';
import { kindsIn, kindColor, kindLabel } from '../kinds.js';
import { tensorLabel } from '../hits.js';

export function mount(root) {
  const page = h('div', { class: 'page' });
  put(root, page);
  let seq = 0;

  async function render() {
    const my = ++seq;
    clear(page);
    let r;
    try { r = await api.ranks(state.dump); } catch (e) { put(page, errorBox(e)); return; }
    if (my !== seq) return;
    const table = h('table', { class: 'tbl' },
      h('thead', {}, h('tr', {}, ['rank', 'iterations', 'graphs', 'tensor files', 'size', 'nodes by kind', ''].map((c, i) => h('th', { class: i >= 3 && i <= 4 ? 'num' : '' }, c)))),
      h('tbody', {}, r.items.map((x) => h('tr', { class: `clickable${x.rank === state.rank ? ' sel' : ''}`, onclick: () => set({ rank: x.rank }) },
        h('td', {}, h('b', {}, `rank ${x.rank}`), h('div', { class: 'mono faint small' }, x.path)),
        h('td', {}, itRange(x.iterations)),
        h('td', {}, x.graphs.length ? `graph${x.graphs.length === 1 ? '' : 's'} ${x.graphs.join(', ')}` : 'none'),
        h('td', { class: 'num' }, fmt(x.tensor_files)),
        h('td', { class: 'num' }, fmtBytes(x.tensor_bytes)),
        h('td', {}, kindBar(x.nodes_by_kind)),
        h('td', {}, x.rank === state.rank ? h('span', { class: 'chip' }, 'selected') : h('button', { class: 'btn btn-small' }, 'Select'))))));
    const compareBody = h('div', { class: 'card-body' });
    const allToggle = h('input', { type: 'checkbox' });
    const baseSel = h('select', { class: 'input', 'aria-label': 'base rank' }, r.items.map((x) => h('option', { value: x.rank }, `rank ${x.rank}`)));
    put(page, 
      h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Ranks'), h('span', { class: 'muted' }, `${r.total} in this dump`)), table),
      h('div', { class: 'card compare-card' },
        h('div', { class: 'card-head' }, h('h2', {}, 'Compare ranks'), h('span', { class: 'muted' }, 'data-parallel invariants'), h('span', { class: 'spacer' }),
          h('label', { class: 'toggle' }, allToggle, 'every pair'),
          h('span', { class: 'muted' }, 'base'), baseSel,
          h('button', { class: 'btn btn-accent', disabled: r.total < 2, onclick: () => runCompare(compareBody, parseInt(baseSel.value, 10), allToggle.checked) }, 'Compare')),
        compareBody));
    put(compareBody, h('div', { class: 'note' }, r.total < 2
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
