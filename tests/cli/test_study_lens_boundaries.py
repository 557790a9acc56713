"""A study whose linear or tuned lens, or read through a target's head, needs a model's final
boundary L that `[extraction] boundaries` leaves out of its store is refused when it is
planned (`align study` and its `--dry-run`): one line naming the model, L and what to do, exit
code 2, and nothing run or written (the study's folder is not made)."""

from __future__ import annotations

import pytest

from tests.helpers.study_files import write_study


def _file(tmp_path, zoo, corpus_file, analyses, boundaries="0:2"):
    """The study file: a (2 layers) and b (4 layers), a's analyses the lens."""
    a, b = zoo("qwen2"), zoo("qwen2", num_hidden_layers=4, hidden_size=96)
    return write_study(
        tmp_path / "s.toml",
        models={"a": str(a), "b": str(b)},
        corpus=str(corpus_file),
        analyses={"a": ["lens"]},
        pairs=[["a", "b"]],
        extra=f'[extraction]\nboundaries = "{boundaries}"\n[analyses]\n{analyses}\n',
    )


@pytest.mark.parametrize(
    "analyses, message",
    [
        (
            'lens = ["tuned"]',
            "[analyses] lens = ['tuned'] reads model a's final boundary 2, but [extraction] "
            "boundaries = '0:2' leaves it out of its store: include 2 (or -1) in boundaries, or "
            "drop tuned from lens",
        ),
        (
            'lens = ["logit", "linear", "tuned"]',
            "[analyses] lens = ['logit', 'linear', 'tuned'] reads model a's final boundary 2, but "
            "[extraction] boundaries = '0:2' leaves it out of its store: include 2 (or -1) in "
            "boundaries, or drop linear and tuned from lens",
        ),
        (
            "lens_through = true",
            "[analyses] lens_through = true reads model b's final boundary 4, but [extraction] "
            "boundaries = '0:2' leaves it out of its store: include 4 (or -1) in boundaries, or "
            "leave lens_through out",
        ),
    ],
)
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_store_without_the_final_boundary_is_refused_at_planning(
    cli, zoo, corpus_file, tmp_path, analyses, message, dry_run
):
    path = _file(tmp_path, zoo, corpus_file, analyses)
    out = tmp_path / "out"
    code, _, err = cli("study", path, "-o", out, *(["--dry-run"] if dry_run else []))
    assert code == 2, err
    assert err.strip() == f"align: error: study file {path}: {message}", err
    assert not out.exists()  # nothing run, nothing written


@pytest.mark.parametrize(
    "analyses, boundaries, route",
    [
        ('lens = ["tuned"]', "0,-1", "stores"),  # -1: each model's own L
        ('lens = ["logit"]', "0:2", "stores"),  # the logit lens reads no boundary L
        ('lens = ["linear"]', "0:2", "live"),  # the live route extracts every boundary
    ],
)
def test_a_study_keeping_or_not_needing_the_final_boundary_is_planned(
    zoo, corpus_file, tmp_path, analyses, boundaries, route
):
    from align.study import load_study
    from align.study.execute import check_lens_boundaries

    path = _file(tmp_path, zoo, corpus_file, analyses, boundaries)
    with open(path, "a", encoding="utf-8") as f:
        f.write(f'[route]\nkind = "{route}"\n')
    check_lens_boundaries(load_study(str(path)))  # no refusal
