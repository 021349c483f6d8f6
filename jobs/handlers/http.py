"""HTTP jobs: one request through the fence; success is the expected status.

Properties (all strings): `url`, `method` (default GET), `headers` (a JSON
object or `Name: value` lines), `body`, `expect_status` (default any 2xx;
e.g. `200`, `200, 204`, `2xx, 304`) and `timeout` (seconds, capped by the
job's own timeout).
"""

import json
import re

from jobs import jsontext
from jobs.fence import FenceError, RequestFailed, check_url, fenced_request
from jobs.handlers.base import HandlerError, JobContext, JobHandler, with_shard
from jobs.models import Job

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
EXCERPT_CHARS = 1000
# A request may take as long as a run may.
MAX_TIMEOUT_SECONDS = Job.MAX_TIMEOUT_SECONDS

_TOKEN_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Framing and routing stay ours: the request goes where the fence checked,
# framed the way http.client frames it.
_RESERVED_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "te", "upgrade", "trailer"}


def parse_headers(value) -> list[tuple[str, str]]:
    """A JSON object (or dict) or `Name: value` lines → [(name, value)];
    raises ValueError with a message fit for a form."""
    if value in (None, ""):
        return []
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = jsontext.loads(value)
        except jsontext.JsonTextError as exc:
            raise ValueError(f"headers look like JSON but do not parse: {exc.message}") from None
    if isinstance(value, dict):
        if any(isinstance(v, (dict, list)) for v in value.values()):
            raise ValueError("a header value must be text, not a list or object")
        pairs = [(str(k), v if isinstance(v, str) else json.dumps(v)) for k, v in value.items()]
    elif isinstance(value, str):
        pairs = []
        for number, line in enumerate(value.splitlines(), 1):
            if not line.strip():
                continue
            name, sep, val = line.partition(":")
            if not sep:
                raise ValueError(f"line {number}: expected 'Name: value'")
            pairs.append((name.strip(), val.strip()))
    else:
        raise ValueError("headers must be a JSON object or 'Name: value' lines")
    for name, val in pairs:
        if not _TOKEN_RE.fullmatch(name):
            raise ValueError(f"{name!r} is not a valid header name")
        if name.lower() in _RESERVED_HEADERS:
            raise ValueError(f"the {name} header is set by Cronboard and cannot be overridden")
        if any(c in val for c in "\r\n\0"):
            raise ValueError(f"the value of {name} contains a line break")
    return pairs


def parse_expect_status(value) -> tuple[frozenset[int], frozenset[int]]:
    """`200, 204` / `2xx` → (codes, classes); ((), {2}) when empty."""
    text = str(value or "").strip()
    if not text:
        return frozenset(), frozenset({2})
    codes, classes = set(), set()
    for item in re.split(r"[,\s]+", text.lower()):
        if re.fullmatch(r"[1-5]xx", item):
            classes.add(int(item[0]))
        elif re.fullmatch(r"[1-5][0-9][0-9]", item):
            codes.add(int(item))
        else:
            raise ValueError(f"{item!r} is not a status code (use e.g. 200, 204 or 2xx)")
    return frozenset(codes), frozenset(classes)


def _describe_expected(codes, classes) -> str:
    return ", ".join([*(f"{c}xx" for c in sorted(classes)), *(str(c) for c in sorted(codes))])


def parse_timeout(value) -> float | None:
    text = str(value or "").strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number of seconds") from None
    if not 0 < seconds <= MAX_TIMEOUT_SECONDS:
        raise ValueError(f"the timeout must be between 0 and {MAX_TIMEOUT_SECONDS} seconds")
    return seconds


def upstream_headers(upstream: dict) -> dict[str, str]:
    """The headers an HTTP job started after an upstream run sends."""
    return {
        "X-Cronboard-Upstream-Job": str(upstream.get("job", "")).encode("ascii", "backslashreplace").decode(),
        "X-Cronboard-Upstream-Run": str(upstream.get("run_id", "")),
        "X-Cronboard-Upstream-Status": str(upstream.get("status", "")),
    }


def shard_headers(ctx: JobContext) -> dict[str, str]:
    """The headers an HTTP job's run sends when its fire is split in shards."""
    return {"X-Cronboard-Shard-Index": str(ctx.shard_index), "X-Cronboard-Shard-Total": str(ctx.shard_total)}


def validate_http_properties(props: dict) -> dict[str, str]:
    """Field → human error for an HTTP job's properties ({} if fine),
    including the fence check on `url` (with real DNS)."""
    errors = {}
    url = str(props.get("url") or "").strip()
    if not url:
        errors["url"] = "Enter the URL to request."
    else:
        try:
            check_url(url)
        except FenceError as exc:
            errors["url"] = f"Blocked by the fence: {exc.reason}"
    method = str(props.get("method") or "GET").strip().upper()
    if method not in METHODS:
        errors["method"] = f"Method must be one of {', '.join(METHODS)}."
    for name, parse in [
        ("headers", parse_headers),
        ("expect_status", parse_expect_status),
        ("timeout", parse_timeout),
    ]:
        try:
            parse(props.get(name))
        except ValueError as exc:
            errors[name] = f"{str(exc)[0].upper()}{str(exc)[1:]}."
    return errors


def body_excerpt(body: bytes, charset: str | None, *, limit: int = EXCERPT_CHARS) -> str:
    """The start of a response body as text. Bytes that are not text in the
    declared charset (binary, compressed, invalid UTF-8) become U+FFFD; a
    charset Python does not know, or whose codec cannot replace (`idna`,
    `punycode`), reads as UTF-8. NUL and the like are the recorder's to
    make storable (jobs.text.storable), as for any handler's output."""
    try:
        text = body.decode(charset or "utf-8", errors="replace")
    except (LookupError, UnicodeError):
        text = body.decode("utf-8", errors="replace")
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more characters]"


class HttpJobHandler(JobHandler):
    label = "HTTP request"
    description = "Sends one HTTP request through the fence; succeeds on the expected status."
    properties_help = {
        "url": "http(s) URL; checked by the fence when saved and when run",
        "method": f"one of {', '.join(METHODS)} (default GET)",
        "headers": "JSON object or 'Name: value' lines",
        "body": "request body (text)",
        "expect_status": "e.g. 200, 204 or 2xx (default: any 2xx)",
        "timeout": "seconds (default and maximum: the job's timeout)",
    }

    def run(self, ctx: JobContext) -> str:
        props = ctx.properties
        url = str(props.get("url") or "").strip()
        method = str(props.get("method") or "GET").strip().upper()
        if not url:
            raise HandlerError("property 'url' is empty")
        if method not in METHODS:
            raise HandlerError(f"property 'method' must be one of {', '.join(METHODS)}, got {method!r}")
        try:
            headers = parse_headers(props.get("headers"))
            codes, classes = parse_expect_status(props.get("expect_status"))
            timeout = parse_timeout(props.get("timeout"))
        except ValueError as exc:
            raise HandlerError(f"invalid properties: {exc}") from None
        if ctx.upstream:
            # A run started after an upstream job: say which run, as headers
            # (docs/handlers.md); the job's own headers are not overridden.
            own = {name.lower() for name, _ in headers}
            headers += [(n, v) for n, v in upstream_headers(ctx.upstream).items() if n.lower() not in own]
        if ctx.shard_total > 1:
            # One piece of a split fire: which one, as headers (docs/handlers.md).
            own = {name.lower() for name, _ in headers}
            headers += [(n, v) for n, v in shard_headers(ctx).items() if n.lower() not in own]
        remaining = ctx.remaining_seconds
        timeout = remaining if timeout is None else min(timeout, remaining)
        if timeout <= 0:
            raise HandlerError("the job's deadline passed before the request started")
        # Expecting a redirect status means the redirect itself is the answer.
        follow = not (classes & {3} or any(300 <= c < 400 for c in codes))

        ctx.log(f"{method} {url}")
        try:
            response = fenced_request(
                method,
                url,
                headers=headers,
                body=with_shard(
                    str(props.get("body") or ""), index=ctx.shard_index, total=ctx.shard_total, style="braces"
                )
                or None,
                timeout=timeout,
                max_redirects=5 if follow else 0,
                cancelled=ctx.cancelled,
            )
        except FenceError as exc:
            raise HandlerError(f"blocked by the fence: {exc.reason}") from None
        except RequestFailed as exc:
            raise HandlerError(str(exc)) from None

        for hop in response.redirects:
            ctx.log(f"redirected to {hop}")
        elapsed_ms = round(response.elapsed * 1000)
        status = f"HTTP {response.status} {response.reason}".rstrip()
        ctx.log(
            f"{status} in {elapsed_ms} ms, {len(response.body)} bytes{' (truncated)' if response.truncated else ''}"
        )
        excerpt = body_excerpt(response.body, response.headers.get_content_charset())
        matched = response.status in codes or response.status // 100 in classes
        if not matched:
            expected = _describe_expected(codes, classes)
            raise HandlerError(
                f"{status} in {elapsed_ms} ms (expected {expected})" + (f": {excerpt}" if excerpt else "")
            )
        return f"{status} in {elapsed_ms} ms" + (f"\n{excerpt}" if excerpt else "")
