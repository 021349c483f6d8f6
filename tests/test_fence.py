"""The fence (jobs/fence.py): hostile URLs are blocked at save time and at run
time, the client connects only to checked addresses, redirects are re-checked,
DNS rebinding and proxy variables get nowhere. Every server here is on
loopback; a "victim" server must never receive a request."""

import io
import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from contextlib import redirect_stdout

import pytest
from django.core.management import CommandError, call_command

from jobs.fence import FenceError, Policy, RequestFailed, check_url, fenced_request
from tests.fixtures.http import TestServer

# --- loopback test servers --------------------------------------------------


@pytest.fixture(scope="module")
def victim():
    """Loopback server on 127.0.0.1 (and ::1 on the same port where possible)."""
    server = TestServer("127.0.0.1", name="victim")
    servers = [server]
    try:
        servers.append(TestServer("::1", server.port, name="victim6"))
    except OSError:
        pass
    yield server
    for s in servers:
        s.stop()
    assert all(not s.requests for s in servers), "the victim received a request"


@pytest.fixture(autouse=True)
def _victim_untouched(request):
    yield
    if "victim" in request.fixturenames:
        victim = request.getfixturevalue("victim")
        assert victim.requests == [], f"the victim received {victim.requests}"


@pytest.fixture(scope="module")
def allowed_server(victim):
    """An allowed target on 127.0.0.2, on the victim's port when that is free
    (so a client that re-resolved a rebound name would reach the victim)."""
    try:
        server = TestServer("127.0.0.2", victim.port, name="allowed")
    except OSError:
        server = TestServer("127.0.0.2", name="allowed")
    yield server
    server.stop()


@pytest.fixture
def allow_test_server(settings):
    settings.JOBS_HTTP_ALLOWED_HOSTS = ["127.0.0.2", "127.0.0.3"]


@pytest.fixture(autouse=True)
def _clear_requests(request):
    for name in ("allowed_server",):
        if name in request.fixturenames:
            request.getfixturevalue(name).requests.clear()


# --- a stub resolver: no real DNS in these tests -------------------------------

PUBLIC = "93.184.216.34"
ZONE = {
    "public.test": [PUBLIC],
    "metadata.test": ["169.254.169.254"],
    "loopback.test": ["127.0.0.1"],
    "mixed.test": [PUBLIC, "127.0.0.1"],
    "v6loop.test": ["::1"],
    "mapped.test": ["::ffff:127.0.0.1"],
    "sixtofour.test": ["2002:a9fe:a9fe::1"],
    "garbage.test": ["not-an-address"],
}


def stub_resolver(host, port):
    if host not in ZONE:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return list(ZONE[host])


# --- hostile URLs: (url, a fragment the reason must contain) ------------------
# {p} is the victim's port, so a fence that let one through would be caught
# by the victim server as well as by the assertion.

LOOP4 = "127.0.0.0/8"
HOSTILE = [
    # IPv4 and its encodings
    ("http://127.0.0.1:{p}/", LOOP4),
    ("http://127.1:{p}/", LOOP4),
    ("http://127.0.1:{p}/", LOOP4),
    ("http://2130706433:{p}/", LOOP4),
    ("http://0x7f000001:{p}/", LOOP4),
    ("http://0x7f.1:{p}/", LOOP4),
    ("http://0x7F.0x0.0x0.0x1:{p}/", LOOP4),
    ("http://0177.0.0.1:{p}/", LOOP4),
    ("http://017700000001:{p}/", LOOP4),
    ("http://0177.1:{p}/", LOOP4),
    ("http://127.0.0.01:{p}/", LOOP4),
    ("http://127.000.000.001:{p}/", LOOP4),
    ("http://127.255.255.254:{p}/", LOOP4),
    ("http://127.0.0.1.:{p}/", LOOP4),
    ("HTTP://127.0.0.1:{p}/", LOOP4),
    ("https://127.0.0.1:{p}/", LOOP4),
    ("http://127.0.0.1:{p}?@public.test/", LOOP4),
    ("http://127.0.0.1:{p}#@public.test/", LOOP4),
    ("http://100.100.100.200/latest/meta-data/", "Alibaba cloud metadata"),
    ("http://192.0.0.192/opc/v1/instance/", "Oracle cloud metadata"),
    ("http://0:{p}/", "0.0.0.0/8"),
    ("http://0.0.0.0:{p}/", "0.0.0.0/8"),
    ("http://0x0:{p}/", "0.0.0.0/8"),
    ("http://\u2460\u2461\u2466.\u24ea.\u24ea.\u2460:{p}/", LOOP4),  # circled digits
    ("http://127\u30020\u30020\u30021:{p}/", LOOP4),  # ideographic full stops
    ("http://\uff11\uff12\uff17.\uff10.\uff10.\uff11:{p}/", LOOP4),  # fullwidth digits
    # IPv6 forms
    ("http://[::1]:{p}/", "::1/128"),
    ("http://[0:0:0:0:0:0:0:1]:{p}/", "::1/128"),
    ("http://[::ffff:127.0.0.1]:{p}/", LOOP4),
    ("http://[::ffff:7f00:1]:{p}/", LOOP4),
    ("http://[0:0:0:0:0:ffff:7f00:0001]:{p}/", LOOP4),
    ("http://[::]:{p}/", "::/128"),
    ("http://[::127.0.0.1]:{p}/", "IPv4-compatible"),
    ("http://[2002:7f00:1::]:{p}/", "6to4"),
    ("http://[64:ff9b::127.0.0.1]:{p}/", "NAT64"),
    ("http://[64:ff9b:1::7f00:1]:{p}/", "NAT64"),
    ("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:{p}/", "Teredo"),
    ("http://[::ffff:0:7f00:1]:{p}/", "IPv4-translated"),
    ("http://[fe80::1]:{p}/", "fe80::/10"),
    ("http://[fe80::1%25lo]:{p}/", "zone"),
    ("http://[::1:{p}/", "IPv6"),
    # cloud metadata
    ("http://169.254.169.254/latest/meta-data/", "169.254.0.0/16"),
    ("http://169.254.43518/", "169.254.0.0/16"),
    ("http://0xa9fea9fe/", "169.254.0.0/16"),
    ("http://2852039166/", "169.254.0.0/16"),
    ("http://0251.0376.0251.0376/", "169.254.0.0/16"),
    ("http://[::ffff:169.254.169.254]/", "169.254.0.0/16"),
    ("http://[fd00:ec2::254]/", "fd00:ec2::/32"),
    ("http://metadata.test/computeMetadata/v1/", "resolves to 169.254.169.254"),
    ("http://sixtofour.test/", "6to4"),
    # names that are, or resolve to, loopback
    ("http://localhost:{p}/", LOOP4),
    ("http://LOCALHOST:{p}/", LOOP4),
    ("http://localhost.:{p}/", LOOP4),
    ("http://foo.localhost:{p}/", LOOP4),
    ("http://a.b.localhost.:{p}/", LOOP4),
    ("http://loopback.test:{p}/", "resolves to 127.0.0.1"),
    ("http://mixed.test:{p}/", "resolves to 127.0.0.1"),
    ("http://v6loop.test:{p}/", "::1/128"),
    ("http://mapped.test:{p}/", "resolves to 127.0.0.1"),
    ("http://garbage.test:{p}/", "not an IP address"),
    # schemes
    ("file:///etc/passwd", "scheme 'file'"),
    ("gopher://127.0.0.1:{p}/_GET", "scheme 'gopher'"),
    ("ftp://127.0.0.1:{p}/", "scheme 'ftp'"),
    ("dict://127.0.0.1:{p}/", "scheme 'dict'"),
    ("ldap://127.0.0.1:{p}/", "scheme 'ldap'"),
    ("javascript:fetch('http://127.0.0.1')", "scheme 'javascript'"),
    ("data:text/plain,hi", "scheme 'data'"),
    ("//127.0.0.1:{p}/", "without a scheme"),
    ("127.0.0.1:{p}", "not allowed"),
    # parser tricks
    ("http://user:pw@127.0.0.1:{p}/", "credentials"),
    ("http://public.test@127.0.0.1:{p}/", "credentials"),
    ("http://127.0.0.1:{p}@public.test/", "credentials"),
    ("http://@127.0.0.1:{p}/", "credentials"),
    ("http://public.test\\@127.0.0.1:{p}/", "backslash"),
    ("http://127.0.0.1:{p}\t/", "control character"),
    ("http://127.0.0.1:{p}/\r\nHost: public.test", "control character"),
    ("http://public.test /@127.0.0.1:{p}/", "space"),
    ("http:///127.0.0.1:{p}/", "no host"),
    ("http:/127.0.0.1:{p}/", "no host"),
    ("http:127.0.0.1:{p}", "no host"),
    ("http://:{p}/", "no host"),
    ("http://", "no host"),
    ("http://%31%32%37.0.0.1:{p}/", "characters not allowed"),
    ("http://127.0.0.1..:{p}/", "empty label"),
    ("http://.127.0.0.1:{p}/", "empty label"),
    ("http://08.0.0.1/", "not a valid one"),
    ("http://1.2.3.4.5/", "not a valid one"),
    ("http://127.0.0.1:0/", "not a valid port"),
    ("http://127.0.0.1:99999/", "not a valid port"),
    ("http://127.0.0.1:{p}:{p}/", "not a valid port"),
    ("http://nowhere.test/", "could not resolve"),
]

ALLOWED = [
    "http://10.0.0.1/",
    "http://192.168.1.1:8080/status?x=1",
    "http://172.16.0.1/",
    "http://[fc00::1]/",
    "http://1.1.1.1/",
    "http://public.test/",
    "https://public.test./path?q=1#frag",
    "http://PUBLIC.test:80/",
]


def _url_id(url) -> str:
    # A test id that mutmut can pass back to pytest as it was collected:
    # printable ASCII only (a backslash or a non-ASCII character is escaped
    # by pytest, and the escaped id is then not found), and no "::" (pytest's
    # node-id separator, in IPv6 addresses).
    text = "".join(char if " " <= char <= "~" and char != "\\" else f"<U+{ord(char):04X}>" for char in url)
    return text.replace("::", ": :")


def _hostile_ids():
    return [_url_id(url) for url, _ in HOSTILE]


def test_table_is_big_enough():
    assert len(HOSTILE) >= 40


@pytest.mark.parametrize(("url", "fragment"), HOSTILE, ids=_hostile_ids())
def test_hostile_url_is_blocked_at_save_time(url, fragment, victim):
    with pytest.raises(FenceError) as info:
        check_url(url.format(p=victim.port), resolver=stub_resolver)
    assert fragment in info.value.reason


@pytest.mark.parametrize(("url", "fragment"), HOSTILE, ids=_hostile_ids())
def test_hostile_url_is_blocked_at_run_time(url, fragment, victim):
    with pytest.raises(FenceError) as info:
        fenced_request(
            "GET", url.format(p=victim.port), headers={}, body=None, timeout=5, resolver=stub_resolver
        )
    assert fragment in info.value.reason


@pytest.mark.parametrize("url", ALLOWED, ids=_url_id)
def test_ordinary_urls_pass(url):
    check_url(url, resolver=stub_resolver)


def test_fence_error_is_a_value_error_with_a_reason():
    with pytest.raises(ValueError) as info:
        check_url("http://127.0.0.1/")
    assert info.value.reason == "127.0.0.1 is in blocked range 127.0.0.0/8 (loopback)"


def test_a_name_that_resolves_to_several_addresses_is_blocked_if_any_is():
    with pytest.raises(FenceError, match="mixed.test resolves to 127.0.0.1"):
        check_url("http://mixed.test/", resolver=stub_resolver)


# --- policy from settings -------------------------------------------------------


def test_blocked_cidrs_setting_replaces_the_list(settings):
    settings.JOBS_HTTP_BLOCKED_CIDRS = ["10.0.0.0/8"]
    with pytest.raises(FenceError, match=r"10\.1\.2\.3 is in blocked range 10\.0\.0\.0/8 \(private\)"):
        check_url("http://10.1.2.3/")
    check_url("http://127.0.0.1/")


def test_allowed_hosts_makes_an_allow_list(settings):
    settings.JOBS_HTTP_ALLOWED_HOSTS = ["public.test", "*.corp.test"]
    calls = []

    def resolver(host, port):
        calls.append(host)
        return {"public.test": [PUBLIC], "api.corp.test": ["10.0.0.5"], "evil.corp.test": ["127.0.0.1"]}[host]

    check_url("http://public.test/", resolver=resolver)
    check_url("https://api.corp.test/", resolver=resolver)
    with pytest.raises(FenceError, match="other.test is not in JOBS_HTTP_ALLOWED_HOSTS"):
        check_url("http://other.test/", resolver=resolver)
    assert "other.test" not in calls, "a name off the list is refused before any lookup"
    with pytest.raises(FenceError, match="not in JOBS_HTTP_ALLOWED_HOSTS"):
        check_url("http://10.0.0.5/", resolver=resolver)
    # A listed name still may not resolve into a blocked range.
    with pytest.raises(FenceError, match="127.0.0.0/8"):
        check_url("http://evil.corp.test/", resolver=resolver)


def test_allowed_network_lifts_the_block_for_its_addresses_only(settings):
    settings.JOBS_HTTP_ALLOWED_HOSTS = ["127.0.0.2"]
    check_url("http://127.0.0.2:8000/")
    check_url("http://2130706434/")  # the same address, encoded
    with pytest.raises(FenceError, match="127.0.0.1 is not in JOBS_HTTP_ALLOWED_HOSTS"):
        check_url("http://127.0.0.1/")


def test_policy_labels_the_default_ranges():
    policy = Policy.build(blocked_cidrs=["169.254.0.0/16", "fd00:ec2::/32", "192.168.0.0/16", "8.8.8.0/24"])
    labels = [label for _, label in policy.blocked]
    assert labels == ["link-local / cloud metadata", "cloud metadata", "private", "JOBS_HTTP_BLOCKED_CIDRS"]


# --- the client against live loopback servers ---------------------------------


def test_allowed_server_is_reached(allowed_server, allow_test_server, victim):
    response = fenced_request(
        "GET", allowed_server.url("/hi?x=1"), headers={"X-Test": "1"}, body=None, timeout=5
    )
    assert (response.status, response.body) == (200, b"hello from allowed")
    assert response.final_url == allowed_server.url("/hi?x=1")
    assert allowed_server.requests[0]["path"] == "/hi?x=1"
    assert allowed_server.requests[0]["headers"]["X-Test"] == "1"


@pytest.mark.parametrize(
    "location",
    [
        "http://127.0.0.1:{p}/",
        "//127.0.0.1:{p}/stolen",
        "http://localhost:{p}/",
        "http://2130706433:{p}/",
        "http://[::ffff:127.0.0.1]:{p}/",
        "http://169.254.169.254/latest/meta-data/",
        "file:///etc/passwd",
    ],
    ids=_url_id,
)
def test_redirect_to_a_blocked_address_is_not_followed(location, allowed_server, allow_test_server, victim):
    target = location.format(p=victim.port)
    url = allowed_server.url(f"/redirect?to={target}")
    with pytest.raises(FenceError, match="redirect to .* blocked: "):
        fenced_request("GET", url, headers={}, body=None, timeout=5)
    assert len(allowed_server.requests) == 1


def test_redirects_within_the_fence_are_followed(allowed_server, allow_test_server):
    final = allowed_server.url("/status/201")
    response = fenced_request(
        "GET", allowed_server.url(f"/redirect?to={final}"), headers={}, body=None, timeout=5
    )
    assert response.status == 201
    assert response.final_url == final
    assert response.redirects == [final]


def test_303_turns_post_into_get(allowed_server, allow_test_server):
    url = allowed_server.url(f"/redirect?code=303&to={allowed_server.url('/echo')}")
    response = fenced_request("POST", url, headers={"Content-Type": "text/plain"}, body="payload", timeout=5)
    assert json.loads(response.body)["method"] == "GET"
    assert json.loads(response.body)["body"] == ""


def test_307_keeps_method_and_body(allowed_server, allow_test_server):
    url = allowed_server.url(f"/redirect?code=307&to={allowed_server.url('/echo')}")
    response = fenced_request("PUT", url, headers={}, body="payload", timeout=5)
    assert json.loads(response.body)["method"] == "PUT"
    assert json.loads(response.body)["body"] == "payload"


def test_credentials_are_not_sent_to_another_host_after_a_redirect(allowed_server, allow_test_server):
    other = TestServer("127.0.0.3", name="other")
    try:
        url = allowed_server.url(f"/redirect?to={other.url('/echo')}")
        fenced_request(
            "GET", url, headers={"Authorization": "Bearer s3cret", "X-Keep": "1"}, body=None, timeout=5
        )
        assert allowed_server.requests[0]["headers"]["Authorization"] == "Bearer s3cret"
        assert "Authorization" not in other.requests[0]["headers"]
        # No job-provided header crosses to another origin.
        assert "X-Keep" not in other.requests[0]["headers"]
    finally:
        other.stop()


def test_redirect_loop_stops(allowed_server, allow_test_server):
    with pytest.raises(RequestFailed, match="too many redirects"):
        fenced_request("GET", allowed_server.url("/loop"), headers={}, body=None, timeout=5, max_redirects=3)
    assert len(allowed_server.requests) == 4


def test_max_redirects_zero_returns_the_redirect(allowed_server, allow_test_server, victim):
    url = allowed_server.url(f"/redirect?to=http://127.0.0.1:{victim.port}/")
    response = fenced_request("GET", url, headers={}, body=None, timeout=5, max_redirects=0)
    assert response.status == 302


def test_dns_rebinding_cannot_reach_loopback(allowed_server, allow_test_server, victim, monkeypatch):
    """First answer: the allowed server. Every later answer, and the system
    resolver: the victim. The client must connect to the first answer only."""
    answers = []

    def rebinding(host, port):
        answers.append(host)
        return ["127.0.0.2"] if len(answers) == 1 else ["127.0.0.1"]

    real_getaddrinfo = socket.getaddrinfo

    def system_rebound(host, *args, **kwargs):
        if host == "rebind.test":
            return real_getaddrinfo("127.0.0.1", *args, **kwargs)
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", system_rebound)
    url = f"http://rebind.test:{allowed_server.port}/"
    response = fenced_request("GET", url, headers={}, body=None, timeout=5, resolver=rebinding)
    assert response.body == b"hello from allowed"
    assert answers == ["rebind.test"], "resolved exactly once"
    assert allowed_server.requests[0]["headers"]["Host"] == f"rebind.test:{allowed_server.port}"

    # Saved while the name looked harmless, run after it rebound: blocked.
    with pytest.raises(FenceError, match=r"rebind\.test .*127\.0\.0\.1"):
        fenced_request("GET", url, headers={}, body=None, timeout=5, resolver=rebinding)


@pytest.mark.parametrize(
    "variable", ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]
)
def test_proxy_variables_are_ignored(variable, allowed_server, allow_test_server, monkeypatch):
    proxy = TestServer("127.0.0.3", name="proxy")
    try:
        monkeypatch.setenv(variable, proxy.url())
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        response = fenced_request("GET", allowed_server.url("/direct"), headers={}, body=None, timeout=5)
        assert response.body == b"hello from allowed"
        assert proxy.requests == []
    finally:
        proxy.stop()


def test_body_is_capped(allowed_server, allow_test_server):
    response = fenced_request(
        "GET", allowed_server.url("/big?n=50000"), headers={}, body=None, timeout=5, max_body=1000
    )
    assert len(response.body) == 1000
    assert response.truncated


def test_timeout_bounds_the_whole_request(allowed_server, allow_test_server):
    started = time.monotonic()
    with pytest.raises(RequestFailed, match="timed out"):
        fenced_request("GET", allowed_server.url("/slow?s=30"), headers={}, body=None, timeout=0.5)
    # Far below the server's 30 s: a loaded machine's stalls are no failure.
    assert time.monotonic() - started < 10


def test_cancel_aborts_a_request_in_flight(allowed_server, allow_test_server):
    cancelled = threading.Event()
    threading.Timer(0.3, cancelled.set).start()
    started = time.monotonic()
    with pytest.raises(RequestFailed, match="cancelled"):
        fenced_request(
            "GET", allowed_server.url("/slow?s=30"), headers={}, body=None, timeout=60, cancelled=cancelled
        )
    assert time.monotonic() - started < 10  # far below the server's 30 s


def test_refused_connection_is_a_request_failure(settings):
    settings.JOBS_HTTP_ALLOWED_HOSTS = ["127.0.0.4"]
    with socket.socket() as s:
        s.bind(("127.0.0.4", 0))
        port = s.getsockname()[1]  # bound, not listening: connect is refused
        with pytest.raises(RequestFailed, match="failed"):
            fenced_request("GET", f"http://127.0.0.4:{port}/", headers={}, body=None, timeout=5)


# --- HTTPS: connect to the checked IP, verify the certificate for the name -----


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed")
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=secure.test",
         "-addext", "subjectAltName=DNS:secure.test", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def tls_server(tls_files):
    cert, key = tls_files
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = TestServer("127.0.0.2", name="secure", tls=context)
    yield server
    server.stop()


def test_https_connects_to_the_checked_address_and_verifies_the_name(
    tls_server, tls_files, allow_test_server
):
    client_context = ssl.create_default_context(cafile=str(tls_files[0]))
    resolver = {"secure.test": ["127.0.0.2"], "wrong.test": ["127.0.0.2"]}.__getitem__

    def resolve(host, port):
        return resolver(host)

    url = tls_server.url("/", host="secure.test")
    response = fenced_request(
        "GET", url, headers={}, body=None, timeout=5, resolver=resolve, ssl_context=client_context
    )
    assert response.body == b"hello from secure"
    with pytest.raises(RequestFailed, match="TLS certificate check failed for wrong.test"):
        fenced_request(
            "GET", tls_server.url("/", host="wrong.test"), headers={}, body=None, timeout=5,
            resolver=resolve, ssl_context=client_context,
        )  # fmt: skip


# --- manage.py fence ------------------------------------------------------------


def test_fence_command_reports_each_url_and_exits_1_if_any_is_blocked(victim):
    out = io.StringIO()
    with pytest.raises(CommandError) as info:
        call_command(
            "fence", "http://10.0.0.1/", f"http://0x7f.1:{victim.port}/", "file:///etc/passwd", stdout=out
        )
    assert info.value.returncode == 1
    assert out.getvalue().splitlines() == [
        "allowed",
        "blocked: 127.0.0.1 is in blocked range 127.0.0.0/8 (loopback)",
        "blocked: scheme 'file' is not allowed (only http and https)",
    ]


def test_fence_command_names_each_url_when_verbose():
    out = io.StringIO()
    call_command("fence", "http://10.0.0.1/", verbosity=2, stdout=out)
    assert out.getvalue().splitlines() == ["http://10.0.0.1/: allowed"]


def test_fence_command_exits_0_when_all_are_allowed():
    out = io.StringIO()
    with redirect_stdout(out):
        call_command("fence", "http://10.0.0.1/", "https://[fc00::1]:8443/x", stdout=out)
    assert out.getvalue().splitlines() == ["allowed", "allowed"]


@pytest.mark.slow
def test_fence_command_as_a_process(victim):
    import sys
    from pathlib import Path

    manage = Path(__file__).resolve().parent.parent / "manage.py"
    result = subprocess.run(
        [sys.executable, str(manage), "fence", "http://2130706433/", "http://localhost./", "http://10.9.8.7/"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("blocked: 127.0.0.1 is in blocked range")
    assert lines[1].startswith("blocked: localhost resolves to 127.0.0.1")
    assert lines[2] == "allowed"
