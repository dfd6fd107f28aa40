"""``agenttrail serve``: the REST API, the live WebSocket feed, signed access and the user's
own tools, as a thin ASGI layer over the library (docs/architecture.md).

``create_app`` is imported on first use (PEP 562): the CLI's other commands need only the
token functions, and FastAPI takes half a second to import.
"""

from typing import TYPE_CHECKING, Any

from agenttrail.server.auth import RIGHTS, load_secret, mint_token

if TYPE_CHECKING:
    from agenttrail.server.app import create_app

__all__ = ["RIGHTS", "create_app", "load_secret", "mint_token"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from agenttrail.server.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
