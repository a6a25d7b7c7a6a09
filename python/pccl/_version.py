"""Package version; setup reads it from here (keep in step with the C project's VERSION)."""
__version__ = "0.1.0"
