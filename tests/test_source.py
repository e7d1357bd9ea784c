"""Source stacks: every frame form, user code first, and FILE:LINE -> forward and backward nodes."""
from __future__ import annotations

import os

import pytest
from clirun import run_cli

from debugger.errors import QueryError
from debugger import open_dump
from debugger.formats.mindspore.stacks import is_framework_path, parse_frame, parse_stack
from debugger.model.source import CodeHit, SourceIndex, parse_location, statement_lines, user_first

SP = "/opt/env/lib/python3.11/site-packages/mindspore"
# The .pb text of a forward node (MindSpore 2.10): innermost frame first.
FORWARD_PB = (
    f"      # In file {SP}/nn/layer/basic.py:807, 12~39/        x = self.matmul(x, self.weight)/\n"
    f"      # In file {SP}/nn/layer/basic.py:803~815, 4~16/    def construct(self, x):/\n"
    "      # In file /home/u/train.py:11, 21~29/        x = self.act(self.fc1(x))/\n"
    "      # In file /home/u/train.py:10~12, 4~26/    def construct(self, x):/\n"
    f"      # In file {SP}/nn/wrap/cell_wrapper.py:122, 14~28/        out = self._backbone(data)/\n")
# The .pb text of a backward node: only a forward-candidate section.
BACKWARD_PB = (
    "      # Corresponding forward node candidate:\n"
    f"      #  - In file {SP}/nn/layer/basic.py:807, 12~39/        x = self.matmul(x, self.weight)/\n"
    f"      #    In file {SP}/nn/layer/basic.py:803~815, 4~16/    def construct(self, x):/\n"
    "      #    In file /home/u/train.py:11, 21~29/        x = self.act(self.fc1(x))/\n"
    "      #    In file /home/u/train.py:10~12, 4~26/    def construct(self, x):/\n")


def _ir_text(pb_text: str) -> str:
    """The same stack as the .ir writes it: outermost first, no '- ' marker."""
    lines = pb_text.splitlines()
    head = [ln for ln in lines if "Corresponding forward" in ln]
    frames = ["      # " + ln.split("In file", 1)[0].strip("# -") + "In file" + ln.split("In file", 1)[1]
              for ln in lines if "In file" in ln]
    return "\n".join(head + frames[::-1])


@pytest.mark.parametrize("text, file, line, end, code", [
    ("# In file /p/train.py(49)/        x = self.conv(x)/", "/p/train.py", 49, 49, "x = self.conv(x)"),
    ("# In file /p/train.py:49/        x = self.conv(x)/", "/p/train.py", 49, 49, "x = self.conv(x)"),
    ("# In file /p/train.py:14, 22~31/        x = self.relu(self.conv(x))/", "/p/train.py", 14, 14,
     "x = self.relu(self.conv(x))"),
    ("# In file /p/train.py:49~51, 8~25/        y = f(a,/", "/p/train.py", 49, 51, "y = f(a,"),
    ("# In file /p/train.py:13~17, 4~26/    def construct(self, x):/", "/p/train.py", 13, 17,
     "def construct(self, x):"),
    ("#  - In file /p/train.py:7, 1~2/x/", "/p/train.py", 7, 7, "x"),
    ("#    In file /p/a b/train.py:7, 1~2/x = 'a/b'/", "/p/a b/train.py", 7, 7, "x = 'a/b'"),
    ("In file /p/train.py:8", "/p/train.py", 8, 8, ""),
    ("# In file C:\\work\\train.py:21, 4~9/    return x/", "C:\\work\\train.py", 21, 21, "return x"),
])
def test_source_parses_every_frame_form(text: str, file: str, line: int, end: int, code: str) -> None:
    f = parse_frame(text)
    assert f is not None
    assert (f.file, f.line, f.end_line, f.code, f.location) == (file, line, end, code, f"{file}:{line}")


@pytest.mark.parametrize("text", ["", "# Fullname with scope: (Default/Conv2D-op0)", "# Corresponding forward node "
                                  "candidate:", "# In file /p/train.py/no line/", "x = 1"])
def test_source_non_frames_give_none(text: str) -> None:
    assert parse_frame(text) is None


def test_source_framework_paths_are_recognised() -> None:
    assert is_framework_path(f"{SP}/nn/layer/basic.py")
    assert is_framework_path("/usr/lib/python3/dist-packages/x.py")
    assert is_framework_path("C:\\py\\Lib\\site-packages\\mindspore\\ops.py")
    assert not is_framework_path("/home/u/train.py")


def test_source_pb_stack_is_innermost_first_and_user_frames_rank_first() -> None:
    frames = parse_stack(FORWARD_PB)
    assert [f.line for f in frames] == [807, 803, 11, 10, 122]
    assert [f.is_framework for f in frames] == [True, True, False, False, True]
    assert not any(f.forward_candidate for f in frames)
    ranked = user_first(frames)
    assert [f.location for f in ranked[:2]] == ["/home/u/train.py:11", "/home/u/train.py:10"]
    assert [f.line for f in ranked[2:]] == [807, 803, 122]


def test_source_forward_candidate_sections_are_marked() -> None:
    frames = parse_stack(BACKWARD_PB)
    assert [f.line for f in frames] == [807, 803, 11, 10]
    assert all(f.forward_candidate for f in frames)
    assert [f.code for f in frames][2] == "x = self.act(self.fc1(x))"


@pytest.mark.parametrize("pb_text", [FORWARD_PB, BACKWARD_PB], ids=["forward", "backward"])
def test_source_ir_stack_outermost_first_parses_to_the_same_frames(pb_text: str) -> None:
    assert parse_stack(_ir_text(pb_text), outermost_first=True) == parse_stack(pb_text)


def test_source_multiline_statements_cover_their_lines_but_defs_do_not() -> None:
    stmt = parse_frame("# In file /p/t.py:49~51, 8~25/        y = f(a,/")
    deco = parse_frame('# In file /p/t.py:190~205, 4~22/    @jit(backend="ms_backend")/')
    func = parse_frame("# In file /p/t.py:13~17, 4~26/    def construct(self, x):/")
    assert stmt and deco and func
    assert [stmt.covers(n) for n in (48, 49, 50, 51, 52)] == [False, True, True, True, False]
    assert func.covers(13) and not func.covers(14) and not func.covers(17)
    assert deco.covers(190) and not deco.covers(191)


def test_source_index_suffix_matching_on_whole_components() -> None:
    idx = SourceIndex()
    idx.add(0, "fwd", parse_stack(FORWARD_PB), backward=False)
    idx.add(0, "bwd", parse_stack(BACKWARD_PB), backward=True)
    for query in ("train.py", "u/train.py", "/home/u/train.py"):
        assert sorted((h.node, h.direction) for _, h in idx.nodes_at(query, 11)) == [("bwd", "backward"),
                                                                                    ("fwd", "forward")]
    assert idx.nodes_at("rain.py", 11) == [] and idx.nodes_at("x/train.py", 11) == []
    assert idx.nodes_at("train.py", 12) == []          # inside the def's span: not the def's line
    assert {h.node for _, h in idx.nodes_at("train.py", 10)} == {"fwd", "bwd"}
    assert idx.files("basic.py") == [f"{SP}/nn/layer/basic.py"] and idx.is_framework(f"{SP}/nn/layer/basic.py")
    assert idx.lines("/home/u/train.py") == [10, 11] and idx.code("/home/u/train.py", 11) == "x = self.act(self.fc1(x))"
    assert idx.nodes_at("train.py", 11)[0] == ("/home/u/train.py", CodeHit(0, "fwd", "forward"))


@pytest.mark.parametrize("text, expected", [("train.py:14", ("train.py", 14)),
                                            ("/a/b/train.py:7", ("/a/b/train.py", 7)),
                                            ("C:\\a\\t.py:3", ("C:\\a\\t.py", 3)), (" t.py : 5", ("t.py", 5))])
def test_source_parse_location(text: str, expected: tuple[str, int]) -> None:
    assert parse_location(text) == expected


@pytest.mark.parametrize("text", ["train.py", "train.py:", ":14", "train.py:x"])
def test_source_bad_locations_raise_query_error(text: str) -> None:
    with pytest.raises(QueryError, match="expected FILE:LINE"):
        parse_location(text)


def _user_lines(root: str) -> dict[str, int]:
    with open(os.path.join(os.path.dirname(root), "train_user.py"), encoding="utf-8") as f:
        return {ln.strip(): i for i, ln in enumerate(f.read().splitlines(), 1)}


@pytest.mark.parametrize("from_ir", [False, True], ids=["pb", "ir"])
def test_source_nodes_at_returns_forward_and_backward_nodes(make_dump, from_ir: bool) -> None:
    root = make_dump(iterations=1, write_pb=not from_ir)
    dump, lines = open_dump(root), _user_lines(root)
    hits = dump.nodes_at("train_user.py", lines["x = self.fc1(x)"])
    got = sorted((h["direction"], h["node"].rsplit("/", 2)[-2] + "/" + h["node"].rsplit("/", 1)[-1]) for h in hits)
    assert got == [("backward", "Grad_BiasAdd/BiasAddGrad-op1"), ("backward", "Grad_MatMul/MatMul-op2"),
                   ("forward", "fc1-Dense/BiasAdd-op0"), ("forward", "fc1-Dense/MatMul-op0")]
    # the backward weight-gradient MatMul carries the LAST layer's scope but points at fc1's line
    assert any("/fc2-Dense/Grad_MatMul/" in h["node"] and h["kind"] == "gradient" for h in hits)
    act = {(h["direction"], h["op_type"]) for h in dump.nodes_at("train_user.py", lines["x = self.fc1_act(x)"])}
    assert act == {("forward", "Sigmoid"), ("backward", "SigmoidGrad")}


def test_source_def_line_does_not_swallow_the_function(make_dump) -> None:
    root = make_dump(iterations=1)
    dump, lines = open_dump(root), _user_lines(root)
    fc2 = {h["node"] for h in dump.nodes_at("train_user.py", lines["x = self.fc2(x)"])}
    assert fc2 and all("fc2-Dense" in n for n in fc2)
    assert dump.nodes_at("train_user.py", lines["return x"]) == []
    whole = {h["node"] for h in dump.nodes_at("train_user.py", lines["def construct(self, x):"])}
    assert fc2 < whole   # only the def's own line finds every node of the function


def test_source_user_frames_point_at_a_real_file(make_dump) -> None:
    root = make_dump(iterations=1)
    g = open_dump(root).rank(0).graph(0)
    frames = g.node("Default/network-WithLossCell/_backbone-Net/fc2-Dense/MatMul-op0").stack_user_first
    user = frames[0]
    assert not user.is_framework and os.path.isfile(user.file) and user.file.endswith("train_user.py")
    with open(user.file, encoding="utf-8") as f:
        assert f.read().splitlines()[user.line - 1].strip() == user.code == "x = self.fc2(x)"
    assert all(f.is_framework for f in frames[2:])


def test_source_real_sample_code_lookup(sample_root: str) -> None:
    dump = open_dump(os.path.join(sample_root, "single"))
    users = [p for p in dump.source_index.all_files() if not dump.source_index.is_framework(p)]
    assert users
    path = users[0]
    directions = {h["direction"] for ln in dump.source_index.lines(path) for h in dump.nodes_at(path, ln)}
    assert directions == {"forward", "backward"}


@pytest.mark.parametrize("text,line,expected", [
    ("x = f(\n    a,\n    b)\ny = 1\n", 2, [1, 2, 3]),
    ("x = f(\n    a,\n    b)\ny = 1\n", 4, [4]),
    ("for i in range(\n        3):\n    x = i\n", 2, [1, 2]),     # a compound statement: its header
    ("def f(a,\n      b):\n    return a\n", 3, [3]),
    ("x = (\n", 1, []),                                            # does not parse
    ("x = 1\n", 9, []),
])
def test_statement_lines(text: str, line: int, expected: list[int]) -> None:
    assert statement_lines(text, line) == expected


def test_source_a_line_inside_a_multi_line_statement_finds_the_statement(make_dump, tmp_path) -> None:
    """The stacks name a statement's first line; asking for its second line finds the same nodes,
    through the statement's span read from the file (only under the allowed source roots)."""
    root = make_dump(iterations=1)
    lines = _user_lines(root)
    first = lines["x = self.fc2(x)"]      # followed by "return x", which made no node
    script = os.path.join(os.path.dirname(root), "train_user.py")
    with open(script, encoding="utf-8") as f:
        text = f.read().splitlines()
    text[first - 1:first] = ["        x = self.fc2(", "            x)"]
    with open(script, "w", encoding="utf-8") as f:
        f.write("\n".join(text) + "\n")
    want = run_cli("code", root, f"train_user.py:{first}", "--json").json["nodes"]
    assert want
    inside = run_cli("code", root, f"train_user.py:{first + 1}", "--json", "--source-root", os.path.dirname(root))
    assert inside.code == 0 and inside.json["nodes"] == want
    # the command line also reads the recorded path as it is (for its own user); the server does not
    assert run_cli("code", root, f"train_user.py:{first + 1}", "--json").json["nodes"] == want
    from debugger.model.sourceroots import SourceRoots
    assert SourceRoots([root]).statement_lines(script, first + 1) == []
    assert SourceRoots([root], trust_recorded=True).statement_lines(script, first + 1) == [first, first + 1]


def test_source_a_layer_definition_line_finds_the_layer(sample_root: str) -> None:
    """The README's example: make_sample.py:195 is inside ``self.fc3 = nn.Dense(...)`` in __init__, a line
    that makes no node itself; it finds fc3's parameters, its forward kernels and, by graph evidence,
    their gradients and optimizer state (not the other layers' gradients that share fc3's scope)."""
    r = run_cli("code", os.path.join(sample_root, "single"), "make_sample.py:195", "--json")
    assert r.code == 0 and r.json["nodes"], r.err
    assert {n["direction"] for n in r.json["nodes"]} == {"definition"}
    names = {n["node"] for n in r.json["nodes"]}
    assert {"fc3.weight", "fc3.bias", "moments.fc3.weight"} <= names
    g = open_dump(os.path.join(sample_root, "single")).rank(0).graph(0)
    assert all(g.node(n).param in (None, "fc3.weight", "fc3.bias") for n in names)
    assert any(g.node(n).kind == "gradient" for n in names)
