{{- /*
A manifest, not a partial (Helm renders every file of templates/ whose name does not start with "_"): named .tpl
because ansible-test sanity's yamllint parses every .yaml file of the collection, and a template is not YAML.
The ClusterPolicy as the GPU Operator's chart renders these values: an empty string leaves its field out,
except migManager.config.default, always written (quoted) when migManager.config is given, and
devicePlugin.config.default, written (quoted, "" included) whenever devicePlugin.config.name is set.
*/ -}}
apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata:
  name: cluster-policy
  labels:
    app.kubernetes.io/name: {{ .Chart.Name }}
    app.kubernetes.io/instance: {{ .Release.Name }}
    app.kubernetes.io/managed-by: {{ .Release.Service }}
    app.kubernetes.io/component: gpu-operator
    helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
spec:
  {{- /* the fields NVIDIA's schema requires, rendered always, as the chart does */}}
  daemonsets: {}
  dcgm: {}
  dcgmExporter: {}
  gfd: {}
  nodeStatusExporter: {}
  operator:
    defaultRuntime: {{ .Values.operator.defaultRuntime }}
  toolkit: {}
  mig:
    {{- with .Values.mig.strategy }}
    strategy: {{ . }}
    {{- end }}
  driver:
    enabled: {{ .Values.driver.enabled }}
  {{- with .Values.devicePlugin.config }}
  {{- if .name }}
  devicePlugin:
    config:
      name: {{ .name | quote }}
      default: {{ .default | quote }}
  {{- else }}
  devicePlugin: {}
  {{- end }}
  {{- end }}
  migManager:
    {{- with .Values.migManager.config }}
    config:
      {{- with .name }}
      name: {{ . }}
      {{- end }}
      default: {{ .default | quote }}
    {{- end }}
