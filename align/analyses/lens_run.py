"""`align lens --kind linear|tuned` and `--through MODEL_B --map RESULT`: the stores read, the
maps fitted or read, the translators trained, the result written (docs/commands/lens.md).

Every kind is read from activation stores: from a model and a corpus, the residuals are first
extracted into a temporary store beside the result (removed after the run)."""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np

from align import models, provenance
from align import store as st
from align.analyses import checkpoint, lens_heldout, lens_tuned
from align.analyses.analysis_options import LensOptions
from align.errors import InputError, StoreMismatch
from align.extraction import ExtractOptions, extract
from align.fitting.fit_options import Execution, FitSpec
from align.fitting.planning.split import split_documents
from align.fitting.store_route.pipeline import fit
from align.stats.bootstrap import DEFAULT, Resampling


def _quiet(message: str) -> None:
    """The self-fit's and the temporary extraction's messages are not the lens's."""


def store_head(name: str, revision, s, trust_remote_code=False, device="cpu", dtype="float32"):
    """The head of checkpoint `name` for store `s`: read (`checkpoint.read_head`), refused when
    the checkpoint's config is not the store's model's."""
    config, head = checkpoint.read_head(
        name, revision, dtype=dtype, device=device, trust_remote_code=trust_remote_code
    )
    if models.config_hash(config) != s.provenance.get("config_hash"):
        raise StoreMismatch(
            f"checkpoint {name!r} has another config than the model of store {s.path}: pass the model the store was extracted from"
        )
    return head


def _store_model(s) -> tuple[str, str | None]:
    """(name, revision) of the checkpoint a store was extracted from; a randomly initialised
    model is refused (its weights are in no checkpoint)."""
    p = s.provenance
    if p.get("random_init"):
        raise InputError(
            f"store {s.path} was extracted from a randomly initialised model: its head is in no checkpoint; the linear and tuned lenses need the checkpoint's head"
        )
    return p.get("identity", {}).get("model") or p["model"], p.get("revision")


def check_maps(ds, path: str, L_B: int) -> None:
    """A map result the lens can read: maps saved, a column at the head's final boundary L_B,
    one token stream (char-anchor pairs are not read through)."""
    if "W" not in ds or "c" not in ds:
        raise InputError(
            f"{path} holds no maps (W and c): fit it again with `align fit --save-maps`"
        )
    held = [int(b) for b in ds["target_boundary"].values]
    if L_B not in held:
        raise InputError(
            f"{path} holds no column at the final boundary {L_B} of its target (target boundaries {held}): fit with `target_boundaries` including {L_B}"
        )
    if (ds.attrs.get("options") or {}).get("pairing") == "char-anchors":
        raise InputError(
            f"{path} pairs two tokenizations by character anchors: the lens reads only maps of one token stream (pairing tokens)"
        )


def map_translator(ds, L_B: int):
    """(b, x) -> x W_b + c_b in float64 with the maps from boundary b to L_B (None where the
    result holds no map from b)."""
    import torch

    held = {int(b) for b in ds["source_boundary"].values}
    cache = {}

    def translate(b, x):
        if b not in held:
            return None
        if b not in cache:
            pair = {"source_boundary": b, "target_boundary": L_B}
            cache[b] = tuple(
                torch.from_numpy(np.asarray(ds[k].sel(pair).values, np.float64)) for k in "Wc"
            )
        W, c = cache[b]
        return x.double() @ W + c

    return translate


def _rows(source, ds) -> tuple[np.ndarray, np.ndarray]:
    """(scored token indices, held-out documents) of `source` under the split of fit result `ds`."""
    docs = np.asarray(sorted(ds.attrs["split"]["heldout_docs"]), np.int64)
    first = bool((ds.attrs.get("options") or {}).get("include_first_token", False))
    nxt = lens_heldout.next_tokens(*(source.tokens(k) for k in ("token_id", "seq", "pos")))
    rows = lens_heldout.scored_tokens(source.tokens("doc"), source.tokens("pos"), nxt, docs, first)
    return rows, docs


def self_fit(store: str, L: int, save_maps, overwrite: bool):
    """The ridge maps of a store onto its own boundary L (align.fit with the default split and
    α selection, maps kept): the alignment Dataset, also written to `save_maps` when given."""

    spec = FitSpec(target_boundaries=str(L), save_maps=True, bootstrap=0)
    report = fit(store, store, save_maps, spec, Execution(overwrite=overwrite), log=_quiet)
    return report.dataset


def read_through(source, ds, head, target, step, progress=None) -> dict:
    """The lens of `source`'s boundaries through the maps of fit result `ds` and `head`
    (model B's, whose store is `target`), scored on the fit's held-out tokens."""
    L_B = target.n_layers
    if not np.array_equal(source.tokens("token_id"), target.tokens("token_id")):
        raise InputError(
            f"stores {source.path} and {target.path} hold different token streams: the lens compares them token for token"
        )
    rows, docs = _rows(source, ds)
    res = lens_heldout.evaluate(
        source, target, rows, map_translator(ds, L_B), head, docs, step, progress
    )
    res["alpha_rel"] = np.array(
        [
            float(ds["alpha_rel"].sel(source_boundary=b, target_boundary=L_B))
            if b in set(ds["source_boundary"].values.tolist())
            else np.nan
            for b in range(source.n_layers + 1)
        ]
    )
    return res


def tuned(source, head, options: LensOptions, step: int, log=_quiet) -> dict:
    """The tuned lens of store `source` (align.analyses.lens_tuned): translators trained on the
    training documents of the fit's default split, scored on its held-out documents."""
    import torch

    L = source.n_layers
    spec = FitSpec()
    doc, pos = source.tokens("doc"), source.tokens("pos")
    fit_docs, val_docs, test_docs = split_documents(
        doc, spec.test_fraction, spec.val_fraction, options.lens_seed, need_val=False
    )
    train = np.flatnonzero(np.isin(doc, np.concatenate([fit_docs, val_docs])) & (pos != 0))
    for module in head.modules:
        module.requires_grad_(False)
    h_final = torch.from_numpy(source.resid(L)[train]).to(head.parameter.device)
    vocab = head.parameter.shape[0]
    small = len(train) * vocab * 4 <= lens_tuned.TARGET_BYTES
    final_logp = lens_tuned.output_logp(head, h_final.float()) if small else None
    translators, losses = {}, np.full((L + 1, options.steps), np.nan)
    for b in source.boundaries:
        if b == L:
            continue
        log(f"align lens: training the translator of boundary {b} ({options.steps} steps)")
        t = lens_tuned.train(
            torch.from_numpy(source.resid(b)[train]),
            h_final,
            head,
            options.steps,
            options.train_tokens,
            options.lens_seed,
            final_logp,
        )
        translators[b], losses[b] = t, t.losses

    def translate(b, x):
        return x if b == L else translators[b](x.float())

    nxt = lens_heldout.next_tokens(*(source.tokens(k) for k in ("token_id", "seq", "pos")))
    rows = lens_heldout.scored_tokens(doc, pos, nxt, test_docs, False)
    res = lens_heldout.evaluate(source, source, rows, translate, head, test_docs, step)
    res["train_loss"] = losses
    res["translators"] = translators
    res["split"] = {
        "training_docs": np.concatenate([fit_docs, val_docs]).tolist(),
        "heldout_docs": test_docs.tolist(),
    }
    return res


def translators_dataset(res: dict, source, options: LensOptions):
    """The "translators" result of a tuned lens: `A` (boundary, d_out, d_in) and `c`
    (boundary, d_model) float32 with T_b(h) = h + h A_bᵀ + c_b (`lens_tuned`) for boundaries
    0..L−1 (T_L is the identity), `train_loss` (boundary, step); attrs the store's record,
    the training options and the split."""
    import xarray as xr

    kept = sorted(res["translators"])
    A = np.stack([res["translators"][b].A.cpu().numpy() for b in kept]).astype(np.float32)
    c = np.stack([res["translators"][b].c.cpu().numpy() for b in kept]).astype(np.float32)
    ds = xr.Dataset(
        {
            "A": (("boundary", "d_out", "d_in"), A),
            "c": (("boundary", "d_out"), c),
            "train_loss": (("boundary", "step"), res["train_loss"][kept]),
        },
        coords={"boundary": np.asarray(kept, np.int64)},
    )
    ds.attrs = {
        **provenance.store_record(source),
        "kind": "tuned",
        "translator": "T_b(h) = h + h A_b^T + c_b, then the final norm and unembedding",
        "n_layers": source.n_layers,
        "options": options.recorded(),
        "split": res["split"],
    }
    return ds


def _temporary_store(output: str, spec, cspec) -> tuple[str, str]:
    """(folder, store path): the model's residuals over the corpus extracted beside `output`."""

    if spec.random_init:
        raise InputError(
            "`random_init`: the linear and tuned lenses read the checkpoint's head; give a trained checkpoint"
        )
    parent = os.path.dirname(os.path.abspath(output)) or "."
    folder = tempfile.mkdtemp(prefix=".align-lens-", dir=parent)
    path = os.path.join(folder, "residuals.zarr")
    extract(spec, cspec, path, ExtractOptions(), log=_quiet)
    return folder, path


def run_kind(
    output,
    *,
    spec=None,
    cspec=None,
    store=None,
    options: LensOptions = LensOptions(),
    resampling: Resampling = DEFAULT,
    overwrite=False,
    log=_quiet,
):
    """`align lens` of kind linear or tuned, or through another model's head (`options.through`
        with `options.maps`): the result's Dataset (`lens_heldout.to_dataset`), not written; `log`
    hears of each stage."""
    folder = None
    try:
        if store is None and options.maps is None:
            log(f"align lens: extracting the residuals of {spec.name} into a temporary store")
            folder, store = _temporary_store(output, spec, cspec)
        return _run(store, spec, options, resampling, overwrite, log)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _run(store, spec, options, resampling, overwrite, log):
    step = options.tokens_per_step or 1024
    if options.maps is not None:
        ds = st.open_alignment(options.maps)
        source = st.open_activations(ds.attrs["source_path"])
        target = st.open_activations(ds.attrs["target_path"])
        if options.through is not None:
            # the target store's own checkpoint where it is the one named: at its revision
            p = target.provenance
            own = provenance.model_id(options.through) == p.get("model")
            name, revision = options.through, p.get("revision") if own else None
        else:
            name, revision = _store_model(target)
            if ds.attrs["source_path"] != ds.attrs["target_path"]:
                raise InputError(
                    f"`kind` linear with `maps` {options.maps}: the result maps {ds.attrs['source_model']} onto {ds.attrs['target_model']}; give a self-fit (one store against itself), or `through` its target model"
                )
        if spec is not None and models.config_hash(
            models.load_config(spec)
        ) != source.provenance.get("config_hash"):
            raise StoreMismatch(
                f"MODEL {spec.name} is not the model of {options.maps}'s source store {source.path}"
            )
        check_maps(ds, options.maps, target.n_layers)
        if source.provenance.get("tokenizer_hash") != target.provenance.get("tokenizer_hash"):
            raise InputError(
                f"{options.maps} maps two models whose vocabularies differ: the lens compares with the head's own predictions token for token"
            )
        head = store_head(name, revision, target, device=options.device)
        res = read_through(source, ds, head, target, step)
        maps_record = str(options.maps)
    else:
        source = st.open_activations(store)
        source.require_complete()
        name, revision = _store_model(source)
        if spec is not None:
            name, revision = spec.name, spec.revision
        head = store_head(name, revision, source, device=options.device)
        if source.n_layers not in source.boundaries:
            raise InputError(
                f"store {source.path} lacks boundary {source.n_layers} (the last block's output), the lens reference"
            )
        if options.kind == "linear":
            log(
                f"align lens: fitting the maps of {source.path} onto its boundary {source.n_layers}"
            )
            ds = self_fit(source.path, source.n_layers, options.save_maps, overwrite)
            res = read_through(source, ds, head, source, step)
            maps_record = options.save_maps or "fitted by this run, not kept"
        else:
            if options.save_maps is not None:  # refused before the training, not after
                st.check_output(options.save_maps, "translators", overwrite=overwrite)
            res = tuned(source, head, options, step, log=log)
            maps_record = None
            if options.save_maps is not None:
                keep = translators_dataset(res, source, options)
                st.write_result(options.save_maps, keep, "translators", overwrite=overwrite)
                maps_record = options.save_maps
    attrs = {
        **provenance.store_record(source),
        "kind": options.kind,
        "head_model": provenance.model_id(name),
        "through": options.through,
        "maps": maps_record,
        "options": options.recorded(),
    }
    if "split" in res:
        attrs["split"] = res["split"]
    ds_out = lens_heldout.to_dataset(res, attrs, source.n_layers, resampling)
    if "alpha_rel" in res:
        ds_out["alpha_rel"] = (("boundary",), res["alpha_rel"])
    if "train_loss" in res:
        ds_out["train_loss"] = (("boundary", "step"), res["train_loss"])
    return ds_out


def check_options(options: LensOptions, store, cspec) -> LensOptions:
    """The lens options as run (`--through` reads linear maps: kind linear), refused in one
    line where they contradict each other."""
    import dataclasses

    if options.through is not None and options.maps is None:
        raise InputError("`through` reads the maps of `maps`: give both")
    if options.maps is not None:
        if options.kind == "tuned":
            raise InputError("`maps` holds ridge maps: it goes with `kind` linear, not tuned")
        if store is not None or (cspec is not None and cspec.path is not None):
            raise InputError(
                f"`maps` {options.maps} names its stores: give no `store` or `corpus` with it"
            )
        options = dataclasses.replace(options, kind="linear")
    if options.save_maps is not None and (options.kind == "logit" or options.maps is not None):
        raise InputError(
            "`save_maps` keeps the maps `kind` linear fits or the translators `kind` tuned "
            "trains: give it with `kind` linear or tuned and no `maps`"
        )
    return options


def summary(ds) -> str:
    """A linear or tuned result in words: kind, tokens, documents, the KL at boundary 0 and at
    the boundary before the last, the intervals."""
    kl = ds["kl"].sel(weighting="token").values
    L = ds.attrs["n_layers"]
    through = f" through {ds.attrs['through']}" if ds.attrs.get("through") else ""
    return (
        f"{ds.attrs['kind']} lens{through}, {ds.attrs['n_tokens']:,} held-out tokens of "
        f"{ds.attrs['n_documents']} documents, boundaries 0..{L}; KL {kl[0]:.3g} at 0, "
        f"{kl[max(L - 1, 0)]:.3g} at {max(L - 1, 0)}; 95% intervals over "
        f"{ds.attrs['bootstrap']['resamples']:,} resamples of the held-out documents"
    )
