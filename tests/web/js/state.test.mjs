// state.js: the URL hash and the state it names, both ways.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hashOf, parse } from '../../../web/static/js/state.js';

test('defaults are left out of the hash', () => {
  assert.equal(hashOf(parse('#/graph')), '#/graph');
  assert.equal(hashOf(parse('')), '#/triage');
});

test('a hash round-trips through the state', () => {
  const hash = '#/graph?dump=single&rank=1&graph=0&it=3&scope=Default/net&node=Default/net/MatMul-op0&fw=1';
  const st = parse(hash);
  assert.equal(st.view, 'graph');
  assert.equal(st.rank, 1);
  assert.equal(st.graph, 0);
  assert.equal(st.iteration, 3);
  assert.equal(st.scope, 'Default/net');
  assert.equal(st.framework, true);
  assert.equal(st.io, 'output');                 // not in the hash: its default
  assert.equal(hashOf(st), hash);
});

test('unknown views and bad numbers fall back to their defaults', () => {
  const st = parse('#/nowhere?rank=abc&slot=2');
  assert.equal(st.view, 'triage');
  assert.equal(st.rank, 0);
  assert.equal(st.slot, 2);
});

test('a code location keeps its slashes and colon readable', () => {
  const h = hashOf({ ...parse('#/code'), line: '/home/me/train.py:14' });
  assert.equal(h, '#/code?line=/home/me/train.py:14');
  assert.equal(parse(h).line, '/home/me/train.py:14');
});
