// The node kinds: the list and its order come from the library (/api/kinds, set once at start-up
// by main.js); the front end only owns their colours, with a fallback for a kind it does not know.

export const KIND_COLORS = {
  weight: '#1c7ed6', gradient: '#f08c00', optimizer_state: '#9c36b5', activation: '#2f9e44',
  loss: '#d6336c', input: '#0c8599', constant: '#868e96', other: '#5c677d',
};
export const FALLBACK_COLOR = '#5c677d';

let known = [];

/** Take the library's kind list (the `items` of /api/kinds). */
export function setKinds(list) { known = Array.from(list || [], String); return known; }

/** The library's kinds, in its order. */
export function kinds() { return known.slice(); }

export function kindColor(kind) { return KIND_COLORS[kind] || FALLBACK_COLOR; }

/** A kind as people read it: optimizer_state -> 'optimizer state'. */
export function kindLabel(kind) { return String(kind ?? 'other').replace(/_/g, ' '); }

/** The kinds of a {kind: count} map that have a count: library order first, then kinds it does not know. */
export function kindsIn(counts) {
  const present = Object.keys(counts || {}).filter((k) => counts[k]);
  const ordered = known.filter((k) => present.includes(k));
  return ordered.concat(present.filter((k) => !known.includes(k)));
}
