"""ToolBench answer files: the conversation the search settled on, read as OpenAI messages.

ToolBench (OpenBMB/ToolBench, ``data_example/answer/<group>/<id>_<method>.json``) keeps, for
each query, the search tree of a tool-using model and, under ``answer_generation``, the
training conversation of the answer it chose::

    {"answer_generation": {"query": str, "finish_type": str, "final_answer": str,
                           "function": [tool schema, ...],
                           "train_messages": [[message, ...], [message, ...], ...], ...},
     "tree": {...}, "compare_candidates": [...], "forward_args": {...}, "win": bool}

``train_messages`` lists the requests of that chain, each extending the one before, so the
last list is the complete conversation. It alone is read, as an OpenAI Chat Completions
message list (:func:`agenttrail.formats.openai.read_messages`): legacy ``function_call`` calls
and role ``function`` results, paired by that protocol's rule (docs/log-format.md, Payload
types). An earlier list that is not a prefix of the last is named in a warning. The other
fields of ``answer_generation`` are kept in the session's metadata under their own names
(:data:`KEPT`): the tool schemas the model was given (``function``), the query, how the search
finished and what it cost (``query_count``, ``total_tokens``: the whole search's, not a
message's). The tree's other branches and the candidates are not imported.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from agenttrail.formats._common import ImportedSession, load_json
from agenttrail.formats.http.recording import fail, type_name
from agenttrail.formats.openai import read_messages

__all__ = ["KEPT", "NAME", "read", "sniff"]

NAME = "toolbench"

_MARKER = b'"answer_generation"'

KEPT = ("query", "function", "finish_type", "query_count", "total_tokens", "valid_data", "chain")
"""The fields of ``answer_generation`` kept in the session's metadata, under their own names,
when the file has them (``final_answer`` is the ``Finish`` call's argument, an event)."""

_SNIFF_PARSE_LIMIT = 16 * 1024 * 1024
"""Largest file (bytes) :func:`sniff` parses to check its shape; answer files are tens of
kilobytes. A larger one is left to ``--format toolbench``."""


def sniff(path: Path, data: bytes) -> bool:
    """True for a JSON object whose ``answer_generation.train_messages`` is a non-empty list of
    non-empty message lists (objects with a ``role``): nothing else has that shape."""
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    if not body.lstrip().startswith(b"{") or _MARKER not in body or len(body) > _SNIFF_PARSE_LIMIT:
        return False
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return False
    answer = doc.get("answer_generation") if isinstance(doc, dict) else None
    lists = answer.get("train_messages") if isinstance(answer, dict) else None
    return (
        isinstance(lists, list)
        and bool(lists)
        and all(
            isinstance(m, list) and m and all(isinstance(x, dict) and "role" in x for x in m)
            for m in lists
        )
    )


def read(path: Path, data: bytes) -> list[ImportedSession]:
    """Read the last ``train_messages`` conversation of a ToolBench answer file into one session.

    Returns:
        One :class:`ImportedSession` with ``id`` ``None`` (the registry derives one from the
        bytes), ``metadata`` ``{format, source}`` and the fields :data:`KEPT` the file has,
        and a warning for each earlier conversation that the last does not extend.

    Raises:
        FormatError: not JSON, no ``answer_generation.train_messages`` list of message lists,
            or a message of the wrong shape; names the file and the field.
    """
    doc = load_json(path, data)
    if not isinstance(doc, dict):
        raise fail(path, f"expected a ToolBench answer file (an object), not {type_name(doc)}")
    where = "answer_generation"
    if where not in doc:
        raise fail(path, "missing: not a ToolBench answer file", where)
    answer = doc[where]
    if not isinstance(answer, dict):
        raise fail(path, f"expected an object, not {type_name(answer)}", where)
    where += ".train_messages"
    lists = answer.get("train_messages")
    if not isinstance(lists, list) or not lists:
        raise fail(
            path, f"expected a non-empty list of message lists, not {type_name(lists)}", where
        )
    for i, messages in enumerate(lists):
        if not isinstance(messages, list):
            raise fail(path, f"expected a message list, not {type_name(messages)}", f"{where}[{i}]")
    last = len(lists) - 1
    session = read_messages(path, lists[last], f"{where}[{last}]")
    warnings = [
        f"{path}: {where}[{i}] is not a prefix of {where}[{last}]; only the last is imported"
        for i, messages in enumerate(lists[:last])
        if lists[last][: len(messages)] != messages
    ]
    metadata: dict[str, Any] = {**session.session.metadata, "format": NAME}
    metadata.update((name, answer[name]) for name in KEPT if name in answer)
    new = replace(session.session, metadata=metadata)
    return [replace(session, session=new, warnings=[*session.warnings, *warnings])]
