"""Modules that wrap the user's model (DDP, DataParallel, FSDP1's units, activation checkpointing,
``torch.compile``): the recorder names what they wrap, never the wrapper."""
from __future__ import annotations

from typing import Any

import torch

_WRAPPER_CLASSES = ("FullyShardedDataParallel", "CheckpointWrapper")


def is_wrapper(model: torch.nn.Module) -> bool:
    """DistributedDataParallel, DataParallel, FSDP1's units: named after the wrapped module (``.module``),
    no scope of their own."""
    return isinstance(model, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)) or \
        (type(model).__name__ in _WRAPPER_CLASSES and isinstance(getattr(model, "module", None), torch.nn.Module))


def is_compiled_wrapper(model: torch.nn.Module) -> bool:
    """``torch.compile(module)``'s ``OptimizedModule`` (its ``_orig_mod`` is the user's module)."""
    return isinstance(getattr(model, "_orig_mod", None), torch.nn.Module)


def wrapper_chain(model: torch.nn.Module) -> list[torch.nn.Module]:
    """``model`` and each wrapper inside it, outermost first, down to (not including) the user's module."""
    chain: list[torch.nn.Module] = []
    while is_wrapper(model) or is_compiled_wrapper(model):
        chain.append(model)
        model = model._orig_mod if is_compiled_wrapper(model) else model.module
    return chain


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The user's module under DDP, FSDP1, DataParallel and ``torch.compile`` wrappers, in any order."""
    chain = wrapper_chain(model)
    if not chain:
        return model
    last = chain[-1]
    return last._orig_mod if is_compiled_wrapper(last) else last.module


def unwrap_optimizer(opt: Any) -> Any:
    """The torch optimizer under accelerate's ``AcceleratedOptimizer`` (a subclass of Optimizer that never
    ran its ``__init__``: it has no hook dicts) or Lightning's ``LightningOptimizer``: the one whose step
    hooks fire when the update runs."""
    inner = getattr(opt, "optimizer", None)
    while isinstance(inner, torch.optim.Optimizer):
        opt, inner = inner, getattr(inner, "optimizer", None)
    return opt


def runs_compiled(root: torch.nn.Module, model: torch.nn.Module) -> list[str]:
    """Which of the model's modules are compiled now (``torch.compile(m)`` around it, ``m.compile()``)."""
    found = ["model"] if any(is_compiled_wrapper(m) for m in wrapper_chain(model)) else []
    for path, m in root.named_modules():
        if getattr(m, "_compiled_call_impl", None) is not None or is_compiled_wrapper(m) or _compiled_forward(m):
            found.append(path or "model")
    return found


def _compiled_forward(m: torch.nn.Module) -> bool:
    """A forward replaced by its compiled self (Lightning's ``torch.compile(module)`` handling keeps the
    module and swaps its forward; ``_compiler_ctx`` says so)."""
    forward = m.__dict__.get("forward")
    return getattr(m, "_compiler_ctx", None) is not None or \
        getattr(forward, "_torchdynamo_orig_callable", None) is not None


def has_callable_submodule(root: torch.nn.Module) -> bool:
    """Whether a module below ``root`` has a forward of its own: a call the module hooks would see (a
    ParameterList or ParameterDict, never called, has none)."""
    return any(type(m).forward is not torch.nn.Module.forward for m in root.modules() if m is not root)
