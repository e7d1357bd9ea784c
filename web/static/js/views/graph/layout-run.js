// Layout of a scope level: in a module worker (started as soon as the view mounts, so its script
// loads while the first scope is fetched), inline for small levels or when workers fail.
import { layout as layoutInline } from '../../layout.js';

let worker = null;
let jobId = 0;
const pending = new Map();

export function startWorker() {
  if (worker !== null) return;
  try {
    worker = new Worker('/static/js/layout-worker.js', { type: 'module' });
    worker.onmessage = (ev) => {
      const p = pending.get(ev.data.id);
      if (!p) return;
      pending.delete(ev.data.id);
      if (ev.data.error) p.reject(new Error(ev.data.error)); else p.resolve(ev.data.result);
    };
    worker.onerror = () => { worker = false; for (const p of pending.values()) p.fallback(); pending.clear(); };
  } catch { worker = false; }
}

// A level of a few nodes lays out in well under a millisecond: inline, it does not wait for the
// worker to start (a module worker takes 50-200 ms to load on a first page).
const INLINE_LAYOUT_MAX = 40;

/** Promise of the layout of nodes and edges. */
export function runLayout(nodes, edges) {
  if (nodes.length <= INLINE_LAYOUT_MAX) return Promise.resolve(layoutInline(nodes, edges));
  startWorker();
  if (!worker) return Promise.resolve(layoutInline(nodes, edges));
  const id = ++jobId;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { pending.delete(id); reject(new Error('layout took longer than 20 s')); }, 20000);
    pending.set(id, {
      resolve: (r) => { clearTimeout(timer); resolve(r); },
      reject: (e) => { clearTimeout(timer); reject(e); },
      fallback: () => { clearTimeout(timer); resolve(layoutInline(nodes, edges)); },
    });
    worker.postMessage({ id, nodes, edges });
  });
}
