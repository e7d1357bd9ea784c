"""Graph export (debugger.views.export and `tdbg graph`) on the committed sample and dumpmaker dumps:
the DOT parses back with pydot and says what the graph view says; SVG and PNG are drawn by Graphviz."""
from __future__ import annotations

import os
import shutil
import xml.etree.ElementTree as ET
from typing import Any

import pydot
import pytest

from clirun import run_cli
from debugger import open_dump, query
from debugger.views.export import export_scope, scope_dot

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dumps_sample")
SINGLE = os.path.join(ROOT, "single")
BACKBONE = "Default/network-WithLossCell/_backbone-Net"
OPTIMIZER = "Default/optimizer-Momentum"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SVG_NS = "{http://www.w3.org/2000/svg}"

needs_graphviz = pytest.mark.skipif(shutil.which("dot") is None,
                                    reason="Graphviz's dot is not installed (the README's test command installs it)")


@pytest.fixture(autouse=True)
def _cache_elsewhere(monkeypatch: Any, tmp_path: Any) -> None:
    monkeypatch.setenv("TDBG_CACHE_DIR", str(tmp_path / "cache"))


def parse(text: str) -> tuple[dict[str, dict[str, str]], dict[tuple[str, str], int]]:
    """DOT text -> ({node id: attributes}, {(source, target): count}) read back with pydot."""
    (g,) = pydot.graph_from_dot_data(text)
    unq = lambda s: s[1:-1].replace('\\"', '"') if s.startswith('"') else s   # noqa: E731
    nodes = {unq(n.get_name()): {k: unq(str(v)) for k, v in n.get_attributes().items()}
             for n in g.get_nodes() if n.get_name() not in ("node", "edge", "graph")}
    edges = {}
    for e in g.get_edges():
        label = e.get_attributes().get("label")
        edges[(unq(e.get_source()), unq(e.get_destination()))] = int(unq(label)) if label else 1
    return nodes, edges


def expected(graph: Any, path: str, **opts: Any) -> tuple[set[str], dict[tuple[str, str], int]]:
    """Children and edges of the graph view (scope_view) of one scope level."""
    total = query.scope_view(graph, path, end=0, **opts)["children"]["total"]
    v = query.scope_view(graph, path, end=total, **opts)
    return ({c["id"] for c in v["children"]["items"]},
            {(e["source"], e["target"]): e["count"] for e in v["edges"]})


@pytest.fixture(scope="module")
def sample_graph() -> Any:
    if not os.path.isdir(SINGLE):
        pytest.skip("dumps_sample/ is not present")
    return open_dump(SINGLE).rank(0).graph(0)


@pytest.mark.parametrize("path", ["", "Default", BACKBONE, f"{BACKBONE}/fc1-Dense", OPTIMIZER,
                                  f"{OPTIMIZER}/ApplyMomentum[7]"])
def test_dot_has_the_children_and_edges_of_the_view(sample_graph: Any, path: str) -> None:
    nodes, edges = parse(scope_dot(sample_graph, path).to_string())
    want_nodes, want_edges = expected(sample_graph, path)
    assert set(nodes) == want_nodes and want_nodes
    assert edges == want_edges


def test_labels_say_name_op_type_kind_and_scope_sizes(sample_graph: Any) -> None:
    root, _ = parse(scope_dot(sample_graph, "").to_string())
    view = {c["id"]: c for c in query.scope_view(sample_graph, "")["children"]["items"]}
    assert root["Default"]["label"] == f"Default/\\n{view['Default']['count']} nodes"
    assert not [n for n in root if n.startswith("Parameter[")]              # weights go with their readers
    fc1, _ = parse(scope_dot(sample_graph, f"{BACKBONE}/fc1-Dense").to_string())
    matmul = fc1[f"{BACKBONE}/fc1-Dense/MatMul-op0"]
    # the name already says MatMul; its weight and constants, one line each, as in the view
    assert matmul["label"] == "MatMul-op0\\nother\\nweight float32 16×128\\nDefault_data-1\\nDefault_data-2"
    opt, _ = parse(scope_dot(sample_graph, OPTIMIZER).to_string())
    assert opt[f"{OPTIMIZER}/ApplyMomentum[7]"]["peripheries"] == "2"        # drawn as a stack, like the view
    sig, _ = parse(scope_dot(sample_graph, f"{BACKBONE}/sigmoid-Sigmoid").to_string())
    (only,) = sig.values()
    assert only["label"].startswith("Sigmoid-op0\\n") and "activation" in only["label"]
    assert only["color"] == "#2f9e44"                                          # the UI's activation green


def test_fold_and_framework_change_the_export_as_they_change_the_view(sample_graph: Any) -> None:
    folded, _ = parse(scope_dot(sample_graph, OPTIMIZER).to_string())
    assert f"{OPTIMIZER}/ApplyMomentum[7]" in folded
    unfolded, _ = parse(scope_dot(sample_graph, OPTIMIZER, fold=0).to_string())
    assert set(unfolded) == expected(sample_graph, OPTIMIZER, fold=0)[0]
    assert sum(a["label"].split("\\n")[0].startswith("ApplyMomentum") for a in unfolded.values()) == 7
    assert not any(n.endswith("]") for n in unfolded)
    plain, plain_edges = parse(scope_dot(sample_graph, "Default").to_string())
    fw, fw_edges = parse(scope_dot(sample_graph, "Default", framework=True).to_string())
    assert (set(fw), fw_edges) == expected(sample_graph, "Default", framework=True)
    assert len(fw) > len(plain) and set(plain) < set(fw)


def test_cli_writes_dot_to_stdout_matching_the_view(sample_graph: Any) -> None:
    r = run_cli("graph", SINGLE, "--scope", BACKBONE)
    assert r.code == 0, r.err
    nodes, edges = parse(r.out)
    assert (set(nodes), edges) == expected(sample_graph, BACKBONE)
    r = run_cli("graph", SINGLE, "--scope", OPTIMIZER, "--fold", "0", "--framework")
    assert r.code == 0, r.err
    assert set(parse(r.out)[0]) == expected(sample_graph, OPTIMIZER, fold=0, framework=True)[0]


def test_cli_rank_and_graph_of_a_data_parallel_dump(make_dump: Any, tmp_path: Any) -> None:
    root = make_dump(ranks=2, layers=[("fc1", 4, 4, "ReLU"), ("fc2", 4, 4, "ReLU"), ("fc3", 4, 4, "ReLU"),
                                      ("out", 4, 2, None)])
    reducer = "Default/grad_reducer-DistributedGradReducer"
    out = tmp_path / "reducer.dot"
    r = run_cli("graph", root, "--rank", "1", "--graph", "0", "--scope", reducer, "-o", str(out))
    assert r.code == 0, r.err
    assert str(out) in r.out
    nodes, edges = parse(out.read_text())
    assert {f"{reducer}/AllReduce[8]", f"{reducer}/Mul[8]"} == set(nodes)
    assert edges == {(f"{reducer}/AllReduce[8]", f"{reducer}/Mul[8]"): 8}
    assert (set(nodes), edges) == expected(open_dump(root).rank(1).graph(0), reducer)
    big = run_cli("graph", root, "--rank", "1", "--scope", reducer, "--fold", "9")   # 8 < 9: not folded
    assert len(parse(big.out)[0]) == 16


def test_cli_unknown_scope_rank_graph_and_bad_usage_exit_2(capsys: Any) -> None:
    r = run_cli("graph", SINGLE, "--scope", "Default/no-such-cell")
    assert r.code == 2 and "no scope 'Default/no-such-cell'" in r.err
    r = run_cli("graph", SINGLE, "--graph", "9")
    assert r.code == 2 and "no graph 9" in r.err
    r = run_cli("graph", SINGLE, "--rank", "3")
    assert r.code == 2 and "no rank 3" in r.err
    r = run_cli("graph", SINGLE, "--format", "pdf")
    assert r.code == 2 and "invalid choice: 'pdf'" in capsys.readouterr().err   # argparse prints to sys.stderr
    r = run_cli("graph", SINGLE, "--format", "png")
    assert r.code == 2 and "-o FILE" in r.err
    r = run_cli("graph", SINGLE, "--fold", "-1")
    assert r.code == 2 and "--fold" in r.err
    r = run_cli("graph", "/no/such/dump")
    assert r.code == 2 and "/no/such/dump" in r.err


def test_cli_never_writes_inside_the_dump(make_dump: Any) -> None:
    root = make_dump(iterations=1)
    for target in (os.path.join(root, "g.dot"), os.path.join(root, "rank_0", "g.dot")):
        r = run_cli("graph", root, "-o", target)
        assert r.code == 2 and "inside the dump" in r.err and not os.path.exists(target)


@needs_graphviz
def test_svg_is_valid_xml_with_the_node_labels(sample_graph: Any, tmp_path: Any) -> None:
    out = tmp_path / "backbone.svg"
    r = run_cli("graph", SINGLE, "--scope", BACKBONE, "--format", "svg", "-o", str(out))
    assert r.code == 0, r.err
    root = ET.parse(out).getroot()
    assert root.tag == f"{SVG_NS}svg"
    texts = {t.text for t in root.iter(f"{SVG_NS}text")}
    for c in query.scope_view(sample_graph, BACKBONE)["children"]["items"]:
        assert f"{c['name']}/" in texts and f"{c['count']} node{'s' if c['count'] > 1 else ''}" in texts
    assert len([g for g in root.iter(f"{SVG_NS}g") if g.get("class") == "edge"]) == \
        len(query.scope_view(sample_graph, BACKBONE)["edges"])
    assert run_cli("graph", SINGLE, "--scope", BACKBONE, "-o", str(tmp_path / "x.svg")).code == 0   # format from -o
    ET.parse(tmp_path / "x.svg")


@needs_graphviz
def test_png_starts_with_the_png_signature(sample_graph: Any, tmp_path: Any) -> None:
    out = tmp_path / "root.png"
    r = run_cli("graph", SINGLE, "--format", "png", "-o", str(out))
    assert r.code == 0, r.err
    assert out.read_bytes()[:8] == PNG_SIGNATURE and out.stat().st_size > 1000
    exp = export_scope(sample_graph, OPTIMIZER, "png", rank=0)
    assert exp.data[:8] == PNG_SIGNATURE and exp.mimetype == "image/png"
    assert exp.filename == "rank0_graph0_optimizer-Momentum.png"


def test_without_graphviz_svg_and_png_say_to_install_it(monkeypatch: Any, tmp_path: Any) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))     # a machine without Graphviz: `dot` is not on PATH
    for fmt in ("svg", "png"):
        r = run_cli("graph", SINGLE, "--format", fmt, "-o", str(tmp_path / f"x.{fmt}"))
        assert r.code == 2 and "Graphviz" in r.err and "apt-get install graphviz" in r.err
        assert not (tmp_path / f"x.{fmt}").exists()
    r = run_cli("graph", SINGLE)                # DOT needs no external program
    assert r.code == 0 and r.out.startswith("digraph")
