"""Residual erasure (docs/methods.md, [P1] §3.3).

For a prompt with answer-predicting positions A (positions whose next token is an answer
token, `align.analyses.answers`), boundary b = 0..L (h_b: the residual entering block b, and
h_L the last block's output before the final norm) and position t: replace h_b(t) by μ_b,
the mean of h_b over every real token (position 0 included, as P1) of the reference prompts,
run the rest of the model, and record

    E[b, t] = max over τ in A of ‖p′(τ) − p(τ)‖₂

(p, p′ the full-vocabulary probability vectors of the clean and the erased run, float32 or
better). A causal model's p(τ) does not depend on positions after τ, so E[b, t] = 0 exactly
for t > max A: those cells are stored as 0 and not run.

Boundary L is P1's too (`lib/token_skip.py`, `measure_token_skip`: `layers[L−1].output[0]` at
t set to that tensor's reference mean): only the final norm and the unembedding read h_L(t),
so E[L, t] = ‖softmax(head(μ_L)) − p(t)‖₂ at answer-predicting t and 0 elsewhere.
It needs no forward of its own: the clean run's h_L with the cell replaced.

Rows (one prompt, one erased position) are sorted by length and batched with right padding:
each batch costs one clean forward and one forward per boundary 0..L−1 (1 + L), all of the
same batch shape, so erasing a cell with its own value gives E = 0 exactly. A
one-position-at-a-time loop (P1's) makes one clean forward per prompt and one per (boundary
0..L, position). Logits are computed only at the answer-predicting positions (final norm and
unembedding of h_L there).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from align import models
from align.analyses.forward import check_tokens, forward
from align.analyses.prompts import pad
from align.errors import InputError
from align.hooks.substitute import install_erase, replaced


@dataclass
class Row:
    """One erased sequence: its prompt index, token ids (T,), the erased position and the
    (T,) mask of answer-predicting positions."""

    prompt: int
    token_id: np.ndarray
    position: int
    measure: np.ndarray


def check_reference(n_found: int, n_asked: int, source: str) -> None:
    """InputError when the reference corpus has fewer prompts than --reference-docs asks for."""
    if n_found < n_asked:
        raise InputError(
            f"`reference` {source} has {n_found} document{'s' if n_found != 1 else ''} with text, fewer than "
            f"`reference_docs` {n_asked}: give a larger reference corpus or a smaller `reference_docs`"
        )


def reference_mean(model, prompts, batch_size: int = 8, progress=None) -> tuple[np.ndarray, int]:
    """The mean residual μ_b at every boundary b = 0..L over the reference prompts.

    Taken over every real token of the prompts, accumulated in float64.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model, in memory.
    prompts : list of array of shape (n_prompt_tokens,)
        The reference prompts' token ids.
    batch_size : int, optional
        Prompts per forward.
    progress : align.fitting.live_route.progress.Progress, optional
        Counting forwards; hears of each batch.

    Returns
    -------
    mean : array of shape (n_boundaries, d_model)
        μ_0..μ_L.
    n_tokens : int
        The tokens averaged.

    Raises
    ------
    InputError
        No reference prompts.
    """
    import torch

    if not prompts:
        raise InputError(
            "no reference prompts: give a reference corpus with at least one non-empty document"
        )
    L = len(models.blocks(model))
    dev = models.input_device(model)
    total, n = None, 0
    for k in range(0, len(prompts), batch_size):
        chunk = prompts[k : k + batch_size]
        t = time.perf_counter()
        ids, mask, pos = pad(chunk, dev)
        out = forward(
            model,
            (ids, mask, pos),
            boundaries=range(L + 1),
            logits=False,
            prompts=list(range(k, k + len(chunk))),
            run="reference run",
        )
        keep = mask.bool()
        # Under device_map the blocks (and so the residuals) may sit on different devices.
        sums = torch.stack(
            [
                out["resid"][b][keep.to(out["resid"][b].device)].double().sum(0).cpu()
                for b in range(L + 1)
            ]
        )
        total = sums if total is None else total + sums
        n += int(keep.sum())
        if progress is not None:
            progress.forward("model", int(ids.numel()), time.perf_counter() - t)
            progress.step("reference mean")
    return (total / n).numpy(), n


def rows_for(prompts) -> list[Row]:
    """One row per (prompt, position t ≤ the last answer-predicting position)."""
    rows = []
    for i, p in enumerate(prompts):
        last = int(np.flatnonzero(p.predicts_answer).max())
        rows.extend(Row(i, p.token_id, t, p.predicts_answer) for t in range(last + 1))
    return rows


def _probs(model, out, measure, L, rows, run):
    """Probabilities (n_measured, V) at the measured positions (B, T) bool, from h_L."""
    import torch

    h = out["resid"][L][measure.to(out["resid"][L].device)]
    logits = models.head(model)(
        h
    )  # the family's head: final norm, what follows it, unembedding, cap or scale
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    idx = measure.nonzero().cpu().numpy()
    check_tokens(
        "the output logits",
        logits,
        lambda k: (rows[idx[k, 0]].prompt, int(idx[k, 1])),
        f" in the {run}",
    )
    return torch.softmax(logits, -1)


def erase_effects(model, rows: list[Row], mean, boundaries=None) -> np.ndarray:
    """E (n_boundaries, n_rows) float64 for one batch of rows [default boundaries 0..L]: one
    clean forward and one forward per boundary below L (boundary L reuses the clean h_L).
    mean: (L + 1, d_model) array of replacement values μ_b, or None to erase each cell with
    its own value (the result is then exactly 0)."""
    import torch

    L = len(models.blocks(model))
    boundaries = list(range(L + 1)) if boundaries is None else list(boundaries)
    dev = models.input_device(model)
    ids, mask, pos = pad([r.token_id for r in rows], dev)
    B, T = ids.shape
    where = torch.zeros((B, T), dtype=torch.bool)
    measure = torch.zeros((B, T), dtype=torch.bool)
    for i, r in enumerate(rows):
        where[i, r.position] = True
        measure[i, : len(r.token_id)] = torch.as_tensor(r.measure)
    where, measure = where.to(dev), measure.to(dev)
    row_of = measure.nonzero()[:, 0]
    prompts = [r.prompt for r in rows]
    clean = forward(model, (ids, mask, pos), (L,), logits=False, prompts=prompts, run="clean run")
    p = _probs(model, clean, measure, L, rows, "clean run")
    E = np.zeros((len(boundaries), B))
    mu = None if mean is None else torch.as_tensor(np.asarray(mean))
    for k, b in enumerate(boundaries):
        run = f"run erasing boundary {b}"
        if b == L:  # only the final norm and the unembedding read h_L(t)
            out = {"resid": {L: replaced(clean["resid"][L], where, None if mu is None else mu[L])}}
        else:
            handle = install_erase(model, b, where, None if mu is None else mu[b])
            try:
                out = forward(model, (ids, mask, pos), (L,), logits=False, prompts=prompts, run=run)
            finally:
                handle.remove()
        p2 = _probs(model, out, measure, L, rows, run)
        d = (p2.to(p.device) - p).norm(dim=-1)
        E[k] = (
            torch.zeros(B, dtype=d.dtype, device=d.device)
            .scatter_reduce(0, row_of.to(d.device), d, "amax")
            .double()
            .cpu()
            .numpy()
        )
        del out, p2
    return E


def erasure(model, prompts, mean, *, batch_size: int = 8, progress=None) -> dict:
    """Residual erasure of every (boundary, position) of each prompt (module docstring).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model, in memory.
    prompts : list of AnswerPrompt
        The prompts with their answers.
    mean : array of shape (n_boundaries, d_model) or None
        Replacement values μ_0..μ_L (`reference_mean`), or None (test switch: erase with the
        residual itself).
    batch_size : int, optional
        Rows per forward.
    progress : align.fitting.live_route.progress.Progress, optional
        Counting forwards; hears of each batch's 1 + L forwards.

    Returns
    -------
    dict
        {"E": (n_prompts, n_boundaries, T_max) float64 over boundaries 0..L, NaN at positions
        ≥ a prompt's length, 0 after its last answer-predicting position; "n_forwards";
        "n_forwards_one_at_a_time"; "n_rows"}.

    Raises
    ------
    InputError
        No prompts, `batch_size` below 1, or `mean` of another shape than (L + 1, d_model).
    """
    if not prompts:
        raise InputError("no prompts to run: give at least one prompt with an answer")
    if batch_size < 1:
        raise InputError(f"`batch_size` {batch_size} must be at least 1")
    L = len(models.blocks(model))
    check_mean(mean, L, model.get_input_embeddings().weight.shape[-1])
    T_max = max(len(p) for p in prompts)
    E = np.full((len(prompts), L + 1, T_max), np.nan)
    for i, p in enumerate(prompts):
        E[i, :, : len(p)] = 0.0
    rows = rows_for(prompts)
    # Rows of similar length share a batch: less padding; results are per row anyway.
    rows.sort(key=lambda r: (len(r.token_id), r.prompt, r.position))
    for k in range(0, len(rows), batch_size):
        chunk = rows[k : k + batch_size]
        t = time.perf_counter()
        e = erase_effects(model, chunk, mean)
        for j, r in enumerate(chunk):
            E[r.prompt, :, r.position] = e[:, j]
        if progress is not None:
            positions = len(chunk) * max(len(r.token_id) for r in chunk)
            progress.forward("model", positions * (1 + L), time.perf_counter() - t)
            progress.step(f"{min(k + batch_size, len(rows)):,} of {len(rows):,} rows", 1 + L)
    n_batches = -(-len(rows) // batch_size)
    return {
        "E": E,
        "n_rows": len(rows),
        "n_forwards": n_batches * (1 + L),
        "n_forwards_one_at_a_time": len(prompts) + len(rows) * (L + 1),
    }


def check_mean(mean, n_layers: int, d_model: int) -> None:
    """InputError unless `mean` is None or (n_layers + 1, d_model): one row per boundary 0..L."""
    if mean is None:
        return
    shape = np.shape(mean)
    if shape != (n_layers + 1, d_model):
        raise InputError(
            f"the replacement means have shape {shape}, the model needs ({n_layers + 1}, {d_model}): one row "
            f"per boundary 0..{n_layers} of d_model {d_model} (erase.reference_mean computes them)"
        )


def to_dataset(res: dict, prompts, attrs: dict, mean=None):
    """The "erasure" result Dataset: `effect` (prompt, boundary, position), boundaries 0..L;
    per (prompt, position) the token labels, ids and the answer-predicting mask; `n_tokens`
    (prompt,); `reference_mean` (boundary, d_model) when given."""
    import xarray as xr

    n, n_boundaries, T = res["E"].shape
    return xr.Dataset(
        token_vars(prompts, T)
        | {"effect": (("prompt", "boundary", "position"), res["E"])}
        | (
            {"reference_mean": (("boundary", "d_model"), np.asarray(mean, np.float64))}
            if mean is not None
            else {}
        ),
        coords={
            "prompt": np.arange(n),
            "boundary": np.arange(n_boundaries),
            "position": np.arange(T),
        },
        attrs={**attrs, "n_layers": n_boundaries - 1, "n_prompts": n},
    )


def token_vars(prompts, T) -> dict:
    """Per (prompt, position): token label ("" past the end), id (−1) and answer mask."""
    n = len(prompts)
    labels = np.full((n, T), "", dtype=object)
    ids = np.full((n, T), -1, np.int64)
    pred = np.zeros((n, T), bool)
    for i, p in enumerate(prompts):
        labels[i, : len(p)] = p.tokens
        ids[i, : len(p)] = p.token_id
        pred[i, : len(p)] = p.predicts_answer
    return {
        "token": (("prompt", "position"), labels.astype(str)),
        "token_id": (("prompt", "position"), ids),
        "predicts_answer": (("prompt", "position"), pred),
        "n_tokens": (("prompt",), np.array([len(p) for p in prompts], np.int64)),
        "answer": (("prompt",), np.array([p.answer for p in prompts], dtype=str)),
    }
