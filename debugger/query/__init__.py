"""View-shaped queries: what a browser pane asks for, as plain dicts, one page at a time.

The web layer calls these and nothing below them; they do no I/O of their own beyond what the
model's tensor sources and the source index do. One module per kind of question: pages, scopes,
tensors (and a node with its tensors), code.

The names load on first use (PEP 562): a command that needs only :data:`FOLD` does not load numpy.
"""
from __future__ import annotations

from ..errors import InvalidQueryError
from ..lazy import lazy_names

FOLD = 5                # same-type siblings folded into one node from this many on (scopes; the CLI's default)

__all__ = [
    "DEFAULT_PAGE", "FOLD", "MAX_PAGE", "VALUE_CAP", "InvalidQueryError", "Page", "ScopeTree", "check_range",
    "default_slice", "find_tensor", "hit_nodes", "json_values", "marks_for_line", "node_detail", "node_digest",
    "nodes_at_line", "nodes_at_location", "page", "place_of", "previous_tensor", "scope_tree", "scope_view",
    "search_nodes", "source_files", "source_lines", "tensor_diff", "tensor_digest", "tensor_history",
    "tensor_npy", "tensor_summary", "tensor_values",
]

_WHERE = {"marks_for_line": "code", "nodes_at_line": "code", "nodes_at_location": "code", "source_files": "code",
          "source_lines": "code", "DEFAULT_PAGE": "pages", "MAX_PAGE": "pages", "Page": "pages",
          "check_range": "pages", "page": "pages", "ScopeTree": "scopes",
          "hit_nodes": "scopes", "node_digest": "scopes", "place_of": "scopes", "scope_tree": "scopes",
          "scope_view": "scopes", "search_nodes": "scopes", "VALUE_CAP": "tensors", "default_slice": "tensors",
          "find_tensor": "tensors", "json_values": "tensors", "node_detail": "tensors",
          "previous_tensor": "tensors", "tensor_diff": "tensors", "tensor_digest": "tensors",
          "tensor_history": "tensors", "tensor_npy": "tensors", "tensor_summary": "tensors",
          "tensor_values": "tensors"}

__getattr__, __dir__ = lazy_names(__name__, _WHERE, __all__)
