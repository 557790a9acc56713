"""Shared fixtures: small models of every supported family, saved with save_pretrained and
loaded back through the same code path as a real checkpoint, and small corpora; and the tier
marker of every test (its folder: unit, integration, cli, faults).

Nothing here imports align: fixtures are inputs, and references live in tests/helpers/references.py
and in the tests."""

from __future__ import annotations

import contextlib
import json
import os
import sys

import pytest

# One BLAS and OpenMP thread a process under xdist: `make test` runs a worker per core, and
# two workers of two threads each on two cores spin-wait for each other's cores. On four heavy
# files this took the run from 191 s to 85 s of wall time and from 331 s to 135 s of CPU
# (docs/development.md, Time). The variables reach torch (not loaded yet) and every child;
# numpy's BLAS is loaded before this file by a plugin, so it is limited in place.
if os.environ.get("PYTEST_XDIST_WORKER"):
    from threadpoolctl import threadpool_limits

    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_name, "1")
    threadpool_limits(limits=int(os.environ["OPENBLAS_NUM_THREADS"]))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tests.helpers.schedule import SHARED  # noqa: E402
from tests.helpers.zoo import CORPUS_TEXT, make_model  # noqa: E402

TIERS = ("unit", "integration", "cli", "faults")


COLLECTED = pytest.StashKey[frozenset]()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark each test with its tier, the folder under tests/ it lives in; and keep the node id
    of every test collected, before -k, -m or --deselect leave any out (`config.stash[COLLECTED]`:
    tests/integration/test_reliability_table.py reads it rather than collect again)."""
    config.stash[COLLECTED] = frozenset(item.nodeid for item in items)
    here = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        tier = os.path.relpath(str(item.path), here).split(os.sep)[0]
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` with files that share a costly session fixture as one unit and the
    heaviest unit first (tests/helpers/schedule.py); any other `--dist` is xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from tests.helpers.schedule import WeightedFileScheduling

    return WeightedFileScheduling(config, log)


@pytest.fixture(autouse=True)
def frozen_heap():
    """Before each test, what the earlier tests left as garbage is collected and what is still
    alive (torch, transformers and their model modules, the session's and the file's fixtures)
    is moved out of the garbage collector's sight (`gc.freeze`). A full collection then walks
    only the objects made since: a result write collects once (store.results'
    quiet_async_errors), and in a test process holding torch and transformers' model modules
    each such walk took 0.3 to 0.45 s, half of a small fit's time. What a test makes is
    collected as before, within the test, so a warning that collection would print is still
    seen by the test that caused it. Autouse, so it runs before the test's other fixtures."""
    import gc

    gc.collect()
    gc.freeze()
    yield


def shared_folder(tmp_path_factory, name: str):
    """A folder every xdist worker of this run sees (beside the workers' own temporary
    folders; this process's own without xdist), for inputs built once a run."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder


def built_once(folder, key: str, build, suffix: str = "") -> str:
    """The path, in the shared `folder`, of what `build(path)` makes for `key`: built by the
    first worker that asks (under a file lock; the others wait for it), then read by all. A
    build that fails leaves nothing behind."""
    import hashlib
    import shutil

    from filelock import FileLock

    path = str(folder / hashlib.sha256(key.encode()).hexdigest()[:16]) + suffix
    with FileLock(path + ".lock"):
        if not os.path.exists(path + ".done"):
            shutil.rmtree(path, ignore_errors=True)
            try:
                build(path)
            except BaseException:
                shutil.rmtree(path, ignore_errors=True)
                raise
            open(path + ".done", "w").close()
    return path


@pytest.fixture(scope="session")
def zoo(tmp_path_factory):
    """family name -> folder of a small random model (2 layers, d_model 64, vocab ~300), built
    once a run and shared by the xdist workers (the same seeded model either way)."""
    root = shared_folder(tmp_path_factory, "zoo")
    built = {}

    def get(name: str, **overrides):
        key = name + json.dumps(overrides, sort_keys=True)
        if key not in built:
            built[key] = built_once(root, key, lambda path: make_model(name, path, **overrides))
        return built[key]

    return get


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory):
    """A .txt corpus: 12 documents separated by blank lines, lengths 5..200 tokens."""
    p = shared_folder(tmp_path_factory, "corpus") / "docs.txt"
    if not p.exists() or p.read_text(encoding="utf-8") != CORPUS_TEXT:
        tmp = p.with_name(f"docs.{os.getpid()}.txt")
        tmp.write_text(CORPUS_TEXT, encoding="utf-8")
        os.replace(tmp, p)
    return str(p)


def run_cli(args, capsys=None):
    """Run the `align` console script in this process. Returns (exit_code, stdout, stderr)."""
    from align.cli.main import main

    code = 0
    try:
        main(list(args))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    if capsys is not None:
        out, err = capsys.readouterr()
        return code, out, err
    return code, "", ""


@pytest.fixture
def cli(capsys):
    return lambda *args: run_cli([str(a) for a in args], capsys)


@pytest.fixture(scope="session")
def extracted(zoo, corpus_file, tmp_path_factory):
    """extracted(family, model_overrides={}, dtype=..., max_length=..., **extract_options) ->
    path of an activation store made by `align.extract` from a zoo model over the shared corpus
    (cached per arguments): `dtype` and `device` go in its ModelSpec, the corpus options named
    in the signature in its CorpusSpec, the rest in ExtractOptions. Two calls with different
    model_overrides give different models with the same tokenizer. Built once a run, shared by
    the xdist workers as the zoo is."""
    root = shared_folder(tmp_path_factory, "stores")
    made = {}

    def get(
        family="qwen2",
        model_overrides=None,
        corpus=None,
        *,
        dtype=None,
        device="cpu",
        max_length=None,
        max_tokens=None,
        overflow=None,
        doc_split=None,
        max_docs=None,
        pack=None,
        stand_in_token=None,
        **options,
    ):
        import align
        from align.corpus import CorpusSpec
        from align.extraction import ExtractOptions
        from align.models import ModelSpec

        model_overrides = dict(model_overrides or {})
        read = dict(
            max_length=max_length,
            max_tokens=max_tokens,
            overflow=overflow,
            doc_split=doc_split,
            max_docs=max_docs,
            pack=pack,
            stand_in_token=stand_in_token,
        )
        read = {k: v for k, v in read.items() if v is not None}  # the rest: CorpusSpec's defaults
        key = json.dumps(
            [family, model_overrides, corpus, dtype, device, read, options],
            sort_keys=True,
            default=str,
        )
        if key not in made:
            model = ModelSpec(zoo(family, **model_overrides), dtype=dtype, device=device)
            made[key] = built_once(
                root,
                key,
                lambda path: align.extract(
                    model,
                    CorpusSpec(corpus or corpus_file, **read),
                    path,
                    ExtractOptions(**options),
                    log=lambda m: None,
                ),
                ".zarr",
            )
        return made[key]

    return get


# Fixture modules of the other test areas (each owned with its tests).
pytest_plugins = [
    "tests.helpers.fixtures_fit",
    "tests.helpers.fixtures_analyses",
    "tests.helpers.fixtures_demo",
    "tests.helpers.fixtures_study",
]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


S3_KEY_ID = "AKIAALIGNTESTKEY0001"
S3_SECRET = "s3cr3t/align+test/never-logged"


@pytest.fixture(scope="session")
def s3():
    """A real S3 API (moto's server) on loopback for the whole session; credentials and the
    endpoint come from the usual environment variables. Yields a boto3 client; each test
    module makes its own bucket."""
    moto_server = pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    s3fs = pytest.importorskip("s3fs")
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    mp = pytest.MonkeyPatch()
    for k, v in {
        "AWS_ACCESS_KEY_ID": S3_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": S3_SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
    }.items():
        mp.setenv(k, v)
    # fsspec caches filesystem instances by their arguments, not by the environment.
    s3fs.S3FileSystem.clear_instance_cache()
    yield boto3.client("s3")
    s3fs.S3FileSystem.clear_instance_cache()
    mp.undo()
    server.stop()


@contextlib.contextmanager
def dask_processes(n_workers: int = 2, worker_env: dict | None = None, resources: tuple = ()):
    """A `dask scheduler` and `n_workers` single-threaded `dask worker` processes started on
    loopback (worker k declaring `resources[k]`, e.g. "GPU=1", where given); yields the
    scheduler address and stops them all afterwards."""
    import subprocess

    port = free_port()
    addr = f"tcp://127.0.0.1:{port}"
    dask_cli = os.path.join(os.path.dirname(sys.executable), "dask")
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # each process leads its own group, so the worker a nanny spawned is stopped with it
    quiet = dict(quiet, start_new_session=True)
    procs = [
        subprocess.Popen(
            [dask_cli, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            **quiet,
        )
    ]
    try:
        for k in range(n_workers):
            declared = resources[k] if k < len(resources) else None
            procs.append(
                subprocess.Popen(
                    [
                        dask_cli,
                        "worker",
                        addr,
                        "--nworkers",
                        "1",
                        "--nthreads",
                        "1",
                        "--no-dashboard",
                        "--memory-limit",
                        "2GB",
                        *(["--resources", declared] if declared else []),
                    ],
                    env=dict(os.environ, **(worker_env or {})),
                    **quiet,
                )
            )
        from distributed import Client

        with Client(addr, timeout="30s") as c:
            c.wait_for_workers(n_workers, timeout=60)
        yield addr
    finally:  # killed outright: a graceful close of workers that hold models took 8 s a module
        import signal

        for p in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
        for p in procs:
            p.wait()


class _Loopback:
    """One `dask_processes(2)` cluster, started when a test first asks for it and stopped as
    soon as the files that share it are done (`pytest_runtest_teardown`): idle, its scheduler
    and two workers took a fifth of a core, for the rest of the run."""

    def __init__(self):
        self.stack = None
        self.address = None

    def get(self) -> str:
        if self.address is None:
            self.stack = contextlib.ExitStack()
            # the first worker declares a GPU, which only a study's `gpu_resource` asks for
            # (test_study_cluster.py): the fits' tasks ask for no resource and run on either
            self.address = self.stack.enter_context(dask_processes(2, resources=("GPU=1",)))
        return self.address

    def close(self) -> None:
        if self.stack is not None:
            self.stack.close()
        self.stack = self.address = None


LOOPBACK = _Loopback()


# the files that share it: one unit of tests/helpers/schedule.py's SHARED
LOOPBACK_FILES = frozenset(path for path, unit in SHARED.items() if "loopback_cluster" in unit)


@pytest.fixture(scope="module")
def loopback_cluster():
    """The address of one `dask_processes(2)` cluster for the files that share it (one unit of
    tests/helpers/schedule.py's SHARED, so one worker runs them one after another): its two
    worker processes import torch and transformers once, not once a file. Stopped when the
    next test is in none of those files, and started again if a later one asks."""
    return LOOPBACK.get()


def pytest_runtest_teardown(item, nextitem):
    if LOOPBACK.address is not None and (
        nextitem is None or nextitem.nodeid.split("::")[0] not in LOOPBACK_FILES
    ):
        LOOPBACK.close()


def pytest_sessionfinish(session):
    LOOPBACK.close()


@pytest.fixture
def tmpfs(tmp_path):
    """A real 64 KiB tmpfs, for full-disk tests (root only; elsewhere the test is skipped with
    the reason)."""
    import subprocess

    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip(
            "mounting a tmpfs needs root (a full disk is tested on a real small file system)"
        )
    yield mnt
    subprocess.run(["umount", str(mnt)], capture_output=True)
