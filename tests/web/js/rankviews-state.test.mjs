// The 1,000-rank views' pure logic (views/ranks/state.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { areaPath, bandExtent, cellAt, cellTarget, cellTensor, groupOf, pagesFor, rankRanges, visibleRange } from '../../../web/static/js/views/ranks/state.js';

test('the band extent covers the envelope and the finite outlier values', () => {
  const band = { min: [1, 2], max: [3, 4], outliers: [{ rank: 7, points: [[0, null], [1, 50]] }] };
  assert.deepEqual(bandExtent(band), [1, 50]);
  assert.equal(bandExtent({ min: [null], max: [null], outliers: [] }), null);
  assert.deepEqual(bandExtent({ min: [2], max: [2], outliers: [] }), [1.8, 2.2]);
});

test('an area breaks where a value is missing', () => {
  const id = (v) => v;
  assert.equal(areaPath([0, 1, 2], [0, null, 0], [1, null, 1], id, id), 'M0.0,1.0L0.0,0.0ZM2.0,1.0L2.0,0.0Z');
  assert.equal(areaPath([0, 1], [0, 0], [2, 3], id, id), 'M0.0,2.0L1.0,3.0L1.0,0.0L0.0,0.0Z');
});

test('a point on the heatmap names its rank, iteration and group', () => {
  const heat = { rows: [5, 6, 7, 8], iterations: [10, 20], groups: [{ name: 'dp 0', start: 0, count: 2 }, { name: 'dp 1', start: 2, count: 2 }] };
  assert.deepEqual(cellAt(heat, 150, 299, 200, 400), { rank: 7, iteration: 20, row: 2, column: 1 });
  assert.deepEqual(cellAt(heat, 0, 0, 200, 400), { rank: 5, iteration: 10, row: 0, column: 0 });
  assert.equal(cellAt(heat, 200, 0, 200, 400), null);
  assert.equal(groupOf(heat, 3).name, 'dp 1');
});

test('a heatmap cell opens its tensor at its rank and iteration, else the graph with nothing selected', () => {
  const bias = { graph: 0, node: 'layers.0.down.bias', io: 'output', slot: 0 };
  const heat = { rows: [0, 1], iterations: [0, 1], tensors: [bias], opens: [[1, 1, 0]] };
  assert.deepEqual(cellTensor(heat, 1, 1), bias);
  assert.equal(cellTensor(heat, 0, 1), null);
  assert.deepEqual(cellTarget(heat, { rank: 1, iteration: 1, row: 1, column: 1 }),
    { view: 'graph', rank: 1, iteration: 1, scope: '', graph: 0, node: 'layers.0.down.bias', io: 'output', slot: 0 });
  assert.deepEqual(cellTarget(heat, { rank: 0, iteration: 0, row: 0, column: 0 }),
    { view: 'graph', rank: 0, iteration: 0, scope: '', node: null });
  assert.equal(cellTensor({ rows: [0], iterations: [0], cells: [] }, 0, 0), null);   // a triage without opens
});

test('a virtual list draws the visible rows and a few more, from the pages that hold them', () => {
  assert.deepEqual(visibleRange(0, 320, 32, 1000), [0, 16]);
  assert.deepEqual(visibleRange(3200, 320, 32, 1000, 2), [98, 112]);
  assert.deepEqual(visibleRange(32000, 320, 32, 1000), [994, 1000]);
  assert.deepEqual(pagesFor(98, 112, 100), [0, 1]);
  assert.deepEqual(pagesFor(0, 0, 100), []);
});

test('ranks are written as runs, capped', () => {
  assert.equal(rankRanges([5, 0, 1, 2, 7, 8]), '0–2, 5, 7–8');
  assert.equal(rankRanges(Array.from({ length: 1000 }, (_, i) => i)), '0–999');
  assert.equal(rankRanges([0, 2, 4, 6], 2), '0, 2, … (4 ranks)');
  assert.equal(rankRanges([]), '');
  assert.equal(rankRanges([1, 3, 5], 1, 'iterations'), '1, … (3 iterations)');
});
