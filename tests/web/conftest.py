"""Fixtures of the web tests: real dumps (a dumpmaker dump built per test, dumps_sample/), an app and its
test client, and for the browser tests a live server and headless Chromium."""
from __future__ import annotations

import os
from typing import Any, Callable, Iterator

import pytest

import dumpmaker
from liveserver import LiveServer
from tdbg_web import create_app

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dumps_sample")
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(autouse=True)
def _cache_elsewhere(monkeypatch: Any, tmp_path: Any) -> None:
    """No statistics cache may land in the home directory."""
    monkeypatch.setenv("TDBG_CACHE_DIR", str(tmp_path / "cache-env"))


USER_SCRIPT = "t.py"   # the training script the stacks of mlp_dump name, written beside the dump


@pytest.fixture
def mlp_dump(tmp_path: Any) -> str:
    """A dumpmaker dump root in MindSpore 2.10's layout: rank 0, graph 0, iterations 0-1 of its MLP (Momentum)."""
    return dumpmaker.make_dump(str(tmp_path / "mlp"), iterations=2, user_file=str(tmp_path / USER_SCRIPT))


@pytest.fixture
def mlp_script(mlp_dump: str) -> str:
    """The user script that the source stacks of ``mlp_dump`` name (written by dumpmaker beside the dump)."""
    return os.path.join(os.path.dirname(mlp_dump), USER_SCRIPT)


@pytest.fixture
def make_app(tmp_path: Any) -> Callable[..., Any]:
    """``make_app(path, **config)``: a real app in testing mode, caching under tmp_path."""
    def factory(path: str, **config: Any) -> Any:
        return create_app(path, {"TESTING": True, "CACHE_DIR": str(tmp_path / "cache"), **config})
    return factory


@pytest.fixture
def client(make_app: Callable[..., Any], mlp_dump: str) -> Any:
    """Test client on the dumpmaker dump of ``mlp_dump``."""
    return make_app(mlp_dump).test_client()


@pytest.fixture
def sample_client(make_app: Callable[..., Any], sample_root: str) -> Any:
    """Test client on dumps_sample/ (the parent folder of two dumps)."""
    return make_app(sample_root).test_client()


# -- browser -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium from the system (Playwright never downloads a browser here)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed")
    sync = pytest.importorskip("playwright.sync_api")
    with sync.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM,
                              args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        yield b
        b.close()


@pytest.fixture
def fresh_sample(tmp_path: Any) -> Iterator[LiveServer]:
    """dumps_sample/ served live with a cache of its own: the watchpoints set are this test's only."""
    if not os.path.isdir(SAMPLE):
        pytest.skip("dumps_sample/ is not present")
    srv = LiveServer(create_app(SAMPLE, {"CACHE_DIR": str(tmp_path / "cache")}))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def live_sample(tmp_path_factory: Any) -> Iterator[LiveServer]:
    """dumps_sample/ served live (skips when absent)."""
    if not os.path.isdir(SAMPLE):
        pytest.skip("dumps_sample/ is not present")
    app = create_app(SAMPLE, {"CACHE_DIR": str(tmp_path_factory.mktemp("ui-cache"))})
    srv = LiveServer(app)
    yield srv
    srv.stop()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page; fails the test on any JavaScript error."""
    # bypass_csp: Playwright evaluates its wait predicates with eval(), which the page's CSP forbids
    # (test_security.py loads the page under the CSP without it).
    ctx = browser.new_context(viewport={"width": 1500, "height": 920}, accept_downloads=True, bypass_csp=True)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" and "404" not in m.text else None)
    pg.set_default_timeout(10_000)
    yield pg
    ctx.close()
    assert not errors, f"JavaScript errors: {errors}"
