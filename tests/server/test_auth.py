"""Signed access tokens (agenttrail.server.auth): minted and checked, expiry, forgery, rights
and scope, and the server secret's file. Over HTTP the same rules are 401/403
(tests/server/test_server.py)."""

from __future__ import annotations

import base64
import json
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import jwt
import pytest

from agenttrail.errors import Forbidden, InputError, Unauthorized
from agenttrail.log.redact import redacted_text
from agenttrail.log.store import open_store
from agenttrail.server.auth import (
    RIGHTS,
    SECRET_BYTES,
    TOKEN_REQUIRED,
    Grant,
    TokenCache,
    check_token,
    load_secret,
    mint_token,
)
from tests.conftest import run_cli

SECRET = b"test-secret-not-for-production-0123456789abcdef"


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * 4))
    return decoded


def test_a_minted_token_checks_back_to_its_scope_and_rights() -> None:
    before = int(time.time())
    token = mint_token(SECRET, rights=["read", "audit", "read"], session="s1", ttl_s=60)
    assert check_token(SECRET, token) == Grant("s1", frozenset({"read", "audit"}))
    claims = _claims(token)
    assert claims["sid"] == "s1" and claims["rights"] == ["audit", "read"]
    assert before <= claims["iat"] <= int(time.time())
    assert claims["exp"] == claims["iat"] + 60
    every = check_token(SECRET, mint_token(SECRET, rights=RIGHTS))
    assert every == Grant("*", frozenset(RIGHTS))


def test_an_unknown_right_is_refused_when_minting() -> None:
    with pytest.raises(InputError, match=r"unknown right 'delete' \(use read, append"):
        mint_token(SECRET, rights=["read", "delete"])


def test_an_expired_token_is_unauthorized() -> None:
    expired = mint_token(SECRET, rights=["read"], ttl_s=-1)
    with pytest.raises(Unauthorized, match="the token has expired"):
        check_token(SECRET, expired)


@pytest.mark.parametrize(
    "token",
    [
        mint_token(b"another-secret-entirely-0123456789abcdef", rights=["read"]),
        "abc.def.ghi",
        "not a token",
        # Signed right, but without an expiry: every token must expire.
        jwt.encode({"sid": "*", "rights": ["read"]}, SECRET, algorithm="HS256"),
        # Signed right, but the claims are not of our shape.
        jwt.encode({"sid": 7, "rights": ["read"], "exp": 2**40}, SECRET, algorithm="HS256"),
        jwt.encode({"sid": "*", "rights": "read", "exp": 2**40}, SECRET, algorithm="HS256"),
        # Unsigned ("alg": "none"): only the algorithm the server signs with is accepted.
        jwt.encode({"sid": "*", "rights": ["read"], "exp": 2**40}, "", algorithm="none"),
    ],
    ids=["other secret", "garbage", "no dots", "no exp", "sid", "rights", "unsigned"],
)
def test_a_forged_or_malformed_token_is_unauthorized(token: str) -> None:
    with pytest.raises(Unauthorized, match="the token is not valid"):
        check_token(SECRET, token)


def test_a_changed_claim_breaks_the_signature() -> None:
    header, _, signature = mint_token(SECRET, rights=["read"], session="s1").split(".")
    claims = {"sid": "*", "rights": list(RIGHTS), "iat": 0, "exp": 2**40}
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    with pytest.raises(Unauthorized, match="not valid"):
        check_token(SECRET, f"{header}.{body}.{signature}")


@pytest.mark.parametrize("token", [None, ""])
def test_no_token_is_unauthorized_and_says_how_to_send_one(token: str | None) -> None:
    with pytest.raises(Unauthorized, match=r"header Authorization, value Bearer and the token"):
        check_token(SECRET, token)


def test_a_grant_requires_the_right_and_the_scope() -> None:
    scoped = Grant("s1", frozenset({"read"}))
    scoped.require("read")
    scoped.require("read", "s1")
    with pytest.raises(Forbidden, match="this token does not grant 'append'"):
        scoped.require("append", "s1")
    with pytest.raises(Forbidden, match="this token is scoped to session 's1'"):
        scoped.require("read", "s2")
    Grant("*", frozenset({"read"})).require("read", "any session")


def test_unknown_rights_in_a_signed_token_grant_nothing() -> None:
    token = jwt.encode(
        {"sid": "*", "rights": ["read", 7, "root"], "exp": 2**40}, SECRET, algorithm="HS256"
    )
    grant = check_token(SECRET, token)
    assert grant.rights == frozenset({"read", "root"})  # kept, but no route asks for "root"
    with pytest.raises(Forbidden):
        grant.require("append")


def test_the_secret_file_is_made_once_readable_by_its_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTTRAIL_SECRET", raising=False)
    path = tmp_path / "agenttrail.db.secret"
    secret = load_secret(path)
    assert len(secret) == 2 * SECRET_BYTES and bytes.fromhex(secret.decode())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_secret(path) == secret  # read back, not made again
    monkeypatch.setenv("AGENTTRAIL_SECRET", "from-the-environment")
    assert load_secret(tmp_path / "never-made") == b"from-the-environment"
    assert not (tmp_path / "never-made").exists()


def test_a_secret_file_that_cannot_be_read_or_written_is_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTTRAIL_SECRET", raising=False)
    with pytest.raises(InputError, match="cannot read the server secret"):
        load_secret(tmp_path)  # a folder
    with pytest.raises(InputError, match="cannot write the server secret"):
        load_secret(tmp_path / "no-such-folder" / "secret")


# -- the token cache ---------------------------------------------------------------------------


class _Clock:
    """A clock the test moves: Unix seconds."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def test_a_cached_token_is_refused_from_its_expiry_on() -> None:
    clock = _Clock()
    tokens = TokenCache(SECRET, clock=clock)
    token = mint_token(SECRET, rights=["read"], ttl_s=60)
    assert tokens.check(token) == Grant("*", frozenset({"read"}))
    assert tokens.check(token) == Grant("*", frozenset({"read"}))  # found, not decoded again
    clock.now = _claims(token)["exp"] - 0.001
    assert tokens.check(token).rights == {"read"}
    clock.now = _claims(token)["exp"]  # PyJWT's rule: expired at exp, not after it
    with pytest.raises(Unauthorized, match="the token has expired"):
        tokens.check(token)


def test_a_token_altered_after_a_valid_one_was_cached_is_still_refused() -> None:
    tokens = TokenCache(SECRET)
    token = mint_token(SECRET, rights=["read"], session="s1")
    tokens.check(token)
    head, claims, signature = token.split(".")
    wider = base64.urlsafe_b64encode(
        json.dumps({**_claims(token), "sid": "*", "rights": list(RIGHTS)}).encode()
    )
    for forged in (
        f"{head}.{wider.decode().rstrip('=')}.{signature}",  # claims widened, old signature
        f"{head}.{claims}.{signature[:-2]}AA",  # signature changed
        token + " ",
    ):
        with pytest.raises(Unauthorized):
            tokens.check(forged)
    with pytest.raises(Unauthorized, match="a bearer token is required"):
        tokens.check(None)


def test_a_new_secret_revokes_every_cached_token() -> None:
    # Revocation is a new secret (docs/server.md, Tokens): a server started with it has a
    # cache of its own, which verifies the old token afresh and refuses it.
    token = mint_token(SECRET, rights=["read"])
    assert TokenCache(SECRET).check(token).rights == {"read"}
    with pytest.raises(Unauthorized, match="the token is not valid"):
        TokenCache(b"the-rotated-secret-0123456789abcdef-xyz").check(token)


def test_the_cache_keeps_at_most_its_size_dropping_the_oldest() -> None:
    tokens = TokenCache(SECRET, size=2)
    first, second, third = (mint_token(SECRET, rights=[r]) for r in ("read", "append", "audit"))
    for token in (first, second, third):
        tokens.check(token)
    assert list(tokens._grants) == [second, third]
    assert tokens.check(first).rights == {"read"}  # verified again, and kept again
    assert list(tokens._grants) == [third, first]


def test_the_hint_of_a_missing_token_survives_the_clis_redaction() -> None:
    # `agenttrail push` prints a 401's detail through the redaction of every error message,
    # which read "Authorization: Bearer …" as a credential: "(Authorization: [REDACTED:…] …)".
    assert redacted_text(TOKEN_REQUIRED) == TOKEN_REQUIRED


def _token(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``agenttrail token ARGS`` on a new log in ``folder``."""
    db = folder / "log.db"
    if not db.exists():
        open_store(db).close()
    return run_cli("token", *args, "--db", str(db))


@pytest.mark.parametrize(
    "ttl", ["0", "-5", "nan", "inf", "1e300", "87601", "0.0001", "87600.00001"]
)
def test_the_command_refuses_a_lifetime_no_token_can_have(ttl: str, tmp_path: Path) -> None:
    # 0, -5 and 0.0001 (under a second) minted tokens already expired, nan and inf were a
    # traceback, 1e300 an expiry of 304 digits; 87600.00001 was said as "got 87600"
    done = _token(tmp_path, "--ttl", ttl)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "error: --ttl takes the hours the token is valid, from a minute (0.0167) to 87,600 "
        f"(ten years): got {float(ttl)}\n"
    )


def test_the_command_mints_a_token_for_the_hours_asked(tmp_path: Path) -> None:
    for ttl, seconds in (("0.5", 1800), ("87600", 87_600 * 3600)):
        done = _token(tmp_path, "--ttl", ttl)
        assert done.returncode == 0, done.stderr
        claims = _claims(done.stdout.strip())
        assert claims["exp"] - claims["iat"] == seconds


@pytest.mark.parametrize("rights", ["", ",", " , "])
def test_the_command_refuses_a_token_of_no_rights(rights: str, tmp_path: Path) -> None:
    # it minted one, exit 0, that every route then refused with a 403
    done = _token(tmp_path, "--rights", rights)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "error: --rights names no right: give one or more of read, append, invoke, audit\n"
    )
