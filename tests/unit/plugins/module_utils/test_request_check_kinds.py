# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The request check on the workload kinds teams use: one row per kind and field path each project documents.

Every manifest below is written in the project's own shape (the field names of its API types: Argo Workflows'
``Template``, Tekton's v1 ``Step``/``StepTemplate``/``Sidecar``/``TaskRunStepSpec``, KServe's ``PredictorSpec``
and ``ServingRuntimeSpec``, the Kubeflow training operator's replica specs and Kubeflow Trainer's ``Trainer``,
KubeRay's head and worker groups, JobSet, LeaderWorkerSet, Volcano). Each row names, by hand, every GPU request the
check must find there: the container it reports (its ``name``, or the path of the requirements when it has none), the
count and the path. The check reads each manifest twice, as YAML text (as kubectl reads it) and as objects (from
Ansible), and both readings must give the row.
"""

from __future__ import annotations

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.module_utils.requests.check_request import main
from ansible_collections.gpushare.k8s.plugins.module_utils.requests.gpu_requests import check_manifest, container_requests, find_offenders
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.manifest_yaml import ManifestError

# What each intent becomes on the lab's cluster (the map the intent policies carry, intents.params_data), written out.
INTENTS = {
    "intents": "shared,whole",
    "summary": "pools: default gives whole as nvidia.com/gpu; shared gives shared as nvidia.com/gpu (at most 1 per container)",
    "intent.whole.form": "resource", "intent.whole.resource": "nvidia.com/gpu", "intent.whole.max": "",
    "intent.shared.form": "resource", "intent.shared.resource": "nvidia.com/gpu", "intent.shared.max": "1",
}

KINDS = [
    # --- Argo Workflows (argoproj.io/v1alpha1): Template.container, .script (a container with source), .containerSet
    # .containers, .initContainers and .sidecars; WorkflowTemplate and ClusterWorkflowTemplate hold a WorkflowSpec,
    # CronWorkflow one under spec.workflowSpec.
    pytest.param("""
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: train-}
spec:
  entrypoint: train
  templates:
  - name: train
    container:
      image: trainer:1
      resources:
        limits: {nvidia.com/gpu: 4}
""", [("spec.templates[0].container.resources", 4, "spec.templates[0].container.resources")], id="argo-workflow-container"),
    pytest.param("""
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: scripted}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - {name: prepare, template: prepare}
  - name: prepare
    script:
      image: python:3.12
      command: [python]
      source: print("hello")
      resources:
        requests: {nvidia.com/gpu: "2"}
""", [("spec.templates[1].script.resources", 2, "spec.templates[1].script.resources")], id="argo-workflow-script"),
    pytest.param("""
apiVersion: argoproj.io/v1alpha1
kind: WorkflowTemplate
metadata: {name: set}
spec:
  templates:
  - name: main
    containerSet:
      volumeMounts: [{name: workspace, mountPath: /workspace}]
      containers:
      - {name: a, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
      - name: b
        image: x
        dependencies: [a]
        resources: {limits: {nvidia.com/gpu: 3}}
""", [("a", 1, "spec.templates[0].containerSet.containers[0]"), ("b", 3, "spec.templates[0].containerSet.containers[1]")],
        id="argo-workflowtemplate-containerset"),
    pytest.param("""
apiVersion: argoproj.io/v1alpha1
kind: ClusterWorkflowTemplate
metadata: {name: with-sidecar}
spec:
  templates:
  - name: main
    initContainers:
    - {name: fetch, image: x, resources: {limits: {nvidia.com/gpu: 2}}}
    sidecars:
    - {name: nccl-proxy, image: x, resources: {limits: {nvidia.com/gpu: 2}}}
    container: {image: x, resources: {limits: {nvidia.com/gpu: 1}}}
""", [("fetch", 2, "spec.templates[0].initContainers[0]"), ("nccl-proxy", 2, "spec.templates[0].sidecars[0].resources"),
      ("spec.templates[0].container.resources", 1, "spec.templates[0].container.resources")], id="argo-init-and-sidecars"),
    pytest.param("""
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata: {name: nightly}
spec:
  schedules: ["0 2 * * *"]
  workflowSpec:
    entrypoint: train
    templates:
    - name: train
      container: {image: x, resources: {limits: {nvidia.com/gpu: 8}}}
""", [("spec.workflowSpec.templates[0].container.resources", 8, "spec.workflowSpec.templates[0].container.resources")], id="argo-cronworkflow"),
    # --- Tekton Pipelines (tekton.dev/v1): Step.computeResources, TaskSpec.stepTemplate and .sidecars; a TaskRun's own
    # spec.computeResources (every step's) and its spec.stepSpecs / sidecarSpecs overrides; a Pipeline's inline taskSpec;
    # a PipelineRun's taskRunSpecs. v1beta1 steps embed a Container: resources.
    pytest.param("""
apiVersion: tekton.dev/v1
kind: Task
metadata: {name: train}
spec:
  stepTemplate:
    computeResources:
      limits: {nvidia.com/gpu: 2}
  steps:
  - name: fit
    image: trainer:1
    computeResources:
      requests: {nvidia.com/gpu: 1}
      limits: {nvidia.com/gpu: 4}
  sidecars:
  - name: metrics
    image: x
    computeResources: {limits: {nvidia.com/gpu: 1}}
""", [("spec.stepTemplate.computeResources", 2, "spec.stepTemplate.computeResources"), ("fit", 4, "spec.steps[0].computeResources"),
      ("metrics", 1, "spec.sidecars[0].computeResources")], id="tekton-task"),
    pytest.param("""
apiVersion: tekton.dev/v1
kind: TaskRun
metadata: {name: build-1}
spec:
  taskSpec:
    steps:
    - name: build
      image: x
      computeResources:
        limits: {nvidia.com/gpu: 4}
""", [("build", 4, "spec.taskSpec.steps[0].computeResources")], id="tekton-taskrun-steps"),
    pytest.param("""
apiVersion: tekton.dev/v1
kind: TaskRun
metadata: {name: build-2}
spec:
  taskRef: {name: build}
  computeResources:
    limits: {nvidia.com/gpu: 2}
  stepSpecs:
  - name: compile
    computeResources: {limits: {nvidia.com/gpu: 3}}
  sidecarSpecs:
  - name: cache
    computeResources: {requests: {nvidia.com/gpu: 1}}
""", [("spec.computeResources", 2, "spec.computeResources"), ("compile", 3, "spec.stepSpecs[0].computeResources"),
      ("cache", 1, "spec.sidecarSpecs[0].computeResources")], id="tekton-taskrun-overrides"),
    pytest.param("""
apiVersion: tekton.dev/v1
kind: Pipeline
metadata: {name: ml}
spec:
  tasks:
  - name: train
    taskSpec:
      steps:
      - {name: fit, image: x, computeResources: {limits: {nvidia.com/gpu: 2}}}
""", [("fit", 2, "spec.tasks[0].taskSpec.steps[0].computeResources")], id="tekton-pipeline"),
    pytest.param("""
apiVersion: tekton.dev/v1
kind: PipelineRun
metadata: {name: ml-1}
spec:
  pipelineRef: {name: ml}
  taskRunSpecs:
  - pipelineTaskName: train
    computeResources: {limits: {nvidia.com/gpu: 2}}
    stepSpecs:
    - {name: fit, computeResources: {limits: {nvidia.com/gpu: 1}}}
""", [("spec.taskRunSpecs[0].computeResources", 2, "spec.taskRunSpecs[0].computeResources"),
      ("fit", 1, "spec.taskRunSpecs[0].stepSpecs[0].computeResources")], id="tekton-pipelinerun"),
    pytest.param("""
apiVersion: tekton.dev/v1beta1
kind: Task
metadata: {name: old}
spec:
  steps:
  - {name: fit, image: x, resources: {limits: {nvidia.com/gpu: 2}}}
""", [("fit", 2, "spec.steps[0].resources")], id="tekton-v1beta1-task"),
    # --- KServe (serving.kserve.io): PredictorSpec.model and the framework predictors embed a Container; a predictor,
    # transformer or explainer with containers is a Pod spec; workerSpec (multi-node) and ServingRuntime hold containers.
    pytest.param("""
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: llm}
spec:
  predictor:
    minReplicas: 1
    model:
      modelFormat: {name: huggingface}
      storageUri: hf://meta-llama/Llama-3.1-8B
      resources:
        limits: {cpu: "4", memory: 32Gi, nvidia.com/gpu: "4"}
""", [("spec.predictor.model.resources", 4, "spec.predictor.model.resources")], id="kserve-model"),
    pytest.param("""
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: torch}
spec:
  predictor:
    pytorch:
      storageUri: gs://models/torch
      resources: {limits: {nvidia.com/gpu: 2}}
  transformer:
    containers:
    - {name: kserve-container, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
""", [("spec.predictor.pytorch.resources", 2, "spec.predictor.pytorch.resources"), ("kserve-container", 1, "spec.transformer.containers[0]")],
        id="kserve-framework-and-transformer"),
    pytest.param("""
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: multinode}
spec:
  predictor:
    model:
      modelFormat: {name: huggingface}
      resources: {limits: {nvidia.com/gpu: 1}}
    workerSpec:
      tensorParallelSize: 2
      containers:
      - {name: worker-container, image: x, resources: {limits: {nvidia.com/gpu: 2}}}
""", [("spec.predictor.model.resources", 1, "spec.predictor.model.resources"), ("worker-container", 2, "spec.predictor.workerSpec.containers[0]")],
        id="kserve-workerspec"),
    pytest.param("""
apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata: {name: vllm}
spec:
  supportedModelFormats: [{name: huggingface, autoSelect: true}]
  containers:
  - name: kserve-container
    image: vllm:1
    resources: {limits: {nvidia.com/gpu: 2}}
""", [("kserve-container", 2, "spec.containers[0]")], id="kserve-servingruntime"),
    # --- Kubeflow training operator (kubeflow.org): replica specs hold Pod templates; Kubeflow Trainer's TrainJob
    # (trainer.kubeflow.org) asks per node in spec.trainer.resourcesPerNode.
    pytest.param("""
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: ddp}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers: [{name: pytorch, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]
    Worker:
      replicas: 3
      template:
        spec:
          containers: [{name: pytorch, image: x, resources: {limits: {nvidia.com/gpu: 4}}}]
""", [("pytorch", 1, "spec.pytorchReplicaSpecs.Master.template.spec.containers[0]"),
      ("pytorch", 4, "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0]")], id="kubeflow-pytorchjob"),
    pytest.param("""
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: tf}
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{name: tensorflow, image: x, resources: {limits: {nvidia.com/gpu: 2}}}]
""", [("tensorflow", 2, "spec.tfReplicaSpecs.Worker.template.spec.containers[0]")], id="kubeflow-tfjob"),
    pytest.param("""
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: mpi}
spec:
  slotsPerWorker: 2
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers: [{name: launcher, image: x}]
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{name: worker, image: x, resources: {limits: {nvidia.com/gpu: 2}}}]
""", [("worker", 2, "spec.mpiReplicaSpecs.Worker.template.spec.containers[0]")], id="kubeflow-mpijob"),
    pytest.param("""
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: fine-tune}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    numNodes: 2
    resourcesPerNode:
      limits: {nvidia.com/gpu: 4}
""", [("spec.trainer.resourcesPerNode", 4, "spec.trainer.resourcesPerNode")], id="kubeflow-trainjob"),
    # --- KubeRay (ray.io/v1): head and worker groups hold Pod templates; a RayJob holds a cluster spec and the submitter's
    # Pod template, a RayService one under rayClusterConfig. rayStartParams are Ray's own numbers, not Kubernetes requests.
    pytest.param("""
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: raycluster}
spec:
  headGroupSpec:
    rayStartParams: {num-gpus: "0"}
    template:
      spec:
        containers: [{name: ray-head, image: rayproject/ray:2.9.0}]
  workerGroupSpecs:
  - groupName: gpu
    replicas: 2
    rayStartParams: {num-gpus: "4"}
    template:
      spec:
        containers: [{name: ray-worker, image: rayproject/ray:2.9.0, resources: {limits: {nvidia.com/gpu: 4}}}]
""", [("ray-worker", 4, "spec.workerGroupSpecs[0].template.spec.containers[0]")], id="ray-raycluster"),
    pytest.param("""
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: rayjob}
spec:
  entrypoint: python train.py
  rayClusterSpec:
    headGroupSpec:
      template:
        spec:
          containers: [{name: ray-head, image: x, resources: {limits: {nvidia.com/gpu: 2}}}]
  submitterPodTemplate:
    spec:
      containers: [{name: submitter, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]
""", [("ray-head", 2, "spec.rayClusterSpec.headGroupSpec.template.spec.containers[0]"),
      ("submitter", 1, "spec.submitterPodTemplate.spec.containers[0]")], id="ray-rayjob"),
    pytest.param("""
apiVersion: ray.io/v1
kind: RayService
metadata: {name: serve}
spec:
  rayClusterConfig:
    headGroupSpec:
      template:
        spec:
          containers: [{name: ray-head, image: x}]
    workerGroupSpecs:
    - groupName: gpu
      template:
        spec:
          containers: [{name: ray-worker, image: x, resources: {requests: {nvidia.com/gpu: 2}}}]
""", [("ray-worker", 2, "spec.rayClusterConfig.workerGroupSpecs[0].template.spec.containers[0]")], id="ray-rayservice"),
    # --- JobSet (jobset.x-k8s.io), LeaderWorkerSet (leaderworkerset.x-k8s.io), Volcano (batch.volcano.sh): Pod templates
    # inside Job templates, leader and worker templates, tasks.
    pytest.param("""
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js}
spec:
  replicatedJobs:
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 2
        template:
          spec:
            containers: [{name: trainer, image: x, resources: {limits: {nvidia.com/gpu: 8}}}]
""", [("trainer", 8, "spec.replicatedJobs[0].template.spec.template.spec.containers[0]")], id="jobset"),
    pytest.param("""
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: lws}
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 4
    leaderTemplate:
      spec:
        containers: [{name: leader, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]
    workerTemplate:
      spec:
        containers: [{name: worker, image: x, resources: {limits: {nvidia.com/gpu: 2}}}]
""", [("leader", 1, "spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0]"),
      ("worker", 2, "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0]")], id="leaderworkerset"),
    pytest.param("""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: vj}
spec:
  minAvailable: 2
  schedulerName: volcano
  minResources: {nvidia.com/gpu: 8}
  tasks:
  - name: worker
    replicas: 2
    template:
      spec:
        containers: [{name: worker, image: x, resources: {limits: {nvidia.com/gpu: 4}}}]
""", [("worker", 4, "spec.tasks[0].template.spec.containers[0]")], id="volcano-job"),
    # --- kinds that only count GPUs (quotas, pools, node limits): no container asks for anything there
    pytest.param("""
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team}
spec:
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
""", [], id="kueue-clusterqueue"),
    pytest.param("""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu}
spec:
  limits: {cpu: "1000", nvidia.com/gpu: 8}
  template:
    spec:
      requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [p5]}]
""", [], id="karpenter-nodepool"),
    pytest.param("""
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: team}
spec:
  capability: {nvidia.com/gpu: 8}
  guarantee:
    resource: {nvidia.com/gpu: 2}
""", [], id="volcano-queue"),
    # --- a kind this file never heard of: any requirements naming a GPU count, wherever they sit
    pytest.param("""
apiVersion: example.com/v1
kind: Anything
metadata: {name: deep}
spec:
  stages:
  - worker:
      settings:
        runner: {name: runner, resources: {requests: {nvidia.com/gpu: 3}}}
""", [("runner", 3, "spec.stages[0].worker.settings.runner.resources")], id="unknown-kind"),
]


MANIFEST = {row.id: row.values[0] for row in KINDS}


def findings(data):
    return [(item["container"], item["count"], item["path"]) for item in container_requests(data)]


@pytest.mark.parametrize("text, expected", KINDS)
def test_gpu_requests_are_found_where_each_project_puts_them(text, expected):
    objects = yaml.safe_load(text)
    assert findings(text) == expected
    assert findings(objects) == expected
    over = [{"container": name, "count": count} for name, count, _path in expected if count > 1]
    for data in (text, objects):
        assert [{"container": item["container"], "count": item["count"]} for item in find_offenders(data)] == over


@pytest.mark.parametrize(
    "text, out",
    [
        pytest.param(MANIFEST["argo-workflow-container"], "OVER=spec.templates[0].container.resources=4\n", id="argo-workflow"),
        pytest.param(MANIFEST["tekton-taskrun-steps"], "OVER=build=4\n", id="tekton-taskrun"),
        pytest.param(MANIFEST["kserve-model"], "OVER=spec.predictor.model.resources=4\n", id="kserve-inferenceservice"),
    ],
)
def test_the_command_line_says_over_for_each_pod_asking_for_four(tmp_path, capsys, text, out):
    path = tmp_path / "workload.yaml"
    path.write_text(text, encoding="utf-8")
    assert main([str(path)]) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (out, "")


def test_a_bad_count_in_a_searched_kind_is_an_error_naming_the_field():
    text = MANIFEST["tekton-taskrun-steps"].replace("nvidia.com/gpu: 4", "nvidia.com/gpu: 1500m")
    with pytest.raises(ManifestError) as info:
        find_offenders(text)
    assert "spec.taskSpec.steps[0].computeResources.limits[nvidia.com/gpu] is '1500m'" in str(info.value)


# ---------------------------------------------------------------------------
# intents: a Pod template asking by the annotation is read in any kind


def template(annotations):
    return {"metadata": {"annotations": annotations},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "worker", "image": "x"}]}}


WHOLE_FOUR = {"gpushare.k8s/gpu": "whole", "gpushare.k8s/gpu-count": "4"}


@pytest.mark.parametrize(
    "obj, path",
    [
        pytest.param({"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": template(WHOLE_FOUR)}}, "spec.template.spec", id="batch-job"),
        pytest.param({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                      "spec": {"tasks": [{"name": "worker", "replicas": 1, "template": template(WHOLE_FOUR)}]}},
                     "spec.tasks[0].template.spec", id="volcano-job"),
        pytest.param({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                      "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": template(WHOLE_FOUR)}}}]}},
                     "spec.replicatedJobs[0].template.spec.template.spec", id="jobset"),
        pytest.param({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                      "spec": {"headGroupSpec": {"template": template(WHOLE_FOUR)}}}, "spec.headGroupSpec.template.spec", id="raycluster"),
    ],
)
def test_an_intent_in_a_pod_template_is_read_in_any_kind(obj, path):
    obj = dict(obj, metadata={"name": "same"})
    for data in (obj, yaml.safe_dump(obj)):
        result = check_manifest(data, intents=INTENTS)
        assert [(entry["intent"], entry["count"], entry["resource"], entry["containers"], entry["path"], entry["refused"])
                for entry in result["intents"]] == [("whole", "4", "nvidia.com/gpu", ["worker"], path, None)]
        assert result["offenders"] == [{"document": 0, "kind": obj["kind"], "name": "same", "container": "worker",
                                        "resource": "nvidia.com/gpu", "count": 4}]


def test_an_intent_over_what_the_pool_gives_is_refused_in_a_custom_kind():
    obj = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "vj"},
           "spec": {"tasks": [{"name": "w", "template": template({"gpushare.k8s/gpu": "shared", "gpushare.k8s/gpu-count": "2"})}]}}
    (entry,) = check_manifest(obj, intents=INTENTS)["intents"]
    assert entry["refused"].startswith("GPU intent 'shared' gives at most 1 per container (nvidia.com/gpu), asked for 2")


def test_an_objects_own_annotations_are_not_a_pod_templates():
    # A ServingRuntime's metadata is the runtime's, not its Pods': no intent is read there.
    obj = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ServingRuntime",
           "metadata": {"name": "rt", "annotations": WHOLE_FOUR}, "spec": {"containers": [{"name": "kserve-container", "image": "x"}]}}
    assert check_manifest(obj, intents=INTENTS) == {"offenders": [], "intents": []}
