"""Evidence beside the transcript: response envelopes and their record hashes, trace rows,
numeric claims and their reconciliation, and the one audit verdict on a session's log
(:mod:`.audit`) (docs/specs.md, Tool-call traces; docs/evidence.md).

Everything here reads the log (``agenttrail.model.LogReader``); trace rows are written by
:mod:`agenttrail.ingest.traces`.
"""
