"""Recorder: three lines in a PyTorch training loop write a tdbg-h5 dump of every iteration.

What one iteration holds (see docs/pytorch.md): every ATen operator that ran (forward, backward,
optimizer step) as a node with data edges, module scope and user source stack; parameters, buffers,
optimizer state, gradients and data inputs as leaf nodes; and per tensor its values or statistics.

"The weight at iteration i" is the parameter's node output, taken at ``rec.step()``, i.e. after
iteration i's optimizer step; the value the forward pass read (before the update) is the input of
the weight's readers (the first one is what tdbg's "previous value" uses for the first iteration).

This module holds the Recorder's life cycle (iterations, levels, hooks, captures); its other jobs each
have a module: output.py (rows, graphs and run histories handed to the writer thread, failed writes),
seriesrun.py (the per-step series, its triggers and capture log), modulelevel.py (level "modules"),
opslevel.py (level "ops": a node per operator), replay.py (iterations that repeat a recorded one),
leaves.py (parameters, state, gradients), graphnodes.py (operators of graphs compiled by torch.compile).
"""
from __future__ import annotations

import contextlib
import fnmatch
import os
import warnings
from typing import Any, Iterator, Mapping, Sequence

import torch

from ..formats.records import LEVEL_MODULES, LEVEL_OPS, GraphRecord, Kind, NodeRecord, OutputType, StackFrame
from ..formats.parallel import RankLayout
from ..formats.tdbg_h5.series import SeriesReader
from ..formats.tdbg_h5.writer import DumpWriter
from ..stats.core import compiled_kernel
from . import capture as C
from . import activations as A
from . import replay as R
from . import wrappers as W
from .compiled import (CompileNotes, compiled_anything, compiling, generated_module, in_compiled_region,
                       quiet_wrapper_warning)
from .layouts import rank_layout
from .graphnodes import GraphNodes
from .leaves import Leaves
from .opslevel import OpsLevel, OpsMode
from .levels import COMPILED_OPS, LevelPlan, Selection
from .modulelevel import ModuleLevel
from .pipeline import MicroBatches
from .devstats import as_float32, cpu_stats_view, stats_row, update_row
from .series import FLUSH_SECONDS
from .seriesrun import SeriesRun
from .stepargs import closure_of, with_closure
from .triggers import TouchFile, Trigger
from .runpath import earlier_run, refuse_earlier_run, resumed_runs
from .signals import FlushOnSignal
from .output import Output, rows_of
from .writefail import say_writing_stopped
from .sink import DigestBox, Job
from .stacks import user_stack
from .stepfacts import iteration_facts, mark_loss_scaler, steps_at_lr_zero

_SAVE = {"tensors": "values", "values": "values", "statistics": "statistics", "both": "values+statistics"}


def _say_no_optimizer(untracked: "list[tuple[torch.nn.Parameter, int | None]]") -> bool:
    """Warn, once a step() finds a parameter written since start() (a torch.func or hand-written update), that
    a recorder given no optimizer knows no trained weight: the scan then says only "no weight tensor", which
    does not tell why. Whether it warned (else the parameters have not changed yet)."""
    moved = next((p for p, v in untracked if v is not None and C.version(p) != v), None)
    if moved is None:
        return False
    warnings.warn("tdbg recorder: parameters are trained, but no optimizer was given: no parameter is known as "
                  "a trained weight, so they are recorded as kind 'other' with no gradient, and the weight "
                  "and gradient watchpoints (gradient_vanishing, weight_not_changed, weight_change_too_large) "
                  "have nothing to check; pass the torch.optim optimizer that trains them",
                  RuntimeWarning, stacklevel=3)
    return True


class Recorder:
    """Record a PyTorch training run as a tdbg-h5 dump (``with Recorder(path, model, optimizer) as rec``).

    ``save``: "tensors" (values), "statistics" (computed on the tensor's device) or "both".
    ``level``: how finely: "ops" (every ATen operator), "modules" (each module call's inputs, outputs
    and gradients) or "parameters" (weights, gradients, optimizer state and the loss, at ``step()``);
    or a schedule ``{"parameters": None, "ops": range(0, N, 100)}`` (an iteration takes the finest
    level that selects it). ``iterations``: which iterations to record at a single ``level``
    ("0-9,100", a range, a list; None: all). ``modules``: globs on module
    paths (``"fc1"``, ``"layer1.*"``) whose tensors are dumped; ``ops``: globs on ATen op types
    (``"conv*"``). The graph is always complete; the filters only choose which tensors are stored.
    ``rank``: the rank folder (default: ``torch.distributed.get_rank()`` when initialised, else 0).
    ``replay``: at level "ops", once the run repeats a recorded graph, replay the next iterations
    against it (statistics only, no graph work: see :mod:`debugger.torch.replay`).
    ``pipeline``: under pipeline parallelism, this rank's ``PipelineStage`` or its schedule (the stage
    and micro-batches go into the layout). DDP, FSDP1/2 and DTensor layouts are read from the model.
    ``series``: also keep the per-step statistics series (every step, whatever ``level`` records deep:
    see :mod:`debugger.torch.series`), written every 4096 steps, every ``series_flush_seconds`` and on
    close; ``scaler``: the ``torch.amp.GradScaler`` in use (found by itself when ``scaler.step`` runs).
    ``trigger``: a :class:`~debugger.torch.triggers.Trigger` (non-finite or spiking loss) and
    ``touch_file``: a path (or a :class:`~debugger.torch.triggers.TouchFile`) whose creation or touch
    records the next steps deep; both need ``series=True``, which keeps why each deep step was taken.
    ``resume``: continue the run already recorded at ``path`` (after a checkpoint restart): this run's
    iterations, graphs and series steps are numbered after everything there (``iterations`` and ``level``
    schedules count on from there too), and the rank's metadata lists each run with the iteration where it
    began; without it, a path that holds a run is refused (runs never mix silently).
    ``compiled_ops``: what an iteration at level "ops" of a model run by ``torch.compile`` records:
    "boundary" (the default) records it at level "modules", the compiled program left as it is; "eager"
    records every operator by running it eagerly (its numbers can differ in the last bits). Either is
    said once per run (debugger.torch.compiled).
    """

    def __init__(self, path: str | os.PathLike[str], model: torch.nn.Module,
                 optimizer: "torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None" = None, *,
                 save: str = "tensors", iterations: Selection = None, level: "str | Mapping[str, Selection]" = LEVEL_OPS,
                 modules: Sequence[str] | None = None, ops: Sequence[str] | None = None,
                 rank: int | None = None, compression: str | None = None, durable: bool = False,
                 replay: bool = True, pipeline: Any = None, series: bool = False,
                 series_flush_seconds: float = FLUSH_SECONDS, scaler: Any = None,
                 trigger: Trigger | None = None, touch_file: "str | os.PathLike[str] | TouchFile | None" = None,
                 compiled_ops: str = "boundary", resume: bool = False) -> None:
        if save not in _SAVE:
            raise ValueError(f"save must be one of {', '.join(_SAVE)}, got {save!r}")
        self.path = os.fspath(path)
        self.model = model
        self.optimizers: list[torch.optim.Optimizer] = [W.unwrap_optimizer(o) for o in (
            [] if optimizer is None else list(optimizer) if isinstance(optimizer, (list, tuple)) else [optimizer])]
        self.saved = _SAVE[save]
        self.values = self.saved != "statistics"
        self.stats_on_device = self.saved == "statistics"
        self._plan = LevelPlan(level, iterations)
        self.replay = replay
        self.pipeline = pipeline
        self._micro = MicroBatches()        # pipeline parallelism: the micro-batch running now
        self._replay = R.Replay(self)       # "ops" iterations that repeat a recorded one
        self._level: str | None = None      # the level of the iteration being recorded (None: not recorded)
        self.modules = list(modules) if modules else None
        self.ops = list(ops) if ops else None
        if rank is None:
            dist = torch.distributed
            rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        self.rank = rank
        self.compression = compression
        self.durable = durable
        self.iteration = 0
        self.resume = resume
        self._graph_base = 0        # the first graph id of this run (after a resumed run's graphs)
        self._graph: C.IterationGraph | None = None
        self._busy = False
        self._mode: OpsMode | None = None
        self._out: Output | None = None     # from start() to close()
        self._handles: list[Any] = []
        self._untracked: list[tuple[torch.nn.Parameter, int | None]] = []   # start() fills it
        self._scopes: list[tuple[Any, str, str]] = []     # (module, scope, model path)
        self._in_step: torch.optim.Optimizer | None = None
        self._stepped: set[int] = set()     # ids of the optimizers whose step() ran in this iteration
        self._lr_zero: set[int] = set()     # ... and of those that stepped with learning rate 0 everywhere
        self._in_backward = 0
        self._backward_source: tuple[StackFrame, ...] = ()
        self._orig_backward: Any = None
        root = W.unwrap(model)
        self._root = root
        self._module_path = {id(m): C.clean_name(p) for p, m in root.named_modules()}
        # modules that only wrap another (DDP, FSDP1's units): named after it, no scope of their own
        self._wrappers = {id(m) for m in (model, *root.modules()) if W.is_wrapper(m)}
        self._param_name = {id(p): C.clean_name(n) for n, p in root.named_parameters()}
        self._buffer_name = {id(b): C.clean_name(n) for n, b in root.named_buffers()}
        self._leaves = Leaves(self)      # parameters, buffers, optimizer state, gradients
        self._composites = A.Composites()
        self._module_level = ModuleLevel(self)     # level "modules": one node per module call
        self._ops = OpsLevel(self)      # level "ops": one node per operator
        self._series = SeriesRun(series, series_flush_seconds, scaler, trigger, touch_file)
        self._signals: FlushOnSignal | None = None
        self._init_compiled(compiled_ops)

    def _init_compiled(self, compiled_ops: str) -> None:
        """What torch.compile needs the recorder to keep (debugger.torch.compiled)."""
        if compiled_ops not in COMPILED_OPS:
            raise ValueError(f"compiled_ops must be one of {', '.join(COMPILED_OPS)}, got {compiled_ops!r}")
        self._compiled_ops = compiled_ops
        self._compiled_seen = False     # an "ops" iteration found the model compiled (its wrapper, its frames)
        self._compile_notes = CompileNotes()
        self._not_stored: set[str] = set()     # kinds of tensor that cannot be stored (sparse ...): said once each
        self._graph_nodes = GraphNodes(self)     # level "ops" of code compiled with the "tdbg" backend
        self._module_hooks = False     # the global module hooks are in (from the first "ops"/"modules" iteration)
        self._module_calls = 0      # calls of the model's submodules the hooks saw in this iteration
        self._root_called = False   # ... and whether they saw the model's own call (run eagerly: not compiled)

    # ---- public API -------------------------------------------------------------------------
    def __enter__(self) -> "Recorder":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> "Recorder":
        """Open the dump, install the hooks and start recording iteration 0 (when selected); the recorder
        (``rec = Recorder(...).start()`` before a loop that is not to be re-indented)."""
        dist = torch.distributed
        world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
        dev = next((p.device.type for p in self._root.parameters()), "cpu")
        metadata = {"recorder": "debugger.torch", "world_size": world, "levels": self._plan.describe(),
                    "series": self._series.wanted}
        if self.resume:
            metadata.update(self._resumed())
        else:
            refuse_earlier_run(self.path, self.rank)
        writer = DumpWriter(self.path, self.rank, self.saved, framework="PyTorch",
                                  framework_version=torch.__version__, device_target=dev.upper(),
                                  net=C.class_name(self._root), compression=self.compression,
                                  durable=self.durable, in_memory=True, metadata=metadata, layout=self._layout())
        self._out = Output(writer, self._graph_base)
        self._signals = FlushOnSignal(self._flush_on_signal).install()
        if self.stats_on_device:
            # numba's start-up here, once, not in the first iteration: CPU tensors (a CPU model's, or
            # the `step` counters Adam keeps on the CPU beside a GPU model) take the compiled kernel
            compiled_kernel()
        # with no optimizer, the parameters' version counters: one that moves by a step() is trained by
        # code the recorder cannot name weights from (torch.func, a hand-written update), said once
        self._untracked = [] if self.optimizers else [(p, C.version(p)) for p in self._root.parameters()]
        for opt in self.optimizers:
            self._handles.append(opt.register_step_pre_hook(self._step_pre))
            self._handles.append(opt.register_step_post_hook(self._step_post))
        self._micro.install(self.pipeline)
        if self._series.wanted:
            self._handles += self._series.start(writer.rank_dir, self._root, self.optimizers, self._param_name,
                                                self._plan, self._own_work)
        self._orig_backward = torch.autograd.backward
        # backward() is a graph break in compiled code: Dynamo runs it eagerly, but would trace the frame
        # of a plain Python replacement (where the recorder steps aside); disabled, it runs as it is
        torch.autograd.backward = torch.compiler.disable(self._backward)   # type: ignore[assignment]
        self._begin()
        if self._graph is not None:     # the weights as training starts: iteration 0's "before" (no hook
            with self._own_work():      # of a compiled optimizer step takes it)
                self._leaves.snapshot_ends()
        self._series.took(self.iteration, self._level, write=False)
        return self

    def _resumed(self) -> dict[str, Any]:
        """``resume=True``: this run's iterations and graphs follow the earlier runs' in the rank folder; the
        metadata entry that lists every run with the iteration where it began."""
        held = earlier_run(self.path, self.rank)
        if held.empty:
            return {}
        runs = resumed_runs(held, self.saved, self._plan.describe(), self._series.wanted)
        self.iteration, self._graph_base = held.next_iteration, held.next_graph_id
        self._series.earlier_captures = SeriesReader(held.rank_dir).captures() if held.series_steps else None
        return {"runs": runs}

    def step(self) -> None:
        """End the current iteration (hands it to the writer thread) and start the next."""
        if self._out is None:
            raise RuntimeError("Recorder.step() outside 'with Recorder(...)' (or before start())")
        self._end()
        if self._untracked and _say_no_optimizer(self._untracked):
            self._untracked = []
        self._series.end_step(self.iteration)
        self.iteration += 1
        self._begin()
        self._series.took(self.iteration, self._level)

    def capture_next(self, n: int = 1, level: str = LEVEL_OPS) -> None:
        """Record the next ``n`` iterations (from the one after the current) at ``level`` or finer."""
        self._plan.capture_next(self.iteration + 1, n, level)
        self._series.asked(self.iteration, n, level)

    def flush(self) -> None:
        """Wait until every ended iteration is written (``step`` does not wait for its own), and every
        ended step of the series is readable."""
        if self._out is not None:
            self._out.flush()
            self._check_writing()
        self._series.flush()

    def close(self) -> None:
        """Stop recording (the open iteration is dropped), write run histories, release the rank."""
        out = self._out
        if out is None:
            return
        if self._signals is not None:
            self._signals.remove()
            self._signals = None
        self._stop_mode()
        self._graph_nodes.take(False)
        self._graph = None
        if self._orig_backward is not None:
            torch.autograd.backward = self._orig_backward   # type: ignore[assignment]
            self._orig_backward = None
        self._micro.remove()
        for h in self._handles:
            h.remove()
        self._handles.clear()
        try:
            self._series.close(self.iteration)      # the open iteration is dropped
            out.sink.close()
            self._check_writing()
            if not out.stopped:
                out.write_histories()
        finally:
            out.writer.close()
            self._out = None

    def _flush_on_signal(self) -> None:
        """SIGTERM or SIGINT (debugger.torch.signals): every ended iteration and series step onto the disk."""
        if self._out is not None:
            self._out.flush()
        self._series.flush(guarded=False)

    # ---- iteration lifecycle ----------------------------------------------------------------
    def _begin(self) -> None:
        self._scopes.clear()
        stopped = self._out is not None and self._out.stopped
        self._level = None if stopped else self._plan.level_of(self.iteration)
        graph_ops = self._level == LEVEL_OPS and self._compiled_ops == "boundary" and self._runs_compiled()
        if graph_ops:
            # "ops" would run the compiled program eagerly: its boundary is recorded instead, with the
            # operators of the graphs compiled by the "tdbg" backend (debugger.torch.graphtaps)
            self._level = LEVEL_MODULES
            self._compile_notes.boundary_begins()
        self._graph_nodes.take(graph_ops)
        if self._level in (LEVEL_OPS, LEVEL_MODULES):
            self._hook_modules()
        if self._level is None:
            self._graph = None
            self._leaves.before_step.clear()       # the next recorded iteration's update is its own step's
            self._stop_mode()
            return
        self._stepped = set()
        self._lr_zero = set()
        self._composites.clear()
        self._graph = C.IterationGraph()
        self._tracker = C.Tracker(self._graph, self._leaves.leaf_of, self._on_input, self._replay.note_made)
        self._leaves.begin()
        replay = self._replay
        replay.replaying = replay.trace = None
        if self._level != LEVEL_OPS:
            self._stop_mode()     # the coarser levels see no operator: no dispatch mode, no cost per operator
            return
        if replay.repeat is not None:
            replay.replaying = R.Replaying(replay.repeat[1], replay.repeat[0])
        elif self.replay:
            replay.trace = R.Trace()
        if self._mode is None:
            self._mode = OpsMode(self)
            self._mode.__enter__()

    def _hook_modules(self) -> None:
        """The global module hooks, from the first iteration at a level that looks at module calls
        ("ops", "modules") on: "parameters" leaves every call as it is (nothing for Dynamo to trace, no
        cost per call). Once in, they stay: a change of the global hooks recompiles compiled code."""
        if self._module_hooks:
            return
        self._module_hooks = True
        quiet_wrapper_warning()
        mm = torch.nn.modules.module
        self._handles.append(mm.register_module_forward_pre_hook(self._pre_hook))
        self._handles.append(mm.register_module_forward_hook(self._post_hook, always_call=True))

    def _layout(self) -> RankLayout | None:
        """The rank's parallel layout (meshes, shards, stage); None, with a warning, when PyTorch's facts
        cannot be read (the recording goes on: each rank's tensors are then read as they are)."""
        try:
            with self._own_work():
                return rank_layout(self.model, self._root, self.pipeline)
        except Exception as exc:     # never stop the training for the layout
            warnings.warn(f"tdbg recorder: the parallel layout is not recorded: {type(exc).__name__}: {exc}",
                          RuntimeWarning, stacklevel=3)
            return None

    def _drop(self, exc: Exception) -> None:
        """A failure while recording an operator: warn, and leave this iteration out of the dump."""
        warnings.warn(f"tdbg recorder: iteration {self.iteration} is not recorded: "
                      f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=2)
        self._graph = None
        self._replay.forget()

    def _stop_mode(self) -> None:
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None

    @contextlib.contextmanager
    def _own_work(self) -> Iterator[None]:
        """The recorder's own tensor work: no dispatch mode (its own included) sees its operators."""
        self._busy = True
        try:
            with C.OWN_OPS():
                yield
        finally:
            self._busy = False

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        """:meth:`_own_work` in a hook of the user's training: a failure drops this iteration, never the
        training."""
        try:
            with self._own_work():
                yield
        except Exception as exc:
            self._drop(exc)

    def _end(self) -> None:
        g = self._graph
        taps = self._graph_nodes
        if taps.taking and g is not None:
            self._compile_notes.ops_at_boundary(self.iteration, taps.tapped, taps.tapped_every)
        if g is not None and self._level in (LEVEL_MODULES, LEVEL_OPS) and not self._module_calls \
                and W.has_callable_submodule(self._root):
            self._note_compiled_model()     # a model with submodules whose calls were not seen
        self._module_calls = 0
        self._root_called = False
        if g is None:
            self._leaves.before_step.clear()
            return
        replaying = self._replay.replaying
        if replaying is not None:
            with self._own_work():
                self._leaves.refresh()      # optimizer state the step made is a leaf too
            if not replaying.complete() or any(leaf.name not in replaying.trace.names
                                               for leaf in self._leaves.leaf_by_ptr.values()):
                self._replay.resume_full()
                replaying = None
        try:
            with self._own_work():
                C.tag_pending(g)
                self._leaves.refresh()
                if replaying is None:
                    self._leaves.late_gradients(g)
                self._leaves.after_updates()
                for ptr, leaf in list(self._leaves.leaf_by_ptr.items()):
                    t = self._leaves.leaf_tensors.get(ptr)
                    if t is None:
                        continue
                    if replaying is None:
                        self._tracker.make_leaf(leaf, t)
                    if self._want(self._leaves.leaf_module(leaf), "Parameter"):
                        c = self._capture(leaf.name, "Parameter", "output", 0, t, exact=True, reuse=True)
                        before = self._leaves.before_step.get(ptr)
                        if c is not None and before is not None and leaf.kind == Kind.WEIGHT:
                            c.extra = update_row(C.local(t), before)
                job = self._job(g) if replaying is None else self._replay.replayed_job(g, replaying)
        finally:
            self._graph = None
            self._leaves.before_step.clear()
        with self._own_work():
            self._leaves.snapshot_ends()
        assert self._out is not None
        self._out.submit(job)
        self._check_writing()

    def _check_writing(self) -> None:
        """A failed write (told by the writer thread) stops the recording, once, never the training."""
        out = self._out
        failed = out.failure() if out is not None else None
        if out is None or failed is None:
            return
        exc, last = failed
        series_was_on = self._series.stop()     # one warning says it all
        say_writing_stopped(out.rank_dir, exc, last, series_was_on)

    def _job(self, g: C.IterationGraph) -> Job:
        mark_loss_scaler(g.nodes)
        outputs = list(g.losses)
        tapped = self._graph_nodes.tapped
        level = LEVEL_OPS if tapped else (self._level or LEVEL_OPS)
        record = GraphRecord(0, "train_step", g.nodes, outputs, source_file="", execution_order=g.order,
                             level=level, compiled=bool(tapped))
        assert self._out is not None
        gid, new = self._out.graph_of(record)
        self._out.ran(gid, self.iteration)
        trace = self._replay.trace
        if trace is not None:       # a graph seen before: the run repeats, the next iterations replay it
            trace.nodes, trace.order = list(g.nodes), list(g.order)
            trace.names = frozenset(n.name for n in g.nodes)
            trace.invariant = frozenset(g.invariant)
            trace.losses = list(g.losses)
            trace.loss_slots = {k: set(v) for k, v in g.loss_slots.items()}
            self._replay.repeat = None if new else (gid, trace)
            self._replay.trace = None
        rows = rows_of(g, gid)
        facts = iteration_facts(self.optimizers, self._stepped, self._param_name, g.nodes, self._lr_zero)
        return Job(self.iteration, new, [gid], rows, facts)


    def _on_input(self, rec: NodeRecord, t: torch.Tensor) -> None:
        self._capture(rec.name, rec.op_type, "output", 0, t, exact=False)

    def _want(self, module_path: str, op_type: str) -> bool:
        if self.modules is not None and not any(fnmatch.fnmatchcase(module_path, m) for m in self.modules):
            return False
        if self.ops is not None and op_type not in ("Parameter", "Input", "Gradient") and \
                not any(fnmatch.fnmatchcase(op_type, o) for o in self.ops):
            return False
        return True

    def _say_not_stored(self, node: str, t: Any) -> None:
        """Say once per kind of tensor that cannot be stored (a sparse or other non-strided layout, a dtype numpy
        lacks) that such tensors are left out: their nodes stay in the graph without a value, which the scan
        counts as not in the dump, never as checked. Tensor subclasses (a DTensor's intermediates under tensor
        parallelism, FSDP2's) are a documented limit, said in docs/pytorch.md, not at every run."""
        if not isinstance(t, torch.Tensor) or type(t) not in (torch.Tensor, torch.nn.Parameter) or t.is_meta:
            return
        sparse = t.layout != torch.strided
        what = f"layout {str(t.layout).replace('torch.', '')}" if sparse else f"dtype {str(t.dtype).replace('torch.', '')}"
        if torch._C._functorch.is_functorch_wrapped_tensor(t):
            what = "a torch.func.vmap batch"      # C.unwrapped gives every other transform's value
        if what in self._not_stored:
            return
        self._not_stored.add(what)
        hint = ": an nn.Embedding(sparse=True)'s gradient is sparse" if sparse else ""
        warnings.warn(f"tdbg recorder: tensors of {what} are not recorded (only dense tensors of numpy's dtypes "
                      f"are{hint}), the first {node}: their nodes have no value in the dump, and the scan says so",
                      RuntimeWarning, stacklevel=2)

    def _capture(self, node: str, op_type: str, io: str, slot: int, t: torch.Tensor, exact: bool,
                 reuse: bool = False, same: C.Captured | None = None) -> C.Captured | None:
        """Keep a tensor of this iteration: host values, or a device statistics row (+ host copy to hash).
        ``same``: a capture of this iteration known to hold the same bits (its values or row are shared)."""
        outer, t = t, C.local(t)
        if not C.is_plain(t) or t.dtype not in C.NUMPY_DTYPES and t.dtype != torch.bfloat16:
            self._say_not_stored(node, t)
            return None
        assert self._graph is not None
        given = t
        t = t.detach()
        shape = tuple(t.shape)
        c = C.Captured(node, op_type, io, slot, shape=shape)
        # Leaves (parameters, state, gradients) are read several times and kept across iterations:
        # the same memory at the same version counter holds the same bits, so its capture is reused.
        key = C.reuse_key(outer, self._leaves.writes) if reuse else None
        hit = self._leaves.reuse.get(key) if key is not None else None
        if hit is not None and not self._leaves.still_kept(t, hit):
            hit = None
        if hit is not None:
            c.values, c.stats, c.host, c.dtype = hit
        elif same is not None:
            c.values, c.stats, c.host, c.dtype = same.values, same.stats, same.host, same.dtype
            if exact and c.host is None and not self.values:
                c.host = self._digest_box(t)
        elif self.values:
            h = t.to("cpu", copy=True)
            if h.dtype == torch.bfloat16:
                h = h.to(torch.float32)      # numpy has no bfloat16: stored as float32
            c.values = h.numpy()
            c.dtype = str(c.values.dtype)
        elif exact and t.device.type == "cpu":     # the statistics and the digest read one view
            c.stats, host = cpu_stats_view(t)
            c.dtype = "float32" if t.dtype == torch.bfloat16 else C.dtype_name(t.dtype)
            c.host = DigestBox(host)
            c.host.hexdigest()      # at once: a bfloat16 tensor's view is the shared buffer
        else:
            c.stats = stats_row(t)
            c.dtype = "float32" if t.dtype == torch.bfloat16 else C.dtype_name(t.dtype)
            if exact:
                c.host = self._digest_box(t)
        if key is not None and hit is None:
            self._leaves.reuse[key] = (c.values, c.stats, c.host, c.dtype)   # a device row is stacked with the rest
        self._graph.captured.append(c)
        if self._replay.call is not None and self._replay.trace is not None:
            self._replay.trace_take(given, c, exact, reuse)
        return c


    @staticmethod
    def _digest_box(t: torch.Tensor) -> DigestBox:
        """The exact digest of a leaf: hashed now from its own memory on the CPU (cheaper than a copy
        to hash later); elsewhere a host copy hashed by the writer thread."""
        if t.device.type == "cpu":
            if t.dtype == torch.bfloat16:
                t = as_float32(t)       # hashed at once: the shared buffer is free again after
            if t.is_conj() or t.is_neg():
                t = t.resolve_conj().resolve_neg()
            box = DigestBox(C.host_view(t))
            box.hexdigest()
            return box
        if t.dtype == torch.bfloat16:
            t = t.to(torch.float32)
        return DigestBox(t.to("cpu", copy=True).numpy())


    # ---- hooks ------------------------------------------------------------------------------
    def _pre_hook(self, module: torch.nn.Module, inputs: Any) -> None:
        if compiling():     # traced by Dynamo: step aside (debugger.torch.compiled)
            return
        if self._graph is None or id(module) in self._wrappers or generated_module(module, self._module_path):
            return      # a wrapper is named after what it wraps; a compiled program's graph is no module call
        module = self._seen_as(module)
        if self._scopes and self._scopes[-1][0] is module:
            return      # the call its compiled wrapper stood for, run eagerly: one call, one scope
        self._module_calls += module is not self._root
        self._root_called = self._root_called or module is self._root
        path = self._module_path.get(id(module))
        parent_scope, parent_path = (self._scopes[-1][1], self._scopes[-1][2]) if self._scopes \
            else (self._micro.scope(), None)
        cls = C.class_name(module)
        if path is None:
            part = cls
            path = parent_path or ""
        elif path == "":
            part = "model"
        else:
            rel = path[len(parent_path) + 1:] if parent_path and path.startswith(parent_path + ".") else path
            part = f"{rel}-{cls}"
        self._scopes.append((module, f"{parent_scope}/{part}" if parent_scope else part, path))
        if self._level == LEVEL_MODULES:
            self._module_level.enter(module, inputs)      # guarded inside: never raises

    def _post_hook(self, module: torch.nn.Module, inputs: Any, output: Any) -> None:
        if compiling():     # traced by Dynamo: step aside (debugger.torch.compiled)
            return
        if self._graph is None or generated_module(module, self._module_path):
            return
        module = self._seen_as(module)
        if self._composites.pending:
            with self._guarded():
                self._composites.settle(module, output)
        if self._level == LEVEL_MODULES:
            self._module_level.leave(module, output)      # guarded inside: never raises
        for i in range(len(self._scopes) - 1, -1, -1):
            if self._scopes[i][0] is module:
                del self._scopes[i:]
                break

    def _seen_as(self, module: torch.nn.Module) -> torch.nn.Module:
        """The module a call is recorded as: ``torch.compile(m)``'s wrapper runs eagerly around the
        compiled call and stands for ``m``; notes what compilation hides at this level."""
        if self._level == LEVEL_OPS and (in_compiled_region() or W.is_compiled_wrapper(module)):
            self._compiled_seen = True
            self._compile_notes.ops_eager(self.iteration, later=self._compiled_ops)
        if not W.is_compiled_wrapper(module):
            return module
        inner = W.unwrap(module)
        if self._level == LEVEL_MODULES:
            self._compile_notes.module_compiled(self._module_path.get(id(inner)) or C.class_name(inner), boundary=True)
        return inner

    def _runs_compiled(self) -> bool:
        """Whether the model runs compiled: wrapped by or made with torch.compile, or found so."""
        return self._compiled_seen or bool(W.runs_compiled(self._root, self.model))

    def note_compiled(self) -> None:
        """The model is run compiled by code the recorder does not see (a trainer's ``torch_compile``):
        "ops" iterations are then taken as ``compiled_ops`` says from the first on."""
        self._compiled_seen = True

    def _note_compiled_model(self) -> None:
        """No module call inside the model was seen at level "modules" or "ops": say so when it is because
        the model runs compiled (its module hooks were traced away with the rest of the program)."""
        # a compiled function that runs the model hides its call too: a model whose own call ran eagerly and
        # called no submodule (a parent that reads its children's weights itself) is not compiled
        inside = compiled_anything() and not self._root_called
        compiled = W.runs_compiled(self._root, self.model) or (["the model (inside a compiled function)"] if inside else [])
        if not compiled:
            return
        if self._level == LEVEL_OPS:
            self._compiled_seen = True
            self._compile_notes.ops_eager(self.iteration, later=self._compiled_ops, scopes=False)
        else:
            self._compile_notes.module_compiled(", ".join(compiled[:3]), boundary=False)

    def _backward(self, tensors: Any, *args: Any, **kwargs: Any) -> Any:
        assert self._orig_backward is not None
        if compiling():
            return self._orig_backward(tensors, *args, **kwargs)
        if not self._busy:
            self._series.on_backward(tensors)
        g = self._graph
        if g is None or self._busy:
            return self._orig_backward(tensors, *args, **kwargs)
        with self._guarded():
            self._backward_source = user_stack(2)
            roots = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
            # every root is a loss (micro-batches accumulating gradients call backward often)
            roots = [t for t in roots if isinstance(t, torch.Tensor)]
            if self._level == LEVEL_OPS and self._replay.replaying is None:
                self._tracker.forget_moved()
            if self._replay.replaying is not None:
                pass        # the traced graph knows its losses
            elif self._level == LEVEL_OPS:
                self._ops.mark_losses(g, roots)
            else:
                self._loss_nodes(g, roots)
        self._in_backward += 1
        try:
            return self._orig_backward(tensors, *args, **kwargs)
        finally:
            self._in_backward -= 1


    def _loss_nodes(self, g: C.IterationGraph, roots: list[torch.Tensor]) -> None:
        """The coarser levels see no operator: each root of ``backward()`` is a node of its own."""
        for t in roots:
            name = g.once_name("loss")
            made_by = self._made_by(t)
            g.nodes.append(NodeRecord(name, "Loss", "", inputs=[(made_by, "data")] if made_by else [],
                                      outputs=[OutputType(C.dtype_name(t.dtype), tuple(t.shape))],
                                      stack=self._backward_source, kind=Kind.LOSS))
            g.order.append(name)
            g.losses.append(name)
            self._capture(name, "Loss", "output", 0, t, exact=False)

    def _made_by(self, t: torch.Tensor) -> str | None:
        """The recorded node that made ``t`` at the coarser levels (None: none recorded)."""
        return self._module_level.made_by(t) if self._level == LEVEL_MODULES else None

    def _step_pre(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> Any:
        if compiling():     # traced by Dynamo: step aside (debugger.torch.compiled)
            return None
        g = self._graph
        if g is None:
            return None
        self._stepped.add(id(opt))
        if steps_at_lr_zero(opt):
            self._lr_zero.add(id(opt))
        closure = closure_of(args, kwargs)
        if closure is not None:
            # step(closure) (Lightning's automatic optimization, LBFGS) runs the forward and backward
            # inside step(): they are the iteration's own ops, its gradients are there once it returns
            return with_closure(args, kwargs, self._closure_recorder(opt, closure))
        try:
            self._enter_step(g, opt)
        except Exception as exc:     # never break the training: drop this iteration instead
            self._drop(exc)
        return None

    def _closure_recorder(self, opt: torch.optim.Optimizer, closure: Any) -> Any:
        """``closure`` run outside the optimizer's scope; the gradients recorded when it returns."""
        def recorded_closure() -> Any:
            self._in_step = None
            result = closure()
            g = self._graph
            if g is not None:
                try:
                    self._enter_step(g, opt)
                except Exception as exc:     # never break the training
                    self._drop(exc)
            self._in_step = opt
            return result
        return recorded_closure

    def _enter_step(self, g: C.IterationGraph, opt: torch.optim.Optimizer) -> None:
        """Record ``opt``'s gradients and mark the ops that follow as its step."""
        with self._own_work():
            self._leaves.record_gradients(g, opt)
            self._leaves.snapshot_weights(opt)
        g.step_ops = []
        g.step_first = len(g.nodes)
        self._in_step = opt


    def _step_post(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if compiling():     # traced by Dynamo: step aside (debugger.torch.compiled)
            return
        self._in_step = None
        self._leaves.grad_ptrs = set()
        g = self._graph
        if g is None:
            return
        with self._guarded():
            self._leaves.tag_state(g, opt)
