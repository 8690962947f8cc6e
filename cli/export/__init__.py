"""`grpo export`'s work: builders, verification, staging, the report (the command: commands/export.py)."""
