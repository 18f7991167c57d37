"""The tables in docs/ that mirror the code are what ``make docs`` writes from it: the
settings from ``Settings`` and the comments in ``settings.py``, the template's parameters,
environment, alarms, functions and tables, the modules' docstrings and the make targets."""

from __future__ import annotations

from pathlib import Path
import re
from typing import Literal

from pydantic import BaseModel, Field
import pytest

from local import docs
from recall.settings import Settings

SOURCE = '''
class Settings(BaseModel):
    """Docstring."""

    model_config = ConfigDict(frozen=True)

    plain_table: str = "t"

    # Limits
    first_limit: int = 1
    # What the second limit bounds,
    # over two lines | with a bar.
    second_limit: int = 2
    third_limit: int = 3

    # A comment that opens with a sentence far too long to be read as the heading of a group.
    long_comment: float = 0.5
    described: tuple[str, ...] = ("a", "b")
    provider: Literal["one", "two"] = "one"

    @property
    def not_a_field(self) -> int:
        return 0
'''


class _Model(BaseModel):
    plain_table: str = "t"
    first_limit: int = 1
    second_limit: int = 2
    third_limit: int = 3
    long_comment: float = 0.5
    described: tuple[str, ...] = Field(("a", "b"), description="Given in Field.")
    provider: Literal["one", "two"] = "one"


def _rows() -> dict[str, docs.Row]:
    return {row.field: row for row in docs.settings_rows(SOURCE, _Model)}


def test_the_committed_tables_are_what_make_docs_writes() -> None:
    # Given every page that holds a generated block, as make docs would write it
    stale = [
        str(path.relative_to(docs.ROOT))
        for path, text in docs.rendered().items()
        if path.read_text() != text
    ]
    # Then none differs from the committed page (run make docs, then commit)
    assert stale == []


def test_every_setting_has_a_row_with_its_variable_and_default() -> None:
    # Given the settings table
    table = docs.settings_table()
    # Then each field is there with its environment variable and its default
    for name, field in Settings.model_fields.items():
        default = docs._env_value(field.default)
        cell = f"`{default}`" if default else "(empty)"
        assert f"| `{name.upper()}` | `{name}` | {cell} |" in table, name


def test_a_fields_description_is_the_comment_right_above_it_and_no_other() -> None:
    # When the rows are read from a source with comments above some fields
    rows = _rows()
    # Then the comment above a field describes it, its lines joined
    assert rows["second_limit"].description == (
        "What the second limit bounds, over two lines | with a bar."
    )
    # And its row is safe inside a table
    table = docs.settings_table(list(rows.values()))
    assert "over two lines \\| with a bar. |" in table
    # And the field after it, and a field with no comment, have none
    assert rows["third_limit"].description == ""
    assert rows["plain_table"].description == ""


def test_a_short_first_sentence_after_a_blank_line_heads_a_group() -> None:
    rows = _rows()
    # Then "# Limits" opens a group and describes no field
    assert rows["first_limit"].heading == "Limits"
    assert rows["first_limit"].description == ""
    # And a block whose first sentence is long is a description, not a heading
    assert rows["long_comment"].heading is None
    assert rows["long_comment"].description.startswith("A comment that opens")
    # And only the first field of a group carries its heading
    assert rows["second_limit"].heading is None


def test_a_field_description_is_used_and_a_literal_names_its_values() -> None:
    rows = _rows()
    assert rows["described"].description == "Given in Field."
    assert rows["provider"].description == "One of `one`, `two`."


def test_defaults_are_written_as_the_environment_takes_them() -> None:
    rows = _rows()
    assert rows["described"].default == "a,b"
    assert rows["long_comment"].default == "0.5"
    assert "not_a_field" not in rows


def test_a_page_without_its_markers_is_an_error_not_an_append() -> None:
    with pytest.raises(ValueError, match="generated:settings"):
        docs.with_block("# A page\n", "settings", "| table |")


def test_a_block_is_replaced_between_its_markers_only() -> None:
    page = "before\n<!-- generated:x -->\nold\n<!-- /generated:x -->\nafter\n"
    written = docs.with_block(page, "x", "new")
    assert written.startswith("before\n<!-- generated:x -->\n")
    assert "\nnew\n<!-- /generated:x -->\nafter\n" in written
    assert "old" not in written
    assert docs.with_block(written, "x", "new") == written


def test_every_module_is_in_the_module_table() -> None:
    table = docs.modules_table()
    for root in docs.MODULE_ROOTS:
        for path in Path(docs.ROOT, root).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            assert f"| `{path.relative_to(docs.ROOT / root).as_posix()}` |" in table, path


def test_a_module_summary_is_its_docstrings_first_sentence() -> None:
    assert docs.summary_of("One thing, e.g. this. Then more.\n\nNext.") == "One thing, e.g. this."
    assert docs.summary_of("Does this:\n\n- a list") == "Does this."
    assert docs.summary_of("Uses ``code`` | bars.") == "Uses `code` \\| bars."
    assert docs.summary_of(None) == ""


def test_every_make_target_with_help_text_is_listed() -> None:
    makefile = (docs.ROOT / "Makefile").read_text()
    table = docs.make_targets()
    targets = re.findall(r"^([a-z-]+):.*?## ", makefile, re.MULTILINE)
    assert "docs" in targets
    for target in targets:
        assert f"| `make {target}` |" in table, target
