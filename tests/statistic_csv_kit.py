"""MindSpore statistic.csv dumps (saved_data statistic/full: GPU and Ascend only, so CPU cannot write one):
written in the real layout from the committed MindSpore 2.10 dump, each row computed from its real .npy."""
from __future__ import annotations

import csv
import json
import os
import shutil

import numpy as np

from debugger.formats.mindspore.filenames import parse_tensor_file_name
from debugger.stats.core import Stats, tensor_stats

SINGLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dumps_sample", "single")
FIXED = ["Op Type", "Op Name", "Task ID", "Stream ID", "Timestamp", "IO", "Slot", "Data Size", "Data Type", "Shape"]
# 2.0-2.2: a fixed set; 2.3+: statistic_category (default max, min, l2norm), any of them, in MindSpore's order
HEADERS = {
    "2.2": ["Max Value", "Min Value", "Avg Value", "Count", "Negative Zero Count", "Positive Zero Count", "NaN Count",
            "Negative Inf Count", "Positive Inf Count", "Zero Count"],
    "2.3-default": ["Max Value", "Min Value", "L2Norm Value"],
    "2.3-all": ["Max Value", "Min Value", "Avg Value", "Count", "Negative Zero Count", "Positive Zero Count",
                "NaN Count", "Negative Inf Count", "Positive Inf Count", "Zero Count", "MD5", "L2Norm Value"],
}
SIGMOID = "Default/network-WithLossCell/_backbone-Net/sigmoid-Sigmoid/Sigmoid-op0"


def _cell(col: str, a: np.ndarray, s: Stats | None = None) -> str:
    s = s or tensor_stats(a)
    value = {"Max Value": s.max, "Min Value": s.min, "Avg Value": s.mean, "L2Norm Value": s.l2norm, "Count": s.count,
             "Negative Zero Count": s.negatives, "Positive Zero Count": s.positives, "NaN Count": s.nan,
             "Negative Inf Count": s.neg_inf, "Positive Inf Count": s.pos_inf, "Zero Count": s.zeros}.get(col)
    if col == "MD5":
        import hashlib

        return hashlib.md5(np.ascontiguousarray(a).tobytes()).hexdigest()
    return repr(value) if value is not None else ""


def make_statistic_dump(dst: str, header: str, keep_npy: bool, iterations: tuple[int, ...] = (0, 1, 2),
                        nan_at: tuple[int, str] | None = None) -> str:
    """A copy of the real dump with statistic.csv in each iteration dir (and the .npy files only when ``keep_npy``)."""
    net0 = os.path.join(SINGLE, "rank_0", "Net", "0")
    skip = {str(i) for i in range(100) if i not in iterations}
    shutil.copytree(SINGLE, dst, ignore=lambda d, names: [n for n in names if d == net0 and n in skip])
    net = os.path.join(dst, "rank_0", "Net", "0")
    for it in sorted(os.listdir(net)):
        d = os.path.join(net, it)
        rows = []
        for name in sorted(os.listdir(d)):
            f = parse_tensor_file_name(name)
            if f is None:
                continue
            a = np.load(os.path.join(d, name))
            st = tensor_stats(a)
            stats = [_cell(c, a, st) for c in HEADERS[header]]
            if nan_at == (int(it), f.op_name) and f.io == "output":
                stats = [{"NaN Count": "3", "Max Value": "nan", "Min Value": "nan", "Avg Value": "nan",
                          "L2Norm Value": "nan"}.get(c, v) for c, v in zip(HEADERS[header], stats)]
            rows.append([f.op_type, f.op_name, f.task_id, f.stream_id, f.timestamp, f.io, f.slot, a.nbytes,
                         a.dtype.name, "(" + ",".join(str(x) for x in a.shape) + ")"] + stats)
            if not keep_npy:
                os.unlink(os.path.join(d, name))
        with open(os.path.join(d, "statistic.csv"), "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(FIXED + HEADERS[header])
            w.writerows(rows)
    meta = os.path.join(dst, "rank_0", ".dump_metadata")
    with open(os.path.join(meta, "data_dump.json")) as fh:
        cfg = json.load(fh)
    cfg["common_dump_settings"]["saved_data"] = "full" if keep_npy else "statistic"
    with open(os.path.join(meta, "data_dump.json"), "w") as fh:
        json.dump(cfg, fh)
    with open(os.path.join(meta, "config.json"), "w") as fh:
        json.dump({"device_target": "GPU", "ms_version": "2.3.0" if header != "2.2" else "2.2.0"}, fh)
    return dst
