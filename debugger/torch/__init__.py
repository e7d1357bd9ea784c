"""PyTorch recorder: ``from debugger.torch import Recorder`` writes a tdbg-h5 dump of a training run.

Needs torch (``pip install "tdbg[torch]"``); nothing else in tdbg imports it, and reading a dump
it wrote never needs it.
"""
from .graphtaps import tdbg_backend
from .recorder import Recorder
from .triggers import TouchFile, Trigger

__all__ = ["Recorder", "TouchFile", "Trigger", "tdbg_backend"]
