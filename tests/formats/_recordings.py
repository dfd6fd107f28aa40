"""The third-party recordings that the import and replay tests share, and how a test imports one.

Read in place from ``../shared/realdata`` (never copied into the repository); each constant
cites its ``SOURCES.md`` row:

- ``otel-openai-v2-cassettes/*.yaml``: SOURCES.md rows "otel-openai-v2-cassettes/<file> |
  open-telemetry/opentelemetry-python-contrib | instrumentation-genai/
  opentelemetry-instrumentation-openai-v2/tests/cassettes/<file> | 466ae4c00de7 (762fb1aa93a5,
  pull request #4042, for test_responses_with_function_call_output.yaml) | Apache-2.0", VCR
  cassettes of real HTTP traffic with api.openai.com.
- ``anthropic-sdk-python/<uuid>.json``: SOURCES.md rows "anthropic-sdk-python/<uuid>.json |
  anthropics/anthropic-sdk-python | tests/lib/tools/__inline_snapshot__/test_runners/
  TestSyncRunTools/<uuid>.json | 009b035305e0 | MIT", request/response pairs recorded against
  the real Messages API.
- ``claude-code-spotter/*.jsonl``: SOURCES.md rows "claude-code-spotter/<file> | marot/spotter |
  test/fixtures/transcripts/... | 8cc42b0bd39d | MIT", real Claude Code transcripts.
- ``toolbench/10_ChatGPT_DFS_woFilter_w2.json``: SOURCES.md row "toolbench/
  10_ChatGPT_DFS_woFilter_w2.json | OpenBMB/ToolBench | data_example/answer/G1_answer/
  10_ChatGPT_DFS_woFilter_w2.json | d56fdd89faf8 | 86e25c56f825 | Apache-2.0 | 22570", a
  ToolBench answer tree whose ``answer_generation.train_messages`` use the legacy
  ``function_call`` / role ``function`` format.
- ``inspect_ai/*``: SOURCES.md rows "inspect_ai/<file> | UKGovernmentBEIS/inspect_ai |
  tests/analysis/test_logs/2025-05-12T20-27-36-04-00_browser.json, tests/log/test_eval_log/
  log_message_deduplication.eval, tests/log/test_eval_log/log_tool_call_error.json |
  499e6152e7b8 | MIT", Inspect AI eval logs (JSON, and the zip form with a message pool).
- ``langfuse-framework-traces/*.json``: SOURCES.md rows "langfuse-framework-traces/<file> |
  langfuse/langfuse | packages/shared/scripts/seeder/utils/framework-traces/<file> |
  62751446149b | MIT (Expat; outside ee/)", Langfuse trace exports (trace + observations).
"""

from __future__ import annotations

from pathlib import Path

from agenttrail.ingest.importer import import_paths
from agenttrail.log.store import LogStore
from agenttrail.model import Event
from tests.conftest import REALDATA

__all__ = [
    "ANTHROPIC_SDK",
    "BAD_HISTORY",
    "CASSETTES",
    "CLAUDE_CODE_SPOTTER",
    "INSPECT_BROWSER",
    "INSPECT_DEDUPLICATION",
    "INSPECT_TOOL_ERRORS",
    "LANGFUSE",
    "PROGRAMMATIC",
    "RESPONSES_OUTPUT",
    "SSE",
    "TOOLBENCH",
    "TOOL_ERROR",
    "import_events",
]

CASSETTES = REALDATA / "otel-openai-v2-cassettes"
RESPONSES_OUTPUT = CASSETTES / "test_responses_with_function_call_output.yaml"
"""Three Responses interactions: a call, the first call recorded again, and a request that
continues response 2 with ``previous_response_id``."""

ANTHROPIC_SDK = REALDATA / "anthropic-sdk-python"
# SOURCES.md: "anthropic-sdk-python/10e53c1d-51be-4c64-b5bf-99adb3fa4719.json |
#   anthropics/anthropic-sdk-python | tests/lib/tools/__inline_snapshot__/test_runners/
#   TestSyncRunTools/10e53c1d-... | 009b035305e0 | c3017a227c67 | MIT | 8009"
TOOL_ERROR = ANTHROPIC_SDK / "10e53c1d-51be-4c64-b5bf-99adb3fa4719.json"
# SOURCES.md: "anthropic-sdk-python/092be1de-d3f8-4c22-a4ea-a7ad54689836.json | (same folder) |
#   009b035305e0 | 75f2e082fcdb | MIT | 11567"
PROGRAMMATIC = ANTHROPIC_SDK / "092be1de-d3f8-4c22-a4ea-a7ad54689836.json"
# SOURCES.md: "anthropic-sdk-python/f59a9391-643b-422c-96dc-1f28bc7ea4d7.json | (same folder) |
#   009b035305e0 | c3017a227c67 | MIT | 7023"
BAD_HISTORY = ANTHROPIC_SDK / "f59a9391-643b-422c-96dc-1f28bc7ea4d7.json"
"""Its second request drops the assistant's ``tool_use`` message; the API rejected it with
HTTP 400."""
# SOURCES.md: "anthropic-sdk-python/tool_use_response.txt | anthropics/anthropic-sdk-python |
#   tests/lib/streaming/fixtures/tool_use_response.txt | 009b035305e0 | 4de03c2ddc24 | MIT | 2000"
SSE = ANTHROPIC_SDK / "tool_use_response.txt"

CLAUDE_CODE_SPOTTER = REALDATA / "claude-code-spotter"

TOOLBENCH = REALDATA / "toolbench" / "10_ChatGPT_DFS_woFilter_w2.json"
"""A ToolBench answer tree: three ``train_messages`` lists (3, 5, 7 messages), each a prefix of
the next, with two answered legacy calls and a final ``Finish`` call."""

INSPECT = REALDATA / "inspect_ai"
INSPECT_BROWSER = INSPECT / "2025-05-12T20-27-36-04-00_browser.json"
"""A JSON log (version 2): one sample, gpt-4o-mini driving a browser tool, its transcript."""
INSPECT_DEDUPLICATION = INSPECT / "log_message_deduplication.eval"
"""A ``.eval`` zip: one sample whose model events name their input by ``input_refs`` ranges
into ``message_pool``."""
INSPECT_TOOL_ERRORS = INSPECT / "log_tool_call_error.json"
"""A hand-made JSON log: 11 ``tool`` messages with errors and no assistant message."""

LANGFUSE = REALDATA / "langfuse-framework-traces"


def import_events(store: LogStore, path: Path) -> list[Event]:
    """Import one file into ``store`` (as ``agenttrail import`` does) and read its session
    back: the events as stored."""
    [report] = import_paths(store, [path])
    return list(store.read(report.session_id))
