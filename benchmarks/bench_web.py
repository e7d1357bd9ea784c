"""Web UI benchmark: a ~50,000-node MindSpore-layout dump; time to first graph view and API latencies.

The dump is a transformer-like training graph (``layers-CellList/{i}-Block`` with attention and MLP
sub-scopes, a mirrored ``Gradients/`` tree, one ``Adam`` kernel per parameter) written as a real
``ms_output_trace_code_graph_0.pb`` (debugger/proto/debug_graph_pb2.py), execution-order csv and
.npy files in MindSpore 2.10's names for the first ``--dumped-blocks`` blocks. Everything is timed
through Flask's test client, i.e. the server side of each request:

- first view: the requests the page makes before it can draw (dumps, info, graphs, root scope), in a
  fresh interpreter;
- latency median/p95 of the requests behind each pane, warm (after the first call) and, for
  statistics, cold (first time each tensor is asked for);
- the browser's layout of the largest scope page, with node.js when available (layout.js is pure JS).

With ``--ranks N``: the 1,000-rank views instead, on a generated N-rank dump (tests/web/bigranks.py:
few files per rank, NaN/high/divergent ranks planted): the triage computed once, then the requests
behind the loss band, the heatmap, the Ranks tab (pages, sort, search) and a tensor statistic's band,
each timed warm as `tdbg serve` answers them (dump opened before listening), with their JSON sizes
against what one series per rank would weigh.

Usage: python benchmarks/bench_web.py [--blocks 270] [--root /tmp/tdbg-bench-web] [--json out.json]
       python benchmarks/bench_web.py --ranks 1000 [--root /work/bench_data/u]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

USER = "train_big.py"   # set next to the dump by make_graph_dump
SITE = "/opt/msenv/lib/python3.11/site-packages/mindspore"
TS0 = 1796230236364755


# -- the dump ------------------------------------------------------------------------------------------
class _G:
    """Nodes of the .pb in MindSpore's numbering, with parameters and constants."""

    def __init__(self) -> None:
        from debugger.proto import debug_graph_pb2 as pb

        self.pb: Any = pb
        self.model = pb.ModelProto(ir_version=1, domain="")
        self.g = self.model.graph
        self.g.name, self.g.root_name = "kernel_graph0", "0"
        self.seq = 0
        self.count: dict[tuple[str, str], int] = {}
        self.order: list[str] = []          # kernels in execution order
        self.full: dict[str, str] = {}      # seq -> full name
        self.shape: dict[str, tuple[int, ...]] = {}
        self.params: list[tuple[str, tuple[int, ...]]] = []
        self.umonad = "cst1"
        self.g.const_vals.add(key="cst1", full_name="Default_data-0")

    def _type(self, t: Any, shape: tuple[int, ...]) -> None:
        t.data_type = self.pb.DT_TENSOR
        t.tensor_type.elem_type = 11
        for d in shape:
            t.tensor_type.shape.dim.add().size = d

    def param(self, name: str, shape: tuple[int, ...]) -> str:
        self._type(self.g.parameters.add(name=name).type, shape)
        self.params.append((name, shape))
        self.shape[name] = shape
        return name

    def op(self, scope: str, op: str, inputs: list[str], shape: tuple[int, ...], frames: list[str] = (),  # type: ignore[assignment]
           backward: bool = False, kernel: bool = True) -> str:
        k = (scope, op)
        self.count[k] = n = self.count.get(k, -1) + 1
        self.seq += 1
        seq = str(self.seq)
        full = f"{scope}/{op}-op{n}"
        p = self.g.node.add(name=seq, op_type=op, scope=scope, full_name=full)
        for i in inputs:
            p.input.add(name=i, type=self.pb.InputProto.DATA_EDGE)
        if op == "UpdateState":
            p.output_type.data_type = 43
        else:
            self._type(p.output_type, shape)
        if frames:
            text = [f"In file {f}" for f in frames]
            p.source_address = ("      # Corresponding forward node candidate:\n" + "".join(f"      #  - {t}\n" for t in text)
                                if backward else "".join(f"      # {t}\n" for t in text))
        self.full[seq] = full
        self.shape[seq] = shape
        if kernel:
            self.order.append(seq)
        return seq


def _frames(line: int, code: str, lib: str) -> list[str]:
    return [f"{USER}:{line}, 8~{8 + len(code)}/        {code}/", f"{USER}:40~60, 4~30/    def construct(self, x):/",
            f"{SITE}/nn/{lib}:100, 8~40/        x = self.op(x)/", f"{SITE}/nn/wrap/cell_wrapper.py:442, 8~40/        loss = self.network(*inputs)/"]


class _Forward:
    """The forward pass of a transformer-like net, written into ``g``: its kernels, the weights they read."""

    def __init__(self, g: _G, hidden: int, batch: int) -> None:
        self.g, self.H, self.B = g, hidden, batch
        self.fwd: list[tuple[str, str, str, list[str]]] = []     # (seq, scope, op, weight params read)
        self.block_of: dict[str, int] = {}
        self.weights: list[tuple[str, str]] = []                 # (param, scope of its layer)

    @staticmethod
    def pname(scope: str) -> str:
        """layers-CellList/3-Block/attn-Attention/q-Dense -> layers.3.attn.q"""
        return ".".join(seg.split("-")[0] for seg in scope.split("/")[3:])

    def dense(self, scope: str, inp: str, line: int, code: str, blk: int) -> str:
        g, H, B = self.g, self.H, self.B
        w = g.param(f"{self.pname(scope)}.weight", (H, H))
        b = g.param(f"{self.pname(scope)}.bias", (H,))
        lw = g.op(scope, "Load", [w, g.umonad], (H, H), kernel=False)
        lb = g.op(scope, "Load", [b, g.umonad], (H,), kernel=False)
        m = g.op(scope, "MatMul", [inp, lw], (B, H), _frames(line, code, "layer/basic.py"))
        o = g.op(scope, "BiasAdd", [m, lb], (B, H), _frames(line, code, "layer/basic.py"))
        for s in (m, o):
            self.fwd.append((s, scope, g.full[s].rsplit("/", 1)[1].split("-")[0], [w] if s == m else [b]))
            self.block_of[s] = blk
        self.weights.extend([(w, scope), (b, scope)])
        return o

    def norm(self, scope: str, inp: str, line: int, blk: int) -> str:
        g, H, B = self.g, self.H, self.B
        gm = g.param(f"{self.pname(scope)}.gamma", (H,))
        bt = g.param(f"{self.pname(scope)}.beta", (H,))
        lg = g.op(scope, "Load", [gm, g.umonad], (H,), kernel=False)
        lb = g.op(scope, "Load", [bt, g.umonad], (H,), kernel=False)
        o = g.op(scope, "LayerNorm", [inp, lg, lb], (B, H), _frames(line, "x = self.norm(x)", "layer/normalization.py"))
        self.fwd.append((o, scope, "LayerNorm", [gm, bt]))
        self.block_of[o] = blk
        self.weights.extend([(gm, scope), (bt, scope)])
        return o

    def simple(self, scope: str, op: str, ins: list[str], line: int, code: str, blk: int) -> str:
        o = self.g.op(scope, op, ins, (self.B, self.H), _frames(line, code, "ops/function/math_func.py"))
        self.fwd.append((o, scope, op, []))
        self.block_of[o] = blk
        return o

    def block(self, net: str, x: str, i: int) -> str:
        """Block ``i``: layer norm, attention, residual, layer norm, MLP, residual."""
        blk, simple, dense = f"{net}/layers-CellList/{i}-Block", self.simple, self.dense
        h1 = self.norm(f"{blk}/ln1-LayerNorm", x, 41, i)
        att = f"{blk}/attn-Attention"
        q = dense(f"{att}/q-Dense", h1, 42, "q = self.q(x)", i)
        k = dense(f"{att}/k-Dense", h1, 43, "k = self.k(x)", i)
        v = dense(f"{att}/v-Dense", h1, 44, "v = self.v(x)", i)
        rs = [simple(att, "Reshape", [t], 45, "q, k, v = self.split(q, k, v)", i) for t in (q, k, v)]
        tr = [simple(att, "Transpose", [t], 45, "q, k, v = self.split(q, k, v)", i) for t in rs]
        s = simple(att, "BatchMatMul", [tr[0], tr[1]], 46, "s = self.bmm(q, k) * self.scale", i)
        s = simple(att, "Mul", [s], 46, "s = self.bmm(q, k) * self.scale", i)
        s = simple(att, "Softmax", [s], 47, "p = self.softmax(s)", i)
        a = simple(att, "BatchMatMul", [s, tr[2]], 48, "a = self.bmm(p, v)", i)
        a = simple(att, "Transpose", [a], 48, "a = self.bmm(p, v)", i)
        a = simple(att, "Reshape", [a], 48, "a = self.bmm(p, v)", i)
        o = dense(f"{att}/o-Dense", a, 49, "a = self.o(a)", i)
        x1 = simple(blk, "Add", [x, o], 50, "x = x + self.attn(self.ln1(x))", i)
        h2 = self.norm(f"{blk}/ln2-LayerNorm", x1, 51, i)
        f1 = dense(f"{blk}/mlp-MLP/fc1-Dense", h2, 52, "h = self.fc1(x)", i)
        ge = simple(f"{blk}/mlp-MLP/act-GELU", "GeLU", [f1], 53, "h = self.act(h)", i)
        f2 = dense(f"{blk}/mlp-MLP/fc2-Dense", ge, 54, "h = self.fc2(h)", i)
        return simple(blk, "Add", [x1, f2], 55, "x = x + self.mlp(self.ln2(x))", i)


_LOSS_SCOPE = "Default/network-WithLossCell/_loss_fn-SoftmaxCrossEntropyWithLogits"


def _forward(g: _G, blocks: int, hidden: int, batch: int) -> tuple[_Forward, str, str, str]:
    """The forward pass and the loss: (the pass, logits, label, loss)."""
    net = "Default/network-WithLossCell/_backbone-Net"
    f = _Forward(g, hidden, batch)
    x = g.op(net + "/embed-Embedding", "Gather", [g.param("embed.weight", (64, hidden)), g.param("inputs0", (batch,))],
             (batch, hidden), _frames(30, "x = self.embed(ids)", "layer/embedding.py"))
    for i in range(blocks):
        x = f.block(net, x, i)
    logits = f.dense(f"{net}/head-Dense", x, 60, "logits = self.head(x)", blocks)
    label = g.param("inputs1", (batch,))
    loss = g.op(_LOSS_SCOPE, "SparseSoftmaxCrossEntropyWithLogits", [logits, label], (),
                [f"{SITE}/nn/loss/loss.py:891, 16~60/                x = self.sparse_softmax_cross_entropy(logits, labels)/"])
    return f, logits, label, loss


def _backward(g: _G, f: _Forward, logits: str, label: str) -> dict[str, str]:
    """Two kernels per forward kernel, in reverse, mirrored under Gradients/; returns param -> its gradient."""
    grad_of: dict[str, str] = {}
    prev = g.op("Gradients/" + _LOSS_SCOPE + "/Grad_SparseSoftmaxCrossEntropyWithLogits",
                "SparseSoftmaxCrossEntropyWithLogits", [logits, label], (f.B, f.H), backward=True)
    for seq, scope, op, params in reversed(f.fwd):
        gs = f"Gradients/{scope}/Grad_{op}"
        code_frames = [f"{USER}:{40 + (f.block_of.get(seq, 0) % 20)}, 8~30/        x = self.layer(x)/"]
        dx = g.op(gs, op + "Grad" if op not in ("MatMul", "BatchMatMul") else op, [prev, seq], g.shape[seq], code_frames, True)
        for p in params:
            grad_of[p] = g.op(gs, "MatMul" if op == "MatMul" else op + "GradWeight", [dx, seq], g.shape[p], code_frames, True)
        prev = dx
    return grad_of


def _optimizer(g: _G, weights: list[tuple[str, str]], grad_of: dict[str, str]) -> None:
    """One Adam per trainable parameter, with its two moments, chained by UpdateState."""
    opt = "Default/optimizer-Adam"
    lr = g.param("learning_rate", ())
    betas = [g.param(n, ()) for n in ("beta1_power", "beta2_power", "beta1", "beta2", "eps")]
    state = g.umonad
    for p, _ in weights:
        if p not in grad_of:
            continue
        m, v = g.param(f"adam_m.{p}", g.shape[p]), g.param(f"adam_v.{p}", g.shape[p])
        lp = g.op(opt, "Load", [p, state], g.shape[p], kernel=False)
        a = g.op(opt, "Adam", [lp, m, v, betas[0], betas[1], lr, betas[2], betas[3], betas[4], grad_of[p]], g.shape[p],
                 [f"{SITE}/nn/optim/adam.py:700, 8~40/        success = self.opt(params, moment1, moment2)/"])
        state = g.op(opt, "UpdateState", [state, a], (), kernel=False)


def _write_graph_files(g: _G, rank: str, iterations: int) -> None:
    """The .pb, both execution-order csv files and the dump's metadata of one rank."""
    for d in ("graphs", "execution_order", ".dump_metadata"):
        os.makedirs(os.path.join(rank, d), exist_ok=True)
    with open(os.path.join(rank, "graphs", "ms_output_trace_code_graph_0.pb"), "wb") as f:
        f.write(g.model.SerializeToString())
    with open(os.path.join(rank, "execution_order", "ms_execution_order_graph_0.csv"), "w") as f:
        f.write("NodeExecutionOrder-FullNameWithScope\n" + "".join(g.full[s] + "\n" for s in g.order))
    with open(os.path.join(rank, "execution_order", "ms_global_execution_order_graph_0.csv"), "w") as f:
        f.write("".join(f"{i}\n" for i in range(iterations)))
    with open(os.path.join(rank, ".dump_metadata", "config.json"), "w") as f:
        json.dump({"device_target": "CPU", "ms_version": "2.10.0"}, f)
    with open(os.path.join(rank, ".dump_metadata", "data_dump.json"), "w") as f:
        json.dump({"common_dump_settings": {"net_name": "Net", "iteration": "all", "saved_data": "tensor",
                                            "input_output": 0, "dump_mode": 0}}, f)


def _write_tensors(g: _G, rank: str, block_of: dict[str, int], dumped_blocks: int, iterations: int) -> int:
    """The .npy files: every kernel of the first blocks, then every 25th kernel, and parameters; returns the count."""
    rng = np.random.default_rng(0)
    # the backward and optimizer kernels of the dumped blocks too (they come after the forward ones)
    dumped_set = {s for s in g.order if block_of.get(s, -1) < dumped_blocks}
    files = 0
    for it in range(iterations):
        d = os.path.join(rank, "Net", "0", str(it))
        os.makedirs(d, exist_ok=True)
        ts = TS0 + it * 10_000_000
        for k, s in enumerate(g.order):
            full = g.full[s]
            if s not in dumped_set and k % 25:       # the first blocks fully, then every 25th kernel
                continue
            op = full.rsplit("/", 1)[1].split("-op")[0]
            arr = rng.standard_normal(g.shape[s]).astype(np.float32)
            np.save(os.path.join(d, f"{op}.{full.replace('/', '_')}.0.0.{ts + k}.output.0.DefaultFormat.Float32.npy"), arr)
            files += 1
        for name, shape in g.params[: 40 * max(dumped_blocks, 1)]:
            arr = rng.standard_normal(shape).astype(np.float32)
            np.save(os.path.join(d, f"Parameter.{name.replace('.', '_')}.0.0.{ts}.output.0.DefaultFormat.Float32.npy"), arr)
            files += 1
    return files


def make_graph_dump(root: str, blocks: int = 270, hidden: int = 8, batch: int = 2, dumped_blocks: int = 10,
                    iterations: int = 2) -> dict[str, Any]:
    """Write the dump; return {"root", "nodes", "files", "seconds"}."""
    global USER
    t0 = time.perf_counter()
    USER = os.path.join(os.path.dirname(os.path.abspath(root)), "train_big.py")
    g = _G()
    f, logits, label, loss = _forward(g, blocks, hidden, batch)
    _optimizer(g, f.weights, _backward(g, f, logits, label))
    g._type(g.g.outputs.add(name=loss).type, ())
    shutil.rmtree(root, ignore_errors=True)
    rank = os.path.join(root, "rank_0")
    _write_graph_files(g, rank, iterations)
    files = _write_tensors(g, rank, f.block_of, dumped_blocks, iterations)
    with open(USER, "w") as fh:      # the user script the stacks point at
        fh.write("\n".join(f"# line {i} of the training script" for i in range(1, 70)) + "\n")
    n_nodes = len(g.g.node) + len(g.g.parameters) + len(g.g.const_vals)
    return {"root": root, "nodes": n_nodes, "files": files, "seconds": time.perf_counter() - t0}


def ensure_dump(base: str, blocks: int, dumped_blocks: int) -> dict[str, Any]:
    """Reuse a dump generated earlier with the same parameters."""
    tag = os.path.join(base, "params.json")
    want = {"blocks": blocks, "dumped_blocks": dumped_blocks, "version": 1}
    if os.path.exists(tag):
        with open(tag) as f:
            have = json.load(f)
        if have.get("params") == want:
            return have["dump"]
    os.makedirs(base, exist_ok=True)
    info = make_graph_dump(os.path.join(base, "dump"), blocks=blocks, dumped_blocks=dumped_blocks)
    with open(tag, "w") as f:
        json.dump({"params": want, "dump": info}, f)
    return info


# -- timing ----------------------------------------------------------------------------------------------
def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def timed(client: Any, url: str, repeat: int = 25, method: str = "get", **kw: Any) -> dict[str, float]:
    """First call, then median and p95 of ``repeat`` more (milliseconds)."""
    def once() -> float:
        t = time.perf_counter()
        r = getattr(client, method)(url, **kw)
        dt = (time.perf_counter() - t) * 1000
        if r.status_code >= 400:
            raise RuntimeError(f"{url}: {r.status_code} {r.get_data(as_text=True)[:300]}")
        return dt
    first = once()
    xs = [once() for _ in range(repeat)]
    return {"first_ms": first, "median_ms": statistics.median(xs), "p95_ms": _pct(xs, 0.95)}


def first_view(root: str, cache_dir: str) -> dict[str, Any]:
    """In a fresh interpreter: the requests the page makes before it draws the graph."""
    code = f"""
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {ROOT!r})
from tdbg_web import create_app
app = create_app({root!r}, {{"CACHE_DIR": {cache_dir!r}}})
c = app.test_client()
steps = {{}}
t_app = time.perf_counter()
for name, url in [("dumps", "/api/dumps"), ("watchpoints", "/api/watchpoints"), ("graphs", "/api/ranks/0/graphs"),
                  ("scope", "/api/ranks/0/graphs/0/scope"), ("info (overview pane, after the graph)", "/api/info")]:
    t = time.perf_counter()
    r = c.get(url)
    assert r.status_code == 200, r.get_data(as_text=True)
    steps[name] = (time.perf_counter() - t) * 1000
steps["import_and_create_app"] = (t_app - t0) * 1000
steps["total"] = (time.perf_counter() - t0) * 1000
steps["requests"] = (time.perf_counter() - t_app) * 1000
print(json.dumps(steps))
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(p.stderr[-2000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def js_layout_ms(scope_json: dict[str, Any]) -> float | None:
    """Time layout.js on one scope page with node.js (None when node is not installed)."""
    node = shutil.which("node")
    if node is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        shutil.copy(os.path.join(ROOT, "web", "static", "js", "layout.js"), os.path.join(d, "layout.mjs"))
        with open(os.path.join(d, "scope.json"), "w") as f:
            json.dump(scope_json, f)
        with open(os.path.join(d, "run.mjs"), "w") as f:
            f.write("""import { layout } from './layout.mjs';
import { readFileSync } from 'fs';
const s = JSON.parse(readFileSync(new URL('./scope.json', import.meta.url)));
const nodes = s.children.items.map((c) => ({ id: c.id, w: c.type === 'scope' ? 200 : 150, h: c.type === 'scope' ? 52 : 42 }));
layout(nodes, s.edges);
const t = performance.now();
for (let i = 0; i < 5; i++) layout(nodes, s.edges);
console.log((performance.now() - t) / 5);
""")
        p = subprocess.run([node, os.path.join(d, "run.mjs")], capture_output=True, text=True)
        return float(p.stdout.strip()) if p.returncode == 0 else None


def api_latencies(client: Any, repeat: int, q: Callable[[str], str] = lambda u: u) -> dict[str, Any]:
    """Median/p95 of the requests behind each pane of a dump (first tensor-bearing MatMul)."""
    s = client.get(q("/api/ranks/0/graphs/0/search?q=MatMul")).get_json()
    node = next(x for x in s["items"] if not x["is_backward"])
    n = node["node"]
    out: dict[str, Any] = {"node_name": n}
    out["scope_root"] = timed(client, q("/api/ranks/0/graphs/0/scope"), repeat)
    out["scope_of_node"] = timed(client, q(f"/api/ranks/0/graphs/0/scope?path={node['place']}"), repeat)
    out["search"] = timed(client, q("/api/ranks/0/graphs/0/search?q=Softmax"), repeat)
    out["node"] = timed(client, q(f"/api/ranks/0/graphs/0/node?node={n}&iteration=0"), repeat)
    out["tensor_stats"] = timed(client, q(f"/api/ranks/0/graphs/0/tensor?node={n}&iteration=0"), repeat)
    out["tensor_history"] = timed(client, q(f"/api/ranks/0/graphs/0/tensor/history?node={n}&iteration=0"), repeat)
    out["tensor_values"] = timed(client, q(f"/api/ranks/0/graphs/0/tensor/values?node={n}&iteration=0"), repeat)
    out["code_files"] = timed(client, q("/api/ranks/0/code/files"), repeat)
    return out


def browser_timings(root: str, cache_dir: str, repeat: int = 40,
                    chromium: str = "/usr/bin/chromium") -> dict[str, Any]:
    """In headless Chromium against the real `tdbg serve` (waitress, in a subprocess): the first graph
    view after the server is up, and p95 of scope/node requests as the page's fetch() sees them."""
    import socket

    from playwright.sync_api import sync_playwright

    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    env = {**os.environ, "TDBG_CACHE_DIR": cache_dir}
    proc = subprocess.Popen([sys.executable, "-m", "debugger.cli", "serve", root, "--port", str(port)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"tdbg serve did not start: {proc.stderr.read().decode()[-500:]}") from None
                time.sleep(0.02)
        t_up = time.perf_counter()
        url = f"http://127.0.0.1:{port}/"
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"])
            t_browser = time.perf_counter() - t_up
            page = b.new_page(viewport={"width": 1440, "height": 900})
            # the page's own clock of the moment the graph is drawn (the harness's polling comes after)
            page.add_init_script("""new MutationObserver(() => { const o = document.querySelector('.graph-overlay');
              if (o && o.hidden && document.querySelector('.gnode') && !window.__drawn) window.__drawn = performance.now(); })
              .observe(document, { subtree: true, childList: true, attributes: true });""")
            t0 = time.perf_counter()
            page.goto(url + "#/graph")
            page.wait_for_selector(".gnode", timeout=60_000)
            page.wait_for_function("document.querySelector('.graph-overlay').hidden", timeout=60_000)
            first = (time.perf_counter() - t0) * 1000
            # the page's own clock: navigation start to the graph drawn
            nav = page.evaluate("performance.now()")
            drawn = page.evaluate("window.__drawn")
            api_ms = page.evaluate("""performance.getEntriesByType('resource').filter(e => e.name.includes('/api/'))
              .map(e => [e.name.split('/api/')[1].slice(0, 60), Math.round(e.startTime), Math.round(e.duration)])""")
            search = page.evaluate("fetch('/api/ranks/0/graphs/0/search?q=MatMul').then(r => r.json())")
            nodes = [x for x in search["items"] if not x["is_backward"]][:repeat]
            scopes = sorted({x["place"] for x in search["items"]})[:repeat]
            timing = page.evaluate("""async ([scopes, nodes]) => {
              const t = async (u) => { const a = performance.now(); const r = await fetch(u); await r.json(); return performance.now() - a; };
              const s = [], n = [];
              for (const p of scopes) s.push(await t('/api/ranks/0/graphs/0/scope?path=' + encodeURIComponent(p)));
              for (const x of nodes) n.push(await t('/api/ranks/0/graphs/0/node?iteration=0&node=' + encodeURIComponent(x.node)));
              return { s, n };
            }""", [scopes, nodes])
            b.close()
    finally:
        proc.terminate()
        proc.wait(10)
    return {"browser_launch_ms": t_browser * 1000, "first_graph_view_ms": first, "page_clock_ms": nav,
            "graph_drawn_ms": drawn, "api": api_ms,
            "scope": {"n": len(timing["s"]), "median_ms": statistics.median(timing["s"]), "p95_ms": _pct(timing["s"], 0.95)},
            "node": {"n": len(timing["n"]), "median_ms": statistics.median(timing["n"]), "p95_ms": _pct(timing["n"], 0.95)}}


def _browser_only(a: argparse.Namespace) -> int:
    """``--browser``: Chromium against ``tdbg serve`` only."""
    info = ensure_dump(a.root, a.blocks, a.dumped_blocks)
    cache_dir = tempfile.mkdtemp(prefix="tdbg-bench-cache-")
    try:
        r = browser_timings(info["root"], cache_dir, a.repeat)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    print(f"{info['nodes']:,} nodes; Chromium against tdbg serve: first graph view {r['first_graph_view_ms']:.0f} ms "
          f"after the server is up (drawn at {r['graph_drawn_ms']:.0f} ms of the page's clock); scope p95 {r['scope']['p95_ms']:.1f} ms (median {r['scope']['median_ms']:.1f}, "
          f"n={r['scope']['n']}); node p95 {r['node']['p95_ms']:.1f} ms (median {r['node']['median_ms']:.1f}, n={r['node']['n']})")
    for name, at, ms in r["api"]:
        print(f"  /api/{name:60s} at {at:5d} ms, took {ms:4d} ms")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=2)
    return 0


def _first_view(root: str, cache_dir: str) -> dict[str, Any]:
    """The first graph view in a fresh process, printed and returned."""
    fv = first_view(root, cache_dir)
    view = fv["import_and_create_app"] + fv["dumps"] + fv["watchpoints"] + fv["graphs"] + fv["scope"]
    fv["first_view"] = view
    print(f"first graph view (fresh process, server side): {view:.0f} ms = "
          f"{fv['import_and_create_app']:.0f} ms import+create_app + dumps {fv['dumps']:.0f} + watchpoints "
          f"{fv['watchpoints']:.0f} + graphs {fv['graphs']:.0f} + root scope {fv['scope']:.0f} ms; "
          f"then the overview's info {fv['info (overview pane, after the graph)']:.0f} ms")
    return fv


_BLOCKS_PAGE = "/api/ranks/0/graphs/0/scope?path=Default/network-WithLossCell/_backbone-Net/layers-CellList"


def _big_latencies(c: Any, repeat: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """API latencies on the big dump, the largest pages and cold statistics; and the JS layout of those pages."""
    lat = api_latencies(c, repeat)
    # the largest pages: the block list and the folded Adam group, first (structure built) and warm
    lat["scope_blocks_page"] = timed(c, _BLOCKS_PAGE, repeat)
    adam = next(x for x in c.get("/api/ranks/0/graphs/0/scope?path=Default/optimizer-Adam").get_json()["children"]["items"]
                if x["type"] == "group" and x["op_type"] == "Adam")
    lat["scope_adam_group_page"] = timed(c, f"/api/ranks/0/graphs/0/scope?path={adam['path']}", repeat)
    lat["adam_group_size"] = adam["count"]
    # cold statistics: the first request for each of many different tensors
    refs = [x["node"] for x in c.get("/api/ranks/0/graphs/0/search?q=BiasAdd").get_json()["items"]
            if not x["is_backward"]][:repeat]
    cold = []
    for n in refs:
        t = time.perf_counter()
        r = c.get(f"/api/ranks/0/graphs/0/tensor?node={n}&iteration=1")
        if r.status_code == 200:
            cold.append((time.perf_counter() - t) * 1000)
    lat["tensor_stats_cold"] = {"n": len(cold), "median_ms": statistics.median(cold), "p95_ms": _pct(cold, 0.95)}
    blocks_page = c.get(_BLOCKS_PAGE).get_json()
    adam_page = c.get(f"/api/ranks/0/graphs/0/scope?path={adam['path']}").get_json()
    js = {"blocks_page": js_layout_ms(blocks_page), "adam_group_page": js_layout_ms(adam_page),
          "blocks_page_children": len(blocks_page["children"]["items"]),
          "adam_group_page_children": len(adam_page["children"]["items"])}
    return lat, js


def _print_latencies(report: dict[str, Any], repeat: int) -> None:
    def row(name: str, d: dict[str, float]) -> str:
        first = f"{d['first_ms']:8.1f}" if "first_ms" in d else "       -"
        return f"  {name:24s} first {first} ms   median {d['median_ms']:7.2f} ms   p95 {d['p95_ms']:7.2f} ms"

    for title, key in (("50k-node dump", "big"), ("dumps_sample/single", "sample")):
        if key not in report:
            continue
        print(f"{title} API latencies (server side, {repeat} warm requests each):")
        for k, v in report[key].items():
            if isinstance(v, dict):
                print(row(k, v))
    js = report["js_layout_ms"]
    if js["blocks_page"] is not None:
        print(f"browser layout (layout.js under node): blocks page ({js['blocks_page_children']} scopes) "
              f"{js['blocks_page']:.1f} ms, Adam group page ({js['adam_group_page_children']} nodes) {js['adam_group_page']:.1f} ms")


RANK_VIEWS = {
    "triage (band + heatmap)": "/api/triage",
    "ranks: first page": "/api/ranks?sort=rank&begin=0",
    "ranks: page 9, by problems": "/api/ranks?sort=problems&begin=900",
    "ranks: search": "/api/ranks?q=rank%20640",
    "band of a weight's l2norm": "/api/band?node=fc1.weight&stat=l2norm",
}


def bench_ranks(root: str, ranks: int, repeat: int) -> dict[str, Any]:
    """The rank views' latencies and sizes on an N-rank dump (triage computed first, not timed per view)."""
    sys.path[:0] = [os.path.join(ROOT, "tests", "web"), os.path.join(ROOT, "tests")]
    import bigranks
    from tdbg_web import create_app
    from tdbg_web.server import warm

    from debugger.views import triage as tri
    from debugger.stats.cache import StatsCache
    from debugger.model import open_dump

    t0 = time.perf_counter()
    dump_root, cache_dir = bigranks.ensure_ranks_dump(ranks, base=root)
    out: dict[str, Any] = {"ranks": ranks, "dump_s": time.perf_counter() - t0}
    d, cache = open_dump(dump_root), StatsCache(cache_dir)
    t0 = time.perf_counter()
    tri.triage(d, cache)
    out["triage_s"] = time.perf_counter() - t0        # cold on the first run; the cache's afterwards
    per_rank = json.dumps(tri.loss_curves(d, cache))
    app = create_app(dump_root, {"CACHE_DIR": cache_dir})
    t0 = time.perf_counter()
    warm(app)
    out["open_s"] = time.perf_counter() - t0
    c = app.test_client()
    while c.get("/api/triage").get_json()["state"] != "done":
        time.sleep(0.2)
    out["views"] = {name: {**timed(c, url, repeat), "bytes": len(c.get(url).get_data())} for name, url in RANK_VIEWS.items()}
    out["loss_series_bytes"] = len(per_rank)
    out["loss_band_bytes"] = len(json.dumps(c.get("/api/triage").get_json()["result"]["loss_band"]))
    return out


def _print_ranks(r: dict[str, Any]) -> None:
    print(f"{r['ranks']} ranks: dump ready in {r['dump_s']:.1f} s, triage {r['triage_s']:.1f} s, opened in {r['open_s']:.1f} s")
    print(f"{'view':32} {'first ms':>9} {'median ms':>10} {'p95 ms':>8} {'bytes':>9}")
    for name, v in r["views"].items():
        print(f"{name:32} {v['first_ms']:9.1f} {v['median_ms']:10.1f} {v['p95_ms']:8.1f} {v['bytes']:9,}")
    print(f"loss: band {r['loss_band_bytes']:,} bytes against {r['loss_series_bytes']:,} for one series per rank")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(tempfile.gettempdir(), "tdbg-bench-web"))
    ap.add_argument("--blocks", type=int, default=270, help="transformer blocks (~185 graph nodes each)")
    ap.add_argument("--dumped-blocks", type=int, default=10, help="blocks whose kernels all have tensor files")
    ap.add_argument("--repeat", type=int, default=25)
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--browser", action="store_true",
                    help="only the Chromium measurement against `tdbg serve` (first graph view, scope/node p95)")
    ap.add_argument("--ranks", type=int, help="only the 1,000-rank views, on a generated dump of this many ranks")
    a = ap.parse_args(argv)
    if a.browser:
        return _browser_only(a)
    if a.ranks:
        res = bench_ranks(a.root, a.ranks, a.repeat)
        _print_ranks(res)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(res, f, indent=2)
        return 0

    from tdbg_web import create_app

    report: dict[str, Any] = {}
    info = ensure_dump(a.root, a.blocks, a.dumped_blocks)
    report["dump"] = info
    print(f"dump: {info['root']}: {info['nodes']:,} graph nodes, {info['files']:,} tensor files "
          f"(generated in {info['seconds']:.1f} s)")
    cache_dir = tempfile.mkdtemp(prefix="tdbg-bench-cache-")
    try:
        report["first_view"] = _first_view(info["root"], cache_dir)
        c = create_app(info["root"], {"CACHE_DIR": cache_dir}).test_client()
        c.get("/api/info")
        report["big"], report["js_layout_ms"] = _big_latencies(c, a.repeat)
        sample = os.path.join(ROOT, "dumps_sample")
        if os.path.isdir(sample):
            sc = create_app(sample, {"CACHE_DIR": cache_dir}).test_client()
            report["sample"] = api_latencies(sc, a.repeat, lambda u: u + ("&" if "?" in u else "?") + "dump=single")
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    _print_latencies(report, a.repeat)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
