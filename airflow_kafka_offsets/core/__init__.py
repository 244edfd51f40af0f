"""Pure logic, no I/O: pipeline specs, batch planning, offset resets, Spark reports, tables for logs."""
