"""Layer skipping (docs/methods.md, Layer skipping, [P1] §3.2).

Skipping layer s at positions P: part "layer" sets h_{s+1} := h_s there, part "attn" sets
a_s := 0, part "mlp" sets m_s := 0. With clean contributions C_l = h_{l+1} − h_l and output
probabilities p, and C'_l, p' of the intervened run:

    R[s, l] = max over measured τ of ‖C_l(τ) − C'_l(τ)‖ / max(‖C_l(τ)‖, ε)   (l ≥ s; 0 for l < s)
    O[s]    = max over measured τ of ‖p'(τ) − p(τ)‖₂

Settings: "current" intervenes at every position ≥ 1 and measures everywhere; "future" picks
up to 4 split points t from range(8, T−4, 8) (shuffled with a seed per prompt), intervenes at
1..t−1 and measures t..T−1. With `--split answer-start` ([P1] on MQuAKE and MATH) the future
setting has one split point per prompt, its first answer token a (the first token whose
character span overlaps the answer, tokenized as `align.analyses.answers` does for erase and
igrad): [P1]'s protocol on MQuAKE. With `--split answer-points` ([P1] on MATH) the points are
a + k for k in range(0, n − 4, 4), n the number of the answer's tokens a..b, shuffled by
default_rng([seed, prompt index]), first 4 ([P1]'s code shuffles them with Python's
`random` seeded 12345 once per run, so its points hang on the prompts' order): no point lies in
the answer's last 4 tokens, and an answer of at most 4 tokens has none. A point t ≤ 1 has no
position to skip; a prompt left with no point is counted as too short. Position 0 is
never intervened on. Aggregation: max over positions, then split points, then prompts ("max"),
or the mean over prompts of the per-prompt maxima ("mean_over_prompts").

The result also keeps the per-prompt maxima, R_prompt (prompt, setting, part, skipped, later)
and O_prompt (prompt, setting, part, skipped), NaN where a setting did not use the prompt (too
short for it), and `level` (prompt) where the corpus has levels: `align depthscore` resamples
them for prompt-bootstrap intervals.

Intervals of R and O (R_low, R_high, O_low, O_high, dims as R and O): a prompt bootstrap
(`align.stats.bootstrap`). With rng = numpy.random.default_rng(seed), for each setting in
the result's order: the n prompts it used, idx = rng.integers(0, n, size=(resamples, n)); each
resample re-aggregates its prompts (max, and mean over prompts). A maximum over prompts grows
with their number, so models run on different numbers of prompts do not compare by it: the
equal-n mode (`--equal-n N`) then draws, right after that setting's idx, idx_N =
rng.integers(0, n, size=(resamples, N)) and stores R_equal_n, O_equal_n (the mean over the
resamples of the aggregate over N drawn prompts: the expected maximum of N prompts) with their
2.5 and 97.5 percentiles (R_equal_n_low, ...). N above a setting's n is refused.

Rows (one prompt, or one prompt and split point) are batched with right padding: each batch
costs one clean forward and one forward per (part, skipped layer), all of the same batch
shape, so an empty intervention gives R = 0 and O = 0 exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from align import corpus, models
from align.analyses.forward import forward
from align.analyses.prompts import pad
from align.errors import InputError, NonFiniteError
from align.hooks.bypass import install_skip
from align.stats import bootstrap

EPS = 1e-6
SETTINGS = ("current", "future")
SPLITS = ("random", "answer-start", "answer-points", "answer-points-stream")
PARTS = ("layer", "attn", "mlp")
AGGS = ("max", "mean_over_prompts")
SPLIT_START, SPLIT_STEP, SPLIT_MARGIN, MAX_SPLITS = 8, 8, 4, 4
MIN_FUTURE_LENGTH = SPLIT_START + SPLIT_MARGIN + 1  # 13: the shortest T with a split point
ANSWER_STEP, ANSWER_MARGIN = 4, 4  # --split answer-points: a + range(0, n − 4, 4)
SPLIT_RULES = {
    "answer-start": "each prompt needs at least 2 tokens before its first answer token",
    "answer-points": "each prompt needs at least 2 tokens before its first answer token and an answer "
    "of at least 5 tokens (its points are the first answer token + 0, 4, 8, ... short "
    "of its last 4 tokens)",
}
SPLIT_RULES["answer-points-stream"] = SPLIT_RULES["answer-points"]


def split_points(T: int, seed: int, prompt_index: int) -> list[int]:
    """Up to 4 split points of a prompt of T tokens: range(8, T−4, 8) shuffled, first 4.

    The shuffle is seeded by (seed, prompt_index), so it does not depend on batching.

    Parameters
    ----------
    T : int
        The prompt's length in tokens.
    seed : int
        The run's seed.
    prompt_index : int
        The prompt's index in the corpus.

    Returns
    -------
    list of int
        The split points.
    """
    pts = np.arange(SPLIT_START, T - SPLIT_MARGIN, SPLIT_STEP)
    rng = np.random.default_rng([seed, prompt_index])
    return [int(t) for t in rng.permutation(pts)[:MAX_SPLITS]]


@dataclass
class Row:
    """One intervened sequence: its prompt, tokens, and (T,) boolean masks."""

    prompt: int
    token_id: np.ndarray
    intervene: np.ndarray
    measure: np.ndarray


def answer_split(predicts_answer: np.ndarray) -> int:
    """The first answer token t of an answer prompt (`answers.AnswerPrompt.predicts_answer`
    marks t−1 when token t is an answer token): the future setting's split point."""
    pos = np.flatnonzero(np.asarray(predicts_answer, bool))
    if not len(pos):
        raise InputError(
            "a prompt has no answer token: every prompt of `split` answer-start needs an answer"
        )
    return int(pos[0]) + 1


def answer_points(predicts_answer: np.ndarray, seed: int, prompt_index: int) -> list[int]:
    """[P1]'s MATH split points of an answer prompt: a + k for k in range(0, n − 4, 4), where
    the answer's tokens are a..b (n = b − a + 1), permuted by default_rng([seed,
    prompt_index]), first 4. An answer of n ≤ 4 tokens has none."""
    pos = np.flatnonzero(np.asarray(predicts_answer, bool)) + 1
    if not len(pos):
        raise InputError(
            "a prompt has no answer token: every prompt of `split` answer-points needs an answer"
        )
    a, n = int(pos[0]), int(pos[-1] - pos[0]) + 1
    offsets = np.arange(0, n - ANSWER_MARGIN, ANSWER_STEP)
    rng = np.random.default_rng([seed, prompt_index])
    return [a + int(k) for k in rng.permutation(offsets)[:MAX_SPLITS]]


def answer_points_stream(predicts_answer: list, seed: int) -> list[list[int]]:
    """[P1]'s MATH split points drawn as its `skip_max_depth.py` draws them: one Python
    `random.Random(seed)` consumed prompt after prompt, in order (P1: seed 12345, every level's
    prompts in turn); each prompt's offsets range(0, n − 4, 4) shuffled by it, first 4, plus a
    (`answer_points`' a and n)."""
    import random

    rng, out = random.Random(seed), []
    for k, predicts in enumerate(predicts_answer):
        pos = np.flatnonzero(np.asarray(predicts, bool)) + 1
        if not len(pos):
            raise InputError(
                f"prompt {k} has no answer token: every prompt of `split` answer-points-stream needs an answer"
            )
        a, n = int(pos[0]), int(pos[-1] - pos[0]) + 1
        offsets = list(range(0, n - ANSWER_MARGIN, ANSWER_STEP))
        rng.shuffle(offsets)
        out.append([a + x for x in offsets[:MAX_SPLITS]])
    return out


def answer_splits(answer_prompts, split: str, seed: int = 0, before: list = ()) -> list[list[int]]:
    """The future setting's split points of each answer prompt under `split` ("answer-start",
    "answer-points" or "answer-points-stream"), one list per prompt, indexed as the prompts.
    With "answer-points-stream", the prompts `before` draw from the stream first."""
    if split == "answer-start":
        return [[answer_split(ap.predicts_answer)] for ap in answer_prompts]
    if split == "answer-points-stream":
        every = [ap.predicts_answer for ap in (*before, *answer_prompts)]
        return answer_points_stream(every, seed)[len(before) :]
    return [answer_points(ap.predicts_answer, seed, i) for i, ap in enumerate(answer_prompts)]


def _usable(points, T: int) -> list[int]:
    """The split points (an int or a list) of a prompt of T tokens that leave a position to skip."""
    return [int(t) for t in np.atleast_1d(points) if 1 < int(t) < T]


def rows_for(
    prompts, setting: str, seed: int = 0, include_position_zero: bool = False, splits=None
) -> tuple[list[Row], int]:
    """The rows of a setting over prompts, and the number of prompts too short for it.

    `splits` (per prompt, one point or a list of them) replaces the future setting's random
    split points (`--split answer-start`, `answer-points`); points t ≤ 1 or t ≥ T are dropped,
    and a prompt left with none counts as too short.
    `include_position_zero` intervenes at position 0 too: for tests that compare with a
    model whose block is deleted, never for measurements."""
    first = 0 if include_position_zero else 1
    rows, short = [], 0
    for i, ids in enumerate(prompts):
        T = len(ids)
        pos = np.arange(T)
        if setting == "current":
            rows.append(Row(i, ids, pos >= first, np.ones(T, bool)))
        elif setting == "future":
            if splits is None:
                pts = split_points(T, seed, i)
            else:
                pts = _usable(splits[i], T)
            if not pts:
                short += 1
            for t in pts:
                rows.append(Row(i, ids, (pos >= first) & (pos < t), pos >= t))
        else:
            raise InputError(f"setting {setting!r} is not one of {', '.join(SETTINGS)}")
    return rows, short


def _stack_masks(rows, T):
    import torch

    def m(name):
        out = torch.zeros((len(rows), T), dtype=torch.bool)
        for i, r in enumerate(rows):
            out[i, : len(r.token_id)] = torch.as_tensor(getattr(r, name))
        return out

    return m("intervene"), m("measure")


def _contribs_probs(out, L):
    import torch

    # Under a device_map h_{l+1} is on block l's device, h_l on the previous block's.
    C = [
        (out["resid"][l + 1].float() - out["resid"][l].float().to(out["resid"][l + 1].device))
        for l in range(L)
    ]
    return C, torch.softmax(out["logits"].float(), -1)


def skip_effects(
    model, rows: list[Row], parts=PARTS, eps: float = EPS
) -> tuple[np.ndarray, np.ndarray]:
    """Per-row effects of skipping each layer, for one batch of rows.

    One right-padded forward per (part, layer), plus one clean forward.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model, in memory.
    rows : list of Row
        The intervened sequences: prompt, token ids and (T,) masks of where to intervene and
        measure.
    parts : tuple of str, optional
        What is skipped: "layer", "attn", "mlp".
    eps : float, optional
        Floor of the norm a relative change divides by.

    Returns
    -------
    R : array of shape (n_parts, n_layers, n_layers, n_rows)
        float64 (part, skipped, later, row), maxima over each row's measured positions;
        R[:, s, l] = 0 for l < s.
    O : array of shape (n_parts, n_layers, n_rows)
        float64 (part, skipped, row).
    """
    import torch

    L = len(models.blocks(model))
    dev = models.input_device(model)
    ids, mask, pos = pad([r.token_id for r in rows], dev)
    intervene, measure = _stack_masks(rows, ids.shape[1])
    intervene, measure = intervene.to(dev), measure.to(dev)
    boundaries = range(L + 1)
    prompts = [r.prompt for r in rows]
    # Each forward refuses NaN/inf residuals and logits, naming the run, array, prompt and position.
    C, p = _contribs_probs(
        forward(model, (ids, mask, pos), boundaries, prompts=prompts, run="clean run"), L
    )
    R = np.zeros((len(parts), L, L, len(rows)))
    O = np.zeros((len(parts), L, len(rows)))

    def masked_max(v):  # v (B, T) >= 0 -> (B,), 0 where nothing is measured
        return (
            torch.where(measure.to(v.device), v, torch.zeros_like(v))
            .amax(-1)
            .double()
            .cpu()
            .numpy()
        )

    for pi, part in enumerate(parts):
        for s in range(L):
            handle = install_skip(model, part, s, intervene)
            try:
                run = f"run skipping {'' if part == 'layer' else part + ' of '}layer {s}"
                C2, p2 = _contribs_probs(
                    forward(model, (ids, mask, pos), boundaries, prompts=prompts, run=run), L
                )
            finally:
                handle.remove()
            for l in range(s, L):
                diff = (C[l] - C2[l].to(C[l].device)).norm(dim=-1) / C[l].norm(dim=-1).clamp(
                    min=eps
                )
                R[pi, s, l] = masked_max(diff)
            O[pi, s] = masked_max((p2.to(p.device) - p).norm(dim=-1))
            del C2, p2
    _check_effects(R, O, parts, prompts)
    return R, O


def _check_effects(R, O, parts, prompts) -> None:
    """NonFiniteError when an effect computed from finite runs is NaN/inf (a relative change
    that overflows float32), naming part, skipped and later layer and the prompt."""
    for name, v in (("R", R), ("O", O)):
        bad = np.argwhere(~np.isfinite(v))
        if len(bad):
            idx = tuple(int(i) for i in bad[0])
            cell = f"part {parts[idx[0]]}, skipped layer {idx[1]}" + (
                f", later layer {idx[2]}" if name == "R" else ""
            )
            raise NonFiniteError(
                f"the skipping effect {name} is NaN/inf at {len(bad):,} cells (first: {cell}, prompt "
                f"{prompts[idx[-1]]}): the contributions overflow float32; nothing was written"
            )


def check_prompts(
    prompts, settings=SETTINGS, splits=None, equal_n: int | None = None, split: str | None = None
) -> None:
    """InputError when no prompt is long enough for the future setting (T < 13 everywhere;
    with `splits` of `split`, when no prompt has a usable split point), or when the equal-n
    mode's `equal_n` (None: no equal-n mode) asks for more prompts than a setting has."""
    if "future" in settings and prompts and splits is not None:
        if not any(_usable(t, len(p)) for t, p in zip(splits, prompts)):
            rule = (
                f"with `split` {split} {SPLIT_RULES[split]}"
                if split in SPLIT_RULES
                else "each prompt needs a split point t with 1 < t < T"
            )
            raise InputError(
                f"no prompt has a token to skip before its answer: {rule} (none of {len(prompts)} has)"
            )
    elif "future" in settings and prompts:
        longest = max(len(p) for p in prompts)
        if longest < MIN_FUTURE_LENGTH:
            raise InputError(
                f"no prompt is long enough for the future setting: it needs at least {MIN_FUTURE_LENGTH} tokens "
                f"and the longest of {len(prompts)} prompts has {longest}: give longer prompts or `settings` current"
            )
    if equal_n is not None and prompts:
        for setting in settings:
            if setting == "current":
                n = len(prompts)
            elif splits is not None:
                n = sum(bool(_usable(t, len(p))) for t, p in zip(splits, prompts))
            else:
                n = sum(len(p) >= MIN_FUTURE_LENGTH for p in prompts)
            check_equal_n(equal_n, n, setting)


def check_equal_n(equal_n: int, n: int, setting: str) -> None:
    """InputError when the equal-n mode asks for more prompts than `setting` used."""
    if equal_n > n:
        raise InputError(
            f"`equal_n` {equal_n} is above the {n} prompts the {setting} setting uses: give N <= {n} "
            f"(the smallest prompt count of the models you compare)"
        )


def skipping(
    model,
    batches,
    *,
    settings=SETTINGS,
    parts=PARTS,
    seed: int = 0,
    batch_size: int | None = None,
    include_position_zero: bool = False,
    splits=None,
) -> dict:
    """Layer-skipping effects of a live model over prompts (docs/methods.md, Layer skipping).

    Rows (a prompt in "current", a (prompt, split point) in "future") are batched `batch_size`
    per forward. Relative changes divide by max(‖·‖, EPS) (`skip_effects`). `plan_rows` and
    `skip_rows` are its two halves.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model, in memory.
    batches : list
        Lists of token-id arrays (prompts), or a flat list of prompts with `batch_size`.
    settings : tuple of str, optional
        "current", "future" or both.
    parts : tuple of str, optional
        What is skipped: "layer", "attn", "mlp".
    seed : int, optional
        Seeds each prompt's random split points (`split_points`).
    batch_size : int, optional
        Rows per forward (default: the size of the first given batch).
    include_position_zero : bool, optional
        Intervene at position 0 too: for tests that compare with a model whose block is
        deleted, never for measurements.
    splits : list, optional
        The future split points of each prompt (`answer_splits`) instead of the random ones.

    Returns
    -------
    dict
        {"R": (n_settings, n_parts, 2 aggs, L, L), "O": (n_settings, n_parts, 2, L),
        "n_prompts": {setting: int}, "n_prompts_too_short": int, "per_prompt": {setting: (R
        (n, parts, L, L), O (n, parts, L))}, "n_forwards", "n_forwards_one_at_a_time"};
        aggregations (max, mean_over_prompts).

    Raises
    ------
    InputError
        No prompts, or none long enough for the future setting.
    NonFiniteError
        A non-finite effect (the contributions overflow float32).
    """
    batches = list(batches)
    if batches and isinstance(batches[0], np.ndarray):
        prompts, size = batches, batch_size or 8
    else:
        prompts = [p for b in batches for p in b]
        size = batch_size or max(1, len(batches[0]) if batches else 1)
    plan = plan_rows(prompts, settings, seed, size, include_position_zero, splits)
    return skip_rows(model, plan, parts)


@dataclass(frozen=True)
class RowPlan:
    """The rows of each setting over the prompts, sorted by length (rows of similar length
    share a batch: less padding, and results are per prompt anyway), `size` a batch."""

    prompts: list  # token-id arrays, one a prompt
    rows: dict  # setting -> [Row], sorted by length
    too_short: int  # prompts with no usable split point in the future setting
    size: int  # rows per batch

    def batches(self, setting: str) -> list[list[Row]]:
        """The setting's batches of rows, in the order they run."""
        rows = self.rows[setting]
        return [rows[k : k + self.size] for k in range(0, len(rows), self.size)]

    def n_batches(self) -> int:
        return sum(-(-len(r) // self.size) for r in self.rows.values())

    def n_forwards(self, n_parts: int, n_layers: int) -> int:
        """Forwards of the run: per batch one clean run and one per (part, skipped layer)."""
        return self.n_batches() * (1 + n_parts * n_layers)

    def positions(self, setting: str) -> list[int]:
        """Padded positions (rows × longest row) of each of the setting's batches."""
        return [len(b) * max(len(r.token_id) for r in b) for b in self.batches(setting)]


def plan_rows(
    prompts,
    settings=SETTINGS,
    seed: int = 0,
    size: int = 8,
    include_position_zero: bool = False,
    splits=None,
) -> RowPlan:
    """The rows of every setting (`rows_for`) over prompts (token-id arrays), sorted by
    length, and their batches of `size` rows; the prompts are checked for the future setting
    (`check_prompts`). Refuses an empty list of prompts."""
    if not len(prompts):
        raise InputError("no prompts to run: give a corpus with at least one non-empty document")
    rows, short = {}, 0
    for setting in settings:
        rows[setting], too_short = rows_for(
            prompts, setting, seed, include_position_zero, splits if setting == "future" else None
        )
        if setting == "future":
            short = too_short
            check_prompts(prompts, (setting,), splits)
        rows[setting].sort(key=lambda r: len(r.token_id))
    return RowPlan(list(prompts), rows, short, size)


def skip_rows(model, plan: RowPlan, parts=PARTS, progress=None) -> dict:
    """The layer-skipping effects (`skipping`'s return) of `plan`'s rows: each batch through
    `skip_effects`; `progress` (align.fitting.live_route.progress.Progress, counting forwards) hears of
    each batch."""
    import time

    prompts, size = plan.prompts, plan.size
    L = len(models.blocks(model))
    settings = tuple(plan.rows)
    R = np.zeros((len(settings), len(parts), len(AGGS), L, L))
    O = np.zeros((len(settings), len(parts), len(AGGS), L))
    n_prompts, per_prompt = {}, {}
    # Forward passes made, and those a one-prompt-at-a-time loop would make (one clean run per
    # prompt, one intervened run per (part, layer, split point)).
    n_forwards = n_single = 0
    used_by = {}
    per_batch = 1 + len(parts) * L
    for si, setting in enumerate(settings):
        rows = plan.rows[setting]
        Rp = np.zeros((len(prompts), len(parts), L, L))
        Op = np.zeros((len(prompts), len(parts), L))
        for chunk in plan.batches(setting):
            t = time.perf_counter()
            r, o = skip_effects(model, chunk, parts, EPS)
            if progress is not None:
                positions = len(chunk) * max(len(row.token_id) for row in chunk)
                progress.forward("model", positions * per_batch, time.perf_counter() - t)
                progress.step(f"{setting} setting", per_batch)
            for j, row in enumerate(chunk):
                Rp[row.prompt] = np.maximum(Rp[row.prompt], r[..., j])
                Op[row.prompt] = np.maximum(Op[row.prompt], o[..., j])
        used = sorted({row.prompt for row in rows})
        n_forwards += -(-len(rows) // size) * per_batch
        n_single += len(used) + len(rows) * len(parts) * L
        Rp, Op = Rp[used], Op[used]
        R[si, :, 0], R[si, :, 1] = Rp.max(0), Rp.mean(0)
        O[si, :, 0], O[si, :, 1] = Op.max(0), Op.mean(0)
        n_prompts[setting] = len(used)
        per_prompt[setting] = (Rp, Op)
        used_by[setting] = used
    return {
        "R": R,
        "O": O,
        "n_prompts": n_prompts,
        "n_prompts_total": len(prompts),
        "used": used_by,
        "n_prompts_too_short": plan.too_short,
        "per_prompt": per_prompt,
        "settings": settings,
        "parts": tuple(parts),
        "n_forwards": n_forwards,
        "n_forwards_one_at_a_time": n_single,
        "prompts_hash": bootstrap.prompts_hash(prompts),
    }


def per_prompt_arrays(res: dict) -> tuple[np.ndarray, np.ndarray]:
    """R_prompt (prompt, setting, part, skipped, later) and O_prompt (prompt, setting, part,
    skipped) of a `skipping` result: each prompt's maxima, NaN where a setting skipped it."""
    n = res["n_prompts_total"]
    nparts, L = len(res["parts"]), res["R"].shape[-1]
    Rp = np.full((n, len(res["settings"]), nparts, L, L), np.nan)
    Op = np.full((n, len(res["settings"]), nparts, L), np.nan)
    for si, setting in enumerate(res["settings"]):
        used = res["used"][setting]
        Rp[used, si], Op[used, si] = res["per_prompt"][setting]
    return Rp, Op


def _aggregates(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """(resamples, 2 aggs, ...): max and mean over the prompts idx[b] of values (n, ...)."""
    return np.stack(
        [bootstrap.resampled_maxima(values, idx), bootstrap.resampled_means(values, idx)], 1
    )


def intervals(res: dict, resampling: bootstrap.Resampling) -> dict:
    """The bootstrap of R and O (module docstring): {"R_low", "R_high", "O_low", "O_high"}
    (setting, part, agg, ...), and with `resampling.equal_n` also "R_equal_n", "O_equal_n"
    and their _low, _high."""
    rng = np.random.default_rng(resampling.seed)
    N = resampling.equal_n
    names = ["R_low", "R_high", "O_low", "O_high"]
    if N is not None:
        names += [f"{v}_equal_n{s}" for v in "RO" for s in ("", "_low", "_high")]
    out = {k: np.full(res["R" if k.startswith("R") else "O"].shape, np.nan) for k in names}
    for si, setting in enumerate(res["settings"]):
        Rp, Op = res["per_prompt"][setting]
        n = len(Rp)
        idx = bootstrap.draw(rng, n, resampling.resamples)
        # Resampled aggregates are (agg, part, ...); results are (part, agg, ...).
        for v, x in (("R", Rp), ("O", Op)):
            low, high = bootstrap.percentile_interval(_aggregates(x, idx))
            out[f"{v}_low"][si], out[f"{v}_high"][si] = low.swapaxes(0, 1), high.swapaxes(0, 1)
        if N is not None:
            check_equal_n(N, n, setting)
            idx_n = bootstrap.draw(rng, n, resampling.resamples, N)
            for v, x in (("R", Rp), ("O", Op)):
                reps = _aggregates(x, idx_n)
                low, high = bootstrap.percentile_interval(reps)
                out[f"{v}_equal_n"][si] = reps.mean(0).swapaxes(0, 1)
                out[f"{v}_equal_n_low"][si], out[f"{v}_equal_n_high"][si] = (
                    low.swapaxes(0, 1),
                    high.swapaxes(0, 1),
                )
    return out


def to_dataset(
    res: dict,
    attrs: dict,
    seed: int,
    levels=None,
    resampling: bootstrap.Resampling = bootstrap.DEFAULT,
):
    """The "skipping" result Dataset: R, O (setting, part, agg, skipped, later), the
    per-prompt maxima R_prompt, O_prompt (module docstring), their bootstrap intervals drawn
    by `resampling` (default: 1,000 resamples from seed 0, no equal-n mode) and, given `levels` (one per prompt,
    None where unknown), `level` (prompt)."""
    import xarray as xr

    L = res["R"].shape[-1]
    rdims, odims = (
        ("setting", "part", "agg", "skipped", "later"),
        ("setting", "part", "agg", "skipped"),
    )
    data = {"R": (rdims, res["R"]), "O": (odims, res["O"])}
    coords = {
        "setting": list(res["settings"]),
        "part": list(res["parts"]),
        "agg": list(AGGS),
        "skipped": np.arange(L),
        "later": np.arange(L),
    }
    extra = {"intervals": "none: this result holds no per-prompt maxima"}
    if "used" in res:
        Rp, Op = per_prompt_arrays(res)
        data["R_prompt"] = (("prompt", "setting", "part", "skipped", "later"), Rp)
        data["O_prompt"] = (("prompt", "setting", "part", "skipped"), Op)
        coords["prompt"] = np.arange(res["n_prompts_total"])
        if levels is not None and any(lv is not None for lv in levels):
            if len(levels) != res["n_prompts_total"] or any(lv is None for lv in levels):
                raise InputError(
                    f"levels are given for {sum(lv is not None for lv in levels)} of "
                    f"{res['n_prompts_total']} prompts: every prompt needs one"
                )
            data["level"] = (("prompt",), np.asarray(levels, np.int64))
        for k, v in intervals(res, resampling).items():
            data[k] = (rdims if k.startswith("R") else odims, v)
        n = {s: len(res["per_prompt"][s][0]) for s in res["settings"]}
        extra = {
            "intervals": "prompt bootstrap per setting: R_low, R_high, O_low, O_high"
            + (
                f"; equal-n mode over {resampling.equal_n} prompts: R_equal_n, O_equal_n and their "
                f"_low, _high"
                if resampling.equal_n
                else ""
            ),
            "bootstrap": bootstrap.record(n, resampling, equal_n=resampling.equal_n),
        }
    ds = xr.Dataset(data, coords=coords)
    ds.attrs = {
        **attrs,
        "n_layers": L,
        "n_prompts": res["n_prompts"].get("current", max(res["n_prompts"].values())),
        "n_prompts_by_setting": res["n_prompts"],
        "n_prompts_too_short": res["n_prompts_too_short"],
        "seed": seed,
        **extra,
    }
    if res.get("prompts_hash"):
        ds.attrs["prompts_hash"] = res["prompts_hash"]
    return ds


def prompt_levels(cspec, tokenizer) -> list | None:
    """The level of each prompt `load_prompts` gives (via `Sequence.doc`), or None when the
    corpus has no levels."""
    doc_levels = corpus.document_levels(cspec)
    if all(lv is None for lv in doc_levels):
        return None
    return [doc_levels[sq.doc] for sq in corpus.sequences(cspec, tokenizer)]


def answer_prompt_levels(cspec) -> list | None:
    """The level of each answer prompt (`answers.load_answer_prompts` skips blank documents,
    as here), or None when the corpus has no levels."""
    if cspec.fmt == "plain" and cspec.path is not None and str(cspec.path).endswith(".jsonl"):
        return None
    levels = [item.level for item in corpus.items(cspec) if item.text.strip()]
    return None if all(lv is None for lv in levels) else levels
