"""bench/gpu_check.py --tiny: the GPU check's code runs on the CPU in the suite, so it cannot
rot before a GPU is lent. A subprocess (with a timeout) writes its JSON; every phase must be
there, its exactness checks passed (stored bits equal the model's own hidden states, boundary
L stored before the final norm, single sequences within bf16 tolerance of the batched store,
no NaN/Inf), the live fit blocked and equal to the store route's, every family of the
families phase probed and extracted, and the CUDA-only parts recorded as skipped with their
reason. A run cut by --timeout exits 3 with the JSON written and
the interrupted phase named."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "gpu_check.py")
PHASES = [
    "env",
    "micro",
    "setup",
    "extract_tiny-1.5b-shape",
    "exactness",
    "split",
    "extract_tiny-14b-shape",
    "fit",
    "fit_live",
    "families",
]
# The families phase's list (bench/gpu_check.py FAMILY_CHECKS) and the family align's table reads each with.
FAMILIES = {
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "llama": "llama",
    "mistral": "mistral",
    "mixtral": "mixtral",
    "gemma": "gemma",
    "gemma2": "gemma2",
    "gemma3_text": "gemma2",
    "gpt_neox": "gpt_neox",
    "gpt2": "gpt2",
    "phi3": "phi3",
    "olmo2": "olmo2",
    "granite": "granite",
    "cohere": "cohere",
    "starcoder2": "starcoder2",
    "qwen3_moe": "qwen3_moe",
}
# The tiny models (bench/gpu_check.py TINY_SMALL, TINY_LARGE): layers and widths.
L_S, D_S, L_T, D_T = 3, 64, 4, 96


def _run(out, *extra, timeout=400):
    return subprocess.run(
        [sys.executable, SCRIPT, "--tiny", "--out", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_tiny_gpu_check_runs_every_phase_and_its_exactness_checks_pass(tmp_path):
    p = _run(tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    doc = json.loads((tmp_path / "gpu_check.json").read_text())
    assert doc["status"] == "complete" and doc["failed_checks"] == []
    phases = doc["phases"]
    assert list(phases) == PHASES
    for name in PHASES:
        assert phases[name]["status"] == "ok", (name, phases[name])
    # On the CPU both halves of the split are "cpu": the placement hooks run, the numbers are the
    # one-device run's exactly; extraction on a split is not supported yet.
    sp = phases["split"]
    assert all(sp["checks"].values()) and all(v == 0 for v in sp["max_abs_diff"].values()), sp
    assert sp["extract"].startswith("skipped: not supported yet")
    ex = phases["exactness"]
    assert ex["checks"] == {
        "stored_bits_equal_hidden_states": True,
        "final_norm_of_stored_hL_equals_last_hidden_state": True,
        "hL_stored_before_final_norm": True,
        "single_vs_batched_within_0.02": True,
        "no_nan_or_inf": True,
    }
    assert (
        ex["boundaries_compared"] == 3
        and ex["mismatched_seq_boundary"] == []
        and ex["non_finite_values"] == 0
    )
    assert ex["device_auto_equals_cuda"] == "skipped: needs CUDA"
    for name in ("extract_tiny-1.5b-shape", "extract_tiny-14b-shape"):
        e = phases[name]
        assert (
            e["n_tokens"] == 1536
            and e["model_built_on"] == "cpu"
            and e["init_device_recorded"] == "cpu"
        )
        assert (
            e["align_tokens_per_s"] > 0
            and e["bare_forward_tokens_per_s"] > 0
            and 0 <= e["padding_fraction"] < 1
        )
        assert (
            e["dry_run"]["bound_by"] in e["dry_run"]["batch_seconds"]
            and e["dry_run"]["predicted_over_actual"] > 0
        )
    assert (
        phases["micro"]["copy_gb_per_s"] == "skipped: needs CUDA (pinned memory and device copies)"
    )
    assert all(v > 0 for v in phases["micro"]["gemm_gflops"].values())
    fit = phases["fit"]
    assert fit["cuda_vs_cpu"] == "skipped: needs CUDA" and fit["checks"] == {"cpu_fit_finite": True}
    assert (
        fit["batch_size"] == 4
    )  # the live route's batch size, so the two routes see the same bits
    # align fit --live on every pair, blocked by the budget, equal to the store route at its 3x3 pairs.
    lv = phases["fit_live"]
    assert lv["checks"] == {
        "blocked_in_2_or_more_passes": True,
        "metrics_equal_store_route_cpu_1e-10": True,
        "alpha_equals_store_route_cpu": True,
    }, lv
    assert lv["pairs"] == f"{L_S + 1}x{L_T + 1}" and lv["n_tokens"] == 1536 and lv["passes"] >= 2
    assert [j for b in lv["blocks"] for j in b] == list(
        range(L_T + 1)
    )  # every target boundary once, in order
    assert sum(lv["planned_bytes"].values()) <= lv["budget_bytes"] < lv["one_pass_plan_bytes"]
    against = lv["against_store_route"]["cpu"]
    assert against["pairs"] == 9 and all(
        v <= 1e-10 for v in against["max_relative_difference"].values()
    )
    assert (
        lv["statistics_flops"] == 2 * 1536 * (L_S + 1) * D_S * (L_T + 1) * D_T
    )  # 2·N·ΣD_S·ΣD_T, by hand
    assert lv["statistics_gflops_over_pass_seconds"] * 1e9 * lv["pass_seconds"] == pytest.approx(
        lv["statistics_flops"]
    )
    assert (
        lv["tokens_per_s"] > 0
        and lv["fraction_of_fp64_gemm_rate"] > 0
        and lv["peak_gpu_memory_bytes"] is None
    )
    # Every family at the tiny width: probed (the sublayer identity among its checks), one batch
    # extracted whose stored tokens are the batch's, both rates measured.
    fm = phases["families"]
    assert fm["widths"] == {
        "vocab": 640,
        "hidden": 64,
        "heads": 4,
        "kv_heads": 2,
        "intermediate": 128,
        "layers": 1,
    }
    assert fm["passed"] == list(FAMILIES) and fm["failed"] == [], {
        k: v.get("error") for k, v in fm["families"].items()
    }
    for model_type, family in FAMILIES.items():
        rec = fm["families"][model_type]
        assert rec["status"] == "pass" and rec["family"] == family and rec["found"] == "table", (
            model_type,
            rec,
        )
        assert (
            "h_{l+1} = h_l + a_l + m_l" in rec["probe"] and "head(h_L) = logits" in rec["probe"]
        ), (model_type, rec)
        assert rec["n_tokens"] == 2 * 64 and rec["stored_tokens_are_the_batch"] is True, (
            model_type,
            rec,
        )
        assert (
            rec["align_tokens_per_s"] > 0
            and rec["bare_forward_tokens_per_s"] > 0
            and rec["parameters"] > 0
        )
    assert fm["families"]["gemma2"]["attention"] == "eager"  # soft-capping is eager-only


def test_timeout_stops_cleanly_and_reports(tmp_path):
    """The --timeout is a SIGALRM timer; the test delivers that same signal itself once the
    first phase is written (a run on an idle machine can finish within any short timeout, so
    the moment is not left to the clock), with the timer set far away."""
    import signal
    import time

    p = subprocess.Popen(
        [sys.executable, SCRIPT, "--tiny", "--out", str(tmp_path), "--timeout", "300"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    path = tmp_path / "gpu_check.json"
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                if json.loads(path.read_text())["phases"]:
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.05)
        p.send_signal(signal.SIGALRM)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 3, out + err[-3000:]
    doc = json.loads(path.read_text())
    assert doc["status"] == "stopped: --timeout 300 s reached"
    stopped = [k for k, v in doc["phases"].items() if v["status"] == "stopped: --timeout reached"]
    assert len(stopped) <= 1 and (
        not stopped or list(doc["phases"])[-1] == stopped[0]
    )  # at most the phase under way
    assert list(doc["phases"])[:1] == ["env"] and doc["phases"]["env"]["status"] == "ok"
    assert "Traceback" not in err


def test_only_families_runs_env_setup_and_the_families_asked(tmp_path):
    """`--only families --families ...`: a short device check of the families alone; a
    model_type that is not a family the bench builds fails its own entry, not the run."""
    p = _run(tmp_path, "--only", "families", "--families", "gpt_neox,gemma2,bert", timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr[-3000:]  # bert's entry failed
    doc = json.loads((tmp_path / "gpu_check.json").read_text())
    assert list(doc["phases"]) == ["env", "setup", "families"] and doc["status"] == "complete"
    fm = doc["phases"]["families"]
    assert fm["passed"] == ["gpt_neox", "gemma2"] and fm["failed"] == ["bert"]
    assert doc["failed_checks"] == ["families.bert_probe_and_extract"]
    assert (
        "bert" in fm["families"]["bert"]["error"]
        and "Traceback" not in fm["families"]["bert"]["error"]
    )
