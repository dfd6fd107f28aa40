"""The ``agenttrail`` command. Each command parses its arguments, calls the library and prints.

Data goes to stdout and messages to stderr, so ``agenttrail export … | jq`` works. Every
agenttrail error ends as one ``error: …`` line on stderr and exit code 2 for bad input or usage,
1 for a check that found a problem (``verify``, ``reconcile``, ``claims``) or a store failure —
never a traceback.

The commands live in one module per group: :mod:`.log` (import, sessions, show, export,
fountain, replay), :mod:`.quickstart` (quickstart), :mod:`.evidence` (verify, reconcile,
claims, traces, trace, keygen, checkpoint), :mod:`.admin` (retain, erase, serve, proxy,
token, migrate), :mod:`.report` (usage, diff), :mod:`.watch` (watch) and :mod:`.push` (push);
:mod:`._options` and :mod:`._common` hold the options and helpers they share. This module runs
the app that :mod:`._app` builds from them, of the one command given (:func:`._app.app_for`);
``agenttrail --version`` is answered before Typer and Rich are imported (the start-up is
measured in bench/scale.py).
"""

from __future__ import annotations

import errno
import os
import re
import signal
import sys
from typing import TYPE_CHECKING, Any

from agenttrail import __version__
from agenttrail.errors import AgentTrailError, FormatError

if TYPE_CHECKING:
    from agenttrail.cli._app import app

__all__ = ["app", "main"]


def __getattr__(name: str) -> Any:
    if name == "app":
        from agenttrail.cli._app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code (``agenttrail`` console script).

    A usage error (an unknown option, a value out of range) and an :class:`AgentTrailError`
    each become one ``error: …`` line on stderr and the error's exit code (2 for usage); so
    does a failed system call no command turned into an error (exit 1): standard output that
    cannot be written (a full disk, ``> /dev/full``) above all.
    """
    # Die quietly when the reader of our output goes away (`agenttrail export … | head`),
    # as Unix tools do, instead of a broken-pipe error at exit. `serve` ignores SIGPIPE
    # again once it has printed its address (cli/admin.py): its sockets must not kill it.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = sys.argv[1:] if argv is None else argv
    try:
        code = _run(args)
        sys.stdout.flush()  # a write that fails fails here, not at exit
        return code
    except OSError as e:
        from agenttrail.cli._common import err

        if e.filename is None and e.errno in _WRITE_FAILURES:  # standard output's (below)
            _discard_stdout()
            err.print(f"error: cannot write standard output: {e.strerror}", markup=False)
        else:
            where = f"{e.filename}: " if e.filename is not None else ""
            err.print(f"error: {where}{e.strerror or e}", markup=False)
        return 1


def _run(args: list[str]) -> int:
    """Run the command ``args`` names and return its exit code, its errors said as
    :func:`main` says (a failed system call is raised to :func:`main`)."""
    if args == ["--version"]:
        # what the app's eager --version option prints, without importing Typer and Rich
        sys.stdout.write(f"agenttrail {__version__}\n")
        return 0
    import typer

    from agenttrail.cli._app import app_for
    from agenttrail.cli._common import err

    try:
        code = app_for(args)(args=args, prog_name="agenttrail", standalone_mode=False)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    except AgentTrailError as e:
        err.print(f"error: {_said(e)}", markup=False)
        return e.exit_code
    except typer.TyperException as e:  # Click's usage errors, raised as such without standalone
        where = getattr(getattr(e, "ctx", None), "command_path", "agenttrail")
        message = _plain(_redacted(e.format_message()).replace("\n", " "))
        option = getattr(e, "option_name", None)
        if where == "agenttrail" and type(e).__name__ == "NoSuchOption" and option:
            # Typer's own copy of Click's class: an option of a command given before it
            message += f"; a command's options go after its name: agenttrail COMMAND {option}"
        if message:  # none when the help was printed instead (no command given)
            err.print(f"error: {message} ({where} --help)", markup=False)
        return e.exit_code
    except typer.Abort:  # Ctrl-D at a prompt
        err.print("error: aborted", markup=False)
        return 1
    return code if isinstance(code, int) else 0


_WRITE_FAILURES = frozenset((errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO))
"""A write's failures: a command's own files are named when one fails (``write_output``), so
one without a name is standard output's (a full disk, a quota, ``> /dev/full``)."""


def _discard_stdout() -> None:
    """Send what standard output still holds to /dev/null: its flush at exit would fail as
    the write did ("Exception ignored", exit 120)."""
    try:
        descriptor = sys.stdout.fileno()
    except (OSError, ValueError):  # not a file (a test's buffer), or closed
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, descriptor)
    os.close(null)


def _plain(message: str) -> str:
    """Click's usage error in the words agenttrail's own errors use: ``--limit 0: must be 1 or
    more``, not ``Invalid value for '--limit': 0 is not in the range x>=1.``; ``missing
    argument SESSION``; the first word lower case and no closing period."""
    if found := re.fullmatch(
        r"Invalid value for '([^']+)': (.+?) is not in the range (\S+?)\.?", message
    ):
        option, value, bounds = found.groups()
        for pattern, said in _BOUNDS:
            if limits := re.fullmatch(pattern, bounds):
                return f"{option} {value}: must be {said.format(*limits.groups())}"
        return f"{option} {value}: not in the range {bounds}"
    if found := re.fullmatch(r"Missing (argument|option) '([^']+)'\.?", message):
        return f"missing {found[1]} {found[2]}"
    if found := re.fullmatch(r"Invalid value for '([^']+)': (.+)", message):
        message = f"{found[1]}: {found[2]}"
    message = re.sub(r" \(Possible options: (.+)\)$", r"; did you mean \1?", message)
    if message[:1].isupper() and message[1:2].islower():
        message = message[0].lower() + message[1:]
    return message.removesuffix(".")


_BOUNDS = (
    (r"x>=(.+)", "{} or more"),
    (r"x<=(.+)", "{} or less"),
    (r"x>(.+)", "more than {}"),
    (r"x<(.+)", "less than {}"),
    (r"(.+)<=x<=(.+)", "from {} to {}"),
)
"""Click's ranges (``IntRange``, ``FloatRange``) and how they are said."""


def _said(error: AgentTrailError) -> str:
    """The line an error prints: its message with secrets redacted (it can quote input: a
    URL given with its key, a line of a file), and its notes (where it was, ``open_log``).

    A malformed file's place (:class:`FormatError`: its path, line and field) is printed as
    it is: a file named like a secret field (``/etc/passwd: unknown format``) would read as
    that field and its value, and the message lose what it says."""
    notes = "; ".join(getattr(error, "__notes__", ()))
    if isinstance(error, FormatError) and error.where:
        text = f"{error.where}: {_redacted(error.reason)}"
    else:
        text = _redacted(str(error))
    return f"{text} ({_redacted(notes)})" if notes else text


def _redacted(message: str) -> str:
    """``message`` with secrets redacted (:func:`agenttrail.log.redact.redacted_text`), its
    detectors imported only when there is an error to print, not at every start-up."""
    from agenttrail.log.redact import redacted_text

    return redacted_text(message)
