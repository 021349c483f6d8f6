"""JSON text from outside (an API body, a property bag or HTTP headers typed
in the console, a `jobs import` file), read one strict way.

json.loads alone keeps the last of two equal keys without a word, reads
NaN/Infinity as numbers, and raises RecursionError (not a ValueError) on
deeply nested input, which callers catching JSONDecodeError turned into a
500. `loads` refuses all three with a JsonTextError (a ValueError) that
says what is wrong; its `code` is the API's error code.
"""

import json


class JsonTextError(ValueError):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    data = {}
    for key, value in pairs:
        if key in data:
            raise JsonTextError("duplicate_key", f"The key “{key[:100]}” appears twice in one object.")
        data[key] = value
    return data


def _refuse_constant(name: str):
    raise JsonTextError("invalid_json", f"{name} is not a JSON number.")


def loads(text: str | bytes):
    """Parse JSON text; JsonTextError (code invalid_json, or duplicate_key)
    for anything that is not one plain, unambiguous value."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_refuse_constant)
    except JsonTextError:
        raise
    except RecursionError:
        raise JsonTextError("invalid_json", "The JSON is nested too deeply.") from None
    except json.JSONDecodeError as exc:
        raise JsonTextError("invalid_json", f"{exc.msg} at character {exc.pos}.") from None
    except (ValueError, TypeError) as exc:  # e.g. bytes that are not UTF-8
        raise JsonTextError("invalid_json", str(exc)[:200]) from None
