"""The server gives away nothing: hostile dumps, hosts, origins, bodies and parameters, through real
HTTP (Flask's test client, and a real socket on 127.0.0.1 for what only a socket shows)."""
from __future__ import annotations

import http.client
import json
import os
import socket
import tracemalloc
from typing import Any, Iterator
from urllib.parse import quote

import pytest

from liveserver import LiveServer
from tdbg_web import create_app
from tdbg_web.guard import allowed_hosts, json_depth, split_host

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dumps_sample")
SECRET = "TOPSECRET-must-never-be-served"
FC1_MATMUL = "Default/network-WithLossCell/_backbone-Net/fc1-Dense/MatMul-op0"
JSON = {"Content-Type": "application/json"}
HOSTILE_PATHS = ["/etc/passwd", "/proc/self/environ", "../../secret.py", "/train/link_out.py",
                 "/train/linkdir/secret.py", "/train/.ssh/id_rsa.py", "/train/big.py", "/train/binary.py",
                 "/train/fifo.py", "/train/inside.py", "C:\\job\\..\\..\\secret.py"]
FORBIDDEN_TEXT = (SECRET, "root:x:0:0", "PATH=", "Traceback")


@pytest.fixture
def hostile(make_dump: Any, tmp_path: Any) -> str:
    """A dump whose graph stacks name system files, '..' paths, links out of the dump, a hidden
    folder, an oversized, a binary and a FIFO file; only inside.py is a servable source file."""
    root = make_dump("hostile", iterations=2, stack_paths=HOSTILE_PATHS)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text(SECRET + "\n")
    (tmp_path / "secret.py").write_text(SECRET + "\n")
    os.symlink(outside / "secret.py", os.path.join(root, "link_out.py"))
    os.symlink(outside, os.path.join(root, "linkdir"))
    os.makedirs(os.path.join(root, ".ssh"))
    with open(os.path.join(root, ".ssh", "id_rsa.py"), "w") as f:
        f.write(SECRET + "\n")
    with open(os.path.join(root, "big.py"), "w") as f:
        f.write(("# " + SECRET + "\n") * 200_000)
    with open(os.path.join(root, "binary.py"), "wb") as f:
        f.write(b"x = 1\0" + SECRET.encode())
    os.mkfifo(os.path.join(root, "fifo.py"))
    with open(os.path.join(root, "inside.py"), "w") as f:
        f.write("x = 1  # shown: inside the served dump\n")
    return root


@pytest.fixture
def hclient(make_app: Any, hostile: str) -> Any:
    return make_app(hostile).test_client()


def clean(resp: Any, allowed: tuple[int, ...] = ()) -> Any:
    """A response that is no 5xx, JSON when it is an error, and discloses nothing."""
    text = resp.get_data().decode("utf-8", "replace")    # the .npy download is binary
    assert resp.status_code < 500, text[:500]
    if allowed:
        assert resp.status_code in allowed, (resp.status_code, text[:500])
    for bad in FORBIDDEN_TEXT:
        assert bad not in text, f"{bad!r} in {text[:300]}"
    if resp.status_code >= 400 and (resp.request.path.startswith("/api/") or resp.status_code in (400, 403, 413)):
        body = json.loads(text)     # the page's own 404s (a missing static file) stay HTML
        assert set(body) >= {"error", "type", "status"} and body["status"] == resp.status_code
    return resp


def error_of(resp: Any, status: int) -> str:
    clean(resp, (status,))
    return resp.get_json()["error"]


# -- file disclosure --------------------------------------------------------------------------------------
def test_hostile_stacks_serve_nothing_outside_the_dump(hclient: Any) -> None:
    files = clean(hclient.get("/api/ranks/0/code/files?framework=1"), (200,)).get_json()["items"]
    by_name = {f["file"]: f for f in files}
    assert set(HOSTILE_PATHS) <= set(by_name)
    for path in HOSTILE_PATHS:
        src = clean(hclient.get(f"/api/ranks/0/code/source?file={quote(path)}"), (200,)).get_json()
        lines = clean(hclient.get(f"/api/ranks/0/code/lines?file={quote(path)}"), (200,)).get_json()
        if path == "/train/inside.py":
            assert src["exists"] and src["text"].startswith("x = 1") and by_name[path]["exists"]
            assert lines["exists"] and src["found"].endswith(os.sep + "inside.py")
            continue
        assert src["exists"] is False and src["text"] is None and src["found"] is None, path
        assert by_name[path]["exists"] is False and lines["exists"] is False, path


def test_refusals_name_the_rule_without_telling_what_exists_elsewhere(hclient: Any) -> None:
    reason = {p: hclient.get(f"/api/ranks/0/code/source?file={quote(p)}").get_json()["reason"] for p in HOSTILE_PATHS
              if p != "/train/inside.py"}
    same = {reason[p] for p in ("/etc/passwd", "/proc/self/environ", "../../secret.py", "/train/link_out.py",
                                "/train/linkdir/secret.py", "/train/.ssh/id_rsa.py", "/train/fifo.py")}
    assert len(same) == 1 and "--source-root" in same.pop()
    assert "larger than 2 MiB" in reason["/train/big.py"] and reason["/train/binary.py"] == "not a text file"


def test_a_suffix_or_an_unrecorded_path_serves_nothing(hclient: Any) -> None:
    for q in ("passwd", "etc/passwd", "environ", "secret.py", "id_rsa.py"):
        clean(hclient.get(f"/api/ranks/0/code/source?file={q}"))
    assert "no source file" in error_of(hclient.get("/api/ranks/0/code/source?file=/etc/hostname"), 404)
    assert "no source file" in error_of(hclient.get("/api/ranks/0/code/source?file=/proc/self/cmdline"), 404)
    error_of(hclient.get("/api/ranks/0/code/source?file=" + "a" * 5000), 400)


def test_the_sample_shows_its_own_make_sample_py_from_this_checkout(sample_client: Any) -> None:
    src = clean(sample_client.get("/api/ranks/0/code/source?dump=single&file=make_sample.py"), (200,)).get_json()
    assert src["exists"] and src["found"] == os.path.realpath(os.path.join(SAMPLE, "make_sample.py"))
    assert "self.sigmoid(self.fc1(x))" in src["text"].splitlines()[199]
    files = sample_client.get("/api/ranks/0/code/files?dump=single").get_json()["items"]
    assert files[0]["exists"] and files[0]["found"] == src["found"]


def test_source_root_maps_a_training_machine_path(make_dump: Any, make_app: Any, tmp_path: Any,
                                                  monkeypatch: Any) -> None:
    trained = tmp_path / "ci" / "job" / "src" / "train.py"
    root = make_dump(user_file=str(trained))
    checkout = tmp_path / "checkout"
    (checkout / "src").mkdir(parents=True)
    os.replace(trained, checkout / "src" / "train.py")
    c = make_app(root).test_client()
    assert c.get(f"/api/ranks/0/code/source?file={trained}").get_json()["exists"] is False
    c = make_app(root, SOURCE_ROOTS=[str(checkout)]).test_client()
    src = c.get(f"/api/ranks/0/code/source?file={trained}").get_json()
    assert src["exists"] and src["found"] == str(checkout / "src" / "train.py") and src["file"] == str(trained)
    c = make_app(root, SOURCE_ROOTS=[f"{tmp_path / 'ci' / 'job'}={checkout}"]).test_client()
    assert c.get(f"/api/ranks/0/code/source?file={trained}").get_json()["found"] == str(checkout / "src" / "train.py")
    monkeypatch.setenv("TDBG_SOURCE_ROOTS", os.pathsep.join([str(tmp_path / "nowhere"), str(checkout)]))
    c = make_app(root).test_client()
    assert c.get(f"/api/ranks/0/code/source?file={trained}").get_json()["exists"] is True


# -- hosts ------------------------------------------------------------------------------------------------
@pytest.fixture
def live(make_dump: Any, tmp_path: Any) -> Iterator[LiveServer]:
    app = create_app(make_dump(iterations=2), {"CACHE_DIR": str(tmp_path / "cache"), "ALLOWED_HOSTS": ["tdbg.lan"]})
    srv = LiveServer(app)
    yield srv
    srv.stop()


def raw(port: int, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, bytes]:
    """One request on a real socket; Host exactly as given."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders(body or None)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_dns_rebinding_is_refused_on_a_real_socket(live: LiveServer) -> None:
    port = live.port
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1:{port + 1}", f"localhost.evil.example:{port}",
                 f"127.0.0.1.nip.io:{port}", "", f"{port}", "[::1", f"user@127.0.0.1:{port}"):
        for path in ("/", "/api/dumps", "/static/js/main.js"):
            status, body = raw(port, "GET", path, {"Host": host} if host else {})
            assert status == 400, (host, path, status)
            err = json.loads(body)
            assert err["status"] == 400 and "tdbg" not in err["error"].lower().replace("--allow-host", "")
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"LOCALHOST:{port}", f"tdbg.lan:{port}"):
        status, body = raw(port, "GET", "/api/dumps", {"Host": host})
        assert status == 200, (host, body[:200])


def test_hosts_of_the_test_client_and_of_other_binds(make_app: Any, make_dump: Any) -> None:
    app = make_app(make_dump(iterations=1))
    c = app.test_client()
    assert c.get("/api/dumps").status_code == 200                                   # Host: localhost
    for host in ("127.0.0.1", "[::1]", "localhost."):
        assert c.get("/api/dumps", headers={"Host": host}).status_code == 200, host
    for host in ("evil.example", "localhost:81", "127.0.0.2", "[::2]", "a b"):
        error_of(c.get("/api/dumps", headers={"Host": host}), 400)
    app.config["HOST"] = "0.0.0.0"
    names, any_ip = allowed_hosts(app, "0.0.0.0")
    assert any_ip and {"localhost", "127.0.0.1", socket.gethostname().lower()} <= names and "evil.example" not in names
    app.config["HOST"] = "192.168.7.7"
    names, any_ip = allowed_hosts(app, "192.168.7.7")
    assert names == {"192.168.7.7"} and not any_ip
    assert split_host("[::1]:8080") == ("::1", 8080) and split_host("LocalHost.") == ("localhost", None)
    for bad in ("::1", "a:b", "x:99999999", "[::1]x"):
        with pytest.raises(ValueError):
            split_host(bad)


# -- cross-site state changes ------------------------------------------------------------------------------
WP = json.dumps({"name": "tensor_all_zero"})


def test_foreign_origins_cannot_change_state(hclient: Any) -> None:
    for origin in ("http://evil.example", "null", "http://localhost:8080", "https://localhost", "file://",
                   "http://localhost/x", "http://127.0.0.1.evil.example"):
        error_of(hclient.post("/api/watchpoints", data=WP, headers={**JSON, "Origin": origin}), 403)
    error_of(hclient.post("/api/watchpoints", data=WP, headers={**JSON, "Sec-Fetch-Site": "cross-site"}), 403)
    assert hclient.get("/api/watchpoints").get_json()["total"] == 0
    assert clean(hclient.post("/api/watchpoints", data=WP, headers={**JSON, "Origin": "http://localhost"})).status_code == 201
    assert clean(hclient.post("/api/watchpoints", data=WP, headers={**JSON, "Sec-Fetch-Site": "same-origin"})).status_code == 201
    error_of(hclient.delete("/api/watchpoints", headers={"Origin": "http://evil.example"}), 403)
    error_of(hclient.delete("/api/watchpoints/1", headers={"Origin": "http://evil.example"}), 403)
    error_of(hclient.post("/api/replay/next_hit", data="{}", headers={**JSON, "Origin": "http://evil.example"}), 403)
    assert hclient.get("/api/watchpoints").get_json()["total"] == 1   # the same watchpoint added twice is kept once


def test_form_posts_are_refused(hclient: Any) -> None:
    # What an HTML form on another site can send: no JSON content type.
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        assert "Content-Type" in error_of(hclient.post("/api/watchpoints", data=WP, headers={"Content-Type": ctype}), 415)
    assert hclient.get("/api/watchpoints").get_json()["total"] == 0


def test_responses_forbid_framing_and_sniffing(hclient: Any) -> None:
    for path in ("/", "/api/dumps", "/static/js/main.js"):
        h = hclient.get(path).headers
        assert h["X-Content-Type-Options"] == "nosniff" and h["X-Frame-Options"] == "DENY"
        assert "frame-ancestors 'none'" in h["Content-Security-Policy"]


# -- bounded requests --------------------------------------------------------------------------------------
class Endless:
    """A request body stream of ``size`` bytes made on demand (never held in memory)."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.read_bytes = 0

    def read(self, n: int = -1) -> bytes:
        n = self.left if n is None or n < 0 else min(n, self.left)
        n = min(n, 1 << 16)
        self.left -= n
        self.read_bytes += n
        return b" " * n

    def readline(self, n: int = -1) -> bytes:
        return self.read(n)


def test_a_500_mb_body_is_413_without_being_read(hclient: Any) -> None:
    stream = Endless(500 << 20)
    tracemalloc.start()
    try:
        resp = hclient.post("/api/watchpoints", headers=JSON,
                            environ_overrides={"wsgi.input": stream, "CONTENT_LENGTH": str(500 << 20)})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert error_of(resp, 413)
    assert stream.read_bytes == 0 and peak < 16 << 20
    error_of(hclient.post("/api/watchpoints", data=b" " * (2 << 20), headers=JSON), 413)
    # even a route that reads no body refuses one over the limit
    error_of(hclient.get("/api/dumps", environ_overrides={"wsgi.input": Endless(2 << 20),
                                                          "CONTENT_LENGTH": str(2 << 20)}), 413)


def test_oversized_and_chunked_bodies_on_a_real_socket(live: LiveServer) -> None:
    port = live.port
    host = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json"}
    conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:   # the headers announce 500 MB; the server answers before any of it is sent
        conn.sendall(f"POST /api/watchpoints HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json"
                     f"\r\nContent-Length: {500 << 20}\r\n\r\n".encode())
        assert conn.recv(200).startswith(b"HTTP/1.1 413")
    finally:
        conn.close()
    chunk = b" " * (1 << 16)
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(40)) + b"0\r\n\r\n"   # 2.5 MiB, no length
    status, text = raw(port, "POST", "/api/watchpoints", {**host, "Transfer-Encoding": "chunked"}, body)
    assert status == 413, text
    status, _ = raw(port, "POST", "/api/watchpoints", {**host, "Content-Length": str(len(WP))}, WP.encode())
    assert status == 201


@pytest.mark.parametrize("text, field", [
    ("[" * 100_000 + "]" * 100_000, "nested"),
    ('{"a":' * 50_000 + "1" + "}" * 50_000, "nested"),
    ('{"rank": Infinity}', "Infinity"),
    ('{"rank": NaN}', "NaN"),
    ('{"rank": 1e400}', "out of range"),
    ('{"rank": ' + "9" * 5000 + "}", "body"),
    ("[1, 2]", "expected a JSON object"),
    ('"x"', "expected a JSON object"),
    ("{", "body"),
    ("\xff\xfe", "body"),
])
def test_malformed_bodies_are_400_naming_the_body(hclient: Any, text: str, field: str) -> None:
    data = text.encode("latin-1") if text.startswith("\xff") else text.encode()
    for path in ("/api/watchpoints", "/api/replay/next_hit"):
        msg = error_of(hclient.post(path, data=data, headers=JSON), 400)
        assert "body" in msg and field in msg, msg


def test_json_depth_counts_without_recursion() -> None:
    assert json_depth('{"a": [1, {"b": "[[[[{{"}]}') == 3
    assert json_depth("[" * 1_000_000) == 1_000_000


# -- validated input ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("body, field", [
    ({"name": "tensor_too_large", "params": ["max_gt", 1]}, "params"),
    ({"name": "tensor_too_large", "params": "max_gt=1"}, "params"),
    ({"name": "tensor_too_large", "params": {"max_gt": [1]}}, "params.max_gt"),
    ({"name": "tensor_too_large", "params": {"max_gt": True}}, "params.max_gt"),
    ({"name": "tensor_too_large", "params": {"max_gt": "abc"}}, "max_gt"),
    ({"name": "tensor_all_zero", "node": 5}, "node"),
    ({"name": "tensor_all_zero", "scope": {"a": 1}}, "scope"),
    ({"name": 5}, "name"),
    ({"params": {}}, "name"),
    ({"name": "tensor_all_zero", "nodes": "x"}, "nodes"),
    ({"name": "no_such_condition"}, "no_such_condition"),
    ({"spec": ["tensor_all_zero"]}, "spec"),
    ({"spec": "tensor_all_zero:max_gt"}, "param=value"),
    ({"preset": 7}, "preset"),
    ({"preset": "nope"}, "nope"),
    ({"name": "tensor_too_large", "params": {"max_gt": 10 ** 400}}, "max_gt"),       # past float64: was a 500
    ({"spec": "tensor_too_large:max_gt=" + "9" * 400}, "max_gt must be a finite number"),
    ({"name": "tensor_too_large", "params": {"max_gt": "1e999"}}, "max_gt must be a finite number"),
])
def test_malformed_watchpoints_are_400_naming_the_field_and_leave_no_trace(hclient: Any, body: dict,
                                                                          field: str) -> None:
    assert field in error_of(hclient.post("/api/watchpoints", json=body), 400)
    assert hclient.get("/api/watchpoints").get_json()["total"] == 0
    node = quote(FC1_MATMUL)
    for path in ("/api/hits?iteration=0", "/api/hits?all=1", "/api/ranks/0/graphs/0/scope?iteration=0",
                 f"/api/ranks/0/graphs/0/node?node={node}&iteration=0"):
        clean(hclient.get(path), (200,))


@pytest.mark.parametrize("body, field", [
    ({"rank": "0"}, "rank"), ({"rank": True}, "rank"), ({"rank": 1.5}, "rank"), ({"iteration": [0]}, "iteration"),
    ({"rank": 10 ** 30}, "rank"), ({"iteration": None, "rank": {}}, "rank"),
])
def test_replay_fields_are_checked(hclient: Any, body: dict, field: str) -> None:
    clean(hclient.post("/api/watchpoints", json={"name": "tensor_all_zero"}), (201,))
    assert field in error_of(hclient.post("/api/replay/next_hit", json=body), 400)
    assert clean(hclient.post("/api/replay/next_hit", json={"rank": 0, "iteration": -1}), (200,))


@pytest.mark.parametrize("slc, message", [
    ("[::0]", "step cannot be zero"), ("[..., ...]", "at most one '...'"), ("[0, 0, 0, 0, 0]", "5 indices"),
    ("[..., 0, 0, 0, 0, 0]", "5 indices"), ("[1_0]", "expected integers"), ("[٣]", "expected integers"),
    ("[" + "0," * 2000 + "]", "characters"), ("[99999999999999999999999]", "expected integers"),
    ("[0:1:2:3]", "expected integers"), ("[None]", "expected integers"),
])
def test_bad_slices_are_400(hclient: Any, slc: str, message: str) -> None:
    for route in ("values", "diff"):
        msg = error_of(hclient.get(f"/api/ranks/0/graphs/0/tensor/{route}?node={quote(FC1_MATMUL)}&iteration=1"
                                   f"&io=input&slot=0&slice={quote(slc)}"), 400)
        assert message in msg, msg


# -- every route, hostile everything ------------------------------------------------------------------------
HOSTILE_VALUES = ["-1", "99999999999999999999999", "1e9", "NaN", " 1", "../../etc/passwd", "/etc/passwd",
                  "/proc/self/environ", "\x00", "%", "[::0]", "[...,...]", "a" * 3000, "*"]
QUERY_NAMES = ["dump", "node", "io", "slot", "iteration", "bins", "slice", "cap", "begin", "end", "fold",
               "framework", "path", "q", "file", "line", "location", "rank", "all", "watchpoint", "base"]
HOSTILE_BODIES = [b"", b"null", b"[]", b"{}", b'{"name": null}', b'{"rank": -5, "iteration": 10000000000}',
                  b'{"preset": "recommended", "spec": 1}', b'{"name": "overflow", "params": {"x": 1}}',
                  b"[" * 40 + b"]" * 40]


def _routes(app: Any) -> list[tuple[str, str]]:
    out = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static" or not str(rule).startswith(("/api", "/")):
            continue
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            out.append((method, str(rule)))
    return out


def test_every_route_survives_hostile_parameters_hosts_origins_and_bodies(make_app: Any, hostile: str) -> None:
    app = make_app(hostile)
    c = app.test_client()
    # a watchpoint set, so routes that scan do scan
    clean(c.post("/api/watchpoints", json={"name": "tensor_too_large", "params": {"max_gt": "1e30"}}), (201,))
    base = {"node": FC1_MATMUL, "iteration": "1", "file": "/etc/passwd", "location": "inside.py:1", "q": "MatMul"}
    fills = {"rank": ["0", "7", "99999999999999999999"], "graph_id": ["0", "9"], "wid": ["1", "999"],
             "name": ["index.html", "../../../etc/passwd", "..%2F..%2Fetc%2Fpasswd", "js/../../guard.py"]}
    routes = _routes(app)
    assert len(routes) >= 25
    seen = 0
    for method, rule in routes:
        paths = [rule]
        for arg, values in fills.items():
            paths = [p.replace(f"<int:{arg}>", v).replace(f"<path:{arg}>", v) for p in paths for v in values]
        for k, path in enumerate(paths):
            if method == "GET":
                clean(c.get(path, query_string=base))
                # every hostile query on the first (valid) path; the hostile paths with the base query
                for name in QUERY_NAMES if k == 0 else ():
                    for v in HOSTILE_VALUES:
                        clean(c.get(path, query_string={**base, name: v}))
                        seen += 1
            else:
                for data in HOSTILE_BODIES:
                    clean(c.open(path, method=method, data=data, headers=JSON))
                    seen += 1
            for headers in ({"Host": "evil.example"}, {"Host": "localhost:1"},
                            {"Origin": "http://evil.example", **JSON}):
                resp = clean(c.open(path, method=method, headers=headers, data=b"{}" if method != "GET" else None))
                if "Host" in headers or method != "GET":
                    assert resp.status_code in (400, 403), (method, path, headers, resp.status_code)
    assert seen > 4000


def test_an_unexpected_error_is_json_without_a_traceback(make_dump: Any, tmp_path: Any, monkeypatch: Any) -> None:
    app = create_app(make_dump(iterations=1), {"CACHE_DIR": str(tmp_path / "c")})   # not TESTING: as served

    def boom(*_: Any, **__: Any) -> Any:
        raise RuntimeError("secret detail /home/user/.ssh")

    from debugger.model import serialize

    monkeypatch.setattr(serialize, "dump_info", boom)
    resp = app.test_client().get("/api/info")
    assert resp.status_code == 500 and resp.is_json
    assert "secret" not in resp.get_data(as_text=True) and "Traceback" not in resp.get_data(as_text=True)


# -- the page under its Content-Security-Policy --------------------------------------------------------------
@pytest.mark.browser
def test_the_page_works_under_its_csp(browser: Any, live_sample: Any) -> None:
    ctx = browser.new_context(viewport={"width": 1300, "height": 900})   # CSP enforced (no bypass)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(live_sample.url + "#/graph?dump=single&it=2")
        page.wait_for_selector("body[data-ready='1']", timeout=15_000)
        page.wait_for_selector(".gnode", timeout=15_000)                # the layout worker ran
        page.goto(live_sample.url + "#/code?dump=single")
        page.wait_for_selector(".file-item", timeout=15_000)
    finally:
        ctx.close()
    assert not errors, errors


def test_tdbg_serve_runs_waitress_quietly_and_refuses_foreign_hosts(tmp_path: Any) -> None:
    """The real `tdbg serve` process: a production server, no development-server warning, the host check."""
    import subprocess
    import sys
    import time

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "debugger.cli", "serve", os.path.join(root, "dumps_sample"),
                             "--port", str(port), "--cache-dir", str(tmp_path / "c")], cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None and time.time() < deadline, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.05)
        status, _ = raw(port, "GET", "/api/dumps", {"Host": f"127.0.0.1:{port}"})
        assert status == 200
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1:{port + 1}"):
            status, body = raw(port, "GET", "/api/dumps", {"Host": host})
            assert status == 400 and json.loads(body)["status"] == 400, host
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=10)
    assert b"development server" not in err and b"WARNING" not in err, err
    assert err.strip() == b""        # quiet: no access log without --access-log
    assert b"tdbg serving" in out


def test_a_server_stops_even_when_its_wake_up_pipe_was_closed_under_it(make_app: Any, make_dump: Any) -> None:
    """A library of the process closing the descriptor of the server's wake-up pipe (seen once in CI) must
    not make stopping the server raise or leave its port open."""
    srv = LiveServer(make_app(make_dump(iterations=1)))
    assert raw(srv.port, "GET", "/api/dumps", {"Host": f"127.0.0.1:{srv.port}"})[0] == 200
    os.close(srv.server.trigger.trigger)      # the pipe's write end, as a stray close would
    srv.stop()
    assert not srv.thread.is_alive()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", srv.port), timeout=1).close()
