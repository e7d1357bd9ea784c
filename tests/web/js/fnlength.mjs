// Measures every function of a JavaScript source: a small tokenizer (strings, template literals,
// comments and regular expressions skipped) that matches braces. A `{` opens a function body when
// it follows `=>` or a `)` whose `(` is not the head of if/for/while/switch/catch.
// Run as a script (`node tests/web/js/fnlength.mjs [min]`) it prints the functions of
// web/static/js longer than min lines (default 60).
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const REGEX_AFTER = new Set(['(', ',', '=', ':', '[', '!', '&', '|', '?', '{', '}', ';', '+', '-', '*', '%', '<', '>', '~', '^', 'return', 'typeof', '=>', '']);
const NOT_FUNCTION = new Set(['if', 'for', 'while', 'switch', 'catch', 'with']);

/** Tokens of a source: {t: text, line} for punctuation and words; strings, comments and regexes dropped. */
export function tokens(src) {
  const out = [];
  let i = 0, line = 1;
  const templateDepth = [];   // brace depth at which each open `${` returns to its template
  let depth = 0;
  const last = () => (out.length ? out[out.length - 1].t : '');
  const skipString = (q) => {
    i++;
    while (i < src.length && src[i] !== q) { if (src[i] === '\\') i++; else if (src[i] === '\n') line++; i++; }
    i++;
  };
  const skipTemplate = () => {  // from after ` or after a closing } of ${...}; stops after ` or ${
    while (i < src.length) {
      const c = src[i];
      if (c === '\\') { i += 2; continue; }
      if (c === '\n') line++;
      if (c === '`') { i++; return; }
      if (c === '$' && src[i + 1] === '{') { i += 2; templateDepth.push(depth); depth++; return; }
      i++;
    }
  };
  while (i < src.length) {
    const c = src[i];
    if (c === '\n') { line++; i++; continue; }
    if (/\s/.test(c)) { i++; continue; }
    if (c === '/' && src[i + 1] === '/') { while (i < src.length && src[i] !== '\n') i++; continue; }
    if (c === '/' && src[i + 1] === '*') {
      const end = src.indexOf('*/', i + 2);
      for (let k = i; k < end; k++) if (src[k] === '\n') line++;
      i = end + 2; continue;
    }
    if (c === '"' || c === "'") { skipString(c); out.push({ t: 'str', line }); continue; }
    if (c === '`') { i++; skipTemplate(); out.push({ t: 'str', line }); continue; }
    if (c === '/' && REGEX_AFTER.has(last())) {
      i++;
      let cls = false;
      while (i < src.length && (cls || src[i] !== '/')) {
        if (src[i] === '\\') i++; else if (src[i] === '[') cls = true; else if (src[i] === ']') cls = false;
        i++;
      }
      i++;
      while (/[a-z]/.test(src[i] || '')) i++;
      out.push({ t: 're', line }); continue;
    }
    if (c === '{') { depth++; out.push({ t: '{', line }); i++; continue; }
    if (c === '}') {
      depth--;
      if (templateDepth.length && templateDepth[templateDepth.length - 1] === depth) {
        templateDepth.pop(); i++; skipTemplate(); out.push({ t: 'str', line }); continue;
      }
      out.push({ t: '}', line }); i++; continue;
    }
    if (c === '=' && src[i + 1] === '>') { out.push({ t: '=>', line }); i += 2; continue; }
    const word = /^[A-Za-z_$][\w$]*/.exec(src.slice(i, i + 80));
    if (word) { out.push({ t: word[0], line }); i += word[0].length; continue; }
    const num = /^\d[\d.eE_xXa-fA-F]*/.exec(src.slice(i, i + 40));
    if (num) { out.push({ t: 'num', line }); i += num[0].length; continue; }
    out.push({ t: c, line }); i++;
  }
  return out;
}

function nameBefore(toks, k) {
  // k: index of '(' of a parameter list (or of `=>` for a bare parameter)
  let j = k - 1;
  if (toks[j] && /^[A-Za-z_$]/.test(toks[j].t)) {
    if (toks[j].t === 'function' || toks[j].t === 'async') return '(anonymous)';
    return toks[j].t;
  }
  // const name = (…) => / name: (…) =>
  while (j >= 0 && (toks[j].t === 'async')) j--;
  if (toks[j] && (toks[j].t === '=' || toks[j].t === ':') && toks[j - 1]) return toks[j - 1].t;
  return '(arrow)';
}

/** Every function of a source: {name, start, end, lines} (lines counted start to end inclusive). */
export function functions(src) {
  const toks = tokens(src);
  const open = [];
  const out = [];
  for (let k = 0; k < toks.length; k++) {
    const t = toks[k].t;
    if (t === '{') {
      const prev = toks[k - 1] ? toks[k - 1].t : '';
      let fn = null;
      if (prev === '=>') {
        let j = k - 2;
        if (toks[j] && toks[j].t === ')') {
          let d = 0;
          for (; j >= 0; j--) { if (toks[j].t === ')') d++; else if (toks[j].t === '(' && --d === 0) break; }
        }
        fn = nameBefore(toks, j);
      } else if (prev === ')') {
        let j = k - 1, d = 0;
        for (; j >= 0; j--) { if (toks[j].t === ')') d++; else if (toks[j].t === '(' && --d === 0) break; }
        const head = toks[j - 1] ? toks[j - 1].t : '';
        if (!NOT_FUNCTION.has(head)) fn = nameBefore(toks, j);
      }
      open.push(fn === null ? null : { name: fn, start: toks[k].line });
    } else if (t === '}') {
      const f = open.pop();
      if (f) out.push({ ...f, end: toks[k].line, lines: toks[k].line - f.start + 1 });
    }
  }
  return out;
}

/** The .js files under a folder, recursively. */
export function jsFiles(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...jsFiles(p));
    else if (name.endsWith('.js')) out.push(p);
  }
  return out;
}

export const STATIC_JS = fileURLToPath(new URL('../../../web/static/js', import.meta.url));

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const min = Number(process.argv[2] || 60);
  for (const file of jsFiles(STATIC_JS)) {
    for (const f of functions(readFileSync(file, 'utf8'))) {
      if (f.lines > min) console.log(`${String(f.lines).padStart(4)}  ${relative(STATIC_JS, file)}:${f.start}  ${f.name}`);
    }
  }
}
