"""The /api routes, one blueprint an area: read the arguments (web/params.py), call one library function, return
JSON.

Every list is a page (``begin`` inclusive, ``end`` exclusive; no end = one page of PAGE_SIZE)
echoing ``begin``, ``end`` and ``total``. Every request may name the dump with ``?dump=ID``
(ids from ``/api/dumps``; default: the first). Errors are ``{"error": message}`` with 400
(malformed argument, unusable dump) or 404 (no such rank, graph, node, tensor...).
"""
from __future__ import annotations

from .code import code_bp
from .compare import compare_bp
from .dumps import dumps_bp
from .graph import graph_bp
from .tensors import tensors_bp
from .watch import watch_bp

BLUEPRINTS = (dumps_bp, graph_bp, tensors_bp, code_bp, watch_bp, compare_bp)
