# Type stub of the C extension src/agenttrail/_speedups.c (its docstrings say the rest).

def first_bad_row(
    tag: bytes,
    session_id: bytes,
    prev_hash: bytes,
    rows: list[tuple[int, str, bytes, bytes]],
    first_seq: int,
    /,
) -> int: ...
