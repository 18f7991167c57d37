"""What a function's module does around its imports.

Everything an import makes (modules, classes, pydantic's validators, botocore's data)
lives as long as the function's container, yet the collector walks it again and again
while the import goes on: a quarter to two fifths of a handler's import. So each ``app.py``
disables the collector before its first import and calls ``loaded()`` at its end."""

from __future__ import annotations

import gc


def loaded() -> None:
    """Freeze what the import made out of every later collection (it is never garbage)
    and let the collector run again for what requests make."""
    gc.freeze()
    gc.enable()
