// Axis ticks for every chart (no DOM): round values 1, 2 or 5 times a power of ten apart, and labels
// that tell neighbouring ticks apart (a curve spanning 1.4900-1.4901 got "1.49, 1.49").

/** About ``n`` round values inside [lo, hi] (the most that are at most n + 1); ``integer``: whole
 *  numbers only (an iteration axis has no 0.5). A flat range gives its one value. */
export function niceTicks(lo, hi, n = 6, { integer = false } = {}) {
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [];
  if (integer) { lo = Math.ceil(lo); hi = Math.floor(hi); }
  if (!(hi > lo)) return hi === lo ? [lo] : [];
  const e = Math.floor(Math.log10((hi - lo) / n));
  const steps = [e - 1, e, e + 1].flatMap((p) => [1, 2, 5].map((m) => [m, p]))
    .filter(([m, p]) => !integer || m * 10 ** p >= 1);
  for (const [m, p] of steps) {
    const ticks = multiples(lo, hi, m, p);
    if (ticks.length <= n + 1) return ticks;
  }
  return [lo, hi];
}

// The multiples of m x 10^p in [lo, hi], each rounded (no 0.30000000000000004).
function multiples(lo, hi, m, p) {
  const step = m * 10 ** p, out = [];
  for (let k = Math.ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k++) {
    out.push(Number((p < 0 ? (k * m) / 10 ** -p : k * step).toPrecision(12)));
  }
  return out;
}

/** An axis over [lo, hi]: about ``n`` round ticks ``at`` and their distinct ``labels``; ``log``: the values
 *  are log10 and are labelled as the powers they stand for; ``integer``: whole numbers only. */
export function axis(lo, hi, n, { log = false, integer = false } = {}) {
  const at = niceTicks(lo, hi, n, { integer });
  return { at, labels: tickLabels(log ? at.map((v) => 10 ** v) : at, { integer }) };
}

/** The width in px that the widest of ``labels`` takes at the tick font (about 6 px a character),
 *  with the gap to the axis. */
export function labelRoom(labels) {
  return 12 + 6.2 * Math.max(0, ...labels.map((l) => l.length));
}

/** The labels of ascending tick ``values``, all distinct: as many decimals as their spacing needs
 *  (more if two still read the same), exponent form beyond 1e5 or below 1e-3; ``integer``: whole
 *  numbers as they are up to a million (iteration 20000, not 2e4). */
export function tickLabels(values, { integer = false } = {}) {
  if (!values.length) return [];
  if (integer && values.every((v) => Number.isInteger(v) && Math.abs(v) < 1e6)) return values.map(String);
  const gaps = values.slice(1).map((v, i) => Math.abs(v - values[i])).filter((g) => g > 0);
  const step = gaps.length ? Math.min(...gaps) : 0;
  const big = Math.max(...values.map(Math.abs));
  const expo = big >= 1e5 || (big > 0 && big < 1e-3);
  for (let extra = 0; extra <= 6; extra++) {
    const labels = values.map((v) => tickText(v, step, expo, extra));
    if (new Set(labels).size === labels.length) return labels;
  }
  return values.map(String);
}

function tickText(v, step, expo, extra) {
  if (!(step > 0) && !extra) return String(Number(v.toPrecision(4)));     // one tick: a flat series
  if (v === 0 && expo) return '0';
  if (expo) {
    const digits = step > 0 ? Math.max(0, Math.floor(Math.log10(Math.abs(v))) - Math.floor(Math.log10(step) + 1e-9)) : 2;
    return v.toExponential(Math.min(20, digits + extra)).replace(/\.?0+e/, 'e').replace('e+', 'e');
  }
  const decimals = step > 0 ? Math.max(0, -Math.floor(Math.log10(step) + 1e-9)) : 3;
  return v.toFixed(Math.min(20, decimals + extra));
}
