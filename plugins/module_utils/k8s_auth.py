# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpushare.k8s maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Build a ``kubernetes.client.ApiClient`` from kubernetes.core-style auth options.

The option names, their aliases and the ``K8S_AUTH_*`` environment variables are
the ones kubernetes.core documents, so one ``module_defaults`` block configures
both collections. This file imports nothing from Ansible: modules pass their
``params`` in, tests call it directly.

Precedence, as in kubernetes.core:

1. an option given to the task;
2. its ``K8S_AUTH_*`` environment variable;
3. ``host`` plus a credential (``api_key``, ``username``/``password`` or
   ``client_cert``/``client_key``) is enough on its own, no file is read;
4. otherwise ``kubeconfig``/``context`` are loaded when given, else the
   in-cluster service account is tried, then the default kubeconfig
   (``$KUBECONFIG`` or ``~/.kube/config``);
5. explicit options override what the kubeconfig said.

``request_timeout`` (not a kubernetes.core option: its 6.2.0 modules have none) bounds
every request made through the client ``build_api_client`` returns: an API server that
stops answering fails the call after that many seconds instead of hanging the task.
"""

from __future__ import annotations

import copy
import math
import os
import traceback

try:
    import urllib3
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.config.config_exception import ConfigException
except ImportError:
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()
    urllib3 = None
    k8s_client = None
    k8s_config = None
    ConfigException = Exception
else:
    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None


# Argument spec shared by every module of the collection (merge it into the
# module's own spec). Kept in step with plugins/doc_fragments/k8s_auth.py.
# kubeconfig is not no_log: a path is no secret, and masking it turned every message naming the file into
# "********". A kubeconfig given as a dict holds credentials: modules call hide_kubeconfig_credentials.
AUTH_ARG_SPEC = {
    "kubeconfig": {"type": "raw", "no_log": False},
    "context": {"type": "str"},
    "host": {"type": "str"},
    "api_key": {"type": "str", "no_log": True},
    "username": {"type": "str"},
    "password": {"type": "str", "no_log": True},
    "validate_certs": {"type": "bool", "aliases": ["verify_ssl"]},
    "ca_cert": {"type": "path", "aliases": ["ssl_ca_cert"]},
    "client_cert": {"type": "path", "aliases": ["cert_file"]},
    "client_key": {"type": "path", "aliases": ["key_file"]},
    "proxy": {"type": "str"},
    "request_timeout": {"type": "float", "default": 30},
}

AUTH_OPTIONS = tuple(AUTH_ARG_SPEC)

# Environment fallbacks, first match wins. The second name of a pair is the
# kubernetes client's own spelling, which kubernetes.core accepts as well.
AUTH_ENV_VARS = {
    "kubeconfig": ("K8S_AUTH_KUBECONFIG",),
    "context": ("K8S_AUTH_CONTEXT",),
    "host": ("K8S_AUTH_HOST",),
    "api_key": ("K8S_AUTH_API_KEY",),
    "username": ("K8S_AUTH_USERNAME",),
    "password": ("K8S_AUTH_PASSWORD",),
    "validate_certs": ("K8S_AUTH_VALIDATE_CERTS", "K8S_AUTH_VERIFY_SSL"),
    "ca_cert": ("K8S_AUTH_CA_CERT", "K8S_AUTH_SSL_CA_CERT"),
    "client_cert": ("K8S_AUTH_CLIENT_CERT", "K8S_AUTH_CERT_FILE"),
    "client_key": ("K8S_AUTH_CLIENT_KEY", "K8S_AUTH_KEY_FILE"),
    "proxy": ("K8S_AUTH_PROXY",),
    "request_timeout": (),
}

_FALSE_STRINGS = ("0", "false", "no", "off", "n", "f")
_PATH_OPTIONS = ("ca_cert", "client_cert", "client_key")

# Seconds one request may take when the task gives no request_timeout.
DEFAULT_REQUEST_TIMEOUT = AUTH_ARG_SPEC["request_timeout"]["default"]

# Smallest pool worth keeping: a LIST and a few PATCHes in flight.
MIN_POOL_SIZE = 4


class K8sAuthError(Exception):
    """The auth options cannot produce a working client configuration."""


def kubeconfig_credentials(kubeconfig):
    """The strings to keep out of output from a kubeconfig given as a dict: every value under ``users[].user``.

    That is where a kubeconfig holds tokens, passwords, client keys and certificates, and ``exec`` and
    ``auth-provider`` settings. A path (or anything but a dict) holds none.
    """
    found = set()

    def walk(value):
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)
        elif isinstance(value, str) and value:
            found.add(value)

    if isinstance(kubeconfig, dict):
        for entry in kubeconfig.get("users") or []:
            if isinstance(entry, dict):
                walk(entry.get("user"))
    return found


def hide_kubeconfig_credentials(module):
    """Mask the credentials of a dict ``kubeconfig`` option in everything ``module`` returns (an ``AnsibleModule``)."""
    module.no_log_values.update(kubeconfig_credentials(module.params.get("kubeconfig")))


def _env_bool(value):
    return value.strip().lower() not in _FALSE_STRINGS


def resolve_auth_params(params, environ=None):
    """Return the effective auth options: task options first, then ``K8S_AUTH_*``.

    ``params`` may hold other (non-auth) keys; they are ignored. Values that are
    ``None`` count as unset. Environment strings are converted to the option's
    type (``validate_certs`` to bool, paths expanded).
    """
    environ = os.environ if environ is None else environ
    resolved = {}
    for option in AUTH_OPTIONS:
        value = params.get(option) if params else None
        if value is None:
            for var in AUTH_ENV_VARS[option]:
                env_value = environ.get(var)
                if env_value is not None and env_value != "":
                    value = _env_bool(env_value) if option == "validate_certs" else env_value
                    break
        if value is None:
            continue
        if option in _PATH_OPTIONS:
            value = os.path.expanduser(value)
        resolved[option] = value
    return resolved


def _has_own_credentials(auth):
    if not auth.get("host"):
        return False
    return bool(
        auth.get("api_key")
        or (auth.get("username") and auth.get("password"))
        or (auth.get("client_cert") and auth.get("client_key"))
    )


def _kubeconfig_paths(kubeconfig):
    paths = [os.path.expanduser(p) for p in kubeconfig.split(os.pathsep) if p]
    missing = [p for p in paths if not os.path.exists(p)]
    if not paths or missing:
        raise K8sAuthError(
            "kubeconfig: file {0} does not exist; pass the path of a kubeconfig file "
            "(option kubeconfig or K8S_AUTH_KUBECONFIG)".format(", ".join(missing) or repr(kubeconfig))
        )
    return os.pathsep.join(paths)


def _load_kubeconfig(configuration, auth):
    kubeconfig = auth.get("kubeconfig")
    context = auth.get("context")
    try:
        if isinstance(kubeconfig, dict):
            k8s_config.load_kube_config_from_dict(
                config_dict=kubeconfig,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        elif kubeconfig is None or isinstance(kubeconfig, str):
            config_file = _kubeconfig_paths(kubeconfig) if kubeconfig else None
            k8s_config.load_kube_config(
                config_file=config_file,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        else:
            raise K8sAuthError(
                "kubeconfig: expected a file path or a kubeconfig dict, got {0}".format(
                    type(kubeconfig).__name__
                )
            )
    except K8sAuthError:
        raise
    except (ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
        where = "the kubeconfig dict" if isinstance(kubeconfig, dict) else (kubeconfig or "the default kubeconfig")
        hint = " (context {0!r})".format(context) if context else ""
        raise K8sAuthError("could not load {0}{1}: {2}".format(where, hint, exc))


def _apply_overrides(configuration, overrides):
    """Set explicit options on ``configuration`` and keep them set.

    A kubeconfig with a token installs a refresh hook that rewrites the token,
    host and TLS files before every request; wrap it so the options given to
    the task still win afterwards.
    """
    if not overrides:
        return

    def apply(target):
        for key, value in overrides.items():
            setattr(target, key, copy.copy(value))

    apply(configuration)
    hook = configuration.refresh_api_key_hook
    if hook is not None:

        def refresh(target):
            hook(target)
            apply(target)

        configuration.refresh_api_key_hook = refresh


def build_configuration(params, environ=None, pool_maxsize=None):
    """Return a ``kubernetes.client.Configuration`` for the given options.

    ``pool_maxsize`` sizes the urllib3 connection pool: pass the number of
    requests the caller runs at once so threads never wait for a socket.
    """
    if not HAS_KUBERNETES:
        raise K8sAuthError("the kubernetes Python library is required")

    auth = resolve_auth_params(params, environ)
    configuration = k8s_client.Configuration()

    if _has_own_credentials(auth):
        pass
    elif auth.get("kubeconfig") or auth.get("context"):
        _load_kubeconfig(configuration, auth)
    else:
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except ConfigException:
            try:
                _load_kubeconfig(configuration, auth)
            except K8sAuthError as exc:
                raise K8sAuthError(
                    "no Kubernetes credentials found: not running in a cluster and {0}. "
                    "Set kubeconfig (or K8S_AUTH_KUBECONFIG), or host with api_key.".format(exc)
                )

    overrides = {}
    if auth.get("host"):
        overrides["host"] = auth["host"].rstrip("/")
    if auth.get("api_key"):
        overrides["api_key"] = {"authorization": "Bearer {0}".format(auth["api_key"])}
    elif auth.get("username") and auth.get("password"):
        # The generated client has no basic-auth setting of its own: send the
        # header through the slot the bearer token uses.
        basic = k8s_client.Configuration(username=auth["username"], password=auth["password"])
        overrides["api_key"] = {"authorization": basic.get_basic_auth_token()}
    if "api_key" in overrides:
        overrides["api_key_prefix"] = {}
    if auth.get("validate_certs") is not None:
        overrides["verify_ssl"] = bool(auth["validate_certs"])
    if auth.get("ca_cert"):
        overrides["ssl_ca_cert"] = auth["ca_cert"]
    if auth.get("client_cert"):
        overrides["cert_file"] = auth["client_cert"]
    if auth.get("client_key"):
        overrides["key_file"] = auth["client_key"]
    if auth.get("proxy"):
        overrides["proxy"] = auth["proxy"]
    _apply_overrides(configuration, overrides)

    if pool_maxsize is not None:
        configuration.connection_pool_maxsize = max(int(pool_maxsize), MIN_POOL_SIZE)
    return configuration


def request_timeout(params):
    """The ``request_timeout`` option in seconds (a float above 0), its default when unset."""
    value = (params or {}).get("request_timeout")
    if value is None:
        return float(DEFAULT_REQUEST_TIMEOUT)
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = 0.0
    if isinstance(value, bool) or not (seconds > 0 and math.isfinite(seconds)):
        raise K8sAuthError("request_timeout: {0!r} is not a number of seconds above 0; set e.g. request_timeout: 30".format(value))
    return seconds


if HAS_KUBERNETES:

    class TimedApiClient(k8s_client.ApiClient):
        """An ApiClient whose requests time out after ``request_timeout`` seconds unless a call passes its own."""

        request_timeout = float(DEFAULT_REQUEST_TIMEOUT)

        def call_api(self, *args, **kwargs):  # pylint: disable=arguments-differ
            # (method, url, header_params, body, post_params, _request_timeout): the sixth may come positionally.
            if len(args) < 6 and kwargs.get("_request_timeout") is None:
                kwargs["_request_timeout"] = self.request_timeout
            return super().call_api(*args, **kwargs)

else:
    TimedApiClient = None


def build_api_client(params, environ=None, pool_maxsize=None):
    """Return a ``kubernetes.client.ApiClient`` built from the auth options.

    Every request through it is bounded by the ``request_timeout`` option (connect and read).
    """
    seconds = request_timeout(params)
    configuration = build_configuration(params, environ=environ, pool_maxsize=pool_maxsize)
    # urllib3 retries a read that timed out (three more times by default): one timeout is the answer.
    # Refused connections are still retried at once (an API server restarting).
    configuration.retries = urllib3.util.Retry(total=3, read=0, redirect=0)
    api_client = TimedApiClient(configuration)
    api_client.request_timeout = seconds
    return api_client
