"""The Kubernetes manifests of ``./paddock k8s`` (``deploy/kubernetes.py``): they parse, pass
the API schemas of a pinned Kubernetes version (kubernetes-validate ships them; no cluster, no
network), and hold the deployment's invariants: one beat, one GPU per training pod, probes, the
migrations before everything else, pinned official images, secrets from the Secret, artifacts in
the bucket.
"""

from __future__ import annotations

import os
import subprocess
import sys

import kubernetes_validate
import pytest
import yaml

from deploy import kubernetes as k8s
from tests.harness import REPO_ROOT

#: The Kubernetes release validated against (a supported release of every large provider).
K8S_VERSION = "1.33.0"
#: Custom resources whose schemas come with KEDA, not with Kubernetes: checked by the invariants.
KEDA_KINDS = {"ScaledObject", "TriggerAuthentication"}


def render(**options):
    return k8s.manifests(k8s.Options(**{"gpus": 4, **options}))


def by_kind(objects, kind):
    return [o for o in objects if o["kind"] == kind]


def named(objects, name, kind="Deployment"):
    (found,) = [o for o in objects if o["metadata"]["name"] == name and o["kind"] == kind]
    return found


def pod_spec(obj):
    return obj["spec"]["template"]["spec"]


def containers(obj):
    spec = pod_spec(obj)
    return spec.get("initContainers", []) + spec["containers"]


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


VARIANTS = [{}, {"keda": True}, {"external_services": True, "redis_url": "redis://redis.internal:6379/0", "gpus": 1}]


@pytest.mark.parametrize("options", VARIANTS, ids=["default", "keda", "external-services"])
def test_the_yaml_reads_back_as_the_objects_it_was_made_from(options):
    objects = render(**options)

    assert list(yaml.safe_load_all(k8s.to_yaml(objects))) == objects


@pytest.mark.parametrize("options", VARIANTS, ids=["default", "keda", "external-services"])
def test_every_built_in_object_passes_the_kubernetes_api_schema_strictly(options):
    objects = list(yaml.safe_load_all(k8s.to_yaml(render(**options))))
    checked = [o for o in objects if o["kind"] not in KEDA_KINDS]

    for obj in checked:
        # raises kubernetes_validate.ValidationError naming the path of a bad or unknown field
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    assert {o["kind"] for o in objects} - {o["kind"] for o in checked} == (KEDA_KINDS if options.get("keda") else set())


def test_the_validator_catches_a_wrong_field():
    # the schema check is not vacuous: a misspelt field and a wrong type are refused
    web = named(render(), "paddock-web")
    pod_spec(web)["terminationGracePeriod"] = 30
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(web, K8S_VERSION, strict=True)
    job = by_kind(render(), "Job")[0]
    job["spec"]["backoffLimit"] = "ten"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, K8S_VERSION, strict=True)


def test_exactly_one_beat_and_it_is_never_doubled_by_a_rollout():
    objects = render(keda=True)
    pods = [o for o in objects if "template" in o.get("spec", {})]
    beats = [o for o in pods if any("beat" in c.get("command", []) for c in containers(o))]

    assert [b["metadata"]["name"] for b in beats] == ["paddock-beat"]
    assert beats[0]["spec"]["replicas"] == 1
    assert beats[0]["spec"]["strategy"] == {"type": "Recreate"}
    assert "paddock-beat" not in {s["spec"]["scaleTargetRef"]["name"] for s in by_kind(objects, "ScaledObject")}


@pytest.mark.parametrize("gpus", [1, 3, 8])
def test_one_training_worker_per_gpu_each_with_one_gpu_and_concurrency_one(gpus):
    from django.conf import settings

    from webapp.runs.tasks import train_generation_task

    objects = render(gpus=gpus)
    workers = [o for o in by_kind(objects, "Deployment") if "-Q" in pod_spec(o)["containers"][0].get("command", [])]
    training = [o for o in workers if "gpu" in pod_spec(o)["containers"][0]["command"]]

    assert [o["metadata"]["name"] for o in training] == ["paddock-worker-gpu"]
    worker = training[0]
    assert worker["spec"]["replicas"] == gpus
    # a rollout frees a GPU before it asks for one
    assert worker["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    (container,) = pod_spec(worker)["containers"]
    command = container["command"]
    assert command[command.index("-Q") + 1] == "gpu" and command[command.index("-c") + 1] == "1"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert env_of(container)["CUDA_DEVICE_ORDER"]["value"] == "PCI_BUS_ID"
    # a drained pod finishes its generation (Celery's warm shutdown on SIGTERM) ...
    assert pod_spec(worker)["terminationGracePeriodSeconds"] > settings.CELERY_TASK_TIME_LIMIT
    # ... and one killed anyway never acknowledged its message, so it is delivered again
    assert settings.CELERY_TASK_ACKS_LATE and settings.CELERY_TASK_REJECT_ON_WORKER_LOST
    assert train_generation_task.acks_late and train_generation_task.reject_on_worker_lost
    assert settings.CELERY_WORKER_PREFETCH_MULTIPLIER == 1
    # no other pod asks for a GPU; the cpu worker hides them
    others = [c for o in objects if o is not worker and "template" in o.get("spec", {}) for c in containers(o)]
    assert not any("nvidia.com/gpu" in str(c.get("resources", {})) for c in others)
    cpu = named(objects, "paddock-worker-cpu")
    assert env_of(pod_spec(cpu)["containers"][0])["CUDA_VISIBLE_DEVICES"]["value"] == ""


def test_the_web_and_the_workers_have_probes_on_healthz_and_the_heartbeat():
    objects = render()
    web = pod_spec(named(objects, "paddock-web"))["containers"][0]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert web[probe]["httpGet"]["path"].startswith("/healthz?require=")
        # Django answers a host outside ALLOWED_HOSTS (the pod's IP) with a 400
        assert web[probe]["httpGet"]["httpHeaders"] == [{"name": "Host", "value": "paddock.example.com"}]
    assert web["readinessProbe"]["httpGet"]["path"] == "/healthz?require=database"

    for name, node_option in (("paddock-worker-gpu", "gpu@%h"), ("paddock-worker-cpu", "cpu@%h")):
        container = pod_spec(named(objects, name))["containers"][0]
        assert container["command"][container["command"].index("-n") + 1] == node_option
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            script = container[probe]["exec"]["command"][-1]
            # Celery's %h is the host name, which is $HOSTNAME (the pod's name) in a pod
            assert f'worker_alive "{node_option.replace("%h", "$HOSTNAME")}"' in script


def test_migrations_run_in_a_job_that_every_other_paddock_pod_waits_for():
    objects = render(keda=True)
    (job,) = by_kind(objects, "Job")
    assert pod_spec(job)["containers"][0]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert "initContainers" not in pod_spec(job)

    paddock_pods = [o for o in objects if "template" in o.get("spec", {}) and o is not job]
    paddock_pods = [o for o in paddock_pods if pod_spec(o)["containers"][0]["image"].startswith("paddock:")]
    assert {o["metadata"]["name"] for o in paddock_pods} == {
        "paddock-web",
        "paddock-worker-gpu",
        "paddock-worker-cpu",
        "paddock-beat",
    }
    for obj in paddock_pods:
        (init,) = pod_spec(obj)["initContainers"]
        assert "manage.py migrate --check" in init["command"][-1] and init["command"][-1].startswith("until ")
        assert init["image"] == job["spec"]["template"]["spec"]["containers"][0]["image"]


def test_migrate_check_waits_until_the_job_has_migrated(tmp_path):
    """The init containers' wait is real: ``migrate --check`` fails on a database without the
    migrations and passes once ``migrate`` ran (as the Job does)."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'fresh.sqlite3'}", "PADDOCK_VAR_DIR": str(tmp_path)}

    def manage(*argv):
        return subprocess.run(
            [sys.executable, "manage.py", *argv], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300
        )

    assert manage("migrate", "--check").returncode != 0
    assert manage("migrate", "--noinput").returncode == 0
    assert manage("migrate", "--check").returncode == 0


def test_images_are_pinned_official_ones_never_latest_nor_bitnami():
    objects = render(keda=True)
    images = {c["image"] for o in objects if "template" in o.get("spec", {}) for c in containers(o)}

    assert images == {f"paddock:{k8s.paddock_version()}", k8s.POSTGRES_IMAGE, k8s.REDIS_IMAGE}
    for image in images:
        name, _, tag = image.rpartition(":")
        assert name and tag and tag != "latest" and "bitnami" not in image
    assert k8s.POSTGRES_IMAGE.startswith("postgres:") and k8s.REDIS_IMAGE.startswith("redis:")


@pytest.mark.parametrize(
    "image", ["paddock", "registry.example.com:5000/paddock", "paddock:latest", "bitnami/redis:7.4"]
)
def test_an_unpinned_or_bitnami_image_is_refused_naming_the_flag(image):
    with pytest.raises(k8s.ManifestError, match="^--image:"):
        render(image=image)


def test_secrets_come_from_the_secret_and_artifacts_from_the_bucket():
    objects = render()
    config = named(objects, k8s.CONFIG, "ConfigMap")["data"]
    assert not set(config) & {"SECRET_KEY", "DATABASE_URL", "POSTGRES_PASSWORD", "AWS_SECRET_ACCESS_KEY"}
    assert config["PADDOCK_STORAGE"] == "s3" and config["PADDOCK_S3_BUCKET"] == "paddock-artifacts"
    assert "PADDOCK_ARTIFACTS_DIR" not in config

    app = [
        c
        for o in objects
        if "template" in o.get("spec", {})
        for c in containers(o)
        if c["image"].startswith("paddock:")
    ]
    for container in app:
        env = env_of(container)
        for key in ("SECRET_KEY", "DATABASE_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            assert env[key]["valueFrom"]["secretKeyRef"]["name"] == k8s.SECRET, (container["name"], key)
            assert "value" not in env[key]
        assert container["envFrom"] == [{"configMapRef": {"name": k8s.CONFIG}}]
    # no volume is shared for artifacts: each pod's var/ is its own, the data claim read-only
    for obj in objects:
        if "template" in obj.get("spec", {}) and pod_spec(obj).get("volumes"):
            volumes = {v["name"]: v for v in pod_spec(obj)["volumes"]}
            assert volumes["var"] == {"name": "var", "emptyDir": {}}
            assert volumes["data"]["persistentVolumeClaim"]["readOnly"] is True


def test_the_ingress_passes_websockets_to_daphne():
    objects = render()
    (ingress,) = by_kind(objects, "Ingress")
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]

    assert backend["name"] == "paddock-web"
    assert int(ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600
    command = pod_spec(named(objects, "paddock-web"))["containers"][0]["command"]
    assert command[:3] == ["python", "-m", "daphne"] and "--proxy-headers" in command


def test_keda_scales_the_gpu_workers_on_waiting_plus_running_generations():
    objects = render(gpus=6, keda=True)
    (scaled,) = by_kind(objects, "ScaledObject")
    spec = scaled["spec"]
    triggers = {t["name"]: t for t in spec["triggers"]}

    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "paddock-worker-gpu"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (0, 6)
    assert triggers["waiting"]["type"] == "redis" and triggers["waiting"]["metadata"]["listName"] == "gpu"
    assert triggers["waiting"]["metadata"]["address"] == "paddock-redis.paddock.svc.cluster.local:6379"
    # a generation in training has left the list: counted from the database, so busy workers stay
    assert triggers["running"]["type"] == "postgresql" and "'running'" in triggers["running"]["metadata"]["query"]
    assert spec["advanced"]["scalingModifiers"]["formula"] == "waiting + running"
    down = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
    assert down["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 300}]
    (auth,) = by_kind(objects, "TriggerAuthentication")
    assert auth["spec"]["secretTargetRef"][0] == {"parameter": "connection", "name": "paddock", "key": "DATABASE_URL"}


def test_the_running_generations_query_names_the_real_table_and_status():
    from webapp.runs.models import Generation

    assert Generation._meta.db_table in k8s.RUNNING_GENERATIONS_SQL
    assert f"'{Generation.Status.RUNNING.value}'" in k8s.RUNNING_GENERATIONS_SQL


def test_the_launcher_prints_the_manifests_and_refuses_bad_options_with_exit_2():
    launcher = [sys.executable, str(REPO_ROOT / "paddock"), "k8s"]
    ok = subprocess.run([*launcher, "--gpus", "2", "--keda"], capture_output=True, text=True, timeout=60)
    bad = subprocess.run([*launcher, "--gpus", "0"], capture_output=True, text=True, timeout=60)

    assert ok.returncode == 0, ok.stderr
    assert list(yaml.safe_load_all(ok.stdout)) == k8s.manifests(k8s.Options(gpus=2, keda=True))
    assert bad.returncode == 2 and bad.stderr.strip() == "paddock: k8s: --gpus: at least 1 GPU worker, got 0"
