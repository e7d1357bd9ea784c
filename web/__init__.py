"""The tdbg web UI: a Flask app that only asks the `debugger` library.

``create_app(path)`` serves the single page from ``static/`` and the JSON API of :mod:`.api`
under ``/api/``. ``path`` is a dump root, one rank of it, or a folder holding several dumps (the
page lets the user choose one). Nothing here opens dump files: every question goes to
:mod:`debugger` or :mod:`debugger.query`.
"""
from __future__ import annotations

import json
import math
import os
from types import MappingProxyType
from typing import Any, Mapping

from flask import Flask, Response, jsonify, request, send_from_directory
from flask.json.provider import DefaultJSONProvider
from werkzeug.exceptions import HTTPException

from debugger import DumpError, QueryError, query
from debugger.errors import InvalidQueryError

from .routes import BLUEPRINTS
from .live import live_bp
from .trends import trends_bp
from .guard import MAX_BODY, install as install_guard
from .session import Workspace

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")

#: Settings of an app; ``create_app(path, config)`` overrides any of them.
DEFAULT_CONFIG: Mapping[str, Any] = MappingProxyType({
    "FOLD": query.FOLD,       # same-type siblings folded into one graph node from this many on
    "VALUE_CAP": 100_000,     # tensor values per response at most
    "PAGE_SIZE": query.DEFAULT_PAGE,   # items of a list page when the request gives no end
    "STATS_CACHE": True,      # keep tensor statistics in the HDF5 cache (debugger.stats.cache)
    "SCHEDULER": None,        # a Dask scheduler address or local[:N]: background scans run there (tdbg serve --scheduler)
    "CACHE_DIR": None,        # where that cache lives (None: $TDBG_CACHE_DIR or ~/.cache/tdbg)
    "HOST": "127.0.0.1",      # app.run() binds loopback unless told otherwise
    "PORT": 5005,
    "ALLOWED_HOSTS": (),      # host names answered besides the bound one (`tdbg serve --allow-host`)
    "SOURCE_ROOTS": (),       # folders (or OLD=NEW prefixes) source may be shown from (`--source-root`)
    "MAX_CONTENT_LENGTH": MAX_BODY,   # bytes of a request body at most (413 beyond)
})


class JSONProvider(DefaultJSONProvider):
    """Keeps key order; NaN and +-Inf (not JSON) become the strings "NaN", "Inf", "-Inf"."""

    sort_keys = False
    compact = True

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        kwargs.setdefault("default", self.default)
        kwargs.setdefault("ensure_ascii", self.ensure_ascii)
        kwargs.setdefault("sort_keys", self.sort_keys)
        kwargs.setdefault("separators", (",", ":"))
        try:
            return json.dumps(obj, allow_nan=False, **kwargs)
        except ValueError:
            return json.dumps(_finite(obj), allow_nan=False, **kwargs)

    @staticmethod
    def default(o: Any) -> Any:
        if hasattr(o, "to_dict"):
            return o.to_dict()
        if hasattr(o, "item") and hasattr(o, "dtype"):   # numpy scalars
            return o.item()
        if isinstance(o, (set, frozenset)):
            return sorted(o)
        return DefaultJSONProvider.default(o)


def _finite(o: Any) -> Any:
    if isinstance(o, float) and not math.isfinite(o):
        return "NaN" if o != o else ("Inf" if o > 0 else "-Inf")
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


class TdbgFlask(Flask):
    """Flask with tdbg's JSON provider and a loopback default for :meth:`run`."""

    json_provider_class = JSONProvider

    def run(self, host: str | None = None, port: int | None = None, debug: bool | None = None,
            load_dotenv: bool = True, **options: Any) -> None:
        # The host check answers the name the server is bound for: remember it.
        self.config["HOST"] = host or self.config["HOST"]
        super().run(self.config["HOST"], port or self.config["PORT"], debug, load_dotenv, **options)


def create_app(dump_path: str, config: dict | None = None) -> Flask:
    """The app serving the dump(s) at ``dump_path``; ``config`` overrides :data:`DEFAULT_CONFIG`."""
    app = TdbgFlask(__name__, static_folder=None)
    app.config.update(DEFAULT_CONFIG)
    app.config.update(config or {})
    app.extensions["tdbg"] = Workspace(dump_path, cache_dir=app.config["CACHE_DIR"],
                                       use_cache=app.config["STATS_CACHE"],
                                       source_roots=list(app.config["SOURCE_ROOTS"] or ()),
                                       scheduler=app.config.get("SCHEDULER"))
    install_guard(app)

    for bp in BLUEPRINTS:
        app.register_blueprint(bp)
    app.register_blueprint(trends_bp)
    app.register_blueprint(live_bp)

    @app.get("/")
    def index() -> Response:
        resp = send_from_directory(STATIC, "index.html")
        resp.headers["Cache-Control"] = "no-cache"
        return resp

    @app.get("/static/<path:name>")
    def static_file(name: str) -> Response:
        resp = send_from_directory(STATIC, name)
        resp.headers["Cache-Control"] = "no-cache"
        return resp

    @app.errorhandler(DumpError)
    def dump_error(exc: DumpError) -> tuple[Response, int]:
        # A name that matches nothing is a 404; a malformed argument or an unusable dump a 400.
        status = 404 if isinstance(exc, QueryError) and not isinstance(exc, InvalidQueryError) else 400
        shown = app.extensions["tdbg"].shown(str(exc))
        return jsonify({"error": shown, "type": type(exc).__name__, "status": status}), status

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response | HTTPException:
        if not request.path.startswith("/api/"):
            return exc
        resp = jsonify({"error": exc.description, "type": type(exc).__name__, "status": exc.code})
        resp.status_code = exc.code or 500
        return resp

    @app.errorhandler(Exception)
    def internal_error(exc: Exception) -> tuple[Response, int]:
        # A bug must not hand a traceback (paths, values) to the client: log it, answer plain JSON.
        if app.testing or app.debug:
            raise exc
        app.logger.exception("unhandled error on %s", request.path)
        return jsonify({"error": "internal error (see the server's log)", "type": "InternalServerError",
                        "status": 500}), 500

    return app


__all__ = ["DEFAULT_CONFIG", "create_app"]
