# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The lab cluster's GPU Operator stand-in, run by kwokctl as one of the cluster's components.

Watches Nodes, the ConfigMaps and DaemonSets of the operator namespace and ClusterPolicies, and each node's config
file (NVIDIA's config-manager repoints it); every event (and every ``--resync`` seconds, and after any watch or API
error) triggers one reconcile pass of
``plugins/module_utils/lab/operator_standin.py``, which holds all the logic. It runs NVIDIA's
gpu-feature-discovery (``--gfd``) and keeps NVIDIA's device plugin (``--device-plugin``, registered with
``--device-plugin-kubelet``) running over our mock NVML library (``--nvml-mock``, its directory) for each GPU
node, with that node's files under ``--state-dir`` (the lab_cluster role gives the cluster's own
directory). Each ``--release`` directory holds another k8s-device-plugin release's ``nvidia-device-plugin`` and
``config-manager`` (and its ``gpu-feature-discovery`` where it was built): the release a node runs is the one the
operand DaemonSets' images name (the ClusterPolicy's ``spec.devicePlugin.version`` and ``spec.gfd.version``), each
binary's release being what its ``--version`` says. Logs go to standard output, which kwokctl writes to the cluster's
``logs/gpu-operator-standin.log``;
each node's device plugin logs to ``<state-dir>/<node>/device-plugin.log``. The plugins stop with the stand-in.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading
import time
import types

COLLECTION_ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
PACKAGE = "gpushare_module_utils"


def _collections_path(root):
    """The directory that holds ``ansible_collections/`` when the collection at ``root`` is installed, else None."""
    namespace_dir = os.path.dirname(root)
    if os.path.basename(os.path.dirname(namespace_dir)) == "ansible_collections":
        return os.path.dirname(os.path.dirname(namespace_dir))
    return None


def _module_utils():
    """Import the collection's module_utils as a package, wherever the collection is checked out or installed.

    k8s_auth imports kubernetes.core's auth options: an installed collection finds kubernetes.core beside it
    (ansible-galaxy installs dependencies into the same path), a checkout in the Python's site-packages.
    """
    beside = _collections_path(COLLECTION_ROOT)
    if beside and beside not in sys.path:
        sys.path.append(beside)
    package = types.ModuleType(PACKAGE)
    package.__path__ = [os.path.join(COLLECTION_ROOT, "plugins", "module_utils")]
    sys.modules[PACKAGE] = package
    return importlib.import_module(PACKAGE + ".lab.operator_standin"), importlib.import_module(PACKAGE + ".k8s.auth")


def _watch(name, list_call, trigger, stop, log):
    """Set ``trigger`` on every event of one watch; reconnect (and trigger a resync) after any error."""
    from kubernetes import watch

    last = None
    while not stop.is_set():
        try:
            stream = watch.Watch().stream(list_call, timeout_seconds=60, _request_timeout=75)
            for _event in stream:
                trigger.set()
                last = None
                if stop.is_set():
                    return
        except Exception as exc:  # pylint: disable=broad-exception-caught  # any failure: reconnect
            problem = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            if problem != last:  # say it once, not every second while it lasts
                log.info("watch %s: %s; reconnecting every second", name, problem)
                last = problem
            trigger.set()
            stop.wait(1.0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True, help="the lab cluster's kubeconfig")
    parser.add_argument("--namespace", default="gpu-operator", help="the operator's namespace (ConfigMaps named by the ClusterPolicy)")
    parser.add_argument("--resync", type=float, default=10.0, help="seconds between full passes without events")
    parser.add_argument("--gfd", required=True, help="NVIDIA's gpu-feature-discovery binary (tools/nvidia/build.sh)")
    parser.add_argument("--device-plugin", required=True, help="NVIDIA's nvidia-device-plugin binary (tools/nvidia/build.sh)")
    parser.add_argument("--release", action="append", default=[], metavar="DIR",
                        help="another k8s-device-plugin release's nvidia-device-plugin and config-manager (tools/nvidia/build.sh CACHE VERSION)")
    parser.add_argument("--device-plugin-kubelet", required=True, help="the kubelet side it registers with (tools/device-plugin-kubelet/build.sh)")
    parser.add_argument("--mig-parted", required=True, help="NVIDIA's nvidia-mig-parted binary (tools/mig-parted/build.sh)")
    parser.add_argument("--nvml-mock", required=True, help="the directory of our mock libnvidia-ml.so.1 (tools/nvml-mock/build.sh)")
    parser.add_argument("--state-dir", required=True, help="where each node's NVML state, config and GFD output files go")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(levelname)s %(message)s")
    log = logging.getLogger("gpu-operator-standin")
    missing = [path for path, ok in ((args.gfd, os.access(args.gfd, os.X_OK)),
                                     (args.device_plugin, os.access(args.device_plugin, os.X_OK)),
                                     (args.device_plugin_kubelet, os.access(args.device_plugin_kubelet, os.X_OK)),
                                     (args.mig_parted, os.access(args.mig_parted, os.X_OK)),
                                     (os.path.join(args.nvml_mock, "libnvidia-ml.so.1"), os.path.isfile(os.path.join(args.nvml_mock, "libnvidia-ml.so.1"))))
               if not ok]
    for directory in args.release:
        missing += [os.path.join(directory, name) for name in ("nvidia-device-plugin", "config-manager")
                    if not os.access(os.path.join(directory, name), os.X_OK)]
    if missing:  # the lab_cluster role builds them before it starts the cluster
        log.error("cannot start: %s missing; run the lab_cluster role (make cluster-operator) to build them", ", ".join(missing))
        return 2
    standin_mod, auth = _module_utils()
    # each binary's release, as it says it (the images of the operand DaemonSets name one of them)
    default_version = standin_mod.binary_version(args.device_plugin)
    plugins_by_version = {default_version: os.path.abspath(args.device_plugin)} if default_version else {}
    gfd_by_version = {standin_mod.binary_version(args.gfd): os.path.abspath(args.gfd)}
    for directory in args.release:
        plugin = os.path.abspath(os.path.join(directory, "nvidia-device-plugin"))
        version = standin_mod.binary_version(plugin)
        if version is None:
            log.error("cannot start: %s does not say its release (--version)", plugin)
            return 2
        plugins_by_version.setdefault(version, plugin)
        gfd = os.path.join(directory, "gpu-feature-discovery")
        if os.access(gfd, os.X_OK):
            gfd_by_version.setdefault(standin_mod.binary_version(gfd), os.path.abspath(gfd))
    gfd_by_version.pop(None, None)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_args: stop.set())
    signal.signal(signal.SIGINT, lambda *_args: stop.set())

    api_client = None
    while api_client is None and not stop.is_set():
        try:
            api_client = auth.build_api_client({"kubeconfig": args.kubeconfig})
        except auth.K8sAuthError as exc:  # the kubeconfig appears when the cluster is created
            log.info("waiting for %s: %s", args.kubeconfig, exc)
            stop.wait(1.0)
    if api_client is None:
        return 0
    gfd = standin_mod.Gfd(os.path.abspath(args.gfd), os.path.abspath(args.nvml_mock), os.path.abspath(args.state_dir), releases=gfd_by_version)
    plugins = standin_mod.DevicePlugin(os.path.abspath(args.device_plugin), os.path.abspath(args.device_plugin_kubelet),
                                       os.path.abspath(args.nvml_mock), os.path.abspath(args.state_dir), os.path.abspath(args.kubeconfig),
                                       releases=plugins_by_version, version=default_version)
    mig_parted = standin_mod.MigParted(os.path.abspath(args.mig_parted), os.path.abspath(args.nvml_mock), os.path.abspath(args.state_dir))
    standin = standin_mod.StandIn(api_client, args.namespace, gfd, device_plugin=plugins, mig_parted=mig_parted)
    log.info("started: namespace %s, kubeconfig %s, gpu-feature-discovery %s, nvidia-device-plugin %s (release %s by default; releases: "
             "device plugin %s, GFD %s) and nvidia-mig-parted %s over the NVML mock in %s, node files in %s", args.namespace, args.kubeconfig,
             gfd.binary, plugins.binary, default_version or "unknown", ", ".join(sorted(plugins_by_version)) or "-", ", ".join(sorted(gfd_by_version)) or "-",
             mig_parted.binary, gfd.mock_dir, gfd.state_dir)
    try:
        return _loop(args, standin, api_client, stop, log)
    finally:
        plugins.close()


def _follow_config_files(standin, trigger, stop, interval=0.2):
    """Set ``trigger`` when NVIDIA's config-manager repoints a node's config file (after a label change, shortly after
    the pass the label change started), so that GFD reads the config it now names, as GFD's own config-manager would."""
    seen = None
    while not stop.wait(interval):
        try:
            targets = standin.config_targets()
        except RuntimeError:  # the pass changed the node list while it was read: read again
            continue
        if seen is not None and targets != seen:
            trigger.set()
        seen = targets


def _loop(args, standin, api_client, stop, log):
    """Reconcile on every event (and every ``--resync`` seconds) until ``stop``."""
    from kubernetes import client as k8s_client

    trigger = threading.Event()
    trigger.set()
    core = k8s_client.CoreV1Api(api_client)
    apps = k8s_client.AppsV1Api(api_client)
    custom = k8s_client.CustomObjectsApi(api_client)
    watches = {
        "nodes": core.list_node,
        "configmaps": lambda **kw: core.list_namespaced_config_map(args.namespace, **kw),
        "daemonsets": lambda **kw: apps.list_namespaced_daemon_set(args.namespace, **kw),
        "clusterpolicies": lambda **kw: custom.list_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", **kw),
    }
    for name, call in watches.items():
        threading.Thread(target=_watch, args=(name, call, trigger, stop, log), name=name, daemon=True).start()
    threading.Thread(target=_follow_config_files, args=(standin, trigger, stop), name="config-files", daemon=True).start()

    while not stop.is_set():
        due = standin.next_restart()  # a node's exited plugin is started again without waiting for an event
        trigger.wait(args.resync if due is None else min(args.resync, due + 0.05))
        if stop.is_set():
            break
        trigger.clear()
        started = time.monotonic()
        try:
            actions = standin.reconcile()
        except Exception as exc:  # pylint: disable=broad-exception-caught  # the API server may be away: retry
            log.warning("reconcile failed: %s; retrying", exc)
            trigger.set()
            stop.wait(1.0)
            continue
        for action in actions:
            log.info("%s (pass %.0f ms)", action, (time.monotonic() - started) * 1000)
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
