"""A real HTTP server on 127.0.0.1 in a thread, for the tests that need a socket (browser, Host
checks): the same waitress server `tdbg serve` runs (tdbg_web.server.make_server)."""
from __future__ import annotations

import threading
from typing import Any

from tdbg_web.server import make_server, stop


class LiveServer:
    """The app served by waitress on 127.0.0.1 (a free port) in a thread, as `tdbg serve` serves it."""

    def __init__(self, app: Any, **options: Any) -> None:
        self.server = make_server(app, "127.0.0.1", 0, **options)
        self.port = int(self.server.effective_port)
        self.url = f"http://127.0.0.1:{self.port}/"
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        stop(self.server)
        self.thread.join(10)
