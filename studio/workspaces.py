"""Which directories a person may point a session at, and which paths Studio keeps to itself.

New sessions get a fresh workspace ``<base>/<session id>``, where the *workspaces base* is
``STUDIO_WORKDIR_ROOT`` when it is set, else ``<data dir>/workspaces``. A folder directly under
the base belongs to the person whose session is named by it, so a workdir under the base must
lie in a workspace of one of the person's own sessions, and the base itself — which shows every
person's workspaces — is refused. With ``STUDIO_WORKDIR_ROOT`` set, nothing outside it is a
workdir. Folders staff list in ``STUDIO_SHARED_WORKDIRS`` are open to everyone.

Sessions whose tools are confined (``studio.confinement``: people who are not staff, by default)
may only work in such managed places — a workspace of their own or a shared folder — and never
in a path that is, holds or lies in Studio's own data (the data directory, the database, the
secret and credentials keys): the sandbox makes the workdir writable and visible, and a system
directory there would be a way out. Sessions on the server may also use any other existing
directory when no ``STUDIO_WORKDIR_ROOT`` is set.

Every decision is made on the real path (``..``, ``~`` and symlinks resolved), and a path that is
not valid UTF-8 is refused (the database could not store it). Errors are ``WorkdirError`` with a
message for the form's *Working directory* field.
"""

from __future__ import annotations

import os
from collections.abc import Container, Iterable
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class WorkdirError(ValueError):
    """A working directory this person may not use; the message names the reason."""


def data_dir() -> Path:
    return Path(os.path.realpath(settings.STUDIO_DATA_DIR))


def workspaces_base() -> Path:
    """Where fresh workspaces go: ``STUDIO_WORKDIR_ROOT``, else ``<data dir>/workspaces``."""
    root = settings.STUDIO_WORKDIR_ROOT
    return Path(os.path.realpath(root)) if root else data_dir() / "workspaces"


def shared_workdirs() -> tuple[Path, ...]:
    """``STUDIO_SHARED_WORKDIRS``: folders every person may work in (checked at start-up)."""
    raw = getattr(settings, "STUDIO_SHARED_WORKDIRS", ()) or ()
    items = [part.strip() for part in raw.split(",")] if isinstance(raw, str) else [str(p) for p in raw]
    return tuple(Path(os.path.realpath(item)) for item in items if item)


def protected_paths() -> tuple[Path, ...]:
    """What no session may see: the data dir, the database (and its WAL), the key files and
    the workspaces base (it shows every person's workspaces; a workspace *inside* it is fine)."""
    return _resolved(_protected_sources())


def _resolved(paths: Iterable[Path]) -> tuple[Path, ...]:
    return tuple(dict.fromkeys(Path(os.path.realpath(p)) for p in paths))


def _protected_sources() -> tuple[Path, ...]:
    """``protected_paths()`` as the settings name them, before any is resolved."""
    root = settings.STUDIO_WORKDIR_ROOT
    data = Path(settings.STUDIO_DATA_DIR)
    paths = [data, Path(root) if root else data / "workspaces"]
    database = settings.DATABASES["default"]
    name = str(database.get("NAME") or "")
    if "sqlite" in str(database.get("ENGINE")) and os.path.isabs(name):
        paths += [Path(name + suffix) for suffix in ("", "-wal", "-shm", "-journal")]
    secret_key_file = getattr(settings, "STUDIO_SECRET_KEY_FILE", "") or ""
    if secret_key_file:
        paths.append(Path(secret_key_file))
    from studio.credentials import key_file

    paths.append(key_file())
    return tuple(paths)


class ProtectedPaths:
    """``protected_paths()`` kept for as long as the settings it is read from stay the same: a
    host asks for it at every opening (the workdir check and the sandbox's hidden paths), and its
    eight ``realpath`` calls cost ~0.5 ms there, ~1 ms with fifty pages opening at once.

    Why keeping them is sound: they are Studio's own data directory, database files and key
    files, made before the first session opens; a real path of one changes only when an admin
    moves Studio's data, which the open database connection and key cache do not follow either
    (Studio is restarted for it). A host owns one (no process-wide state), keyed by the paths as
    the settings name them, so a test that changes these settings gets the new paths."""

    def __init__(self) -> None:
        self._key: tuple[Path, ...] | None = None
        self._paths: tuple[Path, ...] = ()

    def get(self) -> tuple[Path, ...]:
        key = _protected_sources()
        if key != self._key:
            self._paths, self._key = _resolved(key), key
        return self._paths


def fresh_workspace(session_id: str) -> str:
    path = workspaces_base() / session_id
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


def resolve_workdir(raw: str, session_id: str, *, owner_sessions: Iterable[str], confined: bool) -> str:
    """The real path of the directory a new session ``session_id`` works in (a fresh workspace
    when ``raw`` is blank). ``owner_sessions``: ids of the person's other sessions; ``confined``:
    the session's tools are confined (only managed places are allowed)."""
    text = raw.strip()
    if not text:
        return fresh_workspace(session_id)
    if "\x00" in text or not _utf8(text):
        raise WorkdirError("The path is not valid text (it contains a NUL byte or is not UTF-8).")
    path = Path(os.path.expanduser(text))
    if not path.is_absolute():
        raise WorkdirError("Use an absolute path.")
    resolved = Path(os.path.realpath(path))
    if not _utf8(str(resolved)):
        raise WorkdirError("The directory's real path is not valid UTF-8.")
    if not resolved.is_dir():
        raise WorkdirError("No such directory.")
    problem = workdir_problem(resolved, {session_id, *owner_sessions}, confined=confined)
    if problem is not None:
        raise WorkdirError(problem)
    return str(resolved)


def workdir_problem(
    path: Path, own_sessions: Container[str], *, confined: bool, protected: tuple[Path, ...] | None = None
) -> str | None:
    """Why ``path`` (a real path) is not a workdir for a person owning ``own_sessions``, or None.
    ``protected``: ``protected_paths()`` when the caller has it already (default: read here).

    Every session keeps to its person's own workspaces under the base. A confined session also
    keeps away from Studio's data and from any other place than a workspace or a shared folder;
    a session on the server (staff) may use a folder that holds Studio's data — a checkout with
    the default ``.studio-data`` in it — since its bash reads what the Studio process can anyway."""
    base = workspaces_base()
    if confined:
        hidden = protected_paths() if protected is None else protected
        if any(_contains(path, p) for p in hidden if p != base):
            return "This directory is (or holds) Studio's own data: pick another one."
    if path == base or (confined and _contains(path, base)):
        return (
            f"{base} holds every person's workspaces: pick your own workspace inside it, "
            "or leave the field blank for a new one."
        )
    if any(_contains(shared, path) for shared in shared_workdirs()):
        return None
    if _contains(base, path):
        owner = path.relative_to(base).parts[0]
        if owner not in own_sessions:
            return f"{base / owner} is not a workspace of one of your sessions."
        return None
    if confined and _contains(data_dir(), path):
        return "This directory is inside Studio's data directory: pick another one."
    root = settings.STUDIO_WORKDIR_ROOT
    if root and not _contains(Path(os.path.realpath(root)), path):
        return f"The workdir must be inside {root} (one of your workspaces) or a shared folder."
    if confined and not root:
        return (
            "Your session's tools run confined to its workspace: leave the field blank for a new "
            "workspace, or pick one of your workspaces or a shared folder."
        )
    return None


def check_shared_workdirs() -> None:
    """Start-up check: shared folders exist and show none of Studio's own data."""
    for shared in shared_workdirs():
        if not shared.is_dir():
            raise ImproperlyConfigured(f"STUDIO_SHARED_WORKDIRS: {shared} is not a directory")
        if _contains(data_dir(), shared) or any(_contains(shared, protected) for protected in protected_paths()):
            raise ImproperlyConfigured(
                f"STUDIO_SHARED_WORKDIRS: {shared} holds or lies in Studio's own data (its data directory, "
                "database, keys or every person's workspaces); share a folder that does not"
            )


def _contains(directory: Path, path: Path) -> bool:
    return path == directory or path.is_relative_to(directory)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
