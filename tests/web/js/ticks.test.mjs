// Every chart's axis ticks (ticks.js): round values, labels that tell neighbours apart, whole
// iterations, flat and tiny ranges.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { axis, labelRoom, niceTicks, tickLabels } from '../../../web/static/js/ticks.js';

const distinct = (xs) => new Set(xs).size === xs.length;

test('ticks are round numbers (1, 2 or 5 times a power of ten apart) inside the range', () => {
  assert.deepEqual(niceTicks(0, 159, 8), [0, 20, 40, 60, 80, 100, 120, 140]);
  assert.deepEqual(niceTicks(-0.07, 1.55, 4), [0, 0.5, 1, 1.5]);
  assert.deepEqual(niceTicks(0.1799, 0.8201, 4), [0.2, 0.4, 0.6, 0.8]);     // not 0.22, 0.38, ...
  assert.deepEqual(niceTicks(-3.2, 5.1, 4), [-2, 0, 2, 4]);
  assert.deepEqual(niceTicks(12000, 870000, 4), [200000, 400000, 600000, 800000]);
  for (const [lo, hi, n] of [[0.13, 0.91, 4], [-7.3, -0.2, 5], [1e-9, 7e-9, 4], [3, 3e6, 6], [0.2, 0.2001, 4]]) {
    const t = niceTicks(lo, hi, n);
    assert.ok(t.length >= 2 && t.length <= n + 1, `${lo}..${hi}: ${t}`);
    assert.ok(t.every((v) => v >= lo - 1e-12 && v <= hi + 1e-12), `${lo}..${hi}: ${t}`);
    const step = t[1] - t[0];
    const mant = step / 10 ** Math.floor(Math.log10(step));
    assert.ok([1, 2, 5].some((m) => Math.abs(mant - m) < 1e-6), `${lo}..${hi}: step ${step}`);
  }
  assert.deepEqual(niceTicks(0.1, 0.3, 2), [0.1, 0.2, 0.3]);          // no 0.30000000000000004
});

test('labels tell neighbouring ticks apart, even 1e-7 apart around 1.49', () => {
  const tiny = niceTicks(1.49 - 5e-8, 1.49 + 5e-8, 4);
  const labels = tickLabels(tiny);
  assert.ok(tiny.length >= 3 && distinct(labels), `${labels}`);
  assert.ok(labels.every((l) => l.startsWith('1.4899') || l.startsWith('1.4900')), `${labels}`);
  assert.deepEqual(tickLabels([1.4899, 1.49, 1.4901]), ['1.4899', '1.4900', '1.4901']);
  assert.ok(distinct(tickLabels([1.49, 1.4900000001])));
  assert.deepEqual(tickLabels([0, 0.5, 1, 1.5]), ['0.0', '0.5', '1.0', '1.5']);
  assert.deepEqual(tickLabels([-1, -0.5, 0]), ['-1.0', '-0.5', '0.0']);
  assert.deepEqual(tickLabels([2e-7, 4e-7, 6e-7]), ['2e-7', '4e-7', '6e-7']);
  assert.deepEqual(tickLabels([200000, 400000]), ['2e5', '4e5']);
  assert.deepEqual(tickLabels([1.5e-4, 2e-4, 2.5e-4]), ['1.5e-4', '2e-4', '2.5e-4']);
});

test('an iteration axis has whole ticks only, as plain numbers', () => {
  assert.deepEqual(niceTicks(0, 2, 8, { integer: true }), [0, 1, 2]);
  assert.deepEqual(niceTicks(0, 7, 8, { integer: true }), [0, 1, 2, 3, 4, 5, 6, 7]);
  assert.deepEqual(niceTicks(0.5, 1.5, 8, { integer: true }), [1]);
  assert.deepEqual(niceTicks(0, 100000, 5, { integer: true }), [0, 20000, 40000, 60000, 80000, 100000]);
  assert.deepEqual(tickLabels([0, 20000, 100000], { integer: true }), ['0', '20000', '100000']);
  assert.ok(niceTicks(0, 3, 12, { integer: true }).every(Number.isInteger));
});

test('a flat series still gets a readable axis', () => {
  assert.deepEqual(niceTicks(2, 2), [2]);
  assert.deepEqual(tickLabels([2]), ['2']);
  assert.deepEqual(tickLabels([1.234567]), ['1.235']);
  assert.deepEqual(niceTicks(NaN, 1), []);
});

test('every range from 1e-9 to 1e9 wide, anywhere, gets round evenly spaced ticks whose labels read back', () => {
  for (let e = -9; e <= 9; e++) {
    for (let f = 1; f < 10; f += 0.37) {
      for (let off = -3; off <= 3; off += 0.61) {
        const span = f * 10 ** e;
        for (const lo of [off * span * 1.7, off * span * 1.7 + 1.49]) {
          const hi = lo + span;
          const t = niceTicks(lo, hi, 4);
          const labels = tickLabels(t);
          const where = `[${lo}, ${hi}] -> ${t} ${labels}`;
          assert.ok(t.length >= 2 && t.length <= 5, where);
          const step = t[1] - t[0];
          assert.ok(t.every((v) => v >= lo - step * 1e-9 && v <= hi + step * 1e-9), where);
          const tol = (v) => Math.max(step * 1e-6, Math.abs(v) * 4e-16);     // float64's own spacing at v
          t.forEach((v, i) => {
            assert.ok(Math.abs(Number(labels[i]) - v) <= tol(v), `label ${labels[i]} reads as ${v}: ${where}`);
            if (i) assert.ok(Math.abs(v - t[i - 1] - step) <= 2 * tol(v), `evenly spaced ${where}`);
          });
          assert.ok(distinct(labels), where);
        }
      }
    }
  }
});

test('an axis pairs its ticks with their labels: powers on a log axis, whole iterations on x', () => {
  assert.deepEqual(axis(-3.2, 0.1, 4, { log: true }), { at: [-3, -2, -1, 0], labels: ['0.001', '0.010', '0.100', '1.000'] });
  assert.deepEqual(axis(0, 20000, 4, { integer: true }), { at: [0, 5000, 10000, 15000, 20000], labels: ['0', '5000', '10000', '15000', '20000'] });
  const flat = axis(0.7, 1.4, 4);
  assert.equal(flat.at.length, flat.labels.length);
});

test('the room a y axis needs grows with its widest label', () => {
  const narrow = labelRoom(['0', '0.5', '1']), wide = labelRoom(['1.49000', '1.49005', '1.49010']);
  assert.ok(wide > narrow && wide >= 12 + 6 * 7, `${narrow} ${wide}`);
  assert.equal(labelRoom([]), 12);
});
