"""A handler's import runs no garbage collection (every object it makes lives as long as
the container), then leaves the collector on for requests, with what it made frozen out of
later collections. Checked in a fresh interpreter per handler, as a cold start is."""

from __future__ import annotations

import pytest

from tests.unit.test_handlers_import_only_what_they_use import HANDLERS, fresh, importing

# Collections while the module's body runs, from its `import gc` to its handler: the
# interpreter may collect while it compiles the module, before any of its code runs.
COUNTING = """import gc, sys
collections = []
def loading():
    module = sys.modules.get("app")
    return module is not None and hasattr(module, "gc") and not hasattr(module, "lambda_handler")
gc.callbacks.append(lambda phase, info: phase == "start" and loading() and collections.append(1))
"""


@pytest.mark.parametrize("handler", HANDLERS)
def test_a_handler_loads_without_a_collection_and_collects_afterwards(handler: str) -> None:
    # When
    seen = fresh(
        COUNTING + importing(handler),
        '{"during": len(collections), "enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}',
    )
    # Then
    assert seen["during"] == 0
    assert seen["enabled"] is True
    assert seen["frozen"] > 10_000
