// The code view's pure logic: FILE:LINE parsing, Python token classes, what a source line's
// marks say, and how the nodes of a line group. No DOM: tested by tests/web/js/code-state.test.mjs.

const PY_KEYWORDS = new Set(('False None True and as assert async await break class continue def del elif else except finally for from '
  + 'global if import in is lambda nonlocal not or pass raise return try while with yield self').split(' '));

/** {file, line} of FILE:LINE, or null. */
export function parseLoc(loc) {
  if (!loc) return null;
  const i = loc.lastIndexOf(':');
  if (i < 0) return null;
  const line = parseInt(loc.slice(i + 1), 10);
  return Number.isFinite(line) ? { file: loc.slice(0, i), line } : null;
}

/** A line of Python as [class, text] pieces (class '' for plain text): comments, strings,
 * numbers and keywords get py-c, py-s, py-n and py-k. */
export function pyTokens(line) {
  const out = [];
  const re = /(#.*$)|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b)|([A-Za-z_][A-Za-z0-9_]*)|(\s+)|(.)/g;
  let m;
  while ((m = re.exec(line))) {
    if (m[1]) out.push(['py-c', m[1]]);
    else if (m[2]) out.push(['py-s', m[2]]);
    else if (m[3]) out.push(['py-n', m[3]]);
    else if (m[4]) out.push([PY_KEYWORDS.has(m[4]) ? 'py-k' : '', m[4]]);
    else out.push(['', m[0]]);
  }
  return out;
}

/** CSS classes of a source line: has nodes, defines a layer, selected. */
export function lineClass(n, mark, selLine) {
  return `src-line${mark ? ' has-nodes' : ''}${mark && mark.layer ? ' defines' : ''}${n === selLine ? ' selected' : ''}`;
}

/** The hover text of a marked line. */
export function lineTitle(mark) {
  if (!mark) return '';
  return mark.layer ? `defines the layer ${mark.layer} (${mark.definition} nodes): click to list them`
    : `${mark.forward} forward, ${mark.backward} backward node(s): click to list them`;
}

/** Whether a FILE of FILE:LINE (a path, or its last components: train.py, src/train.py) names ``path``. */
export function namesFile(given, path) {
  return given === path || path.endsWith('/' + given.replace(/^\.?\//, ''));
}

/** The line of the chosen location when it is in this file, else null. */
export function selectedLine(lineState, file) {
  const sel = parseLoc(lineState);
  return sel && namesFile(sel.file, file) ? sel.line : null;
}

/** The dump's file that a FILE:LINE names, or null. */
export function fileNamedBy(files, lineState) {
  const sel = parseLoc(lineState);
  const named = sel && files.find((f) => namesFile(sel.file, f.file));
  return named ? named.file : null;
}

/** The file to open for an address that names a line but no file: the dump's file it names, else the default. */
export function fileForLine(files, lineState) {
  return fileNamedBy(files, lineState) || defaultFile(files);
}

/** The file a FILE:LINE answer opens: the only match, else the file of its first node. */
export function fileOfAnswer(r) {
  return r.files.length === 1 ? r.files[0] : (r.items[0] ? r.items[0].file : r.files[0]);
}

/** The file opened when none is chosen: the first user file, else the first. */
export function defaultFile(files) {
  return (files.find((f) => !f.is_framework) || files[0]).file;
}

/** The nodes of a line by direction, and whether they span several graphs. */
export function lineGroups(items) {
  return {
    forward: items.filter((n) => n.direction === 'forward'),
    backward: items.filter((n) => n.direction === 'backward'),
    definition: items.filter((n) => n.direction === 'definition'),
    // the same line in several graphs (a PyTorch run's first iteration is a graph of its own): say which
    manyGraphs: new Set(items.map((n) => n.graph)).size > 1,
  };
}

/** Source lines to show when the file is not on this machine: the stack's lines, gaps marked. */
export function stackRows(items) {
  const rows = [];
  let prev = null;
  for (const l of items) {
    if (prev !== null && l.line > prev + 1) rows.push({ gap: true });
    rows.push({ line: l.line, code: l.code, mark: l });
    prev = l.line;
  }
  return rows;
}

export function plural(n, word) { return `${n} ${word}${n === 1 ? '' : 's'}`; }

/** What the marked lines of a file are, counted so that the numbers add up to the lines marked: those whose
 * statements created nodes, and those that define a layer (``6 lines created nodes · 11 define layers``). */
export function marksSummary(items) {
  const defs = items.filter((l) => l.layer).length;
  const made = items.length - defs;
  return `${plural(made, 'line')} created nodes${defs ? ` · ${defs} define${defs === 1 ? 's' : ''} a layer` : ''}`;
}

const SEP = /[\\/]/;

/** The folders of ``file``'s path, without the file's name. */
function foldersOf(file) { return file.split(SEP).slice(0, -1); }

/** The folder a file is listed under, with no absolute path: a library file's ``folder`` as the server
 *  gives it (torch/nn/modules/), a user's file's relative to the folder holding all of ``userFiles``,
 *  named by that folder (scripts/train/); the full path stays in the item's title. */
export function shortDir(file, userFiles, folder = null) {
  if (folder !== null && folder !== undefined) return folder;
  const dirs = foldersOf(file);
  const common = commonFolders(userFiles.map(foldersOf));
  const from = common.length > 1 && common.every((d, i) => dirs[i] === d) ? common.length - 1 : Math.max(0, dirs.length - 2);
  const shown = dirs.slice(from).filter(Boolean).map((d) => `${d}/`).join('');
  return from > 0 && common.length <= 1 ? `…/${shown}` : shown;
}

/** The leading folders every list in ``lists`` shares. */
function commonFolders(lists) {
  if (!lists.length) return [];
  let n = lists[0].length;
  for (const l of lists) { let i = 0; while (i < n && l[i] === lists[0][i]) i += 1; n = i; }
  return lists[0].slice(0, n);
}
