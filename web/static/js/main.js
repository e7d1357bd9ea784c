// Start-up, the top bar (dump, rank, graph, iteration replay) and the pane router.
import { api, onBusy, invalidate } from './api.js';
import { state, set, start, subscribe, ctx, touch, hashOf } from './state.js';
import { runIterations, iterationsOf, graphRunning, defaultGraph, nearestIteration, stepIteration, rangeLabel } from './replay.js';
import { put, h, clear, toast, errorBox } from './dom.js';
import { tensorLabel } from './hits.js';
import { hitBadge, replayTitle } from './views/watch/state.js';
import { setKinds } from './kinds.js';
import * as overview from './views/overview.js';
import * as triage from './views/triage.js';
import * as graph from './views/graph.js';
import * as code from './views/code.js';
import * as tensor from './views/tensor.js';
import * as watch from './views/watch.js';
import * as ranks from './views/ranks.js';
import * as trends from './views/trends.js';
import { follow } from './live.js';

const VIEWS = { triage, dumps: { mount: triage.mountChooser }, overview, graph, code, tensor, watch, ranks, trends };
const $ = (id) => document.getElementById(id);
const main = $('main');
let current = null;          // {name, handle}

function mountView() {
  if (current && current.name === state.view) return;
  if (current && current.handle && current.handle.destroy) current.handle.destroy();
  clear(main);
  main.className = `main view-${state.view}`;
  const mod = VIEWS[state.view] || triage;
  current = { name: state.view, handle: mod.mount(main, { onWatchChange: watchChanged }) };
  for (const a of document.querySelectorAll('#tabs a')) a.classList.toggle('active', a.dataset.view === state.view);
  document.body.dataset.view = state.view;
}

// -- dump, rank, graph --------------------------------------------------------------------
// Only cheap requests before the first view: the dump list (with rank ids) and the watchpoints;
// the overview asks for the full info (which lists every tensor file) itself.
async function loadWatchCount() {
  try {
    const r = await api.watchpoints(state.dump);
    ctx.watchCount = r.total;
    ctx.watchSource = r.source || null;
  } catch { ctx.watchCount = 0; ctx.watchSource = null; }
  if (ctx.watchSource && ctx.watchSource.pending) awaitDefaults(state.dump);
}

// The triage's findings are the watchpoints until the user edits them: while its scan runs the
// badge says so; when it is done they fill in, without a reload. The triage is started here, not only
// by its page: a link straight to the graph needs its hits too.
let awaiting = null;
function awaitDefaults(dump) {
  if (awaiting === dump) return;
  awaiting = dump;
  triage.waitTriage(dump, () => {}, () => state.dump === dump)
    .catch(() => null)
    .then(() => { if (awaiting === dump) awaiting = null; if (state.dump === dump) watchChanged(); });
}

async function loadDump() {
  const d = ctx.dumps.find((x) => x.id === state.dump) || ctx.dumps[0];
  // in parallel with the rank's graphs, not before them; an answer after their first drawing draws again
  const watchCount = loadWatchCount().then(() => { if (ctx.iterations.length) renderIteration(); });
  const rs = $('rank-select');
  put(clear(rs), ...d.ranks.map((r) => h('option', { value: r, selected: r === state.rank }, String(r))));
  rs.disabled = d.ranks.length < 2;
  if (!d.ranks.includes(state.rank)) set({ rank: d.ranks[0] }, { push: false });
  return watchCount;
}

async function loadRank() {
  const g = await api.graphs(state.dump, state.rank);
  ctx.graphs = g.items;
  const gs = $('graph-select');
  put(clear(gs), ...g.items.map((x) => h('option', { value: x.graph, selected: x.graph === state.graph }, `${x.graph}${x.name ? ' · ' + x.name : ''}`)));
  gs.disabled = g.items.length < 2;
  pickGraph();
  syncIterations();
}

// A link without a graph (or naming one this rank lacks) opens the graph that ran its iteration,
// else the one that ran most.
function pickGraph() {
  const gs = ctx.graphs;
  if (!gs.length || gs.some((x) => x.graph === state.graph)) return false;
  set({ graph: defaultGraph(gs, state.iteration) }, { push: false });
  return true;
}

// The slider covers every iteration of the rank; a graph chosen by hand moves the iteration to the
// nearest one that graph ran.
function syncIterations() {
  ctx.iterations = runIterations(ctx.graphs);
  $('it-slider').max = Math.max(0, ctx.iterations.length - 1);
  const own = iterationsOf(ctx.graphs, state.graph);
  if (own.length && !own.includes(state.iteration)) {
    set({ iteration: nearestIteration(own, state.iteration) }, { push: false });
  }
  renderIteration();
}

// An iteration the open graph did not run opens the graph that ran it, in the same change, so that
// the view asks once, for the right graph; its scope and selection stay where that graph has them.
function followIteration(changed) {
  const g = graphRunning(ctx.graphs, state.iteration, state.graph);
  if (g === null || g === state.graph) return;
  state.graph = g;
  changed.add('graph');
  $('graph-select').value = String(g);
  history.replaceState(null, '', hashOf());
}

function renderIteration() {
  const its = ctx.iterations;
  const i = its.indexOf(state.iteration);
  $('it-slider').value = String(Math.max(0, i));
  $('it-value').textContent = state.iteration ?? '–';
  $('it-range').textContent = `  ${rangeLabel(its)}`;
  $('it-first').disabled = $('it-prev').disabled = i <= 0;
  $('it-next').disabled = $('it-last').disabled = i < 0 || i >= its.length - 1;
  $('run-next-hit').disabled = !ctx.watchCount;
  $('run-next-hit').title = replayTitle(ctx.watchCount, ctx.watchSource);
  refreshHitBadge();
}

function step(delta) {
  const it = stepIteration(ctx.iterations, state.iteration, delta);
  if (it !== null && it !== state.iteration) set({ iteration: it }, { push: false });
}

let badgeSeq = 0;
async function refreshHitBadge() {
  const badge = $('hit-badge');
  const my = ++badgeSeq;
  const show = (b) => {
    badge.hidden = !b;
    if (!b) return;
    badge.textContent = b.text;
    badge.title = b.title;
    badge.dataset.state = b.state;
  };
  if (ctx.watchSource && ctx.watchSource.pending) { show(hitBadge(null, state.iteration, state.rank, true)); return; }
  if (ctx.watchSource && ctx.watchSource.failed) { show(hitBadge(ctx.watchSource, state.iteration, state.rank)); return; }
  if (!ctx.watchCount || state.iteration === null) { show(null); return; }
  try {
    const r = await api.hits({ dump: state.dump, rank: state.rank, iteration: state.iteration });
    if (my !== badgeSeq) return;
    ctx.hitCount = r.total;
    show(hitBadge(r, state.iteration, state.rank));
  } catch { show(null); }
}

async function watchChanged() {
  invalidate();
  await loadWatchCount();
  renderIteration();
  touch('watch');
}

let replayToast = null;     // the last "Stopped at ..." message: it goes when the iteration moves
let replayAt = null;        // the iteration the replay stopped at
function dropReplayToast() { if (replayToast) { replayToast.remove(); replayToast = null; } }

// Run to next hit: the first iteration after the current one with a hit (the current one's hits
// are already on screen), checked one iteration at a time on the server.
async function runToNextHit() {
  const btn = $('run-next-hit');
  const label = btn.querySelector('.btn-label');
  btn.disabled = true;
  label.textContent = 'Checking…';     // only the label: the icon stays
  dropReplayToast();
  try {
    const r = await api.nextHit(state.dump, state.rank, state.iteration ?? -1);
    if (r.iteration === null) {
      replayToast = toast(`No hit after iteration ${state.iteration} (${r.checked.length} iteration${r.checked.length === 1 ? '' : 's'} checked).`);
    } else {
      const first = r.hits.items[0];
      const patch = { iteration: r.iteration };
      if (state.view === 'graph' || state.view === 'overview' || state.view === 'triage') Object.assign(patch, { view: 'graph', node: first.node, graph: first.graph, io: first.io, slot: first.slot });
      replayAt = r.iteration;
      set(patch);
      replayToast = toast(`Stopped at iteration ${r.iteration}: ${r.hits.total} hit${r.hits.total === 1 ? '' : 's'}, first ${first.watchpoint} on ${tensorLabel(first)}`);
    }
  } catch (e) {
    toast(e.message, 'error');
  } finally {
    label.textContent = 'Run to next hit';
    btn.disabled = !ctx.watchCount;
  }
}

// -- wiring --------------------------------------------------------------------------------
function wire() {
  $('dump-select').addEventListener('change', (e) => set({ dump: e.target.value, rank: 0, graph: null, iteration: null, scope: '', node: null, line: null, file: null }));
  $('rank-select').addEventListener('change', (e) => set({ rank: parseInt(e.target.value, 10) }));
  $('graph-select').addEventListener('change', (e) => set({ graph: parseInt(e.target.value, 10), scope: '', node: null }));
  $('it-slider').addEventListener('input', (e) => {
    const it = ctx.iterations[parseInt(e.target.value, 10)];
    if (it !== undefined) set({ iteration: it }, { push: false });
  });
  $('it-first').addEventListener('click', () => step(-1e9));
  $('it-prev').addEventListener('click', () => step(-1));
  $('it-next').addEventListener('click', () => step(1));
  $('it-last').addEventListener('click', () => step(1e9));
  $('run-next-hit').addEventListener('click', runToNextHit);
  for (const a of document.querySelectorAll('#tabs a')) {
    a.addEventListener('click', (e) => { e.preventDefault(); set({ view: a.dataset.view }); });
  }
  document.addEventListener('keydown', (e) => {
    if (e.target.closest('input, select, textarea') || e.altKey || e.ctrlKey || e.metaKey) return;
    if (e.key === 'ArrowLeft') step(-1);
    else if (e.key === 'ArrowRight') step(1);
  });
  onBusy((b) => { $('status').classList.toggle('busy', b); $('status').textContent = b ? 'Loading' : ''; });
}

subscribe(async (changed) => {
  if (changed.has('watchpoints')) { await watchChanged(); return; }    // added or removed outside the Watchpoints tab
  try {
    if (changed.has('dump')) {
      $('dump-select').value = state.dump;
      invalidate();
      const watchCount = loadDump();
      await Promise.all([watchCount, loadRank()]);
    } else if (changed.has('rank')) {
      $('rank-select').value = String(state.rank);
      await loadRank();
    } else if (changed.has('graph')) {
      pickGraph();
      $('graph-select').value = String(state.graph);
      syncIterations();
    }
    if (changed.has('iteration')) {
      if (state.iteration !== replayAt) dropReplayToast();
      followIteration(changed);
      if (ctx.iterations.length && !ctx.iterations.includes(state.iteration)) syncIterations();
      else renderIteration();
    }
  } catch (e) { toast(e.message, 'error'); }
  if (changed.has('view')) mountView();
  else if (current && current.handle && current.handle.update) current.handle.update(changed);
});

// A running job writes the dump: its new ranks, graphs and iterations appear in the top bar, and new
// hits in the views that show hits, without a reload (live.js).
async function dumpGrew(r) {
  const d = ctx.dumps.find((x) => x.id === state.dump);
  if (d && r.ranks.join() !== d.ranks.join()) { d.ranks = r.ranks; await loadDump(); }
  await loadRank();
}

async function hitsChanged(r, quietNow) {
  invalidate();               // the graph's cached scopes carry the old hit marks
  ctx.watchCount = r.watchpoints;
  await loadWatchCount();     // whose list it is may have changed too (the triage's filled in)
  renderIteration();
  touch(...(quietNow ? ['watch', 'triage'] : ['watch']));    // a triage that left iterations out is redone
}

async function boot() {
  start();
  wire();
  try {
    clear(main).append(h('div', { class: 'boot' }, h('div', { class: 'boot-spinner' }), 'Opening the dump…'));
    const [d, k] = await Promise.all([api.dumps(), api.kinds()]);
    setKinds(k.items, k.colors);
    ctx.dumps = d.items;
    const sel = $('dump-select');
    put(sel, ...d.items.map((x) => h('option', { value: x.id }, x.id)));
    $('dump-picker').hidden = d.items.length < 2;
    if (!state.dump || !d.items.some((x) => x.id === state.dump)) {
      // Several dumps and none named: the landing page is the chooser, with their health.
      if (d.items.length > 1 && state.view === 'triage') state.view = 'dumps';
      state.dump = d.items[0].id;
    }
    sel.value = state.dump;
    const watchCount = loadDump();
    await Promise.all([watchCount, loadRank()]);
    history.replaceState(null, '', hashOf());
  } catch (e) {
    put(clear(main), h('div', { class: 'page' }, errorBox(e)));
    return;
  }
  mountView();
  follow({ onDump: dumpGrew, onWatch: hitsChanged });
  document.body.dataset.ready = '1';
}

boot();
