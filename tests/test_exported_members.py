"""The public surface changes only on purpose (httpx ``tests/test_exported_members.py``)."""

import agenttrail


def test_exported_members() -> None:
    assert sorted(agenttrail.__all__) == sorted(
        [
            "Actor",
            "AgentTrailError",
            "Anomaly",
            "AppendOnlyViolation",
            "Appended",
            "AsyncRecorder",
            "AsyncTurn",
            "ChainBroken",
            "Event",
            "FormatError",
            "ImportReport",
            "InputError",
            "LogStore",
            "NewEvent",
            "NewSession",
            "Pairing",
            "PayloadError",
            "PayloadTooLarge",
            "Recorder",
            "RedactRules",
            "Session",
            "SessionExists",
            "SessionNotFound",
            "SessionVerdict",
            "StoreError",
            "ToolCall",
            "Turn",
            "__version__",
            "event_actor",
            "import_paths",
            "instrument",
            "meta",
            "open_log",
            "open_store",
            "pair_tool_calls",
            "session",
            "tool",
            "tool_status",
            "usage",
            "verify",
        ]
    )
    for name in agenttrail.__all__:
        assert hasattr(agenttrail, name), name
