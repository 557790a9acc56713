"""`align study` and `align report`: route to align.study."""

from __future__ import annotations

import os

import click

from align.cli.declared import Parsed, options_of
from align.declarations import flag
from align.errors import InputError
from align.study import load_study, plan_study, run_study, write_template
from align.study.report import write_report

STUDY_OUTPUT = flag(
    "-o",
    "--output",
    help="the study's folder (stores, results, report)",
    metavar="DIR",
    shown_default="required (not with `--init`)",
)
INIT = flag(
    "--init",
    help="write a commented study file to STUDY.toml and stop",
    is_flag=True,
)
STUDY_DRY_RUN = flag(
    "--dry-run",
    help="print every unit with its disk, memory and time (below); run nothing",
    is_flag=True,
)
KEEP_GOING = flag(
    "--keep-going",
    help="go on past a failing unit (the units reading it are blocked)",
    is_flag=True,
)
SCHEDULER = flag(
    "--scheduler",
    help="address of a Dask scheduler whose workers run the units (they must see DIR; below)",
    metavar="ADDRESS",
    shown_default="here",
)


STUDY_OPTIONS = (
    STUDY_OUTPUT,
    INIT,
    STUDY_DRY_RUN,
    KEEP_GOING,
    SCHEDULER,
)  # in the order of the help and of the page's table


@click.command("study")
@click.argument("study_file", metavar="STUDY.toml", required=False)
@options_of(*STUDY_OPTIONS)
def study_cmd(study_file, **values):
    """Run a study: every model extracted, every pair fitted, every analysis, then the report.
    Re-running resumes; after an edit of STUDY.toml only the units it changes run."""
    parsed = Parsed(values)
    output, init = parsed.take(STUDY_OUTPUT), parsed.take(INIT)
    dry_run = parsed.take(STUDY_DRY_RUN)
    keep_going, scheduler = parsed.take(KEEP_GOING), parsed.take(SCHEDULER)
    parsed.done()
    if study_file is None:
        raise click.UsageError("give STUDY.toml (`align study --init STUDY.toml` writes one)")
    if init:
        write_template(study_file)
        click.echo(
            f"align study: wrote {study_file}; edit it, then: align study {study_file} -o DIR --dry-run"
        )
        return
    if output is None:
        raise InputError("give -o DIR, the study's folder")
    study = load_study(study_file)
    if dry_run:
        for line in plan_study(study, output).lines():
            click.echo(line)
        return
    report = run_study(study, output, keep_going=keep_going, scheduler=scheduler)
    click.echo(
        f"align study: {output}: {len(report.ran)} unit(s) run, {len(report.skipped)} already done"
        + (f", {len(report.failed)} failed, {len(report.blocked)} blocked" if report.failed else "")
        + f" in {report.seconds:.1f} s; report: {os.path.join(output, 'report', 'index.html')}"
    )
    if report.failed:
        raise SystemExit(1)


REPORT_OUTPUT = flag(
    "-o",
    "--output",
    help="the report's folder (`index.html` and its pages)",
    metavar="REPORT",
    required=True,
)


@click.command("report")
@click.argument("study_dir", metavar="DIR")
@options_of(REPORT_OUTPUT)
def report_cmd(study_dir, **values):
    """Write the report of the study in DIR: a static site that opens offline."""
    write_report(study_dir, Parsed(values).take(REPORT_OUTPUT))


commands = [study_cmd, report_cmd]
