"""Searching runs' error text and logs by words (the runs page's search box
and its CSV export): every word typed must appear in the run's error or log,
in any case. The index is the database's own full-text search (migration
0029): SQLite's FTS5 (unicode61 words) and PostgreSQL's tsvector with the
`simple` configuration (words, no stemming), so both read a query the same
way. Words, not substrings: "timeout" finds "Timeout: 30 s" but not
"timeouts"."""

import re

from django.db import connection
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL
from django.utils.translation import gettext as _

MAX_QUERY_CHARS = 200
MAX_WORDS = 10
# What counts as a word: letters and digits (the unicode61 tokenizer's and
# PostgreSQL's parser's notion, for the scripts Cronboard's users write).
WORD = re.compile(r"\w+", re.UNICODE)


class SearchError(ValueError):
    """A search the page refuses, with the sentence it shows."""


def words(text: str) -> list[str]:
    """The words of a query, or SearchError when it is too long or has too
    many; an empty list for a query with none (then nothing is filtered)."""
    if len(text) > MAX_QUERY_CHARS:
        raise SearchError(_("Search for at most {count} characters.").format(count=MAX_QUERY_CHARS))
    found = [word.lower() for word in WORD.findall(text)]
    if len(found) > MAX_WORDS:
        raise SearchError(_("Search for at most {count} words.").format(count=MAX_WORDS))
    return list(dict.fromkeys(found))


def matching(runs, text: str):
    """`runs` narrowed to those whose error or log holds every word of `text`."""
    found = words(text)
    if not found:
        return runs
    if connection.vendor == "sqlite":
        # FTS5: each word as a quoted string (no operators), all of them.
        query = " ".join('"' + word.replace('"', '""') + '"' for word in found)
        return runs.filter(
            pk__in=RawSQL("SELECT rowid FROM jobs_run_fts WHERE jobs_run_fts MATCH %s", (query,))
        )
    # The expression and the condition are the GIN index's (run_text_search_idx).
    error, log = '"jobs_run"."error"', '"jobs_run"."log"'
    condition = RawSQL(
        f"({error} <> '' OR {log} <> '') AND to_tsvector('simple'::regconfig, {error} || ' ' || {log}) "
        "@@ plainto_tsquery('simple'::regconfig, %s)",
        (" ".join(found),),
        output_field=BooleanField(),
    )
    return runs.filter(condition)
