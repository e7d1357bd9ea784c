"""Walk a MindSpore dump tree (rank_N/<net>/<graph_id>/<iteration>/) using directory listings only."""
from __future__ import annotations

import csv
import io
import json
import os
import re
from bisect import bisect_left
from dataclasses import dataclass, field
from stat import S_ISREG
from typing import Iterator, NamedTuple

from ...errors import CorruptFileError, DumpError
from ..files import Folder, is_number, list_folders, read_text
from .filenames import TensorFileName, parse_tensor_file_name, parse_tensor_file_names

RANK_RE = re.compile(r"^rank_(\d{1,18})\Z", re.ASCII)
GRAPH_PB_RE = re.compile(r"^ms_output_trace_code_graph_(\d{1,18})\.pb\Z", re.ASCII)
GRAPH_IR_RE = re.compile(r"^ms_output_trace_code_graph_(\d{1,18})\.ir\Z", re.ASCII)
EXEC_ORDER_RE = re.compile(r"^ms_execution_order_graph_(\d{1,18})\.csv\Z", re.ASCII)
RUN_HISTORY_RE = re.compile(r"^ms_global_execution_order_graph_(\d{1,18})\.csv\Z", re.ASCII)


def graph_pb_name(graph_id: int) -> str:
    """The name MindSpore gives a graph's protobuf file (what GRAPH_PB_RE matches)."""
    return f"ms_output_trace_code_graph_{graph_id}.pb"


_NOT_NETS = {"graphs", "execution_order"}


class TensorFile(NamedTuple):
    """A tensor file found in an iteration dir: its parsed name, path and size in bytes (a tuple: one per
    file of a dump, tens of thousands)."""

    path: str
    name: TensorFileName
    size: int
    mtime_ns: int = 0


@dataclass
class RankListing:
    """Everything a rank dir holds, from listings and small metadata files only."""

    rank: int
    path: str
    nets: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict)        # .dump_metadata/config.json
    dump_config: dict = field(default_factory=dict)   # .dump_metadata/data_dump.json
    graph_pb: dict[int, str] = field(default_factory=dict)
    graph_ir: dict[int, str] = field(default_factory=dict)
    exec_order: dict[int, str] = field(default_factory=dict)
    run_history: dict[int, str] = field(default_factory=dict)
    # (graph_id, iteration) -> tensor files
    tensors: dict[tuple[int, int], list[TensorFile]] = field(default_factory=dict)
    constants: dict[int, list[TensorFile]] = field(default_factory=dict)
    statistics: dict[tuple[int, int], str] = field(default_factory=dict)   # (graph, iteration) -> statistic.csv
    warnings: list[str] = field(default_factory=list)


def is_rank_dir(path: str) -> bool:
    """Whether ``path`` is a ``rank_N`` directory."""
    return os.path.isdir(path) and RANK_RE.match(os.path.basename(os.path.normpath(path))) is not None


def rank_dirs(root: str) -> list[tuple[int, str]]:
    """The ``rank_N`` children of a dump root, sorted by rank."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    out = []
    for e in entries:
        m = RANK_RE.match(e.name)
        if m and e.is_dir():
            out.append((int(m.group(1)), e.path))
    return sorted(out)


def _read_json(path: str, warnings: list[str]) -> dict:
    if not os.path.lexists(path):
        return {}
    try:
        data = json.loads(read_text(path, "json"))
        return data if isinstance(data, dict) else {}
    except CorruptFileError as exc:
        warnings.append(f"{exc}; metadata ignored")
        return {}
    except (ValueError, RecursionError) as exc:   # RecursionError: '[' * 200000 nests past the parser's depth
        warnings.append(f"{path}: unreadable metadata ({exc.__class__.__name__}); ignored")
        return {}


def net_names(path: str) -> list[str]:
    """The net folders of a rank dir, sorted (what :func:`list_rank` puts in ``nets``, without listing
    them); [] when the rank dir cannot be listed."""
    try:
        with os.scandir(path) as it:
            return sorted(e.name for e in it if _is_net(e))
    except OSError:
        return []


def _is_net(e: os.DirEntry) -> bool:
    return _is_dir(e) and not e.name.startswith(".") and e.name not in _NOT_NETS


def _is_dir(e: os.DirEntry) -> bool:
    try:
        return e.is_dir()
    except OSError:
        return False


def _listed(path: str, warnings: list[str]) -> list[os.DirEntry]:
    """The entries of a directory; [] with a warning when it cannot be listed (permissions)."""
    try:
        return sorted(os.scandir(path), key=lambda e: e.name)
    except OSError as exc:
        warnings.append(f"{path}: cannot list ({exc.strerror or exc}); skipped")
        return []


def _scan_dir(path: str, patterns: tuple[re.Pattern[str], ...], warnings: list[str]) -> list[dict[int, str]]:
    """For each pattern, {number: path} of the matching entries of ``path`` (one listing for all)."""
    out: list[dict[int, str]] = [{} for _ in patterns]
    try:
        entries = list(os.scandir(path))
    except FileNotFoundError:
        return out     # an absent graphs/ or execution_order/ folder is reported where it is missed
    except OSError as exc:
        # unlistable (permissions) or not a folder at all: say so, else its graphs silently go missing
        warnings.append(f"{path}: cannot list ({exc.strerror or exc}); skipped")
        return out
    for e in entries:
        for found, pattern in zip(out, patterns):
            m = pattern.match(e.name)
            if m:
                found[int(m.group(1))] = e.path
    return out


def _read_mapping(path: str, warnings: list[str]) -> dict[str, str]:
    """mapping.csv: numbers that stand for file names over 255 characters."""
    out: dict[str, str] = {}
    try:
        for row in csv.reader(io.StringIO(read_text(path, "csv"), newline="")):
            if len(row) >= 2 and row[0].strip() and not row[0].lower().startswith(("file", "number")):
                out[row[0].strip()] = row[1].strip()
    except CorruptFileError as exc:
        warnings.append(f"{exc}; long file names stay unresolved")
    except csv.Error as exc:
        warnings.append(f"{path}: unreadable csv ({exc}); long file names stay unresolved")
    return out


def _parse_with_mapping(name: str, mapping: dict[str, str]) -> TensorFileName | None:
    parsed = parse_tensor_file_name(name)
    if parsed is not None or not mapping:
        return parsed
    stem = name[:-4] if name.endswith(".npy") else name
    if stem in mapping:
        full = mapping[stem]
        return parse_tensor_file_name(full if full.endswith(".npy") else full + ".npy")
    head, dot, rest = stem.partition(".")
    if head in mapping and dot:
        return parse_tensor_file_name(f"{mapping[head]}.{rest}.npy")
    return None


def list_tensor_dir(path: str, warnings: list[str]) -> list[TensorFile]:
    """Tensor files of one iteration dir; names that match no grammar become warnings."""
    return tensor_files(list_folders([path])[0], warnings)


def tensor_files(folder: Folder, warnings: list[str]) -> list[TensorFile]:
    """Tensor files of one iteration dir as :func:`list_folders` found it; names that match no grammar
    become warnings."""
    path = folder.path
    if folder.error is not None:
        warnings.append(f"{path}: cannot list ({folder.error})")
        return []
    names = folder.names
    at = [i for i, n in enumerate(names) if n.endswith(".npy")]
    npys = [names[i] for i in at]
    parsed = parse_tensor_file_names(npys)   # the whole folder in one pass
    if "mapping.csv" in names:
        mapping = _read_mapping(os.path.join(path, "mapping.csv"), warnings)
        parsed = [p if p is not None else _parse_with_mapping(n, mapping) for n, p in zip(npys, parsed)]
    out: list[TensorFile] = []
    append = out.append
    make = TensorFile._make        # the namedtuple's own fast constructor from an iterable
    prefix = os.path.join(path, "")
    bad: list[str] = []
    special = [n for n in folder.folders if n.endswith(".npy")]   # a folder is never read as a tensor
    stats = folder.stats
    for i, n, name in zip(at, npys, parsed):
        if name is None:
            bad.append(n)
            continue
        mode = stats[3 * i]
        if mode == -1:
            continue  # vanished between listing and stat
        if not S_ISREG(mode):
            special.append(n)    # a FIFO or device would block or never end: never read
            continue
        append(make((prefix + n, name, stats[3 * i + 1], stats[3 * i + 2])))
    if special:
        warnings.append(f"{path}: {len(special)} tensor file(s) are not regular files (FIFO, device, socket), "
                        f"skipped: {', '.join(sorted(special)[:3])}{' ...' if len(special) > 3 else ''}")
    if bad:
        shown = ", ".join(sorted(bad)[:3])
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        warnings.append(
            f"{path}: {len(bad)} file name(s) match no tensor file grammar, skipped: {shown}{more}")
    return out


def read_metadata(path: str, warnings: list[str]) -> tuple[dict, dict]:
    """(config.json, data_dump.json) of a rank dir; {} for what is missing."""
    meta = os.path.join(path, ".dump_metadata")
    if not os.path.isdir(meta):
        meta = os.path.join(path, ".metadata")
    return (_read_json(os.path.join(meta, "config.json"), warnings),
            _read_json(os.path.join(meta, "data_dump.json"), warnings))


def list_rank(rank: int, path: str) -> RankListing:
    """List one rank dir: graphs, execution orders and tensor files (metadata: read_metadata)."""
    got = list_ranks([(rank, path)])[0]
    if isinstance(got, DumpError):
        raise got
    return got


def list_ranks(ranks: list[tuple[int, str]]) -> list[RankListing | DumpError]:
    """:func:`list_rank` of many rank dirs at once: every tensor folder of every rank is listed and
    stated in one :func:`list_folders` call (spread over processes at a 1,000-rank job's hundreds of
    thousands of files). A rank dir that cannot be listed is its DumpError, in its place."""
    listings: list[RankListing | DumpError] = []
    plans: list[list[tuple[int, int | None, str] | str]] = []
    for rank, path in ranks:
        lst = RankListing(rank, path)
        try:
            plans.append(_plan_rank(lst))
            listings.append(lst)
        except DumpError as exc:
            plans.append([])
            listings.append(exc)
    wanted = [step[2] for plan in plans for step in plan if not isinstance(step, str)]
    folders = iter(list_folders(wanted))
    for lst, plan in zip(listings, plans):
        if not isinstance(lst, DumpError):
            _fill_rank(lst, plan, folders)
    return listings


def outline_rank(rank: int, path: str) -> RankListing:
    """A rank dir's graphs, execution orders, nets and tensor folders' (graph, iteration) keys, each with
    no file: what :func:`list_rank` gives without listing a tensor folder (graph ids, iterations)."""
    lst = RankListing(rank, path)
    for step in _plan_rank(lst):
        if not isinstance(step, str) and step[1] is not None:
            lst.tensors.setdefault((step[0], step[1]), [])
    return lst


def _plan_rank(lst: RankListing) -> list[tuple[int, int | None, str] | str]:
    """A rank's graph files and execution orders, and its tensor folders: (graph, iteration or None for
    constants, folder), or a warning in its place in the order."""
    path = lst.path
    graphs_dir = os.path.join(path, "graphs")
    lst.graph_pb, lst.graph_ir = _scan_dir(graphs_dir, (GRAPH_PB_RE, GRAPH_IR_RE), lst.warnings)
    eo_dir = os.path.join(path, "execution_order")
    lst.exec_order, lst.run_history = _scan_dir(eo_dir, (EXEC_ORDER_RE, RUN_HISTORY_RE), lst.warnings)
    try:
        children = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError as exc:
        raise CorruptFileError(path, f"cannot list rank dir ({exc.strerror})") from exc
    plan: list[tuple[int, int | None, str] | str] = []
    for net in children:
        if not _is_net(net):
            continue
        lst.nets.append(net.name)
        for gdir in _listed(net.path, lst.warnings):
            if not _is_dir(gdir):
                continue
            if not is_number(gdir.name):
                lst.warnings.append(f"{gdir.path}: not a graph id directory; skipped")
                continue
            gid = int(gdir.name)
            for idir in _listed(gdir.path, lst.warnings):
                if not _is_dir(idir):
                    continue
                if idir.name == "constants":
                    plan.append((gid, None, idir.path))
                elif is_number(idir.name):
                    plan.append((gid, int(idir.name), idir.path))
                else:
                    plan.append(f"{idir.path}: not an iteration directory; skipped")
    return plan


def _fill_rank(lst: RankListing, plan: list[tuple[int, int | None, str] | str], folders: Iterator[Folder]) -> None:
    """The rank's tensor files from its planned folders, listed (the next ones of ``folders``)."""
    for step in plan:
        if isinstance(step, str):
            lst.warnings.append(step)
            continue
        gid, it, where = step
        folder = next(folders)
        files = tensor_files(folder, lst.warnings)
        if it is None:
            lst.constants[gid] = files
            continue
        key = (gid, it)
        lst.tensors.setdefault(key, []).extend(files)
        if _holds_file(folder, "statistic.csv"):
            lst.statistics[key] = os.path.join(where, "statistic.csv")


def _holds_file(folder: Folder, name: str) -> bool:
    """Whether ``folder`` holds a regular file (or a link to one) ``name``."""
    if folder.error is not None:   # unlistable: its files may still be there to open
        return os.path.isfile(os.path.join(folder.path, name))
    i = bisect_left(folder.names, name)
    return i < len(folder.names) and folder.names[i] == name and folder.stats[3 * i] != -1 \
        and S_ISREG(folder.stats[3 * i])
