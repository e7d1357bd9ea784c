"""Records of a parallel layout: the device meshes of a rank and where its shard of each parameter sits
in the logical (full) tensor. Every format that knows a layout hands out these; the JSON shape of
:func:`layout_to_dict` is what tdbg-h5 keeps in ``rank.json`` (docs/tdbg-h5-format.md).

A shard says, per logical dimension, which index runs ``[start, stop)`` its local tensor holds, in
order (``Shard(d)`` on one mesh dimension is one run; DTensor's strided sharding of FSDP x TP is
several), or, for FSDP1's flat parameters, which elements of the logical tensor flattened.
Two ranks whose shards hold the same indices are replicas of each other; shards with different
indices are parts of one logical tensor.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

Run = tuple[int, int]

REPLICATE, FLAT = "Replicate()", "Flat"


@dataclass(frozen=True)
class MeshRecord:
    """A device mesh: dimension names, sizes, and the global rank at each place (row-major)."""

    dims: tuple[str, ...]
    shape: tuple[int, ...]
    ranks: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.dims) != len(self.shape) or math.prod(self.shape) != len(self.ranks):
            raise ValueError(f"mesh {self.dims} of shape {self.shape} lists {len(self.ranks)} ranks")

    def coordinate(self, rank: int) -> tuple[int, ...] | None:
        """Where ``rank`` sits in the mesh (None: not in it)."""
        try:
            flat = self.ranks.index(rank)
        except ValueError:
            return None
        coord = []
        for size in reversed(self.shape):
            coord.append(flat % size)
            flat //= size
        return tuple(reversed(coord))

    def group(self, rank: int, dim: str) -> tuple[int, ...]:
        """The ranks that share every coordinate of ``rank`` but ``dim`` (its process group along ``dim``)."""
        coord = self.coordinate(rank)
        if coord is None:
            return ()
        d = self.dims.index(dim)
        out = []
        for k in range(self.shape[d]):
            c = list(coord)
            c[d] = k
            out.append(self.ranks[_flat_index(c, self.shape)])
        return tuple(out)


def _flat_index(coord: list[int], shape: tuple[int, ...]) -> int:
    flat = 0
    for c, size in zip(coord, shape):
        flat = flat * size + c
    return flat


@dataclass(frozen=True)
class ShardRecord:
    """One rank's part of one logical tensor (a parameter, and its gradient and optimizer state)."""

    mesh: str                                   # a key of RankLayout.meshes
    placements: tuple[str, ...]                 # per mesh dimension: "Shard(0)", "Replicate()", "Partial(sum)",
                                                # "_StridedShard(dim=0, sf=2)", "Flat" (FSDP1)
    shape: tuple[int, ...]                      # the logical tensor's shape
    index: tuple[tuple[Run, ...], ...] | None = None   # per logical dimension, the runs the local tensor holds
    flat: Run | None = None                     # FSDP1: elements [start, stop) of the logical tensor flattened

    @property
    def local_size(self) -> int:
        """Elements of the local tensor."""
        if self.flat is not None:
            return self.flat[1] - self.flat[0]
        if self.index is None:
            return math.prod(self.shape)
        return math.prod(sum(b - a for a, b in runs) for runs in self.index)

    @property
    def local_shape(self) -> tuple[int, ...]:
        """Shape of the local tensor."""
        if self.flat is not None:
            return (self.flat[1] - self.flat[0],)
        if self.index is None:
            return self.shape
        return tuple(sum(b - a for a, b in runs) for runs in self.index)

    @property
    def is_partial(self) -> bool:
        """The local values are partial sums (the logical tensor is their sum over the mesh dimension)."""
        return any(p.startswith("Partial") for p in self.placements)

    def key(self) -> tuple[Any, ...]:
        """Equal for replicas (the same indices of the same logical tensor)."""
        return (self.shape, self.index, self.flat)

    def covers_whole(self) -> bool:
        """The local tensor is the whole logical tensor (a replica, not a part)."""
        return self.local_size == math.prod(self.shape) and not self.is_partial


@dataclass(frozen=True)
class RankLayout:
    """A rank's place in a parallel job."""

    meshes: Mapping[str, MeshRecord] = field(default_factory=dict)
    params: Mapping[str, ShardRecord] = field(default_factory=dict)    # by parameter (logical) name
    stage: int | None = None                 # pipeline stage of the rank (None: no pipeline)
    stages: int | None = None                # how many stages
    micro_batches: int | None = None         # micro-batches per iteration


def layout_to_dict(layout: RankLayout) -> dict[str, Any]:
    """The JSON shape of a layout."""
    return {
        "meshes": {k: {"dims": list(m.dims), "shape": list(m.shape), "ranks": list(m.ranks)}
                   for k, m in layout.meshes.items()},
        "params": {k: _shard_to_dict(s) for k, s in layout.params.items()},
        "stage": layout.stage, "stages": layout.stages, "micro_batches": layout.micro_batches,
    }


def _shard_to_dict(s: ShardRecord) -> dict[str, Any]:
    out: dict[str, Any] = {"mesh": s.mesh, "placements": list(s.placements), "shape": list(s.shape)}
    if s.index is not None:
        out["index"] = [[list(r) for r in runs] for runs in s.index]
    if s.flat is not None:
        out["flat"] = list(s.flat)
    return out


def layout_from_dict(obj: Any) -> RankLayout:
    """A layout from its JSON shape; ValueError saying what is wrong when it is not one."""
    if not isinstance(obj, dict):
        raise ValueError("layout is not a JSON object")
    meshes = {}
    for k, m in _mapping(obj.get("meshes", {}), "meshes").items():
        m = _mapping(m, f"mesh {k!r}")
        meshes[str(k)] = MeshRecord(tuple(str(d) for d in _list(m.get("dims"), "dims")),
                                    _ints(m.get("shape"), "shape"), _ints(m.get("ranks"), "ranks"))
    params = {}
    for k, s in _mapping(obj.get("params", {}), "params").items():
        s = _mapping(s, f"parameter {k!r}")
        if s.get("mesh") not in meshes:
            raise ValueError(f"parameter {k!r} names mesh {s.get('mesh')!r}, which the layout does not list")
        index = None if s.get("index") is None else tuple(
            tuple(_run(r) for r in _list(runs, "index")) for runs in _list(s["index"], "index"))
        flat = None if s.get("flat") is None else _run(s["flat"])
        shape = _ints(s.get("shape"), "shape")
        if index is not None and len(index) != len(shape):
            raise ValueError(f"parameter {k!r}: index has {len(index)} dimensions, shape {len(shape)}")
        params[str(k)] = ShardRecord(str(s["mesh"]), tuple(str(p) for p in _list(s.get("placements"), "placements")),
                                     shape, index, flat)
    return RankLayout(meshes, params, _opt_int(obj.get("stage")), _opt_int(obj.get("stages")),
                      _opt_int(obj.get("micro_batches")))


def _mapping(v: Any, what: str) -> dict:
    if not isinstance(v, dict):
        raise ValueError(f"{what} is not a JSON object")
    return v


def _list(v: Any, what: str) -> list:
    if not isinstance(v, list):
        raise ValueError(f"{what} is not a list")
    return v


def _ints(v: Any, what: str) -> tuple[int, ...]:
    items = _list(v, what)
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in items):
        raise ValueError(f"{what} holds something other than integers >= 0")
    return tuple(items)


def _run(v: Any) -> Run:
    a, b = _ints(v, "a run")[:2] if isinstance(v, list) and len(v) == 2 else (None, None)
    if a is None or b is None or b < a:
        raise ValueError(f"{v!r} is not a run [start, stop)")
    return (a, b)


def _opt_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None
