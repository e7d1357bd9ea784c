// The triage page's pure logic: the words and the bar of its progress, and the optimizer steps
// that did not run grouped by cause. No DOM: tested by tests/web/js/triage-state.test.mjs.

const STAGES = { start: 'Starting', loss: 'Reading the loss', scan: 'Running the recommended watchpoints', compare: 'Comparing the ranks', done: 'Done' };

/** What the server is doing, with its count when it has several steps. */
export function progressText(p, format = String) {
  return `${STAGES[p.stage] || p.stage}${p.total > 1 ? ` (${format(p.done)} of ${format(p.total)})` : ''}`;
}

/** How far the server is, in whole percent. */
export function progressPercent(p) { return p.total ? Math.round((100 * p.done) / p.total) : 0; }

/** {cause: [iteration, ...]} of the optimizer steps that did not run. */
export function stepCauses(steps) {
  const causes = {};
  for (const s of steps) (causes[s.cause] = causes[s.cause] || []).push(s.iteration);
  return causes;
}

/** Per-rank curves ({rank, points: [[x, y]]}) as the lines a chart draws: ranks whose curves are equal point
 * for point share one line named after all of them ("ranks 0, 1 (identical)"), so no rank is drawn under
 * another and lost; the others keep a line of their own, in rank order. */
export function rankLines(curves) {
  const groups = new Map();
  for (const c of curves) {
    const key = JSON.stringify(c.points);
    if (!groups.has(key)) groups.set(key, { ranks: [], points: c.points });
    groups.get(key).ranks.push(c.rank);
  }
  return [...groups.values()].map((g) => ({
    name: g.ranks.length === 1 ? `rank ${g.ranks[0]}` : `ranks ${g.ranks.join(', ')} (identical)`,
    ranks: g.ranks, points: g.points.map(([x, y]) => ({ x, y })),
  }));
}
