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
        (("--through", "B"), "--through reads the maps of --map: give both"),
        (
            ("--kind", "tuned", "--map", "R.zarr"),
            "--map holds ridge maps: it goes with --kind linear, not tuned",
        ),
        (
            ("--save-maps", "M.zarr"),
            "--save-maps keeps the maps --kind linear fits or the translators --kind tuned "
            "trains: give it with --kind linear or tuned and no --map",
        ),
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


def test_char_anchor_maps_are_refused():
    """Maps between two tokenizations paired by character anchors: one line, no lens."""
    import xarray as xr

    from align.analyses.lens_run import check_maps
    from align.errors import InputError

    ds = xr.Dataset(
        {
            "W": (
                ("source_boundary", "target_boundary", "d_source", "d_target"),
                np.zeros((1, 1, 2, 2)),
            ),
            "c": (("source_boundary", "target_boundary", "d_target"), np.zeros((1, 1, 2))),
        },
        coords={"source_boundary": [0], "target_boundary": [3]},
        attrs={"options": {"pairing": "char-anchors"}},
    )
    with pytest.raises(InputError, match="r.zarr pairs two tokenizations by character anchors"):
        check_maps(ds, "r.zarr", 3)


def test_depth_refuses_a_linear_lens(cli, extracted, tmp_path):
    store = extracted("llama")
    code, _, err = cli("lens", "--store", store, "--kind", "linear", "-o", tmp_path / "l.zarr")
    assert code == 0, err
    code, _, err = cli(
        "contrib", "--store", extracted("llama", sublayers=True), "-o", tmp_path / "c.zarr"
    )
    assert code == 0, err
    code, _, err = cli(
        "depth",
        "--contrib",
        tmp_path / "c.zarr",
        "--lens",
        tmp_path / "l.zarr",
        "-o",
        tmp_path / "d.zarr",
    )
    assert (
        code == 2
        and "is a linear lens on held-out documents: effective depth reads the logit lens" in err
    )
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "d.zarr").exists()


def test_maps_between_two_vocabularies_are_refused(cli, extracted, zoo, tmp_path, monkeypatch):
    """A target store whose tokenizer is another (its recorded hash differs): one line."""
    from align.analyses import lens_run

    store = extracted("llama")
    maps = _fit(store, tmp_path / "m.zarr", target_boundaries="2", save_maps=True)
    real = lens_run.st.open_activations
    opened = []

    class Retokenized:
        def __init__(self, s):
            self._s = s

        def __getattr__(self, name):
            return getattr(self._s, name)

        @property
        def provenance(self):
            return {**self._s.provenance, "tokenizer_hash": {"vocab": "another"}}

    def open_second_retokenized(path):
        opened.append(path)
        return Retokenized(real(path)) if len(opened) == 2 else real(path)

    monkeypatch.setattr(lens_run.st, "open_activations", open_second_retokenized)
    code, _, err = cli("lens", "--map", maps, "--through", zoo("llama"), "-o", tmp_path / "o.zarr")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{maps} maps two models whose vocabularies differ" in err
    assert not (tmp_path / "o.zarr").exists()
