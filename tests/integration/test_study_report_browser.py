"""The tiny study's report opened in a real browser (Debian's chromium, driven by playwright):
every page loads without a console error, makes no request beyond its own file (every other
request is blocked and recorded, and the blocking is shown to catch one), every image decodes
and has alt text, every figure is named, every link resolves to a page of the report, and the
value a matrix cell shows on hover equals the number in the result. Every page fits a 1280 and
a 390 px wide screen (`test_every_page_fits_a_wide_and_a_narrow_screen`); the measures stand
side by side on a pair's page and the index's tabs switch its grid between them.

Not skipped where chromium or playwright is missing: it fails saying how to install them
(CI's .ci/run installs chromium as root; playwright is in the test extra)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
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
        figures = page.evaluate(
            "Array.from(document.querySelectorAll('svg')).map(s => s.getAttribute('aria-label'))"
        )
        assert all(figures), (path, figures)  # every figure is named
        for href in page.evaluate("Array.from(document.links).map(a => a.href)"):
            target = Path(unquote(urlparse(href).path))
            assert href.startswith("file:") and target.is_file(), (path, href)
            assert report in target.parents, (path, href)
        page.context.close()
    index, _, _ = open_page(browser, (report / "index.html").as_uri())
    assert index.evaluate("document.querySelectorAll('.grid a svg').length") == 2  # a->b, a->c
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
        table = heading.locator("xpath=following-sibling::div[@class='scroll'][1]/table")
        rows = table.locator("tr").all_inner_texts()[1:]
        assert [int(r.split("\t")[1].split()[1]) for r in rows] == path, (name, rows)
        first = rows[0].split("\t")
        b0 = int(m.source_boundary[0])
        cell = dict(source_boundary=b0, target_boundary=path[0])
        null = float(ds[f"{name}_null_mean"].sel(cell))
        p = float(ds[f"{name}_p"].sel(cell))
        assert abs(float(first[3]) - null) <= 5e-4 and abs(float(first[5]) - p) <= 5e-4, first
    page.context.close()


FIT = """() => {
  const doc = document.documentElement;
  const tables = [];
  for (const t of document.querySelectorAll('table')) {
    if (!t.getClientRects().length) continue;  // a pane of a tab not shown
    const box = t.parentElement, first = t.querySelector('td');
    tables.push({scroll: t.scrollWidth, room: box.clientWidth, overflow: getComputedStyle(box).overflowX,
                 right: box.getBoundingClientRect().right, sticky: first ? getComputedStyle(first).position : 'sticky'});
  }
  const fonts = [];
  for (const text of document.querySelectorAll('svg text')) {
    if (!text.getClientRects().length || !text.textContent.trim()) continue;
    const m = text.getScreenCTM();  // the size the text is shown at: its font size times its scale
    fonts.push([parseFloat(getComputedStyle(text).fontSize) * Math.hypot(m.a, m.b), text.textContent]);
  }
  const images = Array.from(document.images).filter(i => i.getClientRects().length)
    .map(i => [i.getBoundingClientRect().width, i.naturalWidth]);
  const pres = Array.from(document.querySelectorAll('pre')).map(p => p.closest('details') ? (p.closest('details').open ? 'open' : 'closed') : 'none');
  const figures = Array.from(document.querySelectorAll('svg')).filter(s => s.getClientRects().length).length;
  return {body: doc.scrollWidth, width: doc.clientWidth, tables, fonts, images, pres, figures,
          details: Array.from(document.querySelectorAll('details > summary')).map(s => s.innerText)};
}"""


@pytest.mark.parametrize("width", [1280, 390])
def test_every_page_fits_a_wide_and_a_narrow_screen(
    tiny_study, measured_study, lens_study, replicated_study, browser, width
):
    """Every page of the four studies (the lens study's kinds side by side and cross-model
    lens included, the replicated study's grid and its replicates' pages named by their
    folders) at `width` px: the body does not scroll sideways; every table
    fits its box or its box scrolls (overflow-x auto), with its first column fixed (sticky);
    every figure's text is shown at 9 px or more (an SVG text's font size times the scale it is
    drawn at), and no PNG is shown narrower than drawn; a pair page's provenance is in a closed
    <details> whose summary is one line."""
    studies = (tiny_study[1], measured_study, lens_study, replicated_study)
    roots = [Path(d) / "report" for d in studies]
    pages = [p for root in roots for p in sorted(root.rglob("*.html"))]
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    for path in pages:
        page.goto(path.as_uri(), wait_until="load")
        got = page.evaluate(FIT)
        assert got["body"] <= got["width"] == width, (path, got["body"])
        for t in got["tables"]:
            assert t["scroll"] <= t["room"] or t["overflow"] in ("auto", "scroll"), (path, t)
            assert t["right"] <= width and t["sticky"] == "sticky", (path, t)
        small = [f for f in got["fonts"] if f[0] < 9.0]
        assert not small and (got["fonts"] or not got["figures"]), (path, small[:3])
        assert all(shown >= drawn for shown, drawn in got["images"]), (path, got["images"])
        if path.parent.name == "pairs":
            assert got["pres"] == ["closed"], (path, got["pres"])
            (summary,) = got["details"]
            assert summary.startswith("Provenance: ") and "\n" not in summary.strip(), summary
    context.close()


PANELS = """() => {
  const svg = Array.from(document.querySelectorAll('svg[aria-label^="contrib of"]'))
    .find(s => s.getClientRects().length);
  const box = svg.getBoundingClientRect();
  const axes = Array.from(svg.querySelectorAll('g[id*="-axes_"]')).map(g => {
    const r = g.querySelector('g[id*="-patch_"]').getBoundingClientRect();
    return [r.left, r.top, r.right, r.bottom];
  });
  const out = Array.from(svg.querySelectorAll('text')).filter(t => t.textContent.trim())
    .map(t => [t.textContent, t.getBoundingClientRect()])
    .filter(([, r]) => r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1)
    .map(([text]) => text);
  return {box: [box.left, box.top, box.right, box.bottom], axes, out};
}"""


@pytest.mark.parametrize("width", [1280, 390])
def test_the_contributions_figure_is_readable_on_every_screen(tiny_study, browser, width):
    """A model page's contributions figure: at 1280 px its two panels side by side, at 390 px
    (a phone) one above the other, each panel (its plotting area) at least 70% of the figure's
    width and 200 px tall; at both widths every text of the figure (labels, ticks, legends, the
    caption) lies inside the figure's box, none cut."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto((Path(tiny_study[1]) / "report/models/a.html").as_uri(), wait_until="load")
    got = page.evaluate(PANELS)
    context.close()
    (left, _, right, _), axes = got["box"], got["axes"]
    assert right <= width and not got["out"], got
    assert len(axes) == 2, axes
    (a0, a1) = sorted(axes, key=lambda r: (r[1], r[0]))
    if width < 600:
        assert a1[1] >= a0[3], axes  # the cosines' panel under the norms'
        for x0, y0, x1, y1 in axes:
            assert x1 - x0 >= 0.7 * (right - left) and y1 - y0 >= 200, axes
    else:
        assert abs(a0[1] - a1[1]) < 1 and a1[0] >= a0[2], axes  # side by side


def test_the_lens_sections_load_offline_with_named_figures(lens_study, browser):
    """The lens study's model page draws the kinds side by side and its pair page a read
    through b's head: each page loads with no request beyond its file and no console error,
    each lens figure is named and shown (wide drawing at 1280 px), its legend names every kind
    and the table's first KL cell is the result's."""
    from align.store import open_result

    report = Path(lens_study) / "report"
    for rel, alt, kinds in (
        (
            "models/a.html",
            "lenses of a: KL and top-1 agreement per boundary",
            ("logit lens", "linear lens", "tuned lens"),
        ),
        (
            "pairs/a--b.html",
            "a read through b's head: KL and top-1 agreement per boundary",
            ("a through b",),
        ),
    ):
        page, blocked, errors = open_page(browser, (report / rel).as_uri())
        assert blocked == [] and errors == [], (rel, blocked, errors)
        fig = page.locator(f'div.fig.wide svg[aria-label="{alt}"]')
        assert fig.count() == 1 and fig.is_visible(), rel
        legend = fig.evaluate("s => s.textContent")
        assert all(kind in legend for kind in kinds), (rel, legend)
        page.context.close()
    ds = open_result(f"{lens_study}/results/lens-linear/a.zarr")
    page, _, _ = open_page(browser, (report / "models/a.html").as_uri())
    head = page.locator("h2", has_text="Lenses side by side")
    table = head.locator("xpath=following::table[1]")
    cell = table.locator("tr").nth(1).locator("td").nth(4).inner_text()  # boundary 0, linear KL
    assert cell.startswith(f"{float(ds['kl'].sel(weighting='token', boundary=0)):.4f}"), cell
    page.context.close()


RANGES = {"cka": (0.0, 1.0), "procrustes": (0.0, np.pi / 2)}  # docs/methods.md: their values


def jackknife_by_hand(ds, name: str, cols, bounds) -> tuple:
    """The delete-a-group jackknife t interval of the mean of `name` on the path (row a,
    column cols[a]), worked from the result's recomputations `<name>_left_out` with numpy and
    scipy: θ_(g) the path cells' mean without group g, se² = (G − 1)/G Σ (θ_(g) − θ̄)²,
    θ̂ ± t_(0.975, G − 1) se, clipped to the measure's range."""
    from scipy import stats

    dims = ("source_boundary", "target_boundary", "measure_group")
    left = ds[f"{name}_left_out"].transpose(*dims).values.astype(np.float64)
    rows = np.arange(len(cols))
    theta_g = left[rows, cols].mean(axis=0)
    value = ds[name].transpose(*dims[:2]).values.astype(np.float64)[rows, cols].mean()
    G = len(theta_g)
    se = np.sqrt((G - 1) / G * np.sum((theta_g - theta_g.mean()) ** 2))
    half = stats.t.ppf(0.975, G - 1) * se
    return tuple(np.clip([value - half, value + half], *bounds))


def test_the_measures_side_by_side(measured_study, browser):
    """A pair fitted with measures draws every measure's matrix in one row (ridge, cka,
    procrustes: each a panel, side by side at 1280 px) and tables their paths, slopes, values
    on the path with the jackknife interval of that mean (`align compare --measure`'s; ridge,
    whose result keeps no recomputations, says "no interval") and calibrated scores: each
    recomputed here with numpy and scipy from the result's arrays (the slope by numpy.polyfit
    of j/L_T on i/L_S over i >= 1, the interval by `jackknife_by_hand`)."""
    import numpy as np

    from align.store import open_result

    root = measured_study
    ds = open_result(f"{root}/results/fits/a--b.zarr")
    Ls, Lt = ds.attrs["n_layers_source"], ds.attrs["n_layers_target"]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto((Path(root) / "report/pairs/a--b.html").as_uri())
    row = page.locator("h2:text-is('Measures side by side') ~ div.row").first
    labels = row.locator("svg").evaluate_all("l => l.map(s => s.getAttribute('aria-label'))")
    assert [x.split(" matrix")[0] for x in labels] == ["ridge", "cka", "procrustes"], labels
    tops = row.locator("svg").evaluate_all("l => l.map(s => s.getBoundingClientRect().top)")
    assert max(tops) - min(tops) < 1, tops  # one row
    table = row.locator("xpath=following-sibling::div[@class='scroll'][1]/table")
    cells = {r.split("\t")[0]: r.split("\t") for r in table.locator("tr").all_inner_texts()[1:]}
    assert cells["ridge"][6].split("\n")[1] == "no interval", cells["ridge"]  # no recomputations
    src, tgt = ds.source_boundary.values, ds.target_boundary.values
    for name, pick in (("cka", np.argmax), ("procrustes", np.argmin)):
        m = ds[name].transpose("source_boundary", "target_boundary").values
        cols = pick(m, axis=1)
        path = tgt[cols]
        got = cells[name]
        assert got[2].split() == [str(int(j)) for j in path], (name, got)
        rows = src >= 1
        slope = np.polyfit(src[rows] / Ls, path[rows] / Lt, 1)[0]
        assert abs(float(got[3].split()[0]) - slope) <= 5e-4, (name, got[3], slope)
        k = np.arange(len(src))
        shown = got[6].split("\n")[0]
        value = float(shown.split()[0])
        assert abs(value - m[k, cols].mean()) <= 5e-4, (name, shown)
        if f"{name}_left_out" not in ds:  # a measure of the sampled rows keeps none
            assert got[6].split("\n")[1] == "no interval", (name, got)
        else:
            lo, hi = (float(x) for x in shown.split("[")[1].rstrip("]").split(","))
            want = jackknife_by_hand(ds, name, cols, RANGES[name])
            assert abs(lo - want[0]) <= 5e-4 and abs(hi - want[1]) <= 5e-4, (shown, want)
        calibrated = ds[f"{name}_calibrated"].transpose("source_boundary", "target_boundary")
        assert abs(float(got[7]) - calibrated.values[k, cols].mean()) <= 5e-4, (name, got[7])
    context.close()


def test_the_index_switches_its_grid_between_measures_without_a_script(measured_study, browser):
    """The index's tabs (radio buttons and CSS, no script) show one measure's grid at a time:
    ridge's first, cka's after a click on its tab."""
    page, blocked, errors = open_page(
        browser, (Path(measured_study) / "report/index.html").as_uri()
    )
    assert page.evaluate("document.scripts.length") == 0 and not blocked and not errors

    def shown():
        return page.evaluate(
            "Array.from(document.querySelectorAll('.grid a svg')).filter(s => s.getClientRects()"
            ".length).map(s => s.getAttribute('aria-label'))"
        )

    assert shown() == ["ridge matrix of a → b"]
    page.locator(".tabs label", has_text="cka").click()
    assert shown() == ["cka matrix of a → b"]
    page.locator(".tabs label", has_text="procrustes").click()
    assert shown() == ["procrustes matrix of a → b"]
    page.context.close()


@pytest.fixture(scope="module")
def replicated_study(zoo, corpus_file, tmp_path_factory):
    """A study of a and b, two checkpoints each (the zoo's models under two seeds), and c, one:
    a@k -> b@k and a@k -> c fitted. Its DIR."""
    from align.study import load_study, run_study
    from tests.helpers.fixtures_study import B_SHAPE
    from tests.helpers.study_files import write_study

    root = tmp_path_factory.mktemp("replicated-study")
    models = {
        "a": [str(zoo("qwen2")), str(zoo("qwen2", seed=1))],
        "b": [str(zoo("qwen2", **B_SHAPE)), str(zoo("qwen2", seed=1, **B_SHAPE))],
        "c": str(zoo("llama")),
    }
    path = write_study(
        root / "study.toml",
        models=models,
        corpus=str(corpus_file),
        pairs=[["a", "b"], ["a", "c"]],
        name="replicated",
        extra="[fit]\nbootstrap = 100\n",
    )
    run_study(load_study(str(path)), str(root / "out"), log=lambda m: None)
    return str(root / "out")


GRID = """() => Array.from(document.querySelectorAll('table.grid tr')).map(r =>
  Array.from(r.children).map(c => ({
    text: c.innerText,
    links: Array.from(c.querySelectorAll('a')).map(a => a.getAttribute('href')),
    svgs: c.querySelectorAll('svg').length})))"""


@pytest.mark.parametrize("width", [1280, 390])
def test_the_index_grid_is_models_by_models_with_replicates_in_a_cell(
    replicated_study, browser, width
):
    """Three models, two of them of two checkpoints each: the grid is 3 × 3 (not 5 × 5), a
    header and a row per model; the cell a → b holds one thumbnail and links to both replicate
    pairs' pages (a@1 → b@1, a@2 → b@2), the cell a → c to a@1 → c and a@2 → c, each page
    there; every other cell is empty; at 1280 and 390 px the page fits its screen."""
    report = Path(replicated_study) / "report"
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto((report / "index.html").as_uri(), wait_until="load")
    rows = page.evaluate(GRID)
    got = page.evaluate(FIT)
    context.close()
    assert [len(r) for r in rows] == [4, 4, 4, 4], rows
    assert [c["text"].strip() for c in rows[0][1:]] == ["a", "b", "c"]
    assert [r[0]["text"].strip() for r in rows[1:]] == ["a", "b", "c"]
    expected = {
        (1, 2): ["pairs/a@1--b@1.html", "pairs/a@2--b@2.html"],
        (1, 3): ["pairs/a@1--c.html", "pairs/a@2--c.html"],
    }
    for i in (1, 2, 3):
        for j in (1, 2, 3):
            cell = rows[i][j]
            if (i, j) not in expected:
                assert cell["svgs"] == 0 and not cell["links"], (i, j, cell)
                continue
            assert cell["svgs"] == 1 and "2 replicate pairs" in cell["text"], cell
            assert sorted(set(cell["links"])) == expected[(i, j)], cell
            assert all((report / href).is_file() for href in cell["links"]), cell
    assert got["body"] <= got["width"] == width, got["body"]
    for t in got["tables"]:
        assert t["scroll"] <= t["room"] or t["overflow"] in ("auto", "scroll"), t
