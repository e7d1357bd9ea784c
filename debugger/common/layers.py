"""The declared layers of tdbg, bottom first: which module may import which (checked by tests/test_layering.py; the README's
tree is checked against the package's folders by tests/test_readme_tree.py).

Data flows one way: files -> readers (formats) -> records -> model -> engines -> tools -> CLI / web.
A layer is named by module-name prefixes: ``debugger.model`` covers the module ``debugger/model.py`` and,
once it is a package, every module below ``debugger/model/``. The most specific entry wins. An entry
ending in ``.*`` covers each sub-package of a folder as a sibling of its own (each format folder), so a
new format folder needs no line here; a new module anywhere else must be placed (the test says so).
``may_import`` names lower layers, or single modules of one (the recorder may use the tdbg-h5 writer and
no other format). Imports inside a layer are free, except between the siblings of a ``.*`` entry and
between modules of different layers. Imports under ``if TYPE_CHECKING:`` never run and are not checked.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layer:
    """A named group of modules and the layers (or single modules) it may import."""

    name: str
    prefixes: tuple[str, ...]
    may_import: tuple[str, ...] = ()
    exact: tuple[str, ...] = ()        # modules covered by their exact name only (a package's __init__)


_BASE = ("base",)
_READ = _BASE + ("seam",)
_MODEL = _READ + ("table", "model")
_ENGINES = ("query", "watch", "compare")

LAYERS: tuple[Layer, ...] = (
    # Leaf helpers that know no dump: errors, number ranges, where work runs (executors, the paused collector),
    # this table, statistics and their cache, the generated protobuf module, the 1,000-rank summaries (views/ranks.py:
    # numpy only).
    Layer("base", ("debugger.errors", "debugger.common", "debugger.stats", "debugger.views.ranks", "debugger.proto"),
          exact=("debugger.views",)),
    # The seam every format reads through: records, the reader protocol, safe file access, .npy headers.
    Layer("seam", ("debugger.formats.records", "debugger.formats.base", "debugger.formats.files",
                   "debugger.formats.frames", "debugger.formats.npy", "debugger.formats.parallel"), _BASE),
    # One folder per format; a format imports no other format.
    Layer("formats", ("debugger.formats.*",), _READ),
    # The table of formats (debugger/formats/__init__.py): the one place that names them all.
    Layer("table", (), _READ + ("formats",), exact=("debugger.formats",)),
    # The PyTorch recorder writes tdbg-h5 and reads nothing back.
    Layer("recorder", ("debugger.torch",), _READ + ("debugger.formats.tdbg_h5",)),
    # The model of a dump: ranks, graphs, nodes, source stacks, history, their JSON form and source roots.
    # The package's __init__ (``from debugger import open_dump``, ``__version__``) re-exports the model.
    Layer("model", ("debugger.model",), _READ + ("table",), exact=("debugger",)),
    # Engines, each on its own: none imports another.
    Layer("query", ("debugger.query",), _MODEL),
    Layer("watch", ("debugger.watch",), _MODEL),
    Layer("compare", ("debugger.compare",), _MODEL),
    # Views built on the engines, each on its own, shared by the CLI and the web: the graph as pydot (export),
    # the triage of a dump, what the trends view draws of a per-step series (curves, heatmap, spikes).
    Layer("export", ("debugger.views.export",), _MODEL + ("query",)),
    Layer("triage", ("debugger.views.triage",), _MODEL + _ENGINES),
    Layer("seriesviews", ("debugger.views.series",), _MODEL + ("watch",)),
    # convert writes tdbg's own format, whatever it reads: through the one tdbg-h5 writer, as the recorder does.
    # Its per-step series go through tdbg-h5's one series writer.
    Layer("convert", ("debugger.convert",),
          _MODEL + ("debugger.formats.tdbg_h5.writer", "debugger.formats.tdbg_h5.series")),
    # The web layer asks the library only: never a format or the seam (it reads no files itself).
    Layer("web", ("tdbg_web",), _BASE + ("model",) + _ENGINES + ("export", "triage", "seriesviews")),
    # The command line: every command; `tdbg serve` starts the web layer.
    Layer("cli", ("debugger.cli",), _MODEL + _ENGINES + ("export", "triage", "convert", "web")),
)

# The model package's own layers, bottom first: a module of debugger/model/ may import only the ones before it
# (its __init__ re-exports them all and is not ranked). Source stacks know no graph; a graph knows no rank;
# history, the top, reads tensors of ranks across iterations.
MODEL_ORDER: tuple[str, ...] = ("source", "sourceroots", "graph", "locate", "layers", "logical", "tensors", "stepseries", "shards",
                                "rank", "dump", "history", "serialize")
