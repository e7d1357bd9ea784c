// kinds.js: the kind list is whatever the library sends (/api/kinds); colours fall back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FALLBACK_COLOR, KIND_COLORS, kindColor, kindLabel, kinds, kindsIn, setKinds } from '../../../web/static/js/kinds.js';
import { STATIC_JS, jsFiles } from './fnlength.mjs';

test('the list is the library\'s, in its order, including kinds the front end has no colour for', () => {
  setKinds(['weight', 'activation', 'sharded_weight']);
  assert.deepEqual(kinds(), ['weight', 'activation', 'sharded_weight']);
  assert.equal(kindColor('weight'), KIND_COLORS.weight);
  assert.equal(kindColor('sharded_weight'), FALLBACK_COLOR);
  assert.equal(kindLabel('sharded_weight'), 'sharded weight');
});

test('counts list the library\'s kinds first, then kinds it did not name, and skip zeros', () => {
  setKinds(['weight', 'gradient', 'activation']);
  assert.deepEqual(kindsIn({ activation: 2, mystery: 1, weight: 5, gradient: 0 }), ['weight', 'activation', 'mystery']);
});

test('no module but kinds.js spells out the kinds', () => {
  for (const file of jsFiles(STATIC_JS)) {
    if (file === join(STATIC_JS, 'kinds.js')) continue;
    const text = readFileSync(file, 'utf8');
    assert.doesNotMatch(text, /['"]optimizer_state['"]/, file);
  }
});
