"""The arguments of ``optimizer.step``: the closure some loops pass (Lightning, LBFGS), and the same call
with another closure in its place (the recorder's and the series' hooks wrap it)."""
from __future__ import annotations

from typing import Any


def closure_of(args: Any, kwargs: Any) -> Any:
    """The closure passed to ``optimizer.step`` (``args`` starts with the optimizer), else None."""
    closure = kwargs.get("closure") if kwargs else None
    if closure is None and len(args) > 1:
        closure = args[1]
    return closure if callable(closure) else None


def with_closure(args: Any, kwargs: Any, closure: Any) -> tuple[Any, Any]:
    """``(args, kwargs)`` of ``optimizer.step`` with ``closure`` in place of the one given."""
    if kwargs and kwargs.get("closure") is not None:
        return args, {**kwargs, "closure": closure}
    return (args[0], closure, *args[2:]), kwargs
