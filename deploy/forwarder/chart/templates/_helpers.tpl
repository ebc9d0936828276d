{{/* The labels the kustomize base gives every object (its `labels`, not in selectors or pod templates). */}}
{{- define "outrigger-forwarder.labels" -}}
app.kubernetes.io/part-of: outrigger
{{- end -}}

{{/* The image as ForwarderImageUri names it: by digest, by tag, or bare. */}}
{{- define "outrigger-forwarder.image" -}}
{{- $i := .Values.image -}}
{{- if $i.digest -}}{{ $i.repository }}@{{ $i.digest }}{{- else if $i.tag -}}{{ $i.repository }}:{{ $i.tag }}{{- else -}}{{ $i.repository }}{{- end -}}
{{- end -}}

{{/* The forwarder's environment (forwarder/main.ts lists every variable): ../base's ConfigMap literals and the cluster's settings. */}}
{{- define "outrigger-forwarder.env" -}}
{{- $entry := dict "id" .Values.clusterId "access" (dict "kind" "kubeconfig") -}}
{{- with .Values.storage }}{{ $_ := set $entry "storage" . }}{{ end -}}
{{- with .Values.controllerSelector }}{{ $_ := set $entry "controllerSelector" . }}{{ end -}}
{{- with .Values.metacontroller }}{{ $_ := set $entry "metacontroller" . }}{{ end -}}
{{- if .Values.region }}
AWS_REGION: {{ .Values.region | quote }}
{{- end }}
NODE_OPTIONS: "--enable-source-maps --max-old-space-size=384"
OUTRIGGER_CHECKPOINT_CONFIGMAP: outrigger-forwarder-checkpoint
OUTRIGGER_CLUSTER_ID: {{ .Values.clusterId | quote }}
OUTRIGGER_CLUSTERS: {{ list $entry | toJson | quote }}
OUTRIGGER_DEAD_LETTER_QUEUE_URL: {{ .Values.deadLetterQueueUrl | quote }}
OUTRIGGER_EVENT_QUEUE_URL: {{ .Values.eventsQueueUrl | quote }}
OUTRIGGER_LEADER_ELECTION_LEASE: outrigger-forwarder-leader
OUTRIGGER_MAX_BUFFERED: "1000"
{{- end -}}
