"""Where an msprobe dump's files are: ``DUMP/step{N}/{rank{R}|proc{PID}}/{dump.json, stack.json, construct.json}``."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ..files import is_number

STEP_RE = re.compile(r"^step([0-9]{1,18})\Z")
RANK_RE = re.compile(r"^rank([0-9]{1,18})\Z")
PROC_RE = re.compile(r"^proc([0-9]{1,18})\Z")
DUMP_JSON, STACK_JSON, CONSTRUCT_JSON, DATA_DIR = "dump.json", "stack.json", "construct.json", "dump_tensor_data"


def _dirs(path: str) -> list[os.DirEntry]:
    try:
        return sorted((e for e in os.scandir(path) if e.is_dir(follow_symlinks=False)), key=lambda e: e.name)
    except OSError:
        return []


def is_rank_dir(path: str) -> bool:
    """A ``rank{R}``/``proc{PID}`` folder holding a ``dump.json``."""
    name = os.path.basename(os.path.normpath(path))
    return bool(RANK_RE.match(name) or PROC_RE.match(name)) and os.path.isfile(os.path.join(path, DUMP_JSON))


def is_step_dir(path: str) -> bool:
    """A ``step{N}`` folder with at least one rank folder."""
    if not STEP_RE.match(os.path.basename(os.path.normpath(path))):
        return False
    return any(is_rank_dir(e.path) for e in _dirs(path))


def is_root(path: str) -> bool:
    """A folder holding ``step{N}`` folders (cheap: stops at the first one that has a rank)."""
    return any(STEP_RE.match(e.name) and is_step_dir(e.path) for e in _dirs(path))


@dataclass
class RootListing:
    """Rank number -> step -> rank folder, and what was odd."""

    ranks: dict[int, dict[int, str]] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)      # rank -> its folder name (rank3, proc1234)
    warnings: list[str] = field(default_factory=list)


def list_root(root: str) -> RootListing:
    """Every step and rank folder of a dump root; ``proc{PID}`` folders become ranks 0, 1 ... by PID."""
    out = RootListing()
    procs: dict[str, list[tuple[int, str]]] = {}
    for s in _dirs(root):
        m = STEP_RE.match(s.name)
        if not m or not is_number(m.group(1)):
            continue
        step = int(m.group(1))
        for r in _dirs(s.path):
            rm, pm = RANK_RE.match(r.name), PROC_RE.match(r.name)
            if not (rm or pm):
                continue
            if not os.path.isfile(os.path.join(r.path, DUMP_JSON)):
                out.warnings.append(f"{r.path}: no {DUMP_JSON}; skipped")
                continue
            if rm:
                out.ranks.setdefault(int(rm.group(1)), {})[step] = r.path
                out.names[int(rm.group(1))] = r.name
            else:
                procs.setdefault(r.name, []).append((step, r.path))
    if procs:
        if out.ranks:
            out.warnings.append(f"{root}: both rank{{R}} and proc{{PID}} folders; the proc folders are skipped")
        else:
            if len(procs) > 1:
                out.warnings.append(f"{root}: {len(procs)} proc{{PID}} folders (several processes without "
                                    f"torch.distributed); read as ranks 0-{len(procs) - 1} in PID order")
            for i, name in enumerate(sorted(procs, key=lambda n: int(n[4:]))):
                out.ranks[i] = dict(procs[name])
                out.names[i] = name
    return out


def root_of(path: str) -> str | None:
    """The dump root ``path`` is, or lies in (a step folder or a rank folder of one)."""
    p = os.path.abspath(path)
    if not os.path.isdir(p):
        return None
    if is_root(p):
        return p
    if is_step_dir(p):
        return os.path.dirname(p)
    if is_rank_dir(p) and STEP_RE.match(os.path.basename(os.path.dirname(p))):
        return os.path.dirname(os.path.dirname(p))
    return None
