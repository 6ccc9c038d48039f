"""Log and check diagnosis: the finding catalogue and the incremental matcher."""
