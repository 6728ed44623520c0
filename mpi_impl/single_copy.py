"""Single-copy messages between the ranks of one machine, where the kernel allows them.

Between two processes on one machine, MPICH moves a large message through shared memory
cells by default: the sender copies it in, the receiver copies it out, two copies of every
byte.  With CMA (Linux "cross memory attach", the ``process_vm_readv`` system call) the
receiver reads straight from the sender's memory: one copy.  MPICH leaves CMA off by
default because the kernel may forbid it: Yama's ``ptrace_scope`` above 0 stops a process
from reading a sibling's memory, and container sandboxes (Docker's default seccomp profile)
block the system call outright; a message sent over CMA there would fail.

:func:`enable` turns MPICH's CMA on (``MPIR_CVAR_CH4_CMA_ENABLE=1``) only where both are
fine, and never against the user's own setting.  It must run before MPI is initialised
(before the first ``from mpi4py import MPI``); ``mpi_impl/__init__.py`` and the course's
launcher call it.  To see what it buys on your machine, compare
``MPIR_CVAR_CH4_CMA_ENABLE=0 mpiexec -n 2 python -m mpi_impl.bench --algo ring --sizes 16M``
with the same run without the variable (the bench's header says whether CMA is on).
Other MPI libraries ignore the variable.
"""
from __future__ import annotations

import ctypes
import os

VARIABLE = "MPIR_CVAR_CH4_CMA_ENABLE"
PTRACE_SCOPE = "/proc/sys/kernel/yama/ptrace_scope"


def allowed() -> bool:
    """True if this kernel lets a process read a sibling process's memory with CMA."""
    try:
        with open(PTRACE_SCOPE) as f:
            if f.read().strip() != "0":
                return False
    except OSError:
        pass                                    # no Yama: ordinary permission checks only
    return _process_vm_readv_works()


def _process_vm_readv_works() -> bool:
    """Read 8 bytes of our own memory through process_vm_readv (a sandbox that blocks the
    call fails it even for ourselves)."""
    class IOVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        source, target = ctypes.create_string_buffer(b"cma-test", 8), ctypes.create_string_buffer(8)
        mine = IOVec(ctypes.cast(target, ctypes.c_void_p), 8)
        theirs = IOVec(ctypes.cast(source, ctypes.c_void_p), 8)
        done = libc.process_vm_readv(os.getpid(), ctypes.byref(mine), 1, ctypes.byref(theirs), 1, 0)
        return done == 8 and target.raw == source.raw
    except (OSError, AttributeError):           # no libc symbol: not Linux
        return False


def enable(environ=os.environ) -> bool:
    """Set MPIR_CVAR_CH4_CMA_ENABLE=1 in `environ` where CMA works and the user has not set
    it.  Returns whether CMA is (now) asked for."""
    if VARIABLE not in environ and allowed():
        environ[VARIABLE] = "1"
    return environ.get(VARIABLE, "").strip() == "1"
