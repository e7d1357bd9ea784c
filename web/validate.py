"""Checks of request values from outside (the web API's JSON bodies and query strings).

Each raises :class:`~debugger.errors.InvalidQueryError` naming the field, so a malformed request is
a 400 that says what to fix and never reaches code that would fail on a wrong type later (a
watchpoint with ``node: 5`` used to be stored and then break every scan).
"""
from __future__ import annotations

import math
import re
from typing import Any, Mapping

from debugger.errors import InvalidQueryError

MAX_TEXT = 1000          # characters of a name, glob, scope or spec at most
MAX_PARAMS = 64          # parameters of one watchpoint at most
INT_LIMIT = 1 << 62      # integers beyond this are nobody's rank or iteration
_INT_RE = re.compile(r"[+-]?[0-9]{1,19}")
WATCHPOINT_KEYS = ("name", "params", "node", "scope")


def text_field(obj: Mapping[str, Any], name: str, required: bool = False) -> str | None:
    """A string field of a JSON object (None when absent or null and not required)."""
    v = obj.get(name)
    if v is None:
        if required:
            raise InvalidQueryError(f"missing field {name!r}")
        return None
    if not isinstance(v, str):
        raise InvalidQueryError(f"bad {name}: expected a string, got {type(v).__name__}")
    if len(v) > MAX_TEXT or "\0" in v:
        raise InvalidQueryError(f"bad {name}: at most {MAX_TEXT} characters, no NUL")
    return v


def int_field(obj: Mapping[str, Any], name: str, default: int | None = None) -> int | None:
    """An integer field of a JSON object (booleans, floats and strings are refused)."""
    v = obj.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise InvalidQueryError(f"bad {name}: expected an integer, got {json_type(v)}")
    if not -INT_LIMIT <= v <= INT_LIMIT:
        raise InvalidQueryError(f"bad {name}: {v} is out of range")
    return v


def int_text(name: str, raw: str) -> int:
    """An integer query parameter: ASCII digits with an optional sign, at most 19 of them."""
    s = raw.strip()
    if not _INT_RE.fullmatch(s):
        raise InvalidQueryError(f"bad {name} {raw[:40]!r}: expected an integer")
    return int(s)


def json_type(v: Any) -> str:
    """The JSON name of a value's type."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def watchpoint_request(obj: Any) -> dict[str, Any]:
    """``{"preset"}``, ``{"spec"}`` or ``{"name", "params", "node", "scope"}``, checked field by field."""
    if not isinstance(obj, dict):
        raise InvalidQueryError(f"bad body: expected a JSON object, got {json_type(obj)}")
    if "preset" in obj:
        return {"preset": text_field(obj, "preset", True)}
    if "spec" in obj:
        return {"spec": text_field(obj, "spec", True)}
    unknown = sorted(k for k in obj if k not in WATCHPOINT_KEYS)
    if unknown:
        raise InvalidQueryError(f"bad field {unknown[0][:40]!r}: a watchpoint has {', '.join(WATCHPOINT_KEYS)} "
                                "(or spec, or preset)")
    out: dict[str, Any] = {"name": text_field(obj, "name", True)}
    params = obj.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise InvalidQueryError(f"bad params: expected an object of name: number, got {json_type(params)}")
    if len(params) > MAX_PARAMS:
        raise InvalidQueryError(f"bad params: {len(params)} of them (at most {MAX_PARAMS})")
    clean: dict[str, Any] = {}
    for k, v in params.items():
        if len(k) > 100:
            raise InvalidQueryError("bad params: a parameter name over 100 characters")
        # The web form sends its fields as strings; the registry converts and range-checks them.
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise InvalidQueryError(f"bad params.{k}: expected a number, got {json_type(v)}")
        if isinstance(v, str) and len(v) > 100:
            raise InvalidQueryError(f"bad params.{k}: over 100 characters")
        if isinstance(v, float) and not math.isfinite(v):
            raise InvalidQueryError(f"bad params.{k}: expected a finite number")
        clean[k] = v
    out["params"] = clean
    for key in ("node", "scope"):
        v = text_field(obj, key)
        if v:   # "" means no filter, as the form sends it
            out[key] = v
    return out
