"""Wake-ups across processes on SQLite, which has no LISTEN/NOTIFY.

Each listening worker binds a Unix datagram socket and registers it in a folder beside
the database file (``<database>-wake/``). After a commit that made jobs ready, the
enqueuing process sends each registered socket one datagram per queue; the worker's
notifier wakes its producer, which claims within milliseconds instead of at its next
poll. The channel is only a hint: a lost datagram (full buffer, dead listener, a platform
without Unix sockets) costs a poll interval, never a job, because polling stays on.

A socket path may hold only ~100 bytes. Where the folder's path is longer, a Linux
listener binds in the abstract namespace and leaves a plain marker file in the folder
instead; senders derive the abstract address from the marker's name.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import select
import socket
import stat
import sys
import threading
from collections.abc import Iterable, Iterator

__all__ = ["WakeListener", "WakeSender", "wake_folder"]

#: Room left in ``sockaddr_un.sun_path`` (108 on Linux, 104 on macOS) for a file socket.
_MAX_SOCKET_PATH = 100
#: One datagram carries one queue name; longer names are cut (the claim reads the queue).
_MAX_DATAGRAM = 512


def wake_folder(database_path: str) -> str:
    return os.path.abspath(database_path) + "-wake"


def _abstract_address(folder: str, name: str) -> bytes:
    digest = hashlib.sha256(folder.encode()).hexdigest()[:16]
    return b"\0durq-wake-" + digest.encode() + b"-" + name.encode()


class WakeListener:
    """One worker's socket; ``notifications`` yields the queue names sent to it."""

    def __init__(self, folder: str) -> None:
        os.makedirs(folder, exist_ok=True)
        self.folder = folder
        name = f"{os.getpid()}-{secrets.token_hex(4)}"
        self.entry = os.path.join(folder, name)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            if len(self.entry.encode()) <= _MAX_SOCKET_PATH:
                self._sock.bind(self.entry)
            elif sys.platform.startswith("linux"):
                self._sock.bind(_abstract_address(folder, name))
                with open(self.entry, "x"):
                    pass  # the marker senders find
            else:
                raise OSError(
                    f"the path {self.entry!r} is too long for a Unix socket; workers poll"
                )
        except BaseException:
            self._sock.close()
            raise
        self._sock.setblocking(False)

    def notifications(self, timeout: float) -> Iterator[str]:
        ready, _, _ = select.select([self._sock], [], [], timeout)
        if not ready:
            return
        while True:
            try:
                data = self._sock.recv(_MAX_DATAGRAM)
            except BlockingIOError:
                return
            yield data.decode("utf-8", "replace")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.entry)
        self._sock.close()


class WakeSender:
    """Sends wake-ups to every registered listener of one database.

    The folder is listed again only when its modification time changes (a listener came
    or went), so a send costs one ``stat`` and one ``sendto`` per listener and queue.
    """

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.pid = os.getpid()  # a forked child makes its own sender
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._seen_mtime: int | None = None
        self._targets: list[tuple[str, str | bytes]] = []

    def send(self, queues: Iterable[str]) -> int:
        """Wake the listeners for ``queues``; how many datagrams went out."""
        try:
            targets = self._current_targets()
        except OSError:  # no folder: nobody listens
            return 0
        if not targets:
            return 0
        payloads = [q.encode()[:_MAX_DATAGRAM] for q in queues]
        sent = 0
        with self._lock:
            sock = self._socket()
            for entry, address in targets:
                for payload in payloads:
                    try:
                        sock.sendto(payload, address)
                        sent += 1
                    except BlockingIOError:
                        break  # its buffer is full of wake-ups it has not read yet
                    except (ConnectionRefusedError, FileNotFoundError):
                        self._forget(entry)  # its process is gone
                        break
                    except OSError:
                        break  # only a hint: polling covers it
        return sent

    def close(self) -> None:
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None

    def _socket(self) -> socket.socket:
        if self._sock is None:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._sock.setblocking(False)
        return self._sock

    def _current_targets(self) -> list[tuple[str, str | bytes]]:
        mtime = os.stat(self.folder).st_mtime_ns
        if mtime != self._seen_mtime:
            targets: list[tuple[str, str | bytes]] = []
            with os.scandir(self.folder) as entries:
                for item in entries:
                    mode = item.stat(follow_symlinks=False).st_mode
                    if stat.S_ISSOCK(mode):
                        targets.append((item.path, item.path))
                    elif stat.S_ISREG(mode):
                        targets.append((item.path, _abstract_address(self.folder, item.name)))
            self._targets, self._seen_mtime = targets, mtime
        return self._targets

    def _forget(self, entry: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(entry)
        self._seen_mtime = None
