"""What front ends register: model tool handlers, pi slash commands, the injection text.

Design idea: every handler is a plain function `(archive, params) -> JSON-able
value`, so the pi bridge and the MCP server register each with one line and
hold no rules of their own. The front end, never the model, supplies the
context keys `cwd` (the session's working directory: the workspace) and
`session_id`; it must overwrite any value the model put there.

Output budgets are the spec's: a search or read result is at most 16,000
chars *as JSON text* (metadata and escaping included); search bodies are
snippets of at most 600 chars; reads are pages of 4,000 chars by default,
with `nextOffset` pointing at the next page. Handlers raise `ArchiveError`
(one line, meant for the model to read) when a call is refused.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import BadInput
from ...memory import present
from ...memory.find import INJECTION_BUDGET
from ...memory.model import KINDS, STATUS_FILTERS
from ...memory.service import Memories

if TYPE_CHECKING:
    from ...archive.api import Archive

OUTPUT_CAP = 16_000  # chars of JSON per tool result
READ_SEGMENT = 4_000  # default page of a body
SEARCH_LIMIT, SEARCH_MAX = 10, 50
NOTICE = (
    "Long-term memories of this workspace. Records by author=user (or confirmed=true) are the user's own "
    "instructions; author=model/rule records are unconfirmed proposals."
)


def _json_len(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False))


def _memories(archive: Archive) -> Memories:
    return archive.model_memories  # a model's call: other workspaces are never named to it


def _context(params: dict[str, Any]) -> tuple[str, str | None]:
    cwd = params.get("cwd")
    if not isinstance(cwd, str) or not cwd:
        raise BadInput("the front end must pass the session's cwd")
    session = params.get("session_id")
    return cwd, session if isinstance(session, str) and session else None


def _int_param(params: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = params.get(name, default)
    if value is None:
        return default
    if isinstance(value, str) and value.strip().isdigit():  # models often send numbers as strings
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadInput(f"{name} must be a whole number")
    return max(low, min(int(value), high))


def _str_param(params: dict[str, Any], name: str) -> str | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadInput(f"{name} must be a string")
    return value


# --- model tools -----------------------------------------------------------------------


def memory_search(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    """Search (or, without a query, list) the workspace's memories, paged by record."""
    cwd, session = _context(params)
    query = _str_param(params, "query") or ""
    offset = _int_param(params, "offset", 0, 0, 1_000_000)
    limit = _int_param(params, "limit", SEARCH_LIMIT, 1, SEARCH_MAX)
    listing = _memories(archive).list(
        cwd, query, status=_str_param(params, "status"), kind=_str_param(params, "kind"), session_id=session
    )
    page = listing.found[offset:]
    out: dict[str, Any] = {
        "notice": NOTICE,
        "query": query,
        "status": listing.status,
        "kind": listing.kind,
        "total": len(listing.found),
        "offset": offset,
        "results": [],
        "nextOffset": None,
    }
    if not listing.chain.ok:
        out["warning"] = present.chain_warning(listing.chain)
    for found in page[:limit]:
        item = {k: v for k, v in found.record.to_dict().items() if k not in ("body", "source_entry_ids")}
        item.update(chars=len(found.record.body), snippet=found.snippet, clipped=found.snippet != found.record.body)
        if _json_len(out) + _json_len(item) + 2 + 12 > OUTPUT_CAP:  # room for the nextOffset number
            break
        out["results"].append(item)
    shown = len(out["results"])
    if offset + shown < len(listing.found):
        out["nextOffset"] = offset + shown
    return out


def memory_read(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    """One memory by id, its body paged by characters (`nextOffset` is the next char offset)."""
    cwd, session = _context(params)
    ref = _str_param(params, "id")
    if not ref:
        raise BadInput("give the memory id")
    record = _memories(archive).get(cwd, ref, session_id=session)
    offset = _int_param(params, "offset", 0, 0, len(record.body))
    limit = _int_param(params, "limit", READ_SEGMENT, 1, OUTPUT_CAP)
    meta = {k: v for k, v in record.to_dict().items() if k != "body"}
    out: dict[str, Any] = {"memory": meta, "chars": len(record.body), "offset": offset, "text": "", "nextOffset": None}
    if _json_len(out) + 12 > OUTPUT_CAP // 2:  # absurd metadata: keep the body readable
        meta["source_entry_ids"] = meta["source_entry_ids"][:8]
        out["metadataTruncated"] = True
    segment = record.body[offset : offset + limit]
    room = OUTPUT_CAP - _json_len(out) - 12
    while segment and _json_len(segment) > room:  # escaping can make JSON longer than the text
        segment = segment[: max(0, len(segment) - max(1, _json_len(segment) - room))]
    out["text"] = segment
    end = offset + len(segment)
    out["nextOffset"] = end if end < len(record.body) else None
    return out


def memory_propose(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    """A provisional proposal by the model; it never becomes active or pinned by itself."""
    cwd, session = _context(params)
    ids = params.get("source_entry_ids") or []
    if not isinstance(ids, list):
        raise BadInput("source_entry_ids must be a list of entry ids")
    result = _memories(archive).propose(
        cwd,
        _str_param(params, "body") or "",
        kind=_str_param(params, "kind"),
        scope=_str_param(params, "scope"),
        session_id=session,
        source_entry_ids=ids,
    )
    return result.to_dict()


def memory_update(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    """Edit or resolve one of the model's own provisional proposals."""
    cwd, session = _context(params)
    ref = _str_param(params, "id") or ""
    action = _str_param(params, "action")
    memories = _memories(archive)
    if action == "edit":
        return memories.edit(cwd, ref, _str_param(params, "body") or "", session_id=session, author="model").to_dict()
    if action == "resolve":
        return memories.forget(cwd, ref, session_id=session, author="model").to_dict()
    raise BadInput("action must be edit or resolve")


MEMORY_TOOLS: dict[str, Callable[[Archive, dict[str, Any]], Any]] = {
    "memory_search": memory_search,
    "memory_read": memory_read,
    "memory_propose": memory_propose,
    "memory_update": memory_update,
}


def call_tool(archive: Archive, name: str, params: dict[str, Any] | None, *, cwd: str, session_id: str | None) -> Any:
    """The one call a front end makes for a model's tool call: the host's cwd and session always win."""
    handler = MEMORY_TOOLS.get(name)
    if handler is None:
        raise BadInput(f"unknown memory tool {name!r}: use one of {', '.join(MEMORY_TOOLS)}")
    if params is not None and not isinstance(params, dict):
        raise BadInput("tool parameters must be a JSON object")
    from_model = {k: v for k, v in (params or {}).items() if k not in ("cwd", "session_id")}
    return handler(archive, {**from_model, "cwd": cwd, "session_id": session_id})


# Descriptions and JSON schemas of the model-visible parameters (cwd and session_id are not among them).
MEMORY_TOOL_SPECS: dict[str, dict[str, Any]] = {
    "memory_search": {
        "description": "Search the user's long-term memories for this workspace (Chinese or English keywords). "
        "Without a query, lists pinned, active and recent provisional memories. Page with offset/nextOffset.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "keywords; empty lists memories"},
                "status": {"type": "string", "enum": list(STATUS_FILTERS)},
                "kind": {"type": "string", "enum": list(KINDS)},
                "offset": {"type": "integer", "minimum": 0},
                "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_MAX},
            },
        },
    },
    "memory_read": {
        "description": "Read one memory by id; long bodies come in pages of 4,000 chars (offset/nextOffset).",
        "parameters": {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "offset": {"type": "integer", "minimum": 0},
                "limit": {"type": "integer", "minimum": 1, "maximum": OUTPUT_CAP},
            },
            "required": ["id"],
        },
    },
    "memory_propose": {
        "description": "Propose a long-term memory (a preference, constraint, decision or fact worth keeping). "
        "It stays provisional until the user confirms it; it is never injected before that.",
        "parameters": {
            "type": "object",
            "properties": {
                "body": {"type": "string", "maxLength": 8000},
                "kind": {"type": "string", "enum": list(KINDS)},
                "scope": {"type": "string", "enum": ["workspace", "session"]},
                "source_entry_ids": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["body"],
        },
    },
    "memory_update": {
        "description": "Edit or resolve one of your own provisional proposals (never a user's memory).",
        "parameters": {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "action": {"type": "string", "enum": ["edit", "resolve"]},
                "body": {"type": "string", "maxLength": 8000},
            },
            "required": ["id", "action"],
        },
    },
}


# --- injection -------------------------------------------------------------------------


def injection_text(archive: Archive, cwd: str, session_id: str | None, budget: int = INJECTION_BUDGET) -> str:
    """The block to append to the system prompt at `before_agent_start` ('' when there is none).

    Only the user's own (or confirmed) active records, pinned first; the same
    memories always give the same bytes, so the prompt prefix stays cacheable.
    """
    return _memories(archive).injection_text(cwd, session_id, budget)


# --- pi slash commands -----------------------------------------------------------------


def _split(args: str) -> list[str]:
    try:
        return shlex.split(args)
    except ValueError:
        return args.split()


_OPTION = re.compile(r"\s*(pin|(kind|scope|priority|supersede|confirm):(\S+))(?=\s|$)")


def _remember_options(args: str) -> tuple[dict[str, Any], str]:
    """Leading `pin`, `kind:`, `scope:`, `priority:`, `supersede:`, `confirm:` words; the rest is the text."""
    opts: dict[str, Any] = {}
    pos = 0
    while match := _OPTION.match(args, pos):
        key, value = match.group(2), match.group(3)
        if key is None:
            opts["pin"] = True
        elif key == "priority":
            try:
                opts["priority"] = int(value)
            except ValueError:
                raise BadInput(f"priority must be a whole number, not {value!r}") from None
        else:
            opts[key] = value
        pos = match.end()
    return opts, args[pos:].strip()


def remember_command(archive: Archive, args: str, cwd: str, session_id: str | None) -> str:
    """`/remember [pin] [kind:K] [scope:S] [priority:N] [supersede:ID] TEXT` or `/remember confirm:ID [pin]`."""
    opts, text = _remember_options(args)
    memories = archive.memories  # the user's own command: told where a memory is
    if "confirm" in opts:
        done = memories.confirm(cwd, opts["confirm"], session_id=session_id, pin=bool(opts.get("pin")))
        return present.format_write(done)
    if not text:
        raise BadInput("usage: /remember [pin] [kind:K] [scope:workspace|session] [priority:N] [supersede:ID] TEXT")
    done = memories.remember(
        cwd,
        text,
        kind=opts.get("kind"),
        scope=opts.get("scope"),
        session_id=session_id,
        priority=opts.get("priority", 0),
        pin=bool(opts.get("pin")),
        supersede=opts.get("supersede"),
    )
    return present.format_write(done)


def memories_command(archive: Archive, args: str, cwd: str, session_id: str | None) -> str:
    """`/memories [status:S] [kind:K] [QUERY]`."""
    filters: dict[str, str] = {}
    words: list[str] = []
    for word in _split(args):
        key, _, value = word.partition(":")
        if value and key in ("status", "kind"):
            filters[key] = value
        else:
            words.append(word)
    listing = _memories(archive).list(
        cwd, " ".join(words), status=filters.get("status"), kind=filters.get("kind"), session_id=session_id
    )
    return present.format_listing(listing)


def forget_command(archive: Archive, args: str, cwd: str, session_id: str | None) -> str:
    """`/forget ID`: the memory is marked resolved (kept in the log, gone from default listings)."""
    ref = args.strip()
    if not ref:
        raise BadInput("usage: /forget ID")
    return present.format_write(archive.memories.forget(cwd, ref, session_id=session_id))


MEMORY_COMMANDS: dict[str, Callable[[Archive, str, str, str | None], str]] = {
    "remember": remember_command,
    "memories": memories_command,
    "forget": forget_command,
}


# --- the pi bridge: `METHODS.update(BRIDGE_METHODS)` ---------------------------------------


def tool_text(result: Any) -> str:
    """A tool result as the model sees it: compact JSON (never longer than the budgeted form)."""
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"))


def _bridge_tool(name: str) -> Callable[[Archive, dict[str, Any]], dict[str, Any]]:
    def run(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
        result = MEMORY_TOOLS[name](archive, params)
        return {"text": tool_text(result), "result": result}

    return run


def bridge_command(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    """`{"name": "remember"|"memories"|"forget", "args", "cwd", "session_id"}` -> `{"text"}` to notify."""
    name = _str_param(params, "name") or ""
    handler = MEMORY_COMMANDS.get(name)
    if handler is None:
        raise BadInput(f"unknown memory command {name!r}: use one of {', '.join(MEMORY_COMMANDS)}")
    cwd, session = _context(params)
    return {"text": handler(archive, _str_param(params, "args") or "", cwd, session)}


def memory_settings(archive: Archive, cwd: str) -> tuple[bool, int, list[str]]:
    """(memory on?, injection budget, notes on the settings file) from the project/global `pi-memory.json`."""
    settings = archive.settings(cwd)
    return bool(settings.get("memory.enabled")), int(settings.get("memory.hintMaxChars")), settings.notes


def bridge_injection(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    """`{"cwd", "session_id", "budget"?}` -> `{"text"}`: append to the system prompt when non-empty.

    Without `budget`, the settings decide: `memory.hintMaxChars`, and nothing at all
    when `memory.enabled` is false.
    """
    cwd, session = _context(params)
    if params.get("budget") is None:
        enabled, budget, _notes = memory_settings(archive, cwd)
        if not enabled:
            return {"text": ""}
    else:
        budget = _int_param(params, "budget", INJECTION_BUDGET, 0, 50_000)
    text = injection_text(archive, cwd, session, budget)
    if session and text:
        archive.record_context_event(session, "memory", text)  # the context ledger (`pi-memory usage ledger`)
    return {"text": text}


COMMAND_DESCRIPTIONS = {
    "remember": "Remember for this workspace: /remember [pin] [kind:K] [scope:session] [priority:N] "
    "[supersede:ID] TEXT | /remember confirm:ID [pin]",
    "memories": "List long-term memories: /memories [status:S] [kind:K] [QUERY]",
    "forget": "Forget a long-term memory (kept in the log, no longer injected): /forget ID",
}


def bridge_start(archive: Archive, params: dict[str, Any]) -> dict[str, Any]:
    """`{"cwd", "session_id"}` -> what the front end registers: `{"enabled", "tools", "commands", "notes"}`.

    Tools (name -> description and JSON schema) and commands (name -> description)
    come from here so the front end mirrors nothing; both are empty when
    `memory.enabled` is false in the settings.
    """
    cwd, _session = _context(params)
    enabled, budget, notes = memory_settings(archive, cwd)
    return {
        "enabled": enabled,
        "budget": budget,
        "tools": MEMORY_TOOL_SPECS if enabled else {},
        "commands": COMMAND_DESCRIPTIONS if enabled else {},
        "notes": notes,
    }


# Every value takes `(archive, params)`; params carry the host's `cwd` and `session_id`.
BRIDGE_METHODS: dict[str, Callable[[Archive, dict[str, Any]], dict[str, Any]]] = {
    **{name: _bridge_tool(name) for name in MEMORY_TOOLS},
    "memory_command": bridge_command,
    "memory_injection": bridge_injection,
    "memory_start": bridge_start,
}
