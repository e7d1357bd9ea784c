"""Pipeline parallelism: which micro-batch a stage is running, so each micro-batch's operators form
one part of the iteration (scope ``micro-K/...``), as ``torch.distributed.pipelining`` runs them."""
from __future__ import annotations

from typing import Any, Callable

_CHUNK_METHODS = ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk")


def stages_of(pipeline: Any) -> list[Any]:
    """The PipelineStage objects of a stage or a schedule ([] when it is neither)."""
    if pipeline is None:
        return []
    if hasattr(pipeline, "forward_one_chunk"):
        return [pipeline]
    many = getattr(pipeline, "_stages", None)
    if many:
        return list(many)
    one = getattr(pipeline, "_stage", None)
    return [one] if one is not None else []


class MicroBatches:
    """While installed, ``current`` is the micro-batch the stage's chunk methods run (None: none)."""

    def __init__(self) -> None:
        self.current: int | None = None
        self._patched: list[tuple[Any, str]] = []

    def install(self, pipeline: Any) -> None:
        """Wrap each stage's chunk methods on the instance (the class is not touched)."""
        for stage in stages_of(pipeline):
            for name in _CHUNK_METHODS:
                method = getattr(stage, name, None)
                if callable(method) and name not in vars(stage):
                    setattr(stage, name, self._wrap(method))
                    self._patched.append((stage, name))

    def remove(self) -> None:
        """Give the stages their own methods back."""
        for stage, name in self._patched:
            try:
                delattr(stage, name)
            except AttributeError:
                pass
        self._patched.clear()

    def _wrap(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def chunk(chunk_id: int, *args: Any, **kwargs: Any) -> Any:
            before = self.current
            self.current = chunk_id if isinstance(chunk_id, int) else None
            try:
                return method(chunk_id, *args, **kwargs)
            finally:
                self.current = before
        return chunk

    def scope(self) -> str:
        """The scope of the micro-batch running now ("" outside one)."""
        return "" if self.current is None else f"micro-{self.current}"
