{{- define "eto.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "eto.labels" -}}
app.kubernetes.io/name: {{ include "eto.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "eto.selectorLabels" -}}
app.kubernetes.io/name: {{ include "eto.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
