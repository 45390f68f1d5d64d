"""Who must approve what: the rules (rules.py) or their file (file.py), whether an approval counts, the day's totals."""
