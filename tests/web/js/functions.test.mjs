// No function of the page is longer than 80 lines without a reason written beside it
// (a `// long: why` comment on the line above it), and the measurer itself counts right.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { STATIC_JS, functions, jsFiles } from './fnlength.mjs';

const MAX_LINES = 80;

test('the measurer finds functions, arrows and methods, and skips blocks, strings and regexes', () => {
  const src = [
    'function a(x) {',             // 1
    '  if (x) { return `}${x}{`; }',
    '  const re = /[{]/g;',
    '  return { b() { return "}"; } };',
    '}',                           // 5
    'const c = (y) => {',
    '  for (const z of y) { }',
    '};',                          // 8
  ].join('\n');
  const fs = functions(src).map((f) => [f.name, f.start, f.end]);
  assert.deepEqual(fs.sort(), [['a', 1, 5], ['b', 4, 4], ['c', 6, 8]].sort());
});

test(`no function in web/static/js is over ${MAX_LINES} lines without a reason`, () => {
  const long = [];
  for (const file of jsFiles(STATIC_JS)) {
    const lines = readFileSync(file, 'utf8').split('\n');
    for (const f of functions(lines.join('\n'))) {
      const reason = /\/\/ long: \S/.test(lines[f.start - 2] || '');
      if (f.lines > MAX_LINES && !reason) long.push(`${relative(STATIC_JS, file)}:${f.start} ${f.name} (${f.lines} lines)`);
    }
  }
  assert.deepEqual(long, []);
});
