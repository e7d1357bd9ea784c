// The overlay's pure logic: where a value sits on the scale, its colour, its short text, the worst
// child of a level, and what the minimap shows. No DOM here: tests/web/js/overlay-state.test.mjs.

// Cool to hot: a healthy value stays pale, the worst is red (dark text stays readable on every stop).
const STOPS = [[0, [231, 245, 236]], [0.5, [255, 224, 102]], [0.8, [255, 146, 43]], [1, [240, 62, 62]]];

/** Where ``v`` sits on the scale, 0 (coolest) to 1 (worst); null when it has no value. */
export function scaleT(v, scale) {
  if (v === null || v === undefined || Number.isNaN(v)) return null;
  const { lo, hi, log } = scale || {};
  if (lo === null || lo === undefined || hi === null || hi === undefined) return v > 0 ? 1 : 0;
  if (log) {
    if (v <= 0) return 0;
    if (hi <= lo) return v >= hi ? 1 : 0;
    return clamp01((Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo)));
  }
  if (hi <= lo) return v > lo ? 1 : (v >= hi && hi > 0 ? 1 : 0);
  return clamp01((v - lo) / (hi - lo));
}

function clamp01(x) { return Math.min(1, Math.max(0, x)); }

/** The fill of a value at ``t`` on the scale (rgb text). */
export function heatColor(t) {
  const x = clamp01(t);
  let i = 0;
  while (i < STOPS.length - 2 && x > STOPS[i + 1][0]) i++;
  const [t0, c0] = STOPS[i], [t1, c1] = STOPS[i + 1];
  const f = (x - t0) / (t1 - t0);
  const c = c0.map((a, k) => Math.round(a + (c1[k] - a) * f));
  return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
}

/** The CSS gradient of the legend's bar. */
export function legendGradient() {
  return `linear-gradient(90deg, ${STOPS.map(([t]) => `${heatColor(t)} ${Math.round(t * 100)}%`).join(', ')})`;
}

/** A value in at most 3 significant digits, a share as a percentage. */
export function shortValue(v, share = false) {
  if (v === null || v === undefined) return '—';
  if (share) return `${+(v * 100).toPrecision(3)}%`;
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (Number.isInteger(v) && a < 1e6) return String(v);
  if (a >= 1e4 || a < 1e-2) return v.toExponential(1).replace('e+', 'e');
  return String(+v.toPrecision(3));
}

/** The child with the largest value (null when none has one). */
export function worstChild(children, overlay) {
  let best = null;
  for (const c of children) {
    const o = overlay && overlay.children[c.id];
    if (o && (best === null || o.value > best.value)) best = { id: c.id, name: c.name, value: o.value, node: o.node };
  }
  return best;
}

/** The legend's words for the ends of the scale. */
export function scaleEnds(overlay) {
  const { lo, hi, log } = overlay.scale;
  if (lo === null || lo === undefined) return null;
  return { lo: shortValue(lo, overlay.share), hi: shortValue(hi, overlay.share), log: !!log };
}

/** The overlay a URL state asks for: the API's arguments, or null for none. */
export function overlayArgs(st) {
  if (!st.overlay) return null;
  const out = { overlay: st.overlay };
  if (st.overlay === 'rank_diff' && st.vsRank !== null) out.vs_rank = st.vsRank;
  if (st.overlay === 'run_diff' && st.vsDump) out.vs_dump = st.vsDump;
  return out;
}

/** The rank a rank difference compares with by default: the next rank, or the first. */
export function defaultVsRank(ranks, rank) {
  const others = ranks.filter((r) => r !== rank);
  if (!others.length) return null;
  return others.find((r) => r > rank) ?? others[0];
}

/** Whether the level drawn at transform ``tf`` spills out of a ``w`` x ``h`` canvas (the minimap shows then). */
export function spills(lay, tf, w, h) {
  if (!lay) return false;
  const x0 = tf.x, y0 = tf.y, x1 = tf.x + lay.width * tf.k, y1 = tf.y + lay.height * tf.k;
  return x0 < -2 || y0 < -2 || x1 > w + 2 || y1 > h + 2;
}

/** The part of the layout in view, in layout units: {x, y, w, h}. */
export function viewRect(tf, w, h) {
  return { x: -tf.x / tf.k, y: -tf.y / tf.k, w: w / tf.k, h: h / tf.k };
}

/** The transform that centres the canvas on layout point (px, py) at scale k. */
export function centreOn(px, py, k, w, h) {
  return { x: w / 2 - px * k, y: h / 2 - py * k, k };
}

/** What the legend says when no node of the level has a value above 0: "no node has an update ratio above 0
 * in iteration 3" (the article as the label is said: "a max |x|", "an update ratio"). */
export function noneAbove(label, iteration) {
  const article = /^[aeiou]/i.test(label) ? 'an' : 'a';
  return `no node has ${article} ${label} above 0 in iteration ${iteration}`;
}
