"""Refusals of `align fit` that both routes share or that tell the two forms apart: the one
tokenizer check (align.fitting.pairing.partners) word for word, the store-only options given to
`--live` refused in one line naming the option, and the one `--device` check (a fit's and
`align extract`'s)."""

from __future__ import annotations

import pytest

from align.errors import InputError, StoreError
from align.fitting.pairing.partners import check_tokenizers
from tests.helpers.assertions import one_line_error

HASHES = {
    "vocab": "v",
    "merges": "m",
    "added_tokens": "a",
    "normalizer_pretokenizer": "n",
    "special_wrapping": "s",
}


def test_the_tokenizer_check_names_every_part_that_differs_in_one_message():
    other = {**HASHES, "vocab": "v2", "special_wrapping": "s2"}
    with pytest.raises(StoreError) as e:
        check_tokenizers(HASHES, other, "a.zarr (m1)", "b.zarr (m2)")
    assert str(e.value) == (
        "the tokenizers of source a.zarr (m1) and target b.zarr (m2) differ in vocabulary, "
        "special-token wrapping: `pairing` tokens needs one token stream; pair their tokens on "
        "the text with `pairing` char-anchors (what auto does)"
    )
    check_tokenizers(
        HASHES, {**HASHES, "all": "another"}, "a", "b"
    )  # only the behaviour's parts count


@pytest.mark.parametrize(
    "given,named",
    [
        (["--workers", "2"], "--workers applies to `align fit` on two stores only"),
        (["--task-tokens", "4096"], "--task-tokens applies to `align fit` on two stores only"),
        (
            ["--workers", "2", "--task-tokens", "4096"],
            "--workers, --task-tokens apply to `align fit` on two stores only",
        ),
    ],
)
def test_store_only_options_with_live_are_refused_naming_the_option(
    zoo, corpus_file, cli, tmp_path, given, named
):
    out = tmp_path / "r.zarr"
    code, _, err = cli("fit", "--live", zoo("qwen2"), zoo("qwen2"), corpus_file, "-o", out, *given)
    one_line_error(code, err, named, "--batch-size", "drop it" if len(given) == 2 else "drop them")
    assert not out.exists()


def test_one_device_check_serves_the_fit_and_extraction(monkeypatch):
    import torch

    from align.devices import MODEL_DEVICES, check_device
    from align.extraction import inputs

    assert inputs.check_device is check_device
    check_device("cpu")
    check_device("auto", MODEL_DEVICES)
    for device, accepted, message in [
        ("tpu", None, "`device` 'tpu' is not one of cpu, cuda, cuda:N"),
        ("auto", None, "`device` 'auto' is not one of cpu, cuda, cuda:N"),
        ("cuda:1", MODEL_DEVICES, "`device` 'cuda:1' is not one of cpu, cuda, auto"),
        ("cuda:x", None, "`device` 'cuda:x' is not one of cpu, cuda, cuda:N"),
    ]:
        with pytest.raises(InputError) as e:
            check_device(device, *([accepted] if accepted else []))
        assert str(e.value) == message
    # a machine with two GPUs, as torch would report it
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    check_device("cuda:1")
    check_device("cuda", MODEL_DEVICES)
    with pytest.raises(InputError) as e:
        check_device("cuda:2")
    assert str(e.value) == "`device` cuda:2: torch sees 2 CUDA GPU(s), cuda:0 to cuda:1"
    # and one without
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for device, accepted in (("cuda", MODEL_DEVICES), ("cuda:0", None)):
        with pytest.raises(InputError) as e:
            check_device(device, *([accepted] if accepted else []))
        assert (
            str(e.value)
            == f"`device` {device} was asked for but torch sees no CUDA device: use `device` cpu"
        )
