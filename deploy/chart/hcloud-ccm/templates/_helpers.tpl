{{/* Name of every object (the official chart's, so RBAC and Lease names carry over). */}}
{{- define "hcloud-ccm.name" -}}
{{- default "hcloud-cloud-controller-manager" .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The official chart's name helper: its default `selectorLabels` value calls it through
`tpl`, so a values file written for the official chart renders here unchanged. */}}
{{- define "hcloud-cloud-controller-manager.name" -}}
{{- include "hcloud-ccm.name" . -}}
{{- end -}}

{{/* The selector labels: `selectorLabels` through `tpl`, as the official chart does (the
Deployment's selector is immutable, so taking over a release needs the same ones). */}}
{{- define "hcloud-ccm.selectorLabels" -}}
{{- $labels := tpl (toYaml .Values.selectorLabels) . | fromYaml -}}
{{- if not $labels -}}
{{- fail "selectorLabels: empty; the workload needs at least one selector label" -}}
{{- end -}}
{{- toYaml $labels -}}
{{- end -}}

{{- define "hcloud-ccm.labels" -}}
{{- $labels := include "hcloud-ccm.selectorLabels" . | fromYaml -}}
{{- $_ := set $labels "app.kubernetes.io/name" (include "hcloud-ccm.name" .) -}}
{{- $_ := set $labels "app.kubernetes.io/instance" .Release.Name -}}
{{- $_ := set $labels "app.kubernetes.io/version" .Chart.AppVersion -}}
{{- $_ := set $labels "app.kubernetes.io/managed-by" .Release.Service -}}
{{- $_ := set $labels "helm.sh/chart" (printf "%s-%s" .Chart.Name .Chart.Version) -}}
{{- toYaml $labels -}}
{{- end -}}

{{/* "true" when the CCM runs with leader election: `args.leader-elect` when given (a bare
flag, "" or "true", means on), else off for a Deployment of one replica (the chart then passes
--leader-elect=false, as the official one does) and on otherwise (upstream's default). */}}
{{- define "hcloud-ccm.leaderElect" -}}
{{- $given := index .Values.args "leader-elect" -}}
{{- if not (kindIs "invalid" $given) -}}
{{- has (toString $given | lower) (list "" "true" "1" "t") | toString -}}
{{- else if and (eq .Values.kind "Deployment") (eq (int .Values.replicaCount) 1) -}}
false
{{- else -}}
true
{{- end -}}
{{- end -}}

{{/* The arguments: values.args, plus the flags kind/replicaCount and networking imply. */}}
{{- define "hcloud-ccm.args" -}}
{{- $args := deepCopy .Values.args -}}
{{- if eq (include "hcloud-ccm.leaderElect" .) "false" -}}
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

{{/* The environment: values.env plus what monitoring, networking and robot imply; each
entry through `tpl`, as the official chart does. */}}
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
{{- tpl (toYaml $spec) $ | nindent 2 }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The image: `image.tag` through `tpl` (the official default is "v{{ $.Chart.Version }}"),
v<appVersion> when empty. The source chart's repository is a placeholder: nothing is published
under it, so the render stops with a message instead of installing a Pod that pulls
docker.io/library/hcloud-ccm. */}}
{{- define "hcloud-ccm.image" -}}
{{- if eq (toString .Values.image.repository) "hcloud-ccm" -}}
{{- fail (printf "image.repository: %q is this source chart's placeholder and no image of hcloud-ccm has been published yet. Build and push one (scripts/build-image --push docker://<registry>/hcloud-ccm:v%s, see docs/quickstart.md) and set image.repository=<registry>/hcloud-ccm" .Values.image.repository .Chart.AppVersion) -}}
{{- end -}}
{{- $tag := tpl (toString (.Values.image.tag | default "")) . | default (printf "v%s" .Chart.AppVersion) -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}

{{/* The value of `--<flag>` in args, or `default` when the flag is not given. */}}
{{- define "hcloud-ccm.arg" -}}
{{- $value := index .root.Values.args .flag -}}
{{- if kindIs "invalid" $value -}}{{ .default }}{{- else -}}{{ toString $value }}{{- end -}}
{{- end -}}

{{/* The metrics listener's port: the one of env.HCLOUD_METRICS_ADDRESS's `value` (host:port),
else 8233 (the official CCM's). */}}
{{- define "hcloud-ccm.metricsPort" -}}
{{- $address := "" -}}
{{- with .Values.env.HCLOUD_METRICS_ADDRESS -}}{{- $address = toString (.value | default "") -}}{{- end -}}
{{- if $address -}}
{{- $port := regexFind "[0-9]+$" $address -}}
{{- if not $port -}}{{- fail (printf "env.HCLOUD_METRICS_ADDRESS: %q has no port" $address) -}}{{- end -}}
{{- $port -}}
{{- else -}}
8233
{{- end -}}
{{- end -}}

{{/* The liveness probe: `livenessProbe` with its httpGet's port, scheme and host following
args.secure-port and args.bind-address (the secure port's /healthz), or the metrics listener's
/healthz when the secure port is off (--secure-port=0). A probe naming its own port is kept as
given. Empty when there is nothing to probe. */}}
{{- define "hcloud-ccm.livenessProbe" -}}
{{- with .Values.livenessProbe -}}
{{- $probe := deepCopy . -}}
{{- $get := $probe.httpGet | default dict -}}
{{- if and $probe.httpGet (not $get.port) -}}
{{- $securePort := include "hcloud-ccm.arg" (dict "root" $ "flag" "secure-port" "default" "10258") | int -}}
{{- $bind := include "hcloud-ccm.arg" (dict "root" $ "flag" "bind-address" "default" "0.0.0.0") -}}
{{- if gt $securePort 0 -}}
{{- $_ := set $get "port" $securePort -}}
{{- $_ := set $get "scheme" "HTTPS" -}}
{{- if or (hasPrefix "127." $bind) (eq $bind "::1") (eq $bind "localhost") -}}
{{- if not $.Values.networking.enabled -}}
{{- fail (printf "args.bind-address: %q is a loopback address: the kubelet probes the Pod's address, which cannot reach it. Use 0.0.0.0 (the default), or set livenessProbe: null" $bind) -}}
{{- end -}}
{{- $_ := set $get "host" (ternary "::1" "127.0.0.1" (eq $bind "::1")) -}}
{{- end -}}
{{- else if $.Values.monitoring.enabled -}}
{{- $_ := set $get "port" (include "hcloud-ccm.metricsPort" $ | int) -}}
{{- $_ := set $get "scheme" "HTTP" -}}
{{- else -}}
{{- $probe = dict -}}
{{- end -}}
{{- if $probe -}}{{- $_ := set $probe "httpGet" $get -}}{{- end -}}
{{- end -}}
{{- if $probe -}}{{- toYaml $probe -}}{{- end -}}
{{- end -}}
{{- end -}}
