// Watchpoints pane: a form generated from the condition registry, presets, the active list, and
// hits grouped by watchpoint (click a hit: its node in the graph at its iteration).
// Split by job: watch/state.js (pure logic), watch/render.js (the DOM); this module holds the
// pane's state, calls the API and wires the events.
import { api } from '../api.js';
import { state } from '../state.js';
import { put, h, clear, errorBox, empty, toast } from '../dom.js';
import { hitGroups, hitsSummary, presetMessage, specOf, verdictNote } from './watch/state.js';
import { conditionSelect, hitGroup, paramFields, presetList, watchpointList } from './watch/render.js';

export function mount(root, { onWatchChange }) {
  const v = {
    formCard: h('div', { class: 'card' }),
    listCard: h('div', { class: 'card' }),
    hitsCard: h('div', { class: 'card hits-card' }),
    conditions: null,
    presets: {},
    mode: 'iteration',       // hits of the iteration | of all iterations
    closed: new Set(),       // groups the user closed; every other group is open
    wps: null,               // the last GET watchpoints answer
    seq: 0,
    onWatchChange,
  };
  put(root, h('div', { class: 'page watch-page' },
    h('div', { class: 'watch-grid' }, h('div', { class: 'stack watch-left' }, v.formCard, v.listCard), v.hitsCard)));
  init(v);
  return {
    update(changedKeys) {
      if (!v.conditions) return;
      if (['dump', 'iteration', 'rank', 'watch'].some((k) => changedKeys.has(k))) refresh(v);
    },
  };
}

async function init(v) {
  try {
    const r = await api.conditions();
    v.conditions = r.items;
    v.presets = r.presets;
  } catch (e) {
    put(clear(v.formCard), h('div', { class: 'card-body' }, errorBox(e)));
    return;
  }
  drawForm(v);
  await refresh(v);
}

async function changed(v) {
  await refresh(v);
  v.onWatchChange();
}

// -- the form -----------------------------------------------------------------------------------
function drawForm(v) {
  const sel = conditionSelect(v.conditions);
  const fields = h('div', { class: 'param-fields' });
  const helpEl = h('p', { class: 'cond-help' });
  const nodeInput = h('input', { type: 'text', placeholder: 'e.g. fc1.* or *MatMul*', 'aria-label': 'node filter' });
  const scopeInput = h('input', { type: 'text', placeholder: 'a scope path prefix', 'aria-label': 'scope filter' });
  const errBox = h('div');
  const drawFields = () => {
    const c = v.conditions.find((x) => x.name === sel.value);
    put(clear(helpEl), c.help, c.advice ? h('span', { class: 'advice' }, ` ${c.advice}`) : null);
    put(clear(fields), paramFields(c));
  };
  sel.addEventListener('change', drawFields);
  drawFields();
  const submit = async (e) => {
    e.preventDefault();
    clear(errBox);
    const values = [...fields.querySelectorAll('[data-param]')].map((inp) => [inp.dataset.param, inp.value]);
    try {
      const r = await api.addWatchpoint(state.dump, specOf(sel.value, values, nodeInput.value, scopeInput.value));
      toast(`Watchpoint ${r.created.map((w) => w.text).join(', ')} added`);
      await changed(v);
    } catch (err) { put(errBox, errorBox(err)); }
  };
  put(clear(v.formCard), h('div', { class: 'card-head' }, h('h2', {}, 'New watchpoint')),
    h('form', { class: 'card-body wp-form', onsubmit: submit },
      h('label', { class: 'field' }, h('span', {}, 'Condition'), sel), helpEl, fields,
      h('details', { class: 'filters' }, h('summary', {}, 'Limit to nodes or a scope'),
        h('label', { class: 'field' }, h('span', {}, 'Node (glob on name or parameter)'), nodeInput),
        h('label', { class: 'field' }, h('span', {}, 'Scope prefix'), scopeInput)),
      errBox,
      h('div', { class: 'row' }, h('button', { class: 'btn btn-accent', type: 'submit' }, 'Add watchpoint'))),
    h('div', { class: 'card-head sub' }, h('h3', {}, 'Presets')),
    h('div', { class: 'card-body presets' }, presetList(v.presets, (name, specs) => addPreset(v, name, specs))));
}

async function addPreset(v, name, specs) {
  try {
    const r = await api.addWatchpoint(state.dump, { preset: name });
    toast(presetMessage(name, r.created.length, specs.length));
    await changed(v);
  } catch (err) { toast(err.message, 'error'); }
}

// -- the list and the hits ----------------------------------------------------------------------
async function refresh(v) {
  const my = ++v.seq;
  let wps;
  try { wps = await api.watchpoints(state.dump); } catch (e) { put(clear(v.listCard), errorBox(e)); return; }
  if (my !== v.seq) return;
  v.wps = wps;
  await drawHits(v, wps.total);
}

// The rows' coverage is that of what the hits card shows (this iteration, or all of them): none while it checks.
function drawList(v, coverage) {
  put(clear(v.listCard), watchpointList(v.wps, {
    removeAll: async (items) => { for (const w of items) await api.deleteWatchpoint(state.dump, w.id); await changed(v); },
    remove: async (w) => { await api.deleteWatchpoint(state.dump, w.id); await changed(v); },
  }, coverage));
}

async function drawHits(v, count) {
  const my = v.seq;
  const setMode = (mode) => { v.mode = mode; drawHits(v, count); };
  const seg = h('div', { class: 'seg' },
    h('button', { class: v.mode === 'iteration' ? 'on' : '', onclick: () => setMode('iteration') }, `Iteration ${state.iteration ?? ''}`),
    h('button', { class: v.mode === 'all' ? 'on' : '', onclick: () => setMode('all') }, 'All iterations'));
  const summary = h('span', { class: 'muted hits-summary' });
  const body = h('div', { class: 'hits-body' });
  put(clear(v.hitsCard), h('div', { class: 'card-head' }, h('h2', {}, 'Hits'), summary, h('span', { class: 'spacer' }), seg), body);
  drawList(v);
  if (!count) { put(body, empty('No watchpoints', 'Hits appear here once a watchpoint is set.')); return; }
  const all = v.mode === 'all';
  put(body, h('div', { class: 'muted pad' }, all ? 'Checking every iteration…' : `Checking iteration ${state.iteration}…`));
  let r;
  try {
    r = await api.hits({ dump: state.dump, rank: state.rank, iteration: all ? null : state.iteration, all });
  } catch (e) { if (my === v.seq) put(clear(body), errorBox(e)); return; }
  if (my !== v.seq) return;
  clear(body);
  drawList(v, new Map((r.coverage || []).map((c) => [c.id, c])));
  const note = verdictNote(r);
  summary.textContent = hitsSummary(r, v.mode, state.iteration, state.rank);
  summary.classList.toggle('warn', r.verdict === 'incomplete');
  if (note && note.level === 'warn') {     // never a plain "No hits" over what could not be checked
    put(body, h('div', { class: 'pad' }, h('div', { class: 'incomplete-box verdict-note' }, h('b', {}, note.text),
      h('ul', {}, note.unchecked.map((u) => h('li', {}, h('span', { class: 'mono' }, u.name), ` — ${u.why}`))))));
  }
  if (r.error_count) put(body, h('div', { class: 'note' }, `${r.error_count} check(s) could not run: ${r.errors[0].error}`));
  if (!r.items.length) {
    if (!note || note.level !== 'warn') put(body, empty('No hits', noHitText(all, note)));
    return;
  }
  const onToggle = (id, open) => { if (open) v.closed.delete(id); else v.closed.add(id); };
  for (const g of hitGroups(r.groups, r.items)) put(body, hitGroup(g, !v.closed.has(g.group.id), onToggle));
}

// The "No hits" box's words: partial coverage said beside them.
function noHitText(all, note) {
  const where = all ? 'Nothing fired in any iteration.' : `Nothing fired in iteration ${state.iteration}. Try “Run to next hit” or All iterations.`;
  return note && note.level === 'partial' ? `${where} Some checks could not run: see each watchpoint.` : where;
}
