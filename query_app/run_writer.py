"""Stored runs written now, or off the request path by a writer thread, never lost.

``run_store`` stores a run as the next turn of its conversation (a signed-in
user's lone run starts one). With ``later=True`` the run gets its id, its
conversation's id and its time at once (ids reserved from the tables' own
sequences, a block at a time), so the caller can answer with the run's payload;
the rows are written by this process's writer thread, many runs per
transaction.

Nothing is dropped:

- the queue is bounded (``RAG_RUN_WRITER_QUEUE`` runs); when it is full, or the
  thread is not running, the caller writes its run itself, as without a queue;
- a batch that fails because the database is unreachable is kept and retried
  (backing off up to 5 s); a batch that fails for another reason is written run
  by run, so one bad run (its collection deleted meanwhile) cannot take others
  with it; a run that still cannot be written is logged with its payload;
- the queue is flushed when the process exits (``atexit``; gunicorn's
  ``worker_exit`` hook in ``ragsite/gunicorn_conf.py`` too).

A process killed outright (SIGKILL, out of memory) loses what its queue held
(the runs of the last moments); everything else reaches the database.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.db.models import Model
from django.utils import timezone

from query_app.models import Conversation, QueryRun

logger = logging.getLogger(__name__)

DEFAULT_CAPACITY = 256
BATCH = 64  # runs per transaction at most
ID_BLOCK = 32  # ids reserved per query
IDLE_CLOSE_S = 2.0  # the writer's connection is closed after this long without work


@dataclass
class PendingRun:
    run: QueryRun
    new_conversation: Conversation | None  # created with this run (its first turn)


def _write(items: list[PendingRun]) -> None:
    """Write ``items`` in one transaction (conversations first, then runs, then activity)."""
    with transaction.atomic():
        new = [i.new_conversation for i in items if i.new_conversation is not None]
        if new:
            _rows_copy(Conversation, new)
        _rows_copy(QueryRun, [i.run for i in items])
        touched: dict[int, object] = {}
        for i in items:
            if i.run.conversation_id is not None and i.new_conversation is None:
                touched[i.run.conversation_id] = i.run.created_at
        for conversation_id, at in touched.items():
            # The conversation was last active when this turn was asked.
            Conversation.objects.filter(pk=conversation_id, updated_at__lt=at).update(updated_at=at)


def _rows_copy(model: type[Model], objects: list[Any]) -> None:
    """Insert ``objects`` (ids set) with COPY, as ``bulk_create`` would store them.

    Each value is prepared by its field as for an INSERT (a JSON field's dump
    included). COPY spares the statement's text: a run's trace, citations and
    options, ~10 kB of JSON, are neither quoted into SQL by the client nor parsed
    as SQL by the server. Measured in batches of 8 and 32 runs: 0.4-0.6 CPU-ms a
    run in Python and 0.45-0.6 in PostgreSQL, against 1.8-2.1 and 0.7-0.85 with
    ``bulk_create``.
    """
    fields = model._meta.concrete_fields
    values = [[f.pre_save(obj, True) for f in fields] for obj in objects]
    if any(hasattr(v, "resolve_expression") for row in values for v in row):
        # An expression (a database default, a function) is the server's to
        # compute: COPY takes values only.
        model._default_manager.bulk_create(objects)
        return
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    statement = f"COPY {model._meta.db_table} ({columns}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for row in values:
            copy.write_row(
                [f.get_db_prep_save(v, connection) for f, v in zip(fields, row, strict=True)]
            )
    for obj in objects:
        obj._state.adding = False
        obj._state.db = connection.alias


class RunWriter:
    """A bounded queue of runs and the thread that writes them (one per process)."""

    def __init__(self, *, capacity: int = DEFAULT_CAPACITY, autostart: bool = True) -> None:
        self.capacity = capacity
        self.autostart = autostart
        self._queue: deque[PendingRun] = deque()
        self._in_flight = 0
        self._batch: list[PendingRun] = []  # being written
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._stopping = False
        self._disconnect = False
        self.written = 0  # runs written by the thread
        self.written_now = 0  # runs their caller wrote because the queue was full
        self.failed = 0  # runs that could not be written at all (logged)

    def submit(self, item: PendingRun) -> None:
        """Queue ``item``; write it now when the queue is full or the writer has stopped.

        A writer made with ``autostart=False`` holds what it is given until ``start``.
        """
        with self._cond:
            if self.autostart and not self._stopping:
                self._start()
            if not self._stopping and self.pending() < self.capacity:
                self._queue.append(item)
                self._cond.notify()
                return
        _write([item])
        with self._cond:
            self.written_now += 1

    def pending(self) -> int:
        """Runs queued or being written."""
        return len(self._queue) + self._in_flight

    def holds(self, run_id: int) -> bool:
        """Whether run ``run_id`` waits here (queued or being written)."""
        with self._cond:
            return any(item.run.pk == run_id for item in [*self._queue, *self._batch])

    def start(self) -> None:
        with self._cond:
            self._start()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued run is written; False if ``timeout`` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if not self._running() and self._queue:
                # No thread (not started, or this is a forked child): write here.
                self._drain_here()
            while self.pending():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def stop(self, timeout: float = 30.0) -> None:
        """Flush, then end the thread (at exit)."""
        flushed = self.flush(timeout)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            left = list(self._queue)
        if not flushed:
            for item in left:
                self._lost(item, "the process exited before the database took it")

    def _running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self._pid == os.getpid()

    def _start(self) -> bool:
        if self._running():
            return True
        if self._pid != os.getpid():
            # A forked child inherits the parent's queue object but not its thread.
            self._queue = deque(self._queue) if self._pid == 0 else deque()
            self._in_flight = 0
        self._pid = os.getpid()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="rag-run-writer", daemon=True)
        self._thread.start()
        return True

    def _drain_here(self) -> None:
        items = list(self._queue)
        self._queue.clear()
        self._write_safely(items)

    def disconnect(self) -> None:
        """Write what is queued, then close the thread's database connection (tests)."""
        self.flush()
        with self._cond:
            self._disconnect = True
            self._cond.notify_all()
            while self._disconnect and self._running():
                self._cond.wait(1.0)
            self._disconnect = False

    def _loop(self) -> None:
        backoff = 0.1
        while True:
            with self._cond:
                idle = False
                while not self._queue and not self._stopping:
                    if idle or self._disconnect:
                        # Quiet for a while: give the connection back (a busy
                        # site keeps it; the next batch opens a new one).
                        connection.close()
                        self._disconnect = False
                        self._cond.notify_all()
                    idle = not self._cond.wait(IDLE_CLOSE_S)
                if not self._queue:
                    connection.close()
                    return
                batch = [self._queue.popleft() for _ in range(min(BATCH, len(self._queue)))]
                self._in_flight = len(batch)
                self._batch = batch
            try:
                retry = not self._write_safely(batch)
            finally:
                with self._cond:
                    if retry:
                        # The database is unreachable: keep the batch, first in line.
                        self._queue.extendleft(reversed(batch))
                    self._in_flight = 0
                    self._batch = []
                    self._cond.notify_all()
            if retry:
                connection.close()
                time.sleep(backoff)
                backoff = min(5.0, backoff * 2)
            else:
                backoff = 0.1

    def _write_safely(self, batch: list[PendingRun]) -> bool:
        """Write ``batch``; False when the database is unreachable (nothing was written)."""
        try:
            _write(batch)
        except (OperationalError, InterfaceError):
            logger.warning("run writer: the database is unreachable; %d runs wait", len(batch))
            return False
        except DatabaseError:
            # One bad run (e.g. its collection was deleted): write the others one by one.
            for item in batch:
                try:
                    _write([item])
                except DatabaseError as exc:
                    self._lost(item, str(exc))
                else:
                    self.written += 1
            return True
        self.written += len(batch)
        return True

    def _lost(self, item: PendingRun, why: str) -> None:
        self.failed += 1
        logger.error(
            "run writer: run %s could not be stored (%s): %s",
            item.run.pk,
            why,
            json.dumps(item.run.as_payload(), default=str)[:20000],
        )


# Per process: a forked child must not hand out the ids its parent reserved.
_ids: dict[tuple[int, type[Model]], deque[int]] = {}
_ids_lock = threading.Lock()


def _reserve_id(model: type[Model]) -> int:
    """A fresh primary key from ``model``'s own sequence (reserved a block at a time)."""
    with _ids_lock:
        free = _ids.setdefault((os.getpid(), model), deque())
        if not free:
            table = model._meta.db_table
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                    [table, ID_BLOCK],
                )
                free.extend(int(row[0]) for row in cursor.fetchall())
        return free.popleft()


def _capacity() -> int:
    return int(os.environ.get("RAG_RUN_WRITER_QUEUE", DEFAULT_CAPACITY))


_writer = RunWriter(capacity=_capacity())


def run_writer() -> RunWriter:
    """This process's writer."""
    return _writer


def run_written(run_id: int, *, timeout: float = 10.0) -> None:
    """Return once run ``run_id`` is in the database, if this process is still writing it."""
    if _writer.holds(run_id):
        _writer.flush(timeout)


def run_store(
    run: QueryRun,
    *,
    conversation: Conversation | None,
    later: bool = False,
    writer: RunWriter | None = None,
) -> None:
    """Store ``run`` as the next turn of ``conversation``; a user's lone run starts one.

    ``later``: ids and times are set now and the rows written by ``writer``'s
    thread (this process's writer unless given), unless the caller is inside a
    transaction.
    """
    run.created_at = timezone.now()
    new = None
    if conversation is None and run.user_id is not None:
        new = Conversation(
            owner_id=run.user_id,
            collection=run.collection,
            title=Conversation.title_for(run.question),
            created_at=run.created_at,
            updated_at=run.created_at,
        )
    # A caller inside a transaction writes in it: the writer thread's own
    # connection could not see the rows the run refers to before it commits.
    if not later or connection.in_atomic_block:
        with transaction.atomic():
            if new is not None:
                new.save()
            run.conversation = new or conversation
            run.save()
            if conversation is not None:
                Conversation.objects.filter(pk=conversation.pk).update(updated_at=run.created_at)
        return
    if new is not None:
        new.pk = _reserve_id(Conversation)
    run.pk = _reserve_id(QueryRun)
    run.conversation = new or conversation
    (writer or _writer).submit(PendingRun(run=run, new_conversation=new))


def _at_exit() -> None:
    if _writer.pending():
        _writer.stop()


atexit.register(_at_exit)
