"""What outside formats recorded over HTTP share: cassettes and request/response records,
and server-sent events.
"""
