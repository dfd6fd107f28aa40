# Type stub of the C extension src/agenttrail/log/_speedups.c (its docstrings say the rest).

def first_bad_row(
    tag: bytes,
    session_id: bytes,
    prev_hash: bytes,
    rows: list[tuple[int, str, bytes, bytes, bytes | None, bytes | None]],
    first_seq: int,
    /,
) -> int: ...
def first_bad_row_v2(
    tag: bytes,
    session_id: bytes,
    prev_hash: bytes,
    rows: list[tuple[int, str, bytes, bytes, bytes | None, bytes | None]],
    first_seq: int,
    mark: bytes,
    /,
) -> tuple[int, list[int]]: ...
def chain_rows_v2(
    tag: bytes,
    session_id: bytes,
    prev_hash: bytes,
    first_seq: int,
    rows: list[tuple[str, bytes, bytes]],
    /,
) -> tuple[list[bytes], list[bytes]]: ...
