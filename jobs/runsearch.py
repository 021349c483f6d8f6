"""Searching runs' error text and logs by words (the runs page's search box
and its CSV export): every word typed must appear in the run's error or log,
in any case. The index is the database's own full-text search (migration
0029): SQLite's FTS5 (unicode61 words) and PostgreSQL's tsvector with the
`simple` configuration (words, no stemming), so both read a query the same
way. Words, not substrings: "timeout" finds "Timeout: 30 s" but not
"timeouts".

The runs page shows the newest matches first (`newest`): it reads the index
for a window of run ids at a time, newest first, rather than every match
(a word in one run in ten is 100,000 matches in 1,000,000 runs, all read
and sorted for one page of 25). PostgreSQL's GIN index still reads every
match's id for a word (not the rows), whatever range of ids is asked, so
there the newest runs are first tested one by one (_walk), which fills the
page of a frequent word; the windows find the rarer ones."""

import re

from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import BooleanField, Max
from django.db.models.expressions import RawSQL
from django.utils.translation import gettext as _

from jobs.models import Run

MAX_QUERY_CHARS = 200
MAX_WORDS = 10
# `newest`'s first window of run ids, and how much each next one grows.
FIRST_WINDOW = 4096
# How many of the newest runs `newest` tests one by one on PostgreSQL
# before it reads the index (_walk), and how much of their text at most:
# lower-casing and parsing it is the walk's cost (about 0.25 µs a byte to
# parse, so 100 ms for the whole budget at worst).
WALK = 2000
WALK_BYTES = 384 * 1024
WINDOW_GROWTH = 8
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


def _fts_query(found: list[str]) -> str:
    # FTS5: each word as a quoted string (no operators), all of them.
    return " ".join('"' + word.replace('"', '""') + '"' for word in found)


# PostgreSQL's text search configuration: the GIN index's (run_text_search_idx).
TS_CONFIG = "'simple'::regconfig"


def _text_sql(error: str, log: str, *, indexed: bool) -> str:
    """On PostgreSQL, SQL for: the run's text (the columns `error` and
    `log`) holds every word of the query (its one parameter). `indexed`:
    as the GIN index's expression and operator (run_text_search_idx), so
    that the index finds the matches; otherwise through the operator's
    function (ts_match_vq, the same test), which no index serves, so the
    planner reads the rows the other conditions give and tests each."""
    vector = f"to_tsvector({TS_CONFIG}, {error} || ' ' || {log})"
    query = f"plainto_tsquery({TS_CONFIG}, %s)"
    test = f"{vector} @@ {query}" if indexed else f"ts_match_vq({vector}, {query})"
    return f"({error} <> '' OR {log} <> '') AND {test}"


def _text_condition(found: list[str], *, indexed: bool) -> RawSQL:
    """`_text_sql` on a run row, for a queryset."""
    return RawSQL(
        _text_sql('"jobs_run"."error"', '"jobs_run"."log"', indexed=indexed),
        (" ".join(found),),
        output_field=BooleanField(),
    )


def _row_matches(found: list[str]) -> RawSQL:
    """The condition on one run row, for a few rows (the whole index is read
    the other way: matching): a look-up of that row in SQLite's FTS index;
    on PostgreSQL the text tested row by row, since the planner, which
    cannot tell a word's share of the runs (no statistics on a partial
    index's expression), read it through the GIN index: every match."""
    if connection.vendor == "sqlite":
        return RawSQL(
            'EXISTS (SELECT 1 FROM jobs_run_fts WHERE jobs_run_fts MATCH %s AND rowid = "jobs_run"."id")',
            (_fts_query(found),),
            output_field=BooleanField(),
        )
    return _text_condition(found, indexed=False)


def matching(runs, text: str, *, ids: tuple[int, int] | None = None):
    """`runs` narrowed to those whose error or log holds every word of `text`
    (and, given `ids`, whose id is in (low, high]: the index reads only
    that range)."""
    found = words(text)
    if not found:
        return runs
    if ids is not None:
        runs = runs.filter(pk__gt=ids[0], pk__lte=ids[1])
    if connection.vendor == "sqlite":
        sql, params = "SELECT rowid FROM jobs_run_fts WHERE jobs_run_fts MATCH %s", [_fts_query(found)]
        if ids is not None:
            # A rowid range FTS5 seeks to, rather than every match read
            # and then filtered by the outer query.
            sql += " AND rowid > %s AND rowid <= %s"
            params += ids
        return runs.filter(pk__in=RawSQL(sql, params))
    return runs.filter(_text_condition(found, indexed=True))


def newest(runs, text: str, count: int) -> list:
    """The first `count` of `runs` ordered newest first (-scheduled_at, -id)
    that match `text`: the same rows as `matching(runs, text)` ordered and
    cut, without reading every match.

    A run's id and its scheduled time go together, except for a few runs
    (catch-ups, retries, backfills: scheduled before they were created). So
    the matches are read in a window of ids around the newest run
    the page can show, widened WINDOW_GROWTH times until it gives `count` rows; then
    one query over the runs scheduled between the last of them and the top
    of the page looks, row by row, for a match outside the window that sorts
    among them, and merges it in."""
    found = words(text)
    ordered = ("-scheduled_at", "-id")
    if not found:
        return list(runs.order_by(*ordered)[:count])
    if connection.vendor != "sqlite":
        walked = _walk(runs, found, count)
        if len(walked) == count:
            return list(runs.filter(pk__in=walked).order_by(*ordered))
    top = runs.order_by(*ordered).values_list("pk", flat=True).first()
    newest_id = Run.objects.aggregate(newest=Max("pk"))["newest"]
    if top is None or newest_id is None:
        return []
    width = FIRST_WINDOW
    while True:
        low, high = top - width, top + width
        window = _window(runs, text, (low, high), count)
        whole = low < 0 and high >= newest_id
        if len(window) >= count or whole:
            break
        width *= WINDOW_GROWTH
    if whole or not window:
        return window
    last = window[-1]
    outside = (
        runs.newer_than(last.scheduled_at, last.pk)
        .exclude(pk__gt=low, pk__lte=high)
        .filter(_row_matches(found))
    )
    strays = list(outside.order_by(*ordered)[:count])
    if not strays:
        return window
    merged = sorted([*window, *strays], key=lambda run: (run.scheduled_at, run.pk), reverse=True)
    return merged[:count]


def _window(runs, text: str, ids: tuple[int, int], count: int) -> list:
    """The first `count` matches, newest first, among the runs whose id is
    in (low, high]. On PostgreSQL the matches' ids and times are read
    unordered and the newest picked here: with ORDER BY … LIMIT the planner,
    which takes any word for a rare one, walks the runs backwards testing
    each row's text until it has `count` (every run, seconds, for a word
    that is in none), where the GIN index and the id range together read
    only the window's matches."""
    ordered = ("-scheduled_at", "-id")
    matches = matching(runs, text, ids=ids)
    if connection.vendor == "sqlite":
        return list(matches.order_by(*ordered)[:count])
    pairs = sorted(matches.order_by().values_list("scheduled_at", "pk"), reverse=True)[:count]
    return list(runs.filter(pk__in=[pk for _at, pk in pairs]).order_by(*ordered))


def _walk(runs, found: list[str], count: int) -> list[int]:
    """PostgreSQL: the ids of the first `count` matches among the newest of
    `runs` (at most WALK of them, with at most WALK_BYTES of text), each
    run's text tested in turn (newest first, stopping at `count`). When they
    are `count`, they are the page: any match beyond the runs walked sorts
    after them. The GIN index cannot do that for a
    frequent word: it reads every match's id (100,000 of 1,000,000 runs for
    a word in one run in ten), whatever else the query asks.

    Parsing a run's text is the test's cost (a 256 KB log takes tens of
    milliseconds), so a run is parsed only if its lower-cased text holds
    every word of the query as the parser reads them (a lexeme is a
    lower-cased piece of the text, so a match always passes; PostgreSQL's
    lower() and the parser lower-case alike under libc locales, so only on
    a database whose default collation is libc's: `_lowers_as_parser`).
    CASE, so that the planner cannot test the text before the words."""
    try:
        inner, params = (
            runs.order_by("-scheduled_at", "-id").values_list("id", "scheduled_at", "error", "log")[:WALK]
        ).query.sql_with_params()
    except EmptyResultSet:  # runs.none(): a viewer of no namespace
        return []
    parsed = _text_sql("newest.error", "newest.log", indexed=False)
    query = " ".join(found)
    if _lowers_as_parser():
        test = f"""CASE WHEN NOT EXISTS (
            SELECT 1 FROM unnest(tsvector_to_array(to_tsvector({TS_CONFIG}, %s))) AS word
            WHERE strpos(lower(newest.error || ' ' || newest.log), word) = 0
          ) THEN {parsed} END"""
        test_params: tuple = (query, query)
    else:
        test, test_params = parsed, (query,)
    sql = f"""
        SELECT newest.id FROM (
          SELECT walked.*, sum(octet_length(walked.error) + octet_length(walked.log))
            OVER (ORDER BY walked.scheduled_at DESC, walked.id DESC) AS upto
          FROM ({inner}) AS walked
        ) AS newest
        WHERE newest.upto <= %s AND {test}
        ORDER BY newest.scheduled_at DESC, newest.id DESC
        LIMIT %s"""
    with connection.cursor() as cursor:
        cursor.execute(sql, (*params, WALK_BYTES, *test_params, count))
        return [row[0] for row in cursor.fetchall()]


_providers: dict[tuple, bool] = {}


def _lowers_as_parser() -> bool:
    """Whether lower() lower-cases text as the full-text parser does: the
    parser uses the C library's rules for the database's LC_CTYPE, lower()
    those of the database's default collation, the same when its provider
    is libc (always before PostgreSQL 15; `datlocprovider` 'c'), not with
    ICU's or the built-in provider's (a word with 'İ' would then pass the
    parse and fail the test before it). Asked once per database."""
    key = (
        connection.settings_dict.get("HOST"),
        connection.settings_dict.get("PORT"),
        connection.settings_dict["NAME"],
    )
    if key not in _providers:
        provider = "c"
        if connection.pg_version >= 150000:
            with connection.cursor() as cursor:
                cursor.execute("SELECT datlocprovider FROM pg_database WHERE datname = current_database()")
                provider = cursor.fetchone()[0]
        _providers[key] = provider == "c"
    return _providers[key]
