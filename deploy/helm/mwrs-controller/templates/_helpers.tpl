{{/* The release's full name: the release name, with the chart's unless it holds it. */}}
{{- define "mwrs.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "mwrs.serviceAccountName" -}}
{{- default (include "mwrs.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "mwrs.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{ include "mwrs.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Labels that select the controller's pods. */}}
{{- define "mwrs.selectorLabels" -}}
app.kubernetes.io/name: mwrs-controller
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The controller's command line. */}}
{{- define "mwrs.args" -}}
- --metrics-addr=0.0.0.0:{{ .Values.metrics.port }}
- --metrics-security={{ .Values.metrics.security }}
{{- if .Values.metrics.certSecret }}
- --metrics-cert-dir=/etc/mwrs/metrics-tls
{{- end }}
{{- if .Values.leaderElection.enabled }}
- --leader-elect
- --lease-namespace={{ .Release.Namespace }}
{{- end }}
{{- with .Values.controller }}
{{- if .watchNamespace }}
- --namespace={{ .watchNamespace }}
{{- end }}
- --workers={{ .workers }}
- --concurrency={{ .concurrency }}
- --writes-in-flight={{ .writesInFlight }}
- --settle-time={{ .settleTime }}
{{- if kindIs "slice" .labelsNotCopied }}
- --labels-not-copied={{ join "," .labelsNotCopied }}
{{- end }}
- --manifest-size-limit={{ int64 .manifestSizeLimit }}
- --log-format={{ .logFormat }}
{{- range .upstreamQuirks }}
- --upstream-quirk={{ . }}
{{- end }}
{{- if .plugins }}
- --work-config=/etc/mwrs/work-config/config.yaml
- --plugin-poll={{ .pluginPoll }}
{{- if not $.Values.leaderElection.enabled }}
- --lease-namespace={{ $.Release.Namespace }}
{{- end }}
- --mark-key-secret={{ include "mwrs.markKeySecret" $ }}
{{- end }}
{{- range .extraArgs }}
- {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The Secret holding the key that seals the controller's marks. */}}
{{- define "mwrs.markKeySecret" -}}
{{- .Values.controller.markKeySecret | default (printf "%s-marks" (include "mwrs.fullname" .)) -}}
{{- end }}

{{/* The controller's image: by digest when one is given, else by tag. */}}
{{- define "mwrs.image" -}}
{{- if .Values.image.digest -}}
"{{ .Values.image.repository }}@{{ .Values.image.digest }}"
{{- else -}}
"{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
{{- end -}}
{{- end -}}
