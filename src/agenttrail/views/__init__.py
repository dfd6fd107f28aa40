"""Views of a session for people: tool-call pairing, the terminal transcript, the web
transcript rows and search (docs/architecture.md).
"""
