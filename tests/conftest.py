"""Shared fixtures: real dumps only, made by tests/dumpmaker.py or shipped in dumps_sample/."""
from __future__ import annotations

import itertools
import os
from typing import Any, Callable

import pytest

import dumpmaker

pytest_plugins = ["tiers"]     # markers by folder and need; modules needing a missing package left out

SAMPLE_ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dumps_sample")


@pytest.fixture
def sample_root() -> str:
    """The real MindSpore 2.10 dumps shipped in dumps_sample/ (skips when absent)."""
    if not os.path.isdir(SAMPLE_ROOT):
        pytest.skip("dumps_sample/ is not present")
    return SAMPLE_ROOT


@pytest.fixture
def make_dump(tmp_path: Any) -> Callable[..., str]:
    """Factory: ``make_dump(name=None, **dumpmaker options)`` writes a dump under tmp_path, returns its root."""
    counter = itertools.count()

    def factory(name: str | None = None, **options: Any) -> str:
        return dumpmaker.make_dump(str(tmp_path / (name or f"dump{next(counter)}")), **options)

    return factory


# run_cli: provided by the CLI's owner (calls debugger.cli.main in-process); not defined here.
