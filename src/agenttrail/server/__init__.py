"""``agenttrail serve``: the REST API, the live WebSocket feed, signed access and the user's
own tools, as a thin ASGI layer over the library (DESIGN.md §Shape of the system)."""

from agenttrail.server.app import create_app
from agenttrail.server.auth import RIGHTS, load_secret, mint_token

__all__ = ["RIGHTS", "create_app", "load_secret", "mint_token"]
