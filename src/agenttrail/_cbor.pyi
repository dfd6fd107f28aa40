# Type stub of the C extension src/agenttrail/_cbor.c (its docstrings say the rest).
from typing import Any

def encode(payload: Any, max_depth: int, /) -> bytes | None: ...
