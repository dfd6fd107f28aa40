"""Each provider's vocabulary, stated once: block and item types, tool ids, and their sources.

:mod:`.anthropic` is the Anthropic Messages API (and the Claude Code transcripts built on it);
:mod:`.openai` is OpenAI's Chat Completions and Responses APIs. The importers in
:mod:`agenttrail.formats`, the renderers in :mod:`agenttrail.replay` and the validator
(:func:`agenttrail.replay.validate`) all read these constants, so a fact about a provider has
one home and a new block type is added in one place. Each constant names the documentation it
comes from.

These modules are vocabulary only: they import nothing of agenttrail (no store, no format, no
replay; docs/architecture.md).
"""

from agenttrail.providers import anthropic, openai

__all__ = ["anthropic", "openai"]
