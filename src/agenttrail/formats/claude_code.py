"""Placeholder: being written."""

from __future__ import annotations

from pathlib import Path

from agenttrail.formats._common import ImportedSession

NAME = "claude_code"


def sniff(path: Path, data: bytes) -> bool:
    return False


def read(path: Path, data: bytes) -> list[ImportedSession]:
    return []
