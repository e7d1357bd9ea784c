// The watchpoints view's DOM: the form generated from the condition registry, the presets, the
// active list and the hit tables. Actions are handed in (`on`); nothing here calls the API.
import { set } from '../../state.js';
import { h, fmt, basename, kindDot } from '../../dom.js';
import { hitText, tensorLabel } from '../../hits.js';
import { coverageBadge, coverageText, groupByOrigin, paramPlaceholder, paramRange, sourceText } from './state.js';

/** The condition select, grouped by origin. */
export function conditionSelect(conditions, selected) {
  return h('select', { class: 'input cond-select', 'aria-label': 'condition' },
    groupByOrigin(conditions).map(([title, cs]) => h('optgroup', { label: title },
      cs.map((c) => h('option', { value: c.name, selected: c.name === selected }, `${c.name}  ·  ${c.target}`)))));
}

/** The inputs of a condition's parameters (or a note that it has none). */
export function paramFields(c) {
  if (!c.params.length) return [h('div', { class: 'muted small' }, 'This condition has no parameters.')];
  return c.params.map((p) => {
    const range = paramRange(p, fmt);
    const input = p.type === 'bool'
      ? h('select', { class: 'input', name: p.name, 'data-param': p.name }, h('option', { value: '' }, p.default ? 'default: yes' : 'default: no'),
        h('option', { value: '1' }, 'yes'), h('option', { value: '0' }, 'no'))
      : h('input', { type: 'text', name: p.name, 'data-param': p.name, inputmode: 'decimal', placeholder: paramPlaceholder(p, fmt) });
    return h('label', { class: 'param' },
      h('span', { class: 'p-name mono' }, p.name, p.comparison ? h('span', { class: 'p-cmp', title: 'a threshold that can make a hit' }, 'threshold') : null),
      input,
      h('span', { class: 'p-help' }, p.help, range ? h('span', { class: 'faint' }, ` (${range})`) : null));
  });
}

/** The presets, each with its add button. */
export function presetList(presets, onAdd) {
  return Object.entries(presets).map(([name, specs]) => h('div', { class: 'preset' },
    h('div', { class: 'row' }, h('b', {}, name), h('span', { class: 'spacer' }),
      h('button', { class: 'btn btn-small', 'data-preset': name, onclick: () => onAdd(name, specs) }, `Add ${specs.length}`)),
    h('div', { class: 'preset-specs' }, specs.map((sp) => h('code', {}, sp)))));
}

/** The card of the watchpoints in use: whose list it is (the triage's, or the user's with a way back
 *  to the triage's), and the rows; `coverage` (id -> COVERAGE of what the hits card shows, or none while
 *  it checks) gives each row its badge and what it checked. */
export function watchpointList(wps, on, coverage = new Map()) {
  const source = wps.source || { from: 'user' };
  return [h('div', { class: 'card-head' }, h('h2', {}, 'Active watchpoints'), h('span', { class: 'muted' }, String(wps.total)),
    h('span', { class: 'spacer' }),
    wps.total ? h('button', { class: 'btn btn-small btn-ghost btn-danger', onclick: () => on.removeAll(wps.items) }, 'Remove all') : null),
  sourceLine(source, on),
  wps.total ? h('ul', { class: 'wp-list' }, wps.items.map((w) => watchpointRow(w, coverage.get(w.id), on)))
    : h('div', { class: 'card-body muted' }, source.pending ? `The triage is still running: its ${source.preset} watchpoints show here when it is done.`
      : 'No watchpoint yet. Add one above, or a preset.')];
}

function sourceLine(source, on) {
  const triage = source.from === 'triage';
  return h('div', { class: 'card-body wp-source small', 'data-source': source.from },
    h('span', { class: `chip ${triage ? 'muted-chip' : 'fwd'}` }, sourceText(source)),
    triage ? h('span', { class: 'muted' }, ' the triage page\'s findings, watched from the start. Remove, add or change one (✎) to make the list your own.')
      : [h('span', { class: 'muted' }, ' kept for this dump across restarts. '),
        h('button', { class: 'btn btn-small btn-ghost wp-defaults', title: 'Use the triage\'s recommended watchpoints again: this list is dropped',
          onclick: () => on.backToDefaults() }, 'Back to the triage\'s')]);
}

function watchpointRow(w, cov, on) {
  const badge = coverageBadge(cov);
  const text = coverageText(cov);
  return h('li', { 'data-coverage': cov ? cov.status : null },
    h('div', { class: 'wp-text mono' }, w.text, badge ? h('span', { class: `chip ${badge.cls} wp-badge`, title: text }, badge.text) : null),
    h('div', { class: 'wp-help muted' }, w.help),
    text ? h('div', { class: `wp-cov small ${cov.status === 'complete' ? 'muted' : 'wp-cov-gap'}` }, text) : null,
    h('span', { class: 'wp-actions' },
      h('button', { class: 'icon-x wp-edit', title: 'Change its thresholds or filters', 'aria-label': `change ${w.text}`, onclick: () => on.edit(w) }, '✎'),
      h('button', { class: 'icon-x', title: 'Remove', 'aria-label': `remove ${w.text}`, onclick: () => on.remove(w) }, '×')));
}

/** One watchpoint's hits as a foldable table (a row opens its node in the graph at its iteration). */
export function hitGroup({ group, hits }, open, onToggle) {
  return h('details', { class: 'hit-group', open, ontoggle: (e) => onToggle(group.id, e.target.open) },
    h('summary', {}, h('span', { class: 'chip hit' }, hits.length), h('span', { class: 'mono hg-text' }, group.text)),
    h('table', { class: 'tbl hit-table' },
      h('thead', {}, h('tr', {}, h('th', { class: 'num' }, 'iter'), h('th', {}, 'tensor'), h('th', {}, 'io'), h('th', {}, 'what fired'), h('th', {}, 'source'))),
      h('tbody', {}, hits.slice(0, 300).map(hitRow))));
}

function hitRow(x) {
  return h('tr', { class: 'clickable', title: `${x.node}\nclick: show in the graph at iteration ${x.iteration}`,
    onclick: () => set({ view: 'graph', rank: x.rank, graph: x.graph, iteration: x.iteration, node: x.node, io: x.io, slot: x.slot }) },
  h('td', { class: 'num' }, x.iteration),
  h('td', {}, kindDot(x.kind), h('span', { class: 'mono' }, tensorLabel({ ...x, io: null }))),
  h('td', { class: 'mono' }, `${x.io}:${x.slot}`),
  h('td', { class: 'small' }, hitText(x)),
  h('td', { class: 'mono small muted' }, x.source ? basename(x.source) : '—'));
}
