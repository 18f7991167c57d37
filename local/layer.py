"""The layer as ``sam build`` makes it (``layers/recall/Makefile``), built here with this
interpreter standing in for the runtime's python3.13: the bench imports the handlers over
it, and the tests check what it ships."""

from __future__ import annotations

from pathlib import Path
import shutil
import subprocess
import sys

from local import template

LAYER = template.ROOT / "layers" / "recall"
MAKE = shutil.which("make") or "/usr/bin/make"


def build(artifacts: Path, target: str = "layer-code") -> Path:
    """Runs the Makefile's ``target`` into ``artifacts``, as sam build does with its
    ARTIFACTS_DIR; returns the folder Lambda puts on the path (``python``). ``layer-code``
    is the recall package alone; ``build-RecallLayer`` adds the requirements' wheels, from
    the package index."""
    subprocess.run(  # noqa: S603 (our own Makefile, fixed arguments)
        [
            MAKE,
            "-s",
            "-C",
            str(LAYER),
            target,
            f"ARTIFACTS_DIR={artifacts}",
            f"LAMBDA_PYTHON={sys.executable}",
        ],
        check=True,
    )
    return artifacts / "python"
