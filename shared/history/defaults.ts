// Defaulted fields: what the apiserver fills in when a field is absent, so that "absent" and "set to the default"
// mean the same. Revisions keep what the object held when they were made; when a newer apiserver (or a CRD
// schema change) starts defaulting a field, every live object read from etcd shows it and no older revision
// does, and a comparison that does not know the default makes a new revision of every parent: a rollout of
// the whole fleet for nothing (kubernetes #78633: `securityContext.procMount: Default` after 1.13 -> 1.14).
//
// Both sides of a comparison are normalised by dropping each field whose value is its default (see
// `normalize` in shared/json.ts). That is the same equivalence as filling absent fields with their defaults, and the
// one that stays transitive with "an empty map is absent": `{}` is absent, `{}` defaults to `{a: 1}`, so
// `{a: 1}` must be absent too. Stored revision data and revision names never pass through this.
//
// A missing entry here only leaves a field unnormalised (a difference in it is a change, as before); a wrong
// entry could hide a real change. So the table lists only defaults read from the Kubernetes 1.35 API (the
// field documentation in k8s.io/api core/v1 types.go, and the defaulting the apiserver applies to the pod
// templates of apps/v1 and batch/v1 objects and to StatefulSet volumeClaimTemplates), and the image pull
// policy rule gives up on any image reference it does not parse with certainty.
import type { DefaultsSchema, Json } from '../json.ts';

// Image references (the distribution/reference grammar), only as far as needed to find the tag. Stricter than
// the real grammar in places (lowercase registry names, no IPv6 registries): a reference these reject is
// left alone rather than guessed at.
const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const REGISTRY = /^(?:localhost|[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*)(?::[0-9]+)?$/;
const TAG = /^\w[\w.-]{0,127}$/;
const DIGEST = /^(?:sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128})$/;

/**
 * The pull policy Kubernetes gives an image when none is set: Always for the `latest` tag (which is also the
 * tag of a reference with neither tag nor digest), IfNotPresent otherwise. Undefined when unsure.
 */
export function defaultPullPolicy(image: Json | undefined): 'Always' | 'IfNotPresent' | undefined {
  // 255: the longest name the parser accepts; 64 hex digits: an image id, which it refuses.
  if (typeof image !== 'string' || image.length === 0 || image.length > 255 || /^[a-f0-9]{64}$/.test(image)) return undefined;
  let name = image;
  let digest: string | undefined;
  let tag: string | undefined;
  const at = name.indexOf('@');
  if (at >= 0) {
    digest = name.slice(at + 1);
    name = name.slice(0, at);
    if (!DIGEST.test(digest)) return undefined;
  }
  // A colon after the last slash starts the tag; one before it is a registry's port.
  const colon = name.indexOf(':', name.lastIndexOf('/') + 1);
  if (colon >= 0) {
    tag = name.slice(colon + 1);
    name = name.slice(0, colon);
    if (!TAG.test(tag)) return undefined;
  }
  const parts = name.split('/');
  const registry = parts.length > 1 && (/[.:]/.test(parts[0]!) || parts[0] === 'localhost');
  if (registry && !REGISTRY.test(parts[0]!)) return undefined;
  if (!parts.slice(registry ? 1 : 0).every((p) => PATH_COMPONENT.test(p))) return undefined;
  if (tag === undefined && digest === undefined) tag = 'latest';
  return tag === 'latest' ? 'Always' : 'IfNotPresent';
}

const is = (value: Json): DefaultsSchema => ({ default: value });
const fields = (properties: Record<string, DefaultsSchema>): DefaultsSchema => ({ properties });
const each = (items: DefaultsSchema): DefaultsSchema => ({ items });

// Probes and lifecycle hooks: core/v1 Probe ("Defaults to 1 / 10 / 1 / 3"), HTTPGetAction (scheme "Defaults to
// HTTP"; path defaulted to "/"), GRPCAction (service `+default=""`).
const httpGet = fields({ path: is('/'), scheme: is('HTTP') });
const probe = fields({
  timeoutSeconds: is(1),
  periodSeconds: is(10),
  successThreshold: is(1),
  failureThreshold: is(3),
  httpGet,
  grpc: fields({ service: is('') }),
});
// ObjectFieldSelector: "Version of the schema the FieldPath is written in terms of, defaults to \"v1\"".
const fieldRef = fields({ apiVersion: is('v1') });

const container = fields({
  imagePullPolicy: { derive: (c) => defaultPullPolicy(c.image) },
  // A struct, not a pointer: the apiserver serves `resources: {}` on every container that has none.
  resources: is({}),
  terminationMessagePath: is('/dev/termination-log'),
  terminationMessagePolicy: is('File'),
  ports: each(fields({ protocol: is('TCP') })),
  env: each(fields({ valueFrom: fields({ fieldRef, fileKeyRef: fields({ optional: is(false) }) }) })),
  livenessProbe: probe,
  readinessProbe: probe,
  startupProbe: probe,
  lifecycle: fields({ postStart: fields({ httpGet }), preStop: fields({ httpGet }) }),
  // "The default value is Default": Kubernetes 1.12-1.14 wrote it into every container securityContext, and
  // objects and revisions from then still carry it (kubernetes #78633). An empty one sets nothing: none.
  securityContext: { default: {}, properties: { procMount: is('Default') } },
});

// PersistentVolumeClaimSpec: volumeMode "Value of Filesystem is implied when not included in claim spec".
const claimSpec = fields({ volumeMode: is('Filesystem') });

// File modes: "Defaults to 0644" (420) for secret, configMap, downwardAPI and projected volumes.
const volume = fields({
  hostPath: fields({ type: is('') }),
  secret: fields({ defaultMode: is(420) }),
  configMap: fields({ defaultMode: is(420) }),
  downwardAPI: fields({ defaultMode: is(420), items: each(fields({ fieldRef })) }),
  projected: fields({
    defaultMode: is(420),
    sources: each(
      fields({ downwardAPI: fields({ items: each(fields({ fieldRef })) }), serviceAccountToken: fields({ expirationSeconds: is(3600) }) }),
    ),
  }),
  ephemeral: fields({ volumeClaimTemplate: fields({ spec: claimSpec }) }),
  // "Defaults to Always if :latest tag is specified, or IfNotPresent otherwise."
  image: fields({ pullPolicy: { derive: (v) => defaultPullPolicy(v.reference) } }),
  // The `+default` values of the older in-tree volume plugins.
  iscsi: fields({ iscsiInterface: is('default') }),
  rbd: fields({ pool: is('rbd'), user: is('admin'), keyring: is('/etc/ceph/keyring') }),
  azureDisk: fields({ cachingMode: is('ReadWrite'), fsType: is('ext4'), readOnly: is(false), kind: is('Shared') }),
  scaleIO: fields({ storageMode: is('ThinProvisioned'), fsType: is('xfs') }),
});

const podSpec = fields({
  dnsPolicy: is('ClusterFirst'),
  restartPolicy: is('Always'),
  securityContext: is({}),
  terminationGracePeriodSeconds: is(30),
  schedulerName: is('default-scheduler'),
  // "Optional: Defaults to true." Defaulted on pods, not on templates; a template without it makes pods with
  // `true`, so the two templates are the same.
  enableServiceLinks: is(true),
  containers: each(container),
  initContainers: each(container),
  ephemeralContainers: each(container),
  volumes: each(volume),
});

/** The defaults inside a PodTemplateSpec. */
export const POD_TEMPLATE_DEFAULTS: DefaultsSchema = fields({ spec: podSpec });

/** The defaults inside a PersistentVolumeClaim as a StatefulSet's volumeClaimTemplates hold it. */
export const CLAIM_TEMPLATE_DEFAULTS: DefaultsSchema = fields({ spec: claimSpec, status: fields({ phase: is('Pending') }) });

const templateAt = (template: DefaultsSchema) => fields({ spec: fields({ template }) });

// By `<group>/<kind>` (the core group is empty). Only fields inside the target states Outrigger is used with
// (pod templates, claim templates) are listed, not the kinds' own spec defaults (replicas, strategies).
const BUILTIN: Readonly<Record<string, DefaultsSchema>> = {
  'apps/StatefulSet': fields({ spec: fields({ template: POD_TEMPLATE_DEFAULTS, volumeClaimTemplates: each(CLAIM_TEMPLATE_DEFAULTS) }) }),
  'apps/DaemonSet': templateAt(POD_TEMPLATE_DEFAULTS),
  'apps/Deployment': templateAt(POD_TEMPLATE_DEFAULTS),
  'apps/ReplicaSet': templateAt(POD_TEMPLATE_DEFAULTS),
  'batch/Job': templateAt(POD_TEMPLATE_DEFAULTS),
  'batch/CronJob': fields({ spec: fields({ jobTemplate: templateAt(POD_TEMPLATE_DEFAULTS) }) }),
  '/ReplicationController': templateAt(POD_TEMPLATE_DEFAULTS),
  '/PodTemplate': fields({ template: POD_TEMPLATE_DEFAULTS }),
};

/** The defaults of a built-in kind, rooted at the object; undefined for kinds not in the table. */
export function builtinDefaults(group: string, kind: string): DefaultsSchema | undefined {
  return Object.hasOwn(BUILTIN, `${group}/${kind}`) ? BUILTIN[`${group}/${kind}`] : undefined;
}

type Obj = { [key: string]: unknown };
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The defaults a CRD's structural schema declares for one served version, rooted at the object; undefined when
 * it declares none. Only a property's own default counts: the apiserver fills an item's or a map value's
 * default in for a null one only, never adds items or keys. A nullable field's default is left out: there,
 * null is a value of its own and not the default, but normalisation cannot tell null from absent.
 */
export function crdDefaults(crd: unknown, version: string): DefaultsSchema | undefined {
  const spec = isObj(crd) && isObj(crd.spec) ? crd.spec : {};
  const served = (Array.isArray(spec.versions) ? spec.versions : []).find((v): v is Obj => isObj(v) && v.name === version);
  const schema = served && isObj(served.schema) ? served.schema.openAPIV3Schema : undefined;
  return fromOpenApi(schema, false);
}

function fromOpenApi(s: unknown, own: boolean): DefaultsSchema | undefined {
  if (!isObj(s)) return undefined;
  const out: {
    default?: Json;
    properties?: Record<string, DefaultsSchema>;
    items?: DefaultsSchema;
    additionalProperties?: DefaultsSchema;
  } = {};
  if (own && s.default !== undefined && s.default !== null && s.nullable !== true) out.default = s.default as Json;
  if (isObj(s.properties)) {
    // fromEntries, so that a property named `__proto__` is a key like any other.
    const properties = Object.fromEntries(
      Object.entries(s.properties).flatMap(([k, p]) => {
        const d = fromOpenApi(p, true);
        return d ? [[k, d] as const] : [];
      }),
    );
    if (Object.keys(properties).length > 0) out.properties = properties;
  }
  const items = fromOpenApi(s.items, false);
  if (items) out.items = items;
  const additional = fromOpenApi(s.additionalProperties, false);
  if (additional) out.additionalProperties = additional;
  return Object.keys(out).length > 0 ? out : undefined;
}
