{{/*
karpx.metadata: the labels and annotations lines of an object's metadata,
indented for it and starting with a newline (nothing when both are empty):
the object's own (the dict's "labels" and "annotations") merged with
additionalLabels and additionalAnnotations (the object's win). Minimal by
default, so the rendered objects equal manifests/ (generated from this chart).
*/}}
{{- define "karpx.metadata" -}}
{{- $labels := merge (deepCopy (.labels | default dict)) (.root.Values.additionalLabels | default dict) -}}
{{- with $labels }}
{{- dict "labels" . | toYaml | nindent 2 }}
{{- end }}
{{- $annotations := merge (deepCopy (.annotations | default dict)) (.root.Values.additionalAnnotations | default dict) -}}
{{- with $annotations }}
{{- dict "annotations" . | toYaml | nindent 2 }}
{{- end }}
{{- end -}}

{{/* karpx.serviceAccountName: the controller's ServiceAccount. */}}
{{- define "karpx.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default "karpx" -}}
{{- end -}}

{{/* karpx.webhook.serviceAccountName: the webhook's ServiceAccount. */}}
{{- define "karpx.webhook.serviceAccountName" -}}
{{- .Values.webhook.serviceAccount.name | default "karpx-webhook" -}}
{{- end -}}

{{/* karpx.webhook.namespace: webhook.namespace, else the release's. */}}
{{- define "karpx.webhook.namespace" -}}
{{- .Values.webhook.namespace | default .Release.Namespace -}}
{{- end -}}

{{/*
karpx.image: repository:tag (tag defaults to the chart's appVersion, the
release), or repository@digest when a digest is given.
*/}}
{{- define "karpx.image" -}}
{{- if .image.digest -}}
{{- printf "%s@%s" .image.repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository (.image.tag | default .root.Chart.AppVersion) -}}
{{- end -}}
{{- end -}}
