"""The workspace: the folder the user's file tools are confined to, and the only way they touch it.

Confinement is checked on what is opened, not on a path checked before it is opened, so that
nothing changed in between (a folder swapped for a symbolic link) can lead out:

- a path is first resolved (``..`` and the symbolic links it follows stay inside: anything that
  resolves outside is refused), then every folder on the way is opened with ``openat`` from the
  one before it and ``O_NOFOLLOW``, so a link that appears after the check is refused, not
  followed;
- a file is opened the same way and checked with ``fstat`` on the opened descriptor: a regular
  file with one name only (a hard link shares its content with a name that may be outside);
- a file is written by writing a new file beside it and renaming it over the name, never through
  the existing one (so a hard link's other names keep their content).

Every failure is a :class:`~agenttrail.errors.ToolError` naming the path (clipped when long) and
what is wrong; the rules are in docs/server.md, The user's own tools.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

from agenttrail.errors import ToolError

__all__ = ["Workspace", "shown"]

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; it is refused by
# fstat right after (not a regular file). It changes nothing for regular files.
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

_SHOWN_CHARS = 60
"""Characters of a long path an error message shows: a message stays one readable line even
for a path of thousands of characters."""


def shown(path: str) -> str:
    """``path`` quoted for an error message, clipped to its first characters when long."""
    if len(path) <= 3 * _SHOWN_CHARS:
        return repr(path)
    return f"{path[:_SHOWN_CHARS]!r}… ({len(path):,} characters)"


def _failure(path: str, error: OSError) -> ToolError:
    """An operating-system error met on ``path``, as a tool error naming it."""
    return ToolError(f"path {shown(path)}: {error.strerror or error}")


class Workspace:
    """A folder and the files in it, reached only through paths that stay inside it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _parts(self, path: str) -> tuple[Path, tuple[str, ...]]:
        """The resolved root and the names that lead from it to ``path``.

        Raises:
            ToolError: a NUL character, an absolute path, a loop of links, or a path that
                leads outside the root.
        """
        if "\x00" in path:
            raise ToolError(f"path {shown(path)} holds a NUL character")
        if Path(path).is_absolute():
            raise ToolError(
                f"path {shown(path)}: absolute paths are refused; name a path in the workspace"
            )
        base = self.root.resolve()
        try:
            target = (base / path).resolve()
        except RuntimeError:  # Python < 3.13 raises this for a loop of symbolic links
            raise _failure(path, OSError(errno.ELOOP, os.strerror(errno.ELOOP))) from None
        except OSError as e:
            raise _failure(path, e) from None
        except ValueError:  # a lone surrogate, which no file name can hold
            raise ToolError(f"path {shown(path)} is not a name a file can have") from None
        if not target.is_relative_to(base):
            raise ToolError(f"path {shown(path)} leads outside the workspace")
        return base, target.relative_to(base).parts

    @contextlib.contextmanager
    def _folder(self, base: Path, names: tuple[str, ...], *, create: bool = False) -> Iterator[int]:
        """A descriptor of the folder ``names`` leads to from ``base``, each step opened from
        the one before with ``O_NOFOLLOW`` (a link that appeared since the path was resolved is
        refused: ``ENOTDIR`` on Linux, ``ELOOP`` elsewhere); with ``create``, missing folders
        are made on the way."""
        fd = os.open(base, _FOLDER)
        try:
            for name in names:
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, dir_fd=fd)
                step = os.open(name, _FOLDER, dir_fd=fd)
                os.close(fd)
                fd = step
            yield fd
        finally:
            os.close(fd)

    def read_bytes(self, path: str, *, limit: int) -> bytes:
        """The bytes of the file at ``path``, at most ``limit`` of them.

        The size is checked with ``fstat`` on the opened file before a byte is read, and at
        most ``limit + 1`` bytes are read (a file that grew meanwhile is refused too).

        Raises:
            ToolError: no such file, not a regular file, a file with more than one hard link,
                a file above ``limit`` bytes, or an OS error, each naming the path.
        """
        missing = ToolError(f"no file {shown(path)} in the workspace")
        base, names = self._parts(path)
        if not names:
            raise missing
        above = f"above the read limit of {limit:,} bytes (AGENTTRAIL_MAX_READ_BYTES)"
        try:
            with self._folder(base, names[:-1]) as folder:
                fd = os.open(names[-1], _READ, dir_fd=folder)
            try:
                info = os.fstat(fd)
                if stat.S_ISDIR(info.st_mode):
                    raise missing
                if not stat.S_ISREG(info.st_mode):
                    raise ToolError(f"path {shown(path)} is not a regular file")
                if info.st_nlink > 1:
                    # Another name of the same file may be outside the workspace, and nothing
                    # says where it is: such a file is not read.
                    raise ToolError(
                        f"path {shown(path)} has {info.st_nlink} hard links: a file with "
                        "another name may be outside the workspace, so it is not read"
                    )
                if info.st_size > limit:
                    raise ToolError(f"path {shown(path)} is {info.st_size:,} bytes, {above}")
                with open(fd, "rb", closefd=False) as file:
                    data = file.read(limit + 1)
            finally:
                os.close(fd)
        except (FileNotFoundError, NotADirectoryError):
            raise missing from None
        except OSError as e:
            raise _failure(path, e) from None
        if len(data) > limit:
            raise ToolError(f"path {shown(path)} grew as it was read, {above}")
        return data

    def write_bytes(self, path: str, data: bytes) -> None:
        """Make ``data`` the content of the file at ``path``, making folders as needed.

        The bytes go to a new file in the same folder, which is then renamed over ``path``:
        writing through the existing name would change its content under every name it has,
        and a hard link may give it one outside the workspace. The rename changes this folder's
        entry only; readers see the old file or the new one, never half of one; and a failed
        write leaves the old file as it was. The new file keeps the old one's permissions.

        Raises:
            ToolError: ``path`` is the workspace or a folder, or an OS error (naming the path).
        """
        base, names = self._parts(path)
        if not names:
            raise ToolError(f"path {shown(path)} is a folder, not a file")
        try:
            with self._folder(base, names[:-1], create=True) as folder:
                _replace(folder, names[-1], data, path)
        except OSError as e:
            raise _failure(path, e) from None

    def entries(self, path: str) -> list[str]:
        """The names in the folder at ``path``, sorted, folders with a trailing ``/``.

        Raises:
            ToolError: no such folder, or an OS error (naming the path).
        """
        base, names = self._parts(path)
        try:
            with self._folder(base, names) as folder, os.scandir(folder) as entries:
                return sorted(e.name + ("/" if e.is_dir() else "") for e in entries)
        except (FileNotFoundError, NotADirectoryError):
            raise ToolError(f"no folder {shown(path)} in the workspace") from None
        except OSError as e:
            raise _failure(path, e) from None


def _replace(folder: int, name: str, data: bytes, path: str) -> None:
    """Write ``data`` to a new file in ``folder`` and rename it over ``name`` (see
    :meth:`Workspace.write_bytes`); the new file is removed if anything fails."""
    try:
        old: os.stat_result | None = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None and stat.S_ISDIR(old.st_mode):
        raise ToolError(f"path {shown(path)} is a folder, not a file")
    mode = stat.S_IMODE(old.st_mode) if old is not None and stat.S_ISREG(old.st_mode) else 0o666
    temporary = f".agenttrail-{uuid.uuid4().hex}.tmp"  # short: the name may be at NAME_MAX
    fd = os.open(temporary, _CREATE, mode, dir_fd=folder)
    try:
        with open(fd, "wb") as file:
            file.write(data)
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder)
        raise
