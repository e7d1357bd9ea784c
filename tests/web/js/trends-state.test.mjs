// The trends view's pure logic (views/trends/state.js): ranges, zoom, scales, bands, colours, hit tests.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  bandPath, bandRuns, bucketAt, clampRange, colorOf, deepTarget, dragRange, extent, heatCell, isWhole, scale, spikeNear, wheelZoom,
} from '../../../web/static/js/views/trends/state.js';

test('a range stays inside the run, ordered, and at least a few steps wide', () => {
  assert.deepEqual(clampRange(null, 0, 99), { start: 0, stop: 99 });
  assert.deepEqual(clampRange({ start: 120, stop: -5 }, 0, 99), { start: 0, stop: 99 });
  assert.deepEqual(clampRange({ start: 50, stop: 50 }, 0, 99), { start: 48, stop: 52 });
  assert.deepEqual(clampRange({ start: 99, stop: 99 }, 0, 99), { start: 95, stop: 99 });
  assert.deepEqual(clampRange({ start: 0, stop: 1 }, 0, 2), { start: 0, stop: 2 });
});

test('the wheel zooms around the pointer and never past the run', () => {
  assert.deepEqual(wheelZoom({ start: 0, stop: 100 }, 50, 0.5, 0, 100), { start: 25, stop: 75 });
  assert.deepEqual(wheelZoom({ start: 0, stop: 100 }, 0, 0.5, 0, 100), { start: 0, stop: 50 });
  assert.deepEqual(wheelZoom({ start: 40, stop: 60 }, 50, 10, 0, 100), { start: 0, stop: 100 });
});

test('a drag selects the steps under it; a click is no drag', () => {
  const toStep = (px) => px / 10;
  assert.deepEqual(dragRange(505, 203, toStep), { start: 20, stop: 51 });
  assert.equal(dragRange(100, 102, toStep), null);
  assert.ok(isWhole(null, 0, 9) && isWhole({ start: 0, stop: 9 }, 0, 9) && !isWhole({ start: 1, stop: 9 }, 0, 9));
});

test('scales map and invert; a flat domain maps to the middle', () => {
  const x = scale(0, 10, 100, 200);
  assert.equal(x(5), 150);
  assert.equal(x.invert(150), 5);
  assert.equal(scale(3, 3, 0, 10)(3), 5);
});

test('the extent skips missing values, pads, and takes logs of positive values only', () => {
  assert.deepEqual(extent([[1, null, 3], ['NaN', 2]]), [0.9, 3.1]);
  assert.deepEqual(extent([[0, -1, 100, 10]], true), [0.95, 2.05]);
  assert.equal(extent([[null]]), null);
  assert.deepEqual(extent([[2, 2]]), [1.8, 2.2]);
});

test('a band breaks at a bucket with no value, and a lone bucket still has width', () => {
  const runs = bandRuns([0, 1, 2, 3], [1, null, 2, 3], [2, null, 4, 5]);
  assert.deepEqual(runs, [[[0, 1, 2]], [[2, 2, 4], [3, 3, 5]]]);
  const id = (v) => v;
  assert.equal(bandPath([[[0, 1, 2]]], id, id, 3), 'M0.0,2.0L3.0,1.0Z');
  assert.equal(bandPath([[[0, 1, 2], [1, 0, 3]]], id, id), 'M0.0,2.0L1.0,3.0L1.0,0.0L0.0,1.0Z');
});

test('colours run from dark to light; a missing value has none', () => {
  assert.equal(colorOf(0, 0, 1), 'rgb(68, 1, 84)');
  assert.equal(colorOf(1, 0, 1), 'rgb(253, 231, 37)');
  assert.equal(colorOf(5, 0, 1), 'rgb(253, 231, 37)');
  assert.equal(colorOf(null, 0, 1), '');
  assert.equal(colorOf(0.5, 0, 1), 'rgb(33, 145, 140)');
});

test('a heatmap pixel names its tensor, bucket and value', () => {
  const heat = { rows: [{ name: 'a' }, { name: 'b' }], x: [0, 10, 20], values: [[1, 2, 3], [4, 5, 6]] };
  assert.deepEqual(heatCell(heat, 150, 60, 300, 100), { row: 1, column: 1, tensor: 'b', step: 10, value: 5 });
  assert.equal(heatCell(heat, 300, 0, 300, 100), null);
});

test('the nearest spike within a tolerance, and the graph view state of its deep capture', () => {
  const spikes = [{ step: 10 }, { step: 50, deep: { iteration: 48, graph: 1, distance: 2 } }];
  assert.equal(spikeNear(spikes, 47, 5), spikes[1]);
  assert.equal(spikeNear(spikes, 30, 5), null);
  assert.deepEqual(deepTarget(spikes[1], { tensor: 'fc1.weight.grad', node: 'fc1.weight.grad' }, 3),
    { view: 'graph', rank: 3, graph: 1, iteration: 48, node: 'fc1.weight.grad', io: 'output', slot: 0, scope: '' });
  assert.equal(deepTarget(spikes[0], null, 0), null);
});

test('the bucket under a step', () => {
  assert.equal(bucketAt([0, 10, 20], 15), 1);
  assert.equal(bucketAt([0, 10, 20], 20), 2);
  assert.equal(bucketAt([0, 10, 20], 99), 2);
  assert.equal(bucketAt([5, 10], 2), -1);
  assert.equal(bucketAt([], 2), -1);
});
