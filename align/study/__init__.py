"""`align study`: N models compared in one command, as a graph of units (extractions, fits,
analyses, the report) run through the commands' own library functions, resumable, with a
static report.

- `schema`: the study file (TOML) read and checked into a `Study` (`load_study`);
  `template`: the commented file `align study --init` writes
- `units`: the units, their outputs, inputs and keys (`plan`)
- `estimate`: `--dry-run`, every unit's disk, memory and time (`plan_study`)
- `execute`: the run under DIR's lock, resume by key, `keep_going` (`run_units`);
  `placement`: the units as tasks of a Dask cluster (`scheduler`);
  `state`: DIR/study.json
- `report`, `html`: the static site (`write_report`)
"""

from __future__ import annotations

import os

from align.errors import InputError
from align.study.estimate import StudyPlan, plan_study
from align.study.execute import StudyReport, run_units
from align.study.schema import MEASURES, Study, load_study
from align.study.template import TEMPLATE

__all__ = [
    "MEASURES",
    "Study",
    "StudyPlan",
    "StudyReport",
    "load_study",
    "plan_study",
    "run_study",
    "write_template",
]


def run_study(
    study: Study, root: str, keep_going: bool = False, scheduler: str | None = None, log=None
) -> StudyReport:
    """Run every unit of `study` in the folder `root` that is not already done, then report.

    Units already done with the same options are skipped; the report is written to
    `root`/report (`run_units`).

    Parameters
    ----------
    study : Study
        The study (`load_study`).
    root : str
        The study's folder.
    keep_going : bool, optional
        A failing unit does not stop the study: the units that read its output are blocked
        and the others run.
    scheduler : str, optional
        The address of a Dask scheduler whose workers run the units (None: one after another
        here).
    log : callable, optional
        Receives each message.

    Returns
    -------
    StudyReport
        Units run, skipped, failed (name -> one-line error) and blocked.

    Raises
    ------
    AlignError
        Naming the failing unit, unless `keep_going`.
    """
    return run_units(study, root, keep_going=keep_going, scheduler=scheduler, log=log)


def write_template(path: str) -> str:
    """Write the commented study file to `path` (never over an existing file)."""
    if os.path.exists(path):
        raise InputError(f"{path} exists: give a new file name for the study file")
    with open(path, "x", encoding="utf-8") as f:
        f.write(TEMPLATE)
    return path
