"""The writers: captured exchanges are written to the log off the agent's path.

The agent hands over a finished exchange (a queue put) and goes on. A writer reads, recognises
and appends the exchanges in the order they finished, those waiting together as one group (one
transaction, one durable commit; each counted written only once that commit is done), either

- in a **writer process** (:class:`ProcessWriter`, the default for a log named by its path or
  URL): a Python child of the agent's process that opens the log itself and is fed the
  exchanges through a pipe (those queued together in one frame, answered in one write). The
  reading and the durable append, about a millisecond of Python each, then never hold the
  agent's GIL (docs/benchmarks.md, Live capture). The child outlives a parent that dies: it
  writes what it was sent, then exits;
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
import select
import struct
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from agenttrail.ingest.capture._http import HttpExchange, from_wire, to_wire
from agenttrail.log.redact import redacting_logger

__all__ = ["WRITER_ENV", "ProcessWriter", "Writer", "serve_child"]

_LOG = redacting_logger("agenttrail.capture")

WRITER_ENV = "AGENTTRAIL_CAPTURE_WRITER"
"""``process`` (the default) or ``thread``: where a capture that opens its own log writes."""

_STOP = object()
_DRAIN = object()
"""Queued for a process writer's feeder: the pipe did not take all of a frame at once."""

_PIPE_BYTES = 1 << 20
"""The pipe to a writer process is made this large where the system allows (Linux: 64 KiB by
default), so that a burst of exchanges is taken at once."""

_FRAME = struct.Struct(">I")
"""A frame on the pipe to the writer process: its length, then one exchange as
:func:`._http.to_wire` makes it (the first frame: a pickle of the child's capture
arguments)."""

Queued = tuple[HttpExchange, Any]
"""What a process writer is handed: an exchange and the session it goes to (or ``None``)."""

GROUP = 64
"""Most items written in one transaction: those waiting when a writer takes the next, up to
this many (a commit's cost is shared by the group; its wait is not made unbounded)."""

_LINGER_S = 0.02
"""While exchanges keep coming (the previous group was taken less than :data:`_BUSY_S`
before the next arrived), the writer process waits this long after the first of a group
before it takes the rest: a group of many shares one transaction and one durable commit, and
the agent's pipe writes meanwhile wake no one. An exchange after a quiet spell is written at
once, and a ``flush`` ends the wait (:meth:`ProcessWriter.flush`). What it delays is only
when an exchange becomes durable, never the agent."""

_BUSY_S = 0.1
"""A group taken less than this many seconds after the previous one means the agent is busy:
the writer lingers (:data:`_LINGER_S`) to group more."""

_CHILD = "from agenttrail.ingest.capture._writer import serve_child; serve_child()"
"""What the writer process runs (``python -c``; ``-m`` would import the module twice)."""

_NICE = 10
"""How much lower the writer process's scheduling priority is than the agent's (``nice``): on
a machine with no core to spare, its wake-up does not take the CPU from the agent, which it
would otherwise hold for the whole of a write (the exchanges waiting meanwhile are grouped).
Not Linux's ``SCHED_IDLE``: it shortened a recorded proxy call's p99 on a loopback, but an
idle-class writer on a machine whose cores were all busy took 9 s to write its first
exchange, against 0.2 s at ``nice`` 10 (docs/benchmarks.md, Proxy)."""

_IDLE_S = 30.0
"""Seconds a writer process may stay idle with nothing to write before it is ended (the next
exchange starts another): a client the agent no longer uses keeps no process."""

_WRITERS: weakref.WeakSet[_Counts] = weakref.WeakSet()

Handle = Callable[[list[Any]], list[str | None]]
"""Writes a group of items; returns, for each, why it was not recorded (a one-line reason), or
``None`` once it is written."""


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

    def settle(self, whys: list[str | None]) -> None:
        """Items written (their ``why`` None) or failed (why not). A failure is logged before
        it is counted: a flush that returns has seen it logged."""
        failed = [why for why in whys if why is not None]
        for why in failed:
            _LOG.warning("agenttrail capture: %s", why)
        with self.done:
            self.written += len(whys) - len(failed)
            self.failed += len(failed)
            self.pending -= len(whys)
            self.done.notify_all()

    def lose(self, lost: int) -> None:
        """``lost`` items gone with a writer (logged by the caller)."""
        with self.done:
            self.crashed += lost
            self.pending -= lost
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
    """A queue and the daemon thread that drains it through ``handle``, a group at a time.

    Args:
        handle: writes a group of items (:data:`Handle`); what it raises is logged and
            counted, and loses that group.
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
            group = _waiting(self.queue)
            stop = group[-1] is _STOP
            items = group[:-1] if stop else group
            if items:
                try:
                    whys = self.handle(items)
                except Exception:  # handle must not raise; if it does, the thread goes on
                    _LOG.exception("agenttrail capture: writing exchanges failed")
                    self.lose(len(items))
                else:
                    self.settle(whys)
            if stop:
                return


class ProcessWriter(_Counts):
    """Feeds items to a writer process that writes them with a capture of its own.

    The child runs :func:`serve_child`: it reads ``config`` (the keyword arguments of the
    :class:`~agenttrail.ingest.capture.Capture` it builds, which must open its log by path or
    URL), then frames of items, and answers each item with a line: ``+`` written, or ``-``
    and why not. While a child runs and nothing waits before it, :meth:`put` itself writes
    the item's frame to the pipe, which never blocks (the pipe is non-blocking: what it does
    not take at once is left to the feeder thread). The feeder thread starts the child, and
    writes what waits for it (several items to a frame) or what the pipe did not take; a
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
        self._handed = 0
        """Items queued for the feeder and not yet in a child's outbox: while there are, a
        put queues too (the child gets the items in the order they were put)."""
        self._last = time.monotonic()

    def put(self, item: Queued) -> bool:
        """Hand ``item`` to the child (:func:`._http.to_wire`: the agent's process pickles no
        object), or queue it; False (and nothing queued) when the writer is :attr:`size`
        behind. Never waits. One that cannot cross (a header that is not text) is lost alone
        (logged, counted), never stuck."""
        if self._owner != os.getpid():
            self._start_over()
        try:
            data = to_wire(*item)
        except Exception:
            _LOG.exception("agenttrail capture: an exchange could not be handed over")
            with self.done:
                self.crashed += 1
            return True
        frame = _FRAME.pack(len(data)) + data
        with self.done:
            if not self.admit():
                return False
            self._last = time.monotonic()
            if self._feeder is None:
                self._feeder = threading.Thread(
                    target=self._feed, name="agenttrail-capture", daemon=True
                )
                self._feeder.start()
            child = self._child
            if self._handed or child is None or child.dead:
                self._handed += 1
                self.queue.put(frame)
                return True
            child.sent += 1
            if not child.take(frame):
                self.queue.put(_DRAIN)  # the feeder writes the rest when the pipe takes it
        return True

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every item handed over is written or failed (False when ``timeout``
        seconds passed first). The child is woken from its linger (:data:`_LINGER_S`) to
        write what it holds at once: an agent that flushes (at exit, in a test, before
        reading its own log) waits for the writing, not for more exchanges to group."""
        with self.done:
            child = self._child if self.pending else None
        if child is not None:
            child.wake()
        return super().flush(timeout)

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
        while True:
            try:
                group = _waiting(self.queue, timeout=_IDLE_S)
            except queue.Empty:
                with self.done:
                    if self.pending or time.monotonic() - self._last < _IDLE_S:
                        continue
                    self._feeder = None  # the next put starts a feeder, and a child, again
                group = [_STOP]
            items = [item for item in group if item is not _STOP and item is not _DRAIN]
            if items:
                self._hand(items)
            self._drain()
            if group[-1] is _STOP:
                with self.done:
                    child, self._child = self._child, None
                if child is not None:
                    child.end()
                return

    def _hand(self, items: list[bytes]) -> None:
        """Put queued ``items`` (frames) into a live child's outbox, starting a child if none
        runs; what finds no child is lost (logged, counted)."""
        frame, kept = b"".join(items), items
        while True:  # a child that is alive when the items are counted as sent to it
            with self.done:
                child = self._child
                if child is not None and not child.dead:
                    self._handed -= len(items)
                    if kept:
                        child.sent += len(kept)
                        child.take(frame)
                    break
            try:
                self._child = _Child(self)  # not under the lock: put never waits
            except OSError as e:  # no interpreter to start: these are lost, not waited on
                _LOG.error("agenttrail capture: cannot start the writer process: %s", e)
                with self.done:
                    self._handed -= len(items)
                kept = []
                break
        if len(kept) < len(items):
            self.lose(len(items) - len(kept))

    def _drain(self) -> None:
        """Wait until the child's pipe has taken all of its outbox."""
        while True:
            with self.done:
                child = self._child
                if child is None or child.take(b""):
                    return
            select.select([], [child.fd], [], 1.0)


class _Child:
    """One writer process, and the thread that reads its answers."""

    def __init__(self, writer: ProcessWriter) -> None:
        self.writer = writer
        self.sent = 0
        """Items sent and not yet answered (guarded by the writer's ``done``, as all here)."""
        self.dead = False
        self.outbox = bytearray()
        """Frames the pipe has not taken yet."""
        wake, self._wake = os.pipe()  # a flush's byte ends the child's linger
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _CHILD, str(wake)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
                pass_fds=(wake,),
            )
        except OSError:
            os.close(self._wake)
            raise
        finally:
            os.close(wake)
        os.set_blocking(self._wake, False)
        assert self.process.stdin is not None
        self.fd = self.process.stdin.fileno()
        with contextlib.suppress(ImportError, AttributeError, OSError):  # Linux: room for a burst
            import fcntl

            fcntl.fcntl(self.fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        config = pickle.dumps(writer.config, protocol=pickle.HIGHEST_PROTOCOL)
        with contextlib.suppress(OSError):  # an empty pipe takes it; a dead child: the reader
            _write_all(self.fd, _FRAME.pack(len(config)) + config)
        os.set_blocking(self.fd, False)
        threading.Thread(target=self._read, name="agenttrail-capture-acks", daemon=True).start()

    def take(self, frames: bytes) -> bool:
        """Add ``frames`` to the outbox and write the outbox as far as the pipe takes it now
        (the caller holds the writer's ``done``); True when all of it is written, or the
        child is gone (its reader counts what it had not answered)."""
        if frames and not self.outbox and not self.dead:  # the usual case: no copy
            try:
                written = os.write(self.fd, frames)
            except BlockingIOError:
                written = 0
            except OSError:  # a broken pipe: the child is gone, its reader sees it
                return True
            if written == len(frames):
                return True
            frames = frames[written:]
        self.outbox += frames
        while self.outbox and not self.dead:
            try:
                del self.outbox[: os.write(self.fd, self.outbox)]
            except BlockingIOError:
                return False
            except OSError:  # a broken pipe: the child is gone, its reader sees it
                self.outbox.clear()
        return True

    def wake(self) -> None:
        """End the child's linger, if it lingers (a byte on its wake pipe; a full pipe
        already holds one, and a child gone has no linger to end)."""
        with self.writer.done, contextlib.suppress(OSError):
            if self._wake >= 0:
                os.write(self._wake, b"!")

    def end(self) -> None:
        """Close the pipe (the child writes what it has and exits) and wait for it, a while:
        a child still writing (a log locked by another process) finishes on its own."""
        assert self.process.stdin is not None
        with self.writer.done:
            self.dead = True  # nothing more goes to it
            self._close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(self.writer.exit_wait_s)

    def _close(self) -> None:
        """Close the pipes to the child, once (the caller holds the writer's ``done``):
        nothing is written to them from now on."""
        assert self.process.stdin is not None
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        if self._wake >= 0:
            os.close(self._wake)
            self._wake = -1

    def _read(self) -> None:
        assert self.process.stdout is not None
        fd, rest = self.process.stdout.fileno(), b""
        while chunk := os.read(fd, 1 << 16):  # a group's answers come in one write
            *lines, rest = (rest + chunk).split(b"\n")
            whys = [None if a == b"+" else a[1:].decode("utf-8", "replace") for a in lines]
            with self.writer.done:
                self.sent -= len(whys)
            self.writer.settle(whys)
        self.process.stdout.close()
        self.process.wait()
        assert self.process.stdin is not None
        with self.writer.done:
            self.dead, lost, self.sent = True, self.sent, 0
            self._close()
        if lost:
            code = self.process.returncode
            _LOG.error(
                "agenttrail capture: the writer process exited (%s); %d exchange%s not recorded",
                code,
                lost,
                "" if lost == 1 else "s",
            )
            self.writer.lose(lost)


def serve_child() -> None:
    """The writer process's main: read the capture's arguments, then write the items
    (:class:`ProcessWriter`), those waiting together as one group, and answer each (``+``, or
    ``-`` and why not) once its group is written, until the pipe closes. An answer the parent
    is no longer there to read is not an error: the items already sent are still written."""
    from agenttrail.ingest.capture import Capture  # the child's only import of the core

    with contextlib.suppress(AttributeError, OSError):
        os.nice(_NICE)
    frames = _Frames(sys.stdin.fileno(), wake=int(sys.argv[1]))
    config = frames.take(wait=True)
    if config is None:
        return
    # A thread writer that never starts: the child writes its groups itself, puts nothing.
    capture = Capture(**pickle.loads(config), writer="thread")
    try:
        while group := frames.group():
            whys = capture.write_group([from_wire(frame) for frame in group])
            answers = b"".join(
                b"+\n" if why is None else b"-" + why.replace("\n", " ").encode() + b"\n"
                for why in whys
            )
            with contextlib.suppress(OSError):  # the parent is gone; go on with what it sent
                _write_all(sys.stdout.fileno(), answers)
    finally:
        capture.close()


class _Frames:
    """The frames coming down a pipe ``fd``, read as they are there; a byte on the pipe
    ``wake`` (a flush) ends a linger of ``linger_s`` seconds (:data:`_LINGER_S`)."""

    def __init__(self, fd: int, *, wake: int, linger_s: float = _LINGER_S) -> None:
        self.fd = fd
        self.wake = wake
        self.linger_s = linger_s
        self.buffer = bytearray()
        self.ended = False
        self.last = float("-inf")
        """When the previous group was taken (``time.monotonic``)."""

    def group(self) -> list[bytes]:
        """The next frame (waiting for it), and every further frame there by then, up to
        :data:`GROUP`; empty at the pipe's end (a frame cut short included). While exchanges
        keep coming, "by then" is :attr:`linger_s` after the first, or a flush's wake-up if
        it comes sooner (a wake-up that came while a group was written ends the next
        linger: what the flush waits for may still be coming down the pipe)."""
        first = self.take(wait=True)
        if first is None:
            return []
        busy = time.monotonic() - self.last < _BUSY_S
        if busy and select.select([self.wake], [], [], self.linger_s)[0]:
            os.read(self.wake, 1 << 10)  # every flush so far is answered by this group
        frames = [first]
        while len(frames) < GROUP and (frame := self.take(wait=False)) is not None:
            frames.append(frame)
        self.last = time.monotonic()
        return frames

    def take(self, *, wait: bool) -> bytes | None:
        """The next frame; ``None`` when none is there (``wait``: at the pipe's end)."""
        while True:
            if len(self.buffer) >= _FRAME.size:
                (size,) = _FRAME.unpack_from(self.buffer)
                if len(self.buffer) >= _FRAME.size + size:
                    frame = bytes(self.buffer[_FRAME.size : _FRAME.size + size])
                    del self.buffer[: _FRAME.size + size]
                    return frame
            if self.ended or not (wait or select.select([self.fd], [], [], 0)[0]):
                return None
            chunk = os.read(self.fd, 1 << 16)
            self.ended = not chunk
            self.buffer += chunk


def _waiting(items: queue.SimpleQueue[Any], timeout: float | None = None) -> list[Any]:
    """The next item (waiting up to ``timeout`` seconds: :class:`queue.Empty`), and those
    queued behind it, up to :data:`GROUP` or a stop."""
    group = [items.get(timeout=timeout)]
    while len(group) < GROUP and group[-1] is not _STOP:
        try:
            group.append(items.get_nowait())
        except queue.Empty:
            break
    return group


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (a pipe may take it in parts)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@atexit.register
def _flush_at_exit() -> None:
    """Exchanges captured just before the interpreter exits are still written (up to each
    writer's ``exit_wait_s``; a writer process then goes on with what it was sent)."""
    for writer in list(_WRITERS):
        writer.flush(writer.exit_wait_s)
