"""A tensor: its summary and histogram, history, values, difference from its previous value, .npy."""
from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request

from debugger import query
from debugger.errors import InvalidQueryError, NoEarlierValue

from ..params import current_dump_id, int_arg, tensor_arg, value_cap, workspace

tensors_bp = Blueprint("tensors", __name__, url_prefix="/api")


@tensors_bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/tensor")
def tensor(rank: int, graph_id: int) -> dict[str, Any]:
    """Digest, statistics and histogram of one tensor in one iteration."""
    r, ref = tensor_arg(rank, graph_id)
    bins = int_arg("bins")
    if bins is not None and not 1 <= bins <= 512:
        raise InvalidQueryError(f"bad bins {bins}: expected 1 to 512")
    out = workspace().stats_of(current_dump_id(), lambda c: query.tensor_summary(ref, c, bins))
    out["previous_iteration"] = r.previous_iteration(graph_id, ref.iteration)
    return out


@tensors_bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/tensor/history")
def tensor_history(rank: int, graph_id: int) -> dict[str, Any]:
    """Statistics of the tensor in every dumped iteration (a page of iterations)."""
    r, ref = tensor_arg(rank, graph_id)
    begin, end = int_arg("begin", 0) or 0, int_arg("end")
    pg = workspace().stats_of(current_dump_id(), lambda c: query.tensor_history(r, ref, c, begin, end))
    return pg.to_dict(node=ref.node, io=ref.io, slot=ref.slot)


@tensors_bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/tensor/values")
def tensor_values(rank: int, graph_id: int) -> dict[str, Any]:
    """Values of a slice (``slice=[0, :, :]``), at most ``cap`` of them."""
    _, ref = tensor_arg(rank, graph_id)
    return query.tensor_values(ref, request.args.get("slice"), value_cap())


@tensors_bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/tensor/diff")
def tensor_diff(rank: int, graph_id: int) -> dict[str, Any]:
    """Current, previous-iteration and difference values of a slice, with their statistics; a tensor with no
    earlier value (its first iteration, an activation) is ``{"available": false, "reason"}``, a normal answer
    and no 404: the page asks for every tensor it shows."""
    r, ref = tensor_arg(rank, graph_id)
    try:
        return {"available": True, **query.tensor_diff(r, ref, request.args.get("slice"), value_cap())}
    except NoEarlierValue as exc:
        return {"available": False, "reason": exc.problem}


@tensors_bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/tensor/npy")
def tensor_npy(rank: int, graph_id: int) -> Response:
    """The tensor as an .npy download."""
    _, ref = tensor_arg(rank, graph_id)
    name, data = query.tensor_npy(ref)
    return Response(data, mimetype="application/octet-stream",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})
