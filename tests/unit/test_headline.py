"""The headline of an alignment result (`align fit`'s last line, `align info`'s first), from a
hand-written summary: the pair without hashes, the path, the slope with its interval, the
control it is."""

from align.fitting.results.headline import headline

SUMMARY = {
    "argmin_path": [2, 4, 6],
    "source_boundaries": [1, 2, 3],
    "slope": 0.954,
    "slope_low": 0.801,
    "slope_high": 1.104,
    "spearman": 1.0,
    "spearman_low": 0.5,
    "spearman_high": 1.0,
}


def test_headline_of_a_pair():
    attrs = {
        "summary": SUMMARY,
        "source_model": "/m/shallow-4f2a9c01b3de",
        "target_model": "/m/deep-0123456789ab",
        "options": {},
    }
    assert headline(attrs) == (
        "shallow → deep: argmin path j*(i) [2, 4, 6] for i = [1, 2, 3]; slope 0.95 [0.80, 1.10] "
        "(1: the diagonal, 0: flat); Spearman 1.00 [0.50, 1.00]"
    )


def test_headline_of_a_control_and_of_a_random_init_target():
    attrs = {
        "summary": {**SUMMARY, "spearman": None, "spearman_note": "undefined: constant path"},
        "source_model": "Qwen/Qwen2.5-0.5B",
        "target_model": "/m/deep-0123456789ab",
        "target": {"random_init": True, "seed": 3},
        "options": {"control": "shuffle"},
    }
    assert headline(attrs).startswith(
        "Qwen2.5-0.5B → deep (random init), control shuffle (each source token paired with "
        "other documents' tokens): argmin path"
    )
    assert headline(attrs).endswith("; Spearman undefined: constant path")


def test_headline_without_a_summary():
    attrs = {"summary": {"argmin_path": [], "spearman_note": "undefined: no boundary >= 1"}}
    assert headline({**attrs, "source_model": "a", "target_model": "b"}) == (
        "a → b: no summary (undefined: no boundary >= 1)"
    )
