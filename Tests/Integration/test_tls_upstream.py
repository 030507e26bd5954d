"""Upstreams over TLS, with a real nginx (ssl + http2) as the peer and a test CA.

What the forwarding issue asks of TLS upstreams: verification always on, HTTP/2
to upstreams that offer it, and credentials never carried on an https -> http
redirect hop, even to a host listed in ``credentialHosts``. The proxy trusts the
test CA through ``CURL_CA_BUNDLE`` (curl's own variable; docs/forwarding.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

try:
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
except ImportError:  # the stale-connection test needs it; requirements.txt installs it
    h2 = None

from credentials_support import free_port
from proxy import base_config, wait_until
from upstream import Upstream

pytestmark = pytest.mark.skipif(shutil.which("nginx") is None or shutil.which("openssl") is None,
                                reason="needs nginx and openssl (scripts/setup.sh installs them)")

TOKEN = "tls-access-token-7f3a9c"
ID_TOKEN = "tls-id-token-51be02"


def make_ca_and_cert(directory: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1 / localhost signed by it."""
    ca_key, ca_cert = directory / "ca.key", directory / "ca.pem"
    key, csr, cert = directory / "server.key", directory / "server.csr", directory / "server.pem"
    ext = directory / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                   "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
    run = lambda *args: subprocess.run(["openssl", *args], check=True, capture_output=True)  # noqa: E731
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca_cert),
        "-days", "2", "-subj", "/CN=platform-proxy test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key), "-CAcreateserial",
        "-out", str(cert), "-days", "2", "-extfile", str(ext))
    return ca_cert, cert, key


class TLSNginx:
    """nginx on 127.0.0.1 with ssl and http2: echoes the protocol and credential headers it
    received, redirects /hop to an http URL, serves files/ and passes /upload on to a
    recording upstream (which answers with the body's sha256)."""

    def __init__(self, directory: Path, cert: Path, key: Path, redirect_to: str, upload_to: str):
        self.dir = directory
        self.port = free_port()
        (directory / "logs").mkdir(parents=True, exist_ok=True)
        (directory / "tmp").mkdir(exist_ok=True)
        (directory / "files").mkdir(exist_ok=True)
        self.conf = directory / "nginx.conf"
        self.conf.write_text(f"""
worker_processes 1;
{"user root;" if os.geteuid() == 0 else ""}
pid {directory}/nginx.pid;
error_log {directory}/logs/error.log warn;
events {{ worker_connections 256; }}
http {{
    log_format conn '$connection $server_protocol $status "$request"';
    access_log {directory}/logs/access.log conn;
    client_body_temp_path {directory}/tmp/body;
    proxy_temp_path {directory}/tmp/proxy;
    fastcgi_temp_path {directory}/tmp/fastcgi;
    uwsgi_temp_path {directory}/tmp/uwsgi;
    scgi_temp_path {directory}/tmp/scgi;
    server {{
        listen 127.0.0.1:{self.port} ssl http2;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        default_type application/json;
        location /hop {{ return 302 {redirect_to}; }}
        location /files/ {{ alias {directory}/files/; }}
        location /upload {{
            client_max_body_size 64m;
            proxy_request_buffering off;
            proxy_http_version 1.1;
            proxy_pass {upload_to};
        }}
        location / {{
            return 200 '{{"protocol":"$server_protocol","authorization":"$http_authorization","xAuthorization":"$http_x_authorization"}}';
        }}
    }}
}}
""")
        self.proc = subprocess.Popen(["nginx", "-p", str(directory), "-c", str(self.conf), "-g", "daemon off;"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"nginx exited: {self.proc.stderr.read().decode()}")
                time.sleep(0.05)
        raise RuntimeError("nginx (TLS) did not start")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture
def tls_setup(tmp_path, main_upstream):
    ca, cert, key = make_ca_and_cert(tmp_path)
    nginx = TLSNginx(tmp_path / "nginx", cert, key, redirect_to=main_upstream.url("/landing"),
                     upload_to=main_upstream.url("/upload"))
    yield ca, nginx, main_upstream
    nginx.stop()


def tls_config(tmp_path: Path, nginx: TLSNginx, http_upstream: Upstream) -> dict:
    mock = tmp_path / "mock"
    mock.mkdir(exist_ok=True)
    config = base_config(mock)
    config["provider"] = {"grant": "static", "accessToken": TOKEN, "idToken": ID_TOKEN}
    config["routes"] = [{
        "name": "secure", "path": "/secure/", "upstream": f"https://127.0.0.1:{nginx.port}/",
        "credential": "access_token", "timeoutSeconds": 10,
        # The http host is a credential host too: only the scheme rule may strip the hop.
        "redirects": {"follow": True, "max": 3,
                      "credentialHosts": [f"127.0.0.1:{nginx.port}", http_upstream.host_port]},
    }]
    return config


def test_tls_upstream_is_verified_and_spoken_to_over_http2(tls_setup, start_proxy, tmp_path, monkeypatch):
    ca, nginx, main = tls_setup
    monkeypatch.setenv("CURL_CA_BUNDLE", str(ca))
    proxy = start_proxy(tls_config(tmp_path, nginx, main))
    r = proxy.get("/secure/whoami")
    assert r.status == 200, r
    seen = json.loads(r.body)
    # nginx echoes the headers it got; the proxy masks the echoed token (maskEchoedCredentials).
    masked = "Bearer " + "*" * len(TOKEN)
    assert seen == {"protocol": "HTTP/2.0", "authorization": masked, "xAuthorization": masked}


def test_tls_upstream_with_an_untrusted_certificate_is_502_and_gets_no_credentials(tls_setup, start_proxy, tmp_path,
                                                                                  monkeypatch):
    ca, nginx, main = tls_setup
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    proxy = start_proxy(tls_config(tmp_path, nginx, main))
    r = proxy.get("/secure/whoami")
    assert r.status == 502, r
    assert json.loads(r.body)["error"] == "upstream_unreachable"
    # The handshake failed before any request was sent: nginx logged none.
    assert (nginx.dir / "logs" / "access.log").read_text() == ""


def test_https_to_http_redirect_never_carries_credentials_even_to_a_credential_host(tls_setup, start_proxy, tmp_path,
                                                                                     monkeypatch):
    ca, nginx, main = tls_setup
    monkeypatch.setenv("CURL_CA_BUNDLE", str(ca))
    proxy = start_proxy(tls_config(tmp_path, nginx, main))
    r = proxy.get("/secure/hop", headers={"Cookie": "session=app-cookie"})
    assert r.status == 200, r
    (landing,) = main.records
    assert landing.path == "/landing"
    names = {name.lower() for name in landing.header_names()}
    assert not names & {"authorization", "x-authorization", "cookie", "proxy-authorization"}, str(landing)
    assert TOKEN not in str(landing) and "app-cookie" not in str(landing)


def test_bodies_stream_both_ways_over_http2(tls_setup, start_proxy, tmp_path, monkeypatch):
    ca, nginx, main = tls_setup
    monkeypatch.setenv("CURL_CA_BUNDLE", str(ca))
    proxy = start_proxy(tls_config(tmp_path, nginx, main))
    download = os.urandom(6 * 1024 * 1024)
    (nginx.dir / "files" / "blob.bin").write_bytes(download)
    r = proxy.get("/secure/files/blob.bin", timeout=30)
    assert r.status == 200, r
    assert hashlib.sha256(r.body).hexdigest() == hashlib.sha256(download).hexdigest()

    upload = os.urandom(3 * 1024 * 1024 + 17)
    r = proxy.request("POST", "/secure/upload", body=upload, headers={"Content-Type": "application/octet-stream"},
                      timeout=30)
    assert r.status == 200, r
    assert json.loads(r.body)["sha256"] == hashlib.sha256(upload).hexdigest()
    # nginx saw both requests over HTTP/2 (the access log's request line ends in HTTP/2.0).
    log = (nginx.dir / "logs" / "access.log").read_text()
    assert "GET /files/blob.bin HTTP/2.0" in log and "POST /upload HTTP/2.0" in log, log


def test_concurrent_requests_share_one_multiplexed_http2_connection(tls_setup, start_proxy, tmp_path, monkeypatch):
    """Without CURLOPT_PIPEWAIT each request in flight opened its own TLS connection (33 for 64)."""
    import threading
    ca, nginx, main = tls_setup
    monkeypatch.setenv("CURL_CA_BUNDLE", str(ca))
    config = tls_config(tmp_path, nginx, main)
    config["workers"] = 1  # one loop, one curl multi handle, one connection pool
    proxy = start_proxy(config)
    count = 24
    barrier = threading.Barrier(count)
    statuses: list[int] = []

    def one():
        barrier.wait()
        statuses.append(proxy.get("/secure/concurrent", timeout=10).status)

    threads = [threading.Thread(target=one) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert statuses == [200] * count, statuses
    lines = (nginx.dir / "logs" / "access.log").read_text().split("\n")
    served = [line.split()[:3] for line in lines if line.strip()]
    assert len(served) == count and all(protocol == "HTTP/2.0" for _, protocol, _ in served), served
    connections = {conn for conn, _, _ in served}
    assert len(connections) == 1, f"{count} concurrent requests used {len(connections)} upstream connections"


class DroppingH2Upstream:
    """An HTTP/2 server over TLS (hyper-h2) that answers the first request on each connection
    and, on reading the second, drops the connection with a reset and no answer: what a pooled
    connection the upstream closed while idle (nginx's keep-alive timeout) looks like to the
    request libcurl sends on it. Deterministic where a race with nginx's timer is not."""

    def __init__(self, cert: Path, key: Path):
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(str(cert), str(key))
        self.context.set_alpn_protocols(["h2"])
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.answered: list[str] = []
        self.dropped: list[str] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            sock = self.context.wrap_socket(raw, server_side=True)
            conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
            conn.initiate_connection()
            sock.sendall(conn.data_to_send())
            requests = 0
            while data := sock.recv(65536):
                for event in conn.receive_data(data):
                    if not isinstance(event, h2.events.RequestReceived):
                        continue
                    path = dict(event.headers)[b":path"].decode()
                    requests += 1
                    if requests == 2:
                        with self.lock:
                            self.dropped.append(path)
                        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        raw.close()
                        return
                    body = json.dumps({"path": path}).encode()
                    conn.send_headers(event.stream_id, [(":status", "200"), ("content-type", "application/json"),
                                                        ("content-length", str(len(body)))])
                    conn.send_data(event.stream_id, body, end_stream=True)
                    with self.lock:
                        self.answered.append(path)
                sock.sendall(conn.data_to_send())
        except (OSError, ssl.SSLError, h2.exceptions.ProtocolError):
            pass

    def stop(self) -> None:
        self.listener.close()


@pytest.mark.skipif(h2 is None, reason="needs the h2 package (Tests/Integration/requirements.txt)")
def test_a_request_on_a_pooled_h2_connection_the_upstream_dropped_is_sent_again_on_a_new_one(start_proxy, tmp_path,
                                                                                           monkeypatch):
    ca, cert, key = make_ca_and_cert(tmp_path)
    upstream = DroppingH2Upstream(cert, key)
    try:
        monkeypatch.setenv("CURL_CA_BUNDLE", str(ca))
        config = base_config(workers=1)
        config["provider"] = {"grant": "static", "accessToken": TOKEN, "idToken": ID_TOKEN}
        config["routes"] = [{"name": "h2", "path": "/h2/", "upstream": f"https://127.0.0.1:{upstream.port}/",
                             "credential": "access_token", "timeoutSeconds": 10}]
        proxy = start_proxy(config)
        first = proxy.get("/h2/first")
        assert first.status == 200, first
        # Sent on the pooled connection, which the upstream drops on reading it: sent once more,
        # on a new connection, and answered there.
        again = proxy.get("/h2/again")
        assert again.status == 200, again
        assert json.loads(again.body) == {"path": "/again"}
        assert upstream.dropped == ["/again"] and upstream.answered == ["/first", "/again"]
        assert upstream.connections == 2
        # Info lines reach the log within a second (buffered per loop).
        assert wait_until(lambda: proxy.log_events("upstream_resent"), 5)
        (resent,) = proxy.log_events("upstream_resent")
        assert resent["route"] == "h2" and resent["requestID"] == again.header("x-request-id"), resent
        # A POST is not idempotent: the same drop on the second connection is the 502 it was.
        post = proxy.exchange(f"POST /h2/post HTTP/1.1\r\nHost: {proxy.host_header}\r\nConnection: close\r\n\r\n".encode(),
                              timeout=10)
        assert post.data.startswith(b"HTTP/1.1 502 "), post.data[:200]
        assert upstream.dropped == ["/again", "/post"]
        assert wait_until(lambda: proxy.log_events("upstream_failed"), 5)
        assert len(proxy.log_events("upstream_failed")) == 1
        metrics = proxy.get("/_platform/metrics").body.decode()
        assert 'platform_proxy_upstream_errors_total{route="h2",kind="stale_connection"} 1' in metrics
    finally:
        upstream.stop()
