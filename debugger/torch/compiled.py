"""What ``torch.compile`` hides from a recording level, said once per run.

The recorder's hooks step aside while Dynamo traces (``torch.compiler.is_compiling()``), so a compiled
program stays the program the user compiled: at levels "parameters" and "modules" the compiled code
runs as it would unrecorded. Level "ops" records every operator through a dispatch mode, and Dynamo
does not compile under one: those iterations run eagerly. Neither is silent: each is one warning.
"""
from __future__ import annotations

import warnings

import torch
from torch._C._dynamo import eval_frame


def in_compiled_region() -> bool:
    """Whether a ``torch.compile``'d function or module is running now (compiled, or skipped by Dynamo
    and so run eagerly): its eval-frame callback is set."""
    return eval_frame.get_eval_frame_callback() is not None


class CompileNotes:
    """The warnings of a run about compilation, each given once."""

    def __init__(self) -> None:
        self._said: set[str] = set()

    def _say(self, key: str, text: str) -> None:
        if key not in self._said:
            self._said.add(key)
            warnings.warn(f"tdbg recorder: {text}", RuntimeWarning, stacklevel=4)

    def ops_eager(self, iteration: int, scopes: bool = True) -> None:
        """An iteration at level "ops" ran a compiled function or module, which then ran eagerly
        (``scopes``: its module calls were seen, so its operators have their module scopes)."""
        lost = "" if scopes else "; its module calls ran inside the compiled program's graph, so its " \
            "operators carry no module scope"
        self._say("ops", f"iteration {iteration} is recorded at level \"ops\" and runs eagerly: torch.compile "
                  "steps aside while tdbg's dispatch mode sees every operator, so the iterations recorded at "
                  "\"ops\" compute with eager kernels (their numbers can differ in the last bits from the "
                  "compiled program's, and they run slower); levels \"modules\" and \"parameters\" keep the "
                  f"compiled program{lost}")

    def module_compiled(self, name: str, boundary: bool) -> None:
        """At level "modules", a compiled module's call is one node (``boundary``: ``torch.compile(m)``'s
        wrapper runs eagerly around it) or none (``m.compile()``): the calls inside it are not seen."""
        call = "records its call as one node (inputs, outputs and their gradients) and" if boundary else \
            "records no node for its calls (the weights, gradients, optimizer state and loss as at " \
            "\"parameters\") and"
        self._say("modules", f"{name} runs compiled: level \"modules\" {call} sees no module call inside the "
                  "compiled program (level \"ops\" sees them, running eagerly)")

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
