"""`tdbg serve`'s production server: the app on waitress (a pure-Python multi-threaded WSGI server),
quiet unless asked for access logs."""
from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from typing import Any, Callable, Iterable, TextIO

from waitress import wasyncore
from waitress.server import create_server

from .guard import MAX_BODY

THREADS = 8     # a slow tensor or a scan ties up one thread; the page keeps the others


class AccessLog:
    """WSGI middleware writing one line per request: method, path, status, milliseconds."""

    def __init__(self, app: Callable[..., Iterable[bytes]], stream: TextIO | None = None) -> None:
        self.app = app
        self.stream = stream or sys.stderr

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        t0 = time.monotonic()
        status: list[str] = ["-"]

        def start(s: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            status[0] = s.split(" ", 1)[0]
            return start_response(s, headers, exc_info) if exc_info else start_response(s, headers)

        try:
            return self.app(environ, start)
        finally:
            path = environ.get("PATH_INFO", "") + ("?" + environ["QUERY_STRING"] if environ.get("QUERY_STRING") else "")
            self.stream.write(f'{environ.get("REMOTE_ADDR", "-")} "{environ.get("REQUEST_METHOD")} {path}" '
                              f"{status[0]} {1000 * (time.monotonic() - t0):.0f} ms\n")
            self.stream.flush()


def make_server(app: Any, host: str, port: int, *, threads: int = THREADS, access_log: bool = False) -> Any:
    """A waitress server for ``app`` bound to ``host:port`` (port 0: any free one), not yet running."""
    # The host check answers the name the server is bound for: remember it.
    app.config["HOST"] = host
    # waitress says "Serving on ..." and warns about queue depth at INFO/WARNING: quiet by default.
    logging.getLogger("waitress").setLevel(logging.INFO if access_log else logging.ERROR)
    wsgi = AccessLog(app) if access_log else app
    # waitress reads a whole body before the app sees it: it must refuse an oversized one itself
    # (413 as soon as the headers announce it), as the guard would.
    return create_server(wsgi, host=host, port=port, threads=threads, ident="tdbg",
                         clear_untrusted_proxy_headers=True, channel_timeout=120,
                         max_request_body_size=app.config.get("MAX_CONTENT_LENGTH") or MAX_BODY)


def stop(srv: Any) -> None:
    """Stop a server running in another thread: finish the requests in flight, then let its loop
    close every socket itself (closing them from here would pull them from under its select)."""
    srv.task_dispatcher.shutdown()
    try:
        srv.trigger.pull_trigger(lambda: wasyncore.close_all(srv._map))
    except OSError:
        # The trigger's pipe is gone (something else in the process closed its write end): the loop
        # still wakes every asyncore_loop_timeout. Emptied, it ends at its next wake, and the sockets
        # are closed once it can no longer be selecting on them. The trigger's own two descriptors
        # are left alone: one of its numbers may be another file's by now.
        dispatchers = list(srv._map.values())
        srv._map.clear()
        srv.trigger._closed = True
        time.sleep(srv.adj.asyncore_loop_timeout + 0.1)
        for d in dispatchers:
            with contextlib.suppress(OSError):
                wasyncore.dispatcher.close(d)


def warm(app: Any) -> None:
    """Open the first dump before listening (its graphs and index: seconds on a 50,000-node graph)
    and the others in the background, so that the first page is answered at once."""
    ws = app.extensions["tdbg"]
    ids = list(ws.ids)
    ws.warm(ids[0])
    if len(ids) > 1:
        threading.Thread(target=lambda: [ws.warm(i) for i in ids[1:]], daemon=True, name="warm").start()


def listen(app: Any, host: str, port: int, *, threads: int = THREADS, access_log: bool = False) -> Any:
    """``app``'s server bound to ``host:port`` (OSError when it cannot be: the port taken, say), its first
    dump opened before the socket listens; :func:`serve` runs it."""
    warm(app)
    return make_server(app, host, port, threads=threads, access_log=access_log)


def serve(srv: Any) -> None:
    """Run a server made by :func:`listen` until interrupted."""
    try:
        srv.run()
    finally:
        srv.close()


__all__ = ["THREADS", "AccessLog", "listen", "make_server", "serve", "stop", "warm"]
