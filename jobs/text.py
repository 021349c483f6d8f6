"""Text that both databases store.

PostgreSQL refuses a NUL character in `text` and `jsonb` ("PostgreSQL text
fields cannot contain NUL (0x00) bytes"); SQLite keeps it but its string
functions stop at it. Neither can store a lone UTF-16 surrogate (U+D800 to
U+DFFF without its partner): it has no UTF-8 form, so encoding the value
for the driver fails (`UnicodeEncodeError`). JSON lets both through
(`"\\u0000"`, `"\\udfff"`), so does `%00` in a query string.

Two rules, one for each direction:

- input (`find_unstorable`, `validate_storable`): what a person or program
  sends is refused, with a message that names what was wrong and where;
- output (`storable`): what a handler produces (a log, a result, an error,
  an HTTP body excerpt) is repaired before it is written, each bad
  character replaced by U+FFFD, so a run's outcome always lands.
"""

import re

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

REPLACEMENT = "\ufffd"
CODE = "invalid_text"
_UNSTORABLE_RE = re.compile("[\x00\ud800-\udfff]")
# The input rule as JSON Schema patterns, for the API's document: text with
# no NUL, and text with no NUL and something besides white space. A lone
# surrogate cannot be written in a pattern every JSON reader accepts, so the
# document says that part in words (the Error schema's invalid_text).
NO_NUL_PATTERN = "^[^\\x00]*$"
VISIBLE_PATTERN = "^[^\\x00]*[^\\s\\x00][^\\x00]*$"


# How many names a refusal lists before "…" (a job still using a pool, …).
SHOWN_NAMES = 5


def first_names(names: list[str]) -> str:
    """The first SHOWN_NAMES of `names`, comma-separated, and "…" for more."""
    return ", ".join(names[:SHOWN_NAMES]) + (", …" if len(names) > SHOWN_NAMES else "")


def storable(text: str) -> str:
    """`text` as both databases store it: a surrogate pair written as two
    code points becomes its character; a lone surrogate and a NUL become
    U+FFFD, so the reader sees that something was there."""
    if not _UNSTORABLE_RE.search(text):
        return text
    if any("\ud800" <= char <= "\udfff" for char in text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text.replace("\x00", REPLACEMENT)


def storable_value(value):
    """`storable` for a JSON value: every string in it, names included."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable_value(key): storable_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [storable_value(item) for item in value]
    return value


def describe(char: str) -> str:
    if char == "\x00":
        return _("a NUL character")
    return _("an unpaired surrogate (U+{code:04X})").format(code=ord(char))


def find_unstorable(value) -> str | None:
    """What in `value` (a string, or dict names and values and list items at
    any depth) no database stores, described for a person with where it
    is (`a NUL character in “url”`); None if nothing. Walked with a stack,
    not recursion, so no nesting is too deep to look at."""
    pending = [(value, None)]  # (a value, the name it sits under)
    while pending:
        item, name = pending.pop()
        if isinstance(item, str):
            if match := _UNSTORABLE_RE.search(item):
                if name is None:
                    return describe(match.group())
                return _("{what} in “{name}”").format(what=describe(match.group()), name=storable(name))
        elif isinstance(item, dict):
            for key, inner in item.items():
                if isinstance(key, str) and (match := _UNSTORABLE_RE.search(key)):
                    return _("{what} in a name").format(what=describe(match.group()))
                pending.append((inner, str(key)))
        elif isinstance(item, (list, tuple)):
            pending.extend((inner, name) for inner in item)
    return None


def validate_storable(value) -> None:
    """A form field validator: refuse text no database stores."""
    problem = find_unstorable(value)
    if problem:
        raise ValidationError(
            _("Contains {problem}, which cannot be stored.").format(problem=problem), code=CODE
        )


def query_problem(params) -> tuple[str, str | None] | None:
    """(the refusal's message, the parameter's name if it is not the bad
    part) for query parameters that carry or name text no database stores;
    None if they are all storable."""
    for name, values in params.lists():
        if found := find_unstorable(name):
            return _query_refusal(f"{found} in a parameter name"), None
        for value in values:
            if found := find_unstorable(value):
                return _query_refusal(f"{found} in “{name}”"), name
    return None


def _query_refusal(problem: str) -> str:
    return f"The query parameters contain {problem}, which cannot be stored."
