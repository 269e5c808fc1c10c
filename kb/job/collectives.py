"""Every process group, every rank that broke: the Flight Recorder dumps of a job compared rank by
rank within each group (its members from pg_config, how far each got from pg_status, and the
entries themselves).

In each group:
  - lag: some members enqueued collective #s and others did not. The others stopped short; the
    ones that enqueued it wait in it. (A rank between the two waits too.)
  - mismatch: every member enqueued #s, with different ops, sizes or dtypes. The members that
    differ from most are the fault; with no majority (two ranks, half and half) all of them.
  - stuck: every member enqueued #s and some completed it while others did not (they started it
    and never finished), or some started it while others never did (their GPU stream was held by
    earlier work): the ones that did not get through are the fault.
  - missing: every member that left a dump waits in #s and a member left no dump at all.
  - waiting: every member is in #s, none missing, none behind: no rank of this group is the cause
    (the interconnect, or a rank outside the dumps).

A rank that stopped short in one group may itself be waiting in another (its thread blocked in a
collective there), so lags make a wait-for graph: a waiter points at each rank it waits for. A
lagging rank that waits for nobody is a root: it stopped (its Python thread hung, held the GIL,
or exited) or it went on elsewhere. Ranks waiting on each other in a cycle (a rank that skipped
a collective and went on to one its peers never reach) are resolved by who is waited for most:
the rank whose order diverged is the one every other member of its group waits for. A root that
added no entry at all after its peers entered the collective is "stalled"; one that went on to
other collectives "stopped-short".
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

from kb.job.parsers.flight_recorder import Dump, Entry
from kb.knowledge.data import CollectiveOp, CollectiveRules, bundled
from kb.model.record import field, record, replace

# The kinds of fault a group shows, strongest evidence first: the kind a rank is named for when
# several groups name it.
KIND_ORDER = ("mismatch", "stuck", "stalled", "stopped-short", "missing")


@record(frozen=True)
class GroupFinding:
    """What one process group shows: the collective it stopped at, the ranks at fault there (each
    with the kind of fault) and the ranks that waited in it."""

    pg: str
    desc: str
    seq: int
    op: str | None
    kind: str  # lag | mismatch | stuck | missing | waiting
    faulty: tuple[int, ...]  # the ranks the group names (before the wait-for graph decides)
    waiting: tuple[int, ...]
    members: tuple[int, ...]
    detail: str = ""
    since_ns: int = 0  # when the waiters entered the collective (0: the dumps do not say)
    # of `faulty` (a lag): the ranks that did not enqueue it because they wait in another
    # group's collective that their own program runs first (waiters there, not faults here)
    elsewhere: tuple[int, ...] = ()
    # a mismatch seen on one side only: the members that left no dump to compare with (gloo's
    # size check aborts the rank that received the other size before it can write one)
    unseen: tuple[int, ...] = ()
    one_sided: bool = False  # no other member's entry to compare with: its own past says it

    @property
    def group(self) -> str:
        """The group as people name it: its name, and its description when it has one (torch
        describes a group created without group_desc as "undefined")."""
        if self.desc and self.desc not in (self.pg, "undefined"):
            return f"{self.pg} ({self.desc})"
        return self.pg

    @property
    def collective(self) -> str:
        return f"#{self.seq}" + (f" ({self.op})" if self.op else "")

    def to_dict(self) -> dict:
        d = {
            "group": self.pg,
            "desc": self.desc,
            "seq": self.seq,
            "op": self.op,
            "kind": self.kind,
            "ranks": list(self.faulty),
            "waiting_ranks": list(self.waiting),
        }
        if self.detail:
            d["detail"] = self.detail
        return d


@record(frozen=True)
class Fault:
    """One rank at fault, as the collectives show it: the group and collective it was found at
    and the kind of fault (stalled, stopped-short, stuck, mismatch, missing)."""

    rank: int
    kind: str
    finding: GroupFinding
    reason: str
    went_on: str = ""  # for stopped-short: the collective it went on to instead


@record(frozen=True)
class Collectives:
    """The whole job's groups: what each shows, the ranks at fault, and whom every other rank
    waited for."""

    findings: tuple[GroupFinding, ...] = ()
    faults: dict[int, Fault] = field(default_factory=dict)  # rank -> its fault (the strongest)
    waited: dict[int, GroupFinding] = field(
        default_factory=dict
    )  # rank -> the collective it waited in
    notes: tuple[str, ...] = ()

    @property
    def roots(self) -> list[int]:
        return sorted(self.faults)

    def unseen_peers(self, rank: int) -> tuple[int, ...]:
        """For a rank the dumps show in a mismatch seen on its side only: the members of that
        group that left no dump (the other side), else ()."""
        f = self.faults.get(rank)
        return f.finding.unseen if f is not None and f.kind == "mismatch" else ()


def analyze(dumps: list[Dump], job_ranks: set[int] | None = None) -> Collectives:
    """Compare the ranks of every group. job_ranks: every rank the job's other evidence names
    (logs, launcher), the members of the default group when its dumps do not list them."""
    by_rank: dict[int, Dump] = {}
    notes: list[str] = []
    for d in dumps:
        if d.rank is None:
            if d.rank_from == "contradicted":
                held = sorted({r for g in d.groups.values() for r in g.ranks})
                notes.append(
                    f"{d.path}: its name says rank {d.named_rank}, but its process groups hold "
                    f"ranks {', '.join(map(str, held[:16]))}{' ...' if len(held) > 16 else ''}: "
                    "whose dump it is is unknown, so it was not compared (a dump named by its "
                    "rank within a sub-group?)"
                )
            continue
        if d.rank in by_rank and not (by_rank[d.rank].pgs() & d.pgs()):
            # one rank, two recorders: a gloo default group's dump beside its NCCL sub-groups'
            by_rank[d.rank] = merge(by_rank[d.rank], d)
            continue
        if d.rank in by_rank:
            notes.append(
                f"two Flight Recorder dumps say they are rank {d.rank}: {by_rank[d.rank].path} "
                f"and {d.path}; the first is used"
            )
            continue
        by_rank[d.rank] = d
    if not by_rank:
        return Collectives(notes=tuple(notes))
    idx, order = _index(by_rank)
    groups = _groups(by_rank, idx, job_ranks or set())
    # per group, the last collective some member is known to have got past (an entry of its own
    # after it): a rank whose newest entry is that collective or an earlier one is not stuck there
    passed: dict[str, int] = {}
    for ents in order.values():
        for e in ents[:-1]:
            if e.seq > passed.get(e.pg, -1):
                passed[e.pg] = e.seq
    undumped = tuple(sorted((job_ranks or set()) - set(by_rank)))
    findings: list[GroupFinding] = []
    for pg in sorted(groups, key=_pg_order):
        desc, members = groups[pg]
        f = _group(pg, desc, members, by_rank, idx, passed, order, undumped)
        if f is not None:
            findings.append(f)
    findings += _hidden(findings, groups, by_rank, order, job_ranks or set())
    faults, waited = _decide(findings, by_rank)
    return Collectives(tuple(findings), faults, waited, tuple(notes))


def merge(a: Dump, b: Dump) -> Dump:
    """One rank's two dumps of different groups as one. Their entries are put in the order they
    were created (one process, one clock), as one buffer would hold them: which collective a
    rank waiting in two groups entered first is read from that order (_first)."""
    entries = sorted(a.entries + b.entries, key=lambda e: e.created_ns)
    return Dump(
        f"{a.path} + {b.path}",
        a.rank,
        a.version or b.version,
        tuple(entries),
        {**a.status, **b.status},
        {**a.groups, **b.groups},
        a.rank_from,
        a.comm_lib or b.comm_lib,
        a.named_rank if a.named_rank is not None else b.named_rank,
    )


def _pg_order(pg: str) -> tuple:
    return (not pg.isdigit(), int(pg) if pg.isdigit() else 0, pg)


# ---------------------------------------------------------------- what must agree
# kb/data/collectives.yaml, read with the entries (kb.knowledge.data): op name -> its semantics.
_TABLES: dict[int, tuple[CollectiveRules, dict[str, CollectiveOp], frozenset[str]]] = {}
_KEYS: dict[tuple, tuple] = {}  # (op, sizes, dtypes) -> what members must agree on


def _table(rules: CollectiveRules | None = None) -> tuple[dict[str, CollectiveOp], frozenset[str]]:
    if rules is None:
        rules = getattr(bundled(), "collectives", None)
    if rules is None:  # kb/data/collectives.yaml is broken: kb lint says how
        return {}, frozenset()
    got = _TABLES.get(id(rules))
    if got is None or got[0] is not rules:
        by_name = {n: o for o in rules.ops for n in o.names}
        got = _TABLES[id(rules)] = (rules, by_name, frozenset(rules.backends))
        _KEYS.clear()
    return got[1], got[2]


def semantics(op: str, rules: CollectiveRules | None = None) -> CollectiveOp | None:
    """The collective a Flight Recorder entry's profiling name is ("nccl:_allgather_base",
    "gloo:all_to_all", "nccl:send 0->1"), or None when kb/data/collectives.yaml (or `rules`)
    does not name it."""
    by_name, backends = _table(rules)
    name = op
    lib, sep, rest = op.partition(":")
    if sep and lib in backends:
        name = rest
    return by_name.get(name.split(" ", 1)[0].strip())


def agreed(e: Entry) -> tuple:
    """What every member of the group must agree on for this entry: its op (as one name for all
    its spellings), and its sizes and dtypes only where the op requires them to agree. An op the
    data does not name is compared by its name only."""
    k = (e.op, e.sizes, e.dtypes)
    got = _KEYS.get(k)
    if got is None:
        if len(_KEYS) > 50_000:
            _KEYS.clear()
        rule = semantics(e.op)
        if rule is None:
            got = (e.op, None, None)
        else:
            got = (
                rule.op,
                e.sizes if rule.sizes_agree else None,
                e.dtypes if rule.dtypes_agree else None,
            )
        _KEYS[k] = got
    return got


# rank -> group name -> its collectives there (point-to-point ops left out), in buffer order
Index = dict[int, dict[str, list[Entry]]]


def _index(by_rank: dict[int, Dump]) -> tuple[Index, dict[int, list[Entry]]]:
    """(rank -> group -> its collectives there, rank -> its collectives of every group), both in
    buffer order; point-to-point ops left out."""
    out: Index = {}
    order: dict[int, list[Entry]] = {}
    for r, d in by_rank.items():
        per: dict[str, list[Entry]] = {}
        mine: list[Entry] = []
        for e in d.entries:
            if not e.p2p:
                lst = per.get(e.pg)
                if lst is None:
                    lst = per[e.pg] = []
                lst.append(e)
                mine.append(e)
        out[r] = per
        order[r] = mine
    return out, order


def _groups(
    by_rank: dict[int, Dump], idx: Index, job_ranks: set[int]
) -> dict[str, tuple[str, tuple[int, ...]]]:
    """group name -> (description, members). Members from pg_config (the union of what each
    dump says); the default group, when no dump lists it (gloo), is every rank the job has;
    any other unlisted group is the ranks whose dumps mention it."""
    desc: dict[str, str] = {}
    members: dict[str, set[int]] = {}
    added: dict[str, set[int]] = {}  # ids of the rank lists already added (dumps share them)
    mentioned: dict[str, set[int]] = {}
    for r, d in by_rank.items():
        for name, g in d.groups.items():
            if g.desc:
                desc.setdefault(name, g.desc)
            if g.ranks and id(g.ranks) not in added.setdefault(name, set()):
                added[name].add(id(g.ranks))
                members.setdefault(name, set()).update(g.ranks)
        for pg, ents in idx[r].items():
            if ents[0].pg_desc:
                desc.setdefault(pg, ents[0].pg_desc)
        for pg in d.pgs():
            mentioned.setdefault(pg, set()).add(r)
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    for pg, who in mentioned.items():
        if pg in members:
            ms = members[pg]
        elif desc.get(pg) == "default_pg" or (pg == "0" and "default_pg" not in desc.values()):
            ms = set(by_rank) | job_ranks
        else:
            ms = who
        out[pg] = (desc.get(pg, ""), tuple(sorted(ms)))
    return out


def _group(
    pg: str,
    desc: str,
    members: tuple[int, ...],
    by_rank: dict[int, Dump],
    idx: Index,
    passed: dict[str, int] | None = None,
    order: dict[int, list[Entry]] | None = None,
    undumped: tuple[int, ...] = (),
) -> GroupFinding | None:
    enq: dict[int, int] = {}
    for r in members:
        d = by_rank.get(r)
        if d is None:
            continue
        v = d.last(pg, "enqueued")
        if v is not None:
            enq[r] = v
    no_dump = tuple(r for r in members if r not in by_rank)
    # the members it may have that left no dump: pg_config's, else (gloo's dumps list none) any
    # rank of the job that left none
    listed = any(g.ranks for r in enq for g in [by_rank[r].groups.get(pg)] if g is not None)
    hidden = no_dump if listed or no_dump else undumped
    if not enq or (len(enq) < 2 and not hidden):
        return None
    top, low = max(enq.values()), min(enq.values())
    # A collective they ran differently explains whatever happened in this group after it.
    mm = _mismatch(pg, desc, members, enq, idx, low)
    if mm is not None:
        return mm if not no_dump else replace(mm, unseen=no_dump)
    one = _one_sided(pg, desc, members, enq, idx, hidden)
    if one is not None:
        return one
    if low < top:
        seq = low + 1
        behind = tuple(sorted(r for r, v in enq.items() if v == low))
        waiting = tuple(sorted(r for r, v in enq.items() if v >= seq))
        ents = _entries_at(pg, seq, waiting, idx)
        elsewhere = tuple(
            r for r in behind if _waits_elsewhere((order or {}).get(r, []), pg, passed or {})
        )
        return GroupFinding(
            pg,
            desc,
            seq,
            _common_op(ents),
            "lag",
            behind,
            waiting,
            members,
            since_ns=min((e.created_ns for e in ents.values() if e.created_ns), default=0),
            elsewhere=elsewhere,
        )
    if no_dump and _gloo(pg, enq, idx):
        # gloo marks a collective completed when its work ends, a timeout or an error too, on
        # some members and not yet on others: completion says nothing of who is missing
        return _missing(pg, desc, members, enq, idx, no_dump, top)
    done = {r: by_rank[r].last(pg, "completed") for r in enq}
    started = {r: _started(by_rank[r], pg, idx[r].get(pg, ())) for r in enq}
    known = {r: c for r, c in done.items() if c is not None}
    if not known or top <= 0:
        return None
    lo = min(known.values())
    if lo >= top:
        # Every member completed everything it enqueued: this group is not where it stopped.
        # Except that gloo's recorder marks a collective completed when its work ends, a timeout
        # or an error too (a captured gloo rank that timed out in #2 says last_completed 2): there
        # a member that left no dump may still be the one the others waited for.
        if _gloo(pg, enq, idx):
            return _missing(pg, desc, members, enq, idx, no_dump, top)
        return None
    seq = lo + 1
    finished = tuple(sorted(r for r, c in known.items() if c >= seq))
    unfinished = tuple(sorted(r for r, c in known.items() if c < seq))
    ents = _entries_at(pg, seq, tuple(enq), idx)
    op = _common_op(ents)
    since = min((e.created_ns for e in ents.values() if e.created_ns), default=0)
    # "started" is known only where the recorder times collectives (NCCL with
    # TORCH_NCCL_ENABLE_TIMING); without it a rank that did not complete may simply have been
    # torn down first (gloo marks a failed collective completed), so it says nothing.
    in_flight = tuple(r for r in unfinished if (started.get(r) or -1) >= seq)
    if finished and in_flight:
        return GroupFinding(
            pg,
            desc,
            seq,
            op,
            "stuck",
            in_flight,
            finished,
            members,
            detail="started, never completed, while its peers completed it",
            since_ns=since,
        )
    if finished:
        return None
    in_it = tuple(sorted(r for r in unfinished if (started.get(r) or -1) >= seq))
    not_yet = tuple(sorted(r for r in unfinished if (started.get(r) or -1) < seq))
    if in_it and not_yet and any(v is not None and v >= 0 for v in started.values()):
        return GroupFinding(
            pg,
            desc,
            seq,
            op,
            "blocked",
            not_yet,
            in_it,
            members,
            detail="never started on its GPU while its peers were in it (its stream was held by "
            "earlier work)",
            since_ns=since,
        )
    if no_dump:
        return GroupFinding(
            pg,
            desc,
            seq,
            op,
            "missing",
            no_dump,
            tuple(sorted(enq)),
            members,
            since_ns=since,
            detail="left no Flight Recorder dump while the others waited",
        )
    return GroupFinding(
        pg, desc, seq, op, "waiting", (), tuple(sorted(enq)), members, since_ns=since
    )


def _waits_elsewhere(ents: list[Entry], pg: str, passed: dict[str, int]) -> bool:
    """Whether a rank that did not enqueue the next collective of group pg waits in another
    group's collective that its own program runs before that one: its newest entry is in another
    group H, no member of H is known to have got past it (`passed`: an entry of its own after
    it), and the rank's own past puts H's collectives there: after its last collective in pg it
    ran no more of H's than it ran between its two collectives of pg before. A rank that skipped
    one of pg's collectives ran more of H's since (it went on); one that finished H's collective
    with its peers and then stalled is past by them.
    `ents`: the rank's collectives of every group, in its buffer's order."""
    if not ents:
        return False
    last = ents[-1]
    if last.pg == pg or last.seq <= passed.get(last.pg, -1):
        return False
    mine = [i for i, e in enumerate(ents) if e.pg == pg]
    if len(mine) < 2:
        return False  # no earlier round to tell its program's order by
    i, j = mine[-1], mine[-2]
    now = sum(1 for e in ents[i + 1 :] if e.pg == last.pg)
    before = sum(1 for e in ents[j + 1 : i] if e.pg == last.pg)
    return 0 < now <= before


def _hidden(
    findings: list[GroupFinding],
    groups: dict[str, tuple[str, tuple[int, ...]]],
    by_rank: dict[int, Dump],
    order: dict[int, list[Entry]],
    job_ranks: set[int],
) -> list[GroupFinding]:
    """The groups that ranks wait in elsewhere (GroupFinding.elsewhere) where the dumps show
    nobody at fault: none of their dumped members is behind, so the member they wait for left no
    dump. A group's members are known from pg_config (NCCL); gloo's dumps do not list them, and
    then every rank of the job that left no dump is one it may be (said as such)."""
    named = {f.pg for f in findings if f.kind != "waiting"}
    waiting_in: dict[str, set[int]] = {}
    for f in findings:
        for r in f.elsewhere:
            if order.get(r):
                waiting_in.setdefault(order[r][-1].pg, set()).add(r)
    out: list[GroupFinding] = []
    undumped = tuple(sorted(r for r in job_ranks if r not in by_rank))
    for pg, waiters in sorted(waiting_in.items(), key=lambda kv: _pg_order(kv[0])):
        if pg in named:
            continue
        desc, members = groups.get(pg, ("", ()))
        listed = any(by_rank[r].groups.get(pg) and by_rank[r].groups[pg].ranks for r in waiters)
        hidden = tuple(r for r in members if r not in by_rank) if listed else undumped
        if not hidden:
            continue
        at = {r: order[r][-1] for r in waiters}
        seq = max(e.seq for e in at.values())
        waiters |= {r for r in members if r in by_rank and by_rank[r].last(pg) == seq}
        out.append(
            GroupFinding(
                pg,
                desc,
                seq,
                _common_op(at),
                "missing",
                hidden,
                tuple(sorted(waiters)),
                tuple(sorted(set(members) | set(hidden))),
                detail=(
                    "left no Flight Recorder dump while its group's other members waited"
                    if listed
                    else "left no Flight Recorder dump while the members of this group that did "
                    "(gloo's dumps do not list a group's members) waited: the member they waited "
                    "for is one of the ranks that left none"
                ),
                since_ns=min((e.created_ns for e in at.values() if e.created_ns), default=0),
            )
        )
    return out


def _missing(pg, desc, members, enq, idx: Index, no_dump, top) -> GroupFinding | None:
    """Members that left no dump, in a group whose dumped members all got as far as each other:
    they are where the others stopped only when the others did not complete their last one, or
    when the dumps cannot say (gloo): the caller decides with the logs (a dumped rank's timeout)."""
    if not no_dump:
        return None
    ents = _entries_at(pg, top, tuple(enq), idx)
    return GroupFinding(
        pg,
        desc,
        top,
        _common_op(ents),
        "missing",
        no_dump,
        tuple(sorted(enq)),
        members,
        detail="left no Flight Recorder dump; the others' last collective was this one",
        since_ns=min((e.created_ns for e in ents.values() if e.created_ns), default=0),
    )


def _gloo(pg: str, ranks, idx: Index) -> bool:
    return any(e.op.startswith("gloo:") for r in ranks for e in idx[r].get(pg, ()))


def _started(d: Dump, pg: str, ents) -> int | None:
    v = d.last(pg, "started")
    if v is not None and v >= 0:
        return v
    seqs = [e.seq for e in ents if e.state in ("started", "completed")]
    if seqs:
        return max(seqs)
    return v


def _entries_at(pg: str, seq: int, ranks, idx: Index) -> dict[int, Entry]:
    out: dict[int, Entry] = {}
    for r in ranks:
        for e in reversed(idx[r].get(pg, ())):  # the collective waited in is near the end
            if e.seq == seq:
                out[r] = e
                break
    return out


def _common_op(ents: dict[int, Entry]) -> str | None:
    ops = Counter(e.op for e in ents.values() if e.op)
    return ops.most_common(1)[0][0] if ops else None


def _mismatch(pg, desc, members, enq, idx: Index, upto: int) -> GroupFinding | None:
    """The first collective (up to #upto, which every member enqueued) that every member still
    holds in its ring buffer, run with another op, other sizes or other dtypes on some member."""
    holders = list(enq)
    if len(holders) < 2:
        return None
    by_seq: dict[int, dict[int, Entry]] = {}
    for r in holders:
        for e in idx[r].get(pg, ()):
            by_seq.setdefault(e.seq, {}).setdefault(r, e)
    for seq in sorted(by_seq):
        if seq > upto:
            break
        seen = by_seq[seq]
        if len(seen) < len(holders):
            continue  # evicted from some ring buffer: nothing to compare
        first = next(iter(seen.values()))
        if all(
            e.op == first.op and e.sizes == first.sizes and e.dtypes == first.dtypes
            for e in seen.values()
        ):
            continue  # the usual case, checked without building every signature
        keys = {r: agreed(e) for r, e in seen.items()}
        sigs = Counter(keys.values())
        if len(sigs) < 2:
            continue  # they differ only where the op lets them (uneven all_to_all splits)
        (top_sig, top_n), *rest = sigs.most_common()
        majority = top_n > rest[0][1]
        if majority:
            odd = tuple(sorted(r for r in seen if keys[r] != top_sig))
        else:
            odd = _unlike_their_past(seen, keys, seq, pg, idx)
        agree = tuple(sorted(r for r in seen if r not in odd))
        usual = top_sig if majority else (keys[agree[0]] if agree else None)
        what = _difference(seen, odd, usual, keys)
        return GroupFinding(
            pg,
            desc,
            seq,
            seen[agree[0]].op if agree else "/".join(sorted({e.op for e in seen.values()})),
            "mismatch",
            odd,
            agree,
            members,
            detail=what,
            since_ns=min((e.created_ns for e in seen.values() if e.created_ns), default=0),
        )
    return None


def _one_sided(pg, desc, members, enq, idx: Index, hidden) -> GroupFinding | None:
    """A mismatch seen on one side only: members left no dump (`hidden`), and a member that did
    ran the group's last collective unlike its own past (an op or, where they must agree, sizes
    it never ran at that point of its loop before) while any other dumped member there ran it as
    before. gloo's size check aborts the rank that received the other size (SIGABRT, no dump):
    the sender's dump is all there is. The caller decides with the logs (an abort on the other
    side) whether it counts."""
    if not hidden:
        return None
    top = max(enq.values())
    at: dict[int, Entry] = {}
    for r, v in enq.items():
        ents = idx[r].get(pg, ())
        if v == top and ents and ents[-1].seq == top:
            at[r] = ents[-1]
    if not at:
        return None
    new, usual = [], None
    for r, e in at.items():
        seen = _next_of(idx[r].get(pg, ())[:-1])
        prev = agreed(idx[r][pg][-2]) if len(idx[r][pg]) > 1 else None
        if prev is None or prev not in seen:
            return None  # no earlier round to tell by
        if agreed(e) not in seen[prev]:
            new.append(r)
            usual = usual or _entry_like(idx[r][pg], prev, seen[prev])
    if not new or len(new) == len(at) > 1:
        return None
    odd = tuple(sorted(new))
    others = tuple(sorted(r for r in at if r not in new))
    e = at[odd[0]]

    def desc_of(x: Entry) -> str:
        return f"{x.op} [{', '.join('x'.join(map(str, s)) for s in x.sizes)}]"

    was = f" where its earlier steps ran {desc_of(usual)}" if usual is not None else ""
    return GroupFinding(
        pg,
        desc,
        top,
        e.op,
        "mismatch",
        odd,
        others,
        tuple(sorted(set(members) | set(hidden))),
        detail=f"{_ranks(odd)} ran {desc_of(e)}{was}; {_ranks(hidden)} left no dump to compare",
        since_ns=e.created_ns,
        unseen=tuple(hidden),
        one_sided=True,
    )


def _next_of(ents) -> dict[tuple, set[tuple]]:
    """What a rank ran next after each collective, in its buffer (agreed keys)."""
    out: dict[tuple, set[tuple]] = {}
    prev = None
    for e in ents:
        k = agreed(e)
        if prev is not None:
            out.setdefault(prev, set()).add(k)
        prev = k
    return out


def _entry_like(ents, prev: tuple, nexts: set[tuple]) -> Entry | None:
    """An earlier entry that came right after one like `prev` (what the rank usually ran)."""
    for a, b in pairwise(ents):
        if agreed(a) == prev and agreed(b) in nexts:
            return b
    return None


def _unlike_their_past(
    seen: dict[int, Entry], keys: dict[int, tuple], seq: int, pg: str, idx: Index
) -> tuple[int, ...]:
    """With no majority (two ranks, half and half): the ranks whose collective here is unlike
    what they ran before at the same point of their loop, while the others' is as before. Each
    rank's own buffer says what its program does: the collective it ran after the one before
    this, in earlier rounds. A rank that ran another op or other sizes than ever before (a wrong
    collective, a wrong size), or ran them out of their usual order (it skipped one), stands out;
    when all or none do, every rank that differs is named."""
    new: list[int] = []
    for r in seen:
        pairs: set[tuple] = set()  # (a collective, the one it ran next) in earlier rounds
        prev = None
        for e in idx[r].get(pg, ()):
            if e.seq >= seq:
                break
            k = agreed(e)
            if prev is not None:
                pairs.add((prev, k))
            prev = k
        if prev is None or not pairs:
            return tuple(sorted(seen))  # no history to tell by
        if (prev, keys[r]) not in pairs:
            new.append(r)
    if new and len(new) < len(seen):
        return tuple(sorted(new))
    return tuple(sorted(seen))


def _difference(
    seen: dict[int, Entry], odd: tuple[int, ...], usual: tuple | None, keys: dict[int, tuple]
) -> str:
    def desc(e: Entry) -> str:
        sizes = ", ".join(
            "x".join(map(str, s)) if isinstance(s, tuple) else str(s) for s in e.sizes
        )
        return f"{e.op} [{sizes}]" + (f" {'/'.join(e.dtypes)}" if e.dtypes else "")

    ops = {k[0] for k in keys.values()}
    what = (
        "ops" if len(ops) > 1 else ("sizes" if len({k[1] for k in keys.values()}) > 1 else "dtypes")
    )
    parts = [f"rank {r}: {desc(seen[r])}" for r in odd]
    others = [r for r in seen if r not in odd]
    if usual is not None and others:
        parts.append(f"{_ranks(others)}: {desc(seen[others[0]])}")
    return f"different {what} ({'; '.join(parts)})"


def _ranks(rs) -> str:
    rs = sorted(rs)
    if len(rs) == 1:
        return f"rank {rs[0]}"
    spans: list[list[int]] = []  # consecutive ranks as spans: 0-3, 9
    for r in rs:
        if spans and r == spans[-1][1] + 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    return "ranks " + ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


# ---------------------------------------------------------------- who is at fault
# Findings whose faulty ranks did something wrong themselves, whatever else they wait for.
_DIRECT = ("mismatch", "stuck")
# Findings whose faulty ranks did not take part (did not enqueue it, left no dump): in a cycle of
# ranks waiting on each other, these are the ones whose order diverged.
_ABSENT = ("lag", "missing")


def _decide(
    findings: list[GroupFinding], by_rank: dict[int, Dump]
) -> tuple[dict[int, Fault], dict[int, GroupFinding]]:
    waits: dict[int, set[int]] = {}  # waiter -> the ranks it waits for
    absent_in: dict[int, int] = {}  # rank -> how many ranks wait for it to take part
    named: dict[int, list[GroupFinding]] = {}  # rank -> the findings that name it
    for f in findings:
        for r in f.faulty:
            if r not in f.elsewhere:  # a waiter in another group's collective: not named here
                named.setdefault(r, []).append(f)
        if f.kind == "waiting" or (f.kind == "mismatch" and not set(f.waiting)):
            continue
        for w in f.waiting:
            waits.setdefault(w, set()).update(f.faulty)
        if f.kind in _ABSENT:
            for r in f.faulty:
                if r not in f.elsewhere:
                    absent_in[r] = absent_in.get(r, 0) + len(f.waiting)
    roots = _sinks(named, waits, absent_in)
    faults: dict[int, Fault] = {}
    for r, fs in named.items():
        direct = [f for f in fs if f.kind in _DIRECT]
        if direct:
            f = min(direct, key=lambda x: (_DIRECT.index(x.kind), x.since_ns or 0))
            faults[r] = Fault(r, f.kind, f, _reason(r, f.kind, f))
    for r in roots:
        if r in faults:
            continue
        fs = named[r]
        f = _first(r, [f for f in fs if f.kind in _ABSENT] or fs, by_rank)
        if f.kind == "lag":
            kind, went_on = _lag_kind(r, f, by_rank, r in waits)
        else:
            kind, went_on = ("missing" if f.kind == "missing" else "stuck"), ""
        faults[r] = Fault(r, kind, f, _reason(r, kind, f, went_on), went_on)
    waited: dict[int, GroupFinding] = {}
    for f in findings:
        for w in f.waiting:
            if w in faults or w in waited:
                continue
            if f.kind != "waiting" and set(f.faulty) & set(faults):
                waited[w] = f
    for f in findings:
        for w in f.waiting:
            if w not in faults:
                waited.setdefault(w, f)
    return faults, waited


def _first(r: int, fs: list[GroupFinding], by_rank: dict[int, Dump]) -> GroupFinding:
    """Of the groups a rank lags in, the one it stopped at first: the collective a rank waiting
    in several of them enqueued first (its own buffer's order; clocks of hosts differ)."""
    if len(fs) == 1:
        return fs[0]
    common = set.intersection(*(set(f.waiting) for f in fs)) & set(by_rank)
    if not common:
        # no rank waits in all of them: the times they were entered (clocks of hosts agree to
        # a few milliseconds; a rank's program runs its groups' collectives further apart)
        return min(fs, key=lambda x: (x.since_ns or 0, _pg_order(x.pg)))
    ref = min(common)
    order = {(e.pg, e.seq): i for i, e in enumerate(by_rank[ref].entries) if not e.p2p}
    return min(
        fs,
        key=lambda x: (order.get((x.pg, x.seq), len(order)), x.since_ns or 0, _pg_order(x.pg)),
    )


def _sinks(
    named: dict[int, list[GroupFinding]], waits: dict[int, set[int]], absent_in: dict[int, int]
) -> list[int]:
    """The ranks at the end of the waiting: in every group of ranks that wait for nobody outside
    it, the ones that did not take part (did not enqueue, left no dump), else the ones whose
    stream never started; among several in a cycle, those most ranks wait for."""
    nodes = set(named) | set(waits) | {r for ws in waits.values() for r in ws}
    comp = _sccs(nodes, waits)
    members: dict[int, list[int]] = {}
    for r, c in comp.items():
        members.setdefault(c, []).append(r)
    roots: list[int] = []
    for c, rs in members.items():
        if any(comp[t] != c for r in rs for t in waits.get(r, ())):
            continue  # it waits for a rank outside: the cause is further on
        cands = [r for r in rs if r in absent_in] or [r for r in rs if r in named]
        if not cands:
            continue
        if len(cands) > 1 and len(rs) > 1:
            most = max(absent_in.get(r, 0) for r in cands)
            cands = [r for r in cands if absent_in.get(r, 0) == most]
        roots += cands
    return sorted(roots)


def _sccs(nodes: set[int], edges: dict[int, set[int]]) -> dict[int, int]:
    """Tarjan's strongly connected components, iteratively: node -> component id."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on: set[int] = set()
    stack: list[int] = []
    comp: dict[int, int] = {}
    counter = 0
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp[w] = v
                    if w == v:
                        break
    return comp


def _lag_kind(
    r: int, f: GroupFinding, by_rank: dict[int, Dump], waits_elsewhere: bool
) -> tuple[str, str]:
    """stopped-short when, after its last collective in the group, the rank went on to one in
    another group that did not complete (it waits there: its program skipped this one), with
    that collective; else stalled (it added nothing its peers are waiting for). Its own buffer's
    order says what came after what; times across hosts are too coarse for that."""
    d = by_rank.get(r)
    if d is None:
        return "stalled", ""
    ents = [e for e in d.entries if not e.p2p]
    last_here = max((i for i, e in enumerate(ents) if e.pg == f.pg), default=-1)
    later = []
    for e in ents[last_here + 1 :]:
        if e.pg == f.pg:
            continue
        done = d.last(e.pg, "completed")
        if done is None or e.seq > done:
            later.append(e)
    if later:
        e = later[-1]
        return "stopped-short", f"#{e.seq} ({e.op}) of group {_name(e)}"
    return "stalled", ""


def _name(e: Entry) -> str:
    return f"{e.pg} ({e.pg_desc})" if e.pg_desc and e.pg_desc not in (e.pg, "undefined") else e.pg


def _reason(r: int, kind: str, f: GroupFinding, went_on: str = "") -> str:
    where = f"collective {f.collective} of group {f.group}"
    who = _ranks(f.waiting) if f.waiting else "its peers"
    if kind == "stalled":
        return (
            f"stalled before {where}, where {who} waited: no collective of its own since (a hang, "
            "a held GIL, an exit)"
        )
    if kind == "stopped-short":
        return f"did not enqueue {where}, where {who} waited; it went on to {went_on}"
    if kind == "stuck":
        return f"stuck in {where}: {f.detail}"
    if kind == "mismatch":
        if f.one_sided:
            return f"ran {where} unlike its own earlier steps: {f.detail}"
        return f"ran {where} unlike its peers: {f.detail}"
    if kind == "missing":
        return f"left no Flight Recorder dump while {who} waited in {where}"
    return where
