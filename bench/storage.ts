// bench/storage: storage version migration against the local kube-apiserver and DynamoDB Local. Prints its
// figures as the last line, in JSON.
//   - one poll round over N resources (CRDs made for the bench) with 3 reporters polling at once, as the
//     schedule invokes them: wall time, apiserver requests and DynamoDB calls, on first sight and in steady
//     state (persisted hashes already narrowed: what every later poll costs);
//   - the migrator's rate, in objects rewritten per second, over one resource with M objects.
//   npm run bench:storage [-- --resources 1000 --objects 2000]
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pLimit from 'p-limit';
import type { StorageContext } from '../functions/storage/context.ts';
import { runMigration } from '../functions/storage/migrator.ts';
import { pollReporter, type PollResult } from '../functions/storage/poll.ts';
import { startTestbed } from '../local/testbed.ts';
import { Resources, connect, getResourceList, gvr, type KubeClient, type KubeObject } from '../shared/kube/index.ts';
import { openState } from '../shared/state/index.ts';
import { DEFAULT_PERIOD_MS } from '../shared/storage/index.ts';
import { createCrds, crd, succeedAll } from './storage-fixtures.ts';

const { values } = parseArgs({ options: { resources: { type: 'string', default: '1000' }, objects: { type: 'string', default: '2000' } } });
const RESOURCES = Number(values.resources);
const OBJECTS = Number(values.objects);
const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);
const round = (x: number, d = 1) => Number(x.toFixed(d));

const bed = await startTestbed({ withCluster: true, log });
try {
  const admin = connect({ kind: 'kubeconfig', path: bed.cluster!.kubeconfigs.admin });
  const outrigger = () => connect({ kind: 'kubeconfig', path: bed.cluster!.kubeconfigs.outrigger });
  const state = openState({ tableName: bed.tableName, endpoint: bed.dynamodb.endpoint });
  const dynamo: Record<string, number> = {};
  state.client.middlewareStack.add((next, context) => async (args) => {
    dynamo[context.commandName ?? '?'] = (dynamo[context.commandName ?? '?'] ?? 0) + 1;
    return next(args);
  });

  const run = randomUUID().slice(0, 6);
  const groups = await createCrds(admin, RESOURCES, run, log);
  const limit = pLimit(16);

  const reporters = ['apiserver-1', 'apiserver-2', 'apiserver-3'];
  const ctx: StorageContext = {
    cluster: `bench-${run}`,
    kube: outrigger(),
    state,
    holder: `bench-${run}`,
    reporters,
    mode: 'outrigger',
    periodMs: DEFAULT_PERIOD_MS,
    now: () => new Date(),
  };
  const clients = reporters.map((id) => ({ id, client: outrigger() }));
  const round3 = async () => {
    for (const c of [ctx.kube, ...clients.map((c) => c.client)]) c.stats.reset();
    for (const k of Object.keys(dynamo)) delete dynamo[k];
    const start = performance.now();
    const perPollMs: number[] = [];
    const results: PollResult[] = await Promise.all(
      clients.map(async (r) => {
        const t = performance.now();
        const out = await pollReporter(ctx, r, { groups });
        perPollMs.push(Math.round(performance.now() - t));
        return out;
      }),
    );
    const ms = performance.now() - start;
    const requests = [ctx.kube, ...clients.map((c) => c.client)].reduce((n, c: KubeClient) => n + c.stats.total, 0);
    const writes = [ctx.kube, ...clients.map((c) => c.client)].reduce(
      (n, c) =>
        n +
        Object.entries(c.stats.byVerb)
          .filter(([v]) => !['get', 'list'].includes(v))
          .reduce((a, [, x]) => a + x, 0),
      0,
    );
    const dynamoCalls = Object.values(dynamo).reduce((a, b) => a + b, 0);
    return {
      ms: Math.round(ms),
      maxPollMs: Math.max(...perPollMs),
      conflicts: results.reduce((n, r) => n + r.conflicts, 0),
      requests,
      writes,
      dynamoCalls,
      dynamo: { ...dynamo },
      resources: results[0]?.resources ?? 0,
      created: results.reduce((n, r) => n + r.created, 0),
      migrationsCreated: results.reduce((n, r) => n + (r.leader?.created.length ?? 0), 0),
    };
  };
  const first = await round3();
  log(`first sight: ${JSON.stringify(first)}`);
  await succeedAll(admin, (s) => groups.includes(s.spec.resource.group));
  const steady = await round3();
  log(`steady: ${JSON.stringify(steady)}`);
  // Reporters whose schedules do not coincide: one poll alone, the others' heartbeats already in.
  for (const c of clients) c.client.stats.reset();
  ctx.kube.stats.reset();
  const a0 = performance.now();
  const cpu0 = process.cpuUsage();
  const apiserverCpu0 = apiserverCpuMs();
  const alone = await pollReporter(ctx, clients[0]!, { groups });
  const aloneMs = Math.round(performance.now() - a0);
  const aloneApiserverCpuMs = apiserverCpuMs() - apiserverCpu0;
  const cpu = process.cpuUsage(cpu0);
  const aloneCpuMs = Math.round((cpu.user + cpu.system) / 1000);
  const aloneRequests = [ctx.kube, clients[0]!.client].reduce((n, c) => n + c.stats.total, 0);
  log(
    `one poll alone: ${aloneMs} ms (reporting ${alone.reportMs} ms, leader step ${alone.leaderMs} ms; CPU: ${aloneCpuMs} ms in this process, ${aloneApiserverCpuMs} ms in the apiserver and etcd), ${aloneRequests} requests, ${alone.heartbeats} heartbeats`,
  );

  // The migrator's rate: one resource with OBJECTS objects, rewritten by the migrator identity.
  const mgroup = `m-${run}.bench.test`;
  await admin.create(Resources.customResourceDefinitions, crd(mgroup, 'Item', 'items'));
  const items = gvr(mgroup, 'v1', 'items');
  for (;;) {
    if ((await getResourceList(admin, mgroup, 'v1').catch(() => undefined))?.resources.some((r) => r.name === 'items')) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  await admin.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: `bench-${run}` } });
  await Promise.all(
    Array.from({ length: OBJECTS }, (_, i) =>
      limit(() =>
        admin.create(items, {
          apiVersion: `${mgroup}/v1`,
          kind: 'Item',
          metadata: { name: `i${i}`, namespace: `bench-${run}` },
          spec: { i },
        } as KubeObject),
      ),
    ),
  );
  const mctx = { ...ctx, mode: 'outrigger' as const };
  const polled = await pollReporter({ ...mctx, reporters: ['apiserver-1'] }, clients[0]!, { groups: [mgroup] });
  const migration = polled.leader!.created[0]!;
  const migrator = connect({ kind: 'kubeconfig', path: bed.cluster!.kubeconfigs.migrator });
  const m0 = performance.now();
  const migrated = await runMigration({ cluster: ctx.cluster, kube: migrator, state, holder: 'bench', now: () => new Date() }, migration);
  const mSeconds = (performance.now() - m0) / 1000;
  log(`migration: ${JSON.stringify(migrated)} in ${round(mSeconds, 2)} s`);

  console.log(
    JSON.stringify({
      bench: 'storage',
      resources: steady.resources,
      reporters: reporters.length,
      firstPoll: {
        ms: first.ms,
        apiserverRequests: first.requests,
        apiserverWrites: first.writes,
        dynamodbCalls: first.dynamoCalls,
        statesCreated: first.created,
        migrationsCreated: first.migrationsCreated,
      },
      steadyPoll: {
        ms: steady.ms,
        maxPollMs: steady.maxPollMs,
        conflicts: steady.conflicts,
        apiserverRequests: steady.requests,
        apiserverWrites: steady.writes,
        dynamodbCalls: steady.dynamoCalls,
        dynamodb: steady.dynamo,
      },
      steadyPollAlone: {
        ms: aloneMs,
        reportMs: alone.reportMs,
        leaderMs: alone.leaderMs,
        clientCpuMs: aloneCpuMs,
        apiserverCpuMs: aloneApiserverCpuMs,
        apiserverRequests: aloneRequests,
      },
      migration: {
        objects: OBJECTS,
        outcome: migrated.outcome,
        rewritten: migrated.rewritten,
        seconds: round(mSeconds, 2),
        objectsPerSecond: Math.round(migrated.rewritten / mSeconds),
      },
    }),
  );
} finally {
  await bed.stop();
}

/**
 * CPU time (user and system) the test cluster's process has used so far: the apiserver and its embedded etcd.
 * On a machine this small a poll is bound by it, so the bench reports it beside the wall time.
 */
function apiserverCpuMs(): number {
  const fields = readFileSync(`/proc/${bed.cluster!.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // utime and stime, fields 14 and 15 of proc(5), in clock ticks (100 per second on Linux).
  return (Number(fields[11]) + Number(fields[12])) * 10;
}
