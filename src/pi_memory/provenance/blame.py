"""Line blame from a file's archived edits (pure): replay them, then line the result up with the file.

Design idea: what `git blame` does with commits, done with a session's edits. A model of the
file is a list of lines, each with the edit that wrote it (`who`), or None for a line no
archived session wrote (there before, typed by hand, written by a command); a line whose text
is not known is a gap. Each edit is replayed on the model in time order:

- a write: its content, lined up with the model, so the lines it left as they were keep their
  writer and only the others are its own;
- an edit (old -> new): found in the model as pi finds it (the exact text, where a pi edit must
  be unique; the occurrence nearest the line the tool reported otherwise), the lines it covers
  replaced by the new text, whose lines equal to the old ones keep their writer; not found (the
  file changed outside the sessions in between, or it was never seen whole), it is placed by its
  best matching lines, else at the line the tool reported, and what is around it stays unknown;
- the file as it was just before a change, when that is known (pi's extension sends it when
  something else changed the file since; Claude Code's results carry it): the model is lined up
  with it first, and every line the archive did not see being written becomes nobody's.

Then the model is lined up with the file as it is now: equal lines keep their writer, every other
line is nobody's. A line that moved (a later edit or commit reordered blocks) is not in the
common subsequence: one whose text is distinctive and unchanged still finds its writer among the
model's unmatched lines, or among the lines an edit placed by its lines pushed aside (the region
it covered held them, its old text did not: they had moved). Every line-up and every edit treats
moved lines so. The result is conservative by construction: a line is attributed only where its
text is one an edit wrote and the replay put it there (or it moved whole).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from .extract import DELETE, EDIT, WRITE

MOVED_MIN_CHARS = 12  # a moved line is recognized by its text only when it says this much
ANCHOR_MIN_CHARS = 3  # an edit not found as it is is placed by old lines of at least this much text
_GAP = "\x00gap\x00"  # how a line of unknown content reads in the model's text: it matches nothing


@dataclass(frozen=True)
class Event:
    """One change of a file, as blame replays it."""

    key: int  # what a line it wrote is attributed to (an `edit` row id)
    kind: str  # WRITE, EDIT or DELETE (a move is a write of what the old path held, see `query`)
    old: str | None = None
    new: str | None = None
    replace_all: bool = False
    lines: bool = False  # a patch hunk: whole lines
    line: int | None = None  # the first changed line the tool reported (1-based), a placement hint
    before: str | None = None  # the whole file just before this change, when known


Line = tuple["str | None", "int | None"]  # (text, who wrote it); text None: a gap of unknown lines


def split_lines(text: str) -> list[str]:
    """A file's lines as blame compares them: no line endings (CRLF as LF), no BOM."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


Pool = dict[str, list["int | None"]]  # distinctive lines an edit pushed aside, by text: they may have moved


def replay(events: Sequence[Event], model: list[Line] | None = None) -> list[Line]:
    """The model after these events (from an unknown file, or `model`)."""
    return _replay(events, model)[0]


class _Model:
    """The model during a replay: its lines, the lines edits pushed aside, and its text as one string
    (kept up to date by exact edits, the common case, rebuilt after anything else)."""

    def __init__(self, lines: list[Line]) -> None:
        self.lines = lines
        self.pool: Pool = defaultdict(list)
        self._text: str | None = None

    def set(self, lines: list[Line], text: str | None = None) -> None:
        self.lines, self._text = lines, text

    @property
    def text(self) -> str:
        """Every line followed by a newline; a gap is a line that matches nothing."""
        if self._text is None:
            self._text = "".join((t if t is not None else _GAP) + "\n" for t, _w in self.lines)
        return self._text


def _replay(events: Sequence[Event], model: list[Line] | None) -> tuple[list[Line], Pool]:
    state = _Model(list(model) if model is not None else [(None, None)])
    for event in events:
        if event.before is not None:
            state.set(_line_up(state.lines, split_lines(event.before), None, state.pool))
        if event.kind == DELETE:
            state.set([])
        elif event.kind == WRITE:
            state.set(_line_up(state.lines, split_lines(event.new or ""), event.key, state.pool))
        elif event.kind == EDIT:
            _edit(state, event)
    return state.lines, state.pool


def blame_lines(current: Sequence[str], events: Sequence[Event], model: list[Line] | None = None) -> list[int | None]:
    """Who wrote each line of `current` (the file's lines now): an event key, or None."""
    lines, pool = _replay(events, model)
    return _writers(lines, list(current), None, pool)


# --- lining up -------------------------------------------------------------------------------


def _texts(lines: Sequence[Line]) -> list[object]:
    """Texts to compare; each gap a distinct object, equal to nothing."""
    return [text if text is not None else object() for text, _who in lines]


def _blocks(a: Sequence[object], b: Sequence[object]) -> list[tuple[int, int, int]]:
    """Matching blocks (i, j, size) of two line lists: the common head and tail first, then
    difflib on the middle (no junk heuristic: a file's common lines are not noise)."""
    head = 0
    limit = min(len(a), len(b))
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    blocks = [(0, 0, head)] if head else []
    middle_a, middle_b = a[head : len(a) - tail], b[head : len(b) - tail]
    if middle_a and middle_b:
        matcher = SequenceMatcher(None, middle_a, middle_b, autojunk=False)
        blocks += [(i + head, j + head, n) for i, j, n in matcher.get_matching_blocks() if n]
    if tail:
        blocks.append((len(a) - tail, len(b) - tail, tail))
    return blocks


def _line_up(model: list[Line], new: list[str], keep_new: int | None, pool: Pool | None = None) -> list[Line]:
    """`new` as the file's lines: each keeps the writer of the model line it equals (or moved from),
    the others get `keep_new` (the write that wrote them, or None for a snapshot of what was there)."""
    who = _writers(model, new, keep_new, pool)
    return list(zip(new, who, strict=True))


def _writers(model: list[Line], new: list[str], default: int | None, pool: Pool | None = None) -> list[int | None]:
    """The writer of each line of `new` from the model: the common subsequence keeps its writers; then
    a line that moved (not in the subsequence, its text unchanged and distinctive) finds its writer
    among the model lines left over, then among the lines edits pushed aside (`pool`); every other
    line gets `default`."""
    who: list[int | None] = [default] * len(new)
    placed = [False] * len(new)
    used = [False] * len(model)
    for i, j, n in _blocks(_texts(model), new):
        for k in range(n):
            who[j + k] = model[i + k][1]
            placed[j + k] = used[i + k] = True
    left: Pool = defaultdict(list)
    for i, (text, writer) in enumerate(model):
        if not used[i] and text is not None and _distinctive(text):
            left[text].append(writer)
    for j, text in enumerate(new):
        if placed[j]:
            continue
        if left.get(text):
            who[j] = left[text].pop(0)
        elif pool and pool.get(text):
            who[j] = pool[text].pop(0)
    return who


def _anchor(text: str) -> bool:
    """A line that can place an edit whose other lines changed: not blank, not mere punctuation."""
    stripped = text.strip()
    return len(stripped) >= ANCHOR_MIN_CHARS and any(ch.isalnum() for ch in stripped)


def _distinctive(text: str) -> bool:
    stripped = text.strip()
    return len(stripped) >= MOVED_MIN_CHARS and any(ch.isalnum() for ch in stripped)


# --- replaying an edit --------------------------------------------------------------------------


def _edit(state: _Model, event: Event) -> None:
    old, new = event.old or "", event.new or ""
    if not old:  # Claude's Edit with an empty old_string creates the file
        state.set(_line_up(state.lines, split_lines(new), event.key, state.pool))
        return
    found = [] if event.lines else _occurrences(state.text, old)
    if not found:
        state.set(_edit_lines(state.lines, split_lines(old), split_lines(new), event, state.pool))
        return
    if not event.replace_all:
        found = [_nearest(found, event.line)]
    lines, text = state.lines, state.text
    for spot in sorted(found, reverse=True):  # from the end: the spots before stay where they are
        lines, text = _splice(lines, text, spot, new, event.key)
    state.set(lines, text)


Spot = tuple[int, int, int, int, int, int]  # where a text is: first line, column, last line, end column; offsets


def _occurrences(text: str, old: str) -> list[Spot]:
    """Every place `old` is in the model's text, without overlaps.

    The search and the line numbers are the string methods' (`find`, `count`): a replay edits a file
    of thousands of lines hundreds of times, and a Python loop over its lines at each edit was most
    of a blame's time (bench/blame_bench.py)."""
    found: list[Spot] = []
    line, counted = 0, 0  # newlines before `counted`: each occurrence counts on from the last
    at = text.find(old)
    while at >= 0:
        end = at + len(old)
        first = line + text.count("\n", counted, at)
        last = first + text.count("\n", at, end)
        found.append((first, _column(text, at), last, _column(text, end), at, end))
        line, counted = last, end
        at = text.find(old, max(end, at + 1))
    return found


def _column(text: str, offset: int) -> int:
    """The column of a character offset of the model's text (the end of the text: column 0)."""
    return offset - (text.rfind("\n", 0, offset) + 1)


def _nearest(found: list[Spot], hint: int | None) -> Spot:
    if hint is None or len(found) == 1:
        return found[0]
    return min(found, key=lambda spot: abs(spot[0] + 1 - hint))


def _splice(model: list[Line], text: str, spot: Spot, new: str, key: int) -> tuple[list[Line], str]:
    """The text at `spot` replaced by `new`, at line granularity: the lines it touches are rewritten,
    and their lines that stay as they were keep their writer. Returns the model and its text."""
    first, col, last, end_col, at, end = spot
    at_end = last >= len(model)
    prefix = str(model[first][0])[:col]
    suffix = "" if at_end else str(model[last][0])[end_col:]
    lines = (prefix + new + suffix).split("\n")
    if at_end and lines and lines[-1] == "":
        lines.pop()  # the text ended with the file's last newline
    region = model[first : last + 1]
    replaced = _replace(region, [t for t, _w in region], lines, key)[0]
    region_end = len(text) if at_end else text.find("\n", end - end_col) + 1
    piece = "".join((t if t is not None else _GAP) + "\n" for t, _w in replaced)
    return model[:first] + replaced + model[last + 1 :], text[: at - col] + piece + text[region_end:]


Elsewhere = Callable[[str], "tuple[bool, int | None]"]


def _replace(
    region: list[Line], old: list[str | None], new: list[str], key: int, elsewhere: Elsewhere | None = None
) -> tuple[list[Line], list[Line]]:
    """`new` in place of a region whose text the edit knew as `old`: a new line the edit left as it
    was (equal to an old line) keeps that model line's writer (where the model had other text
    there: the writer of the line that moved there, `elsewhere`, else None), every other new line is
    the edit's. Also returns the region's lines that were not its old text (pushed aside)."""
    old_who, kept = _old_writers(region, old, elsewhere)
    out: list[Line] = []
    unmatched: dict[str, list[int | None]] = defaultdict(list)  # old lines the alignment left out
    matcher = SequenceMatcher(None, [o if o is not None else object() for o in old], new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out += [(new[j1 + k], old_who[i1 + k]) for k in range(j2 - j1)]
            continue
        for i in range(i1, i2):
            text = old[i]
            if text is not None and _distinctive(text):
                unmatched[text].append(old_who[i])
        out += [(new[j], key) for j in range(j1, j2)]
    # a distinctive line the edit kept as it was but moved within its text keeps its writer
    for k, (text, who) in enumerate(out):
        if who == key and text is not None and unmatched.get(text):
            out[k] = (text, unmatched[text].pop(0))
    return out, [line for i, line in enumerate(region) if not kept[i]]


def _old_writers(
    region: list[Line], old: list[str | None], elsewhere: Elsewhere | None
) -> tuple[list[int | None], list[bool]]:
    """Who wrote each line of the edit's old text, from the region (in order, then moved within it,
    then `elsewhere`); and which region lines were its old text."""
    old_who: list[int | None] = [None] * len(old)
    matched = [False] * len(old)
    kept = [False] * len(region)
    for i, j, n in _blocks(_texts(region), [o if o is not None else object() for o in old]):
        for k in range(n):
            old_who[j + k] = region[i + k][1]
            matched[j + k] = kept[i + k] = True
    moved: dict[str, list[int]] = defaultdict(list)  # region lines the common subsequence left out
    for i, (text, _who) in enumerate(region):
        if not kept[i] and text is not None and _distinctive(text):
            moved[text].append(i)
    for j, text in enumerate(old):
        if matched[j] or text is None or not _distinctive(text):
            continue
        if moved.get(text):  # the line moved within the region
            i = moved[text].pop(0)
            old_who[j], kept[i] = region[i][1], True
        elif elsewhere is not None:
            _found, old_who[j] = elsewhere(text)
    return old_who, kept


def _edit_lines(model: list[Line], old: list[str], new: list[str], event: Event, pool: Pool) -> list[Line]:
    """An edit whose old text is not in the model as it is: placed by its lines. Old lines the model
    has elsewhere moved here (their writers come along); the region's lines that are not in the old
    text moved away or are gone (kept aside in `pool`, should they show up again)."""
    at = _find_lines(model, old, event.line)
    if at is None:
        return _place_unknown(model, old, new, event, pool)
    begin, end = at
    outside: dict[str, list[int]] = defaultdict(list)
    for i, (text, _who) in enumerate(model):
        if (i < begin or i >= end) and text is not None and _distinctive(text):
            outside[text].append(i)
    taken: set[int] = set()

    def elsewhere(text: str) -> tuple[bool, int | None]:
        if outside.get(text):
            index = outside[text].pop(0)
            taken.add(index)
            return True, model[index][1]
        if pool.get(text):
            return True, pool[text].pop(0)
        return False, None

    replaced, aside = _replace(model[begin:end], list(old), new, event.key, elsewhere)
    for text, who in aside:
        if text is not None and _distinctive(text):
            pool[text].append(who)
    before = [line for i, line in enumerate(model[:begin]) if i not in taken]
    after = [line for i, line in enumerate(model[end:], start=end) if i not in taken]
    return before + replaced + after


def _find_lines(model: list[Line], old: list[str], hint: int | None) -> tuple[int, int] | None:
    """Where `old`'s lines sit in the model: exactly, then ignoring trailing blanks, then by the
    longest run of equal lines (the rest of the region shifted with it)."""
    texts = [t for t, _w in model]
    for strip in (False, True):
        wanted = [s.rstrip() if strip else s for s in old]
        have = [(t.rstrip() if strip else t) if t is not None else None for t in texts]
        spots = [i for i in range(len(have) - len(wanted) + 1) if have[i : i + len(wanted)] == wanted]
        if spots and wanted:
            best = min(spots, key=lambda i: abs(i + 1 - hint)) if hint else spots[0]
            return best, best + len(wanted)
    blocks = [b for b in _blocks(_texts(model), old) if any(_anchor(old[b[1] + k]) for k in range(b[2]))]
    if not blocks:
        return None
    group = max(_clusters(blocks, len(old)), key=lambda g: sum(n for _i, _j, n in g))
    (i0, j0, _n0), (i1, j1, n1) = group[0], group[-1]
    return max(0, i0 - j0), min(len(model), i1 + n1 + (len(old) - j1 - n1))


def _clusters(blocks: list[tuple[int, int, int]], span: int) -> list[list[tuple[int, int, int]]]:
    """Matching blocks in runs whose model lines lie within the old text's length of each other: the
    region an edit covered, where lines elsewhere that happen to be equal are not."""
    groups: list[list[tuple[int, int, int]]] = []
    for block in blocks:
        if groups and block[0] - (groups[-1][-1][0] + groups[-1][-1][2]) <= span:
            groups[-1].append(block)
        else:
            groups.append([block])
    return groups


def _place_unknown(model: list[Line], old: list[str], new: list[str], event: Event, pool: Pool) -> list[Line]:
    """An edit of lines the model does not have: its new lines where the tool said (else at the end),
    between gaps; its lines equal to old ones are not its own (the writer of one an earlier edit
    pushed aside comes back with it)."""

    def aside(text: str) -> tuple[bool, int | None]:
        return (True, pool[text].pop(0)) if pool.get(text) else (False, None)

    lines = _replace([], list(old), new, event.key, aside)[0]
    gap: Line = (None, None)
    if event.line is not None and 0 < event.line <= len(model):
        at = event.line - 1
        return model[:at] + [gap] + lines + [gap] + model[at:]
    return model + [gap] + lines + [gap]
