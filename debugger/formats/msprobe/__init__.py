"""msprobe (MindStudio Probe) dumps: step{N}/rank{R}/dump.json with .pt tensors or statistics only."""
from .reader import FORMAT

__all__ = ["FORMAT"]
