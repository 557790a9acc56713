"""The documentation site as a reader's browser shows it: built by mkdocs (strict), served on
loopback and opened in headless Chromium (the system's, driven by playwright). Every page
checked fits its column at a desktop and a phone width (no table, formula or page wider than
the main column, and no table cut inside a scroll box), asks nothing of any network, draws its
formulas with the bundled KaTeX, and nests the lists the pages nest.

Chromium comes from the system (`.ci/run` installs it with apt-get when it is missing); set
ALIGN_CHROMIUM to use another binary. Without one the test is skipped, except under CI. Set
ALIGN_SCREENSHOTS to a folder to keep a full-page screenshot of each page checked, to look at:
no check reads one, and taking them was 23 of this file's 56 s."""

from __future__ import annotations

import functools
import http.server
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# an options table (extract, fit), formulas (methods), the generated API page
PAGES = ("commands/extract.html", "commands/fit.html", "methods.html", "api.html")
WIDTHS = (1280, 390)
SITES: dict = {}  # each served site's URL -> the folder it was built into
SCREENSHOTS = os.environ.get("ALIGN_SCREENSHOTS")  # a folder, or None: none taken

GEOMETRY = """() => {
  // The main column is .md-content (the theme lets a table's scroll box reach into its padding).
  const main = document.querySelector('.md-content');
  const box = main.getBoundingClientRect();
  // An element inside a box that scrolls (a code block, a display formula) is not past the
  // column; the box itself must fit. KaTeX's MathML copy is hidden (clipped) for readers.
  const inScrollBox = (el) => {
    for (let a = el.parentElement; a && a !== main; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== 'visible') return true;
    }
    return false;
  };
  const past = [...main.querySelectorAll('*')]
    .filter((el) => !el.closest('.katex-mathml') && !inScrollBox(el))
    .filter((el) => {
      const r = el.getBoundingClientRect();
      return r.width > 0 && (r.right > box.right + 1 || r.left < box.left - 1);
    })
    .map((el) => el.tagName + ':' + el.textContent.trim().slice(0, 60));
  const tables = [...main.querySelectorAll('table')];
  return {
    page: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
    past: past.slice(0, 5),
    cut_tables: tables
      .filter((t) => [t, t.parentElement, t.parentElement.parentElement]
        .some((e) => e.scrollWidth > e.clientWidth + 1))
      .map((t) => t.textContent.trim().slice(0, 60)),
    formulas: main.querySelectorAll('.arithmatex').length,
    drawn: main.querySelectorAll('.arithmatex .katex').length,
    failed: main.querySelectorAll('.katex-error').length,
    raw: (main.innerText.match(/\\$\\$|\\\\frac|\\\\sum/g) || []).length,
  };
}"""


def _chromium() -> str | None:
    return (
        os.environ.get("ALIGN_CHROMIUM")
        or shutil.which("chromium")
        or shutil.which("chromium-browser")
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built by `mkdocs build --strict` and served on 127.0.0.1: its base URL."""
    out = tmp_path_factory.mktemp("site")
    mkdocs = pathlib.Path(sys.executable).with_name("mkdocs")
    run = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert run.returncode == 0, run.stderr[-3000:]

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(out))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    SITES[url] = str(out)
    yield url
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    binary = _chromium()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("no Chromium: .ci/run installs it (apt-get install chromium)")
        pytest.skip("no Chromium on this machine (set ALIGN_CHROMIUM, or install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=binary, args=["--no-sandbox"])
        yield b
        b.close()


def _open(browser, site, page_path, width):
    """(page, the URLs it asked for outside the site): every such request is aborted."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    outside = []

    def route(r):
        if r.request.url.startswith(site):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.goto(site + page_path, wait_until="networkidle")
    # The theme's script puts each table in its scroll box after the load; on a busy machine
    # that can come after "networkidle", and the page is checked as a reader sees it.
    page.wait_for_function(
        """() => [...document.querySelectorAll('.md-typeset table:not([class])')]
                   .every((t) => t.parentElement.classList.contains('md-typeset__table'))""",
        timeout=30_000,
    )
    return page, outside


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("page_path", PAGES)
def test_page_fits_its_column_offline(browser, site, page_path, width):
    page, outside = _open(browser, site, page_path, width)
    g = page.evaluate(GEOMETRY)
    if SCREENSHOTS:
        shot = pathlib.Path(SCREENSHOTS) / f"{page_path.replace('/', '-')}-{width}.png"
        page.screenshot(path=str(shot), full_page=True)
    page.close()
    assert outside == [], f"{page_path} asked the network for {outside}"
    assert g["page"][0] <= g["page"][1], f"{page_path} at {width}px scrolls sideways: {g['page']}"
    assert g["past"] == [], f"{page_path} at {width}px: past the main column: {g['past']}"
    assert g["cut_tables"] == [], f"{page_path} at {width}px: tables cut in a scroll box"
    assert g["failed"] == 0 and g["raw"] == 0, g
    assert g["drawn"] == g["formulas"], g


def test_formulas_drawn_and_lists_nested(browser, site):
    page, outside = _open(browser, site, "methods.html", 1280)
    g = page.evaluate(GEOMETRY)
    nested = page.evaluate(
        """() => [...document.querySelectorAll('.md-content__inner li li')]
                   .map((li) => li.textContent.trim().slice(0, 40))"""
    )
    paragraphs = page.evaluate(
        """() => [...document.querySelectorAll('.md-content__inner p, .md-content__inner li')]
                   .map((p) => p.textContent).filter((t) => /\\n\\s*- \\S/.test(t))"""
    )
    page.close()
    assert outside == []
    # the page's display formulas (twelve $$ blocks) and every inline one, each drawn by KaTeX
    source = (ROOT / "docs" / "methods.md").read_text()
    assert g["formulas"] >= source.count("$$") // 2 >= 12, g
    assert g["drawn"] == g["formulas"] and g["failed"] == 0, g
    # "Pairing tokens across tokenizers": the byte pieces' item nests under its parent item
    assert any(t.startswith("Of the byte pieces") for t in nested), nested
    assert paragraphs == [], paragraphs


SECTIONS = """(id) => {
  // The section tables of one documented object: {"Parameters:": [first column], ...}
  const contents = document.getElementById(id).closest('.doc-object')
    .querySelector(':scope > .doc-contents');
  const out = {};
  for (const title of contents.querySelectorAll(':scope > p > .doc-section-title')) {
    // the theme wraps each table in its scroll box: the table is the next element or in it
    const next = title.parentElement.nextElementSibling;
    const table = next && (next.tagName === 'TABLE' ? next : next.querySelector('table'));
    out[title.textContent.trim()] = table && table.getBoundingClientRect().width > 0
      ? [...table.querySelectorAll('tbody tr')].map((r) => r.cells[0].innerText.trim())
      : null;
  }
  return out;
}"""


def test_api_page_shows_parameters_as_tables(browser, site):
    import inspect

    import align

    page, outside = _open(browser, site, "api.html", 1280)
    fit = page.evaluate(SECTIONS, "align.fitting.fit")
    apply_map = page.evaluate(SECTIONS, "align.fitting.results.maps.apply_map")
    page.close()
    assert outside == []
    # the reference is the signature itself: one row a parameter, in its order, on the page
    for sections, function in ((fit, align.fit), (apply_map, align.apply_map)):
        names = [
            ("**" if p.kind is p.VAR_KEYWORD else "") + name
            for name, p in inspect.signature(function).parameters.items()
        ]
        assert sections.get("Parameters:") == names, (function.__name__, sections)
        assert sections.get("Returns:"), (function.__name__, sections)
        assert sections.get("Raises:"), (function.__name__, sections)
    assert "NonFiniteError" in fit["Raises:"], fit


def test_site_opened_from_disk_links_to_pages(browser, site):
    """Opened as files (file://, no server), every link between the site's pages names a page
    file that exists, never a folder (which a browser shows as a directory listing); following
    the home page's link to `align fit` in Chromium opens that page."""
    import re
    import urllib.parse

    out = pathlib.Path(SITES[site])
    broken = []
    for html in out.rglob("*.html"):
        if html.name == "404.html":  # a server's page for a missing path, never opened from disk
            continue
        for href in re.findall(r'href="([^"#?]+)', html.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", href) or href.startswith("//"):
                continue
            target = (html.parent / urllib.parse.unquote(href)).resolve()
            if not target.is_file():
                broken.append(f"{html.relative_to(out)} -> {href}")
    assert broken == [], broken[:10]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((out / "index.html").as_uri())
    page.click('.md-content a[href="commands/fit.html"]')
    page.wait_for_load_state()
    assert page.url.endswith("/commands/fit.html"), page.url
    assert page.locator("h1").first.inner_text().startswith("align fit")
    page.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_code_blocks_show_their_whole_text(browser, site, width):
    """A code block wraps inside the column: none is wider than its box (no text cut at the
    right or hidden under the copy button), at a desktop and a phone width."""
    page, outside = _open(browser, site, "commands/fit.html", width)
    cut = page.evaluate(
        """() => [...document.querySelectorAll('.md-typeset pre > code')]
                   .filter((c) => c.scrollWidth > c.clientWidth + 1)
                   .map((c) => c.textContent.slice(0, 60))"""
    )
    blocks = page.evaluate("() => document.querySelectorAll('.md-typeset pre > code').length")
    page.close()
    assert blocks > 0
    assert cut == [], f"at {width}px: {cut}"


def test_home_page_lists_every_command():
    """docs/index.md's command table has a row for every command `align --help` lists."""
    from align.cli.main import COMMANDS

    text = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    table = text.split("## The commands", 1)[1].split("\n## ", 1)[0]
    missing = [c for c in COMMANDS if f"[`align {c}`](commands/{c}.md)" not in table]
    assert missing == [], missing
