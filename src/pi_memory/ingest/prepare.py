"""A session file made ready to write, outside any transaction: parsed, cut, packed, its runs planned.

Design idea: everything a write needs but the database is done here, by a parse worker for a
bulk import (`pi_memory.parse_worker`) or in the importing process for a few files and for
`watch`. What comes back is plain data: each message as the values of a `NewMessage` but its
session id, each other line as those of a `NewEntry`, in tuples rather than objects, because a
worker's answer is pickled, sent and unpickled by the writer's process (objects cost several times
as much to send, and the writer is the busier of the two). Pure: no database, no store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from ..core import jsonline
from ..core.echo import is_echo_message, session_echoes
from ..core.sources.pi import Entry, Header, ParsedSession, Skipped
from ..core.sources.readers import read_session_file
from ..core.summary import RunMessage
from ..core.text import index_texts, surface_text
from ..provenance.extract import plan_file
from ..runs.planned import PlannedRun, plan_file_runs
from ..runs.table import message_of, source_message
from ..storage import codec
from ..storage.rows import meta_json
from ..storage.usage import UsageRow, rows_of

# A message line: the fields of `NewMessage` after its session id, in their order (ts, role, text,
# indexed, entry_id, parent_id, meta, hash, raw, entry_type, chars, grams, packed, packed_raw,
# typed, meta_json, echo). `raw` is None where `packed_raw` holds the line (the local archive's store).
# The tokens (chars, grams, typed) come as UTF-8 bytes, as SQLite reads them: a writer that got
# them as text would decode them from the pickle and encode them again to bind them (~5 us a
# message of its time, the busier process's; FTS5 reads a blob's bytes as the text they spell).
MessageLine = tuple[Any, ...]
# Any other line, kept verbatim: the fields of `NewEntry` after its session id (key, entry_id,
# type, ts, raw, packed_raw).
KeptLine = tuple[str, "str | None", str, int, bytes, "bytes | None"]


class PreparedFile(NamedTuple):
    """One session file (or a chunk of one, for `watch`) as a write takes it."""

    header: Header | None
    name: str | None  # the session's name (`session_info`), if the file gives one
    skipped: list[Skipped]  # lines that could not be read, with their numbers
    times: list[int]  # (first, last) time of its lines (ms; empty: none stamped)
    messages: list[MessageLine]  # its message lines, in file order
    kept: list[KeptLine]  # its other lines, in file order
    runs: list[PlannedRun] | None  # the session's runs by message position (None: not planned)
    usage: list[UsageRow] = []  # the model requests its lines record, priced (`storage.usage.row_of`)
    edits: list[tuple[Any, ...]] | None = None  # its file changes, by message hash (`provenance.extract.plan_file`)


def parse_and_tokenize(path: str, agent: str | None, text_dict: int = 0, keep_lines: bool = False) -> PreparedFile:
    """Read one session file and prepare it (see `prepare`), its runs planned."""
    return prepare(read_session_file(Path(path), agent), text_dict, keep_lines, plan=True)


def prepare(parsed: ParsedSession, text_dict: int = 0, keep_lines: bool = False, plan: bool = False) -> PreparedFile:
    """Cut each indexed message into tokens, pack its text with the archive's dictionary `text_dict`
    (registered; 0: the writer packs it) and its verbatim line against that text, key and pack
    every other line, and, with `plan`, plan the session's runs as `runs.table` would build them
    (their fields packed with that dictionary too).

    `keep_lines`: send each message's verbatim line as it is instead (the team archive stores lines
    alone, not against their text). A text met again (the same hash) is cut once.
    """
    cuts: dict[str, tuple[bytes, bytes, bytes, str | bytes | None]] = {}
    messages: list[MessageLine] = []
    kept: list[KeptLine] = []
    echoes = iter(_echoes(parsed))
    for entry in parsed.entries:
        if entry.rendered is None:
            kept.append((entry.key, entry.entry_id, entry.type, entry.ts, entry.raw, codec.compress(entry.raw)))
        else:
            messages.append((*_message_line(entry, cuts, text_dict, keep_lines), next(echoes)))
    runs = _plan_runs(parsed, [line[15] for line in messages]) if plan else None
    for run in (runs or []) if text_dict else []:
        run.fields = codec.encode_text(str(run.fields), text_dict, codec.FIELDS_LEVEL)
    times = [e.ts for e in parsed.entries if e.ts]
    session_id = parsed.header.session_id if parsed.header else ""
    span = [min(times), max(times)] if times else []
    edits = _plan_edits(parsed) if plan else None
    return PreparedFile(
        parsed.header,
        parsed.name,
        parsed.skipped,
        span,
        messages,
        kept,
        runs,
        rows_of(session_id, parsed.entries),
        edits=edits,
    )


def _plan_edits(parsed: ParsedSession) -> list[tuple[Any, ...]]:
    """The file changes the session's tool calls made, named by their messages' hashes."""
    cwd = parsed.header.cwd if parsed.header is not None else ""
    found = (
        (e.rendered.hash, e.rendered.role, e.rendered.meta, e.rendered.text, message_ts(e), e.data)
        for e in parsed.messages
        if e.rendered is not None
    )
    return plan_file(found, cwd)


def _message_line(
    entry: Entry, cuts: dict[str, tuple[bytes, bytes, bytes, str | bytes | None]], text_dict: int, keep_lines: bool
) -> MessageLine:
    r = entry.rendered
    assert r is not None
    cut = cuts.get(r.hash)
    if cut is None:
        chars = grams = typed = b""
        if r.indexed:
            chars, grams = (tokens.encode() for tokens in index_texts(r.text))
            typed = surface_text(r.text).encode()
        packed = codec.encode_text(r.text, text_dict) if text_dict else None
        cut = cuts[r.hash] = (chars, grams, typed, packed)
    chars, grams, typed, packed = cut
    indexed = r.indexed and bool(chars or grams)
    # the team archive keeps a line compressed alone: made here, outside its write transaction
    raw, packed_raw = (
        (entry.raw, codec.compress(entry.raw)) if keep_lines else (None, codec.compress(entry.raw, r.text))
    )
    return (
        message_ts(entry),
        r.role,
        r.text,
        indexed,
        entry.entry_id,
        entry.parent_id,
        r.meta,
        r.hash,
        raw,
        entry.type,
        chars,
        grams,
        packed,
        packed_raw,
        typed,
        meta_json(r.meta),
    )


def _echoes(parsed: ParsedSession) -> list[bool]:
    """Per message (file order): whether it is the archive's own output (`core.echo`), judged over
    the whole session in display order (time, then file order), as `runs.table` orders it."""
    entries = parsed.messages
    if not any(is_echo_message(_rendered(e).role, _rendered(e).meta) for e in entries):
        return [False] * len(entries)  # most sessions never ask the archive: no need to order them
    order = sorted(range(len(entries)), key=lambda k: (message_ts(entries[k]), k))
    found = session_echoes([(_rendered(entries[k]).role, _rendered(entries[k]).meta) for k in order])
    out = [False] * len(entries)
    for k, echo in zip(order, found, strict=True):
        out[k] = echo
    return out


def _rendered(entry: Entry) -> Any:
    assert entry.rendered is not None
    return entry.rendered


def _plan_runs(parsed: ParsedSession, metas: list[str | None]) -> list[PlannedRun] | None:
    """The session's runs, as `runs.table` would build them from the archived messages: the same
    display order (time, then file order), the meta (`metas`, as stored) and verbatim message as
    read back."""
    messages = []
    for position, (entry, stored_meta) in enumerate(zip(parsed.messages, metas, strict=True)):
        r = entry.rendered
        assert r is not None
        meta = jsonline.loads(stored_meta) if stored_meta else {}
        messages.append(RunMessage(position, entry.entry_id, r.role, r.text, meta, _source(entry), message_ts(entry)))
    messages.sort(key=lambda m: (m.ts, m.msg_id))
    return plan_file_runs(messages)


def _source(entry: Entry) -> dict[str, Any] | None:
    """The verbatim message as `runs.table` reads it back: `source_message(entry.raw)`, without
    parsing the line a second time where the reader's JSON is that line's (~15 us a message)."""
    if entry.data_is_line and entry.data and _strict_utf8(entry.raw):
        return message_of(entry.data)
    return source_message(entry.raw)


def _strict_utf8(raw: bytes) -> bool:
    """`decode_line` reads invalid UTF-8 with replacement characters, `json.loads(bytes)` not at all."""
    if raw.isascii():
        return True
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def message_ts(entry: Entry) -> int:
    """A message's time: its own stamp, else its line's."""
    return (entry.rendered.ts if entry.rendered else 0) or entry.ts
