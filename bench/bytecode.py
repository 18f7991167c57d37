"""What the layer's bytecode saves a cold start (``make bench``).

A function's code folders are read-only, so Python keeps none of the bytecode it compiles
there: a layer of sources is compiled again, module by module, by every cold start. SAM's
python build method unpacks the requirements' wheels without compiling them, so before
``layers/recall/Makefile`` compiled the layer, that covered the dependencies too. For each
function this imports the handler in a fresh interpreter, then times compiling each module
the import loaded that the layer ships (the recall package and the closure of
``layers/recall/requirements.txt``; boto3 and s3transfer come with the runtime), the
fastest of ``RUNS`` compilations each, and prints the sum beside ``import boto3``'s time.

    python -m bench.bytecode
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import re
import subprocess
import sys
import time

from packaging.requirements import Requirement

from bench.import_times import deployed_layer, import_seconds

ROOT = Path(__file__).resolve().parent.parent
RUNS = 3

# Run in the fresh interpreter: the handler's import, then each loaded module's file.
LOADED = """
import json, sys
sys.path.insert(0, {directory!r})
import app
print(json.dumps({{name: module.__file__ for name, module in list(sys.modules.items())
    if getattr(module, "__file__", None) and module.__file__.endswith(".py")}}))
"""


def shipped_packages() -> set[str]:
    """The import names the layer ships: ``recall`` and every top-level name of the
    distributions its requirements need, as installed here."""
    from importlib import metadata

    names = {"recall"}
    pending = [
        Requirement(line)
        for line in (ROOT / "layers" / "recall" / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    seen: set[str] = set()
    while pending:
        requirement = pending.pop()
        key = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if key in seen:
            continue
        seen.add(key)
        distribution = metadata.distribution(requirement.name)
        for file in distribution.files or []:
            top = file.parts[0]
            if top.endswith((".dist-info", ".data")) or top in ("..", "bin"):
                continue
            names.add(top.removesuffix(".py"))
        for needed in distribution.requires or []:
            dependency = Requirement(needed)
            extras = requirement.extras or {""}
            if dependency.marker is None or any(
                dependency.marker.evaluate({"extra": extra}) for extra in extras
            ):
                pending.append(dependency)
    return names


def compile_seconds(path: str) -> float:
    source = Path(path).read_bytes()
    best = float("inf")
    for _ in range(RUNS):
        before = time.process_time()
        compile(source, path, "exec")
        best = min(best, time.process_time() - before)
    return best


def measure(function: str, shipped: set[str]) -> tuple[int, float, float]:
    """``(modules, seconds for all the layer's, seconds for recall's and the handler's)``."""
    directory = str(ROOT / "functions" / function)
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(deployed_layer()), str(ROOT)]),
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    run = subprocess.run(  # noqa: S603 (this interpreter, our own code)
        [sys.executable, "-c", LOADED.format(directory=directory)],
        env=environment,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    loaded: dict[str, str] = json.loads(run.stdout)
    ours = [path for name, path in loaded.items() if name == "app" or name.startswith("recall")]
    theirs = [
        path
        for name, path in loaded.items()
        if name.split(".")[0] in shipped and not name.startswith("recall")
    ]
    mine = sum(compile_seconds(path) for path in ours)
    return len(ours) + len(theirs), mine + sum(compile_seconds(p) for p in theirs), mine


def main() -> int:
    shipped = shipped_packages()
    boto = import_seconds("import boto3") - import_seconds("pass")
    print("Compiling what the layer ships, per cold start, without its bytecode")
    print(f"(import boto3 alone: {boto * 1000:.0f} ms)\n")
    print("| function | modules | compile ms | × import boto3 | of it recall's ms |")
    print("|---|---|---|---|---|")
    for app in sorted((ROOT / "functions").glob("*/app.py")):
        modules, everything, ours = measure(app.parent.name, shipped)
        print(
            f"| {app.parent.name} | {modules} | {everything * 1000:.0f} | "
            f"{everything / boto:.2f} | {ours * 1000:.0f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
