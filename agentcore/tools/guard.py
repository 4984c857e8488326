"""Path confinement for the file tools (SPEC T2).

Policies:

* ``read-only`` — write, edit and bash are not exposed at all (see ``selection``); the file
  tools that remain are confined exactly like ``workspace``.
* ``workspace`` (default) — read, write, edit, ls, grep and find may only touch paths inside
  ``workdir`` or one of ``allowed_directories``.
* ``auto`` — the file tools may touch any path the host user can.

``bash`` is never path-confined: it runs as the host user in ``workdir``, and the command can
read and write anything that user can. Only a host-side sandbox limits a command.

The decision is made on ``os.path.realpath`` of the requested path, so ``..``, absolute paths
and symlinks (including symlinked parent directories) cannot lead out of the workspace; a
symlink loop stays where it is and fails when opened. Between that check and the open the
file system can change (a directory or the file itself swapped for a symlink). ``open_file``
closes that window: it walks the checked real path from ``/`` one component at a time with
``O_NOFOLLOW``, so the file it opens is exactly the one that was checked, or it fails.

Names that are not UTF-8 are shown as ``\\xNN`` escapes (``display``), and a path argument
written that way reaches the real file: ``resolve`` maps escapes back to bytes, component by
component, when the literal name does not exist but the byte name does (``address_path``).

An execution environment (``environment``) decides on the *target*: the guard is built where
the files are, from a ``PathScope`` (the policy as plain data), and a remote target adds a
``boundary`` (its root) that no policy — not even ``auto`` — can leave.

Not covered: a hard link inside the workspace to an outside file looks like an inside file
(only ``bash`` or the host could have made one).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, TypeAlias, get_args

from agentcore.errors import InputValidationError, ToolError
from agentcore.tools.display import address_path, display_name

PermissionPolicy: TypeAlias = Literal["read-only", "workspace", "auto"]
PERMISSION_POLICIES: Final[tuple[str, ...]] = get_args(PermissionPolicy)

NAME_MAX: Final = 255  # bytes per path component (Linux, macOS)
PATH_MAX: Final = 4096  # bytes per whole path (Linux)

_DIR_FLAGS: Final = os.O_DIRECTORY | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)


def validate_policy(policy: str, field: str = "permission_policy") -> PermissionPolicy:
    if policy not in PERMISSION_POLICIES:
        raise InputValidationError(
            f"{field} must be one of {', '.join(PERMISSION_POLICIES)}; got {policy!r}", field=field
        )
    return policy  # type: ignore[return-value]


def validate_path_text(path: str) -> None:
    """Refuse paths no file system call could take, with a message the model can act on.

    Lengths are counted in the bytes the path stands for (surrogate escapes count one byte).
    """
    if not isinstance(path, str) or path == "":
        raise ToolError("path must be a non-empty string")
    shown = display_name(path)
    if "\x00" in path:
        raise ToolError(f"path {shown!r} contains a NUL byte; file names cannot contain NUL")
    try:
        raw = os.fsencode(path)
    except UnicodeEncodeError as exc:
        raise ToolError(f"path '{shown}' is not valid Unicode: {exc.reason}") from None
    if len(raw) > PATH_MAX:
        raise ToolError(f"path is too long ({len(raw)} bytes; the limit is {PATH_MAX}): '{shown[:80]}'…")
    for part in raw.split(b"/"):
        if len(part) > NAME_MAX:
            name = display_name(os.fsdecode(part))[:60]
            raise ToolError(
                f"path component '{name}'… is too long ({len(part)} bytes; a file name may have at most "
                f"{NAME_MAX} bytes)"
            )


def describe_os_error(exc: OSError, path: str) -> str:
    """A short, model-readable explanation of a failed file system call."""
    reasons = {
        errno.ENOENT: "does not exist",
        errno.ENOTDIR: "has a part that is not a directory",
        errno.EISDIR: "is a directory",
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
        errno.ELOOP: "involves a symbolic link loop (or a symbolic link where none is allowed)",
        errno.ENAMETOOLONG: "is too long (ENAMETOOLONG)",
        errno.ENOSPC: "no space left on device",
        errno.EROFS: "is on a read-only file system",
    }
    reason = reasons.get(exc.errno or 0, exc.strerror or str(exc))
    return f"{path}: {reason}"


@dataclass(frozen=True, slots=True)
class PathScope:
    """The permission policy of a call as plain data: what a target needs to build its own guard.

    ``workdir`` and ``allowed_directories`` are paths *on the target*, unresolved (relative
    allowed directories are taken from ``workdir`` there).
    """

    workdir: str
    policy: PermissionPolicy = "workspace"
    allowed_directories: tuple[str, ...] = ()


class PathGuard:
    """Resolves tool paths and enforces the permission policy; one per run.

    ``boundary`` (an execution environment's root) confines every path whatever the policy;
    ``readable`` is the set of files outside the roots that may still be read (bash's saved
    output), shared by the guards of one target. ``before_open`` is a seam for tests: it is
    called with the checked real path right before ``open_file`` opens it, so a test can swap
    in a symlink deterministically.
    """

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        policy: PermissionPolicy = "workspace",
        allowed_directories: Iterable[str | os.PathLike[str]] | None = (),
        *,
        before_open: Callable[[Path], None] | None = None,
        boundary: str | os.PathLike[str] | None = None,
        readable: set[Path] | None = None,
    ) -> None:
        self.policy: PermissionPolicy = validate_policy(policy)
        given = os.path.abspath(workdir)
        self.workdir = Path(os.path.realpath(given))
        roots = [self.workdir]
        listed: list[str] = []
        for directory in allowed_directories or ():
            listed.append(os.fspath(directory))
            text = os.path.expanduser(listed[-1])
            if "\x00" in text:
                raise InputValidationError("allowed_directories entry contains a NUL byte", field="allowed_directories")
            real = Path(os.path.realpath(os.path.join(self.workdir, text)))
            if real not in roots:
                roots.append(real)
        self.roots: tuple[Path, ...] = tuple(roots)
        self.scope = PathScope(given, self.policy, tuple(listed))
        self.boundary = Path(os.path.realpath(boundary)) if boundary is not None else None
        self._readable_files: set[Path] = readable if readable is not None else set()
        self._before_open = before_open

    @property
    def confined(self) -> bool:
        return self.policy != "auto"

    @property
    def can_write(self) -> bool:
        return self.policy != "read-only"

    def allow_read_file(self, path: str | os.PathLike[str]) -> None:
        """Let the file tools read one file outside the roots (e.g. bash's saved full output)."""
        self._readable_files.add(Path(os.path.realpath(path)))

    def is_allowed(self, real: Path, *, write: bool = False) -> bool:
        if not write and real in self._readable_files:
            return True
        if not self.within_boundary(real):
            return False
        if not self.confined:
            return True
        return any(real == root or real.is_relative_to(root) for root in self.roots)

    def within_boundary(self, real: Path) -> bool:
        return self.boundary is None or real == self.boundary or real.is_relative_to(self.boundary)

    def resolve(self, path: str, *, write: bool = False) -> Path:
        """The real path of ``path`` (relative paths are taken from ``workdir``), or a ToolError.

        The file does not need to exist. Confinement is decided on the fully resolved path.
        ``\\xNN`` escapes in ``path`` reach names that are not UTF-8 (``address_path``).
        """
        shown = path  # messages quote the argument as the model wrote it
        if isinstance(path, str) and path and "\x00" not in path:
            expanded = os.path.expanduser(path) if path.startswith("~") else path
            path = address_path(expanded, str(self.workdir))
        validate_path_text(path)
        if write and not self.can_write:
            raise ToolError(f"cannot modify {shown}: the permission policy is read-only")
        joined = os.path.join(self.workdir, path)
        try:
            real = Path(os.path.realpath(joined))
        except OSError as exc:  # pragma: no cover - realpath(strict=False) rarely raises
            raise ToolError(describe_os_error(exc, shown)) from None
        if not self.is_allowed(real, write=write):
            where = ", ".join(display_name(root) for root in self.roots)
            inside_roots = any(real == root or real.is_relative_to(root) for root in self.roots)
            if self.boundary is not None and (inside_roots or not self.confined):
                raise ToolError(
                    f"access denied: {shown} resolves to {display_name(real)}, which is outside the root of this "
                    f"execution environment ({display_name(self.boundary)}); no permission policy reaches past it."
                )
            raise ToolError(
                f"access denied: {shown} resolves to {display_name(real)}, which is outside the workspace "
                f"({where}). The permission policy '{self.policy}' confines file tools to the workspace."
            )
        return real

    def display(self, real: Path) -> str:
        """How a path is shown to the model: relative to workdir when inside it, with bytes that
        are not UTF-8 as ``\\xNN`` escapes (which ``resolve`` accepts back)."""
        if real == self.workdir:
            return "."
        if real.is_relative_to(self.workdir):
            return display_name(real.relative_to(self.workdir))
        return display_name(real)

    def open_file(
        self,
        path: str,
        flags: int,
        *,
        write: bool = False,
        create_parents: bool = False,
        mode: int = 0o644,
    ) -> tuple[int, Path]:
        """Resolve, check and open ``path`` without following any symlink after the check.

        Returns ``(fd, real_path)``. The parent directory is reached by walking the checked
        real path with ``O_NOFOLLOW`` from ``/`` (creating missing directories when
        ``create_parents``), and the final component is opened with ``O_NOFOLLOW`` relative
        to it. If anything on that path became a symlink after the check, the open fails
        with a ToolError and nothing is touched.
        """
        real = self.resolve(path, write=write)
        if self._before_open is not None:
            self._before_open(real)
        if real.parent == real:  # the file system root has no parent to walk
            try:
                return os.open(real, flags | os.O_CLOEXEC, mode), real
            except OSError as exc:
                raise ToolError(describe_os_error(exc, path)) from None
        parent_fd = self._open_parent(real, path, create=create_parents)
        try:
            fd = os.open(real.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ToolError(
                    f"refusing {path}: {display_name(real)} is a symbolic link (it changed after the permission check "
                    "or is a link loop); nothing was touched"
                ) from None
            raise ToolError(describe_os_error(exc, path)) from None
        finally:
            os.close(parent_fd)
        return fd, real

    def _open_parent(self, real: Path, shown: str, *, create: bool) -> int:
        fd = os.open("/", _DIR_FLAGS)
        try:
            for part in real.parent.parts[1:]:
                next_fd = self._open_child_dir(fd, part, real, shown, create=create)
                os.close(fd)
                fd = next_fd
            return fd
        except BaseException:
            os.close(fd)
            raise

    @staticmethod
    def _open_child_dir(fd: int, part: str, real: Path, shown: str, *, create: bool) -> int:
        for _attempt in range(2):
            try:
                child = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise ToolError(f"{shown}: directory {display_name(real.parent)} does not exist") from None
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass  # created concurrently; open it on the next attempt
                except OSError as exc:
                    raise ToolError(describe_os_error(exc, shown)) from None
                continue
            except OSError as exc:
                if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                    raise ToolError(
                        f"refusing {shown}: a directory on the way to {display_name(real)} is not a plain directory "
                        "(a symbolic link or file appeared after the permission check); nothing was touched"
                    ) from None
                raise ToolError(describe_os_error(exc, shown)) from None
            if not stat.S_ISDIR(os.fstat(child).st_mode):  # pragma: no cover - O_DIRECTORY guarantees this
                os.close(child)
                raise ToolError(f"refusing {shown}: {display_name(part)} is not a directory")
            return child
        raise ToolError(f"{shown}: could not create directory {display_name(part)}")  # pragma: no cover
