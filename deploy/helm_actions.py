"""Helm's release actions against a cluster, for the switch tests (`render.py helm ...`).

    $PY deploy/render.py helm install   KUBECONFIG RELEASE CHART VALUES_JSON [--server-side=true|false|auto]
    $PY deploy/render.py helm upgrade   KUBECONFIG RELEASE CHART VALUES_JSON [--server-side=true|false|auto]
    $PY deploy/render.py helm rollback  KUBECONFIG RELEASE REVISION
    $PY deploy/render.py helm uninstall KUBECONFIG RELEASE
    $PY deploy/render.py helm status    KUBECONFIG RELEASE

Helm v4 itself (helm-python-sdk's libhelm_c.so) does the work, in the namespace kube-system, as
`helm install|upgrade|rollback|uninstall|status -n kube-system` would; the secret storage driver
(Helm's default). CHART is a chart directory or archive. The last line printed is `OK <json>`
(the release's name, revision, status and chart) or `ERROR <message>`; the exit status is 0 only
with `OK`.
"""

from __future__ import annotations

import json
import sys

from helm_python import _native
from helm_python.config import Config, _loads_obj, _opts

NAMESPACE = "kube-system"
TIMEOUT_SECONDS = 60


def summary(release: dict) -> dict:
    """The fields the tests read of helm-python-sdk's release summary."""
    return {
        "name": release.get("name"),
        "revision": release.get("revision"),
        "status": release.get("status"),
        "chart": f"{release.get('chart_name')}-{release.get('chart_version')}",
    }


def install_or_upgrade(config: Config, action: str, chart: str, release: str, values: dict, server_side: str | None) -> dict:
    """helm-python-sdk's install/upgrade, with Helm v4's `--server-side` (true, false or auto),
    which its Python API does not expose: a release installed by Helm 3 was applied client-side
    (a three-way merge), one installed by Helm 4 server-side, and an upgrade keeps the release's
    way by default (auto)."""
    # An install takes a bool (there is no release to follow), an upgrade true/false/auto.
    mode: bool | str | None = server_side
    if action == "install" and server_side is not None:
        mode = server_side == "true"
    options = _opts(namespace=NAMESPACE, timeout_seconds=TIMEOUT_SECONDS, server_side_apply=mode)
    payload = _native.call_string(
        f"helm_{action}",
        config._raw(),
        Config._context_arg(None),
        *Config._chart_args(chart),
        release,
        json.dumps(values),
        options,
    )
    return _loads_obj(payload)


def cmd_helm(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    action, kubeconfig, release = argv[0], argv[1], argv[2]
    config = Config(kubeconfig_path=kubeconfig, namespace=NAMESPACE)
    try:
        if action in ("install", "upgrade") and len(argv) in (5, 6):
            chart, values = argv[3], json.loads(argv[4])
            server_side = argv[5].removeprefix("--server-side=") if len(argv) == 6 else None
            result = install_or_upgrade(config, action, chart, release, values, server_side)
        elif action == "rollback" and len(argv) == 4:
            config.rollback(release, version=int(argv[3]), timeout=TIMEOUT_SECONDS)
            result = config.status(release)
        elif action == "uninstall" and len(argv) == 3:
            config.uninstall(release, timeout=TIMEOUT_SECONDS)
            print("OK {}")
            return 0
        elif action == "status" and len(argv) == 3:
            result = config.status(release)
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except Exception as e:  # noqa: BLE001 - the test reads the message
        print("ERROR " + " ".join(str(e).split()))
        return 1
    finally:
        config.close()
    print("OK " + json.dumps(summary(result)))
    return 0
