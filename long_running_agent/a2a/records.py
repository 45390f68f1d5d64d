"""Other agents' tasks and push configurations, kept in the app's own database beside the ledger.

A task row holds only what the ledger does not: which client sent which message, the conversation it runs in, and
the ticket (or payouts, or reply) its turn produced. The task's state is never stored: it is read from the ticket each
time (outcome.py), so a decision made on any channel, in any process, is what the task says.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError

from ..ledger import Ledger
from ..ledger.outbox import A2A_PUSH
from ..ledger.storage.schema import A2aPushRow, A2aTaskRow


@dataclass(frozen=True)
class TaskRecord:
    id: str
    client: str
    message_id: str
    context_id: str
    session_id: str
    created_at: datetime
    finished_at: datetime | None
    ticket_id: str | None
    payout_ids: str | None
    reply: str | None
    error: str | None

    @classmethod
    def of(cls, row: A2aTaskRow) -> TaskRecord:
        return cls(**{name: getattr(row, name) for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class PushConfig:
    task_id: str
    id: str
    url: str
    token: str | None


def session_of(client: str, context_id: str) -> str:
    """The ADK session a client's A2A context runs in: the same for every message of the context, and its own."""
    return f"a2a-{uuid.uuid5(uuid.NAMESPACE_URL, f'{client}/{context_id}')}"


class TaskRecords:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    async def open(self, client: str, message_id: str, context_id: str) -> tuple[TaskRecord, bool]:
        """The task of `client`'s message `message_id`: a new one (True), or the one a send before it opened."""
        database = self.ledger.database
        row = A2aTaskRow(id=str(uuid.uuid4()), client=client, message_id=message_id, context_id=context_id,
                         session_id=session_of(client, context_id), created_at=database.now())
        try:
            async with await database.session() as db, db.begin():
                db.add(row)
            return TaskRecord.of(row), True
        except IntegrityError:  # UNIQUE (client, message_id): a retried send
            async with await database.session() as db:
                found = await db.scalar(select(A2aTaskRow).where(A2aTaskRow.client == client,
                                                                 A2aTaskRow.message_id == message_id))
                if found is None:
                    raise
                return TaskRecord.of(found), False

    async def finish(self, task_id: str, *, ticket_id: str | None, payout_ids: list[str], reply: str | None,
                     error: str | None = None) -> None:
        """Record what the task's turn produced."""
        async with await self.ledger.database.session() as db, db.begin():
            await db.execute(update(A2aTaskRow).where(A2aTaskRow.id == task_id).values(
                finished_at=self.ledger.now(), ticket_id=ticket_id, payout_ids=",".join(payout_ids) or None,
                reply=reply, error=error))

    async def get(self, task_id: str, client: str) -> TaskRecord | None:
        """The task, if it is `client`'s: another client's is as unknown as one that never was."""
        async with await self.ledger.database.session() as db:
            row = await db.get(A2aTaskRow, task_id)
            return TaskRecord.of(row) if row is not None and row.client == client else None

    async def of_client(self, client: str, context_id: str | None, limit: int, offset: int,
                        ) -> tuple[list[TaskRecord], int]:
        """A page of `client`'s tasks, newest first (of one context, if given), and how many there are."""
        where = [A2aTaskRow.client == client] + ([A2aTaskRow.context_id == context_id] if context_id else [])
        async with await self.ledger.database.session() as db:
            rows = await db.scalars(select(A2aTaskRow).where(*where)
                                    .order_by(A2aTaskRow.created_at.desc(), A2aTaskRow.id).limit(limit).offset(offset))
            total = await db.scalar(select(func.count()).select_from(A2aTaskRow).where(*where))
            return [TaskRecord.of(row) for row in rows], total or 0

    async def add_push(self, push: PushConfig) -> None:
        """Keep (or replace) where a task's outcome is pushed."""
        async with await self.ledger.database.session() as db, db.begin():
            await db.merge(A2aPushRow(task_id=push.task_id, id=push.id, url=push.url, token=push.token))

    async def pushes(self, task_id: str) -> list[PushConfig]:
        async with await self.ledger.database.session() as db:
            rows = await db.scalars(select(A2aPushRow).where(A2aPushRow.task_id == task_id).order_by(A2aPushRow.id))
            return [PushConfig(row.task_id, row.id, row.url, row.token) for row in rows]

    async def drop_push(self, task_id: str, config_id: str) -> None:
        async with await self.ledger.database.session() as db, db.begin():
            await db.execute(delete(A2aPushRow).where(A2aPushRow.task_id == task_id, A2aPushRow.id == config_id))

    async def unqueued(self, limit: int = 100) -> list[tuple[PushConfig, TaskRecord]]:
        """Push configurations whose task's outcome is not in the outbox yet, with their tasks."""
        async with await self.ledger.database.session() as db:
            rows = (await db.execute(select(A2aPushRow, A2aTaskRow).join(A2aTaskRow)
                                     .where(A2aPushRow.queued_at.is_(None)).limit(limit))).all()
            return [(PushConfig(p.task_id, p.id, p.url, p.token), TaskRecord.of(t)) for p, t in rows]

    async def queue(self, push: PushConfig, task: dict[str, Any]) -> bool:
        """Put the push of `task` (its final JSON) in the outbox, once: False if another process did already."""
        now = self.ledger.now()
        async with await self.ledger.database.session() as db, db.begin():
            taken = await db.execute(update(A2aPushRow).where(
                A2aPushRow.task_id == push.task_id, A2aPushRow.id == push.id, A2aPushRow.queued_at.is_(None),
            ).values(queued_at=now))
            if taken.rowcount != 1:  # type: ignore[attr-defined]
                return False
            self.ledger.outbox.add_message(db, ticket_id=push.task_id, event=A2A_PUSH, due=now,
                                           body={"url": push.url, "token": push.token, "task": task})
            return True
