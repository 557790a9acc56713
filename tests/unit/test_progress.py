"""The progress line of a run of forwards off a terminal: the command, the unit counted, one
rate for one model, the ETA, and a line at the last step however soon it comes."""

from align.fitting.live_route.progress import Progress


def test_one_model_counts_its_unit_and_logs_the_last_step():
    lines = []
    p = Progress(3, lines.append, False, command="align skip", sides=("model",), unit="forward")
    p.forward("model", 1000, 0.5)
    p.step("current setting", 2)  # within 10 s of the start: no line yet
    assert lines == []
    p.step("future setting")
    p.close()
    # 1,000 tokens in 0.5 s of forwards: 2,000 tok/s; nothing left: ETA 0 s
    assert lines == ["align skip: future setting, forward 3/3, 2,000 tok/s, ETA 0 s"]


def test_two_models_keep_the_live_fit_line():
    lines = []
    p = Progress(1, lines.append, False)
    p.forward("source", 300, 1.0)
    p.forward("target", 100, 1.0)
    p.step("pass 1 of 1")
    assert lines == [
        "align fit --live: pass 1 of 1, batch 1/1, source 300 tok/s, target 100 tok/s, ETA 0 s"
    ]
