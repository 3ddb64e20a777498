"""How the archive's bytes are stored: compressed verbatim lines, packed message text, FTS5 varints.

Pure functions over bytes (no connection), shared by both stores and their
readers. The preset dictionaries are part of the file format: never edit one;
a new one gets a new format byte.
"""

from __future__ import annotations

import json
import zlib

# Verbatim lines are compressed one by one (any line can be read or forgotten alone), and
# most are short: a preset dictionary of the JSON shapes agents write lets zlib refer back to
# them from the first byte (on the real pi fixtures: 47% of the source bytes without it, 33%
# with it). The dictionary is part of the file format: never edit it; a new one gets a new
# format byte. Blobs without a format byte are plain zlib streams (they start with 0x78).
_RAW_DICT_V1 = (
    b'{"type":"session","version":3,"id":"","timestamp":"","cwd":"/home/","parentSession":""}'
    b'{"type":"model_change","id":"","parentId":null,"timestamp":"","provider":"","modelId":""}'
    b'{"type":"thinking_level_change","id":"","parentId":"","timestamp":"","thinkingLevel":"off"}'
    b'{"type":"session_info","name":""}{"type":"label","targetId":"","label":""}'
    b'{"type":"compaction","summary":"","firstKeptEntryId":"","tokensBefore":0,"details":{},"fromHook":true}'
    b'{"type":"custom_message","customType":"","content":"","display":true}{"type":"custom","data":{}}'
    b'{"type":"message","id":"","parentId":"","timestamp":"2026-01-01T00:00:00.000Z","message":'
    b'{"role":"user","content":[{"type":"text","text":""},{"type":"image","data":"","mimeType":"image/png"}],"timestamp":1}}'
    b'{"role":"toolResult","toolCallId":"call_","toolName":"bash","content":[{"type":"text","text":""}],'
    b'"details":{"truncation":{},"fullOutputPath":""},"isError":false,"timestamp":1}}'
    b'{"role":"bashExecution","command":"","output":"","exitCode":0,"cancelled":false,"truncated":false}'
    b'{"role":"assistant","content":[{"type":"thinking","thinking":"","thinkingSignature":""},{"type":"text","text":""},'
    b'{"type":"toolCall","id":"call_","name":"read","arguments":{"path":""}},{"type":"toolCall","name":"edit",'
    b'"arguments":{"path":"","edits":[{"oldText":"","newText":""}]}},{"type":"toolCall","name":"write",'
    b'"arguments":{"path":"","content":""}},{"type":"toolCall","name":"bash","arguments":{"command":""}}],'
    b'"api":"anthropic-messages","provider":"anthropic","model":"claude-","usage":{"input":0,"output":0,'
    b'"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,'
    b'"total":0}},"stopReason":"toolUse","timestamp":1}}'
    b'{"parentUuid":"","isSidechain":false,"userType":"external","cwd":"","sessionId":"","version":"2.1.0",'
    b'"gitBranch":"main","type":"assistant","message":{"id":"msg_","type":"message","role":"assistant",'
    b'"model":"claude-","content":[{"type":"tool_use","id":"toolu_","name":"Bash","input":{"command":""}},'
    b'{"type":"tool_result","tool_use_id":"toolu_","content":"","is_error":false}],"stop_reason":"tool_use",'
    b'"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}},'
    b'"requestId":"req_","uuid":"","timestamp":""}'
    b'{"timestamp":"","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"",'
    b'"call_id":"call_"}}{"type":"function_call_output","call_id":"call_","output":""}'
    b'{"type":"message","role":"user","content":[{"type":"input_text","text":""}]}'
    b'{"type":"event_msg","payload":{"type":"token_count","info":{}}}{"type":"turn_context","payload":{}}'
)
_RAW_V1 = b"\x01"
# A message's verbatim line holds its words a second time (the rendered text is in `msg`): format 2
# compresses the line with the v1 dictionary followed by the message's text as JSON writes it, so
# the words cost one copy and the line only its envelope (~120 bytes instead of ~1 KB). Reading it
# needs that text: `decompress(blob, text)` with the message's stored `text` value.
_RAW_V2 = b"\x02"
_WINDOW = 32768  # zlib's window: the last 32 KB of a preset dictionary are all it can refer to
# The rendered text of a message (`msg.text`) is stored as a BLOB: a format byte, then raw deflate
# against this dictionary of the shapes `render.py` writes and words agents repeat. Rows written
# before (schema <= 5) hold TEXT; `decode_text` reads both, so no migration rewrites them.
_TEXT_DICT_V1 = (
    b"\xe2\x86\x92 read(path=) \xe2\x86\x92 bash(command=) \xe2\x86\x92 edit(path=) \xe2\x86\x92 write(path=) "
    b"$ git status  [exit 1]\n[image]\n\xe2\x9c\x97 error: \n\xe2\x80\xa6[truncated, more chars]"
    b" the function return self import from def class if else for in and or not is None True False"
    b" error Error Traceback (most recent call last): File line test tests src/ .py .ts .js .json"
    b" const let await async export default npm run build pytest python3 node_modules package.json"
    b" README.md http:// https:// localhost The This that with which should would could have been"
    b" \xe7\x9a\x84\xe6\x98\xaf\xe4\xb8\x8d\xe4\xba\x86\xe5\x9c\xa8\xe4\xb8\x80\xe4\xb8\xaa\xe6\x88\x91\xe4\xbd\xa0"
    b"\xe6\x9c\x89\xe8\xbf\x99\xe4\xb8\xaa\xe4\xbb\xa3\xe7\xa0\x81\xe6\x96\x87\xe4\xbb\xb6\xe9\x97\xae\xe9\xa2\x98"
    b"\xe3\x80\x82\xef\xbc\x8c\xef\xbc\x9a"
)
_TEXT_V1 = b"\x01"


def _deflate(data: bytes, zdict: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, -15, zdict=zdict)
    return packer.compress(data) + packer.flush()


def _inflate(data: bytes, zdict: bytes) -> bytes:
    unpacker = zlib.decompressobj(-15, zdict=zdict)
    return unpacker.decompress(data) + unpacker.flush()


# Whether new rows store `msg.text` (and a run's fields) deflated. Reading costs ~40 us per
# candidate: a search's candidates are long (~2,700 chars on average, bench/search_bench.py), so
# decoding its ~45 of them took ~1.9 ms, a fifth of a query, against ~0.5 KB per message saved
# (bench/import_bench.py). The search targets come first: plain. Both forms are read by
# `decode_text` (archives written packed stay readable), so this can change without a migration.
PACK_TEXT = False


def encode_text(text: str) -> str | bytes:
    """A message's rendered text as `msg.text` stores it (SQLite; PostgreSQL keeps plain text)."""
    if not PACK_TEXT:
        return text
    return _TEXT_V1 + _deflate(text.encode("utf-8", "surrogatepass"), _TEXT_DICT_V1)


def decode_text(value: str | bytes | None) -> str:
    """The one reader of `msg.text`: a BLOB is format byte + deflate, TEXT (older rows, PostgreSQL) is as it is."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if value[:1] == _TEXT_V1:
        return _inflate(value[1:], _TEXT_DICT_V1).decode("utf-8", "surrogatepass")
    raise ValueError(f"unknown message text format {value[:1]!r}")


def _text_dict(text: str | bytes) -> bytes:
    words = decode_text(text) if isinstance(text, bytes) else text
    escaped = json.dumps(words, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass")
    return (_RAW_DICT_V1 + escaped)[-_WINDOW:]


def compress(raw: bytes, text: str | bytes | None = None) -> bytes:
    """A verbatim line behind a one-byte format mark: against its message's text (format 2) when given."""
    if text is not None:
        return _RAW_V2 + _deflate(raw, _text_dict(text))
    packer = zlib.compressobj(6, zdict=_RAW_DICT_V1)
    return _RAW_V1 + packer.compress(raw) + packer.flush()


def decompress(blob: bytes, text: str | bytes | None = None) -> bytes:
    """A verbatim line; `text` is its message's `msg.text` value (stored or decoded), needed by format 2."""
    if blob[:1] == _RAW_V2:
        if text is None:
            raise ValueError("this verbatim line is stored against its message's text: pass it")
        return _inflate(blob[1:], _text_dict(text))
    if blob[:1] == _RAW_V1:
        unpacker = zlib.decompressobj(zdict=_RAW_DICT_V1)
        return unpacker.decompress(blob[1:]) + unpacker.flush()
    return zlib.decompress(blob)


LENGTH_CHANNEL = 1  # msg_fts column whose token count is a message's length: `grams`


def fts5_varints(blob: bytes) -> list[int]:
    """The SQLite varints of an FTS5 record (docsize, averages): 7 bits a byte, high bit = more."""
    out, value, count = [], 0, 0
    for byte in blob:
        count += 1
        if count == 9:  # the ninth byte of a varint carries 8 bits
            out.append((value << 8) | byte)
            value, count = 0, 0
        elif byte & 0x80:
            value = (value << 7) | (byte & 0x7F)
        else:
            out.append((value << 7) | byte)
            value, count = 0, 0
    return out
