// The watchpoints view's pure logic: conditions grouped by where they come from, a parameter's
// range and placeholder, the spec a filled form makes, and the words of its messages.
// No DOM: tested by tests/web/js/watch-state.test.mjs.

export const ORIGIN_TITLES = { mindinsight: 'MindInsight conditions', sagemaker: 'Rules over several iterations or units', tdbg: 'tdbg' };

/** Where a condition comes from (`origin`; older servers call it `family`). */
export function originOf(c) { return c.origin ?? c.family; }

/** [[title, conditions]] in the registry's order of first appearance. */
export function groupByOrigin(conditions) {
  const groups = new Map();
  for (const c of conditions) {
    const o = originOf(c);
    if (!groups.has(o)) groups.set(o, []);
    groups.get(o).push(c);
  }
  return [...groups].map(([o, cs]) => [ORIGIN_TITLES[o] || o, cs]);
}

/** "≥ min, ≤ max" of a parameter, '' when unbounded; fmt formats the numbers. */
export function paramRange(p, fmt = String) {
  return [p.min !== null ? `≥ ${fmt(p.min)}` : null, p.max !== null ? `≤ ${fmt(p.max)}` : null].filter(Boolean).join(', ');
}

export function paramPlaceholder(p, fmt = String) {
  return p.default !== null ? `default ${fmt(p.default)}` : (p.comparison ? 'threshold' : 'value');
}

/** The watchpoint spec of a filled form: only the parameters and filters given. */
export function specOf(name, paramValues, node, scope) {
  const params = {};
  for (const [k, raw] of paramValues) if (raw.trim() !== '') params[k] = raw.trim();
  const spec = { name, params };
  if (node.trim()) spec.node = node.trim();
  if (scope.trim()) spec.scope = scope.trim();
  return spec;
}

/** What adding a preset did: all of it, part (the rest already set), or nothing new. */
export function presetMessage(name, created, wanted) {
  if (created === wanted) return `Preset ${name} added (${wanted} watchpoints)`;
  if (created) return `Preset ${name}: ${created} added, ${wanted - created} already set`;
  return `Preset ${name} is already set`;
}

const hitsWord = (n) => `${n} hit${n === 1 ? '' : 's'}`;

/** The hits card's summary; in iteration mode the same count as the tab's badge. */
export function hitsSummary(r, mode, iteration, rank) {
  if (mode === 'iteration') return `${hitsWord(r.total)} in iteration ${iteration} · rank ${rank}`;
  return `${hitsWord(r.total)} · rank ${rank} · ${r.checked.length} iteration${r.checked.length === 1 ? '' : 's'} checked`;
}

/** Hits grouped by the watchpoint that made them, in the server's group order, empty groups left out. */
export function hitGroups(groups, hits) {
  return groups.map((g) => ({ group: g, hits: hits.filter((x) => x.watchpoint_id === g.id) })).filter((x) => x.hits.length);
}
