// The graph view's search box: node names, or FILE:LINE for the nodes a code line created.
// Picking a result moves the shared state (node, scope, line); the graph view follows it.
import { api } from '../../api.js';
import { state, set } from '../../state.js';
import { put, h, clear, debounce, kindDot } from '../../dom.js';
import { isLocation } from './state.js';

const NAME_RESULTS = 60, LINE_RESULTS = 40;

/** The search box and its results list; returns its element. */
export function createSearch() {
  const input = h('input', { type: 'search', class: 'search-input', placeholder: 'Node or FILE:LINE',
    title: 'Search the nodes by name, or the nodes a code line made (FILE:LINE)',
    'aria-label': 'search nodes' });
  const results = h('div', { class: 'search-results', hidden: true });
  const close = () => { results.hidden = true; input.blur(); };
  let seq = 0;
  const search = debounce(async () => {
    const q = input.value.trim();
    const my = ++seq;
    if (!q) { results.hidden = true; return; }
    results.hidden = false;
    put(clear(results), h('div', { class: 'sr-note' }, 'Searching…'));
    try {
      const items = isLocation(q) ? await lineResults(q, close) : await nameResults(q, close);
      if (my === seq) put(clear(results), items);
    } catch (e) {
      if (my === seq) put(clear(results), h('div', { class: 'sr-note error' }, e.message));
    }
  }, 180);
  input.addEventListener('input', search);
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') {
      const first = results.querySelector('.sr-item');
      if (first) first.click(); else search();
    } else if (e.key === 'Escape') close();
  });
  document.addEventListener('click', (e) => { if (!results.contains(e.target) && e.target !== input) results.hidden = true; });
  return h('div', { class: 'search-box' }, input, results);
}

/** Results of FILE:LINE: highlight the line (its first forward node selected), then its nodes. */
async function lineResults(q, close) {
  const r = await api.codeNodes({ dump: state.dump, rank: state.rank, location: q });
  const mine = r.items.filter((n) => n.graph === state.graph);
  const fw = mine.filter((n) => n.direction === 'forward').length;
  const chooseLine = () => {
    const first = mine.find((n) => n.direction === 'forward') || mine[0];
    set(first ? { line: q, node: first.node, scope: first.place } : { line: q });
    close();
  };
  return [
    h('div', { class: 'sr-item sr-line', onclick: chooseLine },
      h('b', {}, `Highlight ${q}`), h('span', { class: 'muted' }, ` ${fw} forward, ${mine.length - fw} backward node${mine.length === 1 ? '' : 's'}`)),
    r.files.length ? null : h('div', { class: 'sr-note' }, 'No source file of this dump matches.'),
    mine.slice(0, LINE_RESULTS).map((n) => resultItem(n, () => { set({ line: q, node: n.node, scope: n.place }); close(); })),
  ];
}

/** Results of a name search. */
async function nameResults(q, close) {
  const r = await api.search({ dump: state.dump, rank: state.rank, graph: state.graph, q, framework: state.framework });
  return [
    r.total ? null : h('div', { class: 'sr-note' }, `No node name contains “${q}”.`),
    r.items.slice(0, NAME_RESULTS).map((n) => resultItem(n, () => { set({ node: n.node, scope: n.place }); close(); })),
    r.total > NAME_RESULTS ? h('div', { class: 'sr-note' }, `${r.total - NAME_RESULTS} more; refine the search.`) : null,
  ];
}

function resultItem(n, onPick) {
  const fwd = n.direction === 'forward';
  return h('div', { class: 'sr-item', onclick: onPick, title: n.node },
    kindDot(n.kind),
    h('span', { class: 'sr-name' }, n.name),
    n.direction ? h('span', { class: `chip ${fwd ? 'fwd' : 'bwd'}` }, fwd ? 'fwd' : 'bwd') : null,
    h('span', { class: 'sr-scope' }, n.scope || '(root)'));
}
