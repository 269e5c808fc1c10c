"""The table of a triage run, in DuckDB: written as a .duckdb database or a .parquet file, queried
with SQL (the summary is SQL over it, and so is `kb triage --sql`). DuckDB is imported only here.

Rows are spooled to a JSON-lines file as the engines return them (memory stays flat however many
jobs there are), then DuckDB reads that file into the table `jobs`, sorted by job. Next to it the
view `faulty_nodes`: the hosts, and the GPUs, with two or more failures whose entry is of the
infrastructure domain (hardware, driver, node), each with its failure classes and jobs.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field

import duckdb

from .meta import COLUMNS as META_COLUMNS
from .triage import COLUMNS as ROW_COLUMNS

COLUMNS = ROW_COLUMNS + META_COLUMNS
FORMATS = (".duckdb", ".parquet")
FAULTY_MIN = 2  # hardware-class failures on one host (or GPU) that make it worth a look

# A GPU is told by its PCI id only together with its host (every node has a 0000:3b:00); a UUID
# names it alone.
FAULTY_NODES_SQL = f"""
CREATE OR REPLACE {{temp}} VIEW faulty_nodes AS
WITH hw AS (SELECT * FROM jobs WHERE domain = 'infrastructure' AND error IS NULL)
SELECT 'host' AS level, host, CAST(NULL AS VARCHAR) AS gpu, count(*) AS failures,
       list(DISTINCT id ORDER BY id) AS classes, list(job ORDER BY job) AS jobs,
       min(first_failure) AS first_failure, max(first_failure) AS last_failure
FROM hw WHERE host IS NOT NULL GROUP BY host HAVING count(*) >= {FAULTY_MIN}
UNION ALL
SELECT 'gpu' AS level, host, gpu, count(*) AS failures,
       list(DISTINCT id ORDER BY id) AS classes, list(job ORDER BY job) AS jobs,
       min(first_failure) AS first_failure, max(first_failure) AS last_failure
FROM hw WHERE gpu IS NOT NULL AND (host IS NOT NULL OR gpu LIKE 'GPU-%')
GROUP BY host, gpu HAVING count(*) >= {FAULTY_MIN}
ORDER BY failures DESC, level DESC, host, gpu
"""


class StoreError(Exception):
    """A table that cannot be written or read, or a query DuckDB refuses: said in one line."""


# A name DuckDB would read as an address, not a file: md:/motherduck: (a MotherDuck database,
# whose extension it downloads), s3://, http(s)://, gcs:// and the like. A Windows drive (C:\)
# is a file.
_ADDRESS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")


def local_file(path: str, what: str = "--out") -> str:
    """The absolute path of a local file kb may write or read as a table, else StoreError: a
    table is a file here, never a database service or a URL (DuckDB takes `md:x.duckdb` for
    MotherDuck and downloads its extension). `./md:x.duckdb` names a file so called."""
    m = _ADDRESS.match(path)
    if m:
        raise StoreError(
            f"{what} {path}: kb triage writes and reads local files only; '{m.group()}' makes "
            f"it an address (MotherDuck, a URL), not a file (./{path} is a file of that name)"
        )
    return os.path.abspath(path)


def check_out(path: str) -> None:
    """Refuse an output kb cannot write before any job is read."""
    if not path.lower().endswith(FORMATS):
        raise StoreError(f"--out {path}: the file must end in .duckdb or .parquet")
    folder = os.path.dirname(local_file(path))
    if not os.path.isdir(folder):
        raise StoreError(f"--out {path}: no such folder {folder}")
    # What the table will need, tried now: a file made (and removed) in its folder. A read-only
    # file system or a folder of someone else's is said before a single job is read.
    try:
        fd, probe = tempfile.mkstemp(prefix=".kb-triage-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise StoreError(f"--out {path}: cannot write in {folder}: {e.strerror or e}") from None


class Spool:
    """Rows, one JSON line each, in a temporary file until the table is built. A write that
    fails (the temporary folder full, ENOSPC) is one StoreError saying where and what to do,
    never a chain of tracebacks; `keep` says the spool must outlive the run (its rows were
    not written to the table: they are the run's only copy)."""

    def __init__(self, folder: str | None = None):
        try:
            fd, self.path = tempfile.mkstemp(prefix="kb-triage-", suffix=".jsonl", dir=folder)
        except OSError as e:
            where = folder or tempfile.gettempdir()
            raise StoreError(
                f"cannot make the rows' spool in {where}: {e.strerror or e} (set TMPDIR to a "
                "folder with room)"
            ) from None
        # errors="replace": a lone surrogate from a badly decoded log must not stop the run
        self._fh = os.fdopen(fd, "w", encoding="utf-8", errors="replace")
        self.count = 0
        self.keep = False

    def add(self, row: dict) -> None:
        try:
            self._fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
        except OSError as e:
            self._failed(e)
        self.count += 1

    def _failed(self, e: OSError) -> None:
        raise StoreError(
            f"cannot spool the rows to {self.path}: {e.strerror or e} (the temporary folder "
            f"{os.path.dirname(self.path)} is full? set TMPDIR to a folder with room)"
        ) from None

    def close(self) -> None:
        if not self._fh.closed:
            try:
                self._fh.close()  # closed even when its last flush fails
            except OSError as e:
                self._failed(e)

    def remove(self) -> None:
        """The spool removed (its rows are in the table), unless `keep`."""
        try:
            self.close()
        except StoreError:
            pass
        if self.keep:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass


def _create(con: duckdb.DuckDBPyConnection, spool: Spool) -> None:
    spool.close()
    cols = ", ".join(f'"{n}" {t}' for n, t in COLUMNS)
    con.execute(f"CREATE TABLE jobs_in ({cols})")
    if spool.count:
        spec = "{" + ", ".join(f"'{n}': '{t}'" for n, t in COLUMNS) + "}"
        con.execute(
            "INSERT INTO jobs_in SELECT * FROM read_json(?, format='newline_delimited', "
            f"columns={spec}, maximum_object_size=67108864)",
            [spool.path],
        )
    # Sorted by job: the same rows in the same order from every engine and worker count.
    con.execute("CREATE TABLE jobs AS SELECT * FROM jobs_in ORDER BY job")
    con.execute("DROP TABLE jobs_in")


def write(spool: Spool, out: str) -> duckdb.DuckDBPyConnection:
    """The table into `out` (.duckdb or .parquet); returns a connection that reads it (with the
    faulty_nodes view), for the summary."""
    check_out(out)
    shown, out = out, local_file(out)  # DuckDB is given absolute paths: files, never addresses
    tmp = f"{out}.tmp-{os.getpid()}"
    try:
        if out.lower().endswith(".duckdb"):
            con = duckdb.connect(tmp)
            _create(con, spool)
            con.execute(FAULTY_NODES_SQL.format(temp=""))
            con.close()
            _remove(out + ".wal")
            os.replace(tmp, out)
            return duckdb.connect(out, read_only=True)
        con = duckdb.connect()
        _create(con, spool)
        con.execute(f"COPY jobs TO {_literal(tmp)} (FORMAT parquet, COMPRESSION zstd)")
        os.replace(tmp, out)
        con.execute(FAULTY_NODES_SQL.format(temp="TEMP"))
        return con
    except duckdb.Error as e:
        raise StoreError(f"cannot write {shown}: {e}") from None
    except OSError as e:
        raise StoreError(f"cannot write {shown}: {e.strerror or e}") from None
    finally:
        _remove(tmp)
        _remove(tmp + ".wal")


def open_table(path: str) -> duckdb.DuckDBPyConnection:
    """A written table, to query: `jobs` and `faulty_nodes` as in the run that wrote it."""
    if not os.path.exists(path):
        raise StoreError(f"no such file: {path} (write it first: kb triage PATH... --out {path})")
    shown, path = path, local_file(path, "the table")
    try:
        if path.lower().endswith(".duckdb"):
            con = duckdb.connect(path, read_only=True)
            con.execute("SELECT 1 FROM jobs LIMIT 0")
            return con
        if path.lower().endswith(".parquet"):
            con = duckdb.connect()
            con.execute(f"CREATE VIEW jobs AS SELECT * FROM read_parquet({_literal(path)})")
            con.execute(FAULTY_NODES_SQL.format(temp="TEMP"))
            return con
    except duckdb.Error as e:
        raise StoreError(f"cannot read {shown}: {_first_line(e)}") from None
    raise StoreError(f"{shown}: kb triage writes .duckdb or .parquet files")


@dataclass
class Result:
    columns: list[str]
    rows: list[tuple]


def query(con: duckdb.DuckDBPyConnection, sql: str) -> Result:
    try:
        cur = con.execute(sql)
        rows = cur.fetchall()
    except duckdb.Error as e:
        raise StoreError(f"the query failed: {_first_line(e)}") from None
    return Result([d[0] for d in cur.description or ()], rows)


# ---------------------------------------------------------------- the summary's numbers
@dataclass
class Summary:
    jobs: int = 0
    answered: int = 0
    unanswered: int = 0  # jobs that show a failure no entry knows
    no_failure: int = 0  # jobs whose logs show no failure at all (kind 'none')
    unreadable: int = 0
    with_meta: int = 0
    gpu_hours: float | None = None
    versions: list[tuple] = field(default_factory=list)  # (kb_version, knowledge, jobs)
    classes: list[tuple] = field(default_factory=list)  # (id, title, domain, action, jobs, gpu h)
    domains: list[tuple] = field(default_factory=list)  # (domain, jobs, gpu h)
    faulty: list[tuple] = field(default_factory=list)  # faulty_nodes rows
    no_answer: list[tuple] = field(default_factory=list)  # (kind, exception, jobs, gpu h)
    errors: list[tuple] = field(default_factory=list)  # (error, jobs)


def summarize(con: duckdb.DuckDBPyConnection, top: int = 20) -> Summary:
    s = Summary()
    (s.jobs, s.answered, s.unreadable, s.with_meta, s.gpu_hours) = con.execute(
        "SELECT count(*), count(id), count(error), count(gpu_hours), sum(gpu_hours) FROM jobs"
    ).fetchone() or (0, 0, 0, 0, None)
    (s.no_failure,) = con.execute(
        "SELECT count(*) FROM jobs WHERE id IS NULL AND error IS NULL AND kind = 'none'"
    ).fetchone() or (0,)
    s.unanswered = s.jobs - s.answered - s.unreadable - s.no_failure
    s.versions = _rows(
        con,
        "SELECT kb_version, knowledge, count(*) FROM jobs WHERE error IS NULL "
        "GROUP BY ALL ORDER BY 3 DESC",
    )
    # Classes by GPU hours when the jobs file gave them, else by count.
    s.classes = _rows(
        con,
        "SELECT id, any_value(title), any_value(domain), any_value(action), count(*) AS n, "
        "sum(gpu_hours) AS h FROM jobs WHERE id IS NOT NULL GROUP BY id "
        "ORDER BY h DESC NULLS LAST, n DESC, id LIMIT ?",
        [top],
    )
    s.domains = _rows(
        con,
        "SELECT CASE WHEN error IS NOT NULL THEN '(unreadable)' "
        "WHEN id IS NULL AND kind = 'none' THEN '(no failure)' "
        "WHEN id IS NULL THEN '(no answer)' ELSE domain END AS d, count(*) AS n, "
        "sum(gpu_hours) AS h FROM jobs GROUP BY d ORDER BY h DESC NULLS LAST, n DESC, d",
    )
    s.faulty = _rows(con, "SELECT * FROM faulty_nodes")
    s.no_answer = _rows(
        con,
        "SELECT kind, exception, count(*) AS n, sum(gpu_hours) AS h FROM jobs "
        "WHERE id IS NULL AND error IS NULL AND kind IS DISTINCT FROM 'none' GROUP BY ALL "
        "ORDER BY n DESC, kind, exception NULLS LAST LIMIT ?",
        [top],
    )
    s.errors = _rows(
        con,
        "SELECT any_value(error), count(*) AS n FROM jobs WHERE error IS NOT NULL "
        "GROUP BY regexp_replace(error, '^cannot read [^:]*:', 'cannot read:') "
        "ORDER BY n DESC LIMIT 5",
    )
    return s


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence | None = None) -> list:
    return con.execute(sql, params or []).fetchall()


def _literal(text: str) -> str:
    """A SQL string literal (DDL and COPY take no prepared parameters)."""
    return "'" + text.replace("'", "''") + "'"


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
