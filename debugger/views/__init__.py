"""What the CLI and the web UI show, built on the engines, one module a view: the triage of a dump (triage.py),
the curves, heatmap and spikes of a per-step series (series.py), the summaries of 1,000 ranks (ranks.py), one
scope level of the graph as pydot, DOT, SVG or PNG (export.py)."""
