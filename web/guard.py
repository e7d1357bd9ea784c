"""What every request must pass before a route sees it: the server's security model.

- **Host.** Only the names the server was bound for are answered (plus ``localhost``,
  ``127.0.0.1`` and ``[::1]`` when bound to loopback, and each ``ALLOWED_HOSTS`` entry), on the
  port it listens on: a page from ``evil.example`` that rebinds its DNS name to 127.0.0.1 gets a
  400, not the dump.
- **State changes.** POST/PUT/PATCH/DELETE need no ``Origin`` or the server's own, are refused
  when the browser says ``Sec-Fetch-Site: cross-site``, and a body must be ``application/json``
  (which no HTML form can send): a foreign page cannot add or delete watchpoints.
- **Bounded bodies.** At most ``MAX_CONTENT_LENGTH`` bytes (413), JSON nested at most
  :data:`MAX_JSON_DEPTH` deep (checked without recursion, before ``json.loads`` recurses), no
  ``NaN``/``Infinity``, an object at the top (400 naming ``body``).

Every refusal is the API's JSON error ``{"error", "type", "status"}``.
"""
from __future__ import annotations

import ipaddress
import json
import math
import re
import socket
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, Response, current_app, g, jsonify, request

MAX_BODY = 1 << 20          # bytes of a request body at most (a watchpoint is a few hundred)
MAX_JSON_DEPTH = 32         # nesting of a JSON body at most (a watchpoint needs 2)
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"", "0.0.0.0", "::"})
_STRING_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKET_RE = re.compile(r"[\[\]{}]")


class Refused(Exception):
    """A request the guard refuses: status and message."""

    def __init__(self, status: int, message: str, kind: str = "BadRequest") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind


def _refusal(exc: Refused) -> Response:
    resp = jsonify({"error": exc.message, "type": exc.kind, "status": exc.status})
    resp.status_code = exc.status
    return resp


# -- hosts --------------------------------------------------------------------------------------------
def split_host(value: str) -> tuple[str, int | None]:
    """``name[:port]`` or ``[v6]:port`` -> (lower-case name, port or None); ValueError when malformed."""
    v = value.strip().lower()
    if not v or len(v) > 300 or any(c.isspace() or c in "/@\\?#" for c in v):
        raise ValueError(value)
    if v.startswith("["):
        end = v.find("]")
        if end < 0:
            raise ValueError(value)
        name, rest = v[1:end], v[end + 1:]
        if rest and not rest.startswith(":"):
            raise ValueError(value)
        port_text = rest[1:] if rest else None
    else:
        name, sep, port_text = v.rpartition(":") if ":" in v else (v, "", "")
        if ":" in name:
            raise ValueError(value)    # a bare IPv6 address must be bracketed
        port_text = port_text if sep else None
    if port_text is not None and not (port_text.isascii() and port_text.isdigit() and len(port_text) <= 5):
        raise ValueError(value)
    return name.rstrip("."), int(port_text) if port_text is not None else None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _is_loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def allowed_hosts(app: Flask, server_name: str) -> tuple[set[str], bool]:
    """(host names answered, whether any IP literal is) for a server bound to ``server_name``."""
    bound = {str(app.config.get("HOST") or "").strip("[]").lower(), server_name.strip("[]").lower()}
    names = {h.strip("[]").lower().rstrip(".") for h in app.config.get("ALLOWED_HOSTS") or ()}
    names |= {b for b in bound if b not in WILDCARDS}
    any_ip = False
    if any(_is_loopback(b) for b in bound):
        names |= LOOPBACK_NAMES
    if bound & WILDCARDS:
        # Bound to every interface: the machine's own name and any address literal (an address
        # cannot be rebound by DNS); other names only through ALLOWED_HOSTS (--allow-host).
        names |= LOOPBACK_NAMES | {socket.gethostname().lower()}
        any_ip = True
    return names, any_ip


def _check_host(value: str | None, what: str) -> None:
    environ = request.environ
    if not value:
        raise Refused(400, f"missing {what} header")
    try:
        name, port = split_host(value)
    except ValueError:
        raise Refused(400, f"bad {what} header {value[:100]!r}") from None
    scheme = request.scheme
    want_port = int(environ.get("SERVER_PORT") or (443 if scheme == "https" else 80))
    names, any_ip = allowed_hosts(current_app, str(environ.get("SERVER_NAME") or ""))
    if port is None:
        port = 443 if scheme == "https" else 80
    if (name not in names and not (any_ip and _is_ip(name))) or port != want_port:
        raise Refused(400, f"{what} {value[:100]!r} is not a name this server answers to "
                      f"(start it with --allow-host NAME to add one)", "DisallowedHost")


# -- origins and bodies -------------------------------------------------------------------------------
def _check_origin() -> None:
    origin = request.headers.get("Origin")
    if request.headers.get("Sec-Fetch-Site", "").lower() == "cross-site":
        raise Refused(403, "cross-site request refused: state changes come only from this server's page",
                      "Forbidden")
    if origin is None:
        return
    parts = urlsplit(origin) if origin != "null" else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
        raise Refused(403, f"Origin {origin[:100]!r} may not change state on this server", "Forbidden")
    if parts.scheme != request.scheme:
        raise Refused(403, f"Origin {origin[:100]!r} may not change state on this server", "Forbidden")
    try:
        _check_host(parts.netloc, "Origin")
    except Refused:
        raise Refused(403, f"Origin {origin[:100]!r} may not change state on this server", "Forbidden") from None


def json_depth(text: str) -> int:
    """Deepest ``[``/``{`` nesting of JSON text, counted without recursion (strings skipped)."""
    depth = deepest = 0
    for m in _BRACKET_RE.finditer(_STRING_RE.sub("", text)):
        if m.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"number {text[:40]} is out of range")
    return v


def parse_body(data: bytes, max_depth: int = MAX_JSON_DEPTH) -> dict[str, Any]:
    """The JSON object of a request body; :class:`Refused` (400 naming ``body``) otherwise."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(400, "bad body: not UTF-8") from None
    depth = json_depth(text)
    if depth > max_depth:
        raise Refused(400, f"bad body: JSON nested {depth} deep (at most {max_depth})")
    try:
        obj = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except ValueError as exc:
        raise Refused(400, f"bad body: {str(exc)[:200]}") from None
    except RecursionError:   # pragma: no cover - the depth check comes first
        raise Refused(400, "bad body: nested too deep") from None
    if not isinstance(obj, dict):
        raise Refused(400, f"bad body: expected a JSON object, got {type(obj).__name__}")
    return obj


def body() -> dict[str, Any] | None:
    """The request's parsed JSON body (None when it had none)."""
    return g.get("tdbg_body")


def _check_request() -> Response | None:
    try:
        _check_host(request.environ.get("HTTP_HOST"), "Host")
        limit = current_app.config.get("MAX_CONTENT_LENGTH") or MAX_BODY
        if (request.content_length or 0) > limit:
            raise Refused(413, f"body of {request.content_length} bytes: at most {limit}", "RequestEntityTooLarge")
        if request.method not in UNSAFE_METHODS:
            return None
        _check_origin()
        # werkzeug stops a chunked body (no Content-Length) at MAX_CONTENT_LENGTH without an error:
        # a body that fills the limit may have been cut, so it is refused rather than half parsed.
        data = request.get_data(cache=False)
        if len(data) > limit or (request.content_length is None and len(data) >= limit):
            raise Refused(413, f"body over {limit} bytes", "RequestEntityTooLarge")
        if data.strip():
            ctype = (request.mimetype or "").lower()
            if ctype != "application/json":
                raise Refused(415, f"bad Content-Type {request.content_type!r}: expected application/json",
                              "UnsupportedMediaType")
            g.tdbg_body = parse_body(data)
        else:
            g.tdbg_body = None
    except Refused as exc:
        return _refusal(exc)
    return None


def _headers(resp: Response) -> Response:
    # The page loads nothing from elsewhere and may not be framed (clickjacking) or sniffed.
    resp.headers.setdefault("X-Content-Type-Options", "nosniff")
    resp.headers.setdefault("X-Frame-Options", "DENY")
    resp.headers.setdefault("Referrer-Policy", "no-referrer")
    resp.headers.setdefault("Cross-Origin-Resource-Policy", "same-origin")
    resp.headers.setdefault("Content-Security-Policy",
                            "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; "
                            "worker-src 'self' blob:; object-src 'none'; base-uri 'none'; form-action 'none'; "
                            "frame-ancestors 'none'")
    return resp


def install(app: Flask) -> None:
    """Check every request of ``app`` (host, origin, size, body) and harden every response."""
    app.config.setdefault("MAX_CONTENT_LENGTH", MAX_BODY)
    if not app.config.get("MAX_CONTENT_LENGTH"):
        app.config["MAX_CONTENT_LENGTH"] = MAX_BODY
    app.before_request(_check_request)
    app.after_request(_headers)
