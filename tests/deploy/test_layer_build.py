"""The layer's whole build, as ``sam build`` runs it (``make build-RecallLayer``): the
requirements as arm64 cp313 wheels, the recall package, and bytecode for both. It asks the
package index, so it is not in the default run: ``make check-wheels`` runs it. This
interpreter stands in for the runtime's python3.13, so the bytecode here is its own."""

from __future__ import annotations

from pathlib import Path
import sys

from local import layer


def test_the_layer_builds_for_the_runtime_with_bytecode(tmp_path: Path) -> None:
    # When
    site = layer.build(tmp_path, "build-RecallLayer")

    # Then the runtime's own wheels are there, beside the recall package
    (core,) = site.joinpath("pydantic_core").glob("_pydantic_core.*.so")
    assert "cpython-313-aarch64" in core.name
    assert site.joinpath("recall", "api", "__init__.py").is_file()
    # And both come with their bytecode
    tag = sys.implementation.cache_tag
    assert site.joinpath("recall", "api", "__pycache__", f"__init__.{tag}.pyc").is_file()
    assert site.joinpath("pydantic", "__pycache__", f"main.{tag}.pyc").is_file()
