"""Inspect AI eval logs: each sample of a ``.eval`` zip or a ``.json`` log becomes one session.

Inspect (UKGovernmentBEIS/inspect_ai, ``src/inspect_ai/log/``) writes an eval log in two
forms with the same content:

- ``.json``: one object ``{version, status, eval, plan, results, stats, samples: [sample]}``;
- ``.eval``: a zip holding ``header.json`` (the same object without ``samples``),
  ``samples/<id>_epoch_<n>.json`` (one sample each), ``summaries.json``, ``_journal/``.

A sample is ``{id, epoch, uuid?, input, target, messages, output, scores, events,
attachments, message_pool?, events_data?: {messages, calls}, error?, ...}``. Its ``messages``
are the conversation (``ChatMessage``: ``{id?, role: system|user|assistant|tool, content: str
| [Content], tool_calls?: [{id, function, arguments}], tool_call_id?, function?, error?:
{type, message}}``); ``events`` is the transcript (``model``, ``tool``, ``sandbox``, ``state``,
``store``, ``span_begin``/``span_end``, ``score``, ``error``, ...). Long strings anywhere are
stored once in ``attachments`` and written ``attachment://<hash>``; newer logs also store the
input messages of ``model`` events once, in ``message_pool`` (later ``events_data.messages``),
and write each event's input as ``input_refs``: ``[[start, end_exclusive], ...]`` ranges into
that pool (``src/inspect_ai/log/_condense.py``, ``src/inspect_ai/event/_pool.py``).

How a sample is read (docs/log-format.md, Imported formats):

- every ``attachment://`` reference is replaced by its text;
- ``messages`` become ``message`` events, each assistant ``tool_calls`` entry a ``tool_call``
  and each ``tool`` message a ``tool_result`` (its ``error`` as ``error``, ``is_error`` and
  ``errorType``); they are placed in the transcript where the ``model`` event that produced
  an assistant message, or the ``tool`` event that produced a tool message, stands, and take
  that event's time and the model's ``meta`` (model, usage, duration);
- every other transcript event, and what a ``model`` event holds beyond its input and output
  (config, tools, the raw call), is an ``annotation`` of kind ``inspect_event`` with the event
  as ``data``; a model event's input is named by ``inputMessageIds`` (its messages are in the
  session already); a model event whose output is not in ``messages`` (a sub-agent's) keeps
  its input expanded;
- each of the sample's ``scores`` is an ``annotation`` of kind ``score``, and a sample
  ``error`` an ``error`` event.

The session's id is derived from the eval's id, the sample's id and its epoch, so the same
sample read from the ``.eval`` or the ``.json`` form of a log is the same session, and
importing either again writes nothing new.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from pathlib import Path
from typing import Any

from agenttrail.formats._common import (
    ImportedSession,
    as_object,
    content_session_id,
    import_warning,
    json_prefix,
    lead_bytes,
    load_json,
    timestamp_or_none,
    title_from,
)
from agenttrail.formats.http.recording import fail, type_name
from agenttrail.model import NewEvent, NewSession, events

__all__ = ["NAME", "read", "sniff"]

NAME = "inspect"

_ZIP_MAGIC = b"PK\x03\x04"
"""A zip's local file header (APPNOTE.TXT 4.3.7); Inspect's ``eval.py`` recorder sniffs it too."""

_ATTACHMENT = "attachment://"

MAX_UNZIPPED_BYTES = 1024 * 1024 * 1024
"""Most bytes (1 GiB) the members of one ``.eval`` zip may unpack to: the import limit bounds
the zip, not what it expands to, and a small zip can expand to far more than fits in memory."""

_SNIFF_BYTES = 64 * 1024
"""Bytes of a ``.json`` file :func:`sniff` parses: ``version`` and ``eval`` come first."""


def sniff(path: Path, data: bytes) -> bool:
    """True for a zip holding ``header.json`` or ``samples/``, or a JSON object whose first
    members are an integer ``version`` and an ``eval`` object (Inspect's log layout)."""
    if data.startswith(_ZIP_MAGIC):
        try:
            names = zipfile.ZipFile(io.BytesIO(data)).namelist()
        except (zipfile.BadZipFile, OSError, ValueError):
            return path.suffix == ".eval"  # a damaged .eval: read() names what is wrong
        return "header.json" in names or any(n.startswith("samples/") for n in names)
    if lead_bytes(data) != b"{" or b'"eval"' not in data[:_SNIFF_BYTES]:
        return False
    head = json_prefix(data, _SNIFF_BYTES)
    return (
        isinstance(head, dict)
        and type(head.get("version")) is int
        and isinstance(head.get("eval"), dict)
    )


def read(path: Path, data: bytes) -> list[ImportedSession]:
    """Read every sample of an Inspect log into one session each.

    Returns:
        One :class:`ImportedSession` per sample, in file order; ``metadata`` is ``{format,
        task, model, evalId, sampleId, epoch, sampleUuid?, target?}``.

    Raises:
        FormatError: a truncated or damaged zip, a member that is not JSON, a log without
            ``eval``, a sample or message of the wrong shape; names the file, the member and
            the field.
    """
    if data.startswith(_ZIP_MAGIC):
        header, samples = _read_zip(path, data)
    else:
        header = load_json(path, data)
        if not isinstance(header, dict) or not isinstance(header.get("eval"), dict):
            raise fail(path, "not an Inspect log: expected an object with an 'eval' object")
        listed = header.get("samples") or []
        if not isinstance(listed, list):
            raise fail(path, f"expected a list, not {type_name(listed)}", "samples")
        samples = [(f"samples[{i}]", s) for i, s in enumerate(listed)]
    return [_Sample(path, where, header, sample).read() for where, sample in samples]


def _read_zip(path: Path, data: bytes) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    """``header.json`` and the ``samples/*.json`` members of a ``.eval`` zip, in name order."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise fail(path, f"not a complete .eval zip ({e})") from None
    if sum(m.file_size for m in members) > MAX_UNZIPPED_BYTES:
        raise fail(path, f"the zip unpacks to more than {MAX_UNZIPPED_BYTES:,} bytes")
    names = [m.filename for m in members]
    if "header.json" not in names:
        raise fail(path, "not an Inspect .eval log: the zip has no header.json")
    header = _member(path, archive, "header.json")
    if not isinstance(header, dict) or not isinstance(header.get("eval"), dict):
        raise fail(path, "header.json: expected an object with an 'eval' object")
    samples = sorted(n for n in names if n.startswith("samples/") and n.endswith(".json"))
    return header, [(name, _member(path, archive, name)) for name in samples]


def _member(path: Path, archive: zipfile.ZipFile, name: str) -> Any:
    try:
        raw = archive.read(name)
    # a bad CRC (BadZipFile), a cut member (EOFError), damaged deflate data (zlib.error)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error) as e:
        raise fail(path, f"{name}: cannot unzip ({e})") from None
    return load_json(Path(f"{path}:{name}"), raw)


class _Sample:
    """Reads one sample into a session (the rules are in the module docstring)."""

    def __init__(self, path: Path, where: str, header: dict[str, Any], sample: Any) -> None:
        if not isinstance(sample, dict):
            raise fail(path, f"expected a sample object, not {type_name(sample)}", where)
        self.path = path
        self.where = where
        self.header = header
        attachments = sample.get("attachments")
        self.attachments: dict[str, Any] = attachments if isinstance(attachments, dict) else {}
        self.missing: set[str] = set()
        # the attachments are written inline where they are referenced, not kept again
        self.sample: dict[str, Any] = self.resolved(
            {k: v for k, v in sample.items() if k != "attachments"}
        )
        self.events: list[NewEvent] = []
        self.messages = self.list_of("messages")
        self.position = {m["id"]: i for i, m in enumerate(self.messages) if _is_id(m.get("id"))}
        self.done = 0
        """Messages written so far (the next one to write is ``messages[done]``)."""
        pools = as_object(self.sample.get("events_data"))
        self.pool = pools.get("messages") or self.sample.get("message_pool") or []
        if not isinstance(self.pool, list):
            raise fail(
                path, f"expected a list, not {type_name(self.pool)}", self.at("message_pool")
            )
        self.calls = pools.get("calls") or self.sample.get("call_pool") or []

    def resolved(self, value: Any) -> Any:
        """``value`` with every ``attachment://<hash>`` string replaced by its text."""
        if isinstance(value, str):
            if value.startswith(_ATTACHMENT):
                key = value[len(_ATTACHMENT) :]
                if key in self.attachments:
                    return self.attachments[key]
                self.missing.add(key)
            return value
        if isinstance(value, list):
            return [self.resolved(v) for v in value]
        if isinstance(value, dict):
            return {k: self.resolved(v) for k, v in value.items()}
        return value

    def list_of(self, name: str) -> list[dict[str, Any]]:
        value = self.sample.get(name) or []
        if not isinstance(value, list):
            raise fail(self.path, f"expected a list, not {type_name(value)}", self.at(name))
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise fail(
                    self.path, f"expected an object, not {type_name(item)}", self.at(f"{name}[{i}]")
                )
        return value

    def at(self, field: str) -> str:
        return f"{self.where}.{field}"

    def add(self, payload: dict[str, Any], time: str | None) -> None:
        self.events.append(NewEvent(payload, time, key=f"inspect:{len(self.events)}"))

    def read(self) -> ImportedSession:
        transcript = self.list_of("events")
        warnings: list[str] = []
        for number, event in enumerate(transcript):
            self.transcript_event(number, event)
        self.write_messages(len(self.messages), None)
        scores = self.sample.get("scores") or {}
        if not isinstance(scores, dict):
            raise fail(self.path, f"expected an object, not {type_name(scores)}", self.at("scores"))
        for name, score in scores.items():
            text = f"{name}: {score.get('value') if isinstance(score, dict) else score}"
            self.add({"type": "annotation", "kind": "score", "text": text, "data": score}, None)
        error = self.sample.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else str(error)
            self.add(events.error(str(message), source="inspect", data=error), None)
        if self.calls:
            data = {"callPool": self.calls}
            self.add({"type": "annotation", "kind": "inspect_event", "data": data}, None)
        if self.missing:
            names = ", ".join(sorted(self.missing))
            warnings.append(f"{self.path}: {self.where}: attachments not in the log: {names}")
            self.add(import_warning(warnings[-1]), None)
        return ImportedSession(self.session(), self.events, warnings)

    def session(self) -> NewSession:
        info = self.header["eval"]
        sample_id, epoch = self.sample.get("id"), self.sample.get("epoch")
        eval_id = info.get("eval_id") or info.get("run_id")
        identity = f"{eval_id}\0{info.get('task')}\0{info.get('created')}\0{sample_id}\0{epoch}"
        metadata: dict[str, Any] = {
            "format": NAME,
            "task": info.get("task"),
            "model": info.get("model"),
            "evalId": eval_id,
            "sampleId": sample_id,
            "epoch": epoch,
        }
        if self.sample.get("uuid"):
            metadata["sampleUuid"] = self.sample["uuid"]
        if isinstance(self.sample.get("target"), str):
            metadata["target"] = self.sample["target"]
        prompt = self.sample.get("input")
        return NewSession(
            id=content_session_id(NAME, identity.encode("utf-8", "surrogatepass")),
            title=title_from(prompt) if isinstance(prompt, str) else None,
            agent=info.get("task") if isinstance(info.get("task"), str) else None,
            started=timestamp_or_none(info.get("created")),
            metadata=metadata,
        )

    def transcript_event(self, number: int, event: dict[str, Any]) -> None:
        kind = event.get("event")
        time = timestamp_or_none(event.get("timestamp"))
        if kind == "model" and self.model_event(number, event, time):
            return
        if kind == "tool":
            index = self.tool_message(event)
            if index is not None and index >= self.done:
                done = timestamp_or_none(event.get("completed")) or time
                self.write_messages(index, time)
                self.write_message(index, done, tool_event=event)
                return
        self.add(
            {"type": "annotation", "kind": "inspect_event", "text": str(kind), "data": event}, time
        )

    def tool_message(self, event: dict[str, Any]) -> int | None:
        """The index of the tool message a tool event produced: by ``message_id``, else (logs
        before that field) the first message not written yet that answers the event's call."""
        if _is_id(event.get("message_id")):
            return self.position.get(event["message_id"])
        return next(
            (
                i
                for i in range(self.done, len(self.messages))
                if self.messages[i].get("role") == "tool"
                and self.messages[i].get("tool_call_id") == event.get("id")
            ),
            None,
        )

    def model_event(self, number: int, event: dict[str, Any], time: str | None) -> bool:
        """Write the messages up to the one this model call produced; False if it is not one
        of the sample's messages (the event is then kept whole, its input expanded)."""
        output = as_object(event.get("output"))
        choices = output.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        produced = first.get("message") if isinstance(first, dict) else None
        produced_id = produced.get("id") if isinstance(produced, dict) else None
        index = self.position.get(produced_id) if _is_id(produced_id) else None
        inputs = self.model_input(number, event)
        if index is None or index < self.done:
            whole = {k: v for k, v in event.items() if k != "input_refs"}
            whole["input"] = inputs
            data = {"type": "annotation", "kind": "inspect_event", "text": "model", "data": whole}
            self.add(data, time)
            return True
        done = timestamp_or_none(event.get("completed")) or time
        self.write_messages(index, time)
        self.write_message(index, done, model_event=event)
        rest = {k: v for k, v in event.items() if k not in ("input", "input_refs", "output")}
        rest["inputMessageIds"] = [m.get("id") for m in inputs if isinstance(m, dict)]
        self.add(
            {"type": "annotation", "kind": "inspect_event", "text": "model", "data": rest}, done
        )
        return True

    def model_input(self, number: int, event: dict[str, Any]) -> list[Any]:
        """A model event's input messages: inline, or its ``input_refs`` ranges of the pool."""
        refs = event.get("input_refs")
        if not refs:
            inline = event.get("input")
            return inline if isinstance(inline, list) else []
        where = self.at(f"events[{number}].input_refs")
        messages: list[Any] = []
        for i, ref in enumerate(refs if isinstance(refs, list) else [refs]):
            if not (isinstance(ref, list) and len(ref) == 2 and all(type(n) is int for n in ref)):
                raise fail(self.path, "expected a [start, end] pair", f"{where}[{i}]")
            start, end = ref
            if not 0 <= start <= end <= len(self.pool):
                raise fail(
                    self.path,
                    f"range {start}..{end} is outside the message pool of {len(self.pool)}",
                    f"{where}[{i}]",
                )
            messages.extend(self.pool[start:end])
        return messages

    def write_messages(self, end: int, time: str | None) -> None:
        """Write the messages before ``messages[end]`` not written yet."""
        while self.done < end:
            self.write_message(self.done, time)

    def write_message(
        self,
        index: int,
        time: str | None,
        *,
        model_event: dict[str, Any] | None = None,
        tool_event: dict[str, Any] | None = None,
    ) -> None:
        message = self.messages[index]
        self.done = index + 1
        where = self.at(f"messages[{index}]")
        role = message.get("role")
        text, blocks = _content(message.get("content"))
        extra: dict[str, Any] = {
            "clientMessageId": message.get("id"),
            "source": message.get("source"),
        }
        if blocks is not None:
            extra["blocks"] = blocks
        if role == "tool":
            self.add(self.tool_result(message, text, blocks, tool_event), time)
            return
        if role not in ("system", "user", "assistant"):
            raise fail(self.path, f"unknown role {role!r}", f"{where}.role")
        meta = _meta(model_event, message) if role == "assistant" else None
        self.add(events.message(role, text, meta=meta, **extra), time)
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise fail(self.path, f"expected a list, not {type_name(calls)}", f"{where}.tool_calls")
        for i, call in enumerate(calls):
            if not isinstance(call, dict) or not isinstance(call.get("function"), str):
                raise fail(
                    self.path,
                    "expected a tool call with a function name",
                    f"{where}.tool_calls[{i}]",
                )
            call_id = call.get("id")
            if not isinstance(call_id, str):  # Inspect gives every call an id; name the field
                call_id = f"{where}.tool_calls[{i}]"
            fields = {"parseError": call.get("parse_error"), "view": call.get("view")}
            self.add(
                events.tool_call(call_id, call["function"], call.get("arguments"), **fields), time
            )

    def tool_result(
        self,
        message: dict[str, Any],
        text: str,
        blocks: list[Any] | None,
        tool_event: dict[str, Any] | None,
    ) -> dict[str, Any]:
        error = message.get("error") or (tool_event or {}).get("error")
        fields: dict[str, Any] = {"clientMessageId": message.get("id")}
        if isinstance(error, dict):
            fields.update(is_error=True, errorType=error.get("type"))
            detail = error.get("message")
            error_text = detail if isinstance(detail, str) else str(error.get("type"))
        else:
            error_text = None
        return events.tool_result(
            message.get("tool_call_id"),
            message.get("function"),
            output=blocks if blocks is not None else text,
            error=error_text,
            **fields,
        )


def _is_id(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _content(value: Any) -> tuple[str, list[Any] | None]:
    """A message's text and, for a list of ``Content`` parts, the parts themselves."""
    if isinstance(value, str):
        return value, None
    if not isinstance(value, list):
        return "", None
    texts = [p.get("text") for p in value if isinstance(p, dict) and p.get("type") == "text"]
    return "\n".join(t for t in texts if isinstance(t, str)), value


def _meta(event: dict[str, Any] | None, message: dict[str, Any]) -> dict[str, Any] | None:
    """``meta`` of an assistant message from the model event that produced it.

    Inspect's ``ModelUsage`` (``src/inspect_ai/model/_model_output.py``) counts
    ``input_tokens`` without the cache since inspect_ai 0.3.184 (pull request #3341); logs
    written before counted some providers' cached tokens (OpenAI's) inside it. Which one a
    log did shows in
    ``total_tokens``: equal to ``input + output`` when the cache is inside ``input``.
    """
    if event is None:
        model = message.get("model")
        return events.meta(model=model) if isinstance(model, str) else None
    name = event.get("model") if isinstance(event.get("model"), str) else None
    provider, _, model = name.partition("/") if name and "/" in name else (None, "", name)
    output = as_object(event.get("output"))
    raw = output.get("usage")
    working = event.get("working_time")
    duration = working * 1000 if isinstance(working, (int, float)) else None
    model = message.get("model") or output.get("model") or model
    return events.meta(
        model=model if isinstance(model, str) else None,
        provider=provider,
        usage=_usage(raw) if isinstance(raw, dict) else None,
        usage_raw=raw if isinstance(raw, dict) else None,
        duration_ms=duration,
    )


def _usage(raw: dict[str, Any]) -> dict[str, int | None]:
    def count(name: str) -> int | None:
        value = raw.get(name)
        return value if type(value) is int else None

    given, output, total = count("input_tokens"), count("output_tokens"), count("total_tokens")
    read, write = count("input_tokens_cache_read"), count("input_tokens_cache_write")
    cached = (read or 0) + (write or 0)
    if given is not None and cached and output is not None and total == given + output:
        given = given - cached if given >= cached else None  # the cache was inside input
    return events.usage(given, output, read, write)
