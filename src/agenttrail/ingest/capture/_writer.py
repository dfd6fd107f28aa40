"""The writer thread: captured exchanges are written to the log off the agent's path.

The agent hands over a finished exchange (a queue put) and goes on; one thread per
:class:`~agenttrail.ingest.capture.Capture` reads, recognises and appends them in the order they
finished. A full queue drops the exchange (counted, logged) rather than make the agent wait:
capture never slows or breaks the agent (docs/capture.md).
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["Writer"]

_LOG = logging.getLogger("agenttrail.capture")

_STOP = object()

_WRITERS: weakref.WeakSet[Writer] = weakref.WeakSet()


class Writer:
    """A queue and the daemon thread that drains it through ``handle``.

    Args:
        handle: writes one item; it must not raise (what it raises is logged and counted).
        size: most items waiting (a put beyond drops the item and returns False).
        exit_wait_s: how long the interpreter's exit waits for waiting items (seconds).
    """

    def __init__(self, handle: Callable[[Any], None], *, size: int, exit_wait_s: float) -> None:
        self.handle = handle
        self.exit_wait_s = exit_wait_s
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=size)
        self.pending = 0
        self.dropped = 0
        self.crashed = 0
        self.done = threading.Condition()
        self.thread: threading.Thread | None = None
        _WRITERS.add(self)

    def put(self, item: Any) -> bool:
        """Queue ``item``; False (and nothing queued) when the queue is full."""
        with self.done:
            if self.thread is None:
                self.thread = threading.Thread(
                    target=self._run, name="agenttrail-capture", daemon=True
                )
                self.thread.start()
            try:
                self.queue.put_nowait(item)
            except queue.Full:
                self.dropped += 1
                return False
            self.pending += 1
        return True

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued item is written; False when ``timeout`` (seconds) passed
        first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.done:
            while self.pending:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self.done.wait(left)
        return True

    def close(self, timeout: float | None = None) -> bool:
        """Write what is queued (up to ``timeout`` seconds), then stop the thread."""
        flushed = self.flush(timeout)
        with self.done:
            thread, self.thread = self.thread, None
        if thread is not None:
            self.queue.put(_STOP)
            thread.join(timeout)
        return flushed

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            if item is _STOP:
                return
            try:
                self.handle(item)
            except Exception:  # handle must not raise; if it does, the thread goes on
                self.crashed += 1
                _LOG.exception("agenttrail capture: writing an exchange failed")
            finally:
                with self.done:
                    self.pending -= 1
                    self.done.notify_all()


@atexit.register
def _flush_at_exit() -> None:
    """Exchanges captured just before the interpreter exits are still written (up to each
    writer's ``exit_wait_s``)."""
    for writer in list(_WRITERS):
        writer.flush(writer.exit_wait_s)
