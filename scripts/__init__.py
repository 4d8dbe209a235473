"""One-off jobs that are not part of the `transformer` package (run with `python -m scripts.X`)."""
