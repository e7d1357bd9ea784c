"""Request parsing for every route: the arguments as typed values (a bad one is a 400 that names it), the
page every list answers with, the rank, graph and tensor a request names, the JSON body."""
from __future__ import annotations

from typing import Any

from flask import abort, current_app, request

from debugger import Graph, QueryError, Rank, TensorRef, query
from debugger.errors import InvalidQueryError

from . import guard, validate
from .session import Workspace

_TRUE = ("1", "true", "yes", "on")


def workspace() -> Workspace:
    """The app's dumps, caches and scan sessions."""
    return current_app.extensions["tdbg"]


def current_dump_id() -> str:
    """The dump the request names (``dump``; default: the only or first one)."""
    return workspace().resolve(request.args.get("dump"))


def int_arg(name: str, default: int | None = None) -> int | None:
    """An integer argument (a bad one is a 400 naming it); ``default`` when absent or empty."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    return validate.int_text(name, raw)


def need_arg(name: str) -> str:
    """A required argument (400 when absent or empty)."""
    v = request.args.get(name)
    if v is None or v == "":
        raise InvalidQueryError(f"missing parameter {name!r}")
    return v


def flag_arg(name: str, default: bool = False) -> bool:
    """A yes/no argument (1, true, yes, on)."""
    raw = request.args.get(name)
    return default if raw is None else raw.lower() in _TRUE


def paged(items: list[Any], **extra: Any) -> dict[str, Any]:
    """``items`` as one page: ``begin`` and ``end`` as every list of the API takes them."""
    begin = int_arg("begin", 0) or 0
    return query.page(items, begin, int_arg("end"), current_app.config["PAGE_SIZE"]).to_dict(**extra)


def rank_arg(rank: int) -> Rank:
    """The rank of the request's dump."""
    return workspace().dump(current_dump_id()).rank(rank)


def graph_arg(rank: int, graph_id: int) -> tuple[Rank, Graph]:
    """A rank and one of its graphs."""
    r = rank_arg(rank)
    return r, r.graph(graph_id)


def iteration_arg(r: Rank, graph_id: int) -> int:
    """The ``iteration`` argument, else the graph's first dumped iteration."""
    its = r.iterations(graph_id)
    it = int_arg("iteration")
    if it is None:
        if not its:
            raise QueryError(r.path, f"graph {graph_id} has no dumped iteration")
        return its[0]
    return it


def tensor_arg(rank: int, graph_id: int) -> tuple[Rank, TensorRef]:
    """The tensor the arguments name (node, io, slot, iteration); 409 while its iteration is being written."""
    r = rank_arg(rank)
    it = iteration_arg(r, graph_id)
    if not workspace().readable(current_dump_id(), rank, [it]):     # a file of it may be half-written: not read, not cached
        abort(409, description=f"rank {rank} iteration {it} is still being written by the job: its tensors "
                               f"are read once a later iteration appears or the dump is quiet for 2 s")
    return r, query.find_tensor(r, graph_id, it, need_arg("node"), request.args.get("io", "output"),
                                int_arg("slot", 0) or 0)


def view_options() -> dict[str, Any]:
    """The graph view's options: the fold count and whether framework nodes are shown."""
    return {"fold": int_arg("fold", current_app.config["FOLD"]), "framework": flag_arg("framework")}


def value_cap() -> int:
    """How many values a values answer may hold (``cap``, at most the app's VALUE_CAP)."""
    cap = current_app.config["VALUE_CAP"]
    want = int_arg("cap", cap) or cap
    if want <= 0:
        raise InvalidQueryError(f"bad cap {want}: expected a positive integer")
    return min(want, cap)


def json_body() -> dict[str, Any]:
    """The request's JSON object (the guard checked its size and depth)."""
    # Parsed by the guard: size- and depth-checked, no NaN/Infinity, an object.
    data = guard.body()
    if data is None:
        raise InvalidQueryError("bad body: expected a JSON object (Content-Type: application/json)")
    return data
