"""Made-up secrets of every kind the built-in detectors find (docs/redaction.md), for the tests
that drive them through the ways in and look for them in every output.

They are made up here in the shapes the providers document (prefix and length); the AWS pair
is AWS's own documentation example (IAM user guide, "Managing access keys"), the JWT is jwt.io's
example token.
"""

from __future__ import annotations

__all__ = ["ALL", "AWS_SECRET", "CASES", "JWT", "SESSION_TOKEN", "found_in"]

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SESSION_TOKEN = "FwoGZXIvYXdzEBYaDHqa0AP1/5lW4Uq8VyLKAWuPxT+Lz2example+session+token"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiw"
    "iaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM_BODY = "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi7t0Yx1d8fake0key0body0xyz"

CASES: list[tuple[str, str, str]] = [
    # (kind, text that carries the secret, the secret: what must not be stored)
    (
        "openai-key",
        "key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zQ7 set",
        "Ab3dEf6hIj9kLm2nOp5qRs8t",
    ),
    ("openai-key", "OPENAI: sk-" + "T3BlbkFJ" * 6, "T3BlbkFJT3BlbkFJT3BlbkFJ"),
    ("anthropic-key", "use sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1GfAA", "Zx9Yw8Vu7Ts6Rq5Po4Nm3"),
    ("aws-access-key-id", "id AKIAIOSFODNN7EXAMPLE.", "AKIAIOSFODNN7EXAMPLE"),
    ("github-token", "ghp_" + "a1B2c3D4e5" * 4, "a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5"),
    ("github-token", "github_pat_11ABCDEFG0" + "x" * 60, "11ABCDEFG0" + "x" * 30),
    ("google-api-key", "maps AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY ok", "SyD-9tSrke72PouQMnMX"),
    ("slack-token", "xoxb-2048593-1402948570-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx"),
    ("stripe-key", "sk_live_51HqLyjWDarjtT1zdp7dc", "51HqLyjWDarjtT1zdp7dc"),
    ("jwt", f"token={JWT[:10]} then {JWT}", JWT[40:90]),
    (
        "private-key",
        f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
        PEM_BODY,
    ),
    (
        "bearer-token",
        "curl -H 'Authorization: Bearer 9f8e7d6c5b4a39281706'",
        "9f8e7d6c5b4a39281706",
    ),
    ("url-password", "DATABASE_URL postgresql://app:S3cr3tPassw0rd@db:5432/x", "S3cr3tPassw0rd"),
    (
        "url-key",
        "GET https://maps.example.com/api?q=x&api_key=Zq8vN2xW4yT6uR1s",
        "Zq8vN2xW4yT6uR1s",
    ),
    ("url-key", "https://b.example/o?X-Amz-Signature=4f9a0c1e2d3b&x=1", "4f9a0c1e2d3b"),
    ("aws_secret_access_key", f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
    ("aws_session_token", f'{{"AWS_SESSION_TOKEN": "{SESSION_TOKEN}"}}', SESSION_TOKEN),
]

ALL = "\n".join(text for _, text, _ in CASES)
"""Every case in one text (a system prompt, a tool's output)."""


def found_in(text: str | bytes) -> list[str]:
    """The kinds whose secret ``text`` holds (none, when redaction did its work)."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    return [kind for kind, _, secret in CASES if secret.encode() in data]
