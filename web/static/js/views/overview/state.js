// The Overview's pure logic: the parallel layout in words, as `tdbg info` prints it.

/** Ranks as ranges: [0,1,2,5] -> "0-2,5". */
function ranges(ids) {
  const v = [...new Set(ids)].sort((a, b) => a - b);
  const out = [];
  for (let i = 0; i < v.length; i++) {
    let j = i;
    while (j + 1 < v.length && v[j + 1] === v[j] + 1) j++;
    out.push(i === j ? `${v[i]}` : `${v[i]}-${v[j]}`);
    i = j;
  }
  return out.join(',');
}

/** The lines of a dump's parallel layout (`/api/info`'s ``layout``), [] when it has none: one per mesh
 * (its dims, ranks and groups), the pipeline, and how many parameters are sharded. */
export function layoutLines(layout) {
  if (!layout) return [];
  const lines = Object.entries(layout.meshes || {}).map(([name, m]) => {
    const dims = m.dims.map((d, k) => `${d} ${m.shape[k]}`).join(' x ');
    const groups = Object.entries(m.groups || {}).map(([d, gs]) => `${d}: ${gs.map((g) => `[${g.join(',')}]`).join(' ')}`).join('; ');
    return `mesh ${name}: ${dims} (ranks ${ranges(m.ranks)})${groups ? `; groups ${groups}` : ''}`;
  });
  const pp = layout.pipeline;
  if (pp) lines.push(`pipeline: ${pp.stages || '?'} stage(s), ${pp.micro_batches || '?'} micro-batch(es)`);
  const params = layout.parameters || [];
  if (params.length) {
    const sharded = params.filter((p) => p.sharded).length;
    lines.push(`parameters: ${params.length}, ${sharded} sharded (read whole, assembled from their shards)`);
  }
  return lines;
}
