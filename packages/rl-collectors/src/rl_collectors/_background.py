"""Background collection into a replay buffer: TorchRL's ``start()``, ``pause()``, ``async_shutdown()``."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any


class BackgroundCollection:
    """Mixin for collectors that iterate (``__iter__``) into ``self.replay_buffer``.

    :meth:`start` runs the iteration in a daemon thread; :meth:`pause` holds it between two
    batches; :meth:`async_shutdown` stops it (after the batch in progress) and then calls
    ``self.shutdown(...)``. An error raised in the thread is re-raised by ``async_shutdown``.
    """

    replay_buffer: Any
    _thread: threading.Thread | None = None
    _thread_error: BaseException | None = None

    def _background_events(self) -> tuple[threading.Event, threading.Event, threading.Event]:
        """(stop, resume, idle): idle is set while the thread waits between two batches."""
        if "_stop_event" not in self.__dict__:
            self._stop_event, self._resume_event = threading.Event(), threading.Event()
            self._idle_event = threading.Event()
            self._resume_event.set()
        return self._stop_event, self._resume_event, self._idle_event

    def start(self) -> None:
        """Collect into ``replay_buffer`` in a background thread until ``total_frames`` are
        collected or :meth:`async_shutdown` is called (it stops between two batches).

        Raises:
            RuntimeError: no ``replay_buffer`` was given, or collection already started.
        """
        if self.replay_buffer is None:
            raise RuntimeError(
                "start() collects into a replay buffer in the background; pass "
                "replay_buffer= to the collector (or iterate over it instead)."
            )
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("this collector was already started; call async_shutdown() first.")
        stop, resume, idle = self._background_events()
        stop.clear()
        resume.set()
        idle.clear()
        self._thread_error = None

        def run() -> None:
            try:
                for _ in self:
                    idle.set()
                    resume.wait()
                    if stop.is_set():
                        return
                    idle.clear()
            except BaseException as error:  # re-raised by async_shutdown
                self._thread_error = error
            finally:
                idle.set()

        self._thread = threading.Thread(target=run, name="rl-collectors-start", daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        """Hold the background collection while the block runs: the batch in progress is
        finished and written, then no further batch starts until the block exits."""
        _, resume, idle = self._background_events()
        resume.clear()
        if self._thread is not None and self._thread.is_alive():
            idle.wait()
        try:
            yield
        finally:
            resume.set()

    def _stop_background(self, timeout: float | None) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        stop, resume, _ = self._background_events()
        stop.set()
        resume.set()
        thread.join(timeout)
        if thread.is_alive():
            raise RuntimeError(
                f"the background collection did not stop within {timeout} s (a batch is "
                "still running); call async_shutdown again with a longer timeout."
            )

    def _raise_background_error(self) -> None:
        error, self._thread_error = self._thread_error, None
        if error is not None:
            raise RuntimeError("the background collection started by start() failed") from error
