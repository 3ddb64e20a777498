"""`pi-memory watch`: follow the agents' session folders and archive new lines as they are written.

Design idea: a thin front end. The `watchdog` library reports file system
events (inotify, FSEvents, ReadDirectoryChangesW) on its own thread; that thread
only puts paths on a queue. The main thread, the only one that touches the
archive's connection, drains the queue, coalesces repeated events for one file
and hands each file to `tail.Follower.sync`, which reads what was appended.
Held-back tails (a streamed message that may still grow) are re-checked when
the queue is idle. A folder that does not exist yet (an agent not installed
yet) is watched for from its nearest existing parent and followed once created. On start every existing file is synced once, so whatever
was written while the watcher was not running is caught up. Ctrl-C or SIGTERM
(SIGINT) stops it between two syncs: no write is ever cut in half.
"""

from __future__ import annotations

import queue
import signal
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType

import apsw
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

from ..archive import Follower, SyncResult, discover

POLL_S = 0.1  # how long the main loop waits for an event before re-checking held-back tails
POLLING_S = 0.5  # scan interval of watchdog's polling observer, used only when native watching fails
SUFFIX = ".jsonl"

Change = tuple[str, Path]  # ("sync" | "gone" | "scan", path)


class _Enqueue(FileSystemEventHandler):
    """Runs on watchdog's thread: never touches the archive, only queues paths."""

    def __init__(self, changes: queue.Queue[Change]) -> None:
        self.changes = changes

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        src = Path(str(event.src_path))
        if event.is_directory:
            if event.event_type in ("created", "moved"):
                self.changes.put(("scan", Path(str(event.dest_path or event.src_path))))
            return
        if event.event_type == "moved":
            if src.suffix == SUFFIX:
                self.changes.put(("gone", src))
            dest = Path(str(event.dest_path))
            if dest.suffix == SUFFIX:
                self.changes.put(("sync", dest))
        elif src.suffix == SUFFIX:
            self.changes.put(("gone" if event.event_type == "deleted" else "sync", src))


def _drain(changes: queue.Queue[Change], timeout: float) -> list[Change]:
    try:
        batch = [changes.get(timeout=timeout)]
    except queue.Empty:
        return []
    while True:
        try:
            batch.append(changes.get_nowait())
        except queue.Empty:
            return batch


def _under(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _coalesce(batch: Iterable[Change], roots: list[Path]) -> dict[Path, str]:
    """One action per path inside the watched roots, the last event deciding (deleted then re-created: synced)."""
    last: dict[Path, str] = {}
    for kind, path in batch:
        if not _under(path, roots):
            continue  # an event next to a root that does not exist yet (e.g. ~/.codex/history.jsonl)
        if kind == "scan":
            for found in discover([path]) if path.is_dir() else []:
                last[found] = "sync"
        else:
            last[path] = kind
    return last


def _nearest_existing(path: Path) -> Path | None:
    for parent in path.parents:
        if parent.is_dir():
            return parent
    return None


class _Roots:
    """Recursive watches on the roots that exist; a shallow watch on the nearest existing ancestor of
    each root that does not exist yet, so an agent installed after the watcher started is picked up
    from its folder's creation event."""

    def __init__(self, observer: BaseObserver, handler: FileSystemEventHandler, roots: list[Path]) -> None:
        self.observer = observer
        self.handler = handler
        self.pending = list(roots)
        self.active: list[Path] = []
        self.shallow: set[Path] = set()

    def refresh(self) -> list[Path]:
        """Watch every root that exists now; returns those newly watched (they need a scan)."""
        added = []
        for root in list(self.pending):
            if root.is_dir():
                self.observer.schedule(self.handler, str(root), recursive=True)
                self.pending.remove(root)
                self.active.append(root)
                added.append(root)
                continue
            ancestor = _nearest_existing(root)
            if ancestor is not None and ancestor not in self.shallow:
                self.observer.schedule(self.handler, str(ancestor), recursive=False)
                self.shallow.add(ancestor)
        return added


class Watcher:
    def __init__(
        self,
        follower: Follower,
        roots: list[Path],
        echo: Callable[[str], None],
        idle: Callable[[], bool] | None = None,
    ) -> None:
        self.follower = follower
        self.roots = roots
        self.echo = echo
        # background work for quiet moments (semantic recall's embedding); returns whether more is due
        self.idle = idle
        self.idle_due = idle is not None
        self.changes: queue.Queue[Change] = queue.Queue()
        self.stop = threading.Event()
        self.failed: dict[str, str] = {}  # files that could not be read or had bad lines: why (the first)

    def handle(self, path: Path, kind: str) -> None:
        """One file's change. A file that cannot be archived (unreadable, not a regular file, a
        defect of a parser) is said and remembered, and the watcher goes on with the others; a
        damaged archive stops it (nothing more could be written)."""
        try:
            result = self.follower.mark_missing(path) if kind == "gone" else self.follower.sync(path)
        except (apsw.CorruptError, apsw.NotADBError):
            raise
        except Exception as exc:  # one bad file never ends the watch
            self.failed[str(path)] = f"cannot archive: {type(exc).__name__}: {exc}"
            self.echo(f"{path}: {self.failed[str(path)]}")
            return
        self._report(result)

    def _report(self, r: SyncResult) -> None:
        if r.missing and r.session_id:
            self.echo(f"source gone (kept in the archive): {r.path}")
        elif r.added:
            again = " (file was rewritten: re-read)" if r.reread else ""
            self.echo(f"+{r.added} message(s)  {r.session_id}  {r.path}{again}")
        for e in r.errors[:3]:
            self.echo(f"{e.path}:{e.line}: {e.error}" if e.line else f"{e.path}: {e.error}")
        if r.errors:
            self.failed[str(r.path)] = r.errors[0].error

    def catch_up(self, roots: list[Path]) -> int:
        files = discover(roots)
        for path in files:
            if self.stop.is_set():
                break
            self.handle(path, "sync")
        return len(files)

    def _when_idle(self, busy: bool) -> None:
        """Between events, a step of the background work; new lines make it look for work again."""
        if self.idle is None:
            return
        if busy:
            self.idle_due = True
        elif self.idle_due:
            self.idle_due = self.idle()

    def _start(self) -> tuple[BaseObserver, _Roots]:
        """The native observer (inotify, FSEvents, ...); watchdog's polling one if the OS refuses more watches."""
        observer: BaseObserver = Observer()
        roots = _Roots(observer, _Enqueue(self.changes), self.roots)
        try:
            roots.refresh()
            observer.start()
        except OSError as exc:  # e.g. "inotify instance limit reached"
            self.echo(f"native file watching unavailable ({exc}); polling every {POLLING_S} s instead")
            observer = PollingObserver(timeout=POLLING_S)
            roots = _Roots(observer, _Enqueue(self.changes), self.roots)
            roots.refresh()
            observer.start()
        return observer, roots

    def run(self) -> None:
        observer, roots = self._start()  # before the catch-up, so nothing written meanwhile is missed
        try:
            n = self.catch_up(roots.active)
            waiting = f"; waiting for {', '.join(map(str, roots.pending))}" if roots.pending else ""
            self.echo(f"watching {len(roots.active)} folder(s), {n} session file(s){waiting}; Ctrl-C to stop")
            while not self.stop.is_set():
                batch = _drain(self.changes, POLL_S)
                if roots.pending and any(kind == "scan" for kind, _path in batch):
                    batch += [("scan", root) for root in roots.refresh()]
                for path, kind in _coalesce(batch, roots.active).items():
                    self.handle(path, kind)
                for path in self.follower.due():
                    self.handle(path, "sync")
                self._when_idle(bool(batch))
        except KeyboardInterrupt:
            pass
        finally:
            observer.stop()
            observer.join(timeout=5)
        self.echo("stopped")


def watch(
    follower: Follower, roots: list[Path], echo: Callable[[str], None], idle: Callable[[], bool] | None = None
) -> dict[str, str]:
    """Follow `roots` until Ctrl-C (SIGINT) or SIGTERM; returns the files that could not be read
    or had bad lines, with why (the command exits 1 when there are any).

    Both signals get our handler, even when SIGINT was ignored when we started (a shell starts
    background jobs that way, and Python then never raises KeyboardInterrupt): a watcher that
    cannot be stopped with the signal people send it would be left running.
    """
    watcher = Watcher(follower, roots, echo, idle)

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        watcher.stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        watcher.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return watcher.failed
