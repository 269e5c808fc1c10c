"""kb's own state cannot be turned against its user (issue 36): caches are private whatever the
umask, a cache folder or file someone else can write is refused, and a pickle planted by a
stranger is never unpickled (a MAC keyed by the user's own key is checked first)."""

from __future__ import annotations

import os
import pickle
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from _repo import REPO

from kb import paths
from kb.knowledge import base, pickle_file

CUDA = "CUDA error: an illegal memory access was encountered"


def _kb(args, env, *, umask=None, user=None, stdin=None, timeout=120):
    def pre() -> None:
        if umask is not None:
            os.umask(umask)
        if user is not None:
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)

    return subprocess.run(
        [sys.executable, "-m", "kb", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **env},
        input=stdin,
        timeout=timeout,
        preexec_fn=pre,
    )


class _Planted:
    """A pickle that, when loaded, creates the file it names (open(path, 'w')): proof that a
    stranger's code ran as the user who read it."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _nobody():
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        return None


# ------------------------------------------------------------------ private whatever the umask
def test_caches_are_private_whatever_the_umask(tmp_path):
    """Under umask 000 the state folder (and any parent kb makes for it), the entry, catalog and
    full-text index caches, key and lock files: no group or other permission bit at all."""
    home = tmp_path / "made" / "by" / "kb"
    env = {"KB_HOME": str(home)}
    assert _kb(["lookup", CUDA], env, umask=0).returncode == 0
    # a line no signature claims: the catalog's index and the full-text index are made too
    _kb(["lookup", "RuntimeError: frobnicator xyzzy quux failed"], env, umask=0)
    made = [tmp_path / "made", tmp_path / "made" / "by", home]
    made += [Path(d) / n for d, dirs, files in os.walk(home) for n in dirs + files]
    assert any(p.name.startswith("index-") for p in made)
    assert any(p.name.startswith("catalog-") for p in made)
    loose = {str(p): oct(p.stat().st_mode & 0o777) for p in made if p.stat().st_mode & 0o077}
    assert not loose


# ------------------------------------------------------------------ planted pickles
def _fill(home: Path) -> list[Path]:
    """kb's caches in home (a private folder then), for a planter to aim at."""
    home.mkdir(mode=0o700, exist_ok=True)
    r = _kb(["lookup", CUDA], {"KB_HOME": str(home)})
    assert r.returncode == 0, r.stderr
    caches = sorted(home.glob("*.pickle"))
    assert caches
    return caches


def test_a_pickle_planted_by_another_user_never_runs(tmp_path):
    """The folder is opened to everyone (chmod 777, as under umask 000 before); another user
    replaces every cache pickle in it with one that runs code. The next lookup by the folder's
    owner runs none of it, says the folder was refused, and still answers."""
    user = _nobody()
    if user is None:
        pytest.skip("switching users needs root and a 'nobody' user")
    # Somewhere 'nobody' can reach (pytest's own folders are private to their owner).
    top = Path(tempfile.mkdtemp(prefix="kb-planted-"))
    try:
        top.chmod(0o755)
        home = top / "state"
        caches = _fill(home)
        home.chmod(0o777)
        marker = tmp_path / "ran-as-the-reader"
        payload = top / "payload.pickle"  # made here, copied by 'nobody' with its own tools
        payload.write_bytes(pickle.dumps(_Planted(str(marker))))
        payload.chmod(0o644)
        plant = 'for f; do cp "$0" "$f.planted" && mv -f "$f.planted" "$f"; done; id -u'
        p = subprocess.run(
            ["sh", "-c", plant, str(payload), *map(str, caches)],
            capture_output=True,
            text=True,
            preexec_fn=lambda: (os.setgid(user.pw_gid), os.setuid(user.pw_uid)),
            cwd="/",
            timeout=60,
        )
        assert p.returncode == 0 and p.stdout.strip() == str(user.pw_uid), p.stderr
        assert all(c.stat().st_uid == user.pw_uid for c in caches)  # planted by 'nobody'
        # (its private fallback folder made in the test's own temporary folder, not /tmp)
        r = _kb(["lookup", CUDA], {"KB_HOME": str(home), "TMPDIR": str(tmp_path)})
        assert not marker.exists(), "a planted pickle ran as the user who looked up an error"
        assert r.returncode == 0 and "cuda-illegal-memory-access" in r.stdout
        assert str(home) in r.stderr and "writable by" in r.stderr
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_a_cache_file_another_user_owns_is_refused_in_a_private_folder(tmp_path):
    """A cache file in the user's own folder but owned by someone else (only root can leave one
    there, or an old kb that made the folder open): never read, said, and built again."""
    user = _nobody()
    if user is None:
        pytest.skip("chown needs root and a 'nobody' user")
    home = tmp_path / "state"
    caches = _fill(home)
    marker = tmp_path / "ran"
    entries = [c for c in caches if c.name.startswith("entries-")]
    for c in entries:
        c.write_bytes(pickle.dumps(_Planted(str(marker))))
        os.chown(c, user.pw_uid, user.pw_gid)
    r = _kb(["lookup", CUDA], {"KB_HOME": str(home)})
    assert not marker.exists()
    assert r.returncode == 0 and "cuda-illegal-memory-access" in r.stdout
    assert "refused the cache file" in r.stderr and f"uid {user.pw_uid}" in r.stderr
    assert all(c.stat().st_uid == os.geteuid() for c in entries)  # built again, the user's


def test_a_strangers_bytes_in_the_users_own_cache_file_never_run(tmp_path, monkeypatch):
    """Ownership aside, the bytes are checked before they are unpickled: a pickle that runs code,
    written over the cache with the right owner and mode (as a stranger with the user's uid
    could, or a copy from another machine), is not this user's MAC and is never loaded."""
    home = tmp_path / "state"
    monkeypatch.setenv("KB_HOME", str(home))
    kb = base.load()
    cache = home / f"entries-{kb.content_hash}.pickle"
    assert cache.is_file()
    marker = tmp_path / "ran"
    cache.write_bytes(pickle.dumps(_Planted(str(marker))))
    cache.chmod(0o600)
    assert pickle_file.read(cache) is None and not marker.exists()
    again = base.load()
    assert not marker.exists() and again.get("cuda-illegal-memory-access") is not None
    assert pickle_file.read(cache) is not None  # built again over it, with the user's MAC


def test_a_full_text_index_changed_by_anyone_else_is_never_opened(tmp_path):
    """Opening a Whoosh index unpickles its table of contents. The user's own index, with its
    table of contents replaced by a pickle that runs code (right owner and mode), is not what
    kb sealed: the next lookup that reads the index builds it again, and nothing runs."""
    home = tmp_path / "state"
    env = {"KB_HOME": str(home)}
    unknown = "RuntimeError: frobnicator xyzzy quux failed"
    assert _kb(["lookup", unknown], env).returncode in (1, 4)
    (index,) = [d for d in home.glob("index-*") if d.is_dir()]
    assert (index / pickle_file.SEAL_NAME).is_file() and pickle_file.sealed(index)
    marker = tmp_path / "ran"
    for toc in index.glob("*.toc"):
        toc.write_bytes(pickle.dumps(_Planted(str(marker))))
        toc.chmod(0o600)
    assert not pickle_file.sealed(index)
    r = _kb(["lookup", unknown], env)
    assert not marker.exists(), "a planted table of contents ran as the user"
    assert r.returncode in (1, 4) and "Traceback" not in r.stderr, r.stderr
    rebuilt = [d for d in home.glob("index-*") if d.is_dir() and pickle_file.sealed(d)]
    assert rebuilt and index not in rebuilt


def test_a_mac_made_under_another_key_or_for_another_file_does_not_check(tmp_path):
    """The MAC covers the file's name and is keyed per folder: a valid cache copied under another
    name, or from another user's folder, is a miss."""
    a, b = tmp_path / "a", tmp_path / "b"
    assert pickle_file.write(a / "one.pickle", {"x": 1}) is None
    assert pickle_file.write(b / "one.pickle", {"x": 2}) is None
    assert pickle_file.read(a / "one.pickle") == {"x": 1}
    shutil.copy(a / "one.pickle", a / "two.pickle")
    assert pickle_file.read(a / "two.pickle") is None
    shutil.copy(b / "one.pickle", a / "one.pickle")
    pickle_file._KEYS.clear()
    assert pickle_file.read(a / "one.pickle") is None


def test_a_key_file_others_can_read_or_write_is_not_trusted(tmp_path):
    folder = tmp_path / "k"
    assert pickle_file.write(folder / "one.pickle", [1, 2]) is None
    pickle_file._KEYS.clear()
    key = folder / pickle_file.KEY_NAME
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    key.chmod(0o644)
    assert pickle_file.read(folder / "one.pickle") is None
    assert pickle_file.write(folder / "two.pickle", [3]) is not None  # says why, writes nothing


def test_a_state_folder_of_another_user_is_refused_and_the_caches_go_elsewhere(
    tmp_path, monkeypatch
):
    """Simulated ownership (kb checks against paths._euid): the configured folder is someone
    else's; kb says so, keeps its caches in a private folder of its own, writes nothing there."""
    home = tmp_path / "theirs"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("KB_HOME", str(home))
    me = os.geteuid()
    monkeypatch.setattr(paths, "_euid", lambda: me + 4242)
    monkeypatch.setattr(paths, "_CHECKED", {})
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    used = paths.state_folder()
    assert used != str(home) and os.path.isdir(used) and not os.stat(used).st_mode & 0o077
    (warning,) = paths.state_warnings()
    assert str(home) in warning and f"owned by uid {me}" in warning
    kb = base.load()  # (its own files then look like another user's too: only read, never)
    assert str(home) in " ".join(kb.warnings)
    assert list(home.iterdir()) == []


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o1777])
def test_a_state_folder_others_can_write_is_refused(tmp_path, monkeypatch, mode):
    home = tmp_path / "open"
    home.mkdir()
    home.chmod(mode)
    monkeypatch.setenv("KB_HOME", str(home))
    monkeypatch.setattr(paths, "_CHECKED", {})
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    kb = base.load()
    assert paths.state_folder() != str(home)
    assert any(str(home) in w and "writable by" in w for w in kb.warnings)
    assert list(home.iterdir()) == []
    assert kb.get("cuda-illegal-memory-access") is not None


# ------------------------------------------------------------------ output paths are local files
@pytest.mark.parametrize(
    "out", ["md:x.duckdb", "motherduck:x.duckdb", "s3://bucket/day.parquet", "https://h/d.duckdb"]
)
def test_an_output_that_names_an_address_is_refused_before_any_job(tmp_path, out):
    """`--out md:x.duckdb` made DuckDB download its MotherDuck extension: an output (or a table to
    query) is a local file; an address is refused at once, nothing fetched (no ~/.duckdb)."""
    jobs = tmp_path / "jobs" / "a"
    jobs.mkdir(parents=True)
    (jobs / "rank0.log").write_text(CUDA + "\n")
    env = {"HOME": str(tmp_path), "KB_HOME": str(tmp_path / "state")}
    r = subprocess.run(
        [sys.executable, "-m", "kb", "triage", str(jobs.parent), "--out", out, "--quiet"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **env, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert r.returncode == 2 and "local files only" in r.stderr, r.stderr
    assert not (tmp_path / ".duckdb").exists()
    q = subprocess.run(
        [sys.executable, "-m", "kb", "triage", "--sql", "SELECT 1", "--out", out],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **env, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert q.returncode == 2 and not (tmp_path / ".duckdb").exists()


def test_a_file_whose_name_has_a_colon_is_written_as_a_file(tmp_path):
    from kb.fleet import store

    assert store.local_file("./md:x.duckdb") == os.path.abspath("md:x.duckdb")
    spool = store.Spool(str(tmp_path))
    con = store.write(spool, str(tmp_path / "md:x.duckdb"))
    con.close()
    assert (tmp_path / "md:x.duckdb").is_file()
