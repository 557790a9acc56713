"""The tiny study's report opened in a real browser (Debian's chromium, driven by playwright):
every page loads without a console error, makes no request beyond its own file (every other
request is blocked and recorded, and the blocking is shown to catch one), every image decodes
and has alt text, every link resolves to a page of the report, and the value a matrix cell
shows on hover equals the number in the result.

Not skipped where chromium or playwright is missing: it fails saying how to install them
(CI's .ci/run installs chromium as root; playwright is in the test extra)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail(
            "chromium is not installed: apt-get install -y chromium (.ci/run does it as root)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "playwright is not installed: pip install -e '.[test]' (or pip install playwright)"
        )
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def open_page(browser, url: str):
    """(page, blocked requests, console errors) of `url` loaded with every request but file:
    ones aborted and recorded."""
    context = browser.new_context()
    blocked, errors = [], []

    def route(r):
        if r.request.url.startswith("file:") or r.request.url.startswith("data:"):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url, wait_until="load")
    return page, blocked, errors


def test_the_network_block_catches_a_request(browser, tmp_path):
    """The blocking route sees a request a page does make (so an empty list below means none)."""
    p = tmp_path / "probe.html"
    p.write_text('<img src="http://example.invalid/x.png" alt="x">', encoding="utf-8")
    page, blocked, _ = open_page(browser, p.as_uri())
    page.context.close()
    assert blocked == ["http://example.invalid/x.png"]


def test_every_page_loads_offline_with_images_and_links(tiny_study, browser):
    _, root, _ = tiny_study
    report = Path(root) / "report"
    pages = sorted(report.rglob("*.html"))
    assert {p.relative_to(report).as_posix() for p in pages} >= {
        "index.html",
        "corpus.html",
        "pairs/a--b.html",
        "pairs/a--c.html",
        "models/a.html",
    }
    for path in pages:
        page, blocked, errors = open_page(browser, path.as_uri())
        assert blocked == [] and errors == [], (path, blocked, errors)
        assert page.inner_text("h1").strip(), path
        images = page.evaluate(
            "Array.from(document.images).map(i => [i.complete && i.naturalWidth > 0, i.alt])"
        )
        assert all(ok and alt for ok, alt in images), (path, images)
        for href in page.evaluate("Array.from(document.links).map(a => a.href)"):
            target = Path(unquote(urlparse(href).path))
            assert href.startswith("file:") and target.is_file(), (path, href)
            assert report in target.parents, (path, href)
        page.context.close()
    index, _, _ = open_page(browser, (report / "index.html").as_uri())
    assert index.evaluate("document.images.length") == 2  # a -> b and a -> c
    index.context.close()


def test_a_hover_shows_the_results_number(tiny_study, browser):
    from align.store import open_result

    _, root, _ = tiny_study
    ds = open_result(f"{root}/results/fits/a--b.zarr")
    page, _, _ = open_page(browser, (Path(root) / "report/pairs/a--b.html").as_uri())
    cells = page.locator("table.m span[title]")
    assert cells.count() == ds.relative_error.size
    for k in (0, cells.count() - 1):
        cells.nth(k).hover()
        title = cells.nth(k).get_attribute("title")
        i, j, value = re.fullmatch(
            r"source boundary (\d+), target boundary (\d+): relative_error ([0-9.]+) \[.*\]", title
        ).groups()
        expected = float(ds.relative_error.sel(source_boundary=int(i), target_boundary=int(j)))
        assert abs(float(value) - expected) <= 5e-7, (title, expected)  # shown with 6 decimals
        assert float(cells.nth(k).get_attribute("data-value")) == expected
    page.context.close()


@pytest.fixture(scope="module")
def measured_study(zoo, corpus_file, tmp_path_factory):
    """The tiny study's two-model form (a -> b) with cka and procrustes calibrated by 2 null
    draws: its DIR."""
    from align.study import load_study, run_study
    from tests.helpers.fixtures_study import study_text

    root = tmp_path_factory.mktemp("measured-study")
    path = root / "measured.toml"
    extra = '[fit]\nmeasures = ["cka", "procrustes"]\npermutations = 2\n'
    path.write_text(study_text(zoo, corpus_file, extra, models=("a", "b")), encoding="utf-8")
    run_study(load_study(str(path)), str(root / "out"), log=lambda m: None)
    return str(root / "out")


def test_a_measures_hover_and_calibration_are_the_results_numbers(measured_study, browser):
    """A study's `[fit] measures` reach its fit, and each measure has its own matrix on the
    pair's page: the value a hover on a cka and a procrustes cell shows is the result's; the
    path table follows each measure's direction (cka's row argmax, procrustes' row argmin,
    computed here with numpy) and shows the calibration's null mean and p of the result on
    that cell."""
    import numpy as np

    from align.store import open_result

    root = measured_study
    ds = open_result(f"{root}/results/fits/a--b.zarr")
    page, _, _ = open_page(browser, (Path(root) / "report/pairs/a--b.html").as_uri())
    for name, pick in (("cka", np.argmax), ("procrustes", np.argmin)):
        cells = page.locator(f"table.m span[title*=': {name} ']")
        assert cells.count() == ds[name].size, name
        last = cells.count() - 1
        cells.nth(last).hover()
        title = cells.nth(last).get_attribute("title")
        i, j, value = re.fullmatch(
            rf"source boundary (\d+), target boundary (\d+): {name} ([-0-9.e]+) \[.*\]", title
        ).groups()
        expected = float(ds[name].sel(source_boundary=int(i), target_boundary=int(j)))
        assert abs(float(value) - expected) <= 5e-7, (title, expected)
        m = ds[name].transpose("source_boundary", "target_boundary")
        path = [int(m.target_boundary[k]) for k in pick(m.values, axis=1)]
        heading = page.locator(f"h2:text-is('{name}')")
        table = heading.locator("xpath=following-sibling::table[1]")
        rows = table.locator("tr").all_inner_texts()[1:]
        assert [int(r.split("\t")[1].split()[1]) for r in rows] == path, (name, rows)
        first = rows[0].split("\t")
        b0 = int(m.source_boundary[0])
        cell = dict(source_boundary=b0, target_boundary=path[0])
        null = float(ds[f"{name}_null_mean"].sel(cell))
        p = float(ds[f"{name}_p"].sel(cell))
        assert abs(float(first[3]) - null) <= 5e-4 and abs(float(first[5]) - p) <= 5e-4, first
    page.context.close()
