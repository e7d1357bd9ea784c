"""Where tensor work runs: this process, a local fork pool, or a Dask cluster (``--scheduler``).

The engines (scan, compare, convert) see one interface, :class:`Workers`: ``submit`` a pure function
of plain data and get a ``concurrent.futures.Future`` back. Dask is imported only when a scheduler
is asked for. On a cluster, work stays exact when a worker dies: every task is a pure function of
tensor identities (path, size, mtime) to numbers, so Dask may run a lost task again on another
worker, and the client merges results keyed by identity (a result computed twice is the same
result, stored once).
"""
from __future__ import annotations

import contextlib
import os
import re
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..errors import DumpError

if TYPE_CHECKING:   # imported where a pool or a future is made: a scan answered from the cache needs neither
    from concurrent.futures import Executor, Future

LOCAL = "local"
_LOCAL_RE = re.compile(r"^local(?::(\d+))?$")


class Workers:
    """An executor and how many tasks it runs at once; ``executor`` None runs everything here.

    A cluster connects on first use (``connect`` gives the executor, its task slots and what to
    close), so a command answered from the cache never starts or reaches one.
    """

    def __init__(self, executor: Executor | None, slots: int, cluster: bool = False,
                 closers: tuple[Callable[[], Any], ...] = (), where: str = "this process",
                 connect: Callable[[], tuple[Executor, int, tuple[Callable[[], Any], ...]]] | None = None) -> None:
        self._executor = executor
        self._slots = max(1, slots)
        self.cluster = cluster
        self.where = where
        self._closers = closers
        self._connect = connect
        self._lock = threading.Lock()   # the web UI's background threads share one cluster

    def _ensure(self) -> None:
        if self._connect is None:
            return
        with self._lock:
            if self._connect is not None:
                self._executor, slots, self._closers = self._connect()
                self._connect = None
                self._slots = max(1, slots)

    @property
    def executor(self) -> Executor | None:
        """The executor (a cluster is connected to here, on first use)."""
        self._ensure()
        return self._executor

    @property
    def slots(self) -> int:
        """Tasks that run at once (a cluster's worker threads, counted when connecting)."""
        self._ensure()
        return self._slots

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Run ``fn(*args)`` on a worker (here, at once, when there is no executor)."""
        executor = self.executor
        if executor is None:
            from concurrent.futures import Future   # local: a cached re-scan loads no concurrent.futures

            fut: Future = Future()
            try:
                fut.set_result(fn(*args))
            except Exception as exc:  # noqa: BLE001 - handed to the caller through the future
                fut.set_exception(exc)
            return fut
        return executor.submit(fn, *args)

    def close(self) -> None:
        """Stop what this object started (a local pool, a LocalCluster, the client's connection)."""
        self._connect = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        for close in self._closers:
            close()
        self._closers = ()

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Objects a fork pool's workers find by name: they start with the parent's, opened and loaded already.
_SHARED: dict[str, Any] = {}


@contextlib.contextmanager
def shared_with_forks(**objects: Any) -> Iterator[None]:
    """While inside, a process forked from this one finds each object by its name (:func:`forked`)."""
    _SHARED.update(objects)
    try:
        yield
    finally:
        for name in objects:
            _SHARED.pop(name, None)


def forked(name: str) -> Any:
    """In a worker: what its parent shared under ``name`` (:func:`shared_with_forks`), else None."""
    return _SHARED.get(name)


def local_workers(jobs: int | None = None) -> Workers:
    """A fork process pool of ``jobs`` workers (default: all cores); one job runs in this process."""
    jobs = max(1, jobs or os.cpu_count() or 1)
    if jobs == 1:
        return Workers(None, 1)
    # local: a cached re-scan starts no pool and loads neither (tests/test_lazy_imports.py)
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    # fork: the workers start at once and inherit the imported modules
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("fork"))
    return Workers(pool, jobs, where=f"{jobs} local processes")


def parse_scheduler(spec: str) -> tuple[str, int | None]:
    """``("local", N or None)`` for ``local[:N]``, else ``("address", None)``; ValueError when malformed."""
    spec = spec.strip()
    m = _LOCAL_RE.match(spec)
    if m:
        n = int(m.group(1)) if m.group(1) else None
        if n is not None and n < 1:
            raise ValueError(f"bad --scheduler {spec!r}: local:N needs N >= 1")
        return LOCAL, n
    if not spec or any(c.isspace() for c in spec):
        raise ValueError(f"bad --scheduler {spec!r}: expected local[:N] or a scheduler address (tcp://host:8786)")
    return spec, None


def connect(spec: str, jobs: int | None = None) -> Workers:
    """Workers on a Dask cluster: ``local[:N]`` starts a LocalCluster of N worker processes
    (default: ``jobs`` or all cores), anything else is the address of a running scheduler.

    ValueError for a malformed ``spec``; DumpError (on first use) when Dask is missing or the
    scheduler cannot be reached.
    """
    where, n = parse_scheduler(spec)
    if where == LOCAL:
        n = n or jobs or os.cpu_count() or 1
        label = f"a local Dask cluster of {n} worker(s)"
    else:
        label = f"the Dask cluster at {where}"
    return Workers(None, n or 1, cluster=True, where=label, connect=lambda: _dask(where, n))


def client_workers(client: Any) -> Workers:
    """Workers on the cluster of an existing ``distributed.Client`` (closing them leaves the client open)."""
    return Workers(client.get_executor(pure=False), sum(client.nthreads().values()), cluster=True,
                   where=f"the Dask cluster at {client.scheduler.address}")


def start_local_cluster(n_workers: int | None) -> Any:
    """A Dask LocalCluster of single-thread worker processes on loopback, its HTTP endpoint on a free port."""
    from distributed import LocalCluster   # local: Dask is optional (tdbg[dask])
    # The scheduler serves HTTP even without its dashboard, on port 8787 unless told otherwise: a second
    # cluster on the machine (another job, a parallel test) then moves it with a UserWarning. A free
    # loopback port keeps it quiet and local; one thread per worker since numpy reductions hold the GIL.
    return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                        dashboard_address="127.0.0.1:0", scheduler_kwargs={"dashboard": False})


def _dask(where: str, n: int | None) -> tuple[Executor, int, tuple[Callable[[], Any], ...]]:
    try:
        from distributed import Client   # local: Dask is optional (tdbg[dask]), for --scheduler only
    except ImportError:
        raise DumpError(None, "--scheduler needs Dask: pip install 'tdbg[dask]'") from None
    closers: tuple[Callable[[], Any], ...]
    if where == LOCAL:
        cluster = start_local_cluster(n)
        client = Client(cluster)
        closers = (client.close, cluster.close)
    else:
        try:
            client = Client(where)   # waits distributed.comm.timeouts.connect (Dask's config, 30 s)
        except (OSError, ValueError) as exc:
            raise DumpError(None, f"cannot reach the Dask scheduler at {where} ({exc})") from None
        closers = (client.close,)
    slots = sum(client.nthreads().values())
    # pure=False: a task runs for every submit (its arguments are plain data, no key is hashed from them)
    return client.get_executor(pure=False), slots, closers
