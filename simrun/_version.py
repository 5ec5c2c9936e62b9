"""simrun's version: one place, read by the build (pyproject.toml) and by every layer."""

__version__ = "0.1.0"
