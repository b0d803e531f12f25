"""Kubernetes manifests of a Paddock deployment, printed by ``./paddock k8s --gpus N``.

Plain YAML for ``kubectl apply -f``: a namespace; a ConfigMap of the settings (artifacts in an
S3-compatible bucket); the migrations Job, which every other Paddock pod waits for in an init
container (``manage.py migrate --check``); daphne (web) behind a WebSocket-capable Ingress;
``N`` training workers, one GPU each (``nvidia.com/gpu: 1``, concurrency 1); a cpu-queue worker;
exactly one Celery beat (``replicas: 1``, ``Recreate``); PostgreSQL and Redis from their official
images (or external ones); and, with ``--keda``, a KEDA ``ScaledObject`` that scales the GPU
workers on the ``gpu`` queue's length plus the generations in training. Secrets are read from
the Secret ``paddock`` that the operator creates (docs/kubernetes.md).

Standard library only: the launcher runs before the virtualenv exists. See docs/kubernetes.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: Official images, pinned (never ``latest``; not Bitnami's, whose versioned tags stopped being free).
POSTGRES_IMAGE = "postgres:17.6-bookworm"
REDIS_IMAGE = "redis:7.4.5-bookworm"
SECRET = "paddock"
CONFIG = "paddock-config"
VAR_DIR = "/var/lib/paddock"
DATA_DIR = "/data"
#: What the Secret must hold; AWS keys are optional (a web identity or instance role also works).
SECRET_KEYS = ("SECRET_KEY", "DATABASE_URL", "POSTGRES_PASSWORD")
OPTIONAL_SECRET_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


class ManifestError(ValueError):
    """A bad option, with a message naming it (the launcher exits 2)."""


def paddock_version() -> str:
    """The version in ``trainer/version.py``, read as text (importing ``trainer`` needs torch)."""
    text = (ROOT / "trainer" / "version.py").read_text()
    match = re.search(r'__version__\s*=\s*"([^"]+)"', text)
    if not match:
        raise ManifestError("trainer/version.py has no __version__")
    return match.group(1)


@dataclass(frozen=True)
class Options:
    """What ``./paddock k8s`` asks for; each maps to one flag.

    Attributes:
        gpus: training workers, one GPU each (>= 1); with ``keda`` the most it scales to.
        image: the Paddock image with an explicit tag (``registry/paddock:0.1.0``).
        namespace: where everything goes.
        host: the public host name (Ingress rule, ``ALLOWED_HOSTS``, ``CSRF_TRUSTED_ORIGINS``).
        ingress_class: the Ingress controller's class (ingress-nginx: ``nginx``).
        bucket, s3_endpoint, s3_region, s3_prefix: ``PADDOCK_S3_*`` (endpoint empty on AWS).
        data_claim: a PersistentVolumeClaim holding the market data files, mounted read-only.
        cpu_workers: replicas of the cpu-queue worker.
        web_replicas: replicas of daphne.
        generation_time_limit: ``PADDOCK_GENERATION_TIME_LIMIT`` in seconds; a GPU worker's
            termination grace is that plus two minutes, so a drained pod finishes its generation.
        keda: add a KEDA ScaledObject for the GPU workers (0 to ``gpus`` replicas).
        external_services: use a PostgreSQL and Redis of your own (no objects for them);
            ``redis_url`` then says where Redis is.
        redis_url: ``REDIS_URL`` (default: the bundled Redis Service).
    """

    gpus: int
    image: str = ""
    namespace: str = "paddock"
    host: str = "paddock.example.com"
    ingress_class: str = "nginx"
    bucket: str = "paddock-artifacts"
    s3_endpoint: str = ""
    s3_region: str = ""
    s3_prefix: str = ""
    data_claim: str = "paddock-data"
    cpu_workers: int = 1
    web_replicas: int = 2
    generation_time_limit: int = 3600
    keda: bool = False
    external_services: bool = False
    redis_url: str = ""
    extra_labels: dict[str, str] = field(default_factory=dict)


_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _check(options: Options) -> Options:
    if options.gpus < 1:
        raise ManifestError(f"--gpus: at least 1 GPU worker, got {options.gpus}")
    image = options.image or f"paddock:{paddock_version()}"
    tag = image.rsplit("/", 1)[-1].partition("@")[0]
    if ":" not in tag or tag.endswith(":latest"):
        raise ManifestError(f"--image: give an explicit version tag (not latest), e.g. paddock:0.1.0; got {image!r}")
    if "bitnami" in image.lower():
        raise ManifestError("--image: Bitnami images are not used (their versioned tags are no longer public)")
    for flag, value in (("--namespace", options.namespace), ("--data-claim", options.data_claim)):
        if not _NAME.match(value) or len(value) > 63:
            raise ManifestError(f"{flag}: expected a DNS label (a-z, 0-9, '-'), got {value!r}")
    if not options.host or "/" in options.host or ":" in options.host:
        raise ManifestError(f"--host: expected a host name like paddock.example.com, got {options.host!r}")
    if not options.bucket:
        raise ManifestError("--bucket: the S3 bucket of the artifacts is required")
    if options.s3_endpoint and not options.s3_endpoint.startswith(("http://", "https://")):
        raise ManifestError(f"--s3-endpoint: expected http(s)://host:port, got {options.s3_endpoint!r}")
    if options.cpu_workers < 1 or options.web_replicas < 1:
        raise ManifestError("--cpu-workers and --web-replicas: at least 1")
    if options.generation_time_limit < 10:
        raise ManifestError(f"--generation-time-limit: at least 10 s, got {options.generation_time_limit}")
    if options.external_services and not options.redis_url:
        raise ManifestError("--redis-url: required with --external-services (e.g. redis://redis.internal:6379/0)")
    return Options(**{**options.__dict__, "image": image})


# --- building blocks ----------------------------------------------------------------------------


def _labels(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "paddock", "app.kubernetes.io/component": component}


def _meta(name: str, o: Options, component: str) -> dict[str, Any]:
    return {"name": name, "namespace": o.namespace, "labels": {**_labels(component), **o.extra_labels}}


def _redis_url(o: Options) -> str:
    return o.redis_url or f"redis://paddock-redis.{o.namespace}.svc.cluster.local:6379/0"


def _app_env(extra: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Secrets from the Secret; everything else comes from the ConfigMap (``envFrom``)."""
    env: list[dict[str, Any]] = [
        {"name": key, "valueFrom": {"secretKeyRef": {"name": SECRET, "key": key}}}
        for key in SECRET_KEYS
        if key != "POSTGRES_PASSWORD"
    ]
    env += [
        {"name": key, "valueFrom": {"secretKeyRef": {"name": SECRET, "key": key, "optional": True}}}
        for key in OPTIONAL_SECRET_KEYS
    ]
    env += [{"name": k, "value": v} for k, v in (extra or {}).items()]
    return env


def _app_container(o: Options, name: str, command: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "image": o.image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "envFrom": [{"configMapRef": {"name": CONFIG}}],
        "env": _app_env(env),
        "volumeMounts": [
            {"name": "var", "mountPath": VAR_DIR},
            {"name": "data", "mountPath": DATA_DIR, "readOnly": True},
        ],
        "securityContext": {"allowPrivilegeEscalation": False},
    }


#: Every Paddock pod but the Job waits for this: the database answers and holds every migration.
WAIT_FOR_MIGRATIONS = (
    "until python manage.py migrate --check >/dev/null 2>&1; "
    "do echo 'waiting for the migrations Job (manage.py migrate --check)'; sleep 5; done"
)


def _pod_spec(o: Options, containers: list[dict[str, Any]], *, grace_s: int, wait: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": grace_s,
        "containers": containers,
        "volumes": [
            # local state only (caches, temporary files): artifacts live in the bucket
            {"name": "var", "emptyDir": {}},
            {"name": "data", "persistentVolumeClaim": {"claimName": o.data_claim, "readOnly": True}},
        ],
    }
    if wait:
        init = _app_container(o, "wait-for-migrations", ["sh", "-c", WAIT_FOR_MIGRATIONS])
        spec["initContainers"] = [init]
    return spec


def _deployment(
    o: Options, name: str, component: str, pod: dict[str, Any], *, replicas: int, recreate: bool = False
) -> dict[str, Any]:
    strategy = (
        {"type": "Recreate"}
        if recreate
        else {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    )
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(name, o, component),
        "spec": {
            "replicas": replicas,
            "strategy": strategy,
            "selector": {"matchLabels": _labels(component)},
            "template": {"metadata": {"labels": _labels(component)}, "spec": pod},
        },
    }


def _worker_probes(node: str) -> dict[str, Any]:
    """Probes of a Celery worker: its heartbeat in Redis (``manage.py worker_alive``)."""
    check = {"exec": {"command": ["sh", "-c", f'exec python manage.py worker_alive "{node}"']}}
    return {
        "startupProbe": {**check, "periodSeconds": 5, "timeoutSeconds": 20, "failureThreshold": 36},
        "readinessProbe": {**check, "periodSeconds": 15, "timeoutSeconds": 20, "failureThreshold": 2},
        "livenessProbe": {**check, "periodSeconds": 30, "timeoutSeconds": 20, "failureThreshold": 4},
    }


def _celery_worker(queue: str, node: str, concurrency: int) -> list[str]:
    return [
        "celery", "-A", "webapp.config.celery", "worker", "-Q", queue, "-c", str(concurrency), "-n", node,
        "--loglevel", "INFO", "--without-gossip", "--without-mingle",
    ]  # fmt: skip


# --- the objects --------------------------------------------------------------------------------


def namespace(o: Options) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": o.namespace, "labels": _labels("namespace")}}


def config_map(o: Options) -> dict[str, Any]:
    data = {
        "DEBUG": "0",
        "ALLOWED_HOSTS": o.host,
        "CSRF_TRUSTED_ORIGINS": f"https://{o.host}",
        "REDIS_URL": _redis_url(o),
        "PADDOCK_VAR_DIR": VAR_DIR,
        "PADDOCK_DATA_DIR": DATA_DIR,
        "PADDOCK_GENERATION_TIME_LIMIT": str(o.generation_time_limit),
        "PADDOCK_STORAGE": "s3",
        "PADDOCK_S3_BUCKET": o.bucket,
        "PADDOCK_TORCH_THREADS": "1",
        "PADDOCK_LOG_LEVEL": "INFO",
    }
    if o.s3_endpoint:
        data.update(PADDOCK_S3_ENDPOINT_URL=o.s3_endpoint, PADDOCK_S3_ADDRESSING_STYLE="path")
    if o.s3_region:
        data["PADDOCK_S3_REGION"] = o.s3_region
    if o.s3_prefix:
        data["PADDOCK_S3_PREFIX"] = o.s3_prefix
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(CONFIG, o, "config"), "data": data}


def migrations_job(o: Options) -> dict[str, Any]:
    """``manage.py migrate``, once per image version (a Job's pod template cannot change, so a
    new version is a new Job)."""
    version = re.sub(r"[^a-z0-9-]", "-", o.image.rsplit(":", 1)[-1].lower()).strip("-")[:40]
    pod = _pod_spec(
        o, [_app_container(o, "migrate", ["python", "manage.py", "migrate", "--noinput"])], grace_s=60, wait=False
    )
    pod["restartPolicy"] = "OnFailure"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(f"paddock-migrate-{version}", o, "migrate"),
        "spec": {"backoffLimit": 10, "template": {"metadata": {"labels": _labels("migrate")}, "spec": pod}},
    }


def web(o: Options) -> list[dict[str, Any]]:
    """daphne (HTTP and WebSocket) with probes on ``/healthz``, its Service and the Ingress."""

    def probe(path: str, **timing: int) -> dict[str, Any]:
        # the Host header: Django answers 400 to a host outside ALLOWED_HOSTS (a pod IP)
        get = {"path": path, "port": "http", "httpHeaders": [{"name": "Host", "value": o.host}]}
        return {"httpGet": get, "timeoutSeconds": 10, **timing}

    container = _app_container(
        o,
        "web",
        ["python", "-m", "daphne", "-b", "0.0.0.0", "-p", "8000", "--proxy-headers", "webapp.config.asgi:application"],
    )
    container["ports"] = [{"name": "http", "containerPort": 8000}]
    container["resources"] = {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "3Gi"}}
    container["startupProbe"] = probe("/healthz?require=", periodSeconds=5, failureThreshold=60)
    # ready while the database answers (Redis down or no GPU worker: pages still render)
    container["readinessProbe"] = probe("/healthz?require=database", periodSeconds=10, failureThreshold=3)
    container["livenessProbe"] = probe("/healthz?require=", periodSeconds=20, failureThreshold=3)
    deployment = _deployment(o, "paddock-web", "web", _pod_spec(o, [container], grace_s=30), replicas=o.web_replicas)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta("paddock-web", o, "web"),
        "spec": {"selector": _labels("web"), "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
    }
    ingress = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            **_meta("paddock", o, "web"),
            # ingress-nginx passes WebSocket upgrades through; these keep the live run page's
            # socket open for an hour without traffic and let dataset uploads through
            "annotations": {
                "nginx.ingress.kubernetes.io/proxy-read-timeout": "3600",
                "nginx.ingress.kubernetes.io/proxy-send-timeout": "3600",
                "nginx.ingress.kubernetes.io/proxy-body-size": "200m",
            },
        },
        "spec": {
            "ingressClassName": o.ingress_class,
            "tls": [{"hosts": [o.host], "secretName": "paddock-tls"}],
            "rules": [
                {
                    "host": o.host,
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "paddock-web", "port": {"name": "http"}}},
                            }
                        ]
                    },
                }
            ],
        },
    }
    return [deployment, service, ingress]


def gpu_workers(o: Options) -> dict[str, Any]:
    """One pod per GPU: ``nvidia.com/gpu: 1`` (the device plugin gives each its own GPU, seen
    as ``cuda:0``), concurrency 1, and a termination grace longer than a generation may run: on
    SIGTERM Celery stops taking tasks and finishes the one it has (warm shutdown); a pod killed
    anyway never acked its message (late acks), and the reaper queues the generation again."""
    container = _app_container(
        o,
        "worker",
        _celery_worker("gpu", "gpu@%h", 1),
        {"PADDOCK_WORKER_DEVICE": "cuda", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
    )
    container["resources"] = {
        "requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"},
        "limits": {"memory": "32Gi", "nvidia.com/gpu": "1"},
    }
    container.update(_worker_probes("gpu@$HOSTNAME"))
    pod = _pod_spec(o, [container], grace_s=o.generation_time_limit + 120)
    # GPU nodes are commonly tainted so that only pods asking for a GPU land there
    pod["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    deployment = _deployment(o, "paddock-worker-gpu", "worker-gpu", pod, replicas=o.gpus)
    # a rollout replaces one worker at a time: a surge pod would wait for a GPU nobody frees
    deployment["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    return deployment


def cpu_worker(o: Options) -> dict[str, Any]:
    """Backtests, ensembles and housekeeping on the ``cpu`` queue; no GPU."""
    container = _app_container(
        o, "worker", _celery_worker("cpu", "cpu@%h", 2), {"PADDOCK_WORKER_DEVICE": "cpu", "CUDA_VISIBLE_DEVICES": ""}
    )
    container["resources"] = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "8Gi"}}
    container.update(_worker_probes("cpu@$HOSTNAME"))
    return _deployment(
        o, "paddock-worker-cpu", "worker-cpu", _pod_spec(o, [container], grace_s=600), replicas=o.cpu_workers
    )


def beat(o: Options) -> dict[str, Any]:
    """Exactly one Celery beat: one replica, and ``Recreate`` so a rollout never runs two."""
    command = [
        "celery",
        "-A",
        "webapp.config.celery",
        "beat",
        "--loglevel",
        "INFO",
        "-s",
        f"{VAR_DIR}/celerybeat-schedule",
    ]
    container = _app_container(o, "beat", command)
    container["resources"] = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
    return _deployment(o, "paddock-beat", "beat", _pod_spec(o, [container], grace_s=30), replicas=1, recreate=True)


def postgres(o: Options) -> list[dict[str, Any]]:
    """The official PostgreSQL image in a StatefulSet with its own volume, and its Service."""
    ready = {"exec": {"command": ["pg_isready", "-U", "paddock", "-d", "paddock"]}, "periodSeconds": 10}
    container = {
        "name": "postgres",
        "image": POSTGRES_IMAGE,
        "env": [
            {"name": "POSTGRES_DB", "value": "paddock"},
            {"name": "POSTGRES_USER", "value": "paddock"},
            {"name": "POSTGRES_PASSWORD", "valueFrom": {"secretKeyRef": {"name": SECRET, "key": "POSTGRES_PASSWORD"}}},
            {"name": "PGDATA", "value": "/var/lib/postgresql/data/pgdata"},
        ],
        "ports": [{"name": "postgres", "containerPort": 5432}],
        "volumeMounts": [{"name": "pgdata", "mountPath": "/var/lib/postgresql/data"}],
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
        "readinessProbe": ready,
        "livenessProbe": {**ready, "periodSeconds": 30, "failureThreshold": 5},
    }
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _meta("paddock-postgres", o, "postgres"),
        "spec": {
            "serviceName": "paddock-postgres",
            "replicas": 1,
            "selector": {"matchLabels": _labels("postgres")},
            "template": {
                "metadata": {"labels": _labels("postgres")},
                "spec": {"terminationGracePeriodSeconds": 60, "containers": [container]},
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "pgdata"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}},
                }
            ],
        },
    }
    return [statefulset, _service("paddock-postgres", o, "postgres", 5432)]


def redis(o: Options) -> list[dict[str, Any]]:
    """The official Redis image without persistence: the database holds the truth, and the
    workers re-send what a restarted Redis lost (docs/operations/recovery.md)."""
    ping = {"exec": {"command": ["redis-cli", "ping"]}, "periodSeconds": 10}
    container = {
        "name": "redis",
        "image": REDIS_IMAGE,
        "args": ["--save", "", "--appendonly", "no"],
        "ports": [{"name": "redis", "containerPort": 6379}],
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "readinessProbe": ping,
        "livenessProbe": {**ping, "periodSeconds": 30, "failureThreshold": 5},
    }
    pod = {"terminationGracePeriodSeconds": 30, "containers": [container]}
    deployment = _deployment(o, "paddock-redis", "redis", pod, replicas=1, recreate=True)
    return [deployment, _service("paddock-redis", o, "redis", 6379)]


def _service(name: str, o: Options, component: str, port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(name, o, component),
        "spec": {"selector": _labels(component), "ports": [{"name": component, "port": port, "targetPort": port}]},
    }


#: Generations being trained right now: their messages have left the Redis list (a worker holds
#: them unacknowledged), so the list length alone would let KEDA scale busy workers away.
RUNNING_GENERATIONS_SQL = "SELECT COUNT(*) FROM runs_generation WHERE status = 'running'"


def keda_objects(o: Options) -> list[dict[str, Any]]:
    """A KEDA ScaledObject for the GPU workers (KEDA >= 2.12 for ``scalingModifiers``): desired
    replicas = messages waiting in the ``gpu`` list + generations in training, 0 to ``gpus``."""
    redis_address = _redis_url(o).split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1]
    auth = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "TriggerAuthentication",
        "metadata": _meta("paddock-database", o, "autoscaling"),
        "spec": {"secretTargetRef": [{"parameter": "connection", "name": SECRET, "key": "DATABASE_URL"}]},
    }
    scaled = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": _meta("paddock-worker-gpu", o, "autoscaling"),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "paddock-worker-gpu"},
            "minReplicaCount": 0,
            "maxReplicaCount": o.gpus,
            "pollingInterval": 15,
            # an idle worker is removed only after 10 minutes without waiting or running work
            "cooldownPeriod": 600,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {
                        "scaleDown": {
                            "stabilizationWindowSeconds": 600,
                            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 300}],
                        }
                    }
                },
                "scalingModifiers": {"formula": "waiting + running", "target": "1", "metricType": "AverageValue"},
            },
            "triggers": [
                {
                    "type": "redis",
                    "name": "waiting",
                    "metadata": {"address": redis_address, "listName": "gpu", "listLength": "1", "databaseIndex": "0"},
                },
                {
                    "type": "postgresql",
                    "name": "running",
                    "metadata": {"query": RUNNING_GENERATIONS_SQL, "targetQueryValue": "1"},
                    "authenticationRef": {"name": "paddock-database"},
                },
            ],
        },
    }
    return [auth, scaled]


def manifests(options: Options) -> list[dict[str, Any]]:
    """Every object, in the order ``kubectl apply`` should create them.

    Raises:
        ManifestError: a bad option, naming its flag.
    """
    o = _check(options)
    objects = [namespace(o), config_map(o)]
    if not o.external_services:
        objects += [*postgres(o), *redis(o)]
    objects += [migrations_job(o), *web(o), gpu_workers(o), cpu_worker(o), beat(o)]
    if o.keda:
        objects += keda_objects(o)
    return objects


# --- YAML ---------------------------------------------------------------------------------------

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in _RESERVED:
        return text
    return json.dumps(text)  # a JSON string is a valid double-quoted YAML scalar


def _emit(value: Any, indent: int) -> list[str]:
    pad = "  " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                lines.append(f"{pad}{_scalar(key)}:")
                lines += _emit(item, indent + 1 if isinstance(item, dict) else indent)
            else:
                lines.append(
                    f"{pad}{_scalar(key)}: {_scalar(item) if not isinstance(item, dict | list) else ('{}' if isinstance(item, dict) else '[]')}"
                )
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict | list) and item:
                inner = _emit(item, indent + 1)
                lines.append(f"{pad}- {inner[0].lstrip()}")
                lines += inner[1:]
            else:
                lines.append(
                    f"{pad}- {_scalar(item) if not isinstance(item, dict | list) else ('{}' if isinstance(item, dict) else '[]')}"
                )
    else:
        lines.append(pad + _scalar(value))
    return lines


def to_yaml(objects: list[dict[str, Any]]) -> str:
    """A multi-document YAML stream (block style, strings quoted where YAML would read them as
    something else)."""
    header = "# Paddock on Kubernetes, generated by ./paddock k8s (docs/kubernetes.md). Create the Secret first.\n"
    return header + "".join("---\n" + "\n".join(_emit(obj, 0)) + "\n" for obj in objects)
