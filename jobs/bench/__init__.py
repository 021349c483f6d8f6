"""`manage.py bench`: benchmark commands that print figures (never timed tests).

Each benchmark runs in a child `manage.py bench` whose DATABASE_URL is a
throw-away database (`throwaway.py`), so nothing it does can reach the
configured one. One module per benchmark: `scheduler.py`, `retention.py`,
`preview.py`, `pages.py`; `report.py` has the percentiles and the tables.
"""
