"""Clients that misbehave on the wire, for the server and fault tests: a WebSocket client on a
plain socket that can vanish without a close frame, and a request whose body streams from a
generator and stops as soon as the server answers (httpx sends the whole body before it reads
the response)."""

from __future__ import annotations

import json
import select
import socket
import struct
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.typing import Origin
from websockets.uri import parse_uri

__all__ = ["RawFeed", "Reply", "stream_request"]


class RawFeed:
    """A live-feed subscriber on a plain socket, driven by websockets' Sans-I/O protocol, so
    that :meth:`drop` can leave the way a crashed client or a lost network does: a TCP reset,
    no close frame.

    Args:
        url: the ``ws://`` URL of the feed, with its ``token`` and ``afterSeq``.
        origin: the ``Origin`` header a browser would send; none by default.
    """

    def __init__(self, url: str, *, origin: str | None = None) -> None:
        self.protocol = ClientProtocol(parse_uri(url), origin=Origin(origin) if origin else None)
        host, port = self.protocol.uri.host, self.protocol.uri.port
        self.sock = socket.create_connection((host, port), timeout=30)
        self.protocol.send_request(self.protocol.connect())
        self.response: Response | None = None
        self.close_code: int | None = None
        self._messages: deque[dict[str, Any]] = deque()
        try:
            self._flush()
        except OSError:
            self.sock.close()
            raise

    def __enter__(self) -> RawFeed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()  # a no-op after drop()

    def _flush(self) -> None:
        for data in self.protocol.data_to_send():
            if data:  # b"" means "half-close"; we never do
                self.sock.sendall(data)

    def recv(self) -> dict[str, Any] | None:
        """The next message of the feed, or ``None`` once the server closed (then
        :attr:`close_code` says why)."""
        while not self._messages:
            data = self.sock.recv(65536)
            if not data:
                return None
            self.protocol.receive_data(data)
            for event in self.protocol.events_received():
                if isinstance(event, Response):
                    self.response = event
                elif isinstance(event, Frame) and event.opcode is Opcode.TEXT:
                    assert event.fin, "the feed sends each message in one frame"
                    self._messages.append(json.loads(event.data))
                elif isinstance(event, Frame) and event.opcode is Opcode.CLOSE:
                    self.close_code = (
                        self.protocol.close_rcvd.code if self.protocol.close_rcvd else None
                    )
            self._flush()  # pongs and the close reply
            if self.close_code is not None and not self._messages:
                return None
        return self._messages.popleft()

    def drop(self, *, reset: bool = True, linger_s: float = 0.0) -> None:
        """Vanish without a close frame: with a TCP reset (SO_LINGER 0), or with a FIN, then
        ``linger_s`` later a close with the feed's bytes unread (the kernel answers what the
        server still sends with a reset)."""
        if reset:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            self.sock.shutdown(socket.SHUT_WR)
            time.sleep(linger_s)
        self.sock.close()


@dataclass(frozen=True)
class Reply:
    """What a server answered to :func:`stream_request`."""

    status: int
    headers: dict[str, str]
    """Names in lower case."""
    body: bytes
    sent: int
    """Body bytes sent before the answer came (or the server closed)."""

    def json(self) -> Any:
        return json.loads(self.body)


def stream_request(
    url: str,
    path: str,
    chunks: Iterable[bytes],
    *,
    headers: dict[str, str] | None = None,
    length: int | None = None,
    timeout: float = 30,
) -> Reply:
    """POST a body from ``chunks`` (``Content-Length: length``, or chunked when ``None``),
    stopping as soon as the server answers or closes; then read the whole answer.

    Raises:
        ConnectionError: the server closed without an answer.
    """
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/json"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    lines.append(
        f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    )
    sent = 0
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        try:
            for chunk in chunks:
                if select.select([sock], [], [], 0)[0]:
                    break  # the server answered (or closed) before the whole body
                framed = chunk if length is not None else b"%x\r\n%s\r\n" % (len(chunk), chunk)
                sock.sendall(framed)
                sent += len(chunk)
            else:
                if length is None:
                    sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed on us mid-body: the answer, if any, is already in our buffer
        raw = b""
        try:
            while b"\r\n\r\n" not in raw or len(raw) < _answer_size(raw):
                data = sock.recv(65536)
                if not data:
                    break
                raw += data
        except ConnectionResetError:
            pass
    if b"\r\n\r\n" not in raw:
        raise ConnectionError(f"no answer after {sent:,} body bytes (got {raw[:80]!r})")
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in header_lines)
    return Reply(int(status_line.split()[1]), {k.lower(): v for k, v in fields.items()}, body, sent)


def _answer_size(raw: bytes) -> int:
    """Bytes of a whole answer whose head is in ``raw`` (head, blank line, Content-Length)."""
    head, _, _ = raw.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(head) + 4 + int(value)
    return len(raw) + 1  # no length: read to the close
