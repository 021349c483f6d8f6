"""The fence: which addresses an HTTP job may reach, and an HTTP client that
connects only where the fence allows.

Blocked by default (JOBS_HTTP_BLOCKED_CIDRS): loopback, link-local and cloud
metadata, unspecified addresses. A non-empty JOBS_HTTP_ALLOWED_HOSTS turns the
fence into an allow list of names (`api.example.com`, `*.corp.example`) and
networks (`10.1.2.3`, `10.0.0.0/8`); a name on the list still may not resolve
into a blocked range, only a listed network lifts the block for its addresses.

A URL is parsed strictly (only http/https, no userinfo, encoded IPv4 forms
decoded the way browsers and inet_aton decode them), resolved once, and every
address is checked, including IPv4 addresses embedded in IPv6 forms. The
client connects to exactly those checked addresses (no second lookup, so DNS
rebinding has nothing to rebind), never through a proxy, and follows redirects
itself, checking every hop the same way.
"""

import http.client
import ipaddress
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import quote, urljoin, urlsplit

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Iterable[str]]

DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_URL_LENGTH = 8192
DEFAULT_MAX_BODY = 1024 * 1024
REDIRECT_STATUSES = {301, 302, 303, 307, 308}
# A redirect to another origin (scheme, host, port) carries none of the
# job's own headers: any of them may be a credential (X-Api-Key,
# X-Auth-Token, …), not just these. Only Cronboard's User-Agent goes along.
DEFAULT_USER_AGENT = ("User-Agent", "Cronboard")

# The default of JOBS_HTTP_BLOCKED_CIDRS (config/settings.py reads it from
# here), each range with the name the fence gives it in a refusal.
DEFAULT_BLOCKED = {
    "127.0.0.0/8": "loopback",
    "::1/128": "loopback",
    "169.254.0.0/16": "link-local / cloud metadata",
    "fe80::/10": "link-local",
    "fd00:ec2::/32": "cloud metadata",
    # Metadata services that sit outside link-local: single addresses, so
    # the shared 100.64.0.0/10 space stays usable for internal services.
    "100.100.100.200/32": "Alibaba cloud metadata",
    "192.0.0.192/32": "Oracle cloud metadata",
    "0.0.0.0/8": "unspecified",
    "::/128": "unspecified",
}
# Prefixes whose last 32 bits are an IPv4 address the packet ends up at.
_NAT64_PREFIXES = [ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48")]
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")

_HOSTNAME_RE = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")
_IPV4_PART_RE = re.compile(r"0x[0-9a-f]*|[0-9]+")


class FenceError(ValueError):
    """The URL may not be requested; `reason` says which rule blocked it."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class RequestFailed(Exception):
    """The request was allowed but did not produce a response: connection
    refused, timeout, TLS failure, too many redirects, a malformed response."""


# --- policy ---------------------------------------------------------------


def _range_label(network: IPNetwork) -> str:
    if str(network) in DEFAULT_BLOCKED:
        return DEFAULT_BLOCKED[str(network)]
    for test, label in [
        ("is_loopback", "loopback"),
        ("is_link_local", "link-local"),
        ("is_private", "private"),
    ]:
        if getattr(network, test):
            return label
    return "JOBS_HTTP_BLOCKED_CIDRS"


@dataclass(frozen=True)
class Policy:
    blocked: tuple[tuple[IPNetwork, str], ...]
    allowed_names: frozenset[str] = frozenset()
    allowed_suffixes: tuple[str, ...] = ()
    allowed_networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def build(cls, *, blocked_cidrs: Iterable[str], allowed_hosts: Iterable[str] = ()) -> "Policy":
        blocked = []
        for cidr in blocked_cidrs:
            network = ipaddress.ip_network(cidr.strip(), strict=False)
            blocked.append((network, _range_label(network)))
        names, suffixes, networks = set(), [], []
        for entry in allowed_hosts:
            entry = entry.strip().lower().rstrip(".")
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            if entry.startswith("*."):
                suffixes.append(entry[1:])
            elif entry.startswith("."):
                suffixes.append(entry)
            else:
                names.add(entry)
        return cls(tuple(blocked), frozenset(names), tuple(suffixes), tuple(networks))

    @classmethod
    def from_settings(cls) -> "Policy":
        return cls.build(
            blocked_cidrs=settings.JOBS_HTTP_BLOCKED_CIDRS,
            allowed_hosts=settings.JOBS_HTTP_ALLOWED_HOSTS,
        )

    @property
    def is_allow_list(self) -> bool:
        return bool(self.allowed_names or self.allowed_suffixes or self.allowed_networks)

    def name_allowed(self, host: str) -> bool:
        return host in self.allowed_names or any(host.endswith(suffix) for suffix in self.allowed_suffixes)

    def network_allowed(self, ip: IPAddress) -> bool:
        return any(ip.version == net.version and ip in net for net in self.allowed_networks)

    def blocked_reason(self, ip: IPAddress, host: str | None = None) -> str | None:
        """Why `ip` (an address `host` resolved to) is blocked, or None."""
        candidates = [(ip, ""), *embedded_ipv4(ip)]
        for address, how in candidates:
            for network, label in self.blocked:
                if address.version == network.version and address in network:
                    rule = f"in blocked range {network} ({label})"
                    if how:
                        rule = f"embeds {address} ({how}), which is {rule}"
                    if host and host != str(ip):
                        return f"{host} resolves to {ip}, which {'is ' if not how else ''}{rule}"
                    return f"{ip} {'is ' if not how else ''}{rule}"
        return None

    def check_address(self, host: str, ip: IPAddress) -> None:
        if self.network_allowed(ip):
            return
        if self.is_allow_list and not self.name_allowed(host):
            shown = host if host == str(ip) else f"{host} ({ip})"
            raise FenceError(f"{shown} is not in JOBS_HTTP_ALLOWED_HOSTS")
        reason = self.blocked_reason(ip, host)
        if reason:
            raise FenceError(reason)


def embedded_ipv4(ip: IPAddress) -> list[tuple[ipaddress.IPv4Address, str]]:
    """IPv4 addresses an IPv6 address leads to (6to4, Teredo, NAT64, the
    IPv4-compatible and -translated forms), so a blocked IPv4 address cannot
    hide inside one."""
    if ip.version != 6:
        return []
    found = []
    if ip.ipv4_mapped:
        found.append((ip.ipv4_mapped, "IPv4-mapped"))
    if ip.sixtofour:
        found.append((ip.sixtofour, "6to4"))
    if ip.teredo:
        server, client = ip.teredo
        found += [(client, "Teredo client"), (server, "Teredo server")]
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if any(ip in prefix for prefix in _NAT64_PREFIXES):
        found.append((low32, "NAT64"))
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:
        found.append((low32, "IPv4-compatible"))
    if ip in _IPV4_TRANSLATED:
        found.append((low32, "IPv4-translated"))
    return found


# --- parsing --------------------------------------------------------------


@dataclass(frozen=True)
class ParsedURL:
    scheme: str
    host: str  # ASCII, lower case, no trailing dot; IPv6 without brackets
    port: int
    target: str  # path and query, as sent on the request line
    ip: IPAddress | None  # set when the host is an address literal

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if self.port == DEFAULT_PORTS[self.scheme] else f":{self.port}"
        return f"{self.scheme}://{host}{port}{self.target}"


def parse_url(url: str) -> ParsedURL:
    """Parse strictly; raise FenceError for anything but a plain http(s) URL."""
    if not isinstance(url, str):
        raise FenceError("the URL must be text")
    url = url.strip()
    if not url:
        raise FenceError("the URL is empty")
    if len(url) > MAX_URL_LENGTH:
        raise FenceError(f"the URL is longer than {MAX_URL_LENGTH} characters")
    if any(ord(c) < 0x21 or ord(c) == 0x7F or c == "\\" for c in url):
        raise FenceError("the URL contains a space, a control character or a backslash")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise FenceError(f"not a valid URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        shown = f"scheme {scheme!r}" if scheme else "a URL without a scheme"
        raise FenceError(f"{shown} is not allowed (only http and https)")
    netloc = parts.netloc
    if "@" in netloc:
        raise FenceError(
            "credentials in the URL (user@host) are not allowed; send an Authorization header instead"
        )
    if not netloc:
        raise FenceError("the URL has no host")

    if netloc.startswith("["):
        # urlsplit has refused a "[" without its "]" ("Invalid IPv6 URL").
        end = netloc.find("]")
        literal, rest = netloc[1:end], netloc[end + 1 :]
        if "%" in literal:
            raise FenceError("IPv6 zone identifiers are not allowed")
        try:
            ip = ipaddress.IPv6Address(literal)
        except ValueError:
            raise FenceError(f"{literal!r} is not a valid IPv6 address") from None
        if rest and not rest.startswith(":"):
            raise FenceError(f"unexpected {rest!r} after the IPv6 address")
        port_text = rest[1:] if rest else ""
        ip = _unmap(ip)
        host = str(ip)
    else:
        host_text, _, port_text = netloc.partition(":")
        host = _ascii_host(host_text)
        ip = _parse_ipv4_forms(host)
        if ip is not None:
            host = str(ip)

    if port_text == "":
        port = DEFAULT_PORTS[scheme]
    elif port_text.isascii() and port_text.isdigit() and 0 < int(port_text) < 65536:
        port = int(port_text)
    else:
        raise FenceError(f"{port_text!r} is not a valid port")

    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    target = re.sub(r"[^\x00-\x7f]+", lambda m: quote(m.group()), target)
    return ParsedURL(scheme, host, port, target, ip)


def _ascii_host(text: str) -> str:
    if not text:
        raise FenceError("the URL has no host")
    if not text.isascii():
        try:
            # IDNA maps look-alikes (fullwidth digits, ideographic dots) to
            # ASCII, so "１２７。０。０。１" becomes 127.0.0.1 before the checks.
            text = text.encode("idna").decode("ascii")
        except UnicodeError:
            raise FenceError(f"{text!r} is not a valid host name") from None
    host = text.lower()
    if host.endswith("."):
        host = host[:-1]  # one trailing dot is the fully qualified form
    if not host:
        raise FenceError("the URL has no host")
    if "" in host.split("."):
        raise FenceError(f"host {host!r} has an empty label")
    if not _HOSTNAME_RE.fullmatch(host):
        raise FenceError(f"host {host!r} contains characters not allowed in a host name")
    return host


def _parse_ipv4_forms(host: str) -> ipaddress.IPv4Address | None:
    """The WHATWG / inet_aton reading of a host that ends in a number:
    decimal, octal (leading 0) or hex (0x) parts, and 1-3 part short forms
    (127.1, 2130706433). A host that ends in a number but is not a valid
    address is refused rather than handed to the resolver."""
    parts = host.split(".")
    if not _IPV4_PART_RE.fullmatch(parts[-1]):
        return None
    invalid = FenceError(f"host {host!r} looks like an IPv4 address but is not a valid one")
    if len(parts) > 4:
        raise invalid
    numbers = []
    for part in parts:
        if not _IPV4_PART_RE.fullmatch(part):
            raise invalid
        try:
            if part.startswith("0x"):
                numbers.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part.startswith("0"):
                numbers.append(int(part, 8))
            else:
                numbers.append(int(part))
        except ValueError:
            raise invalid from None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        raise invalid
    value = last + sum(n << (8 * (3 - i)) for i, n in enumerate(head))
    return ipaddress.IPv4Address(value)


def _unmap(ip: IPAddress) -> IPAddress:
    # ::ffff:a.b.c.d *is* a.b.c.d on a dual-stack socket; check and connect as IPv4.
    return ip.ipv4_mapped if ip.version == 6 and ip.ipv4_mapped else ip


# --- resolution and the check ---------------------------------------------


def system_resolver(host: str, port: int) -> list[str]:
    # One entry per address (SOCK_STREAM alone does that; TCP is implied). The
    # port would only be copied into the socket addresses, which are not used.
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return [info[4][0] for info in infos]


@dataclass(frozen=True)
class Target:
    """A URL that passed the fence, with the addresses it may connect to."""

    parsed: ParsedURL
    addresses: tuple[IPAddress, ...]

    @property
    def url(self) -> str:
        return self.parsed.url


def resolve_target(url: str, *, resolver: Resolver | None = None, policy=None, resolve=True) -> Target:
    """Parse, resolve once and check every address; raise FenceError. Without
    `resolve`, a host name passes on its name alone (no addresses)."""
    policy = policy or Policy.from_settings()
    parsed = parse_url(url)
    host = parsed.host
    if parsed.ip is not None:
        addresses = [parsed.ip]
    else:
        if policy.is_allow_list and not policy.allowed_networks and not policy.name_allowed(host):
            raise FenceError(f"{host} is not in JOBS_HTTP_ALLOWED_HOSTS")
        if host == "localhost" or host.endswith(".localhost"):
            # RFC 6761: these names are loopback whatever a resolver says.
            addresses = [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
        elif not resolve:
            addresses = []
        else:
            addresses = _resolve(host, parsed.port, resolver or system_resolver)
    for ip in addresses:
        policy.check_address(host, ip)
    return Target(parsed, tuple(addresses))


def _resolve(host: str, port: int, resolver: Resolver) -> list[IPAddress]:
    try:
        answers = list(resolver(host, port))
    except (OSError, UnicodeError) as exc:
        raise FenceError(f"could not resolve {host}: {exc}") from None
    addresses: list[IPAddress] = []
    for answer in answers:
        try:
            ip = ipaddress.ip_address(str(answer).partition("%")[0])  # no zone suffix
        except ValueError:
            raise FenceError(f"{host} resolved to {answer!r}, which is not an IP address") from None
        ip = _unmap(ip)
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise FenceError(f"{host} did not resolve to any address")
    return addresses


def check_url(url: str, *, resolver: Resolver | None = None, policy=None, resolve=True) -> None:
    """The save-time check: raise FenceError (with `.reason`) unless the URL is an http(s)
    URL whose every address passes the fence (resolve=False: but a host name's addresses)."""
    resolve_target(url, resolver=resolver, policy=policy, resolve=resolve)


# --- the client -----------------------------------------------------------


@dataclass
class FencedResponse:
    status: int
    reason: str
    headers: http.client.HTTPMessage
    body: bytes
    final_url: str
    elapsed: float = 0.0  # seconds, from the first lookup to the last byte (set by fenced_request)
    redirects: list[str] = field(default_factory=list)
    truncated: bool = False  # the body was longer than max_body

    @property
    def body_bytes(self) -> bytes:
        return self.body


def _connect_pinned(addresses: Iterable[IPAddress], port: int, timeout: float) -> socket.socket:
    error: OSError | None = None
    for ip in addresses:
        family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
        sock = socket.socket(family)  # a TCP socket
        try:
            sock.settimeout(timeout)
            sock.connect((str(ip), port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
    raise error or OSError("no address to connect to")


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to the pre-checked addresses, never to whatever `host`
    resolves to now. `host` still names the Host header (and, for HTTPS, SNI
    and the certificate check)."""

    def __init__(self, target: Target, timeout: float):
        super().__init__(target.parsed.host, target.parsed.port, timeout=timeout)
        self._addresses = target.addresses
        self.raw_sock: socket.socket | None = None  # the TLS socket, for HTTPS

    def connect(self):
        self.sock = self.raw_sock = _connect_pinned(self._addresses, self.port, self.timeout)


class _PinnedHTTPSConnection(_PinnedHTTPConnection):
    default_port = 443

    def __init__(self, target: Target, timeout: float, context: ssl.SSLContext | None = None):
        super().__init__(target, timeout)
        self._context = context or ssl.create_default_context()

    def connect(self):
        super().connect()
        self.sock = self.raw_sock = self._context.wrap_socket(self.sock, server_hostname=self.host)


def fenced_request(
    method: str,
    url: str,
    *,
    headers: Iterable[tuple[str, str]] | dict[str, str] | None = None,
    body: bytes | str | None = None,
    timeout: float = 30.0,
    resolver: Resolver | None = None,
    max_redirects: int = 5,
    max_body: int = DEFAULT_MAX_BODY,
    policy: Policy | None = None,
    cancelled: threading.Event | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> FencedResponse:
    """Send one request through the fence, following up to `max_redirects`
    redirects (each hop checked like the first). `timeout` bounds the whole
    exchange; setting `cancelled` aborts it. Raises FenceError when a hop is
    blocked and RequestFailed when no response arrives."""
    policy = policy or Policy.from_settings()
    method = method.upper()
    header_list = list(headers.items() if isinstance(headers, dict) else headers or [])
    if not any(name.lower() == "user-agent" for name, _ in header_list):
        header_list.append(DEFAULT_USER_AGENT)
    if isinstance(body, str):
        body = body.encode()
    started = time.monotonic()
    deadline = started + timeout
    redirects: list[str] = []
    current = url
    previous_origin = None
    while True:
        try:
            target = resolve_target(current, resolver=resolver, policy=policy)
        except FenceError as exc:
            if not redirects:
                raise
            raise FenceError(f"redirect to {current} blocked: {exc.reason}") from None
        origin = (target.parsed.scheme, target.parsed.host, target.parsed.port)
        if previous_origin is not None and origin != previous_origin:
            # Dropped for good: a later hop back to the first origin does not get them again.
            header_list = [DEFAULT_USER_AGENT]
        previous_origin = origin
        response = _exchange(target, method, header_list, body, deadline, max_body, cancelled, ssl_context)
        location = response.headers.get("Location")
        if response.status not in REDIRECT_STATUSES or not location or max_redirects <= 0:
            response.elapsed = time.monotonic() - started
            response.redirects = redirects
            return response
        if len(redirects) >= max_redirects:
            raise RequestFailed(f"too many redirects (more than {max_redirects})")
        current = urljoin(target.url, location.strip())
        redirects.append(current)
        if (response.status == 303 and method != "HEAD") or (
            response.status in (301, 302) and method == "POST"
        ):
            method, body = "GET", None
            header_list = [
                (n, v) for n, v in header_list if n.lower() not in ("content-type", "content-length")
            ]


def _exchange(target, method, headers, body, deadline, max_body, cancelled, ssl_context) -> FencedResponse:
    remaining = deadline - time.monotonic()
    if cancelled is not None and cancelled.is_set():
        raise RequestFailed("cancelled")
    if remaining <= 0:
        raise RequestFailed("timed out")
    if target.parsed.scheme == "https":
        conn = _PinnedHTTPSConnection(target, remaining, context=ssl_context)
    else:
        conn = _PinnedHTTPConnection(target, remaining)
    done = threading.Event()
    if cancelled is not None:
        # Not a daemon: `done` is set in the finally below, so it ends with the request.
        threading.Thread(target=_abort_when_cancelled, args=(conn, cancelled, done)).start()
    where = f"{target.parsed.host}:{target.parsed.port}"
    try:
        conn.request(method, target.parsed.target, body=body, headers=dict(headers))
        response = conn.getresponse()
        chunks, size = [], 0
        while size <= max_body:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            conn.raw_sock.settimeout(remaining)
            chunk = response.read1(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        # A cancel shuts the socket down, which reads as the end of the body;
        # so does a server that closes early. Neither is a complete response.
        if cancelled is not None and cancelled.is_set():
            raise RequestFailed("cancelled")
        if size <= max_body and response.length:
            raise http.client.IncompleteRead(b"".join(chunks), response.length)
        data = b"".join(chunks)
        return FencedResponse(
            status=response.status,
            reason=response.reason,
            headers=response.headers,
            body=data[:max_body],
            final_url=target.url,
            truncated=size > max_body,
        )
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if cancelled is not None and cancelled.is_set():
            raise RequestFailed("cancelled") from None
        if isinstance(exc, TimeoutError):
            raise RequestFailed(f"timed out talking to {where}") from None
        if isinstance(exc, ssl.SSLCertVerificationError):
            raise RequestFailed(
                f"TLS certificate check failed for {target.parsed.host}: {exc.verify_message}"
            ) from None
        if isinstance(exc, http.client.HTTPException):
            raise RequestFailed(f"bad HTTP response from {where}: {exc!r}") from None
        raise RequestFailed(f"request to {where} failed: {exc}") from None
    finally:
        done.set()
        conn.close()


def _abort_when_cancelled(
    conn: _PinnedHTTPConnection, cancelled: threading.Event, done: threading.Event
) -> None:
    # Polls rather than blocks so the thread ends with the request; a socket
    # that is still connecting is shut down as soon as it exists.
    while not done.wait(0.05):
        if cancelled.is_set() and conn.raw_sock is not None:
            try:
                # The plain socket method: SSLSocket.shutdown() would tear
                # down TLS state under the reading thread's feet.
                socket.socket.shutdown(conn.raw_sock, socket.SHUT_RDWR)
            except OSError:
                pass
            return
