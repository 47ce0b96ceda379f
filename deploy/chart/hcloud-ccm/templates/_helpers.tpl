{{/* Name of every object (the official chart's, so RBAC and Lease names carry over). */}}
{{- define "hcloud-ccm.name" -}}
{{- default "hcloud-cloud-controller-manager" .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hcloud-ccm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hcloud-ccm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "hcloud-ccm.labels" -}}
{{ include "hcloud-ccm.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The arguments: values.args, plus the flags kind/replicaCount and networking imply. */}}
{{- define "hcloud-ccm.args" -}}
{{- $args := deepCopy .Values.args -}}
{{- if and (eq .Values.kind "Deployment") (eq (int .Values.replicaCount) 1) -}}
{{- $_ := set $args "leader-elect" "false" -}}
{{- end -}}
{{- if .Values.networking.enabled -}}
{{- $_ := set $args "allocate-node-cidrs" "true" -}}
{{- $_ := set $args "cluster-cidr" .Values.networking.clusterCIDR -}}
{{- end -}}
{{- range $key, $value := $args }}
{{- if not (kindIs "invalid" $value) }}
- {{ ternary (printf "--%s" $key) (printf "--%s=%v" $key $value) (eq (toString $value) "") | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The environment: values.env plus what monitoring, networking and robot imply. */}}
{{- define "hcloud-ccm.env" -}}
{{- $env := deepCopy .Values.env -}}
{{- $_ := set $env "HCLOUD_METRICS_ENABLED" (dict "value" (toString .Values.monitoring.enabled)) -}}
{{- $_ := set $env "ROBOT_ENABLED" (dict "value" (toString (.Values.robot.enabled | default false))) -}}
{{- if .Values.networking.enabled -}}
{{- $_ := set $env "HCLOUD_NETWORK" .Values.networking.network -}}
{{- end -}}
{{- range $name, $spec := $env }}
{{- if not (kindIs "invalid" $spec) }}
- name: {{ $name }}
{{- toYaml $spec | nindent 2 }}
{{- end }}
{{- end }}
{{- end -}}
