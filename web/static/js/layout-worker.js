// Graph layout off the UI thread: one scope level per message.
import { layout } from './layout.js';

self.onmessage = (ev) => {
  const { id, nodes, edges, opts } = ev.data;
  try {
    const t0 = performance.now();
    const result = layout(nodes, edges, opts);
    self.postMessage({ id, result, ms: performance.now() - t0 });
  } catch (e) {
    self.postMessage({ id, error: String(e && e.message || e) });
  }
};
