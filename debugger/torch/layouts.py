"""The rank's place in a parallel job, from PyTorch's own facts: the device meshes and, per parameter,
where this rank's shard sits in the logical tensor (DTensor placements for FSDP2 and tensor
parallelism, FSDP1's flat-parameter bookkeeping, DDP's replicas), and the pipeline stage.

The indices a DTensor shard holds are asked of DTensor itself: ``distribute_tensor`` without a source
rank splits a tensor of indices locally, with no communication, the way it splits the parameter
(uneven chunks and FSDP x TP's strided sharding included).
"""
from __future__ import annotations

from typing import Any, Iterable

import torch

from ..formats.parallel import FLAT, REPLICATE, MeshRecord, RankLayout, Run, ShardRecord
from . import capture as C
from .pipeline import stages_of


def rank_layout(model: torch.nn.Module, root: torch.nn.Module, pipeline: Any = None) -> RankLayout | None:
    """The layout of this rank (None: a single process, nothing parallel)."""
    meshes: dict[str, MeshRecord] = {}
    params: dict[str, ShardRecord] = {}
    cache: dict[tuple, tuple[tuple[Run, ...], ...]] = {}
    for name, p in root.named_parameters():
        name = C.clean_name(name)
        if _is_dtensor(p):
            params[name] = _dtensor_shard(p, meshes, cache)
    params.update(_fsdp1_shards(model, meshes))
    ddp = model if isinstance(model, torch.nn.parallel.DistributedDataParallel) else None
    if ddp is not None:
        mesh = _group_mesh(meshes, "dp", getattr(ddp, "process_group", None))
        for name, p in root.named_parameters():
            params.setdefault(C.clean_name(name), ShardRecord(mesh, (REPLICATE,), tuple(p.shape)))
    stage, stages, micro = _pipeline_facts(pipeline)
    if not meshes and stage is None:
        return None
    return RankLayout(meshes, params, stage, stages, micro)


def _is_dtensor(p: Any) -> bool:
    return type(p) is not torch.nn.Parameter and type(p) is not torch.Tensor and \
        hasattr(p, "device_mesh") and hasattr(p, "placements") and hasattr(p, "_local_tensor")


def _dtensor_shard(p: Any, meshes: dict[str, MeshRecord], cache: dict[tuple, Any]) -> ShardRecord:
    mesh = p.device_mesh
    dims = tuple(mesh.mesh_dim_names or (f"dim{i}" for i in range(mesh.ndim)))
    key = ",".join(dims)
    meshes.setdefault(key, MeshRecord(dims, tuple(mesh.mesh.shape), tuple(int(r) for r in mesh.mesh.flatten())))
    placements = tuple(p.placements)
    shape = tuple(p.shape)
    names = tuple(_placement_name(pl) for pl in placements)
    ck = (key, shape, names)
    index = cache.get(ck)
    if index is None:
        index = cache[ck] = _dtensor_index(shape, mesh, placements)
    return ShardRecord(key, names, shape, index)


def _placement_name(pl: Any) -> str:
    """``Shard(0)``, ``Replicate()``, ``Partial(sum)``, ``_StridedShard(dim=0, sf=2)`` (DTensor's str() is terse)."""
    kind = type(pl).__name__
    if kind == "_StridedShard":
        return f"_StridedShard(dim={pl.dim}, sf={pl.split_factor})"
    if kind == "Shard":
        return f"Shard({pl.dim})"
    if kind == "Partial":
        return f"Partial({getattr(pl, 'reduce_op', 'sum')})"
    return REPLICATE if kind == "Replicate" else repr(pl)


def _dtensor_index(shape: tuple[int, ...], mesh: Any, placements: tuple[Any, ...]) -> tuple[tuple[Run, ...], ...]:
    """Per dimension, the runs of indices this rank's shard holds, as DTensor splits them."""
    from torch.distributed.tensor import distribute_tensor
    out = []
    for d in range(len(shape)):
        ix = torch.arange(shape[d]).reshape([shape[d] if k == d else 1 for k in range(len(shape))]).expand(shape)
        local = distribute_tensor(ix, mesh, placements, src_data_rank=None).to_local()
        if local.numel() == 0:
            out.append(() if local.shape[d] == 0 else ((0, shape[d]),))
            continue
        line = local[tuple(slice(None) if k == d else 0 for k in range(len(shape)))]
        out.append(_runs(int(i) for i in line))
    return tuple(out)


def _runs(indices: Iterable[int]) -> tuple[Run, ...]:
    runs: list[list[int]] = []
    for i in indices:
        if runs and runs[-1][1] == i:
            runs[-1][1] = i + 1
        else:
            runs.append([i, i + 1])
    return tuple((a, b) for a, b in runs)


def _group_mesh(meshes: dict[str, MeshRecord], dim: str, group: Any) -> str:
    """A one-dimensional mesh of a process group's ranks (the whole world when ``group`` is None)."""
    import torch.distributed as dist
    ranks = tuple(dist.get_process_group_ranks(group)) if group is not None else tuple(range(dist.get_world_size()))
    key = dim if dim not in meshes or meshes[dim].ranks == ranks else f"{dim}{len(meshes)}"
    meshes.setdefault(key, MeshRecord((dim,), (len(ranks),), ranks))
    return key


def _fsdp1_shards(model: torch.nn.Module, meshes: dict[str, MeshRecord]) -> dict[str, ShardRecord]:
    """FSDP1 (``use_orig_params=True``): each original parameter's elements in this rank's part of
    its unit's flat parameter (the names in a unit's flat parameter are relative to the unit)."""
    out: dict[str, ShardRecord] = {}
    for path, unit in model.named_modules():
        handle = getattr(unit, "_handle", None)
        flat = getattr(handle, "flat_param", None)
        if flat is None or not hasattr(flat, "_shard_param_infos"):
            continue
        mesh = _group_mesh(meshes, "fsdp", getattr(unit, "process_group", None))
        prefix = C.clean_name(path)
        for fqn, shape, info in zip(flat._fqns, flat._shapes, flat._shard_param_infos):
            name = C.clean_name(f"{prefix}.{fqn}" if prefix else fqn)
            run = (info.intra_param_start_idx, info.intra_param_end_idx + 1) if info.in_shard else (0, 0)
            out[name] = ShardRecord(mesh, (FLAT,), tuple(shape), flat=run)
    return out


def _pipeline_facts(pipeline: Any) -> tuple[int | None, int | None, int | None]:
    """(stage, stages, micro-batches) of a ``torch.distributed.pipelining`` stage or schedule."""
    stages = stages_of(pipeline)
    if not stages:
        return None, None, None
    index, count = getattr(stages[0], "stage_index", None), getattr(stages[0], "num_stages", None)
    micro = getattr(pipeline, "_n_microbatches", None)
    return (index if isinstance(index, int) else None, count if isinstance(count, int) else None,
            micro if isinstance(micro, int) else None)
