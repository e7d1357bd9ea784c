"""Watchpoints: the condition registry and the scan engine."""
from __future__ import annotations

from .engine import ErrorRecord, Hit, ScanResult, parse_iterations, scan
from .registry import CONDITIONS, PRESETS, Condition, Param, Watchpoint, describe_conditions, preset

__all__ = ["CONDITIONS", "PRESETS", "Condition", "ErrorRecord", "Hit", "Param", "ScanResult", "Watchpoint",
           "describe_conditions", "parse_iterations", "preset", "scan"]
