"""Helpers every layer may use, which know no dump: iteration and rank selections (selection.py), where tensor
work runs (executors.py: this process, a fork pool, a Dask cluster), the paused garbage collector (gcpause.py),
and the declared layers of the package (layers.py)."""
