"""The progress bar of a long import (``agenttrail.cli._progress``), drawn on a terminal."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from agenttrail.cli import _progress


def test_the_bar_shows_a_files_name_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the bar's text read a file's name as Rich markup with emoji codes ("[bold]" bold,
    # ":smile:" an emoji) and wrote its ESC to the terminal
    drawn = io.StringIO()
    terminal = Console(file=drawn, force_terminal=True, width=120, emoji=False, highlight=False)
    monkeypatch.setattr(_progress, "err", terminal)
    paths = [tmp_path / f"{n}.jsonl" for n in range(_progress.MIN_FILES)]
    for path in paths:
        path.write_text("{}\n", encoding="utf-8")
    with _progress.import_progress(paths) as progress:
        progress.read(Path("a[bold]b:smile:c\x1b[7md.jsonl"))
    assert "reading a[bold]b:smile:c\\x1b[7md.jsonl " in drawn.getvalue()
