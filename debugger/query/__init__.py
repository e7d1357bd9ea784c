"""View-shaped queries: what a browser pane asks for, as plain dicts, one page at a time.

The web layer calls these and nothing below them; they do no I/O of their own beyond what the
model's tensor sources and the source index do. One module per kind of question: pages, scopes,
tensors (and a node with its tensors), code, overlay (numbers on the graph).
"""
from __future__ import annotations

FOLD = 5                # same-type siblings folded into one node from this many on (scopes; the CLI's default)

# below FOLD: scopes reads it from here
from ..errors import InvalidQueryError  # noqa: E402
from .code import marks_for_line, nodes_at_line, nodes_at_location, source_files, source_lines  # noqa: E402
from .pages import DEFAULT_PAGE, MAX_PAGE, Page, check_range, page  # noqa: E402
from .scopes import (ScopeTree, hit_nodes, node_digest, place_of, scope_rollup, scope_tree,  # noqa: E402
                     scope_view, search_nodes)
from . import overlay  # noqa: E402
from .tensors import (VALUE_CAP, default_slice, find_tensor, json_values, node_detail,  # noqa: E402
                      previous_tensor, tensor_diff, tensor_digest, tensor_history, tensor_npy, tensor_summary,
                      tensor_values)

__all__ = [
    "DEFAULT_PAGE", "FOLD", "MAX_PAGE", "VALUE_CAP", "InvalidQueryError", "Page", "ScopeTree", "check_range",
    "default_slice", "find_tensor", "hit_nodes", "json_values", "marks_for_line", "node_detail", "node_digest",
    "nodes_at_line", "nodes_at_location", "page", "overlay", "place_of", "previous_tensor", "scope_rollup", "scope_tree", "scope_view",
    "search_nodes", "source_files", "source_lines", "tensor_diff", "tensor_digest", "tensor_history",
    "tensor_npy", "tensor_summary", "tensor_values",
]
