// A layered graph layout (Sugiyama-style) for the children of one scope: cycles broken by DFS,
// longest-path layering (sources pulled down next to their first consumer), dummy nodes on long
// edges, barycenter ordering sweeps, then x positions pulled toward their neighbours.
// Pure function of its input: runs in layout-worker.js, or inline when workers are unavailable.
// One function per phase; each takes and extends `g`, the graph being laid out.

/**
 * @param {{id: string, w: number, h: number}[]} nodes  in a stable order (execution order)
 * @param {{source: string, target: string, count?: number}[]} edges
 * @returns {{nodes: {id, x, y, w, h}[], edges: {source, target, count, points: [number, number][]}[],
 *            width: number, height: number}}
 */
export function layout(nodes, edges, opts = {}) {
  const g = { nodes, N: nodes.length, rankSep: opts.rankSep ?? 70, nodeSep: opts.nodeSep ?? 26 };
  g.E = uniqueEdges(nodes, edges);
  breakCycles(g);
  assignLayers(g);
  addDummies(g);
  orderLayers(g);
  placeX(g);
  return place(g);
}

/** Edges between distinct nodes, one per ordered pair (counts summed). */
export function uniqueEdges(nodes, edges) {
  const N = nodes.length;
  const index = new Map(nodes.map((n, i) => [n.id, i]));
  const E = [];
  const pairs = new Map();
  for (const e of edges) {
    const a = index.get(e.source), b = index.get(e.target);
    if (a === undefined || b === undefined || a === b) continue;
    const k = a * N + b;
    if (pairs.has(k)) { pairs.get(k).count += e.count || 1; continue; }
    const rec = { a, b, count: e.count || 1, source: e.source, target: e.target };
    pairs.set(k, rec);
    E.push(rec);
  }
  return E;
}

/** 1. Edges closing a DFS cycle are reversed (e.rev); g.succ and g.pred follow the new directions. */
function breakCycles(g) {
  const { N, E } = g;
  const outs = Array.from({ length: N }, () => []);
  for (const e of E) outs[e.a].push(e);
  // Earlier children (execution order) first: the edge that closes a cycle is the one pointing
  // back in time (Gradients -> Default's optimizer), so Default is drawn before Gradients.
  for (const o of outs) o.sort((x, y) => x.b - y.b);
  const mark = new Uint8Array(N);
  for (let r = 0; r < N; r++) {
    if (mark[r]) continue;
    const stack = [[r, 0]];
    mark[r] = 1;
    while (stack.length) {
      const top = stack[stack.length - 1];
      const [v, i] = top;
      if (i >= outs[v].length) { mark[v] = 2; stack.pop(); continue; }
      top[1]++;
      const e = outs[v][i];
      if (mark[e.b] === 1) e.rev = true;
      else if (mark[e.b] === 0) { mark[e.b] = 1; stack.push([e.b, 0]); }
    }
  }
  g.succ = Array.from({ length: N }, () => []);
  g.pred = Array.from({ length: N }, () => []);
  for (const e of E) {
    const [a, b] = e.rev ? [e.b, e.a] : [e.a, e.b];
    e.u = a; e.v = b;
    g.succ[a].push(b);
    g.pred[b].push(a);
  }
}

/** 2. Longest-path layering over a topological order (g.layer). */
function assignLayers(g) {
  const { N, succ, pred } = g;
  const indeg = pred.map((p) => p.length);
  const order = [];
  const queue = [];
  for (let i = 0; i < N; i++) if (!indeg[i]) queue.push(i);
  while (queue.length) {
    const v = queue.shift();
    order.push(v);
    for (const w of succ[v]) if (--indeg[w] === 0) queue.push(w);
  }
  const layer = new Int32Array(N);
  for (const v of order) for (const w of succ[v]) layer[w] = Math.max(layer[w], layer[v] + 1);
  // Sources (parameters, constants, inputs) sit just above their nearest consumer.
  for (let k = order.length - 1; k >= 0; k--) {
    const v = order[k];
    if (pred[v].length || !succ[v].length) continue;
    let m = Infinity;
    for (const w of succ[v]) m = Math.min(m, layer[w]);
    layer[v] = Math.max(layer[v], m - 1);
  }
  g.layer = layer;
  wrapIsolated(g);
}

/** Isolated nodes wrap into rows, so a scope of unconnected children is not one long line. */
function wrapIsolated(g) {
  const { N, succ, pred, layer } = g;
  const isolated = [];
  for (let i = 0; i < N; i++) if (!pred[i].length && !succ[i].length) isolated.push(i);
  if (isolated.length === N && N > 1) {
    const perRow = Math.max(1, Math.ceil(Math.sqrt(N * 2.2)));
    isolated.forEach((v, k) => { layer[v] = Math.floor(k / perRow); });
  } else if (isolated.length) {
    let maxLayer = 0;
    for (let i = 0; i < N; i++) maxLayer = Math.max(maxLayer, layer[i]);
    const perRow = Math.max(4, Math.ceil(Math.sqrt(isolated.length * 2)));
    isolated.forEach((v, k) => { layer[v] = maxLayer + 1 + Math.floor(k / perRow); });
  }
}

/** 3. Dummy nodes on edges spanning several layers: g.vw/vh/vl/vsucc/vpred over real and dummy
 * nodes, g.chains (each edge's path through its dummies) and g.layers (node ids per layer). */
function addDummies(g) {
  const { nodes, E, layer } = g;
  const vw = nodes.map((n) => n.w), vh = nodes.map((n) => n.h);
  const vl = Array.from(layer);
  const vsucc = g.succ.map(() => []), vpred = g.pred.map(() => []);
  const seq = nodes.map((_, i) => i);       // initial order key
  const chains = [];
  for (const e of E) {
    const chain = [e.u];
    let prev = e.u;
    for (let l = layer[e.u] + 1; l < layer[e.v]; l++) {
      const d = vw.length;
      vw.push(0); vh.push(0); vl.push(l); vsucc.push([]); vpred.push([]); seq.push(seq[e.u] + 0.5);
      vsucc[prev].push(d); vpred[d].push(prev);
      chain.push(d);
      prev = d;
    }
    vsucc[prev].push(e.v); vpred[e.v].push(prev);
    chain.push(e.v);
    chains.push({ e, chain });
  }
  const V = vw.length;
  let L = 0;
  for (let i = 0; i < V; i++) L = Math.max(L, vl[i] + 1);
  const layers = Array.from({ length: L }, () => []);
  for (let i = 0; i < V; i++) layers[vl[i]].push(i);
  for (const ly of layers) ly.sort((a, b) => seq[a] - seq[b]);
  Object.assign(g, { vw, vh, vl, vsucc, vpred, chains, V, L, layers });
}

/** Crossings between consecutive layers at positions pos; -1 when too many segments to count cheaply. */
function crossings(g, pos) {
  let c = 0;
  for (let l = 0; l + 1 < g.L; l++) {
    const segs = [];
    for (const v of g.layers[l]) for (const w of g.vsucc[v]) segs.push([pos[v], pos[w]]);
    if (segs.length > 400) return -1;     // keep the last sweep
    for (let i = 0; i < segs.length; i++) {
      for (let j = i + 1; j < segs.length; j++) {
        if ((segs[i][0] - segs[j][0]) * (segs[i][1] - segs[j][1]) < 0) c++;
      }
    }
  }
  return c;
}

/** 4. Ordering: barycenter sweeps, down then up, keeping the order with fewest crossings. */
function orderLayers(g) {
  const { V, L, layers, vpred, vsucc } = g;
  const pos = new Float64Array(V);
  const setPos = () => { for (const ly of layers) ly.forEach((v, i) => { pos[v] = i; }); };
  setPos();
  let best = layers.map((ly) => ly.slice());
  let bestC = crossings(g, pos);
  const sweeps = V > 1500 ? 4 : 12;
  for (let it = 0; it < sweeps && bestC !== 0; it++) {
    const down = it % 2 === 0;
    for (let k = 1; k < L; k++) {
      const ly = layers[down ? k : L - 1 - k];
      const nb = down ? vpred : vsucc;
      const bary = new Map();
      for (const v of ly) {
        const ns = nb[v];
        bary.set(v, ns.length ? ns.reduce((s, w) => s + pos[w], 0) / ns.length : pos[v]);
      }
      ly.sort((a, b) => bary.get(a) - bary.get(b) || pos[a] - pos[b]);
      ly.forEach((v, i) => { pos[v] = i; });
    }
    const c = crossings(g, pos);
    if (c >= 0 && (bestC < 0 || c < bestC)) { bestC = c; best = layers.map((ly) => ly.slice()); }
    else if (c < 0) best = layers.map((ly) => ly.slice());
  }
  for (let l = 0; l < L; l++) layers[l] = best[l];
}

/** 5. x positions (centres, g.x): packed left to right, then pulled toward their neighbours. */
function placeX(g) {
  const { V, L, layers, vw, vpred, vsucc, nodeSep } = g;
  const x = new Float64Array(V);
  const gap = (a, b) => (vw[a] + vw[b]) / 2 + (vw[a] && vw[b] ? nodeSep : vw[a] || vw[b] ? nodeSep / 2 : 6);
  for (const ly of layers) {
    let cur = 0;
    ly.forEach((v, i) => { if (i) cur += gap(ly[i - 1], v); x[v] = cur; });
  }
  const width0 = Math.max(...layers.map((ly) => (ly.length ? x[ly[ly.length - 1]] - x[ly[0]] : 0)), 0);
  for (const ly of layers) {
    if (!ly.length) continue;
    const off = (width0 - (x[ly[ly.length - 1]] - x[ly[0]])) / 2 - x[ly[0]];
    for (const v of ly) x[v] += off;
  }
  for (let it = 0; it < 8; it++) {
    const down = it % 2 === 0;
    for (let k = 0; k < L; k++) {
      const ly = layers[down ? k : L - 1 - k];
      if (!ly.length) continue;
      const want = ly.map((v) => {
        const ns = (down ? vpred[v] : vsucc[v]).concat(it > 3 ? (down ? vsucc[v] : vpred[v]) : []);
        return ns.length ? ns.reduce((s, w) => s + x[w], 0) / ns.length : x[v];
      });
      pullLayer(ly, want, x, gap);
    }
  }
  g.x = x;
}

/** Move a layer's nodes toward where they want to be, keeping their order and gaps. */
function pullLayer(ly, want, x, gap) {
  // Forward pass pushes right, backward pass pulls left.
  const nx = want.slice();
  for (let i = 1; i < ly.length; i++) nx[i] = Math.max(nx[i], nx[i - 1] + gap(ly[i - 1], ly[i]));
  for (let i = ly.length - 2; i >= 0; i--) nx[i] = Math.min(nx[i], nx[i + 1] - gap(ly[i], ly[i + 1]));
  // Shift the layer so that on average nodes sit where they want to be.
  let shift = 0;
  for (let i = 0; i < ly.length; i++) shift += want[i] - nx[i];
  shift /= ly.length;
  ly.forEach((v, i) => { x[v] = nx[i] + shift; });
}

/** 6. y positions by layer, then everything normalised to start at 0: the layout's answer. */
function place(g) {
  const { nodes, V, L, layers, vw, vh, vl, x, chains, rankSep } = g;
  const layerH = layers.map((ly) => Math.max(0, ...ly.map((v) => vh[v])));
  const ly0 = [];
  let yc = 0;
  for (let l = 0; l < L; l++) { ly0.push(yc); yc += layerH[l] + rankSep; }
  let minX = Infinity, maxX = -Infinity;
  for (let v = 0; v < V; v++) { minX = Math.min(minX, x[v] - vw[v] / 2); maxX = Math.max(maxX, x[v] + vw[v] / 2); }
  if (!Number.isFinite(minX)) { minX = 0; maxX = 0; }
  const cy = (v) => ly0[vl[v]] + layerH[vl[v]] / 2;
  const outNodes = nodes.map((n, i) => ({
    id: n.id, w: n.w, h: n.h, x: x[i] - minX - n.w / 2, y: cy(i) - n.h / 2,
  }));
  const outEdges = chains.map(({ e, chain }) => {
    const pts = chain.map((v, k) => {
      const px = x[v] - minX;
      if (k === 0) return [px, cy(v) + vh[v] / 2];
      if (k === chain.length - 1) return [px, cy(v) - vh[v] / 2];
      return [px, cy(v)];
    });
    if (e.rev) pts.reverse();
    return { source: e.source, target: e.target, count: e.count, points: pts, reversed: !!e.rev };
  });
  return { nodes: outNodes, edges: outEdges, width: maxX - minX, height: Math.max(0, yc - rankSep) };
}
