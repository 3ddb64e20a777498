"""Records as recall shows them: archived messages (or other entries) with ids, address and bodies.

A body is one segment of the record's full text, rebuilt from its verbatim
line (complete tool output, attachments replaced, thinking only when asked),
or with `raw` of the verbatim JSON itself; `offset`/`raw_limit` cut it and the
cursors join the segments back exactly.
"""

from __future__ import annotations

from typing import Any

from ..compact.recall import segment
from ..core import jsonline
from ..core.text import clip
from ..runs.detail import message_detail_text, strip_attachments
from ..storage.store import Store, decode_text, decompress
from .model import SNIPPET_CHARS, RecallItem, RecallRequest, record_kind, source_class_of

_MSG_COLUMNS = """m.id, m.session_id, m.ts, m.role, m.text, m.entry_id, m.meta, rm.run_id, rm.pos"""


def _meta(raw: str | None) -> dict[str, Any]:
    try:
        value = jsonline.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _item_from_msg(row: tuple[Any, ...]) -> RecallItem:
    msg_id, sid, ts, role, text, entry_id, meta, run_id, pos = row
    meta_dict = _meta(meta)
    one_line, _ = clip(" ".join(decode_text(text).split()), SNIPPET_CHARS, "…")
    return RecallItem(
        entry_id=entry_id,
        msg_id=int(msg_id),
        session_id=str(sid),
        address=f"r{run_id}/m{pos}" if run_id is not None else None,
        role=str(role),
        kind=record_kind(str(role), meta_dict, "message"),
        source_class=source_class_of(str(role), "message"),
        ts=int(ts),
        snippet=one_line,
    )


def load_items(store: Store, msg_ids: list[int]) -> list[RecallItem]:
    """Records for these messages, in the order given."""
    if not msg_ids:
        return []
    rows = store.rows(
        f"""SELECT {_MSG_COLUMNS} FROM msg m LEFT JOIN run_msg rm ON rm.msg_id = m.id
            WHERE {store.sql_in_list("m.id")}""",
        (store.list_param(msg_ids),),
    )
    by_id = {int(r[0]): _item_from_msg(r) for r in rows}
    return [by_id[i] for i in msg_ids if i in by_id]


def _source_of(line: str) -> dict[str, Any] | None:
    try:
        data = jsonline.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    return data["message"] if isinstance(data.get("message"), dict) else data


def full_text(line: str | None, rendered: str, thinking: bool) -> str:
    """A record's whole text from its verbatim line (complete tool output, attachments stripped)."""
    source = _source_of(line) if line is not None else None
    if source is None:
        return rendered
    return message_detail_text(strip_attachments(source), thinking)


def raw_lines(store: Store, msg_ids: list[int]) -> dict[int, str]:
    """msg id -> its verbatim source line (a message captured live without a file has none)."""
    if not msg_ids:
        return {}
    rows = store.rows(
        f"SELECT e.msg_id, e.raw, m.text FROM entry e JOIN msg m ON m.id = e.msg_id WHERE {store.sql_in_list('e.msg_id')}",
        (store.list_param(msg_ids),),
    )
    return {int(mid): decompress(blob, text).decode("utf-8", "replace") for mid, blob, text in rows}


def rendered_texts(store: Store, msg_ids: list[int]) -> dict[int, str]:
    if not msg_ids:
        return {}
    rows = store.rows(f"SELECT id, text FROM msg WHERE {store.sql_in_list('id')}", (store.list_param(msg_ids),))
    return {int(i): decode_text(t) for i, t in rows}


def attach_body(item: RecallItem, line: str | None, rendered: str, req: RecallRequest) -> None:
    """One segment of the record's full text (or, with `raw` or for a non-message entry, its verbatim JSON)."""
    if line is not None and (req.raw or item.msg_id is None):
        whole, fmt = line, "raw"
    elif req.raw and line is None:  # captured live, never imported from a file: no verbatim line exists
        whole, fmt = rendered, "text"
    else:
        whole, fmt = full_text(line, rendered, req.include_thinking), "text"
    piece, nxt = segment(whole, req.offset, req.raw_limit)
    item.body, item.body_format = piece, fmt
    item.offset, item.next_offset, item.total_chars = min(req.offset, len(whole)), nxt, len(whole)


def attach_bodies(store: Store, items: list[RecallItem], req: RecallRequest) -> None:
    ids = [i.msg_id for i in items if i.msg_id is not None]
    lines, texts = raw_lines(store, ids), rendered_texts(store, ids)
    for item in items:
        if item.msg_id is not None:
            attach_body(item, lines.get(item.msg_id), texts.get(item.msg_id, ""), req)
