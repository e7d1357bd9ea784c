"""`tdbg serve`: the web UI."""
from __future__ import annotations

import argparse
import os
from typing import TextIO

from tdbg_web import create_app
from tdbg_web.server import listen, serve

from ..errors import DumpError
from .exits import Exit
from ..model import find_dump_roots
from ..model.sourceroots import parse_entries
from .common import add_cache, add_scheduler, add_source_root, cluster_workers


def add_arguments(s: argparse.ArgumentParser) -> None:
    """The arguments of `tdbg serve`."""
    s.add_argument("dump", nargs="?", help="dump or folder of dumps (default: dumps_sample/)")
    s.add_argument("--host", default="127.0.0.1", help="interface (default: loopback only)")
    s.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    s.add_argument("--allow-host", action="append", metavar="NAME",
                   help="also answer requests for this host name (repeatable; default: only the bound "
                        "host, and localhost, 127.0.0.1, [::1] when bound to loopback)")
    s.add_argument("--threads", type=int, default=8, help="request threads (default 8)")
    s.add_argument("--access-log", action="store_true", help="log every request on stderr (default: quiet)")
    add_scheduler(s)
    add_source_root(s)
    add_cache(s)


def default_sample() -> str:
    """``./dumps_sample`` if present, else the sample next to this package's source tree."""
    here = os.path.join(os.getcwd(), "dumps_sample")
    if os.path.isdir(here):
        return here
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # debugger/
    return os.path.join(os.path.dirname(package), "dumps_sample")


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Start the web UI."""
    path = args.dump or default_sample()
    find_dump_roots(path)  # fail early, with the path, when there is nothing to serve
    parse_entries(args.source_root or [])   # a malformed OLD=NEW fails here, as usage
    cluster_workers(args)                     # and so does a malformed --scheduler (nothing connects yet)
    app = create_app(path, {"SOURCE_ROOTS": list(args.source_root or []), "ALLOWED_HOSTS": list(args.allow_host or []),
                            "CACHE_DIR": args.cache_dir, "STATS_CACHE": not args.no_cache,
                            "SCHEDULER": args.scheduler})
    host = f"[{args.host}]" if ":" in args.host else args.host
    try:     # bound before "serving" is said: a taken port is the user's to change
        srv = listen(app, args.host, args.port, threads=args.threads, access_log=args.access_log)
    except OSError as exc:
        raise DumpError(None, f"cannot listen on {host}:{args.port}: {exc.strerror or exc} "
                              f"(another port: --port N)") from None
    port = getattr(srv, "effective_port", args.port)     # (--port 0: the one the system gave)
    out.write(f"tdbg serving {path} on http://{host}:{port}/\n")
    out.flush()
    serve(srv)
    return Exit.OK
