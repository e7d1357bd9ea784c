"""The CLI on the committed real sample: info, node, code, scan, exit codes."""
import os

import pytest

from clirun import run_cli
from treehash import tree_digest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dumps_sample")
SINGLE = os.path.join(ROOT, "single")
DP2 = os.path.join(ROOT, "dp2")
WEIGHTS = ["conv1.weight", "fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight", "fc3.bias", "fc3.weight"]


@pytest.fixture(autouse=True)
def _cache_elsewhere(monkeypatch, tmp_path):
    monkeypatch.setenv("TDBG_CACHE_DIR", str(tmp_path / "cache"))


def test_info_json_matches_the_sample():
    r = run_cli("info", SINGLE, "--json")
    assert r.code == 0, r.err
    info = r.json
    assert info["dump"] == SINGLE and len(info["ranks"]) == 1
    rank = info["ranks"][0]
    assert rank["rank"] == 0 and rank["graphs"] == [0]
    assert rank["iterations"] == list(range(8)) and rank["run_iterations"] == list(range(8))
    assert r.json["format"] == "mindspore" and rank["saved"] == "values"
    assert (rank["framework"], rank["framework_version"], rank["device_target"]) == ("MindSpore", "2.10.0", "CPU")
    assert sorted(p["name"] for p in rank["parameters"] if p["kind"] == "weight") == WEIGHTS
    assert rank["nodes_by_kind"]["weight"] == 7 and rank["nodes_by_kind"]["gradient"] == 7
    assert rank["nodes_by_kind"]["loss"] == 1
    n_files = sum(len(fs) for d, _, fs in os.walk(os.path.join(SINGLE, "rank_0", "Net")))
    assert rank["tensor_files"] == n_files
    assert rank["tensor_bytes"] == sum(os.path.getsize(os.path.join(d, f))
                                       for d, _, fs in os.walk(os.path.join(SINGLE, "rank_0", "Net")) for f in fs)


def test_info_on_the_parent_reports_every_dump():
    r = run_cli("info", ROOT, "--json")
    assert r.code == 0
    dumps = {os.path.basename(d["dump"]): d for d in r.json["dumps"]}
    assert {k for k, d in dumps.items() if d["format"] == "mindspore"} == {"single", "dp2"}
    assert [x["rank"] for x in dumps["dp2"]["ranks"]] == [0, 1]
    human = run_cli("info", ROOT)
    assert "dp2" in human.out and "single" in human.out and "rank" in human.out


def test_info_from_a_rank_dir():
    r = run_cli("info", os.path.join(DP2, "rank_1"), "--json")
    assert r.code == 0 and [x["rank"] for x in r.json["ranks"]] == [1]


def test_node_shows_kind_and_stack_user_frames_first():
    r = run_cli("node", SINGLE, "fc1.weight", "--json")
    assert r.code == 0
    (n,) = r.json["nodes"]
    assert n["kind"] == "weight" and n["op_type"] == "Parameter" and n["iterations"] == list(range(8))
    sig = run_cli("node", SINGLE, "sigmoid-Sigmoid/Sigmoid-op0", "--json").json["nodes"][0]
    assert sig["kind"] == "activation"
    flags = [f["is_framework"] for f in sig["stack"]]
    assert flags and flags == sorted(flags), "user frames come first"
    assert any(f["file"].endswith("make_sample.py") for f in sig["stack"])


def test_code_finds_forward_and_backward_nodes_of_a_line():
    sig = run_cli("node", SINGLE, "sigmoid-Sigmoid/Sigmoid-op0", "--json").json["nodes"][0]
    user = next(f for f in sig["stack"] if not f["is_framework"])
    r = run_cli("code", SINGLE, f"make_sample.py:{user['line']}", "--json")
    assert r.code == 0
    dirs = {n["direction"] for n in r.json["nodes"]}
    assert dirs == {"forward", "backward"}
    assert sig["node"] in {n["node"] for n in r.json["nodes"] if n["direction"] == "forward"}


def test_bad_path_and_bad_location_exit_2_with_the_path():
    r = run_cli("info", "/no/such/dump")
    assert r.code == 2 and "/no/such/dump" in r.err
    r = run_cli("code", SINGLE, "make_sample.py")
    assert r.code == 2 and "FILE:LINE" in r.err
    r = run_cli("scan", SINGLE, "--watch", "nonsense_condition")
    assert r.code == 2 and "unknown condition" in r.err
    r = run_cli("scan", SINGLE, "--iterations", "5-2")
    assert r.code == 2 and "iteration range" in r.err


def test_recommended_scan_finds_the_planted_problems_and_nothing_else():
    before = tree_digest(SINGLE)
    r = run_cli("scan", SINGLE, "--json", "--jobs", "1")
    assert r.code == 1, r.err
    res = r.json
    hits = res["hits"]
    by = {}
    for h in hits:
        by.setdefault(h["watchpoint"], []).append(h)
    # planted 1: a saturating sigmoid, in every iteration (judged on the whole layer's outputs)
    sat = by.pop("activation_saturated_layer")
    assert sorted(h["iteration"] for h in sat) == list(range(8))
    assert all(h["node"].endswith("sigmoid-Sigmoid/Sigmoid-op0") for h in sat)
    # planted 2: fc2 frozen (learning rate 0 in its parameter group), in every iteration
    frozen = by.pop("weight_not_changed")
    for p in ("fc2.weight", "fc2.bias"):
        assert sorted(h["iteration"] for h in frozen if h["param"] == p) == list(range(8))
    # the frozen group's zero learning rate is optimizer state, which tensor_all_zero no longer checks
    # (plain SGD's momentum and its buffers are all zero in healthy runs): weight_not_changed finds fc2
    assert "tensor_all_zero" not in by
    # consequences of the saturation: fc1 (and upstream conv1) stop learning
    for name, hs in by.items():
        assert name in {"gradient_vanishing", "weight_change_too_large"}, name
        assert {h["param"] for h in hs} <= {"fc1.weight", "fc1.bias", "conv1.weight"}, name
    assert {h["param"] for h in frozen} <= {"fc2.weight", "fc2.bias", "fc1.weight", "fc1.bias"}
    assert not any(h["param"] in ("fc3.weight", "fc3.bias") for h in hits), "fc3 is healthy"
    first = res["first"]
    assert first == hits[0] and first["iteration"] == 0
    assert [(h["iteration"], h["rank"], h["position"]) for h in hits] == \
        sorted((h["iteration"], h["rank"], h["position"]) for h in hits)
    assert all(h["source"] and "make_sample.py:" in h["source"] for h in sat + frozen)
    assert tree_digest(SINGLE) == before, "scan must not write inside the dump"


def test_scan_second_run_uses_the_cache_and_agrees(tmp_path):
    a = run_cli("scan", SINGLE, "--json", "--cache-dir", str(tmp_path / "c"))
    assert os.listdir(tmp_path / "c"), "the cache is written outside the dump"
    b = run_cli("scan", SINGLE, "--json", "--cache-dir", str(tmp_path / "c"))
    assert a.json["hits"] == b.json["hits"] and a.code == b.code == 1


def test_scan_where_narrows_to_one_code_line():
    sig = run_cli("node", SINGLE, "sigmoid-Sigmoid/Sigmoid-op0", "--json").json["nodes"][0]
    user = next(f for f in sig["stack"] if not f["is_framework"])
    r = run_cli("scan", SINGLE, "--json", "--where", f"make_sample.py:{user['line']}")
    params = {h["param"] for h in r.json["hits"] if h["param"]}
    assert params and params <= {"fc1.weight", "fc1.bias"}


def test_scan_with_no_hits_exits_0_and_lists_conditions():
    r = run_cli("scan", SINGLE, "--watch", "weight_too_large:abs_mean_gt=1e6")
    assert r.code == 0 and "No watchpoint hit" in r.out
    r = run_cli("scan", "--list-conditions", "--json")
    assert r.code == 0 and any(c["name"] == "gradient_vanishing" for c in r.json)


def test_scan_data_parallel_sample_covers_both_ranks():
    r = run_cli("scan", DP2, "--json", "--ranks", "1")
    assert r.code == 1 and r.json["ranks"] == [1]
    assert {h["rank"] for h in r.json["hits"]} == {1}


def test_scan_where_with_an_unknown_line_is_a_usage_error():
    r = run_cli("scan", SINGLE, "--where", "nope.py:3")
    assert r.code == 2 and "no node was created by nope.py:3" in r.err


def test_scan_summarises_unreadable_files_by_problem(make_dump):
    root = make_dump()
    bad = []
    for d, _, files in os.walk(os.path.join(root, "rank_0")):
        bad += [os.path.join(d, f) for f in files if f.startswith("Parameter.fc") and f.endswith(".npy")]
    assert len(bad) >= 2
    for p in bad:
        with open(p, "r+b") as f:
            f.write(b"PK\x03\x04garbage")
    r = run_cli("scan", root, "--no-cache", "--watch", "weight_too_large:max_gt=1e9")
    # every weight unreadable: the watchpoint checked nothing, which the verdict says (exit 4), never "no hit"
    assert r.code == 4 and "INCOMPLETE" in r.out and "weight_too_large: NOT CHECKED: none of its" in r.out
    lines = [ln for ln in r.out.split("could not run:\n", 1)[1].splitlines() if "bad magic" in ln]
    assert len(lines) == 1, r.out
    n = int(lines[0].split(" x ")[0])
    assert n >= len(bad) and not lines[0].split(" x ")[1].startswith("/")


def test_serve_refuses_a_path_without_dumps_before_starting():
    r = run_cli("serve", "/no/such/dump")
    assert r.code == 2 and "/no/such/dump" in r.err


def test_serve_on_a_taken_port_is_exit_2_naming_the_port_and_never_says_serving():
    import socket
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        r = run_cli("serve", SINGLE, "--port", str(port))
    finally:
        taken.close()
    assert r.code == 2 and f"127.0.0.1:{port}" in r.err and "--port" in r.err, r.err
    assert "serving" not in r.out and "internal error" not in r.err


def test_progress_bar_draws_only_on_a_terminal():
    import io

    from debugger.cli.report import Progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        bar = Progress("scanning", stream)
        bar(5, 10)
        bar(10, 10)
    assert "scanning [" in tty.getvalue() and "10/10" in tty.getvalue() and tty.getvalue().endswith("\n")
    assert pipe.getvalue() == ""


def test_an_internal_error_has_its_own_status_and_names_the_file(tmp_path) -> None:
    """A bug (an exception that is no DumpError) exits 3 with one line naming the file being read, the
    traceback only with --debug. The failing command is injected: tdbg has no known bug to trigger."""
    import subprocess
    import sys

    code = ("import sys, debugger.cli as c, debugger.cli.info as info\n"
            "def broken(args, out):\n"
            "    path = '/data/job/rank_0/Net/0/3/x.npy'\n"
            "    return {}['no such key']\n"
            "info.run = broken\n"
            "sys.exit(c.main(sys.argv[1:]))\n")
    for extra, traced in (([], False), (["--debug"], True)):
        r = subprocess.run([sys.executable, "-c", code, *extra, "info", str(tmp_path)], capture_output=True, text=True)
        assert r.returncode == 3, r.stderr
        first = r.stderr.splitlines()[0]
        assert first.startswith("tdbg: internal error while reading /data/job/rank_0/Net/0/3/x.npy: KeyError")
        assert ("Traceback" in r.stderr) is traced and ("--debug" in first) is not traced


def test_every_command_reports_the_dumps_load_problems(make_dump) -> None:
    """A corrupt .pb (the graph then comes from the .ir): scan, node, code and compare say so, not only info."""
    root = make_dump(iterations=2)
    pb = os.path.join(root, "rank_0", "graphs", "ms_output_trace_code_graph_0.pb")
    with open(pb, "wb") as f:
        f.write(b"\x0a\xff\xff\xff")
    for args in (("scan", root), ("node", root, "fc1.weight"), ("code", root, "train_user.py:14")):
        r = run_cli(*args)
        assert r.code in (0, 1), r.err
        assert f"tdbg: warning: {pb}: not a MindSpore ModelProto" in r.err, (args, r.err)
    assert f"{pb}: not a MindSpore ModelProto" in run_cli("compare", root, root).out   # in its report
    j = run_cli("scan", root, "--json").json
    assert any(w.startswith(pb) for w in j["warnings"])
    assert any(w.startswith(pb) for w in run_cli("compare", root, root, "--json").json["warnings"])


def test_node_names_the_graph_files_that_failed(make_dump) -> None:
    root = make_dump(iterations=1)
    graphs = os.path.join(root, "rank_0", "graphs")
    for name in os.listdir(graphs):
        with open(os.path.join(graphs, name), "wb") as f:
            f.write(b"\x0a\xff\xff\xff")
    r = run_cli("node", root, "fc1.weight")
    assert r.code == 2 and "no node 'fc1.weight'" in r.err
    assert "graph(s) 0 could not be read" in r.err and "ms_output_trace_code_graph_0.pb" in r.err


def test_an_internal_error_names_a_file_not_a_scope_and_stays_on_one_line(tmp_path) -> None:
    """A local ``path`` holding a graph scope is not a file: the message names the dump instead, on one line."""
    import subprocess
    import sys

    code = ("import sys, debugger.cli as c, debugger.cli.info as info\n"
            "def broken(args, out):\n"
            "    path = 'Default/' * 5000 + 'MatMul-op0'\n"
            "    raise RuntimeError('two\\nlines ' + 'x' * 5000)\n"
            "info.run = broken\n"
            "sys.exit(c.main(sys.argv[1:]))\n")
    r = subprocess.run([sys.executable, "-c", code, "info", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 3, r.stderr
    assert r.stderr.count("\n") == 1 and len(r.stderr) < 1000, r.stderr
    assert r.stderr.startswith(f"tdbg: internal error while reading {tmp_path}: RuntimeError: two lines xxx")


def test_code_text_output_labels_its_columns():
    sig = run_cli("node", SINGLE, "sigmoid-Sigmoid/Sigmoid-op0", "--json").json["nodes"][0]
    user = next(f for f in sig["stack"] if not f["is_framework"])
    r = run_cli("code", SINGLE, f"make_sample.py:{user['line']}")
    assert r.code == 0, r.err
    headers = [ln.split() for ln in r.out.splitlines() if ln.split()[:1] == ["rank"]]
    assert headers and all(h == ["rank", "graph", "op", "kind", "node"] for h in headers), r.out
    assert sig["node"] in r.out     # the whole name, not cut


def test_code_prints_the_line_the_stacks_never_named():
    """The second line of a statement that defines a layer (`self.fc3 = nn.Dense(...,` then its arguments): the
    nodes it made are found through the statement, and its code is read from the file, never an empty line."""
    script = os.path.join(os.path.dirname(SINGLE), "make_sample.py")
    with open(script, encoding="utf-8") as f:
        lines = f.read().splitlines()
    line = next(i + 1 for i, t in enumerate(lines) if t.strip().startswith("self.fc3 = nn.Dense(")) + 1
    r = run_cli("code", SINGLE, f"make_sample.py:{line}")
    assert r.code == 0, r.err
    assert r.out.splitlines()[0] == f"make_sample.py:{line}  {lines[line - 1].strip()}"
    assert "definition (" in r.out and "fc3.weight" in r.out


def test_scan_text_names_tensors_in_full():
    r = run_cli("scan", SINGLE, "--preset", "recommended", "--json")
    names = {h["node"] for h in r.json["hits"] if not h.get("param")}   # parameters go by their name
    longest = max(names, key=len)
    text = run_cli("scan", SINGLE, "--preset", "recommended")
    assert text.code == 1 and longest in text.out, text.out


@pytest.mark.parametrize("command", [["scan", SINGLE], ["compare", DP2, "--ranks"]])
def test_cache_flags_of_every_command_that_reads_statistics(tmp_path, monkeypatch, command):
    default = tmp_path / "default"
    monkeypatch.setenv("TDBG_CACHE_DIR", str(default))
    chosen = tmp_path / "chosen"
    r = run_cli(*command, "--json", "--cache-dir", str(chosen))
    assert r.code in (0, 1), r.err
    assert os.listdir(chosen) and not default.exists(), "--cache-dir is where the statistics go"
    r = run_cli(*command, "--json", "--no-cache")
    assert r.code in (0, 1), r.err
    assert not default.exists(), "--no-cache writes no cache at all"
    r = run_cli(*command, "--json")
    assert os.listdir(default), "without a flag the statistics go to $TDBG_CACHE_DIR"


def test_serve_on_port_0_says_the_port_it_got_and_answers_there(tmp_path):
    import json
    import subprocess
    import sys
    import urllib.request
    proc = subprocess.Popen([sys.executable, "-m", "debugger.cli", "serve", SINGLE, "--port", "0",
                             "--cache-dir", str(tmp_path / "cache")], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        port = int(line.rsplit(":", 1)[1].strip().rstrip("/"))
        assert line.startswith(f"tdbg serving {SINGLE} on http://127.0.0.1:") and port > 0
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/info", timeout=60) as resp:
            assert json.loads(resp.read())["format"] == "mindspore"
    finally:
        proc.kill()
        proc.wait()
