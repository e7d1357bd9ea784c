"""`tdbg serve`'s production server: the app on waitress (a pure-Python multi-threaded WSGI server),
quiet unless asked for access logs, with socket limits that suit a local tool: slow or idle sockets
cannot lock the page out."""
from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from typing import Any, Callable, Iterable, TextIO

from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer, create_server

from .guard import MAX_BODY

try:
    import resource     # POSIX: the process's descriptor limit
except ImportError:     # pragma: no cover - Windows has no such per-process limit
    resource = None     # type: ignore[assignment]

THREADS = 8     # a slow tensor or a scan ties up one thread; the page keeps the others
# waitress's defaults suit a server on the internet behind a proxy, not a local tool: at 100 open
# sockets it stops accepting, so 100 keep-alive clients (or 100 sockets trickling headers, which
# waitress never times out: any byte counts as activity) lock every other client out.
CONNECTIONS = 1000      # open sockets at most: far above the tabs and scripts of one person
IDLE_TIMEOUT = 30       # s an idle keep-alive socket is kept: a browser opens a new one at once
REQUEST_TIMEOUT = 10    # s from a request's first byte to its last: a local client takes milliseconds
CROWDED_GRACE = 2       # s an idle or unfinished socket keeps its place once CONNECTIONS are open
RESERVED_FDS = 64       # descriptors kept for dumps, caches and logs when the limit is lowered


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


class LocalChannel(HTTPChannel):
    """A waitress channel that closes itself when its request is overdue, or when it idles while the
    server is full, so that a slow or idle socket cannot hold the place of a person's page."""

    request_began = 0.0

    def received(self, data: bytes) -> bool:
        """Note when a request's first byte arrives, then parse as waitress does."""
        if self.request is None and data:
            self.request_began = time.time()
        return bool(super().received(data))

    def readable(self) -> bool:
        """Read as waitress would, unless overdue: then close (polled at least once a second)."""
        if self.overdue(time.time()):
            self.will_close = True      # writable() sees it and the loop closes the socket
            return False
        return bool(super().readable())

    def overdue(self, now: float) -> bool:
        """Whether this socket holds a place it should give up: only ever one that is not being answered."""
        if self.will_close or self.requests or self.total_outbufs_len:
            return False
        crowded = bool(getattr(self.server, "in_connection_overflow", False))
        if self.request is not None:        # an unfinished request: headers or body trickling
            return now - self.request_began > (CROWDED_GRACE if crowded else REQUEST_TIMEOUT)
        # idle: waitress's channel_timeout closes it in time, sooner only when it keeps a client out
        return crowded and now - self.last_activity > CROWDED_GRACE


def connection_limit(wanted: int = CONNECTIONS) -> int:
    """How many sockets the server may hold open: ``wanted``, raising the process's soft descriptor
    limit toward it where allowed (macOS starts at 256), else as many as the limit leaves room for."""
    if resource is None:   # pragma: no cover
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = wanted + RESERVED_FDS
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - RESERVED_FDS))


def _local_channels(sockets: dict[int, Any]) -> None:
    """Make every listening server of ``sockets`` (one per address the host names) open LocalChannels."""
    for dispatcher in sockets.values():
        if isinstance(dispatcher, BaseWSGIServer):
            dispatcher.channel_class = LocalChannel


def make_server(app: Any, host: str, port: int, *, threads: int = THREADS, access_log: bool = False,
                connections: int = CONNECTIONS) -> Any:
    """A waitress server for ``app`` bound to ``host:port`` (port 0: any free one), not yet running, that
    holds at most ``connections`` sockets open."""
    # The host check answers the name the server is bound for: remember it.
    app.config["HOST"] = host
    # waitress says "Serving on ..." and warns about queue depth at INFO/WARNING: quiet by default.
    logging.getLogger("waitress").setLevel(logging.INFO if access_log else logging.ERROR)
    wsgi = AccessLog(app) if access_log else app
    sockets: dict[int, Any] = {}
    # waitress reads a whole body before the app sees it: it must refuse an oversized one itself
    # (413 as soon as the headers announce it), as the guard would.
    srv = create_server(wsgi, map=sockets, host=host, port=port, threads=threads, ident="tdbg",
                        clear_untrusted_proxy_headers=True,
                        max_request_body_size=app.config.get("MAX_CONTENT_LENGTH") or MAX_BODY,
                        connection_limit=connection_limit(connections), channel_timeout=IDLE_TIMEOUT,
                        # idle sockets are looked for this often: they go within IDLE_TIMEOUT * 7/6
                        cleanup_interval=max(1, IDLE_TIMEOUT // 6),
                        asyncore_use_poll=True)        # select() fails past descriptor 1024
    _local_channels(sockets)
    return srv


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


__all__ = ["CONNECTIONS", "IDLE_TIMEOUT", "REQUEST_TIMEOUT", "THREADS", "AccessLog", "LocalChannel",
           "connection_limit", "listen", "make_server", "serve", "stop", "warm"]
