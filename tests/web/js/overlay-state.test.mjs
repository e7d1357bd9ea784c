// The overlay's pure logic (views/graph/overlay-state.js): the scale, the colours, the values' text,
// the worst child and the minimap's arithmetic.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  centreOn, defaultVsRank, heatColor, noneAbove, overlayArgs, scaleEnds, scaleT, shortValue, spills, viewRect, worstChild,
} from '../../../web/static/js/views/graph/overlay-state.js';

test('a log scale puts each decade at its share of the span; no value is null', () => {
  const sc = { lo: 1e-3, hi: 1e3, log: true };
  assert.equal(scaleT(1e-3, sc), 0);
  assert.equal(scaleT(1e3, sc), 1);
  assert.ok(Math.abs(scaleT(1, sc) - 0.5) < 1e-12);
  assert.equal(scaleT(0, sc), 0);            // zero sits at the cool end of a log scale
  assert.equal(scaleT(1e9, sc), 1);          // clamped
  assert.equal(scaleT(null, sc), null);
  assert.equal(scaleT(NaN, sc), null);
});

test('a share is linear on 0-1; a scale with nothing above 0 leaves every value cool', () => {
  assert.equal(scaleT(0.25, { lo: 0, hi: 1, log: false }), 0.25);
  assert.equal(scaleT(0, { lo: null, hi: null, log: true }), 0);
  assert.equal(scaleT(3, { lo: 5, hi: 5, log: true }), 0);
  assert.equal(scaleT(5, { lo: 5, hi: 5, log: true }), 1);
});

test('the colours run from pale to red and every stop is distinct', () => {
  assert.equal(heatColor(0), 'rgb(231, 245, 236)');
  assert.equal(heatColor(1), 'rgb(240, 62, 62)');
  assert.equal(heatColor(2), heatColor(1));
  const seen = new Set([0, 0.25, 0.5, 0.65, 0.8, 0.9, 1].map(heatColor));
  assert.equal(seen.size, 7);
});

test('values are short: three digits, exponents for the very large and small, shares in percent', () => {
  assert.equal(shortValue(715.48431), '715');
  assert.equal(shortValue(4.118073), '4.12');
  assert.equal(shortValue(0.000646), '6.5e-4');
  assert.equal(shortValue(123456.7), '1.2e5');
  assert.equal(shortValue(7), '7');
  assert.equal(shortValue(0), '0');
  assert.equal(shortValue(0.486328, true), '48.6%');
  assert.equal(shortValue(null), '—');
});

test('the worst child is the one with the largest value; children without one are skipped', () => {
  const items = [{ id: 'a', name: 'a' }, { id: 'b', name: 'b' }, { id: 'c', name: 'c' }];
  const ov = { children: { a: { value: 2, node: 'a/x' }, c: { value: 9, node: 'c/y' } } };
  assert.deepEqual(worstChild(items, ov), { id: 'c', name: 'c', value: 9, node: 'c/y' });
  assert.equal(worstChild(items, { children: {} }), null);
});

test('the legend names both ends, or nothing when no value is above 0', () => {
  assert.deepEqual(scaleEnds({ share: false, scale: { lo: 0.001, hi: 715, log: true } }), { lo: '1.0e-3', hi: '715', log: true });
  assert.equal(scaleEnds({ share: false, scale: { lo: null, hi: null, log: true } }), null);
});

test('the URL state gives the API its arguments; a difference names what it compares with', () => {
  assert.equal(overlayArgs({ overlay: null }), null);
  assert.deepEqual(overlayArgs({ overlay: 'max_abs', vsRank: 3 }), { overlay: 'max_abs' });
  assert.deepEqual(overlayArgs({ overlay: 'rank_diff', vsRank: 1 }), { overlay: 'rank_diff', vs_rank: 1 });
  assert.deepEqual(overlayArgs({ overlay: 'run_diff', vsDump: 'b' }), { overlay: 'run_diff', vs_dump: 'b' });
  assert.equal(defaultVsRank([0, 1, 2], 1), 2);
  assert.equal(defaultVsRank([0, 1, 2], 2), 0);
  assert.equal(defaultVsRank([0], 0), null);
});

test('the minimap shows when the level spills out of the canvas, and centres where it is clicked', () => {
  const lay = { width: 400, height: 2000 };
  assert.equal(spills(lay, { x: 10, y: 10, k: 0.2 }, 800, 600), false);
  assert.equal(spills(lay, { x: 10, y: 10, k: 1 }, 800, 600), true);
  assert.deepEqual(viewRect({ x: -100, y: -50, k: 2 }, 800, 600), { x: 50, y: 25, w: 400, h: 300 });
  assert.deepEqual(centreOn(200, 1000, 1, 800, 600), { x: 200, y: -700, k: 1 });
});

test('the legend says "an update ratio", "a max |x|"', () => {
  assert.equal(noneAbove('update ratio', 3), 'no node has an update ratio above 0 in iteration 3');
  assert.equal(noneAbove('max |x|', 0), 'no node has a max |x| above 0 in iteration 0');
});
