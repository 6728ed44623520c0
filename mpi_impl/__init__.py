"""mpi_impl: see README.md."""
