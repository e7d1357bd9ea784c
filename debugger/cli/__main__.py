"""``python -m debugger.cli ...``: the `tdbg` command."""
import sys

from . import main

sys.exit(main())
