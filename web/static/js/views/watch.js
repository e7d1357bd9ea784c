// Watchpoints pane: a form generated from the condition registry, presets, the active list, and
// hits grouped by watchpoint (click a hit: its node in the graph at its iteration).
import { api } from '../api.js';
import { state, set, ctx } from '../state.js';
import { put, h, clear, fmt, errorBox, empty, toast, shortName, basename, kindDot } from '../dom.js';
import { hitText, tensorLabel } from '../inspector.js';

const FAMILY = { mindinsight: 'MindInsight conditions', sagemaker: 'Rules over several iterations or units', tdbg: 'tdbg' };

export function mount(root, { onWatchChange }) {
  const page = h('div', { class: 'page watch-page' });
  put(root, page);
  const formCard = h('div', { class: 'card' });
  const listCard = h('div', { class: 'card' });
  const hitsCard = h('div', { class: 'card hits-card' });
  put(page, h('div', { class: 'watch-grid' }, h('div', { class: 'stack watch-left' }, formCard, listCard), hitsCard));
  let conditions = null, presets = {};
  let scope = 'iteration';     // iteration | all
  const closed = new Set();   // groups the user closed; every other group is open
  let seq = 0;

  async function init() {
    try {
      const r = await api.conditions();
      conditions = r.items;
      presets = r.presets;
    } catch (e) {
      put(clear(formCard), h('div', { class: 'card-body' }, errorBox(e)));
      return;
    }
    drawForm();
    await refresh();
  }

  function drawForm(selected) {
    clear(formCard);
    const byFamily = {};
    for (const c of conditions) (byFamily[c.family] ||= []).push(c);
    const sel = h('select', { class: 'input cond-select', 'aria-label': 'condition' },
      Object.entries(byFamily).map(([fam, cs]) => h('optgroup', { label: FAMILY[fam] || fam },
        cs.map((c) => h('option', { value: c.name, selected: c.name === selected }, `${c.name}  ·  ${c.target}`)))));
    const fields = h('div', { class: 'param-fields' });
    const helpEl = h('p', { class: 'cond-help' });
    const nodeInput = h('input', { type: 'text', placeholder: 'e.g. fc1.* or *MatMul*', 'aria-label': 'node filter' });
    const scopeInput = h('input', { type: 'text', placeholder: 'e.g. Default/network-WithLossCell', 'aria-label': 'scope filter' });
    const errBox = h('div');
    const drawFields = () => {
      const c = conditions.find((x) => x.name === sel.value);
      clear(fields);
      put(clear(helpEl), c.help, c.advice ? h('span', { class: 'advice' }, ` ${c.advice}`) : null);
      if (!c.params.length) put(fields, h('div', { class: 'muted small' }, 'This condition has no parameters.'));
      for (const p of c.params) {
        const range = [p.min !== null ? `≥ ${fmt(p.min)}` : null, p.max !== null ? `≤ ${fmt(p.max)}` : null].filter(Boolean).join(', ');
        const input = p.type === 'bool'
          ? h('select', { class: 'input', name: p.name, 'data-param': p.name }, h('option', { value: '' }, p.default ? 'default: yes' : 'default: no'),
            h('option', { value: '1' }, 'yes'), h('option', { value: '0' }, 'no'))
          : h('input', { type: 'text', name: p.name, 'data-param': p.name, inputmode: 'decimal',
            placeholder: p.default !== null ? `default ${fmt(p.default)}` : (p.comparison ? 'threshold' : 'value') });
        put(fields, h('label', { class: 'param' },
          h('span', { class: 'p-name mono' }, p.name, p.comparison ? h('span', { class: 'p-cmp', title: 'a threshold that can make a hit' }, 'threshold') : null),
          input,
          h('span', { class: 'p-help' }, p.help, range ? h('span', { class: 'faint' }, ` (${range})`) : null)));
      }
    };
    sel.addEventListener('change', drawFields);
    drawFields();
    const submit = async (e) => {
      e.preventDefault();
      clear(errBox);
      const params = {};
      for (const inp of fields.querySelectorAll('[data-param]')) if (inp.value.trim() !== '') params[inp.dataset.param] = inp.value.trim();
      const spec = { name: sel.value, params };
      if (nodeInput.value.trim()) spec.node = nodeInput.value.trim();
      if (scopeInput.value.trim()) spec.scope = scopeInput.value.trim();
      try {
        const r = await api.addWatchpoint(state.dump, spec);
        toast(`Watchpoint ${r.created.map((w) => w.text).join(', ')} added`);
        await changed();
      } catch (err) { put(errBox, errorBox(err)); }
    };
    put(formCard, h('div', { class: 'card-head' }, h('h2', {}, 'New watchpoint')),
      h('form', { class: 'card-body wp-form', onsubmit: submit },
        h('label', { class: 'field' }, h('span', {}, 'Condition'), sel), helpEl, fields,
        h('details', { class: 'filters' }, h('summary', {}, 'Limit to nodes or a scope'),
          h('label', { class: 'field' }, h('span', {}, 'Node (glob on name or parameter)'), nodeInput),
          h('label', { class: 'field' }, h('span', {}, 'Scope prefix'), scopeInput)),
        errBox,
        h('div', { class: 'row' }, h('button', { class: 'btn btn-accent', type: 'submit' }, 'Add watchpoint'))),
      h('div', { class: 'card-head sub' }, h('h3', {}, 'Presets')),
      h('div', { class: 'card-body presets' }, Object.entries(presets).map(([name, specs]) => h('div', { class: 'preset' },
        h('div', { class: 'row' }, h('b', {}, name), h('span', { class: 'spacer' }),
          h('button', { class: 'btn btn-small', 'data-preset': name, onclick: async () => {
            try {
              const r = await api.addWatchpoint(state.dump, { preset: name });
              toast(r.created.length === specs.length ? `Preset ${name} added (${specs.length} watchpoints)`
                : r.created.length ? `Preset ${name}: ${r.created.length} added, ${specs.length - r.created.length} already set` : `Preset ${name} is already set`);
              await changed();
            }
            catch (err) { toast(err.message, 'error'); }
          } }, `Add ${specs.length}`)),
        h('div', { class: 'preset-specs' }, specs.map((sp) => h('code', {}, sp)))))));
  }

  async function changed() {
    await refresh();
    onWatchChange();
  }

  async function refresh() {
    const my = ++seq;
    let wps;
    try { wps = await api.watchpoints(state.dump); } catch (e) { put(clear(listCard), errorBox(e)); return; }
    if (my !== seq) return;
    put(clear(listCard), h('div', { class: 'card-head' }, h('h2', {}, 'Active watchpoints'), h('span', { class: 'muted' }, String(wps.total)),
      h('span', { class: 'spacer' }),
      wps.total ? h('button', { class: 'btn btn-small btn-ghost btn-danger', onclick: async () => {
        for (const w of wps.items) await api.deleteWatchpoint(state.dump, w.id);
        await changed();
      } }, 'Remove all') : null),
    wps.total ? h('ul', { class: 'wp-list' }, wps.items.map((w) => h('li', {},
      h('div', { class: 'wp-text mono' }, w.text), h('div', { class: 'wp-help muted' }, w.help),
      h('button', { class: 'icon-x', title: 'Remove', 'aria-label': `remove ${w.text}`, onclick: async () => {
        await api.deleteWatchpoint(state.dump, w.id); await changed();
      } }, '×'))))
      : h('div', { class: 'card-body muted' }, 'No watchpoint yet. Add one above, or a preset.'));
    await drawHits(wps.total);
  }

  async function drawHits(count) {
    const my = seq;
    clear(hitsCard);
    const seg = h('div', { class: 'seg' },
      h('button', { class: scope === 'iteration' ? 'on' : '', onclick: () => { scope = 'iteration'; drawHits(count); } }, `Iteration ${state.iteration ?? ''}`),
      h('button', { class: scope === 'all' ? 'on' : '', onclick: () => { scope = 'all'; drawHits(count); } }, 'All iterations'));
    const head = h('div', { class: 'card-head' }, h('h2', {}, 'Hits'), h('span', { class: 'muted hits-summary' }), h('span', { class: 'spacer' }), seg);
    const body = h('div', { class: 'hits-body' });
    put(hitsCard, head, body);
    if (!count) { put(body, empty('No watchpoints', 'Hits appear here once a watchpoint is set.')); return; }
    put(body, h('div', { class: 'muted pad' }, scope === 'all' ? 'Checking every iteration…' : `Checking iteration ${state.iteration}…`));
    let r;
    try {
      r = await api.hits({ dump: state.dump, rank: state.rank, iteration: scope === 'iteration' ? state.iteration : null, all: scope === 'all' });
    } catch (e) { if (my === seq) put(clear(body), errorBox(e)); return; }
    if (my !== seq) return;
    clear(body);
    // The same count as the tab's badge in iteration mode: hits of this rank in this iteration.
    head.querySelector('.hits-summary').textContent = scope === 'iteration'
      ? `${r.total} hit${r.total === 1 ? '' : 's'} in iteration ${state.iteration} · rank ${state.rank}`
      : `${r.total} hit${r.total === 1 ? '' : 's'} · rank ${state.rank} · ${r.checked.length} iteration${r.checked.length === 1 ? '' : 's'} checked`;
    if (r.error_count) put(body, h('div', { class: 'note' }, `${r.error_count} check(s) could not run: ${r.errors[0].error}`));
    const hits = r.items;
    if (!hits.length) {
      put(body, empty('No hits', scope === 'iteration' ? `Nothing fired in iteration ${state.iteration}. Try “Run to next hit” or All iterations.` : 'Nothing fired in any iteration.'));
      return;
    }
    for (const g of r.groups) {
      const mine = hits.filter((x) => x.watchpoint_id === g.id);
      if (!mine.length) continue;
      const det = h('details', { class: 'hit-group', open: !closed.has(g.id), ontoggle: (e) => { if (e.target.open) closed.delete(g.id); else closed.add(g.id); } },
        h('summary', {}, h('span', { class: 'chip hit' }, mine.length), h('span', { class: 'mono hg-text' }, g.text)),
        h('table', { class: 'tbl hit-table' },
          h('thead', {}, h('tr', {}, h('th', { class: 'num' }, 'iter'), h('th', {}, 'tensor'), h('th', {}, 'io'), h('th', {}, 'what fired'), h('th', {}, 'source'))),
          h('tbody', {}, mine.slice(0, 300).map((x) => h('tr', { class: 'clickable', title: `${x.node}\nclick: show in the graph at iteration ${x.iteration}`,
            onclick: () => set({ view: 'graph', rank: x.rank, graph: x.graph, iteration: x.iteration, node: x.node, io: x.io, slot: x.slot }) },
          h('td', { class: 'num' }, x.iteration),
          h('td', {}, kindDot(x.kind), h('span', { class: 'mono' }, tensorLabel({ ...x, io: null }))),
          h('td', { class: 'mono' }, `${x.io}:${x.slot}`),
          h('td', { class: 'small' }, hitText(x)),
          h('td', { class: 'mono small muted' }, x.source ? basename(x.source) : '—'))))));
      put(body, det);
    }
  }

  init();
  return {
    update(changedKeys) {
      if (!conditions) return;
      if (changedKeys.has('dump')) refresh();
      else if (changedKeys.has('iteration') || changedKeys.has('rank') || changedKeys.has('watch')) refresh();
    },
  };
}
