"""The writers: captured exchanges are written to the log off the agent's path.

The agent hands over a finished exchange (a queue put) and goes on. A writer reads, recognises
and appends the exchanges in the order they finished, either

- in a **writer process** (:class:`ProcessWriter`, the default for a log named by its path or
  URL): a Python child of the agent's process that opens the log itself and is fed the
  exchanges through a pipe. The reading and the durable append, about a millisecond of Python
  each, then never hold the agent's GIL: on a loopback upstream a thread cost the agent half
  its wall time per call, the process costs it a few per cent (docs/benchmarks.md, Live
  capture). The child outlives a parent that dies: it writes what it was sent, then exits;
- or in a **writer thread** (:class:`Writer`), for a log given as an open store (a store
  cannot cross to another process) or when ``AGENTTRAIL_CAPTURE_WRITER=thread``.

Both bound what waits: beyond ``size`` exchanges not yet written, a put drops the exchange
(counted, logged) rather than make the agent wait; capture never slows or breaks the agent
(docs/capture.md). Neither raises into the agent: what fails is logged on
``agenttrail.capture`` and counted.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import IO, Any

from agenttrail.log.redact import redacting_logger

__all__ = ["WRITER_ENV", "ProcessWriter", "Writer", "serve_child"]

_LOG = redacting_logger("agenttrail.capture")

WRITER_ENV = "AGENTTRAIL_CAPTURE_WRITER"
"""``process`` (the default) or ``thread``: where a capture that opens its own log writes."""

_STOP = object()

_FRAME = struct.Struct(">I")
"""A frame on the pipe to the writer process: its length, then a pickle of one item."""

_CHILD = "from agenttrail.ingest.capture._writer import serve_child; serve_child()"
"""What the writer process runs (``python -c``; ``-m`` would import the module twice)."""

_IDLE_S = 30.0
"""Seconds a writer process may stay idle with nothing to write before it is ended (the next
exchange starts another): a client the agent no longer uses keeps no process."""

_WRITERS: weakref.WeakSet[_Counts] = weakref.WeakSet()

Handle = Callable[[Any], str | None]
"""Writes one item; returns why it was not recorded (a one-line reason), or ``None``."""


class _Counts:
    """What a writer has done, and the condition its flush waits on."""

    def __init__(self, size: int, exit_wait_s: float) -> None:
        self.size = size
        self.exit_wait_s = exit_wait_s
        self.pending = 0
        """Items put and not yet written or failed (waiting, or being written)."""
        self.written = 0
        self.failed = 0
        """Items the handler could not write (logged with the reason)."""
        self.dropped = 0
        """Items refused because ``size`` were already waiting."""
        self.crashed = 0
        """Items lost with a writer that died (a thread's handler raised, a process exited)."""
        self.done = threading.Condition()
        _WRITERS.add(self)

    def admit(self) -> bool:
        """Count one more pending item (caller holds :attr:`done`); False when ``size`` are
        already waiting besides the one being written."""
        if self.pending > self.size:
            self.dropped += 1
            return False
        self.pending += 1
        return True

    def settle(self, why: str | None, *, lost: int = 0) -> None:
        """One item written (``why`` None) or failed; or ``lost`` items gone with a writer.
        A failure is logged before it is counted: a flush that returns has seen it logged."""
        if why is not None and not lost:
            _LOG.warning("agenttrail capture: %s", why)
        with self.done:
            if lost:
                self.crashed += lost
                self.pending -= lost
            elif why is None:
                self.written += 1
                self.pending -= 1
            else:
                self.failed += 1
                self.pending -= 1
            self.done.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every pending item is written or failed; False when ``timeout``
        (seconds) passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.done:
            while self.pending:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self.done.wait(left)
        return True


class Writer(_Counts):
    """A queue and the daemon thread that drains it through ``handle``.

    Args:
        handle: writes one item (:data:`Handle`); what it raises is logged and counted.
        size: most items waiting besides the one being written (a put beyond drops the item
            and returns False).
        exit_wait_s: how long the interpreter's exit waits for waiting items (seconds).
    """

    def __init__(self, handle: Handle, *, size: int, exit_wait_s: float) -> None:
        super().__init__(size, exit_wait_s)
        self.handle = handle
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None

    def put(self, item: Any) -> bool:
        """Queue ``item``; False (and nothing queued) when the writer is :attr:`size` behind."""
        with self.done:
            if not self.admit():
                return False
            if self.thread is None:
                self.thread = threading.Thread(
                    target=self._run, name="agenttrail-capture", daemon=True
                )
                self.thread.start()
        self.queue.put(item)
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
                why = self.handle(item)
            except Exception:  # handle must not raise; if it does, the thread goes on
                _LOG.exception("agenttrail capture: writing an exchange failed")
                self.settle(None, lost=1)
            else:
                self.settle(why)


class ProcessWriter(_Counts):
    """Feeds items to a writer process that writes them with a capture of its own.

    The child runs :func:`serve_child`: it reads ``config`` (the keyword arguments of the
    :class:`~agenttrail.ingest.capture.Capture` it builds, which must open its log by path or
    URL), then one item per frame, and answers each with a line: ``+`` written, or ``-`` and
    why not. A feeder thread here writes the frames (the pipe's writes release the GIL); a
    reader thread settles the answers. A child that dies loses what it was sent and had not
    answered (counted as crashed, logged); the next item starts a new one. A child idle for
    :data:`_IDLE_S` is ended, and :meth:`close` ends it at once. A fork of the agent starts
    its own child at its first item.

    Args:
        config: the child's capture arguments (picklable: ``log``, ``session``, ...).
        size, exit_wait_s: as :class:`Writer`.
    """

    def __init__(self, config: dict[str, Any], *, size: int, exit_wait_s: float) -> None:
        super().__init__(size, exit_wait_s)
        self.config = config
        self._start_over()

    def _start_over(self) -> None:
        """No queue, feeder or child yet: at first, and in a fork of the agent (its parent's
        threads are not in the fork, and their child is the parent's)."""
        self._owner = os.getpid()
        self.done = threading.Condition()
        self.pending = 0
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._feeder: threading.Thread | None = None
        self._child: _Child | None = None

    def put(self, item: Any) -> bool:
        """Queue ``item``; False (and nothing queued) when the writer is :attr:`size` behind."""
        if self._owner != os.getpid():
            self._start_over()
        with self.done:
            if not self.admit():
                return False
            if self._feeder is None:
                self._feeder = threading.Thread(
                    target=self._feed, name="agenttrail-capture", daemon=True
                )
                self._feeder.start()
        self.queue.put(item)
        return True

    @property
    def pid(self) -> int | None:
        """The writer process's id while one runs (for a supervisor or a test)."""
        child = self._child
        return child.process.pid if child is not None and not child.dead else None

    def close(self, timeout: float | None = None) -> bool:
        """Write what is queued (up to ``timeout`` seconds), then end the child: it writes
        what it was sent and exits."""
        flushed = self.flush(timeout)
        with self.done:
            feeder, self._feeder = self._feeder, None
        if feeder is not None:
            self.queue.put(_STOP)
            feeder.join(timeout)
        return flushed

    def _feed(self) -> None:
        child: _Child | None = None
        while True:
            try:
                item = self.queue.get(timeout=_IDLE_S)
            except queue.Empty:
                with self.done:
                    if self.pending:
                        continue
                    self._feeder = None  # the next put starts a feeder, and a child, again
                item = _STOP
            if item is _STOP:
                if child is not None:
                    child.end()
                return
            try:
                frame = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # an exchange that cannot cross to the child: lost, never stuck
                _LOG.exception("agenttrail capture: an exchange could not be handed over")
                self.settle(None, lost=1)
                continue
            while True:  # a child that is alive when the item is counted as sent to it
                with self.done:
                    if child is not None and not child.dead:
                        child.sent += 1
                        break
                try:
                    child = self._child = _Child(self)  # not under the lock: put never waits
                except OSError as e:  # no interpreter to start: this item is lost, not waited on
                    _LOG.error("agenttrail capture: cannot start the writer process: %s", e)
                    self.settle(None, lost=1)
                    child = None
                    break
            if child is not None:
                child.send(frame)


class _Child:
    """One writer process, and the thread that reads its answers."""

    def __init__(self, writer: ProcessWriter) -> None:
        self.writer = writer
        self.sent = 0
        """Items sent and not yet answered (guarded by the writer's ``done``)."""
        self.dead = False
        self.process = subprocess.Popen(
            [sys.executable, "-c", _CHILD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
        )
        self.send(pickle.dumps(writer.config, protocol=pickle.HIGHEST_PROTOCOL))
        threading.Thread(target=self._read, name="agenttrail-capture-acks", daemon=True).start()

    def send(self, frame: bytes) -> None:
        """Write one frame; a child that is gone is seen by the reader (its answers end)."""
        assert self.process.stdin is not None
        with contextlib.suppress(ValueError, OSError):  # closed, or a broken pipe
            self.process.stdin.write(_FRAME.pack(len(frame)) + frame)
            self.process.stdin.flush()

    def end(self) -> None:
        """Close the pipe (the child writes what it has and exits) and wait for it, a while:
        a child still writing (a log locked by another process) finishes on its own."""
        assert self.process.stdin is not None
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(self.writer.exit_wait_s)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            answer = line.decode("utf-8", "replace").rstrip("\n")
            with self.writer.done:
                self.sent -= 1
            self.writer.settle(None if answer == "+" else answer[1:])
        self.process.stdout.close()
        self.process.wait()
        assert self.process.stdin is not None
        with contextlib.suppress(OSError):  # a send on it now fails, and is seen as lost
            self.process.stdin.close()
        with self.writer.done:
            self.dead, lost, self.sent = True, self.sent, 0
        if lost:
            code = self.process.returncode
            _LOG.error(
                "agenttrail capture: the writer process exited (%s); %d exchange%s not recorded",
                code,
                lost,
                "" if lost == 1 else "s",
            )
            self.writer.settle(None, lost=lost)


def serve_child(
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
) -> None:
    """The writer process's main: read the capture's arguments, then write each item and
    answer it (:class:`ProcessWriter`), until the pipe closes. An answer the parent is no
    longer there to read is not an error: the items already sent are still written."""
    from agenttrail.ingest.capture import Capture  # the child's only import of the core

    source = stdin or sys.stdin.buffer
    sink = stdout or sys.stdout.buffer
    config = _frame(source)
    if config is None:
        return
    capture = Capture(**config, writer="thread")  # its writer never starts: no put here
    try:
        while (item := _frame(source)) is not None:
            why = capture.write_queued(item)
            try:
                sink.write(b"+\n" if why is None else b"-" + why.encode() + b"\n")
                sink.flush()
            except OSError:  # the parent is gone; go on writing what it sent
                pass
    finally:
        capture.close()


def _frame(source: IO[bytes]) -> Any:
    """The next item on the pipe, or ``None`` at its end (a frame cut short included)."""
    head = source.read(_FRAME.size)
    if len(head) < _FRAME.size:
        return None
    (size,) = _FRAME.unpack(head)
    body = source.read(size)
    return pickle.loads(body) if len(body) == size else None


@atexit.register
def _flush_at_exit() -> None:
    """Exchanges captured just before the interpreter exits are still written (up to each
    writer's ``exit_wait_s``; a writer process then goes on with what it was sent)."""
    for writer in list(_WRITERS):
        writer.flush(writer.exit_wait_s)
