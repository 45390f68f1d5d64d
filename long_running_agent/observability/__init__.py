"""What operators see: each ledger step as a span and a metric (spans.py), traces sent out (tracing.py), the
Prometheus figures (metrics.py, http.py) and JSON logs (logs.py). Nothing here imports the rest of the package."""
