// The node panel's pure parts (components/inspector.js) and hits in words (hits.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { currentTensor, histogramColor } from '../../../web/static/js/components/inspector.js';
import { KIND_COLORS } from '../../../web/static/js/kinds.js';
import { hitText, tensorLabel } from '../../../web/static/js/hits.js';

test('the panel details the chosen dumped tensor, else the first dumped output, else none', () => {
  const ts = [{ io: 'input', slot: 0, dumped: true }, { io: 'output', slot: 0, dumped: true }];
  assert.equal(currentTensor(ts, 'input', 0), ts[0]);
  assert.equal(currentTensor(ts, 'input', 5), ts[1]);
  assert.equal(currentTensor([{ io: 'output', slot: 0, dumped: false }], 'output', 0), null);
});

test('histograms take their kind\'s colour, a neutral one for other and unknown kinds', () => {
  assert.equal(histogramColor('weight'), KIND_COLORS.weight);
  assert.equal(histogramColor('other'), '#4c6ef5');
  assert.equal(histogramColor('sharded_weight'), '#4c6ef5');
});

test('what fired, in words: thresholds, tolerances and plain values', () => {
  assert.equal(hitText({ actual: { abs_mean_lt: 3e-10 }, threshold: { abs_mean_lt: 1e-9 } }), 'abs mean 3e-10 < 1e-9');
  assert.equal(hitText({ actual: { rtol: 0.001 }, threshold: { rtol: 0.01 } }), 'relative change 0.001, within rtol 0.01: not updated');
  assert.equal(hitText({ actual: { nan_count: 4 } }), 'nan count 4');
});

test('a tensor is named by its parent scope, io:slot and the parameter it carries', () => {
  assert.equal(tensorLabel({ node: 'Default/net/fc1-Dense/MatMul-op0', io: 'output', slot: 0 }), 'fc1-Dense/MatMul-op0 output:0');
  assert.equal(tensorLabel({ node: 'a/b', io: null, param: 'fc1.weight' }), 'a/b (fc1.weight)');
});
