// The node kinds: the list, its order and each kind's colour come from the library (/api/kinds, set
// once at start-up by main.js; the graph export draws with the same colours); a kind without a colour
// takes the fallback.

export const FALLBACK_COLOR = '#5c677d';

let known = [];
let colors = {};

/** Take the library's kind list and colours (the `items` and `colors` of /api/kinds). */
export function setKinds(list, colorMap = {}) {
  known = Array.from(list || [], String);
  colors = { ...colorMap };
  return known;
}

/** The library's kinds, in its order. */
export function kinds() { return known.slice(); }

export function kindColor(kind) { return colors[kind] || FALLBACK_COLOR; }

/** Whether the library gave ``kind`` a colour of its own. */
export function hasColor(kind) { return Object.hasOwn(colors, kind); }

/** A kind as people read it: optimizer_state -> 'optimizer state'. */
export function kindLabel(kind) { return String(kind ?? 'other').replace(/_/g, ' '); }

/** The kinds of a {kind: count} map that have a count: library order first, then kinds it does not know. */
export function kindsIn(counts) {
  const present = Object.keys(counts || {}).filter((k) => counts[k]);
  const ordered = known.filter((k) => present.includes(k));
  return ordered.concat(present.filter((k) => !known.includes(k)));
}
