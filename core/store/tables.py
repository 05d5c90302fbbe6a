"""SQLModel table definitions. Rows never leave core/store/: repositories map them to domain
models. Every schema change here needs an Alembic revision in migrations/versions/.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import BigInteger, Column, DateTime, Index, Integer, Text, literal_column, text
from sqlmodel import Field, SQLModel

# SQLite only aliases the rowid (and so gives a cheap monotonic key) for `INTEGER PRIMARY KEY`;
# PostgreSQL needs a 64-bit identity. One column type serves both.
BigIntKey = BigInteger().with_variant(Integer(), "sqlite")


def aware(moment: datetime) -> datetime:
    """A stored moment as UTC: SQLite hands back naive datetimes; everything stored is UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class SessionRow(SQLModel, table=True):
    """One session; core/store/sessions.py maps it to a SessionRecord."""

    __tablename__ = "sessions"

    id: str = Field(primary_key=True, max_length=64)
    provider: str = Field(max_length=200)
    title: str = Field(sa_column=Column(Text, nullable=False))
    title_origin: str = Field(default="default", max_length=16)
    model: str | None = Field(default=None, sa_column=Column(Text))
    cwd: str = Field(sa_column=Column(Text, nullable=False))
    project_path: str | None = Field(default=None, sa_column=Column(Text))
    worktree_path: str | None = Field(default=None, sa_column=Column(Text))
    worktree_baseline_json: str | None = Field(default=None, sa_column=Column(Text))
    worktree_identity_json: str | None = Field(default=None, sa_column=Column(Text))
    worktree_discarded: bool = Field(default=False)
    permission_mode: str = Field(max_length=32)
    sandbox_policy: str = Field(max_length=32)
    activity_json: str | None = Field(default=None, sa_column=Column(Text))
    acp_session_id: str | None = Field(default=None, sa_column=Column(Text))
    models_json: str | None = Field(default=None, sa_column=Column(Text))
    config_options_json: str | None = Field(default=None, sa_column=Column(Text))
    context_window_json: str | None = Field(default=None, sa_column=Column(Text))
    modes_json: str | None = Field(default=None, sa_column=Column(Text))
    # ACP wire form including env values and headers: read back only to revive the agent.
    mcp_servers_json: str | None = Field(default=None, sa_column=Column(Text))
    # {"session","turn","prime"} of a forked session (issue 14).
    lineage_json: str | None = Field(default=None, sa_column=Column(Text))
    archived: bool = Field(default=False)
    # The cluster member whose agent and worktree serve this session (issue 18); None when
    # not clustered.
    owner: str | None = Field(default=None, max_length=64)
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    updated_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))

    # The session list's order (newest first, id breaking ties) as one index range: a page
    # of the list costs the same with 100 sessions or 100,000 (core/session_list.py).
    __table_args__ = (Index("ix_sessions_archived_created_id", "archived", "created_at", "id"),)


USER_ROWS = "role = 'user'"  # the rows ix_parts_user holds


class PartRow(SQLModel, table=True):
    """One transcript row; `seq` is per session, contiguous from 0 (docs/protocol.md §6.2)."""

    __tablename__ = "parts"

    session_id: str = Field(primary_key=True, max_length=64)
    seq: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    role: str = Field(max_length=8)
    part_json: str = Field(sa_column=Column(Text, nullable=False))

    # Prompts (user rows, one per turn) are what turn numbering and paging look up by role;
    # agent rows, nearly all of the table, stay out of this index, or every streamed chunk
    # would write another b-tree (docs/decisions.md, "fifth slice"). A query uses it only
    # when it states the role as a literal, as USER_ROW does. On SQLite the rows are stored
    # in their primary key's b-tree (WITHOUT ROWID): one b-tree per chunk, not a table and
    # its key index, and a page reads its rows in key order.
    __table_args__ = (
        Index(
            "ix_parts_user",
            "session_id",
            "seq",
            sqlite_where=text(USER_ROWS),
            postgresql_where=text(USER_ROWS),
        ),
        {"sqlite_with_rowid": False},
    )


# The condition of a query on user rows, as ix_parts_user needs it (a literal, not a bound
# parameter: the planner cannot match a parameter against the index's condition).
USER_ROW = PartRow.__table__.c.role == literal_column("'user'")  # type: ignore[attr-defined]


class EventRow(SQLModel, table=True):
    """The append-only event log: a global, strictly increasing, durable sequence."""

    __tablename__ = "events"

    seq: int | None = Field(
        default=None, sa_column=Column(BigIntKey, primary_key=True, autoincrement=True)
    )
    session_id: str | None = Field(default=None, max_length=64)
    payload: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))

    # No index on `created_at`: retention finds its boundary by seq (EventLog.prune).
    __table_args__ = (Index("ix_events_session_seq", "session_id", "seq"),)


class IdempotencyRow(SQLModel, table=True):
    """First outcome of an op per (device, request_id), replayed on retry (docs/api.md §1)."""

    __tablename__ = "idempotency"

    device_id: str = Field(primary_key=True, max_length=64)
    request_id: str = Field(primary_key=True, max_length=128)
    op_hash: str = Field(max_length=64)
    status: int  # 0 while the op runs (a cluster member's claim: `claimant`)
    body_json: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    # "<instance id> <process token>" of the member running the op (issue 18).
    claimant: str | None = Field(default=None, max_length=80)


class AgentProcessRow(SQLModel, table=True):
    """A live agent process group started by this home's server (issue: orphans after a crash).

    `start_time` is the leader's start in clock ticks since boot (/proc/<pid>/stat field 22)
    and `boot_id` the kernel's boot id: together with `pid` they name one process for ever,
    so a recorded group is only ended when it is provably the one c2 started.
    """

    __tablename__ = "agent_processes"

    pid: int = Field(primary_key=True)
    pgid: int
    start_time: int = Field(sa_column=Column(BigInteger, nullable=False))
    boot_id: str = Field(max_length=64)
    session_id: str | None = Field(default=None, max_length=64)
    # The cluster member that spawned it (issue 18): a restarting member ends only its own.
    instance_id: str | None = Field(default=None, max_length=64)
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
