"""Images and documents: stored whole, named (never base64) by every view, replayed where the
target API takes them, noted where it does not.

The inputs are small recordings written here: no file under ../shared/realdata holds an image,
a document or a file part (checked with grep for ``"type": "image"``, ``image_url``,
``input_image``, ``input_file``, ``document`` and ``base64``), so the real files cannot test
this. The expected sizes and digests are computed here from the bytes, with hashlib.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

from agenttrail.formats.fountain import fountain_from_events
from agenttrail.log.store import LogStore
from agenttrail.model import Event, NewEvent, NewSession, events
from agenttrail.replay import to_anthropic, to_openai_chat, to_openai_responses, validate
from agenttrail.views.transcript import IndexCache
from tests.formats._recordings import import_events
from tests.formats.test_block_order import anthropic_response, recording
from tests.views.test_terminal import _rows as terminal_rows

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 48
PNG_B64 = base64.b64encode(PNG).decode()
PNG_LABEL = f"image/png, {len(PNG):,} bytes, sha256 {hashlib.sha256(PNG).hexdigest()[:8]}"
PDF = b"%PDF-1.4\n" + b"0" * 2000
PDF_B64 = base64.b64encode(PDF).decode()
PDF_LABEL = (
    f"application/pdf report, {len(PDF):,} bytes, sha256 {hashlib.sha256(PDF).hexdigest()[:8]}"
)
# What a person is shown (views.units.size_text, IEC units): 12,296 bytes / 1,024 = 12.008,
# 2,009 / 1,024 = 1.962, each to one decimal with ".0" dropped. Replay keeps the exact form.
assert (len(PNG), len(PDF)) == (12_296, 2_009)
PNG_SHOWN = PNG_LABEL.replace("12,296 bytes", "12 KiB")
PDF_SHOWN = PDF_LABEL.replace("2,009 bytes", "2 KiB")

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}
DOCUMENT = {
    "type": "document",
    "title": "report",
    "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64},
}
ASK = {
    "role": "user",
    "content": [{"type": "text", "text": "what is in these?"}, IMAGE, DOCUMENT],
}
CALL = {"type": "tool_use", "id": "toolu_s", "name": "screenshot", "input": {}}
SHOT = {
    "role": "user",
    "content": [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_s",
            "content": [{"type": "text", "text": "here"}, IMAGE],
        }
    ],
}
SECOND = {
    "model": "m",
    "max_tokens": 9,
    "messages": [ASK, {"role": "assistant", "content": [CALL]}, SHOT],
}


PAIRS = [
    ({"model": "m", "max_tokens": 9, "messages": [ASK]}, anthropic_response("msg_1", [CALL])),
    (SECOND, anthropic_response("msg_2", [{"type": "text", "text": "a chart"}])),
]


def _logged(store: LogStore, tmp_path: Path) -> list[Event]:
    url = "https://api.anthropic.com/v1/messages"
    return import_events(store, recording(tmp_path / "images.json", url, PAIRS))


def test_the_log_keeps_images_and_documents_whole(store: LogStore, tmp_path: Path) -> None:
    logged = _logged(store, tmp_path)
    [ask] = [e for e in logged if e.type == "message" and e.payload.get("role") == "user"]
    assert ask.payload["blocks"] == ASK["content"]
    [result] = [e for e in logged if e.type == "tool_result"]
    assert result.payload["output"] == SHOT["content"][0]["content"]


def test_show_names_each_attachment_and_never_prints_base64(
    store: LogStore, tmp_path: Path
) -> None:
    logged = _logged(store, tmp_path)
    rows = terminal_rows(store, logged[0].session_id, full=True)
    text = "\n".join(cell for row in rows for cell in row)
    assert PNG_B64[:40] not in text and PDF_B64[:40] not in text
    ask = next(r for r in rows if r[3] == "user")
    assert ask[4].splitlines() == [
        "what is in these?",
        f"[attachment: {PNG_SHOWN}]",
        f"[attachment: {PDF_SHOWN}]",
    ]
    tool = next(r for r in rows if r[3] == "tool")
    assert tool[4].splitlines()[1:] == ["here", f"[attachment: {PNG_SHOWN}]"]


def test_viewer_rows_name_attachments_and_give_an_image_only_when_full(
    store: LogStore, tmp_path: Path
) -> None:
    logged = _logged(store, tmp_path)
    sid = logged[0].session_id
    for full in (False, True):
        page = IndexCache().page(store, sid, after_seq=0, limit=100, full=full)
        ask = next(r for r in page.rows if r.get("role") == "user")
        image, document = ask["attachments"]
        assert (image["kind"], image["size"], image["sha256"]) == (
            "image",
            len(PNG),
            hashlib.sha256(PNG).hexdigest(),
        )
        assert document["label"] == PDF_SHOWN and document["data_url"] is None
        assert image["data_url"] == (f"data:image/png;base64,{PNG_B64}" if full else None)
        tool = next(r for r in page.rows if r["view"] == "tool")
        assert tool["result_text"] == "here"
        assert [a["label"] for a in tool["result_attachments"]] == [PNG_SHOWN]
        assert PNG_B64[:40] not in json.dumps([r for r in page.rows if not full])


def test_fountain_writes_an_attachment_note(store: LogStore, tmp_path: Path) -> None:
    logged = _logged(store, tmp_path)
    text = fountain_from_events(store.get_session(logged[0].session_id), logged)
    assert PNG_B64[:40] not in text and PDF_B64[:40] not in text
    lines = [line for line in text.splitlines() if line.strip()]
    start = lines.index("what is in these?")
    assert lines[start + 1 : start + 3] == [
        f"[[attachment: {PNG_SHOWN}]]",
        f"[[attachment: {PDF_SHOWN}]]",
    ]
    tool = next(i for i, line in enumerate(lines) if line.startswith("[[tool: screenshot"))
    assert lines[tool + 1] == f"[[attachment: {PNG_SHOWN}]]"


def test_anthropic_replay_rebuilds_the_request_with_its_images(
    store: LogStore, tmp_path: Path
) -> None:
    logged = _logged(store, tmp_path)
    upto = next(e.seq for e in logged if e.payload.get("messageId") == "msg_2") - 1
    got = to_anthropic(logged, upto)
    assert got.messages == SECOND["messages"]
    assert validate(got.messages, "anthropic") == []


def test_chat_replay_sends_image_and_pdf_parts_and_names_a_tool_image(
    store: LogStore, tmp_path: Path
) -> None:
    got = to_openai_chat(_logged(store, tmp_path))
    assert got.messages[0]["content"] == [
        {"type": "text", "text": "what is in these?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
        {
            "type": "file",
            "file": {"file_data": f"data:application/pdf;base64,{PDF_B64}", "filename": "report"},
        },
    ]
    tool = next(m for m in got.messages if m["role"] == "tool")
    assert tool["content"] == [
        {"type": "text", "text": "here"},
        {
            "type": "text",
            "text": "[agenttrail] 1 attachment(s) not sent (a Chat Completions tool message "
            f"takes text only): {PNG_LABEL}",
        },
    ]
    assert PNG_B64[:40] not in json.dumps(tool)
    assert "block_dropped" in [n.kind for n in got.notes]
    assert validate(got.messages, "openai") == []


def test_responses_replay_sends_input_image_and_file_and_an_image_output(
    store: LogStore, tmp_path: Path
) -> None:
    got = to_openai_responses(_logged(store, tmp_path))
    image = {
        "type": "input_image",
        "image_url": f"data:image/png;base64,{PNG_B64}",
        "detail": "auto",
    }
    assert got.messages[0]["content"] == [
        {"type": "input_text", "text": "what is in these?"},
        image,
        {
            "type": "input_file",
            "file_data": f"data:application/pdf;base64,{PDF_B64}",
            "filename": "report",
        },
    ]
    output = next(m for m in got.messages if m.get("type") == "function_call_output")
    assert output["output"] == [{"type": "input_text", "text": "here"}, image]
    assert [n.kind for n in got.notes if n.kind == "block_dropped"] == []
    assert validate(got.messages, "responses") == []


def test_openai_image_and_file_parts_are_kept_and_carried_across(
    store: LogStore, tmp_path: Path
) -> None:
    parts = [
        {"type": "text", "text": "and this?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
        {
            "type": "file",
            "file": {"file_data": f"data:application/pdf;base64,{PDF_B64}", "filename": "report"},
        },
    ]
    body = {"model": "m", "messages": [{"role": "user", "content": parts}]}
    answer = {
        "object": "chat.completion",
        "id": "c1",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
        ],
    }
    url = "https://api.openai.com/v1/chat/completions"
    logged = import_events(store, recording(tmp_path / "chat.json", url, [(body, answer)]))
    assert logged[0].payload["blocks"] == parts
    assert to_openai_chat(logged).messages[0]["content"] == parts
    rows = terminal_rows(store, logged[0].session_id)
    assert rows[0][4].splitlines() == [
        "and this?",
        f"[attachment: {PNG_SHOWN}]",
        f"[attachment: {PDF_SHOWN}]",
    ]
    responses = to_openai_responses(logged).messages[0]["content"]
    assert [p["type"] for p in responses] == ["input_text", "input_image", "input_file"]
    anthropic = to_anthropic(logged)
    assert anthropic.messages[0]["content"] == [
        {"type": "text", "text": "and this?"},
        IMAGE,
        {"type": "document", "source": DOCUMENT["source"]},
    ]
    assert validate(anthropic.messages, "anthropic") == []


def test_a_responses_tool_image_goes_to_anthropic_as_an_image_block(store: LogStore) -> None:
    store.create_session(NewSession("r", "t", "a", "u"))
    output = [
        {"type": "input_text", "text": "here"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG_B64}", "detail": "auto"},
        {"type": "input_file", "file_id": "file-abc"},
    ]
    store.append_batch(
        "r",
        [
            NewEvent(events.message("user", "shoot")),
            NewEvent(events.tool_call("call_1", "screenshot", {})),
            NewEvent(events.tool_result("call_1", output=output)),
        ],
    )
    logged = list(store.read("r"))
    got = to_anthropic(logged)
    assert got.messages[2]["content"][0]["content"] == [{"type": "text", "text": "here"}, IMAGE]
    assert [str(n) for n in got.notes] == [
        "seq 3: 1 content block(s) (input_file) not sent: no Anthropic tool_result equivalent"
    ]
    assert validate(got.messages, "anthropic") == []
    responses = to_openai_responses(logged)
    assert responses.messages[2]["output"] == output  # the recorded parts, as they were


def test_a_claude_code_tool_image_is_named_not_dumped(store: LogStore, tmp_path: Path) -> None:
    def line(n: int, kind: str, content: Any) -> str:
        return json.dumps(
            {
                "type": kind,
                "uuid": f"u{n}",
                "sessionId": "cc",
                "timestamp": f"2026-01-01T10:00:0{n}.000Z",
                "message": {"role": kind, "content": content, "id": f"m{n}"},
            }
        )

    result = {"type": "tool_result", "tool_use_id": "toolu_r", "content": [IMAGE]}
    path = tmp_path / "cc.jsonl"
    path.write_text(
        "\n".join(
            [
                line(1, "user", "read the screenshot"),
                line(
                    2,
                    "assistant",
                    [
                        {
                            "type": "tool_use",
                            "id": "toolu_r",
                            "name": "Read",
                            "input": {"file_path": "s.png"},
                        }
                    ],
                ),
                line(3, "user", [result]),
            ]
        ),
        encoding="utf-8",
    )
    logged = import_events(store, path)
    rows = terminal_rows(store, logged[0].session_id)
    tool = next(r for r in rows if r[3] == "tool")
    assert tool[4].splitlines()[1:] == [f"[attachment: {PNG_SHOWN}]"]
    assert "base64" not in tool[4]
