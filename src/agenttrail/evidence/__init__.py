"""Evidence beside the transcript: response envelopes and their record hashes, trace rows,
numeric claims and their reconciliation (docs/specs.md, Tool-call traces).
"""
