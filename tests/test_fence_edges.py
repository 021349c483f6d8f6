"""Edges of the fence's HTTP client (jobs/fence.py) found by mutation testing:
time limits at every stage of an HTTPS exchange, the body cap,
bodies in pieces, every redirect status, which headers survive a redirect,
default ports, IPv6, the system resolver and cancellation.

Every server is on loopback. Servers that misbehave on purpose (stall, trickle,
never answer) are raw sockets driven by a script; TLS uses a self-signed
certificate made here with `cryptography`. Time limits are asserted with wide
margins: a lower bound the deadline guarantees, an upper bound far from it."""

import ipaddress
import json
import socket
import ssl
import threading
import time
from pathlib import Path

import pytest

from jobs import fence
from jobs.fence import FenceError, Policy, RequestFailed, check_url, fenced_request, resolve_target
from tests.fixtures.http import TestServer
from tests.fixtures.tls import write_self_signed

HOST = "127.0.0.2"
OTHER = "127.0.0.3"

# A test that hangs has failed: fail it quickly instead of at the suite's 300 s.
pytestmark = pytest.mark.timeout(30)


@pytest.fixture(autouse=True)
def _allow_loopback_test_hosts(settings):
    settings.JOBS_HTTP_ALLOWED_HOSTS = [HOST, OTHER, "secure.test"]


# --- TLS: a self-signed certificate for secure.test --------------------------------


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls-edges")
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    write_self_signed(cert_file, key_file, names=["secure.test"])
    return cert_file, key_file


@pytest.fixture(scope="module")
def server_tls(tls_files):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*tls_files)
    return context


@pytest.fixture(scope="module")
def client_tls(tls_files):
    return ssl.create_default_context(cafile=str(tls_files[0]))


def secure_resolver(host, port):
    return {"secure.test": [HOST]}[host]


# --- a scripted raw server ---------------------------------------------------------


class ScriptedServer:
    """Accepts connections on a loopback address and hands each one to
    `script(conn, server)` on its own thread. `server.stopped` is an Event a
    script waits on instead of sleeping, so stop() ends every script."""

    def __init__(self, script, *, tls=None, host=HOST, read_request=True, backlog=16):
        self.script, self.tls, self.read_request = script, tls, read_request
        self.stopped = threading.Event()
        self.requests: list[bytes] = []
        self.listener = socket.create_server((host, 0), backlog=backlog)
        self.host, self.port = host, self.listener.getsockname()[1]
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        try:
            conn.settimeout(10)
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
                self.connections.append(conn)
            if self.read_request:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                self.requests.append(data)
            self.script(conn, self)
            # Wait for the client to close first: closing with its data unread
            # would reset the connection under a response still being read.
            while not self.stopped.is_set() and conn.recv(65536):
                pass
        except (OSError, ssl.SSLError):
            pass
        finally:
            conn.close()

    def hold(self, seconds=10):
        self.stopped.wait(seconds)

    def url(self, path="/", host=None, scheme="http"):
        return f"{scheme}://{host or self.host}:{self.port}{path}"

    def stop(self):
        self.stopped.set()
        self.listener.close()
        for conn in self.connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            except OSError:
                pass


@pytest.fixture
def scripted():
    servers = []

    def start(script, **kwargs):
        server = ScriptedServer(script, **kwargs)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def headers(status="200 OK", length=None, extra=()):
    lines = [f"HTTP/1.1 {status}"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    lines += [*extra, "", ""]
    return "\r\n".join(lines).encode()


def timed(call):
    started = time.monotonic()
    try:
        return call(), time.monotonic() - started
    except Exception as exc:
        return exc, time.monotonic() - started


# --- time limits ---------------------------------------------------------------------


def test_a_connect_that_never_completes_times_out():
    # A listener with a full accept queue drops further SYNs: connect() hangs.
    listener = socket.create_server((HOST, 0), backlog=0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex((HOST, port))
            fillers.append(filler)
        time.sleep(0.05)
        error, elapsed = timed(
            lambda: fenced_request(
                "GET", f"https://secure.test:{port}/", timeout=0.5, resolver=secure_resolver
            )
        )
        assert isinstance(error, RequestFailed), error
        assert str(error) == f"timed out talking to secure.test:{port}"
        assert 0.45 <= elapsed < 15  # the server holds until the test ends
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def test_a_tls_handshake_that_never_completes_times_out(scripted, client_tls):
    server = scripted(lambda conn, srv: srv.hold(), read_request=False)  # TCP, then silence
    error, elapsed = timed(
        lambda: fenced_request(
            "GET",
            server.url(host="secure.test", scheme="https"),
            timeout=0.5,
            resolver=secure_resolver,
            ssl_context=client_tls,
        )
    )
    assert isinstance(error, RequestFailed), error
    assert str(error) == f"timed out talking to secure.test:{server.port}"
    assert 0.45 <= elapsed < 15  # the server holds until the test ends


def test_https_headers_that_never_come_time_out(scripted, server_tls, client_tls):
    server = scripted(lambda conn, srv: srv.hold(), tls=server_tls)
    error, elapsed = timed(
        lambda: fenced_request(
            "GET",
            server.url(host="secure.test", scheme="https"),
            timeout=0.5,
            resolver=secure_resolver,
            ssl_context=client_tls,
        )
    )
    assert isinstance(error, RequestFailed), error
    assert str(error) == f"timed out talking to secure.test:{server.port}"
    assert 0.45 <= elapsed < 15  # the server holds until the test ends
    assert server.requests[0].startswith(b"GET / HTTP/1.1\r\n")


def test_an_https_body_that_stalls_times_out_at_the_deadline(scripted, server_tls, client_tls):
    """Headers arrive late (6 s of an 8 s limit), then part of the body and
    silence: the read must stop at the deadline, not a full limit after the
    headers (14 s). The 6 s between them are a loaded machine's room."""

    def script(conn, srv):
        srv.stopped.wait(6)
        conn.sendall(headers(length=100) + b"x" * 10)
        srv.hold()

    server = scripted(script, tls=server_tls)
    error, elapsed = timed(
        lambda: fenced_request(
            "GET",
            server.url(host="secure.test", scheme="https"),
            timeout=8.0,
            resolver=secure_resolver,
            ssl_context=client_tls,
        )
    )
    assert isinstance(error, RequestFailed), error
    assert str(error) == f"timed out talking to secure.test:{server.port}"
    assert 7.95 <= elapsed < 12


def test_a_body_that_trickles_forever_stops_at_the_deadline(scripted):
    """One byte every 50 ms never trips a per-read timeout; the overall
    deadline still ends the request."""

    def script(conn, srv):
        conn.sendall(headers(length=1_000_000))
        while not srv.stopped.wait(0.05):
            conn.sendall(b"x")

    server = scripted(script)
    error, elapsed = timed(lambda: fenced_request("GET", server.url(), timeout=0.6))
    assert isinstance(error, RequestFailed), error
    assert str(error) == f"timed out talking to {HOST}:{server.port}"
    assert 0.55 <= elapsed < 15  # the trickle never ends by itself


def test_a_timeout_of_zero_fails_without_connecting(scripted):
    server = scripted(lambda conn, srv: conn.sendall(headers(length=0)))
    with pytest.raises(RequestFailed, match="^timed out$"):
        fenced_request("GET", server.url(), timeout=0)
    time.sleep(0.05)
    assert server.connections == []


# --- the body -----------------------------------------------------------------------------


def body_server(scripted, body: bytes, pieces=1):
    def script(conn, srv):
        conn.sendall(headers(length=len(body)))
        size = -(-len(body) // pieces) if body else 0
        for start in range(0, len(body), size or 1):
            conn.sendall(body[start : start + size])
            srv.stopped.wait(0.05)
        srv.hold(2)

    return scripted(script)


@pytest.mark.parametrize(
    ("size", "cap", "kept", "truncated"),
    [
        (1000, 1000, 1000, False),  # exactly the cap: complete
        (1001, 1000, 1000, True),
        (999, 1000, 999, False),
        (3, 0, 0, True),  # a cap of 0 keeps nothing, yet notices there was a body
        (0, 0, 0, False),
    ],
)
def test_the_body_cap(scripted, size, cap, kept, truncated):
    body = bytes(i % 251 for i in range(size))
    server = body_server(scripted, body)
    response = fenced_request("GET", server.url(), timeout=5, max_body=cap)
    assert (response.body, response.truncated) == (body[:kept], truncated)
    assert response.body_bytes == response.body


def test_a_cap_reached_across_pieces_is_noticed(scripted):
    # 1000 bytes, a pause, then one more: the byte past the cap arrives on its own.
    def script(conn, srv):
        conn.sendall(headers(length=1001) + b"a" * 1000)
        srv.stopped.wait(0.1)
        conn.sendall(b"b")
        srv.hold(2)

    server = scripted(script)
    response = fenced_request("GET", server.url(), timeout=5, max_body=1000)
    assert (response.body, response.truncated) == (b"a" * 1000, True)


def test_a_body_in_several_pieces_is_joined(scripted):
    body = b"".join(f"piece {i};".encode() for i in range(10))
    server = body_server(scripted, body, pieces=5)
    response = fenced_request("GET", server.url(), timeout=5)
    assert (response.status, response.reason, response.body, response.truncated) == (200, "OK", body, False)


def test_pieces_past_the_cap_are_counted_together(scripted):
    server = body_server(scripted, b"0123456789" * 12, pieces=2)  # 60 + 60 bytes, cap 100
    response = fenced_request("GET", server.url(), timeout=5, max_body=100)
    assert (response.body, response.truncated) == ((b"0123456789" * 10), True)


def test_a_chunked_body_in_pieces(scripted):
    def script(conn, srv):
        conn.sendall(headers(extra=["Transfer-Encoding: chunked"]))
        for piece in (b"alpha-", b"beta-", b"gamma"):
            conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            srv.stopped.wait(0.05)
        conn.sendall(b"0\r\n\r\n")
        srv.hold(2)

    server = scripted(script)
    response = fenced_request("GET", server.url(), timeout=5)
    assert response.body == b"alpha-beta-gamma"


def test_reading_stops_at_the_cap_of_an_endless_body(scripted):
    sent = []

    def script(conn, srv):
        conn.sendall(headers(extra=["Connection: close"]))
        while not srv.stopped.is_set() and sum(sent) < 200_000_000:
            conn.sendall(b"y" * 65536)
            sent.append(65536)

    server = scripted(script)
    response = fenced_request("GET", server.url(), timeout=20, max_body=100_000)
    assert (len(response.body), response.truncated) == (100_000, True)
    assert sum(sent) < 200_000_000, "the client read on to the end"


def test_a_body_cut_short_is_a_request_failure(scripted):
    # The server promises 100 bytes, sends 10 and closes: not a 10-byte body.
    def script(conn, srv):
        conn.sendall(headers(length=100) + b"x" * 10)
        conn.shutdown(socket.SHUT_WR)

    server = scripted(script)
    with pytest.raises(
        RequestFailed, match=r"^bad HTTP response from .*IncompleteRead\(10 bytes read, 90 more"
    ):
        fenced_request("GET", server.url(), timeout=5)


@pytest.mark.parametrize("cap", [100, 1000])
def test_a_body_cut_short_in_pieces_or_at_the_cap_is_a_request_failure(scripted, cap):
    # 200 bytes promised, 100 sent in two pieces, then the server closes: even
    # with a cap of exactly 100 that is a broken response, not a complete one.
    def script(conn, srv):
        conn.sendall(headers(length=200) + b"x" * 50)
        srv.stopped.wait(0.05)
        conn.sendall(b"y" * 50)
        conn.shutdown(socket.SHUT_WR)

    server = scripted(script)
    with pytest.raises(RequestFailed, match=r"IncompleteRead\(100 bytes read, 100 more expected\)$"):
        fenced_request("GET", server.url(), timeout=5, max_body=cap)


def test_a_body_until_close_is_complete(scripted):
    def script(conn, srv):
        conn.sendall(headers(extra=["Connection: close"]) + b"all of it")
        conn.shutdown(socket.SHUT_WR)

    server = scripted(script)
    response = fenced_request("GET", server.url(), timeout=5)
    assert (response.body, response.truncated) == (b"all of it", False)


def test_a_malformed_response_is_a_request_failure(scripted):
    server = scripted(lambda conn, srv: conn.sendall(b"HELLO THERE\r\n\r\n"))
    with pytest.raises(RequestFailed, match=rf"^bad HTTP response from {HOST}:{server.port}: BadStatusLine"):
        fenced_request("GET", server.url(), timeout=5)


# --- redirects -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def web():
    server = TestServer(HOST, name="web")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def other_web():
    server = TestServer(OTHER, name="other")
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _fresh_requests(request):
    for name in ("web", "other_web"):
        if name in request.fixturenames:
            request.getfixturevalue(name).requests.clear()


def redirect(server, code, to):
    return server.url(f"/redirect?code={code}&to={to}")


@pytest.mark.parametrize(
    ("code", "method", "then"),
    [
        (301, "POST", "GET"),
        (302, "POST", "GET"),
        (303, "POST", "GET"),
        (303, "PUT", "GET"),
        (303, "DELETE", "GET"),
        (301, "PUT", "PUT"),
        (302, "PATCH", "PATCH"),
        (307, "POST", "POST"),
        (308, "POST", "POST"),
        (308, "PUT", "PUT"),
    ],
)
def test_each_redirect_status_keeps_or_changes_the_method(web, code, method, then):
    response = fenced_request(
        method,
        redirect(web, code, web.url("/echo")),
        headers={"Content-Type": "text/plain", "X-Other": "kept"},
        body="payload",
        timeout=5,
    )
    echoed = json.loads(response.body)
    assert echoed["method"] == then
    assert response.redirects == [web.url("/echo")]
    assert echoed["headers"]["X-Other"] == "kept"
    if then == method:
        assert echoed["body"] == "payload"
        assert echoed["headers"]["Content-Type"] == "text/plain"
    else:
        assert echoed["body"] == ""
        assert "Content-Type" not in echoed["headers"]
        assert "Content-Length" not in echoed["headers"]


@pytest.mark.parametrize("code", [301, 302, 307, 308])
def test_get_and_head_follow_every_redirect_status(web, code):
    for method in ("GET", "HEAD"):
        response = fenced_request(method, redirect(web, code, web.url("/status/200")), timeout=5)
        assert response.status == 200
        assert web.requests[-1]["method"] == method


def test_head_stays_head_after_a_303(web):
    response = fenced_request("HEAD", redirect(web, 303, web.url("/status/200")), timeout=5)
    assert response.status == 200
    assert [r["method"] for r in web.requests] == ["HEAD", "HEAD"]


@pytest.mark.parametrize("code", [300, 304, 305, 306])
def test_other_3xx_statuses_are_not_followed(web, code):
    response = fenced_request("GET", redirect(web, code, web.url("/status/200")), timeout=5)
    assert response.status == code
    assert response.redirects == []
    assert len(web.requests) == 1


def test_a_redirect_without_location_is_returned(scripted):
    server = scripted(lambda conn, srv: conn.sendall(headers("302 Found", length=0)))
    response = fenced_request("GET", server.url("/start"), timeout=5)
    assert (response.status, response.redirects, response.final_url) == (302, [], server.url("/start"))


def test_a_relative_location_with_spaces_is_resolved_against_the_current_url(web):
    response = fenced_request("GET", redirect(web, 302, "%20/status/201%20"), timeout=5)
    assert response.status == 201
    assert response.final_url == web.url("/status/201")


def test_a_chain_of_redirects_is_followed_up_to_the_limit(web):
    third = web.url("/status/200")
    second = redirect(web, 302, third)
    first = redirect(web, 302, second.replace("&", "%26").replace("?", "%3F"))
    response = fenced_request("GET", first, timeout=5, max_redirects=2)
    assert response.status == 200
    assert response.redirects == [second, third]
    assert response.final_url == third
    with pytest.raises(RequestFailed, match=r"^too many redirects \(more than 1\)$"):
        fenced_request("GET", first, timeout=5, max_redirects=1)


@pytest.mark.parametrize("name", ["Authorization", "Cookie", "Proxy-Authorization", "COOKIE"])
def test_credentials_are_dropped_on_a_redirect_to_another_host(web, other_web, name):
    fenced_request(
        "GET",
        redirect(web, 302, other_web.url("/echo")),
        headers=[(name, "secret"), ("X-Keep", "1")],
        timeout=5,
    )
    assert web.requests[0]["headers"][name] == "secret"
    # Another origin gets none of the job's headers (any may be a credential).
    assert name not in other_web.requests[0]["headers"]
    assert "X-Keep" not in other_web.requests[0]["headers"]


def test_credentials_are_dropped_on_a_redirect_to_another_port(web, scripted):
    server = scripted(lambda conn, srv: conn.sendall(headers(length=2) + b"ok"))
    fenced_request(
        "GET", redirect(web, 307, server.url("/")), headers={"Cookie": "a=1", "X-Keep": "1"}, timeout=5
    )
    assert b"cookie" not in server.requests[0].lower()
    assert b"x-keep" not in server.requests[0].lower()


def test_credentials_stay_on_a_redirect_to_the_same_origin(web):
    credentials = {"Authorization": "Bearer t", "Cookie": "a=1", "Proxy-Authorization": "Basic x"}
    response = fenced_request("GET", redirect(web, 302, "/echo"), headers=credentials, timeout=5)
    echoed = json.loads(response.body)["headers"]
    assert {name: echoed.get(name) for name in credentials} == credentials


def test_credentials_dropped_once_stay_dropped(web, other_web):
    # web -> other -> back to web: the third hop is the first host again, but
    # the credentials were already withheld from the second.
    back = web.url("/echo")
    hop = other_web.url(f"/redirect?to={back}")
    response = fenced_request(
        "GET", redirect(web, 302, hop.replace("?", "%3F")), headers={"Cookie": "a=1"}, timeout=5
    )
    assert "Cookie" not in json.loads(response.body)["headers"]


def test_a_user_agent_is_added_unless_given(web):
    fenced_request("GET", web.url("/"), timeout=5)
    fenced_request("GET", web.url("/"), headers={"user-agent": "mine/1"}, timeout=5)
    fenced_request("GET", web.url("/"), headers=[("X-A", "1")], timeout=5)
    agents = [{k.lower(): v for k, v in r["headers"].items()}["user-agent"] for r in web.requests]
    assert agents == ["Cronboard", "mine/1", "Cronboard"]


def test_a_bytes_body_and_a_text_body_are_sent_alike(web):
    for body in (b"caf\xc3\xa9", "café"):
        response = fenced_request("POST", web.url("/echo"), body=body, timeout=5)
        assert json.loads(response.body)["body"] == "café"


def test_the_method_is_upper_cased(web):
    fenced_request("post", web.url("/echo"), body="x", timeout=5)
    assert web.requests[0]["method"] == "POST"


# --- ports, addresses, resolution ---------------------------------------------------------


class RecordingResolver:
    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def __call__(self, host, port):
        self.calls.append((host, port))
        return self.answers


@pytest.mark.parametrize(
    ("url", "port", "shown"),
    [
        ("http://public.test/a", 80, "http://public.test/a"),
        ("https://public.test/a", 443, "https://public.test/a"),
        ("http://public.test:80/a", 80, "http://public.test/a"),
        ("https://public.test:443/a", 443, "https://public.test/a"),
        ("http://public.test:443/a", 443, "http://public.test:443/a"),
        ("https://public.test:80/a", 80, "https://public.test:80/a"),
        ("http://public.test:8080", 8080, "http://public.test:8080/"),
        ("http://public.test?q=1", 80, "http://public.test/?q=1"),
    ],
)
def test_default_ports(settings, url, port, shown):
    settings.JOBS_HTTP_ALLOWED_HOSTS = []
    resolver = RecordingResolver(["93.184.216.34"])
    target = resolve_target(url, resolver=resolver)
    assert resolver.calls == [("public.test", port)]
    assert (target.parsed.port, target.url) == (port, shown)


def test_an_allowed_ipv6_address_is_reached(settings):
    try:
        server = TestServer("::1", name="six")
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    try:
        settings.JOBS_HTTP_ALLOWED_HOSTS = ["::1"]
        response = fenced_request("GET", f"http://[::1]:{server.port}/six", timeout=5)
        assert response.body == b"hello from six"
        assert response.final_url == f"http://[::1]:{server.port}/six"
        assert server.requests[0]["headers"]["Host"] == f"[::1]:{server.port}"
        # The same address as a listed network, reached through a name.
        settings.JOBS_HTTP_ALLOWED_HOSTS = ["::1/128"]
        response = fenced_request(
            "GET", f"http://six.test:{server.port}/", timeout=5, resolver=lambda h, p: ["::1"]
        )
        assert response.body == b"hello from six"
    finally:
        server.stop()


def test_an_ipv4_network_does_not_allow_an_ipv6_address():
    policy = Policy.build(blocked_cidrs=["::1/128"], allowed_hosts=["0.0.0.0/0"])
    with pytest.raises(FenceError, match=r"::1 is not in JOBS_HTTP_ALLOWED_HOSTS"):
        check_url("http://[::1]/", policy=policy)
    check_url("http://10.1.1.1/", policy=policy)


def test_the_next_address_is_tried_when_one_refuses(web):
    with socket.socket() as closed:
        closed.bind(("127.0.0.5", 0))  # bound, not listening: refused
        port = closed.getsockname()[1]
    response = fenced_request(
        "GET",
        f"http://two.test:{web.port}/",
        timeout=5,
        resolver=lambda h, p: ["127.0.0.6", HOST],
        policy=Policy.build(blocked_cidrs=[], allowed_hosts=["127.0.0.0/8"]),
    )
    assert response.body == b"hello from web"
    with pytest.raises(RequestFailed, match=rf"^request to two.test:{port} failed: .*refused"):
        fenced_request(
            "GET",
            f"http://two.test:{port}/",
            timeout=5,
            resolver=lambda h, p: ["127.0.0.5", "127.0.0.6"],
            policy=Policy.build(blocked_cidrs=[], allowed_hosts=["127.0.0.0/8"]),
        )


def test_the_system_resolver_returns_each_address_once():
    assert fence.system_resolver(HOST, 80) == [HOST]
    assert fence.system_resolver("::1", 443) == ["::1"]
    assert "127.0.0.1" in fence.system_resolver("localhost", 80)


def _hosts_file_loopback_name():
    """A name other than localhost that /etc/hosts maps to loopback."""
    try:
        lines = Path("/etc/hosts").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split("#", 1)[0].split()
        if len(fields) < 2:
            continue
        try:
            address = ipaddress.ip_address(fields[0])
        except ValueError:
            continue
        if address.is_loopback:
            for name in fields[1:]:
                if name != "localhost" and not name.endswith(".localhost"):
                    return name, address
    return None


def test_the_system_resolver_is_the_default(settings):
    settings.JOBS_HTTP_ALLOWED_HOSTS = []
    found = _hosts_file_loopback_name()
    if found is None:
        pytest.skip("/etc/hosts names no loopback address but localhost")
    name, address = found
    with pytest.raises(FenceError) as caught:
        check_url(f"http://{name}/")
    assert caught.value.reason.startswith(f"{name} resolves to {address}, which is in blocked range")


def test_a_resolver_error_is_a_fence_error():
    def broken(host, port):
        raise OSError("resolver down")

    with pytest.raises(FenceError, match=r"^could not resolve down.test: resolver down$"):
        check_url("http://down.test/", resolver=broken)

    def idna(host, port):
        raise UnicodeError("label too long")

    with pytest.raises(FenceError, match=r"^could not resolve long.test: label too long$"):
        check_url("http://long.test/", resolver=idna)


def test_resolved_answers_are_cleaned_up(settings):
    settings.JOBS_HTTP_ALLOWED_HOSTS = []
    for scoped in ("fe80::1%eth0", "fe80::1%eth0%x"):  # the zone is cut at its first %
        resolver = RecordingResolver(["93.184.216.34", "93.184.216.34", "::ffff:93.184.216.35", scoped])
        with pytest.raises(FenceError, match=r"resolves to fe80::1, which is in blocked range fe80::/10"):
            resolve_target("http://public.test/", resolver=resolver)
    resolver = RecordingResolver(["93.184.216.34", "93.184.216.34", "::ffff:93.184.216.35"])
    target = resolve_target("http://public.test/", resolver=resolver)
    assert [str(a) for a in target.addresses] == ["93.184.216.34", "93.184.216.35"]
    with pytest.raises(FenceError, match=r"^empty.test did not resolve to any address$"):
        check_url("http://empty.test/", resolver=RecordingResolver([]))
    with pytest.raises(FenceError, match=r"^bad.test resolved to 'nope', which is not an IP address$"):
        check_url("http://bad.test/", resolver=RecordingResolver(["nope"]))


# --- HTTPS -------------------------------------------------------------------------------------


def test_https_request_and_response(scripted, server_tls, client_tls):
    def script(conn, srv):
        conn.sendall(headers("201 Created", length=6, extra=["X-Sent: yes"]) + b"secure")

    server = scripted(script, tls=server_tls)
    response = fenced_request(
        "POST",
        server.url("/p", host="secure.test", scheme="https"),
        body="hi",
        timeout=5,
        resolver=secure_resolver,
        ssl_context=client_tls,
    )
    assert (response.status, response.reason, response.body) == (201, "Created", b"secure")
    assert response.headers["X-Sent"] == "yes"
    assert response.final_url == f"https://secure.test:{server.port}/p"
    assert server.requests[0].startswith(b"POST /p HTTP/1.1\r\n")
    assert f"Host: secure.test:{server.port}".encode() in server.requests[0]


def test_https_uses_the_system_trust_store_by_default(scripted, server_tls):
    server = scripted(lambda conn, srv: conn.sendall(headers(length=0)), tls=server_tls)
    with pytest.raises(RequestFailed, match=r"^TLS certificate check failed for secure.test: "):
        fenced_request(
            "GET", server.url(host="secure.test", scheme="https"), timeout=5, resolver=secure_resolver
        )


# --- cancellation ------------------------------------------------------------------------------


def test_a_cancel_before_the_request_sends_nothing(web):
    cancelled = threading.Event()
    cancelled.set()
    with pytest.raises(RequestFailed, match="^cancelled$"):
        fenced_request("GET", web.url("/"), timeout=5, cancelled=cancelled)
    assert web.requests == []


@pytest.mark.parametrize("stage", ["headers", "body"])
def test_a_cancel_in_flight_ends_the_request_promptly(scripted, stage):
    """The watcher polls every 0.05 s: a cancel lands well within half a
    second, where a request left alone would wait 10 s for its timeout."""

    def script(conn, srv):
        if stage == "body":
            conn.sendall(headers(length=100) + b"x")
        srv.hold()

    server = scripted(script)
    cancelled = threading.Event()
    set_at = []

    def cancel():
        set_at.append(time.monotonic())
        cancelled.set()

    timer = threading.Timer(0.2, cancel)
    timer.start()
    try:
        error, _ = timed(lambda: fenced_request("GET", server.url(), timeout=10, cancelled=cancelled))
        ended = time.monotonic()
    finally:
        timer.cancel()
    assert isinstance(error, RequestFailed), error
    assert str(error) == "cancelled"
    assert ended - set_at[0] < 0.5


def test_a_cancel_after_the_response_changes_nothing(web):
    cancelled = threading.Event()
    response = fenced_request("GET", web.url("/"), timeout=5, cancelled=cancelled)
    cancelled.set()
    assert response.body == b"hello from web"


def test_connecting_needs_an_address_and_turns_nagle_off(web):
    with pytest.raises(OSError, match="^no address to connect to$"):
        fence._connect_pinned((), web.port, 1)
    sock = fence._connect_pinned((ipaddress.ip_address(HOST),), web.port, 1)
    try:
        # Requests are small and written in pieces: no waiting to coalesce them.
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        assert sock.gettimeout() == 1
    finally:
        sock.close()


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_cancel_while_connecting_ends_the_request_cleanly():
    """Before the socket exists there is nothing to shut down: the watcher
    must wait (not crash), and the request ends as cancelled once the
    connect attempt gives up."""
    listener = socket.create_server((HOST, 0), backlog=0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex((HOST, port))
            fillers.append(filler)
        time.sleep(0.05)
        cancelled = threading.Event()
        timer = threading.Timer(0.1, cancelled.set)
        timer.start()
        with pytest.raises(RequestFailed, match="^cancelled$"):
            fenced_request("GET", f"http://{HOST}:{port}/", timeout=0.6, cancelled=cancelled)
        timer.cancel()
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


# -- IPv4 inside IPv6, with only IPv4 ranges blocked --------------------------------------
#
# The default list blocks the IPv6 forms as ranges too, so there the first
# rule that matches is the IPv6 one. An operator's list may name only IPv4
# ranges: each IPv6 form that leads to a blocked IPv4 address is still
# refused, and the reason says which form and which address.

IPV4_ONLY = fence.Policy.build(blocked_cidrs=["127.0.0.0/8", "0.0.0.0/8", "65.54.227.120/32"])
TEREDO = "2001:0:4136:e378:8000:63bf:80ff:fffe"  # server 65.54.227.120, client 127.0.0.1


@pytest.mark.parametrize(
    ("address", "host", "reason"),
    [
        (
            "::ffff:127.0.0.1",
            None,
            "::ffff:7f00:1 embeds 127.0.0.1 (IPv4-mapped), which is in blocked range 127.0.0.0/8 (loopback)",
        ),
        (
            "::ffff:127.0.0.1",
            "mapped.test",
            "mapped.test resolves to ::ffff:7f00:1, which embeds 127.0.0.1 (IPv4-mapped), which is in blocked range 127.0.0.0/8 (loopback)",
        ),
        (
            "2002:7f00:1::",
            None,
            "2002:7f00:1:: embeds 127.0.0.1 (6to4), which is in blocked range 127.0.0.0/8 (loopback)",
        ),
        (
            "64:ff9b::127.0.0.1",
            None,
            "64:ff9b::7f00:1 embeds 127.0.0.1 (NAT64), which is in blocked range 127.0.0.0/8 (loopback)",
        ),
        (
            TEREDO,
            None,
            f"{TEREDO} embeds 127.0.0.1 (Teredo client), which is in blocked range 127.0.0.0/8 (loopback)",
        ),
        (
            "::ffff:0:7f00:1",
            None,
            "::ffff:0:7f00:1 embeds 127.0.0.1 (IPv4-translated), which is in blocked range 127.0.0.0/8 (loopback)",
        ),
        (
            "::127.0.0.1",
            None,
            "::7f00:1 embeds 127.0.0.1 (IPv4-compatible), which is in blocked range 127.0.0.0/8 (loopback)",
        ),
        (
            "::2",
            None,
            "::2 embeds 0.0.0.2 (IPv4-compatible), which is in blocked range 0.0.0.0/8 (unspecified)",
        ),
        # ::1 and :: are IPv6's own loopback and unspecified address, not 0.0.0.1 and 0.0.0.0.
        ("::1", None, None),
        ("::", None, None),
        ("::ffff:8.8.8.8", None, None),
        (
            "127.0.0.1",
            "loop.test",
            "loop.test resolves to 127.0.0.1, which is in blocked range 127.0.0.0/8 (loopback)",
        ),
        ("127.0.0.1", "127.0.0.1", "127.0.0.1 is in blocked range 127.0.0.0/8 (loopback)"),
    ],
)
def test_ipv4_inside_ipv6_is_found_with_only_ipv4_ranges_blocked(address, host, reason):
    assert IPV4_ONLY.blocked_reason(ipaddress.ip_address(address), host) == reason


def test_a_teredo_server_address_is_found_too():
    policy = fence.Policy.build(blocked_cidrs=["65.54.227.120/32"])
    assert policy.blocked_reason(ipaddress.ip_address(TEREDO)) == (
        f"{TEREDO} embeds 65.54.227.120 (Teredo server), which is in blocked range 65.54.227.120/32 (JOBS_HTTP_BLOCKED_CIDRS)"
    )


# --- parse_url's refusals, to the character (mutation testing found them untested) ---------


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (None, "the URL must be text"),
        (b"http://example.com/", "the URL must be text"),
        ("", "the URL is empty"),
        ("   ", "the URL is empty"),
        ("http://" + "a" * 8180 + ".com/x", "the URL is longer than 8192 characters"),
        ("http://exa mple.com/", "the URL contains a space, a control character or a backslash"),
        ("http://example.com/\x7f", "the URL contains a space, a control character or a backslash"),
        ("http://example.com/a\x1fb", "the URL contains a space, a control character or a backslash"),
        ("http://:80/", "the URL has no host"),
        ("http://./", "the URL has no host"),
        ("http://\u00e9xample\u3002\ufffd.com/", "'éxample。�.com' is not a valid host name"),
        ("ftp://example.com/", "scheme 'ftp' is not allowed (only http and https)"),
        ("example.com/x", "a URL without a scheme is not allowed (only http and https)"),
        ("//example.com/", "a URL without a scheme is not allowed (only http and https)"),
        (
            "http://user@example.com/",
            "credentials in the URL (user@host) are not allowed; send an Authorization header instead",
        ),
        (
            "https://u:p@example.com/",
            "credentials in the URL (user@host) are not allowed; send an Authorization header instead",
        ),
        ("http:///path", "the URL has no host"),
        ("http://[::1/", "not a valid URL: Invalid IPv6 URL"),
        ("http://[fe80::1%25eth0]/", "IPv6 zone identifiers are not allowed"),
        ("http://[::1]x/", "unexpected 'x' after the IPv6 address"),
        ("http://[::1]x:80/", "unexpected 'x:80' after the IPv6 address"),
        ("http://example.com:0/", "'0' is not a valid port"),
        ("http://example.com:65536/", "'65536' is not a valid port"),
        ("http://example.com:-1/", "'-1' is not a valid port"),
        ("http://example.com:abc/", "'abc' is not a valid port"),
        ("http://example.com:\uff18\uff10/", "'８０' is not a valid port"),
        ("http://[::1]:0/", "'0' is not a valid port"),
        ("http://a..b/", "host 'a..b' has an empty label"),
        ("http://08.0.0.1/", "host '08.0.0.1' looks like an IPv4 address but is not a valid one"),
        ("http://1.2.3.4.0/", "host '1.2.3.4.0' looks like an IPv4 address but is not a valid one"),
        # A bracketed host is read up to its first ] (urlsplit checks the brackets pair up).
        ("http://[::1]]/", "unexpected ']' after the IPv6 address"),
        # IPvFuture passes urlsplit's bracket check; it is no IPv6 address.
        ("http://[v1.fe]/", "'v1.fe' is not a valid IPv6 address"),
    ],
)
def test_parse_url_refuses_with_a_message_that_says_why(url, message):
    with pytest.raises(fence.FenceError) as caught:
        fence.parse_url(url)
    assert str(caught.value) == message


def test_parse_url_takes_exactly_8192_characters_and_every_visible_one():
    longest = "http://example.com/" + "a" * (fence.MAX_URL_LENGTH - len("http://example.com/"))
    assert len(longest) == fence.MAX_URL_LENGTH == 8192
    assert fence.parse_url(longest).target == "/" + "a" * (8192 - len("http://example.com/"))
    # 0x21 (!) is the first character allowed, 0x7E (~) the last below DEL.
    assert fence.parse_url("http://example.com/!~").target == "/!~"
    assert fence.parse_url("http://ｅxample.com/").host == "example.com"  # IDNA, to ASCII


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("0x", "0.0.0.0"),
        ("0", "0.0.0.0"),
        ("1.2.3.4", "1.2.3.4"),
        ("255.1.1.1", "255.1.1.1"),
        ("1.2.65535", "1.2.255.255"),
        ("1.16777215", "1.255.255.255"),
        ("4294967295", "255.255.255.255"),
    ],
)
def test_ipv4_forms_up_to_their_limits(host, address):
    assert fence.parse_url(f"http://{host}/").host == address


@pytest.mark.parametrize(
    "host", ["1.2.3.4.5", "256.1.1.1", "1.256.1.1", "1.2.65536", "1.16777216", "4294967296", "1.2.3.256"]
)
def test_ipv4_forms_past_their_limits_are_refused(host):
    with pytest.raises(fence.FenceError) as caught:
        fence.parse_url(f"http://{host}/")
    assert str(caught.value) == f"host {host!r} looks like an IPv4 address but is not a valid one"


@pytest.mark.parametrize(
    ("url", "shown", "port", "ip"),
    [
        ("HTTP://Example.COM./a?b=1", "http://example.com/a?b=1", 80, None),
        ("https://example.com:443/", "https://example.com/", 443, None),
        ("http://example.com:/", "http://example.com/", 80, None),
        ("http://example.com:1/", "http://example.com:1/", 1, None),
        ("http://example.com:65535/", "http://example.com:65535/", 65535, None),
        ("http://[::1]:8080/", "http://[::1]:8080/", 8080, "::1"),
        ("http://[::1]:/", "http://[::1]/", 80, "::1"),
        ("http://[::ffff:127.0.0.1]/", "http://127.0.0.1/", 80, "127.0.0.1"),
        ("http://07/", "http://0.0.0.7/", 80, "0.0.0.7"),
        ("http://00/", "http://0.0.0.0/", 80, "0.0.0.0"),
        ("http://010/", "http://0.0.0.8/", 80, "0.0.0.8"),
        ("http://0x1.0/", "http://1.0.0.0/", 80, "1.0.0.0"),
        ("http://example.com/caf\u00e9?q=\u00e9", "http://example.com/caf%C3%A9?q=%C3%A9", 80, None),
    ],
)
def test_parse_url_reads_schemes_ports_and_addresses(url, shown, port, ip):
    parsed = fence.parse_url(url)
    assert (parsed.url, parsed.port) == (shown, port)
    assert parsed.ip == (ipaddress.ip_address(ip) if ip else None)


def test_redirects_stop_after_five_by_default(web):
    with pytest.raises(RequestFailed) as caught:
        fenced_request("GET", web.url("/loop"), timeout=5)
    assert str(caught.value) == "too many redirects (more than 5)"
    assert len(web.requests) == 6  # the first request and five redirects


def test_the_default_time_limit_is_30_seconds(web, monkeypatch):
    # Waiting 30 s in a test would be slow: the deadline each hop is given says it.
    left = []
    real_exchange = fence._exchange

    def exchange(target, method, headers, body, deadline, *rest):
        left.append(deadline - time.monotonic())
        return real_exchange(target, method, headers, body, deadline, *rest)

    monkeypatch.setattr(fence, "_exchange", exchange)
    assert fenced_request("GET", web.url("/status/200")).status == 200
    assert 25 < left[0] <= 30


def test_a_given_user_agent_is_sent_alone(web):
    for name in ("User-Agent", "USER-AGENT"):
        fenced_request("GET", web.url("/"), headers=[(name, "mine/2")], timeout=5)
    for request in web.requests:
        agents = [value for key, value in request["headers"].items() if key.lower() == "user-agent"]
        assert agents == ["mine/2"]


def test_elapsed_is_the_whole_exchange(web):
    started = time.monotonic()
    response = fenced_request("GET", redirect(web, 302, web.url("/slow?s=0.3")), timeout=5)
    took = time.monotonic() - started
    assert response.body == b"finally"
    assert 0.3 <= response.elapsed <= took


def test_a_303_after_a_put_drops_the_body_headers_and_keeps_the_others(web):
    response = fenced_request(
        "PUT",
        redirect(web, 303, web.url("/echo")),
        headers=[("Content-Type", "application/json"), ("content-length", "2"), ("X-Trace", "t1")],
        body="{}",
        timeout=5,
    )
    echoed = json.loads(response.body)
    assert echoed["method"] == "GET" and echoed["body"] == ""
    lowered = {key.lower(): value for key, value in echoed["headers"].items()}
    assert "content-type" not in lowered and "content-length" not in lowered
    assert lowered["x-trace"] == "t1"


# --- an operator's lists (JOBS_HTTP_BLOCKED_CIDRS, JOBS_HTTP_ALLOWED_HOSTS) ---------------


@pytest.mark.parametrize(
    ("cidr", "address", "reason"),
    [
        (" 10.1.2.3/8 ", "10.9.9.9", "10.9.9.9 is in blocked range 10.0.0.0/8 (private)"),
        ("127.0.0.0/16", "127.0.5.5", "127.0.5.5 is in blocked range 127.0.0.0/16 (loopback)"),
        ("169.254.1.0/24", "169.254.1.9", "169.254.1.9 is in blocked range 169.254.1.0/24 (link-local)"),
        ("fe80::1/64", "fe80::9", "fe80::9 is in blocked range fe80::/64 (link-local)"),
        ("8.8.8.8/24", "8.8.8.1", "8.8.8.1 is in blocked range 8.8.8.0/24 (JOBS_HTTP_BLOCKED_CIDRS)"),
    ],
)
def test_a_blocked_range_may_have_host_bits_and_is_named_by_its_kind(cidr, address, reason):
    policy = fence.Policy.build(blocked_cidrs=[cidr])
    assert policy.blocked_reason(ipaddress.ip_address(address)) == reason


def test_allowed_hosts_are_read_as_an_operator_writes_them():
    policy = fence.Policy.build(
        blocked_cidrs=["10.0.0.0/8"],
        allowed_hosts=[
            "",
            "  ",
            " API.Example.COM. ",
            "*.corp.example",
            ".lab.example",
            "[::5]",
            "10.1.2.3/16",
        ],
    )
    assert policy.name_allowed("api.example.com")  # trimmed, lower case, no trailing dot
    assert policy.name_allowed("a.corp.example") and policy.name_allowed("b.a.corp.example")
    assert not policy.name_allowed("corp.example") and not policy.name_allowed("evilcorp.example")
    assert policy.name_allowed("x.lab.example") and not policy.name_allowed("lab.example")
    assert not policy.name_allowed(".lab.example.evil")
    # A network with host bits is its network; a bracketed IPv6 address is one too.
    assert policy.network_allowed(ipaddress.ip_address("10.1.200.1"))
    assert not policy.network_allowed(ipaddress.ip_address("10.2.0.1"))
    assert policy.network_allowed(ipaddress.ip_address("::5"))
    policy.check_address("anything.test", ipaddress.ip_address("10.1.0.1"))  # the network lifts the block
    with pytest.raises(FenceError) as caught:
        policy.check_address("other.test", ipaddress.ip_address("192.0.2.1"))
    assert str(caught.value) == "other.test (192.0.2.1) is not in JOBS_HTTP_ALLOWED_HOSTS"
