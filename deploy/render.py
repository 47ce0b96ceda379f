#!/usr/bin/env python3
"""Renders, lints and checks the deploy artefacts with Helm itself, offline.

Helm comes from PyPI's helm-python-sdk (Helm v4 compiled into libhelm_c.so), installed with
the HCL parser by scripts/provision-python-deploy; run this with that virtualenv's python:

    PY=$(scripts/provision-python-deploy | sed -n 's/^DEPLOY_PYTHON=//p')
    $PY deploy/render.py write    # regenerate deploy/hcloud-ccm.yaml and -networks.yaml
    $PY deploy/render.py check [OFFICIAL]  # lint, render every variant, compare the static manifests
    $PY deploy/render.py json [OFFICIAL]   # every variant's objects as JSON (the tests read it)
    $PY deploy/render.py objects FILE      # a YAML file's objects as JSON
    $PY deploy/render.py helm ACTION KUBECONFIG RELEASE [CHART VALUES_JSON]
                                  # install/upgrade/rollback/uninstall/status against a cluster
    $PY deploy/render.py hcl      # parse-check deploy/dev/*.tf (+ terraform fmt -check if present)
    $PY deploy/render.py package DIR IMAGE   # the release's chart: DIR/hcloud-ccm-<version>.tgz
                                             # with image.repository IMAGE (e.g. ghcr.io/o/hcloud-ccm)

The chart (deploy/chart/hcloud-ccm) is the one source of truth: the static manifests are its
renders with the values in STATIC, and crates/test-harness/tests/deploy.rs fails when they
drift. `check` also packages the chart (as a release does) and renders the archive: it must give
the static manifests byte for byte; and the chart's version and appVersion must be the crate
version of Cargo.toml, the one place a version is set (the image tag defaults to v<appVersion>).
The source chart's `image.repository` is `hcloud-ccm` (what `scripts/build-image` tags locally);
a release packages the chart with the published repository instead (`package DIR IMAGE`), and
`check` packages it so with an example repository and renders the archive: its Deployment must
run `IMAGE:v<version>`. OFFICIAL, when given, is the official chart's directory (from the release
source in ../shared/oracle): its values.yaml and full.daemonset-values.yaml, verbatim, are then
variants too. Every check prints one line; the last line is `RESULT passed=N failed=M`, and the exit
status is non-zero when anything failed.
"""

from __future__ import annotations

import difflib
import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from helm_python.chart import Chart, lint, package, values_from_yaml

DEPLOY = Path(__file__).resolve().parent
CHART = DEPLOY / "chart" / "hcloud-ccm"
DEV = DEPLOY / "dev"
RELEASE = "hccm"
NAMESPACE = "kube-system"

# The image repository of the static manifests. No image is published yet, so they name one in
# the reserved `.invalid` domain (RFC 6761), which never resolves: an unedited manifest gets
# ErrImagePull naming it, never a pull of someone's docker.io/library/hcloud-ccm. The release
# workflow replaces it with the published repository.
STATIC_IMAGE = "registry.invalid/hcloud-ccm"
# The values every variant but the refused ones starts from: the source chart's placeholder
# repository fails the render by design.
EXAMPLE_IMAGE = {"image": {"repository": "registry.example.com/hcloud-ccm"}}
# The official static manifests' selector (its chart/Makefile's SELECTOR_OVERRIDES): ours use the
# same, so `kubectl apply` of ours over theirs keeps the Deployment (its selector is immutable).
STATIC_SELECTOR = {
    "selectorLabels": {
        "app.kubernetes.io/name": None,
        "app.kubernetes.io/instance": None,
        "app": "hcloud-cloud-controller-manager",
    }
}

# The static manifests: file name -> chart values.
STATIC = {
    "hcloud-ccm.yaml": {"image": {"repository": STATIC_IMAGE}, **STATIC_SELECTOR},
    "hcloud-ccm-networks.yaml": {"image": {"repository": STATIC_IMAGE}, **STATIC_SELECTOR, "networking": {"enabled": True}},
}


def merged(base: dict, extra: dict) -> dict:
    """`extra` merged into a copy of `base`, mappings key by key."""
    out = json.loads(json.dumps(base))
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out

# Every variant the dry-run test sends to the API server (the static ones included); each is
# merged into EXAMPLE_IMAGE.
VARIANTS_OWN = {
    "default": {},
    "networks": {"networking": {"enabled": True, "clusterCIDR": "10.42.0.0/16"}},
    "daemonset": {"kind": "DaemonSet", "networking": {"enabled": True}},
    # Two replicas: leader election, the default soft anti-affinity, a PodDisruptionBudget.
    "ha": {"replicaCount": 2},
    "ha-hard-anti-affinity": {"replicaCount": 3, "podAntiAffinity": "hard", "podDisruptionBudget": {"minAvailable": 2}},
    "ha-own-affinity": {
        "replicaCount": 2,
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "hcloud-cloud-controller-manager"}},
                    }
                ]
            }
        },
    },
    "extras": {
        "args": {"route-reconciliation-period": None, "concurrent-service-syncs": "2"},
        "env": {"HCLOUD_LOAD_BALANCERS_LOCATION": {"value": "fsn1"}, "HCLOUD_DEBUG": None},
        "additionalTolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "podLabels": {"team": "platform"},
        "podAnnotations": {"example.com/note": "x"},
        "serviceAccount": {"annotations": {"example.com/sa": "y"}},
        "image": {"repository": "registry.example.com/hcloud-ccm", "tag": "dev", "pullSecrets": [{"name": "regcred"}]},
        "extraVolumes": [{"name": "token", "secret": {"secretName": "hcloud"}}],
        "extraVolumeMounts": [{"name": "token", "mountPath": "/var/run/hcloud", "readOnly": True}],
        "livenessProbe": None,
    },
    "podmonitor": {
        "monitoring": {
            "podMonitor": {
                "enabled": True,
                "labels": {"release": "kube-prometheus-stack"},
                "annotations": {"example.com/owner": "platform"},
                "spec": {"podMetricsEndpoints": [{"port": "metrics", "interval": "{{ printf \"%ds\" 30 }}"}]},
            }
        }
    },
    # The alternatives to the PodMonitor and the alerts and dashboard (docs/alerts.md).
    "monitoring": {
        "monitoring": {
            "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
            "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
            "dashboard": {"enabled": True},
        }
    },
    # One replica with leader election: a rolling update is then safe and kept.
    "leader-elect-rolling": {"args": {"leader-elect": "true"}, "strategy": {"type": "RollingUpdate"}},
    # The probe follows the flags: another secure port; the metrics listener when it is off; a
    # loopback bind address reached from the host network.
    "probe-secure-port": {"args": {"secure-port": "10300"}},
    "probe-metrics-listener": {"args": {"secure-port": "0"}, "env": {"HCLOUD_METRICS_ADDRESS": {"value": ":9100"}}},
    "probe-loopback": {"networking": {"enabled": True}, "args": {"bind-address": "127.0.0.1"}},
    # `tpl` where the official chart has it: image.tag (its default), env, networking.network.
    "tpl": {
        "image": {"tag": "v{{ $.Chart.Version }}"},
        "env": {"HCLOUD_LOAD_BALANCERS_LOCATION": {"value": "{{ .Release.Namespace }}-fsn1"}},
        "networking": {
            "enabled": True,
            "network": {"valueFrom": {"secretKeyRef": {"name": "{{ .Release.Name }}-hcloud", "key": "network"}}},
        },
    },
    "robot": {"robot": {"enabled": True}},
    # Robot with Load Balancers in the private network: HCLOUD_NETWORK by hand, routes off.
    "robot-private-network": {
        "robot": {"enabled": True},
        "env": {
            "HCLOUD_NETWORK": {"valueFrom": {"secretKeyRef": {"name": "hcloud", "key": "network"}}},
            "HCLOUD_NETWORK_ROUTES_ENABLED": {"value": "false"},
            "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP": {"value": "true"},
        },
    },
    "no-monitoring-no-rbac": {"monitoring": {"enabled": False}, "rbac": {"create": False}},
}
VARIANTS = {name: merged(EXAMPLE_IMAGE, values) for name, values in VARIANTS_OWN.items()}

# The official chart's values files that are variants when its directory is given: a values file
# written for it renders here unchanged (only the image differs).
OFFICIAL_VALUES_FILES = ["values.yaml", "full.daemonset-values.yaml"]


def official_variants(official: Path | None) -> dict[str, dict]:
    if official is None:
        return {}
    out = {}
    for name in OFFICIAL_VALUES_FILES:
        values = values_from_yaml((official / name).read_text())
        # Their image is the official one; everything else is kept verbatim.
        out[f"official {name}"] = merged(values, EXAMPLE_IMAGE)
    return out

# Values the chart must refuse, with a piece of the message it must give (each merged into
# EXAMPLE_IMAGE but the first).
REFUSED_OWN = {
    "the placeholder image": (
        {"image": {"repository": "hcloud-ccm"}},
        'image.repository: "hcloud-ccm" is this source chart\'s placeholder and no image of hcloud-ccm has been published yet',
    ),
    "an unknown key": ({"monitoring": {"podMonitr": {"enabled": True}}}, "additional properties 'podMonitr' not allowed"),
    "an unknown top-level key": ({"replicas": 2}, "additional properties 'replicas' not allowed"),
    "a rolling update without leader election": (
        {"strategy": {"type": "RollingUpdate"}},
        'strategy: {"type":"RollingUpdate"} is a rolling update while leader election is off',
    ),
    "two replicas without leader election": (
        {"replicaCount": 2, "args": {"leader-elect": "false"}},
        'args.leader-elect: "false" with replicaCount: 2: several CCMs would run at once',
    ),
    "a DaemonSet without leader election": (
        {"kind": "DaemonSet", "args": {"leader-elect": "false"}},
        'args.leader-elect: "false" with kind: DaemonSet',
    ),
    "a loopback bind address without the host network": (
        {"args": {"bind-address": "127.0.0.1"}},
        'args.bind-address: "127.0.0.1" is a loopback address',
    ),
    "bad kind": ({"kind": "StatefulSet"}, "at '/kind': value must be one of 'Deployment', 'DaemonSet'"),
    "robot with networking": (
        {"robot": {"enabled": True}, "networking": {"enabled": True}},
        "robot.enabled and networking.enabled: the CCM refuses routes together with Robot",
    ),
    "zero replicas": ({"replicaCount": 0}, "replicaCount: 0"),
}
REFUSED = {
    case: (values if case == "the placeholder image" else merged(EXAMPLE_IMAGE, values), needle)
    for case, (values, needle) in REFUSED_OWN.items()
}

HEADER = (
    "# Generated by deploy/render.py from deploy/chart/hcloud-ccm (release {release}, namespace\n"
    "# {namespace}, values {values}). Do not edit: change the chart and run\n"
    "# `deploy/render.py write`; crates/test-harness/tests/deploy.rs fails when this file drifts.\n"
    "# No image of hcloud-ccm has been published yet: replace {image} with the repository you\n"
    "# pushed one to (docs/quickstart.md), e.g. `sed 's|{image}:|<registry>/hcloud-ccm:|'`.\n"
)


def crate_version() -> str:
    """The workspace's version (Cargo.toml [workspace.package]), the one place it is set."""
    with (DEPLOY.parent / "Cargo.toml").open("rb") as f:
        return tomllib.load(f)["workspace"]["package"]["version"]


def render(values: dict, chart_path: Path = CHART) -> list[tuple[str, str]]:
    """The chart's manifests for `values`: (template path, YAML) without empty ones or NOTES."""
    chart = Chart.load(chart_path)
    out = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    docs = []
    for path in sorted(out):
        if path.endswith("NOTES.txt"):
            continue
        for doc in split_docs(out[path]):
            docs.append((path, doc))
    return docs


def split_docs(text: str) -> list[str]:
    docs, current = [], []
    for line in text.splitlines():
        if line.strip() == "---":
            docs.append("\n".join(current))
            current = []
        else:
            current.append(line)
    docs.append("\n".join(current))
    # Drop documents with nothing but comments and blank lines.
    meaningful = [d for d in docs if any(l.strip() and not l.lstrip().startswith("#") for l in d.splitlines())]
    return [d.strip("\n") + "\n" for d in meaningful]


def static_text(values: dict, chart_path: Path = CHART) -> str:
    parts = [
        HEADER.format(release=RELEASE, namespace=NAMESPACE, values=json.dumps(values, sort_keys=True), image=STATIC_IMAGE)
    ]
    for path, doc in render(values, chart_path):
        parts.append(f"---\n# Source: {path.removeprefix('hcloud-ccm/')}\n{doc}")
    return "".join(parts)


class Report:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        if ok:
            self.passed += 1
            print(f"ok   {name}")
        else:
            self.failed += 1
            print(f"FAIL {name}: {detail}")

    def finish(self) -> int:
        print(f"RESULT passed={self.passed} failed={self.failed}")
        return 0 if self.failed == 0 and self.passed > 0 else 1


def cmd_write() -> int:
    for name, values in STATIC.items():
        (DEPLOY / name).write_text(static_text(values))
        print(f"wrote deploy/{name}")
    return 0


def cmd_check(official: Path | None = None) -> int:
    report = Report()
    for variant, values in {**VARIANTS, **official_variants(official)}.items():
        result = lint(str(CHART), values, strict=True, namespace=NAMESPACE)
        problems = [m for m in result.get("messages", []) if m.get("severity", 0) >= 2] + [
            {"error": e} for e in result.get("errors", [])
        ]
        report.check(f"lint --strict ({variant})", not problems and result.get("total_charts_linted") == 1, str(problems))
        try:
            docs = render(values)
            report.check(f"render ({variant}): {len(docs)} objects", len(docs) >= 2, "fewer than 2 objects")
        except Exception as e:  # noqa: BLE001 - report every failure, keep checking
            report.check(f"render ({variant})", False, str(e))
    for case, (values, needle) in REFUSED.items():
        try:
            render(values)
            report.check(f"refuses {case}", False, "rendered without error")
        except Exception as e:  # noqa: BLE001
            report.check(f"refuses {case}", needle in str(e), f"message {str(e)!r} lacks {needle!r}")
    for name, values in STATIC.items():
        want = static_text(values)
        path = DEPLOY / name
        have = path.read_text() if path.exists() else ""
        diff = "".join(
            difflib.unified_diff(have.splitlines(True), want.splitlines(True), f"deploy/{name}", "render", n=1)
        )
        report.check(
            f"deploy/{name} equals the chart's render",
            have == want,
            f"drifted; run `deploy/render.py write`:\n{diff[:4000]}",
        )
    check_version_and_package(report)
    return report.finish()


def check_version_and_package(report: Report) -> None:
    version = crate_version()
    meta = Chart.load(CHART).metadata
    for key in ("version", "appVersion"):
        report.check(
            f"Chart.yaml {key} is the crate version {version}",
            meta.get(key) == version,
            f"Chart.yaml has {key}: {meta.get(key)!r}; set it to Cargo.toml's [workspace.package] version {version!r}",
        )
    with tempfile.TemporaryDirectory() as tmp:
        try:
            archive = Path(package(str(CHART), destination=tmp))
        except Exception as e:  # noqa: BLE001
            report.check("helm package", False, str(e))
            return
        report.check(f"helm package: {archive.name}", archive.name == f"hcloud-ccm-{version}.tgz", f"got {archive.name}")
        for name, values in STATIC.items():
            have = static_text(values, archive)
            want = (DEPLOY / name).read_text()
            report.check(
                f"the packaged chart renders deploy/{name} byte for byte",
                have == want,
                "".join(difflib.unified_diff(want.splitlines(True), have.splitlines(True), name, archive.name, n=1))[:4000],
            )
        release = Path(tmp) / "release"
        try:
            archive = package_for_release(str(release), EXAMPLE_RELEASE_IMAGE)
        except Exception as e:  # noqa: BLE001
            report.check("helm package with the release's image", False, str(e))
            return
        check_release_image(report, archive, EXAMPLE_RELEASE_IMAGE)


# The repository a release check packages the chart with (the project's GitHub owner).
EXAMPLE_RELEASE_IMAGE = "ghcr.io/hcloud-ccm/hcloud-ccm"
# The line of values.yaml a release rewrites.
SOURCE_REPOSITORY_LINE = "  repository: hcloud-ccm\n"


def package_for_release(destination: str, image: str) -> Path:
    """`helm package` a copy of the chart whose `image.repository` is `image` into `destination`."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / CHART.name
        shutil.copytree(CHART, copy)
        values = copy / "values.yaml"
        text = values.read_text()
        if text.count(SOURCE_REPOSITORY_LINE) != 1:
            raise ValueError(f"values.yaml must hold exactly one line {SOURCE_REPOSITORY_LINE.strip()!r}")
        values.write_text(text.replace(SOURCE_REPOSITORY_LINE, f"  repository: {image}\n"))
        Path(destination).mkdir(parents=True, exist_ok=True)
        return Path(package(str(copy), destination=destination))


def deployment_images(chart_path: Path) -> list[str]:
    """The container images of the workload (a Deployment by default) the chart renders with
    default values."""
    images = []
    for _, doc in render({}, chart_path):
        if "\nkind: Deployment\n" in f"\n{doc}\n":
            for line in doc.splitlines():
                stripped = line.strip()
                if stripped.startswith("image:"):
                    images.append(stripped.removeprefix("image:").strip().strip('"'))
    return images


def check_release_image(report: Report, archive: Path, image: str) -> None:
    want = f"{image}:v{crate_version()}"
    have = deployment_images(archive)
    report.check(f"the release chart {archive.name} runs {want}", have == [want], f"its Deployment runs {have}")


def cmd_package(destination: str, image: str) -> int:
    """The release's chart in `destination`, after the checks a release needs (version, renders),
    with `image` as `image.repository`, checked by rendering the archive."""
    report = Report()
    check_version_and_package(report)
    if report.failed:
        return report.finish()
    archive = package_for_release(destination, image)
    check_release_image(report, archive, image)
    print(f"wrote {archive}")
    return report.finish()


def cmd_json(official: Path | None = None) -> int:
    variants = []
    for variant, values in {**VARIANTS, **official_variants(official)}.items():
        objects = []
        for path, doc in render(values):
            # Helm's own YAML parser (values_from_yaml accepts any YAML mapping).
            objects.append({"template": path, "object": values_from_yaml(doc)})
        variants.append({"variant": variant, "objects": objects})
    for name in STATIC:
        text = (DEPLOY / name).read_text()
        objects = [{"template": name, "object": values_from_yaml(doc)} for doc in split_docs(text)]
        variants.append({"variant": f"static {name}", "objects": objects})
    json.dump(variants, sys.stdout)
    return 0


def cmd_hcl() -> int:
    import hcl2

    report = Report()
    files = sorted(DEV.glob("*.tf"))
    report.check("deploy/dev has Terraform files", len(files) >= 2, f"found {files}")
    blocks: dict[str, list] = {}
    for tf in files:
        try:
            with tf.open() as f:
                parsed = hcl2.load(f)
            report.check(f"parse {tf.relative_to(DEPLOY.parent)}", True)
            for key, value in parsed.items():
                blocks.setdefault(key, []).extend(value if isinstance(value, list) else [value])
        except Exception as e:  # noqa: BLE001
            report.check(f"parse {tf.relative_to(DEPLOY.parent)}", False, str(e))
    # python-hcl2 8 keeps the quotes of labels and strings ('"hcloud_server"').
    unq = lambda v: v.strip('"') if isinstance(v, str) else v  # noqa: E731
    resources: dict[str, dict] = {}
    for block in blocks.get("resource", []):
        for typ, named in block.items():
            for name, body in named.items():
                resources.setdefault(unq(typ), {})[unq(name)] = body
    for needed in ("hcloud_ssh_key", "hcloud_network", "hcloud_network_subnet", "hcloud_server", "hcloud_server_network"):
        report.check(f"declares resource {needed}", needed in resources, f"resources: {sorted(resources)}")
    networks = [unq(b.get("ip_range")) for b in resources.get("hcloud_network", {}).values()]
    subnets = [(unq(b.get("ip_range")), unq(b.get("type"))) for b in resources.get("hcloud_network_subnet", {}).values()]
    report.check("network 10.0.0.0/8", networks == ["10.0.0.0/8"], str(networks))
    report.check("cloud subnet 10.0.0.0/24", subnets == [("10.0.0.0/24", "cloud")], str(subnets))
    servers = resources.get("hcloud_server", {})
    report.check(
        "servers use `location`, not `datacenter` (removed from the API)",
        bool(servers) and all("location" in b and "datacenter" not in b for b in servers.values()),
        str({n: sorted(b) for n, b in servers.items()}),
    )
    report.check(
        "control plane + var.worker_count workers",
        {"control", "worker"} <= set(servers) and "var.worker_count" in str(servers["worker"].get("count")),
        str(sorted(servers)),
    )
    cilium = resources.get("helm_release", {}).get("cilium", {})
    settings = {unq(s.get("name")): unq(s.get("value")) for s in cilium.get("set", [])}
    report.check("Cilium in native routing", settings.get("routingMode") == "native", str(settings))
    report.check("Cilium IPAM from the Nodes' pod CIDRs", settings.get("ipam.mode") == "kubernetes", str(settings))
    secret = resources.get("kubernetes_secret_v1", {}).get("hcloud", {})
    report.check("the hcloud Secret has token and network", {"token", "network"} <= set(secret.get("data", {})), str(secret))
    text = "\n".join(tf.read_text() for tf in files)
    for needle, why in [
        ("--disable-cloud-controller", "k3s must not run its own cloud controller"),
        ("--kubelet-arg cloud-provider=external", "kubelets must wait for the CCM"),
        ("--flannel-backend=none", "Cilium replaces flannel"),
        ("--disable=servicelb", "the CCM provides Load Balancers"),
        ("--disable=traefik", "no built-in ingress"),
    ]:
        report.check(f"k3s gets {needle}", needle in text, why)
    terraform = shutil.which("terraform") or shutil.which("tofu")
    if terraform:
        fmt = subprocess.run([terraform, "fmt", "-check", "-diff", str(DEV)], capture_output=True, text=True)
        report.check(f"{Path(terraform).name} fmt -check", fmt.returncode == 0, fmt.stdout + fmt.stderr)
    else:
        print("note terraform/tofu not on PATH: fmt -check skipped (the HCL parse above still ran)")
    return report.finish()


def main() -> int:
    commands = {"write": cmd_write, "check": cmd_check, "json": cmd_json, "hcl": cmd_hcl}
    if len(sys.argv) == 4 and sys.argv[1] == "package":
        return cmd_package(sys.argv[2], sys.argv[3])
    if len(sys.argv) >= 2 and sys.argv[1] == "helm":
        from helm_actions import cmd_helm

        return cmd_helm(sys.argv[2:])
    if len(sys.argv) == 3 and sys.argv[1] == "objects":
        # The objects of a (multi-document) YAML file as a JSON list, by Helm's YAML parser.
        text = Path(sys.argv[2]).read_text()
        json.dump([values_from_yaml(doc) for doc in split_docs(text)], sys.stdout)
        return 0
    if len(sys.argv) == 3 and sys.argv[1] in ("check", "json"):
        return commands[sys.argv[1]](Path(sys.argv[2]))
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        print(
            f"usage: {sys.argv[0]} {{{'|'.join(commands)}}} | check|json OFFICIAL_CHART_DIR | package DIR IMAGE"
            " | objects FILE | helm ACTION KUBECONFIG RELEASE [CHART VALUES_JSON]",
            file=sys.stderr,
        )
        return 2
    return commands[sys.argv[1]]()


if __name__ == "__main__":
    sys.exit(main())
