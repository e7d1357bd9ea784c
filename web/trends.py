"""The /api endpoints of the trends view: a rank's per-step series as the view draws it. Each reads the
arguments and calls one function of :mod:`debugger.views.series`; a bad argument is a 400, a rank
without a series (or an unknown tensor) a 404, as everywhere in the API."""
from __future__ import annotations

import math
from typing import Any

from flask import Blueprint, request

from debugger.views import series as seriesviews
from debugger.errors import InvalidQueryError

from .api import _flag, _int, _need, _rank

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
    return {"start": _int("start"), "stop": _int("stop")}


@trends_bp.get("")
def catalog(rank: int) -> dict[str, Any]:
    """The series' tensors (with role, parameter, layer), its steps and what can be asked
    (``available: false`` with a message when the rank records none)."""
    return seriesviews.catalog(_rank(rank))


@trends_bp.get("/curve")
def curve(rank: int) -> dict[str, Any]:
    """``?tensor=&stat=&start=&stop=&points=``: one statistic, min/max per bucket."""
    return seriesviews.curve(_rank(rank), _need("tensor"), request.args.get("stat", "l2norm"),
                             points=_int("points"), **_range())


@trends_bp.get("/heatmap")
def heatmap(rank: int) -> dict[str, Any]:
    """``?stat=&role=&agg=&log=&start=&stop=&columns=``: tensors (grouped by layer) x step buckets."""
    return seriesviews.heatmap(_rank(rank), request.args.get("stat", "l2norm"), role=request.args.get("role", "weight"),
                               agg=request.args.get("agg", "max"), log=_flag("log"), columns=_int("columns"), **_range())


@trends_bp.get("/scalars")
def scalars(rank: int) -> dict[str, Any]:
    """``?start=&stop=&points=``: loss, lr, grad_norm, loss_scale, min/max per bucket."""
    return seriesviews.scalars(_rank(rank), points=_int("points"), **_range())


@trends_bp.get("/spikes")
def spikes(rank: int) -> dict[str, Any]:
    """``?window=&z=&top=``: the loss spikes, their ranked causes and the nearest deep capture."""
    return seriesviews.spikes(_rank(rank), window=_int("window"), z=_float("z"), top=_int("top"))
