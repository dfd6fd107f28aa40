"""The log: the hash chain, the store and its backends, signed checkpoints, retention.

Everything that keeps events durable and provable lives here; nothing above this package
issues SQL (docs/architecture.md).
"""
