"""What ``torch.compile`` hides from a recording level, said once per run.

The recorder's hooks step aside while Dynamo traces (``torch.compiler.is_compiling()``), so a compiled
program stays the program the user compiled: at levels "parameters" and "modules" the compiled code
runs as it would unrecorded. Level "ops" records every operator through a dispatch mode, and Dynamo
does not compile under one: an "ops" iteration of a compiled model is recorded at "modules" instead
(``compiled_ops="boundary"``, the default), or run eagerly (``"eager"``). Neither is silent: each is one
warning, and an iteration found compiled only while it ran at "ops" (a trainer that compiles the model
where the recorder cannot see it) says that it ran eagerly.
"""
from __future__ import annotations

import warnings
from typing import Container

import torch
import torch.fx
from torch._C._dynamo import eval_frame

__all__ = ["CompileNotes", "compiled_anything", "compiling", "generated_module", "in_compiled_region",
           "quiet_wrapper_warning"]


def in_compiled_region() -> bool:
    """Whether a ``torch.compile``'d function or module is running now (compiled, or skipped by Dynamo
    and so run eagerly): its eval-frame callback is set."""
    return eval_frame.get_eval_frame_callback() is not None


def generated_module(module: torch.nn.Module, users: Container[int]) -> bool:
    """Whether a module call is the compiled program's own code, not a module of the user's (``users``: the
    ids of the model's modules): AOTAutograd runs the graph it compiled as a ``torch.fx.GraphModule``
    (backend "aot_eager", or any backend that hands the graph back to be called), outside Dynamo's frame,
    so the global module hooks see its call; its outputs are the program's values and what backward keeps
    (weights among them), not a module's outputs. A GraphModule that is part of the model stays its own."""
    return isinstance(module, torch.fx.GraphModule) and id(module) not in users


class CompileNotes:
    """The warnings of a run about compilation, each given once."""

    def __init__(self) -> None:
        self._said: set[str] = set()

    def _say(self, key: str, text: str) -> None:
        if key not in self._said:
            self._said.add(key)
            warnings.warn(f"tdbg recorder: {text}", RuntimeWarning, stacklevel=4)

    def ops_eager(self, iteration: int, later: str, scopes: bool = True) -> None:
        """An iteration at level "ops" ran a compiled function or module, which then ran eagerly (``later``:
        the run's ``compiled_ops``; ``scopes``: its module calls were seen, its operators have scopes)."""
        lost = "" if scopes else " (its module calls ran inside the compiled program's graph, so its " \
            "operators carry no module scope)"
        then = "; the next iterations at \"ops\" are recorded at the compiled program's boundary (level " \
            "\"modules\"), the program left as compiled (Recorder(compiled_ops=\"eager\") records them eagerly)" \
            if later == "boundary" else ", as Recorder(compiled_ops=\"eager\") asks for the iterations at \"ops\""
        self._say("ops", f"iteration {iteration} is recorded at level \"ops\" and ran eagerly{lost}: "
                  "torch.compile steps aside while tdbg's dispatch mode sees every operator, so it computed "
                  "with eager kernels (its numbers can differ in the last bits from the compiled program's)"
                  f"{then}")

    def boundary_begins(self) -> None:
        """An "ops" iteration of a compiled model is recorded at its boundary: what "modules" would say
        of compiled code is said by :meth:`ops_at_boundary` instead."""
        self._said.add("modules")

    def ops_at_boundary(self, iteration: int, graph_ops: int, every: bool = False) -> None:
        """An iteration at level "ops" of a compiled model was recorded at "modules" (compiled_ops=
        "boundary"), with ``graph_ops`` compiled graphs' operators from the "tdbg" backend (``every``:
        its option operators="all")."""
        if graph_ops:
            which = ("every operator's result, each stored for its statistics: the compiled kernels are cut "
                     "there, which can change the training's last bits (options operators=\"all\")") if every else \
                ("the results the compiled program stores (library calls such as matmuls, reductions, what "
                 "backward keeps), read where they lie: the program and its numbers are unchanged; results "
                 "kept inside fused kernels are not seen (options={\"operators\": \"all\"} records them)")
            self._say("ops", f"iteration {iteration} and the next at level \"ops\" record the operators of the "
                      f"compiled program (the \"tdbg\" backend's graphs: decomposed ATen operators as Inductor "
                      f"compiled them) and the compiled call's boundary; recorded: {which}")
            return
        self._say("ops", f"iteration {iteration} and the next at level \"ops\" are recorded at level "
                  "\"modules\": the model runs compiled, and recording every operator would run it eagerly, "
                  "changing its numbers; a compiled module's call is then one node (inputs, outputs, their "
                  "gradients), the calls inside it unseen. torch.compile(..., backend=\"tdbg\") records the "
                  "compiled program's operators; Recorder(compiled_ops=\"eager\") records every operator, eagerly")

    def graph_values(self) -> None:
        """The compiled program's operators hold statistics only: a values recording stores none."""
        self._say("graph values", "the compiled program's operators (backend \"tdbg\") are recorded as nodes "
                  "without values: the compiled code computes their statistics, not copies; "
                  "Recorder(save=\"statistics\") stores those statistics")

    def module_compiled(self, name: str, boundary: bool) -> None:
        """At level "modules", a compiled module's call is one node (``boundary``: ``torch.compile(m)``'s
        wrapper runs eagerly around it) or none (``m.compile()``): the calls inside it are not seen."""
        call = "records its call as one node (inputs, outputs and their gradients) and" if boundary else \
            "records no node for its calls (the weights, gradients, optimizer state and loss as at " \
            "\"parameters\") and"
        self._say("modules", f"{name} runs compiled: level \"modules\" {call} sees no module call inside the "
                  "compiled program (Recorder(compiled_ops=\"eager\") at level \"ops\" sees them, running eagerly)")

    def step_compiled(self, iteration: int, found: bool) -> None:
        """No optimizer step hook ran in a process that compiles: the step ran inside torch.compile
        (where the hooks step aside), ``found``: its gradients were still there at rec.step()."""
        read = "are read at rec.step()" if found else \
            "are not recorded (none was left at rec.step(): call it before zero_grad())"
        self._say("step", f"iteration {iteration}: no optimizer step hook ran (an optimizer step inside "
                  f"torch.compile runs none): its gradients {read}; the weights and optimizer state are "
                  "recorded as the step left them")


def compiled_anything() -> bool:
    """Whether Dynamo compiled a graph in this process."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:         # a build without Dynamo compiles nothing
        return False
    return bool(counters["stats"]["unique_graphs"])


def compiling() -> bool:
    """Whether Dynamo is tracing now (a hook then returns at once: traced, it would break the graph or
    change the compiled program)."""
    return torch.compiler.is_compiling()


def quiet_wrapper_warning() -> None:
    """Torch warns at every call of ``torch.compile(m)`` that global module hooks fire once more for its
    wrapper: the recorder's hooks expect that (the wrapper stands for ``m``), so the warning is not the
    user's to read."""
    warnings.filterwarnings("ignore", message=r"Using `torch\.compile\(module\)` when there are global hooks",
                            category=UserWarning)
