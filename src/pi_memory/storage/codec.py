"""How the archive's bytes are stored: compressed verbatim lines, packed message text, FTS5 varints.

Pure functions over bytes (no connection), shared by both stores and their
readers. The preset dictionaries are part of the file format: never edit one;
a new one gets a new format byte. The zstd dictionaries of packed text (format 2)
are the archive's own, trained from its first messages and kept in its
`codec_dict` table: the store registers them here (`register_dictionary`), and a
row names its dictionary by id.
"""

from __future__ import annotations

import hashlib
import json
import struct
import threading
import zlib
from collections.abc import Callable
from typing import Any

import zstandard

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
# Format 0: the line as it is. A live write stores its message's line so (compressing it against
# the text costs ~50-80 us, a fifth of the write) and its writer compresses it at its idle moment,
# with the message's index entry (`Store.index_pending`); only a writer that ended before its idle
# moment and was never followed by another opening leaves one behind, and it reads the same.
_RAW_PLAIN = b"\x00"
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


# How zlib compresses verbatim lines (any setting reads back the same). A line is compressed
# with a fresh compressor (any line can be read or forgotten alone), and zlib clears its hash
# table for each: memLevel 8, its default, is a 64 KB table, cleared ~once for every message of a
# bulk import; 5 (8 KB) is plenty for a line and its dictionary of a few KB: ~53k (~18%) fewer
# instructions a message line of the import bench's 40-message sessions, and the same size (the
# verbatim store 23.1% of the real pi fixtures' source against 23.3%). Level 6 (the default) stays: level 3
# would take ~15% off but is ~6% larger on the fixtures, whose verbatim share is within the
# brief's 25% by a little.
RAW_LEVEL = 6
RAW_MEM_LEVEL = 5


def _deflate(data: bytes, zdict: bytes) -> bytes:
    packer = zlib.compressobj(RAW_LEVEL, zlib.DEFLATED, -15, RAW_MEM_LEVEL, zdict=zdict)
    return packer.compress(data) + packer.flush()


def _inflate(data: bytes, zdict: bytes) -> bytes:
    unpacker = zlib.decompressobj(-15, zdict=zdict)
    return unpacker.decompress(data) + unpacker.flush()


# Whether new rows store `msg.text` (and a run's fields) packed. Decoding costs a search once per
# candidate (~45 of them, ~2,700 chars on average, bench/search_bench.py): zlib took ~40 us each
# (~1.9 ms a query), so the text stayed plain while zlib was the codec; zstd (format 2 below) takes
# ~10 us. `decode_text` reads every form (plain TEXT, format 1, format 2), so this can change
# without a migration.
PACK_TEXT = True

# Format 2: a zstd frame (magicless) after the format byte and a 4-byte (little-endian) dictionary
# id, 0 for none. Each archive trains its own dictionary from its first messages (`Store.text_codec`) and
# keeps it in `codec_dict`: the words a user's agents repeat (their code, paths, languages) are
# what a shared dictionary cannot know (~0.54 of the bytes on the bench mix instead of ~0.64
# without one, or zlib's ~0.58 at ~3x the decoding time). The id is a hash of the dictionary's
# bytes, so two archives open in one process never mistake one's dictionary for the other's.
_TEXT_ZSTD = b"\x02"
# zstd level 3, parameters fixed (below). Level 6 (lazy matching) is ~8% smaller (~50 bytes a
# message on the bench mix), but inside an import, where other work evicts the dictionary's tables
# from the CPU caches, it takes ~30 us a 1.2 KB text against ~19 us (both ~9 us with warm caches):
# the parse worker spent ~13% of its time there, and the import's two processes are both busy.
# Decoding takes ~7 us at either level, and rows packed at either read the same.
TEXT_LEVEL = 3
# A run's fields JSON (~870 bytes, packed by the importer's writer, the busier of its two processes)
# at level 2: with the CPU caches taken by the writer's other work, ~13 us a run instead of ~24 at
# level 3 and ~35 at level 6, ~14 and ~40 bytes larger (~5 and ~15 a message).
FIELDS_LEVEL = 2
DICT_BYTES = 112_640  # a trained dictionary's size (zstd's usual 110 KB; 64 KB: ~3% larger text, 16 KB: ~10%)
_HEADER = struct.Struct("<I")


# Frames without zstd's 4-byte magic number (the format byte says what follows), with the level's
# parameters fixed rather than fitted to each text's size: smaller (~2% at level 3) and as fast
def _text_params(level: int) -> zstandard.ZstdCompressionParameters:
    return zstandard.ZstdCompressionParameters.from_level(
        level,
        format=zstandard.FORMAT_ZSTD1_MAGICLESS,
        write_content_size=True,
        write_checksum=False,
        write_dict_id=False,
    )


_local = threading.local()  # zstd (de)compressors are not thread-safe: one of each per thread
_DICTIONARIES: dict[int, bytes] = {}
# called with a dictionary id no one registered: a store reloads its `codec_dict` (another
# process trained one since this one opened the archive); see `Store.open`
_RELOADERS: list[Callable[[int], None]] = []


def dictionary_id(data: bytes) -> int:
    """The id a dictionary is known by: a non-zero 32-bit hash of its bytes."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=4).digest(), "little") or 1


def register_dictionary(data: bytes) -> int:
    """Make a dictionary known to this process (readers find it by the id in a row's header)."""
    dict_id = dictionary_id(data)
    _DICTIONARIES[dict_id] = data
    return dict_id


def dictionary(dict_id: int) -> bytes | None:
    """The bytes of a registered dictionary (what the importer hands its parse workers), or None."""
    return _DICTIONARIES.get(dict_id)


def train_dictionary(samples: list[bytes]) -> bytes | None:
    """A zstd dictionary for texts like `samples` (fixed k and d: ~30 ms for 1,000 messages), or
    None when they are too few or too short to learn from."""
    total = sum(len(s) for s in samples)
    size = min(DICT_BYTES, total // 8)
    if len(samples) < 16 or size < 4096:
        return None
    try:
        chosen: list[bytes | bytearray | memoryview[int]] = list(samples)
        return bytes(zstandard.train_dictionary(size, chosen, k=200, d=8).as_bytes())
    except zstandard.ZstdError:
        return None


def _coders() -> dict[tuple[str, int, int], Any]:
    coders: dict[tuple[str, int, int], Any] | None = getattr(_local, "coders", None)
    if coders is None:
        coders = _local.coders = {}
    return coders


def _zstd(kind: str, dict_id: int, level: int = TEXT_LEVEL) -> Any:
    coders = _coders()
    coder = coders.get((kind, dict_id, level))
    if coder is None:
        data = _DICTIONARIES.get(dict_id) if dict_id else None
        if dict_id and data is None:
            for reload in list(_RELOADERS):
                reload(dict_id)
            data = _DICTIONARIES.get(dict_id)
            if data is None:
                raise ValueError(f"message text packed with dictionary {dict_id:08x}, which this archive does not hold")
        zdict = zstandard.ZstdCompressionDict(data) if data else None
        if kind == "c":
            coder = zstandard.ZstdCompressor(dict_data=zdict, compression_params=_text_params(level))
        else:
            coder = zstandard.ZstdDecompressor(dict_data=zdict, format=zstandard.FORMAT_ZSTD1_MAGICLESS)
        coders[(kind, dict_id, level)] = coder
    return coder


def encode_text(text: str, dict_id: int | None = None, level: int = TEXT_LEVEL) -> str | bytes:
    """A message's rendered text as `msg.text` stores it (SQLite; PostgreSQL keeps plain text):
    format 2 with the archive's dictionary (`dict_id`, registered) or none (0). Without a `dict_id`
    (a parse worker not yet handed the archive's dictionary) the text stays as it is, for the
    writer to pack (`NewMessage.pack`). `level`: zstd's (any reads back the same)."""
    if dict_id is None or not PACK_TEXT:
        return text
    data = text.encode("utf-8", "surrogatepass")
    packed: bytes = _zstd("c", dict_id, level).compress(data)
    return _TEXT_ZSTD + _HEADER.pack(dict_id) + packed


def packed_with(value: str | bytes | None, dict_id: int) -> bool:
    """Whether a stored text value is format 2 with this dictionary (else a writer packs it again)."""
    return isinstance(value, bytes) and value[:1] == _TEXT_ZSTD and _HEADER.unpack_from(value, 1)[0] == dict_id


def decode_text(value: str | bytes | None) -> str:
    """The one reader of `msg.text`: TEXT is as it is (older rows, PostgreSQL); a BLOB is a format
    byte, then zstd (2) or raw deflate against `_TEXT_DICT_V1` (1, archives written before 2)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if value[:1] == _TEXT_ZSTD:
        (dict_id,) = _HEADER.unpack_from(value, 1)
        out: bytes = _zstd("d", dict_id, 0).decompress(value[5:])
        return out.decode("utf-8", "surrogatepass")
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
    packer = zlib.compressobj(RAW_LEVEL, zlib.DEFLATED, zlib.MAX_WBITS, RAW_MEM_LEVEL, zdict=_RAW_DICT_V1)
    return _RAW_V1 + packer.compress(raw) + packer.flush()


def plain(raw: bytes) -> bytes:
    """A verbatim line stored as it is (format 0), to be compressed later (`compress`)."""
    return _RAW_PLAIN + raw


def plain_line(blob: bytes | None) -> bytes | None:
    """The line of a blob stored as it is (format 0); None for any other blob."""
    return blob[1:] if blob is not None and blob[:1] == _RAW_PLAIN else None


def decompress(blob: bytes, text: str | bytes | None = None) -> bytes:
    """A verbatim line; `text` is its message's `msg.text` value (stored or decoded), needed by format 2."""
    if blob[:1] == _RAW_PLAIN:
        return blob[1:]
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
