"""Watchpoints: the condition registry, the condition rules, the scan engine and scan sessions."""
from __future__ import annotations

from .engine import scan
from .registry import CONDITIONS, PRESETS, Condition, Param, Watchpoint, describe_conditions, preset
from .results import ErrorRecord, Hit, ScanResult
from .session import ScanSession, SessionError, SessionHit
from ..common.selection import parse_iterations

__all__ = ["CONDITIONS", "PRESETS", "Condition", "ErrorRecord", "Hit", "Param", "ScanResult", "ScanSession",
           "SessionError", "SessionHit", "Watchpoint", "describe_conditions", "parse_iterations", "preset", "scan"]
