"""The magics' help is written once (``_help``): ``%loom help``, the docstrings and the README's
"Magics" section all show it, and every form it lists is one the magic handles."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from loom_nb.notebook import _help
from loom_nb.notebook.magics import LoomMagics

README = Path(__file__).resolve().parents[2] / "README.md"
FORMS = (_help.CHAT, *_help.SUBCOMMANDS)


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    sh = InteractiveShell.instance()
    sh.run_cell("%load_ext loom_nb", store_history=False)
    sh.run_cell("%config LoomMagics.display = 'text'", store_history=False)
    yield sh


def test_readme_magics_section_is_the_help_tables() -> None:
    found = re.search(
        r"<!-- magics-help:[^\n]*-->\n(.*?)\n<!-- /magics-help -->", README.read_text(), re.S
    )
    assert found is not None, "README.md lost its <!-- magics-help --> markers"
    expected = _help.readme_section(LoomMagics)
    assert found.group(1) == expected, (
        "README.md's Magics section differs from loom_nb/notebook/_help.py; "
        f"put this between its markers:\n{expected}"
    )


def test_loom_help_lists_every_form_option_and_setting(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    assert shell.run_cell("%loom help", store_history=False).success
    shown = capsys.readouterr().out
    lines = shown.splitlines()
    for form in FORMS:
        assert any(line.startswith(form.usage + "  ") for line in lines), form.usage
    assert _help.CELL_USAGE in lines
    for option in _help.CELL_OPTIONS:
        assert any(line.startswith(f"  {option.usage}  ") for line in lines), option.usage
    for name in LoomMagics.class_trait_names(config=True):
        assert any(line.startswith(f"  {name} = ") for line in lines), name
    assert "`" not in shown  # the README's code marks are dropped in plain text


def test_docstrings_show_the_same_forms_and_options() -> None:
    line_doc, cell_doc = LoomMagics.loom_line.__doc__ or "", LoomMagics.loom_cell.__doc__ or ""
    assert all(f"\n{form.usage}  " in line_doc for form in FORMS)
    assert _help.CELL_USAGE in cell_doc
    assert all(f"\n  {option.usage}  " in cell_doc for option in _help.CELL_OPTIONS)


def test_the_cell_synopsis_names_every_option() -> None:
    for option in _help.CELL_OPTIONS:
        shown = option.flags[0] if option.flags[0].startswith("-") else option.usage
        assert f"[{shown}" in _help.CELL_USAGE or f"| {shown}" in _help.CELL_USAGE, shown


def test_every_listed_subcommand_has_a_handler(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    for form in _help.SUBCOMMANDS:
        line = f"%loom {form.name}" + (" nope" if form.nargs is None and form.metavar else "")
        result = shell.run_cell(line, store_history=False)
        error = result.error_in_exec
        assert error is None or type(error).__name__ == "UsageError", (line, error)
    assert "has no handler" not in capsys.readouterr().err
