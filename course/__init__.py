"""course: see README.md."""
