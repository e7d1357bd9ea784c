"""The per-step statistics series of ``Recorder(series=True)``: at every ``rec.step()``, one step of
statistics of each trained parameter's weight, gradient, optimizer state and update, plus the loss,
learning rate, loss scale and global gradient norm (debugger/formats/tdbg_h5/series.py stores them).

What each name holds (docs/pytorch.md, "The per-step series"):
- ``fc1.weight`` (role weight): the weight after the step's optimizer step;
- ``fc1.weight.grad`` (gradient): the gradient as ``optimizer.step()`` found it (after a loss scaler's
  unscale; a step the scaler skipped: the gradient as ``rec.step()`` finds it);
- ``exp_avg.fc1.weight`` ... (optimizer_state): the optimizer's state tensors after the step, named as
  the deep capture names their nodes (0-d step counters left out);
- ``fc1.weight.update`` (update): w_t - w_{t-1}, the change since the previous ``rec.step()``.
Scalars: ``loss`` the sum of the roots ``backward()`` started from in the step (micro-batches: the sum
of their losses); ``lr`` the first parameter group's of the first optimizer that stepped, as its step began; ``loss_scale`` a GradScaler's
scale as the optimizer step began (found when its ``step(optimizer)`` runs, or given; a step it
skipped: the scale at ``rec.step()``, after its ``update()``); ``grad_norm`` the L2 norm of all gradients.

Nothing here may change or stop the training: the Recorder calls every method inside a guard, and the
first failure warns once and turns the series off. Segments are written by one background thread.
"""
from __future__ import annotations

import math
import sys
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Sequence

import numpy as np
import torch

from ..formats.tdbg_h5.series import SEGMENT_STEPS, SeriesWriter
from . import capture as C
from .seriesstats import COL, rows_of, to_host

# how often the pending steps become readable on disk: what a crash (SIGKILL) can lose, about a second;
# each write is a small segment of the steps since the last (merged into the 4096-step one later)
FLUSH_SECONDS = 1.0
HOST_EVERY = 32         # device rows copied to the host every this many steps (CPU: at once)


class SeriesCapture:
    """One rank's series while the Recorder runs."""

    def __init__(self, rank_dir: str, root: torch.nn.Module, optimizers: Sequence[torch.optim.Optimizer],
                 param_name: dict[int, str], *, flush_seconds: float = FLUSH_SECONDS,
                 segment_steps: int = SEGMENT_STEPS, scaler: Any = None) -> None:
        self.rank_dir = rank_dir
        self.root = root
        self.optimizers = list(optimizers)
        self.param_name = param_name
        self.flush_seconds = float(flush_seconds)
        self.segment_steps = segment_steps
        self.scaler = scaler
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="tdbg-series")
        self._pending: list[Future[Any]] = []
        self._writer: SeriesWriter | None = None
        self._names: list[str] | None = None      # the writer's tensors (None: no writer yet)
        self._loss: torch.Tensor | None = None
        self._lr: float | None = None
        self._scale: Any = None
        self._grad_rows: dict[int, Any] = {}       # id(param) -> its gradient's row, taken at step()
        self._prev: dict[int, torch.Tensor] = {}   # id(param) -> its value at the previous rec.step()
        self._unnamed: set[int] = set()            # ids of optimized tensors looked up among the model's names
        self._device_steps: list[tuple[int, Any, dict[str, Any]]] = []
        self._last_flush = time.monotonic()
        self.last_loss: float | None = None     # the host loss of the step just ended (for the triggers)
        self.last_grad_norm: float | None = None
        self.host_scalars = False        # the triggers read the loss on the host every step
        self._snapshot_all()

    # ---- called by the Recorder ---------------------------------------------------------------
    def on_backward(self, roots: Sequence[torch.Tensor]) -> None:
        """A backward pass starts from ``roots``: their sum is (part of) the step's loss."""
        for t in roots:
            if t.numel() == 1:
                v = t.detach().reshape(()).to(torch.float64)
                self._loss = v if self._loss is None else self._loss + v

    def on_optimizer_step(self, opt: torch.optim.Optimizer) -> None:
        """``opt.step()`` starts: its gradients as it sees them (and the GradScaler that called it)."""
        if self.scaler is None:
            self.scaler = _calling_scaler()
        if self._lr is None:
            self._lr = _lr([opt])       # the rate this step uses (a scheduler changes it after)
        if self._scale is None:
            self._scale = self._scale_now()     # the scale of this step's gradients (update() moves it)
        params = [p for grp in opt.param_groups for p in grp["params"]
                  if p.grad is not None and id(p) not in self._grad_rows]
        self._take_grads(params)

    def end_step(self, step: int) -> None:
        """``rec.step()`` ends step ``step``: its row of statistics is added to the series."""
        trained = self._trained()       # (read once a step: four uses below)
        late = [p for p in trained if p.grad is not None and id(p) not in self._grad_rows]
        self._take_grads(late)      # the optimizer did not step (a loss scaler skipped it)
        tensors, names, roles, params, grad_ids = self._tensors(trained)
        rows = self._rows(tensors, grad_ids, trained)
        scalars = self._scalars(grad_ids)
        self._grad_rows = {}
        self._loss = None
        if names != self._names:
            self._submit(self._new_writer, list(names), list(roles), list(params))
            self._names = names
        self._device_steps.append((step, rows, scalars))
        host_now = isinstance(rows, np.ndarray) or len(self._device_steps) >= HOST_EVERY
        now = time.monotonic()
        flush = now - self._last_flush >= self.flush_seconds
        if host_now or flush:
            self._hand_over(flush)
            if flush:
                self._last_flush = now

    def flush(self) -> None:
        """Make every ended step readable now (a checkpoint segment), and wait for it."""
        self._hand_over(True)
        self._last_flush = time.monotonic()
        self._wait()

    def close(self) -> None:
        """Write every pending step and stop the writer thread."""
        try:
            self._hand_over(True)
            self._submit(self._close_writer)
            self._wait()
        finally:
            self._pool.shutdown(wait=True)

    # ---- the step's tensors -------------------------------------------------------------------
    def _trained(self) -> list[torch.Tensor]:
        seen: dict[int, torch.Tensor] = {}
        for opt in self.optimizers:
            for grp in opt.param_groups:
                for p in grp["params"]:
                    if id(p) not in self.param_name and id(p) not in self._unnamed:
                        self._unnamed.add(id(p))     # looked up once: an optimizer may hold non-module tensors
                        self._learn_names()
                    if id(p) in self.param_name and C.is_plain(C.local(p)) and _judged(p.dtype):
                        seen.setdefault(id(p), p)
        return list(seen.values())

    def _learn_names(self) -> None:
        """Name the parameters the model gained since the recording began (a layer added mid-run and given
        to the optimizer): the series takes them from their first step (a new segment's tensors)."""
        for n, p in self.root.named_parameters():
            self.param_name.setdefault(id(p), C.clean_name(n))

    def _tensors(self, trained: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[str], list[str], list[str],
                                                             list[int]]:
        """Weights, optimizer state and updates (gradients come from their rows taken at step())."""
        tensors: list[torch.Tensor] = []
        names: list[str] = []
        roles: list[str] = []
        params: list[str] = []
        grad_ids: list[int] = []
        multi = len(self.optimizers) > 1
        for p in trained:
            pname = self.param_name[id(p)]
            w = C.local(p).detach()
            tensors.append(_magnitudes(w))
            names.append(pname)
            roles.append("weight")
            params.append(pname)
            prev = self._prev.get(id(p))
            if prev is not None and prev.shape == w.shape:
                _sub_into(w, prev)        # prev now holds the update (copied back below)
                tensors.append(_magnitudes(prev))
                names.append(f"{pname}.update")
                roles.append("update")
                params.append(pname)
        for k, opt in enumerate(self.optimizers):
            prefix = f"optimizer{k}." if multi else ""
            for p, st in opt.state.items():
                pname = self.param_name.get(id(p))
                if pname is None:
                    continue
                for key, v in st.items():
                    v = C.local(v)
                    if isinstance(v, torch.Tensor) and v.dim() > 0 and _judged(v.dtype) and C.is_plain(v):
                        tensors.append(_magnitudes(v.detach()))
                        names.append(f"{prefix}{key}.{pname}")
                        roles.append("optimizer_state")
                        params.append(pname)
        for p in trained:
            if id(p) in self._grad_rows:
                pname = self.param_name[id(p)]
                names.append(f"{pname}.grad")
                roles.append("gradient")
                params.append(pname)
                grad_ids.append(id(p))
        return tensors, names, roles, params, grad_ids

    def _take_grads(self, params: list[torch.Tensor]) -> None:
        by_dev: dict[Any, list[torch.Tensor]] = {}
        for p in params:
            g = C.local(p.grad)
            if C.is_plain(g) and _judged(g.dtype):
                by_dev.setdefault(g.device, []).append(p)
        for group in by_dev.values():
            rows = rows_of([_magnitudes(C.local(p.grad)) for p in group])
            for i, p in enumerate(group):
                self._grad_rows[id(p)] = rows[i]

    def _rows(self, tensors: list[torch.Tensor], grad_ids: list[int], trained: list[torch.Tensor]) -> Any:
        """The step's rows (weights/updates/state, then gradients), then the update buffers refreshed."""
        rows = rows_of(tensors)
        grads = [self._grad_rows[i] for i in grad_ids]
        self._snapshot_all(trained)
        if isinstance(rows, np.ndarray) and all(isinstance(g, np.ndarray) for g in grads):
            return np.concatenate([rows, np.stack(grads)]) if grads else rows
        dev = next(g.device for g in [rows, *grads] if isinstance(g, torch.Tensor))
        parts = [torch.as_tensor(rows, device=dev)] if len(rows) else []
        if grads:
            parts.append(torch.stack([torch.as_tensor(g, device=dev) for g in grads]))
        return torch.cat(parts)

    def _snapshot_all(self, trained: list[torch.Tensor] | None = None) -> None:
        """Each trained weight's value now, in a buffer kept for it (the next step's update)."""
        for p in self._trained() if trained is None else trained:
            w = C.local(p).detach()
            buf = self._prev.get(id(p))
            if buf is None or buf.shape != w.shape or buf.dtype != w.dtype or buf.device != w.device:
                buf = self._prev[id(p)] = torch.empty_like(w, memory_format=torch.contiguous_format)
            _copy_into(w, buf)

    def _scalars(self, grad_ids: list[int]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self._loss is not None:
            out["loss"] = self._loss
        lr = self._lr if self._lr is not None else _lr(self.optimizers)
        self._lr = None
        if lr is not None:
            out["lr"] = lr
        scale = self._scale if self._scale is not None else self._scale_now()
        self._scale = None
        if scale is not None:
            out["loss_scale"] = scale
        if grad_ids:
            l2 = [self._grad_rows[i][COL["l2norm"]] for i in grad_ids]
            if all(isinstance(v, (float, np.floating)) for v in l2):
                out["grad_norm"] = _global_norm([self._grad_rows[i] for i in grad_ids])
            else:
                out["grad_norm"] = torch.stack([torch.as_tensor(v) for v in l2]).pow(2).sum().sqrt()
        host = {k: v for k, v in out.items()
                if self.host_scalars or not isinstance(v, torch.Tensor) or v.device.type == "cpu"}
        self.last_loss = float(host["loss"]) if "loss" in host else None
        self.last_grad_norm = float(host["grad_norm"]) if "grad_norm" in host else None
        return out

    def _scale_now(self) -> Any:
        scale = getattr(self.scaler, "_scale", None) if self.scaler is not None else None
        if isinstance(scale, torch.Tensor) and getattr(self.scaler, "_enabled", True):
            return scale.detach().reshape(-1)[0].clone()
        return None

    # ---- the writer thread --------------------------------------------------------------------
    def _hand_over(self, flush: bool) -> None:
        """The pending steps to the writer thread (device rows copied to the host once)."""
        steps, self._device_steps = self._device_steps, []
        if steps:
            host = [(s, to_host(r), {k: float(v) for k, v in sc.items()}) for s, r, sc in steps]
            self._submit(self._add, host)
        if flush:
            self._submit(self._flush)

    def _submit(self, fn: Callable[..., Any], *args: Any) -> None:
        self._check()
        self._pending.append(self._pool.submit(fn, *args))

    def _check(self) -> None:
        """Raise the writer thread's first failure (the Recorder then turns the series off)."""
        done = [f for f in self._pending if f.done()]
        self._pending = [f for f in self._pending if not f.done()]
        for f in done:
            f.result()

    def _wait(self) -> None:
        for f in self._pending:
            f.result()
        self._pending = []

    def _new_writer(self, names: list[str], roles: list[str], params: list[str]) -> None:
        if self._writer is not None:
            self._writer.close()
        self._writer = SeriesWriter(self.rank_dir, names, roles=roles, params=params,
                                    segment_steps=self.segment_steps)

    def _add(self, steps: list[tuple[int, np.ndarray, dict[str, float]]]) -> None:
        assert self._writer is not None
        for step, rows, scalars in steps:
            self._writer.add(step, rows, scalars)

    def _flush(self) -> None:
        if self._writer is not None:
            self._writer.checkpoint()     # readable now; merged into the 4096-step segment later

    def _close_writer(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _judged(dtype: torch.dtype) -> bool:
    """A dtype the series keeps: floating point, and complex (by its magnitudes, as the scan judges it)."""
    return dtype.is_floating_point or dtype.is_complex


def _magnitudes(t: torch.Tensor) -> torch.Tensor:
    """``t`` as its statistics are taken: a complex tensor's magnitudes (its NaN and Inf kept), else itself."""
    return t.abs() if t.is_complex() else t


def _global_norm(rows: list[np.ndarray]) -> float:
    """The L2 norm of all gradients from their host rows (whose value statistics skip non-finite
    elements): NaN when one holds a NaN, else infinite when one holds an infinity."""
    block = np.stack(rows)
    if np.nansum(block[:, COL["nan"]]) > 0:
        return math.nan
    if np.nansum(block[:, COL["pos_inf"]] + block[:, COL["neg_inf"]]) > 0:
        return math.inf
    return math.sqrt(float(np.sum(np.square(block[:, COL["l2norm"]]))))


def _numpy(t: torch.Tensor) -> np.ndarray | None:
    """A CPU tensor's own memory as numpy (None: another device or a dtype numpy lacks)."""
    if t.device.type != "cpu" or t.dtype == torch.bfloat16 or t.is_conj() or t.is_neg():
        return None
    return t.numpy()


# On the CPU numpy does the copies single-threaded: torch's two-thread copy waits at a barrier for a
# thread the OS may have given to another process (a busy machine: milliseconds per tensor).
def _copy_into(w: torch.Tensor, buf: torch.Tensor) -> None:
    a, b = _numpy(w), _numpy(buf)
    if a is None or b is None:
        buf.copy_(w)
    else:
        np.copyto(b, a)


def _sub_into(w: torch.Tensor, prev: torch.Tensor) -> None:
    """prev = w - prev."""
    a, b = _numpy(w), _numpy(prev)
    if a is None or b is None:
        torch.sub(w, prev, out=prev)
    else:
        np.subtract(a, b, out=b)


def _lr(optimizers: Sequence[torch.optim.Optimizer]) -> float | None:
    for opt in optimizers:
        for grp in opt.param_groups:
            lr = grp.get("lr")
            if isinstance(lr, torch.Tensor):
                return float(lr)
            if isinstance(lr, (int, float)):
                return float(lr)
    return None


def _calling_scaler(depth: int = 12) -> Any:
    """The ``torch.amp.GradScaler`` whose ``step(optimizer)`` is running (None: none): its frame is a
    few above the optimizer's step pre-hook."""
    try:
        from torch.amp import GradScaler
    except ImportError:     # pragma: no cover - old torch
        return None
    f = sys._getframe(2)
    for _ in range(depth):
        if f is None:
            return None
        obj = f.f_locals.get("self")
        if isinstance(obj, GradScaler):
            return obj
        f = f.f_back
    return None


def warn_off(exc: BaseException) -> None:
    """The series' one warning: it stops, the training goes on."""
    warnings.warn(f"tdbg recorder: the per-step series stopped ({type(exc).__name__}: {exc}); "
                  "training continues, the steps already written stay readable", RuntimeWarning, stacklevel=3)


