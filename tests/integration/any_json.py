"""Any JSON a client may send, for the fuzz tests that no client input is a 5xx."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def any_json(text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """Scalars, with ``text`` for strings, nested in small lists and objects."""
    return st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=12), children, max_size=4)
        ),
        max_leaves=12,
    )
