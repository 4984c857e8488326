"""A private PostgreSQL cluster for the tests and benchmarks (never the system cluster).

``PostgresCluster.start()`` runs ``initdb`` and ``pg_ctl`` from Debian's ``postgresql`` package
(``python3 dev.py test`` installs it when ``/usr/lib/postgresql/*/bin/initdb`` is missing) on a
fresh temporary directory: trust authentication, a free TCP port on 127.0.0.1, the Unix socket
inside that directory. The server refuses to run as root, so as root both run through
``runuser -u postgres --`` on a directory chowned to ``postgres``. ``stop()`` is always
``pg_ctl stop -m immediate`` (nothing of a test cluster is worth a clean shutdown) and removes
the directory.

``durable=False`` (the tests) turns ``fsync``, ``synchronous_commit`` and ``full_page_writes``
off: the crash tests kill *clients*, never the server, so the server's own crash safety is not
under test and the shared machine is spared the fsyncs. Benchmarks use ``durable=True``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

INITDB_GLOB = "/usr/lib/postgresql/*/bin/initdb"


def find_bindir() -> Path:
    """The newest Debian PostgreSQL ``bin`` directory, else the one ``initdb`` on PATH lives in."""
    found = sorted(glob.glob(INITDB_GLOB), key=lambda p: [int(n) for n in re.findall(r"\d+", p)])
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(os.path.realpath(on_path)).parent
    raise RuntimeError(
        "PostgreSQL is not installed (no initdb): run `python3 dev.py test`, which installs Debian's "
        "`postgresql` package, or `apt-get install -y postgresql`"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresCluster:
    """One running private server; ``dsn`` reaches its ``postgres`` database as ``postgres``."""

    def __init__(self, root: Path, port: int, bindir: Path, as_postgres: list[str]) -> None:
        self.root = root
        self.port = port
        self.bindir = bindir
        self._as_postgres = as_postgres
        self.running = True

    @property
    def dsn(self) -> str:
        return self.url("postgres")

    def url(self, dbname: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    @classmethod
    def start(cls, *, durable: bool = False) -> PostgresCluster:
        bindir = find_bindir()
        root = Path(tempfile.mkdtemp(prefix="agentcore-pg-"))
        as_postgres: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(root, user.pw_uid, user.pw_gid)
            as_postgres = ["runuser", "-u", "postgres", "--"]
        data = root / "data"
        try:
            subprocess.run(
                [*as_postgres, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                 "-E", "UTF8", "--locale=C", "--no-sync"],
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip
            settings = ["-c listen_addresses=127.0.0.1", f"-k {root}", "-c max_connections=200"]
            if not durable:
                settings += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
            last_error = ""
            for _ in range(5):  # a free port can be taken between probing and binding: try another
                port = _free_port()
                result = subprocess.run(
                    [*as_postgres, str(bindir / "pg_ctl"), "start", "-w", "-t", "60", "-D", str(data),
                     "-l", str(root / "server.log"), "-o", " ".join([*settings, f"-p {port}"])],
                    capture_output=True, text=True, timeout=90,
                )  # fmt: skip
                if result.returncode == 0:
                    return cls(root, port, bindir, as_postgres)
                last_error = result.stderr + _tail(root / "server.log")
            raise RuntimeError(f"PostgreSQL did not start: {last_error}")
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise

    def stop(self) -> None:
        """``pg_ctl stop -m immediate`` and remove the directory. Idempotent."""
        if self.running:
            self.running = False
            pg_ctl = [*self._as_postgres, str(self.bindir / "pg_ctl")]
            subprocess.run(
                [*pg_ctl, "stop", "-m", "immediate", "-D", str(self.root / "data")], capture_output=True, timeout=60
            )
        shutil.rmtree(self.root, ignore_errors=True)

    def create_database(self, name: str) -> str:
        """A fresh database on this server; returns its URL."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)


def lease_holders(dsn: str, application_name_part: str) -> int:
    """How many server sessions whose ``application_name`` contains the given text are alive."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s AND pid <> pg_backend_pid()",
            (f"%{application_name_part}%",),
        ).fetchone()
    return int(row[0]) if row else 0


def wait_for_sessions_gone(dsn: str, application_name_part: str, limit: float = 30) -> None:
    """Wait until the server has ended every session of a killed client (it releases the client's
    advisory locks as it does): the server notices the closed socket on its own schedule, so
    this polls the observable condition, ``pg_stat_activity``."""
    deadline = time.monotonic() + limit
    while lease_holders(dsn, application_name_part):
        if time.monotonic() > deadline:
            raise AssertionError(f"server sessions of {application_name_part!r} still alive after {limit}s")
        time.sleep(0.02)


def _tail(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace")[-2000:]
    return ""
