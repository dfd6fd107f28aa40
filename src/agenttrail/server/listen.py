"""The socket a server of ours listens on (``agenttrail serve``, ``agenttrail proxy``), bound
before uvicorn starts, and the address it is reached at.

Bound here rather than by uvicorn, so that an address it cannot listen on (a port in use, a
host that does not resolve) is one ``error:`` line, exit 2, before anything is printed:
uvicorn logs its own ``ERROR:`` line and exits 3, after the server had announced itself. And
the address printed is the one bound: ``--port 0`` asks the system for any free port.
"""

from __future__ import annotations

import socket

from agenttrail.errors import InputError

__all__ = ["PORTS", "bound_socket", "url_of"]

PORTS = (0, 65535)
"""The ports a server may be asked for: 0 for any free one (TCP's range, RFC 9293)."""


def bound_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (the first address ``host`` resolves to), for
    uvicorn to listen on (``Server.run(sockets=[…])``).

    Raises:
        InputError: the host does not resolve or the port cannot be bound (in use, not
            allowed); names the option.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as e:
        raise InputError(f"--host {host}: cannot listen there: {e.strerror or e}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        sock.bind(address)
    except OSError as e:
        sock.close()
        raise InputError(f"--port {port}: cannot listen on {host}: {e.strerror or e}") from None
    return sock


def url_of(sock: socket.socket, host: str) -> str:
    """``http://HOST:PORT`` of a bound ``sock``: ``host`` as given (an IPv6 address in
    brackets, RFC 3986 §3.2.2) and the port bound, the system's choice when 0 was asked."""
    port = sock.getsockname()[1]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"
