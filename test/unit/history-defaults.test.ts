// Defaulted fields in history comparisons (kubernetes #78633): a field set to its default equals the field
// absent, for built-in pod templates (a table) and custom resources (their CRD's schema defaults).
/* eslint-disable max-lines -- the table, property and CRD-schema sections share the STS defaults, stsState and revision fixtures below */
import fc from 'fast-check';
import { revisionHash, targetState, type Json, type JsonObject } from '../../shared/history/data.ts';
import { canonicalJson, normalize, semanticallyEqual } from '../../shared/json.ts';
import { builtinDefaults, crdDefaults, defaultPullPolicy, POD_TEMPLATE_DEFAULTS } from '../../shared/history/defaults.ts';
import { decide, type ControllerRevision } from '../../shared/history/revisions.ts';

const STS = builtinDefaults('apps', 'StatefulSet')!;
const stsState = (template: Json) => targetState({ spec: { replicas: 1, template } }, ['spec.template']);
const revision = (name: string, number: number, data: Json): ControllerRevision => ({
  apiVersion: 'apps/v1',
  kind: 'ControllerRevision',
  metadata: { name },
  data,
  revision: number,
});
const clone = <T>(v: T): T => structuredClone(v);

// What the user wrote, and what a 1.14 apiserver made of it (the template read back from etcd).
const manifest = {
  metadata: { labels: { app: 'web' } },
  spec: { containers: [{ name: 'c', image: 'registry.example/app:1', securityContext: { runAsNonRoot: true } }] },
};
const served114 = {
  metadata: { creationTimestamp: null, labels: { app: 'web' } },
  spec: {
    containers: [
      {
        name: 'c',
        image: 'registry.example/app:1',
        imagePullPolicy: 'IfNotPresent',
        resources: {},
        securityContext: { runAsNonRoot: true, procMount: 'Default' },
        terminationMessagePath: '/dev/termination-log',
        terminationMessagePolicy: 'File',
      },
    ],
    dnsPolicy: 'ClusterFirst',
    restartPolicy: 'Always',
    schedulerName: 'default-scheduler',
    securityContext: {},
    terminationGracePeriodSeconds: 30,
  },
};

describe('defaulted fields (kubernetes #78633)', () => {
  test('a revision made before procMount was defaulted equals the live template that has it: no new revision', () => {
    const before = clone(served114);
    delete (before.spec.containers[0]!.securityContext as { procMount?: string }).procMount;
    const owned = [revision('web-old', 1, stsState(before))];
    expect(decide(stsState(served114), owned, STS)).toMatchObject({ kind: 'unchanged', revision: { metadata: { name: 'web-old' } } });
    // Without the kind's defaults, the same comparison is the spurious rollout.
    expect(decide(stsState(served114), owned)).toMatchObject({ kind: 'create' });
  });

  test('the manifest as written equals the template as served, and an older revision equal modulo defaults is a rollback', () => {
    expect(semanticallyEqual(stsState(manifest), stsState(served114), STS)).toBe(true);
    const changed = clone(served114);
    changed.spec.containers[0]!.image = 'registry.example/app:2';
    const owned = [revision('web-a', 1, stsState(manifest)), revision('web-b', 2, stsState(changed))];
    expect(decide(stsState(served114), owned, STS)).toMatchObject({
      kind: 'rollback',
      number: 3,
      revision: { metadata: { name: 'web-a' } },
    });
  });

  test.each<[string, (t: typeof served114) => void]>([
    ['the image', (t) => void (t.spec.containers[0]!.image = 'registry.example/app:2')],
    ['procMount Unmasked', (t) => void ((t.spec.containers[0]!.securityContext as { procMount: string }).procMount = 'Unmasked')],
    ['a grace period of 31 s', (t) => void (t.spec.terminationGracePeriodSeconds = 31)],
    ['pull policy Always on a versioned tag', (t) => void (t.spec.containers[0]!.imagePullPolicy = 'Always')],
    ['dnsPolicy Default (not the default)', (t) => void (t.spec.dnsPolicy = 'Default')],
  ])('a real change is still a change: %s', (_, change) => {
    const changed = clone(served114);
    change(changed);
    expect(semanticallyEqual(stsState(changed), stsState(served114), STS)).toBe(false);
    expect(semanticallyEqual(stsState(changed), stsState(manifest), STS)).toBe(false);
  });

  test('stored data and revision names never depend on the defaults', () => {
    const data = stsState(served114);
    const copy = clone(data);
    normalize(data, STS);
    expect(data).toEqual(copy);
    // The name hashes the data as stored: two revisions that are semantically equal keep different names.
    expect(revisionHash(stsState(manifest), 0)).not.toBe(revisionHash(data, 0));
    expect(canonicalJson(data)).toBe(canonicalJson(data, undefined));
    expect(canonicalJson(data)).toContain('"procMount":"Default"');
  });

  test('StatefulSet volumeClaimTemplates: volumeMode Filesystem and status.phase Pending are defaults', () => {
    const state = (claim: JsonObject) => targetState({ spec: { volumeClaimTemplates: [claim] } }, ['spec.volumeClaimTemplates']);
    const written = { metadata: { name: 'data' }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } } };
    const served = { ...written, spec: { ...written.spec, volumeMode: 'Filesystem' }, status: { phase: 'Pending' } };
    expect(semanticallyEqual(state(written), state(served), STS)).toBe(true);
    expect(semanticallyEqual(state(written), state({ ...served, spec: { ...served.spec, volumeMode: 'Block' } }), STS)).toBe(false);
  });

  test('the other template kinds have the same pod template defaults, at their own paths', () => {
    const tmpl = (t: Json) => ({ spec: { template: t } });
    for (const [group, kind] of [
      ['apps', 'DaemonSet'],
      ['apps', 'Deployment'],
      ['apps', 'ReplicaSet'],
      ['batch', 'Job'],
      ['', 'ReplicationController'],
    ] as const) {
      expect(semanticallyEqual(tmpl(manifest), tmpl(served114), builtinDefaults(group, kind))).toBe(true);
    }
    const cron = (t: Json) => ({ spec: { jobTemplate: { spec: { template: t } } } });
    expect(semanticallyEqual(cron(manifest), cron(served114), builtinDefaults('batch', 'CronJob'))).toBe(true);
    expect(builtinDefaults('apps', 'Nope')).toBeUndefined();
    expect(builtinDefaults('', 'toString')).toBeUndefined();
  });
});

describe('the image pull policy default', () => {
  const digest = `sha256:${'ab'.repeat(32)}`;
  test.each([
    ['nginx', 'Always'],
    ['nginx:latest', 'Always'],
    ['nginx:1.25', 'IfNotPresent'],
    ['library/nginx:Latest', 'IfNotPresent'],
    ['registry.example:5000/team/app', 'Always'],
    ['registry.example:5000/team/app:v2', 'IfNotPresent'],
    ['localhost/app', 'Always'],
    [`app@${digest}`, 'IfNotPresent'],
    [`app:latest@${digest}`, 'Always'],
  ])('%s: %s', (image, policy) => {
    expect(defaultPullPolicy(image)).toBe(policy);
  });

  test.each(['', 'Nginx', 'Team/app', 'a:b:c', 'app@sha256:abc', '[::1]:5000/app', 'ab'.repeat(32), `${'a'.repeat(256)}`])(
    'unsure of %j: no default, so the field is compared as it is',
    (image) => {
      expect(defaultPullPolicy(image)).toBeUndefined();
      const t = (policy?: string) =>
        stsState({ spec: { containers: [{ name: 'c', image, ...(policy ? { imagePullPolicy: policy } : {}) }] } });
      expect(semanticallyEqual(t('Always'), t(), STS)).toBe(false);
      expect(semanticallyEqual(t('IfNotPresent'), t(), STS)).toBe(false);
    },
  );
});

// Property tests: templates as a user writes them, the same templates with any subset of the apiserver's
// defaults filled in (written out here independently of the table), and real changes.
const IMAGES: Record<string, string> = {
  nginx: 'Always',
  'nginx:latest': 'Always',
  'nginx:1.25': 'IfNotPresent',
  'registry.example:5000/app:2': 'IfNotPresent',
  [`app@sha256:${'0'.repeat(64)}`]: 'IfNotPresent',
};
const port = fc.integer({ min: 1, max: 65535 });
const probe = fc.record(
  { httpGet: fc.record({ port }, { requiredKeys: ['port'] }), initialDelaySeconds: fc.nat({ max: 5 }) },
  { requiredKeys: ['httpGet'] },
);
const containerArb = fc.record(
  {
    name: fc.constantFrom('a', 'b', 'c'),
    image: fc.constantFrom(...Object.keys(IMAGES)),
    ports: fc.array(fc.record({ containerPort: port }), { minLength: 1, maxLength: 2 }),
    env: fc.array(
      fc.record({
        name: fc.constantFrom('X', 'Y'),
        valueFrom: fc.record({ fieldRef: fc.record({ fieldPath: fc.constant('metadata.name') }) }),
      }),
      { minLength: 1, maxLength: 2 },
    ),
    securityContext: fc.record({ runAsNonRoot: fc.boolean() }, { requiredKeys: [] }),
    livenessProbe: probe,
    readinessProbe: probe,
  },
  { requiredKeys: ['name', 'image'] },
);
const volumeArb = fc.oneof(
  fc.record({ name: fc.constant('cm'), configMap: fc.record({ name: fc.constant('cfg') }) }),
  fc.record({ name: fc.constant('s'), secret: fc.record({ secretName: fc.constant('sec') }) }),
  fc.record({ name: fc.constant('h'), hostPath: fc.record({ path: fc.constant('/var/x') }) }),
  fc.record({
    name: fc.constant('d'),
    downwardAPI: fc.record({ items: fc.constant([{ path: 'n', fieldRef: { fieldPath: 'metadata.name' } }]) }),
  }),
);
const templateArb = fc.record({
  metadata: fc.record({ labels: fc.constant({ app: 'web' }) }),
  spec: fc.record(
    {
      containers: fc.array(containerArb, { minLength: 1, maxLength: 3 }),
      initContainers: fc.array(containerArb, { maxLength: 1 }),
      volumes: fc.array(volumeArb, { maxLength: 3 }),
    },
    { requiredKeys: ['containers'] },
  ),
});
type Template = {
  metadata: JsonObject;
  spec: { containers: JsonObject[]; initContainers?: JsonObject[]; volumes?: JsonObject[]; [k: string]: Json | undefined };
};

/** The template with the apiserver's defaults filled in where `fill()` says so (each default asks once). */
function served(t: Template, fill: () => boolean): Template {
  const out = clone(t) as unknown as { [k: string]: { [k: string]: Json } };
  const set = (o: { [k: string]: Json }, k: string, v: Json) => {
    if (o[k] === undefined && fill()) o[k] = v;
  };
  const spec = out.spec!;
  for (const [k, v] of Object.entries({
    dnsPolicy: 'ClusterFirst',
    restartPolicy: 'Always',
    securityContext: {},
    terminationGracePeriodSeconds: 30,
    schedulerName: 'default-scheduler',
    enableServiceLinks: true,
  }))
    set(spec, k, v);
  for (const c of [...((spec.containers ?? []) as JsonObject[]), ...((spec.initContainers ?? []) as JsonObject[])]) {
    set(c, 'imagePullPolicy', IMAGES[c.image as string]!);
    set(c, 'terminationMessagePath', '/dev/termination-log');
    set(c, 'terminationMessagePolicy', 'File');
    for (const p of (c.ports ?? []) as JsonObject[]) set(p, 'protocol', 'TCP');
    for (const e of (c.env ?? []) as Array<{ valueFrom: { fieldRef: JsonObject } }>) set(e.valueFrom.fieldRef, 'apiVersion', 'v1');
    if (c.securityContext) set(c.securityContext as JsonObject, 'procMount', 'Default');
    for (const p of [c.livenessProbe, c.readinessProbe] as Array<JsonObject | undefined>) {
      if (!p) continue;
      for (const [k, v] of Object.entries({ timeoutSeconds: 1, periodSeconds: 10, successThreshold: 1, failureThreshold: 3 })) set(p, k, v);
      set(p.httpGet as JsonObject, 'path', '/');
      set(p.httpGet as JsonObject, 'scheme', 'HTTP');
    }
  }
  for (const v of (spec.volumes ?? []) as Array<{ [k: string]: JsonObject }>) {
    if (v.configMap) set(v.configMap, 'defaultMode', 420);
    if (v.secret) set(v.secret, 'defaultMode', 420);
    if (v.hostPath) set(v.hostPath, 'type', '');
    if (v.downwardAPI) {
      set(v.downwardAPI, 'defaultMode', 420);
      for (const item of v.downwardAPI.items as Array<{ fieldRef: JsonObject }>) set(item.fieldRef, 'apiVersion', 'v1');
    }
  }
  return out as unknown as Template;
}
const bitsArb = fc.array(fc.boolean(), { minLength: 1, maxLength: 40 });
const filler = (bits: boolean[]) => {
  let i = 0;
  return () => bits[i++ % bits.length]!;
};

// Changes that are real: a field set to a value that is not its default, or a different image.
const changes: Array<[string, (t: Template) => void]> = [
  ['image', (t) => void (t.spec.containers[0]!.image = 'other.example/app:9')],
  ['imagePullPolicy Never', (t) => void (t.spec.containers[0]!.imagePullPolicy = 'Never')],
  ['terminationMessagePolicy', (t) => void (t.spec.containers[0]!.terminationMessagePolicy = 'FallbackToLogsOnError')],
  [
    'procMount Unmasked',
    (t) =>
      void (t.spec.containers[0]!.securityContext = {
        ...((t.spec.containers[0]!.securityContext as JsonObject) ?? {}),
        procMount: 'Unmasked',
      }),
  ],
  [
    'a UDP port',
    (t) => {
      const c = t.spec.containers[0]!;
      c.ports = c.ports
        ? (c.ports as JsonObject[]).map((p, i) => (i === 0 ? { ...p, protocol: 'UDP' } : p))
        : [{ containerPort: 53, protocol: 'UDP' }];
    },
  ],
  ['grace period', (t) => void (t.spec.terminationGracePeriodSeconds = 5)],
  ['restartPolicy', (t) => void (t.spec.restartPolicy = 'OnFailure')],
  ['schedulerName', (t) => void (t.spec.schedulerName = 'custom')],
  ['enableServiceLinks false', (t) => void (t.spec.enableServiceLinks = false)],
  [
    'defaultMode 0600',
    (t) => {
      const cm = (t.spec.volumes ?? []).find((v) => v.configMap) as { configMap: JsonObject } | undefined;
      if (cm) cm.configMap.defaultMode = 384;
      else t.spec.volumes = [...(t.spec.volumes ?? []), { name: 'cm', configMap: { name: 'cfg', defaultMode: 384 } }];
    },
  ],
];

describe('defaulted fields, properties', () => {
  test('normalisation is idempotent, with and without defaults', () => {
    const idempotent = (v: Json) => {
      const once = normalize(v, STS);
      expect(normalize(once, STS)).toEqual(once);
      expect(normalize(normalize(v))).toEqual(normalize(v));
    };
    fc.assert(fc.property(fc.jsonValue() as fc.Arbitrary<Json>, idempotent));
    fc.assert(
      fc.property(templateArb, bitsArb, (t, bits) => {
        idempotent(stsState(t as Json));
        idempotent(stsState(served(t as Template, filler(bits)) as unknown as Json));
      }),
    );
  });

  test('any subset of the defaults filled in (an older revision, the live object) is the same state', () => {
    fc.assert(
      fc.property(templateArb, bitsArb, bitsArb, (t, a, b) => {
        const older = stsState(served(t as Template, filler(a)) as unknown as Json);
        const live = stsState(served(t as Template, () => true) as unknown as Json);
        const other = stsState(served(t as Template, filler(b)) as unknown as Json);
        expect(semanticallyEqual(older, live, STS)).toBe(true);
        expect(semanticallyEqual(older, other, STS)).toBe(true);
        expect(decide(live, [revision('p-1', 1, older)], STS).kind).toBe('unchanged');
      }),
    );
  });

  test('a real change is a change, however many defaults either side has', () => {
    fc.assert(
      fc.property(templateArb, fc.constantFrom(...changes), bitsArb, bitsArb, (t, [, change], a, b) => {
        const changed = clone(t) as Template;
        change(changed);
        const before = stsState(served(t as Template, filler(a)) as unknown as Json);
        const after = stsState(served(changed, filler(b)) as unknown as Json);
        expect(semanticallyEqual(before, after, STS)).toBe(false);
        expect(decide(after, [revision('p-1', 1, before)], STS).kind).toBe('create');
      }),
    );
  });

  test('equality with defaults is an equivalence over arbitrary values', () => {
    const anyJson = fc.jsonValue() as fc.Arbitrary<Json>;
    fc.assert(
      fc.property(anyJson, anyJson, (a, b) => {
        expect(semanticallyEqual(a, a, STS)).toBe(true);
        expect(semanticallyEqual(a, b, STS)).toBe(semanticallyEqual(b, a, STS));
      }),
    );
  });
});

describe('custom resources: the defaults of the CRD schema', () => {
  const schema = (version: string, properties: JsonObject) => ({
    name: version,
    served: true,
    storage: version === 'v1',
    schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', properties } } } },
  });
  const crd = {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    spec: {
      versions: [
        schema('v1', {
          template: {
            type: 'object',
            properties: {
              mode: { type: 'string', default: 'Fast' },
              nullableMode: { type: 'string', nullable: true, default: 'Slow' },
              workers: {
                type: 'array',
                items: { type: 'object', default: { weight: 7 }, properties: { weight: { type: 'integer', default: 1 } } },
              },
              labels: { type: 'object', additionalProperties: { type: 'string', default: 'x' } },
              limits: { type: 'object', default: { cpu: 1 }, properties: { cpu: { type: 'integer' } } },
            },
          },
        }),
        schema('v2', { template: { type: 'object', properties: { mode: { type: 'string', default: 'Other' } } } }),
      ],
    },
  };
  const d = crdDefaults(crd, 'v1');
  const state = (template: JsonObject) => targetState({ spec: { template } }, ['spec.template']);

  test('reads properties (nested, and inside items), for the served version only', () => {
    expect(d?.properties?.spec?.properties?.template?.properties?.mode).toEqual({ default: 'Fast' });
    expect(crdDefaults(crd, 'v2')?.properties?.spec?.properties?.template?.properties?.mode).toEqual({ default: 'Other' });
    expect(crdDefaults(crd, 'v3')).toBeUndefined();
    expect(crdDefaults({ spec: { versions: [schema('v1', { a: { type: 'string' } })] } }, 'v1')).toBeUndefined();
    expect(crdDefaults('nonsense', 'v1')).toBeUndefined();
  });

  test('a default added after revisions were made: the older revision equals the live object', () => {
    const older = state({ workers: [{ name: 'w' }] });
    const live = state({ mode: 'Fast', limits: { cpu: 1 }, workers: [{ name: 'w', weight: 1 }] });
    expect(semanticallyEqual(older, live, d)).toBe(true);
    expect(semanticallyEqual(older, live)).toBe(false);
    expect(semanticallyEqual(older, state({ mode: 'Slow', workers: [{ name: 'w' }] }), d)).toBe(false);
    expect(semanticallyEqual(older, state({ workers: [{ name: 'w', weight: 2 }] }), d)).toBe(false);
    expect(semanticallyEqual(older, state({ limits: { cpu: 2 }, workers: [{ name: 'w' }] }), d)).toBe(false);
  });

  test('what the apiserver never fills in stays a difference: a nullable default, an item default, map values', () => {
    expect(semanticallyEqual(state({ nullableMode: 'Slow' }), state({}), d)).toBe(false);
    expect(semanticallyEqual(state({ workers: [{ weight: 7 }] }), state({ workers: [null] }), d)).toBe(false);
    expect(semanticallyEqual(state({ labels: { a: 'x' } }), state({ labels: {} }), d)).toBe(false);
  });
});

describe('the table itself', () => {
  test('every listed default of a pod template is normalised away from a template holding only defaults', () => {
    // A template that holds nothing but defaults (and the fields that carry them) is "nothing".
    const onlyDefaults: JsonObject = {
      spec: {
        dnsPolicy: 'ClusterFirst',
        restartPolicy: 'Always',
        securityContext: {},
        terminationGracePeriodSeconds: 30,
        schedulerName: 'default-scheduler',
        enableServiceLinks: true,
        containers: [
          {
            terminationMessagePath: '/dev/termination-log',
            terminationMessagePolicy: 'File',
            securityContext: { procMount: 'Default' },
            livenessProbe: {
              timeoutSeconds: 1,
              periodSeconds: 10,
              successThreshold: 1,
              failureThreshold: 3,
              httpGet: { path: '/', scheme: 'HTTP' },
              grpc: { service: '' },
            },
          },
        ],
        volumes: [
          { projected: { defaultMode: 420, sources: [{ serviceAccountToken: { expirationSeconds: 3600 } }] } },
          { ephemeral: { volumeClaimTemplate: { spec: { volumeMode: 'Filesystem' } } } },
        ],
      },
    };
    // List items are never dropped (their position is meaning), so what is left is the lists' shape.
    expect(normalize(onlyDefaults, POD_TEMPLATE_DEFAULTS)).toEqual({
      spec: { containers: [null], volumes: [{ projected: { sources: [null] } }, null] },
    });
  });
});

test('field names that are Object.prototype members are plain fields', () => {
  const d = crdDefaults(
    JSON.parse(
      '{"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"properties": {"__proto__": {"default": 1}, "a": {"default": 2}}}}}]}}',
    ),
    'v1',
  );
  expect(Object.keys(d?.properties ?? {})).toEqual(['__proto__', 'a']);
  // (`constructor: {}` stays: an empty map is a value.)
  const parsed = JSON.parse('{"__proto__": 1, "a": 2, "toString": 3, "constructor": {}}') as Json;
  expect(normalize(parsed, d)).toEqual(JSON.parse('{"toString": 3, "constructor": {}}'));
  expect(normalize({ toString: 'x', constructor: 'y' }, STS)).toEqual({ constructor: 'y', toString: 'x' });
});
