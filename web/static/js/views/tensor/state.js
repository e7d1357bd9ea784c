// The tensor view's pure logic: which tensor to show, the default slice of a shape, the columns
// of the statistics table and the words of a values answer. No DOM: tests/web/js/tensor-state.test.mjs.

/** The dumped tensor to show: the chosen io:slot, else the first output, else any; undefined when none. */
export function chooseTensor(tensors, io, slot) {
  const dumped = tensors.filter((t) => t.dumped);
  return dumped.find((t) => t.io === io && t.slot === slot) || dumped.find((t) => t.io === 'output') || dumped[0];
}

/** The slice shown first: a 2-D plane of the last two axes. */
export function defaultSlice(sh) {
  if (!sh || sh.length === 0) return '[]';
  if (sh.length === 1) return '[:]';
  return `[${[...Array(sh.length - 2).fill('0'), ':', ':'].join(', ')}]`;
}

/** [title, stats] columns: current, and previous and difference when there is a previous iteration. */
export function statColumns(current, diff) {
  if (!diff || diff.error || diff.available === false) return [['current', current]];
  return [['current', current], [`previous (it ${diff.previous_iteration})`, diff.stats.previous], ['difference', diff.stats.difference]];
}

/** The values to draw for current | previous | difference, and the note above them. */
export function valuesOf(which, r) {
  if (which === 'current') return { sel: r, note: `slice ${r.slice}` };
  const its = which === 'previous' ? `iteration ${r.previous_iteration}` : `iteration ${r.iteration} − ${r.previous_iteration}`;
  return { sel: r[which], note: `slice ${r.slice} · ${its}` };
}

/** Rows of a value table (a vector is one row), capped, and whether the cap cut anything. */
export function tableShape(values, maxRows = 400, maxCols = 60) {
  const rows = Array.isArray(values[0]) ? values : [values];
  const cols = rows[0] ? rows[0].length : 0;
  return { rows: rows.slice(0, maxRows).map((r) => r.slice(0, maxCols)), cols: Math.min(cols, maxCols),
    cut: rows.length > maxRows || cols > maxCols, shownRows: Math.min(rows.length, maxRows) };
}

/** What a logical tensor is made of, in words: "logical tensor 3x8, assembled from 2 shards on ranks 0-1
 * (dp: Shard(0)); rank 1 holds 1x8"; null for a rank's own tensor. Replicas count once. */
export function shardNote(shards, rank) {
  if (!shards || !shards.pieces || !shards.pieces.length) return null;
  const dims = (sh) => (sh && sh.length ? sh.join('x') : 'scalar');
  const pieces = shards.pieces;
  const parts = new Set(pieces.map((p) => JSON.stringify([p.index, p.flat]))).size;
  const ranks = pieces.map((p) => p.rank).sort((a, b) => a - b);
  const span = ranks.length > 1 && ranks[ranks.length - 1] - ranks[0] === ranks.length - 1
    ? `${ranks[0]}-${ranks[ranks.length - 1]}` : ranks.join(', ');
  const first = pieces[0];
  const place = first.placements && first.placements.length ? ` (${first.mesh}: ${first.placements.join(', ')})` : '';
  const own = pieces.find((p) => p.rank === rank);
  const replicas = pieces.length > parts ? `, ${pieces.length - parts} replica(s)` : '';
  return `logical tensor ${dims(shards.shape)}, assembled from ${parts} shard(s) on ranks ${span}${place}${replicas}`
    + (own ? `; rank ${rank} holds ${dims(own.local_shape)}` : '');
}
