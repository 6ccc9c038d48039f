"""dgx-console: one terminal console for a model served across several GPU stations."""

__version__ = "0.1.0"
