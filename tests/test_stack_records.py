"""Records carry structure: each reader gives StackFrames (file, line, code, user or framework) and a module
path, on the committed sample of each format and on a fresh recording; the truth is the scripts' own lines."""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import pytest
from clirun import run_cli

from debugger.formats.records import GraphRecord, NodeRecord, StackFrame
from debugger.model import Graph, open_dump

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _line_of(script: str, text: str) -> int:
    """The one line of ``script`` whose stripped text is ``text`` (read from the file, not from tdbg)."""
    with open(os.path.join(ROOT, "dumps_sample", script), encoding="utf-8") as f:
        hits = [i for i, ln in enumerate(f.read().splitlines(), 1) if ln.strip() == text]
    assert len(hits) == 1, (script, text, hits)
    return hits[0]


def _user_frames(frames: tuple[StackFrame, ...], script: str) -> list[StackFrame]:
    return [f for f in frames if os.path.basename(f.file) == script]


def test_mindspore_frames_and_module(sample_root: str) -> None:
    g = open_dump(os.path.join(sample_root, "single")).ranks[0].graph(0)
    (conv,) = [n for n in g.nodes() if n.op_type == "Conv2D" and not n.is_backward]
    assert conv.module == "network._backbone.conv1"          # from .../_backbone-Net/conv1-Conv2d
    assert all(isinstance(f, StackFrame) for f in conv.stack)
    user = _user_frames(conv.stack, "make_sample.py")[0]     # innermost of the user's frames
    code = "x = self.relu(self.conv1(x))"
    assert (user.line, user.end_line, user.code, user.is_framework) == (
        _line_of("make_sample.py", code), _line_of("make_sample.py", code), code, False)
    assert user.column > 0 and not user.forward_candidate
    framework = [f for f in conv.stack if "site-packages/mindspore/" in f.file]
    assert framework and all(f.is_framework for f in framework)
    assert all(not f.is_framework for f in _user_frames(conv.stack, "make_sample.py"))
    assert conv.stack_user_first[0] == user
    shown = run_cli("node", os.path.join(sample_root, "single"), conv.name, "--json")
    (d,) = json.loads(shown.out)["nodes"]
    assert d["module"] == conv.module and {k: d["stack"][0][k] for k in ("file", "line", "column", "code")} == {
        "file": user.file, "line": user.line, "column": user.column, "code": user.code}
    # a backward kernel's frames are its forward node's candidates, the user's line among them
    (bwd,) = [n for n in g.nodes() if n.op_type == "Conv2DBackpropFilter"]
    assert _user_frames(bwd.stack, "make_sample.py")[0].line == user.line
    assert all(f.forward_candidate for f in bwd.stack)


def test_msprobe_frames_and_module(sample_root: str) -> None:
    g = open_dump(os.path.join(sample_root, "msprobe", "pair_baseline")).ranks[0].graph(0)
    script = "make_msprobe_sample.py"
    cases = {"Functional.linear.0.forward": ("fc1", "h = self.act(self.fc1(x))"),
             "Functional.linear.1.forward": ("block.0", "h = self.block(h)"),
             "Functional.linear.2.forward": ("head", "return self.head(h)")}
    for name, (module, code) in cases.items():
        n = g.node(name)
        assert n.module == module, name
        inner = _user_frames(n.stack, script)[0]
        assert (inner.line, inner.code, inner.is_framework) == (_line_of(script, code), code, False), name
        # msprobe lists frames innermost first: torch's own modules come before the user's line
        assert n.stack[0].is_framework and "site-packages/torch/" in n.stack[0].file
    assert g.node("Module.fc1.Linear.forward.0").module == "fc1"
    assert g.node("fc1.weight").module == "fc1" and g.node("fc1.weight").is_parameter


def test_tdbg_h5_version_2_sample_reads_frames_from_its_text(sample_root: str) -> None:
    g = open_dump(os.path.join(sample_root, "torch_single")).ranks[0].graph(0)
    conv = next(n for n in g.nodes() if n.op_type == "convolution" and not n.is_backward)
    assert conv.module == "conv1"            # the version 2 scope model/conv1-Conv2d
    code = "x = F.relu(self.conv1(x))"
    inner = conv.stack[0]
    assert (os.path.basename(inner.file), inner.line, inner.code, inner.is_framework) == (
        "make_torch_sample.py", _line_of("make_torch_sample.py", code), code, False)
    assert all(not f.is_framework for f in conv.stack)     # the recorder kept only the user's frames
    bwd = next(n for n in g.nodes() if n.op_type == "convolution_backward")
    assert bwd.stack == tuple(dataclasses.replace(f, forward_candidate=True) for f in conv.stack)


def test_version_2_frames_survive_a_conversion_to_the_current_version(sample_root: str, tmp_path: Any) -> None:
    from debugger.convert import convert
    from debugger.formats.tdbg_h5.layout import VERSION

    old = open_dump(os.path.join(sample_root, "torch_single"))
    target = str(tmp_path / "v3")
    convert(old, target)
    with open(os.path.join(target, "tdbg_dump.json"), encoding="utf-8") as f:
        assert f'"version": {VERSION}' in f.read() and VERSION >= 3
    a, b = old.ranks[0].graph(0), open_dump(target).ranks[0].graph(0)
    assert a.names() == b.names()
    assert [(n.stack, n.module) for n in a.nodes()] == [(n.stack, n.module) for n in b.nodes()]
    assert sum(len(n.stack) for n in b.nodes()) > 100


def test_recorder_frames_and_module_paths(tmp_path: Any) -> None:
    torch = pytest.importorskip("torch")
    from debugger.torch import Recorder

    class Body(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x: Any) -> Any:
            return self.fc(x)   # LINE_FC

    model = torch.nn.Sequential()
    model.add_module("body", Body())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    dump = str(tmp_path / "rec")
    with Recorder(dump, model, opt) as rec:
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        rec.step()
    with open(__file__, encoding="utf-8") as f:
        line = next(i for i, ln in enumerate(f.read().splitlines(), 1) if ln.endswith("# LINE_FC"))
    g = open_dump(dump).ranks[0].graph(0)
    (mm,) = [n for n in g.nodes() if n.op_type in ("addmm", "linear") and not n.is_backward]
    assert mm.module == "body.fc"
    inner = mm.stack[0]
    assert (inner.file, inner.line, inner.code, inner.is_framework) == (
        os.path.abspath(__file__), line, "return self.fc(x)   # LINE_FC", False)
    bwd = [n for n in g.nodes() if n.is_backward and n.stack and n.stack[0].line == line]
    assert bwd and all(f.forward_candidate for n in bwd for f in n.stack)
    rank = open_dump(dump).ranks[0]
    assert mm.name in {n for _, n in rank.layer_nodes("fc")}     # self.fc = ...: the layer's kernels by module
    assert {n for _, n in rank.layer_nodes("body")} >= {mm.name, "body.fc.weight", "body.fc.weight.grad"}


def test_a_record_field_added_at_runtime_reads_through_the_graph() -> None:
    """Graph and Node hold the reader's records themselves: a new field needs no change to be read."""
    Sharded = dataclasses.make_dataclass("Sharded", [("shard", tuple, dataclasses.field(default=()))],
                                         bases=(NodeRecord,))
    w = Sharded("w", "Parameter", "", is_parameter=True, kind="weight", shard=(0, 2))
    mm = Sharded("mm", "MatMul", "net", inputs=[("w", "data")], module="net", shard=(1, 2))
    g = Graph(GraphRecord(0, "g", [w, mm], ["mm"], "mem"))
    assert g.node("w").record.shard == (0, 2) and g.node("mm").record.shard == (1, 2)
    assert g.record_of("mm") is mm and g.successors("w") == ["mm"] and g.predecessors("mm") == ["w"]
    assert g.node("mm").module == "net" and g.kind_counts() == {"weight": 1, "other": 1}
