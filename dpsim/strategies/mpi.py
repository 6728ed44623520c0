"""MPI's own MPI_Allreduce, simulated as the algorithm MPICH picks for it.

MPICH 5.0.2 (the `mpich` wheel mpi_impl runs on) chooses by its default collective-selection
tree, compiled into libmpi (`strings libmpi.so.12 | grep '"collective=allreduce"'` prints it;
MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE replaces it). For a built-in operation such as a
sum on one communicator:
  messages of at most 8 bytes, or fewer values than the largest power of two p <= n
      -> recursive doubling (MPIR_Allreduce_intra_recursive_doubling)
  everything else
      -> reduce-scatter + all-gather, i.e. halving-doubling (MPIR_Allreduce_intra_reduce_scatter_allgather)
Gradients are large, so `mpi` costs what halving-doubling costs (see halving_doubling.py).
"""
from . import halving_doubling, recursive_doubling

VALUE_BYTES = 4          # FP32 gradients


def choice(n, nbytes) -> str:
    """The algorithm MPICH runs for nbytes of FP32 values on n ranks."""
    p = 1 << (n.bit_length() - 1)
    if nbytes <= 8 or nbytes / VALUE_BYTES < p:
        return "recursive-doubling"
    return "halving-doubling"


def allreduce(machine, ranks, nbytes):
    chosen = halving_doubling if choice(len(ranks), nbytes) == "halving-doubling" else recursive_doubling
    yield from chosen.allreduce(machine, ranks, nbytes)
