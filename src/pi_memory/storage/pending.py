"""Live messages indexed at their writer's idle moment: rows written `INDEX_PENDING`, indexed by `index_pending`.

`msg.indexed` of a live message whose index entry waits for its writer's next idle moment
(`Store.defer_hooks`): tokenizing and indexing a 6,000-char message costs ~4 ms of CPU, which
must not land on the write. Its text waits too (written plain, ~20-40 us of zstd saved on the
write): it is packed in the same statement that claims the row for its index entry; and so does
its verbatim line (stored as it is, `codec.plain`: ~50-80 us of zlib saved on the write), packed
in the same transaction unless something replaced it meanwhile. A partial index (`msg_index_pending`, schema m008) finds such rows, so
whichever process opens the archive next indexes what a writer that ended first left behind.
A mixin of `Store` (its connection, `write()`, `rows()`, `index_typed`, `add_to_counters`).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ..core.echo import with_echo_token
from ..core.text import index_texts
from . import codec
from .codec import compress, decode_text, encode_text, plain_line

if TYPE_CHECKING:
    import apsw

INDEX_PENDING = 2
PENDING_PER_WRITE = 200  # pending messages read at a time
# characters of tokens per transaction: a live writer's idle moment is the lock other live writers
# wait for (8 bridges beside an import: 200,000, an import's budget, held it up to ~170 ms)
PENDING_BUDGET = 40_000


# a message waiting for its index entry: (msg id, nchars, text, its two channels (`index_texts`), its text
# packed if stored plain, (its verbatim line as stored plain, packed) or None, whether it is an echo)
Pending = tuple[int, int, str, tuple[str, str], "str | bytes | None", "tuple[bytes, bytes] | None", bool]


def _by_index_cost(cuts: list[Pending]) -> list[list[Pending]]:
    """Pending messages in groups of about `PENDING_BUDGET` characters of tokens: one short transaction each."""
    groups: list[list[Pending]] = []
    cost = PENDING_BUDGET
    for cut in cuts:
        size = len(cut[3][0]) + len(cut[3][1]) + 200
        if cost + size > PENDING_BUDGET:
            groups.append([])
            cost = 0
        groups[-1].append(cut)
        cost += size
    return groups


def _pending(
    msg_id: int, nchars: int, stored: str | bytes, dict_id: int, raw: bytes | None, echo: bool = False
) -> Pending:
    """A pending row's tokens (an echo's with `ECHO_TOKEN`), and its text and verbatim line packed when
    a live write left them plain (outside the transaction)."""
    text = decode_text(stored)
    packed = encode_text(text, dict_id) if isinstance(stored, str) and codec.PACK_TEXT else None
    line = plain_line(raw)
    packed_line = (raw, compress(line, text)) if raw is not None and line is not None else None
    chars, grams = index_texts(text)
    if chars or grams:  # a text without tokens stays out of the index, echo or not
        chars = str(with_echo_token(chars, echo))
    return (msg_id, nchars, text, (chars, grams), packed, packed_line, echo)


class PendingIndex:
    """`index_pending`: the index entries live writes left for later."""

    conn: apsw.Connection
    index_deferred = False  # new messages are written `INDEX_PENDING` and indexed by `index_pending`
    pending_index = True  # there may be rows waiting for `index_pending` (a writer that ended first left some)
    own_pending: list[int]  # the ids this connection wrote `INDEX_PENDING` since its last idle moment
    text_dict_id = 0  # the dictionary new text is packed with (`Store.text_codec`)

    if TYPE_CHECKING:

        def write(self) -> AbstractContextManager[None]: ...

        def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

        def index_typed(self, msg_id: int, text: str, typed: str | None = None, echo: bool = False) -> None: ...

        def add_to_counters(self, deltas: dict[str, int]) -> None: ...

    def index_pending(self) -> int:
        """Tokenize and index the messages written `INDEX_PENDING` (any writer's); returns how many.

        Tokenizing happens outside the transaction; inside, a row is claimed (`indexed` 2 -> 1)
        before its index entry is written, so two processes doing this at once index it once.
        """
        done = 0
        while self.pending_index:
            rows = self.rows(
                """SELECT m.id, m.text, m.nchars, e.raw, m.echo FROM msg m LEFT JOIN entry e ON e.msg_id = m.id
                   WHERE m.indexed = 2 LIMIT ?""",
                (PENDING_PER_WRITE,),
            )
            self.pending_index = len(rows) == PENDING_PER_WRITE
            done += self._index_rows(rows)
        self.own_pending = []
        return done

    def index_own_pending(self) -> int:
        """`index_pending` for the messages this connection wrote only: a live writer's idle moment.

        Eight writers each tokenized every writer's pending rows (only the first to claim a row kept
        its work): eight times the CPU on a machine of two cores, where a lock holder waiting for a
        core holds up everyone. What a writer that ended first left is indexed at the next opening."""
        done = 0
        while self.own_pending:
            ids, self.own_pending = self.own_pending[:PENDING_PER_WRITE], self.own_pending[PENDING_PER_WRITE:]
            rows = self.rows(
                f"""SELECT m.id, m.text, m.nchars, e.raw, m.echo FROM msg m LEFT JOIN entry e ON e.msg_id = m.id
                    WHERE m.indexed = 2 AND m.id IN ({",".join("?" * len(ids))})""",
                ids,
            )
            done += self._index_rows(rows)
        return done

    def _index_rows(self, rows: list[tuple[Any, ...]]) -> int:
        cuts = [_pending(int(i), int(n), text, self.text_dict_id, raw, bool(e)) for i, text, n, raw, e in rows]
        return sum(self._index_claimed(group) for group in _by_index_cost(cuts))

    def _index_claimed(self, cuts: list[Pending]) -> int:
        """One transaction: claim the rows still pending, then index them (one FTS5 segment for the lot)."""
        with self.write():
            claimed = []
            for msg_id, nchars, text, toks, packed, line, echo in cuts:
                has_tokens = bool(toks[0] or toks[1])
                self.conn.execute(
                    "UPDATE msg SET indexed = ?, text = coalesce(?, text) WHERE id = ? AND indexed = 2",
                    (int(has_tokens), packed, msg_id),
                )
                if not self.conn.changes():
                    continue  # another process claimed it
                if line is not None:  # unless a later write (the file's own line) replaced it
                    self.conn.execute(
                        "UPDATE entry SET raw = ? WHERE msg_id = ? AND raw = ?", (line[1], msg_id, line[0])
                    )
                if has_tokens:
                    claimed.append((msg_id, nchars, text, toks, echo))
            # every UPDATE before the first insert: an UPDATE after one would flush a segment per message
            for msg_id, _n, text, toks, echo in claimed:
                self.conn.execute(
                    "INSERT INTO msg_fts(rowid, chars, grams) VALUES (?,?,?)",
                    (msg_id, *toks),
                )
                self.index_typed(msg_id, text, echo=echo)
            if claimed:
                self.add_to_counters({"indexed_docs": len(claimed), "indexed_chars": sum(c[1] for c in claimed)})
        return len(claimed)
