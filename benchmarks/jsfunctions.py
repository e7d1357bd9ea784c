"""The functions of a JavaScript file and their line spans, without a JavaScript parser (no npm here).

Strings, template literals, comments and regex literals are blanked first (newlines kept), so the
braces left are code; a function starts at ``function``, at an arrow ``=> {`` or at a method head
``name(...) {``, and ends at the brace matching its body's opening one.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_HEAD = re.compile(
    r"\bfunction\b\s*\*?\s*(?P<fn>[\w$]*)\s*\([^()]*\)\s*\{"                     # function f(a) {
    r"|=>\s*\{"                                                                   # (a) => {
    r"|^[ \t]*(?:static\s+|async\s+|get\s+|set\s+)*(?P<method>[\w$]+)\s*\([^()]*\)\s*\{",  # m(a) {
    re.M)
# What stands before an arrow's '=>': its parameters, and the name it is assigned to, if any.
_ARROW_HEAD = re.compile(r"(?:(?P<name>[\w$]+)\s*[=:]\s*)?(?:async\s*)?(?:\([^()]*\)|[\w$]+)\s*$")
_NOT_METHODS = {"if", "for", "while", "switch", "catch", "with", "function", "return"}
# After these characters (or at the start) a '/' begins a regex literal, else it divides.
_REGEX_AFTER = set("(,=:[!&|?{};+-*%<>~^") | {""}


@dataclass(frozen=True)
class JsFunction:
    """A function's name (``<arrow>`` when anonymous), first and last line, and its length in lines."""

    name: str
    start: int
    end: int

    @property
    def lines(self) -> int:
        """Lines from its head to its closing brace."""
        return self.end - self.start + 1


def code_only(text: str) -> str:
    """``text`` with strings, templates, comments and regex literals blanked (their newlines kept)."""
    out, i, n = [], 0, len(text)
    braces: list[int] = []          # depth of '{' inside each open template's ${...}
    while i < n:
        c = text[i]
        if c == "}" and braces and braces[-1] == 0:        # back into a template literal
            braces.pop()
            j = _template_end(text, i + 1, braces)
            out.append(_blank(text[i:j]))
            i = j
            continue
        if c in "{}" and braces:
            braces[-1] += 1 if c == "{" else -1
        j = _literal_end(text, i, _last_code_char(out), braces)
        if j is None:
            out.append(c)
            i += 1
        else:
            out.append(_blank(text[i:j]))
            i = j
    return "".join(out)


def _last_code_char(out: list[str]) -> str:
    for piece in reversed(out):
        stripped = piece.strip()
        if stripped:
            return stripped[-1]
    return ""


def _literal_end(text: str, i: int, before: str, braces: list[int]) -> int | None:
    """Where the literal or comment starting at ``i`` ends, None if none starts there."""
    c, nxt = text[i], text[i + 1:i + 2]
    if c == "/" and nxt == "/":
        end = text.find("\n", i)
        return len(text) if end < 0 else end
    if c == "/" and nxt == "*":
        end = text.find("*/", i + 2)
        return len(text) if end < 0 else end + 2
    if c in "'\"":
        return _quoted_end(text, i + 1, c)
    if c == "`":
        return _template_end(text, i + 1, braces)
    if c == "/" and (before in _REGEX_AFTER or before.isspace()):
        return _regex_end(text, i + 1)
    return None


def _quoted_end(text: str, i: int, quote: str) -> int:
    while i < len(text) and text[i] not in (quote, "\n"):
        i += 2 if text[i] == "\\" else 1
    return i + 1


def _template_end(text: str, i: int, braces: list[int]) -> int:
    """The end of a template literal's text from ``i``: past its closing backtick, or at a ``${``."""
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == "`":
            return i + 1
        elif text.startswith("${", i):
            braces.append(0)
            return i + 2
        else:
            i += 1
    return i


def _regex_end(text: str, i: int) -> int:
    in_class = False
    while i < len(text) and text[i] != "\n":
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            in_class = True
        elif c == "]":
            in_class = False
        elif c == "/" and not in_class:
            i += 1
            while i < len(text) and text[i].isalpha():
                i += 1
            return i
        i += 1
    return i


def _blank(s: str) -> str:
    return "".join("\n" if ch == "\n" else " " for ch in s)


def functions(text: str) -> list[JsFunction]:
    """Every function of a JavaScript source with its span, nested ones included, in source order."""
    code = code_only(text)
    found = []
    for m in _HEAD.finditer(code):
        name, head_at = m.group("fn") or m.group("method"), m.start() + len(m.group()) - len(m.group().lstrip())
        if m.group("method") in _NOT_METHODS:
            continue
        if m.group().startswith("="):
            before = _ARROW_HEAD.search(code, max(0, m.start() - 400), m.start())
            name = (before.group("name") if before else None) or "<arrow>"
            head_at = before.start() if before else m.start()
        close_at = _matching_brace(code, m.end() - 1)
        found.append(JsFunction(name or "<anonymous>", code.count("\n", 0, head_at) + 1,
                                code.count("\n", 0, close_at) + 1))
    return sorted(found, key=lambda f: f.start)


def _matching_brace(code: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(code)):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(code) - 1
