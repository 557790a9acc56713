"""Contribution of each layer to the residual stream (docs/methods.md, Contributions, [P1] §3.1).

Per layer l and token t (ε = 1e-6 guards every denominator: ‖x‖/max(‖y‖, ε) and
x·y/max(‖x‖‖y‖, ε)):

    part "attn":   ‖a_l‖ / ‖h_l‖               cos(a_l, h_l)
    part "mlp":    ‖m_l‖ / ‖h_l + a_l‖         cos(m_l, h_l + a_l)
    part "layer":  ‖h_{l+1} − h_l‖ / ‖h_l‖      cos(h_{l+1} − h_l, h_l)
    resid_cos:     cos(h_{l+1}, h_l)

aggregated by the mean over all tokens of all prompts (position 0 included) and the max over
the same tokens. Per-token values are computed in float32 (float64 inputs stay float64),
sums are kept in float64.

The result also keeps each prompt's sums of the three metrics and its token count (`rel_norm_sum`,
`cos_sum` (prompt, part, layer), `resid_cos_sum` (prompt, layer), `token_count` (prompt)), and
the prompt-bootstrap 95% intervals of the means (`rel_norm_low`, `rel_norm_high`, ...; scheme in
`align.stats.bootstrap`): resample b's mean is Σ_b sums / Σ_b token counts over its prompts.
A prompt is a forward pass's row (live model) or a store's sequence.
"""

from __future__ import annotations

import numpy as np

from align import models
from align.analyses.forward import check_values, forward
from align.analyses.prompts import pad
from align.errors import InputError, StoreError
from align.stats import bootstrap

EPS = 1e-6
PARTS = ("attn", "mlp", "layer")
AGGS = ("mean", "max")


def _t(x):
    import torch

    x = torch.as_tensor(x) if not isinstance(x, torch.Tensor) else x
    return x if x.dtype == torch.float64 else x.float()


def _rel(x, y, eps):
    return x.norm(dim=-1) / y.norm(dim=-1).clamp(min=eps)


def _cos(x, y, eps):
    return (x * y).sum(-1) / (x.norm(dim=-1) * y.norm(dim=-1)).clamp(min=eps)


def token_contributions(h, a, m, h_next, eps: float = EPS) -> dict:
    """Per-token contribution metrics of one layer.

    Parameters
    ----------
    h, a, m, h_next : array or tensor of shape (n_tokens, d_model)
        h_l, a_l, m_l, h_{l+1}.
    eps : float, optional
        Floor of every norm a ratio or a cosine divides by.

    Returns
    -------
    dict
        {"rel_norm": (3, n_tokens), "cos": (3, n_tokens), "resid_cos": (n_tokens,)} as torch
        tensors, rows in PARTS order (attn, mlp, layer); dimensionless.
    """
    import torch

    h = _t(h)
    # Under a device_map, a_l and m_l come from block l's device and h_l from the previous
    # block's: everything is combined on h_l's device.
    a, m, h_next = (_t(x).to(h.device) for x in (a, m, h_next))
    ha = h + a
    delta = h_next - h
    rel = torch.stack([_rel(a, h, eps), _rel(m, ha, eps), _rel(delta, h, eps)])
    cos = torch.stack([_cos(a, h, eps), _cos(m, ha, eps), _cos(delta, h, eps)])
    return {"rel_norm": rel, "cos": cos, "resid_cos": _cos(h_next, h, eps)}


def _refuse(layer: int, tc: dict, where) -> None:
    """NonFiniteError naming the first non-finite metric of `layer` (its part), its first token
    and the counts."""
    names = {"rel_norm": "relative norm", "cos": "cosine"}
    for key, v in tc.items():
        rows = v.double().cpu().numpy().reshape(-1, v.shape[-1])
        for i, row in enumerate(rows):
            what = f"the {names[key]} of part {PARTS[i]}" if key in names else "cos(h_{l+1}, h_l)"
            check_values(
                f"{what} at layer {layer}",
                row,
                where,
                advice="its inputs hold NaN/inf or overflow float32; nothing was written",
            )


class ContributionAccumulator:
    """Sums and maxima of the per-token metrics over batches of tokens, per layer, and each
    prompt's sums and token counts (when every call names its tokens' prompts)."""

    def __init__(self, n_layers: int):
        self.L = n_layers
        self.sum = {k: np.zeros((3, n_layers)) for k in ("rel_norm", "cos")}
        self.sum["resid_cos"] = np.zeros(n_layers)
        self.max = {k: np.full(v.shape, -np.inf) for k, v in self.sum.items()}
        self.count = np.zeros(n_layers, np.int64)
        # Per prompt: sums (P, 3, L) / (P, L) and token counts (P, L), grown as prompts appear.
        self.psum = {k: np.zeros((0,) + v.shape) for k, v in self.sum.items()}
        self.pcount = np.zeros((0, n_layers), np.int64)
        self.per_prompt = True

    def _grow(self, n_prompts: int) -> None:
        extra = n_prompts - len(self.pcount)
        if extra > 0:
            self.psum = {
                k: np.concatenate([v, np.zeros((extra,) + v.shape[1:])])
                for k, v in self.psum.items()
            }
            self.pcount = np.concatenate([self.pcount, np.zeros((extra, self.L), np.int64)])

    def add(self, layer: int, h, a, m, h_next, eps: float = EPS, where=None, prompt=None) -> None:
        """Add the tokens of (n_tokens, d_model) arrays h_l, a_l, m_l, h_{l+1} to layer `layer`.

        prompt: (n_tokens,) the prompt index of each token (None: prompts unknown, and the
        result then holds no per-prompt sums). A NaN/±inf metric is refused (NonFiniteError)
        before it reaches the sums; where(k) -> (prompt, position) of token k names it
        (default: the token's index in this call)."""
        tc = token_contributions(h, a, m, h_next, eps)
        n = tc["resid_cos"].shape[0]
        if n == 0:
            return
        sums = {k: v.double().sum(-1).cpu().numpy() for k, v in tc.items()}
        # A NaN or inf anywhere makes its sum non-finite: the check costs nothing more.
        if not all(np.isfinite(x).all() for x in sums.values()):
            _refuse(layer, tc, where or (lambda k: (None, k)))
        for k, v in tc.items():
            self.sum[k][..., layer] += sums[k]
            self.max[k][..., layer] = np.maximum(
                self.max[k][..., layer], v.max(-1).values.double().cpu().numpy()
            )
        self.count[layer] += n
        if prompt is None:
            self.per_prompt = False
        if self.per_prompt:
            prompt = np.asarray(prompt, np.int64)
            P = int(prompt.max()) + 1
            self._grow(P)
            for k, v in tc.items():
                rows = v.double().cpu().numpy().reshape(-1, n)  # (3, n) or (1, n)
                add = np.stack(
                    [np.bincount(prompt, weights=r, minlength=P) for r in rows], -1
                )  # (P, 3 or 1)
                self.psum[k][:P, ..., layer] += add.reshape(self.psum[k][:P, ..., layer].shape)
            self.pcount[:P, layer] += np.bincount(prompt, minlength=P)

    def result(self) -> dict:
        """{"rel_norm": (3, L, 2), "cos": (3, L, 2), "resid_cos": (L, 2), "n_tokens": int,
        "per_prompt": {"rel_norm_sum": (P, 3, L), "cos_sum": (P, 3, L), "resid_cos_sum":
        (P, L), "token_count": (P,)} or None}; the last axis of the aggregates is (mean, max);
        P counts the prompts that have tokens."""
        if self.count.min() == 0:
            raise InputError("no tokens to aggregate: give a corpus with at least one token")
        out = {k: np.stack([self.sum[k] / self.count, self.max[k]], axis=-1) for k in self.sum}
        out["n_tokens"] = int(self.count[0])
        out["per_prompt"] = None
        if self.per_prompt:
            used = self.pcount[:, 0] > 0
            out["per_prompt"] = {f"{k}_sum": v[used] for k, v in self.psum.items()}
            out["per_prompt"]["token_count"] = self.pcount[used, 0]
        return out


def contributions(resid, attn, mlp, eps: float = EPS, prompt=None) -> dict:
    """Contribution metrics from whole arrays.

    Parameters
    ----------
    resid : array of shape (n_boundaries, n_tokens, d_model)
        Raw residuals h_0..h_L (n_boundaries = L + 1).
    attn : array of shape (n_layers, n_tokens, d_model)
        Attention outputs a_l of blocks 0..L−1.
    mlp : array of shape (n_layers, n_tokens, d_model)
        MLP outputs m_l.
    eps : float, optional
        Floor of every norm a ratio or a cosine divides by.
    prompt : array of shape (n_tokens,), optional
        Each token's prompt, or None (no per-prompt sums).

    Returns
    -------
    dict
        {"rel_norm": (3, L, 2), "cos": (3, L, 2), "resid_cos": (L, 2), "n_tokens",
        "per_prompt"}: parts (attn, mlp, layer), aggregations (mean, max).

    Raises
    ------
    InputError
        Shapes that are not (L + 1, n, d) and (L, n, d).
    """
    resid, attn, mlp = np.asarray(resid), np.asarray(attn), np.asarray(mlp)
    L = attn.shape[0]
    if resid.shape[0] != L + 1 or mlp.shape != attn.shape or resid.shape[1:] != attn.shape[1:]:
        raise InputError(
            f"contributions needs resid (L+1, n, d) and attn, mlp (L, n, d): got {resid.shape}, {attn.shape}, {mlp.shape}"
        )
    acc = ContributionAccumulator(L)
    for l in range(L):
        acc.add(l, resid[l], attn[l], mlp[l], resid[l + 1], eps, prompt=prompt)
    return acc.result()


def contributions_from_model(model, batches, eps: float = EPS, progress=None) -> dict:
    """Contribution metrics of a live model over prompts.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model, in memory.
    batches : iterable of list of array of shape (n_prompt_tokens,)
        Lists of token-id arrays (one prompt each); each list is one right-padded forward pass,
        padding excluded from every aggregate.
    eps : float, optional
        Floor of every norm a ratio or a cosine divides by.
    progress : align.fitting.live_route.progress.Progress, optional
        Counting batches; hears of each batch.

    Returns
    -------
    dict
        Same as `contributions`.
    """
    import time

    L = len(models.blocks(model))
    acc = ContributionAccumulator(L)
    dev = models.input_device(model)
    first = 0
    seen = []
    for batch in batches:
        t = time.perf_counter()
        seen.extend(batch)
        ids, mask, pos = pad(batch, dev)
        rows = range(first, first + len(batch))
        # Refuses NaN/inf activations, naming the array, prompt and position.
        out = forward(
            model,
            (ids, mask, pos),
            boundaries=range(L + 1),
            layers=range(L),
            logits=False,
            prompts=rows,
        )
        # Kept tokens are taken row by row: token k of the batch is (prompt, position) of `at`.
        at = [(first + i, t) for i, x in enumerate(batch) for t in range(len(x))]
        prompt = np.array([p for p, _ in at], np.int64)
        keep = mask.bool()
        for l in range(L):
            pick = lambda t: t[keep.to(t.device)]  # noqa: E731  (n_real_tokens, d_model)
            acc.add(
                l,
                pick(out["resid"][l]),
                pick(out["attn"][l]),
                pick(out["mlp"][l]),
                pick(out["resid"][l + 1]),
                eps,
                where=at.__getitem__,
                prompt=prompt,
            )
        first += len(batch)
        del out
        if progress is not None:
            progress.forward("model", int(ids.numel()), time.perf_counter() - t)
            progress.step(f"{first:,} prompts")
    return {**acc.result(), "prompts_hash": bootstrap.prompts_hash(seen)}


def check_store(store) -> None:
    """StoreError unless `store` is complete and holds every boundary 0..L and the sublayer
    outputs of every block: what `contributions_from_store` reads."""
    L = store.n_layers
    missing_b = [b for b in range(L + 1) if b not in store.boundaries]
    missing_l = [l for l in range(L) if l not in store.layers]
    if not store.layers:
        raise StoreError(
            f"store {store.path} holds no sublayer outputs: extract it again with `align extract --sublayers`, or run `align contrib` on the model"
        )
    if missing_b or missing_l:
        raise StoreError(
            f"store {store.path} lacks boundaries {missing_b} and sublayers of blocks {missing_l}: "
            "`align contrib --store` needs all of them (extract without `boundaries`, with `sublayers`)"
        )
    store.require_complete()


def contributions_from_store(
    store, eps: float = EPS, chunk_tokens: int | None = None, progress=None
) -> dict:
    """Contribution metrics from an activation store, read chunk by chunk; no model.

    The store must hold every boundary and the sublayer outputs of every block
    (`align extract --sublayers`).

    Parameters
    ----------
    store : ActivationStore
        The store (`align.store.open_activations`), complete.
    eps : float, optional
        Floor of every norm a ratio or a cosine divides by.
    chunk_tokens : int, optional
        Tokens read at a time (default: the store's chunk).
    progress : align.fitting.live_route.progress.Progress, optional
        Counting chunks; hears of each chunk.

    Returns
    -------
    dict
        Same as `contributions`.

    Raises
    ------
    StoreError
        A store without sublayer outputs, lacking a boundary or a block, or incomplete
        (`check_store`).
    """
    import time

    check_store(store)
    L = store.n_layers
    step = chunk_tokens or store.chunk_tokens
    acc = ContributionAccumulator(L)
    for start in range(0, store.n_tokens, step):
        t = time.perf_counter()
        stop = min(store.n_tokens, start + step)
        seq, pos = store.tokens("seq", start, stop), store.tokens("pos", start, stop)
        where = lambda k: (int(seq[k]), int(pos[k]))  # noqa: E731  (prompt = the store's sequence)
        h = store.resid(0, start, stop)
        for l in range(L):
            h_next = store.resid(l + 1, start, stop)
            acc.add(
                l,
                h,
                store.attn(l, start, stop),
                store.mlp(l, start, stop),
                h_next,
                eps,
                where=where,
                prompt=seq,
            )
            h = h_next
        if progress is not None:
            progress.forward("model", stop - start, time.perf_counter() - t)
            progress.step(f"{stop:,} tokens")
    prompts = bootstrap.prompts_from_tokens(
        store.tokens("token_id"), store.tokens("seq"), store.tokens("pos")
    )
    return {**acc.result(), "prompts_hash": bootstrap.prompts_hash(prompts)}


NO_INTERVALS = "none: the contributions were computed without knowing each token's prompt"


def mean_intervals(per_prompt: dict, resampling: bootstrap.Resampling) -> dict:
    """Prompt-bootstrap 95% intervals of the token means: {"rel_norm": (low (3, L), high),
    "cos": ..., "resid_cos": (low (L,), high)}, with idx = bootstrap.indices(P, resampling)."""
    counts = per_prompt["token_count"]
    idx = bootstrap.indices(len(counts), resampling)
    return {
        k: bootstrap.percentile_interval(
            bootstrap.resampled_token_means(per_prompt[f"{k}_sum"], counts, idx)
        )
        for k in ("rel_norm", "cos", "resid_cos")
    }


def to_dataset(res: dict, attrs: dict, resampling: bootstrap.Resampling = bootstrap.DEFAULT):
    """The "contributions" result Dataset: dims part, layer, agg; with per-prompt sums, also
    dim prompt and the intervals of the means (module docstring) drawn by `resampling`
    (default: 1,000 resamples from seed 0)."""
    import xarray as xr

    L = res["resid_cos"].shape[0]
    coords = {"part": list(PARTS), "layer": np.arange(L), "agg": list(AGGS)}
    data = {
        "rel_norm": (("part", "layer", "agg"), res["rel_norm"].astype(np.float64)),
        "cos": (("part", "layer", "agg"), res["cos"].astype(np.float64)),
        "resid_cos": (("layer", "agg"), res["resid_cos"].astype(np.float64)),
    }
    extra = {"intervals": NO_INTERVALS}
    pp = res.get("per_prompt")
    if pp is not None:
        for k, (low, high) in mean_intervals(pp, resampling).items():
            dims = ("layer",) if k == "resid_cos" else ("part", "layer")
            data[f"{k}_low"], data[f"{k}_high"] = (dims, low), (dims, high)
        for k in ("rel_norm", "cos", "resid_cos"):
            data[f"{k}_sum"] = (
                ("prompt",) + (("layer",) if k == "resid_cos" else ("part", "layer")),
                pp[f"{k}_sum"],
            )
        data["token_count"] = (("prompt",), np.asarray(pp["token_count"], np.int64))
        coords["prompt"] = np.arange(len(pp["token_count"]))
        n = len(pp["token_count"])
        extra = {
            "intervals": f"prompt bootstrap of the means (agg=mean) over {n} prompts: *_low, *_high",
            "bootstrap": bootstrap.record(n, resampling),
        }
    ds = xr.Dataset(data, coords=coords)
    for k in ("rel_norm", "cos", "resid_cos"):
        if f"{k}_low" in ds:
            ds[f"{k}_low"].attrs["description"] = (
                f"2.5th percentile of the token mean of {k} over prompt-bootstrap resamples"
            )
            ds[f"{k}_high"].attrs["description"] = (
                f"97.5th percentile of the token mean of {k} over prompt-bootstrap resamples"
            )
            ds[f"{k}_sum"].attrs["description"] = f"sum of {k} over each prompt's tokens"
    ds.attrs = {**attrs, "n_layers": L, "n_tokens": res["n_tokens"], **extra}
    if res.get("prompts_hash"):
        ds.attrs["prompts_hash"] = res["prompts_hash"]
    return ds
