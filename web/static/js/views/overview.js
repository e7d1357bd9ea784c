// Overview pane: the dump (path, version, ranks, graphs, iterations, sizes), node counts by kind,
// the watchpoint summary and the reader's warnings.
import { api } from '../api.js';
import { state, set, ctx } from '../state.js';
import { put, h, clear, fmt, fmtBytes, errorBox, kindDot, dumpHead } from '../dom.js';
import { kindsIn, kindColor, kindLabel } from '../kinds.js';
import { layoutLines } from './overview/state.js';

export function mount(root) {
  const page = h('div', { class: 'page overview' });
  put(root, page);
  let seq = 0;

  async function render() {
    const my = ++seq;
    let info;
    try { info = await api.info(state.dump); } catch (e) { put(clear(page), errorBox(e)); return; }
    if (my !== seq) return;
    clear(page);
    const ranks = info.ranks;
    const r0 = ranks.find((r) => r.rank === state.rank) || ranks[0];
    const its = [...new Set(ranks.flatMap((r) => r.iterations))].sort((a, b) => a - b);
    const files = ranks.reduce((a, r) => a + r.tensor_files, 0);
    const bytes = ranks.reduce((a, r) => a + r.tensor_bytes, 0);
    const statsOnly = ranks.every((r) => r.saved === 'statistics');
    const kinds = {};
    for (const r of ranks.filter((x) => x.rank === r0.rank)) for (const [k, v] of Object.entries(r.nodes_by_kind)) kinds[k] = (kinds[k] || 0) + v;
    const nodes = Object.values(kinds).reduce((a, b) => a + b, 0);
    const metric = (label, value, sub) => h('div', { class: 'metric card' }, h('div', { class: 'm-label' }, label),
      h('div', { class: 'm-value' }, value), sub ? h('div', { class: 'm-sub' }, sub) : null);

    const listed = ctx.dumps.find((d) => d.id === info.id);
    put(page, dumpHead(info.id, listed ? listed.where : info.id, [['Open graph', () => set({ view: 'graph' }), true],
      ['Browse code', () => set({ view: 'code' })], ['Watchpoints', () => set({ view: 'watch' })]]));

    if (ctx.dumps.length > 1) {
      put(page, h('div', { class: 'card dumps-card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Dumps in this folder'),
        h('span', { class: 'muted' }, `${ctx.dumps.length} found`)),
      h('div', { class: 'dump-list' }, ctx.dumps.map((d) => h('button', { class: `dump-item${d.id === info.id ? ' active' : ''}`,
        onclick: () => set({ dump: d.id, rank: 0, graph: null, iteration: null, scope: '', node: null, line: null, file: null }) },
      h('b', {}, d.id), h('span', { class: 'mono faint' }, d.where))))));
    }

    put(page, h('div', { class: 'metrics' },
      metric(r0.framework || 'Framework', r0.framework_version || '—', `${r0.device_target || 'unknown device'} · net ${Array.isArray(r0.net) ? r0.net.join(', ') : r0.net || '—'}`),
      metric('Ranks', String(ranks.length), ranks.map((r) => `rank_${r.rank}`).join(', ')),
      metric('Graphs', String(r0.graphs.length), r0.graph_details.map((g) => `${g.name || 'graph ' + g.graph}: ${fmt(g.nodes)} nodes`).join(' · ')),
      metric('Iterations', its.length ? `${its[0]}–${its[its.length - 1]}` : '—', `${its.length} dumped`),
      // a statistics dump stores no values: its tensors are records, and "0 B" would read as empty files
      statsOnly ? metric('Tensors', fmt(files), 'statistics only: no values stored') : metric('Tensor files', fmt(files), fmtBytes(bytes))));
    // what the format records and what it does not (an msprobe dump: calls and their statistics, no data flow)
    if (r0.records) put(page, h('div', { class: 'note records-note muted small' }, h('b', {}, 'What this dump records: '), r0.records));
    put(page, layoutNote(info.layout));
    // a run resumed into the dump after a restart (Recorder(resume=True)): the runs apart, never one
    if ((r0.runs || []).length > 1) put(page, h('div', { class: 'note runs-note small' }, h('b', {}, `${r0.runs.length} training runs: `),
      r0.runs.map((r, k) => `run ${k + 1} from iteration ${r.first_iteration}${r.resumed ? ` (resumed${r.started ? ' ' + r.started : ''})` : ''}`).join(' · ')));

    const kindRows = kindsIn(kinds).map((k) => h('div', { class: 'kind-row' },
      h('span', { class: 'kr-label' }, h('i', { style: { background: kindColor(k) } }), kindLabel(k)),
      h('span', { class: 'kr-bar' }, h('i', { style: { width: `${(kinds[k] / Math.max(...Object.values(kinds))) * 100}%`, background: kindColor(k) } })),
      h('span', { class: 'kr-n' }, fmt(kinds[k]))));
    const w = info.watch;
    const watchCard = h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Watchpoints'),
      h('span', { class: 'spacer' }), h('button', { class: 'btn btn-small', onclick: () => set({ view: 'watch' }) }, 'Manage')),
    h('div', { class: 'card-body' }, w.watchpoints === 0 ? h('div', { class: 'muted' }, 'No watchpoint set. The “recommended” preset checks NaN/Inf origins, vanishing gradients, frozen weights, saturated and dead activations.')
        : h('div', { class: 'stack' },
          h('div', {}, h('b', { class: 'big' }, fmt(w.hits)), ` hit${w.hits === 1 ? '' : 's'} in ${w.checked.length} checked iteration${w.checked.length === 1 ? '' : 's'}`),
          checkedNothing(w),
          h('ul', { class: 'wp-summary' }, w.by_watchpoint.map((x) => h('li', {}, h('span', { class: `chip ${x.hits ? 'hit' : ''}` }, x.hits), h('code', {}, x.text)))))));
    put(page, h('div', { class: 'ov-grid' },
      h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Nodes by kind'), h('span', { class: 'muted' }, `rank ${r0.rank} · ${fmt(nodes)} nodes`)),
        h('div', { class: 'card-body kind-rows' }, kindRows)),
      watchCard,
      h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Parameters'), h('span', { class: 'muted' }, `${r0.parameters.length}`)),
        h('div', { class: 'card-body param-list' }, r0.parameters.slice(0, 60).map((p) => h('a', { href: '#', class: 'param-item',
          onclick: (e) => { e.preventDefault(); set({ view: 'graph', node: p.name }); } },
        kindDot(p.kind), h('span', { class: 'mono' }, p.name))))),
      h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Load warnings'), h('span', { class: 'muted' }, String(info.warnings.length))),
        h('div', { class: 'card-body' }, info.warnings.length
          ? h('ul', { class: 'warn-list' }, info.warnings.slice(0, 50).map((x) => h('li', { class: 'mono small' }, x)))
          : h('div', { class: 'muted' }, 'None: every tensor file matched a graph node and every iteration is complete.'),
        (info.pending_warnings || []).length ? h('p', { class: 'muted small pending-warnings' },
          `The job is still writing: ${info.pending_warnings.length} more held back until it goes quiet (a file being written is not broken).`) : null))));
  }

  render();
  return { update(changed) { if (changed.has('dump') || changed.has('rank') || changed.has('watch')) render(); } };
}

// "0 hits" must not read as clean where a watchpoint checked nothing in the iterations checked so far.
function checkedNothing(w) {
  const names = (w.by_watchpoint || []).filter((x) => x.coverage && x.coverage.status === 'unanswered').map((x) => x.text);
  if (!names.length) return null;
  return h('div', { class: 'incomplete-box checked-nothing' }, h('b', {}, `${w.hits ? '' : 'No hit, but '}${names.length} watchpoint${names.length === 1 ? '' : 's'} checked nothing`),
    `: ${names.join(', ')} (see Watchpoints).`);
}

/** The parallel layout the ranks recorded (meshes, groups, pipeline, sharded parameters), as `tdbg info`
 * says it; null for a dump without one. */
function layoutNote(layout) {
  const lines = layoutLines(layout);
  return lines.length ? h('div', { class: 'note layout-note small' }, h('b', {}, `Parallel layout (${layout.ranks.length} ranks): `),
    h('ul', { class: 'layout-lines mono' }, lines.map((l) => h('li', {}, l)))) : null;
}
