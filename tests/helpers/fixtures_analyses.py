"""Reference implementations for the analyses tests: plain, one prompt at a time, explicit
loops, float64 numpy. Nothing here imports align; the tests compare align against these.

The architecture knowledge below (where blocks and sublayer outputs live) is written out
independently of align/models/ on purpose."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.helpers.references import ARCH, blocks, head, scale

# What each family adds to the residual (docs/methods.md, Notation): the output of these modules,
# times the family's multiplier (tests/helpers/references.py, written from transformers' code).
SUBLAYERS = {t: (a["attn"], a["mlp"]) for t, a in ARCH.items()}
EPS = 1e-6


def hf_load(path):
    from transformers import AutoModelForCausalLM

    from tests.helpers.zoo import reference_tokenizer

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    model.requires_grad_(False)
    return model, reference_tokenizer(path)


def hf_prompts(tokenizer, text, n_docs, max_length):
    """Token ids (list of int lists) of the first n_docs blank-line documents, truncated."""
    docs, cur = [], []
    for line in text.splitlines():
        if line.strip():
            cur.append(line)
        elif cur:
            docs.append("\n".join(cur))
            cur = []
    if cur:
        docs.append("\n".join(cur))
    return [tokenizer(d)["input_ids"][:max_length] for d in docs[:n_docs]]


def _out(x):
    return x[0] if isinstance(x, tuple) else x


def _3d(t):
    """A copy of a sublayer output as (1, T, d) (OPT's fc2 returns (T, d))."""
    return (t[None] if t.dim() == 2 else t).clone()


def ref_forward(model, family, ids, intervene=None):
    """One prompt (list of ints), no padding. intervene = (part, layer, positions) or None.

    Returns (resid (L+1, T, d), attn (L, T, d), mlp (L, T, d), probs (T, V)) float64."""
    family = model.config.model_type  # the architecture is the model's, whatever the caller names
    layers = blocks(model)
    L = len(layers)
    c = scale(model)
    resid, attn, mlp = [None] * (L + 1), [None] * L, [None] * L
    handles = []
    if intervene is not None:
        part, s, positions = intervene
        positions = list(positions)

        if part == "layer":

            def skip(module, args, kwargs, output):
                h_in = args[0] if args else kwargs["hidden_states"]
                out = _out(output).clone()
                for t in positions:
                    out[0, t] = h_in[0, t]
                return (out,) + tuple(output[1:]) if isinstance(output, tuple) else out

            handles.append(layers[s].register_forward_hook(skip, with_kwargs=True))
        else:
            mod = getattr(layers[s], SUBLAYERS[family][0 if part == "attn" else 1])

            def zero(module, args, output):
                out = _out(output).clone()
                flat = (
                    out.dim() == 2
                )  # a module on flattened tokens (OPT's fc2): row t is position t
                for t in positions:
                    out[t if flat else (0, t)] = 0.0
                return (out,) + tuple(output[1:]) if isinstance(output, tuple) else out

            handles.append(mod.register_forward_hook(zero))

    handles.append(
        layers[0].register_forward_pre_hook(
            lambda m, a, k: resid.__setitem__(0, (a[0] if a else k["hidden_states"]).clone()),
            with_kwargs=True,
        )
    )
    for l, layer in enumerate(layers):
        handles.append(
            layer.register_forward_hook(
                lambda m, a, o, l=l: resid.__setitem__(l + 1, _out(o).clone())
            )
        )
        an, mn = SUBLAYERS[family]
        handles.append(
            getattr(layer, an).register_forward_hook(
                lambda m, a, o, l=l: attn.__setitem__(l, c * _3d(_out(o)))
            )
        )
        handles.append(
            getattr(layer, mn).register_forward_hook(
                lambda m, a, o, l=l: mlp.__setitem__(l, c * _3d(_out(o)))
            )
        )
    try:
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0]
    finally:
        for h in handles:
            h.remove()
    f = lambda xs: np.stack([x[0].double().numpy() for x in xs])  # noqa: E731
    return f(resid), f(attn), f(mlp), torch.softmax(logits.double(), -1).numpy()


def ref_contributions(model, family, prompts):
    """rel_norm, cos (3 parts attn/mlp/layer, L, 2 aggs mean/max), resid_cos (L, 2)."""
    L = len(blocks(model))
    vals = {k: [[[] for _ in range(L)] for _ in range(3)] for k in ("rel", "cos")}
    rc = [[] for _ in range(L)]

    def cos(x, y):
        return float(x @ y) / max(np.linalg.norm(x) * np.linalg.norm(y), EPS)

    def rel(x, y):
        return np.linalg.norm(x) / max(np.linalg.norm(y), EPS)

    for ids in prompts:
        resid, attn, mlp, _ = ref_forward(model, family, ids)
        for l in range(L):
            for t in range(len(ids)):
                h, a, m, hn = resid[l, t], attn[l, t], mlp[l, t], resid[l + 1, t]
                for p, (x, y) in enumerate(((a, h), (m, h + a), (hn - h, h))):
                    vals["rel"][p][l].append(rel(x, y))
                    vals["cos"][p][l].append(cos(x, y))
                rc[l].append(cos(hn, h))
    agg = lambda v: [np.mean(v), np.max(v)]  # noqa: E731
    rel_norm = np.array([[agg(vals["rel"][p][l]) for l in range(L)] for p in range(3)])
    cosv = np.array([[agg(vals["cos"][p][l]) for l in range(L)] for p in range(3)])
    return rel_norm, cosv, np.array([agg(rc[l]) for l in range(L)])


def ref_lens(model, family, prompts):
    """kl, overlap: (2 weightings token/prompt, L+1 boundaries)."""
    L = len(blocks(model))
    tok = {"kl": np.zeros(L + 1), "ov": np.zeros(L + 1)}
    per_prompt = {"kl": [], "ov": []}
    n = 0
    for ids in prompts:
        resid, _, _, probs = ref_forward(model, family, ids)
        logp = np.log(probs)
        pk, po = np.zeros(L + 1), np.zeros(L + 1)
        for b in range(L + 1):
            with torch.no_grad():
                lens_logits = (
                    head(model, torch.tensor(resid[b], dtype=torch.float32)).double().numpy()
                )
            for t in range(len(ids)):
                z = lens_logits[t] - lens_logits[t].max()
                logq = z - np.log(np.exp(z).sum())
                kl = float(np.sum(np.exp(logq) * (logq - logp[t])))
                ov = len(set(np.argsort(-logq)[:5]) & set(np.argsort(-logp[t])[:5])) / 5
                pk[b] += kl
                po[b] += ov
        tok["kl"] += pk
        tok["ov"] += po
        per_prompt["kl"].append(pk / len(ids))
        per_prompt["ov"].append(po / len(ids))
        n += len(ids)
    kl = np.stack([tok["kl"] / n, np.mean(per_prompt["kl"], 0)])
    ov = np.stack([tok["ov"] / n, np.mean(per_prompt["ov"], 0)])
    return kl, ov


def ref_splits(T, seed, index):
    pts = list(range(8, T - 4, 8))
    order = np.random.default_rng([seed, index]).permutation(len(pts))
    return [pts[i] for i in order[:4]]


def ref_skip_one(model, family, ids, part, s, intervene, measure, clean=None):
    """R[s, :] (L,) and O[s] for one prompt, one intervention, explicit loops over tokens."""
    L = len(blocks(model))
    clean = clean or ref_forward(model, family, ids)
    skip = ref_forward(model, family, ids, (part, s, intervene))
    C = clean[0][1:] - clean[0][:-1]
    C2 = skip[0][1:] - skip[0][:-1]
    R = np.zeros(L)
    for l in range(s, L):
        R[l] = max(
            [
                np.linalg.norm(C[l, t] - C2[l, t]) / max(np.linalg.norm(C[l, t]), EPS)
                for t in measure
            ]
            + [0.0]
        )
    O = max([np.linalg.norm(skip[3][t] - clean[3][t]) for t in measure] + [0.0])
    return R, O


def ref_skipping(model, family, prompts, setting, parts=("layer", "attn", "mlp"), seed=0):
    """Per-prompt R (n, parts, L, L) and O (n, parts, L) for prompts that qualify."""
    L = len(blocks(model))
    Rs, Os = [], []
    for i, ids in enumerate(prompts):
        T = len(ids)
        if setting == "current":
            cases = [(range(1, T), range(T))]
        else:
            cases = [(range(1, t), range(t, T)) for t in ref_splits(T, seed, i)]
            if not cases:
                continue
        clean = ref_forward(model, family, ids)
        R, O = np.zeros((len(parts), L, L)), np.zeros((len(parts), L))
        for pi, part in enumerate(parts):
            for s in range(L):
                for intervene, measure in cases:
                    r, o = ref_skip_one(model, family, ids, part, s, intervene, measure, clean)
                    R[pi, s] = np.maximum(R[pi, s], r)
                    O[pi, s] = max(O[pi, s], o)
        Rs.append(R)
        Os.append(O)
    return np.array(Rs), np.array(Os)


@pytest.fixture(scope="session")
def hf_models(zoo):
    """family -> (HF model, tokenizer) of zoo(family), loaded once per session."""
    cache = {}

    def get(family, **overrides):
        key = (family, tuple(sorted(overrides.items())))
        if key not in cache:
            cache[key] = hf_load(zoo(family, **overrides))
        return cache[key]

    return get
