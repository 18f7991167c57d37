"""The layer's and the functions' requirements resolve to wheels for the Lambda runtime
(python3.13 on arm64). It asks the package index, so it is not in the default run:
``make check-wheels`` runs it."""

from __future__ import annotations

from pathlib import Path
import subprocess
import sys

import pytest

from local import template

RUNTIME_PLATFORM = "manylinux2014_aarch64"
RUNTIME_PYTHON = "3.13"

REQUIREMENTS = [
    template.ROOT / "layers" / "recall" / "requirements.txt",
    *sorted((template.ROOT / "functions").glob("*/requirements.txt")),
]


@pytest.mark.parametrize(
    "requirements", REQUIREMENTS, ids=lambda path: str(path.relative_to(template.ROOT))
)
def test_requirements_resolve_to_wheels_for_the_lambda_runtime(
    requirements: Path, tmp_path: Path
) -> None:
    # Given
    assert requirements.is_file(), f"{requirements} is missing"
    # When: resolve the whole tree as Lambda's arm64 python3.13 would need it, wheels only
    result = subprocess.run(  # noqa: S603 (pip, fixed arguments)
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--only-binary=:all:",
            "--platform",
            RUNTIME_PLATFORM,
            "--python-version",
            RUNTIME_PYTHON,
            "--implementation",
            "cp",
            "--disable-pip-version-check",
            "--quiet",
            "-r",
            str(requirements),
            "-d",
            str(tmp_path),
        ],
        cwd=template.ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # Then
    assert result.returncode == 0, result.stderr
    assert list(tmp_path.glob("*.whl"))
