// Watchpoints pane: a form generated from the condition registry, presets, the list in use (the
// triage's until the user edits it, with a way back), and hits grouped by watchpoint (click a hit: its
// node in the graph at its iteration).
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
    form: null,              // the form's inputs (drawForm)
    editing: null,           // the watchpoint the form changes (null: it adds one)
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
// Adds a watchpoint, or (after a row's "edit") changes one: the changed one is added, then the old removed.
function drawForm(v) {
  const f = v.form = {
    sel: conditionSelect(v.conditions),
    fields: h('div', { class: 'param-fields' }),
    helpEl: h('p', { class: 'cond-help' }),
    nodeInput: h('input', { type: 'text', placeholder: 'e.g. fc1.* or *MatMul*', 'aria-label': 'node filter' }),
    scopeInput: h('input', { type: 'text', placeholder: 'a scope path prefix', 'aria-label': 'scope filter' }),
    errBox: h('div'),
    submit: h('button', { class: 'btn btn-accent', type: 'submit' }, 'Add watchpoint'),
    cancel: h('button', { class: 'btn btn-ghost', type: 'button', hidden: true, onclick: () => editWatchpoint(v, null) }, 'Cancel'),
    head: h('h2', {}, 'New watchpoint'),
  };
  f.sel.addEventListener('change', () => drawFields(v));
  drawFields(v);
  put(clear(v.formCard), h('div', { class: 'card-head' }, f.head),
    h('form', { class: 'card-body wp-form', onsubmit: (e) => { e.preventDefault(); submitForm(v); } },
      h('label', { class: 'field' }, h('span', {}, 'Condition'), f.sel), f.helpEl, f.fields,
      h('details', { class: 'filters' }, h('summary', {}, 'Limit to nodes or a scope'),
        h('label', { class: 'field' }, h('span', {}, 'Node (glob on name or parameter)'), f.nodeInput),
        h('label', { class: 'field' }, h('span', {}, 'Scope prefix'), f.scopeInput)),
      f.errBox,
      h('div', { class: 'row' }, f.submit, f.cancel)),
    h('div', { class: 'card-head sub' }, h('h3', {}, 'Presets')),
    h('div', { class: 'card-body presets' }, presetList(v.presets, (name, specs) => addPreset(v, name, specs))));
}

function drawFields(v, values = {}) {
  const f = v.form;
  const c = v.conditions.find((x) => x.name === f.sel.value);
  put(clear(f.helpEl), c.help, c.advice ? h('span', { class: 'advice' }, ` ${c.advice}`) : null);
  put(clear(f.fields), paramFields(c));
  for (const inp of f.fields.querySelectorAll('[data-param]')) {
    const val = values[inp.dataset.param];
    if (val !== undefined) inp.value = typeof val === 'boolean' ? (val ? '1' : '0') : String(val);
  }
}

/** Fill the form with one watchpoint to change it (its thresholds, filters); null: back to adding. */
function editWatchpoint(v, w) {
  const f = v.form;
  v.editing = w;
  f.head.textContent = w ? `Change ${w.text}` : 'New watchpoint';
  f.submit.textContent = w ? 'Save changes' : 'Add watchpoint';
  f.cancel.hidden = !w;
  clear(f.errBox);
  if (w) f.sel.value = w.name;
  drawFields(v, w ? w.params : {});
  f.nodeInput.value = (w && w.node) || '';
  f.scopeInput.value = (w && w.scope) || '';
  if (w) v.formCard.scrollIntoView({ block: 'nearest' });
}

async function submitForm(v) {
  const f = v.form;
  clear(f.errBox);
  const values = [...f.fields.querySelectorAll('[data-param]')].map((inp) => [inp.dataset.param, inp.value]);
  const old = v.editing;
  try {
    const r = await api.addWatchpoint(state.dump, specOf(f.sel.value, values, f.nodeInput.value, f.scopeInput.value));
    // unchanged (nothing created): the old one stays; else the changed one replaces it
    if (old && r.created.length) await api.deleteWatchpoint(state.dump, old.id);
    toast(old ? (r.created.length ? `Watchpoint changed to ${r.created[0].text}` : 'Nothing changed')
      : `Watchpoint ${r.created.map((w) => w.text).join(', ')} added`);
    if (old) editWatchpoint(v, null);
    await changed(v);
  } catch (err) { put(f.errBox, errorBox(err)); }
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
    removeAll: async () => { await api.clearWatchpoints(state.dump); await changed(v); },
    remove: async (w) => { await api.deleteWatchpoint(state.dump, w.id); await changed(v); },
    edit: (w) => editWatchpoint(v, w),
    backToDefaults: async () => {
      try {
        await api.watchDefaults(state.dump);
        toast('The triage\'s watchpoints are in use again');
        editWatchpoint(v, null);
        await changed(v);
      } catch (err) { toast(err.message, 'error'); }
    },
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
  if (v.wps.source && v.wps.source.pending) {
    put(body, empty('The triage is still running', `Its ${v.wps.source.preset} watchpoints are used, with their hits, once it is done.`));
    return;
  }
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
