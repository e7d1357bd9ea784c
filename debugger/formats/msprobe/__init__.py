"""msprobe (MindStudio Probe) dumps: step{N}/rank{R}/dump.json with .pt tensors or statistics only.

Recognising a dump (:mod:`.detect`) needs none of the reader: the format table loads :mod:`.reader`
(its ``FORMAT``) only when a dump of this format is opened, so this package exports nothing.
"""
