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

/** Whose list is in use, in words: "from the triage: recommended" or "your own list". */
export function sourceText(source) {
  if (!source || source.from === 'user') return 'your own list';
  return `from the triage: ${source.preset}`;
}

/** The Run to next hit button's tooltip. */
export function replayTitle(count, source) {
  if (source && source.pending) return `The triage is still running the ${source.preset} watchpoints: they are used once it is done`;
  if (source && source.failed) return 'The triage failed, so its watchpoints are not set: the Triage tab says why; add a watchpoint (Watchpoints tab)';
  if (!count) return 'Add a watchpoint first (Watchpoints tab)';
  return `Check the watchpoints (${sourceText(source)}) iteration by iteration and stop at the first hit`;
}

/** The tab's hit badge of an iteration's hits answer: {text, title, state}; null when it shows nothing.
 *  A count over checks that did not all run says so, and no hit where a watchpoint checked nothing is "?",
 *  never an empty badge that reads as clean; `pending`: the triage's watchpoints are not known yet. */
export function hitBadge(r, iteration, rank, pending = false) {
  if (pending) return { text: '…', state: 'pending', title: 'The triage is still running its watchpoints: their hits show here when it is done' };
  if (r && r.failed) return { text: '!', state: 'incomplete', title: 'The triage failed: nothing was checked (the Triage tab says why)' };
  const where = `in iteration ${iteration} of rank ${rank}`;
  const note = verdictNote(r);
  if (r.verdict === 'incomplete') return { text: '?', state: 'incomplete', title: `${note.text} ${where} (the Watchpoints tab says which)` };
  if (!r.total) return null;
  const gap = (note && note.level === 'warn') || r.coverage_status === 'partial' || r.coverage_status === 'incomplete';
  return { text: String(r.total), state: gap ? 'partial' : 'complete',
    title: `${hitsWord(r.total)} ${where}${gap ? '; not every check could run (the Watchpoints tab says which)' : ''} (the Watchpoints tab lists them)` };
}

const hitsWord = (n) => `${n} hit${n === 1 ? '' : 's'}`;

/** The hits card's summary; in iteration mode the same count as the tab's badge. */
export function hitsSummary(r, mode, iteration, rank) {
  // "0 hits" where a watchpoint checked nothing would read as clean: the verdict leads instead
  const lead = r.verdict === 'incomplete' ? verdictNote(r).text : hitsWord(r.total);
  if (mode === 'iteration') return `${lead} in iteration ${iteration} · rank ${rank}`;
  return `${lead} · rank ${rank} · ${r.checked.length} iteration${r.checked.length === 1 ? '' : 's'} checked`;
}

/** Hits grouped by the watchpoint that made them, in the server's group order, empty groups left out. */
export function hitGroups(groups, hits) {
  return groups.map((g) => ({ group: g, hits: hits.filter((x) => x.watchpoint_id === g.id) })).filter((x) => x.hits.length);
}

// -- coverage: what each watchpoint checked (GET hits' `coverage`, as `tdbg scan --json` states it) --------
const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** "0-2, 5, 7-9" of sorted integers: the first `shown` runs, then "…". */
export function rangesText(nums, shown = 4) {
  const runs = [];
  for (const n of nums) {
    const last = runs[runs.length - 1];
    if (last && n === last[1] + 1) last[1] = n; else runs.push([n, n]);
  }
  const text = runs.slice(0, shown).map(([a, b]) => (a === b ? `${a}` : `${a}-${b}`)).join(', ');
  return runs.length > shown ? `${text}, …` : text;
}

const BADGES = {
  complete: { cls: 'ok', text: 'complete' },
  partial: { cls: 'warn', text: 'partial' },
  unanswered: { cls: 'warn', text: 'checked nothing' },
  not_applicable: { cls: 'muted-chip', text: 'not applicable' },
  series: { cls: 'muted-chip', text: 'per-step series' },
};

/** A watchpoint's coverage badge ({cls, text}); null before anything was checked. */
export function coverageBadge(cov) {
  return (cov && BADGES[cov.status]) || null;
}

/** One line: "checked N of M in iterations …, not checked K: reason (count); …" ('' before any check). */
export function coverageText(cov, reasonsShown = 2) {
  if (!cov || !BADGES[cov.status]) return '';
  if (cov.status === 'series') return 'Over the per-step series (tdbg scan --series), not the dumped iterations.';
  if (cov.status === 'unanswered' && !cov.of_kind) return 'Checked nothing: no tensor of its kinds in the iterations checked.';
  if (cov.status === 'not_applicable') return `Applies to none of the ${cov.of_kind} tensors of its kinds (activation functions, filters).`;
  const parts = [`Checked ${cov.checked} of ${cov.candidates}`
    + (cov.iterations.length ? ` in iteration${cov.iterations.length === 1 ? '' : 's'} ${rangesText(cov.iterations)}` : '')];
  if (cov.unchecked) {
    const shown = cov.reasons.slice(0, reasonsShown).map((r) => `${r.reason} (${r.checks})`);
    const more = cov.reasons.length > reasonsShown ? `; ${plural(cov.reasons.length - reasonsShown, 'more reason')}` : '';
    parts.push(`not checked ${cov.unchecked}: ${shown.join('; ')}${more}`);
  }
  if (cov.not_applicable) parts.push(`${cov.not_applicable} not applicable`);
  return `${parts.join(', ')}.`;
}

/** The watchpoints of a hits answer that checked nothing: {name (its group's text), why (its coverage line)}. */
export function uncheckedWatchpoints(r) {
  const text = new Map((r.groups || []).map((g) => [g.id, g.text]));
  return (r.coverage || []).filter((c) => c.status === 'unanswered')
    .map((c) => ({ name: text.get(c.id) ?? `#${c.id}`, why: coverageText(c) }));
}

/** What a hits answer says beyond its hits: never clean when a watchpoint checked nothing.
 *  {level: 'warn' | 'partial' | 'clean', text, unchecked}; null before any check or with hits and full coverage. */
export function verdictNote(r) {
  const unchecked = uncheckedWatchpoints(r);
  const nothing = `${plural(unchecked.length, 'watchpoint')} checked nothing`;
  if (r.verdict === 'incomplete') return { level: 'warn', text: `No hit, but ${nothing}`, unchecked };
  if (r.verdict === 'found') return unchecked.length ? { level: 'warn', text: nothing, unchecked } : null;
  if (r.verdict !== 'clean') return null;
  if (r.coverage_status === 'partial') return { level: 'partial', text: 'No hit, but some checks could not run (see each watchpoint)', unchecked };
  return { level: 'clean', text: 'No hit: every watchpoint checked what it watches', unchecked };
}
