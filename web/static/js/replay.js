// Replay over the whole run (no DOM): the slider walks every iteration of a rank, whichever graph
// ran it. A PyTorch recording has one graph per distinct operator sequence (its first step, which
// creates the optimizer state, is a graph of its own); a MindSpore step may run several graphs.

/** Every iteration any of ``graphs`` ran ([{graph, iterations}]), ascending, each once. */
export function runIterations(graphs) {
  const all = new Set();
  for (const g of graphs) for (const it of g.iterations || []) all.add(it);
  return [...all].sort((a, b) => a - b);
}

/** The iterations graph ``id`` ran ([] when the rank has no such graph). */
export function iterationsOf(graphs, id) {
  const g = graphs.find((x) => x.graph === id);
  return g ? g.iterations || [] : [];
}

/** The graph to show at iteration ``it``: ``current`` when it ran ``it`` (a step that runs several
 *  graphs keeps the open one), else the graph that ran ``it`` most often overall (lowest id on a
 *  tie); null when no graph ran it. */
export function graphRunning(graphs, it, current) {
  if (it === null || it === undefined) return null;
  const ran = graphs.filter((g) => (g.iterations || []).includes(it));
  if (!ran.length) return null;
  if (ran.some((g) => g.graph === current)) return current;
  return ran.reduce((a, g) => (g.iterations.length > a.iterations.length
    || (g.iterations.length === a.iterations.length && g.graph < a.graph) ? g : a)).graph;
}

/** The graph a link that names none opens: the one that ran ``it`` when given, else the one that
 *  ran most (its first iteration is often a graph of its own). */
export function defaultGraph(graphs, it) {
  if (!graphs.length) return null;
  const running = graphRunning(graphs, it, null);
  if (running !== null) return running;
  return graphs.reduce((a, g) => ((g.iterations || []).length > (a.iterations || []).length ? g : a)).graph;
}

/** The latest of ``its`` (ascending) not after ``it``, else the first; null when ``its`` is empty. */
export function nearestIteration(its, it) {
  if (!its.length) return null;
  if (it === null || it === undefined) return its[0];
  let best = its[0];
  for (const x of its) if (x <= it) best = x;
  return best;
}

/** The iteration ``delta`` steps from ``it`` along ``its``, clamped to its ends. */
export function stepIteration(its, it, delta) {
  if (!its.length) return null;
  const i = Math.max(0, its.indexOf(it));
  return its[Math.min(its.length - 1, Math.max(0, i + delta))];
}

/** The text after the slider: "of 0–7" or "(none dumped)". */
export function rangeLabel(its) {
  return its.length ? `of ${its[0]}–${its[its.length - 1]}` : '(none dumped)';
}

/** The graph that ran ``it`` by a curve's ``[[graph, first, last], ...]`` spans; null when none covers it. */
export function graphAt(spans, it) {
  const s = (spans || []).find(([, first, last]) => first <= it && it <= last);
  return s ? s[0] : null;
}
