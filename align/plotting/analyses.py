"""The analyses' figures: contributions, layer skipping, the logit lens, effective depth, the
depth score, residual erasure and integrated gradients (each from its result: nothing is
recomputed)."""

from __future__ import annotations

import textwrap

import numpy as np

from align.errors import InputError
from align.names import model_name
from align.plotting.common import (
    DEFAULT_SIZE,
    MAX_PANELS,
    check_schema,
    edges,
    figure,
    label_curves,
    ticks,
)

STACK_BELOW = 600  # px: a contributions figure narrower than this stacks its two panels


def plot_contributions(ds, agg: str = "mean", depth=None, size=None, dpi: int = 100):
    """Per layer l: relative norm (left, on a log axis) and cosine (right) of what attention,
    the MLP and the whole layer add to the residual (docs/methods.md#contributions), aggregated
    by `agg` ("mean" or "max"),
    plus cos(h_{l+1}, h_l) on the right. With a "depth" result, the cosine effective depth is
    marked. Returns a Figure of `size` pixels [default 1200x500]; narrower than
    STACK_BELOW px (a phone's drawing), the two panels one above the other, each as wide as the
    figure."""
    check_schema(ds, "contributions", "plot_contributions")
    check_selection(ds, agg=agg)
    size = size or DEFAULT_SIZE["contributions"]
    stacked = size[0] < STACK_BELOW
    fig, grid = figure(size, dpi, *((2, 1) if stacked else (1, 2)), layout="constrained")
    axes = grid.reshape(1, 2)  # [[the norms' panel, the cosines' panel]]
    layers = ds["layer"].values
    for part in [str(p) for p in ds["part"].values]:
        for ax, name in ((axes[0, 0], "rel_norm"), (axes[0, 1], "cos")):
            (line,) = ax.plot(
                layers,
                ds[name].sel(part=part, agg=agg).values,
                "o-",
                ms=3,
                label=part,
                gid=f"{name}/{part}",
            )
            if agg == "mean":
                _interval_bars(ax, ds, name, line, f"{name}-interval/{part}", part=part)
    (line,) = axes[0, 1].plot(
        layers,
        ds["resid_cos"].sel(agg=agg).values,
        "k--",
        lw=1,
        label="cos(h_l+1, h_l)",
        gid="resid_cos",
    )
    if agg == "mean":
        _interval_bars(axes[0, 1], ds, "resid_cos", line, "resid_cos-interval")
    axes[0, 1].axhline(0, color="grey", lw=0.5)
    # A log axis: an early layer's ratio (hundreds, where the embedding's residual is small)
    # would flatten every other layer's on a linear one.
    axes[0, 0].set_yscale("log")
    axes[0, 0].set_ylabel(f"‖contribution‖ / ‖residual‖, {agg} (log axis)")
    axes[0, 1].set_ylabel(f"cosine with the residual ({agg} over tokens)")
    _mark_depth(axes[0, 1], depth, "cosine")
    label_curves(axes[0], "layer")
    fig.suptitle(f"contributions: {_short(ds.attrs.get('model', ''))}", fontsize=11)
    _intervals_note(fig, ds, "rel_norm" if agg == "mean" else None)
    return fig


def _interval_bars(ax, ds, name, line, gid, **sel) -> None:
    """Error bars of the 95% interval (`name`_low, `name`_high) where the result holds one,
    in the colour of `line`; asymmetric, from the percentiles (clipped at 0 against rounding)."""
    x, y = line.get_xdata(), line.get_ydata()
    _error_bars(ax, ds, name, (x, y), line.get_color(), gid, **sel)


def _error_bars(ax, ds, name, xy, color, gid, **sel) -> None:
    """Error bars at points `xy` (x, y) from `name`_low, `name`_high selected by `sel`, where
    the result holds them: asymmetric, from the percentiles (clipped at 0 against rounding)."""
    if f"{name}_low" not in ds or f"{name}_high" not in ds:
        return
    x, y = np.asarray(xy[0], dtype=float), np.asarray(xy[1], dtype=float)
    lo = ds[f"{name}_low"].sel(**sel).values.astype(float)
    hi = ds[f"{name}_high"].sel(**sel).values.astype(float)
    ok = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(y)
    if not ok.any():
        return
    err = np.vstack([np.maximum(y[ok] - lo[ok], 0), np.maximum(hi[ok] - y[ok], 0)])
    bars = ax.errorbar(x[ok], y[ok], yerr=err, fmt="none", ecolor=color, capsize=2, lw=0.8)
    bars.lines[2][0].set_gid(gid)


def _intervals_note(fig, ds, name, of: str = "") -> None:
    """A caption line under the figure: how the intervals drawn were made (`of`: what they are
    of, when not every curve), or why none are."""
    b = ds.attrs.get("bootstrap") or {}
    if name is not None and f"{name}_low" in ds and b:
        text = (
            f"bars: {b.get('level', 0.95):.0%} intervals over {b.get('resamples', 0):,} "
            f"{'held-out document' if 'document' in ds.dims else 'prompt'} "
            f"resamples (seed {b.get('seed')}){of}"
        )
    elif name is not None and f"{name}_low" in ds:
        text = f"bars: 95% prompt-bootstrap intervals{of}"
    else:
        text = "no intervals drawn" + ("" if name is not None else " (they are of the means)")
    fig.supxlabel(text, fontsize=8)


def check_selection(ds, **chosen) -> None:
    """Each chosen value (e.g. part="attn") is one of the result's coordinate values of that
    name, or the one-line InputError that lists them."""
    for name, value in chosen.items():
        values = [str(v) for v in ds[name].values]
        if value not in values:
            raise InputError(f"`{name}` {value!r} is not one of {', '.join(values)}")


def plot_skipping(ds, part: str = "layer", agg: str = "max", size=None, dpi: int = 100):
    """Layer skipping (docs/methods.md#layer-skipping): top, the R[s, l] heatmaps (skipped layer s, rows; later
    layer l, columns) of the "current" and "future" settings for `part`; bottom, O[s] bars for
    the three parts, per setting. `agg`: "max" or "mean_over_prompts". Returns a Figure of
    `size` pixels [default 1200x900]."""
    check_schema(ds, "skipping", "plot_skipping")
    check_selection(ds, part=part, agg=agg)
    parts = [str(p) for p in ds["part"].values]
    settings = [str(s) for s in ds["setting"].values]
    fig, axes = figure(
        size or DEFAULT_SIZE["skipping"], dpi, 2, len(settings), layout="constrained"
    )
    skipped, later = ds["skipped"].values, ds["later"].values
    vmax = float(np.nanmax(ds["R"].sel(part=part, agg=agg).values)) if ds["R"].size else 1.0
    mesh = None
    for k, setting in enumerate(settings):
        ax = axes[0, k]
        r = ds["R"].sel(setting=setting, part=part, agg=agg).transpose("skipped", "later").values
        mesh = ax.pcolormesh(
            edges(later), edges(skipped), r, cmap="magma", vmin=0, vmax=vmax or 1.0, shading="flat"
        )
        ax.invert_yaxis()
        ax.xaxis.set_major_locator(ticks(integer=True))
        ax.yaxis.set_major_locator(ticks(integer=True))
        ax.set_xlabel("later layer l")
        ax.set_ylabel(f"skipped layer s ({part})")
        ax.set_title(f"R[s, l], {setting} ({agg})", fontsize=10)
        ax = axes[1, k]
        width = 0.8 / len(parts)
        for q, p in enumerate(parts):
            x = skipped + (q - (len(parts) - 1) / 2) * width
            y = ds["O"].sel(setting=setting, part=p, agg=agg).values
            ax.bar(x, y, width=width, label=p, gid=f"O/{setting}/{p}")
            sel = {"setting": setting, "part": p, "agg": agg}
            _error_bars(ax, ds, "O", (x, y), "black", f"O-interval/{setting}/{p}", **sel)
        ax.xaxis.set_major_locator(ticks(integer=True))
        ax.set_xlabel("skipped layer s")
        ax.set_ylabel("O[s]: ‖p' − p‖₂")
        ax.set_title(f"effect on the output, {setting} ({agg})", fontsize=10)
        ax.legend(fontsize=8)
    fig.colorbar(mesh, ax=list(axes[0]), label="relative change of later contributions")
    fig.suptitle(f"layer skipping: {_short(ds.attrs.get('model', ''))}", fontsize=10)
    _intervals_note(fig, ds, "O", " of O[s]; R[s, l] drawn without its interval (R_low, R_high)")
    return fig


def plot_lens(ds, depth=None, size=None, dpi: int = 100):
    """Logit lens (docs/methods.md#logit-lens): KL(lens ‖ output) (left) and top-5 overlap (right) per
    boundary, token-weighted (solid) and prompt-weighted (dashed). With a "depth" result, the
    KL and overlap effective depths (§5) are marked as vertical lines where defined, and named
    as undefined where not. Returns a Figure of `size` pixels [default 1200x500]."""
    check_schema(ds, "lens", "plot_lens")
    fig, axes = figure(size or DEFAULT_SIZE["lens"], dpi, 1, 2, layout="constrained")
    b = ds["boundary"].values
    for w in [str(x) for x in ds["weighting"].values]:
        style = "o-" if w == "token" else "s--"
        for ax, name in ((axes[0, 0], "kl"), (axes[0, 1], "overlap")):
            (line,) = ax.plot(
                b,
                ds[name].sel(weighting=w).values,
                style,
                ms=3,
                label=f"{w}-weighted",
                gid=f"{name}/{w}",
            )
            _interval_bars(ax, ds, name, line, f"{name}-interval/{w}", weighting=w)
    axes[0, 0].set_ylabel("KL(lens ‖ model output), nats")
    axes[0, 1].set_ylabel("top-5 overlap with the output")
    axes[0, 1].set_ylim(-0.02, 1.02)
    _mark_depth(axes[0, 0], depth, "kl")
    _mark_depth(axes[0, 1], depth, "overlap")
    label_curves(axes[0], "residual boundary b")
    fig.suptitle(f"{lens_label(ds.attrs)}: {_short(ds.attrs.get('model', ''))}", fontsize=11)
    _intervals_note(fig, ds, "kl")
    return fig


def lens_label(attrs: dict) -> str:
    """A lens result's kind in words: "logit lens", "tuned lens", "linear lens through B"."""
    through = attrs.get("through")
    kind = f"{attrs.get('kind', 'logit')} lens"
    return f"{kind} through {_short(through)}" if through else kind


RIGHT_PANELS = {  # plot_lenses' right panel: (variable, axis label)
    "overlap": "top-5 overlap with the output (token-weighted)",
    "top1": "top-1 agreement with the output (token-weighted)",
}


def plot_lenses(
    datasets, size=None, dpi: int = 100, right: str = "overlap", title=None, labels=None
):
    """Several lens results drawn together (docs/methods.md#lenses): the token-weighted
    KL(lens ‖ output) (left) and `right` per boundary: the top-5 overlap, or the top-1
    agreement ("top1"; a result without it, a logit lens written before it was recorded, is
    left out of that panel); one curve per result labelled by its kind, with its interval
    bars. The logit lens scores every token, the linear and tuned lenses held-out documents'
    (the caption says so). `title` replaces the models' names above, `labels` (one a result)
    the kinds in the legend. Returns a Figure of `size` pixels [default 1200x500]."""
    if right not in RIGHT_PANELS:
        raise InputError(f"`right` {right!r} is not one of {', '.join(RIGHT_PANELS)}")
    for ds in datasets:
        check_schema(ds, "lens", "plot_lenses")
    fig, axes = figure(size or DEFAULT_SIZE["lens"], dpi, 1, 2, layout="constrained")
    for k, ds in enumerate(datasets):
        b = ds["boundary"].values
        label = labels[k] if labels is not None else lens_label(ds.attrs)
        for ax, name in ((axes[0, 0], "kl"), (axes[0, 1], right)):
            if name not in ds:
                continue
            (line,) = ax.plot(
                b,
                ds[name].sel(weighting="token").values,
                "o-",
                ms=3,
                label=label,
                color=f"C{k}",
                gid=f"{name}/{k}",
            )
            _interval_bars(ax, ds, name, line, f"{name}-interval/{k}", weighting="token")
    axes[0, 0].set_ylabel("KL(lens ‖ model output), nats (token-weighted)")
    axes[0, 1].set_ylabel(RIGHT_PANELS[right])
    axes[0, 1].set_ylim(-0.02, 1.02)
    label_curves(axes[0], "residual boundary b")
    names = sorted({_short(ds.attrs.get("model", "")) for ds in datasets})
    width = (size or DEFAULT_SIZE["lens"])[0]  # px: the texts wrapped to it
    title = title or f"lenses: {', '.join(names)}"
    fig.suptitle(textwrap.fill(title, max(30, width // 8)), fontsize=11)
    fig.supxlabel(
        textwrap.fill(
            "bars: 95% bootstrap intervals (logit: over prompts, every token; linear and "
            "tuned: over held-out documents, their tokens)",
            max(40, width // 6),
        ),
        fontsize=8,
    )
    return fig


def plot_depth(ds, size=None, dpi: int = 100):
    """Effective-depth ratios (ED + 1) / L per rule (docs/methods.md#effective-depth) as bars; an undefined
    rule has no bar and says why. Returns a Figure of `size` pixels [default 700x450]."""
    check_schema(ds, "depth", "plot_depth")
    fig, axes = figure(size or DEFAULT_SIZE["depth"], dpi, layout="constrained")
    ax = axes[0, 0]
    rules = [str(r) for r in ds["rule"].values]
    ratio = ds["ratio"].values.astype(float)
    ax.bar(
        range(len(rules)), np.where(np.isfinite(ratio), ratio, 0.0), color="tab:blue", gid="ratio"
    )
    reasons = ds.attrs.get("reasons") or {}
    for k, (r, v) in enumerate(zip(rules, ratio)):
        ed = float(ds["effective_depth"].sel(rule=r))
        ax.text(
            k,
            (v if np.isfinite(v) else 0) + 0.02,
            f"ED {ed:g}" if np.isfinite(ed) else "undefined",
            ha="center",
            fontsize=8,
        )
        if not np.isfinite(v) and reasons.get(r):
            # the whole reason, wrapped to the width of a bar's slot
            width = max(12, int(60 / max(len(rules), 1) * 1.2))
            ax.text(
                k,
                0.55,
                textwrap.fill(str(reasons[r]), width),
                ha="center",
                va="center",
                fontsize=9,
                gid=f"reason/{r}",
            )
    ax.set_xticks(range(len(rules)), rules)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("(ED + 1) / L")
    ax.set_title(f"effective depth: {_short(ds.attrs.get('model', ''))}", fontsize=10)
    return fig


def plot_depthscore(ds, part: str = "layer", agg: str = "max", size=None, dpi: int = 100):
    """Depth score against level (docs/methods.md): one panel per effect (layer, output), one
    line per setting (the future one, P1's, first), for `part` and `agg`; the right axis reads
    DS / L. A flat line: the model uses no more depth for harder items. Undefined points are
    gaps; the prompt-bootstrap 95% intervals (ds_low, ds_high), where the result has them, are
    error bars. Returns a Figure of `size` pixels [default 1000x420]."""
    check_schema(ds, "depthscore", "plot_depthscore")
    check_selection(ds, part=part, agg=agg)
    effects = [str(e) for e in ds["effect"].values]
    fig, axes = figure(
        size or DEFAULT_SIZE["depthscore"], dpi, 1, len(effects), layout="constrained"
    )
    levels = ds["level"].values
    L = ds.attrs.get("n_layers")
    for k, effect in enumerate(effects):
        ax = axes[0, k]
        settings = sorted(
            (str(s) for s in ds["setting"].values), key=lambda s: s != "future"
        )  # P1's first
        for setting in settings:
            y = (
                ds["DS"]
                .sel(setting=setting, part=part, agg=agg, effect=effect)
                .values.astype(float)
            )
            label = {"future": "future (P1)", "current": "current (align's extension)"}.get(
                setting, setting
            )
            (line,) = ax.plot(levels, y, marker="o", label=label, gid=f"DS/{effect}/{setting}")
            if "ds_low" in ds and "ds_high" in ds:
                lo = (
                    ds["ds_low"]
                    .sel(setting=setting, part=part, agg=agg, effect=effect)
                    .values.astype(float)
                )
                hi = (
                    ds["ds_high"]
                    .sel(setting=setting, part=part, agg=agg, effect=effect)
                    .values.astype(float)
                )
                ok = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(y)
                if ok.any():
                    # Asymmetric bars from the percentiles; clipped at 0 against rounding.
                    err = np.vstack([np.maximum(y[ok] - lo[ok], 0), np.maximum(hi[ok] - y[ok], 0)])
                    bars = ax.errorbar(
                        levels[ok], y[ok], yerr=err, fmt="none", ecolor=line.get_color(), capsize=3
                    )
                    bars.lines[2][0].set_gid(f"DS-interval/{effect}/{setting}")  # the vertical bars
        ax.xaxis.set_major_locator(ticks(integer=True))
        ax.set_xlabel("level")
        ax.set_ylabel("depth score DS (layers)")
        if L:
            ax.set_ylim(0, L - 1)
            ax.secondary_yaxis(
                "right", functions=(lambda d, L=L: d / L, lambda r, L=L: r * L)
            ).set_ylabel("DS / L")
        ax.set_title(f"{effect} effect ({part}, {agg})", fontsize=10)
        ax.legend(fontsize=8)
    name = (
        "P1's depth score (future setting)"
        if "future" in ds["setting"].values
        else "depth score (current setting)"
    )
    fig.suptitle(f"{name} by level: {_short(ds.attrs.get('model', ''))}", fontsize=10)
    return fig


def _depth_value(depth, rule):
    if depth is None:
        return None
    check_schema(depth, "depth", "the depth marker")
    v = float(depth["effective_depth"].sel(rule=rule))
    return v if np.isfinite(v) else None


def _mark_depth(ax, depth, rule):
    if depth is None:
        return
    v = _depth_value(depth, rule)
    if v is None:
        ax.plot([], [], " ", label=f"{rule} effective depth: undefined")
    else:
        ax.axvline(
            v,
            color="tab:red",
            lw=1,
            ls=":",
            label=f"{rule} effective depth {v:g}",
            gid=f"depth/{rule}",
        )


def _short(name) -> str:
    """A model's name for a title, without its folder or a trailing hash."""
    return model_name(name)


def _prompts_to_draw(ds, prompts):
    n = int(ds.sizes["prompt"])
    chosen = list(range(min(n, MAX_PANELS))) if prompts is None else [int(p) for p in prompts]
    bad = [p for p in chosen if not 0 <= p < n]
    if bad or not chosen:
        raise InputError(
            f"prompt {bad[0] if bad else '(none)'} is not in this result: it holds prompts 0..{n - 1}"
        )
    return chosen


def _token_axis(ax, ds, i):
    """x ticks labelled with prompt i's tokens (answer-predicting positions in red); returns T."""
    T = int(ds["n_tokens"].values[i])
    labels = [str(t).replace("\n", "\\n") for t in ds["token"].values[i, :T]]
    pred = ds["predicts_answer"].values[i, :T]
    ax.set_xticks(range(T), labels, rotation=90, fontsize=6 if T > 40 else 8)
    for tick, p in zip(ax.get_xticklabels(), pred):
        if p:
            tick.set_color("tab:red")
    return T


def plot_erasure(ds, prompts=None, size=None, dpi: int = 100):
    """Residual erasure (docs/methods.md, [P1] Fig. 6b): per prompt, the map of E[b, t] = max over
    answer-predicting positions of ‖p′ − p‖₂ when the residual at boundary b (rows, y: b = 0..L,
    h_L the last block's output) at position t (columns, x, labelled with the tokens;
    answer-predicting ones in red) is replaced by the reference mean. A result written before
    boundary L was erased has rows 0..L−1 and says so in its titles. One panel per prompt in
    `prompts` [default: the first 4], on one colour scale. Returns a Figure of `size` pixels
    [default 1200 wide, 420 high per prompt]."""
    check_schema(ds, "erasure", "plot_erasure")
    chosen = _prompts_to_draw(ds, prompts)
    w, h = DEFAULT_SIZE["erasure"]
    fig, axes = figure(size or (w, h * len(chosen)), dpi, len(chosen), 1, layout="constrained")
    E = ds["effect"].values
    vmax = float(np.nanmax(E[chosen])) if np.isfinite(E[chosen]).any() else 1.0
    no_last = ds.sizes["boundary"] == ds.attrs.get("n_layers")  # an older result: boundaries 0..L−1
    rows = f"b = 0..{int(ds['boundary'].values[-1])}" + (
        ", no boundary L (an older result)" if no_last else ""
    )
    mesh = None
    for k, i in enumerate(chosen):
        ax = axes[k, 0]
        T = _token_axis(ax, ds, i)
        b = ds["boundary"].values
        mesh = ax.pcolormesh(
            np.arange(T + 1) - 0.5,
            edges(b),
            E[i, :, :T],
            cmap="viridis",
            vmin=0,
            vmax=vmax or 1.0,
            shading="flat",
            gid=f"effect/{i}",
        )
        ax.yaxis.set_major_locator(ticks(integer=True))
        ax.set_ylabel("boundary b")
        answer = str(ds["answer"].values[i]) if "answer" in ds else ""
        ax.set_title(f"prompt {i}: erasing h_b(t), {rows}; answer {answer[:40]!r}", fontsize=9)
    fig.colorbar(
        mesh,
        ax=[axes[k, 0] for k in range(len(chosen))],
        label="max over answer positions of ‖p′ − p‖₂",
    )
    fig.suptitle(f"residual erasure: {_short(ds.attrs.get('model', ''))}", fontsize=10)
    return fig


def plot_igrad(ds, prompts=None, size=None, dpi: int = 100):
    """Integrated gradients ([P1] §3.3): per prompt (rows of panels) and part (columns), the
    attribution A[l, t] of the answer's target (attrs["variant"]: P1's summed probability, or
    the log-probability) to the part's object at layer l (y) and position t (x, tokens;
    answer-predicting ones in red), on a symmetric diverging scale per prompt. Each panel's
    title gives the largest completeness gap of its layers. Returns a Figure of `size` pixels [default 1200 wide, 420 high per prompt]."""
    check_schema(ds, "igrad", "plot_igrad")
    chosen = _prompts_to_draw(ds, prompts)
    parts = [str(p) for p in ds["part"].values]
    w, h = DEFAULT_SIZE["igrad"]
    fig, axes = figure(
        size or (w, h * len(chosen)), dpi, len(chosen), len(parts), layout="constrained"
    )
    A = ds["attribution"].transpose("prompt", "part", "layer", "position").values
    layers = ds["layer"].values
    # A result written before the variant was recorded is the align variant (log p, midpoint).
    v = ds.attrs.get("variant") or {
        "protocol": "align",
        "target": "logprob",
        "rule": "midpoint",
        "steps": ds.attrs.get("steps", "?"),
    }
    target = "Σ p(answer)" if v["target"] == "prob" else "log p(answer)"
    how = f"{v['protocol']}, {v['rule']} rule, {v['steps']} steps"
    for k, i in enumerate(chosen):
        T = int(ds["n_tokens"].values[i])
        r = float(np.nanmax(np.abs(A[i, :, :, :T]))) or 1.0
        mesh = None
        for q, part in enumerate(parts):
            ax = axes[k, q]
            _token_axis(ax, ds, i)
            mesh = ax.pcolormesh(
                np.arange(T + 1) - 0.5,
                edges(layers),
                A[i, q, :, :T],
                cmap="RdBu_r",
                vmin=-r,
                vmax=r,
                shading="flat",
                gid=f"attribution/{i}/{part}",
            )
            ax.yaxis.set_major_locator(ticks(integer=True))
            ax.set_ylabel("layer l")
            gap = (
                float(np.nanmax(np.abs(ds["completeness_gap"].sel(part=part).values[i])))
                if "completeness_gap" in ds
                else float("nan")
            )
            ax.set_title(f"prompt {i}, {part}: completeness gap ≤ {gap:.2g}", fontsize=9)
        fig.colorbar(
            mesh, ax=[axes[k, q] for q in range(len(parts))], label=f"attribution to {target}"
        )
    fig.suptitle(f"integrated gradients ({how}): {_short(ds.attrs.get('model', ''))}", fontsize=10)
    return fig
