// Current view, dump, rank, graph, iteration, scope and selection, mirrored in the URL hash
// (#/graph?dump=single&rank=0&it=3&node=...) so that a link opens the same place.

const KEYS = {
  // state key: [hash parameter, default, type]
  dump: ['dump', null, 'str'],
  rank: ['rank', 0, 'int'],
  graph: ['graph', null, 'int'],   // null: the graph that ran most (main.js)
  iteration: ['it', null, 'int'],
  scope: ['scope', '', 'str'],
  node: ['node', null, 'str'],
  io: ['io', 'output', 'str'],
  slot: ['slot', 0, 'int'],
  line: ['line', null, 'str'],
  file: ['file', null, 'str'],
  slice: ['slice', null, 'str'],
  framework: ['fw', false, 'bool'],
  overlay: ['ov', null, 'str'],      // what the graph's nodes are coloured by (graph/overlay.js)
  vsRank: ['vs', null, 'int'],       // the rank a rank difference compares with
  vsDump: ['vsdump', null, 'str'],   // the dump a run difference compares with
};
const VIEWS = ['triage', 'dumps', 'overview', 'graph', 'code', 'tensor', 'watch', 'ranks', 'trends'];

export const state = { view: 'triage' };
for (const [k, [, d]] of Object.entries(KEYS)) state[k] = d;

const listeners = new Set();

/** Call ``fn(changedKeys: Set)`` after every change. */
export function subscribe(fn) { listeners.add(fn); return () => listeners.delete(fn); }

/** The state a URL hash names (defaults for what it leaves out). */
export function parse(hash) {
  const out = {};
  const [path, query = ''] = hash.replace(/^#\/?/, '').split('?');
  out.view = VIEWS.includes(path) ? path : 'triage';
  const q = new URLSearchParams(query);
  for (const [k, [p, d, type]] of Object.entries(KEYS)) {
    if (!q.has(p)) { out[k] = d; continue; }
    const raw = q.get(p);
    if (type === 'int') { const n = parseInt(raw, 10); out[k] = Number.isFinite(n) ? n : d; }
    else if (type === 'bool') out[k] = raw === '1' || raw === 'true';
    else out[k] = raw;
  }
  return out;
}

export function hashOf(s = state) {
  const q = new URLSearchParams();
  for (const [k, [p, d]] of Object.entries(KEYS)) {
    const v = s[k];
    if (v === d || v === null || v === undefined || v === '') continue;
    q.set(p, typeof v === 'boolean' ? (v ? '1' : '0') : String(v));
  }
  const qs = q.toString().replace(/%2F/g, '/').replace(/%3A/g, ':');
  return `#/${s.view}${qs ? '?' + qs : ''}`;
}

function emit(changed) {
  if (!changed.size) return;
  for (const fn of listeners) {
    try { fn(changed); } catch (e) { console.error(e); }
  }
}

/** Change some keys; ``push`` adds a browser history entry (default), else the entry is replaced. */
export function set(patch, { push = true } = {}) {
  const changed = new Set();
  for (const [k, v] of Object.entries(patch)) {
    if (state[k] !== v) { state[k] = v; changed.add(k); }
  }
  if (!changed.size) return;
  const h = hashOf();
  if (h !== location.hash) {
    if (push) history.pushState(null, '', h); else history.replaceState(null, '', h);
  }
  emit(changed);
}

function fromLocation() {
  const next = parse(location.hash);
  const changed = new Set();
  for (const [k, v] of Object.entries(next)) {
    if (state[k] !== v) { state[k] = v; changed.add(k); }
  }
  emit(changed);
}

export function start() {
  Object.assign(state, parse(location.hash));
  window.addEventListener('popstate', fromLocation);
  window.addEventListener('hashchange', fromLocation);
}

/** Shared data of the open dump (filled by main.js): info, graphs of the rank, iterations. */
export const ctx = {
  dumps: [],
  info: null,
  graphs: [],
  iterations: [],
  watchCount: 0,
  watchSource: null,   // whose watchpoints are in use: {from: 'triage', preset, pending} or {from: 'user'}
  hitCount: 0,
};

/** Tell every listener that something outside the URL state changed (e.g. 'watch'). */
export function touch(...keys) { emit(new Set(keys)); }
