"""Clients that misbehave on the wire, for the fault tests: a WebSocket client on a plain socket
that can vanish without a close frame, and a request body that streams from a generator."""

from __future__ import annotations

import json
import socket
import struct
import time
from collections import deque
from typing import Any

from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.typing import Origin
from websockets.uri import parse_uri

__all__ = ["RawFeed"]


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
