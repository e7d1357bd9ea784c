"""Names of a package that load from their modules on first use (PEP 562), so that importing the
package costs nothing until one is used (a cached re-scan needs neither numpy nor h5py)."""
from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Mapping, Sequence


def lazy_names(package: str, where: Mapping[str, str],
               public: Sequence[str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: each name of ``where`` imported from the
    submodule ``where[name]`` on first use and kept, ``public`` listed by ``dir()``."""
    module = sys.modules[package]

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{where[name]}", package), name)
        setattr(module, name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(module), *public})

    return __getattr__, __dir__
