"""A job's tarball, read as a stream: only the files the job view reads are written out, within
bounds that no archive can stretch.

The archive is read once, front to back (tarfile's stream mode), whatever its compression, and
nothing of it is unpacked but the members the job view would read of a folder (kb.job.inputs):
logs by their names (.log .out .err .txt .gz .stdout .stderr, or no suffix), JSON (error files,
dumps) and, whatever their names, Flight Recorder dumps known by their first bytes. Checkpoints,
images and the like are passed over, never written.

Bounds, each ending in TarballError (the job's row says which) rather than a long run or a full
disk:
- MAX_MEMBERS members of any kind looked at (folders, links and devices count: a tarball of a
  million empty folders is no cheaper to walk than one of files);
- MAX_FILES files written;
- MAX_BYTES bytes of the archive's contents passed over, written or not (a member skipped is
  still decompressed to get past it);
- a compressed archive whose contents grow more than BOMB_RATIO times past BOMB_MIN bytes is a
  bomb, not logs (real logs compress 5-100x): stopped at once, not after minutes of zeros.

One odd member never makes the whole archive unreadable: a name longer than a file system takes
is shortened (its end, which holds the rank and the suffix, is kept), a file where a folder of
the same name is wanted (or the other way round) is passed over, a time no file system can hold
(mtime 1e30) is left unset. Links, hard links, devices and FIFOs are never written; absolute
names and names with `..` are passed over.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
from pathlib import Path

from kb.job.inputs import MAX_FILES as FOLDER_MAX_FILES

MAX_MEMBERS = 2 * FOLDER_MAX_FILES
MAX_FILES = FOLDER_MAX_FILES  # as many files as the job view reads from one folder
MAX_BYTES = 8 << 30  # the contents passed over: a job's logs, not a disk image
BOMB_MIN = 256 << 20
BOMB_RATIO = 500
NAME_MAX = 200  # bytes of one name kept (file systems take 255)
SNIFF = 4096
_LOG_EXT = (".log", ".out", ".err", ".txt", ".gz", ".stdout", ".stderr", ".json")


class TarballError(Exception):
    """A tarball kb does not read to its end: over a bound, or not a tar archive at all."""


def _wanted(name: str, head: bytes) -> bool:
    """Whether the job view reads a file of this name and first bytes (kb.job.inputs._add)."""
    if name.startswith((".", "kb-", "filtered_std")):
        return name == "kb-run.json"  # a `kb run` record marks the folder as one job
    if name.lower().endswith(_LOG_EXT) or "." not in name:
        return True
    # a Flight Recorder dump may have any name: a pickle, gzip or a JSON object
    return head[:1] == b"\x80" or head[:2] == b"\x1f\x8b" or head.lstrip()[:1] == b"{"


def _short(part: str) -> str:
    raw = part.encode("utf-8", "surrogateescape")
    if len(raw) <= NAME_MAX:
        return part
    tag = hashlib.blake2b(raw, digest_size=4).hexdigest()
    tail = raw[-(NAME_MAX - 12) :].decode("utf-8", "ignore")
    return f"{tag}~{tail}"


def unpack(path: str, dest: str) -> list[str]:
    """The files of a job's tarball the job view reads, written under dest (see the module);
    returns what was passed over and why (odd members). Raises TarballError."""
    skipped: list[str] = []
    members = files = 0
    try:
        raw = open(path, "rb")
    except OSError as e:
        raise TarballError(f"cannot read {path}: {e.strerror or e}") from None
    with raw:
        try:
            tar = tarfile.open(fileobj=raw, mode="r|*")
        except tarfile.ReadError as e:
            raise TarballError(f"cannot read {path}: not a tar archive, or a damaged one") from e
        except (tarfile.TarError, OSError, EOFError) as e:
            raise TarballError(f"cannot read {path}: {e}") from None
        with tar:
            try:
                for m in tar:
                    members += 1
                    passed = m.offset_data + max(m.size, 0)
                    packed = max(raw.tell(), 1)
                    if members > MAX_MEMBERS:
                        raise TarballError(
                            f"{path}: more than {MAX_MEMBERS:,} members: not one job's files"
                        )
                    if passed > MAX_BYTES:
                        raise TarballError(
                            f"{path}: more than {MAX_BYTES >> 30} GiB inside: not one job's logs"
                        )
                    if passed > BOMB_MIN and passed > BOMB_RATIO * packed:
                        raise TarballError(
                            f"{path}: its contents grow {passed // packed:,}x ({passed >> 20:,} "
                            f"MiB from {max(packed >> 20, 1):,} MiB): a bomb, not logs (limit "
                            f"{BOMB_RATIO}x)"
                        )
                    if not m.isreg():
                        continue  # folders are made as files need them; links never followed
                    parts = [p for p in m.name.split("/") if p not in ("", ".")]
                    if not parts or ".." in parts or m.name.startswith("/"):
                        skipped.append(f"{m.name}: an absolute name or one with '..'")
                        continue
                    src = tar.extractfile(m)
                    if src is None:
                        continue
                    head = src.read(SNIFF)
                    if not _wanted(parts[-1], head):
                        continue
                    files += 1
                    if files > MAX_FILES:
                        raise TarballError(
                            f"{path}: more than {MAX_FILES:,} files the job view reads: not one "
                            "job's logs"
                        )
                    why = _write(Path(dest, *map(_short, parts)), head, src, m.mtime)
                    if why:
                        skipped.append(f"{m.name}: {why}")
            except TarballError:
                raise
            except (tarfile.TarError, OSError, EOFError, ValueError, OverflowError) as e:
                if not files:
                    raise TarballError(f"cannot read {path}: {e}") from None
                skipped.append(f"the archive ends early or is damaged ({e}); read what it held")
    return skipped


def _write(out: Path, head: bytes, src, mtime: float) -> str:
    """One member's bytes to out, streamed; '' when written, else why it was passed over."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "xb") as fh:
            fh.write(head)
            while True:
                block = src.read(1 << 20)
                if not block:
                    break
                fh.write(block)
    except FileExistsError:
        return "its name clashes with a file or folder before it"
    except (NotADirectoryError, IsADirectoryError):
        return "a file where a folder of the same name is (or the other way round)"
    except OSError as e:
        return e.strerror or str(e)
    try:  # the year of a glog time comes from it; a time no file system holds is left unset
        if 0 <= mtime < 1 << 34:
            os.utime(out, (mtime, mtime))
    except (OSError, OverflowError, ValueError):
        pass
    return ""
