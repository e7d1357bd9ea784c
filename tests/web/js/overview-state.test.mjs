// The Overview's pure logic (views/overview/state.js): the parallel layout as `tdbg info` prints it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { layoutLines } from '../../../web/static/js/views/overview/state.js';

test('a 2-D mesh, its groups and the sharded parameters, in tdbg info\'s words; no layout, no lines', () => {
  const layout = {
    ranks: [0, 1, 2, 3],
    meshes: { 'dp,tp': { dims: ['dp', 'tp'], shape: [2, 2], ranks: [0, 1, 2, 3], groups: { dp: [[0, 2], [1, 3]], tp: [[0, 1], [2, 3]] } } },
    pipeline: null,
    parameters: [{ name: 'a', sharded: true }, { name: 'b', sharded: false }],
  };
  assert.deepEqual(layoutLines(layout), [
    'mesh dp,tp: dp 2 x tp 2 (ranks 0-3); groups dp: [0,2] [1,3]; tp: [0,1] [2,3]',
    'parameters: 2, 1 sharded (read whole, assembled from their shards)',
  ]);
  assert.deepEqual(layoutLines(null), []);
  assert.deepEqual(layoutLines({ ranks: [0, 1], meshes: {}, pipeline: { stages: 2, micro_batches: 4 }, parameters: [] }),
    ['pipeline: 2 stage(s), 4 micro-batch(es)']);
});
