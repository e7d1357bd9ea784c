"""The /api endpoints of the trends view: a rank's per-step series as the view draws it. Each reads the
arguments and calls one function of :mod:`debugger.views.series`; a bad argument is a 400, a rank
without a series (or an unknown tensor) a 404, as everywhere in the API."""
from __future__ import annotations

import math
from typing import Any

from flask import Blueprint, request

from debugger.views import series as seriesviews
from debugger.errors import InvalidQueryError

from .params import flag_arg, int_arg, need_arg, rank_arg

trends_bp = Blueprint("trends", __name__, url_prefix="/api/ranks/<int:rank>/series")


def _float(name: str) -> float | None:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return None
    try:
        v = float(raw)
    except ValueError:
        raise InvalidQueryError(f"bad {name} {raw!r}: expected a number") from None
    if not math.isfinite(v):
        raise InvalidQueryError(f"bad {name} {raw!r}: expected a finite number")
    return v


def _range() -> dict[str, int | None]:
    return {"start": int_arg("start"), "stop": int_arg("stop")}


@trends_bp.get("")
def catalog(rank: int) -> dict[str, Any]:
    """The series' tensors (with role, parameter, layer), its steps and what can be asked
    (``available: false`` with a message when the rank records none)."""
    return seriesviews.catalog(rank_arg(rank))


@trends_bp.get("/curve")
def curve(rank: int) -> dict[str, Any]:
    """``?tensor=&stat=&start=&stop=&points=``: one statistic, min/max per bucket."""
    return seriesviews.curve(rank_arg(rank), need_arg("tensor"), request.args.get("stat", "l2norm"),
                             points=int_arg("points"), **_range())


@trends_bp.get("/heatmap")
def heatmap(rank: int) -> dict[str, Any]:
    """``?stat=&role=&agg=&log=&start=&stop=&columns=``: tensors (grouped by layer) x step buckets."""
    return seriesviews.heatmap(rank_arg(rank), request.args.get("stat", "l2norm"), role=request.args.get("role", "weight"),
                               agg=request.args.get("agg", "max"), log=flag_arg("log"), columns=int_arg("columns"), **_range())


@trends_bp.get("/scalars")
def scalars(rank: int) -> dict[str, Any]:
    """``?start=&stop=&points=``: loss, lr, grad_norm, loss_scale, min/max per bucket."""
    return seriesviews.scalars(rank_arg(rank), points=int_arg("points"), **_range())


@trends_bp.get("/spikes")
def spikes(rank: int) -> dict[str, Any]:
    """``?window=&z=&top=``: the loss spikes, their ranked causes and the nearest deep capture."""
    return seriesviews.spikes(rank_arg(rank), window=int_arg("window"), z=_float("z"), top=int_arg("top"))
