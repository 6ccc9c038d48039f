"""Everything about one station: its monitor, state, status, checks and RDMA validation."""
