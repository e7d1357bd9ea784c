"""tdbg's own dump format (HDF5): the one writer any recorder uses (:mod:`.writer`), and its reader
(:mod:`.reader`, whose ``FORMAT`` the format table loads when a dump of this format is opened).

Specification: ``docs/tdbg-h5-format.md``. Recognising a dump (:mod:`.detect`) needs neither h5py nor
numpy, so this package exports nothing: import from its modules (``layout``: ``VERSION``; ``arrays``: ``Digest``,
``digest_of``; ``tensor``: ``H5Tensor``; ``writer``: ``DumpWriter``, ``IterationWriter``).
"""
