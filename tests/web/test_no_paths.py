"""A page shows no absolute path of the machine that serves it and no raw error text: the API's error
messages name the dump's files from the served folder's name down, and every view of the sample's
dumps, opened in Chromium, shows neither the served folder's absolute path nor an error's JSON."""
from __future__ import annotations

import os
from typing import Any

import pytest

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dumps_sample")
ABSOLUTE = os.path.dirname(SAMPLE) + os.sep       # the checkout's folder: no page names it

BAD_ASKS = [
    # (url, what the message must still name)
    ("/api/ranks/0/graphs/9/scope?dump=torch_dp2", "dumps_sample/torch_dp2/rank_0: no graph 9"),
    ("/api/ranks/5/graphs?dump=torch_dp2", "dumps_sample/torch_dp2: no rank 5"),
    ("/api/ranks/0/graphs/0/node?dump=torch_dp2&node=zz", "no node 'zz'"),
    ("/api/ranks/0/graphs/0/tensor?dump=torch_dp2&node=model/relu-0&iteration=7", "no iteration 7"),
    ("/api/ranks/0/graphs/0/tensor/values?dump=single&node=zz&iteration=0", "dumps_sample/single/rank_0"),
    ("/api/ranks/0/graphs/0/tensor/history?dump=torch_dp2&node=zz&iteration=0", "no tensor zz"),
    ("/api/ranks/0/graphs/0/tensor/npy?dump=torch_dp2&node=zz&iteration=0", "no tensor zz"),
    ("/api/info?dump=nope", "dumps_sample: no dump 'nope'"),
]


@pytest.mark.parametrize("url,names", BAD_ASKS)
def test_an_error_names_the_file_from_the_served_folder_down(sample_client: Any, url: str, names: str) -> None:
    r = sample_client.get(url)
    assert r.status_code in (400, 404), r.get_data(as_text=True)
    msg = r.get_json()["error"]
    assert names in msg
    assert ABSOLUTE not in msg


def test_the_dump_list_says_where_each_dump_is_with_no_absolute_path(sample_client: Any) -> None:
    items = sample_client.get("/api/dumps").get_json()["items"]
    where = {d["id"]: d["where"] for d in items}
    assert where["torch_dp2"] == "dumps_sample/torch_dp2"
    assert where["msprobe/md5_baseline"] == "dumps_sample/msprobe/md5_baseline"
    assert not any(ABSOLUTE in w for w in where.values())


# -- in Chromium ---------------------------------------------------------------------------------
VIEWS = [
    ("triage", "torch_dp2", ".triage-grid"),
    ("dumps", "torch_dp2", ".dump-item"),
    ("overview", "torch_dp2", ".metric"),
    ("graph", "torch_dp2", ".graph-view .gnode"),
    ("code", "torch_dp2", ".src-lines"),
    ("code", "single", ".src-lines"),
    ("tensor", "torch_dp2", ".tensor-grid"),      # iteration 0 has no previous one: said, with no path
    ("watch", "torch_dp2", ".watch-view, .page"),
    ("ranks", "torch_dp2", ".page, .ranks-view"),
    ("graph", "torch_dp2", ".error-box, .graph-view .gnode"),    # a scope that does not exist
]
EXTRA = {"tensor": "&node=model/relu-0&it=0&graph=0"}


@pytest.mark.browser
def test_no_view_shows_an_absolute_path_or_raw_error(page: Any, live_sample: Any) -> None:
    for i, (view, dump, ready) in enumerate(VIEWS):
        extra = EXTRA.get(view, "") + ("&scope=nope/none" if i == len(VIEWS) - 1 else "")
        page.goto("about:blank")
        page.goto(f"{live_sample.url}#/{view}?dump={dump}{extra}")
        page.wait_for_selector(ready)
        page.wait_for_load_state("networkidle")
        text = page.locator("body").inner_text()
        assert ABSOLUTE not in text, (view, dump, [ln for ln in text.splitlines() if ABSOLUTE in ln])
        for raw in ('"error"', "QueryError", "Traceback", "status\":"):
            assert raw not in text, (view, dump, raw)


@pytest.mark.browser
def test_the_code_view_lists_files_under_folders_with_no_install_path(page: Any, live_sample: Any) -> None:
    page.goto(f"{live_sample.url}#/code?dump=single")
    page.wait_for_selector(".src-lines")
    page.locator(".code-files input[type=checkbox]").check()           # framework files too
    page.wait_for_selector(".file-group:has-text('Framework')")
    folders = page.locator(".fi-dir").all_inner_texts()
    assert "mindspore/nn/layer/" in folders
    assert not any(f.startswith("/") or "site-packages" in f for f in folders), folders
    assert not page.locator(".src-title .ellipsis").inner_text().startswith("/")
    # drawn as written: the folder's trailing "/" to the right of its first letter (the box is right-to-left)
    drawn_in_order = page.locator(".fi-dir").first.evaluate("""(el) => {
      const t = el.firstChild, r = document.createRange();
      r.setStart(t, 0); r.setEnd(t, 1); const first = r.getBoundingClientRect().x;
      r.setStart(t, t.length - 1); r.setEnd(t, t.length); return r.getBoundingClientRect().x > first; }""")
    assert drawn_in_order


def test_the_code_api_gives_a_library_file_its_folder_from_the_package_on(sample_client: Any) -> None:
    items = sample_client.get("/api/ranks/0/code/files?dump=dp2&framework=true").get_json()["items"]
    library = {i["file"]: i["folder"] for i in items if "site-packages/" in i["file"]}
    assert library
    for path, folder in library.items():
        assert path.endswith(folder + path.rsplit("/", 1)[1]) and not folder.startswith("/")
    assert all(i["folder"] is None for i in items if "site-packages/" not in i["file"])
