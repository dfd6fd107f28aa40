"""Signed access: bearer tokens scoped to a session (or all) with rights and an expiry.

Tokens are JWTs (RFC 7519) signed with HMAC-SHA256 under the server's secret (PyJWT). Claims:
``sid`` (a session id, or ``*`` for all), ``rights`` (a subset of :data:`RIGHTS`), ``exp`` and
``iat``. Every REST route and the WebSocket require one: a missing, malformed, forged or
expired token is 401 (WebSocket close 4401); a valid token without the right or for another
session is 403 (close 4403).
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from agenttrail.errors import Forbidden, InputError, Unauthorized

__all__ = [
    "RIGHTS",
    "TOKEN_CACHE_SIZE",
    "Grant",
    "TokenCache",
    "bearer_token",
    "check_token",
    "load_secret",
    "mint_token",
]

RIGHTS = ("read", "append", "invoke", "audit")
"""``read`` sessions and events; ``append`` events and partials, hold turns; ``invoke`` the
user's own tools; ``audit`` read trace envelopes."""

ALGORITHM = "HS256"
TOKEN_REQUIRED = "a bearer token is required (header Authorization, value Bearer and the token)"
"""What a request without a token is told. Not ``Authorization: Bearer …``: the redaction
every error the CLI prints goes through (``agenttrail push`` prints the server's answer)
reads that as a credential and hides the hint."""
SECRET_BYTES = 32
"""Length of a generated server secret: 256 bits, the HMAC-SHA256 block-size guidance."""


@dataclass(frozen=True)
class Grant:
    """What a checked token allows."""

    session: str
    """A session id, or ``*`` for every session."""
    rights: frozenset[str]

    def covers(self, session_id: str) -> bool:
        """Whether the token's scope includes ``session_id``."""
        return self.session in ("*", session_id)

    def require(self, right: str, session_id: str | None = None) -> None:
        """Raise :class:`Forbidden` unless the grant has ``right`` (for ``session_id``)."""
        if right not in self.rights:
            raise Forbidden(f"this token does not grant {right!r}")
        if session_id is not None and not self.covers(session_id):
            raise Forbidden(f"this token is scoped to session {self.session!r}")


def load_secret(path: Path) -> bytes:
    """The server secret: ``AGENTTRAIL_SECRET`` if set, else the key file at ``path``,
    created (readable by its owner only) with :data:`SECRET_BYTES` random bytes if missing."""
    env = os.environ.get("AGENTTRAIL_SECRET")
    if env:
        return env.encode("utf-8")
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        pass
    except OSError as e:
        raise InputError(f"{path}: cannot read the server secret: {e.strerror or e}") from None
    secret = secrets.token_hex(SECRET_BYTES).encode("ascii")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(secret + b"\n")
    except FileExistsError:  # another process made it first
        return path.read_bytes().strip()
    except OSError as e:
        raise InputError(f"{path}: cannot write the server secret: {e.strerror or e}") from None
    return secret


def mint_token(
    secret: bytes, *, rights: Iterable[str], session: str = "*", ttl_s: float = 24 * 3600
) -> str:
    """A signed token for ``session`` (``*`` = all) with ``rights``, valid ``ttl_s`` seconds.

    Raises:
        InputError: an unknown right.
    """
    granted = sorted(set(rights))
    unknown = [r for r in granted if r not in RIGHTS]
    if unknown:
        raise InputError(f"unknown right {unknown[0]!r} (use {', '.join(RIGHTS)})")
    now = int(time.time())
    claims = {"sid": session, "rights": granted, "iat": now, "exp": now + int(ttl_s)}
    import jwt  # PyJWT pulls in cryptography: only a command that mints or checks pays

    return jwt.encode(claims, secret, algorithm=ALGORITHM)


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (RFC 6750 §2.1), or ``None``
    without one."""
    return authorization.removeprefix("Bearer ").strip() if authorization else None


def check_token(secret: bytes, token: str | None) -> Grant:
    """The grant of a token. Raises :class:`Unauthorized` when it is missing, malformed,
    forged or expired."""
    return _verified(secret, token)[0]


def _verified(secret: bytes, token: str | None) -> tuple[Grant, float]:
    """The grant of a token and its expiry (Unix seconds); raises as :func:`check_token`."""
    if not token:
        raise Unauthorized(TOKEN_REQUIRED)
    import jwt

    try:
        claims = jwt.decode(token, secret, algorithms=[ALGORITHM], options={"require": ["exp"]})
    except jwt.ExpiredSignatureError:
        raise Unauthorized("the token has expired") from None
    except jwt.PyJWTError:
        raise Unauthorized("the token is not valid") from None
    rights = claims.get("rights")
    session = claims.get("sid")
    expires = claims.get("exp")
    if not isinstance(rights, list) or not isinstance(session, str):
        raise Unauthorized("the token is not valid")
    if not isinstance(expires, int | float) or isinstance(expires, bool):
        raise Unauthorized("the token is not valid")
    return Grant(session, frozenset(r for r in rights if isinstance(r, str))), float(expires)


TOKEN_CACHE_SIZE = 1024
"""Verified tokens a server remembers (:class:`TokenCache`): a client sends the same token
with every request, and a server has a few clients, not thousands."""


class TokenCache:
    """The grants of tokens already verified under one secret, each until its ``exp``.

    Verifying a JWT (PyJWT: parse, HMAC-SHA256, claim checks) costs more than the rest of an
    append's request handling; a client sends the same token with each request, so the
    first check of a token verifies it and the next ones find its grant here. Only verified
    tokens are remembered, keyed by their whole text, so a forged or altered token is never
    found; each is dropped at its expiry, checked on every use, so an expired token is 401 as
    it was uncached. Tokens are revoked by changing the server's secret (docs/server.md,
    Tokens), which means a new app and so a new, empty cache. At most
    :data:`TOKEN_CACHE_SIZE` are kept, the oldest dropped first.

    Args:
        secret: the key tokens are signed with.
        size: how many verified tokens to keep.
        clock: the time now, Unix seconds (a test sets another).
    """

    def __init__(
        self,
        secret: bytes,
        *,
        size: int = TOKEN_CACHE_SIZE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.secret = secret
        self.size = size
        self.clock = clock
        self._grants: dict[str, tuple[Grant, float]] = {}

    def check(self, token: str | None) -> Grant:
        """The grant of a token, as :func:`check_token` gives it.

        Raises:
            Unauthorized: the token is missing, malformed, forged or expired.
        """
        if not token:
            raise Unauthorized(TOKEN_REQUIRED)
        found = self._grants.get(token)
        if found is not None:
            if self.clock() < found[1]:  # PyJWT's rule: expired from exp on
                return found[0]
            del self._grants[token]
            raise Unauthorized("the token has expired")  # and it never will be valid again
        grant, expires = _verified(self.secret, token)
        if len(self._grants) >= self.size:
            del self._grants[next(iter(self._grants))]
        self._grants[token] = (grant, expires)
        return grant
