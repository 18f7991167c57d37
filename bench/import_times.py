"""Each handler module's import time as a ratio to ``import boto3`` alone: the median CPU
time of fresh interpreters, over the recall package as the layer's build ships it."""

from __future__ import annotations

import atexit
import functools
import os
from pathlib import Path
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

from local import layer

IMPORT_RUNS = 7
ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def deployed_layer() -> Path:
    """The recall package as ``layers/recall/Makefile`` builds it for the layer, compiled by
    this interpreter: deployed, a code folder is read-only, so without its bytecode every
    cold start compiles each module again (and so did every run here, under
    ``PYTHONDONTWRITEBYTECODE``)."""
    built = Path(tempfile.mkdtemp(prefix="recall-layer-"))
    atexit.register(shutil.rmtree, built, ignore_errors=True)
    return layer.build(built)


def import_seconds(code: str) -> float:
    """The median CPU time (user and system) of fresh interpreters running ``code``: on a
    shared machine it varies far less than wall time, and an import is nearly all CPU."""
    return statistics.median(cpu_seconds(code) for _ in range(IMPORT_RUNS))


def cpu_seconds(code: str) -> float:
    """One fresh interpreter's CPU time running ``code``, over the layer as it ships."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(deployed_layer()), str(ROOT)]),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_LAMBDA_FUNCTION_NAME": "bench",
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # Our own interpreter on our own code: nothing untrusted reaches the command.
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)  # noqa: S603
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


# `import boto3` with the collector off, as a handler imports it (recall/cold_start.py).
BOTO3_UNCOLLECTED = "import gc; gc.disable(); import boto3"


def import_ratios() -> list[tuple[str, float, float, float]]:
    """Each handler module's import time, and its ratio to ``import boto3`` alone, both
    less the bare interpreter's start. Each of ``IMPORT_RUNS`` rounds runs a bare start,
    ``import boto3`` and the handler back to back, and the ratio is the median of the
    rounds' own: this machine's speed drifts within a run, and a boto3 timed once, minutes
    before a handler, carried that drift into the handler's ratio. A handler imports with
    the collector off, boto3 included, so the last figure is the ratio to an ``import
    boto3`` with the collector off too: how much of the gain is not the collector's part
    of boto3's own import."""
    rows = []
    boto_seconds: list[float] = []
    uncollected_seconds: list[float] = []
    for app in sorted((ROOT / "functions").glob("*/app.py")):
        code = f"import sys; sys.path.insert(0, {str(app.parent)!r}); import app"
        seconds, ratios, uncollected_ratios = [], [], []
        for _ in range(IMPORT_RUNS):
            bare = cpu_seconds("pass")
            boto = cpu_seconds("import boto3") - bare
            uncollected = cpu_seconds(BOTO3_UNCOLLECTED) - bare
            own = cpu_seconds(code) - bare
            boto_seconds.append(boto)
            uncollected_seconds.append(uncollected)
            seconds.append(own)
            ratios.append(own / boto)
            uncollected_ratios.append(own / uncollected)
        rows.append(
            (
                app.parent.name,
                statistics.median(seconds),
                statistics.median(ratios),
                statistics.median(uncollected_ratios),
            )
        )
    boto = statistics.median(boto_seconds)
    rows.insert(0, ("boto3 alone", boto, 1.0, boto / statistics.median(uncollected_seconds)))
    return rows
