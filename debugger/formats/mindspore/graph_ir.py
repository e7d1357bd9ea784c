"""Read the ``.ir`` text graph: the fallback when the ``.pb`` is missing or unreadable."""
from __future__ import annotations

import re

from ...errors import CorruptFileError
from ..files import read_text
from ..records import GraphRecord, NodeRecord, OutputType
from .stacks import is_stack_line, module_of_scope, parse_stack

_PARAM_RE = re.compile(r"^%para\d+_(?P<name>[^:\s]+)\s*:\s*<(?P<type>[^>]*)>(?P<rest>.*)$")
_NODE_RE = re.compile(r"^\s*%(?P<id>\d+)\((?P<label>[^)]*)\)\s*=\s*(?P<op>[\w.:]+)\((?P<args>.*?)\)(?:\s|$)")
_FULLNAME_RE = re.compile(r"#\s*Fullname with scope:\s*\((?P<name>[^)]*)\)")
_REF_RE = re.compile(r"%(para\d+_[^,\s)]+|\d+)")
_TENSOR_RE = re.compile(r"Tensor\[(?P<dtype>\w+)\],\s*\((?P<shape>[^)]*)\)")
_INT_LITERAL_RE = re.compile(r"^I(?:8|16|32|64)\((?P<value>-?\d+)\)$")
_RETURN_RE = re.compile(r"^\s*(?:%\d+\([^)]*\)\s*=\s*)?Return\((?P<arg>%\d+)")


def _split_args(text: str) -> list[str]:
    """Split call arguments on top-level commas."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _tensor_types(text: str) -> list[OutputType]:
    out = []
    for m in _TENSOR_RE.finditer(text):
        dims = [d.strip() for d in m.group("shape").split(",") if d.strip()]
        try:
            shape = tuple(int(d) for d in dims)
        except ValueError:
            shape = None
        out.append(OutputType(m.group("dtype").lower(), shape))
    return out


def _arg_ref(arg: str) -> str:
    m = re.fullmatch(r"%(para\d+_\S+|\d+)", arg.strip())
    return m.group(1) if m else ""


def read_graph_ir(path: str, graph_id: int) -> GraphRecord:
    """Read one graph .ir file."""
    lines = read_text(path, "graph").splitlines()
    params: dict[str, str] = {}       # "%para4_fc1.weight" -> "fc1.weight"
    nodes: list[NodeRecord] = []
    id_to_name: dict[str, str] = {}
    pending: list[tuple[NodeRecord, list[str]]] = []
    current: NodeRecord | None = None
    source: list[str] = []
    output_ref = ""

    def finish() -> None:
        if current is not None:
            current.stack = parse_stack("\n".join(source), outermost_first=True)

    for line in lines:
        rm = _RETURN_RE.match(line)
        if rm:
            finish()
            output_ref = rm.group("arg")[1:]
            current, source = None, []
            continue
        pm = _PARAM_RE.match(line)
        if pm:
            name = pm.group("name")
            params[line.split(":", 1)[0].lstrip("%")] = name
            nodes.append(NodeRecord(
                name=name, op_type="Parameter", scope="", outputs=_tensor_types("<" + pm.group("type") + ">"),
                is_parameter=True, has_default="has_default" in pm.group("rest")))
            continue
        nm = _NODE_RE.match(line)
        if nm:
            finish()
            op = nm.group("op").split("::")[-1]
            op = op[len("PrimFunc_"):] if op.startswith("PrimFunc_") else op
            current = NodeRecord(name="", op_type=op, scope="")
            source = []
            args = _split_args(nm.group("args"))
            if op == "TupleGetItem" and len(args) > 1:
                lit = _INT_LITERAL_RE.match(args[1].strip())   # TupleGetItem(%3, I64(2)): element 2
                current.item = int(lit.group("value")) if lit else None
            pending.append((current, [_arg_ref(a) for a in args]))
            id_to_name[nm.group("id")] = ""
            current.instance_name = nm.group("id")  # temporary: the %N id until the full name is known
            continue
        if current is None:
            continue
        stripped = line.strip()
        fm = _FULLNAME_RE.search(stripped)
        if fm:
            current.name = fm.group("name")
            current.scope = current.name.rsplit("/", 1)[0] if "/" in current.name else ""
            current.module = module_of_scope(current.scope)
        elif is_stack_line(stripped):
            source.append(stripped)
        elif stripped.startswith(": (") and not current.outputs and "->" in stripped:
            current.outputs = _tensor_types(stripped.split("->", 1)[1])
    finish()
    if not pending:
        raise CorruptFileError(path, "no graph nodes found in .ir text")
    for rec, _ in pending:
        if not rec.name:
            rec.name = f"{rec.op_type}-ir{rec.instance_name}"
        id_to_name[rec.instance_name] = rec.name
    for rec, refs in pending:
        for ref in refs:
            # Literal arguments (Bool(0), UMonad[U]) keep their slot with an empty name, so
            # input positions match the .pb (ApplyMomentum's gradient is input 3 in both).
            if ref.startswith("para"):
                rec.inputs.append((params.get(ref, ref.split("_", 1)[-1]), "data"))
            else:
                rec.inputs.append((id_to_name.get(ref, ""), "data"))
        rec.instance_name = ""
        nodes.append(rec)
    outputs = [id_to_name[output_ref]] if output_ref in id_to_name else []
    return GraphRecord(graph_id, f"kernel_graph{graph_id}", nodes, outputs, path)
