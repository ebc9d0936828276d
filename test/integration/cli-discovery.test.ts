// `outrigger history` and `rollback` on a cluster with an aggregated API whose backend is down (its group version
// answers 503, as a stopped metrics-server's does), on the real apiserver: the search for a `<kind>/<name>` skips
// that group version as kubectl does, a read goes on with a warning naming it, and a write to a custom resource is
// refused until the resource is named with its group (docs/reference/cli.md#resolving-kindname).
import { historyCommand, rollbackCommand } from '../../cli/history.ts';
import { getResourceList, gvr, isKubeError, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { adminClient, createNamespace, eventually } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { apiServices, downApiGroup } from '../testbed/down-api.ts';

const GROUP = 'clidiscovery.outrigger.test';
const turbines = gvr(GROUP, 'v1', 'turbines');

let ns: string;
let broken: string;

beforeAll(async () => {
  const admin = adminClient();
  ns = await createNamespace('clidisc');
  await applyManifests(admin, openCrd(GROUP, 'Turbine', 'turbines'));
  await eventually(async () => (await getResourceList(admin, GROUP, 'v1').catch(() => undefined))?.resources.length ?? undefined);
  await admin.create(turbines, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Turbine',
    metadata: { name: 't1', namespace: ns },
    spec: {},
  } as KubeObject);
  broken = await downApiGroup('down', 'clidiscovery.test');
  const answer = await getResourceList(admin, broken, 'v1').catch((err: unknown) => err);
  expect(isKubeError(answer, 'Transient')).toBe(true);
}, 60_000);

afterAll(async () => {
  await adminClient()
    .delete(apiServices, { name: `v1.${broken}` })
    .catch(() => undefined);
});

test('history of a custom resource is shown, with a warning naming the group version that did not answer', async () => {
  const warnings: string[] = [];
  const out = await historyCommand(adminClient(), 'turbine/t1', ns, { warn: (m) => warnings.push(m) });
  expect(out).toMatch(/^turbine\/t1: no revisions/);
  expect(warnings).toEqual([expect.stringContaining(`${broken}/v1 did not answer discovery`)]);
});

test('a rollback of a custom resource found while a group version did not answer is refused, naming the resource to use; so named, no other group is read', async () => {
  await expect(rollbackCommand(adminClient(), 'turbine/t1', ns, { dryRun: true })).rejects.toThrow(
    `may serve another resource of that name; name it as turbines.${GROUP}/t1`,
  );
  const named = await rollbackCommand(adminClient(), `turbines.${GROUP}/t1`, ns, { dryRun: true }).catch((e: unknown) => e);
  expect(String(named)).not.toContain('did not answer');
  expect(String(named)).toContain('turbine/t1');
});

test('a kind no group serves: the error names the group versions it could not read', async () => {
  await expect(historyCommand(adminClient(), 'nosuchkind/x', ns)).rejects.toThrow(
    new RegExp(`the cluster serves no resource called "nosuchkind"; .*${broken.replaceAll('.', '\\.')}/v1 did not answer discovery`),
  );
});
