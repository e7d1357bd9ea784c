"""The node kinds every format assigns (from graph evidence, never from names alone)."""
from __future__ import annotations

KINDS = ("weight", "gradient", "optimizer_state", "activation", "loss", "input", "constant", "other")
