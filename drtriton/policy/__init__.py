"""The built-in generation policy: Triton from templates (see builtin.py)."""
