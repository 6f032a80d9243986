# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The lab cluster's GPU Operator stand-in: one level-triggered reconcile pass over every kwok GPU node.

It plays, by the operator's contract (see :mod:`gpu_operator`), the device plugin with its config
manager and the MIG manager, and runs NVIDIA's unmodified gpu-feature-discovery (GFD), on nodes whose
simulated hardware the lab cluster wrote when it created them (annotations ``gpushare.k8s/gpus`` and
``gpushare.k8s/gpu-product``):

* MIG manager: a node labelled ``nvidia.com/mig.config=<layout>`` gets ``nvidia.com/mig.config.state``
  ``pending`` while NVIDIA's unmodified ``nvidia-mig-parted apply`` (:class:`MigParted`) applies the layout from the
  ConfigMap ``spec.migManager.config.name`` names to the node's mock GPUs (the mock refuses an instance as the
  hardware tables do and writes each change back to the node's state file), then ``success`` (the layout recorded in
  annotation ``gpushare.k8s/mig-applied``) or ``failed`` with mig-parted's own message in ``gpushare.k8s/mig-failure``.
  A failed or applied layout is not tried again until the label or the layout's text changes. mig-parted's verdict
  is the only one: the stand-in reads the layout only to notice that it changed.
* operand DaemonSets: ``nvidia-device-plugin-daemonset`` and ``gpu-feature-discovery`` in the operator's namespace,
  derived from the ClusterPolicy as the operator derives them (:func:`operand_daemonset`: the image, ``MIG_STRATEGY``, the
  device-plugin ConfigMap as a volume, config-manager's init and sidecar containers with ``DEFAULT_CONFIG``), owned
  by the ClusterPolicy. They select the operator's ``nvidia.com/gpu.deploy.*`` node labels, which the lab's nodes do
  not carry: no Pod is made; the stand-in runs each node's Pod as processes and the node side reads only the
  DaemonSets (:func:`daemonset_pod`). A new Pod template (``kubectl rollout restart``, the roles' restart after a
  config edit, a ClusterPolicy change) restarts the node's processes, as a rollout does.
* device plugin and config manager: NVIDIA's unmodified ``nvidia-device-plugin`` and ``config-manager``
  (:class:`DevicePlugin`), one Pod's processes per GPU node over our mock ``libnvidia-ml.so.1``: config-manager once
  (init) and then beside the plugin (sidecar), following the node's ``nvidia.com/device-plugin.config`` label, the
  ConfigMap's keys as files (kept in step with the ConfigMap, as the kubelet keeps a volume; nothing is signalled on
  a content edit) and ``DEFAULT_CONFIG``; the plugin registers with ``device-plugin-kubelet`` (tools/), the kubelet's
  side of the device-plugin API, which writes the node's capacity and allocatable from the plugin's ``ListAndWatch``
  (every other resource kept; an ``nvidia.com/*`` resource no plugin registers is removed after a second). Each
  node's processes have their own user, mount and PID namespace (``/var/lib/kubelet/device-plugins`` is the node's
  directory; config-manager finds the plugin by name among them). A label naming a missing config makes
  config-manager exit and leaves the plugin on its old config, as on a real node; a new MIG layout or MIG strategy
  restarts the processes (the MIG manager and the operator restart them on a real node). The stand-in computes no
  count. The release that runs is the one the DaemonSet's image names (:func:`operand_image`: the ClusterPolicy's
  ``spec.devicePlugin.version``, else the stand-in's default release), from the releases the stand-in was given (e.g.
  k8s-device-plugin v0.18.0 and v0.17.4); an image naming a release it lacks starts no Pod.
* GFD: NVIDIA's ``gpu-feature-discovery --oneshot`` (:class:`Gfd`) over our mock ``libnvidia-ml.so.1``,
  with the node's NVML state file (:mod:`nvml_state`: its product and GPU count, and MIG as mig-parted left it),
  the config config-manager points the node at (read when it switches or GFD's DaemonSet restarts, as GFD's own
  config-manager and GFD do) and ``MIG_STRATEGY`` from its DaemonSet; the release its DaemonSet's image names
  (``spec.gfd.version``), as for the plugin. The stand-in then
  does what NFD's worker and master do on a real node: it puts the ``nvidia.com/*`` labels of GFD's output
  file on the node, removes the GFD labels it put there before that GFD no longer writes (their names are
  kept in annotation ``gpushare.k8s/gfd-labels``, as NFD keeps them in ``nfd.node.kubernetes.io/feature-labels``)
  and keeps every other label. The stand-in computes no label itself. GFD runs again only when the node's
  inputs change (a digest of state, config and strategy).

Every pass reads the cluster afresh, so a restart (its own or the API server's) leaves nothing stale.
No Ansible import; the lab cluster's component script runs it in a loop driven by watches.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import subprocess
import time

try:
    import kubernetes  # noqa: F401 pylint: disable=unused-import

    HAS_KUBERNETES = True
except ImportError:  # pragma: no cover - the stand-in needs the library; the model does not
    HAS_KUBERNETES = False

from ..nvidia import device_plugin as _dp
from ..nvidia import gpu_features as _features
from ..nvidia import gpu_operator as _op
from ..hardware import nvml_state as _nvml
from ..nvidia import operator_wait as _wait
from ..k8s.cluster_objects import ApiCallError, Route, api_path, call_json, list_pages
from ..errors import GpushareError
from ..k8s.nodes import MERGE_PATCH


__all__ = ["GFD_LABELS_ANNOTATION", "DevicePlugin", "Gfd", "GfdError", "StandIn", "binary_version", "device_plugin_command", "device_plugin_env",
           "gfd_label_patch", "hardware_of", "MigParted", "mig_parted_command", "operand_image", "parse_gfd_output"]

REQUEST_TIMEOUT = 10
# Seconds one GFD run may take (it takes a few hundredths of a second over the mock).
GFD_TIMEOUT = 30
# The names of the labels the stand-in last put on a node from GFD's output (comma-separated), so that the next
# output's absent ones are removed and no other label is touched: what NFD keeps in nfd.node.kubernetes.io/feature-labels.
GFD_LABELS_ANNOTATION = "gpushare.k8s/gfd-labels"
GFD_PREFIX = "nvidia.com/"
# Seconds one nvidia-mig-parted apply may take (under a second over the mock).
MIG_PARTED_TIMEOUT = 60
# The node's state file: the mock NVML's GPUs, which NVIDIA's mig-parted changes through the mock.
NVML_STATE = "nvml-state"
_LOG = logging.getLogger("gpu-operator-standin")


def hardware_of(node):
    """``(gpus, product)`` of a node's simulated GPUs, or ``None`` for a node without them (or a bad annotation)."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    gpus = annotations.get(_op.HARDWARE_GPUS_ANNOTATION)
    product = annotations.get(_op.HARDWARE_PRODUCT_ANNOTATION)
    if gpus is None or not product:
        return None
    try:
        count = int(gpus)
    except ValueError:
        return None
    return (count, product) if count > 0 else None


def binary_version(binary, timeout=30):
    """The release NVIDIA's ``nvidia-device-plugin`` or ``gpu-feature-discovery`` says it is (``--version``: "NVIDIA Device
    Plugin version v0.18.0"), or ``None`` when it does not say (tools/nvidia/build.sh sets it as NVIDIA's release build does)."""
    try:
        # the stand-in's own process, no AnsibleModule; bounded by timeout, which run_command has not
        proc = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=timeout, check=False)  # pylint: disable=ansible-bad-function
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"\bversion (v[0-9]+\.[0-9]+\.[0-9]+)\b", proc.stdout + proc.stderr)
    return match.group(1) if match else None


def _layout_digest(config_text, layout):
    """A short digest of what a mig-parted config says of ``layout`` (its whole text when it cannot be read): a layout
    whose content changed is applied again. Only a change detector: mig-parted decides what the text means."""
    try:
        body = json.dumps(_op.parse_mig_parted(config_text).get(layout), sort_keys=True)
    except (_op.LayoutError, TypeError, AttributeError):
        body = config_text or ""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


def _json_annotation(annotations, key):
    try:
        value = json.loads(annotations.get(key) or "null")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def parse_gfd_output(text):
    """The ``nvidia.com/*`` labels of a GFD output file (``<label>=<value>`` per line), as a dict."""
    labels = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key.startswith(GFD_PREFIX):
            labels[key] = value
    return labels


def gfd_label_patch(gfd_labels, current, previous):
    """The label part of a merge patch that puts ``gfd_labels`` on a node whose labels are ``current``.

    A label the stand-in put there from an earlier GFD output (``previous``: its names) or a GFD label the collection
    knows (:func:`gpu_features.is_managed_label`), and that GFD no longer writes, is removed; any other label is kept,
    as NFD does with the labels of a feature source. Only what differs is in the patch.
    """
    patch = {key: value for key, value in gfd_labels.items() if current.get(key) != value}
    for key in sorted(current):
        if key not in gfd_labels and (key in previous or _features.is_managed_label(key)):
            patch[key] = None
    return patch


# What a node's MIG manager sees of the machine, set up in its own user, mount and PID namespace before
# nvidia-mig-parted starts: /proc/modules naming the nvidia module (mig-parted asks the kernel whether the driver is
# loaded before it uses NVML), the rest of /proc the namespace's own, and the node's PCI devices (one directory per
# GPU, as sysfs has them) over /sys/bus/pci/devices, where mig-parted enumerates the GPUs it walks. $1 is the node's
# directory; the rest is the command.
_MIG_PARTED_NODE = """set -e
node=$1; shift
mkdir -p "$node/.proc"
mount -t proc proc "$node/.proc"
mount -t tmpfs tmpfs /proc
mkdir /proc/.host
mount --move "$node/.proc" /proc/.host
(cd /proc && ln -s .host/* .)
printf 'nvidia 0 0 - Live 0x0\\n' > /proc/modules
mount --bind "$node/pci-devices" /sys/bus/pci/devices
exec "$@"
"""


def mig_parted_command(binary, node_dir, config_file, layout):
    """The argv that runs NVIDIA's ``nvidia-mig-parted apply`` of ``layout`` from ``config_file`` for the node whose
    files are in ``node_dir`` (see :data:`_MIG_PARTED_NODE`), as the MIG manager runs it on a real node."""
    return ["unshare", "--user", "--map-current-user", "--mount", "--pid", "--fork", "--kill-child",
            "sh", "-c", _MIG_PARTED_NODE, "mig-parted-node", node_dir,
            binary, "apply", "--config-file", config_file, "--selected-config", layout]


def _owned_by_mig(key):
    """Whether a state key is one the MIG calls change (the mock writes them back): the rest is the hardware."""
    field = key.split(".", 2)[2] if key.startswith("device.") and key.count(".") >= 2 else ""
    return field == "mig_mode" or field.startswith(("mig.", "gi."))


def mig_parted_reason(output):
    """The reason nvidia-mig-parted gave: the messages of its error and fatal log lines (the last three), else its
    last line."""
    messages = []
    for line in output.splitlines():
        if "level=error" in line or "level=fatal" in line:
            head, sep, rest = line.partition('msg="')
            messages.append(rest[:-1].replace('\\"', '"') if sep and rest.endswith('"') else line.strip())
    if messages:
        return "; ".join(messages[-3:])
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _hold_state(path, entries, node):
    """Have the mock's state file at ``path`` hold ``entries``; written only when what it holds differs, so a file
    mig-parted changed through the mock (:class:`MigParted`) is read as it left it, never rewritten by the readers."""
    try:
        with open(path, encoding="utf-8") as handle:
            if _nvml.parse(handle.read()) == list(entries):
                return
    except (OSError, _nvml.NvmlStateError):
        pass
    _nvml.write(path, entries, "gpushare.k8s GPU Operator stand-in: the simulated GPUs of node %s" % node)


class _NodeBinary:
    """One of NVIDIA's binaries run per node over the mock NVML: ``binary``, ``mock_dir`` (the directory of our
    ``libnvidia-ml.so.1``), ``state_dir`` (each node's files in ``<state_dir>/<node>``), ``timeout`` per run, ``runs``
    counted."""

    def __init__(self, binary, mock_dir, state_dir, timeout):
        self.binary = binary
        self.mock_dir = mock_dir
        self.state_dir = state_dir
        self.timeout = timeout
        self.runs = 0

    def node_dir(self, node):
        return os.path.join(self.state_dir, node)


class MigParted(_NodeBinary):
    """NVIDIA's unmodified ``nvidia-mig-parted`` over our mock NVML: each node's GPUs and the layouts applied to them.

    ``binary`` is the ``nvidia-mig-parted`` built by tools/mig-parted/build.sh, ``mock_dir`` the mock NVML's directory,
    ``state_dir`` the nodes' files (shared with :class:`Gfd` and :class:`DevicePlugin`): ``<node>/nvml-state`` (the
    GPUs, which mig-parted changes through the mock), ``<node>/pci-devices/`` (the GPUs as sysfs lists them),
    ``<node>/mig-parted/config.yaml`` (the mig-parted ConfigMap's config) and ``<node>/mig-parted.log``.
    """

    def __init__(self, binary, mock_dir, state_dir, timeout=MIG_PARTED_TIMEOUT):
        super().__init__(binary, mock_dir, state_dir, timeout)

    def gpus(self, node, hardware):
        """The node's GPUs now, as :func:`nvml_state.parse` entries: the state file as mig-parted left it, or
        ``hardware`` (:func:`nvml_state.node_state`, MIG off) written anew when there is none or its GPUs are others."""
        directory = self.node_dir(node)
        path = os.path.join(directory, NVML_STATE)
        try:
            with open(path, encoding="utf-8") as handle:
                entries = _nvml.parse(handle.read())
            if [e for e in entries if not _owned_by_mig(e[0])] == [e for e in hardware if not _owned_by_mig(e[0])]:
                return entries
        except (OSError, _nvml.NvmlStateError):
            pass
        os.makedirs(directory, mode=0o700, exist_ok=True)
        _write(path, _nvml.render(hardware, "gpushare.k8s GPU Operator stand-in: the simulated GPUs of node %s" % node))
        self._write_pci(directory, hardware)
        return list(hardware)

    @staticmethod
    def _write_pci(directory, entries):
        """``<node>/pci-devices``: a directory per GPU as sysfs lists it (vendor, device, class, NUMA node, resources)."""
        pci = os.path.join(directory, "pci-devices")
        fields = dict(entries)
        if os.path.isdir(pci):
            for name in os.listdir(pci):
                for leaf in os.listdir(os.path.join(pci, name)):
                    os.unlink(os.path.join(pci, name, leaf))
                os.rmdir(os.path.join(pci, name))
        for index in range(_nvml.device_count(entries)):
            domain, bus, rest = fields["device.%d.pci_bus_id" % index].split(":")
            device_id = int(fields["device.%d.pci_device_id" % index], 16)
            path = os.path.join(pci, "%04x:%s:%s" % (int(domain, 16) & 0xFFFF, bus.lower(), rest.lower()))
            os.makedirs(path, mode=0o700)
            for leaf, text in (("vendor", "0x%04x" % (device_id & 0xFFFF)), ("device", "0x%04x" % (device_id >> 16)),
                               ("class", "0x030200"), ("numa_node", "-1"), ("resource", "0x0 0x0 0x0")):
                _write(os.path.join(path, leaf), text + "\n")

    def apply(self, node, config_text, layout):
        """Run ``nvidia-mig-parted apply`` of ``layout`` with ``config_text`` on the node's GPUs (its state file must
        exist: :meth:`gpus`); return ``(ok, reason)``, the reason mig-parted's own message when it failed."""
        directory = self.node_dir(node)
        config_dir = os.path.join(directory, "mig-parted")
        os.makedirs(config_dir, mode=0o700, exist_ok=True)
        config = os.path.join(config_dir, "config.yaml")
        _write(config, config_text)
        env = {key: value for key, value in os.environ.items() if not key.startswith("MIG_PARTED_")}
        env.update({"LD_LIBRARY_PATH": self.mock_dir, "GPUSHARE_NVML_STATE": os.path.join(directory, NVML_STATE)})
        argv = mig_parted_command(self.binary, directory, config, layout)
        self.runs += 1
        try:
            # the stand-in's own process, no AnsibleModule; bounded by timeout, which run_command has not
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout, env=env, check=False)  # pylint: disable=ansible-bad-function
            output, code = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired:
            output, code = "nvidia-mig-parted did not finish within %ss" % self.timeout, None
        except OSError as exc:
            output, code = "cannot run %s: %s" % (argv[0], exc), None
        with open(os.path.join(directory, "mig-parted.log"), "a", encoding="utf-8") as log:
            log.write("\n$ nvidia-mig-parted apply --selected-config %s (exit %s)\n%s" % (layout, code, _text(output) if output else ""))
        return (True, None) if code == 0 else (False, mig_parted_reason(output))


class GfdError(GpushareError):
    """GFD could not label a node: what failed, with the last lines GFD wrote. ``repeated``: raised again from the cache."""

    repeated = False


class Gfd(_NodeBinary):
    """NVIDIA's gpu-feature-discovery, run once per node input over our mock NVML; outputs cached by input digest.

    ``binary`` is the ``gpu-feature-discovery`` built by tools/nvidia/build.sh, ``mock_dir`` the directory of our
    ``libnvidia-ml.so.1`` (tools/nvml-mock/build.sh), ``state_dir`` where each node's files go:
    ``<state_dir>/<node>/nvml-state`` (the mock's state), ``config.yaml`` (the config manager's file), ``gfd-labels``
    (GFD's output file) and ``gfd.log`` (what GFD printed on its last run).
    """

    def __init__(self, binary, mock_dir, state_dir, timeout=GFD_TIMEOUT, releases=None):
        """``releases``: ``{version: binary}`` of every release the stand-in can run (its GFD DaemonSet's image names one);
        ``binary`` runs for a DaemonSet whose image names none."""
        super().__init__(binary, mock_dir, state_dir, timeout)
        self.releases = dict(releases or {})
        self._cache = {}

    def labels(self, node, state_entries, config_text=None, strategy=None, version=None):
        """GFD's ``nvidia.com/*`` labels for ``node``; GFD runs only when the inputs differ from the last run's.

        ``state_entries`` is :func:`nvml_state.node_state`'s list, ``config_text`` the device-plugin config as the
        ConfigMap holds it (``None``: no config file), ``strategy`` the ClusterPolicy's MIG strategy (``MIG_STRATEGY``;
        ``None``: not set, GFD takes the config's), ``version`` the release its DaemonSet's image names (``None``: the
        default ``binary``). Raises :class:`GfdError` when GFD fails (cached too: the same inputs do not run it again),
        and when the stand-in has no GFD of that release (a real node could not pull the image: no Pod starts).
        """
        binary = self.binary if version is None else self.releases.get(version)
        if binary is None:
            raise GfdError("the GFD DaemonSet's image names release %s, and the stand-in has no gpu-feature-discovery of it (it has: %s): as "
                           "with an image a node cannot pull, no Pod starts" % (version, ", ".join(sorted(self.releases)) or "none"))
        state_text = _nvml.render(state_entries, "gpushare.k8s GPU Operator stand-in: the simulated GPUs of node %s" % node)
        digest = hashlib.sha256(json.dumps([binary, self.mock_dir, state_text, config_text, strategy]).encode("utf-8")).hexdigest()
        cached = self._cache.get(node)
        if cached is not None and cached[0] == digest:
            if isinstance(cached[1], GfdError):
                cached[1].repeated = True
                raise cached[1]
            return dict(cached[1])
        try:
            result = self._run(node, state_entries, config_text, strategy, binary)
        except GfdError as exc:
            self._cache[node] = (digest, exc)
            raise
        self._cache[node] = (digest, result)
        return dict(result)

    def _run(self, node, state_entries, config_text, strategy, binary):
        directory = self.node_dir(node)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        state = os.path.join(directory, NVML_STATE)
        output = os.path.join(directory, "gfd-labels")
        config = os.path.join(directory, "config.yaml")
        _hold_state(state, state_entries, node)
        args = [binary, "--oneshot", "--no-timestamp", "--output-file", output]
        if config_text is not None:
            _write(config, config_text if config_text.endswith("\n") else config_text + "\n")
            args += ["--config-file", config]
        elif os.path.exists(config):
            os.unlink(config)
        if os.path.exists(output):
            os.unlink(output)
        env = {key: value for key, value in os.environ.items() if key not in ("MIG_STRATEGY", "GFD_MIG_STRATEGY", "NVIDIA_VISIBLE_DEVICES")}
        env.update({"LD_LIBRARY_PATH": self.mock_dir, _nvml.ENV: state, "NODE_NAME": node})
        if strategy:
            env["MIG_STRATEGY"] = strategy
        self.runs += 1
        try:
            # the stand-in's own process, no AnsibleModule; bounded by timeout, which run_command has not
            proc = subprocess.run(args, capture_output=True, text=True, timeout=self.timeout, env=env, check=False)  # pylint: disable=ansible-bad-function
        except (OSError, subprocess.SubprocessError) as exc:
            raise GfdError("cannot run %s: %s" % (binary, exc)) from None
        _write(os.path.join(directory, "gfd.log"), "$ %s\n%s" % (" ".join(args), proc.stderr))
        try:
            with open(output, encoding="utf-8") as handle:
                labels = parse_gfd_output(handle.read())
        except OSError:
            labels = None
        if proc.returncode != 0 or not labels:
            last = "\n".join(proc.stderr.strip().splitlines()[-5:])
            raise GfdError("gpu-feature-discovery exited %d%s; its last lines (all in %s):\n%s" % (
                proc.returncode, "" if labels else " and wrote no label", os.path.join(directory, "gfd.log"), last))
        return labels


# Where NVIDIA's device plugin creates its sockets and finds the kubelet's (pluginapi.DevicePluginPath: fixed in the
# plugin); each node's plugin sees the node's own directory there.
DEVICE_PLUGIN_PATH = "/var/lib/kubelet/device-plugins"
# Seconds before a plugin that exited is started again (the kubelet's restart back-off starts at 10 s).
DEVICE_PLUGIN_BACKOFF = 5.0
# The MPS control program NVIDIA's plugin runs to see that the MPS control daemon is up before it serves an MPS
# resource (nvidia-cuda-mps-control, a driver program): ours answers as a running daemon does.
MPS_CONTROL = "nvidia-cuda-mps-control"
MPS_ROOT = "/run/nvidia/mps"
_MPS_CONTROL_SCRIPT = """#!/bin/sh
# gpushare.k8s lab: stands for the MPS control daemon of this node's simulated GPUs (written by the stand-in).
cat > /dev/null
echo 100.0
"""
# The node's copy of the device-plugin ConfigMap (one file per key, as the kubelet mounts a ConfigMap volume) and the
# directory of the config file config-manager points at one of them (the DaemonSet's shared emptyDir).
AVAILABLE_CONFIGS = "available-configs"
CONFIG_DIR = "config"
# The driver's files the plugin reads (MIG capability minors), bound over /proc/driver in the plugin's namespace.
PROC_DRIVER = "/proc/driver"
# In a new user and mount namespace: a private /var/lib (tmpfs) whose kubelet/device-plugins is the node's directory
# ($0), the node's driver files ($1) as /proc/driver, then the command. Nothing outside the node's directory is written.
_NAMESPACE_SCRIPT = ('set -e; mount -t tmpfs gpushare-node /var/lib; mkdir -p %s; mount --bind "$0" %s; mount --bind "$1" %s; shift; exec "$@"'
                     % (DEVICE_PLUGIN_PATH, DEVICE_PLUGIN_PATH, PROC_DRIVER))


def device_plugin_command(plugin, kubelet, node_dir, config_file=None, node=None, kubeconfig=None, once=False, config_manager=None):
    """``argv`` that runs NVIDIA's ``plugin`` registered with ``kubelet`` (device-plugin-kubelet) for one node.

    Both run in a new user, mount and PID namespace where ``/var/lib/kubelet/device-plugins`` is
    ``<node_dir>/device-plugins`` and ``/proc/driver`` is ``<node_dir>/proc-driver`` (:func:`device_plugin_env` writes
    it): the node's processes are all config-manager sees when it looks for the plugin by name, as in the operator's
    Pod (``shareProcessNamespace``). ``config_manager``: NVIDIA's config-manager runs before the plugin and beside it,
    as the operator's DaemonSet runs it (its environment: :func:`config_manager_env`).
    ``once``: the kubelet program prints what the plugin lists and exits (tests); otherwise it writes ``node``'s
    status through ``kubeconfig`` for as long as its standard input stays open.
    """
    sockets = os.path.join(node_dir, "device-plugins")
    args = ["unshare", "--user", "--map-current-user", "--mount", "--pid", "--fork", "--mount-proc", "--kill-child",
            "sh", "-c", _NAMESPACE_SCRIPT, sockets, os.path.join(node_dir, "proc-driver"), kubelet, "--dir", DEVICE_PLUGIN_PATH]
    args += ["--once"] if once else ["--node", node, "--kubeconfig", kubeconfig, "--stdin"]
    if config_manager:
        args += ["--config-manager", config_manager]
    args += ["--", plugin]
    if config_file:
        args += ["--config-file", config_file]
    return args


def config_manager_env(node_dir, node, kubeconfig, default_config):
    """The environment the operator's DaemonSet gives NVIDIA's config-manager (both its containers) for one node:
    the node's label, the ConfigMap's files in ``<node_dir>/available-configs`` (the volume), the config file
    ``<node_dir>/config/config.yaml`` (the shared emptyDir) and the ClusterPolicy's default config."""
    return {"KUBECONFIG": kubeconfig, "NODE_NAME": node, "NODE_LABEL": _op.DEVICE_PLUGIN_CONFIG_LABEL,
            "CONFIG_FILE_SRCDIR": os.path.join(node_dir, AVAILABLE_CONFIGS), "CONFIG_FILE_DST": os.path.join(node_dir, CONFIG_DIR, "config.yaml"),
            "DEFAULT_CONFIG": default_config or "", "FALLBACK_STRATEGIES": "empty"}


def device_plugin_env(mock_dir, node_dir, state_file, gpus, strategy=None, node=None):
    """The environment of NVIDIA's device plugin for one node: our mock NVML with the node's state, no health checks
    (the lab's choice: the mock reports an XID event only for a GPU its state file names one for, see
    docs/nvidia-device-plugin.md), ``MIG_STRATEGY`` when the ClusterPolicy sets it, our MPS control program on ``PATH``.

    Also writes the node's driver files for ``gpus`` GPUs (``<node_dir>/proc-driver/nvidia-caps/mig-minors``).
    """
    os.makedirs(os.path.join(node_dir, "device-plugins"), mode=0o700, exist_ok=True)
    caps = os.path.join(node_dir, "proc-driver", "nvidia-caps")
    os.makedirs(caps, mode=0o700, exist_ok=True)
    _write(os.path.join(caps, "mig-minors"), _nvml.mig_minors(gpus))
    bin_dir = os.path.join(node_dir, "bin")
    os.makedirs(bin_dir, mode=0o700, exist_ok=True)
    control = os.path.join(bin_dir, MPS_CONTROL)
    _write(control, _MPS_CONTROL_SCRIPT)
    os.chmod(control, 0o700)
    env = {key: value for key, value in os.environ.items()
           if key not in ("MIG_STRATEGY", "NVIDIA_VISIBLE_DEVICES", "CONFIG_FILE", "KUBELET_SOCKET")}
    # MPS_ROOT: where the operator's DaemonSet tells the plugin the MPS control daemon keeps its files (the plugin refuses
    # an MPS config without it)
    env.update({"LD_LIBRARY_PATH": mock_dir, _nvml.ENV: state_file, "DP_DISABLE_HEALTHCHECKS": "all", "MPS_ROOT": MPS_ROOT,
                "PATH": bin_dir + os.pathsep + env.get("PATH", "/usr/bin:/bin")})
    if node:
        env["NODE_NAME"] = node
    if strategy:
        env["MIG_STRATEGY"] = strategy
    return env


class DevicePlugin:
    """NVIDIA's nvidia-device-plugin and config-manager, one Pod's worth of long-running processes per GPU node, and
    the kubelet side the plugin registers with.

    ``binary`` is ``nvidia-device-plugin`` (tools/nvidia/build.sh; ``config-manager`` is beside it), ``kubelet``
    ``device-plugin-kubelet`` (tools/device-plugin-kubelet/build.sh), ``mock_dir`` the mock NVML's directory,
    ``state_dir`` the nodes' files (the same as :class:`Gfd`'s: ``<state_dir>/<node>/nvml-state``, and here
    ``available-configs/``, ``config/``, ``device-plugins/``, ``bin/`` and ``device-plugin.log``). Each process reads
    the end of its standard input as the stand-in's end. ``releases`` is ``{version: nvidia-device-plugin}`` of every
    k8s-device-plugin release the stand-in can run (its ``config-manager`` beside each): the device plugin's DaemonSet
    image names the one a node runs; ``binary`` runs for an image that names none.
    """

    def __init__(self, binary, kubelet, mock_dir, state_dir, kubeconfig, config_manager=None, releases=None, version=None):
        """``version``: the release of ``binary``, which the operand DaemonSets' images name when the ClusterPolicy names none."""
        self.binary = binary
        self.version = version
        self.kubelet = kubelet
        self.config_manager = config_manager or os.path.join(os.path.dirname(binary), "config-manager")
        self.releases = dict(releases or {})
        self.mock_dir = mock_dir
        self.state_dir = state_dir
        self.kubeconfig = kubeconfig
        self.starts = 0
        self._agents = {}

    def node_dir(self, node):
        return os.path.join(self.state_dir, node)

    def sync_configs(self, node, configs):
        """Make ``<node>/available-configs`` hold ``configs`` (the ConfigMap's data), a file per key, as the kubelet
        keeps a mounted ConfigMap in step with the API server. Nothing is signalled: NVIDIA's config-manager reads these
        files only when the node's label changes or its Pod starts."""
        directory = os.path.join(self.node_dir(node), AVAILABLE_CONFIGS)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        for name in set(os.listdir(directory)) - set(configs):
            os.unlink(os.path.join(directory, name))
        for name, text in configs.items():
            path = os.path.join(directory, name)
            try:
                with open(path, encoding="utf-8") as handle:
                    if handle.read() == text:
                        continue
            except OSError:
                pass
            _write(path, text)

    def config_target(self, node):
        """The file the node's config file points at now (config-manager's symlink), or ``None`` when there is none."""
        try:
            return os.readlink(os.path.join(self.node_dir(node), CONFIG_DIR, "config.yaml"))
        except OSError:
            return None

    def ensure(self, node, state_entries, configs=None, default_config=None, strategy=None, pod=None, version=None):
        """Have ``node``'s plugin run with these inputs; return what was done (for the log).

        ``version`` is the release the DaemonSet's image names (``None``: ``binary``): without that release the Pod
        cannot start (a real node cannot pull the image), so the node's processes are left as they are, as the running
        Pod of a rollout stuck on an image is.

        ``configs`` is the data of the ConfigMap the DaemonSet mounts (``None``: the ClusterPolicy names none, so
        neither config-manager nor a config file), ``default_config`` its ``DEFAULT_CONFIG``, ``strategy`` its
        ``MIG_STRATEGY``, ``pod`` what identifies the DaemonSet's Pod template (a change is a rollout: a new Pod).
        A change of the ConfigMap's content only updates the node's files: config-manager acts on label changes,
        the plugin reads its config when it starts or config-manager signals it. New simulated GPUs (a MIG layout), a
        new MIG strategy or default config, or a new Pod template restart the processes (the MIG manager and the
        DaemonSet do on a real node). Processes that exited are started again, not sooner than
        :data:`DEVICE_PLUGIN_BACKOFF` seconds after their last start.
        """
        directory = self.node_dir(node)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        if configs is not None:
            self.sync_configs(node, configs)
        binary = self.binary if version is None else self.releases.get(version)
        if binary is None:
            _LOG.warning("%s: the device plugin's DaemonSet image names release %s, and the stand-in has no nvidia-device-plugin of it (it has: %s): "
                         "as with an image the node cannot pull, its Pod does not start", node, version, ", ".join(sorted(self.releases)) or "none")
            return []
        config_manager = self.config_manager if binary == self.binary else os.path.join(os.path.dirname(binary), "config-manager")
        state_text = _nvml.render(state_entries, "gpushare.k8s GPU Operator stand-in: the simulated GPUs of node %s" % node)
        restart_key = (state_text, strategy, configs is None, default_config, pod, binary)
        agent = self._agents.get(node)
        if agent is not None and agent["proc"].poll() is None:
            if agent["restart_key"] == restart_key:
                return []
            self._stop(node)
            reason = "restarted"
        elif agent is not None:
            if time.monotonic() - agent["started"] < DEVICE_PLUGIN_BACKOFF and agent["restart_key"] == restart_key:
                return []
            reason = "started again (it exited %s; its log: %s)" % (agent["proc"].returncode, os.path.join(directory, "device-plugin.log"))
        else:
            reason = "started"
        state = os.path.join(directory, NVML_STATE)
        _hold_state(state, state_entries, node)
        env = device_plugin_env(self.mock_dir, directory, state, _nvml.device_count(state_entries), strategy, node)
        config = None
        if configs is not None:
            # a new Pod: a new emptyDir for the config file, which config-manager-init points at the node's config
            config_dir = os.path.join(directory, CONFIG_DIR)
            os.makedirs(config_dir, mode=0o700, exist_ok=True)
            config = os.path.join(config_dir, "config.yaml")
            if os.path.lexists(config):
                os.unlink(config)
            env.update(config_manager_env(directory, node, self.kubeconfig, default_config))
        argv = device_plugin_command(binary, self.kubelet, directory, config, node=node, kubeconfig=self.kubeconfig,
                                     config_manager=config_manager if configs is not None else None)
        with open(os.path.join(directory, "device-plugin.log"), "ab") as log:
            log.write(("\n$ %s (%s%s)\n" % (" ".join(argv[argv.index(self.kubelet):]), reason, ", release %s" % version if version else "")).encode("utf-8"))
            log.flush()
            # a long-running agent of the stand-in, not a command run to its end (run_command's)
            proc = subprocess.Popen(  # pylint: disable=consider-using-with,ansible-bad-function
                argv, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env)
        self.starts += 1
        self._agents[node] = {"proc": proc, "restart_key": restart_key, "started": time.monotonic()}
        return ["%s: device plugin %s%s" % (node, "%s " % version if version else "", reason)]

    def _stop(self, node):
        agent = self._agents.pop(node, None)
        if agent is None:
            return
        proc = agent["proc"]
        if proc.poll() is None:
            proc.stdin.close()  # device-plugin-kubelet stops the plugin and itself
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        elif proc.stdin:
            proc.stdin.close()

    def nodes(self):
        """The nodes whose processes the stand-in started."""
        return sorted(list(self._agents))

    def next_restart(self):
        """Seconds until the earliest exited node's processes may start again (``None``: none exited): the caller's next
        pass is due then, as the kubelet restarts a crashed container without any event."""
        due = [agent["started"] + DEVICE_PLUGIN_BACKOFF - time.monotonic() for agent in list(self._agents.values()) if agent["proc"].poll() is not None]
        return max(0.0, min(due)) if due else None

    def keep_only(self, nodes):
        """Stop the plugins of nodes not in ``nodes`` (deleted, or no ClusterPolicy any more); return what was done."""
        gone = sorted(set(self._agents) - set(nodes))
        for node in gone:
            self._stop(node)
        return ["%s: device plugin stopped" % node for node in gone]

    def close(self):
        self.keep_only(())


def _text(text):
    return text if text.endswith("\n") else text + "\n"


def _write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


# The digest of what the stand-in last derived for an operand DaemonSet (the operator keeps nvidia.com/last-applied-hash).
STANDIN_SPEC_ANNOTATION = "gpushare.k8s/standin-spec"
# The image of the operand containers, as the operator composes it from the ClusterPolicy's spec.devicePlugin and
# spec.gfd {repository, image, version} (:func:`operand_image`); where the lab's ClusterPolicy leaves one out, the stand-in
# fills in this repository, NVIDIA's image name and the release it runs by default. No Pod is run from it (the DaemonSets
# select the operator's nvidia.com/gpu.deploy.* node labels, which the lab's nodes do not carry): the stand-in runs the
# containers as processes, NVIDIA's binaries of the release the image names.
STANDIN_REPOSITORY = "gpushare-lab"
OPERAND_IMAGE = "k8s-device-plugin"
_CONFIG_MOUNT = {"name": "config", "mountPath": "/config"}
_AVAILABLE_MOUNT = {"name": "available-configs", "mountPath": "/available-configs"}


def _env(**values):
    return [{"name": key, "value": value} for key, value in values.items()]


def operand_image(section, default_version=None):
    """The image of an operand whose ClusterPolicy section (``spec.devicePlugin``, ``spec.gfd``) is ``section``, composed as
    the operator composes it: ``<repository>/<image>:<version>`` (``@<version>`` for a ``sha256:`` digest), or ``image``
    alone when it is the only one set (a full reference). A field the section leaves out is the stand-in's
    (:data:`STANDIN_REPOSITORY`, :data:`OPERAND_IMAGE`, ``default_version``)."""
    section = section if isinstance(section, dict) else {}
    repository, image, version = (str(section.get(key) or "") for key in ("repository", "image", "version"))
    if image and not repository and not version:
        return image
    repository, image, version = repository or STANDIN_REPOSITORY, image or OPERAND_IMAGE, version or default_version
    if not version:
        return "%s/%s" % (repository, image)
    return "%s/%s%s%s" % (repository, image, "@" if version.startswith("sha256:") else ":", version)


def operand_daemonset(name, container, namespace, policy, default_version=None):
    """The operand DaemonSet ``name`` (main container ``container``) the operator derives from ``policy``, as far as
    the node side reads it: the image from the ClusterPolicy's ``devicePlugin`` (``gfd`` for GFD's) section
    (:func:`operand_image`, ``default_version`` where the section names none) on every container; the ClusterPolicy's
    ``mig.strategy`` as ``MIG_STRATEGY``; with ``devicePlugin.config``, the ConfigMap as a volume, ``CONFIG_FILE`` and
    config-manager's init and sidecar containers with the operator's environment (``DEFAULT_CONFIG``,
    ``FALLBACK_STRATEGIES=empty``, ``ONESHOT``, ``SEND_SIGNAL``, ``PROCESS_TO_SIGNAL``).
    """
    spec = policy.get("spec") or {}
    config = (spec.get("devicePlugin") or {}).get("config") or {}
    strategy = (spec.get("mig") or {}).get("strategy")
    image = operand_image(spec.get("gfd" if container == "gpu-feature-discovery" else "devicePlugin"), default_version)
    main = {"name": container, "image": image, "env": _env(**({"MIG_STRATEGY": strategy} if strategy else {}))}
    if container == "nvidia-device-plugin":
        main["env"] += _env(MPS_ROOT=MPS_ROOT)
    pod = {"nodeSelector": {"nvidia.com/gpu.deploy.%s" % ("device-plugin" if container == "nvidia-device-plugin" else container): "true"},
           "containers": [main]}
    if config.get("name"):
        main["env"] += _env(CONFIG_FILE="/config/config.yaml")
        main["volumeMounts"] = [_CONFIG_MOUNT]
        common = dict(NODE_LABEL=_op.DEVICE_PLUGIN_CONFIG_LABEL, CONFIG_FILE_SRCDIR="/available-configs", CONFIG_FILE_DST="/config/config.yaml",
                      DEFAULT_CONFIG=config.get("default") or "", FALLBACK_STRATEGIES="empty")
        pod["initContainers"] = [{"name": "config-manager-init", "image": image, "volumeMounts": [_AVAILABLE_MOUNT, _CONFIG_MOUNT],
                                  "env": _env(ONESHOT="true", SEND_SIGNAL="false", **common)}]
        pod["containers"].append({"name": "config-manager", "image": image, "volumeMounts": [_AVAILABLE_MOUNT, _CONFIG_MOUNT],
                                  "env": _env(ONESHOT="false", SEND_SIGNAL="true", SIGNAL="1", PROCESS_TO_SIGNAL=container, **common)})
        pod["shareProcessNamespace"] = True
        pod["volumes"] = [{"name": "available-configs", "configMap": {"name": config["name"]}}, {"name": "config", "emptyDir": {}}]
    labels = {"app": name}
    metadata = policy.get("metadata") or {}
    body = {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels),
                     "ownerReferences": [{"apiVersion": _op.CLUSTER_POLICY_GROUP + "/" + _op.CLUSTER_POLICY_VERSION, "kind": _op.CLUSTER_POLICY_KIND,
                                          "name": metadata.get("name"), "uid": metadata.get("uid"), "controller": True}],
                     "annotations": {}},
        "spec": {"selector": {"matchLabels": dict(labels)}, "template": {"metadata": {"labels": dict(labels)}, "spec": pod}},
    }
    body["metadata"]["annotations"][STANDIN_SPEC_ANNOTATION] = hashlib.sha256(json.dumps(body["spec"], sort_keys=True).encode("utf-8")).hexdigest()[:16]
    return body


def daemonset_pod(daemonset):
    """What a node reads of an operand DaemonSet: ``pod`` (a digest of its Pod template: a new one is a rollout),
    ``configmap`` (the ConfigMap its volume mounts, or ``None``), ``default_config`` (config-manager's
    ``DEFAULT_CONFIG``), ``strategy`` (the main container's ``MIG_STRATEGY``, or ``None``), ``image`` (the main
    container's) and ``version`` (the release that image names, :func:`operator_wait.parse_image`; ``None``: none)."""
    template = (daemonset.get("spec") or {}).get("template") or {}
    pod = template.get("spec") or {}

    def env_of(containers, name, key):
        for container in containers or []:
            if container.get("name") == name:
                for item in container.get("env") or []:
                    if item.get("name") == key:
                        return item.get("value")
        return None

    main = [c for c in pod.get("containers") or [] if c.get("name") != "config-manager"]
    configmap = next((v["configMap"].get("name") for v in pod.get("volumes") or [] if v.get("configMap")), None)
    return {
        "pod": hashlib.sha256(json.dumps(template, sort_keys=True).encode("utf-8")).hexdigest()[:16],
        "configmap": configmap,
        "default_config": env_of(pod.get("initContainers"), "config-manager-init", "DEFAULT_CONFIG"),
        "strategy": env_of(main[:1], main[0]["name"] if main else "", "MIG_STRATEGY") or None,
        "image": main[0].get("image") if main else None,
        "version": _wait.parse_image(main[0].get("image") if main else None)["version"],
    }


class StandIn:
    """The reconcile pass. ``reconcile()`` returns a list of what it changed (for the log)."""

    def __init__(self, api_client, namespace, gfd=None, timeout=REQUEST_TIMEOUT, device_plugin=None, mig_parted=None):
        """``gfd`` is the :class:`Gfd` that labels the nodes, ``device_plugin`` the :class:`DevicePlugin` that advertises
        their GPUs and ``mig_parted`` the :class:`MigParted` that partitions them; without them only the readers work
        (gpu_operator_wait uses them)."""
        self._api_client = api_client
        self._gfd = gfd
        self._device_plugin = device_plugin
        self._mig_parted = mig_parted
        self._namespace = namespace
        self._timeout = timeout
        # per node: (config file target, GFD Pod template) -> the config text GFD loaded then
        self._gfd_loaded = {}

    # -- reads ---------------------------------------------------------------

    def next_restart(self):
        """Seconds until a node's exited processes are due to start again, or ``None`` (see :meth:`DevicePlugin.next_restart`)."""
        return None if self._device_plugin is None else self._device_plugin.next_restart()

    def config_targets(self):
        """``{node: file}``: what each running node's config file points at now (read from disk: no API call)."""
        if self._device_plugin is None:
            return {}
        return {node: self._device_plugin.config_target(node) for node in self._device_plugin.nodes()}

    def cluster_policy(self):
        """The ClusterPolicy (the first by name; the operator allows one), or ``None``."""
        try:
            page = call_json(
                Route(self._api_client, "GET", api_path(_op.CLUSTER_POLICY_GROUP + "/" + _op.CLUSTER_POLICY_VERSION, _op.CLUSTER_POLICY_PLURAL)),
                timeout=self._timeout,
            )
        except ApiCallError as exc:
            if exc.status == 404:  # no CRD: no operator configured
                return None
            raise
        items = sorted(page.get("items") or [], key=lambda item: item["metadata"]["name"])
        return items[0] if items else None

    def configmap_data(self, name):
        if not name:
            return None
        try:
            return call_json(Route(self._api_client, "GET", api_path("v1", "configmaps", self._namespace, name)), timeout=self._timeout).get("data") or {}
        except ApiCallError as exc:
            if exc.status == 404:
                return None
            raise

    def daemonsets(self):
        """The operand DaemonSets of the operator's namespace, by name."""
        try:
            page = call_json(Route(self._api_client, "GET", api_path("apps/v1", "daemonsets", self._namespace)), timeout=self._timeout)
        except ApiCallError as exc:
            if exc.status == 404:
                return {}
            raise
        return {item["metadata"]["name"]: item for item in page.get("items") or []}

    # -- writes --------------------------------------------------------------

    def _patch_metadata(self, name, labels=None, annotations=None):
        metadata = {}
        if labels:
            metadata["labels"] = labels
        if annotations:
            metadata["annotations"] = annotations
        if metadata:
            call_json(Route(self._api_client, "PATCH", api_path("v1", "nodes", name=name)), {"metadata": metadata}, timeout=self._timeout,
                      _content_type=MERGE_PATCH)

    def _ensure_daemonsets(self, policy):
        """Create or update the operand DaemonSets the operator derives from ``policy`` (:func:`operand_daemonset`) and
        return them as stored. A DaemonSet is written only when what the stand-in derives changed (its digest is kept
        in an annotation, as the operator keeps ``nvidia.com/last-applied-hash``); its Pod template's annotations
        (``kubectl rollout restart``'s, the roles') are never touched."""
        live = self.daemonsets()
        stored = {}
        for name, container in ((_op.DEVICE_PLUGIN_DAEMONSET, "nvidia-device-plugin"), (_op.GFD_DAEMONSET, "gpu-feature-discovery")):
            wanted = operand_daemonset(name, container, self._namespace, policy, getattr(self._device_plugin, "version", None))
            current = live.get(name)
            digest = wanted["metadata"]["annotations"][STANDIN_SPEC_ANNOTATION]
            if current is not None and (current["metadata"].get("annotations") or {}).get(STANDIN_SPEC_ANNOTATION) == digest:
                stored[name] = current
                continue
            if current is None:
                route = Route(self._api_client, "POST", api_path("apps/v1", "daemonsets", self._namespace))
                stored[name] = call_json(route, wanted, timeout=self._timeout)
                continue
            # a replace of the Pod spec (a merge patch would keep the containers and volumes a config removal drops),
            # the template's annotations kept; a conflict fails the pass, and the next one reads afresh
            current["metadata"].setdefault("annotations", {}).update(wanted["metadata"]["annotations"])
            current["metadata"]["ownerReferences"] = wanted["metadata"]["ownerReferences"]
            current["spec"]["template"]["spec"] = wanted["spec"]["template"]["spec"]
            route = Route(self._api_client, "PUT", api_path("apps/v1", "daemonsets", self._namespace, name))
            stored[name] = call_json(route, current, timeout=self._timeout)
        return stored

    # -- the pass ------------------------------------------------------------

    def reconcile(self):
        if self._gfd is None or self._device_plugin is None or self._mig_parted is None:
            raise ValueError("StandIn.reconcile needs the Gfd that labels the nodes, the DevicePlugin that advertises their GPUs and "
                             "the MigParted that partitions them")
        policy = self.cluster_policy()
        if policy is None:  # no operator: no operand runs
            return self._device_plugin.keep_only(())
        spec = policy.get("spec") or {}
        mm_config = (spec.get("migManager") or {}).get("config") or {}
        # the node side reads the DaemonSets, as the kubelet and config-manager on a real node do
        daemonsets = self._ensure_daemonsets(policy)
        plugin_pod = daemonset_pod(daemonsets[_op.DEVICE_PLUGIN_DAEMONSET])
        gfd_pod = daemonset_pod(daemonsets[_op.GFD_DAEMONSET])
        plugin_pod["data"] = self.configmap_data(plugin_pod["configmap"])
        mm_data = self.configmap_data(mm_config.get("name"))
        actions = []
        gpu_nodes = []
        for node in list_pages(Route(self._api_client, "GET", api_path("v1", "nodes")), timeout=self._timeout):
            hardware = hardware_of(node)
            if hardware is None:
                continue
            gpu_nodes.append(node["metadata"]["name"])
            actions.extend(self._reconcile_node(node, hardware, plugin_pod, gfd_pod, mm_config, mm_data))
        return actions + self._device_plugin.keep_only(gpu_nodes)

    def _mig_manager(self, node, hardware, machine, mm_config, mm_data):
        """The MIG manager's part for ``node``: NVIDIA's mig-parted applies the layout its label names; returns
        ``(gpus, actions)``, ``gpus`` the node's GPUs afterwards (the state file's entries). ``hardware`` is
        ``(count, product)``, ``machine`` its GPUs with MIG off (:func:`nvml_state.node_state`)."""
        name = node["metadata"]["name"]
        gpus = self._mig_parted.gpus(name, machine)
        labels = node["metadata"].get("labels") or {}
        annotations = node["metadata"].get("annotations") or {}
        wanted = labels.get(_op.MIG_CONFIG_LABEL)
        if not wanted:
            return gpus, []
        config_text = (mm_data or {}).get(_op.MIG_PARTED_KEY)
        digest = _layout_digest(config_text, wanted)
        state = labels.get(_op.MIG_STATE_LABEL)
        applied = _json_annotation(annotations, _op.MIG_APPLIED_ANNOTATION) or {}
        if applied.get("layout") == wanted and applied.get("digest") == digest and state == "success":
            return gpus, []
        failure = _json_annotation(annotations, _op.MIG_FAILURE_ANNOTATION) or {}
        if failure.get("layout") == wanted and failure.get("digest") == digest and state == "failed":
            return gpus, []
        self._patch_metadata(name, labels={_op.MIG_STATE_LABEL: "pending"})
        if mm_data is None:
            ok, problem = False, "ConfigMap %s/%s named by ClusterPolicy spec.migManager.config.name does not exist" % (
                self._namespace, mm_config.get("name"))
        elif config_text is None:
            ok, problem = False, "ConfigMap %s/%s has no key %s" % (self._namespace, mm_config.get("name"), _op.MIG_PARTED_KEY)
        else:
            ok, problem = self._mig_parted.apply(name, config_text, wanted)
            gpus = self._mig_parted.gpus(name, machine)
        if not ok:
            count, product = hardware
            reason = "cannot apply %s on %s (%d x %s): %s" % (wanted, name, count, product, problem)
            self._patch_metadata(
                name,
                labels={_op.MIG_STATE_LABEL: "failed"},
                annotations={_op.MIG_FAILURE_ANNOTATION: json.dumps({"layout": wanted, "digest": digest, "reason": reason}, sort_keys=True)},
            )
            return gpus, ["%s: mig.config %s failed: %s" % (name, wanted, problem)]
        self._patch_metadata(
            name,
            labels={_op.MIG_STATE_LABEL: "success"},
            annotations={
                _op.MIG_APPLIED_ANNOTATION: json.dumps({"layout": wanted, "digest": digest}, sort_keys=True),
                _op.MIG_FAILURE_ANNOTATION: None,
            },
        )
        return gpus, ["%s: mig.config %s applied by nvidia-mig-parted" % (name, wanted)]

    def _reconcile_node(self, node, hardware, plugin_pod, gfd_pod, mm_config, mm_data):
        name = node["metadata"]["name"]
        count, product = hardware
        try:
            machine = _nvml.node_state(product, count, node=name)
        except _nvml.NvmlStateError as exc:
            _LOG.warning("%s: the simulated GPUs cannot be described to NVIDIA's binaries: %s", name, exc)
            return []
        state, actions = self._mig_manager(node, hardware, machine, mm_config, mm_data)
        labels = node["metadata"].get("labels") or {}
        configs = None
        if plugin_pod["configmap"]:
            if plugin_pod["data"] is None:
                # the kubelet cannot mount a missing ConfigMap: the Pod does not start, the running one keeps going
                _LOG.warning("%s: ConfigMap %s/%s the device plugin's DaemonSet mounts does not exist: its Pod cannot start",
                             name, self._namespace, plugin_pod["configmap"])
                return actions
            configs = plugin_pod["data"]
        actions.extend(self._device_plugin.ensure(name, state, configs, plugin_pod["default_config"], plugin_pod["strategy"], plugin_pod["pod"],
                                                  plugin_pod["version"] if self._device_plugin.releases else None))
        config_text = None
        if configs is not None:
            # GFD follows the same label with its own config-manager and, like the plugin, reads the file it points at
            # when it switches or when its Pod starts: a content edit alone reaches it at a restart of its DaemonSet.
            target = self._device_plugin.config_target(name)
            if target is None:
                return actions  # config-manager-init has not pointed the node's config file yet
            key = (target, gfd_pod["pod"])
            loaded = self._gfd_loaded.get(name)
            if loaded is None or loaded[0] != key:
                try:
                    with open(target, encoding="utf-8") as handle:
                        loaded = (key, handle.read())
                except OSError as exc:
                    _LOG.warning("%s: cannot read the config file config-manager points at: %s", name, exc)
                    return actions
                self._gfd_loaded[name] = loaded
            config_text = loaded[1]
        try:
            gfd_labels = self._gfd.labels(name, state, config_text, gfd_pod["strategy"], gfd_pod["version"] if self._gfd.releases else None)
        except GfdError as exc:
            # said once per input: the same inputs do not run GFD again, and a pass comes every few seconds
            (_LOG.debug if getattr(exc, "repeated", False) else _LOG.warning)(
                "%s: GFD cannot label the node, its labels are left as they are: %s", name, exc)
            return actions
        annotations = node["metadata"].get("annotations") or {}
        previous = set(filter(None, (annotations.get(GFD_LABELS_ANNOTATION) or "").split(",")))
        patch = gfd_label_patch(gfd_labels, labels, previous)
        names = ",".join(sorted(gfd_labels))
        if patch or annotations.get(GFD_LABELS_ANNOTATION) != names:
            self._patch_metadata(name, labels=patch, annotations={GFD_LABELS_ANNOTATION: names})
        if patch:
            actions.append("%s: GFD labels %s" % (name, ", ".join(sorted(patch))))
        return actions
