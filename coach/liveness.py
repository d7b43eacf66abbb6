"""Whether the process running a turn is still alive, as another process can tell.

A running turn says so twice: its message records which process runs it (this module's
PROCESS), and its heartbeat is written every TURN_HEARTBEAT_SECONDS. Another process
judges it dead when the heartbeat stopped for TURN_SILENT_SECONDS; one on the same host
knows sooner, when the process it names is gone, so a web process restarted after a crash
fails its predecessor's turns as it starts, not seconds later.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass

# host:pid:boot. The boot tells a process from an earlier one with the same pid (a
# container's first process is pid 1 at every start).
_BOOT = uuid.uuid4().hex[:12]


def this_process() -> str:
    """The name a turn records as the process that runs it."""
    return f"{socket.gethostname()}:{os.getpid()}:{_BOOT}"


@dataclass(frozen=True)
class ProcessName:
    host: str
    pid: int
    boot: str

    @classmethod
    def parse(cls, name: str) -> ProcessName | None:
        host, _, rest = name.rpartition(":")
        host, _, pid = host.rpartition(":")
        try:
            return cls(host=host, pid=int(pid), boot=rest) if host else None
        except ValueError:
            return None


def known_dead(name: str) -> bool:
    """Whether the process `name` is certainly gone: it ran on this host and its pid is no
    longer alive, or the pid is this very process's and the name an earlier one's. A
    process elsewhere, or a name that is not one, is never known dead from here: its
    heartbeat decides."""
    process = ProcessName.parse(name)
    if process is None or process.host != socket.gethostname():
        return False
    if process.pid == os.getpid():
        return process.boot != _BOOT
    try:
        os.kill(process.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        # Alive, under another user.
        return False
    return _exited_unreaped(process.pid)


def _exited_unreaped(pid: int) -> bool:
    """A process that exited and whose parent has not yet collected it (a zombie) still
    answers to its pid: on Linux its state says so."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            # "pid (name) state ...": the name may hold spaces and brackets, so from the last ")".
            return stat.read().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False
