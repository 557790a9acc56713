"""Logit lens (docs/methods.md, Logit lens, [P1], [P2]).

For boundary b = 0..L, q_b = softmax(head(h_b)), head = W_U · final_norm (with the family's cap or scale); the reference is the model's
own output p (= q_L). Per token:

    KL_b      = Σ_v q_b(v) (log q_b(v) − log p(v))      (nats; float32 or better)
    overlap_b = |top5(q_b) ∩ top5(p)| / 5
    top1_b    = [argmax q_b = argmax p]
    ce_b      = −log q_b(y)       (nats; only at a token whose next token y is in the prompt)

Two averages: "token" (sum over all tokens of all prompts / token count, [P2]) and "prompt"
(mean over a prompt's tokens, then over prompts, [P1]); the cross-entropy's over the tokens
that have a next token (`ce_count`), its prompt average over the prompts that have one.

The result also keeps each prompt's sums over its tokens (`kl_sum`, `overlap_sum`, `top1_sum`,
`ce_sum` (prompt, boundary)) and token counts (`token_count`, `ce_count` (prompt)), and the
prompt-bootstrap 95% intervals of both averages (`kl_low`, `kl_high`, ... (weighting,
boundary); scheme in `align.stats.bootstrap`): resample b's token-weighted mean is Σ_b sums /
Σ_b token counts, its prompt-weighted mean the mean over its prompts of sum / count. A prompt
is a forward pass's row (live model) or a store's sequence; prompts without tokens are left out.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from align import models
from align.analyses.forward import check_tokens, check_values, forward
from align.analyses.prompts import pad
from align.errors import InputError, StoreError
from align.stats import bootstrap

WEIGHTINGS = ("token", "prompt")
METRICS = ("kl", "overlap", "top1", "ce")
TOP_K = 5
# Tokens per application of the head over a store: bounds the (tokens, vocab) logits and
# their log-softmax temporaries (about 5 of them: ~3 GiB in float32 at a 152k vocabulary).
HEAD_TOKENS = 1024


def lens_logits(head, h):
    """The model's head applied to h (..., d_model): (..., vocab). `head` is an
    align.models.families.Head: final norm, any module after it, unembedding, the family's cap or scale."""
    import torch

    with torch.inference_mode():
        return head(h)


def token_metrics(lens_logits, final_logits, k: int = TOP_K):
    """Per-token KL(q ‖ p) and top-k overlap (`metrics`' first two).

    Parameters
    ----------
    lens_logits : array or tensor of shape (n_tokens, vocab)
        The lens's logits q at one boundary.
    final_logits : array or tensor of shape (n_tokens, vocab)
        The model's logits p.
    k : int, optional
        The k of the top-k overlap.

    Returns
    -------
    kl : array of shape (n_tokens,)
        float64; log-probabilities are taken in float32 (float64 stays).
    overlap : array of shape (n_tokens,)
        float64.
    """
    m = metrics(lens_logits, final_logits, None, k)
    return m["kl"], m["overlap"]


def next_tokens(token_id, seq, pos) -> np.ndarray:
    """(n_tokens,) int64: the id of the token after each one in its sequence, -1 where the
    store holds none (a sequence's last token)."""
    token_id, seq, pos = (np.asarray(a, np.int64) for a in (token_id, seq, pos))
    out = np.full(len(token_id), -1, np.int64)
    follows = (seq[1:] == seq[:-1]) & (pos[1:] == pos[:-1] + 1)
    out[:-1][follows] = token_id[1:][follows]
    return out


def log_probs(logits):
    """The log-softmax over the vocabulary of `logits` (n_tokens, vocab): a tensor in float32 or
    better (float64 stays)."""
    import torch

    x = torch.as_tensor(logits)
    return torch.log_softmax(x if x.dtype == torch.float64 else x.float(), -1)


def metrics(lens_logits, final_logits, nxt=None, k: int = TOP_K) -> dict:
    """Per-token KL(q ‖ p), top-k overlap, top-1 agreement and, with next-token ids `nxt`
    (n_tokens,; -1 where there is none), the cross-entropy −log q(y) (NaN where none): float64
    arrays (n_tokens,) from one log-softmax of each side (float32 or better)."""
    return metrics_of(log_probs(lens_logits), output_of(final_logits, k), nxt, k)


class Output(NamedTuple):
    """What every boundary's `metrics_of` reads of the model's output p over a batch, taken
    once: its `log_probs` lp (n_tokens, vocab), the ids of its top k (n_tokens, k) and its
    argmax (n_tokens,)."""

    lp: object
    top: object
    argmax: object


def output_of(final_logits, k: int = TOP_K) -> Output:
    """The `Output` of the model's logits (n_tokens, vocab)."""
    lp = log_probs(final_logits)
    return Output(lp, lp.topk(k, dim=-1).indices, lp.argmax(-1))


def metrics_of(lq, p: Output, nxt=None, k: int = TOP_K) -> dict:
    """`metrics` from the lens's `log_probs` lq and the output's `Output` p."""
    import torch

    # Under a device_map the model's output comes back on the input's device, while the head
    # applied here runs where the unembedding lives.
    lp = p.lp.to(device=lq.device, dtype=lq.dtype)
    kl = (lq.exp() * (lq - lp)).sum(-1)
    tq = lq.topk(k, dim=-1).indices
    tp = p.top.to(lq.device)
    hits = (tq[:, :, None] == tp[:, None, :]).any(-1).sum(-1)
    out = {
        "kl": kl.double().cpu().numpy(),
        "overlap": hits.double().cpu().numpy() / k,
        "top1": (lq.argmax(-1) == p.argmax.to(lq.device)).double().cpu().numpy(),
    }
    if nxt is not None:
        nxt = np.asarray(nxt, np.int64)
        idx = torch.as_tensor(np.maximum(nxt, 0), device=lq.device)[:, None]
        ce = (-lq.gather(-1, idx)[:, 0]).double().cpu().numpy()
        out["ce"] = np.where(nxt >= 0, ce, np.nan)
    return out


def _check_kl(b: int, kl, where) -> None:
    """NonFiniteError when the lens KL at boundary b is NaN/inf at some token (its logits
    overflowed); the top-5 overlap is a count and cannot be, so KL is the one to check."""
    check_values(
        f"the logit-lens KL at boundary {b}",
        kl,
        where,
        advice="the lens logits overflow in this dtype (try `dtype` float32); nothing was written",
    )


class LensAccumulator:
    """Token sums and per-prompt sums of the METRICS for boundaries 0..L; the cross-entropy's
    own token counts (tokens with a next token)."""

    def __init__(self, n_boundaries: int, n_prompts: int):
        self.B, self.P = n_boundaries, n_prompts
        self.tok = {k: np.zeros(n_boundaries) for k in METRICS}
        self.per_prompt = {k: np.zeros((n_boundaries, n_prompts)) for k in METRICS}
        self.prompt_count = np.zeros(n_prompts, np.int64)
        self.ce_count = np.zeros(n_prompts, np.int64)
        self.n_tokens = 0
        self.seen = np.zeros(n_boundaries, bool)

    def add(self, b: int, values: dict, prompt) -> None:
        """Add tokens at boundary b: `values` {metric: (n,)} (`metrics`; ce NaN at a token
        without a next token) and their prompt index (n,)."""
        prompt = np.asarray(prompt, np.int64)
        for name in METRICS:
            v = values[name]
            if name == "ce":
                v = np.where(np.isnan(v), 0.0, v)
            self.tok[name][b] += v.sum()
            np.add.at(self.per_prompt[name][b], prompt, v)
        self.seen[b] = True

    def count(self, prompt, nxt) -> None:
        """Count tokens once per token (not per boundary); `nxt` their next-token ids (-1: none)."""
        prompt = np.asarray(prompt, np.int64)
        np.add.at(self.prompt_count, prompt, 1)
        np.add.at(self.ce_count, prompt[np.asarray(nxt) >= 0], 1)
        self.n_tokens += len(prompt)

    def result(self) -> dict:
        """{metric: (2, L+1), "n_tokens", "n_prompts", "measured", "per_prompt"}: rows
        (token, prompt); NaN at boundaries that were not measured (and only there: `measured`
        lists the others), and the cross-entropy NaN where no token has a next token."""
        if self.n_tokens == 0:
            raise InputError("no tokens for the logit lens: give a corpus with at least one token")
        used = self.prompt_count > 0
        out = {}
        for name in METRICS:
            count = self.ce_count if name == "ce" else self.prompt_count
            has = used & (count > 0)
            with np.errstate(invalid="ignore", divide="ignore"):
                token = self.tok[name] / count.sum()
                prompt = (self.per_prompt[name][:, has] / count[has]).mean(-1)
            arr = np.stack([token, prompt])
            arr[:, ~self.seen] = np.nan
            out[name] = arr
        out["n_tokens"], out["n_prompts"] = int(self.n_tokens), int(used.sum())
        out["measured"] = [int(b) for b in np.flatnonzero(self.seen)]
        per = {f"{name}_sum": self.per_prompt[name][:, used].T.copy() for name in METRICS}
        for v in per.values():
            v[:, ~self.seen] = np.nan
        out["per_prompt"] = {
            **per,
            "token_count": self.prompt_count[used].copy(),
            "ce_count": self.ce_count[used].copy(),
        }
        return out


def logit_lens(model, batches, n_prompts: int | None = None, progress=None) -> dict:
    """Logit lens of a live model over prompts.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model, in memory.
    batches : list or iterable
        Lists of token-id arrays, each one right-padded forward pass.
    n_prompts : int, optional
        The number of prompts, needed when `batches` is an iterable that is not a list.
    progress : align.fitting.live_route.progress.Progress, optional
        Counting batches; hears of each batch.

    Returns
    -------
    dict
        {"kl": (2, n_boundaries), "overlap": (2, n_boundaries), "n_tokens", "n_prompts"}, rows
        (token, prompt) weighting, columns boundary 0..L.

    Raises
    ------
    InputError
        No tokens at all.
    """
    import time

    import torch

    batches = list(batches)
    n_prompts = n_prompts or sum(len(b) for b in batches)
    L = len(models.blocks(model))
    head = models.head(model)
    acc = LensAccumulator(L + 1, n_prompts)
    dev = models.input_device(model)
    first = 0
    for batch in batches:
        t = time.perf_counter()
        ids, mask, pos = pad(batch, dev)
        # Refuses NaN/inf residuals and logits, naming the array, prompt and position.
        out = forward(
            model,
            (ids, mask, pos),
            boundaries=range(L + 1),
            prompts=range(first, first + len(batch)),
        )
        keep = mask.bool()
        prompt = (torch.arange(len(batch))[:, None].expand(keep.shape)[keep.cpu()] + first).numpy()
        at = [(first + i, t) for i, x in enumerate(batch) for t in range(len(x))]
        final = out["logits"][keep.to(out["logits"].device)]
        nxt = np.concatenate([np.append(np.asarray(x, np.int64)[1:], -1) for x in batch])
        acc.count(prompt, nxt)
        p = output_of(final)
        for b in range(L + 1):
            h = out["resid"][b][keep.to(out["resid"][b].device)]
            values = metrics_of(log_probs(lens_logits(head, h)), p, nxt)
            _check_kl(b, values["kl"], at.__getitem__)
            acc.add(b, values, prompt)
        first += len(batch)
        del out
        if progress is not None:
            progress.forward("model", int(ids.numel()), time.perf_counter() - t)
            progress.step(f"{first:,} prompts")
    return {**acc.result(), "prompts_hash": bootstrap.prompts_hash([p for b in batches for p in b])}


def check_store(store) -> None:
    """StoreError unless `store` is complete and holds boundary L, the lens reference: what
    `logit_lens_from_store` needs."""
    L = store.n_layers
    if L not in store.boundaries:
        raise StoreError(
            f"store {store.path} lacks boundary {L} (the last block's output), the lens reference: extract it with `boundaries` including {L}"
        )
    store.require_complete()


def logit_lens_from_store(store, head, tokens_per_step: int = HEAD_TOKENS, progress=None) -> dict:
    """Logit lens from an activation store and the model's head only.

    The head is the final norm and unembedding (see `align.analyses.checkpoint.read_head`).
    The store must hold boundary L (the reference p = softmax(W_U · final_norm(h_L)));
    boundaries it lacks are NaN. Prompts are the store's sequences. The head runs where its
    weights are, in their dtype (log-probabilities in float32 or better, there too).

    Parameters
    ----------
    store : ActivationStore
        The store (`align.store.open_activations`), complete.
    head : align.models.families.Head
        The model's head (`read_head`).
    tokens_per_step : int, optional
        Tokens the head is applied to at a time.
    progress : align.fitting.live_route.progress.Progress, optional
        Counting steps; hears of each step.

    Returns
    -------
    dict
        Same as `logit_lens`.

    Raises
    ------
    InputError
        `tokens_per_step` below 1.
    StoreError
        A store without boundary L, or incomplete.
    """
    if tokens_per_step < 1:
        raise InputError(f"tokens_per_step {tokens_per_step} must be at least 1")
    import time

    import torch

    check_store(store)
    L = store.n_layers
    seq = store.tokens("seq")
    n_prompts = int(seq.max()) + 1 if len(seq) else 0
    acc = LensAccumulator(L + 1, n_prompts)
    pos = store.tokens("pos")
    following = next_tokens(store.tokens("token_id"), seq, pos)
    param = head.parameter
    for start in range(0, store.n_tokens, tokens_per_step):
        t = time.perf_counter()
        stop = min(store.n_tokens, start + tokens_per_step)
        prompt = seq[start:stop]
        # prompts are the store's sequences
        where = lambda k: (int(seq[start + k]), int(pos[start + k]))  # noqa: E731
        as_t = lambda b: torch.from_numpy(store.resid(b, start, stop)).to(param.device, param.dtype)  # noqa: E731
        final = lens_logits(head, as_t(L))
        # The store's reads refuse NaN residuals; the head's output is checked here.
        check_tokens(
            f"the output logits (boundary {L} through the checkpoint's final norm and unembedding)",
            final,
            where,
            advice="the final norm or unembedding overflows; nothing was written",
        )
        nxt = following[start:stop]
        acc.count(prompt, nxt)
        p = output_of(final)
        for b in store.boundaries:
            values = metrics_of(log_probs(lens_logits(head, as_t(b))), p, nxt)
            _check_kl(b, values["kl"], where)
            acc.add(b, values, prompt)
        if progress is not None:
            progress.forward("model", stop - start, time.perf_counter() - t)
            progress.step(f"{stop:,} tokens")
    prompts = bootstrap.prompts_from_tokens(store.tokens("token_id"), seq, pos)
    return {**acc.result(), "prompts_hash": bootstrap.prompts_hash(prompts)}


def curve_replicates(per_prompt: dict, idx: np.ndarray) -> dict:
    """Resampled curves: {metric: (resamples, 2 weightings, boundaries)} for each metric whose
    per-prompt sums (P, boundaries) `per_prompt` holds, with token counts (P,) (the
    cross-entropy's `ce_count`), resample indices idx (resamples, size) into the P prompts;
    weightings (token, prompt) as in WEIGHTINGS. A resample's prompt-weighted cross-entropy is
    the mean over its prompts that have a token with a next token."""
    out = {}
    for name in METRICS:
        if f"{name}_sum" not in per_prompt:
            continue
        counts = np.asarray(per_prompt["ce_count" if name == "ce" else "token_count"], np.float64)
        sums = np.asarray(per_prompt[f"{name}_sum"], np.float64)
        token = bootstrap.resampled_token_means(sums, counts, idx)
        if name == "ce":  # the mean over the resample's prompts that have a next token
            has = (counts > 0).astype(np.float64)
            means = np.where(has[:, None] > 0, sums / np.maximum(counts, 1)[:, None], 0.0)
            prompt = bootstrap.resampled_token_means(means, has, idx)
        else:
            prompt = bootstrap.resampled_means(sums / counts[:, None], idx)
        out[name] = np.stack([token, prompt], 1)
    return out


NO_INTERVALS = "none: this lens result holds no per-prompt sums"


def to_dataset(
    res: dict, attrs: dict, n_layers: int, resampling: bootstrap.Resampling = bootstrap.DEFAULT
):
    """The "lens" result Dataset: dims weighting, boundary (0..L); with per-prompt sums, also
    dim prompt and the intervals (module docstring) drawn by `resampling` (default:
    1,000 resamples from seed 0), idx = bootstrap.indices(P, resampling)."""
    import xarray as xr

    names = [m for m in METRICS if m in res]
    data = {m: (("weighting", "boundary"), res[m]) for m in names}
    coords = {"weighting": list(WEIGHTINGS), "boundary": np.arange(n_layers + 1)}
    extra = {"intervals": NO_INTERVALS}
    pp = res.get("per_prompt")
    if pp is not None:
        n = len(pp["token_count"])
        reps = curve_replicates(pp, bootstrap.indices(n, resampling))
        for name in names:
            low, high = bootstrap.percentile_interval(reps[name])
            data[f"{name}_low"], data[f"{name}_high"] = (
                (("weighting", "boundary"), low),
                (("weighting", "boundary"), high),
            )
            data[f"{name}_sum"] = (("prompt", "boundary"), pp[f"{name}_sum"])
        data["token_count"] = (("prompt",), np.asarray(pp["token_count"], np.int64))
        if "ce_count" in pp:
            data["ce_count"] = (("prompt",), np.asarray(pp["ce_count"], np.int64))
        coords["prompt"] = np.arange(n)
        extra = {
            "intervals": f"prompt bootstrap of both weightings over {n} prompts: "
            + ", ".join(f"{m}_low, {m}_high" for m in names),
            "bootstrap": bootstrap.record(n, resampling),
        }
    ds = xr.Dataset(data, coords=coords)
    # Which boundaries were measured: NaN anywhere else means "not measured", never a number
    # lost (readers such as `align depth` rely on it).
    ds.attrs = {
        **attrs,
        "n_layers": n_layers,
        "n_tokens": res["n_tokens"],
        "n_prompts": res["n_prompts"],
        "boundaries_measured": list(res.get("measured", range(n_layers + 1))),
        **extra,
    }
    if res.get("prompts_hash"):
        ds.attrs["prompts_hash"] = res["prompts_hash"]
    return ds
