"""The server serves a person under load (issue 38, item 5): sockets that trickle their headers or sit idle
cannot lock the page out, and 200 concurrent keep-alive clients are served fairly: the real `tdbg serve`
process, or the same server in a thread where a setting is shortened to keep the test quick."""
from __future__ import annotations

import http.client
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Iterator

import pytest

from liveserver import LiveServer
from tdbg_web import server

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARTIAL = b"GET /api/dumps HTTP/1.1\r\nHo"     # a request line and the start of a header, never finished
CLIENTS = 200
CALLS = 30          # per client: ~6000 answers, 2-3 s on a busy 2-core machine
# A fair server answers each of 200 clients (one request outstanding each) after about the same
# queue, so p99/p50 is near 1; measured 2.0-2.9 on a shared 2-core machine (load 11), and 12-40 on
# waitress's defaults, which hold 100 clients and leave the other 100 waiting in the accept queue.
P99_OVER_P50 = 5
SLOWEST_OVER_P50 = 10     # no single answer (a client's first included) waits 10 typical ones
ATTEMPTS = 3


@pytest.fixture(scope="module")
def served(tmp_path_factory: Any) -> Iterator[int]:
    """The port of a real `tdbg serve` process on dumps_sample/ (its own process: as a person runs it)."""
    cache = tmp_path_factory.mktemp("cache")
    proc = subprocess.Popen([sys.executable, "-m", "debugger.cli", "serve", os.path.join(ROOT, "dumps_sample"),
                             "--port", "0", "--cache-dir", str(cache)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "tdbg serving" in line, line
        yield int(line.rsplit(":", 1)[1].strip().rstrip("/"))
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout:
            proc.stdout.close()


def get(conn: http.client.HTTPConnection, path: str = "/api/dumps") -> float:
    """Seconds that one GET on ``conn`` took to be answered in full (200 asserted)."""
    t0 = time.monotonic()
    conn.request("GET", path)
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 200, resp.status
    return time.monotonic() - t0


def fresh_get(port: int, timeout: float) -> float:
    """Seconds a new client's GET /api/info takes on ``port`` (socket.timeout past ``timeout``)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        return get(conn, "/api/info")
    finally:
        conn.close()


class Tricklers:
    """``n`` sockets that each sent the start of a request and then add a byte every ``every`` seconds,
    never finishing it (a slowloris, or a stuck client): waitress counts every byte as activity."""

    def __init__(self, port: int, n: int, every: float = 1.0, connect: bool = True) -> None:
        self.socks: list[socket.socket] = []
        self.stopped = threading.Event()
        for _ in range(n):
            s = socket.socket()
            s.settimeout(5)
            self.socks.append(s)
            s.connect(("127.0.0.1", port))    # beyond the server's limit, accepted by the kernel's queue
            s.sendall(PARTIAL)
        self.thread = threading.Thread(target=self._drip, args=(every,), daemon=True)
        self.thread.start()

    def _drip(self, every: float) -> None:
        """One more header byte on each socket every ``every`` seconds, until stopped."""
        while not self.stopped.wait(every):
            for s in self.socks:
                try:
                    s.send(b"s")
                except OSError:    # closed by the server: what a guarded server does
                    pass

    def close(self) -> None:
        """Stop dripping and close every socket."""
        self.stopped.set()
        self.thread.join(5)
        for s in self.socks:
            s.close()


def closed_by_server(s: socket.socket, within: float) -> bool:
    """Whether the server closes ``s`` within ``within`` seconds (it sends nothing but, maybe, an error)."""
    s.settimeout(within)
    try:
        while s.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_150_trickling_sockets_leave_the_page_answered(served: int) -> None:
    """150 sockets trickling headers (waitress held 100 and stopped accepting: a fresh client waited until
    they closed) do not keep a person's request waiting."""
    trickle = Tricklers(served, 150)
    try:
        time.sleep(1.5)     # they are all open and have each dripped
        took = fresh_get(served, timeout=15)
    finally:
        trickle.close()
    assert took < 5, f"a fresh client waited {took:.1f} s behind 150 trickling sockets"


def load(port: int, clients: int, calls: int) -> tuple[list[float], list[str]]:
    """Every answer's latency when ``clients`` keep-alive clients each make ``calls`` GETs at once,
    and the errors any client met."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    go = threading.Event()

    ready = threading.Barrier(clients + 1)

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine: list[float] = []
        try:
            conn.connect()      # connected before the clock starts: an API call is timed, not a connect storm
            ready.wait(30)
            go.wait()
            mine = [get(conn) for _ in range(calls)]
        except Exception as exc:     # noqa: BLE001 - reported by the test, not lost in a thread
            mine.append(float("inf"))
            with lock:
                errors.append(repr(exc))
        finally:
            conn.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    ready.wait(30)
    time.sleep(0.2)     # the server accepts what it will (all 200; waitress's defaults: 100)
    go.set()
    for t in threads:
        t.join(120)
    return sorted(latencies), errors


def fair(latencies: list[float]) -> str:
    """'' when p99 and the slowest answer are within their multiples of p50, else the figures."""
    q = statistics.quantiles(latencies, n=100)
    p50, p99, slowest = q[49], q[98], latencies[-1]
    if p99 <= P99_OVER_P50 * p50 and slowest <= SLOWEST_OVER_P50 * p50:
        return ""
    return f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, slowest {slowest * 1000:.0f} ms"


def test_200_keep_alive_clients_are_served_fairly(served: int) -> None:
    """Under 200 concurrent keep-alive clients, p99 of an API call is a small multiple of p50 and no
    client starves (waitress's 100 connections: the other 100 waited for the first to finish)."""
    unfair: list[str] = []
    # A stall of the shared machine delays the 200 answers in flight at once, enough to tip p99 on a
    # 2-3 s run: a fair server passes one of 3 runs; starvation fails every run, by 5-10 times.
    for _ in range(ATTEMPTS):
        latencies, errors = load(served, CLIENTS, CALLS)
        assert not errors, errors[:3]
        unfair.append(fair(latencies))
        if not unfair[-1]:
            return
    pytest.fail("; ".join(unfair))


@pytest.fixture
def quick_server(make_app: Callable[..., Any], mlp_dump: str, monkeypatch: Any) -> Iterator[Callable[..., LiveServer]]:
    """``quick_server(**settings)``: the server in a thread, its module settings (REQUEST_TIMEOUT, ...) set."""
    started: list[LiveServer] = []

    def factory(connections: int = server.CONNECTIONS, **settings: int) -> LiveServer:
        for name, value in settings.items():
            monkeypatch.setattr(server, name, value)
        started.append(LiveServer(make_app(mlp_dump), connections=connections))
        return started[-1]

    yield factory
    for srv in started:
        srv.stop()


def test_a_request_still_unfinished_after_the_request_timeout_is_closed(quick_server: Any) -> None:
    """A trickling request, however lively, is closed REQUEST_TIMEOUT after its first byte (waitress never)."""
    srv = quick_server(REQUEST_TIMEOUT=1)
    trickle = Tricklers(srv.port, 1, every=0.2)
    try:
        assert closed_by_server(trickle.socks[0], within=5)
    finally:
        trickle.close()


def test_an_idle_socket_is_closed_after_the_idle_timeout(quick_server: Any) -> None:
    """A socket that sends nothing is closed after IDLE_TIMEOUT (waitress: 120 s, checked every 30 s)."""
    srv = quick_server(IDLE_TIMEOUT=1)
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        assert closed_by_server(s, within=5)


def test_a_full_server_gives_the_places_of_stalled_sockets_to_new_clients(quick_server: Any) -> None:
    """Past the connection limit, sockets stalled for CROWDED_GRACE give their place up: a person's
    request is answered even when a local process opened more sockets than the limit."""
    srv = quick_server(connections=20)
    trickle = Tricklers(srv.port, 40)
    try:
        time.sleep(0.5)
        took = fresh_get(srv.port, timeout=20)
    finally:
        trickle.close()
    assert took < 10, f"a fresh client waited {took:.1f} s behind 40 trickling sockets, 20 allowed"
