"""A real HTTP server on 127.0.0.1 in a thread, for the tests that need a socket (browser, Host checks)."""
from __future__ import annotations

import logging
import threading
from typing import Any

from werkzeug.serving import make_server


class LiveServer:
    """The app served by werkzeug on 127.0.0.1 in a thread."""

    def __init__(self, app: Any) -> None:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
