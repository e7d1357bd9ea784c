"""View-shaped queries: what a browser pane asks for, as plain dicts, one page at a time.

The web layer calls these and nothing below them; they do no I/O of their own beyond what the
model's tensor sources and the source index do. One module per kind of question: pages, scopes,
tensors (and a node with its tensors), code, overlay (numbers on the graph).
"""
from __future__ import annotations

from ..errors import InvalidQueryError
from .code import marks_for_line, nodes_at_line, nodes_at_location, source_files, source_lines
from .pages import DEFAULT_PAGE, MAX_PAGE, Page, check_range, page
from .scopes import (FOLD, ScopeTree, hit_nodes, node_digest, place_of, scope_rollup, scope_tree,
                     scope_view, search_nodes)
from . import overlay
from .tensors import (VALUE_CAP, default_slice, find_tensor, json_values, node_detail,
                      previous_tensor, tensor_diff, tensor_digest, tensor_history, tensor_npy, tensor_summary,
                      tensor_values)

__all__ = [
    "DEFAULT_PAGE", "FOLD", "MAX_PAGE", "VALUE_CAP", "InvalidQueryError", "Page", "ScopeTree", "check_range",
    "default_slice", "find_tensor", "hit_nodes", "json_values", "marks_for_line", "node_detail", "node_digest",
    "nodes_at_line", "nodes_at_location", "page", "overlay", "place_of", "previous_tensor", "scope_rollup", "scope_tree", "scope_view",
    "search_nodes", "source_files", "source_lines", "tensor_diff", "tensor_digest", "tensor_history",
    "tensor_npy", "tensor_summary", "tensor_values",
]
