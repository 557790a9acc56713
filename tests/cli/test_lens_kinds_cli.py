"""`align lens --kind`, `--through`, `--map`: the refusals (one line, naming the bad value, nothing
written) and the kinds drawn together by `align plot --beside`."""

import numpy as np
import pytest


def _fit(store, output, **spec):
    import align
    from align.fitting.fit_options import FitSpec

    align.fit(store, store, str(output), FitSpec(**spec), log=lambda m: None)
    return str(output)


@pytest.mark.parametrize(
    "args, message",
    [
        (("--through", "B"), "--through MODEL_B reads the maps of --map RESULT: give both"),
        (
            ("--kind", "tuned", "--map", "R.zarr"),
            "--map reads ridge maps: it goes with --kind linear",
        ),
        (("--save-maps", "M.zarr"), "--save-maps keeps the maps --kind linear fits"),
        (("--kind", "linear", "--dry-run"), "--dry-run plans the logit lens only"),
    ],
)
def test_contradicting_options_are_refused(args, message, cli, extracted, tmp_path):
    code, _, err = cli("lens", "--store", extracted("llama"), "-o", tmp_path / "o.zarr", *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o.zarr").exists()


def test_maps_the_lens_cannot_read_are_refused(cli, extracted, zoo, tmp_path):
    store = extracted("llama")
    none = _fit(store, tmp_path / "none.zarr", target_boundaries="2")
    early = _fit(store, tmp_path / "early.zarr", target_boundaries="0,1", save_maps=True)
    for result, message in (
        (none, f"{none} holds no maps (W and c): fit it again with `align fit --save-maps`"),
        (
            early,
            f"{early} holds no column at the final boundary 2 of its target (target boundaries [0, 1])",
        ),
    ):
        code, _, err = cli(
            "lens", "--map", result, "--through", zoo("llama"), "-o", tmp_path / "o.zarr"
        )
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "o.zarr").exists()


def test_plot_draws_the_kinds_together(cli, extracted, tmp_path):
    """`align plot LOGIT --beside LINEAR`: one curve per kind, its values the result's."""
    from align import plotting
    from align.store import open_result

    store = extracted("llama")
    for kind in ("logit", "linear"):
        code, _, err = cli(
            "lens", "--store", store, "--kind", kind, "-o", tmp_path / f"{kind}.zarr"
        )
        assert code == 0, err
    code, _, err = cli(
        "plot",
        tmp_path / "logit.zarr",
        "--beside",
        tmp_path / "linear.zarr",
        "-o",
        tmp_path / "k.png",
    )
    assert code == 0 and (tmp_path / "k.png").stat().st_size > 0, err
    ds = [open_result(tmp_path / f"{k}.zarr", "lens") for k in ("logit", "linear")]
    fig = plotting.plot_lenses(ds)
    lines = {l.get_gid(): l for l in fig.axes[0].get_lines()}
    for k, d in enumerate(ds):
        np.testing.assert_array_equal(
            lines[f"kl/{k}"].get_ydata(), d["kl"].sel(weighting="token").values
        )
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == [
        "logit lens",
        "linear lens",
    ]
