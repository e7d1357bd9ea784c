// Hits and tensors in words, shared by every view that lists them (pure: no DOM).
import { fmt } from './dom.js';

// What fired, in words: "abs_mean 3e-10 < 1e-9". A parameter named <statistic>_<op> is a threshold;
// other keys (rtol, atol) are a tolerance the value stayed within.
const OPS = { gt: '>', lt: '<', ge: '≥', le: '≤' };
const SAID = {
  atol: (v, t, th) => `largest change ${fmt(v)}, within atol ${fmt(t)}${th.rtol !== undefined ? ` + rtol ${fmt(th.rtol)} × |value|` : ''}: not updated`,
  rtol: (v, t) => `relative change ${fmt(v)}, within rtol ${fmt(t)}: not updated`,
  threshold_layer: (v, t) => `${fmt(v)}% of the layer's units inactive (limit ${fmt(t)}%)`,
};
export function hitText(x) {
  const parts = [];
  for (const [k, v] of Object.entries(x.actual || {})) {
    const t = x.threshold ? x.threshold[k] : undefined;
    const m = /^(.*)_(gt|lt|ge|le)$/.exec(k);
    if (t === undefined) parts.push(`${k.replace(/_/g, ' ')} ${fmt(v)}`);
    else if (m) parts.push(`${m[1].replace(/_/g, ' ')} ${fmt(v)} ${OPS[m[2]]} ${fmt(t)}`);
    else if (SAID[k]) parts.push(SAID[k](v, t, x.threshold));
    else parts.push(`${k.replace(/_/g, ' ')} ${fmt(v)} (limit ${fmt(t)})`);
  }
  return parts.join('; ');
}

/** A tensor named without ambiguity: parent scope and name, io:slot, and the weight it carries. */
export function tensorLabel(x) {
  const parts = (x.node || '').split('/');
  const name = parts.slice(-2).join('/');
  const io = x.io ? ` ${x.io}:${x.slot}` : '';
  const param = x.param && x.param !== x.node ? ` (${x.param})` : '';
  return `${name}${io}${param}`;
}
