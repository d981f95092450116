"""A local PostgreSQL 16 with pgvector for the benchmarks (the `pgserver` wheel of the test
extra), on a Unix socket in a folder of your choice; no root, port or network.

    python bench/pg_local.py start /tmp/mem-pg     # prints the server's postgresql:// URL
    python bench/pg_local.py createdb /tmp/mem-pg NAME   # a new database; prints its URL
    python bench/pg_local.py stop /tmp/mem-pg

The server keeps running between commands (stop ends it)."""

from __future__ import annotations

import sys
from pathlib import Path
from urllib.parse import quote


def server(folder: Path):  # noqa: ANN201 - pgserver's PostgresServer
    import pgserver

    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)  # run as root, pgserver's server runs as another user
    return pgserver.get_server(folder / "data", cleanup_mode=None)


def url(folder: Path, database: str = "postgres") -> str:
    info = server(folder).get_postmaster_info()
    return f"postgresql://postgres@/{database}?host={quote(str(info.socket_dir))}"


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("start", "createdb", "stop"):
        print(__doc__, file=sys.stderr)
        return 2
    folder = Path(argv[1]).resolve()
    if argv[0] == "start":
        print(url(folder))
    elif argv[0] == "createdb":
        import psycopg

        with psycopg.connect(url(folder), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{argv[2]}"')
        print(url(folder, argv[2]))
    else:
        from pgserver._commands import pg_ctl

        srv = server(folder)
        pg_ctl(["-w", "stop"], pgdata=srv.pgdata, user=srv.system_user)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
