"""Conformance of hcloud-fake with Hetzner's own Python library (`hcloud` on PyPI).

Run by crates/hcloud-fake/tests/python_hcloud.rs with the interpreter of the virtualenv that
scripts/provision-python-hcloud creates, against a fake started in-process on 127.0.0.1:

    HCLOUD_ENDPOINT=http://127.0.0.1:PORT/v1   the fake's API
    HCLOUD_FAKE_CONTROL=http://127.0.0.1:PORT/_fake   its control surface (seeding, faults)
    HCLOUD_FAKE_FIXTURES=.../tests/fixtures    the test certificate

The library is the oracle: a response it cannot parse is a response the real API does not
give. Every check drives the library and asserts the values it parsed, not only that it did
not crash. All checks run even if some fail; each failure is reported with its traceback.
The last line is `RESULT passed=N failed=M assertions=K` for the runner.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import ipaddress
import os
import sys
import time
import traceback
import warnings

import hcloud
import requests
from hcloud import APIException, Client
from hcloud.load_balancer_types import LoadBalancerType
from hcloud.load_balancers.domain import (
    LoadBalancerAlgorithm,
    LoadBalancerHealthCheck,
    LoadBalancerHealthCheckHttp,
    LoadBalancerService,
    LoadBalancerServiceHttp,
    LoadBalancerTarget,
    LoadBalancerTargetIP,
    LoadBalancerTargetLabelSelector,
)
from hcloud.locations import Location
from hcloud.networks.domain import NetworkRoute, NetworkSubnet
from hcloud.server_types import ServerType
from hcloud.images import Image

ENDPOINT = os.environ["HCLOUD_ENDPOINT"]
CONTROL = os.environ["HCLOUD_FAKE_CONTROL"]
FIXTURES = os.environ["HCLOUD_FAKE_FIXTURES"]
TOKEN = "python-conformance-token"

# The test certificate (tests/fixtures/test-only-cert.pem), as `openssl x509 -fingerprint
# -sha256 -dates -ext subjectAltName` reads it.
FIXTURE_FINGERPRINT = (
    "59:6c:9f:41:8a:91:19:bf:75:64:bd:0c:ab:ef:fe:05:d1:b5:f2:36:37:35:c3:b7:13:ef:e6:25:cd:a6:15:c2"
)
FIXTURE_NOT_BEFORE = dt.datetime(2026, 11, 23, 17, 14, 53, tzinfo=dt.timezone.utc)
FIXTURE_NOT_AFTER = dt.datetime(2036, 11, 20, 17, 14, 53, tzinfo=dt.timezone.utc)
FIXTURE_DOMAINS = ["fake.example.com", "www.fake.example.com", "*.apps.fake.example.com"]

ASSERTIONS = 0


class CheckFailed(AssertionError):
    pass


def expect(actual, expected, what: str) -> None:
    global ASSERTIONS
    ASSERTIONS += 1
    if actual != expected:
        raise CheckFailed(f"{what}: expected {expected!r}, got {actual!r}")


def expect_true(cond, what: str) -> None:
    global ASSERTIONS
    ASSERTIONS += 1
    if not cond:
        raise CheckFailed(what)


def expect_api_error(code: str, fn, what: str) -> APIException:
    """`fn()` must raise the API error `code`."""
    global ASSERTIONS
    ASSERTIONS += 1
    try:
        fn()
    except APIException as e:
        if e.code != code:
            raise CheckFailed(f"{what}: expected error {code!r}, got {e.code!r} ({e.message})") from e
        return e
    raise CheckFailed(f"{what}: expected error {code!r}, but the call succeeded")


def ctl(method: str, path: str, body=None) -> requests.Response:
    """A call to the fake's control surface (not Hetzner's API)."""
    r = requests.request(method, CONTROL + path, json=body, timeout=10)
    if r.status_code >= 300:
        raise CheckFailed(f"control {method} {path} -> {r.status_code}: {r.text}")
    return r


def raw(method: str, path: str, **kw) -> requests.Response:
    """A direct API call, to look at what the library hides (status codes, absent keys)."""
    return requests.request(
        method, ENDPOINT + path, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10, **kw
    )


def set_action_delay(ms: int) -> None:
    ctl("PUT", "/config/action_delay", {"ms": ms})


def in_subnet(ip: str, cidr: str) -> bool:
    return ipaddress.ip_address(ip) in ipaddress.ip_network(cidr)


def client() -> Client:
    c = Client(token=TOKEN, api_endpoint=ENDPOINT, poll_interval=0.02, poll_max_retries=1500, timeout=10)
    # The library retries `conflict`, `rate_limit_exceeded`, `bad_gateway`, `timeout`, 502 and
    # 504 up to 5 times with 1-16 s of backoff; the fake answers at once, so retry at once too
    # (the retries still happen and are visible in the fake's request log).
    c._client._retry_interval_func = lambda retries: 0.01  # noqa: SLF001
    return c


C = client()
CTX: dict = {}
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


# ----------------------------------------------------------------------------- catalogue


@check
def server_types_carry_location_availability():
    types = C.server_types.get_all()
    expect_true(len(types) >= 10, f"at least 10 server types, got {len(types)}")
    for t in types:
        expect_true(t.locations, f"{t.name} has locations")
        for loc in t.locations:
            expect_true(isinstance(loc.available, bool), f"{t.name}@{loc.location.name}: available is a bool")
            expect_true(isinstance(loc.recommended, bool), f"{t.name}@{loc.location.name}: recommended is a bool")
    cpx11 = C.server_types.get_by_name("cpx11")
    expect((cpx11.cores, cpx11.memory, cpx11.architecture), (2, 2.0, "x86"), "cpx11 cores/memory/arch")
    expect_true({"fsn1", "ash", "sin"} <= {l.location.name for l in cpx11.locations}, "cpx11 in fsn1, ash, sin")
    cx22 = C.server_types.get_by_name("cx22")
    fsn1 = next(l for l in cx22.locations if l.location.name == "fsn1")
    expect_true(fsn1.deprecation is not None, "cx22 is deprecated in fsn1")
    orderable = time.time() < 1798675200  # 2026-12-31T00:00:00Z, cx22's unavailable_after
    expect((fsn1.available, fsn1.recommended), (orderable, False), "deprecated cx22: available until 2026-12-31, not recommended")
    cx23 = C.server_types.get_by_name("cx23")
    expect(next(l for l in cx23.locations if l.location.name == "nbg1").recommended, True, "cx23 recommended in nbg1")


@check
def locations_and_load_balancer_types():
    locs = {l.name: l for l in C.locations.get_all()}
    expect(locs["fsn1"].network_zone, "eu-central", "fsn1 network zone")
    expect(locs["ash"].network_zone, "us-east", "ash network zone")
    types = {t.name: t for t in C.load_balancer_types.get_all()}
    lb11 = types["lb11"]
    expect((lb11.max_targets, lb11.max_services, lb11.max_assigned_certificates), (25, 5, 10), "lb11 limits")
    expect(lb11.deprecation, None, "lb11 not deprecated")
    legacy = types["lb-legacy"]
    expect_true(legacy.deprecation is not None, "lb-legacy carries a deprecation")
    expect(legacy.deprecation.unavailable_after.year, 2026, "lb-legacy unavailable_after year")


@check
def datacenters_are_gone():
    r = raw("GET", "/datacenters")
    expect(r.status_code, 410, "GET /datacenters status")
    expect(r.json()["error"]["code"], "deprecated_api_endpoint", "GET /datacenters error code")
    expect(raw("GET", "/datacenters/1").status_code, 410, "GET /datacenters/1 status")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        expect_api_error("deprecated_api_endpoint", lambda: C.datacenters.get_all(), "library datacenters.get_all")


# ----------------------------------------------------------------------------- networks and servers


@check
def network_with_subnet():
    net = C.networks.create(
        name="k8s",
        ip_range="10.0.0.0/16",
        subnets=[NetworkSubnet(type="cloud", ip_range="10.0.0.0/24", network_zone="eu-central")],
        labels={"cluster": "conformance"},
    )
    expect((net.ip_range, net.labels), ("10.0.0.0/16", {"cluster": "conformance"}), "network range and labels")
    expect((net.subnets[0].ip_range, net.subnets[0].gateway), ("10.0.0.0/24", "10.0.0.1"), "subnet and gateway")
    CTX["net"] = net


@check
def servers_with_networks_and_labels():
    net = CTX["net"]
    made = {}
    for name, labels in [
        ("cp-1", {"role": "cp"}),
        ("worker-1", {"role": "worker", "env": "prod"}),
        ("worker-2", {"role": "worker", "env": "staging"}),
    ]:
        resp = C.servers.create(
            name=name,
            server_type=ServerType(name="cx23"),
            image=Image(name="ubuntu-24.04"),
            location=Location(name="nbg1"),
            networks=[net],
            labels=labels,
        )
        expect(resp.action.command, "create_server", f"{name}: create action")
        CTX.setdefault("first_action", resp.action.id)
        expect_true(isinstance(resp.root_password, str) and len(resp.root_password) >= 12, f"{name}: root password")
        resp.action.wait_until_finished()
        s = C.servers.get_by_id(resp.server.id)
        expect((s.name, s.status, s.labels), (name, "running", labels), f"{name}: name, status, labels")
        expect((s.location.name, s.server_type.name, s.image.name), ("nbg1", "cx23", "ubuntu-24.04"), f"{name}: placement")
        expect(len(s.private_net), 1, f"{name}: one private network")
        expect(s.private_net[0].network.id, net.id, f"{name}: attached to the network")
        expect_true(in_subnet(s.private_net[0].ip, "10.0.0.0/24"), f"{name}: private IP {s.private_net[0].ip} in the subnet")
        expect_true(s.public_net.ipv4 is not None and s.public_net.ipv4.ip, f"{name}: public IPv4")
        expect_true(s.public_net.ipv6.ip.endswith("::/64"), f"{name}: public IPv6 /64")
        body = raw("GET", f"/servers/{s.id}").json()["server"]
        expect("datacenter" in body, False, f"{name}: no datacenter in the server")
        made[name] = s
    ips = [s.private_net[0].ip for s in made.values()]
    expect(len(set(ips)), 3, "distinct private IPs")
    listed = C.networks.get_by_id(net.id).servers
    expect(sorted(x.id for x in listed), sorted(s.id for s in made.values()), "the network lists its servers")
    CTX["servers"] = made


@check
def primary_ips_of_servers():
    s = CTX["servers"]["cp-1"]
    ips = C.primary_ips.get_all()
    mine = [p for p in ips if p.assignee_id == s.id]
    expect(sorted(p.type for p in mine), ["ipv4", "ipv6"], "cp-1 has an IPv4 and an IPv6 primary IP")
    for p in mine:
        expect(p.assignee_type, "server", f"primary IP {p.ip}: assignee_type")
        expect(p.location.name, "nbg1", f"primary IP {p.ip}: location")
        body = raw("GET", f"/primary_ips/{p.id}").json()["primary_ip"]
        expect("datacenter" in body, False, f"primary IP {p.ip}: no datacenter")
    v4 = next(p for p in mine if p.type == "ipv4")
    expect(v4.ip, s.public_net.ipv4.ip, "the IPv4 primary IP is the server's address")
    free = C.primary_ips.create(type="ipv4", name="spare", location=Location(name="fsn1"), assignee_type="server")
    expect((free.primary_ip.assignee_id, free.primary_ip.assignee_type), (None, "unassigned"), "a new unassigned primary IP")
    C.primary_ips.delete(free.primary_ip)
    expect_api_error("not_found", lambda: C.primary_ips.get_by_id(free.primary_ip.id), "deleted primary IP")


@check
def pagination():
    ctl("POST", "/seed/servers/batch", {"prefix": "bulk-", "count": 57, "labels": {"role": "bulk"}})
    page = C.servers.get_list(page=2, per_page=25)
    p = page.meta.pagination
    expect(len(page.servers), 25, "page 2 size")
    expect((p.page, p.per_page, p.previous_page, p.next_page, p.last_page, p.total_entries), (2, 25, 1, 3, 3, 60), "pagination meta")
    last = C.servers.get_list(page=3, per_page=25)
    expect((len(last.servers), last.meta.pagination.next_page), (10, None), "last page")
    everything = C.servers.get_all()
    ids = [s.id for s in everything]
    expect((len(ids), len(set(ids)), ids == sorted(ids)), (60, 60, True), "get_all: 60 distinct servers in id order")


@check
def label_selectors():
    def names(selector):
        return sorted(s.name for s in C.servers.get_all(label_selector=selector))

    expect(names("role=worker"), ["worker-1", "worker-2"], "role=worker")
    expect(len(names("role!=worker")), 58, "role!=worker")
    expect(names("role in (cp,worker)"), ["cp-1", "worker-1", "worker-2"], "role in (cp,worker)")
    expect(names("role notin (bulk,worker)"), ["cp-1"], "role notin (bulk,worker)")
    expect(names("env"), ["worker-1", "worker-2"], "env exists")
    expect(len(names("!env")), 58, "!env")
    expect(names("role=worker,env=prod"), ["worker-1"], "role=worker,env=prod")
    expect(C.servers.get_by_name("worker-2").labels["env"], "staging", "get_by_name")
    expect_api_error("invalid_input", lambda: C.servers.get_all(label_selector="role in worker"), "bad selector")


@check
def power_off_and_on():
    s = CTX["servers"]["worker-2"]
    set_action_delay(1000)
    try:
        a = s.power_off()
        expect((a.command, a.status), ("stop_server", "running"), "power off starts an action")
        seen = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            a.reload()
            seen.append(a.progress)
            if a.status != "running":
                break
            time.sleep(0.02)
        expect(a.status, "success", "power off finishes")
        expect_true(any(0 < p < 100 for p in seen), f"progress moves while running: {seen[:8]}...")
        expect(seen, sorted(seen), "progress never goes back")
        expect(a.progress, 100, "progress 100 at the end")
    finally:
        set_action_delay(20)
    expect(C.servers.get_by_id(s.id).status, "off", "the server is off")
    a = s.power_on()
    a.wait_until_finished()
    expect(C.servers.get_by_id(s.id).status, "running", "the server is running again")
    a = s.shutdown()
    expect(a.command, "shutdown_server", "shutdown action")
    a.wait_until_finished()
    expect(C.servers.get_by_id(s.id).status, "off", "shut down")
    s.power_on().wait_until_finished()


# ----------------------------------------------------------------------------- routes


@check
def network_routes():
    net = CTX["net"]
    w1, w2 = CTX["servers"]["worker-1"], CTX["servers"]["worker-2"]
    gw1, gw2 = w1.private_net[0].ip, w2.private_net[0].ip
    # Pod CIDRs lie outside the network's range, as in a cluster.
    net.add_route(NetworkRoute(destination="10.244.0.0/24", gateway=gw1)).wait_until_finished()
    net.add_route(NetworkRoute(destination="10.244.1.0/24", gateway=gw2)).wait_until_finished()
    routes = {(r.destination, r.gateway) for r in C.networks.get_by_id(net.id).routes}
    expect(routes, {("10.244.0.0/24", gw1), ("10.244.1.0/24", gw2)}, "two routes")
    net.delete_route(NetworkRoute(destination="10.244.1.0/24", gateway=gw2)).wait_until_finished()
    # A gateway no server holds is allowed (a blackhole, as after a node is gone).
    net.add_route(NetworkRoute(destination="10.244.9.0/24", gateway="10.0.0.250")).wait_until_finished()
    routes = {(r.destination, r.gateway) for r in C.networks.get_by_id(net.id).routes}
    expect(routes, {("10.244.0.0/24", gw1), ("10.244.9.0/24", "10.0.0.250")}, "routes after delete and blackhole")
    expect_api_error("not_found", lambda: net.delete_route(NetworkRoute(destination="10.244.1.0/24", gateway=gw2)), "deleting a missing route")
    bad = [
        ("10.244.0.0/16", gw1, "overlaps a route"),
        ("10.0.0.0/25", gw1, "overlaps a subnet"),
        ("100.64.0.0/24", gw1, "not RFC 1918"),
        ("172.16.0.0/12", gw1, "contains 172.31.1.1"),
        ("10.245.0.0/24", "10.0.0.1", "gateway is the network's first IP"),
        ("10.245.0.0/24", "172.31.1.1", "gateway is the public gateway"),
    ]
    for destination, gateway, why in bad:
        e = expect_api_error("invalid_input", lambda: net.add_route(NetworkRoute(destination=destination, gateway=gateway)), why)
        field = "gateway" if "gateway" in why else "destination"
        expect((e.details or {}).get("fields", [{}])[0].get("name"), field, f"{why}: names the field")
    CTX["blackhole_gateway"] = gw1


@check
def busy_network_answers_conflict():
    net = CTX["net"]
    gw = CTX["servers"]["cp-1"].private_net[0].ip
    set_action_delay(60_000)
    try:
        running = net.add_route(NetworkRoute(destination="10.244.20.0/24", gateway=gw))
        expect(running.status, "running", "a long add_route")
        ctl("DELETE", "/requests")
        expect_api_error("conflict", lambda: net.add_route(NetworkRoute(destination="10.244.21.0/24", gateway=gw)), "add_route while busy")
        expect_api_error("conflict", lambda: net.delete_route(NetworkRoute(destination="10.244.0.0/24", gateway=CTX["blackhole_gateway"])), "delete_route while busy")
        log = ctl("GET", "/requests/log").json()
        attempts = [r for r in log if r["endpoint"] == "POST /v1/networks/{id}/actions/add_route"]
        expect(len(attempts), 6, "the library retried `conflict` 5 times")
    finally:
        ctl("POST", "/actions/finish")
        set_action_delay(20)
    routes = {r.destination for r in C.networks.get_by_id(net.id).routes}
    expect(routes, {"10.244.0.0/24", "10.244.9.0/24", "10.244.20.0/24"}, "only the first change applied")


# ----------------------------------------------------------------------------- certificates


def fixture(name: str) -> str:
    with open(os.path.join(FIXTURES, name), encoding="ascii") as f:
        return f.read()


def pem_fingerprint(pem: str) -> str:
    body = "".join(l for l in pem.strip().splitlines() if not l.startswith("-----"))
    digest = hashlib.sha256(base64.b64decode(body)).hexdigest()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


@check
def uploaded_certificate_is_read_from_the_pem():
    cert = C.certificates.create(
        name="uploaded", certificate=fixture("test-only-cert.pem"), private_key=fixture("test-only-key.pem"), labels={"k": "v"}
    )
    expect(cert.type, "uploaded", "type")
    expect(cert.domain_names, FIXTURE_DOMAINS, "domain names from the subjectAltName")
    expect(cert.fingerprint, FIXTURE_FINGERPRINT, "SHA-256 fingerprint of the DER")
    expect((cert.not_valid_before, cert.not_valid_after), (FIXTURE_NOT_BEFORE, FIXTURE_NOT_AFTER), "validity")
    expect(cert.status, None, "uploaded certificates have no status")
    body = raw("GET", f"/certificates/{cert.id}").text
    expect("PRIVATE KEY" in body, False, "the private key is never served")
    expect_api_error(
        "invalid_input",
        lambda: C.certificates.create(name="garbage", certificate="-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n", private_key=fixture("test-only-key.pem")),
        "a PEM that is not a certificate",
    )
    CTX["cert"] = cert


@check
def managed_certificate_is_issued():
    set_action_delay(500)
    try:
        resp = C.certificates.create_managed(name="managed", domain_names=["a.example.com", "b.example.com"])
    finally:
        set_action_delay(20)
    expect(resp.action.command, "create_certificate", "issuance action")
    expect(resp.action.status, "running", "issuance takes time")
    expect(C.certificates.get_by_id(resp.certificate.id).status.issuance, "pending", "pending while the action runs")
    resp.action.wait_until_finished()
    cert = C.certificates.get_by_id(resp.certificate.id)
    expect((cert.type, cert.status.issuance, cert.domain_names), ("managed", "completed", ["a.example.com", "b.example.com"]), "issued")
    expect_true(cert.certificate.startswith("-----BEGIN CERTIFICATE-----"), "PEM served")
    expect(cert.fingerprint, pem_fingerprint(cert.certificate), "fingerprint is the SHA-256 of the served certificate")
    expect_true(cert.not_valid_after > dt.datetime.now(dt.timezone.utc), "valid now")
    CTX["managed"] = cert


# ----------------------------------------------------------------------------- load balancers


def tcp(listen: int, dest: int) -> LoadBalancerService:
    return LoadBalancerService(
        protocol="tcp",
        listen_port=listen,
        destination_port=dest,
        proxyprotocol=False,
        health_check=LoadBalancerHealthCheck(protocol="tcp", port=dest, interval=15, timeout=10, retries=3),
    )


@check
def load_balancer_created_with_services_targets_and_network():
    net, servers, cert = CTX["net"], CTX["servers"], CTX["cert"]
    https = LoadBalancerService(
        protocol="https",
        listen_port=443,
        destination_port=30443,
        proxyprotocol=False,
        http=LoadBalancerServiceHttp(certificates=[cert], redirect_http=True, sticky_sessions=False, timeout_idle=45),
        health_check=LoadBalancerHealthCheck(
            protocol="https", port=30443, interval=10, timeout=5, retries=2,
            http=LoadBalancerHealthCheckHttp(domain="fake.example.com", path="/healthz", status_codes=["200"], tls=None),
        ),
    )
    http = LoadBalancerService(
        protocol="http", listen_port=8080, destination_port=30080, proxyprotocol=True,
        http=LoadBalancerServiceHttp(sticky_sessions=True, cookie_name="SESSION"),
    )
    resp = C.load_balancers.create(
        name="lb-web",
        load_balancer_type=LoadBalancerType(name="lb11"),
        location=Location(name="nbg1"),
        network=net,
        labels={"hcloud-ccm/service-uid": "uid-1"},
        algorithm=LoadBalancerAlgorithm(type="least_connections"),
        services=[tcp(80, 30080), https, http],
        targets=[
            LoadBalancerTarget(type="server", server=servers["cp-1"], use_private_ip=True),
            LoadBalancerTarget(type="label_selector", label_selector=LoadBalancerTargetLabelSelector(selector="role=worker"), use_private_ip=True),
        ],
    )
    expect(resp.action.command, "create_load_balancer", "create action")
    resp.action.wait_until_finished()
    lb = C.load_balancers.get_by_id(resp.load_balancer.id)
    expect((lb.name, lb.location.name, lb.load_balancer_type.name, lb.algorithm.type), ("lb-web", "nbg1", "lb11", "least_connections"), "basics")
    expect(lb.labels, {"hcloud-ccm/service-uid": "uid-1"}, "labels")
    expect((len(lb.private_net), lb.private_net[0].network.id), (1, net.id), "attached to the network")
    expect_true(in_subnet(lb.private_net[0].ip, "10.0.0.0/24"), "private IP in the subnet")
    expect_true(lb.public_net.enabled and lb.public_net.ipv4.ip and lb.public_net.ipv6.ip, "public interface")
    svc = {s.listen_port: s for s in lb.services}
    expect(sorted(svc), [80, 443, 8080], "three services")
    expect(svc[80].http, None, "tcp service has no http")
    expect((svc[443].http.timeout_idle, svc[443].http.redirect_http, [c.id for c in svc[443].http.certificates]), (45, True, [cert.id]), "https service")
    expect_true(isinstance(svc[8080].http.timeout_idle, int), "http service carries timeout_idle")
    expect((svc[8080].http.sticky_sessions, svc[8080].http.cookie_name, svc[8080].proxyprotocol), (True, "SESSION", True), "http service")
    hc = svc[443].health_check
    expect((hc.protocol, hc.http.tls, hc.http.path, hc.http.status_codes), ("http", True, "/healthz", ["200"]), "an https health check is http with tls")
    expect((svc[80].health_check.protocol, svc[80].health_check.port), ("tcp", 30080), "tcp health check")
    expect(len(lb.targets), 2, "two targets")
    server_target = next(t for t in lb.targets if t.type == "server")
    expect((server_target.server.id, server_target.use_private_ip), (servers["cp-1"].id, True), "server target")
    expect(sorted((h.listen_port, h.status) for h in server_target.health_status), [(80, "healthy"), (443, "healthy"), (8080, "healthy")], "health per service")
    selector = next(t for t in lb.targets if t.type == "label_selector")
    expect(sorted(t.server.id for t in selector.targets), sorted([servers["worker-1"].id, servers["worker-2"].id]), "selected servers")
    expect(raw("GET", f"/servers/{servers['cp-1'].id}").json()["server"]["load_balancers"], [lb.id], "the server lists its load balancer")
    CTX["lb"] = lb


@check
def load_balancer_actions_the_ccm_uses():
    lb, net, servers = CTX["lb"], CTX["net"], CTX["servers"]
    lb = lb.update(name="lb-web-2", labels={"hcloud-ccm/service-uid": "uid-1", "extra": "1"})
    expect((lb.name, lb.labels["extra"]), ("lb-web-2", "1"), "update name and labels")
    lb.change_dns_ptr(ip=lb.public_net.ipv4.ip, dns_ptr="lb.example.com").wait_until_finished()
    lb.change_algorithm(LoadBalancerAlgorithm(type="round_robin")).wait_until_finished()
    lb.change_type(LoadBalancerType(name="lb21")).wait_until_finished()
    lb = C.load_balancers.get_by_id(lb.id)
    expect((lb.public_net.ipv4.dns_ptr, lb.algorithm.type, lb.load_balancer_type.name), ("lb.example.com", "round_robin", "lb21"), "rDNS, algorithm, type")

    lb.add_service(tcp(9000, 30900)).wait_until_finished()
    lb.update_service(LoadBalancerService(listen_port=9000, destination_port=30901, health_check=LoadBalancerHealthCheck(protocol="tcp", port=30901))).wait_until_finished()
    svc = {s.listen_port: s for s in C.load_balancers.get_by_id(lb.id).services}
    expect((svc[9000].destination_port, svc[9000].health_check.port), (30901, 30901), "updated service")
    # Fields not given stay as they are.
    lb.update_service(LoadBalancerService(listen_port=8080, destination_port=30081)).wait_until_finished()
    svc = {s.listen_port: s for s in C.load_balancers.get_by_id(lb.id).services}
    expect((svc[8080].destination_port, svc[8080].http.sticky_sessions, svc[8080].http.cookie_name), (30081, True, "SESSION"), "partial update keeps the rest")
    lb.delete_service(LoadBalancerService(listen_port=9000)).wait_until_finished()
    expect(sorted(s.listen_port for s in C.load_balancers.get_by_id(lb.id).services), [80, 443, 8080], "service deleted")

    lb.add_target(LoadBalancerTarget(type="server", server=servers["worker-1"], use_private_ip=True)).wait_until_finished()
    lb.add_target(LoadBalancerTarget(type="ip", ip=LoadBalancerTargetIP(ip="203.0.113.5"))).wait_until_finished()
    kinds = sorted((t.type, t.server.id if t.server else (t.ip.ip if t.ip else t.label_selector.selector)) for t in C.load_balancers.get_by_id(lb.id).targets)
    expect(len(kinds), 4, f"four targets: {kinds}")
    lb.remove_target(LoadBalancerTarget(type="ip", ip=LoadBalancerTargetIP(ip="203.0.113.5"))).wait_until_finished()
    lb.remove_target(LoadBalancerTarget(type="server", server=servers["worker-1"])).wait_until_finished()
    expect(len(C.load_balancers.get_by_id(lb.id).targets), 2, "targets removed")

    lb.detach_from_network(net).wait_until_finished()
    lb = C.load_balancers.get_by_id(lb.id)
    expect(lb.private_net, [], "detached")
    expect([t.type for t in lb.targets], [], "detaching drops the targets that used the network")
    lb.attach_to_network(net, ip="10.0.0.100").wait_until_finished()
    lb = C.load_balancers.get_by_id(lb.id)
    expect(lb.private_net[0].ip, "10.0.0.100", "attached with the requested IP")
    lb.add_target(LoadBalancerTarget(type="server", server=servers["cp-1"], use_private_ip=True)).wait_until_finished()
    lb.disable_public_interface().wait_until_finished()
    expect(C.load_balancers.get_by_id(lb.id).public_net.enabled, False, "public interface disabled")
    lb.enable_public_interface().wait_until_finished()
    lb.change_protection(delete=True).wait_until_finished()
    expect(C.load_balancers.get_by_id(lb.id).protection["delete"], True, "delete protection")
    commands = [a.command for a in lb.get_actions()]
    for c in ["create_load_balancer", "change_dns_ptr", "change_algorithm", "change_load_balancer_type", "add_service",
              "update_service", "delete_service", "add_target", "remove_target", "detach_from_network",
              "attach_to_network", "disable_public_interface", "enable_public_interface", "change_protection"]:
        expect_true(c in commands, f"action {c} is listed for the load balancer")


@check
def load_balancer_error_codes():
    lb, net, servers = CTX["lb"], CTX["net"], CTX["servers"]
    expect_api_error("not_found", lambda: C.load_balancers.get_by_id(999_999), "unknown load balancer")
    expect_api_error("protected", lambda: lb.delete(), "delete with protection")
    expect_api_error("target_already_defined", lambda: lb.add_target(LoadBalancerTarget(type="server", server=servers["cp-1"], use_private_ip=True)), "same target twice")
    expect_api_error("source_port_already_used", lambda: lb.add_service(tcp(80, 1234)), "listen port in use")
    expect_api_error("load_balancer_already_attached", lambda: lb.attach_to_network(net), "attached twice")
    expect_api_error("invalid_input", lambda: lb.add_service(LoadBalancerService(protocol="https", listen_port=8443, destination_port=80, http=LoadBalancerServiceHttp(certificates=[]))), "https without a certificate")

    plain = C.load_balancers.create(name="lb-plain", load_balancer_type=LoadBalancerType(name="lb11"), location=Location(name="fsn1"))
    plain.action.wait_until_finished()
    plain = C.load_balancers.get_by_id(plain.load_balancer.id)
    expect_api_error("load_balancer_not_attached_to_network", lambda: plain.add_target(LoadBalancerTarget(type="server", server=servers["cp-1"], use_private_ip=True)), "private target without a network")
    expect_api_error("load_balancer_not_attached_to_network", lambda: plain.disable_public_interface(), "disable the public interface without a network")
    plain.attach_to_network(net).wait_until_finished()
    plain.add_target(LoadBalancerTarget(type="server", server=servers["worker-2"], use_private_ip=False)).wait_until_finished()
    expect_api_error("targets_without_use_private_ip", lambda: plain.disable_public_interface(), "public targets block disabling the public interface")

    # The type's certificate limit holds for update_service too (lb11: 10).
    certs = [C.certificates.create(name=f"c{i}", certificate=fixture("test-only-cert.pem"), private_key=fixture("test-only-key.pem")) for i in range(11)]
    plain.add_service(LoadBalancerService(protocol="https", listen_port=443, destination_port=80, http=LoadBalancerServiceHttp(certificates=certs[:10]))).wait_until_finished()
    expect_api_error("resource_limit_exceeded", lambda: plain.update_service(LoadBalancerService(listen_port=443, http=LoadBalancerServiceHttp(certificates=certs))), "11 certificates on lb11 via update_service")
    CTX["plain"] = plain
    CTX["spare_certs"] = certs


@check
def unhealthy_targets():
    lb, servers = CTX["lb"], CTX["servers"]
    cp = servers["cp-1"]
    ctl("PUT", f"/load_balancers/{lb.id}/target_health", {"server": cp.id, "listen_port": 443, "status": "unhealthy"})
    target = next(t for t in C.load_balancers.get_by_id(lb.id).targets if t.type == "server")
    expect(sorted((h.listen_port, h.status) for h in target.health_status), [(80, "healthy"), (443, "unhealthy"), (8080, "healthy")], "one port marked unhealthy")
    servers["worker-2"].power_off().wait_until_finished()
    plain = C.load_balancers.get_by_id(CTX["plain"].id)
    target = next(t for t in plain.targets if t.type == "server")
    expect({h.status for h in target.health_status}, {"unhealthy"}, "a powered-off server is unhealthy")
    servers["worker-2"].power_on().wait_until_finished()


@check
def released_public_ips_are_reused():
    plain = CTX["plain"]
    ipv4 = C.load_balancers.get_by_id(plain.id).public_net.ipv4.ip
    resp = C.load_balancers.delete(plain)
    expect(resp.action.command, "delete_load_balancer", "delete answers an action")
    resp.action.wait_until_finished()
    expect_api_error("not_found", lambda: C.load_balancers.get_by_id(plain.id), "deleted load balancer")
    again = C.load_balancers.create(name="lb-again", load_balancer_type=LoadBalancerType(name="lb11"), location=Location(name="fsn1"))
    again.action.wait_until_finished()
    expect(C.load_balancers.get_by_id(again.load_balancer.id).public_net.ipv4.ip, ipv4, "the released IPv4 is handed out again")
    C.load_balancers.delete(again.load_balancer).action.wait_until_finished()


# ----------------------------------------------------------------------------- deletion


@check
def deletion():
    lb, net, servers = CTX["lb"], CTX["net"], CTX["servers"]
    lb.change_protection(delete=False).wait_until_finished()
    resp = lb.delete()
    expect(resp.action.command, "delete_load_balancer", "delete_load_balancer action")
    resp.action.wait_until_finished()
    expect_api_error("not_found", lambda: C.load_balancers.get_by_id(lb.id), "load balancer gone")

    w1 = servers["worker-1"]
    a = C.servers.delete(w1)
    expect(a.command, "delete_server", "delete_server action")
    a.wait_until_finished()
    expect_api_error("not_found", lambda: C.servers.get_by_id(w1.id), "server gone")
    routes = {(r.destination, r.gateway) for r in C.networks.get_by_id(net.id).routes}
    expect_true(("10.244.0.0/24", CTX["blackhole_gateway"]) in routes, "the route to the deleted server stays (a blackhole)")

    for c in [CTX["cert"], CTX["managed"], *CTX["spare_certs"]]:
        expect(C.certificates.delete(c), True, f"certificate {c.name} deleted")
    expect_api_error("not_found", lambda: C.certificates.get_by_id(CTX["cert"].id), "certificate gone")
    for name in ["cp-1", "worker-2"]:
        C.servers.delete(servers[name]).wait_until_finished()
    expect(C.networks.delete(net), True, "network deleted")
    expect_api_error("not_found", lambda: C.networks.get_by_id(net.id), "network gone")


@check
def old_actions_are_pruned():
    first = C.actions.get_by_id(CTX["first_action"])
    expect((first.command, first.status), ("create_server", "success"), "the first action is kept for now")
    # Listing every action of a project was removed from the API (2025-01-30).
    expect_api_error("invalid_input", lambda: C.actions.get_all(), "GET /actions without ids")
    ctl("PUT", "/config/action_retention", {"ms": 0})
    expect_api_error("not_found", lambda: C.actions.get_by_id(first.id), "a finished action past retention is gone")


def main() -> int:
    print(f"hcloud {hcloud.__version__} (Python {sys.version.split()[0]}) against {ENDPOINT}")
    set_action_delay(20)
    passed = failed = 0
    for fn in CHECKS:
        try:
            fn()
        except Exception:  # noqa: BLE001 - every failure is reported, then the next check runs
            failed += 1
            print(f"FAIL {fn.__name__}\n    " + traceback.format_exc().strip().replace("\n", "\n    "))
        else:
            passed += 1
            print(f"ok   {fn.__name__}")
    print(f"RESULT passed={passed} failed={failed} assertions={ASSERTIONS}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
