// `outrigger migrate`: what a Metacontroller CompositeController or DecoratorController needs beside it to run
// under Outrigger, printed as YAML for kubectl apply (docs/reference/cli.md#outrigger-migrate). The derivation is
// shared/migrate.ts; this reads the files and prints. No cluster is read or written.
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { dump, loadAll } from 'js-yaml';
import type { KubeObject } from '../shared/kube/index.ts';
import { DEFAULT_MIGRATE_OPTIONS, migration } from '../shared/migrate.ts';

export const migrateUsage = `usage: outrigger migrate -f FILE [-f FILE]... [--namespace NS] [--related APIVERSION/RESOURCE]...
                        [--forwarder NS/NAME]

Reads Metacontroller CompositeControllers and DecoratorControllers (YAML or JSON, several documents a file; other
documents are skipped; - reads stdin) and prints, as YAML, what Outrigger needs beside them: each definition that
names no spec.serviceAccount again, naming one made for it; each ServiceAccount with its consent annotation; the
grant that lets outrigger:controllers impersonate it; its ClusterRole over the parent, child and related kinds
for the verbs a pass uses (and ControllerRevisions for a rolling update, services/proxy where a hook is a
Service); list and watch on those kinds for the forwarder and the router. Apply it after the definitions:
  kubectl apply -f controller.yaml && outrigger migrate -f controller.yaml | kubectl apply -f -

  -f, --filename FILE  a file of definitions (repeatable)
  --namespace NS       the namespace of a ServiceAccount made for a definition (default ${DEFAULT_MIGRATE_OPTIONS.namespace})
  --related KIND       a kind a customize hook relates, as apps/v1/deployments or v1/secrets (repeatable)
  --forwarder NS/NAME  the forwarder's ServiceAccount (default ${DEFAULT_MIGRATE_OPTIONS.forwarder.namespace}/${DEFAULT_MIGRATE_OPTIONS.forwarder.name})
`;

/** `apps/v1/deployments` or `v1/secrets`: the resource is the last segment. */
function relatedKind(value: string): { apiVersion: string; resource: string } {
  const slash = value.lastIndexOf('/');
  if (slash <= 0 || slash === value.length - 1)
    throw new Error(`--related takes APIVERSION/RESOURCE, as apps/v1/deployments; got ${JSON.stringify(value)}`);
  return { apiVersion: value.slice(0, slash), resource: value.slice(slash + 1) };
}

async function stdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function documents(file: string): Promise<unknown[]> {
  const text = file === '-' ? await stdin() : await readFile(file, 'utf8');
  try {
    return loadAll(text);
  } catch (err) {
    throw new Error(`${file}: is not YAML or JSON: ${(err as Error).message.split('\n')[0]}`, { cause: err });
  }
}

export async function migrateCommand(argv: string[]): Promise<string> {
  const { values } = parseArgs({
    args: argv,
    options: {
      filename: { type: 'string', short: 'f', multiple: true },
      namespace: { type: 'string', short: 'n' },
      related: { type: 'string', multiple: true },
      forwarder: { type: 'string' },
    },
    strict: true,
  });
  if (!values.filename?.length) throw new Error(`-f FILE is required\n${migrateUsage}`);
  const [fns, fname, ...extra] = (values.forwarder ?? '').split('/');
  if (values.forwarder !== undefined && (!fns || !fname || extra.length))
    throw new Error(`--forwarder takes NS/NAME, got ${JSON.stringify(values.forwarder)}`);
  const docs = (await Promise.all(values.filename.map(documents))).flat();
  const objects = migration(docs, {
    ...(values.namespace ? { namespace: values.namespace } : {}),
    ...(fns && fname ? { forwarder: { namespace: fns, name: fname } } : {}),
    related: (values.related ?? []).map(relatedKind),
  });
  // RBAC rules read best a line each; a definition is printed as it was written, in blocks.
  const definition = (o: KubeObject) => o.apiVersion?.startsWith('metacontroller.k8s.io/') === true;
  return objects.map((o) => dump(o, { lineWidth: 120, noRefs: true, flowLevel: definition(o) ? -1 : 3 })).join('---\n');
}
