"""The layer ships the recall package's bytecode. Lambda's code folders are read-only, so a
package without it is compiled again by every cold start (``python -m bench.bytecode``);
``layers/recall/Makefile`` compiles it at build time, hash-based and unchecked,
since a zip does not keep the sources' modification times a timestamp check compares.
The target ``sam build`` runs (``build-RecallLayer``) also installs the requirements' arm64
wheels from the package index; ``make check-wheels`` covers those, and here only the
package's own part runs, with this interpreter standing in for the runtime's."""

from __future__ import annotations

import json
import os
from pathlib import Path
import subprocess
import sys

import pytest

from bench.bytecode import shipped_packages
from local import layer, template
from local.layer import LAYER, MAKE

# Which recall modules the chat function's import compiles from source; run in a fresh
# interpreter over the built layer, as Lambda runs it.
COMPILED_AT_IMPORT = """
import importlib._bootstrap_external as external, json, sys
compiled = []
source_to_code = external.SourceLoader.source_to_code
def spied(self, data, path, *args, **kwargs):
    compiled.append(path)
    return source_to_code(self, data, path, *args, **kwargs)
external.SourceLoader.source_to_code = spied
sys.path.insert(0, {function!r})
import app
print(json.dumps(sorted(name for name, module in sys.modules.items()
    if name.startswith("recall") and getattr(module, "__file__", None) in compiled)))
print(json.dumps(sorted(name for name in sys.modules if name.startswith("recall."))))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return layer.build(tmp_path_factory.mktemp("layer"))


def test_every_module_of_the_layer_ships_unchecked_bytecode(built: Path) -> None:
    sources = sorted(built.joinpath("recall").rglob("*.py"))
    assert len(sources) == len(list(LAYER.joinpath("recall").rglob("*.py")))
    tag = sys.implementation.cache_tag
    for source in sources:
        compiled = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        assert compiled.is_file(), f"{source} has no bytecode"
        # PEP 552: flags 0b01 is hash-based and never checked against the source.
        flags = int.from_bytes(compiled.read_bytes()[4:8], "little")
        assert flags == 0b01, f"{compiled} would be checked against its source ({flags})"


def test_a_handler_imports_the_layer_without_compiling_any_of_it(built: Path) -> None:
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(built), str(template.ROOT)]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    code = COMPILED_AT_IMPORT.format(function=str(template.ROOT / "functions" / "chat"))
    run = subprocess.run(  # noqa: S603 (this interpreter, our own code)
        [sys.executable, "-c", code],
        env=environment,
        cwd=template.ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    compiled, loaded = (json.loads(line) for line in run.stdout.splitlines())
    assert len(loaded) > 20, loaded
    assert compiled == []


def test_sam_builds_the_layer_with_the_target_its_makefile_names() -> None:
    (layer,) = template.resources("AWS::Serverless::LayerVersion").items()
    name, resource = layer
    assert resource["Metadata"]["BuildMethod"] == "makefile"
    assert resource["Properties"]["ContentUri"] == "layers/recall"
    # sam build runs `make build-<logical id>`: a dry run shows it installs and compiles.
    planned = subprocess.run(  # noqa: S603 (our own Makefile, fixed arguments)
        [MAKE, "-n", "-C", str(LAYER), f"build-{name}", "ARTIFACTS_DIR=/artifacts"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "pip install" in planned
    assert "-r requirements.txt" in planned
    assert (
        'compileall -q -j 0 --invalidation-mode unchecked-hash "/artifacts/python/recall"'
        in planned
    )


def test_the_bench_counts_what_the_layer_ships_and_not_what_the_runtime_brings() -> None:
    shipped = shipped_packages()
    assert {"recall", "pydantic", "pydantic_core"} <= shipped
    # Powertools' tracer extra brings the X-Ray SDK, and with it botocore.
    assert {"aws_lambda_powertools", "aws_xray_sdk", "botocore"} <= shipped
    assert "boto3" not in shipped
    assert "s3transfer" not in shipped
