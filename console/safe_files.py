"""Files the console reads from the operator's disk and files it writes there, done safely.

Reads (config, profiles, env files, API key files, prompts) take only a regular file of bounded
size that is UTF-8 text: ``--config /dev/zero`` must not read forever, a FIFO must not block the
console, ``import-env /bin/ls`` is one line, not a traceback. The file is opened non-blocking and
checked with ``fstat`` on the open descriptor (no check-then-open race).

Writes (``bundle``, ``import-env --out``, ``bench --out``) never follow a symlink and never replace anything but a
regular file: the data goes to a fresh temporary file created with ``O_EXCL|O_NOFOLLOW`` in the
target's directory, which is then renamed over the target (``rename`` replaces a name, it never
writes through a link at it).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

KIB = 1024
MIB = 1024 * KIB


def expand(path: str | os.PathLike) -> Path:
    """``Path(path).expanduser()`` that never raises: ``~nosuchuser/x`` stays as written (and is then
    simply not found) instead of ``RuntimeError: Could not determine home directory``."""
    p = Path(path)
    try:
        return p.expanduser()
    except RuntimeError:
        return p


class FileProblem(Exception):
    """Why a file cannot be used, in a few words (the caller adds the path and the field)."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "not a regular file"


def _size(n: int) -> str:
    return f"{n // MIB} MB" if n >= MIB and n % MIB == 0 else f"{n // KIB} KB" if n >= KIB else f"{n} bytes"


def read_bytes(path: str | os.PathLike, limit: int) -> bytes:
    """The whole content of a regular file of at most ``limit`` bytes; FileProblem otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise FileProblem("file not found") from None
    except OSError as exc:
        raise FileProblem(f"cannot open: {exc.strerror or exc}") from None
    except ValueError:  # an embedded NUL in the name
        raise FileProblem("the path is not valid") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileProblem(f"is {_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise FileProblem(f"is larger than {_size(limit)} ({st.st_size:,} bytes)")
        chunks, total = [], 0
        while True:  # the size may change under us: never read past the limit
            chunk = os.read(fd, min(MIB, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise FileProblem(f"is larger than {_size(limit)}")
        return b"".join(chunks)
    except OSError as exc:
        raise FileProblem(f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike, limit: int) -> str:
    """``read_bytes`` decoded as UTF-8 text without NUL bytes (binary files are refused)."""
    data = read_bytes(path, limit)
    if b"\x00" in data:
        raise FileProblem("is a binary file, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileProblem(f"is not UTF-8 text (byte {exc.start + 1:,})") from None


def check_target(path: Path, force: bool) -> None:
    """A path ``write_replacing`` may write: absent, or (with ``force``) an existing regular file.
    Never a symlink, a directory, a FIFO or a device."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise FileProblem(f"cannot inspect: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        raise FileProblem("is a symlink (refusing to write through it)")
    if not stat.S_ISREG(st.st_mode):
        raise FileProblem(f"is {_kind(st.st_mode)} (refusing to replace it)")
    if not force:
        raise FileProblem("exists (use --force to replace it)")


def write_replacing(path: str | os.PathLike, write: Callable[[BinaryIO], None], force: bool = False,
                    mode: int = 0o600) -> None:
    """Write a file through ``write(fileobj)`` into a fresh ``O_EXCL|O_NOFOLLOW`` temporary file in
    the target's directory, then rename it over ``path`` (see ``check_target``). On any failure the
    temporary file is removed and the target is untouched."""
    target = Path(path)
    check_target(target, force)
    directory = target.parent
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(16):
        tmp = directory / f".{target.name}.{os.urandom(6).hex()}.part"
        try:
            fd = os.open(tmp, flags, mode)
            break
        except FileExistsError:
            continue
        except OSError as exc:
            raise FileProblem(f"cannot create a file in {directory}: {exc.strerror or exc}") from None
    else:
        raise FileProblem(f"cannot create a temporary file in {directory}")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        check_target(target, force)  # still nothing but a regular file (or nothing) there
        os.rename(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def prepare_target(path: str | os.PathLike, force: bool = False) -> Path:
    """Check, before the work that produces it (a sweep, a collection), that ``path`` can be written by
    ``write_replacing``: its directory exists (never created silently) and takes a new file (a probe
    file is created and removed: root passes every permission test but a read-only mount), and the
    target itself passes ``check_target``. Returns the path; FileProblem says why not."""
    target = expand(path)
    directory = target.parent
    try:
        if not directory.is_dir():
            raise FileProblem(f"directory {directory} does not exist (create it first)")
        check_target(target, force)
        probe = directory / f".{target.name}.{os.urandom(6).hex()}.probe"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        os.close(os.open(probe, flags, 0o600))
        os.unlink(probe)
    except OSError as exc:
        raise FileProblem(f"cannot write in {directory}: {exc.strerror or exc}") from None
    except ValueError:  # an embedded NUL
        raise FileProblem("the path is not valid") from None
    return target
