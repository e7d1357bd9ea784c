// The code view's DOM: the file list, the source with its marked lines, and the nodes of a line.
import { set, state } from '../../state.js';
import { h, basename, empty, kindDot } from '../../dom.js';
import { lineClass, lineTitle, marksSummary, plural, pyTokens, shortDir, stackRows } from './state.js';

/** The user's files of a file list (not the framework's): what a user file's folder is shown relative to. */
export const userFilesOf = (files) => files.filter((f) => !f.is_framework).map((f) => f.file);

function highlightPython(line) {
  return pyTokens(line).map(([cls, text]) => (cls ? h('span', { class: cls }, text) : text));
}

/** The file list, user files first then framework files, under their group titles. */
export function fileItems(files, framework) {
  if (!files.length) {
    return [empty('No source files', framework ? 'The graphs record no stacks.' : 'No user file created nodes; try “Framework files”.')];
  }
  const out = [];
  let lastFw = null;
  const mine = userFilesOf(files);
  for (const f of files) {
    if (f.is_framework !== lastFw) {
      out.push(h('div', { class: 'file-group' }, f.is_framework ? 'Framework' : 'Your code'));
      lastFw = f.is_framework;
    }
    out.push(h('div', { class: `file-item${state.file === f.file ? ' active' : ''}`, title: f.file, onclick: () => set({ file: f.file }) },
      h('div', { class: 'fi-name' }, f.name, f.exists ? null : h('span', { class: 'chip', title: 'outside the allowed source roots: start tdbg serve with --source-root DIR to show it' }, 'stack only')),
      h('div', { class: 'fi-dir' }, shortDir(f.file, mine, f.folder)),
      h('div', { class: 'fi-meta' }, `${plural(f.lines, 'line')} · ${plural(f.nodes, 'node')}`)));
  }
  return out;
}

/** The source pane's head: file name, folder (the full path in its title), whether it was read from disk. */
export function sourceHead(lines, text, userFiles) {
  return [h('div', { class: 'src-title' }, h('b', {}, basename(lines.file)),
    h('span', { class: 'mono muted ellipsis', title: lines.file }, shortDir(lines.file, userFiles, lines.folder))),
  h('div', { class: 'src-meta' },
    text.exists ? h('span', { class: 'chip', title: 'read from this machine' }, 'file on disk')
      : h('span', { class: 'chip warn source-missing', title: text.reason || '' }, 'code from the stacks'),
    h('span', { class: 'muted marks-summary' }, marksSummary(lines.items))),
  // why the file is not shown: the server's reason (outside the allowed roots: how to allow its folder)
  text.exists ? null : h('div', { class: 'muted small source-hint' }, text.reason || 'the file cannot be read')];
}

/** The source lines, the node-creating ones marked and clickable. */
export function sourceTable(lines, text, selLine) {
  const marks = new Map(lines.items.map((l) => [l.line, l]));
  const row = (n, code, mark) => h('div', { class: lineClass(n, mark, selLine), 'data-line': n,
    onclick: mark ? () => set({ line: `${lines.file}:${n}` }) : undefined, title: lineTitle(mark) },
  h('span', { class: 'ln' }, n),
  h('span', { class: 'gut' }, mark ? h('span', { class: 'gut-mark' },
    mark.layer ? h('span', { class: 'g-d' }, mark.definition) : null,
    mark.forward ? h('span', { class: 'g-f' }, mark.forward) : null, mark.backward ? h('span', { class: 'g-b' }, mark.backward) : null) : null),
  h('code', { class: 'src-code' }, code === null ? '' : highlightPython(code)));
  const table = h('div', { class: 'src-lines' });
  if (text.exists) {
    text.text.replace(/\n$/, '').split('\n').forEach((code, i) => table.append(row(i + 1, code, marks.get(i + 1))));
    if (text.truncated) table.append(h('div', { class: 'src-gap' }, '… file truncated'));
  } else {
    for (const r of stackRows(lines.items)) table.append(r.gap ? h('div', { class: 'src-gap' }, '⋯') : row(r.line, r.code, r.mark));
  }
  return table;
}

/** The nodes of one direction of a line, clickable to inspect. */
export function nodeGroup(title, items, cls, manyGraphs) {
  if (!items.length) return null;
  return h('div', { class: 'ln-group' },
    h('div', { class: 'sub-title' }, h('span', { class: `chip ${cls}` }, title), ` ${items.length} node${items.length > 1 ? 's' : ''}`),
    h('ul', { class: 'node-list' }, items.map((n) => h('li', { class: `${n.node === state.node ? 'active' : ''}`, title: n.node,
      onclick: () => set({ node: n.node, graph: n.graph, io: 'output', slot: 0 }) },
    kindDot(n.kind),
    h('span', { class: 'nl-name' }, n.name), h('span', { class: 'chip op' }, n.op_type),
    h('div', { class: 'nl-scope' }, manyGraphs ? `graph ${n.graph}${n.scope ? ' · ' + n.scope : ''}` : n.scope)))));
}
