// The only module that calls fetch() and knows the API's URLs. Every function returns the JSON
// the server sent; a failed request throws ApiError with the server's message.

const CACHE_MAX = 300;
const cache = new Map();          // url -> Promise of JSON (GET requests that are safe to reuse)
let busy = 0;
const busyListeners = new Set();

export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

export function onBusy(fn) { busyListeners.add(fn); }
function setBusy(delta) {
  busy += delta;
  for (const fn of busyListeners) fn(busy > 0);
}

/** URL of an API path with query parameters (undefined / null / '' are left out). */
export function url(path, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    q.set(k, typeof v === 'boolean' ? (v ? '1' : '0') : String(v));
  }
  const s = q.toString();
  return `/api${path}${s ? '?' + s : ''}`;
}

async function request(method, u, body, { quiet = false } = {}) {
  const step = quiet ? 0 : 1;    // a background look (the live check every second) does not flash "Loading"
  setBusy(step);
  try {
    const opts = { method, headers: {} };
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    const res = await fetch(u, opts);
    let data;
    try { data = await res.json(); } catch { data = { error: `${res.status} ${res.statusText}` }; }
    if (!res.ok) throw new ApiError(data.error || `${res.status} ${res.statusText}`, res.status);
    return data;
  } finally {
    setBusy(-step);
  }
}

/** A file the server sends as an attachment: {blob, filename}; a failure throws ApiError with its message. */
async function download(u) {
  setBusy(1);
  try {
    const res = await fetch(u);
    if (!res.ok) {
      let data;
      try { data = await res.json(); } catch { data = {}; }
      throw new ApiError(data.error || `${res.status} ${res.statusText}`, res.status);
    }
    const m = /filename="([^"]+)"/.exec(res.headers.get('Content-Disposition') || '');
    return { blob: await res.blob(), filename: m ? m[1] : 'export' };
  } finally {
    setBusy(-1);
  }
}

function get(path, params, { reuse = true } = {}) {
  const u = url(path, params);
  if (!reuse) return request('GET', u);
  if (cache.has(u)) {
    const p = cache.get(u);
    cache.delete(u);               // keep the most recent at the end (LRU)
    cache.set(u, p);
    return p;
  }
  const p = request('GET', u);
  p.catch(() => cache.delete(u));
  cache.set(u, p);
  while (cache.size > CACHE_MAX) cache.delete(cache.keys().next().value);
  return p;
}

/** Forget cached answers (after a change on the server, e.g. a new watchpoint). */
export function invalidate() { cache.clear(); }

const T = (rank, graph) => `/ranks/${rank}/graphs/${graph}`;

export const api = {
  dumps: () => get('/dumps', {}),
  kinds: () => get('/kinds', {}),
  info: (dump) => get('/info', { dump }, { reuse: false }),
  triage: (dump, { start = true } = {}) => get('/triage', { dump, start: start ? undefined : 0 }, { reuse: false }),
  ranks: (dump) => get('/ranks', { dump }),
  band: ({ dump, graph, node, io, slot, stat }) => get('/band', { dump, graph, node, io, slot, stat }),
  rankPage: ({ dump, q, sort, begin }) => get('/ranks', { dump, q, sort, begin }, { reuse: false }),
  graphs: (dump, rank) => get(`/ranks/${rank}/graphs`, { dump }),
  scope: ({ dump, rank, graph, path, iteration, line, framework, begin, end, overlay, focus }) =>
    get(`${T(rank, graph)}/scope`, { dump, path, iteration, line, framework, begin, end, focus, ...(overlay || {}) }),
  overlays: () => get('/overlays', {}),
  search: ({ dump, rank, graph, q, framework, end }) => get(`${T(rank, graph)}/search`, { dump, q, framework, end }),
  node: ({ dump, rank, graph, node, iteration, framework }) =>
    get(`${T(rank, graph)}/node`, { dump, node, iteration, framework }),
  tensor: ({ dump, rank, graph, node, io, slot, iteration }) =>
    get(`${T(rank, graph)}/tensor`, { dump, node, io, slot, iteration }),
  history: ({ dump, rank, graph, node, io, slot, iteration }) =>
    get(`${T(rank, graph)}/tensor/history`, { dump, node, io, slot, iteration }),
  values: ({ dump, rank, graph, node, io, slot, iteration, slice }) =>
    get(`${T(rank, graph)}/tensor/values`, { dump, node, io, slot, iteration, slice }),
  diff: ({ dump, rank, graph, node, io, slot, iteration, slice }) =>
    get(`${T(rank, graph)}/tensor/diff`, { dump, node, io, slot, iteration, slice }),
  exportFormats: () => get('/export/formats', {}),
  exportScope: ({ dump, rank, graph, scope, framework, format }) =>
    download(url(`${T(rank, graph)}/export`, { dump, scope, framework, format })),
  npyUrl: ({ dump, rank, graph, node, io, slot, iteration }) =>
    url(`${T(rank, graph)}/tensor/npy`, { dump, node, io, slot, iteration }),
  codeFiles: ({ dump, rank, framework, q }) => get(`/ranks/${rank}/code/files`, { dump, framework, q }),
  codeLines: ({ dump, rank, file }) => get(`/ranks/${rank}/code/lines`, { dump, file }),
  codeSource: ({ dump, rank, file }) => get(`/ranks/${rank}/code/source`, { dump, file }),
  codeNodes: ({ dump, rank, location }) => get(`/ranks/${rank}/code/nodes`, { dump, location }),
  conditions: () => get('/conditions', {}),
  watchpoints: (dump) => get('/watchpoints', { dump }, { reuse: false }),
  addWatchpoint: async (dump, spec) => {
    const r = await request('POST', url('/watchpoints', { dump }), spec);
    invalidate();
    return r;
  },
  deleteWatchpoint: async (dump, id) => {
    const r = await request('DELETE', url(`/watchpoints/${id}`, { dump }));
    invalidate();
    return r;
  },
  clearWatchpoints: async (dump) => {
    const r = await request('DELETE', url('/watchpoints', { dump }));
    invalidate();
    return r;
  },
  // the triage's watchpoints again, the user's list dropped: answers as watchpoints()
  watchDefaults: async (dump) => {
    const r = await request('POST', url('/watchpoints/defaults', { dump }));
    invalidate();
    return r;
  },
  hits: ({ dump, rank, iteration, all, watchpoint, begin, end }) =>
    get('/hits', { dump, rank, iteration, all, watchpoint, begin, end }, { reuse: false }),
  nextHit: (dump, rank, iteration) => request('POST', url('/replay/next_hit', { dump }), { rank, iteration }),
  compare: (dump, base, all) => get('/compare', { dump, base, all }),
  // the per-step series (trends view): never reused, a followed run grows
  series: (dump, rank) => get(`/ranks/${rank}/series`, { dump }, { reuse: false }),
  seriesCurve: ({ dump, rank, tensor, stat, start, stop, points }) =>
    get(`/ranks/${rank}/series/curve`, { dump, tensor, stat, start, stop, points }, { reuse: false }),
  seriesHeatmap: ({ dump, rank, stat, role, agg, log, start, stop, columns }) =>
    get(`/ranks/${rank}/series/heatmap`, { dump, stat, role, agg, log, start, stop, columns }, { reuse: false }),
  seriesScalars: ({ dump, rank, start, stop, points }) =>
    get(`/ranks/${rank}/series/scalars`, { dump, start, stop, points }, { reuse: false }),
  // a dump a running job is writing: its generation and hit counts (web/live.py), asked every second
  live: (dump, rank) => request('GET', url('/live', { dump, rank }), undefined, { quiet: true }),
  seriesSpikes: (dump, rank) => get(`/ranks/${rank}/series/spikes`, { dump }, { reuse: false }),
};
