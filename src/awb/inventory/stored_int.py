"""The largest integer the stores keep (SQLite's and PostgreSQL's BIGINT): ids and counters past it are
refused before they reach SQL. A module of its own so that what only needs the bound (the CLI's `awb
staged`, whose help every `awb --help` builds) does not load the inventory's pydantic models."""

MAX_STORED_INT = 2**63 - 1
