"""Decode ``ms_output_trace_code_graph_N.pb`` (debug_graph.proto's ModelProto) into records."""
from __future__ import annotations

from ...errors import CorruptFileError
from ..files import read_bytes
from ..records import GraphRecord, NodeRecord, OutputType
from .stacks import module_of_scope, parse_stack

_DTYPE_NAMES = {
    1: "bool", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "uint8", 7: "uint16",
    8: "uint32", 9: "uint64", 10: "float16", 11: "float32", 12: "float64", 13: "string",
    43: "complex64", 44: "complex128", 46: "bfloat16",
}


def _output_types(type_proto) -> list[OutputType]:  # type: ignore[no-untyped-def]
    if type_proto.HasField("sequence_type"):
        out: list[OutputType] = []
        for t in type_proto.sequence_type.elem_types:
            out.extend(_output_types(t))
        return out
    if type_proto.HasField("tensor_type"):
        tt = type_proto.tensor_type
        shape = tuple(int(d.size) for d in tt.shape.dim) if tt.HasField("shape") else None
        return [OutputType(_DTYPE_NAMES.get(tt.elem_type), shape)]
    if type_proto.data_type in _DTYPE_NAMES:
        return [OutputType(_DTYPE_NAMES[type_proto.data_type], ())]
    return []


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while pos < len(data) and shift < 70:
        b = data[pos]
        out |= (b & 0x7F) << shift
        pos += 1
        shift += 7
        if not b & 0x80:
            return out, pos
    raise ValueError("truncated varint")


def _int_value(data: bytes) -> int | None:
    """The integer of a constant's ValueProto (dtype=1, int_val=3), None when it holds no integer.
    Decoded by hand: tdbg's proto keeps constant values as bytes (their layout varies)."""
    pos = 0
    try:
        while pos < len(data):
            tag, pos = _varint(data, pos)
            field, wire = tag >> 3, tag & 7
            if wire == 0:
                value, pos = _varint(data, pos)
                if field == 3:
                    return value - (1 << 64) if value >= 1 << 63 else value
            elif wire == 2:
                size, pos = _varint(data, pos)
                pos += size
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
            else:
                return None
    except ValueError:
        return None
    return None


def _text(value: str | bytes) -> str:
    """A proto2 string field as text: the parser hands back bytes when they are not valid UTF-8."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def read_graph_pb(path: str, graph_id: int) -> GraphRecord:
    """Read one graph .pb file."""
    from ...proto import debug_graph_pb2  # generated code is loaded only when a .pb is opened
    from google.protobuf.message import DecodeError

    data = read_bytes(path, "graph")
    if not data:
        raise CorruptFileError(path, "empty graph file")
    model = debug_graph_pb2.ModelProto()  # type: ignore[attr-defined]
    try:
        model.ParseFromString(data)
    except (DecodeError, RecursionError) as exc:   # deeply nested messages exhaust the parser's stack
        raise CorruptFileError(path, f"not a MindSpore ModelProto ({exc})") from exc
    if not model.HasField("graph") or not model.graph.node:
        raise CorruptFileError(path, "not a MindSpore ModelProto (no graph nodes)")
    g = model.graph
    consts = {_text(c.key): _text(c.full_name or c.key) for c in g.const_vals}
    ints = {_text(c.key): _int_value(c.value) for c in g.const_vals if c.value}
    params = {_text(p.name) for p in g.parameters}
    seq_to_full: dict[str, str] = {}
    for n in g.node:
        seq_to_full[_text(n.name)] = _text(n.full_name) or f"{_text(n.op_type)}-{_text(n.name)}"

    def resolve(raw: str | bytes) -> str:
        ref = _text(raw)
        if ref in consts:
            return consts[ref]
        if ref in params:
            return ref
        return seq_to_full.get(ref, ref)

    nodes: list[NodeRecord] = []
    for p in g.parameters:
        nodes.append(NodeRecord(
            name=_text(p.name), op_type="Parameter", scope="", outputs=_output_types(p.type),
            is_parameter=True, has_default=p.HasField("default_val")))
    for full in consts.values():
        nodes.append(NodeRecord(name=full, op_type="Constant", scope="", is_constant=True))
    for n in g.node:
        inputs = [(resolve(i.name), "control" if i.type == 1 else "data") for i in n.input]
        op_type = _text(n.op_type)
        # a tuple element's index is a constant input: the element is which output slot a value is
        item = ints.get(_text(n.input[1].name)) if op_type == "TupleGetItem" and len(n.input) > 1 else None
        nodes.append(NodeRecord(
            name=seq_to_full[_text(n.name)], op_type=op_type, scope=_text(n.scope), inputs=inputs,
            outputs=_output_types(n.output_type), stack=parse_stack(_text(n.source_address)),
            module=module_of_scope(_text(n.scope)),
            instance_name=_text(n.instance_name), item=item))
    outputs = [resolve(o.name) for o in g.outputs]
    return GraphRecord(graph_id, _text(g.name) or f"graph_{graph_id}", nodes, outputs, path)
