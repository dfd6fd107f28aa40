"""Ways in: the recorder a live agent writes with, and the importer of files.

Both build events of :mod:`agenttrail.model` and append them through the store
(docs/architecture.md).
"""
