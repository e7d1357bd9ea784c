// The tensor view's pure logic (views/tensor/state.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chooseTensor, defaultSlice, shardNote, statColumns, tableShape, valuesOf } from '../../../web/static/js/views/tensor/state.js';

const T = [{ io: 'input', slot: 0, dumped: true }, { io: 'output', slot: 0, dumped: false }, { io: 'output', slot: 1, dumped: true }];

test('the chosen tensor when dumped, else the first dumped output, else any dumped', () => {
  assert.equal(chooseTensor(T, 'input', 0), T[0]);
  assert.equal(chooseTensor(T, 'output', 0), T[2]);
  assert.equal(chooseTensor([{ io: 'input', slot: 3, dumped: true }], 'output', 0).slot, 3);
  assert.equal(chooseTensor([{ io: 'output', slot: 0, dumped: false }], 'output', 0), undefined);
});

test('the first slice is the plane of the last two axes', () => {
  assert.equal(defaultSlice([]), '[]');
  assert.equal(defaultSlice([5]), '[:]');
  assert.equal(defaultSlice([2, 3, 4, 5]), '[0, 0, :, :]');
});

test('statistics columns add previous and difference only when there is a previous iteration', () => {
  assert.deepEqual(statColumns({ min: 1 }, { error: new Error('first') }), [['current', { min: 1 }]]);
  const cols = statColumns({ min: 1 }, { previous_iteration: 2, stats: { previous: { min: 0 }, difference: { min: 1 } } });
  assert.deepEqual(cols.map(([t]) => t), ['current', 'previous (it 2)', 'difference']);
});

test('values notes say which iterations they are', () => {
  const r = { slice: '[0, :]', iteration: 3, previous_iteration: 2, previous: 'P', difference: 'D' };
  assert.deepEqual(valuesOf('difference', r), { sel: 'D', note: 'slice [0, :] · iteration 3 − 2' });
  assert.deepEqual(valuesOf('previous', r), { sel: 'P', note: 'slice [0, :] · iteration 2' });
  assert.equal(valuesOf('current', { slice: '[:]' }).note, 'slice [:]');
});

test('a value table is capped, a vector one row', () => {
  assert.deepEqual(tableShape([1, 2, 3]), { rows: [[1, 2, 3]], cols: 3, cut: false, shownRows: 1 });
  const big = Array.from({ length: 5 }, () => [1, 2, 3, 4]);
  const t = tableShape(big, 2, 3);
  assert.deepEqual([t.rows.length, t.cols, t.cut, t.shownRows], [2, 3, true, 2]);
});

test('shardNote says what a logical tensor is made of, replicas once', () => {
  assert.equal(shardNote(null, 0), null);
  const fsdp = { shape: [3, 8], own_rank: 1, pieces: [
    { rank: 0, local_shape: [2, 8], mesh: 'dp', placements: ['Shard(0)'], index: [[[0, 2]], [[0, 8]]], flat: null },
    { rank: 1, local_shape: [1, 8], mesh: 'dp', placements: ['Shard(0)'], index: [[[2, 3]], [[0, 8]]], flat: null }] };
  assert.equal(shardNote(fsdp, 1), 'logical tensor 3x8, assembled from 2 shard(s) on ranks 0-1 (dp: Shard(0)); rank 1 holds 1x8');
  // a 2-D mesh: ranks 0 and 1 hold the same rows (tensor-parallel replicas of one FSDP shard)
  const twoD = { shape: [8], own_rank: 2, pieces: [
    { rank: 0, local_shape: [4], mesh: 'dp,tp', placements: ['Shard(0)', 'Replicate()'], index: [[[0, 4]]], flat: null },
    { rank: 1, local_shape: [4], mesh: 'dp,tp', placements: ['Shard(0)', 'Replicate()'], index: [[[0, 4]]], flat: null },
    { rank: 2, local_shape: [4], mesh: 'dp,tp', placements: ['Shard(0)', 'Replicate()'], index: [[[4, 8]]], flat: null },
    { rank: 3, local_shape: [4], mesh: 'dp,tp', placements: ['Shard(0)', 'Replicate()'], index: [[[4, 8]]], flat: null }] };
  assert.equal(shardNote(twoD, 2),
    'logical tensor 8, assembled from 2 shard(s) on ranks 0-3 (dp,tp: Shard(0), Replicate()), 2 replica(s); rank 2 holds 4');
});
